//! Writer → reader round trips (property tests): whatever the writers produce, the readers
//! give back exactly — entry order, IDs, payloads, alignment, strings, header fields.

#![cfg(feature = "std")]

use offload_image::bundle::Bundle;
use offload_image::ccob::{truncated_md5, CompressedBundle};
use offload_image::offload_binary::OffloadBinary;
use offload_image::text::{CommentStyle, TextBundle};
use offload_image::write::ccob::{compress, CcobOptions, Codec, ZstdMode};
use offload_image::write::offload_binary::{v1_to_vec, v2_to_vec, OffloadImage};
use offload_image::write::strtab::StringTable;
use offload_image::write::{bundle, text};
use offload_image::{Limits, ReadOptions};
use proptest::prelude::*;

fn id() -> impl Strategy<Value = String> {
    "[a-z0-9_.+:-]{1,48}"
}

fn entries(max: usize, max_len: usize) -> impl Strategy<Value = Vec<(String, Vec<u8>)>> {
    prop::collection::vec(
        (id(), prop::collection::vec(any::<u8>(), 0..max_len)),
        0..max,
    )
}

fn align() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1u64), Just(8), Just(4096), 1u64..10_000]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn binary_bundles_read_back(es in entries(20, 600), align in align()) {
        let refs: Vec<(&str, &[u8])> = es.iter().map(|(i, d)| (i.as_str(), d.as_slice())).collect();
        let v = bundle::bundle_to_vec(&refs, align).unwrap();
        let layout = bundle::layout(&refs, align).unwrap();
        prop_assert_eq!(v.len() as u64, layout.len);
        let b = Bundle::parse(&v, &Limits::UNLIMITED).unwrap();
        prop_assert_eq!(b.entry_count(), es.len() as u64);
        prop_assert_eq!(b.header_len(), layout.header_len);
        for (e, ((i, d), off)) in b.entries().zip(es.iter().zip(&layout.offsets)) {
            prop_assert_eq!(e.id, i.as_str());
            prop_assert_eq!(e.data, d.as_slice());
            prop_assert_eq!(e.offset, *off);
            prop_assert_eq!(e.offset % align, 0);
            prop_assert!(e.offset >= layout.header_len);
        }
        // Padding is zero.
        let mut covered = vec![false; v.len()];
        for c in covered.iter_mut().take(layout.header_len as usize) { *c = true; }
        for (d, off) in es.iter().map(|(_, d)| d).zip(&layout.offsets) {
            for c in covered.iter_mut().skip(*off as usize).take(d.len()) { *c = true; }
        }
        prop_assert!(v.iter().zip(&covered).all(|(b, c)| *c || *b == 0));
    }

    #[test]
    fn text_bundles_read_back(es in entries(12, 400), style in prop_oneof![Just(CommentStyle::Semicolon), Just(CommentStyle::Hash), Just(CommentStyle::DoubleSlash)]) {
        prop_assume!(!es.is_empty());
        let end = format!("\n{} __CLANG_OFFLOAD_BUNDLE____END__ ", style.token());
        prop_assume!(es.iter().all(|(_, d)| !d.windows(end.len()).any(|w| w == end.as_bytes())));
        let refs: Vec<(&str, &[u8])> = es.iter().map(|(i, d)| (i.as_str(), d.as_slice())).collect();
        let v = text::text_bundle_to_vec(style, &refs);
        let t = TextBundle::parse(&v, &Limits::UNLIMITED).unwrap();
        prop_assert_eq!(t.style(), style);
        let got: Vec<(String, Vec<u8>)> = t.entries().map(|e| (e.id.to_string(), e.data.to_vec())).collect();
        prop_assert_eq!(got, es);
    }

    #[test]
    fn compressed_bundles_read_back(
        data in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..30_000),
            (any::<u8>(), 0usize..100_000).prop_map(|(b, n)| vec![b; n]),
        ],
        version in prop_oneof![Just(2u16), Just(3)],
        codec in prop_oneof![
            (0u8..=10).prop_map(|level| Codec::Zlib { level }),
            Just(Codec::Zstd(ZstdMode::Fastest)),
            Just(Codec::Zstd(ZstdMode::Uncompressed)),
        ],
    ) {
        let blob = compress(&data, &CcobOptions { version, codec }).unwrap();
        let c = CompressedBundle::parse(&blob).unwrap();
        prop_assert_eq!(c.version(), version);
        prop_assert_eq!(c.method(), codec.method());
        prop_assert_eq!(c.total_size(), Some(blob.len() as u64));
        prop_assert_eq!(c.uncompressed_size(), data.len() as u64);
        prop_assert_eq!(c.hash(), truncated_md5(&data));
        prop_assert_eq!(c.decompress(&ReadOptions::default()).unwrap(), data);
    }

    #[test]
    fn offload_binaries_v1_read_back(
        strings in prop::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_.-]{0,12}", "[ -~]{0,24}", 0..8),
        order in any::<u64>(),
        image in prop::collection::vec(any::<u8>(), 0..3000),
        image_kind in 0u16..8, offload_kind in 0u16..16, flags in any::<u32>(),
    ) {
        let mut pairs: Vec<(&[u8], &[u8])> = strings.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
        if !pairs.is_empty() {
            let len = pairs.len();
            pairs.rotate_left((order as usize) % len);
        }
        let img = OffloadImage { image_kind, offload_kind, flags, strings: &pairs, image: &image };
        let v = v1_to_vec(&img).unwrap();
        prop_assert_eq!(v.len() % 8, 0);
        let b = OffloadBinary::parse(&v, &Limits::UNLIMITED).unwrap();
        prop_assert_eq!(b.version(), 1);
        prop_assert_eq!(b.len(), v.len() as u64);
        let e = b.entries().next().unwrap();
        prop_assert_eq!(e.image, image.as_slice());
        prop_assert_eq!(e.image_offset % 8, 0);
        prop_assert_eq!((e.image_kind, e.offload_kind, e.flags), (image_kind, offload_kind, flags));
        let got: Vec<(&str, &[u8])> = e.strings.iter().collect();
        let want: Vec<(&str, &[u8])> = pairs.iter().map(|(k, v)| (std::str::from_utf8(k).unwrap(), *v)).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn offload_binaries_v2_read_back(
        images in prop::collection::vec(
            (
                prop::collection::btree_map("[a-z]{1,6}", prop::collection::vec(any::<u8>(), 0..20), 0..5),
                prop::collection::vec(any::<u8>(), 0..1500),
                0u16..8,
                0u16..16,
            ),
            1..6,
        ),
    ) {
        let pairs: Vec<Vec<(&[u8], &[u8])>> = images
            .iter()
            .map(|(s, ..)| s.iter().map(|(k, v)| (k.as_bytes(), v.as_slice())).collect())
            .collect();
        let imgs: Vec<OffloadImage<'_>> = images
            .iter()
            .zip(&pairs)
            .map(|((_, image, ik, ok), p)| OffloadImage { image_kind: *ik, offload_kind: *ok, flags: 0, strings: p, image })
            .collect();
        let v = v2_to_vec(&imgs).unwrap();
        prop_assert_eq!(v.len() % 8, 0);
        let b = OffloadBinary::parse(&v, &Limits::UNLIMITED).unwrap();
        prop_assert_eq!(b.version(), 2);
        prop_assert_eq!(b.entry_count(), imgs.len() as u64);
        for (e, img) in b.entries().zip(&imgs) {
            prop_assert_eq!(e.image, img.image);
            prop_assert_eq!((e.image_kind, e.offload_kind), (img.image_kind, img.offload_kind));
            let got: Vec<(&str, &[u8])> = e.strings.iter().collect();
            let want: Vec<(&str, &[u8])> = img.strings.iter().map(|(k, v)| (std::str::from_utf8(k).unwrap(), *v)).collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn string_tables_hold_every_string(strings in prop::collection::vec("[a-z.]{0,10}", 0..30)) {
        let mut t = StringTable::new();
        for s in &strings {
            t.add(s.as_bytes());
        }
        let f = t.finalize();
        let bytes = f.to_vec();
        prop_assert_eq!(bytes.len() as u64, f.size());
        prop_assert_eq!(bytes.first().copied(), Some(0));
        let distinct: std::collections::BTreeSet<&String> = strings.iter().collect();
        prop_assert!(f.size() <= 1 + distinct.iter().map(|s| s.len() as u64 + 1).sum::<u64>());
        for s in &strings {
            let at = f.offset(s.as_bytes()).unwrap() as usize;
            prop_assert_eq!(&bytes[at..at + s.len()], s.as_bytes());
            prop_assert_eq!(bytes[at + s.len()], 0);
        }
    }
}
