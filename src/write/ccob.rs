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
//! # Compressed bytes differ from LLVM's
//!
//! LLVM compresses with libzstd (level 3 with long-distance matching by default) or zlib's
//! `compress2`. This crate is pure Rust: zstd frames come from `ruzstd`, whose encoder only
//! implements an uncompressed mode and a "fastest" mode (about zstd level 1), and zlib
//! streams from `miniz_oxide` (levels 0–10). The payload bytes therefore differ from
//! LLVM's for the same input, but they are standard zstd frames / RFC 1950 streams that
//! LLVM decompresses to exactly the input, and everything else in the blob is identical.

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
pub enum Codec {
    /// A zlib (RFC 1950) stream from `miniz_oxide` at `level` (0–10; 6 is zlib's default,
    /// 10 is miniz's slowest and smallest; larger values are treated as 10).
    Zlib {
        /// Compression level.
        level: u8,
    },
    /// A zstd frame from `ruzstd`.
    Zstd(ZstdMode),
}

impl Codec {
    /// The method recorded in the header.
    pub fn method(self) -> CompressionMethod {
        match self {
            Codec::Zlib { .. } => CompressionMethod::Zlib,
            Codec::Zstd(_) => CompressionMethod::Zstd,
        }
    }

    /// Compresses `data` into a bare payload (no `CCOB` header).
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
        }
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
    use crate::ReadOptions;

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
