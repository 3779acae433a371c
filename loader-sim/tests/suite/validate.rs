//! `loader-sim validate`: no error on every valid corpus container and on librocrand1, the
//! reader's error (kind and offset) on every malformed file, and a file that triggers each
//! warning and note code — made with LLVM 22's tools wherever they can make it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{corpus, external_lib, json_lines, llvm, loader_sim, TempDir};
use serde_json::Value;

fn validate(files: &[&Path], extra: &[&str]) -> (Option<i32>, Vec<Value>) {
    let mut args: Vec<&std::ffi::OsStr> = vec!["validate".as_ref(), "--json".as_ref()];
    args.extend(extra.iter().map(|s| std::ffi::OsStr::new(*s)));
    args.extend(files.iter().map(|f| f.as_os_str()));
    let out = loader_sim(&args);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), json_lines(&out.stdout))
}

fn codes(findings: &[Value]) -> Vec<&str> {
    findings
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

fn bundler(dir: &TempDir, name: &str, targets: &[&str], inputs: &[&Path]) -> PathBuf {
    let out = dir.path(name);
    let host = dir.write("host.empty", b"");
    let mut cmd = Command::new(llvm("clang-offload-bundler-22"));
    cmd.arg("-type=o").arg(format!(
        "-targets=host-x86_64-unknown-linux-gnu,{}",
        targets.join(",")
    ));
    cmd.arg(format!("-input={}", host.display()));
    for i in inputs {
        cmd.arg(format!("-input={}", i.display()));
    }
    cmd.arg(format!("-output={}", out.display()));
    let st = cmd.status().unwrap();
    assert!(st.success(), "{cmd:?}");
    out
}

fn devobj(name: &str) -> PathBuf {
    corpus(&format!("devobj/{name}"))
}

#[test]
fn valid_corpus_containers_have_no_error_and_malformed_files_their_reader_error() {
    let mut checked = 0;
    for dir in std::fs::read_dir(corpus("")).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let file = file.unwrap().path();
            // What `list` says of the file is what the readers say.
            let listed = loader_sim(&["list".as_ref(), file.as_os_str()]);
            let (code, findings) = validate(&[&file], &[]);
            let errors: Vec<_> = findings
                .iter()
                .filter(|f| f["severity"] == "error")
                .collect();
            if listed.status.success() {
                assert_eq!(code, Some(0), "{}: {findings:?}", file.display());
                assert!(errors.is_empty());
            } else {
                // One error, the reader's: same offset as `list` reports.
                assert_eq!(code, Some(2), "{}", file.display());
                assert_eq!(errors.len(), 1, "{}: {findings:?}", file.display());
                let msg = String::from_utf8(listed.stderr).unwrap();
                let at = format!("at byte {}\n", errors[0]["offset"]);
                assert!(msg.ends_with(&at), "{}: {msg} vs {at}", file.display());
                assert!(errors[0]["message"]
                    .as_str()
                    .is_some_and(|m| msg.contains(m)));
            }
            for f in &findings {
                for key in ["file", "container", "offset", "severity", "code", "message"] {
                    assert!(f.get(key).is_some(), "{key} in {f}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 90, "{checked}");
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs librocrand.so.1 and libcurand.so.10 (scripts/setup.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn real_libraries_of_the_test_set_up_have_no_error() {
    if !common::external("librocrand.so.1 and libcurand.so.10 (scripts/setup.sh)") {
        return;
    }
    let rocrand = external_lib("librocrand.so.1");
    // libcurand of nvidia-curand-cu12 (scripts/fetch-nvidia-libs.sh, run by the set-up).
    let curand = common::external_dir().join("nvidia/libcurand.so.10");
    assert!(
        curand.exists(),
        "{}: run scripts/setup.sh",
        curand.display()
    );
    for lib in [rocrand, curand] {
        let (code, findings) = validate(&[&lib], &[]);
        assert_eq!(code, Some(0), "{}: {findings:?}", lib.display());
        assert!(findings.iter().all(|f| f["severity"] != "error"));
    }
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22 and clang-offload-packager-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn each_warning_code_has_a_file_that_triggers_it() {
    if !common::external("clang-offload-bundler-22 and clang-offload-packager-22") {
        return;
    }
    let dir = TempDir::new("validate");
    let gfx906 = devobj("saxpy.gfx906.co");

    // skipped-bytes: two inputs LLVM 22 gives the same (empty) target ID.
    let a = dir.write("a.bin", &[0xA5; 100]);
    let b = dir.write("b.bin", &[0x5A; 200]);
    let dup = bundler(
        &dir,
        "dup.bundle",
        &[
            "openmp-nvptx64-nvidia-cuda--sm_120f",
            "openmp-nvptx64-nvidia-cuda--sm_121f",
        ],
        &[&a, &b],
    );
    let (code, f) = validate(&[&dup], &[]);
    assert_eq!((code, codes(&f)), (Some(0), vec!["skipped-bytes"]));
    assert_eq!(f[0]["severity"], "warning");
    // Warnings alone exit 0, unless denied.
    let (code, _) = validate(&[&dup], &["--deny-warnings"]);
    assert_eq!(code, Some(2));

    // id-elf-mismatch: an entry ID for gfx90a holding a gfx906 code object.
    let mismatch = bundler(
        &dir,
        "mismatch.bundle",
        &["hipv4-amdgcn-amd-amdhsa--gfx90a"],
        &[&gfx906],
    );
    let (_, f) = validate(&[&mismatch], &[]);
    assert!(codes(&f).contains(&"id-elf-mismatch"), "{f:?}");

    // generic-below-cov6: a gfx9-generic code object with its ABI version set to v5.
    let mut generic = std::fs::read(devobj("saxpy.gfx9-generic.co")).unwrap();
    assert_eq!(generic[8], 4, "code object v6");
    generic[8] = 3;
    let generic = dir.write("gen5.co", &generic);
    let gen5 = bundler(
        &dir,
        "gen5.bundle",
        &["hipv4-amdgcn-amd-amdhsa--gfx9-generic"],
        &[&generic],
    );
    let (_, f) = validate(&[&gen5], &[]);
    assert_eq!(codes(&f), vec!["generic-below-cov6"], "{f:?}");

    // unloadable-elf: a code object for the PAL OS ABI.
    let mut pal = std::fs::read(&gfx906).unwrap();
    pal[7] = 65;
    let pal = dir.write("pal.co", &pal);
    let pal = bundler(
        &dir,
        "pal.bundle",
        &["hipv4-amdgcn-amd-amdhsa--gfx906"],
        &[&pal],
    );
    let (_, f) = validate(&[&pal], &[]);
    assert!(codes(&f).contains(&"unloadable-elf"), "{f:?}");

    // magic-in-payload: a code object followed by "CCOB", at the offset where it stands (a
    // payload that is not a code object would be `not-code-object` too).
    let mut payload = std::fs::read(devobj("saxpy.gfx90a.co")).unwrap();
    payload.extend_from_slice(b"CCOB");
    payload.extend_from_slice(&[b'y'; 100]);
    let magic_input = dir.write("magic.bin", &payload);
    let magic = bundler(
        &dir,
        "magic.bundle",
        &["hipv4-amdgcn-amd-amdhsa--gfx90a"],
        &[&magic_input],
    );
    let (_, f) = validate(&[&magic], &[]);
    assert_eq!(codes(&f), vec!["magic-in-payload"], "{f:?}");
    let data = std::fs::read(&magic).unwrap();
    let at = f[0]["offset"].as_u64().unwrap() as usize;
    assert_eq!(&data[at..at + 4], b"CCOB");

    // bundle-header-over-4k: every processor with every feature combination, about 100
    // entries and 6 KB of descriptors.
    use offload_image::arch::amdgpu::{Feature, Processor};
    let mut targets = Vec::new();
    let mut inputs = Vec::new();
    for p in Processor::all().iter().filter(|p| !p.is_generic()) {
        let states = |f: Feature| -> Vec<&str> {
            if p.support(f).is_selectable() {
                vec!["+", "-"]
            } else {
                vec![""]
            }
        };
        for s in states(Feature::Sramecc) {
            for x in states(Feature::Xnack) {
                let mut id = format!("hipv4-amdgcn-amd-amdhsa--{}", p.name);
                if !s.is_empty() {
                    id.push_str(&format!(":sramecc{s}"));
                }
                if !x.is_empty() {
                    id.push_str(&format!(":xnack{x}"));
                }
                inputs.push(dir.write(&format!("in{}.bin", targets.len()), &[7; 16]));
                targets.push(id);
            }
        }
    }
    assert!(targets.len() > 70, "{}", targets.len());
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let big = bundler(&dir, "big.bundle", &targets, &inputs);
    let (_, f) = validate(&[&big], &[]);
    assert!(codes(&f).contains(&"bundle-header-over-4k"), "{f:?}");

    // id-spelling: a legacy 3-field ID (LLVM's bundlers normalise these to 4 fields, so
    // the bundle is written by hand).
    let three = hand_bundle(&[
        ("host-x86_64-unknown-linux-gnu", Vec::new()),
        (
            "hip-amdgcn-amd-amdhsa-gfx906",
            std::fs::read(&gfx906).unwrap(),
        ),
    ]);
    let three = dir.write("three.bundle", &three);
    let (code, f) = validate(&[&three], &[]);
    assert_eq!((code, codes(&f)), (Some(0), vec!["id-spelling"]), "{f:?}");

    // runtimes-differ: an OffloadBinary (clang-offload-packager-22) whose first image fits
    // every gfx90a while the second matches xnack- exactly: the LLVM offload runtime takes
    // the first, the ranking the exact one.
    let ob = dir.path("differ.offbin");
    let st = Command::new(llvm("clang-offload-packager-22"))
        .arg("-o")
        .arg(&ob)
        .arg(format!(
            "--image=file={},triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=openmp",
            devobj("saxpy.gfx90a.co").display()
        ))
        .arg(format!(
            "--image=file={},triple=amdgcn-amd-amdhsa,arch=gfx90a:xnack-,kind=openmp",
            devobj("saxpy.gfx90a_xnack-.co").display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let (code, f) = validate(&[&ob], &[]);
    assert_eq!(code, Some(0));
    assert!(
        !f.is_empty()
            && f.iter()
                .all(|x| x["code"] == "runtimes-differ" && x["severity"] == "note")
    );
    assert!(f
        .iter()
        .all(|x| x["message"].as_str().unwrap().contains("xnack-")));

    // Several files in one run: findings of each, errors decide the exit status.
    let bad = corpus("malformed/ccob_bad_hash.ccob");
    let (code, f) = validate(&[&dup, &bad], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(codes(&f), vec!["skipped-bytes", "hash-mismatch"]);
}

/// The four kinds of damage of issue 23, each one edit of the corpus's `hip_6arch.bundle`
/// (LLVM's bundler made it): the code, severity and offset of its finding and the exit
/// status. What LLVM 22's bundler and comgr do with them: `tests/suite/validate_damage.rs`.
#[test]
fn damage_the_runtime_or_llvm_trips_over_has_its_finding_and_exit_status() {
    let dir = TempDir::new("validate-damage");
    let real = std::fs::read(corpus("bundles/hip_6arch.bundle")).unwrap();
    let put = |d: &mut Vec<u8>, at: usize, v: u64| d[at..at + 8].copy_from_slice(&v.to_le_bytes());
    // Entry 1 is gfx906: descriptor at 86, payload at 448 (3024 bytes); entry 2's payload
    // starts at 3472; entry 6 (the last) has its descriptor at 392.
    assert_eq!(
        &real[86 + 24..86 + 24 + 31],
        b"hipv4-amdgcn-amd-amdhsa--gfx906"
    );
    assert_eq!(&real[448..452], b"\x7fELF");
    assert_eq!(u64::from_le_bytes(real[141..149].try_into().unwrap()), 3472);
    let mut not_elf = real.clone();
    not_elf[448..452].fill(0);
    let mut kind = real.clone();
    kind[86 + 24 + 5] = b'X';
    let mut overlap = real.clone();
    put(&mut overlap, 86 + 8, 3472 - 448 + 1024);
    let mut empty = real.clone();
    put(&mut empty, 392 + 16, 0);
    for (name, bytes, code, severity, offset, status) in [
        ("not_elf", not_elf, "not-code-object", "error", 448, 2),
        ("kind", kind, "unknown-offload-kind", "warning", 86, 0),
        (
            "overlap",
            overlap,
            "overlapping-entries",
            "warning",
            3472,
            0,
        ),
        ("empty", empty, "empty-entry-id", "warning", 392, 0),
    ] {
        let file = dir.write(&format!("{name}.bundle"), &bytes);
        let (got, f) = validate(&[&file], &[]);
        assert_eq!(codes(&f), vec![code], "{name}: {f:?}");
        assert_eq!(
            (f[0]["severity"].as_str(), f[0]["offset"].as_u64()),
            (Some(severity), Some(offset))
        );
        assert_eq!(got, Some(status), "{name}");
        let (denied, _) = validate(&[&file], &["--deny-warnings"]);
        assert_eq!(denied, Some(2), "{name}");
    }
}

/// A binary bundle of (entry ID, payload), payloads back to back after the table.
fn hand_bundle(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut b = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    b.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let mut at = 32
        + entries
            .iter()
            .map(|(id, _)| 24 + id.len() as u64)
            .sum::<u64>();
    for (id, data) in entries {
        b.extend_from_slice(&at.to_le_bytes());
        b.extend_from_slice(&(data.len() as u64).to_le_bytes());
        b.extend_from_slice(&(id.len() as u64).to_le_bytes());
        b.extend_from_slice(id.as_bytes());
        at += data.len() as u64;
    }
    for (_, data) in entries {
        b.extend_from_slice(data);
    }
    b
}
