//! Property tests (proptest, fixed seed):
//!
//! * **the reader never returns a slice outside its input**: over corpus files with random
//!   edits and over random bytes behind every magic, every image, entry ID, string and
//!   payload the readers hand out lies inside the input buffer, or inside content the
//!   library decompressed; errors point inside the input;
//! * **builder → reader round trips**: bundles, text bundles, `CCOB` v1–v3 (zlib, zstd),
//!   OffloadBinaries v1–v3 (plain and compressed) built from random entries with the
//!   spec-derived builders of `tests/suite/common/craft.rs` read back to the same entries, in
//!   order, at the offsets the layout gave them.

use crate::common;

use std::sync::OnceLock;

use common::craft::*;
use common::read_corpus;
use offload_image::arch::EntryId;
use offload_image::bundle::Bundle;
use offload_image::ccob::CompressedBundle;
use offload_image::container::UnitContent;
use offload_image::offload_binary::{OffloadBinaries, OffloadBinary};
use offload_image::text::TextBundle;
use offload_image::{for_each_unit, Error, Limits, ReadOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

fn config(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(0x0005_EED0_F0FF_10AD),
        failure_persistence: None,
        ..Config::default()
    }
}

fn within(outer: &[u8], inner: &[u8]) -> bool {
    let o = outer.as_ptr() as usize;
    let i = inner.as_ptr() as usize;
    i >= o && i + inner.len() <= o + outer.len()
}

/// Corpus files of every container type (the mutation bases).
fn bases() -> &'static [Vec<u8>] {
    static BASES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    BASES.get_or_init(|| {
        [
            "bundles/hip_6arch.bundle",
            "bundles/hip_3field.bundle",
            "bundles/host_elf.bundle.o",
            "text/omp.ll.bundle",
            "text/hip.s.bundle",
            "compressed/hip_6arch.v1-zstd.ccob",
            "compressed/hip_6arch.v3-zstd.llvm22.ccob",
            "compressed/hip_6arch.zlib.ccob",
            "packager/multi3.offbin",
            "packager/concat.offbin",
            "nvptx/cuda_cubins.offbin",
            "driver/hip_nonrdc.o",
            "driver/hip_compress.exe",
            "driver/omp_amd_nv.o",
            "driver/libfat.a",
            "devobj/saxpy.gfx90a.co",
        ]
        .iter()
        .map(|f| read_corpus(f))
        .chain([
            compress_offload_binary(&offload_binary_for(3, "gfx90a", b"\x7fELF image"), 1),
            offload_binary_for(2, "gfx906", b"\x7fELF image"),
        ])
        .collect()
    })
}

/// One edit: (position, value, operation).
type Edit = (u32, u64, u8);

fn apply(base: &[u8], edits: &[Edit], cut: Option<u32>) -> Vec<u8> {
    let mut d = base.to_vec();
    for &(pos, value, op) in edits {
        let len = d.len().max(1);
        // Half of the edits land in the first 256 bytes (headers).
        let p = if pos & 1 == 0 {
            (pos as usize >> 1) % len.min(256)
        } else {
            (pos as usize >> 1) % len
        };
        match op % 6 {
            0 => {
                if let Some(b) = d.get_mut(p) {
                    *b = value as u8;
                }
            }
            1 => {
                if let Some(b) = d.get_mut(p) {
                    *b ^= 1 << (value % 8);
                }
            }
            2 => {
                let p = p.min(d.len());
                d.insert(p, value as u8);
            }
            3 => {
                if p < d.len() {
                    d.remove(p);
                }
            }
            4 => {
                // An extreme 8-byte value at an 8-aligned position.
                let p = p & !7;
                let v = [0, u64::from(u32::MAX), 1 << 63, u64::MAX, value][(value % 5) as usize];
                if let Some(dst) = d.get_mut(p..p + 8) {
                    dst.copy_from_slice(&v.to_le_bytes());
                }
            }
            _ => {
                let p = p & !3;
                if let Some(dst) = d.get_mut(p..p + 4) {
                    dst.copy_from_slice(&(value as u32).to_le_bytes());
                }
            }
        }
    }
    if let Some(c) = cut {
        d.truncate(c as usize % (d.len() + 1));
    }
    d
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        0..bases().len(),
        prop::collection::vec((any::<u32>(), any::<u64>(), any::<u8>()), 0..6),
        prop::option::weighted(0.2, any::<u32>()),
    )
        .prop_map(|(b, edits, cut)| apply(&bases()[b], &edits, cut))
}

/// Random bytes behind the start of every container the walk recognises.
fn behind_magic() -> impl Strategy<Value = Vec<u8>> {
    let prefixes: Vec<Vec<u8>> = vec![
        b"__CLANG_OFFLOAD_BUNDLE__".to_vec(),
        b"CCOB\x01\x00\x01\x00".to_vec(),
        b"CCOB\x02\x00\x00\x00".to_vec(),
        b"CCOB\x03\x00\x01\x00".to_vec(),
        vec![0x10, 0xFF, 0x10, 0xAD, 1, 0, 0, 0],
        vec![0x10, 0xFF, 0x10, 0xAD, 2, 0, 0, 0],
        vec![0x10, 0xFF, 0x10, 0xAD, 3, 0, 0, 0],
        b"\x7fELF\x02\x01\x01".to_vec(),
        b"\x7fELF\x01\x01\x01".to_vec(),
        b"!<arch>\n".to_vec(),
        b"\n; __CLANG_OFFLOAD_BUNDLE____START__ ".to_vec(),
    ];
    (
        prop::sample::select(prefixes),
        prop::collection::vec(any::<u8>(), 0..512),
    )
        .prop_map(|(mut p, tail)| {
            p.extend(tail);
            p
        })
}

/// The `list` path with every handed-out slice checked. Returns the images as
/// (offset in the input or None if decompressed, length).
fn list_checked(data: &[u8], options: &ReadOptions) -> Result<Vec<(Option<u64>, usize)>, Error> {
    let mut seen = Vec::new();
    for_each_unit(data, options, |unit| {
        for p in unit.location.path() {
            let name = match p {
                offload_image::container::PathElem::Member(n) => n,
                offload_image::container::PathElem::Section(n) => n,
            };
            assert!(within(data, name), "container name outside the input");
        }
        let open = unit.open(options)?;
        let decompressed = open.decompressed();
        for image in open.images() {
            let inside = within(data, image.bytes);
            match (&unit.content, decompressed) {
                (UnitContent::Compressed(_), Some(d)) => assert!(within(d, image.bytes)),
                (UnitContent::OffloadBinaries(seq), _) => {
                    assert!(inside || seq.iter().any(|(_, b)| b.is_compressed()))
                }
                _ => assert!(inside, "image outside the input"),
            }
            // Everything else an image carries lies with its bytes.
            let home = |s: &[u8]| within(data, s) || decompressed.is_some_and(|d| within(d, s));
            let in_compressed_binary =
                !inside && matches!(unit.content, UnitContent::OffloadBinaries(_));
            if let Some(id) = image.entry_id {
                assert!(home(id.as_bytes()) || in_compressed_binary);
                if let Ok(e) = EntryId::parse(id) {
                    assert!(within(id.as_bytes(), e.kind.as_bytes()));
                    assert!(within(id.as_bytes(), e.triple.as_bytes()));
                }
            }
            for s in [image.triple, image.target_id].into_iter().flatten() {
                assert!(home(s.as_bytes()) || in_compressed_binary);
            }
            if let Some(strings) = image.strings {
                for (k, v) in strings.iter() {
                    assert!((home(k.as_bytes()) && home(v)) || in_compressed_binary);
                }
            }
            let offset = open.offset_of(&image);
            assert_eq!(offset.is_some(), inside);
            seen.push((offset, image.bytes.len()));
        }
        Ok(())
    })?;
    Ok(seen)
}

/// Every reader on its own, slices checked.
fn readers_checked(data: &[u8]) {
    let limits = Limits::DEFAULT;
    if let Ok(b) = Bundle::parse(data, &limits) {
        assert!(within(data, b.data()));
        for e in b.entries() {
            assert!(within(data, e.data) && within(data, e.id.as_bytes()));
        }
    }
    if let Ok(t) = TextBundle::parse(data, &limits) {
        for e in t.entries() {
            assert!(within(data, e.data) && within(data, e.id.as_bytes()));
        }
    }
    if let Ok(c) = CompressedBundle::parse(data) {
        assert!(within(data, c.payload()));
    }
    if let Ok(seq) = OffloadBinaries::parse(data, &limits) {
        for (_, b) in seq.iter() {
            assert!(within(data, b.data()));
            for e in b.entries() {
                assert!(within(data, e.image));
                for (k, v) in e.strings.iter() {
                    assert!(within(data, k.as_bytes()) && within(data, v));
                }
            }
        }
    }
}

fn check_error(data: &[u8], r: &Result<Vec<(Option<u64>, usize)>, Error>) {
    if let Err(e) = r {
        assert!(
            e.offset() <= data.len() as u64,
            "{e} (input {} bytes)",
            data.len()
        );
    }
}

proptest! {
    #![proptest_config(config(1500))]

    #[test]
    fn mutated_corpus_slices_stay_inside(data in mutated()) {
        let options = ReadOptions::default();
        let r = list_checked(&data, &options);
        check_error(&data, &r);
        let r = list_checked(&data, &ReadOptions { verify_hash: false, ..options });
        check_error(&data, &r);
        readers_checked(&data);
    }

    #[test]
    fn random_bytes_behind_a_magic_slices_stay_inside(data in behind_magic()) {
        let r = list_checked(&data, &ReadOptions::default());
        check_error(&data, &r);
        readers_checked(&data);
    }
}

/// A bundle entry ID: kind, triple, optional target (as tools spell them).
fn entry_id() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["host", "hip", "hipv4", "openmp", "cuda", "hcc"]),
        prop::sample::select(vec![
            "amdgcn-amd-amdhsa-",
            "nvptx64-nvidia-cuda-",
            "x86_64-unknown-linux-gnu",
            "amdgcn-amd-amdhsa-unknown",
        ]),
        prop::option::of(prop::sample::select(vec![
            "gfx906",
            "gfx90a:xnack+",
            "gfx942:sramecc+:xnack-",
            "gfx11-generic",
            "sm_80",
        ])),
    )
        .prop_map(|(k, t, a)| format!("{k}-{t}-{}", a.unwrap_or("")))
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..300)
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn bundles_round_trip(
        entries in prop::collection::vec((entry_id(), payload()), 0..6),
        align in prop::sample::select(vec![1u64, 8, 4096]),
    ) {
        let refs: Vec<(&str, &[u8])> = entries.iter().map(|(i, d)| (i.as_str(), d.as_slice())).collect();
        let data = bundle(&refs, align);
        let b = Bundle::parse(&data, &Limits::DEFAULT).unwrap();
        prop_assert_eq!(b.entry_count(), entries.len() as u64);
        let got: Vec<(String, Vec<u8>)> = b.entries().map(|e| (e.id.to_string(), e.data.to_vec())).collect();
        prop_assert_eq!(&got, &entries);
        for e in b.entries() {
            prop_assert!(e.offset % align == 0 || e.data.is_empty());
        }
        if !entries.is_empty() {
            // The walk sees the same images, at the same offsets.
            let seen = list_checked(&data, &ReadOptions::default()).unwrap();
            let want: Vec<(Option<u64>, usize)> = b.entries().map(|e| (Some(e.offset), e.data.len())).collect();
            prop_assert_eq!(seen, want);
            // The same bundle compressed, every version and method.
            for version in [1u16, 2, 3] {
                for method in [0u16, 1] {
                    let blob = ccob(version, method, &data);
                    let c = CompressedBundle::parse(&blob).unwrap();
                    prop_assert_eq!(c.decompress(&ReadOptions::default()).unwrap(), data.clone());
                    prop_assert_eq!(c.len(&ReadOptions::default()).unwrap(), blob.len() as u64);
                    let images = list_checked(&blob, &ReadOptions::default()).unwrap();
                    prop_assert_eq!(images.len(), entries.len());
                    prop_assert!(images.iter().all(|(off, _)| off.is_none()));
                }
            }
        }
    }

    #[test]
    fn text_bundles_round_trip(
        entries in prop::collection::vec((entry_id(), prop::collection::vec(prop::sample::select(b"abc ;#/\n_".to_vec()), 0..80)), 1..5),
        style in prop::sample::select(vec![";", "#", "//"]),
    ) {
        let mut text = Vec::new();
        for (id, body) in &entries {
            text.extend_from_slice(format!("\n{style} __CLANG_OFFLOAD_BUNDLE____START__ {id}\n").as_bytes());
            text.extend_from_slice(body);
            text.extend_from_slice(format!("\n{style} __CLANG_OFFLOAD_BUNDLE____END__ {id}\n").as_bytes());
        }
        let t = TextBundle::parse(&text, &Limits::DEFAULT).unwrap();
        let got: Vec<(String, Vec<u8>)> = t.entries().map(|e| (e.id.to_string(), e.data.to_vec())).collect();
        prop_assert_eq!(got, entries);
    }

    #[test]
    fn offload_binaries_round_trip(
        version in 1u32..=3,
        images in prop::collection::vec(
            (payload(), 0u16..8, 0u16..9,
             prop::collection::vec(("[a-z]{1,8}", prop::collection::vec(1u8..=255, 0..20)), 0..4)),
            1..4),
        compress in prop::option::of(0u16..2),
    ) {
        let images = if version == 1 { images[..1].to_vec() } else { images };
        let entries: Vec<ObEntry<'_>> = images
            .iter()
            .map(|(img, ik, ok, strings)| ObEntry {
                image_kind: *ik,
                offload_kind: *ok,
                strings: strings.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect(),
                image: img,
            })
            .collect();
        let plain = offload_binary(version, &entries);
        let data = match compress {
            Some(method) if version == 3 => compress_offload_binary(&plain, method),
            _ => plain.clone(),
        };
        let mut b = OffloadBinary::parse(&data, &Limits::DEFAULT).unwrap();
        let inflated;
        if b.is_compressed() {
            inflated = b.inflate(&ReadOptions::default()).unwrap();
            prop_assert_eq!(&inflated, &plain);
            b = OffloadBinary::parse(&inflated, &Limits::DEFAULT).unwrap();
        }
        prop_assert_eq!(b.entry_count(), images.len() as u64);
        for (e, (img, ik, ok, strings)) in b.entries().zip(&images) {
            prop_assert_eq!(e.image, img.as_slice());
            prop_assert_eq!((e.image_kind, e.offload_kind), (*ik, *ok));
            let got: Vec<(String, Vec<u8>)> = e.strings.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect();
            let want: Vec<(String, Vec<u8>)> = strings.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(got, want);
        }
        let seen = list_checked(&data, &ReadOptions::default()).unwrap();
        prop_assert_eq!(seen.len(), images.len());
    }
}

/// The writers' output through the container paths (the writers' own round trips, in
/// `tests/suite/write_roundtrip.rs`, read each format directly): several written blobs back to
/// back in a host object's sections, inside an archive, read by the walk in order and at
/// the right offsets; and the writer agrees byte for byte with the spec-derived builder.
#[cfg(feature = "std")]
mod written {
    use super::*;
    use offload_image::write::bundle::bundle_to_vec;
    use offload_image::write::ccob::{compress, CcobOptions, Codec, ZstdMode};
    use offload_image::write::offload_binary::{v1_to_vec, v2_to_vec, OffloadImage};

    fn bundles() -> impl Strategy<Value = Vec<Vec<(String, Vec<u8>)>>> {
        prop::collection::vec(prop::collection::vec((entry_id(), payload()), 1..5), 1..4)
    }

    /// Blobs laid out back to back with `gaps` zero bytes after each: (bytes, starts).
    fn back_to_back(blobs: &[Vec<u8>], gaps: &[usize]) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut starts = Vec::new();
        for (b, g) in blobs.iter().zip(gaps.iter().cycle()) {
            starts.push(out.len());
            out.extend_from_slice(b);
            out.resize(out.len() + g, 0);
        }
        (out, starts)
    }

    fn section_offset(elf: &[u8], contents: &[u8]) -> usize {
        elf.windows(contents.len().min(64))
            .position(|w| w == &contents[..contents.len().min(64)])
            .unwrap()
    }

    proptest! {
        #![proptest_config(config(150))]

        #[test]
        fn written_bundles_in_host_objects_and_archives(
            bundles in bundles(),
            align in prop::sample::select(vec![1u64, 8, 4096]),
            gaps in prop::collection::vec(0usize..24, 1..4),
            in_archive in any::<bool>(),
        ) {
            let written: Vec<Vec<u8>> = bundles
                .iter()
                .map(|es| {
                    let refs: Vec<(&str, &[u8])> = es.iter().map(|(i, d)| (i.as_str(), d.as_slice())).collect();
                    let w = bundle_to_vec(&refs, align).unwrap();
                    // Two implementations of FORMATS.md §2.2 agree byte for byte.
                    assert_eq!(w, bundle(&refs, align));
                    w
                })
                .collect();
            let (fatbin, starts) = back_to_back(&written, &gaps);
            let host = host_with_fatbin(&fatbin);
            let section = section_offset(&host, &fatbin);
            let (file, base) = if in_archive {
                let a = ar(&[("host.o", &host)]);
                let at = section_offset(&a, &host);
                (a, at + section)
            } else {
                (host, section)
            };
            let seen = list_checked(&file, &ReadOptions::default()).unwrap();
            let mut want = Vec::new();
            for ((w, es), start) in written.iter().zip(&bundles).zip(&starts) {
                let b = Bundle::parse(w, &Limits::DEFAULT).unwrap();
                for (e, (_, d)) in b.entries().zip(es) {
                    want.push((Some((base + start) as u64 + e.offset), d.len()));
                }
            }
            prop_assert_eq!(seen, want);
        }

        #[test]
        fn written_ccobs_back_to_back(
            bundles in bundles(),
            codecs in prop::collection::vec((2u16..=3, 0u8..3), 1..4),
            gaps in prop::collection::vec(0usize..24, 1..4),
        ) {
            let mut contents = Vec::new();
            let blobs: Vec<Vec<u8>> = bundles
                .iter()
                .zip(codecs.iter().cycle())
                .map(|(es, (version, codec))| {
                    let refs: Vec<(&str, &[u8])> = es.iter().map(|(i, d)| (i.as_str(), d.as_slice())).collect();
                    let inner = bundle_to_vec(&refs, 8).unwrap();
                    let codec = match codec {
                        0 => Codec::Zlib { level: 6 },
                        1 => Codec::Zstd(ZstdMode::Uncompressed),
                        _ => Codec::Zstd(ZstdMode::Fastest),
                    };
                    contents.extend(es.iter().map(|(_, d)| d.clone()));
                    compress(&inner, &CcobOptions { version: *version, codec }).unwrap()
                })
                .collect();
            let (fatbin, _) = back_to_back(&blobs, &gaps);
            let host = host_with_fatbin(&fatbin);
            let options = ReadOptions::default();
            let mut images = Vec::new();
            let mut units = Vec::new();
            for_each_unit(&host, &options, |unit| {
                units.push(unit.index);
                let open = unit.open(&options)?;
                images.extend(open.images().map(|i| i.bytes.to_vec()));
                Ok(())
            })
            .unwrap();
            prop_assert_eq!(units, (0..blobs.len()).collect::<Vec<_>>());
            prop_assert_eq!(images, contents);
        }

        #[test]
        fn written_offload_binaries_in_llvm_offloading(
            images in prop::collection::vec(
                (payload(), prop::sample::select(vec!["gfx906", "gfx90a:xnack+", "sm_80", "gfx1100"])),
                1..5),
            split in 0usize..5,
        ) {
            let triple = |arch: &str| if arch.starts_with("sm_") { "nvptx64-nvidia-cuda" } else { "amdgcn-amd-amdhsa" };
            let strings: Vec<[(&[u8], &[u8]); 2]> = images
                .iter()
                .map(|(_, arch)| [(b"triple".as_slice(), triple(arch).as_bytes()), (b"arch".as_slice(), arch.as_bytes())])
                .collect();
            let written: Vec<OffloadImage<'_>> = images
                .iter()
                .zip(&strings)
                .map(|((img, _), s)| OffloadImage { image_kind: 1, offload_kind: 4, flags: 0, strings: s, image: img })
                .collect();
            // The first `split` images as v1 binaries (one each), the rest in one v2 binary,
            // each padded to 8 as in a linked `.llvm.offloading` section.
            let split = split.min(written.len());
            let mut blobs: Vec<Vec<u8>> = written[..split].iter().map(|w| v1_to_vec(w).unwrap()).collect();
            if split < written.len() {
                blobs.push(v2_to_vec(&written[split..]).unwrap());
            }
            let (section, _) = back_to_back(&blobs, &[0]);
            let host = elf64(&[Section { name: ".llvm.offloading", sh_type: LLVM_OFFLOADING, data: &section, range: None }]);
            let options = ReadOptions::default();
            let mut seen = Vec::new();
            for_each_unit(&host, &options, |unit| {
                let open = unit.open(&options)?;
                seen.extend(open.images().map(|i| (i.bytes.to_vec(), i.triple.map(str::to_string), i.target_id.map(str::to_string))));
                Ok(())
            })
            .unwrap();
            let want: Vec<_> = images
                .iter()
                .map(|(img, arch)| (img.clone(), Some(triple(arch).to_string()), Some(arch.to_string())))
                .collect();
            prop_assert_eq!(seen, want);
        }
    }
}
