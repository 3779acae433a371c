//! Sets `cfg(external_tests)` when `OFFLOAD_IMAGE_EXTERNAL_TESTS=1`: the tests that need a
//! tool or library from outside the repository are marked
//! `#[cfg_attr(not(external_tests), ignore = "needs ...")]`, so that without the switch cargo
//! reports them ignored (with what they need), and with it they run (and a missing tool
//! fails them). The command itself does not read the cfg.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(external_tests)");
    println!("cargo::rerun-if-env-changed=OFFLOAD_IMAGE_EXTERNAL_TESTS");
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var_os("OFFLOAD_IMAGE_EXTERNAL_TESTS").is_some_and(|v| v == "1") {
        println!("cargo::rustc-cfg=external_tests");
    }
}
