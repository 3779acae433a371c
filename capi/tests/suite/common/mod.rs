//! Helpers shared by the C API tests.

#![allow(dead_code)]

/// The switch of the tests that need something from outside the repository (here the C++
/// compiler, `pkg-config` and binutils' `readelf`; the C compiler cargo needs is assumed):
/// they run when it is `1`, as `scripts/test.sh` sets it, and are reported ignored otherwise.
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
