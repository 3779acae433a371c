//! The first bytes of a zstd frame, decoded without the rest of it (issue 47).
//!
//! Choosing among the entries of an NVIDIA fatbinary needs at most a cubin's ELF header;
//! CUDA 13 stores every entry as a zstd frame (`NVFATBIN.md` §2.6). [`head`] decodes only
//! the first blocks of such a frame, as far as the first `head` bytes of its content, and
//! checks the rest of the frame's structure without decoding it: the frame header, a
//! content size equal to the size the entry declares, and block headers that lead exactly
//! to the end of the stream. Damage inside the compressed data of a later block is then
//! not found here: the CUDA driver, which decodes the whole entry when it loads it, finds
//! it, and so do [`crate::Image::decode`] and `validate`.
//!
//! How: the first blocks of a frame depend on nothing before them, so they are decoded as
//! a frame of their own (`first_blocks`): a header stating a window of one block (128
//! KiB) and no content size, then the blocks as stored, the last of them marked last. (A
//! decoder holds back a window of output until its frame ends, and a single-segment
//! frame's window is all of its content: decoding the real frame's first blocks gives no
//! bytes out.) One block is tried, then two, four and so on until the head is made, so the
//! work is at most twice that of the blocks needed. Errors are those
//! [`crate::decompress::decode`] gives for the same bytes, at the same offsets; a stream
//! this path does not take (see [`head`]) is left to it.

use alloc::vec::Vec;

use crate::bytes::u64_of;
use crate::decompress::{self, skip_skippable_frames, Codec};
use crate::error::{Error, ErrorKind, Result};
use crate::options::ReadOptions;
use crate::raw::ZSTD_MAGIC;

/// The largest content of a zstd block (RFC 8878, section 3.1.1.2.4: `Block_Maximum_Size`
/// is at most 128 KiB). A frame whose content is no larger is decoded whole by the callers
/// of [`head`]: decoding its first block is decoding all of it.
pub const MAX_BLOCK: u64 = 128 << 10;

/// What [`head`] made: the first bytes of the frame's content and how many bytes it decoded
/// to make them (whole blocks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prefix {
    /// The first `head` bytes of the content (fewer only if the content is shorter).
    pub head: Vec<u8>,
    /// The content bytes decoded, every try counted (whole blocks: one block of at most
    /// [`MAX_BLOCK`] when the first block holds the head, as it does in every frame whose
    /// first block is not tiny).
    pub decoded: u64,
}

/// A frame header as [`head`] reads it (RFC 8878, section 3.1.1.1).
#[derive(Clone, Copy, Debug)]
struct FrameHeader {
    /// Length of the header as stored.
    len: usize,
    /// `Content_Checksum_Flag`.
    checksum: bool,
    /// The `Frame_Content_Size`, when stated.
    content_size: Option<u64>,
    /// The `Dictionary_ID` (0 when absent).
    dictionary: u32,
}

/// Reads the frame header at the start of `input`; `None` when it is not one or is
/// truncated, or a reserved bit is set (the decoder reports those).
fn frame_header(input: &[u8]) -> Option<FrameHeader> {
    if !input.starts_with(ZSTD_MAGIC) {
        return None;
    }
    let descriptor = *input.get(4)?;
    if descriptor & 0x08 != 0 {
        return None; // reserved bit
    }
    let single = descriptor & 0x20 != 0;
    let dict_len = [0usize, 1, 2, 4].get(usize::from(descriptor & 3)).copied()?;
    let fcs_len = match descriptor >> 6 {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let dict_at = 5usize.checked_add(usize::from(!single))?;
    let fcs_at = dict_at.checked_add(dict_len)?;
    let len = fcs_at.checked_add(fcs_len)?;
    let le = |at: usize, n: usize| -> Option<u64> {
        let bytes = input.get(at..at.checked_add(n)?)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0u64, |v, &b| (v << 8) | u64::from(b)),
        )
    };
    let dictionary = u32::try_from(le(dict_at, dict_len)?).ok()?;
    let content_size = match fcs_len {
        0 => None,
        // A 2-byte field stores the size less 256.
        2 => Some(le(fcs_at, 2)?.checked_add(256)?),
        n => Some(le(fcs_at, n)?),
    };
    Some(FrameHeader {
        len,
        checksum: descriptor & 0x04 != 0,
        content_size,
        dictionary,
    })
}

/// Where the frame whose blocks start at `at` in `input` ends (after its checksum, if it
/// has one), from its block headers alone; `None` when a block header or body runs past
/// the end of `input`, a block is of the reserved type, or larger than a block may be.
fn frame_end(input: &[u8], mut at: usize, checksum: bool) -> Option<usize> {
    loop {
        let &[a, b, c] = input.get(at..at.checked_add(3)?)? else {
            return None;
        };
        let h = u32::from(a) | (u32::from(b) << 8) | (u32::from(c) << 16);
        let size = u64::from(h >> 3);
        let body = match (h >> 1) & 3 {
            0 | 2 if size <= MAX_BLOCK => usize::try_from(size).ok()?,
            1 if size <= MAX_BLOCK => 1,
            _ => return None,
        };
        at = at.checked_add(3)?.checked_add(body)?;
        if at > input.len() {
            return None;
        }
        if h & 1 == 1 {
            return at.checked_add(if checksum { 4 } else { 0 });
        }
    }
}

/// The first `head` bytes of what the zstd `stream` decodes to, with only the blocks that
/// make them decoded, or `Ok(None)` when this path does not apply and the stream must be
/// decoded whole ([`crate::decompress::decode`]) to be checked as it checks it.
///
/// `stream_at` and `size_field` locate errors as for [`crate::decompress::decode`]; `size`
/// is the decompressed size the container declares. The declared size is checked first, as
/// `decode` checks it. The path applies when the stream is one frame (after any skippable
/// frames) with no dictionary and no content checksum (whose check needs all the content),
/// that states a content size equal to `size` and larger than [`MAX_BLOCK`], and whose
/// block headers end exactly at the end of the stream. Errors in the blocks decoded are
/// reported as `decode` reports them.
pub fn head(
    stream: &[u8],
    stream_at: u64,
    size: u64,
    size_field: u64,
    head: usize,
    options: &ReadOptions,
) -> Result<Option<Prefix>> {
    decompress::check_declared_size(Codec::Zstd, stream, size, size_field, options)?;
    if size <= MAX_BLOCK {
        return Ok(None);
    }
    let Ok(first) = skip_skippable_frames(stream) else {
        return Ok(None);
    };
    let frame = stream.get(first..).unwrap_or_default();
    let Some(h) = frame_header(frame) else {
        return Ok(None);
    };
    if h.checksum
        || h.dictionary != 0
        || h.content_size != Some(size)
        || frame_end(frame, h.len, false) != Some(frame.len())
    {
        return Ok(None);
    }
    let blocks_at = first.saturating_add(h.len);
    let blocks = stream.get(blocks_at..).unwrap_or_default();
    // Block ends (the walk above read every header inside the stream).
    let mut ends = Vec::new();
    let mut at = 0usize;
    while let Some((last, end)) = block_at(blocks, at) {
        ends.try_reserve(1).map_err(|_| no_memory(size_field))?;
        ends.push((last, end));
        at = end;
        if last {
            break;
        }
    }
    let mut decoded = 0u64;
    let mut count = 1usize;
    loop {
        let Some(&(last, end)) = ends.get(count.min(ends.len()).saturating_sub(1)) else {
            return Ok(None);
        };
        let content = first_blocks(blocks, end, last, stream_at.saturating_add(u64_of(blocks_at)))?;
        decoded = decoded.saturating_add(u64_of(content.len()));
        if last {
            // Everything decoded after all: leave the frame to the whole decode, which
            // checks its size as it checks it.
            return Ok(None);
        }
        if content.len() >= head {
            let mut head_bytes = content;
            head_bytes.truncate(head);
            return Ok(Some(Prefix {
                head: head_bytes,
                decoded,
            }));
        }
        count = count.saturating_mul(2);
    }
}

/// The error of a buffer that cannot be reserved.
fn no_memory(at: u64) -> Error {
    Error::new(
        ErrorKind::LimitExceeded,
        at,
        "declared decompressed size does not fit in memory",
    )
}

/// The block header at `at` in `blocks`: (last block, where the block ends); `None` past
/// the end or for a block [`frame_end`] refuses.
fn block_at(blocks: &[u8], at: usize) -> Option<(bool, usize)> {
    let &[a, b, c] = blocks.get(at..at.checked_add(3)?)? else {
        return None;
    };
    let h = u32::from(a) | (u32::from(b) << 8) | (u32::from(c) << 16);
    let size = usize::try_from(h >> 3).ok()?;
    let body = match (h >> 1) & 3 {
        0 | 2 => size,
        1 => 1,
        _ => return None,
    };
    let end = at.checked_add(3)?.checked_add(body)?;
    (end <= blocks.len()).then_some((h & 1 == 1, end))
}

/// The content of the blocks of `blocks` up to `end`, decoded as a frame of their own: a
/// header with a window of one block's size (128 KiB, the most a block may hold) and no
/// content size, the blocks as stored with the last one marked last. The first blocks of a
/// frame depend on nothing before them, so they decode to the frame's first bytes. One
/// byte follows them when the stream goes on (`last` false), so that a block that reads
/// past its end is corrupt, not truncated, as in the whole stream. Errors are located at
/// `blocks_at` (the blocks' offset) plus their position.
fn first_blocks(blocks: &[u8], end: usize, last: bool, blocks_at: u64) -> Result<Vec<u8>> {
    use ruzstd::decoding::errors::FrameDecoderError;
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

    // Magic, descriptor 0 (window byte, no content size, no checksum, no dictionary),
    // window byte 0x38 (2^(10 + 7) = 128 KiB).
    const HEADER: [u8; 6] = [0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38];
    let part = blocks.get(..end).unwrap_or_default();
    let mut copy = Vec::new();
    copy.try_reserve_exact(part.len().saturating_add(1))
        .map_err(|_| no_memory(blocks_at))?;
    copy.extend_from_slice(part);
    // Mark the last block: its header is the last one the walk to `end` read.
    let mut at = 0usize;
    while let Some((_, next)) = block_at(&copy, at) {
        if next >= end {
            break;
        }
        at = next;
    }
    if let Some(b) = copy.get_mut(at) {
        *b |= 1;
    }
    if !last {
        copy.push(0);
    }
    let mut decoder = FrameDecoder::new();
    let mut header = &HEADER[..];
    decoder
        .init(&mut header)
        .map_err(|_| Error::new(ErrorKind::Decompress, blocks_at, "zstd frame header is invalid"))?;
    let mut src = &copy[..];
    let consumed = |src: &[u8]| blocks_at.saturating_add(u64_of(copy.len().saturating_sub(src.len())));
    decoder
        .decode_blocks(&mut src, BlockDecodingStrategy::All)
        .map_err(|e| match e {
            FrameDecoderError::FailedToReadBlockHeader(_)
            | FrameDecoderError::FailedToReadBlockBody(_)
                if src.is_empty() =>
            {
                Error::new(ErrorKind::Truncated, consumed(src), "zstd stream is truncated")
            }
            _ => Error::new(ErrorKind::Decompress, consumed(src), "zstd stream is corrupt"),
        })?;
    decoder
        .collect()
        .ok_or(Error::new(ErrorKind::Decompress, consumed(src), "zstd stream is corrupt"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read_as_the_format_says() {
        // Single segment, 1-byte content size 200, no checksum.
        let h = frame_header(&[0x28, 0xB5, 0x2F, 0xFD, 0x20, 200]).unwrap();
        assert_eq!((h.len, h.content_size, h.checksum), (6, Some(200), false));
        // Window byte, 2-byte content size (stored less 256), checksum.
        let h = frame_header(&[0x28, 0xB5, 0x2F, 0xFD, 0x44, 0x58, 0x10, 0x00]).unwrap();
        assert_eq!((h.len, h.content_size, h.checksum), (8, Some(0x10 + 256), true));
        // Reserved bit, short header, other magic.
        assert!(frame_header(&[0x28, 0xB5, 0x2F, 0xFD, 0x28, 1]).is_none());
        assert!(frame_header(&[0x28, 0xB5, 0x2F, 0xFD, 0x80, 0x58, 1]).is_none());
        assert!(frame_header(b"\x7fELF\x02\x01").is_none());
    }

    #[test]
    fn block_walk_needs_every_block_inside() {
        // A raw block of 2 bytes, then a last RLE block of 5.
        let blocks = [0x10, 0, 0, b'a', b'b', 0x2B, 0, 0, b'c'];
        assert_eq!(frame_end(&blocks, 0, false), Some(blocks.len()));
        assert_eq!(frame_end(&blocks, 0, true), Some(blocks.len() + 4));
        assert_eq!(frame_end(&blocks[..8], 0, false), None);
        // Reserved block type.
        assert_eq!(frame_end(&[0x07, 0, 0], 0, false), None);
    }
}
