//! OffloadBinary versions 2 and 3 (no tool in the corpus writes them yet: LLVM 22 reads v2,
//! LLVM main writes v3), built here byte by byte after FORMATS.md §6, and alignment freedom.

use crate::common;

use offload_image::offload_binary::{OffloadBinaries, OffloadBinary};
use offload_image::{ErrorKind, ImageKind, Limits, OffloadKind, ReadOptions};

struct Entry<'a> {
    image_kind: u16,
    offload_kind: u16,
    strings: &'a [(&'a str, &'a [u8])],
    image: &'a [u8],
}

/// Writes a v2 (or uncompressed v3) binary the way `OffloadBinary::write` lays it out:
/// header, entries, string records grouped per entry, string table, padding, images, padding.
fn build(version: u32, entries: &[Entry<'_>]) -> Vec<u8> {
    let header = if version >= 3 { 40u64 } else { 32 };
    let n = entries.len() as u64;
    let records_at = header + 40 * n;
    let nstrings: u64 = entries.iter().map(|e| e.strings.len() as u64).sum();
    let table_at = records_at + 24 * nstrings;
    let mut table = vec![0u8];
    let mut records = Vec::new();
    for e in entries {
        for (k, v) in e.strings {
            let ko = table_at + table.len() as u64;
            table.extend_from_slice(k.as_bytes());
            table.push(0);
            let vo = table_at + table.len() as u64;
            table.extend_from_slice(v);
            table.push(0);
            records.push((ko, vo, v.len() as u64));
        }
    }
    let mut image_at = (table_at + table.len() as u64).div_ceil(8) * 8;
    let mut out = Vec::new();
    out.extend_from_slice(&[0x10, 0xFF, 0x10, 0xAD]);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // size, patched below
    out.extend_from_slice(&header.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    if version >= 3 {
        out.extend_from_slice(&0u64.to_le_bytes());
    }
    let mut string_at = records_at;
    let mut images = Vec::new();
    for e in entries {
        out.extend_from_slice(&e.image_kind.to_le_bytes());
        out.extend_from_slice(&e.offload_kind.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&string_at.to_le_bytes());
        out.extend_from_slice(&(e.strings.len() as u64).to_le_bytes());
        out.extend_from_slice(&image_at.to_le_bytes());
        out.extend_from_slice(&(e.image.len() as u64).to_le_bytes());
        string_at += 24 * e.strings.len() as u64;
        image_at += e.image.len() as u64;
        images.extend_from_slice(e.image);
    }
    for (k, v, s) in records {
        out.extend_from_slice(&k.to_le_bytes());
        out.extend_from_slice(&v.to_le_bytes());
        out.extend_from_slice(&s.to_le_bytes());
    }
    out.extend_from_slice(&table);
    out.resize(out.len().div_ceil(8) * 8, 0);
    out.extend_from_slice(&images);
    out.resize(out.len().div_ceil(8) * 8, 0);
    let size = out.len() as u64;
    out[8..16].copy_from_slice(&size.to_le_bytes());
    out
}

fn two_entries(version: u32) -> Vec<u8> {
    build(
        version,
        &[
            Entry {
                image_kind: 1,
                offload_kind: 4, // HIP, LLVM >= 21 numbering
                strings: &[("triple", b"amdgcn-amd-amdhsa"), ("arch", b"gfx90a:xnack-")],
                image: b"\x7fELF-image-one",
            },
            Entry {
                image_kind: 3,
                offload_kind: 2,
                strings: &[
                    ("triple", b"nvptx64-nvidia-cuda"),
                    ("arch", b"sm_90a"),
                    ("blob", b"a\0b"),
                ],
                image: b"cubin-two",
            },
        ],
    )
}

#[test]
fn version_2_has_several_entries_and_sized_values() {
    let data = two_entries(2);
    let b = OffloadBinary::parse(&data, &Limits::default()).unwrap();
    assert_eq!(b.version(), 2);
    let e: Vec<_> = b.entries().collect();
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].image, b"\x7fELF-image-one");
    assert_eq!(e[1].image, b"cubin-two");
    assert_eq!(e[0].strings.get_str("arch"), Some("gfx90a:xnack-"));
    // v2 values are sized: an embedded NUL is part of the value.
    assert_eq!(e[1].strings.get("blob"), Some(&b"a\0b"[..]));
    assert_eq!(OffloadKind::from_code(e[0].offload_kind), OffloadKind::Hip);
    assert_eq!(ImageKind::from_code(e[1].image_kind), ImageKind::Cubin);
    assert_eq!(
        OffloadKind::from_code(3),
        OffloadKind::Hip,
        "LLVM <= 20 numbering"
    );
}

#[test]
fn version_3_uncompressed_and_compressed() {
    let plain = two_entries(3);
    let b = OffloadBinary::parse(&plain, &Limits::default()).unwrap();
    assert!(!b.is_compressed());
    assert_eq!(b.entries().count(), 2);

    // Compress everything after the 40-byte header with zlib (FORMATS.md §6.6).
    let body = miniz_oxide::deflate::compress_to_vec_zlib(&plain[40..], 6);
    let mut packed = plain[..40].to_vec();
    packed.extend_from_slice(&body);
    let size = packed.len() as u64;
    packed[8..16].copy_from_slice(&size.to_le_bytes());
    packed[32..40].copy_from_slice(&(plain.len() as u64).to_le_bytes());
    packed.resize(packed.len().div_ceil(8) * 8, 0);
    let c = OffloadBinary::parse(&packed, &Limits::default()).unwrap();
    assert!(c.is_compressed());
    assert_eq!(c.entries().count(), 0);
    let inflated = c.inflate(&ReadOptions::default()).unwrap();
    assert_eq!(inflated, plain);

    // Through the container walk: the unit decompresses it and lists both images.
    let options = ReadOptions::default();
    let mut images = Vec::new();
    offload_image::for_each_unit(&packed, &options, |u| {
        let open = u.open(&options)?;
        for i in open.images() {
            images.push((
                i.target_id.map(str::to_string),
                i.bytes.to_vec(),
                open.offset_of(&i),
            ));
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(images.len(), 2);
    assert_eq!(images[0].0.as_deref(), Some("gfx90a:xnack-"));
    assert_eq!(images[1].1, b"cubin-two");
    assert_eq!(images[1].2, None, "decompressed images have no file offset");

    // A claim larger than the limit is refused before inflating.
    let tight = ReadOptions {
        limits: Limits {
            max_decompressed_size: 64,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    assert_eq!(
        c.inflate(&tight).unwrap_err().kind(),
        ErrorKind::LimitExceeded
    );
}

#[test]
fn no_alignment_is_required() {
    let data = common::read_corpus("packager/multi3.offbin");
    for shift in 1..8 {
        let mut buf = vec![0xEEu8; shift];
        buf.extend_from_slice(&data);
        let seq = OffloadBinaries::parse(&buf[shift..], &Limits::default()).unwrap();
        assert_eq!(seq.count(), 3);
        let sizes: Vec<usize> = seq
            .iter()
            .flat_map(|(_, b)| b.entries().map(|e| e.image.len()))
            .collect();
        assert_eq!(sizes, [4048, 1065, 2628]);
    }
}

#[test]
fn string_records_outside_the_binary_are_refused() {
    let mut data = two_entries(2);
    // Entry 1's string offset (at 32 + 40 + 8) pointed past the end.
    data[80..88].copy_from_slice(&u64::MAX.to_le_bytes());
    let err = OffloadBinary::parse(&data, &Limits::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds);
    assert_eq!(err.offset(), 80);
}
