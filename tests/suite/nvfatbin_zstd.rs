//! Issue 47: a zstd fatbinary cubin larger than one zstd block is chosen and checked from
//! its first blocks, never decoded whole, and damage the check can see (its frame header,
//! its first blocks, a cut stream, a wrong declared size) is reported as decoding reports
//! it. `tests/data/nvfatbin/zstd_large/` (made by its `make.sh` with CUDA 13.5's nvcc and
//! fatbinary): an sm_86 cubin of one block and an sm_90 cubin of 339,696 bytes in six
//! blocks, both zstd; its MANIFEST is what `cuobjdump -xelf all` extracts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use offload_image::stream::IDENTIFY_LEN;
use offload_image::zstd_prefix::{self, MAX_BLOCK};
use offload_image::{
    choose, identify, Checked, Decoders, Device, Encoded, ErrorKind, Image, ImageKind, ReadOptions,
    SelectOptions,
};
use sha2::{Digest, Sha256};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nvfatbin/zstd_large")
}

fn sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// The images of the fixture (one unit), with the file's bytes.
fn with_images(f: impl FnOnce(&[Image<'_>], &ReadOptions)) {
    let data = std::fs::read(dir().join("zstd_large.fatbin")).unwrap();
    let read = ReadOptions::default();
    let mut units = offload_image::units(&data, &read);
    let open = units.next().unwrap().unwrap().open(&read).unwrap();
    assert!(units.next().is_none());
    let images: Vec<Image<'_>> = open.images().collect();
    f(&images, &read);
}

/// The stream of an encoded image as a slice of its own (to damage copies of it).
fn encoded(image: &Image<'_>) -> Encoded<'static> {
    let e = image.encoded.expect("a zstd entry is listed encoded");
    Encoded {
        stream: Box::leak(e.stream.to_vec().into_boxed_slice()),
        ..e
    }
}

#[test]
fn zstd_entries_are_chosen_and_checked_as_cuobjdump_lists_them() {
    let manifest = std::fs::read_to_string(dir().join("MANIFEST")).unwrap();
    let want: Vec<(&str, &str)> = manifest
        .lines()
        .map(|l| {
            let (name, sha) = l.split_once(' ').unwrap();
            (name.split('.').nth(2).unwrap(), sha)
        })
        .collect();
    assert_eq!(want.len(), 2);
    with_images(|images, read| {
        assert_eq!(images.len(), 2);
        for (image, (arch, sha)) in images.iter().zip(&want) {
            assert_eq!(image.target_id, Some(*arch));
            assert_eq!(image.image_kind, ImageKind::Cubin);
            let e = image.encoded.expect("zstd entries are listed encoded");
            assert_eq!(e.codec.name(), "zstd");
            let decoded = image.decode(read).unwrap();
            assert_eq!(&sha256(&decoded), sha, "{arch}");
            assert_eq!(image.size(), decoded.len() as u64);
        }
        for (target, index) in [("sm_90", 1), ("sm_86", 0), ("sm_89", 0)] {
            let devices = [Device::parse(target).unwrap()];
            let choice = &choose(images.iter().copied(), &devices, &SelectOptions::default())[0];
            let chosen = choice.image.expect("a cubin loads");
            assert_eq!(chosen.index, index, "{target}");
            // What `select` makes of it: the large sm_90 cubin only as far as its header.
            let decoded = chosen.decode(read).unwrap();
            let decoded = chosen.with_bytes(&decoded);
            let made = chosen.check(IDENTIFY_LEN, read).unwrap();
            let checked = chosen.with_checked(&made);
            assert_eq!(identify(&checked), identify(&decoded), "{target}");
            assert_eq!(checked.size(), decoded.size(), "{target}");
            match (&made, chosen.size() > MAX_BLOCK) {
                (Checked::Head(h), true) => {
                    assert_eq!(h.len(), IDENTIFY_LEN);
                    assert_eq!(&h[..], &decoded.bytes[..IDENTIFY_LEN]);
                }
                (Checked::Whole(w), false) => assert_eq!(&w[..], decoded.bytes),
                (made, _) => panic!("{target}: {} bytes made", made.bytes().len()),
            }
            assert_eq!(made, chosen.peek(IDENTIFY_LEN, read).unwrap(), "{target}");
        }
    });
}

static WHOLE_DECODES: AtomicUsize = AtomicUsize::new(0);

/// A raw decoder that only counts the whole decodes asked of it (and declines them).
fn counting(
    _: offload_image::decompress::Codec,
    _: &[u8],
    _: u64,
    _: &ReadOptions,
) -> Option<offload_image::Result<Vec<u8>>> {
    WHOLE_DECODES.fetch_add(1, Ordering::SeqCst);
    None
}

#[test]
fn checking_a_large_zstd_cubin_decodes_its_first_blocks_only() {
    with_images(|images, read| {
        let large = &images[1];
        let e = large.encoded.unwrap();
        assert!(e.size > 2 * MAX_BLOCK, "{} bytes", e.size);
        let counted = ReadOptions {
            decoders: Decoders {
                raw: Some(counting),
                ..Decoders::BUILTIN
            },
            ..*read
        };
        WHOLE_DECODES.store(0, Ordering::SeqCst);
        large.check(IDENTIFY_LEN, &counted).unwrap();
        large.peek(IDENTIFY_LEN, &counted).unwrap();
        assert_eq!(WHOLE_DECODES.load(Ordering::SeqCst), 0, "check and peek");
        large.decode(&counted).unwrap();
        assert_eq!(WHOLE_DECODES.load(Ordering::SeqCst), 1, "decode");
        // The small one is one block: decoding its first block is decoding it.
        images[0].check(IDENTIFY_LEN, &counted).unwrap();
        assert_eq!(WHOLE_DECODES.load(Ordering::SeqCst), 2, "one-block frame");
        // What the prefix decode decoded: its first block, at most one block's worth.
        let prefix = zstd_prefix::head(
            e.stream,
            e.stream_at,
            e.size,
            e.size_field,
            IDENTIFY_LEN,
            read,
        )
        .unwrap()
        .expect("a frame of six blocks takes the prefix path");
        let whole = large.decode(read).unwrap();
        assert_eq!(prefix.head, whole[..IDENTIFY_LEN]);
        assert!(
            prefix.decoded <= MAX_BLOCK,
            "{} bytes decoded",
            prefix.decoded
        );
        assert!(
            prefix.decoded < e.size / 2,
            "{} of {}",
            prefix.decoded,
            e.size
        );
    });
}

/// Where the first block of the single frame of `stream` ends (its header read as RFC 8878
/// says; this fixture's frames are single-segment with a 4-byte content size).
fn first_block_end(stream: &[u8]) -> usize {
    assert_eq!(&stream[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
    let descriptor = stream[4];
    assert_eq!(descriptor, 0xA0, "single segment, 4-byte content size");
    let at = 4 + 1 + 4;
    let h = u32::from_le_bytes([stream[at], stream[at + 1], stream[at + 2], 0]);
    assert_eq!(h & 1, 0, "more than one block");
    assert_eq!((h >> 1) & 3, 2, "a compressed block");
    at + 3 + (h >> 3) as usize
}

#[test]
fn damage_the_check_can_see_is_reported_as_decoding_reports_it() {
    with_images(|images, read| {
        let large = images[1];
        let e = encoded(&large);
        let end = first_block_end(e.stream);
        type Outcome = Result<(), (ErrorKind, u64)>;
        let outcomes = |e: Encoded<'_>| -> (Outcome, Outcome) {
            let image = Image {
                encoded: Some(e),
                ..large
            };
            let located = |err: offload_image::Error| (err.kind(), err.offset());
            (
                image.decode(read).map(|_| ()).map_err(located),
                image.check(IDENTIFY_LEN, read).map(|_| ()).map_err(located),
            )
        };
        assert_eq!(outcomes(e), (Ok(()), Ok(())));
        // Every byte of the frame header and the first block changed: whatever the check
        // refuses, decoding refuses at the same offset; whatever decoding refuses inside
        // the first block (located at most at its end: the decoder reads a block whole
        // before decoding it), the check refuses too.
        let mut copy = e.stream.to_vec();
        let (mut compared, mut refused, mut inside) = (0, 0, 0);
        let step = (end / 600).max(1);
        for at in (0..end).step_by(step) {
            let was = copy[at];
            for value in [0x00, 0xFF, was ^ 0x40] {
                if value == was {
                    continue;
                }
                copy[at] = value;
                let damaged = Encoded { stream: &copy, ..e };
                let (decoded, checked) = outcomes(damaged);
                let what = format!("byte {at} of {end} set to {value:#04x}");
                if checked.is_err() {
                    assert_eq!(decoded, checked, "{what}");
                }
                if let Err((_, offset)) = decoded {
                    if offset <= e.stream_at + end as u64 {
                        assert_eq!(decoded, checked, "{what}");
                        inside += 1;
                    }
                }
                refused += usize::from(checked.is_err());
                compared += 1;
            }
            copy[at] = was;
        }
        assert!(
            compared > 600 && refused > compared / 10 && inside > compared / 10,
            "{refused} of {compared} refused, {inside} located in the first block"
        );
        // A cut stream: the block headers do not reach its end.
        for cut in [1, 2, 3, 17, e.stream.len() / 2] {
            let short = Encoded {
                stream: &e.stream[..e.stream.len() - cut],
                ..e
            };
            let (decoded, checked) = outcomes(short);
            assert!(checked.is_err(), "cut by {cut}");
            assert_eq!(decoded, checked, "cut by {cut}");
        }
        // A declared size one off: the frame's content size differs.
        for size in [e.size - 1, e.size + 1] {
            let (decoded, checked) = outcomes(Encoded { size, ..e });
            assert!(checked.is_err(), "declared size {size}");
            assert_eq!(decoded, checked, "declared size {size}");
        }
        // The header's magic damaged: located at the stream's start.
        copy[0] ^= 1;
        let (decoded, checked) = outcomes(Encoded { stream: &copy, ..e });
        assert_eq!(checked, Err((ErrorKind::Decompress, e.stream_at)));
        assert_eq!(decoded, checked);
    });
}
