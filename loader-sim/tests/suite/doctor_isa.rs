//! doctor on PTX newer than the driver compiles, where the library has PTX for the device
//! (issue 45): the reason names the CUDA version the ISA needs (CUDA 13.2-13.5 are in the
//! release table by their ptxas), and the hint is a driver, not a rebuild: CUDA 13.2's
//! minimum driver, 595.45.04 (the CUDA Toolkit 13.2 Release Notes, section 2.2 "CUDA
//! Driver", Table 3, row "CUDA 13.2 GA"), where the table gives it.
//! `tests/data/nvfatbin/isa92/isa92.fatbin` holds PTX at ISA 9.2 for `compute_120` and the
//! `sm_120` cubin (its README says how it was made); cuobjdump lists the PTX as [9,2].

use crate::common;

use std::process::Command;

use serde_json::Value;

fn doctor(driver: &str, force_jit: bool) -> (Option<i32>, Value) {
    let file = common::repo().join("tests/data/nvfatbin/isa92/isa92.fatbin");
    let mut cmd = Command::new(common::ours());
    cmd.args([
        "doctor",
        "--target",
        "sm_120",
        "--nvidia-driver",
        driver,
        "--json",
    ])
    .arg(&file)
    .env_remove("CUDA_DISABLE_PTX_JIT")
    .env_remove("CUDA_CACHE_DISABLE");
    if force_jit {
        cmd.env("CUDA_FORCE_PTX_JIT", "1");
    } else {
        cmd.env_remove("CUDA_FORCE_PTX_JIT");
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let record = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    (out.status.code(), record)
}

#[test]
fn ptx_isa_9_2_needs_cuda_13_2s_minimum_driver_not_a_rebuild() {
    // CUDA_FORCE_PTX_JIT=1: the driver compiles the PTX, which driver 580 (CUDA 13.0, ISA
    // up to 9.0) refuses.
    let (code, record) = doctor("580.159.04", true);
    assert_eq!(code, Some(1), "{record}");
    assert_eq!(record["status"], "none");
    assert_eq!(
        record["gaps"][0]["reason"],
        "PTX ISA 9.2 needs a driver for CUDA 13.2 or later; this driver (580.159.04) \
         compiles up to 9.0 (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)"
    );
    let hints = record["hints"].as_array().unwrap();
    assert_eq!(hints.len(), 1, "{record}");
    assert_eq!(hints[0]["kind"], "driver");
    assert_eq!(hints[0]["value"], "595.45.04");
    assert!(hints.iter().all(|h| h["kind"] != "rebuild"));
    // Without the switch the driver loads the sm_120 cubin: the library loads.
    let (code, record) = doctor("580.159.04", false);
    assert_eq!((code, &record["status"]), (Some(0), &Value::from("ok")));
    // A driver of CUDA 13.1 (590.44.01, ISA 9.1) still refuses 9.2 and is told the same.
    let (_, record) = doctor("590.44.01", true);
    assert_eq!(record["hints"][0]["value"], "595.45.04");
    // CUDA 13.2's minimum driver loads it.
    let (code, record) = doctor("595.45.04", true);
    assert_eq!((code, &record["status"]), (Some(0), &Value::from("ok")));
}
