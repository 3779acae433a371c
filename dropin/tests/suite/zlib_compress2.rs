//! The drop-in bundler's zlib payloads (`-compression-method=zlib`, an extension: LLVM 22
//! built with zstd never writes zlib) against what LLVM's `zlib::compress` makes: zlib's
//! own `compress2` at the same level into a `compressBound` buffer, called here directly.
//! The `CCOB` header around it is built here field by field as LLVM's
//! `CompressedOffloadBundle::compress` writes it (method 0 = zlib). Levels 1, 6 and 9 and
//! the default (6), `CCOB` versions 2 and 3, binary and text bundles.

use offload_dropin::bundler;

/// zlib's `compress2(dest, &len, src, n, level)` into a `compressBound(n)` buffer, as
/// LLVM's `zlib::compress` calls it.
fn compress2(data: &[u8], level: i32) -> Vec<u8> {
    // SAFETY: `out` has `bound` bytes of capacity, `compress2` writes at most `len` bytes
    // there and sets `len` to the count written; `data` is read for its length.
    unsafe {
        let bound = libz_sys::compressBound(data.len() as libz_sys::uLong);
        let mut out = Vec::<u8>::with_capacity(bound as usize);
        let mut len = bound;
        let rc = libz_sys::compress2(
            out.as_mut_ptr(),
            &mut len,
            data.as_ptr(),
            data.len() as libz_sys::uLong,
            level,
        );
        assert_eq!(rc, libz_sys::Z_OK);
        out.set_len(len as usize);
        out
    }
}

/// The `CCOB` blob LLVM writes for `bundle` with the payload `payload`.
fn llvm_ccob(bundle: &[u8], payload: &[u8], version: u16) -> Vec<u8> {
    let mut v = b"CCOB".to_vec();
    v.extend_from_slice(&version.to_le_bytes());
    // `llvm::compression::Format::Zlib` is 0.
    v.extend_from_slice(&0u16.to_le_bytes());
    let hash = offload_image::ccob::truncated_md5(bundle);
    if version == 2 {
        v.extend_from_slice(&(24 + payload.len() as u32).to_le_bytes());
        v.extend_from_slice(&(bundle.len() as u32).to_le_bytes());
    } else {
        v.extend_from_slice(&(32 + payload.len() as u64).to_le_bytes());
        v.extend_from_slice(&(bundle.len() as u64).to_le_bytes());
    }
    v.extend_from_slice(&hash);
    v.extend_from_slice(payload);
    v
}

fn run(args: &[String]) {
    if let Err(e) = bundler::run("clang-offload-bundler", args) {
        panic!("{args:?}: {}", e.report("clang-offload-bundler"));
    }
}

#[test]
fn zlib_payloads_are_compress2s() {
    let dir = std::env::temp_dir().join(format!("offload-dropin-zlib-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).display().to_string();
    // Compressible but not trivial: a repeated pseudo-random text.
    let mut x = 0x2027_u32;
    let mut text: Vec<u8> = (0..20000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            b"abcdefgh \n"[(x >> 16) as usize % 10]
        })
        .collect();
    text.extend_from_slice(&text.clone());
    std::fs::write(dir.join("host"), &text[..5000]).unwrap();
    std::fs::write(dir.join("dev"), &text).unwrap();
    let mut checked = 0;
    for ty in ["bc", "ll"] {
        let base = vec![
            format!("-type={ty}"),
            "-targets=host-x86_64-unknown-linux-gnu,hip-amdgcn-amd-amdhsa--gfx90a".to_string(),
            format!("-input={}", p("host")),
            format!("-input={}", p("dev")),
        ];
        // The uncompressed bundle.
        let mut args = base.clone();
        args.push(format!("-output={}", p("plain")));
        run(&args);
        let plain = std::fs::read(dir.join("plain")).unwrap();
        for version in [2u16, 3] {
            for level in [None, Some(1), Some(6), Some(9)] {
                let mut args = base.clone();
                args.extend([
                    format!("-output={}", p("z")),
                    "-compress".into(),
                    "-compression-method=zlib".into(),
                ]);
                args.extend(level.map(|l| format!("-compression-level={l}")));
                // The version comes from the environment only; set it in-process.
                std::env::set_var("COMPRESSED_BUNDLE_FORMAT_VERSION", version.to_string());
                run(&args);
                std::env::remove_var("COMPRESSED_BUNDLE_FORMAT_VERSION");
                let got = std::fs::read(dir.join("z")).unwrap();
                let want = llvm_ccob(&plain, &compress2(&plain, level.unwrap_or(6)), version);
                assert!(
                    got == want,
                    "{ty} v{version} level {level:?}: {} bytes, compress2 gives {}",
                    got.len(),
                    want.len()
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 16);
    let _ = std::fs::remove_dir_all(&dir);
}
