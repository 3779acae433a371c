//! Compressed offload bundles (`CCOB` v1, v2, v3; `FORMATS.md` §5).
//!
//! [`CompressedBundle::parse`] reads and checks the header in place. Decompression
//! ([`CompressedBundle::decompress`]) checks the declared size against the caller's limit
//! and against what the payload could possibly produce *before* allocating, allocates the
//! output once (fallibly), decodes into it, and verifies the truncated MD5 unless the
//! caller opts out.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::bytes::{self, u64_of};
use crate::error::{Error, ErrorKind, Result};
use crate::raw::{CcobHeaderV1, CcobHeaderV2, CcobHeaderV3, CcobPrefix, CCOB_MAGIC};
use crate::ReadOptions;

/// The compression method of a `CCOB` (values of `llvm::compression::Format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompressionMethod {
    /// 0: a zlib (RFC 1950) stream.
    Zlib,
    /// 1: a zstd frame.
    Zstd,
}

impl CompressionMethod {
    /// The value stored in the header.
    pub const fn code(self) -> u16 {
        match self {
            CompressionMethod::Zlib => 0,
            CompressionMethod::Zstd => 1,
        }
    }

    /// Lowercase name: `"zlib"` or `"zstd"`.
    pub const fn name(self) -> &'static str {
        match self {
            CompressionMethod::Zlib => "zlib",
            CompressionMethod::Zstd => "zstd",
        }
    }

    /// The most output one input byte can produce: bounds a plausible declared size.
    ///
    /// Deflate expands at most 1032:1; a zstd RLE block turns 4 bytes into 128 KiB.
    const fn max_ratio(self) -> u64 {
        match self {
            CompressionMethod::Zlib => 1032,
            CompressionMethod::Zstd => 32768,
        }
    }
}

/// A compressed bundle header and its compressed payload, borrowed in place.
#[derive(Clone, Copy, Debug)]
pub struct CompressedBundle<'data> {
    version: u16,
    method: CompressionMethod,
    total_size: Option<u64>,
    uncompressed_size: u64,
    hash: [u8; 8],
    header_len: u64,
    payload: &'data [u8],
}

/// Returns true if `data` starts with `CCOB`.
pub fn is_compressed_bundle(data: &[u8]) -> bool {
    data.starts_with(CCOB_MAGIC)
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
        let (header_len, total_size, uncompressed_size, hash) = match version {
            1 => {
                let h: &CcobHeaderV1 =
                    bytes::read(data, 0, "compressed bundle v1 header truncated")?;
                (20u64, None, u64::from(h.uncompressed_size.get()), h.hash)
            }
            2 => {
                let h: &CcobHeaderV2 =
                    bytes::read(data, 0, "compressed bundle v2 header truncated")?;
                (
                    24,
                    Some(u64::from(h.total_size.get())),
                    u64::from(h.uncompressed_size.get()),
                    h.hash,
                )
            }
            3 => {
                let h: &CcobHeaderV3 =
                    bytes::read(data, 0, "compressed bundle v3 header truncated")?;
                (
                    32,
                    Some(h.total_size.get()),
                    h.uncompressed_size.get(),
                    h.hash,
                )
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::UnsupportedVersion,
                    4,
                    "compressed bundle version is not 1, 2 or 3",
                ))
            }
        };
        let method = match prefix.method.get() {
            0 => CompressionMethod::Zlib,
            1 => CompressionMethod::Zstd,
            _ => {
                return Err(Error::new(
                    ErrorKind::UnsupportedMethod,
                    6,
                    "compressed bundle method is neither zlib (0) nor zstd (1)",
                ))
            }
        };
        let end = match total_size {
            Some(total) => {
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
                total
            }
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

    /// Header version: 1, 2 or 3.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Compression method.
    pub fn method(&self) -> CompressionMethod {
        self.method
    }

    /// The total size recorded in a v2/v3 header (`None` for v1).
    pub fn total_size(&self) -> Option<u64> {
        self.total_size
    }

    /// The declared size of the decompressed bundle.
    pub fn uncompressed_size(&self) -> u64 {
        self.uncompressed_size
    }

    /// The stored hash: the first 8 bytes of the MD5 digest of the decompressed bundle.
    pub fn hash(&self) -> [u8; 8] {
        self.hash
    }

    /// The header size (20, 24 or 32): the payload starts here.
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// The compressed payload (for v1: up to the end of the data given to `parse`).
    pub fn payload(&self) -> &'data [u8] {
        self.payload
    }

    /// Size of the blob in its container: `total_size` for v2/v3; for v1 the header plus
    /// the length of the compressed stream, found by decoding it.
    pub fn len(&self, options: &ReadOptions) -> Result<u64> {
        match self.total_size {
            Some(t) => Ok(t),
            None => {
                let (_, used) = self.decode(options, false)?;
                Ok(self.header_len.saturating_add(used))
            }
        }
    }

    /// True if the blob has no payload at all (never true for a valid blob).
    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }

    /// Decompresses the payload into a new buffer of exactly [`Self::uncompressed_size`]
    /// bytes and verifies the hash if `options.verify_hash` is set.
    ///
    /// Errors are located relative to the start of the blob.
    pub fn decompress(&self, options: &ReadOptions) -> Result<Vec<u8>> {
        self.decode(options, options.verify_hash).map(|(v, _)| v)
    }

    /// Decodes the payload: (output, compressed bytes consumed).
    fn decode(&self, options: &ReadOptions, verify: bool) -> Result<(Vec<u8>, u64)> {
        let size_field = match self.version {
            3 => 16,
            2 => 12,
            _ => 8,
        };
        let (out, used) = decode_raw(
            self.method,
            self.payload,
            self.header_len,
            self.uncompressed_size,
            size_field,
            options,
        )?;
        if self.total_size.is_some() && used != u64_of(self.payload.len()) {
            return Err(Error::new(
                ErrorKind::Malformed,
                self.header_len.saturating_add(used),
                "bytes after the end of the compressed stream",
            ));
        }
        if verify && truncated_md5(&out) != self.hash {
            return Err(Error::new(
                ErrorKind::HashMismatch,
                self.header_len.saturating_sub(8),
                "truncated MD5 of the decompressed bundle does not match the header",
            ));
        }
        Ok((out, used))
    }
}

/// The first 8 bytes of the MD5 digest of `data`: the hash a `CCOB` header stores.
pub fn truncated_md5(data: &[u8]) -> [u8; 8] {
    let mut ctx = md5::Context::new();
    ctx.consume(data);
    let digest = ctx.finalize();
    let mut h = [0u8; 8];
    h.copy_from_slice(digest.0.get(..8).unwrap_or(&[0; 8]));
    h
}

/// Decompresses `payload` into a new buffer of exactly `size` bytes: (output, bytes consumed).
///
/// `size` is checked against the limit and against what the payload could produce before
/// anything is allocated; those errors are reported at `size_field` (the header field that
/// declared it), stream errors at `payload_at` plus their position in the payload.
pub(crate) fn decode_raw(
    method: CompressionMethod,
    payload: &[u8],
    payload_at: u64,
    size: u64,
    size_field: u64,
    options: &ReadOptions,
) -> Result<(Vec<u8>, u64)> {
    if size > options.limits.max_decompressed_size {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            size_field,
            "declared decompressed size exceeds the limit",
        ));
    }
    let possible = u64_of(payload.len())
        .saturating_mul(method.max_ratio())
        .saturating_add(64);
    if size > possible {
        return Err(Error::new(
            ErrorKind::SizeMismatch,
            size_field,
            "declared decompressed size is more than the payload can produce",
        ));
    }
    let len = usize::try_from(size).map_err(|_| {
        Error::new(
            ErrorKind::LimitExceeded,
            size_field,
            "declared decompressed size does not fit in memory",
        )
    })?;
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| {
        Error::new(
            ErrorKind::OutOfMemory,
            size_field,
            "cannot reserve memory for the decompressed data",
        )
    })?;
    out.resize(len, 0);
    let used = match method {
        CompressionMethod::Zlib => inflate_zlib(payload, &mut out),
        CompressionMethod::Zstd => decode_zstd(payload, &mut out, options),
    }
    .map_err(|(kind, what, at)| Error::new(kind, payload_at.saturating_add(at), what))?;
    Ok((out, used))
}

type DecodeError = (ErrorKind, &'static str, u64);

/// Inflates a zlib stream into exactly `out`; returns the compressed length.
fn inflate_zlib(input: &[u8], out: &mut [u8]) -> core::result::Result<u64, DecodeError> {
    use miniz_oxide::inflate::core::inflate_flags::{
        TINFL_FLAG_COMPUTE_ADLER32, TINFL_FLAG_PARSE_ZLIB_HEADER,
        TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
    };
    use miniz_oxide::inflate::core::{decompress, DecompressorOxide};
    use miniz_oxide::inflate::TINFLStatus;

    let mut state = Box::<DecompressorOxide>::default();
    let flags = TINFL_FLAG_PARSE_ZLIB_HEADER
        | TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF
        | TINFL_FLAG_COMPUTE_ADLER32;
    let (status, used, written) = decompress(&mut state, input, out, 0, flags);
    let used64 = u64_of(used);
    match status {
        TINFLStatus::Done if written == out.len() => Ok(used64),
        TINFLStatus::Done => Err((
            ErrorKind::SizeMismatch,
            "compressed stream is shorter than the declared decompressed size",
            used64,
        )),
        TINFLStatus::HasMoreOutput => Err((
            ErrorKind::SizeMismatch,
            "compressed stream is longer than the declared decompressed size",
            used64,
        )),
        TINFLStatus::NeedsMoreInput | TINFLStatus::FailedCannotMakeProgress => {
            Err((ErrorKind::Truncated, "zlib stream is truncated", used64))
        }
        TINFLStatus::Adler32Mismatch => Err((
            ErrorKind::Decompress,
            "zlib stream checksum mismatch",
            used64,
        )),
        _ => Err((ErrorKind::Decompress, "zlib stream is corrupt", used64)),
    }
}

/// Decodes one zstd frame into exactly `out`; returns the compressed length.
fn decode_zstd(
    input: &[u8],
    out: &mut [u8],
    options: &ReadOptions,
) -> core::result::Result<u64, DecodeError> {
    use ruzstd::decoding::errors::FrameDecoderError;
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
    use ruzstd::io::Read;

    let consumed = |src: &[u8]| u64_of(input.len().saturating_sub(src.len()));
    let mut src = input;
    let mut decoder = FrameDecoder::new();
    // The window can never usefully exceed the output; allow clang's LDM window otherwise.
    let window =
        u64_of(out.len()).clamp(1 << 20, options.limits.max_decompressed_size.max(1 << 20));
    decoder.set_max_window_size(window);
    decoder.init(&mut src).map_err(|e| match e {
        FrameDecoderError::WindowSizeTooBig { .. } => (
            ErrorKind::LimitExceeded,
            "zstd window is larger than the decompressed bundle or the limit",
            0,
        ),
        _ => (ErrorKind::Decompress, "zstd frame header is invalid", 0),
    })?;
    let fcs = decoder.content_size();
    if fcs != 0 && fcs != u64_of(out.len()) {
        return Err((
            ErrorKind::SizeMismatch,
            "zstd frame content size differs from the declared decompressed size",
            0,
        ));
    }
    let mut written = 0usize;
    loop {
        decoder
            .decode_blocks(&mut src, BlockDecodingStrategy::UptoBytes(1 << 20))
            .map_err(|e| match e {
                FrameDecoderError::FailedToReadBlockHeader(_)
                | FrameDecoderError::FailedToReadBlockBody(_) => {
                    if src.is_empty() {
                        (
                            ErrorKind::Truncated,
                            "zstd stream is truncated",
                            consumed(src),
                        )
                    } else {
                        (
                            ErrorKind::Decompress,
                            "zstd stream is corrupt",
                            consumed(src),
                        )
                    }
                }
                _ => (
                    ErrorKind::Decompress,
                    "zstd stream is corrupt",
                    consumed(src),
                ),
            })?;
        loop {
            let dst = out.get_mut(written..).unwrap_or(&mut []);
            if dst.is_empty() {
                break;
            }
            let n = decoder.read(dst).map_err(|_| {
                (
                    ErrorKind::Decompress,
                    "zstd stream is corrupt",
                    consumed(src),
                )
            })?;
            if n == 0 {
                break;
            }
            written = written.saturating_add(n);
        }
        if decoder.can_collect() > 0 {
            return Err((
                ErrorKind::SizeMismatch,
                "compressed stream is longer than the declared decompressed size",
                consumed(src),
            ));
        }
        if decoder.is_finished() {
            break;
        }
    }
    if written != out.len() {
        return Err((
            ErrorKind::SizeMismatch,
            "compressed stream is shorter than the declared decompressed size",
            consumed(src),
        ));
    }
    Ok(consumed(src))
}
