//! `select` against the CUDA driver itself: every record of the driver oracle (fatbinaries
//! whose entries each hold a kernel of their own name, and the entry NVIDIA's driver 580.159.04
//! loaded on an H200, or its error, also under `CUDA_FORCE_PTX_JIT=1` and
//! `CUDA_DISABLE_PTX_JIT=1`) is reproduced by `select --target sm_90 --nvidia-driver
//! 580.159.04` in the same environment: the entry the driver loaded (told by the kernel name
//! in the bytes `-o` writes), or no image and exit status 1 where the driver refused.
//!
//! The oracle is walked where it is kept: the copy in `tests/data/cuda-driver/` (its README
//! says how it was recorded) and, when present, `shared/oracle/cuda-driver/` beside the
//! repository, or the folder `OFFLOAD_IMAGE_CUDA_ORACLE` names: cases recorded the same way
//! that this repository has never seen.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The driver the records were made with.
const DRIVER: &str = "580.159.04";

/// The folders of records to walk: the recorded oracle, the random cases recorded the same
/// way (`tests/data/cuda-driver-random/README.md`), and the shared copy.
fn oracles() -> Vec<PathBuf> {
    let repo = common::repo();
    let mut out = vec![
        repo.join("tests/data/cuda-driver"),
        repo.join("tests/data/cuda-driver-random"),
    ];
    let shared = match std::env::var_os("OFFLOAD_IMAGE_CUDA_ORACLE") {
        Some(dir) => PathBuf::from(dir),
        None => repo.join("../shared/oracle/cuda-driver"),
    };
    if shared.join("cases.jsonl").is_file() {
        out.push(shared);
    }
    out
}

/// True when `bytes` hold the kernel name `name` as a whole identifier.
fn holds_kernel(bytes: &[u8], name: &str) -> bool {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let name = name.as_bytes();
    bytes.windows(name.len()).enumerate().any(|(at, w)| {
        w == name
            && (at == 0 || !ident(bytes[at - 1]))
            && bytes.get(at + name.len()).is_none_or(|&b| !ident(b))
    })
}

/// One record: runs `select` on `file` with `env` and compares with `driver`'s answer.
/// `None` when they agree, else what differs.
fn check(
    dir: &Path,
    case: &Value,
    file: &Path,
    env: &[(&str, &str)],
    driver: &Value,
    pool: &Value,
    scratch: &Path,
) -> Option<String> {
    let out_file = scratch.join("chosen.bin");
    let _ = std::fs::remove_file(&out_file);
    let mut cmd = Command::new(common::ours());
    cmd.args([
        "select",
        "--target",
        "sm_90",
        "--nvidia-driver",
        DRIVER,
        "--json",
        "-o",
    ])
    .arg(&out_file)
    .arg(file)
    .env_remove("CUDA_FORCE_PTX_JIT")
    .env_remove("CUDA_DISABLE_PTX_JIT")
    .env_remove("CUDA_CACHE_DISABLE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run loader-sim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let record: Option<Value> = stdout
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok());
    let code = out.status.code();
    let what = format!(
        "{} case {} {:?} {env:?}",
        dir.display(),
        case["case"],
        case["entries_in_order"]
    );
    match driver["loaded"].as_str() {
        None => {
            // Refused (209, 222 or 223): no image, exit status 1.
            let selected = record.as_ref().map(|r| r["selected"].clone());
            (code != Some(1) || selected.is_some_and(|s| !s.is_null())).then(|| {
                format!(
                    "{what}: the driver refused ({}), select exited {code:?}: {stdout}",
                    driver
                )
            })
        }
        Some(label) => {
            if code != Some(0) {
                return Some(format!(
                    "{what}: the driver loaded {label}, select exited {code:?}: {stdout}{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let bytes = std::fs::read(&out_file).unwrap_or_default();
            let kernel = pool[label]["kernel"].as_str().expect("pool kernel name");
            let others: Vec<&str> = case["entries_in_order"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| pool[l.as_str().unwrap()]["kernel"].as_str().unwrap())
                .filter(|k| *k != kernel && holds_kernel(&bytes, k))
                .collect();
            (!holds_kernel(&bytes, kernel) || !others.is_empty()).then(|| {
                format!("{what}: the driver loaded {label} ({kernel}), select chose {stdout} holding {others:?}")
            })
        }
    }
}

#[test]
fn select_reproduces_every_recorded_driver_load() {
    let scratch = common::TempDir::new("cuda-driver");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for dir in oracles() {
        let pool: Value =
            serde_json::from_slice(&std::fs::read(dir.join("pool.json")).unwrap()).unwrap();
        let cases = std::fs::read_to_string(dir.join("cases.jsonl")).unwrap();
        for line in cases.lines().filter(|l| !l.trim().is_empty()) {
            let case: Value = serde_json::from_str(line).unwrap();
            let file = dir.join(case["file"].as_str().unwrap());
            let runs: [(&str, &[(&str, &str)]); 4] = [
                ("driver", &[]),
                (
                    "driver_CUDA_FORCE_PTX_JIT_1",
                    &[("CUDA_FORCE_PTX_JIT", "1")],
                ),
                (
                    "driver_CUDA_DISABLE_PTX_JIT_1",
                    &[("CUDA_DISABLE_PTX_JIT", "1")],
                ),
                (
                    "driver_CUDA_DISABLE_PTX_JIT_1_no_cache",
                    &[("CUDA_DISABLE_PTX_JIT", "1"), ("CUDA_CACHE_DISABLE", "1")],
                ),
            ];
            for (key, env) in runs {
                let Some(driver) = case.get(key).filter(|d| !d.is_null()) else {
                    continue;
                };
                checked += 1;
                if let Some(why) = check(&dir, &case, &file, env, driver, &pool, &scratch.0) {
                    wrong.push(why);
                }
            }
        }
    }
    // The repository's copies alone hold 2,112 records: 208 and 320 fatbinaries, each in
    // four runs (recorded again, with the fourth, on 2026-11-28).
    assert!(checked >= 2112, "only {checked} records walked");
    assert!(
        wrong.is_empty(),
        "{} of {checked} records differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// An empty JIT cache cannot be seen in a file, so `select` under `CUDA_DISABLE_PTX_JIT`
/// says when its pick loads only from the cache: the driver with an empty cache
/// (`driver_CUDA_DISABLE_PTX_JIT_1_cold_cache`) failed with 223 exactly where that note
/// stands, and loaded what it loads with a filled cache everywhere else.
#[test]
fn an_empty_jit_cache_fails_where_select_says_the_cache_is_needed() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    let repo = common::repo();
    for dir in [
        repo.join("tests/data/cuda-driver"),
        repo.join("tests/data/cuda-driver-random"),
    ] {
        let cases = std::fs::read_to_string(dir.join("cases.jsonl")).unwrap();
        for line in cases.lines().filter(|l| !l.trim().is_empty()) {
            let case: Value = serde_json::from_str(line).unwrap();
            let (Some(cold), Some(warm)) = (
                case.get("driver_CUDA_DISABLE_PTX_JIT_1_cold_cache"),
                case.get("driver_CUDA_DISABLE_PTX_JIT_1"),
            ) else {
                continue;
            };
            let out = Command::new(common::ours())
                .args([
                    "select",
                    "--target",
                    "sm_90",
                    "--nvidia-driver",
                    DRIVER,
                    "--json",
                ])
                .arg(dir.join(case["file"].as_str().unwrap()))
                .env_remove("CUDA_FORCE_PTX_JIT")
                .env_remove("CUDA_CACHE_DISABLE")
                .env("CUDA_DISABLE_PTX_JIT", "1")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let record: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
            let needs_cache = record["runtime_note"]
                .as_str()
                .is_some_and(|n| n.contains("JIT cache"));
            let expected = if needs_cache {
                serde_json::json!({"cuda_error": 223})
            } else {
                warm.clone()
            };
            checked += 1;
            if *cold != expected {
                wrong.push(format!(
                    "{} case {}: cold cache {cold}, select says {stdout}",
                    dir.display(),
                    case["case"]
                ));
            }
        }
    }
    assert_eq!(checked, 528);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The reason a user reads names the cause, the driver and what it compiles; the driver
/// does not fall back to the older PTX beside it (record 20: `compute_90` at ISA 9.1, then
/// `compute_86` at 8.8, refused with 222).
#[test]
fn a_refused_ptx_names_its_isa_and_the_driver() {
    let file = common::repo().join("tests/data/cuda-driver/fatbin/0020.fatbin");
    let out = Command::new(common::ours())
        .args([
            "select",
            "--target",
            "sm_90",
            "--nvidia-driver",
            DRIVER,
            "--explain",
        ])
        .arg(&file)
        .env_remove("CUDA_FORCE_PTX_JIT")
        .env_remove("CUDA_DISABLE_PTX_JIT")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "PTX ISA 9.1 needs a driver for CUDA 13.1 or later; this driver (580.159.04) \
             compiles up to 9.0 (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)"
        ),
        "{text}"
    );
    // Without the driver's version, the PTX is chosen as before (nothing to judge it by).
    let out = Command::new(common::ours())
        .args(["select", "--target", "sm_90", "--json"])
        .arg(&file)
        .env_remove("CUDA_FORCE_PTX_JIT")
        .env_remove("CUDA_DISABLE_PTX_JIT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let record: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(record["arch"], "compute_90");
}

/// `validate --nvidia-driver` names every PTX entry the driver does not compile: record 20
/// holds `compute_90` at ISA 9.1 (refused) and `compute_86` at 8.8 (compiled).
#[test]
fn validate_names_ptx_too_new_for_the_driver() {
    let file = common::repo().join("tests/data/cuda-driver/fatbin/0020.fatbin");
    let run = |extra: &[&str]| {
        let out = Command::new(common::ours())
            .arg("validate")
            .args(extra)
            .arg(&file)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = run(&["--nvidia-driver", DRIVER]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        text.matches("[ptx-too-new-for-driver]").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("PTX ISA 9.1 needs a driver for CUDA 13.1 or later"),
        "{text}"
    );
    let (code, _) = run(&["--nvidia-driver", DRIVER, "--deny-warnings"]);
    assert_eq!(code, Some(2));
    // A driver of CUDA 13.1 compiles it; without a version nothing is judged.
    assert!(!run(&["--nvidia-driver", "590.44.01"])
        .1
        .contains("ptx-too-new"));
    assert!(!run(&[]).1.contains("ptx-too-new"));
}

/// The same judgement where a compressed bundle is streamed (an OpenMP bundle for NVPTX
/// whose PTX is at ISA 9.1, made by the drop-in bundler): nothing is selected for driver
/// 580, and `-o` leaves no file; without the driver's version the PTX is chosen and written.
#[test]
fn a_streamed_bundle_gets_the_same_judgement() {
    let dir = common::TempDir::new("cuda-driver-stream");
    let host = dir.path("host.o");
    std::fs::write(&host, b"").unwrap();
    let ptx = common::repo().join("tests/data/cuda-driver/pool/compute_90_isa91.ptx");
    let bundle = dir.path("b.ccob");
    let out = Command::new(common::ours())
        .args([
            "offload-bundler",
            "-type=bc",
            "-targets=host-x86_64-unknown-linux-gnu,openmp-nvptx64-nvidia-cuda--sm_90",
            "-compress",
        ])
        .arg(format!("-input={}", host.display()))
        .arg(format!("-input={}", ptx.display()))
        .arg(format!("-output={}", bundle.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chosen = dir.path("chosen.ptx");
    let select = |driver: &[&str]| {
        let _ = std::fs::remove_file(&chosen);
        Command::new(common::ours())
            .args(["select", "--target", "sm_90", "--json", "-o"])
            .arg(&chosen)
            .args(driver)
            .arg(&bundle)
            .env_remove("CUDA_FORCE_PTX_JIT")
            .env_remove("CUDA_DISABLE_PTX_JIT")
            .output()
            .unwrap()
    };
    let refused = select(&["--nvidia-driver", DRIVER]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(!chosen.exists(), "no output for a refused image");
    let taken = select(&[]);
    assert_eq!(taken.status.code(), Some(0));
    assert_eq!(
        std::fs::read(&chosen).unwrap(),
        std::fs::read(&ptx).unwrap()
    );
}
