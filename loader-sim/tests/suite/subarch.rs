//! `loader-sim list`, `select` and `validate` on bundles whose entry IDs use AMDGPU subarch
//! triples (`COMPATIBILITY.md` §1.5), and `select` under ROCm CLR's
//! `HIP_FORCE_SPIRV_CODEOBJECT` (§7.7). No tool writes subarch bundles yet (LLVM 22's bundler
//! refuses the triple, and so does the drop-in: checked below), so they are written here by
//! `FORMATS.md` §2.1; the code objects are the corpus's, whose `e_flags` llvm-readelf gives
//! in `tests/data/corpus/MANIFEST.jsonl` (gfx90a xnack+ 0x73F; gfx942 sramecc+ xnack- 0xE4C).

use std::process::Command;

use crate::common;
use common::{corpus, TempDir};

fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let table: usize = entries.iter().map(|(id, _)| 24 + id.len()).sum();
    let mut at = (out.len() + table).next_multiple_of(8);
    let mut offsets = Vec::new();
    for (_, bytes) in entries {
        offsets.push(at);
        at = (at + bytes.len()).next_multiple_of(8);
    }
    for ((id, bytes), off) in entries.iter().zip(&offsets) {
        out.extend_from_slice(&(*off as u64).to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(&(id.len() as u64).to_le_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    for ((_, bytes), off) in entries.iter().zip(&offsets) {
        out.resize(*off, 0);
        out.extend_from_slice(bytes);
    }
    out
}

fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loader-sim"));
    c.args(args).env_remove("HIP_FORCE_SPIRV_CODEOBJECT");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

const GFX90A: &str = "hipv4-amdgpu9.0a-amd-amdhsa--gfx90a:xnack+";
const GFX942: &str = "hipv4-amdgpu9.42-amd-amdhsa--:sramecc+:xnack-";

#[test]
fn subarch_bundles_are_listed_selected_and_validated() {
    let dir = TempDir::new("subarch");
    let a = std::fs::read(corpus("devobj/saxpy.gfx90a_xnack+.co")).unwrap();
    let b = std::fs::read(corpus("devobj/saxpy.gfx942_sramecc+_xnack-.co")).unwrap();
    let file = dir.write(
        "sub.bundle",
        &bundle(&[
            ("host-x86_64-unknown-linux-gnu-", b""),
            (GFX90A, &a),
            (GFX942, &b),
        ]),
    );
    let f = file.to_str().unwrap();
    // list: the stored ID, then the processor the triple and the header name.
    let (rc, out, err) = run(&["list", f], &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains(&format!("{GFX90A} (gfx90a:xnack+)")), "{out}");
    assert!(
        out.contains(&format!("{GFX942} (gfx942:sramecc+:xnack-)")),
        "{out}"
    );
    let (_, json, _) = run(&["list", f, "--json"], &[]);
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[2]["entry_id"], GFX942);
    assert_eq!(rows[2]["triple"], "amdgpu9.42-amd-amdhsa");
    assert_eq!(rows[2]["target_id"], "gfx942:sramecc+:xnack-");
    // select: each device its own entry.
    for (device, want) in [
        ("gfx90a:sramecc+:xnack+", GFX90A),
        ("gfx942:sramecc+:xnack-", GFX942),
    ] {
        let (rc, out, err) = run(&["select", f, "--target", device, "--json"], &[]);
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains(&format!("\"selected\":\"{want}\"")), "{out}");
    }
    // validate: sound, with CLR's blind spot named per entry.
    let (rc, out, err) = run(&["validate", f], &[]);
    assert_eq!(rc, 0, "{err}");
    let err = out + &err;
    assert_eq!(err.matches("[subarch-triple]").count(), 2, "{err}");
    assert!(
        err.contains("write `hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-`"),
        "{err}"
    );
    // The drop-in bundler, like LLVM 22's, refuses the spelling.
    let (rc, _, err) = run(
        &[
            "offload-bundler",
            "-type=o",
            &format!("-targets=host-x86_64-unknown-linux-gnu,{GFX90A}"),
            &format!("-input={}", corpus("devobj/host.x86_64.o").display()),
            &format!(
                "-input={}",
                corpus("devobj/saxpy.gfx90a_xnack+.co").display()
            ),
            &format!("-output={}", dir.path("out.o").display()),
        ],
        &[],
    );
    assert_ne!(rc, 0);
    assert!(
        err.contains("unknown target triple 'amdgpu9.0a-amd-amdhsa-'"),
        "{err}"
    );
}

#[test]
fn select_reads_hip_force_spirv_codeobject() {
    let dir = TempDir::new("spirv");
    let a = std::fs::read(corpus("devobj/saxpy.gfx90a_xnack+.co")).unwrap();
    // A SPIR-V module header (magic 0x07230203, version 1.6, bound 1).
    let spirv = [
        3u8, 2, 0x23, 7, 0, 6, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
    ];
    let spirv_id = "hip-spirv64-amd-amdhsa--amdgcnspirv";
    let file = dir.write(
        "mixed.bundle",
        &bundle(&[
            ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", &a),
            (spirv_id, &spirv),
        ]),
    );
    let f = file.to_str().unwrap();
    let select = |env: &[(&str, &str)]| {
        let (rc, out, err) = run(
            &[
                "select",
                f,
                "--target",
                "gfx90a:sramecc+:xnack+",
                "--policy",
                "first-by-class",
                "--json",
            ],
            env,
        );
        assert_eq!(rc, 0, "{err}");
        out
    };
    // CLR: native first; with the variable set (CLR: "true" or atoi != 0), SPIR-V.
    assert!(select(&[]).contains("\"selected\":\"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+\""));
    for off in ["0", "", "TRUE", "yes"] {
        let out = select(&[("HIP_FORCE_SPIRV_CODEOBJECT", off)]);
        assert!(
            out.contains("\"selected\":\"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+\""),
            "{off:?}: {out}"
        );
    }
    for on in ["1", "true", "2"] {
        let out = select(&[("HIP_FORCE_SPIRV_CODEOBJECT", on)]);
        assert!(
            out.contains(&format!("\"selected\":\"{spirv_id}\"")),
            "{on:?}: {out}"
        );
    }
}
