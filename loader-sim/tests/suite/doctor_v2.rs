//! doctor on AMDGPU code objects of version 2 outside any container (issue 45: ROCr's
//! `libhsa-runtime64` keeps 3 among 42 loose code objects, and the `outside` count dropped
//! them without a word). `tests/data/loose_v2/host_v2.o` (`make.sh`: LLVM 14's assembler,
//! the last that writes v2) holds a v2 object whose ISA note is `AMD:AMDGPU:8:0:3`, one whose
//! note is `AMD:AMDGPU:9:0:1` (as `llvm-readelf -n` shows), and a v4 gfx90a object. ROCr's
//! loader takes v2 (`executable.cpp` `LoadCodeObject`, versions 1 to 6) with the target its
//! `ConvertOldTargetNameToNew` gives the note (gfx803; gfx900:xnack+), and loads it on an
//! agent of that processor; HIP (comgr's lookup, v4 and later) does not.

use crate::common;

use std::process::Command;

use serde_json::Value;

fn doctor(target: &str) -> Value {
    let file = common::repo().join("tests/data/loose_v2/host_v2.o");
    let out = Command::new(common::ours())
        .args(["doctor", "--json", "--target", target])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

#[test]
fn v2_code_objects_are_counted_and_judged_as_rocr_loads_them() {
    for (device, n) in [("gfx803", 1), ("gfx900", 1), ("gfx90a", 1), ("gfx942", 0)] {
        let r = doctor(device);
        assert_eq!(r["status"], "outside", "{r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains(
                "1 code object in .rodata.kernels (gfx90a: 1) and 2 code objects of version 2 \
                 in .rodata.kernels (gfx803: 1, gfx900:xnack+: 1; ROCr loads them, HIP does not)"
            ),
            "{reason}"
        );
        let tail = match n {
            0 => "none of them is for this device".to_string(),
            n => format!("{n} of them for this device"),
        };
        assert!(reason.ends_with(&tail), "{device}: {reason}");
    }
}

/// The AMDGPU code objects in `data` by a scan that does not use the crate: every ELF64
/// header whose `e_machine` is `EM_AMDGPU` (224), counted by `EI_ABIVERSION` (0: code
/// object v2 or older, 2: v4).
fn scan_amdgpu_objects(data: &[u8]) -> std::collections::BTreeMap<u8, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for at in 0..data.len().saturating_sub(20) {
        if &data[at..at + 4] == b"\x7fELF"
            && data[at + 4] == 2
            && u16::from_le_bytes([data[at + 18], data[at + 19]]) == 224
        {
            *counts.entry(data[at + 8]).or_default() += 1;
        }
    }
    counts
}

/// ROCr's own library (Debian's libhsa-runtime64-1 5.2.3-3, `scripts/fetch-rocm-libs.sh
/// libhsa-runtime64-1`): 29 AMDGPU code objects in `.data`, 26 of version 4 and 3 blit
/// kernels of code object version 1 from HSAIL's finalizer, which the `outside` reason
/// counts apart with the targets ROCr's `ConvertOldTargetNameToNew` gives their ISA notes
/// (none dropped). For gfx900 two are the device's (the v4 gfx900 object and the v2 one),
/// for gfx942 none.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs libhsa-runtime64.so.1 (scripts/fetch-rocm-libs.sh libhsa-runtime64-1); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn rocr_runtime_counts_every_loose_code_object_v2_included() {
    if !common::external("libhsa-runtime64.so.1 (scripts/fetch-rocm-libs.sh libhsa-runtime64-1)") {
        return;
    }
    let lib = common::external_lib("libhsa-runtime64.so.1");
    let data = std::fs::read(&lib).unwrap();
    let scan = scan_amdgpu_objects(&data);
    assert_eq!(scan, [(0, 3), (2, 26)].into_iter().collect());
    for (device, tail) in [
        ("gfx900", "2 of them for this device"),
        ("gfx700", "2 of them for this device"),
        ("gfx90a", "1 of them for this device"),
        ("gfx942", "none of them is for this device"),
    ] {
        let out = Command::new(common::ours())
            .args(["doctor", "--json", "--target", device])
            .arg(&lib)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let r: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(r["status"], "outside", "{r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("{} code objects in .data (", scan[&2])),
            "{reason}"
        );
        assert!(
            reason.contains(&format!(
                "and {} code objects of version 2 in .data (gfx700: 1, gfx802: 1, \
                 gfx900:xnack-: 1; ROCr loads them, HIP does not)",
                scan[&0]
            )),
            "{reason}"
        );
        assert!(reason.ends_with(tail), "{device}: {reason}");
    }
}
