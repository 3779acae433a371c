//! doctor's verdicts on real CUDA libraries that run (`COMPATIBILITY.md` §12): on an H200
//! (sm_90, driver 580.159.04) torch ran cuFFT, cuBLAS(Lt), cuDNN, cuSPARSE and cuSPARSELt
//! (`shared/oracle/cuda-driver/README.md`), so no library of these wheels may be called
//! "none" or "partial" there, and every unit set aside says why. On sm_60, for which their
//! registered units hold no code, each library that registers kernels is "none".
//!
//! The wheels (1.5 GB) are fetched by `scripts/fetch-cuda-verdict-libs.sh`, which
//! `scripts/setup.sh` runs.

mod common;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The folder of the wheels, fetched if missing.
fn wheels() -> PathBuf {
    let script = common::repo().join("scripts/fetch-cuda-verdict-libs.sh");
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "scripts/fetch-cuda-verdict-libs.sh could not fetch the CUDA wheels (scripts/setup.sh \
         does; the package index must be reachable): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `doctor --json` on every wheel for `targets`: (exit status, records, summary).
fn doctor(targets: &[&str]) -> (Option<i32>, Vec<Value>, Value) {
    let dir = wheels();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 6, "{files:?}");
    let mut cmd = Command::new(common::ours());
    cmd.args(["doctor", "--json", "--nvidia-driver", "580.159.04"])
        .env_remove("CUDA_FORCE_PTX_JIT")
        .env_remove("CUDA_DISABLE_PTX_JIT");
    for t in targets {
        cmd.args(["--target", t]);
    }
    let out = cmd.args(&files).output().unwrap();
    let mut lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.pop().expect("a summary record");
    assert_eq!(summary["summary"], true);
    (out.status.code(), lines, summary)
}

/// Every unit is counted once: it loads, counts against the library, or is set aside,
/// and every unit set aside is listed with why.
fn check_accounting(r: &Value) {
    let n = |v: &Value| v.as_u64().unwrap();
    let failing: u64 = r["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| n(&g["units"]))
        .sum();
    let aside = n(&r["set_aside"]["other_gpus"]) + n(&r["set_aside"]["no_kernels"]);
    assert_eq!(
        n(&r["units"]),
        n(&r["units_covered"]) + failing + aside,
        "{r}"
    );
    let listed = r["set_aside_units"].as_array().unwrap();
    assert_eq!(listed.len() as u64, aside, "{r}");
    for u in listed {
        let why = u["why"].as_str().unwrap();
        assert!(
            why.starts_with("its images hold no kernels")
                || why.starts_with("code for other GPUs only ("),
            "{u}"
        );
        assert!(!u["unit"].as_str().unwrap().is_empty());
    }
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the CUDA wheels of scripts/fetch-cuda-verdict-libs.sh: set OFFLOAD_IMAGE_EXTERNAL_TESTS=1"
)]
fn cuda_libraries_that_run_are_not_called_unloadable() {
    common::external("the CUDA wheels of scripts/fetch-cuda-verdict-libs.sh");
    let (code, records, summary) = doctor(&["sm_90"]);
    assert_eq!(records.len(), 13, "{summary}");
    for r in &records {
        let status = r["status"].as_str().unwrap();
        assert!(matches!(status, "ok" | "no-kernels"), "{r}");
        assert!(r["hints"].as_array().unwrap().is_empty(), "{r}");
        check_accounting(r);
        // cuFFT registers only a cubin without code; its kernels reach the GPU another way.
        let file = r["member"].as_str().unwrap();
        if file.contains("libcufft") {
            assert_eq!(status, "no-kernels", "{r}");
            assert!(r["reason"].as_str().unwrap().contains("no kernels"), "{r}");
        } else {
            assert_eq!(status, "ok", "{r}");
        }
    }
    // The libraries that choose kernels by architecture set units aside as code for other
    // GPUs: cuSPARSE 12.6.3.3's 20 single-architecture units (sm_75, sm_80, sm_86).
    let cusparse = records
        .iter()
        .find(|r| r["member"].as_str().unwrap().ends_with("libcusparse.so.12"))
        .unwrap();
    assert_eq!(cusparse["set_aside"]["other_gpus"], 20, "{cusparse}");
    assert_eq!(summary["partial"], 0);
    assert_eq!(summary["none"], 0);
    assert_eq!(code, Some(0), "{summary}");
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the CUDA wheels of scripts/fetch-cuda-verdict-libs.sh: set OFFLOAD_IMAGE_EXTERNAL_TESTS=1"
)]
fn on_a_gpu_none_of_them_serves_libraries_with_kernels_are_none() {
    common::external("the CUDA wheels of scripts/fetch-cuda-verdict-libs.sh");
    let (code, records, _) = doctor(&["sm_60"]);
    assert_eq!(code, Some(1));
    for r in &records {
        check_accounting(r);
        let status = r["status"].as_str().unwrap();
        if r["member"].as_str().unwrap().contains("libcufft") {
            assert_eq!(status, "no-kernels", "{r}");
        } else {
            assert_eq!(status, "none", "{r}");
            // Nothing loads, so nothing is code for other GPUs: every unit with kernels is
            // a gap.
            assert_eq!(r["set_aside"]["other_gpus"], 0, "{r}");
            assert_eq!(r["units_covered"], 0, "{r}");
        }
    }
}
