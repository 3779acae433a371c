//! The C API from C and C++: the header compiles with `-Wall -Werror` (C11 `-pedantic`,
//! C++17), programs that select images through the reader handle get what
//! `loader-sim select` gets, and the bytes they are handed have the SHA-256 that
//! `loader-sim list` and the corpus manifest (clang-offload-bundler, clang-offload-packager)
//! give. The reader programs are built against an installation made by `capi/install.sh`:
//! the C one linked with the static library, the C++ one with the shared library.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::common;

pub(crate) fn repo() -> PathBuf {
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
    compile_c_demo("tests/select_demo.c", "select_demo")
}

/// Compiles the C program `source` (relative to this crate) with `-std=c11 -Wall -Wextra
/// -Werror -pedantic` against the static library; returns the program's path.
pub(crate) fn compile_c_demo(source: &str, name: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi");
    std::fs::create_dir_all(&out).unwrap();
    cargo_build("offload-image-capi");
    let lib = profile_dir().join("liboffload_image.a");
    assert!(lib.exists());
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let demo = out.join(name);
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
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(source))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&demo)
        .status()
        .unwrap();
    assert!(st.success(), "{cc} -Wall -Werror failed on {source}");
    demo
}

pub(crate) fn loader_sim() -> PathBuf {
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

// ---- the reader programs ----------------------------------------------------------------

/// Installs the C API with `capi/install.sh` into a directory of the target dir, once.
fn installed() -> PathBuf {
    static PREFIX: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PREFIX
        .get_or_init(|| {
            cargo_build("offload-image-capi");
            let prefix = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi/prefix");
            let _ = std::fs::remove_dir_all(&prefix);
            let st = Command::new("bash")
                .arg(repo().join("capi/install.sh"))
                .arg("--prefix")
                .arg(&prefix)
                .args(["--debug", "--no-build"])
                .env("CARGO_TARGET_DIR", profile_dir().parent().unwrap())
                .status()
                .unwrap();
            assert!(st.success(), "capi/install.sh");
            prefix
        })
        .clone()
}

/// `pkg-config ARGS offload_image` against the installation.
fn pkg_config(prefix: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("offload_image")
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config (scripts/setup.sh installs it)");
    assert!(out.status.success(), "pkg-config {args:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn compile(compiler: &str, std: &str, pedantic: bool, source: &Path, link: &[String], out: &Path) {
    let prefix = installed();
    let mut cmd = Command::new(compiler);
    cmd.args([std, "-Wall", "-Wextra", "-Werror", "-O1"]);
    if pedantic {
        cmd.arg("-pedantic");
    }
    cmd.args(pkg_config(&prefix, &["--cflags"]))
        .arg(source)
        .args(link)
        .arg("-o")
        .arg(out);
    let st = cmd.status().unwrap();
    assert!(
        st.success(),
        "{compiler} {std} -Wall -Wextra -Werror {}",
        source.display()
    );
}

/// The C reader program, linked with the installed static library.
fn reader_c() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let prefix = installed();
        // `--static --libs` gives -L, -loffload_image and the system libraries the static
        // library needs; -Bstatic makes the linker take the .a over the .so.
        let link: Vec<String> = pkg_config(&prefix, &["--static", "--libs"])
            .into_iter()
            .flat_map(|a| {
                if a == "-loffload_image" {
                    vec!["-Wl,-Bstatic".into(), a, "-Wl,-Bdynamic".into()]
                } else {
                    vec![a]
                }
            })
            .collect();
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi/reader_demo_c");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/reader_demo.c");
        compile(&cc, "-std=c11", true, &src, &link, &out);
        out
    })
    .clone()
}

/// The C++ reader program, linked with the installed shared library (found by rpath).
fn reader_cpp() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let prefix = installed();
        let mut link = pkg_config(&prefix, &["--libs"]);
        link.push(format!("-Wl,-rpath,{}", prefix.join("lib").display()));
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi/reader_demo_cpp");
        let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cpp/reader_demo.cpp");
        compile(&cxx, "-std=c++17", true, &src, &link, &out);
        out
    })
    .clone()
}

/// What a reader program printed.
#[derive(Debug, PartialEq)]
struct Run {
    status: Option<i32>,
    /// (index in container, compression, location) per unit.
    units: Vec<(u64, u32, String)>,
    /// (decode passes, decoded bytes, held bytes) by phase.
    stats: HashMap<String, (u64, u64, u64)>,
    /// (unit, target, name, offset, size, image) per unit and target.
    selects: Vec<Vec<String>>,
    /// (i, unit, index, name, offset, size, offload kind, triple, target, kind) per image.
    images: Vec<Vec<String>>,
    text: String,
}

fn run_reader(program: &Path, file: &Path, out: &Path, targets: &[&str]) -> Run {
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out).unwrap();
    let r = Command::new(program)
        .arg(file)
        .arg(out)
        .args(targets)
        .output()
        .unwrap();
    assert!(
        matches!(r.status.code(), Some(0 | 1)),
        "{} {}: {}",
        program.display(),
        file.display(),
        String::from_utf8_lossy(&r.stderr)
    );
    let text = String::from_utf8(r.stdout).unwrap();
    let mut run = Run {
        status: r.status.code(),
        units: Vec::new(),
        stats: HashMap::new(),
        selects: Vec::new(),
        images: Vec::new(),
        text: text.clone(),
    };
    for line in text.lines() {
        let f: Vec<String> = line.split('\t').map(str::to_string).collect();
        match f[0].as_str() {
            "unit" => run
                .units
                .push((f[2].parse().unwrap(), f[3].parse().unwrap(), f[4].clone())),
            "stats" => {
                run.stats.insert(
                    f[1].clone(),
                    (
                        f[2].parse().unwrap(),
                        f[3].parse().unwrap(),
                        f[4].parse().unwrap(),
                    ),
                );
            }
            "select" => run.selects.push(f[1..].to_vec()),
            "image" => run.images.push(f[1..].to_vec()),
            other => panic!("unexpected line {other:?}"),
        }
    }
    run
}

fn sha256_file(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) fn json_lines(bytes: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn manifest() -> Vec<serde_json::Value> {
    json_lines(&std::fs::read(repo().join("tests/data/corpus/MANIFEST.jsonl")).unwrap())
}

fn opt_str(v: &serde_json::Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

fn opt_num(v: &serde_json::Value) -> String {
    v.as_u64().map_or("-".to_string(), |n| n.to_string())
}

/// The reader programs against loader-sim and the manifest, on bundles, compressed
/// bundles (top level and in an executable's `.hip_fatbin`), OffloadBinaries and
/// executables, for AMD and NVIDIA devices at once.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs c++ (g++) and pkg-config (scripts/setup.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn reader_programs_agree_with_loader_sim_and_the_manifest() {
    if !common::external("c++ (g++) and pkg-config (scripts/setup.sh)") {
        return;
    }
    let cli = loader_sim();
    let c = reader_c();
    let cpp = reader_cpp();
    let corpus = repo().join("tests/data/corpus");
    let manifest = manifest();
    let targets = [
        "gfx90a:sramecc+:xnack+",
        "gfx90a:sramecc-:xnack-",
        "gfx942:sramecc+:xnack-",
        "gfx1030",
        "gfx1100",
        "sm_80",
        "sm_90",
    ];
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi/reader");
    let (mut selections, mut hashes, mut ccob_files) = (0, 0, 0);
    for file in [
        "bundles/hip_6arch.bundle",
        "bundles/omp_amd_nv.bundle",
        "compressed/hip_6arch.zstd.ccob",
        "compressed/hip_6arch.zlib.ccob",
        "compressed/hip_6arch.v3-zstd.llvm22.ccob",
        "compressed/omp_amd_nv.zstd.ccob",
        "driver/hip_compress.exe",
        "driver/hip_nonrdc.exe",
        "packager/concat.offbin",
        "nvptx/cuda_cubins.offbin",
        // NVIDIA fatbinaries: a bare one, and two in `.nv_fatbin` of an nvcc-built library
        // with a zstd-compressed PTX entry (tests/data/nvfatbin).
        "nvptx/saxpy3.fatbin",
        "../nvfatbin/files/libk.so",
    ] {
        let path = corpus.join(file);
        let out_c = tmp.join("c");
        let got = run_reader(&c, &path, &out_c, &targets);
        let out_cpp = tmp.join("cpp");
        let got_cpp = run_reader(&cpp, &path, &out_cpp, &targets);
        assert_eq!(got.text, got_cpp.text, "{file}: C and C++ print the same");
        assert_eq!(got.status, got_cpp.status, "{file}");

        // The choices are loader-sim's (records: unit-major, then target).
        let mut args = vec![
            "select".to_string(),
            path.to_str().unwrap().into(),
            "--json".into(),
        ];
        for t in targets {
            args.extend(["--target".to_string(), t.to_string()]);
        }
        let r = Command::new(&cli).args(&args).output().unwrap();
        assert_eq!(r.status.code(), got.status, "{file}: same exit status");
        let expected = json_lines(&r.stdout);
        assert_eq!(expected.len(), got.selects.len(), "{file}");
        for (want, sel) in expected.iter().zip(&got.selects) {
            let unit: usize = sel[0].parse().unwrap();
            let (index, _, location) = &got.units[unit];
            assert_eq!(want["container"].as_str().unwrap(), location, "{file}");
            assert_eq!(want["bundle_index"].as_u64().unwrap(), *index, "{file}");
            assert_eq!(want["target"].as_str().unwrap(), sel[1], "{file}");
            assert_eq!(
                want["selected"].as_str().unwrap_or("-"),
                sel[2],
                "{file} {}",
                sel[1]
            );
            assert_eq!(opt_num(&want["offset"]), sel[3], "{file} {}", sel[1]);
            assert_eq!(opt_num(&want["size"]), sel[4], "{file} {}", sel[1]);
            selections += 1;
        }

        // Every image is loader-sim list's, with the same bytes.
        let r = Command::new(&cli)
            .args(["list", path.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        assert!(r.status.success(), "{file}");
        let listed = json_lines(&r.stdout);
        assert_eq!(listed.len(), got.images.len(), "{file}");
        let mut sha_of = Vec::new();
        for (i, (want, img)) in listed.iter().zip(&got.images).enumerate() {
            assert_eq!(img[0], i.to_string());
            let unit: usize = img[1].parse().unwrap();
            assert_eq!(want["bundle_index"].as_u64().unwrap(), got.units[unit].0);
            if let Some(id) = want["entry_id"].as_str() {
                assert_eq!(id, img[3], "{file} image {i}");
            }
            assert_eq!(opt_num(&want["offset"]), img[4], "{file} image {i}");
            assert_eq!(want["size"].as_u64().unwrap().to_string(), img[5]);
            if let Some(kind) = want["offload_kind"].as_str() {
                assert_eq!(kind, img[6], "{file} image {i}");
            }
            assert_eq!(opt_str(&want["triple"]), img[7], "{file} image {i}");
            assert_eq!(opt_str(&want["target_id"]), img[8], "{file} image {i}");
            let sha = sha256_file(&out_c.join(format!("img-{i}.bin")));
            assert_eq!(want["sha256"].as_str().unwrap(), sha, "{file} image {i}");
            assert_eq!(sha, sha256_file(&out_cpp.join(format!("img-{i}.bin"))));
            sha_of.push((img[3].clone(), sha));
            hashes += 1;
        }
        // The chosen bytes are those images' bytes.
        for (k, sel) in got.selects.iter().enumerate() {
            if sel[5] != "-" {
                let image: usize = sel[5].parse().unwrap();
                let t = k % targets.len();
                let sha = sha256_file(&out_c.join(format!("sel-{}-{t}.bin", sel[0])));
                assert_eq!(sha, sha_of[image].1, "{file} {}", sel[1]);
                assert_eq!(
                    sha,
                    sha256_file(&out_cpp.join(format!("sel-{}-{t}.bin", sel[0])))
                );
            }
        }
        // ... and those of LLVM's tools (manifest: clang-offload-bundler -unbundle,
        // clang-offload-packager).
        for rec in manifest.iter().filter(|m| m["file"] == file) {
            let name = match rec["record"].as_str() {
                Some("entry") => rec["entry_id"].as_str().unwrap().to_string(),
                // PTX is named by its virtual architecture (`Image::name`: compute_70 for
                // the PTX of sm_70, as NVIDIA's tools write it).
                Some("image") if rec["image_kind"] == "ptx" => format!(
                    "{}--{}",
                    opt_str(&rec["triple"]),
                    opt_str(&rec["arch"]).replacen("sm_", "compute_", 1)
                ),
                Some("image") => format!("{}--{}", opt_str(&rec["triple"]), opt_str(&rec["arch"])),
                _ => continue,
            };
            let sha = rec["sha256"].as_str().unwrap();
            assert!(
                sha_of.iter().any(|(n, s)| *n == name && s == sha),
                "{file}: {name} with sha256 {sha}"
            );
            hashes += 1;
        }

        // Decode once: a selection streams each compressed bundle once for all targets and
        // holds only the chosen images; handing them out decodes nothing more; listing
        // decompresses each bundle whole once more.
        let ccob: Vec<u64> = manifest
            .iter()
            .filter(|m| m["file"] == file && m["ccob_uncompressed_size"].is_u64())
            .filter(|m| m["record"] == "file" || m["payload"] == "ccob")
            .map(|m| m["ccob_uncompressed_size"].as_u64().unwrap())
            .collect();
        let compressed_units = got.units.iter().filter(|u| u.1 != 0).count();
        assert_eq!(ccob.len(), compressed_units, "{file}");
        let decoded: u64 = ccob.iter().sum();
        let passes = ccob.len() as u64;
        let mut kept: Vec<(usize, u64)> = got
            .selects
            .iter()
            .filter(|s| s[5] != "-" && got.units[s[0].parse::<usize>().unwrap()].1 != 0)
            .map(|s| (s[5].parse().unwrap(), s[4].parse().unwrap()))
            .collect();
        kept.sort();
        kept.dedup();
        let held: u64 = kept.iter().map(|k| k.1).sum();
        assert_eq!(
            got.stats["open"],
            (0, 0, 0),
            "{file}: opening decodes nothing"
        );
        assert_eq!(
            got.stats["select"],
            (passes, decoded, held),
            "{file}: one pass"
        );
        assert_eq!(
            got.stats["data"], got.stats["select"],
            "{file}: no decoding for data"
        );
        assert_eq!(
            got.stats["list"],
            (2 * passes, 2 * decoded, held + decoded),
            "{file}: listing decompresses once more"
        );
        if passes > 0 {
            assert!(held < decoded, "{file}: only chosen images kept");
            ccob_files += 1;
        }
    }
    assert!(selections >= 60, "{selections}");
    assert!(hashes >= 60, "{hashes}");
    assert_eq!(ccob_files, 5);
}

/// The shared library carries its soname, so programs depend on liboffload_image.so.0.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs c++ (g++), pkg-config and readelf (scripts/setup.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn cpp_program_depends_on_the_versioned_shared_library() {
    if !common::external("c++ (g++), pkg-config and readelf (scripts/setup.sh)") {
        return;
    }
    let cpp = reader_cpp();
    let out = Command::new("readelf")
        .arg("-d")
        .arg(&cpp)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Shared library: [liboffload_image.so.0]"),
        "{text}"
    );
}

/// `oi_validate` from C reports what `loader-sim validate --json` reports: the same
/// findings (severity, code, offset) in the same order, and an error status for a
/// malformed file.
#[test]
fn c_validate_reports_what_loader_sim_validate_reports() {
    let demo = compile_c_demo("tests/c/validate_demo.c", "validate_demo");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi");
    let corpus = repo().join("tests/data/corpus");
    // A file with a warning (LLVM 22's duplicate-ID bundle has skipped bytes; here a
    // bundle followed by bytes that are not a container), a note, a clean file, errors.
    let mut skipped = std::fs::read(corpus.join("bundles/hip_6arch.bundle")).unwrap();
    skipped.extend_from_slice(b"\0\0not a container");
    let skipped_path = out.join("skipped.bundle");
    std::fs::write(&skipped_path, &skipped).unwrap();
    let files: Vec<PathBuf> = vec![
        skipped_path,
        corpus.join("bundles/hip_6arch.bundle"),
        corpus.join("driver/hip_compress.exe"),
        corpus.join("malformed/ccob_bad_hash.ccob"),
        corpus.join("malformed/bundle_offset_past_end.bundle"),
    ];
    let c = Command::new(&demo).args(&files).output().unwrap();
    assert_eq!(
        c.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&c.stderr)
    );
    let cli = Command::new(loader_sim())
        .arg("validate")
        .arg("--json")
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(cli.status.code(), Some(2));
    let want: Vec<String> = String::from_utf8(cli.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!(
                "{} {} {} {}",
                v["file"].as_str().unwrap(),
                v["severity"].as_str().unwrap(),
                v["code"].as_str().unwrap(),
                v["offset"]
            )
        })
        .collect();
    let got: Vec<String> = String::from_utf8(c.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, want);
    assert!(got.iter().any(|l| l.contains(" warning skipped-bytes ")));
    assert!(got.iter().any(|l| l.contains(" error hash-mismatch 16")));
}
