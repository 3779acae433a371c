//! Compressed offload bundles (`CCOB` v2 and v3, `FORMATS.md` §5) with the header fields
//! computed exactly as LLVM's `CompressedOffloadBundle::compress` computes them:
//!
//! * `total_size` = header size + compressed payload size (the whole blob);
//! * `uncompressed_size` = size of the input;
//! * `hash` = the first 8 bytes of the MD5 digest of the input (`MD5Result::low()` stored
//!   little-endian).
//!
//! Version 2 refuses inputs or blobs larger than `u32::MAX` bytes, as LLVM does; version 3
//! has 64-bit fields. Version 1 is never written (LLVM stopped writing it in LLVM 19).
//!
//! # Payload bytes
//!
//! LLVM 22 compresses through `llvm::compression`: `zstd::compress` makes a `ZSTD_CCtx`,
//! sets `ZSTD_c_enableLongDistanceMatching` (the bundler always passes `true`) and
//! `ZSTD_c_compressionLevel` (the bundler's level, 3 unless set) and calls `ZSTD_compress2`;
//! `zlib::compress` calls zlib's `compress2` at the level (zlib's default 6 unless set).
//! Which payload a codec writes:
//!
//! * `Codec::LibZstd` and `Codec::LibZlib` (feature `llvm-compress`) make the same
//!   calls into the C libraries, through `zstd-safe` and `flate2`'s zlib backend, so the
//!   payload is byte-identical to LLVM's *when both link the same library version*. By
//!   default the feature builds the libraries' bundled sources (`zstd-sys`'s zstd 1.5.7,
//!   `libz-sys`'s static zlib 1.3.2, which gives the system zlib 1.2.13's bytes); the feature
//!   `system-zstd` links the system's libzstd through pkg-config instead, as a
//!   distribution's LLVM does (Debian's LLVM 22 links Debian's libzstd 1.5.4). The bundled
//!   zstd writes the payload of *its* version, which equals the output of an LLVM
//!   linked with that version but differs from the system LLVM's at most levels (1.5.7
//!   against Debian's 1.5.4: measured in `docs/FINDINGS.md`): zstd's match finders and
//!   block splitting change between releases. The header and the decompressed content
//!   never change.
//! * [`Codec::Zstd`] and [`Codec::Zlib`] are pure Rust (`ruzstd`, `miniz_oxide`) and
//!   available without C libraries. `ruzstd` only implements an uncompressed mode and a
//!   "fastest" mode (about zstd level 1), `miniz_oxide` its own deflate: the payloads differ
//!   from LLVM's but are standard zstd frames / RFC 1950 streams that LLVM decompresses to
//!   exactly the input.

use std::vec::Vec;

use zerocopy::byteorder::little_endian::{U16, U32, U64};
use zerocopy::IntoBytes;

use super::len64;
use crate::ccob::{truncated_md5, CompressionMethod};
use crate::error::{Error, ErrorKind};
use crate::raw::{CcobHeaderV2, CcobHeaderV3, CcobPrefix, CCOB_MAGIC};

/// How the zstd encoder works (the only modes `ruzstd` implements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZstdMode {
    /// Raw blocks inside a zstd frame: no compression, fastest to write.
    Uncompressed,
    /// `ruzstd`'s fastest mode, comparable to zstd level 1.
    Fastest,
}

/// Codec and level of the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Codec {
    /// A zlib (RFC 1950) stream from `miniz_oxide` at `level` (0–10; 6 is zlib's default,
    /// 10 is miniz's slowest and smallest; larger values are treated as 10).
    Zlib {
        /// Compression level.
        level: u8,
    },
    /// A zstd frame from `ruzstd`.
    Zstd(ZstdMode),
    /// A zstd frame from the C libzstd, made as LLVM's `zstd::compress` makes it: one
    /// `ZSTD_compress2` call with `ZSTD_c_compressionLevel` = `level` (clamped by libzstd to
    /// its range; 0 is libzstd's default, 3) and `ZSTD_c_enableLongDistanceMatching` =
    /// `long_distance_matching` (the offload bundler always enables it).
    #[cfg(feature = "llvm-compress")]
    LibZstd {
        /// Compression level, passed to libzstd as is.
        level: i32,
        /// Long-distance matching.
        long_distance_matching: bool,
    },
    /// A zlib stream from the C zlib, made as LLVM's `zlib::compress` makes it (zlib's
    /// `compress2`: `deflateInit` at `level`, window 15 bits, memory level 8, default
    /// strategy, one `deflate(Z_FINISH)`). `level` is 0–9, or -1 for zlib's default (6);
    /// other values are clamped to 0–9 (zlib refuses them; LLVM only asserts).
    #[cfg(feature = "llvm-compress")]
    LibZlib {
        /// Compression level.
        level: i32,
    },
}

/// `LLVM 22`'s choice of parameters for a bundler run with `method` and `level`
/// (`OffloadBundlerConfig` and `BundleFiles`): zstd with long-distance matching, or zlib.
#[cfg(feature = "llvm-compress")]
pub fn llvm_codec(method: CompressionMethod, level: i32) -> Codec {
    match method {
        CompressionMethod::Zlib => Codec::LibZlib { level },
        _ => Codec::LibZstd {
            level,
            long_distance_matching: true,
        },
    }
}

impl Codec {
    tools_pub! {
        /// The method recorded in the header.
        pub fn method(self) -> CompressionMethod {
            match self {
                Codec::Zlib { .. } => CompressionMethod::Zlib,
                Codec::Zstd(_) => CompressionMethod::Zstd,
                #[cfg(feature = "llvm-compress")]
                Codec::LibZlib { .. } => CompressionMethod::Zlib,
                #[cfg(feature = "llvm-compress")]
                Codec::LibZstd { .. } => CompressionMethod::Zstd,
            }
        }
    }

    /// Compresses `data` into a bare payload (no `CCOB` header).
    ///
    /// Only running out of memory can make libzstd or zlib fail here; that aborts the
    /// process through [`std::alloc::handle_alloc_error`], as a failed allocation of the
    /// output vector would (LLVM calls `report_bad_alloc_error`).
    pub fn compress(self, data: &[u8]) -> Vec<u8> {
        match self {
            Codec::Zlib { level } => {
                miniz_oxide::deflate::compress_to_vec_zlib(data, level.min(10))
            }
            Codec::Zstd(mode) => {
                let level = match mode {
                    ZstdMode::Uncompressed => ruzstd::encoding::CompressionLevel::Uncompressed,
                    ZstdMode::Fastest => ruzstd::encoding::CompressionLevel::Fastest,
                };
                ruzstd::encoding::compress_to_vec(data, level)
            }
            #[cfg(feature = "llvm-compress")]
            Codec::LibZstd {
                level,
                long_distance_matching,
            } => libzstd_compress(data, level, long_distance_matching)
                .unwrap_or_else(|| out_of_memory(data.len())),
            #[cfg(feature = "llvm-compress")]
            Codec::LibZlib { level } => {
                libz_compress(data, level).unwrap_or_else(|| out_of_memory(data.len()))
            }
        }
    }
}

/// Aborts as a failed allocation of a buffer for `n` bytes does.
#[cfg(feature = "llvm-compress")]
fn out_of_memory(n: usize) -> ! {
    let layout = std::alloc::Layout::array::<u8>(n.max(1))
        .unwrap_or_else(|_| std::alloc::Layout::new::<[u8; 1]>());
    std::alloc::handle_alloc_error(layout)
}

/// `llvm::compression::zstd::compress`.
#[cfg(feature = "llvm-compress")]
fn libzstd_compress(data: &[u8], level: i32, ldm: bool) -> Option<Vec<u8>> {
    use zstd_safe::CParameter;
    let mut cctx = zstd_safe::CCtx::try_create()?;
    cctx.set_parameter(CParameter::EnableLongDistanceMatching(ldm))
        .ok()?;
    cctx.set_parameter(CParameter::CompressionLevel(level))
        .ok()?;
    let mut out = Vec::with_capacity(zstd_safe::compress_bound(data.len()));
    cctx.compress2(&mut out, data).ok()?;
    Some(out)
}

/// `llvm::compression::zlib::compress` (zlib's `compress2`).
#[cfg(feature = "llvm-compress")]
fn libz_compress(data: &[u8], level: i32) -> Option<Vec<u8>> {
    use flate2::{Compress, Compression, FlushCompress, Status};
    // Z_DEFAULT_COMPRESSION is level 6 in zlib; other levels outside 0..=9 are clamped
    // (zlib refuses them with Z_STREAM_ERROR, which LLVM only asserts against).
    let level = if level == -1 { 6 } else { level.clamp(0, 9) };
    // compressBound(n) = n + n/4096 + n/16384 + n/33554432 + 13 (zlib 1.2.13): one
    // `deflate(Z_FINISH)` into a buffer of that size finishes the stream, as in
    // `compress2`.
    let n = data.len();
    let bound = [n >> 12, n >> 14, n >> 25, 13]
        .iter()
        .fold(n, |a, b| a.saturating_add(*b));
    let mut out = Vec::with_capacity(bound);
    let mut z = Compress::new(Compression::new(level.unsigned_abs()), true);
    match z.compress_vec(data, &mut out, FlushCompress::Finish) {
        Ok(Status::StreamEnd) => Some(out),
        _ => None,
    }
}

/// What to write: header version and codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CcobOptions {
    /// Header version: 2 (32-bit sizes, LLVM 19–21's default) or 3 (64-bit sizes, LLVM 22's
    /// default).
    pub version: u16,
    /// Payload codec.
    pub codec: Codec,
}

impl Default for CcobOptions {
    /// Version 3 with zstd, like LLVM 22 built with zstd.
    fn default() -> Self {
        CcobOptions {
            version: 3,
            codec: Codec::Zstd(ZstdMode::Fastest),
        }
    }
}

tools_pub! {
    /// Builds the `CCOB` header for a payload of `compressed_len` bytes that decompresses to
    /// `data`.
    pub fn header(data: &[u8], compressed_len: u64, options: &CcobOptions) -> Result<Vec<u8>, Error> {
        let prefix = CcobPrefix {
            magic: *CCOB_MAGIC,
            version: U16::new(options.version),
            method: U16::new(options.codec.method().code()),
        };
        let hash = truncated_md5(data);
        let uncompressed = len64(data.len());
        match options.version {
            2 => {
                let total = 24u64.checked_add(compressed_len);
                let (Ok(uncompressed), Some(Ok(total))) =
                    (u32::try_from(uncompressed), total.map(u32::try_from))
                else {
                    return Err(Error::new(
                        ErrorKind::LimitExceeded,
                        8,
                        "bundle too large for a version 2 compressed bundle (32-bit sizes); use version 3",
                    ));
                };
                let h = CcobHeaderV2 {
                    prefix,
                    total_size: U32::new(total),
                    uncompressed_size: U32::new(uncompressed),
                    hash,
                };
                Ok(h.as_bytes().to_vec())
            }
            3 => {
                let total = 32u64.checked_add(compressed_len).ok_or(Error::new(
                    ErrorKind::LimitExceeded,
                    8,
                    "compressed bundle size overflows 64 bits",
                ))?;
                let h = CcobHeaderV3 {
                    prefix,
                    total_size: U64::new(total),
                    uncompressed_size: U64::new(uncompressed),
                    hash,
                };
                Ok(h.as_bytes().to_vec())
            }
            _ => Err(Error::new(
                ErrorKind::UnsupportedVersion,
                4,
                "compressed bundles are written as version 2 or 3",
            )),
        }
    }
}

/// Compresses `data` (normally a whole binary bundle) into a `CCOB` blob.
pub fn compress(data: &[u8], options: &CcobOptions) -> Result<Vec<u8>, Error> {
    if !matches!(options.version, 2 | 3) {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            4,
            "compressed bundles are written as version 2 or 3",
        ));
    }
    if options.version == 2 && u32::try_from(data.len()).is_err() {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            12,
            "bundle too large for a version 2 compressed bundle (32-bit sizes); use version 3",
        ));
    }
    let payload = options.codec.compress(data);
    let mut out = header(data, len64(payload.len()), options)?;
    out.extend_from_slice(&payload);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccob::CompressedBundle;
    use crate::options::ReadOptions;

    /// The libzstd and zlib codecs write standard streams that the library's pure-Rust
    /// decoders read back, with the header fields LLVM computes; the level reaches libzstd
    /// (higher levels give smaller frames here) and zlib (`Z_DEFAULT_COMPRESSION` is 6).
    #[cfg(feature = "llvm-compress")]
    #[test]
    fn c_library_codecs_round_trip() {
        let mut data: Vec<u8> = (0..20000u32).map(|i| (i * i % 251) as u8).collect();
        let copy = data.clone();
        data.extend_from_slice(&copy);
        let mut zstd_sizes = Vec::new();
        for level in [1, 3, 9, 19, 22] {
            let codec = llvm_codec(CompressionMethod::Zstd, level);
            let opts = CcobOptions { version: 3, codec };
            let blob = compress(&data, &opts).unwrap();
            let c = CompressedBundle::parse(&blob).unwrap();
            assert_eq!(c.method(), CompressionMethod::Zstd);
            assert_eq!(c.decompress(&ReadOptions::default()).unwrap(), data);
            zstd_sizes.push(blob.len());
        }
        assert!(zstd_sizes[4] < zstd_sizes[0], "{zstd_sizes:?}");
        for level in [-1, 1, 6, 9] {
            let codec = llvm_codec(CompressionMethod::Zlib, level);
            let blob = compress(&data, &CcobOptions { version: 2, codec }).unwrap();
            let c = CompressedBundle::parse(&blob).unwrap();
            assert_eq!(c.method(), CompressionMethod::Zlib);
            assert_eq!(c.decompress(&ReadOptions::default()).unwrap(), data);
        }
        assert_eq!(
            Codec::LibZlib { level: -1 }.compress(&data),
            Codec::LibZlib { level: 6 }.compress(&data)
        );
    }

    #[test]
    fn header_fields_and_round_trip() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for version in [2u16, 3] {
            for codec in [
                Codec::Zlib { level: 6 },
                Codec::Zlib { level: 0 },
                Codec::Zstd(ZstdMode::Fastest),
                Codec::Zstd(ZstdMode::Uncompressed),
            ] {
                let opts = CcobOptions { version, codec };
                let blob = compress(&data, &opts).unwrap();
                let c = CompressedBundle::parse(&blob).unwrap();
                assert_eq!(c.version(), version);
                assert_eq!(c.method(), codec.method());
                assert_eq!(c.total_size(), Some(blob.len() as u64));
                assert_eq!(c.uncompressed_size(), data.len() as u64);
                assert_eq!(c.hash(), truncated_md5(&data));
                assert_eq!(c.decompress(&ReadOptions::default()).unwrap(), data);
            }
        }
        let bad = CcobOptions {
            version: 1,
            codec: Codec::Zlib { level: 1 },
        };
        assert_eq!(
            compress(&data, &bad).unwrap_err().kind(),
            ErrorKind::UnsupportedVersion
        );
    }
}
