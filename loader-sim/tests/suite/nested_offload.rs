//! OffloadBinaries nested in OffloadBinary images (LLVM 23: an image that is itself a
//! sequence of OffloadBinaries, `FORMATS.md` §6.8), as `list`, `select` and `prune` see them
//! (issue 45). `tests/data/nested_ob/outer.bin` is made by LLVM 22's
//! `clang-offload-packager` (`make.sh`) from the corpus's saxpy code objects, nested two
//! deep:
//!
//! ```text
//! [0] gfx90a   [1] nested: [1.0] gfx1100, [1.1] nested: [1.1.0] sm_70, [1.1.1] gfx942   [2] sm_70
//! ```
//!
//! The unit's own entries keep their indices 0, 1, 2 (the entry holding a binary is kind
//! `none`); the nested images follow, numbered on in walk order (3: gfx1100, 4: sm_70, 5:
//! gfx942), each with the bytes LLVM's tool extracts level by level (the external part:
//! `llvm-offload-binary-22`, which does not open nested binaries itself, run on each level).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{self, json_lines, loader_sim, sha256, TempDir};

fn outer() -> PathBuf {
    common::repo().join("tests/data/nested_ob/outer.bin")
}

/// The sha256 of a corpus code object, the bytes `make.sh` packed.
fn devobj(name: &str) -> String {
    sha256(&std::fs::read(common::corpus(&format!("devobj/{name}"))).unwrap())
}

/// `list --json`: (target, image kind, offset, sha256) per image, in index order.
fn list(file: &Path) -> Vec<(String, String, u64, String)> {
    let out = loader_sim(&["list".as_ref(), "--json".as_ref(), file.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
    json_lines(&out.stdout)
        .iter()
        .map(|r| {
            (
                r["target_id"].as_str().unwrap().to_string(),
                r["image_kind"].as_str().unwrap().to_string(),
                r["offset"].as_u64().unwrap(),
                r["sha256"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The images `list` gives for outer.bin, without offsets: (target, kind, sha256).
fn expected() -> Vec<(String, &'static str, String)> {
    let nested = sha256(&extract_level(&std::fs::read(outer()).unwrap(), 1));
    let s = |t: &str, k: &'static str, sha: String| (t.to_string(), k, sha);
    vec![
        s("gfx90a", "elf", devobj("saxpy.gfx90a.co")),
        s("nested", "none", nested),
        s("sm_70", "cubin", devobj("saxpy.sm_70.cubin")),
        s("gfx1100", "elf", devobj("saxpy.gfx1100.co")),
        s("sm_70", "cubin", devobj("saxpy.sm_70.cubin")),
        s(
            "gfx942:sramecc+:xnack-",
            "elf",
            devobj("saxpy.gfx942_sramecc+_xnack-.co"),
        ),
    ]
}

/// The image of binary `i` of a sequence of version-1 OffloadBinaries (one entry each, as
/// clang-offload-packager-22 writes one binary per image, back to back, each padded to 8),
/// read by the format's fixed layout without the crate: header size at +8, entry offset at
/// +16; the entry's image offset at +24 and size at +32, from the binary's start.
fn extract_level(b: &[u8], i: usize) -> Vec<u8> {
    let u64at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let mut at = 0;
    for _ in 0..i {
        assert_eq!(&b[at..at + 4], &[0x10, 0xFF, 0x10, 0xAD]);
        at = (at + u64at(at + 8)).next_multiple_of(8);
    }
    let entry = at + u64at(at + 16);
    let (offset, size) = (u64at(entry + 24), u64at(entry + 32));
    b[at + offset..at + offset + size].to_vec()
}

#[test]
fn nested_images_are_listed_after_the_units_own_entries() {
    let listed = list(&outer());
    let got: Vec<(String, &str, String)> = listed
        .iter()
        .map(|(t, k, _, s)| (t.clone(), k.as_str(), s.clone()))
        .collect();
    assert_eq!(got, expected());
    // Each nested image lies inside the nesting entry's image.
    let (start, len) = (listed[1].2, 10_768);
    for (_, _, offset, _) in &listed[3..] {
        assert!((start..start + len).contains(offset), "{offset}");
    }
}

#[test]
fn select_chooses_nested_images_by_their_own_metadata() {
    let listed = list(&outer());
    for (target, index) in [
        ("gfx1100", 3),
        ("gfx942:sramecc+:xnack-", 5),
        ("gfx90a", 0),
        // The outer sm_70 (index 2) ranks first among equals.
        ("sm_70", 2),
    ] {
        let out = loader_sim(&[
            "select".as_ref(),
            "--json".as_ref(),
            "--target".as_ref(),
            target.as_ref(),
            outer().as_os_str(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
        let r = &json_lines(&out.stdout)[0];
        assert_eq!(r["offset"].as_u64(), Some(listed[index].2), "{target}: {r}");
    }
    // No device takes the entry holding the nested binary itself: a gfx942 without
    // sramecc gets nothing (the nested gfx942 object is sramecc+).
    let out = loader_sim(&[
        "select".as_ref(),
        "--json".as_ref(),
        "--target".as_ref(),
        "gfx942:sramecc-:xnack-".as_ref(),
        outer().as_os_str(),
    ]);
    let r: Value = json_lines(&out.stdout).remove(0);
    assert!(r["selected"].is_null(), "{r}");
}

/// prune keeps or drops an entry holding a nested binary whole: it stays when a kept device
/// takes one of its images. The unit's own entries are the ones renumbered; the nested
/// images follow them again, with the bytes they had.
#[test]
fn prune_keeps_a_nested_binary_whole_by_its_images() {
    let dir = TempDir::new("nested-prune");
    let all = expected();
    for (keep, want) in [
        ("gfx942:sramecc+:xnack-", vec![1, 3, 4, 5]),
        ("gfx1100", vec![1, 3, 4, 5]),
        ("gfx90a", vec![0]),
        ("sm_70", vec![1, 2, 3, 4, 5]),
    ] {
        let out_file = dir.path(&format!("{}.bin", keep.replace(':', "_")));
        let out = loader_sim(&[
            "prune".as_ref(),
            "--keep".as_ref(),
            keep.as_ref(),
            "-o".as_ref(),
            out_file.as_os_str(),
            outer().as_os_str(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
        let listed = list(&out_file);
        let got: Vec<(String, &str, String)> = listed
            .iter()
            .map(|(t, k, _, s)| (t.clone(), k.as_str(), s.clone()))
            .collect();
        let want: Vec<(String, &str, String)> = want.iter().map(|&i| all[i].clone()).collect();
        assert_eq!(got, want, "--keep {keep}");
        if common::external_part("llvm-objdump-22") {
            // LLVM 22 reads the pruned binary: its entries in order.
            let o = Command::new(common::llvm("llvm-objdump-22"))
                .arg("--offloading")
                .arg(&out_file)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", common::describe(&o));
            let text = String::from_utf8_lossy(&o.stdout);
            let arches: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("arch"))
                .map(str::trim)
                .collect();
            let outer_arches: Vec<&str> = want
                .iter()
                .take_while(|w| w.0 != "gfx1100")
                .filter(|w| all[..3].contains(w))
                .map(|w| w.0.as_str())
                .collect();
            assert_eq!(arches, outer_arches, "--keep {keep}");
        }
    }
}

/// Every image `list` gives has the bytes LLVM 22's `llvm-offload-binary` extracts, level by
/// level (it extracts the nested binary as a file; run again on that file for the next
/// level).
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs llvm-offload-binary-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn listed_bytes_are_what_llvm_extracts_level_by_level() {
    if !common::external("llvm-offload-binary-22") {
        return;
    }
    let dir = TempDir::new("nested-extract");
    let tool = common::llvm("llvm-offload-binary-22");
    let extract = |from: &Path, triple: &str, arch: &str, name: &str| -> PathBuf {
        let to = dir.path(name);
        let o = Command::new(&tool)
            .arg(from)
            .arg(format!(
                "--image=file={},triple={triple},arch={arch}",
                to.display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::describe(&o));
        to
    };
    let sha = |p: &Path| sha256(&std::fs::read(p).unwrap());
    let outer = outer();
    let gfx90a = extract(&outer, "amdgcn-amd-amdhsa", "gfx90a", "gfx90a.o");
    let mid = extract(&outer, "x-y-z", "nested", "mid.bin");
    let sm70 = extract(&outer, "nvptx64-nvidia-cuda", "sm_70", "sm_70.cubin");
    let gfx1100 = extract(&mid, "amdgcn-amd-amdhsa", "gfx1100", "gfx1100.o");
    let inner = extract(&mid, "x-y-z", "nested", "inner.bin");
    let sm70_inner = extract(&inner, "nvptx64-nvidia-cuda", "sm_70", "sm_70.inner.cubin");
    let gfx942 = extract(
        &inner,
        "amdgcn-amd-amdhsa",
        "gfx942:sramecc+:xnack-",
        "gfx942.o",
    );
    let llvm: Vec<String> = [gfx90a, mid, sm70, gfx1100, sm70_inner, gfx942]
        .iter()
        .map(|p| sha(p))
        .collect();
    let ours: Vec<String> = list(&outer).into_iter().map(|(.., s)| s).collect();
    assert_eq!(ours, llvm);
}
