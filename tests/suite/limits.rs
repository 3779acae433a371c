//! Resource limits: decompression bombs, huge counts, long IDs, deep nesting and inputs
//! built to make validation quadratic are refused with the documented error kind, at the
//! header field that caused it (`FORMATS.md` offsets), before the work or the allocation.
//! `tests/suite/peak_memory.rs` measures the memory the same refusals take.

use crate::common;

use common::craft::*;
use offload_image::ccob::CompressedBundle;
use offload_image::offload_binary::{OffloadBinaries, OffloadBinary};
use offload_image::{bundle::Bundle, text::TextBundle};
use offload_image::{for_each_unit, Error, ErrorKind, Limits, ReadOptions};

/// The `list` path: walk, open, images. Returns the number of images.
fn list(data: &[u8], options: &ReadOptions) -> Result<usize, Error> {
    let mut n = 0;
    for_each_unit(data, options, |unit| {
        let open = unit.open(options)?;
        n += open.images().count();
        Ok(())
    })?;
    Ok(n)
}

fn kind_at(r: Result<impl Sized, Error>) -> (ErrorKind, u64) {
    match r {
        Ok(_) => panic!("accepted"),
        Err(e) => (e.kind(), e.offset()),
    }
}

fn with_limits(limits: Limits) -> ReadOptions {
    ReadOptions {
        limits,
        ..ReadOptions::default()
    }
}

const TB: u64 = 1 << 40;

#[test]
fn ccob_claiming_a_terabyte_is_refused_at_its_size_field() {
    let payload = zstd_raw_blocks(250); // 1006 bytes
    let options = ReadOptions::default();
    // The uncompressed_size field: v1 @ 8, v2 @ 12, v3 @ 16 (FORMATS.md §5.1).
    for (version, claim, field) in [
        (1u16, u64::from(u32::MAX), 8),
        (2, u64::from(u32::MAX), 12),
        (3, TB, 16),
    ] {
        let blob = ccob_raw(version, 1, claim, [0; 8], &payload);
        assert!(blob.len() < 1100);
        let c = CompressedBundle::parse(&blob).unwrap();
        assert_eq!(c.uncompressed_size(), claim);
        assert_eq!(
            kind_at(c.decompress(&options)),
            (ErrorKind::LimitExceeded, field),
            "v{version}"
        );
        // The same through the container walk, inside a host object's .hip_fatbin.
        let host = host_with_fatbin(&blob);
        let at = host.windows(4).position(|w| w == b"CCOB").unwrap() as u64;
        assert_eq!(
            kind_at(list(&host, &options)),
            (ErrorKind::LimitExceeded, at + field)
        );
    }
    // Without a limit, the claim is still more than 1006 bytes of zstd can produce.
    let blob = ccob_raw(3, 1, TB, [0; 8], &payload);
    let c = CompressedBundle::parse(&blob).unwrap();
    assert_eq!(
        kind_at(c.decompress(&with_limits(Limits::UNLIMITED))),
        (ErrorKind::SizeMismatch, 16)
    );
}

#[test]
fn short_stream_claiming_a_large_size_is_refused_when_it_ends() {
    // 4000 one-byte raw blocks (16 KB of payload, 4000 bytes of output) claiming 300 MiB:
    // within the default limit and within what 16 KB of zstd could produce.
    let payload = zstd_raw_blocks(4000);
    let blob = ccob_raw(3, 1, 300 << 20, [0; 8], &payload);
    let c = CompressedBundle::parse(&blob).unwrap();
    let e = c.decompress(&ReadOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::SizeMismatch);
    assert_eq!(
        e.what(),
        "compressed stream is shorter than the declared decompressed size"
    );
    assert_eq!(e.offset(), 32 + payload.len() as u64);
}

#[test]
fn zstd_bomb_stops_at_the_declared_size() {
    // 1000 RLE blocks of 128 KiB: 4006 bytes that expand to 125 MiB.
    let bomb = zstd_rle_bomb(1000, 128 << 10, 0xAA);
    assert!(bomb.len() < 4100);
    for version in [1u16, 2, 3] {
        let blob = ccob_raw(version, 1, 1024, [0; 8], &bomb);
        let c = CompressedBundle::parse(&blob).unwrap();
        let e = c.decompress(&ReadOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::SizeMismatch, "v{version}");
        assert_eq!(
            e.what(),
            "compressed stream is longer than the declared decompressed size"
        );
    }
    // Declared honestly, it is refused by a caller's 16 MiB limit before decoding.
    let honest = 1000 * (128u64 << 10);
    let blob = ccob_raw(3, 1, honest, [0; 8], &bomb);
    let c = CompressedBundle::parse(&blob).unwrap();
    let small = with_limits(Limits {
        max_decompressed_size: 16 << 20,
        ..Limits::DEFAULT
    });
    assert_eq!(
        kind_at(c.decompress(&small)),
        (ErrorKind::LimitExceeded, 16)
    );
    // Over the default 1 GiB limit: 9000 blocks (36 KB) expand to 1.1 GiB.
    let big = zstd_rle_bomb(9000, 128 << 10, 0);
    let blob = ccob_raw(3, 1, 9000 * (128u64 << 10), [0; 8], &big);
    let c = CompressedBundle::parse(&blob).unwrap();
    assert_eq!(
        kind_at(c.decompress(&ReadOptions::default())),
        (ErrorKind::LimitExceeded, 16)
    );
}

#[test]
fn zlib_bomb_stops_at_the_declared_size() {
    // 13 bits per 258 bytes: 8 KB of stream that inflate to 1.3 MB of zeros.
    let bomb = zlib_match_bomb(5000);
    let real = 1 + 258 * 5000u64;
    // The stream itself is valid: declared exactly, it decompresses to zeros.
    let blob = ccob_raw(
        2,
        0,
        real,
        offload_image::ccob::truncated_md5(&vec![0; real as usize]),
        &bomb,
    );
    let out = CompressedBundle::parse(&blob)
        .unwrap()
        .decompress(&ReadOptions::default())
        .unwrap();
    assert_eq!(out.len() as u64, real);
    assert!(out.iter().all(|&b| b == 0));
    for version in [1u16, 2, 3] {
        let blob = ccob_raw(version, 0, 1024, [0; 8], &bomb);
        let e = CompressedBundle::parse(&blob)
            .unwrap()
            .decompress(&ReadOptions::default())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::SizeMismatch, "v{version}");
        assert_eq!(
            e.what(),
            "compressed stream is longer than the declared decompressed size"
        );
    }
}

#[test]
fn outputs_larger_than_the_first_chunk_decompress_exactly() {
    // The output buffer grows as the stream produces data: check contents across growth.
    let mut image = Vec::new();
    let mut rng = Rng::new(7);
    while image.len() < 300_000 {
        let word = rng.next_u64() % 64; // compressible but not trivial
        image.extend_from_slice(&word.to_le_bytes());
    }
    let content = bundle(
        &[
            ("host-x86_64-unknown-linux-gnu-", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", &image),
        ],
        4096,
    );
    for version in [1u16, 2, 3] {
        for method in [0u16, 1] {
            let blob = ccob(version, method, &content);
            let c = CompressedBundle::parse(&blob).unwrap();
            let out = c.decompress(&ReadOptions::default()).unwrap();
            assert!(out == content, "v{version} method {method}");
            let mut images = Vec::new();
            for_each_unit(&blob, &ReadOptions::default(), |u| {
                let open = u.open(&ReadOptions::default())?;
                images.extend(open.images().map(|i| i.bytes.to_vec()));
                Ok(())
            })
            .unwrap();
            assert_eq!(images, vec![Vec::new(), image.clone()]);
        }
    }
    // A compressed OffloadBinary of the same image, both codecs.
    let plain = offload_binary_for(3, "gfx90a", &image);
    for method in [0u16, 1] {
        let packed = compress_offload_binary(&plain, method);
        let b = OffloadBinary::parse(&packed, &Limits::DEFAULT).unwrap();
        assert!(b.is_compressed());
        let inflated = b.inflate(&ReadOptions::default()).unwrap();
        assert!(inflated == plain, "method {method}");
    }
}

#[test]
fn bundle_entry_counts_and_id_lengths_are_limited() {
    let mut b = hip_bundle();
    b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(
        kind_at(Bundle::parse(&b, &Limits::DEFAULT)),
        (ErrorKind::LimitExceeded, 24)
    );
    assert_eq!(
        kind_at(list(&b, &ReadOptions::default())),
        (ErrorKind::LimitExceeded, 24)
    );
    // Without a limit, the count is bounded by the data: the table runs out.
    assert_eq!(
        kind_at(Bundle::parse(&b, &Limits::UNLIMITED)).0,
        ErrorKind::Truncated
    );
    // The ID length field of the first descriptor (32 + 16).
    let mut b = hip_bundle();
    b[48..56].copy_from_slice(&(1u64 << 63).to_le_bytes());
    assert_eq!(
        kind_at(Bundle::parse(&b, &Limits::DEFAULT)),
        (ErrorKind::LimitExceeded, 48)
    );
    assert_eq!(
        kind_at(Bundle::parse(&b, &Limits::UNLIMITED)).0,
        ErrorKind::Truncated
    );
    // A caller's tighter limits.
    let tight = Limits {
        max_entries: 2,
        max_id_len: 30,
        ..Limits::DEFAULT
    };
    let b = hip_bundle();
    assert_eq!(
        kind_at(Bundle::parse(&b, &tight)),
        (ErrorKind::LimitExceeded, 24)
    );
    let tight = Limits {
        max_id_len: 30,
        ..Limits::DEFAULT
    };
    // The second ID is 31 bytes long; its descriptor is at 32 + 24 + 30.
    assert_eq!(
        kind_at(Bundle::parse(&b, &tight)),
        (ErrorKind::LimitExceeded, 32 + 24 + 30 + 16)
    );
}

#[test]
fn text_bundle_limits() {
    let entry = |id: &str| {
        format!("\n; __CLANG_OFFLOAD_BUNDLE____START__ {id}\nx\n; __CLANG_OFFLOAD_BUNDLE____END__ {id}\n")
    };
    let text = [
        entry("host-x86_64-unknown-linux-gnu-"),
        entry("openmp-amdgcn-amd-amdhsa--gfx90a"),
        entry("openmp-amdgcn-amd-amdhsa--gfx906"),
    ]
    .concat();
    assert_eq!(
        TextBundle::parse(text.as_bytes(), &Limits::DEFAULT)
            .unwrap()
            .entry_count(),
        3
    );
    let tight = Limits {
        max_entries: 2,
        ..Limits::DEFAULT
    };
    let second_end = text.len() - entry("openmp-amdgcn-amd-amdhsa--gfx906").len();
    assert_eq!(
        kind_at(TextBundle::parse(text.as_bytes(), &tight)),
        (ErrorKind::LimitExceeded, second_end as u64)
    );
    let long = entry(&format!(
        "openmp-amdgcn-amd-amdhsa--gfx90a{}",
        ":x".repeat(3000)
    ));
    assert_eq!(
        kind_at(TextBundle::parse(long.as_bytes(), &Limits::DEFAULT)),
        (ErrorKind::LimitExceeded, 37)
    );
}

#[test]
fn offload_binary_counts_are_limited() {
    let ob = offload_binary_for(2, "gfx90a", b"\x7fELF image");
    // entries_count (header word 3, @ 24) = 2^63.
    let mut b = ob.clone();
    b[24..32].copy_from_slice(&(1u64 << 63).to_le_bytes());
    assert_eq!(
        kind_at(OffloadBinary::parse(&b, &Limits::DEFAULT)),
        (ErrorKind::LimitExceeded, 24)
    );
    assert_eq!(
        kind_at(list(&b, &ReadOptions::default())),
        (ErrorKind::LimitExceeded, 24)
    );
    assert_eq!(
        kind_at(OffloadBinary::parse(&b, &Limits::UNLIMITED)),
        (ErrorKind::OutOfBounds, 24)
    );
    // num_strings of entry 0 (entry at 32, field @ +16) = 2^63, and 2^64 - 1.
    for n in [1u64 << 63, u64::MAX] {
        let mut b = ob.clone();
        b[48..56].copy_from_slice(&n.to_le_bytes());
        assert_eq!(
            kind_at(OffloadBinary::parse(&b, &Limits::DEFAULT)),
            (ErrorKind::LimitExceeded, 48)
        );
        assert_eq!(
            kind_at(OffloadBinary::parse(&b, &Limits::UNLIMITED)),
            (ErrorKind::OutOfBounds, 48)
        );
    }
    // A compressed binary claiming to inflate to 1 TB.
    let packed = compressed_offload_binary_raw(&zstd_raw_blocks(250), TB);
    let b = OffloadBinary::parse(&packed, &Limits::DEFAULT).unwrap();
    assert_eq!(
        kind_at(b.inflate(&ReadOptions::default())),
        (ErrorKind::LimitExceeded, 32)
    );
    assert_eq!(
        kind_at(list(&packed, &ReadOptions::default())),
        (ErrorKind::LimitExceeded, 32)
    );
}

#[test]
fn compressed_offload_binaries_share_one_decompression_budget() {
    // Three compressed binaries of 400 KB each, back to back in one unit: each fits a 1 MiB
    // limit, together they do not.
    let image = vec![0x5Au8; 400_000];
    let one = compress_offload_binary(&offload_binary_for(3, "gfx90a", &image), 1);
    let seq = [one.clone(), one.clone(), one.clone()].concat();
    let limit = with_limits(Limits {
        max_decompressed_size: 1 << 20,
        ..Limits::DEFAULT
    });
    assert_eq!(list(&one, &limit).unwrap(), 1);
    assert_eq!(list(&seq[..2 * one.len()], &limit).unwrap(), 2);
    assert_eq!(
        kind_at(list(&seq, &limit)),
        (ErrorKind::LimitExceeded, 2 * one.len() as u64 + 32)
    );
    assert_eq!(list(&seq, &ReadOptions::default()).unwrap(), 3);
}

#[test]
fn offload_binary_string_work_is_linear() {
    // 2000 entries whose string records all point at one table: refused, instead of
    // validating 2000 x 2000 records.
    let entries: Vec<ObEntry<'_>> = (0..2000)
        .map(|_| ObEntry {
            image_kind: 1,
            offload_kind: 4,
            strings: vec![("triple", b"amdgcn-amd-amdhsa".as_slice())],
            image: b"",
        })
        .collect();
    let mut b = offload_binary(2, &entries);
    assert_eq!(
        OffloadBinary::parse(&b, &Limits::DEFAULT)
            .unwrap()
            .entry_count(),
        2000
    );
    let first_records = u64::from_le_bytes(b[40..48].try_into().unwrap());
    let records_len = 24 * 2000;
    for i in 0..2000usize {
        let at = 32 + 40 * i;
        b[at + 8..at + 16].copy_from_slice(&first_records.to_le_bytes());
        b[at + 16..at + 24].copy_from_slice(&2000u64.to_le_bytes());
    }
    let size = b.len() as u64;
    // Entry i adds 2000 records; the sum passes size / 24 at the first i with
    // (i + 1) * 2000 * 24 > size.
    let first_bad = (size / (2000 * 24)) as usize;
    assert!(first_records + records_len <= size);
    assert_eq!(
        kind_at(OffloadBinary::parse(&b, &Limits::DEFAULT)),
        (ErrorKind::Malformed, 32 + 40 * first_bad as u64)
    );
    // A v1 string without a NUL for longer than the ID limit: the scan stops at the limit.
    let mut v1 = offload_binary_for(1, "gfx90a", b"image");
    let key_at = u64::from_le_bytes(v1[32 + 8..32 + 16].try_into().unwrap()) as usize;
    let key_offset = u64::from_le_bytes(v1[key_at..key_at + 8].try_into().unwrap()) as usize;
    // Point the first key at a 5000-byte run without NUL appended to the binary.
    let run_at = v1.len();
    v1.extend(std::iter::repeat_n(b'k', 5000));
    v1.push(0);
    v1.resize(v1.len().div_ceil(8) * 8, 0);
    let size = v1.len() as u64;
    v1[8..16].copy_from_slice(&size.to_le_bytes());
    v1[key_at..key_at + 8].copy_from_slice(&(run_at as u64).to_le_bytes());
    assert_ne!(key_offset, run_at);
    assert_eq!(
        kind_at(OffloadBinary::parse(&v1, &Limits::DEFAULT)),
        (ErrorKind::LimitExceeded, key_at as u64)
    );
    let roomy = Limits {
        max_id_len: 8192,
        ..Limits::DEFAULT
    };
    let b = OffloadBinary::parse(&v1, &roomy).unwrap();
    let e = b.entries().next().unwrap();
    assert_eq!(e.strings.iter().next().unwrap().0.len(), 5000);
}

#[test]
fn nesting_is_limited() {
    let payload = hip_bundle();
    let mut data = payload.clone();
    for depth in 1..=10 {
        data = ar(&[(&format!("level{depth}.a"), &data)]);
        let r = list(&data, &ReadOptions::default());
        if depth <= Limits::DEFAULT.max_depth {
            assert_eq!(r.unwrap(), 3, "depth {depth}");
        } else {
            assert_eq!(kind_at(r).0, ErrorKind::LimitExceeded, "depth {depth}");
        }
    }
    let shallow = with_limits(Limits {
        max_depth: 2,
        ..Limits::DEFAULT
    });
    let two = ar(&[("b.a", &ar(&[("c.o", &host_with_fatbin(&payload))]))]);
    assert_eq!(kind_at(list(&two, &shallow)).0, ErrorKind::LimitExceeded);
    assert_eq!(
        list(
            &two,
            &with_limits(Limits {
                max_depth: 3,
                ..Limits::DEFAULT
            })
        )
        .unwrap(),
        3
    );
}

#[test]
fn containers_per_section_are_limited() {
    let one = hip_bundle();
    let fatbin: Vec<u8> = (0..5).flat_map(|_| one.clone()).collect();
    let host = host_with_fatbin(&fatbin);
    assert_eq!(list(&host, &ReadOptions::default()).unwrap(), 15);
    let four = with_limits(Limits {
        max_entries: 4,
        ..Limits::DEFAULT
    });
    let fatbin_at = host
        .windows(24)
        .position(|w| w == b"__CLANG_OFFLOAD_BUNDLE__")
        .unwrap();
    assert_eq!(
        kind_at(list(&host, &four)),
        (ErrorKind::LimitExceeded, (fatbin_at + 4 * one.len()) as u64)
    );
    let seq: Vec<u8> = (0..5)
        .flat_map(|_| offload_binary_for(2, "gfx90a", b"img"))
        .collect();
    assert_eq!(
        OffloadBinaries::parse(&seq, &Limits::DEFAULT)
            .unwrap()
            .count(),
        5
    );
    assert_eq!(
        kind_at(OffloadBinaries::parse(&seq, &four.limits)).0,
        ErrorKind::LimitExceeded
    );
}

#[test]
fn overlapping_offload_sections_are_refused() {
    let b = hip_bundle();
    let host = host_with_fatbin(&b);
    assert_eq!(list(&host, &ReadOptions::default()).unwrap(), 3);
    // A `.data` section holding the bundle, then 200 `.hip_fatbin` headers all covering it.
    let at = 64u64; // elf64 places the first section's data right after the ELF header
    let sections: Vec<Section<'_>> = [Section {
        name: ".data",
        sh_type: PROGBITS,
        data: &b,
        range: None,
    }]
    .into_iter()
    .chain((0..200).map(|_| Section {
        name: ".hip_fatbin",
        sh_type: PROGBITS,
        data: b"",
        range: Some((at, b.len() as u64)),
    }))
    .collect();
    let elf = elf64(&sections);
    assert_eq!(&elf[64..64 + 24], b"__CLANG_OFFLOAD_BUNDLE__");
    // Two of them are fine (the file is larger than two copies of the bundle).
    let two = elf64(&sections[..3]);
    assert_eq!(list(&two, &ReadOptions::default()).unwrap(), 6);
    let e = list(&elf, &ReadOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadContainer);
    assert_eq!(
        e.what(),
        "offload sections overlap (together larger than the file)"
    );
}
