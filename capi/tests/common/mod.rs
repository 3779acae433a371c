//! Helpers shared by the C API tests.

#![allow(dead_code)]

/// The switch of the tests that need something from outside the repository (here the C++
/// compiler, `pkg-config` and binutils' `readelf`; the C compiler cargo needs is assumed):
/// they run when it is `1`, as `scripts/test.sh` sets it, and are skipped otherwise.
pub const EXTERNAL_TESTS: &str = "OFFLOAD_IMAGE_EXTERNAL_TESTS";

/// Whether a test that needs `what` (tools from outside the repository) runs: true when
/// `OFFLOAD_IMAGE_EXTERNAL_TESTS=1`, and then a missing tool fails the test; otherwise
/// prints one `skipped:` line and returns false, and the test returns. The switch alone
/// decides: no test looks for its tools to decide whether it runs.
pub fn external(what: &str) -> bool {
    if std::env::var_os(EXTERNAL_TESTS).is_some_and(|v| v == "1") {
        return true;
    }
    eprintln!("skipped: needs {what}; set {EXTERNAL_TESTS}=1");
    false
}
