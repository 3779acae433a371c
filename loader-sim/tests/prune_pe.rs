//! `prune` on Windows files (`src/prune/pe.rs`): the DLLs of `tests/data/pe/` (made by
//! clang-22 and lld-link-22) and, with the external switch, the CUDA 12 and CUDA 13
//! (signed) `curand64_10.dll`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{json_lines, loader_sim, TempDir};

/// (unit, selected image sha256) of static `register` for `device`.
fn registered(file: &Path, device: &str) -> BTreeSet<(String, String)> {
    let out = loader_sim(&[
        "register",
        "--json",
        "--device",
        device,
        file.to_str().unwrap(),
    ]);
    json_lines(&out.stdout)
        .iter()
        .map(|r| {
            (
                r["unit"].as_str().unwrap_or("").to_string(),
                r["sha256"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Prunes `file` for `device` and checks the result: the same size (less a removed
/// certificate table), only images the device loads, every one byte-identical to the
/// original's, and static registration unchanged.
fn check(file: &Path, device: &str, dir: &TempDir) -> (u64, u64) {
    let out_file = dir.path(file.file_name().unwrap().to_str().unwrap());
    let out = loader_sim(&[
        "prune",
        "--keep",
        device,
        file.to_str().unwrap(),
        "-o",
        out_file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("in place, zero-filled"), "{text}");
    let (before, after) = (
        std::fs::metadata(file).unwrap().len(),
        std::fs::metadata(&out_file).unwrap().len(),
    );
    let listed =
        |f: &Path| json_lines(&loader_sim(&["list", "--json", f.to_str().unwrap()]).stdout);
    let original: BTreeSet<String> = listed(file)
        .iter()
        .map(|r| r["sha256"].as_str().unwrap().to_string())
        .collect();
    let kept = listed(&out_file);
    assert!(!kept.is_empty());
    for r in &kept {
        assert!(original.contains(r["sha256"].as_str().unwrap()), "{r}");
    }
    // Every kept device image is one `select --explain` would accept for the device.
    let explain = json_lines(
        &loader_sim(&[
            "select",
            "--json",
            "--explain",
            "--target",
            device,
            out_file.to_str().unwrap(),
        ])
        .stdout,
    );
    for r in &explain {
        assert!(!r["selected"].is_null(), "{r}");
        for x in r["rejected"].as_array().unwrap() {
            assert!(
                !x["reason"].as_str().unwrap().contains("does not run"),
                "an image the device cannot load is left: {x}"
            );
        }
    }
    assert_eq!(registered(&out_file, device), registered(file, device));
    (before, after)
}

#[test]
fn windows_dlls_are_pruned_in_place() {
    let pe = common::repo().join("tests/data/pe");
    let dir = TempDir::new("prune-pe");
    for (dll, device) in [("kc.dll", "sm_86"), ("k3.dll", "gfx1100")] {
        let (before, after) = check(&pe.join(dll), device, &dir);
        assert_eq!(before, after, "{dll}");
    }
    if !common::external("llvm-readobj-22") {
        return;
    }
    let out = Command::new("llvm-readobj-22")
        .args(["--file-headers", "--sections", "--coff-basereloc"])
        .arg(dir.path("kc.dll"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}

#[test]
fn real_curand_dlls_are_pruned_and_a_signature_is_removed() {
    if !common::external("the win_amd64 curand wheels (scripts/fetch-windows-wheels.sh)") {
        return;
    }
    let windows = std::env::var_os("OFFLOAD_IMAGE_EXTERNAL")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::repo().join("target/external"))
        .join("windows");
    let dir = TempDir::new("prune-pe-real");
    for (sub, signed) in [("cu12", false), ("cu13", true)] {
        let dll = windows.join(sub).join("curand64_10.dll");
        let sub_dir = TempDir::new(sub);
        let (before, after) = check(&dll, "sm_86", &sub_dir);
        if signed {
            // CUDA 13's DLL is Authenticode-signed: its certificate table ends the file and
            // is removed; --refuse-signed refuses instead.
            assert!(
                after < before && before - after < 64 * 1024,
                "{before} -> {after}"
            );
            let refused = loader_sim(&[
                "prune",
                "--keep",
                "sm_86",
                "--refuse-signed",
                dll.to_str().unwrap(),
                "-o",
                dir.path("refused.dll").to_str().unwrap(),
            ]);
            assert_eq!(refused.status.code(), Some(2));
            assert!(String::from_utf8_lossy(&refused.stderr).contains("signed"));
        } else {
            assert_eq!(before, after);
        }
        let pruned = sub_dir.path("curand64_10.dll");
        for tool in [["llvm-readobj-22", "--file-headers"], ["objdump", "-p"]] {
            let out = Command::new(tool[0])
                .arg(tool[1])
                .arg(&pruned)
                .output()
                .unwrap();
            assert!(out.status.success(), "{} on {sub}", tool[0]);
            assert!(
                !String::from_utf8_lossy(&out.stderr).contains("warning"),
                "{}",
                tool[0]
            );
        }
    }
}
