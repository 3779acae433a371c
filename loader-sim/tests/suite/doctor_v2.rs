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
