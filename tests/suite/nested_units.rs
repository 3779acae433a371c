//! `units()` and `OpenUnit::images` open OffloadBinaries nested in an OffloadBinary's images
//! (LLVM 23, `FORMATS.md` §6.8; issue 45): the unit's own entries keep their indices
//! `0..n`, the nested images follow, numbered on in the order `nested_entries` (LLVM 23's
//! extraction order, checked against `llvm-offload-binary.ll` in `offload_binary_v2.rs`)
//! lists them; `OpenUnit::nested` maps each to its outer entry and path. Binaries are
//! written with this crate's LLVM 23 writer (version 2, several entries) and LLVM main's
//! compressed version 3, as the packager drop-in writes them.

#![cfg(feature = "write")]

use offload_image::offload_binary::{nested_entries, OffloadBinary};
use offload_image::write::ccob::Codec;
use offload_image::write::offload_binary::{
    v1_to_vec, v2_to_vec, v3_compressed_to_vec, OffloadImage,
};
use offload_image::{units, ErrorKind, ImageKind, Limits, ReadOptions};

fn image<'a>(strings: &'a [(&'a [u8], &'a [u8]); 2], bytes: &'a [u8]) -> OffloadImage<'a> {
    OffloadImage {
        image_kind: 1,
        offload_kind: 1,
        flags: 0,
        strings,
        image: bytes,
    }
}

fn s(arch: &'static str) -> [(&'static [u8], &'static [u8]); 2] {
    [(b"arch", arch.as_bytes()), (b"triple", b"x-y-z")]
}

/// (index, arch, bytes) of every image of the file's only unit, and `OpenUnit::nested`.
#[allow(clippy::type_complexity)]
fn images(data: &[u8]) -> (Vec<(usize, String, Vec<u8>)>, Vec<(usize, usize, Vec<u32>)>) {
    let options = ReadOptions::default();
    let mut all = units(data, &options);
    let unit = all.next().unwrap().unwrap();
    assert!(all.next().is_none());
    let open = unit.open(&options).unwrap();
    let list = open
        .images()
        .map(|i| {
            (
                i.index,
                i.target_id.unwrap_or_default().to_string(),
                i.bytes.to_vec(),
            )
        })
        .collect();
    let nested = open
        .nested()
        .into_iter()
        .map(|(i, o, p)| (i, o, p.to_vec()))
        .collect();
    (list, nested)
}

#[test]
fn nested_images_follow_the_units_entries_in_walk_order() {
    let (a, b, c, d) = (s("abc"), s("def"), s("ghi"), s("nested"));
    let inner = v2_to_vec(&[image(&a, b"A"), image(&b, b"B")]).unwrap();
    let mid = v2_to_vec(&[image(&c, b"C"), image(&d, &inner)]).unwrap();
    // Two binaries back to back: [x, mid as nested], then [y, inner as nested].
    let (x, y) = (s("x"), s("y"));
    let first = v2_to_vec(&[image(&x, b"X"), image(&d, &mid)]).unwrap();
    let second = v2_to_vec(&[image(&y, b"Y"), image(&d, &inner)]).unwrap();
    let file = [first.clone(), second].concat();
    let (list, nested) = images(&file);
    let got: Vec<(usize, &str, &[u8])> = list
        .iter()
        .map(|(i, a, b)| (*i, a.as_str(), b.as_slice()))
        .collect();
    assert_eq!(
        got,
        [
            (0, "x", &b"X"[..]),
            (1, "nested", &mid[..]),
            (2, "y", b"Y"),
            (3, "nested", &inner[..]),
            // mid: [0] ghi, [1] inner: [1.0] abc, [1.1] def.
            (4, "ghi", b"C"),
            (5, "abc", b"A"),
            (6, "def", b"B"),
            // the second binary's inner, its own bytes (not the same as mid's inner).
            (7, "abc", b"A"),
            (8, "def", b"B"),
        ]
    );
    assert_eq!(
        nested,
        [
            (4, 1, vec![0]),
            (5, 1, vec![1, 0]),
            (6, 1, vec![1, 1]),
            (7, 3, vec![0]),
            (8, 3, vec![1]),
        ]
    );
    // The same order and paths as `nested_entries` over the whole sequence.
    let walked = nested_entries(&file, &Limits::default()).unwrap();
    let leaves: Vec<Vec<u32>> = walked
        .iter()
        .filter(|n| n.depth() > 0)
        .map(|n| n.path[1..].to_vec())
        .collect();
    assert_eq!(leaves, [vec![0], vec![1, 0], vec![1, 1], vec![0], vec![1]]);
    // The nesting entries are kind none: no code of their own.
    let options = ReadOptions::default();
    let unit = units(&file, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let kinds: Vec<ImageKind> = open.images().map(|i| i.image_kind).collect();
    assert_eq!(kinds[1], ImageKind::None);
    assert_eq!(kinds[3], ImageKind::None);
    assert_eq!(kinds[0], ImageKind::Object);
    // Offsets: each nested image where its bytes are, inside its nesting entry.
    let offsets: Vec<Option<u64>> = open.images().map(|i| i.offset).collect();
    let mid_at = OffloadBinary::parse(&first, &Limits::default())
        .unwrap()
        .entries()
        .nth(1)
        .unwrap()
        .image_offset;
    let c_at = offsets[4].unwrap();
    assert_eq!(&file[c_at as usize..][..1], b"C");
    assert!(c_at > mid_at && c_at < mid_at + mid.len() as u64);
}

/// A binary named by several entries (the same bytes) is opened once, under the first.
#[test]
fn a_nested_binary_named_twice_is_listed_once() {
    let (a, d) = (s("abc"), s("nested"));
    let inner = v2_to_vec(&[image(&a, b"A")]).unwrap();
    let mut outer = v2_to_vec(&[image(&d, &inner), image(&d, &inner)]).unwrap();
    // Point the second entry's image at the first's (an aliasing binary).
    let b = OffloadBinary::parse(&outer, &Limits::default()).unwrap();
    let e: Vec<_> = b.entries().collect();
    let first_at = e[0].image_offset;
    // The header's entry offset (+16); a version-2 entry is 40 bytes, its image offset at +24.
    let entries_at = u64::from_le_bytes(outer[16..24].try_into().unwrap()) as usize;
    let second = entries_at + 40 + 24;
    outer[second..second + 8].copy_from_slice(&first_at.to_le_bytes());
    let (list, nested) = images(&outer);
    assert_eq!(list.len(), 3);
    assert_eq!(nested, [(2, 0, vec![0])]);
}

/// A compressed (version 3) outer binary is inflated at open; its nested images are listed
/// from the inflated bytes.
#[test]
fn nested_images_of_a_compressed_binary() {
    let (a, d) = (s("abc"), s("nested"));
    let inner = v2_to_vec(&[image(&a, b"inner image")]).unwrap();
    let outer = v3_compressed_to_vec(&[image(&d, &inner)], Codec::Zlib { level: 6 }).unwrap();
    let (list, nested) = images(&outer);
    assert_eq!(list[1].1, "abc");
    assert_eq!(list[1].2, b"inner image");
    assert_eq!(nested, [(1, 0, vec![0])]);
}

/// A nested binary that does not read makes the unit fail to open, at the inner offset
/// (LLVM 23's tool fails the extraction: "Invalid data was encountered").
#[test]
fn a_malformed_nested_binary_is_a_located_error() {
    let d = s("nested");
    let bad = [0x10, 0xFF, 0x10, 0xAD, 0x0A];
    let outer = v1_to_vec(&image(&d, &bad)).unwrap();
    let at = OffloadBinary::parse(&outer, &Limits::default())
        .unwrap()
        .entries()
        .next()
        .unwrap()
        .image_offset;
    let options = ReadOptions::default();
    let unit = units(&outer, &options).next().unwrap().unwrap();
    let e = unit.open(&options).unwrap_err();
    assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, at));
    // Too many nested images for the limit.
    let a = s("abc");
    let many: Vec<_> = (0..5).map(|_| image(&a, b"A")).collect();
    let inner = v2_to_vec(&many).unwrap();
    let outer = v2_to_vec(&[image(&d, &inner)]).unwrap();
    let options = ReadOptions {
        limits: Limits {
            max_entries: 4,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let unit = units(&outer, &options).next().unwrap().unwrap();
    let e = unit.open(&options).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
}
