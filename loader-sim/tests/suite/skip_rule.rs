//! FORMATS.md §2.4: bytes after a container that are neither zero padding nor a container
//! are skipped up to the next container magic and reported; `--strict` refuses them.
//! The real case is a bundle LLVM 22's own `clang-offload-bundler -type=o` writes when two
//! inputs get the same entry ID (architectures it does not know become an empty target ID).

use crate::common;

use common::{json_lines, llvm, loader_sim, sha256, TempDir};
use std::process::Command;

/// A bundle `clang-offload-bundler-22` writes for two device inputs whose target IDs it
/// turns into the same (empty) one: (path, the payloads in input order).
fn llvm_duplicate_id_bundle(dir: &TempDir) -> std::path::PathBuf {
    let host = dir.write("host.bin", b"");
    let a = dir.write("a.bin", &[0xA5; 100]);
    let b = dir.write("b.bin", &[0x5A; 200]);
    let out = dir.path("dup.bundle");
    let st = Command::new(llvm("clang-offload-bundler-22"))
        .arg("-type=o")
        .arg("-targets=host-x86_64-unknown-linux-gnu,openmp-nvptx64-nvidia-cuda--sm_120f,openmp-nvptx64-nvidia-cuda--sm_121f")
        .arg(format!("-input={}", host.display()))
        .arg(format!("-input={}", a.display()))
        .arg(format!("-input={}", b.display()))
        .arg(format!("-output={}", out.display()))
        .status()
        .unwrap();
    assert!(st.success());
    out
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn llvm_written_duplicate_id_bundle_reads_as_llvm_reads_it() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    let dir = TempDir::new("skip");
    let file = llvm_duplicate_id_bundle(&dir);
    let data = std::fs::read(&file).unwrap();
    // What LLVM lists and unbundles.
    let listed = Command::new(llvm("clang-offload-bundler-22"))
        .args(["-list", "-type=o"])
        .arg(format!("-input={}", file.display()))
        .output()
        .unwrap();
    assert!(listed.status.success());
    let llvm_ids: std::collections::BTreeSet<String> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let unbundled = dir.path("out.bin");
    let st = Command::new(llvm("clang-offload-bundler-22"))
        .args([
            "-unbundle",
            "-type=o",
            "-targets=openmp-nvptx64-nvidia-cuda-unknown-",
        ])
        .arg(format!("-input={}", file.display()))
        .arg(format!("-output={}", unbundled.display()))
        .status()
        .unwrap();
    assert!(st.success());
    let llvm_bytes = std::fs::read(&unbundled).unwrap();

    // Ours: the same IDs, LLVM's bytes among the images, and a note for the rest.
    let out = loader_sim(&["list".as_ref(), "--json".as_ref(), file.as_os_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let images: Vec<_> = lines.iter().filter(|l| l.get("sha256").is_some()).collect();
    let ours: std::collections::BTreeSet<String> = images
        .iter()
        .map(|l| l["entry_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ours, llvm_ids);
    assert!(images.iter().any(|l| l["sha256"] == sha256(&llvm_bytes)));
    let notes: Vec<_> = lines.iter().filter(|l| l["note"] == "skipped").collect();
    assert_eq!(notes.len(), 1, "{lines:?}");
    // The skipped bytes start where the last image the table describes ends and run to
    // the end of the file.
    let end = images
        .iter()
        .map(|l| l["offset"].as_u64().unwrap() + l["size"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(notes[0]["offset"].as_u64(), Some(end));
    assert_eq!(notes[0]["size"].as_u64(), Some(data.len() as u64 - end));

    // --strict refuses the file with one line naming the first skipped byte.
    let out = loader_sim(&["list".as_ref(), "--strict".as_ref(), file.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.ends_with(&format!("at byte {end}\n")), "{err}");

    // select --explain says so too.
    let out = loader_sim(&[
        "select".as_ref(),
        file.as_os_str(),
        "--target".as_ref(),
        "sm_120".as_ref(),
        "--explain".as_ref(),
        "--json".as_ref(),
    ]);
    let lines = json_lines(&out.stdout);
    assert_eq!(lines[0]["skipped"]["offset"].as_u64(), Some(end));
}

#[test]
fn a_container_after_skipped_bytes_is_found_at_its_magic() {
    let dir = TempDir::new("skip2");
    let mut data = std::fs::read(common::corpus("bundles/hip_6arch.bundle")).unwrap();
    let end = data.len() as u64;
    data.extend_from_slice(b"\0\0\0not a container");
    let second = data.len() as u64;
    data.extend_from_slice(
        &std::fs::read(common::corpus("compressed/hip_6arch.zstd.ccob")).unwrap(),
    );
    let file = dir.write("two.bin", &data);
    let out = loader_sim(&["list".as_ref(), "--json".as_ref(), file.as_os_str()]);
    assert!(out.status.success());
    let lines = json_lines(&out.stdout);
    let note = lines.iter().find(|l| l["note"] == "skipped").unwrap();
    assert_eq!(note["offset"].as_u64(), Some(end + 3));
    assert_eq!(note["size"].as_u64(), Some(second - end - 3));
    let units: std::collections::BTreeSet<u64> = lines
        .iter()
        .filter(|l| l.get("sha256").is_some())
        .map(|l| l["bundle_index"].as_u64().unwrap())
        .collect();
    assert_eq!(units.len(), 2, "both containers are listed");
}
