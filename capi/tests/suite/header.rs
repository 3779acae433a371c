//! The committed header is what cbindgen makes of `src/lib.rs` with `cbindgen.toml`.
//! `OI_BLESS=1 cargo test -p offload-image-capi --test suite header::` rewrites it.

use std::path::Path;

#[test]
fn committed_header_is_generated_from_the_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen cannot read src/lib.rs");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let path = dir.join("include/offload_image.h");
    if std::env::var_os("OI_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "capi/include/offload_image.h differs from what cbindgen generates; run \
         OI_BLESS=1 cargo test -p offload-image-capi --test suite header:: and commit the result"
    );
    // The old include path still reaches the header.
    let old = dir.join("../include/offload_image.h");
    assert_eq!(std::fs::read_to_string(old).unwrap(), generated);
}
