//! `loader-sim doctor`: coverage per library and device, the reason and the hints, on
//! corpus files, a real ROCm library (librocrand), a directory tree and a wheel built here
//! from them, and a fake KFD topology. Coverage counts are checked against `loader-sim
//! select` (which decompresses whole units and verifies their hash), and every runtime
//! hint (override, xnack) is checked by running selection again on the device the hint
//! makes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use offload_image::arch::amdgpu::{Feature, FeatureState, Processor};
use offload_image::Device;
use serde_json::Value;

use crate::common;
use common::{corpus, external_lib, json_lines, loader_sim, TempDir};

fn doctor<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let mut all: Vec<std::ffi::OsString> = vec!["doctor".into(), "--json".into()];
    all.extend(args.iter().map(|a| a.as_ref().to_os_string()));
    loader_sim(&all)
}

/// The (library, device) records and the summary record.
fn records(out: &Output) -> (Vec<Value>, Value) {
    let mut recs = json_lines(&out.stdout);
    let summary = recs.pop().expect("a summary record");
    assert_eq!(summary["summary"], true, "the summary comes last");
    (recs, summary)
}

/// The record of `file` (path ending) and zip `member` for `device`.
fn find<'a>(recs: &'a [Value], file: &str, member: Option<&str>, device: &str) -> &'a Value {
    recs.iter()
        .find(|r| {
            r["file"].as_str().unwrap().ends_with(file)
                && r["member"].as_str() == member
                && r["device"] == device
        })
        .unwrap_or_else(|| panic!("no record for {file} {member:?} {device}"))
}

/// The hints of a record as (kind, env, value, offload_arch, safe) strings.
fn hints(r: &Value) -> Vec<(String, String, String, String, bool)> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    r["hints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                s(&h["kind"]),
                s(&h["env"]),
                s(&h["value"]),
                s(&h["offload_arch"]),
                h["safe"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn h(
    kind: &str,
    env: &str,
    value: &str,
    arch: &str,
    safe: bool,
) -> (String, String, String, String, bool) {
    (kind.into(), env.into(), value.into(), arch.into(), safe)
}

/// Two units back to back: hip_6arch.bundle then hip_generic.bundle.
fn two_unit_file(dir: &TempDir) -> PathBuf {
    let mut data = std::fs::read(corpus("bundles/hip_6arch.bundle")).unwrap();
    data.extend(std::fs::read(corpus("bundles/hip_generic.bundle")).unwrap());
    dir.write("two_units.bundle", &data)
}

/// Per unit of `file`: did `loader-sim select` choose an image for `target`?
fn select_units(file: &Path, target: &str) -> Vec<bool> {
    let out = loader_sim(&[
        "select".as_ref(),
        file.as_os_str(),
        "--target".as_ref(),
        target.as_ref(),
        "--json".as_ref(),
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "select {} --target {target}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out.stdout)
        .iter()
        .map(|r| !r["selected"].is_null())
        .collect()
}

/// The device string ROCr would report under `HSA_OVERRIDE_GFX_VERSION=version` on
/// `device`: the processor of that ISA version with the device's own feature modes where
/// that processor has them.
fn overridden(device: &str, version: &str) -> String {
    let v: Vec<u8> = version.split('.').map(|x| x.parse().unwrap()).collect();
    let p = Processor::by_isa_version(v[0], v[1], v[2]).expect("a processor of that ISA version");
    let Device::Amdgpu(t) = Device::parse(device).unwrap() else {
        panic!("override on a CUDA device")
    };
    let mut s = p.name.to_string();
    for f in Feature::ALL {
        let state = t.state(f);
        if p.support(f).is_selectable() && matches!(state, FeatureState::On | FeatureState::Off) {
            s += &format!(":{f}{}", state.sign());
        }
    }
    s
}

/// `device` with the xnack mode `HSA_XNACK=value` sets.
fn with_xnack(device: &str, value: &str) -> String {
    let d = Device::parse(device).unwrap().with_xnack(value == "1");
    d.to_string()
}

/// Checks every runtime hint of every record of a plain file (not a zip member) by
/// selection: under the hint's device, every unit of the library selects an image. Also
/// checks that an override hint stays in the device's generic family and is unsafe.
/// Returns the number of hints checked.
fn check_hints(recs: &[Value]) -> usize {
    let mut checked = 0;
    for r in recs.iter().filter(|r| r["member"].is_null()) {
        let file = Path::new(r["file"].as_str().unwrap());
        let device = r["device"].as_str().unwrap();
        for (kind, env, value, arch, safe) in hints(r) {
            let target = match kind.as_str() {
                "override" => {
                    assert_eq!(env, "HSA_OVERRIDE_GFX_VERSION");
                    assert!(!safe, "an override is never safe: {r}");
                    let t = overridden(device, &value);
                    let Device::Amdgpu(d) = Device::parse(device).unwrap() else {
                        unreachable!()
                    };
                    let o = Processor::by_name(t.split(':').next().unwrap()).unwrap();
                    assert!(
                        d.processor.family.is_some() && o.family == d.processor.family,
                        "{device}: override {value} ({}) leaves the generic family",
                        o.name
                    );
                    t
                }
                "xnack" => {
                    assert_eq!(env, "HSA_XNACK");
                    assert!(safe);
                    with_xnack(device, &value)
                }
                "rebuild" => {
                    assert!(safe && env.is_empty() && !arch.is_empty());
                    continue;
                }
                other => panic!("unknown hint kind {other}"),
            };
            let units = select_units(file, &target);
            assert_eq!(units.len() as u64, r["units"].as_u64().unwrap(), "{r}");
            assert!(
                units.iter().all(|s| *s),
                "{}: hint {kind} {value} for {device} (= {target}) leaves units without an image",
                file.display()
            );
            checked += 1;
        }
    }
    checked
}

#[test]
fn corpus_covered_generic_xnack_and_not_at_all() {
    let six = corpus("bundles/hip_6arch.bundle");
    let generic = corpus("bundles/hip_generic.bundle");
    let nv = corpus("bundles/omp_amd_nv.bundle");
    let out = doctor(&[
        six.as_os_str(),
        generic.as_os_str(),
        nv.as_os_str(),
        "--target".as_ref(),
        "gfx1100".as_ref(),
        "--target".as_ref(),
        "gfx1031".as_ref(),
        "--target".as_ref(),
        "gfx942:sramecc+:xnack+".as_ref(),
        "--target".as_ref(),
        "gfx803".as_ref(),
        "--target".as_ref(),
        "gfx950".as_ref(),
        "--target".as_ref(),
        "gfx950:sramecc+:xnack-".as_ref(),
        "--target".as_ref(),
        "sm_80".as_ref(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "not every library covers every device"
    );
    let (recs, summary) = records(&out);
    assert_eq!(recs.len(), 3 * 7);
    assert_eq!(summary["files_scanned"], 3);
    assert_eq!(summary["libraries"], 3);
    assert_eq!(summary["devices"], 7);
    let ok = recs.iter().filter(|r| r["status"] == "ok").count();
    assert_eq!(summary["ok"], ok);
    assert_eq!(
        summary["none"],
        recs.iter().filter(|r| r["status"] == "none").count()
    );

    // Covered natively.
    let r = find(&recs, "hip_6arch.bundle", None, "gfx1100");
    assert_eq!(
        (
            r["status"].as_str(),
            r["units"].as_u64(),
            r["units_covered"].as_u64()
        ),
        (Some("ok"), Some(1), Some(1))
    );
    assert!(r["reason"].is_null() && hints(r).is_empty());

    // Not covered; another member of its generic family is: rebuild or (unsafe) override.
    let r = find(&recs, "hip_6arch.bundle", None, "gfx1031");
    assert_eq!(r["status"], "none");
    assert_eq!(r["units_covered"], 0);
    // The reason names the closest image (gfx1030 code, the same ISA major and minor
    // version), not the first (gfx906).
    assert_eq!(
        r["reason"],
        "no code object for gfx1031 in 1 of 1 units; closest: gfx1030 code does not run on gfx1031"
    );
    assert_eq!(
        hints(r),
        vec![
            h("rebuild", "", "", "gfx1031", true),
            h("rebuild", "", "", "gfx10-3-generic", true),
            h("override", "HSA_OVERRIDE_GFX_VERSION", "10.3.0", "", false),
        ]
    );
    // Covered only through the generic family.
    let r = find(&recs, "hip_generic.bundle", None, "gfx1031");
    assert_eq!(r["status"], "ok");
    assert_eq!(select_units(&generic, "gfx1031"), vec![true]);

    // Only the xnack mode stands in the way: the reason says so, HSA_XNACK=0 comes first.
    let r = find(&recs, "hip_6arch.bundle", None, "gfx942:sramecc+:xnack+");
    assert_eq!(r["status"], "none");
    assert_eq!(
        r["reason"],
        "built for xnack-, device has xnack+ in 1 of 1 units"
    );
    assert_eq!(hints(r)[0], h("xnack", "HSA_XNACK", "0", "", true));

    // No generic family: only a rebuild helps.
    let r = find(&recs, "hip_6arch.bundle", None, "gfx803");
    assert_eq!(hints(r), vec![h("rebuild", "", "", "gfx803", true)]);

    // gfx942 code is sramecc+:xnack-: an override to 9.4.2 runs it on a gfx950 in those
    // modes, not on one whose modes are unknown (selection itself says so).
    let r = find(&recs, "hip_6arch.bundle", None, "gfx950:sramecc+:xnack-");
    assert!(hints(r).contains(&h(
        "override",
        "HSA_OVERRIDE_GFX_VERSION",
        "9.4.2",
        "",
        false
    )));
    let r = find(&recs, "hip_6arch.bundle", None, "gfx950");
    assert!(hints(r).iter().all(|h| h.0 != "override"), "{r}");
    assert_eq!(select_units(&six, "gfx942"), vec![false]);

    // CUDA devices take the generic selection path.
    assert_eq!(
        find(&recs, "omp_amd_nv.bundle", None, "sm_80")["status"],
        "ok"
    );
    let r = find(&recs, "hip_6arch.bundle", None, "sm_80");
    assert_eq!(
        r["reason"],
        "built for amdgcn-amd-amdhsa, the device is a CUDA GPU (nvptx64-nvidia-cuda) in 1 of 1 units"
    );
    assert_eq!(hints(r), vec![h("rebuild", "", "", "sm_80", true)]);

    assert!(check_hints(&recs) >= 3);
}

#[test]
fn partial_coverage_and_override_checked_on_every_unit() {
    let dir = TempDir::new("doctor-partial");
    let f = two_unit_file(&dir);
    let out = doctor(&[
        f.as_os_str(),
        "--target".as_ref(),
        "gfx1031".as_ref(),
        "--target".as_ref(),
        "gfx1101".as_ref(),
        "--target".as_ref(),
        "gfx90a:sramecc+:xnack-".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let (recs, summary) = records(&out);
    // One unit has code for each of them and the other none: that one is code for other
    // GPUs (COMPATIBILITY.md §12), not a gap.
    assert_eq!(summary["partial"], 0);
    for device in ["gfx1031", "gfx1101"] {
        let r = find(&recs, "two_units.bundle", None, device);
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["set_aside"]["other_gpus"], 1, "{r}");
        assert_eq!(
            (r["units"].as_u64(), r["units_covered"].as_u64()),
            (Some(2), Some(1))
        );
        // The counts are select's.
        assert_eq!(select_units(&f, device), vec![false, true]);
    }
    // A library that loads needs no hint.
    let r = find(&recs, "two_units.bundle", None, "gfx1101");
    assert!(hints(r).is_empty(), "{r}");
    assert_eq!(
        find(&recs, "two_units.bundle", None, "gfx90a:sramecc+:xnack-")["status"],
        "ok"
    );
    // Libraries that load get no hints to check.
    assert_eq!(check_hints(&recs), 0);
}

/// A runtime hint is offered only when it covers every unit, also those the device covers
/// already: HSA_XNACK=1 would load the xnack+ unit of a library and lose its xnack- unit;
/// HSA_OVERRIDE_GFX_VERSION=10.3.0 would load the gfx1030 unit and not the gfx1100 one.
#[test]
fn runtime_hints_must_cover_every_unit() {
    let dir = TempDir::new("doctor-every-unit");
    let units = |name: &str, parts: &[(&str, &str)]| {
        let mut data = Vec::new();
        for (id, co) in parts {
            let co = std::fs::read(corpus(co)).unwrap();
            data.extend(bundle(&[
                ("host-x86_64-unknown-linux-gnu-", &[]),
                (id, &co),
            ]));
        }
        dir.write(name, &data)
    };
    let xnack = units(
        "xnack.bundle",
        &[
            (
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
                "devobj/saxpy.gfx90a_xnack-.co",
            ),
            (
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
                "devobj/saxpy.gfx90a_xnack+.co",
            ),
        ],
    );
    let mixed = units(
        "mixed.bundle",
        &[
            (
                "hipv4-amdgcn-amd-amdhsa--gfx1030",
                "devobj/saxpy.gfx1030.co",
            ),
            (
                "hipv4-amdgcn-amd-amdhsa--gfx1100",
                "devobj/saxpy.gfx1100.co",
            ),
        ],
    );
    let out = doctor(&[
        xnack.as_os_str(),
        mixed.as_os_str(),
        "--target".as_ref(),
        "gfx90a:sramecc+:xnack-".as_ref(),
        "--target".as_ref(),
        "gfx1031".as_ref(),
    ]);
    let (recs, _) = records(&out);
    let r = find(&recs, "xnack.bundle", None, "gfx90a:sramecc+:xnack-");
    assert_eq!(
        (r["status"].as_str(), r["units_covered"].as_u64()),
        (Some("partial"), Some(1))
    );
    assert_eq!(
        r["reason"],
        "built for xnack+, device has xnack- in 1 of 2 units"
    );
    assert_eq!(hints(r), vec![h("rebuild", "", "", "gfx90a", true)]);
    assert_eq!(
        select_units(&xnack, "gfx90a:sramecc+:xnack-"),
        vec![true, false]
    );
    assert_eq!(
        select_units(&xnack, "gfx90a:sramecc+:xnack+"),
        vec![false, true]
    );

    let r = find(&recs, "mixed.bundle", None, "gfx1031");
    assert_eq!(r["status"], "none");
    assert!(hints(r).iter().all(|h| h.0 != "override"), "{r}");
    assert_eq!(select_units(&mixed, "gfx1030"), vec![true, false]);
}

/// A binary bundle (`FORMATS.md` §2): magic, count, descriptors, payloads in order.
fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    out.extend((entries.len() as u64).to_le_bytes());
    let mut at = 32
        + entries
            .iter()
            .map(|(id, _)| 24 + id.len() as u64)
            .sum::<u64>();
    for (id, data) in entries {
        out.extend(at.to_le_bytes());
        out.extend((data.len() as u64).to_le_bytes());
        out.extend((id.len() as u64).to_le_bytes());
        out.extend(id.as_bytes());
        at += data.len() as u64;
    }
    for (_, data) in entries {
        out.extend(*data);
    }
    out
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs librocrand.so.1 (scripts/fetch-rocm-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn counts_agree_with_select_on_the_corpus_and_librocrand() {
    if !common::external("librocrand.so.1 (scripts/fetch-rocm-libs.sh)") {
        return;
    }
    let rocrand = external_lib("librocrand.so.1");
    let dirs = [
        "bundles",
        "compressed",
        "devobj",
        "driver",
        "packager",
        "nvptx",
        "text",
    ];
    let mut args: Vec<std::ffi::OsString> =
        dirs.iter().map(|d| corpus(d).into_os_string()).collect();
    args.push(rocrand.clone().into_os_string());
    // NVIDIA fatbinaries (bare, in sections, in an archive member).
    for f in ["libk.a", "prog", "mixed.balance.fatbin", "ptx_only.fatbin"] {
        args.push(corpus("../nvfatbin/files").join(f).into_os_string());
    }
    let devices = [
        "gfx90a:sramecc+:xnack-",
        "gfx1030",
        "gfx1031",
        "gfx1100",
        "gfx942:sramecc+:xnack+",
        "sm_80",
    ];
    for d in devices {
        args.push("--target".into());
        args.push(d.into());
    }
    let out = doctor(&args);
    let (recs, summary) = records(&out);
    // A symbolic link given on the command line is followed (librocrand.so.1 is one).
    assert!(recs
        .iter()
        .any(|r| r["file"].as_str().unwrap().ends_with("librocrand.so.1")));
    assert!(summary["libraries"].as_u64().unwrap() >= 40, "{summary}");
    let mut compared = 0;
    for r in &recs {
        let file = Path::new(r["file"].as_str().unwrap());
        let device = r["device"].as_str().unwrap();
        assert_ne!(r["status"], "damaged", "{r}");
        let per_unit = select_units(file, device);
        // select reports every unit, doctor those with device code (all of them here).
        assert_eq!(per_unit.len() as u64, r["units"].as_u64().unwrap(), "{r}");
        let covered = per_unit.iter().filter(|s| **s).count() as u64;
        assert_eq!(covered, r["units_covered"].as_u64().unwrap(), "{r}");
        // Units that load, units that count against the library and units set aside
        // (COMPATIBILITY.md §12) add up; a library some of whose units load is "ok" exactly
        // when nothing counts against it.
        let failing: u64 = gaps_of(r).iter().map(|(_, n)| n).sum();
        let aside = r["set_aside"]["other_gpus"].as_u64().unwrap()
            + r["set_aside"]["no_kernels"].as_u64().unwrap();
        assert_eq!(covered + failing + aside, per_unit.len() as u64, "{r}");
        let status = match (covered, failing) {
            (0, 0) => "no-kernels",
            (0, _) => "none",
            (_, 0) => "ok",
            _ => "partial",
        };
        assert_eq!(r["status"], status, "{r}");
        assert_eq!(r["reason"].is_null(), status == "ok", "{r}");
        compared += 1;
    }
    assert!(compared >= 40 * devices.len());
    // librocrand (ROCm 5.3, Debian) is built for gfx803..gfx1102 natively, no generic code:
    // on a gfx1031 the override to 10.3.0 is offered and runs.
    let r = find(&recs, "librocrand.so.1", None, "gfx1031");
    assert_eq!(r["status"], "none");
    assert!(hints(r).contains(&h(
        "override",
        "HSA_OVERRIDE_GFX_VERSION",
        "10.3.0",
        "",
        false
    )));
    assert!(check_hints(&recs) > 10);
    // A library with an sm_80 cubin in one of its two objects only: the other object is
    // code for other GPUs (sm_75, sm_86 and compute_86), set aside (COMPATIBILITY.md §12).
    let r = find(&recs, "libk.a", None, "sm_80");
    assert_eq!(
        (r["status"].as_str(), r["units_covered"].as_u64()),
        (Some("ok"), Some(1))
    );
    assert_eq!(r["set_aside"]["other_gpus"], 1, "{r}");
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs librocrand.so.1 (scripts/fetch-rocm-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn tree_and_wheel_without_unpacking() {
    if !common::external("librocrand.so.1 (scripts/fetch-rocm-libs.sh)") {
        return;
    }
    let dir = TempDir::new("doctor-tree");
    let root = dir.path("tree");
    let lib = root.join("usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::create_dir_all(root.join("share/kernels")).unwrap();
    let rocrand = std::fs::read(external_lib("librocrand.so.1")).unwrap();
    std::fs::write(lib.join("librocrand.so.1.1"), &rocrand).unwrap();
    std::fs::copy(
        corpus("bundles/hip_6arch.bundle"),
        root.join("share/kernels/kernels.hsaco"),
    )
    .unwrap();
    std::fs::copy(
        corpus("devobj/saxpy.gfx1030.co"),
        root.join("share/kernels/saxpy.co"),
    )
    .unwrap();
    std::fs::copy(corpus("driver/libfat.a"), lib.join("libfat.a")).unwrap();
    std::fs::copy(corpus("driver/hip_compress.exe"), root.join("hip_compress")).unwrap();
    std::fs::copy(
        corpus("malformed/bundle_trunc_data.bundle"),
        root.join("share/damaged.co"),
    )
    .unwrap();
    std::fs::write(root.join("README"), b"\n// not a text bundle\n").unwrap();
    std::fs::write(root.join("empty"), b"").unwrap();
    // Symbolic links inside the tree are not followed (the library is not seen twice).
    std::os::unix::fs::symlink("librocrand.so.1.1", lib.join("librocrand.so.1")).unwrap();
    std::os::unix::fs::symlink(
        corpus("bundles/hip_generic.bundle"),
        root.join("generic.link"),
    )
    .unwrap();

    // A wheel holding the same files: the library deflated, the bundle stored.
    let whl = dir.path("pkg-1.0-py3-none-manylinux_2_28_x86_64.whl");
    {
        let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file("pkg/__init__.py", deflated).unwrap();
        z.write_all(b"print('hello')\n").unwrap();
        z.start_file("pkg/lib/librocrand.so.1", deflated).unwrap();
        z.write_all(&rocrand).unwrap();
        z.start_file("pkg/kernels/kernels.hsaco", stored).unwrap();
        z.write_all(&std::fs::read(corpus("bundles/hip_6arch.bundle")).unwrap())
            .unwrap();
        z.start_file("pkg/kernels/ccob.co", deflated).unwrap();
        z.write_all(&std::fs::read(corpus("compressed/hip_6arch.zstd.ccob")).unwrap())
            .unwrap();
        z.finish().unwrap();
    }

    let devices = [
        "gfx1031",
        "gfx90a:sramecc+:xnack-",
        "gfx942:sramecc+:xnack+",
        "gfx1101",
    ];
    let mut args: Vec<std::ffi::OsString> =
        vec![root.clone().into_os_string(), whl.clone().into_os_string()];
    for d in devices {
        args.push("--target".into());
        args.push(d.into());
    }
    args.push("--jobs".into());
    args.push("3".into());
    let out = doctor(&args);
    assert_eq!(out.status.code(), Some(1));
    let (recs, summary) = records(&out);
    // Regular files only: 8 in the tree, the wheel.
    assert_eq!(summary["files_scanned"], 9, "{summary}");
    // librocrand, kernels.hsaco, saxpy.co, libfat.a, hip_compress, damaged.co; three wheel members.
    assert_eq!(summary["libraries"], 9, "{summary}");
    assert_eq!(recs.len(), 9 * devices.len());
    assert!(recs
        .iter()
        .all(|r| !r["file"].as_str().unwrap().ends_with(".link")));
    assert!(recs
        .iter()
        .all(|r| !r["file"].as_str().unwrap().ends_with("README")));

    // The damaged file is reported as such; the scan went on.
    let r = find(&recs, "damaged.co", None, "gfx1031");
    assert_eq!(r["status"], "damaged");
    assert!(
        r["error"].as_str().unwrap().contains("runs past the end"),
        "{r}"
    );
    assert_eq!(summary["damaged"], devices.len());

    // Each wheel member gives the record its file gives outside the wheel.
    let same = |file: &str, member: &str| {
        for d in devices {
            let a = find(&recs, file, None, d);
            let b = find(&recs, ".whl", Some(member), d);
            for key in ["units", "units_covered", "status", "reason", "hints"] {
                assert_eq!(a[key], b[key], "{file} vs {member} on {d}: {key}");
            }
        }
    };
    same("librocrand.so.1.1", "pkg/lib/librocrand.so.1");
    same("kernels.hsaco", "pkg/kernels/kernels.hsaco");
    assert_eq!(
        find(&recs, ".whl", Some("pkg/kernels/ccob.co"), "gfx1031")["reason"],
        "no code object for gfx1031 in 1 of 1 units; closest: gfx1030 code does not run on gfx1031"
    );
    assert_eq!(
        find(
            &recs,
            ".whl",
            Some("pkg/kernels/ccob.co"),
            "gfx90a:sramecc+:xnack-"
        )["status"],
        "ok"
    );
    assert!(recs
        .iter()
        .all(|r| r["member"].as_str() != Some("pkg/__init__.py")));

    // The table: one line per library under each device, and the summary.
    let mut targs = vec!["doctor".into(), root.into_os_string(), whl.into_os_string()];
    targs.push("--target".into());
    targs.push("gfx1031".into());
    let out = loader_sim(&targs);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("gfx1031: 0 of 9 libraries load\n"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.contains("kernels.hsaco") && !l.contains(".whl"))
        .unwrap();
    assert!(
        line.contains("0/1")
            && line.contains("none")
            && line.contains("closest: gfx1030 code does not run on gfx1031"),
        "{line}"
    );
    assert!(text.contains("9 files scanned"), "{text}");
    assert!(
        out.stderr.is_empty(),
        "no progress line when stderr is not a terminal"
    );
}

#[test]
fn kfd_topology_with_two_gpus() {
    let dir = TempDir::new("doctor-kfd");
    let topo = dir.path("topology");
    let node = |n: u32, text: &str| {
        let d = topo.join(format!("nodes/{n}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("properties"), text).unwrap();
    };
    node(
        0,
        "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n",
    );
    // gfx90a with SRAM ECC (capability bit 26), gfx1031 (10.3.1).
    node(
        1,
        &format!(
            "simd_count 416\ncapability {}\ngfx_target_version 90010\n",
            0x0400_0000u32 | 0x0008_4280
        ),
    );
    node(
        2,
        "simd_count 80\ncapability 0\ngfx_target_version 100301\n",
    );
    let six = corpus("bundles/hip_6arch.bundle");
    let out = doctor(&[
        six.as_os_str(),
        "--kfd-topology".as_ref(),
        topo.as_os_str(),
        "--xnack".as_ref(),
        "off".as_ref(),
    ]);
    let (recs, summary) = records(&out);
    assert_eq!(summary["devices"], 2);
    assert_eq!(
        find(&recs, "hip_6arch.bundle", None, "gfx90a:sramecc+:xnack-")["status"],
        "ok"
    );
    let r = find(&recs, "hip_6arch.bundle", None, "gfx1031");
    assert_eq!(r["status"], "none");
    assert!(hints(r).contains(&h(
        "override",
        "HSA_OVERRIDE_GFX_VERSION",
        "10.3.0",
        "",
        false
    )));
    assert_eq!(out.status.code(), Some(1));

    // Without --xnack the mode is unknown: neither gfx90a image (xnack+ / xnack-) loads,
    // and either HSA_XNACK setting would fix it.
    let out = doctor(&[six.as_os_str(), "--kfd-topology".as_ref(), topo.as_os_str()]);
    let (recs, _) = records(&out);
    let r = find(&recs, "hip_6arch.bundle", None, "gfx90a:sramecc+");
    assert_eq!(r["status"], "none");
    assert_eq!(
        r["reason"],
        "built for xnack+, device has an unknown xnack mode in 1 of 1 units"
    );
    assert_eq!(
        &hints(r)[..2],
        &[
            h("xnack", "HSA_XNACK", "1", "", true),
            h("xnack", "HSA_XNACK", "0", "", true)
        ]
    );
    assert!(check_hints(&recs) >= 3);
}

#[test]
fn exit_status_and_usage() {
    let six = corpus("bundles/hip_6arch.bundle");
    let out = doctor(&[
        six.as_os_str(),
        "--target".as_ref(),
        "gfx90a:sramecc+:xnack-".as_ref(),
        "--target".as_ref(),
        "gfx1100".as_ref(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "every library covers every device"
    );
    let (_, summary) = records(&out);
    assert_eq!(
        (summary["ok"].as_u64(), summary["none"].as_u64()),
        (Some(2), Some(0))
    );
    assert!(summary["seconds"].as_f64().unwrap() >= 0.0);

    let out = doctor(&[
        six.as_os_str(),
        "--target".as_ref(),
        "gfx9-generic".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid --target 'gfx9-generic'"));
    let out = doctor(&["/nonexistent/path", "--target", "gfx90a"]);
    assert_eq!(out.status.code(), Some(2));
    let out = loader_sim(&["doctor", "--target", "gfx90a"]);
    assert_eq!(out.status.code(), Some(2), "PATH is required");
    if !Path::new("/sys/class/kfd/kfd/topology").exists() {
        let out = doctor(&[six.as_os_str()]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("no device to check"));
    }
}

/// Compressed bundles: judged by entry ID (the table, the start of the stream) by default,
/// by entry ID and ELF header with --deep; on real files (IDs and headers agree) the
/// records are the same, and equal to what select finds decompressing whole units.
#[test]
fn compressed_bundles_by_table_and_deep() {
    let dir = corpus("compressed");
    let run = |deep: bool| {
        let mut args: Vec<std::ffi::OsString> = vec![dir.clone().into_os_string()];
        for d in [
            "gfx1031",
            "gfx90a:sramecc+:xnack-",
            "gfx942:sramecc+:xnack+",
            "sm_80",
        ] {
            args.push("--target".into());
            args.push(d.into());
        }
        if deep {
            args.push("--deep".into());
        }
        records(&doctor(&args)).0
    };
    let (table, deep) = (run(false), run(true));
    assert_eq!(table.len(), 6 * 4);
    assert_eq!(table, deep);
    for r in &table {
        let per_unit = select_units(
            Path::new(r["file"].as_str().unwrap()),
            r["device"].as_str().unwrap(),
        );
        let covered = per_unit.iter().filter(|s| **s).count() as u64;
        assert_eq!(covered, r["units_covered"].as_u64().unwrap(), "{r}");
    }
    let r = find(
        &table,
        "hip_6arch.zstd.ccob",
        None,
        "gfx942:sramecc+:xnack+",
    );
    assert_eq!(
        r["reason"],
        "built for xnack-, device has xnack+ in 1 of 1 units"
    );
}

/// A zip file at `path` holding `members` (name, bytes, deflated?).
fn write_zip(path: &Path, members: &[(&str, &[u8], bool)]) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, data, deflate) in members {
        let method = if *deflate {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        };
        z.start_file(
            *name,
            zip::write::SimpleFileOptions::default().compression_method(method),
        )
        .unwrap();
        z.write_all(data).unwrap();
    }
    z.finish().unwrap();
}

/// (member or file name relative to its root, device) -> the verdict fields of a record.
fn verdicts(recs: &[Value], root: &str) -> std::collections::BTreeMap<(String, String), Value> {
    recs.iter()
        .map(|r| {
            let name = match r["member"].as_str() {
                Some(m) => m.to_string(),
                None => {
                    let f = r["file"].as_str().unwrap();
                    f.strip_prefix(root)
                        .unwrap()
                        .trim_start_matches('/')
                        .to_string()
                }
            };
            let mut v = r.clone();
            let o = v.as_object_mut().unwrap();
            o.remove("file");
            o.remove("member");
            ((name, r["device"].as_str().unwrap().to_string()), v)
        })
        .collect()
}

#[test]
fn wheel_gives_the_verdicts_of_the_unzipped_tree() {
    // Corpus files, most of them deflated (decoded into a temporary file as a stream), one
    // stored (read in place), with a damaged one and a file that holds no device code.
    let files: [(&str, &str, bool); 8] = [
        ("pkg/bin/hip_nonrdc", "driver/hip_nonrdc.exe", true),
        ("pkg/bin/hip_compress", "driver/hip_compress.exe", true),
        ("pkg/bin/omp_amd", "driver/omp_amd.exe", true),
        ("pkg/lib/libfat.a", "driver/libfat.a", true),
        ("pkg/kernels/six.hsaco", "bundles/hip_6arch.bundle", false),
        (
            "pkg/kernels/six.ccob",
            "compressed/hip_6arch.zstd.ccob",
            true,
        ),
        (
            "pkg/kernels/broken.co",
            "malformed/bundle_trunc_data.bundle",
            true,
        ),
        ("pkg/host.o", "devobj/host.x86_64.o", true),
    ];
    let dir = TempDir::new("doctor-wheel");
    let tree = dir.path("tree");
    let data: Vec<Vec<u8>> = files
        .iter()
        .map(|(_, c, _)| std::fs::read(corpus(c)).unwrap())
        .collect();
    let mut members: Vec<(&str, &[u8], bool)> = vec![("pkg/__init__.py", b"\n", true)];
    for ((name, _, deflate), bytes) in files.iter().zip(&data) {
        let p = tree.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        members.push((name, bytes, *deflate));
    }
    std::fs::write(tree.join("pkg/__init__.py"), b"\n").unwrap();
    let whl = dir.path("pkg-1.0-py3-none-linux_x86_64.whl");
    write_zip(&whl, &members);

    let devices = [
        "gfx90a:sramecc+:xnack+",
        "gfx906:sramecc-:xnack-",
        "gfx1101",
    ];
    let run = |path: &Path| {
        let mut args: Vec<std::ffi::OsString> = vec![path.as_os_str().to_owned()];
        for d in devices {
            args.extend(["--target".into(), d.into()]);
        }
        let out = doctor(&args);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        records(&out)
    };
    let (on_tree, tree_summary) = run(&tree);
    let (on_wheel, wheel_summary) = run(&whl);
    let a = verdicts(&on_tree, tree.to_str().unwrap());
    let b = verdicts(&on_wheel, "");
    // Every library with device code, the damaged one too; the host object and the Python
    // file hold none.
    assert_eq!(a.len(), 7 * devices.len(), "{:?}", a.keys());
    assert_eq!(a, b);
    for key in ["libraries", "ok", "partial", "none", "damaged"] {
        assert_eq!(tree_summary[key], wheel_summary[key], "{key}");
    }
    assert_eq!(wheel_summary["damaged"], devices.len());
    let broken = &b[&("pkg/kernels/broken.co".to_string(), devices[0].to_string())];
    assert_eq!(broken["status"], "damaged");
    // A member whose CRC-32 does not match is reported as damaged, and the others still
    // are: flip a bit of the CRC in its central directory record (46 bytes before its
    // name; the CRC is at 16), which the zip reader checks at the end of the member.
    let mut bad = std::fs::read(&whl).unwrap();
    let name = b"pkg/kernels/six.ccob";
    let cd = bad.windows(name.len()).rposition(|w| w == name).unwrap();
    assert_eq!(&bad[cd - 46..cd - 42], b"PK\x01\x02");
    bad[cd - 46 + 16] ^= 1;
    let bad_whl = dir.write("bad-crc.whl", &bad);
    let (recs, summary) = run(&bad_whl);
    let r = find(&recs, ".whl", Some("pkg/kernels/six.ccob"), devices[0]);
    assert_eq!(r["status"], "damaged", "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("checksum"),
        "{r}"
    );
    assert_eq!(summary["libraries"], 7, "{summary}");
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the cyllama-rocm 0.2.18 wheel (scripts/fetch-cyllama-rocm.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn cyllama_wheel_as_a_stream() {
    // The cyllama-rocm 0.2.18 wheel: its 168.8 MB libggml-hip is deflated. Read in place, it
    // gives what the unzipped library gives, within the memory of the unzipped run.
    if !common::external("the cyllama-rocm 0.2.18 wheel (scripts/fetch-cyllama-rocm.sh)") {
        return;
    }
    let base = common::external_dir().join("cyllama-rocm");
    let whl = std::fs::read_dir(&base)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("the wheel: run scripts/fetch-cyllama-rocm.sh");
    let lib = base.join("libggml-hip.so");
    let devices = ["gfx1100", "gfx906", "gfx90a:sramecc+:xnack-"];
    let run = |path: &Path| {
        let mut args: Vec<std::ffi::OsString> = vec![path.as_os_str().to_owned()];
        for d in devices {
            args.extend(["--target".into(), d.into()]);
        }
        records(&doctor(&args)).0
    };
    let on_wheel = run(&whl);
    let on_lib = run(&lib);
    assert_eq!(on_wheel.len(), devices.len());
    for (w, l) in on_wheel.iter().zip(&on_lib) {
        assert!(w["member"]
            .as_str()
            .unwrap()
            .starts_with("cyllama_rocm.libs/libggml-hip-"));
        for key in [
            "device",
            "units",
            "units_covered",
            "status",
            "reason",
            "hints",
        ] {
            assert_eq!(w[key], l[key], "{key}");
        }
    }
    assert_eq!(on_wheel[0]["units"], 130);
    assert_eq!(on_wheel[0]["status"], "ok");
    assert_eq!(on_wheel[1]["status"], "none");
}

/// File offset of section `name` of the host file `data`.
fn section_offset(data: &[u8], name: &[u8]) -> usize {
    let elf = offload_image::registration::HostElf::parse(data).unwrap();
    let s = elf.section_by_name(name).unwrap();
    s.data.as_ptr() as usize - data.as_ptr() as usize
}

/// `loader-sim register FILE --device D --json`: (exit status, records, stderr).
fn register(file: &Path, device: &str) -> (Option<i32>, Vec<Value>, String) {
    let out = loader_sim(&[
        "register".as_ref(),
        file.as_os_str(),
        "--device".as_ref(),
        device.as_ref(),
        "--json".as_ref(),
    ]);
    (
        out.status.code(),
        json_lines(&out.stdout),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn units_are_what_the_runtime_registers() {
    // hip_nonrdc.exe (clang-22, PIE): one wrapper in .hipFatBinSegment pointing, through an
    // R_X86_64_RELATIVE relocation, at the bundle in .hip_fatbin (host + gfx90a:xnack+ +
    // gfx906). Damaged copies: what __hipRegisterFatBinary refuses does not load.
    let dir = TempDir::new("doctor-registered");
    let exe = std::fs::read(corpus("driver/hip_nonrdc.exe")).unwrap();
    let wrapper = section_offset(&exe, b".hipFatBinSegment");
    let fatbin = section_offset(&exe, b".hip_fatbin");
    assert_eq!(&exe[wrapper..wrapper + 4], b"FPIH", "HIPF, little-endian");
    assert_eq!(&exe[fatbin..fatbin + 24], b"__CLANG_OFFLOAD_BUNDLE__");
    let device = "gfx90a:xnack+";
    let judge = |name: &str, data: &[u8]| {
        let f = dir.write(name, data);
        let out = doctor(&[f.as_os_str(), "--target".as_ref(), device.as_ref()]);
        let (recs, _) = records(&out);
        assert_eq!(recs.len(), 1, "{recs:?}");
        (f, recs[0].clone())
    };

    let (f, r) = judge("sound.exe", &exe);
    assert_eq!(
        (r["units"].as_u64(), r["status"].as_str()),
        (Some(1), Some("ok"))
    );
    let (code, recs, _) = register(&f, device);
    assert_eq!(code, Some(0));
    assert_eq!(recs.len(), 1);
    assert!(recs[0]["selected"]
        .as_str()
        .unwrap()
        .ends_with("gfx90a:xnack+"));

    // One byte of the wrapper magic: CLR returns no handle; so does `register`.
    let mut bad = exe.clone();
    bad[wrapper] ^= 1;
    let (f, r) = judge("bad-magic.exe", &bad);
    assert_eq!(
        (
            r["units"].as_u64(),
            r["units_covered"].as_u64(),
            r["status"].as_str()
        ),
        (Some(1), Some(0), Some("none")),
        "{r}"
    );
    let why = "not a HIP (HIPF) or CUDA fat-binary wrapper";
    assert_eq!(
        r["reason"],
        format!("the runtime refuses the fat-binary wrapper ({why}) in 1 of 1 units")
    );
    let (code, _, stderr) = register(&f, device);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains(&format!("wrapper at .hipFatBinSegment+0x0: {why}")),
        "{stderr}"
    );

    // Version 2: HIP accepts only version 1.
    let mut bad = exe.clone();
    bad[wrapper + 4] = 2;
    let (f, r) = judge("bad-version.exe", &bad);
    let why = "fat-binary wrapper version is not supported";
    assert_eq!(
        r["reason"],
        format!("the runtime refuses the fat-binary wrapper ({why}) in 1 of 1 units")
    );
    let (code, _, stderr) = register(&f, device);
    assert_eq!(code, Some(2));
    assert!(stderr.contains(why), "{stderr}");

    // The binary pointer (the relocation's addend) outside every mapped section: registered,
    // but there is nothing to load.
    let mut rela = Vec::new();
    rela.extend(0x9020u64.to_le_bytes());
    rela.extend(8u64.to_le_bytes());
    rela.extend(0x3000u64.to_le_bytes());
    let at = exe
        .windows(24)
        .position(|w| w == rela.as_slice())
        .expect("the R_X86_64_RELATIVE relocation of the wrapper's binary pointer");
    let mut bad = exe.clone();
    bad[at + 16..at + 24].copy_from_slice(&0x7000_0000u64.to_le_bytes());
    let (f, r) = judge("bad-pointer.exe", &bad);
    assert_eq!(r["units_covered"], 0, "{r}");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("the registered fat binary cannot be read (")
            && reason.ends_with(") in 1 of 1 units"),
        "{reason}"
    );
    let (code, recs, _) = register(&f, device);
    assert_eq!(code, Some(1));
    assert!(
        recs[0]["selected"].is_null() && !recs[0]["error"].is_null(),
        "{recs:?}"
    );

    // A bundle whose entry count is 0: registered, no image, does not load (it used to drop
    // out of the count).
    let mut bad = exe.clone();
    bad[fatbin + 24..fatbin + 32].copy_from_slice(&0u64.to_le_bytes());
    let (f, r) = judge("no-entries.exe", &bad);
    assert_eq!(
        (r["units"].as_u64(), r["units_covered"].as_u64()),
        (Some(1), Some(0)),
        "{r}"
    );
    assert_eq!(r["reason"], "no device images in 1 of 1 units");
    let (code, recs, _) = register(&f, device);
    assert_eq!(code, Some(1));
    assert_eq!(recs.len(), 1);
    assert!(recs[0]["selected"].is_null(), "{recs:?}");
    assert_eq!(recs[0]["entries"].as_array().unwrap().len(), 0);

    // The same bundle outside a host file is a unit that does not load either.
    let empty = dir.write("empty.bundle", &bad[fatbin..fatbin + 32]);
    let (recs, _) = records(&doctor(&[
        empty.as_os_str(),
        "--target".as_ref(),
        device.as_ref(),
    ]));
    assert_eq!(recs[0]["units"], 1);
    assert_eq!(recs[0]["reason"], "no device images in 1 of 1 units");
}

#[test]
fn the_reason_names_the_closest_image() {
    // A gfx906 device and a bundle of gfx1030, gfx90a:xnack+ and gfx1100 code objects
    // (real ones from the corpus), in that order: gfx90a (ISA 9.0.10) is nearest to gfx906
    // (9.0.6), whatever the order; `select --explain` gives the same sentence for it.
    let dir = TempDir::new("doctor-closest");
    let co = |n: &str| std::fs::read(corpus(&format!("devobj/{n}"))).unwrap();
    let (a, b, c) = (
        co("saxpy.gfx1030.co"),
        co("saxpy.gfx90a_xnack+.co"),
        co("saxpy.gfx1100.co"),
    );
    let ids = [
        "hipv4-amdgcn-amd-amdhsa--gfx1030",
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
        "hipv4-amdgcn-amd-amdhsa--gfx1100",
    ];
    for (name, order) in [("abc.bundle", [0, 1, 2]), ("cba.bundle", [2, 1, 0])] {
        let data = [&a, &b, &c];
        let entries: Vec<(&str, &[u8])> = order.iter().map(|&i| (ids[i], &data[i][..])).collect();
        let f = dir.write(name, &bundle(&entries));
        let (recs, _) = records(&doctor(&[
            f.as_os_str(),
            "--target".as_ref(),
            "gfx906".as_ref(),
        ]));
        let sentence = "gfx90a code does not run on gfx906";
        assert_eq!(
            recs[0]["reason"],
            format!("no code object for gfx906 in 1 of 1 units; closest: {sentence}")
        );
        let out = loader_sim(&[
            "select".as_ref(),
            f.as_os_str(),
            "--target".as_ref(),
            "gfx906".as_ref(),
            "--explain".as_ref(),
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("gfx90a:xnack+: {sentence}")),
            "{text}"
        );
    }
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs libggml-hip of cyllama-rocm 0.2.18 (scripts/fetch-cyllama-rocm.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn damaged_wrapper_and_empty_bundle_in_libggml_hip() {
    // libggml-hip of the cyllama-rocm 0.2.18 wheel: 130 wrappers, 130 bundles of gfx1100
    // ... code objects. One byte of the first wrapper's magic, and the entry count of the
    // bundle the second wrapper points at set to 0: the runtime registers 128 of 130 units
    // with an image; doctor says which and why, and `register` agrees.
    if !common::external("libggml-hip of cyllama-rocm 0.2.18 (scripts/fetch-cyllama-rocm.sh)") {
        return;
    }
    let lib = common::external_dir().join("cyllama-rocm/libggml-hip.so");
    let data = std::fs::read(&lib).unwrap();
    let elf = offload_image::registration::HostElf::parse(&data).unwrap();
    let slots = elf.fat_binary_wrappers();
    assert_eq!(slots.len(), 130);
    let view =
        offload_image::registration::FatbinWrapperView::read(&elf, slots[1].address).unwrap();
    let (s, off) = elf.section_at(view.binary).unwrap();
    let second = s.data.as_ptr() as usize - data.as_ptr() as usize + off as usize;
    let wrapper = section_offset(&data, b".hipFatBinSegment");
    drop(elf);
    let mut bad = data.clone();
    bad[wrapper] ^= 1;
    assert_eq!(&bad[second..second + 24], b"__CLANG_OFFLOAD_BUNDLE__");
    bad[second + 24..second + 32].copy_from_slice(&0u64.to_le_bytes());
    let dir = TempDir::new("doctor-ggml");
    let f = dir.write("libggml-hip.so", &bad);
    let (recs, _) = records(&doctor(&[
        f.as_os_str(),
        "--target".as_ref(),
        "gfx1100".as_ref(),
    ]));
    let r = &recs[0];
    assert_eq!(
        (
            r["units"].as_u64(),
            r["units_covered"].as_u64(),
            r["status"].as_str()
        ),
        (Some(130), Some(128), Some("partial")),
        "{r}"
    );
    let gaps: Vec<(String, u64)> = r["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["reason"].as_str().unwrap().to_string(),
                g["units"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        gaps,
        vec![
            (
                "the runtime refuses the fat-binary wrapper (not a HIP (HIPF) or CUDA fat-binary wrapper)"
                    .to_string(),
                1
            ),
            ("no device images".to_string(), 1),
        ]
    );
    // `register` refuses the file at the first wrapper; with only the empty bundle it
    // registers 130 units, 129 with an image for gfx1100.
    let (code, _, stderr) = register(&f, "gfx1100");
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("wrapper at .hipFatBinSegment+0x0"),
        "{stderr}"
    );
    let mut only_empty = data.clone();
    only_empty[second + 24..second + 32].copy_from_slice(&0u64.to_le_bytes());
    let g = dir.write("empty-bundle.so", &only_empty);
    let (code, regs, _) = register(&g, "gfx1100");
    assert_eq!(code, Some(1));
    assert_eq!(regs.len(), 130);
    let (recs, _) = records(&doctor(&[
        g.as_os_str(),
        "--target".as_ref(),
        "gfx1100".as_ref(),
    ]));
    let selected = regs.iter().filter(|r| !r["selected"].is_null()).count() as u64;
    assert_eq!(recs[0]["units_covered"].as_u64(), Some(selected));
    assert_eq!(selected, 129);
    assert_eq!(recs[0]["reason"], "no device images in 1 of 130 units");
}

/// A unit's images as (is a cubin, is PTX, architecture), and whether the device gets one.
type UnitImages = (Vec<(bool, bool, String)>, bool);

/// Compute capability major of an NVPTX architecture name (`sm_90a`, `sm_100f`).
fn nv_major(arch: &str) -> u16 {
    let digits: String = arch
        .trim_start_matches("sm_")
        .trim_start_matches("compute_")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse::<u16>().unwrap() / 10
}

/// What the units that give CUDA device `major.minor` nothing lack, by NVIDIA's rules,
/// grouped in the order first met: for each unit its images as (is a cubin, is PTX,
/// architecture) and whether the device gets one.
fn expected_cuda_gaps(units: &[UnitImages], (major, minor): (u16, u16)) -> Vec<(String, u64)> {
    let mut gaps: Vec<(String, u64)> = Vec::new();
    for (images, covered) in units {
        if *covered {
            continue;
        }
        let same_major = images
            .iter()
            .any(|(cubin, _, arch)| *cubin && nv_major(arch) == major);
        let ptx = images.iter().any(|(_, ptx, _)| *ptx);
        let mut gap = if same_major {
            format!("no cubin for {major}.{minor}")
        } else {
            format!("no cubin for {major}.x")
        };
        gap.push_str(&if ptx {
            format!(" and no PTX for {major}.{minor}")
        } else {
            " and no PTX".to_string()
        });
        match gaps.iter_mut().find(|(g, _)| *g == gap) {
            Some((_, n)) => *n += 1,
            None => gaps.push((gap, 1)),
        }
    }
    gaps
}

/// doctor's `gaps` of a record as (reason, units), and checks that its reason is the gap
/// most units share (the first met among equals), with its count.
/// Compares a doctor record's gaps with those expected from the units' images
/// (`expected`, every one of them a missing-code gap): where a unit loads on the device, the
/// library holds code for it and every unit lacking code is set aside as code for other GPUs
/// (`COMPATIBILITY.md` §12); where none does, they are gaps, but for units whose images hold
/// no kernels, set aside too.
fn assert_cuda_gaps(r: &Value, expected: Vec<(String, u64)>, what: &str) {
    let total: u64 = expected.iter().map(|(_, n)| n).sum();
    let aside = |k: &str| r["set_aside"][k].as_u64().unwrap();
    let got = gaps_of(r);
    if r["units_covered"].as_u64().unwrap() > 0 {
        assert!(got.is_empty(), "{what}: {r}");
        assert_eq!(
            aside("other_gpus") + aside("no_kernels"),
            total,
            "{what}: {r}"
        );
    } else {
        assert_eq!(aside("other_gpus"), 0, "{what}: {r}");
        for (gap, n) in &got {
            let want = expected.iter().find(|(g, _)| g == gap).map(|(_, n)| *n);
            assert!(want.is_some_and(|w| w >= *n), "{what}: {gap} {n}: {r}");
        }
        let counted: u64 = got.iter().map(|(_, n)| n).sum();
        assert_eq!(counted + aside("no_kernels"), total, "{what}: {r}");
    }
}

fn gaps_of(r: &Value) -> Vec<(String, u64)> {
    let gaps: Vec<(String, u64)> = r["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["reason"].as_str().unwrap().to_string(),
                g["units"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut top: Option<&(String, u64)> = None;
    for g in &gaps {
        if top.is_none_or(|t| g.1 > t.1) {
            top = Some(g);
        }
    }
    if let Some((gap, n)) = top {
        let reason = r["reason"].as_str().unwrap();
        let head = format!("{gap} in {n} of {} units", r["units"]);
        assert!(reason.starts_with(&head), "{reason} / {head}");
    } else {
        assert!(r["reason"].is_null(), "{r}");
    }
    gaps
}

#[test]
fn library_reason_summarises_the_units() {
    // Five NVIDIA fatbinaries made by nvcc, back to back: `variants` (sm_90a, sm_100a,
    // sm_100f cubins; compute_90a, compute_100f, compute_120 PTX), three `cubin_only`
    // (sm_75, sm_80, sm_86, sm_120 cubins), `saxpy3` (sm_80, sm_90a cubins, compute_80 PTX).
    // On an 11.0 device the first unit met lacks something else than most units do; the
    // reason is what most units lack. Expected: `list` (what each unit holds) and `select`
    // (what the device gets), classified here by NVIDIA's rules.
    let dir = TempDir::new("doctor-summary");
    let files = [
        "variants",
        "cubin_only",
        "cubin_only",
        "cubin_only",
        "saxpy3",
    ];
    let mut data = Vec::new();
    for f in files {
        data.extend(
            std::fs::read(common::repo().join(format!("tests/data/nvfatbin/files/{f}.fatbin")))
                .unwrap(),
        );
    }
    let multi = dir.write("multi.fatbin", &data);
    let list =
        json_lines(&loader_sim(&["list".as_ref(), multi.as_os_str(), "--json".as_ref()]).stdout);
    let mut units: Vec<UnitImages> = vec![(Vec::new(), false); files.len()];
    for r in &list {
        let u = r["bundle_index"].as_u64().unwrap() as usize;
        let kind = r["image_kind"].as_str().unwrap();
        units[u].0.push((
            kind == "cubin",
            kind == "ptx",
            r["target_id"].as_str().unwrap().to_string(),
        ));
    }
    for (device, cc) in [
        ("sm_110", (11, 0)),
        ("sm_86", (8, 6)),
        ("sm_60", (6, 0)),
        ("sm_100", (10, 0)),
    ] {
        let select = json_lines(
            &loader_sim(&[
                "select".as_ref(),
                multi.as_os_str(),
                "--target".as_ref(),
                device.as_ref(),
                "--json".as_ref(),
            ])
            .stdout,
        );
        assert_eq!(select.len(), files.len());
        for (u, r) in select.iter().enumerate() {
            units[u].1 = !r["selected"].is_null();
        }
        let (recs, _) = records(&doctor(&[
            multi.as_os_str(),
            "--target".as_ref(),
            device.as_ref(),
        ]));
        let r = &recs[0];
        assert_eq!(r["units"], files.len());
        assert_eq!(r["units_covered"], units.iter().filter(|u| u.1).count());
        assert_cuda_gaps(r, expected_cuda_gaps(&units, cc), device);
    }
    // On 11.0: only saxpy3 loads (its compute_80 PTX), so the library holds code for the
    // device, and the four units without code for it are code for other GPUs (the three
    // cubin-only ones and the one with arch- and family-specific code).
    let (recs, _) = records(&doctor(&[
        multi.as_os_str(),
        "--target".as_ref(),
        "sm_110".as_ref(),
    ]));
    assert_eq!(recs[0]["units_covered"], 1);
    assert_eq!(recs[0]["status"], "ok", "{}", recs[0]);
    assert_eq!(recs[0]["set_aside"]["other_gpus"], 4, "{}", recs[0]);
    // Where nothing loads, the same units make the reason: on 6.0, the cubin-only units lack
    // cubins and PTX.
    let (recs, _) = records(&doctor(&[
        multi.as_os_str(),
        "--target".as_ref(),
        "sm_60".as_ref(),
    ]));
    assert_eq!(recs[0]["units_covered"], 0);
    assert_eq!(recs[0]["status"], "none");
    assert!(
        recs[0]["reason"]
            .as_str()
            .unwrap()
            .contains("no cubin for 6.x and no PTX in 3 of 5 units"),
        "{}",
        recs[0]
    );
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs libcurand.so.10 (scripts/fetch-nvidia-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn library_reason_on_real_cuda_libraries() {
    // libcurand (scripts/fetch-nvidia-libs.sh, which the test set-up runs): the units the
    // CUDA runtime registers (the `register` model: one per fat-binary wrapper), their
    // images and what each device gets from the simulated runtime; the gaps classified here.
    if !common::external("libcurand.so.10 (scripts/fetch-nvidia-libs.sh)") {
        return;
    }
    library_reasons(&["libcurand.so.10"]);
}

/// The same on the two large CUDA 12 libraries (790 MB of wheels, not fetched by the test
/// set-up): `scripts/fetch-nvidia-libs.sh --large`, then `cargo test -- --ignored`.
#[test]
#[ignore = "needs scripts/fetch-nvidia-libs.sh --large"]
fn library_reason_on_large_cuda_libraries() {
    if !common::external("libcusparse and libcusolver (scripts/fetch-nvidia-libs.sh --large)") {
        return;
    }
    library_reasons(&["libcusparse.so.12", "libcusolver.so.11"]);
}

fn library_reasons(libs: &[&str]) {
    use offload_image::registration::{HostElf, Registry, RegistryOptions, SimulatedDevice};
    use offload_image::ImageKind;
    let base = common::external_dir().join("nvidia");
    let devices = [("sm_60", (6, 0)), ("sm_86", (8, 6)), ("sm_110", (11, 0))];
    let mut checked = 0;
    for &lib in libs {
        let path = base.join(lib);
        let data = std::fs::read(&path).unwrap();
        let elf = HostElf::parse(&data).unwrap();
        let sims: Vec<SimulatedDevice> = devices
            .iter()
            .map(|(d, _)| SimulatedDevice::parse(d).unwrap())
            .collect();
        let mut registry = Registry::new(sims, RegistryOptions::default());
        let mut units: Vec<Vec<UnitImages>> = vec![Vec::new(); devices.len()];
        let mut seen = std::collections::BTreeSet::new();
        for slot in elf.fat_binary_wrappers() {
            let id = registry.register_fat_binary(&elf, slot.address).unwrap();
            if !seen.insert(id) {
                continue;
            }
            let reg = registry.get(id).unwrap();
            let images: Vec<(bool, bool, String)> = reg
                .images()
                .iter()
                .map(|i| {
                    (
                        i.image_kind == ImageKind::Cubin,
                        i.image_kind == ImageKind::Ptx,
                        i.target_id.unwrap().to_string(),
                    )
                })
                .collect();
            for (k, per_device) in units.iter_mut().enumerate() {
                per_device.push((images.clone(), reg.choice(k).unwrap().key.is_some()));
            }
            registry.release(id);
        }
        let mut args: Vec<std::ffi::OsString> = vec![path.clone().into_os_string()];
        for (d, _) in devices {
            args.extend(["--target".into(), d.into()]);
        }
        let (recs, _) = records(&doctor(&args));
        for (k, (d, cc)) in devices.iter().enumerate() {
            let r = find(&recs, lib, None, d);
            assert_eq!(
                r["units"].as_u64(),
                Some(units[k].len() as u64),
                "{lib} {d}"
            );
            let covered = units[k].iter().filter(|u| u.1).count() as u64;
            assert_eq!(r["units_covered"].as_u64(), Some(covered), "{lib} {d}");
            assert_cuda_gaps(r, expected_cuda_gaps(&units[k], *cc), &format!("{lib} {d}"));
            checked += 1;
        }
    }
    assert_eq!(checked, 3 * libs.len());
}

/// Windows DLLs are judged as the runtime registers them, as Linux libraries are: one unit
/// per wrapper of `.hipFatB`/`.nvFatBi`, and every verdict equal to `select`'s on the
/// same file (the DLLs of `tests/data/pe/`, made by clang-22 and lld-link-22).
#[test]
fn windows_dlls_are_judged_like_linux_libraries() {
    let pe = common::repo().join("tests/data/pe");
    for (dll, device, wrappers) in [("k3.dll", "gfx90a", 3u64), ("kc.dll", "sm_86", 2)] {
        let file = pe.join(dll);
        let recs = json_lines(
            &loader_sim(&[
                "doctor",
                "--json",
                "--target",
                device,
                file.to_str().unwrap(),
            ])
            .stdout,
        );
        assert_eq!(recs[0]["units"].as_u64(), Some(wrappers), "{dll}: {recs:?}");
        let selected = json_lines(
            &loader_sim(&[
                "select",
                "--json",
                "--target",
                device,
                file.to_str().unwrap(),
            ])
            .stdout,
        );
        let loading = selected.iter().filter(|r| !r["selected"].is_null()).count() as u64;
        assert_eq!(recs[0]["units_covered"].as_u64(), Some(loading), "{dll}");
        assert_eq!(
            recs[0]["status"],
            if loading == wrappers { "ok" } else { "partial" }
        );
    }
}

/// `doctor` with a recorded KFD topology (gfx90a with SRAM ECC on GPU 0, gfx1031 on GPU 1)
/// and the variables ROCr and HIP read: `ROCR_VISIBLE_DEVICES` picks GPUs of the
/// topology, `HIP_VISIBLE_DEVICES` indexes what ROCr left, a list ends at its first bad
/// item, and `HSA_OVERRIDE_GFX_VERSION` turns every GPU into the processor it names.
#[test]
fn kfd_detection_applies_the_runtime_variables() {
    let dir = TempDir::new("doctor-kfd-env");
    let topo = dir.path("topology");
    for (n, text) in [
        (
            0,
            String::from("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n"),
        ),
        (
            1,
            format!(
                "simd_count 416\ncapability {}\ngfx_target_version 90010\n",
                0x0400_0000u32 | 0x0008_4280
            ),
        ),
        (
            2,
            String::from("simd_count 80\ncapability 0\ngfx_target_version 100301\n"),
        ),
    ] {
        let d = topo.join(format!("nodes/{n}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("properties"), text).unwrap();
    }
    let six = corpus("bundles/hip_6arch.bundle");
    let devices = |env: &[(&str, &str)]| {
        let mut c = Command::new(common::ours());
        c.args(["doctor", "--json", "--xnack", "off", "--kfd-topology"])
            .arg(&topo)
            .arg(&six);
        for v in [
            "ROCR_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "HSA_OVERRIDE_GFX_VERSION",
        ] {
            c.env_remove(v);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let mut seen: Vec<(String, String)> = json_lines(&out.stdout)
            .iter()
            .filter(|r| r["summary"].is_null())
            .map(|r| {
                (
                    r["device"].as_str().unwrap().to_string(),
                    r["status"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        seen.sort();
        (out.status.code(), seen)
    };
    let both = devices(&[]);
    assert_eq!(
        both.1,
        [
            ("gfx1031".to_string(), "none".to_string()),
            ("gfx90a:sramecc+:xnack-".to_string(), "ok".to_string())
        ]
    );
    assert_eq!(
        devices(&[("ROCR_VISIBLE_DEVICES", "1")]).1,
        [both.1[0].clone()]
    );
    assert_eq!(
        devices(&[
            ("ROCR_VISIBLE_DEVICES", "1,0"),
            ("HIP_VISIBLE_DEVICES", "1")
        ])
        .1,
        [both.1[1].clone()]
    );
    assert_eq!(
        devices(&[("HIP_VISIBLE_DEVICES", "0,5,1")]).1,
        [both.1[1].clone()]
    );
    // gfx1031 under 10.3.0 is gfx1030, which the bundle has; so is gfx90a (no xnack).
    let (code, over) = devices(&[("HSA_OVERRIDE_GFX_VERSION", "10.3.0")]);
    assert_eq!(over, [("gfx1030".to_string(), "ok".to_string())]);
    assert_eq!(code, Some(0));
    let (code, none) = devices(&[("HIP_VISIBLE_DEVICES", "")]);
    assert_eq!(code, Some(2));
    assert!(none.is_empty());
}

/// A stand-in `libnvidia-ml.so.1` (two GPUs: compute capability 8.6 and 9.0, driver
/// 550.54.14) built here: `doctor` without `--target` finds both through NVML, and
/// `CUDA_VISIBLE_DEVICES` (an index, or a UUID prefix) narrows them as the CUDA runtime
/// does. The driver version NVML reports judges compressed entries (below). Without NVML
/// and without KFD it says what it looked for.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs a C compiler (cc); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn nvml_detection_with_a_stub_library() {
    if !common::external("a C compiler (cc)") {
        return;
    }
    let dir = TempDir::new("doctor-nvml");
    let src = dir.write(
        "nvml.c",
        br#"#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { (void)r; return "stub"; }
int nvmlSystemGetDriverVersion(char *v, unsigned n) {
  const char *d = getenv("STUB_NVML_DRIVER");
  snprintf(v, n, "%s", d ? d : "550.54.14"); return 0;
}
int nvmlDeviceGetCount_v2(unsigned *c) { *c = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { *h = (void *)(uintptr_t)(i + 1); return 0; }
int nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) {
  if ((uintptr_t)h == 1) { *major = 8; *minor = 6; } else { *major = 9; *minor = 0; }
  return 0;
}
int nvmlDeviceGetUUID(void *h, char *u, unsigned n) {
  snprintf(u, n, (uintptr_t)h == 1 ? "GPU-aaaa1111" : "GPU-bbbb2222"); return 0;
}
int nvmlDeviceGetName(void *h, char *s, unsigned n) {
  snprintf(s, n, (uintptr_t)h == 1 ? "Stub RTX 3090" : "Stub H100"); return 0;
}
"#,
    );
    let lib = dir.path("libnvidia-ml.so.1");
    let o = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::describe(&o));
    let libk = common::repo().join("tests/data/nvfatbin/files/libk.so");
    let run = |visible: Option<&str>, with_nvml: bool| {
        let mut c = Command::new(common::ours());
        c.args(["doctor", "--json"]).arg(&libk);
        c.env_remove("CUDA_VISIBLE_DEVICES");
        if with_nvml {
            c.env("LD_LIBRARY_PATH", dir.path(""));
        } else {
            c.env_remove("LD_LIBRARY_PATH");
        }
        if let Some(v) = visible {
            c.env("CUDA_VISIBLE_DEVICES", v);
        }
        c.output().unwrap()
    };
    let nvidia = |out: &std::process::Output| {
        let mut d: Vec<String> = json_lines(&out.stdout)
            .iter()
            .filter_map(|r| r["device"].as_str().map(str::to_string))
            .filter(|d| d.starts_with("sm_"))
            .collect();
        d.sort();
        d.dedup();
        d
    };
    let out = run(None, true);
    assert_eq!(
        nvidia(&out),
        ["sm_86", "sm_90"],
        "{}",
        common::describe(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("detected sm_86 (NVML 0: Stub RTX 3090)"),
        "{stderr}"
    );
    assert_eq!(nvidia(&run(Some("1"), true)), ["sm_90"]);
    assert_eq!(nvidia(&run(Some("GPU-aaaa"), true)), ["sm_86"]);
    assert_eq!(nvidia(&run(Some("1,0"), true)), ["sm_86", "sm_90"]);

    // NVIDIA's fatbinary with --compress-mode=size stores every entry as zstd, which a
    // driver older than 550.54.14 cannot decode; --compress-mode=speed stores LZ4.
    let files = common::repo().join("tests/data/nvfatbin/files");
    let judge = |driver: &str| {
        let out = Command::new(common::ours())
            .args(["doctor", "--json"])
            .arg(files.join("mixed.size.fatbin"))
            .arg(files.join("mixed.speed.all.fatbin"))
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env("LD_LIBRARY_PATH", dir.path(""))
            .env("STUB_NVML_DRIVER", driver)
            .output()
            .unwrap();
        let mut v: Vec<(String, String, String, String)> = json_lines(&out.stdout)
            .iter()
            .filter(|r| r["device"] == "sm_86")
            .map(|r| {
                let file = r["file"].as_str().unwrap();
                let name = file.rsplit('/').next().unwrap().to_string();
                let hint = r["hints"][0]["kind"].as_str().unwrap_or("-").to_string();
                let reason = r["reason"].as_str().unwrap_or("-").to_string();
                (
                    name,
                    r["status"].as_str().unwrap().to_string(),
                    hint,
                    reason,
                )
            })
            .collect();
        v.sort();
        v
    };
    let old = judge("535.183.01");
    assert_eq!(
        old.iter()
            .map(|(f, s, h, _)| (f.as_str(), s.as_str(), h.as_str()))
            .collect::<Vec<_>>(),
        [
            ("mixed.size.fatbin", "none", "driver"),
            ("mixed.speed.all.fatbin", "ok", "-")
        ],
        "{old:?}"
    );
    assert!(
        old[0].3.starts_with(
            "the chosen entry is zstd-compressed, which needs NVIDIA driver 550.54.14 or later \
             (driver 535.183.01)"
        ),
        "{old:?}"
    );
    let new = judge("550.54.14");
    assert!(new.iter().all(|(_, s, _, _)| s == "ok"), "{new:?}");
    if !Path::new("/sys/class/kfd/kfd/topology").exists() {
        let out = run(None, false);
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no device to check")
                && stderr.contains("KFD topology at /sys/class/kfd/kfd/topology: not present")
                && stderr.contains("NVML (libnvidia-ml.so.1)"),
            "{stderr}"
        );
    }
}

/// Files that start like a Windows program but are no 64-bit PE image (a 32-bit PE such as
/// setuptools' `cli-32.exe` launcher, a DOS program) hold no device code a runtime loads:
/// `doctor` passes over them, as over any other file, instead of calling them damaged.
#[test]
fn dos_programs_and_pe32_images_are_not_libraries() {
    let dir = TempDir::new("doctor-pe32");
    let mut pe32 = vec![0u8; 0x200];
    pe32[..2].copy_from_slice(b"MZ");
    pe32[0x3c..0x40].copy_from_slice(&0x40u32.to_le_bytes());
    pe32[0x40..0x44].copy_from_slice(b"PE\0\0");
    pe32[0x44..0x46].copy_from_slice(&0x14cu16.to_le_bytes()); // i386
    pe32[0x54..0x56].copy_from_slice(&224u16.to_le_bytes()); // SizeOfOptionalHeader
    pe32[0x58..0x5a].copy_from_slice(&0x10bu16.to_le_bytes()); // PE32
    dir.write("cli-32.exe", &pe32);
    let mut dos = vec![0u8; 0x80];
    dos[..2].copy_from_slice(b"MZ");
    dos[0x3c..0x40].copy_from_slice(&0x1000u32.to_le_bytes());
    dir.write("old.exe", &dos);
    std::fs::copy(
        common::repo().join("tests/data/nvfatbin/files/libk.so"),
        dir.path("libk.so"),
    )
    .unwrap();
    let out = doctor(&[
        dir.path("").as_os_str(),
        "--target".as_ref(),
        "sm_86".as_ref(),
    ]);
    let (recs, summary) = records(&out);
    assert_eq!(summary["libraries"], 1, "{}", common::describe(&out));
    assert_eq!(summary["damaged"], 0);
    assert!(recs[0]["file"].as_str().unwrap().ends_with("libk.so"));
}

/// `doctor --python` scans the site-packages of an interpreter's `sys.path` (here a
/// directory that NVIDIA's curand wheel was installed into with `pip install --target`,
/// put on `PYTHONPATH`) and names the installed distribution that owns each library, from
/// its `RECORD`.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs python3 with pip and the curand wheel (scripts/fetch-nvidia-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn python_environment_with_an_installed_cuda_wheel() {
    if !common::external("python3 with pip and the curand wheel (scripts/fetch-nvidia-libs.sh)") {
        return;
    }
    let wheels = common::external_dir().join("nvidia-wheels");
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("nvidia_curand_cu12-10.3.10.19-")
        })
        .expect("the curand wheel");
    let dir = TempDir::new("doctor-python");
    let site = dir.path("site");
    let o = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
        ])
        .arg(&site)
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::describe(&o));
    let out = Command::new(common::ours())
        .args([
            "doctor", "--python", "python3", "--json", "--target", "sm_86", "--target", "sm_35",
        ])
        .env("PYTHONPATH", &site)
        .output()
        .unwrap();
    let (recs, _) = records(&out);
    let lib = site.join("nvidia/curand/lib/libcurand.so.10");
    let mine: Vec<&Value> = recs
        .iter()
        .filter(|r| r["file"].as_str() == lib.to_str())
        .collect();
    assert_eq!(mine.len(), 2, "{}", common::describe(&out));
    for r in &mine {
        assert_eq!(r["package"], "nvidia-curand-cu12 10.3.10.19", "{r}");
    }
    // sm_35 gets nothing from this build: the first hint names the distribution to change.
    let sm35 = mine.iter().find(|r| r["device"] == "sm_35").unwrap();
    assert_eq!(sm35["status"], "none", "{sm35}");
    assert_eq!(sm35["hints"][0]["kind"], "package");
    assert_eq!(sm35["hints"][0]["value"], "nvidia-curand-cu12 10.3.10.19");
    // The verdicts are those of the library itself.
    let direct = doctor(&[
        lib.as_os_str(),
        "--target".as_ref(),
        "sm_86".as_ref(),
        "--target".as_ref(),
        "sm_35".as_ref(),
    ]);
    let (direct, _) = records(&direct);
    for (a, b) in mine.iter().zip(&direct) {
        assert_eq!(a["status"], b["status"]);
        assert_eq!(a["units_covered"], b["units_covered"]);
    }
}
