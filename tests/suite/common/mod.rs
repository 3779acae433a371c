//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod alloc;
pub mod comgr;
pub mod craft;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/data/corpus`.
pub fn corpus() -> PathBuf {
    root().join("tests/data/corpus")
}

/// Lowercase hex SHA-256.
pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every record of the corpus manifest.
pub fn manifest() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(corpus().join("MANIFEST.jsonl")).expect("corpus manifest");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("manifest line is JSON"))
        .collect()
}

use external::assert_switched_on;
/// The outside-tools switch and its helpers, shared by every crate's tests.
mod external;
pub use external::{external, external_dir, external_part};

/// Directory of real ROCm libraries fetched by `scripts/fetch-rocm-libs.sh`.
pub fn external_lib_dir() -> PathBuf {
    assert_switched_on("the fetched ROCm libraries");
    external_dir().join("unpacked/usr/lib/x86_64-linux-gnu")
}

/// A real ROCm library, or a panic that says how to fetch it.
pub fn external_lib(name: &str) -> PathBuf {
    let p = external_lib_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-rocm-libs.sh (CI's .ci/run does) or set OFFLOAD_IMAGE_EXTERNAL",
        p.display()
    );
    p
}

/// A tool that `.ci/run` installs, or a panic that says so.
pub fn tool(name: &str) -> PathBuf {
    assert_switched_on(name);
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| panic!("{name} is not installed: .ci/run installs it (apt packages clang-22 clang-tools-22 llvm-22)"))
}

/// Reads a file relative to the corpus.
pub fn read_corpus(rel: &str) -> Vec<u8> {
    std::fs::read(corpus().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A fresh scratch directory under the target directory.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// True if `p` exists.
pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// `tests/comgr/lookup.c` (comgr's `amd_comgr_lookup_code_object` for a bundle), built
/// once per test binary.
pub fn comgr_lookup() -> &'static Path {
    comgr::lookup(&root())
}

/// A binary bundle (`FORMATS.md` §2.1) written by hand: magic, entry count, then per entry
/// offset, size, ID length and ID, then the payloads (8-byte aligned here), for IDs no tool
/// writes.
pub fn binary_bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
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
