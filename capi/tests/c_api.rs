//! The C API from C: the header compiles with `-Wall -Werror`, and a C program that selects
//! images through it gets what `loader-sim select` gets.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// The workspace's target directory for the profile the tests were built with.
fn profile_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is <target>/tmp.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("debug")
}

/// Builds (if needed) the workspace member `package` with the same cargo, so that its
/// static/shared libraries and binaries exist in the target directory.
fn cargo_build(package: &str) {
    let st = Command::new(env!("CARGO"))
        .args(["build", "-p", package])
        .current_dir(repo())
        .status()
        .unwrap();
    assert!(st.success(), "cargo build -p {package}");
}

/// Builds the static library and the C demo against it, once per test binary (the tests
/// run in parallel); returns the demo's path.
fn build_demo() -> PathBuf {
    static DEMO: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DEMO.get_or_init(build_demo_once).clone()
}

fn build_demo_once() -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi");
    std::fs::create_dir_all(&out).unwrap();
    cargo_build("offload-image-capi");
    let lib = profile_dir().join("liboffload_image.a");
    assert!(lib.exists());
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let demo = out.join("select_demo");
    let st = Command::new(&cc)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-O1",
            "-I",
        ])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/select_demo.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&demo)
        .status()
        .unwrap();
    assert!(st.success(), "{cc} -Wall -Werror failed");
    demo
}

fn loader_sim() -> PathBuf {
    cargo_build("loader-sim");
    profile_dir().join("loader-sim")
}

#[test]
fn c_program_selects_what_loader_sim_selects() {
    let demo = build_demo();
    let cli = loader_sim();
    let corpus = repo().join("tests/data/corpus");
    let targets = [
        "gfx90a:sramecc+:xnack+",
        "gfx90a:sramecc-:xnack-",
        "gfx942:sramecc+:xnack-",
        "gfx1030",
        "gfx1100",
    ];
    let mut compared = 0;
    for file in [
        "bundles/hip_6arch.bundle",
        "compressed/hip_6arch.zstd.ccob",
        "bundles/hip_generic.bundle",
        "driver/hip_nonrdc.exe",
        "packager/concat.offbin",
    ] {
        let path = corpus.join(file);
        let c = Command::new(&demo)
            .arg(&path)
            .args(targets)
            .output()
            .unwrap();
        assert!(
            matches!(c.status.code(), Some(0 | 1)),
            "{file}: {}",
            String::from_utf8_lossy(&c.stderr)
        );
        let c_lines: Vec<String> = String::from_utf8(c.stdout)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("truncated-list"))
            .map(str::to_string)
            .collect();
        let mut args = vec![
            "select".to_string(),
            path.to_str().unwrap().to_string(),
            "--json".into(),
        ];
        for t in targets {
            args.push("--target".into());
            args.push(t.into());
        }
        let r = Command::new(&cli).args(&args).output().unwrap();
        assert_eq!(r.status.code(), c.status.code(), "{file}: same exit status");
        let mut expected = Vec::new();
        for line in String::from_utf8(r.stdout).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let target = v["target"].as_str().unwrap();
            let unit = v["bundle_index"].as_u64().unwrap();
            expected.push(match v["selected"].as_str() {
                Some(sel) => format!(
                    "{target} {unit} 1 {} {} {sel}",
                    v["offset"]
                        .as_u64()
                        .map_or("-".to_string(), |o| o.to_string()),
                    v["size"].as_u64().unwrap()
                ),
                None => format!("{target} {unit} 0 - 0 -"),
            });
        }
        expected.sort();
        let mut got = c_lines.clone();
        got.sort();
        assert_eq!(got, expected, "{file}");
        compared += got.len();
    }
    assert!(compared >= 25, "{compared}");
}

#[test]
fn c_program_extracts_bytes_and_reports_errors_with_offsets() {
    let demo = build_demo();
    let corpus = repo().join("tests/data/corpus");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi/extracted.co");
    let r = Command::new(&demo)
        .arg(corpus.join("compressed/hip_6arch.v3-zstd.llvm22.ccob"))
        .args(["gfx942:sramecc+:xnack-", "--extract"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let text = String::from_utf8(r.stdout).unwrap();
    assert!(text.contains("extracted 4048"), "{text}");
    // The bytes LLVM extracts for that entry (manifest: same as the input code object).
    let want = std::fs::read(corpus.join("devobj/saxpy.gfx942_sramecc+_xnack-.co")).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), want);
    // A 100-byte prefix of a CCOB is refused as truncated, at the total-size field.
    assert!(text.contains("truncated-list truncated 8"), "{text}");
}
