//! `--compress`: the compressed OffloadBinary LLVM 24's `llvm-offload-binary` writes
//! (llvm/llvm-project#227765, commit eb0f3cb, on #222774's version 3; `FORMATS.md` §6.6):
//! every file of every `--image` as the entries of one version-3 binary, whose body (after
//! the 40-byte header) is one zstd or zlib stream made as LLVM's `compression::compress`
//! makes it ([`v3_compressed_to_vec`]).
//!
//! `--compression-format=zstd|zlib` picks the codec (zstd when not given: an assumption,
//! the tool's default was not read; LLVM's tests always name one), `--compression-level=N`
//! the level: LLVM's defaults are zlib 6 and zstd 5 (`zlib::DefaultCompression`,
//! `zstd::DefaultCompression`); a zlib level outside 0–9 is refused as in LLVM's
//! `compress-level-zlib.test`; a zstd level is passed to libzstd, which clamps it
//! (`compress.test` uses -5).

use offload_image::write::ccob::Codec;
use offload_image::write::offload_binary::{v3_compressed_to_vec, OffloadImage};

use super::{fail, read_images, write, Packaged};
use crate::bundler::ToolError;

/// LLVM's `zlib::DefaultCompression`.
const ZLIB_DEFAULT: i32 = 6;
/// LLVM's `zstd::DefaultCompression`.
const ZSTD_DEFAULT: i32 = 5;

/// The codec `--compression-format` and `--compression-level` name.
pub(super) fn codec(format: Option<&str>, level: Option<&str>) -> Result<Codec, ToolError> {
    let level = match level {
        None => None,
        Some(text) => Some(text.parse::<i32>().map_err(|_| {
            fail(format!(
                "invalid compression level '{}'",
                text.escape_default()
            ))
        })?),
    };
    match format.unwrap_or("zstd") {
        "zstd" => Ok(Codec::LibZstd {
            level: level.unwrap_or(ZSTD_DEFAULT),
            long_distance_matching: false,
        }),
        "zlib" => {
            let level = level.unwrap_or(ZLIB_DEFAULT);
            if !(0..=9).contains(&level) {
                return Err(fail(format!(
                    "invalid zlib compression level {level}; expected a value in [0, 9]"
                )));
            }
            Ok(Codec::LibZlib { level })
        }
        other => Err(fail(format!(
            "invalid compression format '{}'; expected 'zstd' or 'zlib'",
            other.escape_default()
        ))),
    }
}

/// LLVM 24's `bundleImages` with `--compress`: one compressed version-3 binary of every
/// image.
pub(super) fn bundle_images(
    output: &str,
    images: &[String],
    codec: Codec,
) -> Result<(), ToolError> {
    let all = read_images(images)?;
    if all.is_empty() {
        return Err(fail("an OffloadBinary needs at least one image"));
    }
    let strings: Vec<Vec<(&[u8], &[u8])>> = all.iter().map(Packaged::strings).collect();
    let images: Vec<OffloadImage<'_>> = all.iter().zip(&strings).map(|(p, s)| p.image(s)).collect();
    let bytes = v3_compressed_to_vec(&images, codec).map_err(|e| fail(e.what()))?;
    write(output, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_formats_are_checked_as_llvm_does() {
        assert_eq!(
            codec(Some("zlib"), Some("12")).unwrap_err().msg,
            "invalid zlib compression level 12; expected a value in [0, 9]"
        );
        assert_eq!(
            codec(Some("zlib"), None).unwrap(),
            Codec::LibZlib { level: 6 }
        );
        assert_eq!(
            codec(Some("zstd"), Some("-5")).unwrap(),
            Codec::LibZstd {
                level: -5,
                long_distance_matching: false
            }
        );
        assert!(codec(Some("lz4"), None).is_err());
        assert!(codec(Some("zstd"), Some("x")).is_err());
    }
}
