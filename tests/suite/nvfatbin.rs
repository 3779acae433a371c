//! NVIDIA fatbinaries against the oracle: every image the reader lists must have exactly
//! the bytes `cuobjdump -xelf all -xptx all` writes (tests/data/nvfatbin/MANIFEST, made by
//! tests/data/nvfatbin/regen.sh with NVIDIA's tools), and bad input must give a located
//! error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use offload_image::container::UnitContent;
use offload_image::nvfatbin::{self, EntryKind, Fatbin, Variant};
use offload_image::{
    for_each_unit, select, Device, ErrorKind, ImageKind, Limits, Policy, ReadOptions, SelectOptions,
};
use sha2::{Digest, Sha256};

use crate::common;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nvfatbin")
}

fn hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// file → sorted (kind, arch, sha256) as cuobjdump extracted them.
pub fn manifest() -> BTreeMap<String, Vec<(String, String, String)>> {
    let text = std::fs::read_to_string(dir().join("MANIFEST")).unwrap();
    let mut m: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 4, "{line}");
        m.entry(f[0].to_string()).or_default().push((
            f[1].to_string(),
            f[2].to_string(),
            f[3].to_string(),
        ));
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

/// How cuobjdump names an entry: a family cubin is listed as the plain SM.
fn cuobjdump_arch(e: &nvfatbin::FatbinEntry<'_>) -> String {
    let variant = match (e.kind, e.variant) {
        (EntryKind::Cubin, Variant::Family) => Variant::Plain,
        (_, v) => v,
    };
    nvfatbin::arch_name(e.sm, variant).unwrap().to_string()
}

/// (kind, arch, sha256) of every entry of a bare fatbinary.
fn read_fatbin(bytes: &[u8]) -> Vec<(String, String, String)> {
    let options = ReadOptions::default();
    let fb = Fatbin::parse(bytes, &options.limits).unwrap();
    let mut v = Vec::new();
    for e in fb.entries() {
        assert_eq!(
            e.unknown_flags(),
            0,
            "entry {} flags {:#x}",
            e.index,
            e.flags
        );
        let image = match e.image() {
            Some(i) => hex(i),
            None => {
                let d = e.decompress(&options).unwrap();
                hex(nvfatbin::trim_image(e.kind, &d))
            }
        };
        let kind = match e.kind {
            EntryKind::Cubin => "elf",
            EntryKind::Ptx => "ptx",
            // cuobjdump's MANIFEST lists ELF and PTX only (tests/suite/nvfatbin_tileir.rs).
            EntryKind::TileIr => "tile ir",
            // Not extracted by cuobjdump (tests/suite/lto_entries.rs).
            EntryKind::LtoIr => "nvvm",
        };
        v.push((kind.to_string(), cuobjdump_arch(&e), image));
    }
    v.sort();
    v
}

#[test]
fn bare_fatbinaries_match_cuobjdump() {
    let m = manifest();
    let mut files = 0;
    let mut images = 0;
    for (file, want) in &m {
        if !file.ends_with(".fatbin") {
            continue;
        }
        let bytes = std::fs::read(dir().join("files").join(file)).unwrap();
        let got = read_fatbin(&bytes);
        assert_eq!(&got, want, "{file}");
        files += 1;
        images += got.len();
    }
    assert_eq!((files, images), (15, 58));
}

#[test]
fn codecs_and_variants_are_recorded() {
    let read = |f: &str| std::fs::read(dir().join("files").join(f)).unwrap();
    let codecs = |f: &str| -> Vec<Option<&'static str>> {
        let b = read(f);
        let fb = Fatbin::parse(&b, &Limits::DEFAULT).unwrap();
        fb.entries().map(|e| e.codec.map(|c| c.name())).collect()
    };
    assert_eq!(
        codecs("mixed.speed.all.fatbin"),
        vec![Some("lz4"); 4],
        "--compress-mode=speed is LZ4"
    );
    assert_eq!(codecs("mixed.size.fatbin"), vec![Some("zstd"); 4]);
    assert_eq!(
        codecs("mixed.default.fatbin"),
        vec![None, None, Some("zstd"), None],
        "default: only PTX is compressed"
    );
    assert_eq!(codecs("mixed.none.all.fatbin"), vec![None; 4]);
    let b = read("variants.fatbin");
    let fb = Fatbin::parse(&b, &Limits::DEFAULT).unwrap();
    let names: Vec<_> = fb
        .entries()
        .map(|e| format!("{}:{}", e.kind.name(), e.arch_name().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            "cubin:sm_90a",
            "ptx:sm_90a",
            "cubin:sm_100a",
            "cubin:sm_100f",
            "ptx:sm_100f",
            "ptx:sm_120"
        ]
    );
}

#[test]
fn malformed_fatbinaries_give_located_errors() {
    let cases: &[(&str, ErrorKind, u64)] = &[
        ("truncated_header.fatbin", ErrorKind::Truncated, 0),
        ("truncated_entry_header.fatbin", ErrorKind::Truncated, 8),
        ("truncated_payload.fatbin", ErrorKind::Truncated, 8),
        ("size_past_end.fatbin", ErrorKind::Truncated, 8),
        ("entry_size_past_end.fatbin", ErrorKind::OutOfBounds, 24),
        ("bad_kind.fatbin", ErrorKind::UnsupportedMethod, 16),
        ("entry_header_too_small.fatbin", ErrorKind::Malformed, 20),
        ("bad_version.fatbin", ErrorKind::UnsupportedVersion, 4),
        ("bomb_claim.fatbin", ErrorKind::LimitExceeded, 16 + 0x38),
    ];
    for (file, kind, offset) in cases {
        let b = std::fs::read(dir().join("files/malformed").join(file)).unwrap();
        let err = Fatbin::parse(&b, &Limits::DEFAULT).unwrap_err();
        assert_eq!(
            (err.kind(), err.offset()),
            (*kind, *offset),
            "{file}: {err}"
        );
    }
    // These parse; decoding the first entry fails.
    let options = ReadOptions::default();
    for (file, kind) in [
        ("bomb_short_claim.fatbin", ErrorKind::SizeMismatch),
        ("corrupt_payload.fatbin", ErrorKind::Decompress),
    ] {
        let b = std::fs::read(dir().join("files/malformed").join(file)).unwrap();
        let fb = Fatbin::parse(&b, &options.limits).unwrap();
        let e = fb.entries().next().unwrap();
        let err = e.decompress(&options).unwrap_err();
        assert_eq!(err.kind(), kind, "{file}: {err}");
    }
}

/// (kind, arch as cuobjdump names it, sha256) of the images of every fatbinary unit found
/// in `bytes` by the container walk (files, sections, archives, OffloadBinaries).
fn walk(bytes: &[u8]) -> (usize, Vec<(String, String, String)>) {
    let options = ReadOptions::default();
    let mut units = 0;
    let mut v = Vec::new();
    for_each_unit(bytes, &options, |unit| {
        if !matches!(unit.content, UnitContent::NvFatbin(_)) {
            return Ok(());
        }
        units += 1;
        let open = unit.open(&options)?;
        for image in open.images() {
            let kind = match image.image_kind {
                ImageKind::Cubin => "elf",
                ImageKind::Ptx => "ptx",
                k => panic!("unexpected kind {k:?}"),
            };
            let arch = image.target_id.unwrap();
            let arch = match kind {
                "elf" => arch.trim_end_matches('f'),
                _ => arch,
            };
            assert_eq!(image.triple, Some("nvptx64-nvidia-cuda"));
            let bytes = image.decode(&ReadOptions::default()).unwrap();
            v.push((kind.to_string(), arch.to_string(), hex(&bytes)));
        }
        Ok(())
    })
    .unwrap();
    v.sort();
    (units, v)
}

#[test]
fn every_file_matches_cuobjdump_through_the_container_walk() {
    let m = manifest();
    let mut images = 0;
    let mut units = 0;
    for (file, want) in &m {
        let bytes = std::fs::read(dir().join("files").join(file)).unwrap();
        let (n, got) = walk(&bytes);
        assert_eq!(&got, want, "{file}");
        images += got.len();
        units += n;
    }
    // 15 bare fatbinaries; host.o 1; libk.a 2 members; libk.so 2; libk_rt.so 3; prog 4;
    // rdc.o 1 (`__nv_relfatbin`).
    assert_eq!((m.len(), units, images), (21, 28, 85));
}

#[test]
fn fatbin_inside_an_offload_binary_is_a_unit() {
    // The corpus's CUDA OffloadBinary wraps saxpy3.fatbin as image kind `fatbin`.
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus/nvptx");
    let bytes = std::fs::read(corpus.join("cuda_fatbin.offbin")).unwrap();
    let (units, got) = walk(&bytes);
    assert_eq!(units, 1);
    assert_eq!(&got, &manifest()["saxpy3.fatbin"]);
}

#[test]
fn bad_input_in_a_section_is_located_in_the_file() {
    // The fatbinary of host.o with its entry kind broken: the error names the file offset.
    let mut bytes = std::fs::read(dir().join("files/host.o")).unwrap();
    let at = bytes
        .windows(4)
        .position(|w| w == [0x50, 0xED, 0x55, 0xBA])
        .unwrap();
    bytes[at + 16] = 9;
    // The damaged fatbinary is a unit of its own (`UnitContent::Damaged`): opening it gives
    // the error, located in the file.
    let options = ReadOptions::default();
    let err = for_each_unit(&bytes, &options, |u| u.open(&options).map(drop)).unwrap_err();
    assert_eq!(
        (err.kind(), err.offset()),
        (ErrorKind::UnsupportedMethod, at as u64 + 16)
    );
}

/// The selection table: (file, device, policy, JIT allowed, expected choice), the
/// expectations derived from COMPATIBILITY.md §9.2 (which images run) and §9.4 (ranking).
#[test]
fn selection_table() {
    use Policy::{Best, First};
    #[rustfmt::skip]
    let cases: &[(&str, &str, Policy, bool, &str)] = &[
        // variants: cubin 90a, ptx 90a, cubin 100a, cubin 100f, ptx 100f, ptx 120
        ("variants.fatbin", "sm_90", Best, true, "cubin:sm_90a"),
        ("variants.fatbin", "sm_90", Best, false, "cubin:sm_90a"),
        ("variants.fatbin", "sm_89", Best, true, "none"),
        ("variants.fatbin", "sm_100", Best, true, "cubin:sm_100a"),
        ("variants.fatbin", "sm_100", Best, false, "cubin:sm_100a"),
        ("variants.fatbin", "sm_103", Best, true, "cubin:sm_100f"),
        ("variants.fatbin", "sm_103", Best, false, "cubin:sm_100f"),
        ("variants.fatbin", "sm_110", Best, true, "none"),
        ("variants.fatbin", "sm_120", Best, true, "ptx:sm_120"),
        ("variants.fatbin", "sm_120", Best, false, "none"),
        ("variants.fatbin", "sm_121", Best, true, "ptx:sm_120"),
        ("variants.fatbin", "sm_90", First, true, "cubin:sm_90a"),
        ("variants.fatbin", "sm_100", First, true, "cubin:sm_100a"),
        ("variants.fatbin", "sm_103", First, true, "cubin:sm_100f"),
        ("variants.fatbin", "sm_121", First, true, "ptx:sm_120"),
        // cubin_only: 75, 80, 86, 120
        ("cubin_only.fatbin", "sm_75", Best, true, "cubin:sm_75"),
        ("cubin_only.fatbin", "sm_80", Best, true, "cubin:sm_80"),
        ("cubin_only.fatbin", "sm_86", Best, true, "cubin:sm_86"),
        ("cubin_only.fatbin", "sm_87", Best, true, "cubin:sm_86"),
        ("cubin_only.fatbin", "sm_89", Best, true, "cubin:sm_86"),
        ("cubin_only.fatbin", "sm_70", Best, true, "none"),
        ("cubin_only.fatbin", "sm_72", Best, true, "none"),
        ("cubin_only.fatbin", "sm_90", Best, true, "none"),
        ("cubin_only.fatbin", "sm_100", Best, true, "none"),
        ("cubin_only.fatbin", "sm_121", Best, true, "cubin:sm_120"),
        ("cubin_only.fatbin", "sm_86", First, true, "cubin:sm_80"),
        ("cubin_only.fatbin", "sm_89", First, true, "cubin:sm_80"),
        // ptx_only: 75, 86, 120
        ("ptx_only.fatbin", "sm_75", Best, true, "ptx:sm_75"),
        ("ptx_only.fatbin", "sm_80", Best, true, "ptx:sm_75"),
        ("ptx_only.fatbin", "sm_86", Best, true, "ptx:sm_86"),
        ("ptx_only.fatbin", "sm_90", Best, true, "ptx:sm_86"),
        ("ptx_only.fatbin", "sm_121", Best, true, "ptx:sm_120"),
        ("ptx_only.fatbin", "sm_70", Best, true, "none"),
        ("ptx_only.fatbin", "sm_86", Best, false, "none"),
        ("ptx_only.fatbin", "sm_90", First, true, "ptx:sm_75"),
        // mixed (zstd PTX): cubin 75, cubin 86, ptx 86, cubin 90a
        ("mixed.default.fatbin", "sm_75", Best, true, "cubin:sm_75"),
        ("mixed.default.fatbin", "sm_86", Best, true, "cubin:sm_86"),
        ("mixed.default.fatbin", "sm_89", Best, true, "cubin:sm_86"),
        ("mixed.default.fatbin", "sm_90", Best, true, "cubin:sm_90a"),
        ("mixed.default.fatbin", "sm_100", Best, true, "ptx:sm_86"),
        ("mixed.default.fatbin", "sm_100", Best, false, "none"),
        ("mixed.default.fatbin", "sm_80", Best, true, "none"),
        ("mixed.default.fatbin", "sm_120", First, true, "ptx:sm_86"),
        ("mixed.default.fatbin", "sm_86", First, true, "cubin:sm_86"),
        // the same entries, all LZ4
        ("mixed.speed.all.fatbin", "sm_86", Best, true, "cubin:sm_86"),
        ("mixed.speed.all.fatbin", "sm_121", Best, true, "ptx:sm_86"),
        ("mixed.speed.all.fatbin", "sm_90", Best, false, "cubin:sm_90a"),
    ];
    assert!(cases.len() >= 40);
    let m = manifest();
    let options = ReadOptions::default();
    for (file, device, policy, jit, want) in cases {
        let bytes = std::fs::read(dir().join("files").join(file)).unwrap();
        let units = offload_image::units(&bytes, &options)
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        assert_eq!(units.len(), 1);
        let open = units[0].open(&options).unwrap();
        let images: Vec<_> = open.images().collect();
        let device = Device::parse(device).unwrap();
        let sel = SelectOptions {
            policy: *policy,
            allow_jit: *jit,
            ..SelectOptions::default()
        };
        let got = match select(&images, &device, &sel).chosen() {
            Some(i) => {
                let image = &images[i];
                // The chosen bytes are one of cuobjdump's.
                let sha = hex(&image.decode(&ReadOptions::default()).unwrap());
                assert!(m[*file].iter().any(|(_, _, s)| *s == sha), "{file}");
                format!("{}:{}", image.image_kind.name(), image.target_id.unwrap())
            }
            None => "none".to_string(),
        };
        assert_eq!(&got, want, "{file} on {device} ({policy:?}, jit {jit})");
    }
}

/// The real library of scripts/fetch-nvidia-libs.sh (not committed: 167 MB), against the
/// cuobjdump extraction recorded in tests/data/nvfatbin/libcurand.MANIFEST. The test set-up
/// (`scripts/setup.sh`, run by `scripts/test.sh` and CI) fetches it.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs libcurand.so.10 (scripts/fetch-nvidia-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn libcurand_matches_cuobjdump() {
    if !common::external("libcurand.so.10 (scripts/fetch-nvidia-libs.sh)") {
        return;
    }
    let external = common::external_dir();
    let lib = external.join("nvidia/libcurand.so.10");
    let bytes = std::fs::read(&lib)
        .unwrap_or_else(|e| panic!("{}: {e}: run scripts/fetch-nvidia-libs.sh", lib.display()));
    let (units, got) = walk(&bytes);
    let text = std::fs::read_to_string(dir().join("libcurand.MANIFEST")).unwrap();
    let mut want: Vec<_> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[1].to_string(), f[2].to_string(), f[3].to_string())
        })
        .collect();
    want.sort();
    assert_eq!((units, got.len()), (11, 153));
    assert_eq!(got, want);
}

/// §9.1: the entry's SM and the cubin's `e_flags` are cross-checked; a disagreement is
/// reported (and the ELF header names the effective target), never silently preferred.
#[test]
fn entry_and_cubin_disagreement_is_reported() {
    use offload_image::arch::Mismatch;
    use offload_image::identify;
    let bytes = std::fs::read(dir().join("files/cubin_only.fatbin")).unwrap();
    let options = ReadOptions::default();
    let read = |b: &[u8]| -> Vec<(String, Option<Mismatch>, String)> {
        let units = offload_image::units(b, &options)
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let open = units[0].open(&options).unwrap();
        open.images()
            .map(|i| {
                let id = identify(&i);
                (
                    i.target_id.unwrap().to_string(),
                    id.mismatch,
                    id.target.to_string(),
                )
            })
            .collect()
    };
    // As built: every entry agrees with its cubin.
    assert!(read(&bytes).iter().all(|(_, m, _)| m.is_none()));
    // The third entry (the sm_86 cubin) relabelled sm_80 in its entry header.
    let fb = Fatbin::parse(&bytes, &Limits::DEFAULT).unwrap();
    let e = fb.entries().nth(2).unwrap();
    let mut bad = bytes.clone();
    bad[e.offset as usize + 0x1C] = 80;
    let got = read(&bad);
    assert_eq!(
        got[2],
        (
            "sm_80".to_string(),
            Some(Mismatch::Processor),
            "sm_86".to_string()
        )
    );
    let image = {
        let units = offload_image::units(&bad, &options)
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let open = units[0].open(&options).unwrap();
        let i = open.images().nth(2).unwrap();
        identify(&i).disagreement().unwrap().to_string()
    };
    assert_eq!(
        image,
        "the container names sm_80, the ELF header says sm_86"
    );
}

/// Checking an LZ4 entry without decoding it (`Encoded::decode_head`, which `select` runs on
/// the entry it chose, through `Image::check`) agrees with decoding it (lz4_flex), on NVIDIA's own LZ4 entries as
/// written and on damaged copies of them: every byte of the stream changed to three other
/// values, the stream cut short, and a declared size one off. Both succeed or fail together,
/// with the same error kind and offset, and the head is the first bytes of the decoded
/// image. `Encoded::peek` (what `select --no-verify-hash` reads) gives the same head while
/// decoding succeeds.
#[test]
fn lz4_streams_are_checked_as_decoding_checks_them() {
    use offload_image::decompress::Codec;
    use offload_image::Encoded;
    let data = std::fs::read(dir().join("files/mixed.speed.all.fatbin")).unwrap();
    let read = ReadOptions::default();
    let mut entries: Vec<Encoded<'_>> = Vec::new();
    for unit in offload_image::units(&data, &read) {
        let open = unit.unwrap().open(&read).unwrap();
        for image in open.images() {
            let Some(e) = image.encoded.filter(|e| e.codec == Codec::Lz4) else {
                continue;
            };
            // The stream as a part of `data` (the open unit borrows it for less).
            let at = e.stream_at as usize;
            let stream = &data[at..at + e.stream.len()];
            assert_eq!(stream, e.stream);
            entries.push(Encoded { stream, ..e });
        }
    }
    assert!(entries.len() >= 2, "{} LZ4 entries", entries.len());
    const HEAD: usize = offload_image::stream::IDENTIFY_LEN;
    type Outcome = Result<Vec<u8>, (ErrorKind, u64)>;
    let outcome = |e: &Encoded<'_>| -> (Outcome, Outcome) {
        let located = |err: offload_image::Error| (err.kind(), err.offset());
        let decoded = e.decode(&read).map(|mut v| {
            v.truncate(HEAD);
            v
        });
        (
            decoded.map_err(located),
            e.decode_head(HEAD, &read).map_err(located),
        )
    };
    let mut compared = 0;
    let mut refused = 0;
    let mut cubins = 0;
    for e in &entries {
        // As written: the head is the start of the image (a cubin's ELF header).
        let (decoded, checked) = outcome(e);
        let whole = e.decode(&read).unwrap();
        if e.entry_kind == Some(EntryKind::Cubin) {
            assert!(whole.starts_with(b"\x7fELF"));
            cubins += 1;
        }
        assert_eq!(checked.as_ref().unwrap(), &whole[..HEAD]);
        assert_eq!(decoded, checked);
        assert_eq!(e.peek(HEAD, &read).unwrap().unwrap(), &whole[..HEAD]);
        assert_eq!(e.decode_head(whole.len() + 10, &read).unwrap(), whole);
        // Damaged copies.
        let mut copy = e.stream.to_vec();
        let step = (copy.len() / 400).max(1);
        for at in (0..copy.len()).step_by(step) {
            let was = copy[at];
            for value in [0x00, 0xFF, was ^ 0x40] {
                if value == was {
                    continue;
                }
                copy[at] = value;
                let damaged = Encoded {
                    stream: &copy,
                    ..*e
                };
                let (decoded, checked) = outcome(&damaged);
                assert_eq!(
                    decoded, checked,
                    "byte {at} of the stream set to {value:#04x}"
                );
                if let Ok(head) = &decoded {
                    assert_eq!(damaged.peek(HEAD, &read).unwrap().as_ref(), Some(head));
                }
                refused += usize::from(decoded.is_err());
                compared += 1;
            }
            copy[at] = was;
        }
        for cut in [1, 2, 3, 17, copy.len() / 2] {
            let short = Encoded {
                stream: &e.stream[..e.stream.len() - cut],
                ..*e
            };
            let (decoded, checked) = outcome(&short);
            assert!(decoded.is_err(), "cut by {cut}");
            assert_eq!(decoded, checked, "cut by {cut}");
        }
        for size in [e.size - 1, e.size + 1] {
            let (decoded, checked) = outcome(&Encoded { size, ..*e });
            assert!(decoded.is_err(), "declared size {size}");
            assert_eq!(decoded, checked, "declared size {size}");
        }
    }
    // Most damage is refused (an LZ4 block has no checksum, so a changed literal is not).
    assert!(cubins >= 2, "{cubins} LZ4 cubins");
    assert!(
        compared > 1000 && refused > compared / 4,
        "{refused} of {compared}"
    );
}

/// `Image::check` and `Image::peek` (what `select` makes of the image it chose) give an
/// image that identifies as the decoded one and has its size, for every image of every
/// fatbinary here: cubins and PTX, plain, LZ4 and zstd. Where only the first bytes are made
/// (`Checked::Head`: LZ4 cubins whose header tables end at the declared size), they are the
/// decoded image's first bytes; PTX (which loses its trailing NUL) is made whole.
#[test]
fn checked_images_identify_and_measure_as_decoded_ones() {
    use offload_image::{identify, Checked};
    const HEAD: usize = offload_image::stream::IDENTIFY_LEN;
    let read = ReadOptions::default();
    let (mut heads, mut wholes) = (0, 0);
    for entry in std::fs::read_dir(dir().join("files")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "fatbin") {
            continue;
        }
        let data = std::fs::read(&path).unwrap();
        for unit in offload_image::units(&data, &read) {
            let open = unit.unwrap().open(&read).unwrap();
            for image in open.images() {
                let decoded = image.decode(&read).unwrap();
                let decoded = image.with_bytes(&decoded);
                for made in [image.check(HEAD, &read), image.peek(HEAD, &read)] {
                    let made = made.unwrap();
                    let checked = image.with_checked(&made);
                    let what = format!("{} image {}", path.display(), image.index);
                    assert_eq!(checked.size(), decoded.size(), "{what}");
                    assert_eq!(identify(&checked), identify(&decoded), "{what}");
                    match &made {
                        Checked::Head(h) => {
                            assert_eq!(&decoded.bytes[..h.len()], &h[..], "{what}");
                            assert_eq!(image.image_kind, ImageKind::Cubin, "{what}");
                            heads += 1;
                        }
                        Checked::Whole(w) => {
                            assert_eq!(&w[..], decoded.bytes, "{what}");
                            wholes += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(heads >= 4 && wholes >= 4, "{heads} heads, {wholes} whole");
}
