//! The vocabulary of compression, at the bottom of the road: the codecs ([`Codec`]), the
//! interface of a streaming decoder ([`Decompressor`]), and the header of a compressed
//! bundle read in place ([`CompressedBundle`]; its decoding is [`crate::ccob`]'s). The
//! decoders hook of [`ReadOptions`](crate::options::ReadOptions) is written in these
//! terms, so the options need nothing further up the road.

use alloc::boxed::Box;

use crate::bytes::{self, u64_of};
use crate::error::{Error, ErrorKind, Result};
use crate::raw::{CcobHeaderV1, CcobHeaderV2, CcobHeaderV3, CcobPrefix, CCOB_MAGIC};

/// Bytes a default [`Decompressor::read_with`] reads per call.
pub(crate) const READ_CHUNK: usize = 16 << 10;

/// A compression codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    /// A zlib (RFC 1950) stream.
    Zlib,
    /// A zstd frame.
    Zstd,
    /// An LZ4 block (no frame).
    Lz4,
}

impl Codec {
    /// Lowercase name: `"zlib"`, `"zstd"` or `"lz4"`.
    pub const fn name(self) -> &'static str {
        match self {
            Codec::Zlib => "zlib",
            Codec::Zstd => "zstd",
            Codec::Lz4 => "lz4",
        }
    }

    /// The most output one input byte can produce: bounds a plausible declared size.
    ///
    /// Deflate expands at most 1032:1; a zstd RLE block turns 4 bytes into 128 KiB; an LZ4
    /// token with a 255-byte run extension adds at most 255 bytes of match per input byte.
    pub const fn max_ratio(self) -> u64 {
        match self {
            Codec::Zlib => 1032,
            Codec::Zstd => 32768,
            Codec::Lz4 => 256,
        }
    }
}

/// A decoder of one compressed stream, read front to back into caller buffers.
///
/// The crate implements it for zlib (`ZlibStream`, miniz_oxide with a 32 KiB window) and
/// zstd (`ZstdStream`, ruzstd); a program with `std` can implement it over a faster
/// decoder (`loader-sim` does over C libzstd). [`crate::ccob::ContentReader`] drives it.
pub trait Decompressor {
    /// Decompresses the next bytes into `out` and returns how many it wrote. `Ok(0)` with
    /// a non-empty `out` means the stream has ended. Errors are located in the compressed
    /// payload (offset from its first byte).
    fn read(&mut self, out: &mut [u8]) -> Result<usize>;

    /// Compressed bytes consumed so far: the length of the stream once it has ended.
    fn consumed(&self) -> u64;

    /// Decompresses the next bytes (at most `max`, at least one unless the stream has
    /// ended) and shows them to `f`; returns how many. A decoder that holds its output in
    /// a buffer of its own overrides this to show that buffer without a copy; the default
    /// reads into a 16 KiB stack buffer.
    fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize> {
        let mut buf = [0u8; READ_CHUNK];
        let dst = buf.get_mut(..max.min(READ_CHUNK)).unwrap_or_default();
        let n = self.read(dst)?;
        f(dst.get(..n).unwrap_or_default());
        Ok(n)
    }
}

impl<D: Decompressor + ?Sized> Decompressor for &mut D {
    fn read(&mut self, out: &mut [u8]) -> Result<usize> {
        (**self).read(out)
    }
    fn consumed(&self) -> u64 {
        (**self).consumed()
    }
    fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize> {
        (**self).read_with(max, f)
    }
}

impl<D: Decompressor + ?Sized> Decompressor for Box<D> {
    fn read(&mut self, out: &mut [u8]) -> Result<usize> {
        (**self).read(out)
    }
    fn consumed(&self) -> u64 {
        (**self).consumed()
    }
    fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize> {
        (**self).read_with(max, f)
    }
}

/// The compression method of a `CCOB` (values of `llvm::compression::Format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompressionMethod {
    /// 0: a zlib (RFC 1950) stream.
    Zlib,
    /// 1: a zstd frame.
    Zstd,
}

impl CompressionMethod {
    tools_pub! {
        /// The value stored in the header.
        pub const fn code(self) -> u16 {
            match self {
                CompressionMethod::Zlib => 0,
                CompressionMethod::Zstd => 1,
            }
        }
    }

    /// Lowercase name: `"zlib"` or `"zstd"`.
    pub const fn name(self) -> &'static str {
        match self {
            CompressionMethod::Zlib => "zlib",
            CompressionMethod::Zstd => "zstd",
        }
    }

    tools_pub! {
        /// The codec.
        pub const fn codec(self) -> Codec {
            match self {
                CompressionMethod::Zlib => Codec::Zlib,
                CompressionMethod::Zstd => Codec::Zstd,
            }
        }
    }
}

/// A compressed bundle header and its compressed payload, borrowed in place.
#[derive(Clone, Copy, Debug)]
pub struct CompressedBundle<'data> {
    pub(crate) version: u16,
    pub(crate) method: CompressionMethod,
    pub(crate) total_size: Option<u64>,
    pub(crate) uncompressed_size: u64,
    pub(crate) hash: [u8; 8],
    pub(crate) header_len: u64,
    pub(crate) payload: &'data [u8],
}

/// What the header of a version-`version` `CCOB` at `data[0]` declares: its length, its
/// total size (none in version 1), the uncompressed size and the hash.
fn read_sizes(data: &[u8], version: u16) -> Result<(u64, Option<u64>, u64, [u8; 8])> {
    match version {
        1 => {
            let h: &CcobHeaderV1 = bytes::read(data, 0, "compressed bundle v1 header truncated")?;
            Ok((20u64, None, u64::from(h.uncompressed_size.get()), h.hash))
        }
        2 => {
            let h: &CcobHeaderV2 = bytes::read(data, 0, "compressed bundle v2 header truncated")?;
            Ok((
                24,
                Some(u64::from(h.total_size.get())),
                u64::from(h.uncompressed_size.get()),
                h.hash,
            ))
        }
        3 => {
            let h: &CcobHeaderV3 = bytes::read(data, 0, "compressed bundle v3 header truncated")?;
            Ok((
                32,
                Some(h.total_size.get()),
                h.uncompressed_size.get(),
                h.hash,
            ))
        }
        _ => Err(Error::new(
            ErrorKind::UnsupportedVersion,
            4,
            "compressed bundle version is not 1, 2 or 3",
        )),
    }
}

/// The compression method a `CCOB` header's method field names.
fn method_of(method: u16) -> Result<CompressionMethod> {
    match method {
        0 => Ok(CompressionMethod::Zlib),
        1 => Ok(CompressionMethod::Zstd),
        _ => Err(Error::new(
            ErrorKind::UnsupportedMethod,
            6,
            "compressed bundle method is neither zlib (0) nor zstd (1)",
        )),
    }
}

/// Checks a `CCOB`'s declared total size: at least its header, inside `data`.
fn check_total_size(total: u64, header_len: u64, data: &[u8]) -> Result<u64> {
    if total < header_len {
        return Err(Error::new(
            ErrorKind::SizeMismatch,
            8,
            "compressed bundle total size is smaller than its header",
        ));
    }
    if total > u64_of(data.len()) {
        return Err(Error::new(
            ErrorKind::Truncated,
            8,
            "compressed bundle total size runs past the end of the data",
        ));
    }
    Ok(total)
}

impl<'data> CompressedBundle<'data> {
    /// Parses the header of the compressed bundle at `data[0]`.
    ///
    /// For v2/v3 the blob is `[0, total_size)` and must lie inside `data`. A v1 blob records
    /// no size: its payload is taken to run to the end of `data` and its real end is that of
    /// the compressed stream ([`CompressedBundle::len`]).
    pub fn parse(data: &'data [u8]) -> Result<Self> {
        let prefix: &CcobPrefix = bytes::read(data, 0, "compressed bundle header truncated")?;
        if &prefix.magic != CCOB_MAGIC {
            return Err(Error::new(
                ErrorKind::BadMagic,
                0,
                "not a compressed offload bundle (no CCOB magic)",
            ));
        }
        let version = prefix.version.get();
        let (header_len, total_size, uncompressed_size, hash) = read_sizes(data, version)?;
        let method = method_of(prefix.method.get())?;
        let end = match total_size {
            Some(total) => check_total_size(total, header_len, data)?,
            None => u64_of(data.len()),
        };
        let payload = bytes::sub(
            data,
            header_len,
            end.saturating_sub(header_len),
            "compressed payload",
        )?;
        Ok(CompressedBundle {
            version,
            method,
            total_size,
            uncompressed_size,
            hash,
            header_len,
            payload,
        })
    }

    tools_pub! {
        /// Header version: 1, 2 or 3.
        pub fn version(&self) -> u16 {
            self.version
        }
    }

    /// Compression method.
    pub fn method(&self) -> CompressionMethod {
        self.method
    }

    tools_pub! {
        /// The total size recorded in a v2/v3 header (`None` for v1).
        pub fn total_size(&self) -> Option<u64> {
            self.total_size
        }
    }

    tools_pub! {
        /// The declared size of the decompressed bundle.
        pub fn uncompressed_size(&self) -> u64 {
            self.uncompressed_size
        }
    }

    tools_pub! {
        /// The stored hash: the first 8 bytes of the MD5 digest of the decompressed bundle.
        pub fn hash(&self) -> [u8; 8] {
            self.hash
        }
    }

    tools_pub! {
        /// The header size (20, 24 or 32): the payload starts here.
        pub fn header_len(&self) -> u64 {
            self.header_len
        }
    }

    tools_pub! {
        /// The compressed payload (for v1: up to the end of the data given to `parse`).
        pub fn payload(&self) -> &'data [u8] {
            self.payload
        }
    }

    tools_pub! {
        /// Offset (from the start of the blob) of the header field that declares the
        /// decompressed size.
        pub fn size_field(&self) -> u64 {
            match self.version {
                3 => 16,
                2 => 12,
                _ => 8,
            }
        }
    }

    /// Offset of the stored hash in the header.
    pub(crate) fn hash_field(&self) -> u64 {
        self.header_len.saturating_sub(8)
    }

    tools_pub! {
        /// True if the blob has no payload at all (never true for a valid blob).
        pub fn is_empty(&self) -> bool {
            self.payload.is_empty()
        }
    }
}
