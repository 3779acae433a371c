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

/// The header's example, as it stands in the comment, compiles as C11 and as C++17 with
/// `-Wall -Wextra -Werror -pedantic` (no VLA, casts where C++ needs them).
#[test]
fn header_example_is_valid_c_and_cpp() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(dir.join("include/offload_image.h")).unwrap();
    let start = header
        .find(" * Example (")
        .expect("the header has an example");
    let example: String = header[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with(" *   "))
        .map(|l| format!("{}\n", &l[5..]))
        .collect();
    assert!(example.contains("oi_reader_select"), "{example}");
    assert!(example.contains("oi_reader_explain"), "{example}");
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi-example");
    std::fs::create_dir_all(&out).unwrap();
    let source = format!(
        "#include <stdio.h>\n#include <stdlib.h>\n#include \"offload_image.h\"\n\n{example}"
    );
    for (compiler, std, ext) in [
        (
            std::env::var("CC").unwrap_or_else(|_| "cc".into()),
            "-std=c11",
            "c",
        ),
        (
            std::env::var("CXX").unwrap_or_else(|_| "c++".into()),
            "-std=c++17",
            "cpp",
        ),
    ] {
        if ext == "cpp" && !crate::common::external_part("c++ (g++)") {
            continue;
        }
        let file = out.join(format!("example.{ext}"));
        std::fs::write(&file, &source).unwrap();
        let st = std::process::Command::new(&compiler)
            .args([std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-c", "-I"])
            .arg(dir.join("include"))
            .arg(&file)
            .arg("-o")
            .arg(out.join(format!("example-{ext}.o")))
            .status()
            .unwrap();
        assert!(
            st.success(),
            "{compiler} {std} rejects the header's example:\n{source}"
        );
    }
}
