//! Writer → reader round trips, and reader → writer → reader.
//!
//! From structured input (entries, alignment, comment style, `CCOB` version and codec,
//! OffloadBinary images and strings) the writers build every format; the readers must give
//! back exactly what was written, also through the container walk. Then any bytes that
//! read as a bundle, text bundle or OffloadBinary are written again from what was read, and
//! must read back the same.
#![no_main]
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use offload_image::bundle::Bundle;
use offload_image::ccob::CompressedBundle;
use offload_image::offload_binary::{OffloadBinaries, OffloadBinary};
use offload_image::raw::TEXT_END_MARKER;
use offload_image::text::{CommentStyle, TextBundle};
use offload_image::write::ccob::{compress, CcobOptions, Codec, ZstdMode};
use offload_image::write::offload_binary::{v1_to_vec, v2_to_vec, OffloadImage};
use offload_image::write::{bundle::bundle_to_vec, text::text_bundle_to_vec};
use offload_image::{Limits, ReadOptions};
use offload_image_fuzz::list;

#[derive(Arbitrary, Debug)]
struct Image {
    image_kind: u16,
    offload_kind: u16,
    flags: u32,
    strings: Vec<(Vec<u8>, Vec<u8>)>,
    image: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    entries: Vec<(String, Vec<u8>)>,
    align: u16,
    style: u8,
    v3: bool,
    codec: u8,
    images: Vec<Image>,
    reparse: Vec<u8>,
}

fn entries_of(b: &Bundle<'_>) -> Vec<(String, Vec<u8>)> {
    b.entries()
        .map(|e| (e.id.to_string(), e.data.to_vec()))
        .collect()
}

type Strings = Vec<Vec<(Vec<u8>, Vec<u8>)>>;

fn binary_contents(b: &OffloadBinary<'_>) -> (Vec<(u16, u16, u32, Vec<u8>)>, Strings) {
    let mut heads = Vec::new();
    let mut strings = Vec::new();
    for e in b.entries() {
        heads.push((e.image_kind, e.offload_kind, e.flags, e.image.to_vec()));
        strings.push(
            e.strings
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.to_vec()))
                .collect(),
        );
    }
    (heads, strings)
}

fuzz_target!(|input: Input| {
    let options = ReadOptions::default();
    let refs: Vec<(&str, &[u8])> = input
        .entries
        .iter()
        .map(|(i, d)| (i.as_str(), d.as_slice()))
        .collect();
    // LLVM's alignments (1, 8, 4096) and small odd ones; large ones only make big zero runs.
    let align = match input.align % 4 {
        0 => 1,
        1 => 8,
        2 => 4096,
        _ => u64::from(input.align / 4 % 64) + 1,
    };

    // Binary bundles: exactly the entries back, in order.
    if let Ok(bytes) = bundle_to_vec(&refs, align) {
        // IDs are stored as written; the reader trims trailing NULs only.
        let plain = input.entries.iter().all(|(i, _)| !i.ends_with('\0'));
        let b = Bundle::parse(&bytes, &Limits::UNLIMITED).expect("a written bundle reads");
        assert_eq!(b.len(), bytes.len() as u64);
        if plain {
            assert_eq!(entries_of(&b), input.entries);
        }
        for e in b.entries() {
            assert!(e.data.is_empty() || e.offset % align == 0);
        }
        // Compressed, every codec.
        let codec = match input.codec % 3 {
            0 => Codec::Zlib {
                level: input.codec / 3 % 11,
            },
            1 => Codec::Zstd(ZstdMode::Uncompressed),
            _ => Codec::Zstd(ZstdMode::Fastest),
        };
        let ccob_options = CcobOptions {
            version: if input.v3 { 3 } else { 2 },
            codec,
        };
        if let Ok(blob) = compress(&bytes, &ccob_options) {
            let c = CompressedBundle::parse(&blob).expect("a written CCOB parses");
            assert_eq!(c.len(&options).ok(), Some(blob.len() as u64));
            let unlimited = ReadOptions {
                limits: Limits::UNLIMITED,
                ..options
            };
            assert_eq!(
                c.decompress(&unlimited)
                    .expect("a written CCOB decompresses"),
                bytes
            );
        }
        if !input.entries.is_empty() && bytes.len() < (1 << 20) {
            let _ = list(&bytes, &options);
        }
    }

    // Text bundles: exact, unless an ID or payload contains what the format cannot carry.
    let style = [
        CommentStyle::Semicolon,
        CommentStyle::Hash,
        CommentStyle::DoubleSlash,
    ][usize::from(input.style % 3)];
    let text = text_bundle_to_vec(style, &refs);
    let carriable = input.entries.iter().all(|(i, d)| {
        !i.contains('\n')
            && !d
                .windows(TEXT_END_MARKER.len())
                .any(|w| w == TEXT_END_MARKER)
    });
    match TextBundle::parse(&text, &Limits::UNLIMITED) {
        Ok(t) if carriable => {
            let got: Vec<(String, Vec<u8>)> = t
                .entries()
                .map(|e| (e.id.to_string(), e.data.to_vec()))
                .collect();
            assert_eq!(got, input.entries);
        }
        Err(e) if carriable && !input.entries.is_empty() => panic!("written text bundle: {e}"),
        _ => {}
    }

    // OffloadBinaries: v1 of the first image, v2 of all; back to back they read as two.
    let owned: Vec<Vec<(&[u8], &[u8])>> = input
        .images
        .iter()
        .map(|i| {
            i.strings
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect()
        })
        .collect();
    let images: Vec<OffloadImage<'_>> = input
        .images
        .iter()
        .zip(&owned)
        .map(|(i, s)| OffloadImage {
            image_kind: i.image_kind,
            offload_kind: i.offload_kind,
            flags: i.flags,
            strings: s,
            image: &i.image,
        })
        .collect();
    let v2 = v2_to_vec(&images);
    if let Ok(v2) = &v2 {
        let b = OffloadBinary::parse(v2, &Limits::UNLIMITED).expect("a written v2 binary reads");
        let (heads, strings) = binary_contents(&b);
        let want: Vec<(u16, u16, u32, Vec<u8>)> = input
            .images
            .iter()
            .map(|i| (i.image_kind, i.offload_kind, i.flags, i.image.clone()))
            .collect();
        assert_eq!(heads, want);
        // Keys are NUL-terminated: a key with a NUL reads back cut at it.
        for (got, img) in strings.iter().zip(&input.images) {
            let want: Vec<(Vec<u8>, Vec<u8>)> = img.strings.clone();
            if want
                .iter()
                .all(|(k, _)| !k.contains(&0) && std::str::from_utf8(k).is_ok())
            {
                assert_eq!(got, &want);
            }
        }
    }
    if let (Some(first), Ok(v2)) = (images.first(), &v2) {
        if let Ok(v1) = v1_to_vec(first) {
            let mut seq = v1.clone();
            seq.resize(seq.len().div_ceil(8) * 8, 0);
            seq.extend_from_slice(v2);
            let s =
                OffloadBinaries::parse(&seq, &Limits::UNLIMITED).expect("written binaries read");
            assert_eq!(s.count(), 2);
            let _ = list(&seq, &options);
        }
    }

    // Reader → writer → reader.
    let data = &input.reparse;
    if let Ok(b) = Bundle::parse(data, &Limits::DEFAULT) {
        let read = entries_of(&b);
        let refs: Vec<(&str, &[u8])> = read
            .iter()
            .map(|(i, d)| (i.as_str(), d.as_slice()))
            .collect();
        if let Ok(again) = bundle_to_vec(&refs, 1) {
            let b2 = Bundle::parse(&again, &Limits::DEFAULT).expect("a rewritten bundle reads");
            assert_eq!(entries_of(&b2), read);
        }
    }
    if let Ok(t) = TextBundle::parse(data, &Limits::DEFAULT) {
        let read: Vec<(String, Vec<u8>)> = t
            .entries()
            .map(|e| (e.id.to_string(), e.data.to_vec()))
            .collect();
        let refs: Vec<(&str, &[u8])> = read
            .iter()
            .map(|(i, d)| (i.as_str(), d.as_slice()))
            .collect();
        let again = text_bundle_to_vec(t.style(), &refs);
        let t2 =
            TextBundle::parse(&again, &Limits::DEFAULT).expect("a rewritten text bundle reads");
        let got: Vec<(String, Vec<u8>)> = t2
            .entries()
            .map(|e| (e.id.to_string(), e.data.to_vec()))
            .collect();
        assert_eq!(got, read);
    }
    if let Ok(b) = OffloadBinary::parse(data, &Limits::DEFAULT) {
        if !b.is_compressed() {
            let read = binary_contents(&b);
            let strings: Vec<Vec<(&[u8], &[u8])>> = read
                .1
                .iter()
                .map(|s| {
                    s.iter()
                        .map(|(k, v)| (k.as_slice(), v.as_slice()))
                        .collect()
                })
                .collect();
            let images: Vec<OffloadImage<'_>> = read
                .0
                .iter()
                .zip(&strings)
                .map(|((ik, ok, fl, img), s)| OffloadImage {
                    image_kind: *ik,
                    offload_kind: *ok,
                    flags: *fl,
                    strings: s,
                    image: img,
                })
                .collect();
            if let Ok(again) = v2_to_vec(&images) {
                let b2 = OffloadBinary::parse(&again, &Limits::UNLIMITED)
                    .expect("a rewritten binary reads");
                assert_eq!(binary_contents(&b2), read);
            }
        }
    }
});
