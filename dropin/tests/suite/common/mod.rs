//! Helpers shared by the drop-ins' integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that switches on the tests needing tools from outside the
/// repository (LLVM 22, the C zlib): `scripts/test.sh` sets it.
pub const EXTERNAL_TESTS: &str = "OFFLOAD_IMAGE_EXTERNAL_TESTS";

/// The first line of a test that needs `what` (tools or libraries from outside the
/// repository). Such a test is marked
/// `#[cfg_attr(not(external_tests), ignore = "needs ...; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)")]`:
/// without the switch cargo reports it ignored, with what it needs; with the switch it runs,
/// and a missing tool fails it. Run without the switch anyway (`--include-ignored`), it fails
/// here saying what it needs, never passes unchecked. Returns true.
///
/// ```ignore
/// #[test]
/// #[cfg_attr(not(external_tests), ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)")]
/// fn t() {
///     if !common::external("clang-offload-bundler-22") {
///         return;
///     }
/// ```
pub fn external(what: &str) -> bool {
    assert!(
        external_tests(),
        "needs {what}: build and run the tests with {EXTERNAL_TESTS}=1 (scripts/test.sh); without it this test is ignored"
    );
    true
}

/// For the part of a test that runs anywhere which needs `what`: true when the switch is on;
/// otherwise prints one `skipped:` line and returns false, and the test checks the rest.
pub fn external_part(what: &str) -> bool {
    if external_tests() {
        return true;
    }
    eprintln!("skipped: the part of this test that needs {what}; set {EXTERNAL_TESTS}=1");
    false
}

/// True when the tests that need something from outside the repository were built to run:
/// `cfg(external_tests)`, which the package's build script sets when
/// `OFFLOAD_IMAGE_EXTERNAL_TESTS=1` (and rebuilds the tests when it changes).
fn external_tests() -> bool {
    cfg!(external_tests)
}

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
