//! doctor on libraries whose device code no wrapper registers (issue 45): fat binaries in
//! data sections (cuFFT 12.5 keeps 18,227 in `.data` and `.ldata`, with no `.nv_fatbin`)
//! are `outside`, counted and judged for the device as loose code objects are.
//! `tests/data/nvfatbin/real2026/libdata_fatbins.so` holds three fatbinaries cut from
//! libcufft.so.12 in `.data` (`make_data_fatbins.sh`); the expected counts come from
//! `count_fatbins.py` there, which reads the fatbinaries without the crate.

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `count_fatbins.py FILE SM`: (fat binaries, those the device can load).
fn oracle(file: &Path, sm: u32) -> (u64, u64) {
    let out = Command::new("python3")
        .arg(common::repo().join("tests/data/nvfatbin/real2026/count_fatbins.py"))
        .arg(file)
        .arg(sm.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut n = text.split_whitespace().map(|w| w.parse().unwrap());
    (n.next().unwrap(), n.next().unwrap())
}

fn doctor(file: &Path, target: &str) -> Value {
    let out = Command::new(common::ours())
        .args(["doctor", "--json", "--target", target])
        .arg(file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    serde_json::from_str(text.lines().next().expect("a record")).unwrap()
}

fn check(file: &Path, sms: &[u32]) {
    for &sm in sms {
        let (total, loads) = oracle(file, sm);
        let r = doctor(file, &format!("sm_{sm}"));
        assert_eq!(r["status"], "outside", "{r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("{total} fat binaries (")),
            "{reason}"
        );
        let tail = match loads {
            0 => "none of them is for this device".to_string(),
            n => format!("{n} of them for this device"),
        };
        assert!(reason.ends_with(&tail), "sm_{sm}: {reason}");
    }
}

#[test]
fn fat_binaries_in_data_sections_are_outside() {
    let file = common::repo().join("tests/data/nvfatbin/real2026/libdata_fatbins.so");
    check(&file, &[75, 90, 100]);
}

/// The whole cuFFT 12.5 library, where it has been fetched under `target/`.
#[test]
#[ignore = "needs libcufft.so.12 of nvidia-cufft 12.5.0.14 under target/wheels45"]
fn cufft_12_5_is_outside_with_its_fat_binaries() {
    let file = common::repo().join("target/wheels45/cufft/nvidia/cu13/lib/libcufft.so.12");
    check(&file, &[90, 120]);
    let r = doctor(&file, "sm_90");
    assert!(r["reason"]
        .as_str()
        .unwrap()
        .contains("18227 fat binaries (216811296 bytes) in .data, .ldata"));
}

/// An AOTriton archive (`tests/data/aks2/`): its code objects, which AOTriton's runtime
/// loads itself, are `outside`, counted per device from the names `unpack.py` lists
/// (`UNPACKED.txt`: each ends in `--Arch_<processor>`); a gfx942 user is told none of them
/// is for the device.
#[test]
fn aotriton_archives_are_outside_and_judged_per_device() {
    let file = common::repo().join("tests/data/aks2/attn_fwd_F_F_3_0_gfx11xx.aks2");
    let unpacked =
        std::fs::read_to_string(common::repo().join("tests/data/aks2/UNPACKED.txt")).unwrap();
    let total = unpacked.lines().count();
    for device in ["gfx1100", "gfx1151", "gfx942"] {
        let n = unpacked
            .lines()
            .filter(|l| l.ends_with(&format!("--Arch_{device}")))
            .count();
        let r = doctor(&file, device);
        assert_eq!(r["status"], "outside", "{r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("{total} code objects in aks2")),
            "{reason}"
        );
        let tail = match n {
            0 => "none of them is for this device".to_string(),
            n => format!("{n} of them for this device"),
        };
        assert!(reason.ends_with(&tail), "{device}: {reason}");
    }
}

/// `list` and `select` on a file whose device code lies outside any container: nothing to
/// list or choose, and standard error says what is there and points to doctor.
#[test]
fn list_and_select_point_to_doctor() {
    let file = common::repo().join("tests/data/nvfatbin/real2026/libdata_fatbins.so");
    let (total, _) = oracle(&file, 90);
    for args in [&["list"][..], &["select", "--target", "sm_90"][..]] {
        let out = Command::new(common::ours())
            .args(args)
            .arg(&file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("no offload container; {total} fat binaries (")),
            "{args:?}: {err}"
        );
        assert!(err.contains("`loader-sim doctor` judges them"), "{err}");
    }
}
