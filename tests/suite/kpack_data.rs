//! kpack entries that are not code objects (issue 45 item 6; rocm-systems#4674 routes
//! Tensile `.dat` and MIOpen `.kdb` SQLite databases to per-architecture artifacts,
//! TheRock#6427 AOT bundles).
//!
//! rocm-kpack's TOC has a `type` per entry, but its only writer
//! (`python/rocm_kpack/kpack.py`, `PackedKernelArchive.add_kernel`) stores `"type": "hsaco"`
//! for every entry whatever its bytes, and the C loader (`runtime/src/toc_parser.cpp`,
//! `parse_toc`) keeps the string without acting on it. So an entry's kind is read from its
//! first bytes: an ELF is a code object; anything else (`SQLite format 3\0`, a Tensile
//! `.dat`, an AOT bundle) is data, listed with `ImageKind::None`, never chosen, never damage.
//!
//! The archives are built per rocm-kpack's layout (`kpack.py`'s class docstring: `KPAK`,
//! version 1, TOC offset, blobs from 64, a MessagePack TOC with `blobs` for `none` or one
//! zstd blob of `u32` count then (`u32` size, frame) per kernel for `zstd-per-kernel`),
//! with a real gfx90a code object cut from the committed jax archive.

use std::path::PathBuf;

use offload_image::kpack::{KpackArchive, Stored};
use offload_image::validate::{validate, Severity};
use offload_image::SelectOptions;
use offload_image::{choose, units, Device, ImageKind, Limits, ReadOptions};

fn jax_code_object() -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/kpack/jax/none/jax_lib_gfx90a.kpack");
    let data = std::fs::read(p).unwrap();
    let archive = KpackArchive::parse(&data, &Limits::DEFAULT).unwrap();
    let e = archive.entries().next().unwrap();
    archive
        .code_object(e, &ReadOptions::default())
        .unwrap()
        .into_owned()
}

fn s(out: &mut Vec<u8>, text: &str) {
    if text.len() < 32 {
        out.push(0xa0 | text.len() as u8);
    } else {
        out.extend_from_slice(&[0xd9, text.len() as u8]);
    }
    out.extend_from_slice(text.as_bytes());
}

fn u(out: &mut Vec<u8>, n: u64) {
    out.push(0xcf);
    out.extend_from_slice(&n.to_be_bytes());
}

/// The blobs: the code object, a SQLite database head (MIOpen `.kdb`), a Tensile `.dat`
/// (MessagePack, as Tensile writes `.dat` libraries).
fn blobs() -> Vec<(&'static str, Vec<u8>)> {
    let mut kdb = b"SQLite format 3\0".to_vec();
    kdb.extend_from_slice(&[0x10, 0x00, 0x01, 0x01, 0x00, 0x40, 0x20, 0x20]);
    kdb.resize(512, 0);
    let mut dat = vec![0x82];
    s(&mut dat, "solutions");
    dat.push(0x90);
    s(&mut dat, "library");
    dat.push(0x80);
    vec![
        ("k#0", jax_code_object()),
        ("miopen/gfx90a.kdb", kdb),
        ("rocblas/library/TensileLibrary_gfx90a.dat", dat),
    ]
}

/// A zstd frame holding `data` in one raw block (RFC 8878 section 3.1.1: single segment, 4-byte
/// content size; block header: last, raw, size).
fn raw_zstd_frame(data: &[u8]) -> Vec<u8> {
    assert!(data.len() < 128 * 1024);
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0xa0];
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let header = ((data.len() as u32) << 3) | 1;
    f.extend_from_slice(&header.to_le_bytes()[..3]);
    f.extend_from_slice(data);
    f
}

/// An archive of the three blobs, each filed under `gfx90a` with `"type": "hsaco"` as
/// rocm-kpack's writer files every entry; `zstd`: `zstd-per-kernel`, else `none`.
fn archive(zstd: bool) -> Vec<u8> {
    let entries: Vec<(&str, Vec<u8>, u64)> = blobs()
        .into_iter()
        .map(|(key, b)| {
            let size = b.len() as u64;
            (key, if zstd { raw_zstd_frame(&b) } else { b }, size)
        })
        .collect();
    build(&entries, zstd)
}

/// An archive of `entries` (TOC key, stored bytes: the blob, or with `zstd` its frame, and
/// the original size), each filed under `gfx90a` as `"hsaco"`.
fn build(entries: &[(&str, Vec<u8>, u64)], zstd: bool) -> Vec<u8> {
    let mut a = b"KPAK\x01\0\0\0".to_vec();
    a.extend_from_slice(&[0; 8]);
    a.resize(64, 0);
    let mut places = Vec::new();
    if zstd {
        let start = a.len();
        a.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for (_, f, _) in entries {
            a.extend_from_slice(&(f.len() as u32).to_le_bytes());
            a.extend_from_slice(f);
        }
        places.push((start as u64, (a.len() - start) as u64));
    } else {
        for (_, b, _) in entries {
            places.push((a.len() as u64, b.len() as u64));
            a.extend_from_slice(b);
            a.resize(a.len().next_multiple_of(64), 0);
        }
    }
    let toc_at = a.len() as u64;
    a[8..16].copy_from_slice(&toc_at.to_le_bytes());
    let mut t = vec![0x84];
    s(&mut t, "gfx_arches");
    t.push(0x91);
    s(&mut t, "gfx90a");
    s(&mut t, "compression_scheme");
    if zstd {
        s(&mut t, "zstd-per-kernel");
        s(&mut t, "zstd_offset");
        u(&mut t, places[0].0);
        s(&mut t, "zstd_size");
        u(&mut t, places[0].1);
        t[0] += 1;
    } else {
        s(&mut t, "none");
        s(&mut t, "blobs");
        t.push(0x90 | places.len() as u8);
        for (offset, size) in &places {
            t.push(0x82);
            s(&mut t, "offset");
            u(&mut t, *offset);
            s(&mut t, "size");
            u(&mut t, *size);
        }
    }
    s(&mut t, "toc");
    t.push(0x80 | entries.len() as u8);
    for (ordinal, (key, _, size)) in entries.iter().enumerate() {
        s(&mut t, key);
        t.push(0x81);
        s(&mut t, "gfx90a");
        t.push(0x83);
        s(&mut t, "type");
        s(&mut t, "hsaco");
        s(&mut t, "ordinal");
        u(&mut t, ordinal as u64);
        s(&mut t, "original_size");
        u(&mut t, *size);
    }
    a.extend_from_slice(&t);
    a
}

#[test]
fn data_entries_are_listed_as_data_never_chosen_never_damage() {
    let options = ReadOptions::default();
    let code = jax_code_object();
    for zstd in [false, true] {
        let data = archive(zstd);
        let unit = units(&data, &options).next().unwrap().unwrap();
        let open = unit.open(&options).unwrap();
        let images: Vec<_> = open.images().collect();
        let decoded: Vec<_> = images.iter().map(|i| i.decode(&options).unwrap()).collect();
        // Every entry reads back to its blob.
        for (bytes, (_, want)) in decoded.iter().zip(blobs()) {
            assert_eq!(&bytes[..], &want[..], "zstd {zstd}");
        }
        let images: Vec<_> = images
            .iter()
            .zip(&decoded)
            .map(|(i, b)| i.with_bytes(b))
            .collect();
        let kinds: Vec<ImageKind> = images.iter().map(|i| i.image_kind).collect();
        assert_eq!(
            kinds,
            [ImageKind::Object, ImageKind::None, ImageKind::None],
            "zstd {zstd}"
        );
        // Listed before decoding: a plain blob by its bytes, a zstd frame by what its first
        // block decodes to (the TOC files all three as code objects).
        let listed: Vec<ImageKind> = open.images().map(|i| i.image_kind).collect();
        assert_eq!(
            listed,
            [ImageKind::Object, ImageKind::None, ImageKind::None],
            "zstd {zstd}"
        );
        let gfx90a = [Device::parse("gfx90a").unwrap()];
        // The data come first in rank order: the code object is still the one chosen.
        let reversed: Vec<_> = images.iter().rev().copied().collect();
        let choice = choose(reversed, &gfx90a, &SelectOptions::default());
        let chosen = choice[0].image.as_ref().unwrap();
        assert_eq!(chosen.index, 0, "zstd {zstd}: the code object");
        assert_eq!(chosen.bytes, &code[..]);
        // Without the code object, nothing is chosen.
        let data_only: Vec<_> = images.iter().skip(1).copied().collect();
        let choice = choose(data_only, &gfx90a, &SelectOptions::default());
        assert!(choice[0].image.is_none(), "zstd {zstd}");
        let findings = validate(&data, &options);
        assert!(
            findings.iter().all(|f| f.severity() != Severity::Error),
            "zstd {zstd}: {:?}",
            findings.iter().map(|f| &f.message).collect::<Vec<_>>()
        );
    }
}

/// The stored zstd frame of the first entry of the committed jax archive (written by
/// rocm-kpack's `PackedKernelArchive` with `ZstdCompressor`) and the code object it holds.
fn jax_zstd_frame() -> (Vec<u8>, Vec<u8>) {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/kpack/jax/.kpack/jax_lib_gfx90a.kpack");
    let data = std::fs::read(p).unwrap();
    let archive = KpackArchive::parse(&data, &Limits::DEFAULT).unwrap();
    let e = archive.entries().next().unwrap();
    let Ok(Stored::Zstd { frame, .. }) = archive.stored(e) else {
        panic!("the jax archive is zstd-per-kernel")
    };
    let code = archive.code_object(e, &ReadOptions::default()).unwrap();
    (frame.to_vec(), code.into_owned())
}

/// zstd entries as rocm-kpack compresses them (zstd level 3, no checksum): the kind comes
/// from the first block of each frame, before and without decoding the rest. A MIOpen-like
/// SQLite database (`tests/data/kpack/data/perf.kdb.zst`, 167,936 bytes in two compressed
/// blocks, `PROVENANCE.md`) is data whole and with its second block cut off (a frame that
/// does not decode); the real code object's frame from the jax archive is a code object.
/// `choose` over the images as listed, none decoded, takes the code object and never a
/// data entry.
#[test]
fn zstd_entries_are_told_by_their_first_block_without_a_whole_decode() {
    let options = ReadOptions::default();
    let (co_frame, code) = jax_zstd_frame();
    let kdb = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/kpack/data/perf.kdb.zst"),
    )
    .unwrap();
    let kdb_size = 167_936;
    let cut = kdb[..kdb.len() - 1000].to_vec();
    let entries = [
        ("miopen/gfx90a.kdb", kdb, kdb_size),
        ("miopen/cut.kdb", cut, kdb_size),
        ("k#0", co_frame, code.len() as u64),
    ];
    let data = build(&entries, true);
    let unit = units(&data, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let images: Vec<_> = open.images().collect();
    assert!(images
        .iter()
        .all(|i| i.encoded.is_some() && i.bytes.is_empty()));
    let kinds: Vec<ImageKind> = images.iter().map(|i| i.image_kind).collect();
    assert_eq!(kinds, [ImageKind::None, ImageKind::None, ImageKind::Object]);
    // Decoded: the database (sha256 of the file zstd compressed), an error for the cut
    // frame, the code object.
    let db = images[0].decode(&options).unwrap();
    assert_eq!(db.len(), kdb_size as usize);
    assert!(db.starts_with(b"SQLite format 3\0"));
    assert_eq!(
        sha256(&db),
        "d1623c098c52aba1a66d7f7e31420e7e8de726862e255a3af895dcc96d8a9f6c"
    );
    assert!(images[1].decode(&options).is_err());
    assert_eq!(&images[2].decode(&options).unwrap()[..], &code[..]);
    // Chosen without decoding: the code object, listed last.
    let gfx90a = [Device::parse("gfx90a").unwrap()];
    let choice = choose(open.images(), &gfx90a, &SelectOptions::default());
    let chosen = choice[0].image.as_ref().unwrap();
    assert_eq!(chosen.index, 2);
    assert_eq!(chosen.image_kind, ImageKind::Object);
    // The data alone: nothing.
    let choice = choose(open.images().take(2), &gfx90a, &SelectOptions::default());
    assert!(choice[0].image.is_none());
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
