//! Helpers shared by the drop-ins' integration tests.
#![allow(dead_code)]

/// The environment variable that switches on the tests needing tools from outside the
/// repository (LLVM 22, the C zlib): `scripts/test.sh` sets it.
pub const EXTERNAL_TESTS: &str = "OFFLOAD_IMAGE_EXTERNAL_TESTS";

/// The project's one switch for tests that need an external tool: unless
/// `OFFLOAD_IMAGE_EXTERNAL_TESTS` is `1`, prints why the test is skipped and returns false;
/// when it is `1` the test runs, and a missing tool fails it.
pub fn external(what: &str) -> bool {
    if std::env::var_os(EXTERNAL_TESTS).is_some_and(|v| v == "1") {
        return true;
    }
    eprintln!("skipped: needs {what}; set {EXTERNAL_TESTS}=1");
    false
}
