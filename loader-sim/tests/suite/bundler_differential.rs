//! `loader-sim offload-bundler` against LLVM 22's `clang-offload-bundler`, byte for byte.
//!
//! A seeded matrix of bundling jobs — file types `o`, `bc`, `ll`, `s`, `i`, `ii`;
//! alignments 1, 8 and 4096; 1–20 entries with random contents and real corpus code
//! objects; with and without a host entry; entries in random order; target IDs in varied
//! spellings — is run through both tools. Every output must be identical, and so must
//! `-list` of it and `-unbundle` for a random set of requested targets (present,
//! compatible-but-different, absent, with and without `-allow-missing-bundles`).

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

/// AMDGPU processors with the features they support.
const AMD: &[(&str, &[&str])] = &[
    ("gfx906", &["sramecc", "xnack"]),
    ("gfx908", &["sramecc", "xnack"]),
    ("gfx90a", &["sramecc", "xnack"]),
    ("gfx942", &["sramecc", "xnack"]),
    ("gfx1030", &[]),
    ("gfx1100", &[]),
    ("gfx1201", &[]),
    ("gfx9-generic", &["xnack"]),
    ("gfx9999", &[]),
];
const NV: &[&str] = &["sm_70", "sm_80", "sm_90a", "sm_100a", "sm_120"];
const AMD_TRIPLES: &[&str] = &[
    "amdgcn-amd-amdhsa-",
    "amdgcn-amd-amdhsa-unknown",
    "amdgcn-amd-amdhsa-gnu",
];
const NV_TRIPLES: &[&str] = &["nvptx64-nvidia-cuda-", "nvptx64-nvidia-cuda-unknown"];
const HOSTS: &[&str] = &[
    "host-x86_64-unknown-linux-gnu",
    "host-x86_64-pc-linux-gnu",
    "host-x86_64--linux-gnu",
    "host-aarch64-unknown-linux-gnu",
];
const DEVICE_FILES: &[&str] = &[
    "devobj/saxpy.gfx906.co",
    "devobj/saxpy.gfx90a_xnack+.co",
    "devobj/saxpy.gfx1030.co",
    "devobj/saxpy.gfx906.bc",
    "devobj/saxpy.sm_80.cubin",
    "devobj/saxpy.sm_70.s",
];
const TEXT_FILES: &[&str] = &[
    "devobj/tiny.x86_64.ll",
    "devobj/tiny.gfx90a.ll",
    "devobj/tiny.x86_64.s",
    "devobj/tiny.gfx906.s",
    "devobj/tiny.x86_64.i",
    "devobj/tiny.amdgcn.i",
];

/// A device target: the spelling passed to `-targets=`, and what it names.
#[derive(Clone)]
struct Target {
    spelled: String,
    kind: &'static str,
    processor: &'static str,
    features: Vec<(String, bool)>,
    amd: bool,
}

fn feature_suffix(features: &[(String, bool)]) -> String {
    features
        .iter()
        .map(|(f, on)| format!(":{f}{}", if *on { '+' } else { '-' }))
        .collect()
}

/// Up to `n` device targets with distinct (kind, processor), so that no two conflict and
/// no two normalise to the same ID.
fn device_targets(rng: &mut Rng, n: usize, hip_only: bool) -> Vec<Target> {
    let kinds: &[&str] = if hip_only {
        &["hip", "hipv4"]
    } else {
        &["hip", "hipv4", "openmp"]
    };
    let mut pool = Vec::new();
    for &k in kinds {
        for (p, fs) in AMD {
            pool.push((k, *p, fs.to_vec(), true));
        }
        if k == "openmp" || rng.chance(30) {
            for p in NV {
                pool.push((k, *p, Vec::new(), false));
            }
        }
    }
    if rng.chance(50) {
        pool.push(("hip", "amdgcnspirv", Vec::new(), false));
    }
    rng.shuffle(&mut pool);
    pool.truncate(n);
    pool.into_iter()
        .map(|(kind, processor, fs, amd)| {
            let mut features: Vec<(String, bool)> = Vec::new();
            for f in &fs {
                if rng.chance(40) {
                    features.push((f.to_string(), rng.chance(50)));
                }
            }
            rng.shuffle(&mut features);
            let triple = if amd {
                rng.pick(AMD_TRIPLES).to_string()
            } else if processor == "amdgcnspirv" {
                "spirv64-amd-amdhsa-".to_string()
            } else {
                rng.pick(NV_TRIPLES).to_string()
            };
            let spelled = format!("{kind}-{triple}-{processor}{}", feature_suffix(&features));
            Target {
                spelled,
                kind,
                processor,
                features,
                amd,
            }
        })
        .collect()
}

/// Contents for an entry of file type `ty`.
fn contents(rng: &mut Rng, ty: &str) -> Vec<u8> {
    let text = matches!(ty, "ll" | "s" | "i" | "ii");
    match rng.below(10) {
        0 => Vec::new(),
        1..=4 => {
            let f = if text {
                rng.pick(TEXT_FILES)
            } else {
                rng.pick(DEVICE_FILES)
            };
            std::fs::read(corpus(f)).unwrap()
        }
        _ if text => rng.text(2000),
        _ => {
            // Random bytes must not look like an ELF object, a bundle or a CCOB.
            let n = rng.range(1, 4000);
            rng.opaque(n)
        }
    }
}

struct Outcome {
    ok: bool,
    out: Option<Vec<u8>>,
    stdout: Vec<u8>,
}

fn compare_run(dir: &Path, args: &[String], outputs: &[String], what: &str) -> bool {
    let run = |ours_run: bool| -> Outcome {
        for o in outputs {
            let _ = std::fs::remove_file(dir.join(o));
        }
        let r = if ours_run {
            run_ours(dir, "offload-bundler", args)
        } else {
            run_in(dir, &llvm("clang-offload-bundler-22"), args)
        };
        let mut all = Vec::new();
        for o in outputs {
            all.extend_from_slice(o.as_bytes());
            all.push(0);
            match read_opt(&dir.join(o)) {
                Some(d) => all.extend_from_slice(&d),
                None => all.extend_from_slice(b"<missing>"),
            }
        }
        assert!(
            r.status.code().is_some(),
            "{what}: {} was killed by a signal: {}",
            if ours_run { "loader-sim" } else { "LLVM" },
            describe(&r)
        );
        Outcome {
            ok: r.status.success(),
            out: r.status.success().then_some(all),
            stdout: r.stdout,
        }
    };
    let l = run(false);
    let o = run(true);
    assert_eq!(
        l.ok, o.ok,
        "{what}: LLVM success={} ours success={}; args {args:?}",
        l.ok, o.ok
    );
    if l.ok {
        assert!(l.out == o.out, "{what}: outputs differ; args {args:?}");
        assert_eq!(
            String::from_utf8_lossy(&l.stdout),
            String::from_utf8_lossy(&o.stdout),
            "{what}: standard output differs; args {args:?}"
        );
    }
    l.ok
}

/// Requests for unbundling a bundle made of `targets` (+ host).
fn requests(rng: &mut Rng, targets: &[Target], host: Option<&str>) -> Vec<String> {
    let mut req: Vec<String> = Vec::new();
    let k = rng.range(1, 4);
    for _ in 0..k {
        match rng.below(5) {
            0 | 1 if !targets.is_empty() => req.push(rng.pick(targets).spelled.clone()),
            2 if !targets.is_empty() => {
                // Same processor, all features given explicitly (compatible when the
                // entry leaves a feature as "any"), possibly under the other HIP kind.
                let t = rng.pick(targets).clone();
                let all: &[&str] = AMD
                    .iter()
                    .find(|(p, _)| *p == t.processor)
                    .map_or(&[], |(_, f)| f);
                let mut fs: Vec<(String, bool)> = all
                    .iter()
                    .map(|f| {
                        let given = t.features.iter().find(|(g, _)| g == f).map(|(_, v)| *v);
                        (f.to_string(), given.unwrap_or_else(|| rng.chance(50)))
                    })
                    .collect();
                fs.sort();
                let kind = match t.kind {
                    "hip" => "hipv4",
                    "hipv4" => "hip",
                    k => k,
                };
                let triple = if t.amd {
                    "amdgcn-amd-amdhsa-"
                } else {
                    "nvptx64-nvidia-cuda-"
                };
                if t.processor != "amdgcnspirv" {
                    req.push(format!(
                        "{kind}-{triple}-{}{}",
                        t.processor,
                        feature_suffix(&fs)
                    ));
                }
            }
            3 => req.push(format!(
                "hip-amdgcn-amd-amdhsa--{}",
                rng.pick(&["gfx803", "gfx1101", "gfx950"])
            )),
            _ => {
                if let Some(h) = host {
                    req.push(h.to_string());
                }
            }
        }
    }
    req.sort();
    req.dedup();
    // At most one host (LLVM refuses more) and no conflicting processor spellings.
    let mut seen_host = false;
    req.retain(|r| {
        if r.starts_with("host-") {
            if seen_host {
                return false;
            }
            seen_host = true;
        }
        true
    });
    let mut procs = std::collections::HashSet::new();
    req.retain(|r| {
        let key = (
            r.split('-').next().unwrap_or("").to_string(),
            r.rsplit('-')
                .next()
                .unwrap_or("")
                .split(':')
                .next()
                .unwrap_or("")
                .to_string(),
        );
        procs.insert(key)
    });
    req
}

/// One bundling job of the matrix, plus `-list` and `-unbundle` of its output.
fn check_bundle_case(rng: &mut Rng, dir: &Path, ty: &str, align: u64, case: usize) -> bool {
    let n = rng.range(1, 20);
    let with_host = rng.chance(70);
    let mut targets = device_targets(rng, if with_host { n - 1 } else { n }, !with_host);
    let host = with_host.then(|| rng.pick(HOSTS).to_string());
    let mut entries: Vec<(String, Vec<u8>)> = targets
        .iter()
        .map(|t| (t.spelled.clone(), contents(rng, ty)))
        .collect();
    if let Some(h) = &host {
        let host_data = if ty == "o" && rng.chance(15) {
            std::fs::read(corpus("devobj/host.x86_64.o")).unwrap()
        } else if rng.chance(50) {
            Vec::new()
        } else {
            contents(rng, ty)
        };
        let at = rng.below(entries.len() + 1);
        entries.insert(at, (h.clone(), host_data));
    }
    if host.is_none() && ty == "o" {
        // The first input decides the handler: an ELF one without a host crashes LLVM
        // (checked separately in `llvm_crashes_are_errors`).
        if entries[0].1.starts_with(b"\x7fELF") {
            entries[0].1 = b"not an object".to_vec();
        }
    }
    let out = format!("c{case}.bundle");
    let mut args = bundling_args(dir, ty, &entries, &format!("c{case}"), &out);
    if align != 1 || rng.chance(30) {
        args.push(format!(
            "{}bundle-align={align}",
            if rng.chance(50) { "--" } else { "-" }
        ));
    }
    let what = format!("type {ty} align {align} case {case}");
    if !compare_run(dir, &args, std::slice::from_ref(&out), &what) {
        return false;
    }
    // -list.
    let list = vec![arg("-list"), format!("-type={ty}"), format!("-input={out}")];
    compare_run(dir, &list, &[], &format!("{what} -list"));
    // -unbundle.
    targets.sort_by(|a, b| a.spelled.cmp(&b.spelled));
    let req = requests(rng, &targets, host.as_deref());
    if req.is_empty() {
        return true;
    }
    let outs: Vec<String> = (0..req.len()).map(|i| format!("c{case}-out{i}")).collect();
    let mut args = vec![
        arg("-unbundle"),
        format!("--type={ty}"),
        format!("-targets={}", req.join(",")),
        format!("-input={out}"),
    ];
    args.extend(outs.iter().map(|o| format!("-output={o}")));
    if rng.chance(40) {
        args.push(arg("-allow-missing-bundles"));
    }
    if rng.chance(20) {
        args.push(arg("-hip-openmp-compatible"));
    }
    compare_run(dir, &args, &outs, &format!("{what} -unbundle"));
    true
}

fn matrix(types: &[&str], seed: u64, cases_per_cell: usize) {
    let dir = TempDir::new("bundle-matrix");
    let mut rng = Rng::new(seed);
    let mut case = 0;
    let mut bundled = 0;
    for ty in types {
        for align in [1u64, 8, 4096] {
            for _ in 0..cases_per_cell {
                if check_bundle_case(&mut rng, &dir.0, ty, align, case) {
                    bundled += 1;
                }
                case += 1;
            }
        }
    }
    // Every generated job is valid for LLVM, so all of them must have been compared.
    assert_eq!(
        bundled, case,
        "only {bundled} of {case} jobs were bundled by LLVM"
    );
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn matrix_object_bundles() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    matrix(&["o"], 0x5eed_0001, 10);
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn matrix_bitcode_bundles() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    matrix(&["bc"], 0x5eed_0002, 10);
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn matrix_text_bundles_ll_s() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    matrix(&["ll", "s"], 0x5eed_0003, 5);
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn matrix_text_bundles_i_ii() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    matrix(&["i", "ii"], 0x5eed_0004, 5);
}

/// Host objects for `-type=o` bundling: corpus objects and objects compiled now with
/// clang-22 (32- and 64-bit, COMDAT groups, debug info, many relocation sections).
fn host_objects(dir: &TempDir) -> Vec<PathBuf> {
    let mut v = vec![
        corpus("devobj/host.x86_64.o"),
        corpus("driver/hip_nonrdc.o"),
        corpus("driver/hip_compress.o"),
        corpus("driver/omp_amd_nv.o"),
        corpus("driver/hip_newdrv_rdc.o"),
    ];
    let src = dir.write(
        "host.cc",
        b"template <class T> T twice(T x) { return x + x; }\n\
          inline int seven() { static int s = 7; return s; }\n\
          struct S { virtual ~S() {} virtual int f() { return seven(); } };\n\
          static int local_counter;\nint global_value = 42;\n\
          extern \"C\" int entry(int x) { S s; local_counter++; return twice(x) + twice(2.0) + s.f(); }\n",
    );
    for (name, flags) in [
        ("h64.o", &["-O1"][..]),
        (
            "h64g.o",
            &["-O0", "-g", "-ffunction-sections", "-fdata-sections"][..],
        ),
        ("h32.o", &["-m32", "-O1", "-g"][..]),
    ] {
        let out = dir.path(name);
        let mut args = vec![arg("-c"), parg(&src), arg("-o"), parg(&out)];
        args.extend(flags.iter().map(|f| f.to_string()));
        let r = run_in(&dir.0, &llvm("clang++-22"), &args);
        assert!(r.status.success(), "clang++-22 failed: {}", describe(&r));
        v.push(out);
    }
    v
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang++-22 and clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn elf_host_objects_match_llvm_objcopy() {
    if !common::external("clang++-22 and clang-offload-bundler-22") {
        return;
    }
    let dir = TempDir::new("elf-hosts");
    let mut rng = Rng::new(0x5eed_0010);
    let hosts = host_objects(&dir);
    for (case, host) in hosts.iter().enumerate() {
        for variant in 0..3 {
            let count = rng.range(1, 6);
            let targets = device_targets(&mut rng, count, false);
            let mut entries: Vec<(String, PathBuf)> = targets
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let p = dir.write(&format!("e{case}-{variant}-{i}"), &contents(&mut rng, "o"));
                    (t.spelled.clone(), p)
                })
                .collect();
            let host_id = rng.pick(HOSTS).to_string();
            entries.insert(
                rng.below(entries.len() + 1),
                (host_id.clone(), host.clone()),
            );
            let out = format!("b{case}-{variant}.o");
            let mut args = vec![
                arg("-type=o"),
                format!(
                    "-targets={}",
                    entries
                        .iter()
                        .map(|(t, _)| t.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            ];
            args.extend(
                entries
                    .iter()
                    .map(|(_, p)| format!("-input={}", p.display())),
            );
            args.push(format!("-output={out}"));
            let what = format!("ELF host {} variant {variant}", host.display());
            assert!(
                compare_run(&dir.0, &args, std::slice::from_ref(&out), &what),
                "{what}: LLVM failed"
            );
            compare_run(
                &dir.0,
                &[arg("-list"), arg("-type=o"), format!("-input={out}")],
                &[],
                &format!("{what} -list"),
            );
            // Unbundle the host (llvm-objcopy --remove-section) and one device entry.
            let dev = &targets[0].spelled;
            let args = vec![
                arg("-unbundle"),
                arg("-type=o"),
                format!("-targets={host_id},{dev}"),
                format!("-input={out}"),
                format!("-output=h{case}-{variant}"),
                format!("-output=d{case}-{variant}"),
            ];
            assert!(
                compare_run(
                    &dir.0,
                    &args,
                    &[format!("h{case}-{variant}"), format!("d{case}-{variant}")],
                    &format!("{what} -unbundle")
                ),
                "{what}: unbundle failed"
            );
        }
    }
}

/// Every corpus bundle: `-list` and `-unbundle` of every listed ID (spelled as listed and
/// without the trailing `-` of empty target IDs) give LLVM 22's bytes.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn corpus_unbundle_and_list() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    let dir = TempDir::new("corpus");
    let files = [
        "bundles/hip_3field.bundle",
        "bundles/hip_6arch.bundle",
        "bundles/hip_align4096.bundle",
        "bundles/hip_bc.bundle",
        "bundles/hip_generic.bundle",
        "bundles/hip_nohost.bundle",
        "bundles/hip_unsorted.bundle",
        "bundles/omp_amd_nv.bundle",
        "bundles/host_elf.bundle.o",
        "compressed/hip_6arch.v1-zstd.ccob",
        "compressed/hip_6arch.v3-zstd.llvm22.ccob",
        "compressed/hip_6arch.zlib.ccob",
        "compressed/hip_6arch.zstd-l19.ccob",
        "compressed/hip_6arch.zstd.ccob",
        "compressed/omp_amd_nv.zstd.ccob",
        "nvptx/omp_nv_cubins.bundle",
        "nvptx/omp_nv_cubins.v3-zstd.llvm22.ccob",
        "driver/hip_rdc.o",
        "text/hip.s.bundle",
        "text/omp.i.bundle",
        "text/omp.ll.bundle",
        "malformed/bundle_size_overflow.bundle",
        "malformed/bundle_trunc_header.bundle",
        "malformed/ccob_bad_hash.ccob",
    ];
    let mut checked = 0;
    for f in files {
        let path = corpus(f);
        let ty = if f.ends_with(".s.bundle") {
            "s"
        } else if f.ends_with(".i.bundle") {
            "i"
        } else if f.ends_with(".ll.bundle") {
            "ll"
        } else {
            "o"
        };
        let list = run_in(
            &dir.0,
            &llvm("clang-offload-bundler-22"),
            &[
                arg("-list"),
                format!("-type={ty}"),
                format!("-input={}", path.display()),
            ],
        );
        compare_run(
            &dir.0,
            &[
                arg("-list"),
                format!("-type={ty}"),
                format!("-input={}", path.display()),
            ],
            &[],
            &format!("{f} -list"),
        );
        let ids: Vec<String> = String::from_utf8_lossy(&list.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        for (i, id) in ids.iter().enumerate() {
            let trimmed = id
                .strip_suffix('-')
                .filter(|t| t.ends_with("gnu") || t.ends_with("linux") || t.ends_with('-'))
                .unwrap_or(id);
            for req in [id.as_str(), trimmed] {
                let out = format!("u{checked}");
                let args = vec![
                    arg("-unbundle"),
                    format!("-type={ty}"),
                    format!("-targets={req}"),
                    format!("-input={}", path.display()),
                    format!("-output={out}"),
                ];
                compare_run(
                    &dir.0,
                    &args,
                    std::slice::from_ref(&out),
                    &format!("{f} entry {i} as {req}"),
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 80, "only {checked} unbundle comparisons ran");
}

/// Heterogeneous device archives (`-type=a`): the corpus archive and archives built now
/// from bundles of bitcode, code objects and cubins, for many requested targets.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22 and llvm-ar-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn archive_unbundling_matches_llvm() {
    if !common::external("clang-offload-bundler-22 and llvm-ar-22") {
        return;
    }
    let dir = TempDir::new("archives");
    let bundler = llvm("clang-offload-bundler-22");
    // Build member bundles with LLVM itself.
    let mk = |name: &str, ty: &str, targets: &[&str], inputs: &[PathBuf]| {
        let mut args = vec![
            format!("-type={ty}"),
            format!("-targets={}", targets.join(",")),
        ];
        args.extend(inputs.iter().map(|p| format!("-input={}", p.display())));
        args.push(format!("-output={name}"));
        let r = run_in(&dir.0, &bundler, &args);
        assert!(r.status.success(), "building {name}: {}", describe(&r));
        dir.path(name)
    };
    let null = dir.write("empty", b"");
    let m1 = mk(
        "dev_co.o",
        "o",
        &[
            "host-x86_64-unknown-linux-gnu",
            "hipv4-amdgcn-amd-amdhsa--gfx906:xnack-",
            "hipv4-amdgcn-amd-amdhsa--gfx906:xnack+",
            "hipv4-amdgcn-amd-amdhsa--gfx1030",
            "openmp-nvptx64-nvidia-cuda--sm_80",
        ],
        &[
            null.clone(),
            corpus("devobj/saxpy.gfx906.co"),
            corpus("devobj/saxpy.gfx90a_xnack+.co"),
            corpus("devobj/saxpy.gfx1030.co"),
            corpus("devobj/saxpy.sm_80.cubin"),
        ],
    );
    let m2 = mk(
        "a_rather_long_member_name_bc.o",
        "bc",
        &[
            "hip-amdgcn-amd-amdhsa--gfx906",
            "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
        ],
        &[
            corpus("devobj/saxpy.gfx906.bc"),
            corpus("devobj/saxpy.gfx90a_xnack+.bc"),
        ],
    );
    let m3 = mk(
        "elfhost.o",
        "o",
        &[
            "host-x86_64-unknown-linux-gnu",
            "openmp-amdgcn-amd-amdhsa--gfx906",
            "openmp-nvptx64-nvidia-cuda--sm_70",
        ],
        &[
            corpus("devobj/host.x86_64.o"),
            corpus("devobj/saxpy.gfx906.co"),
            corpus("devobj/saxpy.sm_70.s"),
        ],
    );
    let plain = dir.write("plain.txt", b"not a bundle\n");
    let ar = dir.path("libmix.a");
    let r = run_in(
        &dir.0,
        &llvm("llvm-ar-22"),
        &[
            arg("rcs"),
            parg(&ar),
            parg(&m1),
            parg(&m2),
            parg(&m3),
            parg(&plain),
        ],
    );
    assert!(r.status.success(), "llvm-ar-22: {}", describe(&r));
    let archives = [corpus("driver/libfat.a"), ar];
    let requests: &[&[&str]] = &[
        &["hip-amdgcn-amd-amdhsa--gfx906"],
        &["hip-amdgcn-amd-amdhsa--gfx906:xnack+"],
        &[
            "hipv4-amdgcn-amd-amdhsa--gfx906:xnack+:sramecc-",
            "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
        ],
        &["openmp-amdgcn-amd-amdhsa--gfx906"],
        &[
            "openmp-nvptx64-nvidia-cuda--sm_80",
            "openmp-nvptx64-nvidia-cuda--sm_70",
        ],
        &[
            "hip-amdgcn-amd-amdhsa--gfx1030",
            "hip-amdgcn-amd-amdhsa--gfx1100",
        ],
    ];
    let mut n = 0;
    for a in &archives {
        for req in requests {
            for extra in [
                &[][..],
                &["-allow-missing-bundles"][..],
                &["-hip-openmp-compatible"][..],
                &["-check-input-archive"][..],
            ] {
                let outs: Vec<String> = (0..req.len()).map(|i| format!("o{n}-{i}.a")).collect();
                let mut args = vec![
                    arg("-unbundle"),
                    arg("-type=a"),
                    format!("-targets={}", req.join(",")),
                    format!("-input={}", a.display()),
                ];
                args.extend(outs.iter().map(|o| format!("-output={o}")));
                args.extend(extra.iter().map(|s| s.to_string()));
                compare_run(
                    &dir.0,
                    &args,
                    &outs,
                    &format!("archive {} {req:?} {extra:?}", a.display()),
                );
                n += 1;
            }
        }
        compare_run(
            &dir.0,
            &[
                arg("-list"),
                arg("-type=a"),
                format!("-input={}", a.display()),
            ],
            &[],
            "archive -list",
        );
    }
}

/// Where LLVM 22 crashes or reads out of bounds, loader-sim reports an error (status 1,
/// the status of every error of LLVM's tools).
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn llvm_crashes_are_errors() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    let dir = TempDir::new("crashes");
    let co = corpus("devobj/saxpy.gfx906.co");
    let b = dir.write("b", b"BB");
    let input_b = format!("-input={}", b.display());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                arg("-type=bc"),
                arg("-bundle-align=0"),
                arg("-targets=host-x86_64-unknown-linux-gnu,hip-amdgcn-amd-amdhsa--gfx906"),
                input_b.clone(),
                input_b.clone(),
            ],
            "bundle-align",
        ),
        (
            vec![
                arg("-type=o"),
                arg("-targets=hip-amdgcn-amd-amdhsa--gfx906"),
                format!("-input={}", co.display()),
            ],
            "without a host",
        ),
        (
            vec![
                arg("-type=bc"),
                arg("-targets=hip-amdgcn-amd-amdhsa--gfx906:xnack"),
                input_b.clone(),
            ],
            "sign",
        ),
        (
            vec![
                arg("-type=bc"),
                arg("-targets=hip-amdgcn-amd-amdhsa--gfx90a:xnack+:xnack-"),
                input_b.clone(),
            ],
            "sign",
        ),
        (
            // Both unknown processors normalise to 'hip-amdgcn-amd-amdhsa--': LLVM 22 writes
            // a bundle whose header and data disagree.
            vec![
                arg("-type=bc"),
                arg("-targets=hip-amdgcn-amd-amdhsa--gfx9999,hip-amdgcn-amd-amdhsa--gfx9998"),
                input_b.clone(),
                input_b.clone(),
            ],
            "corrupt",
        ),
    ];
    for (mut args, expect) in cases {
        args.push(arg("-output=out"));
        let r = run_ours(&dir.0, "offload-bundler", &args);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {}", describe(&r));
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(
            err.starts_with("loader-sim: error: ") && err.contains(expect),
            "{args:?}: {err}"
        );
    }
    // Corrupt bundle headers: LLVM 22 dereferences an uninitialised iterator (SIGSEGV).
    for f in [
        "malformed/bundle_offset_past_end.bundle",
        "malformed/bundle_trunc_data.bundle",
    ] {
        let args = vec![
            arg("-unbundle"),
            arg("-type=o"),
            arg("-targets=hipv4-amdgcn-amd-amdhsa--gfx906"),
            format!("-input={}", corpus(f).display()),
            arg("-output=x"),
        ];
        let l = run_in(&dir.0, &llvm("clang-offload-bundler-22"), &args);
        assert!(
            l.status.code() != Some(0),
            "{f}: LLVM 22 unexpectedly succeeded"
        );
        let r = run_ours(&dir.0, "offload-bundler", &args);
        assert_eq!(r.status.code(), Some(1), "{f}: {}", describe(&r));
        assert!(String::from_utf8_lossy(&r.stderr).contains("malformed bundle header"));
        let list = vec![
            arg("-list"),
            arg("-type=o"),
            format!("-input={}", corpus(f).display()),
        ];
        assert_eq!(
            run_ours(&dir.0, "offload-bundler", &list).status.code(),
            Some(1)
        );
    }
    // Conflicting target IDs: LLVM's error and status.
    let args = vec![arg("-type=bc"), arg("-targets=host-x86_64-unknown-linux-gnu,hip-amdgcn-amd-amdhsa--gfx90a,hip-amdgcn-amd-amdhsa--gfx90a:xnack+"), format!("-input={}", b.display()), format!("-input={}", b.display()), format!("-input={}", b.display()), arg("-output=x")];
    let l = run_in(&dir.0, &llvm("clang-offload-bundler-22"), &args);
    let r = run_ours(&dir.0, "offload-bundler", &args);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(l.status.code(), Some(1));
    let msg = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stderr)
            .split("error: ")
            .nth(1)
            .unwrap_or("")
            .trim()
            .to_string()
    };
    assert_eq!(msg(&l), msg(&r));
    // Missing bundles: exit status 1 with LLVM's message.
    let args = vec![
        arg("-unbundle"),
        arg("-type=o"),
        arg("-targets=hip-amdgcn-amd-amdhsa--gfx803,hip-amdgcn-amd-amdhsa--gfx1101"),
        format!("-input={}", corpus("bundles/hip_6arch.bundle").display()),
        arg("-output=a"),
        arg("-output=b"),
    ];
    let l = run_in(&dir.0, &llvm("clang-offload-bundler-22"), &args);
    let r = run_ours(&dir.0, "offload-bundler", &args);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(msg(&l), msg(&r));
    assert_eq!(
        msg(&r),
        "Can't find bundles for hip-amdgcn-amd-amdhsa--gfx1101 and hip-amdgcn-amd-amdhsa--gfx803"
    );
}

/// The binary behaves as the bundler when invoked as `clang-offload-bundler[-NN]`.
#[test]
fn argv0_dispatch() {
    let dir = TempDir::new("argv0");
    let args = vec![
        arg("--list"),
        arg("--type=o"),
        format!("--input={}", corpus("bundles/hip_6arch.bundle").display()),
    ];
    let expected = run_ours(&dir.0, "offload-bundler", &args);
    assert!(expected.status.success());
    for name in ["clang-offload-bundler", "clang-offload-bundler-22"] {
        let link = dir.path(name);
        std::os::unix::fs::symlink(ours(), &link).unwrap();
        let r = run_in(&dir.0, &link, &args);
        assert!(r.status.success(), "{name}: {}", describe(&r));
        assert_eq!(r.stdout, expected.stdout);
        let e = run_in(&dir.0, &link, &[arg("-type=o")]);
        assert_eq!(e.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&e.stderr).starts_with(&format!("{name}: error: ")));
    }
}

/// LLVM's command-line spellings: `-opt value`, `--opt=value`, the deprecated comma lists
/// `-inputs=`/`-outputs=`, `@response` files; the results match LLVM 22's.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn command_line_spellings() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    let dir = TempDir::new("spellings");
    dir.write("a", b"host");
    dir.write("b", b"device");
    dir.write("rsp", b"-type=bc '-list' -input=d1\n");
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (
            vec![
                arg("-type"),
                arg("bc"),
                arg("-targets"),
                arg("host-x86_64-unknown-linux-gnu,hip-amdgcn-amd-amdhsa--gfx906"),
                arg("-inputs=a,b"),
                arg("-outputs=d1"),
            ],
            vec![arg("d1")],
        ),
        (
            vec![
                arg("--unbundle"),
                arg("--type=bc"),
                arg("--targets=hip-amdgcn-amd-amdhsa--gfx906"),
                arg("--input"),
                arg("d1"),
                arg("--output"),
                arg("d2"),
            ],
            vec![arg("d2")],
        ),
        (vec![arg("@rsp")], vec![]),
        (
            vec![
                arg("-type=bc"),
                arg("-input=a"),
                arg("-inputs=b"),
                arg("-targets=x"),
                arg("-output=z"),
            ],
            vec![],
        ),
    ];
    for (args, outs) in cases {
        compare_run(&dir.0, &args, &outs, &format!("{args:?}"));
    }
}

/// Bundling writes straight from the mapped inputs; when the output is one of the inputs
/// (its file is truncated before the payloads are written) the inputs are read into memory
/// first, so the bundle is still the one LLVM writes from the original input.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn bundling_into_one_of_the_inputs() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    let dir = TempDir::new("bundle-inplace");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let small = b"\x7fELF device".to_vec();
    for (tool, out) in [("llvm", "llvm.out"), ("ours", "ours.out")] {
        let host = dir.write(&format!("{tool}-host"), b"");
        let dev = dir.write(out, &big);
        let dev2 = dir.write(&format!("{tool}-dev2"), &small);
        let args = vec![
            arg("-type=o"),
            arg("-bundle-align=4096"),
            arg("-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx1030"),
            format!("-input={}", parg(&host)),
            format!("-input={}", parg(&dev)),
            format!("-input={}", parg(&dev2)),
            format!("-output={}", parg(&dev)),
        ];
        let o = if tool == "llvm" {
            run_in(
                dir.path("").as_path(),
                &llvm("clang-offload-bundler-22"),
                &args,
            )
        } else {
            run_ours(dir.path("").as_path(), "offload-bundler", &args)
        };
        assert!(o.status.success(), "{tool}: {}", describe(&o));
    }
    let (l, o) = (
        read_opt(&dir.path("llvm.out")).unwrap(),
        read_opt(&dir.path("ours.out")).unwrap(),
    );
    assert!(l.len() > big.len());
    assert_eq!(l, o);
}
