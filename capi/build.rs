//! Gives the shared library an soname (`liboffload_image.so.0`), as `capi/install.sh`
//! installs it, so that programs linked against it record the versioned name.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liboffload_image.so.0");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
