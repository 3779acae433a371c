//! doctor's verdicts on real CUDA libraries that run (`COMPATIBILITY.md` §12): on an H200
//! (sm_90, driver 580.159.04) torch ran cuFFT, cuBLAS(Lt), cuDNN, cuSPARSE and cuSPARSELt
//! (`shared/oracle/cuda-driver/README.md`), so no library of these wheels may be called
//! "none" or "partial" there, and every unit set aside says why. On sm_60, for which their
//! registered units hold no code, each library that registers kernels is "none".
//!
//! The wheels (1.5 GB) are fetched by `scripts/fetch-verdict-wheels.sh`, which
//! `scripts/setup.sh` runs.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The folder of the wheels, fetched if missing.
fn wheels() -> PathBuf {
    let script = common::repo().join("scripts/fetch-verdict-wheels.sh");
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "scripts/fetch-verdict-wheels.sh could not fetch the CUDA wheels (scripts/setup.sh \
         does; the package index must be reachable): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `doctor --json --target sm_90 --target sm_60` on every CUDA wheel, run once for the
/// tests of this file: (exit status, records, summary).
fn doctor() -> &'static (Option<i32>, Vec<Value>, Value) {
    static RUN: std::sync::OnceLock<(Option<i32>, Vec<Value>, Value)> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let dir = wheels();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "whl"))
            .collect();
        files.sort();
        assert_eq!(files.len(), 6, "{files:?}");
        let out = Command::new(common::ours())
            .args(["doctor", "--json", "--nvidia-driver", "580.159.04"])
            .args(["--target", "sm_90", "--target", "sm_60"])
            .env_remove("CUDA_FORCE_PTX_JIT")
            .env_remove("CUDA_DISABLE_PTX_JIT")
            .args(&files)
            .output()
            .unwrap();
        parse(&out)
    })
}

/// The records of one device.
fn records_for(device: &str) -> Vec<&'static Value> {
    doctor()
        .1
        .iter()
        .filter(|r| r["device"] == device)
        .collect()
}

/// (exit status, records, summary) of a `doctor --json` run.
fn parse(out: &std::process::Output) -> (Option<i32>, Vec<Value>, Value) {
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
    ignore = "needs the CUDA wheels of scripts/fetch-verdict-wheels.sh: set OFFLOAD_IMAGE_EXTERNAL_TESTS=1"
)]
fn cuda_libraries_that_run_are_not_called_unloadable() {
    common::external("the CUDA wheels of scripts/fetch-verdict-wheels.sh");
    let records = records_for("sm_90");
    assert_eq!(records.len(), 13, "{:?}", doctor().2);
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
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the CUDA wheels of scripts/fetch-verdict-wheels.sh: set OFFLOAD_IMAGE_EXTERNAL_TESTS=1"
)]
fn on_a_gpu_none_of_them_serves_libraries_with_kernels_are_none() {
    common::external("the CUDA wheels of scripts/fetch-verdict-wheels.sh");
    // The run fails: libraries are "none" on sm_60.
    assert_eq!(doctor().0, Some(1));
    let records = records_for("sm_60");
    assert_eq!(records.len(), 13);
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

/// A host object whose `.rodata` holds a code object, the way Mojo ships its kernels (no
/// container, no wrapper): reported as device code outside any container, with how many of
/// the code objects are for each device, never "none" with a rebuild hint.
#[test]
fn code_objects_outside_any_container_are_reported_as_such() {
    use object::write::{Object, StandardSection};
    use object::{Architecture, BinaryFormat, Endianness};
    let dir = common::TempDir::new("doctor-outside");
    let co =
        std::fs::read(common::repo().join("tests/data/corpus/devobj/saxpy.gfx90a.co")).unwrap();
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let rodata = obj.section_id(StandardSection::ReadOnlyData);
    obj.append_section_data(rodata, b"some constant data before it\0", 16);
    obj.append_section_data(rodata, &co, 256);
    obj.append_section_data(rodata, &co, 256);
    let path = dir.path("libkernels.so");
    std::fs::write(&path, obj.write().unwrap()).unwrap();
    let out = Command::new(common::ours())
        .args([
            "doctor",
            "--json",
            "--target",
            "gfx90a:xnack-",
            "--target",
            "gfx1100",
        ])
        .arg(&path)
        .output()
        .unwrap();
    let (code, records, summary) = parse(&out);
    assert_eq!(summary["outside"], 2, "{summary}");
    let by = |d: &str| records.iter().find(|r| r["device"] == d).unwrap().clone();
    let gfx90a = by("gfx90a:xnack-");
    assert_eq!(gfx90a["status"], "outside");
    let reason = gfx90a["reason"].as_str().unwrap();
    assert!(
        reason.contains("2 code objects in .rodata (gfx90a: 2)"),
        "{reason}"
    );
    assert!(reason.ends_with("2 of them for this device"), "{reason}");
    let gfx1100 = by("gfx1100");
    assert!(gfx1100["reason"]
        .as_str()
        .unwrap()
        .ends_with("none of them is for this device"));
    assert!(gfx1100["hints"].as_array().unwrap().is_empty());
    // Nothing for the gfx1100: the run does not pass.
    assert_eq!(code, Some(1));
}

/// mojolearn-amd 0.8.62 carries its gfx942 kernels in the `.rodata` of six libraries (1,288
/// in `_mojolearn_native.so`), none of them in a container.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the wheels of scripts/fetch-verdict-wheels.sh: set OFFLOAD_IMAGE_EXTERNAL_TESTS=1"
)]
fn mojolearn_kernels_are_found_outside_any_container() {
    common::external("the wheels of scripts/fetch-verdict-wheels.sh");
    let dir = wheels().join("outside");
    let wheel = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("the mojolearn-amd wheel");
    let out = Command::new(common::ours())
        .args(["doctor", "--json", "--target", "gfx942:sramecc+:xnack-"])
        .arg(&wheel)
        .output()
        .unwrap();
    let (code, records, summary) = parse(&out);
    assert_eq!(code, Some(0), "{summary}");
    assert_eq!(summary["libraries"], 6, "{summary}");
    for r in &records {
        assert_eq!(r["status"], "outside", "{r}");
        assert!(
            r["reason"]
                .as_str()
                .unwrap()
                .contains(" of them for this device"),
            "{r}"
        );
    }
    let native = records
        .iter()
        .find(|r| {
            r["member"]
                .as_str()
                .unwrap()
                .ends_with("/_mojolearn_native.so")
        })
        .unwrap();
    assert!(
        native["reason"]
            .as_str()
            .unwrap()
            .contains("1288 code objects in .rodata (gfx942"),
        "{native}"
    );
}
