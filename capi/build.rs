//! Gives the shared library an soname (`liboffload_image.so.0`), as `capi/install.sh`
//! installs it, so that programs linked against it record the versioned name.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liboffload_image.so.0");
    }
    println!("cargo:rerun-if-changed=build.rs");
    // `cfg(external_tests)` when OFFLOAD_IMAGE_EXTERNAL_TESTS=1: the tests that need tools
    // from outside the repository are ignored without it (see tests/suite/common).
    println!("cargo::rustc-check-cfg=cfg(external_tests)");
    println!("cargo::rerun-if-env-changed=OFFLOAD_IMAGE_EXTERNAL_TESTS");
    if std::env::var_os("OFFLOAD_IMAGE_EXTERNAL_TESTS").is_some_and(|v| v == "1") {
        println!("cargo::rustc-cfg=external_tests");
    }
}
