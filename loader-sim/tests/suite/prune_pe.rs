//! `prune` on Windows files (`src/prune/pe.rs`): the DLLs of `tests/data/pe/` (made by
//! clang-22 and lld-link-22) and, with the external switch, the CUDA 12 and CUDA 13
//! (signed) `curand64_10.dll`, compacted (no RVA changes, later sections' raw data moves
//! down) and read by `llvm-readobj-22` and binutils' `objdump -p` without a warning.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::common;
use common::{json_lines, loader_sim, TempDir};

/// The selected image's sha256 of every unit static `register` gives for `device`, in
/// registration (wrapper) order: the units' addresses move when the file is compacted.
fn registered(file: &Path, device: &str) -> Vec<String> {
    let out = loader_sim(&[
        "register",
        "--json",
        "--device",
        device,
        file.to_str().unwrap(),
    ]);
    json_lines(&out.stdout)
        .iter()
        .map(|r| r["sha256"].as_str().unwrap_or("").to_string())
        .collect()
}

/// What a prune did: sizes before and after, the layout line, and the bytes the dropped
/// images took in the file (per unit, bytes before less bytes after).
struct Pruned {
    before: u64,
    after: u64,
    layout: String,
    dropped: u64,
}

/// Prunes `file` for `device` and checks the result: only images the device loads, every
/// one byte-identical to the original's, and static registration unchanged; compacted, the
/// file is shorter by whole `FileAlignment` units (512) plus a removed certificate table,
/// in place it keeps its size.
fn check(file: &Path, device: &str, dir: &TempDir) -> Pruned {
    let out_file = dir.path(file.file_name().unwrap().to_str().unwrap());
    let out = loader_sim(&[
        "prune",
        "--json",
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
    let records = json_lines(&out.stdout);
    let (summary, units) = records.split_last().unwrap();
    let layout = summary["layout"].as_str().unwrap().to_string();
    let dropped = units
        .iter()
        .map(|r| r["bytes_before"].as_u64().unwrap() - r["bytes_after"].as_u64().unwrap())
        .sum();
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
    assert_eq!(summary["size_after"], after);
    if layout.starts_with("compacted") {
        assert!(after < before, "{layout}");
        // No RVA or VirtualSize changes, so the sections stay back to back in memory as
        // the Windows loader requires (each starts where the previous one's VirtualSize
        // ends, rounded up to SectionAlignment).
        let (a, b) = (
            pe_sections(&std::fs::read(file).unwrap()),
            pe_sections(&std::fs::read(&out_file).unwrap()),
        );
        assert_eq!(a, b, "{layout}");
    } else {
        assert!(layout.starts_with("in place, zero-filled"), "{layout}");
    }
    Pruned {
        before,
        after,
        layout,
        dropped,
    }
}

/// (VirtualAddress, VirtualSize) of every section of a PE image, checked to be back to back
/// in memory.
fn pe_sections(data: &[u8]) -> Vec<(u32, u32)> {
    let u16_at = |o: usize| u16::from_le_bytes(data[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
    let pe = u32_at(0x3c) as usize;
    let count = u16_at(pe + 6);
    let table = pe + 24 + u16_at(pe + 20);
    let align = u32_at(pe + 24 + 32);
    let sections: Vec<(u32, u32)> = (0..count)
        .map(|i| (u32_at(table + 40 * i + 12), u32_at(table + 40 * i + 8)))
        .collect();
    for w in sections.windows(2) {
        assert_eq!(
            w[1].0,
            (w[0].0 + w[0].1).next_multiple_of(align),
            "{sections:x?}"
        );
    }
    sections
}

/// The PE checksum of `data` (the `CheckSum` field read as zero), as Windows'
/// `CheckSumMappedFile` computes it: 16-bit words summed with the carries folded back,
/// plus the file length.
fn pe_checksum(data: &[u8]) -> u32 {
    let pe = u32::from_le_bytes(data[0x3c..0x40].try_into().unwrap()) as usize;
    let field = pe + 24 + 64;
    let mut sum: u64 = 0;
    for (i, w) in data.chunks(2).enumerate() {
        if i * 2 == field || i * 2 == field + 2 {
            continue;
        }
        sum += u64::from(w[0]) | (u64::from(*w.get(1).unwrap_or(&0)) << 8);
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum = (sum & 0xffff) + (sum >> 16);
    (sum + data.len() as u64) as u32
}

/// The `CheckSum` field of a PE image.
fn stored_checksum(data: &[u8]) -> u32 {
    let pe = u32::from_le_bytes(data[0x3c..0x40].try_into().unwrap()) as usize;
    u32::from_le_bytes(data[pe + 88..pe + 92].try_into().unwrap())
}

#[test]
fn windows_dlls_are_pruned() {
    let pe = common::repo().join("tests/data/pe");
    let dir = TempDir::new("prune-pe");
    for (dll, device) in [("kc.dll", "sm_86"), ("k3.dll", "gfx1100")] {
        let p = check(&pe.join(dll), device, &dir);
        if p.layout.starts_with("compacted") {
            assert_eq!((p.before - p.after) % 512, 0, "{dll}: {}", p.layout);
        } else {
            assert_eq!(p.before, p.after, "{dll}");
        }
    }
    // --no-shrink keeps every byte outside the units where it is.
    let out = loader_sim(&[
        "prune",
        "--keep",
        "sm_86",
        "--no-shrink",
        pe.join("kc.dll").to_str().unwrap(),
        "-o",
        dir.path("kc.inplace.dll").to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("in place, zero-filled (--no-shrink)"));
    assert_eq!(
        std::fs::metadata(dir.path("kc.inplace.dll")).unwrap().len(),
        std::fs::metadata(pe.join("kc.dll")).unwrap().len()
    );
    if !common::external_part("llvm-readobj-22") {
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
#[cfg_attr(
    not(external_tests),
    ignore = "needs the win_amd64 curand wheels (scripts/fetch-windows-wheels.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn real_curand_dlls_are_pruned_and_a_signature_is_removed() {
    if !common::external("the win_amd64 curand wheels (scripts/fetch-windows-wheels.sh)") {
        return;
    }
    let windows = common::external_dir().join("windows");
    let dir = TempDir::new("prune-pe-real");
    for (sub, signed) in [("cu12", false), ("cu13", true)] {
        let dll = windows.join(sub).join("curand64_10.dll");
        let sub_dir = TempDir::new(sub);
        let p = check(&dll, "sm_86", &sub_dir);
        // Compacted: the file shrinks by at least 80 % of the bytes the dropped entries took
        // in `.nv_fatb` (issue 24's goal), in whole FileAlignment units.
        assert!(p.layout.starts_with("compacted"), "{sub}: {}", p.layout);
        assert!(p.dropped > 0);
        assert!(
            (p.before - p.after) * 10 >= p.dropped * 8,
            "{sub}: {} -> {}, {} dropped",
            p.before,
            p.after,
            p.dropped
        );
        let pruned_bytes = std::fs::read(sub_dir.path("curand64_10.dll")).unwrap();
        let original = std::fs::read(&dll).unwrap();
        if stored_checksum(&original) != 0 {
            // The checksum this test computes is the original's, and the pruned file's is
            // computed again.
            assert_eq!(pe_checksum(&original), stored_checksum(&original));
            assert_eq!(
                pe_checksum(&pruned_bytes),
                stored_checksum(&pruned_bytes),
                "{sub}"
            );
        }
        if signed {
            // CUDA 13's DLL is Authenticode-signed: its certificate table ends the file and
            // is removed; --refuse-signed refuses instead.
            assert!(p.layout.contains("certificate table"), "{}", p.layout);
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
        }
        let pruned = sub_dir.path("curand64_10.dll");
        for tool in [
            &[
                "llvm-readobj-22",
                "--file-headers",
                "--sections",
                "--coff-basereloc",
                "--coff-debug-directory",
            ][..],
            &["objdump", "-p"][..],
        ] {
            let out = Command::new(tool[0])
                .args(&tool[1..])
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

/// A bundled COFF object (`fat.obj`: `__CLANG_OFFLOAD_BUNDLE__<id>` sections, and the same
/// object as a member of `fat.lib`) cannot lose sections: prune refuses it with a located
/// error (exit 2) and writes nothing, instead of a file whose size disagrees with its
/// layout (found by the `prune` fuzz target).
#[test]
fn bundled_coff_objects_are_refused() {
    let pe = common::repo().join("tests/data/pe");
    let dir = TempDir::new("prune-coff-bundle");
    for file in ["fat.obj", "fat.lib"] {
        let out = dir.path(&format!("{file}.out"));
        let o = loader_sim(&[
            "prune",
            "--keep",
            "gfx90a",
            pe.join(file).to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{file}: {}", common::describe(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("bundled COFF object") && stderr.contains(", at byte "),
            "{file}: {stderr}"
        );
        assert!(!out.exists());
    }
}
