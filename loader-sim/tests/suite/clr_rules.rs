//! ROCm CLR's own rules where the HIP runtime registers the code (`COMPATIBILITY.md` §7.8,
//! §1.5): a library whose one HIP fat binary holds only a gfx11-generic code object loads on
//! gfx1101 (CLR's generic map has taken gfx1101 there since ROCm 6.4) and on nothing for
//! gfx1154, which LLVM counts in gfx11-generic but no CLR map does. `doctor` and `register`
//! say so; `select` says it only when asked for CLR's rules (`--clr`).

use std::process::Command;

use crate::common;

/// A shared library whose HIP registration holds the corpus's gfx11-generic code object,
/// made by `loader-sim wrap --kind hip` and the C compiler.
fn generic_only_library(dir: &common::TempDir) -> std::path::PathBuf {
    let co = common::repo().join("tests/data/corpus/devobj/saxpy.gfx11-generic.co");
    let object = dir.path("w.o");
    let out = Command::new(common::ours())
        .args(["wrap", "--kind", "hip", "-o"])
        .arg(&object)
        .arg("--image")
        .arg(format!(
            "file={},triple=amdgcn-amd-amdhsa,arch=gfx11-generic",
            co.display()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let library = dir.path("libgeneric.so");
    // The HIP runtime's registration functions are left for the loader to find.
    let out = Command::new("cc")
        .args(["-shared", "-o"])
        .arg(&library)
        .arg(&object)
        .arg("-Wl,--unresolved-symbols=ignore-all")
        .output()
        .expect("a C compiler");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    library
}

fn run(args: &[&str], file: &std::path::Path) -> (Option<i32>, String) {
    let out = Command::new(common::ours())
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn doctor_and_register_judge_a_generic_object_by_clrs_map() {
    let dir = common::TempDir::new("clr-rules");
    let library = generic_only_library(&dir);
    let (_, text) = run(
        &[
            "doctor", "--json", "--target", "gfx1101", "--target", "gfx1154",
        ],
        &library,
    );
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r.get("summary").is_none())
        .collect();
    let status = |device: &str| {
        let r = records
            .iter()
            .find(|r| r["device"] == device)
            .unwrap_or_else(|| panic!("no record for {device}: {text}"));
        (
            r["status"].as_str().unwrap().to_string(),
            r["reason"].to_string(),
        )
    };
    assert_eq!(status("gfx1101").0, "ok", "{text}");
    let (s, reason) = status("gfx1154");
    assert_eq!(s, "none", "{text}");
    assert!(
        reason.contains("ROCm CLR does not use gfx11-generic code on gfx1154"),
        "{reason}"
    );
    // The simulated runtime registers the same: the generic object for gfx1101 only.
    let (_, text) = run(
        &[
            "register", "--json", "--device", "gfx1101", "--device", "gfx1154",
        ],
        &library,
    );
    let chosen: Vec<(String, bool)> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|r| {
            (
                r["device"].as_str().unwrap_or("").to_string(),
                !r["selected"].is_null(),
            )
        })
        .collect();
    assert!(chosen.contains(&("gfx1101".into(), true)), "{text}");
    assert!(chosen.contains(&("gfx1154".into(), false)), "{text}");
}

#[test]
fn select_applies_clrs_rules_when_asked() {
    let bundle = common::repo().join("tests/data/corpus/bundles/hip_generic.bundle");
    let shared = run(&["select", "--target", "gfx1154"], &bundle);
    assert_eq!(shared.0, Some(0), "{}", shared.1);
    assert!(shared.1.contains("gfx11-generic"), "{}", shared.1);
    let clr = run(
        &[
            "select",
            "--target",
            "gfx1154",
            "--kind",
            "hip",
            "--policy",
            "first-by-class",
            "--clr",
            "--explain",
        ],
        &bundle,
    );
    assert_eq!(clr.0, Some(1), "{}", clr.1);
    assert!(
        clr.1
            .contains("no CLR generic map read (ROCm 6.4 on) takes gfx1154 to gfx11-generic"),
        "{}",
        clr.1
    );
}
