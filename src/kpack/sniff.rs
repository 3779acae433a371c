//! The first bytes of a zstd-compressed archive entry before it is decoded: its frame's first
//! block, decoded alone (`KPACK.md` §5a).
//!
//! rocm-kpack's writer files every entry as `"hsaco"` whatever its bytes, so an entry is
//! told by its first bytes (`ImageKind::sniff`, which the container walk applies to them). A zstd entry's first bytes are in the
//! first block of its frame (RFC 8878 section 3.1.1.2). That block refers to no earlier
//! output (there is none) and to no dictionary (a frame with one is not read here), so it
//! decodes alone: this module copies it into a frame of its own, marked last, with a
//! 128 KiB window (the largest a block may decode to, RFC 8878 section 3.1.1.2.4
//! `Block_Maximum_Size`), and decodes that. At most one block is decoded, whatever the
//! entry's size: listing an archive costs one block per entry, not a whole decode.

use alloc::vec::Vec;

use crate::raw::ZSTD_MAGIC;

/// The largest block a frame may hold, decoded (RFC 8878 section 3.1.1.2.4: 128 KiB).
const BLOCK_MAX: usize = 128 * 1024;

/// Frame header descriptor of the one-block frame: no content size, no checksum, no
/// dictionary, not single-segment (a window descriptor follows).
const ONE_BLOCK_DESCRIPTOR: u8 = 0x00;

/// Window descriptor of 128 KiB: exponent 7 (window log 10 + 7 = 17), mantissa 0.
const WINDOW_128K: u8 = 7 << 3;

/// What the first block of the entry whose stored bytes are the zstd `frame` decodes to (at
/// most 128 KiB); `None` when that cannot be told without decoding more (a frame with a
/// dictionary, a first block that is reserved, cut short, corrupt, or decodes to nothing):
/// the caller keeps the TOC's claim then, and decoding the whole frame reports any error.
pub(crate) fn zstd_entry_head(frame: &[u8]) -> Option<Vec<u8>> {
    first_block(frame).filter(|head| !head.is_empty())
}

/// What the first block of the zstd frame at the start of `input` (after any skippable
/// frames) decodes to; `None` where it cannot be decoded alone.
fn first_block(input: &[u8]) -> Option<Vec<u8>> {
    let start = crate::decompress::skip_skippable_frames(input).ok()?;
    let frame = input.get(start..)?;
    if !frame.starts_with(ZSTD_MAGIC) {
        return None;
    }
    let descriptor = *frame.get(4)?;
    // Reserved bit set: not a frame a decoder accepts.
    if descriptor & 0x08 != 0 {
        return None;
    }
    let single_segment = descriptor & 0x20 != 0;
    let dict_len = match descriptor & 0x03 {
        0 => 0usize,
        1 => 1,
        2 => 2,
        _ => 4,
    };
    let fcs_len = match descriptor >> 6 {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let dict_at = 5usize.checked_add(usize::from(!single_segment))?;
    let dict = frame.get(dict_at..dict_at.checked_add(dict_len)?)?;
    if dict.iter().any(|&b| b != 0) {
        return None;
    }
    let block_at = dict_at.checked_add(dict_len)?.checked_add(fcs_len)?;
    let header: [u8; 3] = frame
        .get(block_at..block_at.checked_add(3)?)?
        .try_into()
        .ok()?;
    let header = u32::from(header[0]) | u32::from(header[1]) << 8 | u32::from(header[2]) << 16;
    let block_size = usize::try_from(header >> 3).ok()?;
    let content_len = match (header >> 1) & 0x03 {
        // Raw and compressed: the block's bytes; RLE: one byte repeated.
        0 | 2 => block_size,
        1 => 1,
        _ => return None,
    };
    if block_size > BLOCK_MAX {
        return None;
    }
    let content_at = block_at.checked_add(3)?;
    let content = frame.get(content_at..content_at.checked_add(content_len)?)?;
    let mut one = Vec::new();
    one.try_reserve_exact(content_len.checked_add(9)?).ok()?;
    one.extend_from_slice(ZSTD_MAGIC);
    one.push(ONE_BLOCK_DESCRIPTOR);
    one.push(WINDOW_128K);
    one.extend_from_slice(&(header | 1).to_le_bytes()[..3]);
    one.extend_from_slice(content);
    decode_one(&one)
}

/// Decodes a frame of one block, its window at most 128 KiB.
fn decode_one(frame: &[u8]) -> Option<Vec<u8>> {
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
    let mut decoder = FrameDecoder::new();
    decoder.set_max_window_size(crate::bytes::u64_of(BLOCK_MAX));
    let mut src = frame;
    decoder.init(&mut src).ok()?;
    let done = decoder
        .decode_blocks(&mut src, BlockDecodingStrategy::UptoBlocks(1))
        .ok()?;
    if !done {
        return None;
    }
    decoder.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// A frame whose first block is `first`, raw; with `rest_corrupt`, a second block of
    /// the reserved type follows, so the frame as a whole does not decode.
    fn frame(first: &[u8], rest_corrupt: bool) -> Vec<u8> {
        let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, WINDOW_128K];
        let last = u32::from(!rest_corrupt);
        let h = (u32::try_from(first.len()).unwrap() << 3) | last;
        f.extend_from_slice(&h.to_le_bytes()[..3]);
        f.extend_from_slice(first);
        if rest_corrupt {
            // Block type 3 (reserved).
            f.extend_from_slice(&[0x07, 0x00, 0x00]);
        }
        f
    }

    #[test]
    fn the_first_block_alone_gives_the_first_bytes() {
        let mut elf = b"\x7fELF\x02\x01\x01\x40".to_vec();
        elf.resize(64, 0);
        let sqlite = b"SQLite format 3\0".to_vec();
        for corrupt in [false, true] {
            assert_eq!(zstd_entry_head(&frame(&elf, corrupt)), Some(elf.clone()));
            assert_eq!(
                zstd_entry_head(&frame(&sqlite, corrupt)),
                Some(sqlite.clone())
            );
        }
        // An RLE first block: 300 zero bytes.
        let mut rle = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, WINDOW_128K];
        let h: u32 = (300 << 3) | (1 << 1) | 1;
        rle.extend_from_slice(&h.to_le_bytes()[..3]);
        rle.push(0);
        assert_eq!(zstd_entry_head(&rle), Some(vec![0; 300]));
        // Not a frame, cut short, a dictionary, a reserved first block, an empty block.
        assert_eq!(zstd_entry_head(b"\x7fELF"), None);
        let f = frame(&elf, false);
        for cut in 0..f.len() - 1 {
            assert_eq!(zstd_entry_head(&f[..cut]), None, "{cut}");
        }
        let mut with_dict = vec![0x28, 0xb5, 0x2f, 0xfd, 0x01, WINDOW_128K, 0x05];
        with_dict.extend_from_slice(&f[6..]);
        assert_eq!(zstd_entry_head(&with_dict), None);
        let mut reserved = f[..6].to_vec();
        reserved.extend_from_slice(&[0x07, 0x00, 0x00]);
        assert_eq!(zstd_entry_head(&reserved), None);
        assert_eq!(zstd_entry_head(&frame(&[], false)), None);
    }
}
