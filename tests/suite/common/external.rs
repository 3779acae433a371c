//! The test helpers every crate of the workspace shares, in one file: the switch of the
//! tests that need something from outside the repository (LLVM's tools, comgr, the fetched
//! ROCm and NVIDIA libraries, the CUDA wheels, a C++ compiler, binutils), and where those
//! outside files are. Each crate's `tests/suite/common` includes it
//! (`#[path = ".../tests/suite/common/external.rs"] mod external;`) and re-exports it, so
//! that `cfg!(external_tests)` is read in the including crate, whose build script sets it.
//!
//! The switch is `OFFLOAD_IMAGE_EXTERNAL_TESTS=1`, which `scripts/test.sh` sets. Every crate's
//! build script turns it into `cfg(external_tests)`: a test that needs an outside tool is
//! marked `#[cfg_attr(not(external_tests), ignore = "needs ...")]` and calls [`external`]
//! first.

use std::path::PathBuf;

/// The switch of the tests that need something from outside the repository: they run when
/// it is `1`, as `scripts/test.sh` sets it, and are reported ignored otherwise.
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
        switched_on(),
        "needs {what}: build and run the tests with {EXTERNAL_TESTS}=1 (scripts/test.sh); without it this test is ignored"
    );
    true
}

/// For the part of a test that runs anywhere which needs `what`: true when the switch is on;
/// otherwise prints one `skipped:` line and returns false, and the test checks the rest.
pub fn external_part(what: &str) -> bool {
    if switched_on() {
        return true;
    }
    eprintln!("skipped: the part of this test that needs {what}; set {EXTERNAL_TESTS}=1");
    false
}

/// True when the tests that need something from outside the repository were built to run:
/// `cfg(external_tests)`, which the including crate's build script sets when
/// `OFFLOAD_IMAGE_EXTERNAL_TESTS=1` (and rebuilds the tests when it changes).
pub fn switched_on() -> bool {
    cfg!(external_tests)
}

/// Panics unless the switch is on: a test that uses `what` must call [`external`] first.
pub fn assert_switched_on(what: &str) {
    assert!(
        switched_on(),
        "{what} is used by a test that did not call common::external first"
    );
}

/// The repository root (the workspace's directory), from the including crate's manifest
/// directory.
pub fn repo() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    dir.ancestors()
        .find(|d| d.join("tests/suite/common/external.rs").is_file())
        .map(PathBuf::from)
        .unwrap_or(dir)
}

/// Where the test set-up puts files from outside the repository: `OFFLOAD_IMAGE_EXTERNAL`,
/// else `target/external` (callers must have called [`external`] first).
pub fn external_dir() -> PathBuf {
    std::env::var_os("OFFLOAD_IMAGE_EXTERNAL")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/external"))
}
