//! Decompression: the codecs that offload containers use, whatever the container.
//!
//! zlib (miniz_oxide) and zstd (ruzstd) compress `CCOB` bundles and version 3
//! OffloadBinaries; zstd and LZ4 blocks (lz4_flex) compress NVIDIA fatbinary entries.
//! [`decode`] decodes a whole stream into a buffer of the size its container declares,
//! checking that size against the [`crate::Limits`] and against what the stream could
//! produce before anything is allocated; [`ZlibStream`] and [`ZstdStream`] decode front to
//! back into the caller's buffers ([`Decompressor`]). A caller with faster decoders (C
//! libzstd, say) plugs them in through [`crate::ccob::Decoders`]: `stream` and `whole` for
//! compressed bundles, `raw` ([`RawDecoderFn`]) for every other compressed payload.
//!
//! zstd frames are decoded with a window no larger than the declared content
//! ([`bounded_zstd_header`]), so a frame that states a larger window (any frame compressed
//! as a stream) decodes, and costs memory in proportion to its content.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::bytes::u64_of;
pub use crate::compressed::{Codec, Decompressor};
use crate::error::{Error, ErrorKind, Result};
pub use crate::options::RawDecoderFn;
use crate::options::ReadOptions;

/// Decodes with the caller's [`RawDecoderFn`] when [`ReadOptions::decoders`] has one that
/// handles `codec`, else with [`decode`]: the output, exactly `size` bytes. Locations as for
/// [`decode`].
pub fn decode_with_hook(
    codec: Codec,
    payload: &[u8],
    payload_at: u64,
    size: u64,
    size_field: u64,
    options: &ReadOptions,
) -> Result<Vec<u8>> {
    if let Some(hook) = options.decoders.raw {
        check_declared_size(codec, payload, size, size_field, options)?;
        if let Some(result) = hook(codec, payload, size, options) {
            let out = result.map_err(|e| e.rebase(payload_at))?;
            if u64_of(out.len()) != size {
                return Err(Error::new(
                    ErrorKind::SizeMismatch,
                    size_field,
                    "decoded payload differs from the declared size",
                ));
            }
            return Ok(out);
        }
    }
    decode(codec, payload, payload_at, size, size_field, options).map(|(v, _)| v)
}

/// Checks a declared decompressed size against the limit and against what `payload` can
/// possibly produce (errors at `size_field`); returns it as a `usize`.
pub(crate) fn check_declared_size(
    codec: Codec,
    payload: &[u8],
    size: u64,
    size_field: u64,
    options: &ReadOptions,
) -> Result<usize> {
    if size > options.limits.max_decompressed_size {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            size_field,
            "declared decompressed size exceeds the limit",
        ));
    }
    let possible = u64_of(payload.len())
        .saturating_mul(codec.max_ratio())
        .saturating_add(64);
    if size > possible {
        return Err(Error::new(
            ErrorKind::SizeMismatch,
            size_field,
            "declared decompressed size is more than the payload can produce",
        ));
    }
    usize::try_from(size).map_err(|_| {
        Error::new(
            ErrorKind::LimitExceeded,
            size_field,
            "declared decompressed size does not fit in memory",
        )
    })
}

/// Decompresses `payload` with the built-in decoder of `codec` into a new buffer of
/// exactly `size` bytes: (output, compressed bytes consumed).
///
/// `payload_at` is the offset of the payload and `size_field` that of the field that
/// declared `size`, both in the caller's frame of reference: errors are located there.
/// `size` is checked against [`crate::Limits::max_decompressed_size`] and against what
/// the payload could produce before anything is allocated, and the buffer grows only as
/// the stream really produces output ([`decode_append`]).
pub fn decode(
    codec: Codec,
    payload: &[u8],
    payload_at: u64,
    size: u64,
    size_field: u64,
    options: &ReadOptions,
) -> Result<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    let used = decode_append(
        codec, payload, payload_at, size, size_field, options, &mut out,
    )?;
    Ok((out, used))
}

/// First size the output buffer gets; it then doubles as the stream produces data.
const FIRST_CHUNK: usize = 64 << 10;

/// Decompresses `payload`, appending exactly `size` bytes to `out`; returns the number of
/// compressed bytes consumed.
///
/// `size` is checked against the limit and against what the payload could produce before
/// anything is allocated; those errors are reported at `size_field` (the header field that
/// declared it), stream errors at `payload_at` plus their position in the payload. The
/// declared size is never trusted for allocation: the buffer grows (fallibly, doubling) only
/// as the stream really produces output, so a small payload that claims a large size and
/// then ends costs memory in proportion to what it decoded, not to what it claimed.
pub fn decode_append(
    codec: Codec,
    payload: &[u8],
    payload_at: u64,
    size: u64,
    size_field: u64,
    options: &ReadOptions,
    out: &mut Vec<u8>,
) -> Result<u64> {
    check_declared_size(codec, payload, size, size_field, options)?;
    let start = out.len();
    let total = usize::try_from(size)
        .ok()
        .and_then(|n| n.checked_add(start))
        .ok_or(Error::new(
            ErrorKind::LimitExceeded,
            size_field,
            "declared decompressed size does not fit in memory",
        ))?;
    let mut output = Output {
        buf: out,
        start,
        end: total,
        size_field,
    };
    match codec {
        Codec::Zlib => inflate_zlib(payload, &mut output),
        Codec::Zstd => decode_zstd(payload, &mut output, options),
        Codec::Lz4 => decode_lz4(payload, &mut output),
    }
    .map_err(|e| match e {
        Failure::Stream(kind, what, at) => Error::new(kind, payload_at.saturating_add(at), what),
        Failure::Located(e) => e,
    })
}

/// Checks that `payload` decodes to exactly `size` bytes, with the errors [`decode`] would
/// give at the same offsets, and returns the first `head` of those bytes (fewer when `size`
/// is smaller).
///
/// An LZ4 block is walked without writing its output: every sequence is read and its
/// lengths and match offset checked, and only the first `head` bytes are produced. This is
/// what the CUDA runtime would find wrong in an entry it decompresses (a block has no
/// checksum), at a fraction of the cost and memory of decoding. Other codecs are decoded
/// whole ([`decode_with_hook`]), since their checksums and entropy stages cannot be
/// checked otherwise.
pub fn check_head(
    codec: Codec,
    payload: &[u8],
    payload_at: u64,
    size: u64,
    size_field: u64,
    head: usize,
    options: &ReadOptions,
) -> Result<Vec<u8>> {
    if codec != Codec::Lz4 {
        let mut out = decode_with_hook(codec, payload, payload_at, size, size_field, options)?;
        out.truncate(head);
        return Ok(out);
    }
    lz4_head(payload, payload_at, size, size_field, head, true, options)
}

/// The first `head` bytes that `payload` decodes to, made without reading the rest of the
/// stream, where the codec allows it (LZ4); `None` for the other codecs. Errors in those
/// first bytes are reported as [`decode`] reports them; the rest of the stream is not
/// checked: [`check_head`] does that.
pub fn peek(
    codec: Codec,
    payload: &[u8],
    payload_at: u64,
    size: u64,
    size_field: u64,
    head: usize,
    options: &ReadOptions,
) -> Result<Option<Vec<u8>>> {
    if codec != Codec::Lz4 {
        return Ok(None);
    }
    lz4_head(payload, payload_at, size, size_field, head, false, options).map(Some)
}

/// The first `head` bytes of an LZ4 block ([`walk_lz4`]), the rest of the block checked
/// (`whole`) or not read, with [`decode`]'s errors and offsets.
fn lz4_head(
    payload: &[u8],
    payload_at: u64,
    size: u64,
    size_field: u64,
    head: usize,
    whole: bool,
    options: &ReadOptions,
) -> Result<Vec<u8>> {
    let size = check_declared_size(Codec::Lz4, payload, size, size_field, options)?;
    let want = head.min(size);
    let mut out = Vec::new();
    out.try_reserve_exact(want).map_err(|_| {
        Error::new(
            ErrorKind::OutOfMemory,
            size_field,
            "cannot reserve memory for the decompressed data",
        )
    })?;
    match walk_lz4(payload, size, &mut out, want, whole) {
        // Without `whole` the walk stops once the head is made.
        Ok(n) if n == size || (!whole && n >= want) => Ok(out),
        Ok(_) => Err(Error::new(
            ErrorKind::SizeMismatch,
            size_field,
            "LZ4 block decodes to a size other than the declared one",
        )),
        Err(()) => Err(Error::new(
            ErrorKind::Decompress,
            payload_at,
            "LZ4 block is corrupt",
        )),
    }
}

/// Reads an LZ4 length extension at `*at`: bytes added up to and including the first that
/// is not 255.
fn lz4_length(input: &[u8], at: &mut usize) -> core::result::Result<usize, ()> {
    let mut n = 0usize;
    loop {
        let b = *input.get(*at).ok_or(())?;
        *at = at.saturating_add(1);
        n = n.saturating_add(usize::from(b));
        if b != 0xFF {
            return Ok(n);
        }
    }
}

/// Walks an LZ4 block that may produce at most `size` bytes, as lz4_flex's decoder reads
/// it (it accepts and refuses the same blocks), appending the first `want` output bytes to
/// `head` and, with `whole`, only counting the rest; returns the output length (without
/// `whole`: so far).
///
/// A block is a series of sequences: a token (literal length, match length - 4, four bits
/// each, 15 meaning "more bytes follow"), the literals, then, unless the input ends there,
/// a two-byte little-endian match offset (not 0, not before the output's start) and the
/// match length's extension.
fn walk_lz4(
    input: &[u8],
    size: usize,
    head: &mut Vec<u8>,
    want: usize,
    whole: bool,
) -> core::result::Result<usize, ()> {
    let mut at = 0usize;
    let mut pos = 0usize;
    if let Some(end) = lz4_walk_head(input, size, head, want, &mut at, &mut pos)? {
        return Ok(end);
    }
    if !whole {
        return Ok(pos);
    }
    lz4_walk_count(input, size, at, pos)
}

/// The first part of [`walk_lz4`]: decodes sequences from `*at` (output length `*pos`)
/// into `head` (which then holds the whole output so far) until it holds `want` bytes.
/// Returns the output length when the input ends first; otherwise `*at` and `*pos` are
/// where the walk goes on.
fn lz4_walk_head(
    input: &[u8],
    size: usize,
    head: &mut Vec<u8>,
    want: usize,
    at: &mut usize,
    pos: &mut usize,
) -> core::result::Result<Option<usize>, ()> {
    // While the head is being made it holds the whole output so far (`head.len() == pos`).
    while head.len() < want {
        let token = *input.get(*at).ok_or(())?;
        *at = at.saturating_add(1);
        let mut literals = usize::from(token >> 4);
        if literals == 15 {
            literals = literals.saturating_add(lz4_length(input, at)?);
        }
        let end = at.checked_add(literals).ok_or(())?;
        let bytes = input.get(*at..end).ok_or(())?;
        *pos = pos.checked_add(literals).filter(|&p| p <= size).ok_or(())?;
        let room = want.saturating_sub(head.len());
        head.extend_from_slice(bytes.get(..literals.min(room)).ok_or(())?);
        *at = end;
        if *at >= input.len() {
            return Ok(Some(*pos));
        }
        let (offset, length) = lz4_match(input, at, token)?;
        if offset == 0 || offset > *pos {
            return Err(());
        }
        let mut copy = length.min(want.saturating_sub(head.len()));
        while copy > 0 {
            let from = head.len().checked_sub(offset).ok_or(())?;
            let n = copy.min(offset);
            head.extend_from_within(from..from.saturating_add(n));
            copy = copy.saturating_sub(n);
        }
        *pos = pos.checked_add(length).filter(|&p| p <= size).ok_or(())?;
    }
    Ok(None)
}

/// The rest of [`walk_lz4`], from input offset `at` with `pos` bytes of output so far:
/// the sequences are only counted; returns the output length.
///
/// Output past `size` is refused at the end: the count only grows, so a block that
/// overruns anywhere ends over `size`. The next token's position is the loop's critical
/// path: in the common case (both lengths under 15) it is one plain addition. `at` stays
/// below `input.len()` whenever 17 is added to it, and `pos` grows by at most 2^16 per
/// input byte, so neither wraps.
fn lz4_walk_count(
    input: &[u8],
    size: usize,
    mut at: usize,
    mut pos: usize,
) -> core::result::Result<usize, ()> {
    let len = input.len();
    loop {
        let token = *input.get(at).ok_or(())?;
        let short = usize::from(token >> 4);
        let literals = if short < 15 {
            at = at.wrapping_add(short.wrapping_add(1));
            short
        } else {
            at = at.wrapping_add(1);
            let n = lz4_length(input, &mut at)?.saturating_add(15);
            at = at.saturating_add(n);
            n
        };
        pos = pos.saturating_add(literals);
        if at >= len {
            return match at == len && pos <= size {
                true => Ok(pos),
                false => Err(()),
            };
        }
        let offset = match (input.get(at), input.get(at.wrapping_add(1))) {
            (Some(&lo), Some(&hi)) => usize::from(u16::from_le_bytes([lo, hi])),
            _ => return Err(()),
        };
        at = at.wrapping_add(2);
        let short = usize::from(token & 0xF);
        let length = if short < 15 {
            short.wrapping_add(4)
        } else {
            lz4_length(input, &mut at)?.saturating_add(19)
        };
        if offset == 0 || offset > pos {
            return Err(());
        }
        pos = pos.saturating_add(length);
    }
}

/// Reads a sequence's match at `*at`: its offset and its length (from the token's low four
/// bits and the length's extension).
#[inline(always)]
fn lz4_match(input: &[u8], at: &mut usize, token: u8) -> core::result::Result<(usize, usize), ()> {
    let offset = match input.get(*at..at.saturating_add(2)) {
        Some(&[lo, hi]) => usize::from(u16::from_le_bytes([lo, hi])),
        _ => return Err(()),
    };
    *at = at.saturating_add(2);
    let mut length = 4 + usize::from(token & 0xF);
    if length == 19 {
        length = length.saturating_add(lz4_length(input, at)?);
    }
    Ok((offset, length))
}

/// The growing output of a decoder: `buf[start..end]` is what the stream must fill.
struct Output<'v> {
    buf: &'v mut Vec<u8>,
    start: usize,
    end: usize,
    size_field: u64,
}

impl Output<'_> {
    /// Grows the buffer (doubling, at most to `end`); false when it is already complete.
    fn grow(&mut self) -> core::result::Result<bool, Failure> {
        let len = self.buf.len();
        if len >= self.end {
            return Ok(false);
        }
        let have = len.saturating_sub(self.start);
        let want = have.saturating_mul(2).max(FIRST_CHUNK);
        let new_len = self.start.saturating_add(want).min(self.end);
        self.buf
            .try_reserve_exact(new_len.saturating_sub(len))
            .map_err(|_| {
                Failure::Located(Error::new(
                    ErrorKind::OutOfMemory,
                    self.size_field,
                    "cannot reserve memory for the decompressed data",
                ))
            })?;
        self.buf.resize(new_len, 0);
        Ok(true)
    }

    /// The decoder's part of the buffer.
    fn window(&mut self) -> &mut [u8] {
        self.buf.get_mut(self.start..).unwrap_or_default()
    }
}

/// Why a decoder stopped: a stream problem (kind, description, position in the payload) or
/// a failed allocation.
enum Failure {
    Stream(ErrorKind, &'static str, u64),
    Located(Error),
}

/// Inflates a zlib stream into `out`, which must end up exactly full; returns the
/// compressed length.
fn inflate_zlib(input: &[u8], out: &mut Output<'_>) -> core::result::Result<u64, Failure> {
    use miniz_oxide::inflate::core::inflate_flags::{
        TINFL_FLAG_COMPUTE_ADLER32, TINFL_FLAG_PARSE_ZLIB_HEADER,
        TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
    };
    use miniz_oxide::inflate::core::{decompress, DecompressorOxide};
    use miniz_oxide::inflate::TINFLStatus;

    let mut state = Box::<DecompressorOxide>::default();
    // The whole output so far is the dictionary: earlier bytes stay in `out` as it grows.
    let flags = TINFL_FLAG_PARSE_ZLIB_HEADER
        | TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF
        | TINFL_FLAG_COMPUTE_ADLER32;
    let mut used = 0usize;
    let mut written = 0usize;
    loop {
        out.grow()?;
        let src = input.get(used..).unwrap_or_default();
        let (status, n_in, n_out) = decompress(&mut state, src, out.window(), written, flags);
        used = used.saturating_add(n_in);
        written = written.saturating_add(n_out);
        let at = u64_of(used);
        let full = out.window().len() == written;
        match status {
            TINFLStatus::Done if full && out.buf.len() == out.end => return Ok(at),
            TINFLStatus::Done => {
                return Err(Failure::Stream(
                    ErrorKind::SizeMismatch,
                    "compressed stream is shorter than the declared decompressed size",
                    at,
                ))
            }
            TINFLStatus::HasMoreOutput if full && out.buf.len() < out.end => {}
            TINFLStatus::HasMoreOutput => {
                return Err(Failure::Stream(
                    ErrorKind::SizeMismatch,
                    "compressed stream is longer than the declared decompressed size",
                    at,
                ))
            }
            TINFLStatus::NeedsMoreInput | TINFLStatus::FailedCannotMakeProgress => {
                return Err(Failure::Stream(
                    ErrorKind::Truncated,
                    "zlib stream is truncated",
                    at,
                ))
            }
            TINFLStatus::Adler32Mismatch => {
                return Err(Failure::Stream(
                    ErrorKind::Decompress,
                    "zlib stream checksum mismatch",
                    at,
                ))
            }
            _ => {
                return Err(Failure::Stream(
                    ErrorKind::Decompress,
                    "zlib stream is corrupt",
                    at,
                ))
            }
        }
    }
}

/// Decodes one zstd frame into `out`, which must end up exactly full; returns the
/// compressed length.
fn decode_zstd(
    input: &[u8],
    out: &mut Output<'_>,
    options: &ReadOptions,
) -> core::result::Result<u64, Failure> {
    use ruzstd::decoding::errors::FrameDecoderError;
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
    use ruzstd::io::Read;

    let consumed = |src: &[u8]| u64_of(input.len().saturating_sub(src.len()));
    let corrupt = |src: &[u8]| {
        Failure::Stream(
            ErrorKind::Decompress,
            "zstd stream is corrupt",
            consumed(src),
        )
    };
    let declared = u64_of(out.end.saturating_sub(out.start));
    let mut decoder = FrameDecoder::new();
    let mut src = init_zstd(&mut decoder, input, declared, options)
        .map_err(|e| Failure::Stream(e.kind(), e.what(), e.offset()))?;
    let fcs = decoder.content_size();
    if fcs != 0 && fcs != declared {
        return Err(Failure::Stream(
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
                | FrameDecoderError::FailedToReadBlockBody(_)
                    if src.is_empty() =>
                {
                    Failure::Stream(
                        ErrorKind::Truncated,
                        "zstd stream is truncated",
                        consumed(src),
                    )
                }
                _ => corrupt(src),
            })?;
        // Drain what was decoded, growing the output only as far as there is data.
        while decoder.can_collect() > 0 {
            if out.window().len() == written && !out.grow()? {
                return Err(Failure::Stream(
                    ErrorKind::SizeMismatch,
                    "compressed stream is longer than the declared decompressed size",
                    consumed(src),
                ));
            }
            let dst = out.window().get_mut(written..).unwrap_or_default();
            let n = decoder.read(dst).map_err(|_| corrupt(src))?;
            if n == 0 {
                break;
            }
            written = written.saturating_add(n);
        }
        if decoder.is_finished() {
            break;
        }
    }
    if u64_of(written) != declared {
        return Err(Failure::Stream(
            ErrorKind::SizeMismatch,
            "compressed stream is shorter than the declared decompressed size",
            consumed(src),
        ));
    }
    Ok(consumed(src))
}

/// Decodes one LZ4 block into `out`, which must end up exactly full; returns the
/// compressed length (the whole input: a block has no end marker of its own).
fn decode_lz4(input: &[u8], out: &mut Output<'_>) -> core::result::Result<u64, Failure> {
    // A block decodes in one call, into the whole output, allocated at once: its size was
    // checked against the limit and against what the block can produce (256 bytes per
    // input byte), so it is bounded by the real payload, and growing by doubling would
    // only copy and clear the same bytes again.
    let want = out.end.saturating_sub(out.buf.len());
    out.buf.try_reserve_exact(want).map_err(|_| {
        Failure::Located(Error::new(
            ErrorKind::OutOfMemory,
            out.size_field,
            "cannot reserve memory for the decompressed data",
        ))
    })?;
    out.buf.resize(out.end, 0);
    let n = lz4_flex::block::decompress_into(input, out.window())
        .map_err(|_| Failure::Stream(ErrorKind::Decompress, "LZ4 block is corrupt", 0))?;
    if n != out.window().len() {
        return Err(Failure::Located(Error::new(
            ErrorKind::SizeMismatch,
            out.size_field,
            "LZ4 block decodes to a size other than the declared one",
        )));
    }
    Ok(u64_of(input.len()))
}

/// A zlib stream decoded by miniz_oxide's streaming inflater (about 43 KB of state,
/// whatever the output size).
pub struct ZlibStream<'data> {
    input: &'data [u8],
    pos: usize,
    state: Box<miniz_oxide::inflate::stream::InflateState>,
    done: bool,
}

impl core::fmt::Debug for ZlibStream<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ZlibStream")
            .field("pos", &self.pos)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<'data> ZlibStream<'data> {
    /// A decoder of the zlib stream at the start of `input`.
    pub fn new(input: &'data [u8]) -> Self {
        ZlibStream {
            input,
            pos: 0,
            state: miniz_oxide::inflate::stream::InflateState::new_boxed(
                miniz_oxide::DataFormat::Zlib,
            ),
            done: false,
        }
    }
}

impl Decompressor for ZlibStream<'_> {
    fn read(&mut self, out: &mut [u8]) -> Result<usize> {
        use miniz_oxide::inflate::stream::inflate;
        use miniz_oxide::{MZError, MZFlush, MZStatus};
        if out.is_empty() || self.done {
            return Ok(0);
        }
        loop {
            let rest = self.input.get(self.pos..).unwrap_or_default();
            let r = inflate(&mut self.state, rest, out, MZFlush::None);
            self.pos = self.pos.saturating_add(r.bytes_consumed);
            let at = u64_of(self.pos);
            match r.status {
                Ok(MZStatus::StreamEnd) => {
                    self.done = true;
                    return Ok(r.bytes_written);
                }
                Ok(_) if r.bytes_written > 0 => return Ok(r.bytes_written),
                Ok(_) if r.bytes_consumed > 0 => continue,
                Ok(_) | Err(MZError::Buf) => {
                    return Err(Error::new(
                        ErrorKind::Truncated,
                        at,
                        "zlib stream is truncated",
                    ))
                }
                Err(_) => {
                    return Err(Error::new(
                        ErrorKind::Decompress,
                        at,
                        "zlib stream is corrupt",
                    ))
                }
            }
        }
    }

    fn consumed(&self) -> u64 {
        u64_of(self.pos)
    }
}

/// A zstd frame decoded by ruzstd.
///
/// ruzstd hands out only bytes older than the frame's window until the frame ends; clang
/// writes single-segment frames (window = content size), so for real bundles the first
/// byte comes out after the whole frame is decoded (`STACK.md`).
pub struct ZstdStream<'data> {
    src: &'data [u8],
    total: usize,
    decoder: Box<ruzstd::decoding::FrameDecoder>,
}

impl core::fmt::Debug for ZstdStream<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ZstdStream")
            .field("consumed", &self.consumed())
            .finish_non_exhaustive()
    }
}

impl<'data> ZstdStream<'data> {
    /// Reads the frame header at the start of `input` ([`bounded_zstd_header`]: a window
    /// larger than `declared`, the decompressed size the container states, is narrowed
    /// to it); a frame content size must equal `declared`.
    pub fn new(input: &'data [u8], declared: u64, options: &ReadOptions) -> Result<Self> {
        let mut decoder = Box::new(ruzstd::decoding::FrameDecoder::new());
        let src = init_zstd(&mut decoder, input, declared, options)?;
        let fcs = decoder.content_size();
        if fcs != 0 && fcs != declared {
            return Err(Error::new(
                ErrorKind::SizeMismatch,
                0,
                "zstd frame content size differs from the declared decompressed size",
            ));
        }
        Ok(ZstdStream {
            src,
            total: input.len(),
            decoder,
        })
    }
}

/// The largest zstd window accepted for a frame whose container declares `declared`
/// bytes of content: the content rounded up to a window the frame header can state
/// ([`bounded_zstd_header`] narrows larger claims to that), at least 1 MiB, and no more
/// than the limit allows. Memory for the window is therefore bounded by the declared
/// content, never by the frame's own claim.
pub fn zstd_window_limit(declared: u64, options: &ReadOptions) -> u64 {
    let max = options.limits.max_decompressed_size;
    let ceiling = max
        .saturating_add(max / 8)
        .saturating_add(1 << 10)
        .max(1 << 20);
    encodable_window(declared).clamp(1 << 20, ceiling)
}

/// The smallest window a zstd `Window_Descriptor` can state that holds `need` bytes (at
/// least the format's 1 KiB minimum).
fn encodable_window(need: u64) -> u64 {
    window_descriptor(need).map_or(need, |(_, w)| w)
}

/// The `Window_Descriptor` byte of the smallest window of at least `need` bytes, and that
/// window (RFC 8878, section 3.1.1.1.2: `windowLog = 10 + exponent`, plus `mantissa` eighths).
fn window_descriptor(need: u64) -> Option<(u8, u64)> {
    (0u8..32).find_map(|exponent| {
        let base = 1u64.checked_shl(10 + u32::from(exponent))?;
        (0u8..8).find_map(|mantissa| {
            let window = base.saturating_add((base / 8).saturating_mul(u64::from(mantissa)));
            (window >= need).then_some(((exponent << 3) | mantissa, window))
        })
    })
}

/// The smallest window a frame is narrowed to: a frame whose content turns out larger than
/// declared then still decodes far enough to be reported as a size mismatch rather than as
/// a match reaching outside the window.
const MIN_WINDOW: u64 = 1 << 20;

/// Size of the longest zstd frame header (magic, descriptor, window, dictionary ID, content
/// size).
pub const ZSTD_HEADER_MAX: usize = 4 + 1 + 1 + 4 + 8;

/// A copy of the frame header at the start of `input` whose window is narrowed to the
/// `declared` content size (at least 1 MiB), when the frame states a larger one: (header
/// bytes, header length). `None` when the header can be used as it is (a single-segment frame, whose
/// window is its content size; a window no larger than the content; not a zstd frame; a
/// truncated header, which the decoder reports).
///
/// A frame compressed as a stream (the `zstd` command reading standard input, for one)
/// states the window of its compression level, 8 MiB or more, whatever the size of the
/// content. No match can reach back before the first byte, so a window of the content's
/// size decodes the frame to the same bytes; decoders that reserve the stated window up
/// front (ruzstd, libzstd without a content size) then reserve no more than the content.
/// Feed the decoder the returned header, then `input[len..]`.
pub fn bounded_zstd_header(input: &[u8], declared: u64) -> Option<([u8; ZSTD_HEADER_MAX], usize)> {
    if !input.starts_with(crate::raw::ZSTD_MAGIC) {
        return None;
    }
    let descriptor = *input.get(4)?;
    if descriptor & 0x20 != 0 {
        return None; // single segment: no window descriptor
    }
    let dictionary = [0usize, 1, 2, 4]
        .get(usize::from(descriptor & 3))
        .copied()?;
    let content = [0usize, 2, 4, 8]
        .get(usize::from(descriptor >> 6))
        .copied()?;
    let len = 6usize.checked_add(dictionary)?.checked_add(content)?;
    let header = input.get(..len)?;
    let stated = *header.get(5)?;
    let exponent = u32::from(stated >> 3);
    let base = 1u64.checked_shl(10 + exponent)?;
    let window = base.saturating_add((base / 8).saturating_mul(u64::from(stated & 7)));
    let (narrow, narrowed) = window_descriptor(declared.max(MIN_WINDOW))?;
    if narrowed >= window {
        return None;
    }
    let mut copy = [0u8; ZSTD_HEADER_MAX];
    copy.get_mut(..len)?.copy_from_slice(header);
    *copy.get_mut(5)? = narrow;
    Some((copy, len))
}

/// Reads the frame header at the start of `input` into `decoder` (narrowed by
/// [`bounded_zstd_header`]) with the window limit of [`zstd_window_limit`]; returns the
/// rest of the input (the frame's blocks). Errors are located in `input`.
fn init_zstd<'i>(
    decoder: &mut ruzstd::decoding::FrameDecoder,
    input: &'i [u8],
    declared: u64,
    options: &ReadOptions,
) -> Result<&'i [u8]> {
    use ruzstd::decoding::errors::FrameDecoderError;
    decoder.set_max_window_size(zstd_window_limit(declared, options));
    let mut src = input;
    let result = match bounded_zstd_header(input, declared) {
        Some((header, len)) => {
            let mut head = header.get(..len).unwrap_or_default();
            src = input.get(len..).unwrap_or_default();
            decoder.init(&mut head)
        }
        None => decoder.init(&mut src),
    };
    result.map_err(|e| match e {
        FrameDecoderError::WindowSizeTooBig { .. } => Error::new(
            ErrorKind::LimitExceeded,
            0,
            "zstd window is larger than the declared content size or the limit",
        ),
        _ => Error::new(ErrorKind::Decompress, 0, "zstd frame header is invalid"),
    })?;
    Ok(src)
}

impl Decompressor for ZstdStream<'_> {
    fn read(&mut self, out: &mut [u8]) -> Result<usize> {
        use ruzstd::decoding::BlockDecodingStrategy;
        use ruzstd::io::Read;
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            let at = self.consumed();
            let n = self
                .decoder
                .read(out)
                .map_err(|_| Error::new(ErrorKind::Decompress, at, "zstd stream is corrupt"))?;
            if n > 0 || self.decoder.is_finished() {
                return Ok(n);
            }
            let src_empty = self.src.is_empty();
            self.decoder
                .decode_blocks(&mut self.src, BlockDecodingStrategy::UptoBytes(1 << 20))
                .map_err(|_| {
                    if src_empty || self.src.is_empty() {
                        // More bytes were needed than the payload has: the end of it.
                        let end = u64_of(self.total);
                        Error::new(ErrorKind::Truncated, end, "zstd stream is truncated")
                    } else {
                        Error::new(ErrorKind::Decompress, at, "zstd stream is corrupt")
                    }
                })?;
        }
    }

    fn consumed(&self) -> u64 {
        u64_of(self.total.saturating_sub(self.src.len()))
    }
}
