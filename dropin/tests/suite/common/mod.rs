//! Helpers shared by the drop-ins' integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The outside-tools switch and its helpers, shared by every crate's tests.
#[path = "../../../../tests/suite/common/external.rs"]
mod external;
pub use external::external;

/// An LLVM tool from `PATH`; these tests compare with the real tools (scripts/setup.sh
/// installs clang-22, llvm-22 and lld-22).
pub fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` not found in PATH (scripts/setup.sh installs it)"))
}

/// Runs `prog` with `args` in `dir`; panics with its standard error unless it succeeds.
pub fn run(prog: &Path, args: &[&str], dir: &Path) {
    let out = Command::new(prog)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}",
        prog.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
