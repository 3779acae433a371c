//! `--target` by the names people use (docs/CLI.md, "GPU names"): a product name or a
//! compute capability judges exactly as the target it stands for, and a name nobody knows
//! fails with the nearest spelling.

use crate::common::{corpus, json_lines, loader_sim};

/// doctor's records for `target` over the corpus, without the `device` field (the name
/// as given) and the summary's timing.
fn doctor_records(target: &str) -> Vec<serde_json::Value> {
    let out = loader_sim(&[
        "doctor",
        corpus("").to_str().unwrap(),
        "--target",
        target,
        "--json",
        "--jobs",
        "1",
    ]);
    assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
    let mut records = json_lines(&out.stdout);
    for r in &mut records {
        let o = r.as_object_mut().unwrap();
        o.remove("device");
        o.remove("seconds");
    }
    assert!(records.len() > 10, "{target}: {} records", records.len());
    records
}

/// `--target "RTX 4090"` and `8.9` judge as `sm_89`, `H100` as `sm_90`, `MI300X` as
/// `gfx942:sramecc+:xnack-` (ROCm's GPU specifications; rocminfo's default feature
/// states), `"RX 7900 XTX"` as `gfx1100`: every record of doctor over the corpus equal.
#[test]
fn product_names_judge_as_their_targets() {
    for (name, target) in [
        ("RTX 4090", "sm_89"),
        ("8.9", "sm_89"),
        ("NVIDIA H100", "sm_90"),
        ("MI300X", "gfx942:sramecc+:xnack-"),
        ("RX 7900 XTX", "gfx1100"),
    ] {
        assert_eq!(doctor_records(name), doctor_records(target), "{name}");
    }
    // Not a vacuous equality: the names of one vendor judge differently from the other's.
    assert_ne!(doctor_records("MI300X"), doctor_records("RTX 4090"));
    // The table line of doctor names both.
    let out = loader_sim(&[
        "doctor",
        corpus("devobj/saxpy.gfx942_sramecc+_xnack-.co")
            .to_str()
            .unwrap(),
        "--target",
        "MI300X",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("MI300X (gfx942:sramecc+:xnack-): "),
        "{text}"
    );
}

/// select takes the names too: the image chosen for `"RTX 4090"` is the one for `sm_89`.
#[test]
fn select_takes_product_names() {
    let sel = |file: &str, t: &str| {
        let file = corpus(file);
        let out = loader_sim(&["select", file.to_str().unwrap(), "--target", t, "--json"]);
        json_lines(&out.stdout)[0]["selected"].clone()
    };
    let nv = "bundles/omp_amd_nv.bundle";
    assert_eq!(sel(nv, "RTX 4090"), sel(nv, "sm_89"));
    assert_ne!(sel(nv, "sm_89"), serde_json::Value::Null);
    // hip_6arch holds gfx90a:xnack+ and xnack- and gfx942:sramecc+:xnack- (`list`): the
    // products' default feature states pick the xnack- images.
    let amd = "bundles/hip_6arch.bundle";
    assert_eq!(
        sel(amd, "MI300X"),
        "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"
    );
    assert_eq!(sel(amd, "MI250X"), "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");
    assert_eq!(sel(amd, "MI250X"), sel(amd, "gfx90a:sramecc+:xnack-"));
}

/// A misspelled target fails (exit 2, one line) and names the nearest known spelling.
#[test]
fn misspelled_targets_get_a_suggestion() {
    for (bad, want) in [
        ("sm86", "sm_86"),
        ("RTX 4909", "RTX 4090"),
        ("MI300XX", "MI300X"),
    ] {
        let out = loader_sim(&[
            "doctor",
            corpus("devobj").to_str().unwrap(),
            "--target",
            bad,
        ]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("loader-sim: error: invalid --target '{bad}': ")),
            "{err}"
        );
        assert!(
            err.trim_end()
                .ends_with(&format!("(did you mean '{want}'?)")),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}
