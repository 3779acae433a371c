//! Selection and extraction from compressed bundles in one pass over the decompressed
//! stream (`offload_image::stream`) give exactly what selecting in the fully decompressed
//! bundle gives, with the bytes LLVM's clang-offload-bundler extracts (corpus manifest),
//! and report the same errors.

use crate::common;

use std::collections::BTreeMap;

use offload_image::bundle::BundleTable;
use offload_image::ccob::{CompressedBundle, ContentReader, Decoders, Decompressor, ZlibStream};
use offload_image::stream::{select_in_stream, Kept, StreamSelection};
use offload_image::{
    select, Device, Error, ErrorKind, Image, Limits, Policy, ReadOptions, SelectOptions,
};

const DEVICES: &[&str] = &[
    "gfx906:sramecc+:xnack-",
    "gfx906:sramecc-:xnack-",
    "gfx90a:xnack-",
    "gfx90a:sramecc+:xnack+",
    "gfx90a:sramecc+:xnack-",
    "gfx942:sramecc+:xnack-",
    "gfx1030",
    "gfx1031",
    "gfx1100",
    "gfx803",
    "sm_70",
    "sm_80",
    "sm_90",
];

fn ccob_files() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(common::corpus().join("compressed"))
        .expect("corpus/compressed")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .filter(|n| n.ends_with(".ccob"))
        .map(|n| format!("compressed/{n}"))
        .collect();
    v.sort();
    assert!(
        v.len() >= 5,
        "the corpus has zlib, zstd, v1, v2 and v3 CCOBs"
    );
    v
}

fn devices() -> Vec<Device> {
    DEVICES
        .iter()
        .map(|d| Device::parse(d).expect("device"))
        .collect()
}

/// The compressed bundle at the start of `data` (the corpus CCOB files are one unit).
fn ccob(data: &[u8]) -> CompressedBundle<'_> {
    CompressedBundle::parse(data).expect("CCOB header")
}

/// Kept bytes per device: (entry index, bytes).
type KeptBytes = BTreeMap<usize, (usize, Vec<u8>)>;

/// Runs the streaming selection, collecting the kept bytes per device.
fn stream(
    data: &[u8],
    devices: &[Device],
    options: &SelectOptions,
    read: &ReadOptions,
) -> Result<(StreamSelection, KeptBytes), Error> {
    let c = ccob(data);
    let reader = c.reader(read)?;
    let mut kept = KeptBytes::new();
    let found = select_in_stream(reader, devices, options, &read.limits, true, |k| {
        match k {
            Kept::Start {
                device,
                index,
                size,
            } => {
                kept.insert(device, (index, Vec::with_capacity(size as usize)));
            }
            Kept::Bytes { device, bytes } => kept
                .get_mut(&device)
                .expect("bytes after start")
                .1
                .extend_from_slice(bytes),
        }
        Ok::<(), Error>(())
    })?
    .expect("a binary bundle inside");
    // A hash that differs comes beside the choice (issue 47: the runtimes load such a
    // bundle); the streaming path's error is still that mismatch.
    if let Some(e) = found.mismatch {
        assert!(found.verified && found.chosen.iter().any(Option::is_some));
        return Err(e);
    }
    Ok((found, kept))
}

#[test]
fn streaming_selection_equals_selection_in_the_decompressed_bundle() {
    let devices = devices();
    let manifest = common::manifest();
    let mut compared = 0;
    let mut chosen = 0;
    for file in ccob_files() {
        let data = std::fs::read(common::corpus().join(&file)).expect("corpus file");
        // LLVM's extraction of every entry, by entry ID.
        let llvm: BTreeMap<String, String> = manifest
            .iter()
            .filter(|r| r["file"] == file.as_str() && r["record"] == "entry")
            .map(|r| {
                (
                    r["entry_id"].as_str().expect("id").to_string(),
                    r["sha256"].as_str().expect("sha").to_string(),
                )
            })
            .collect();
        let full_opts = ReadOptions::default();
        let c = ccob(&data);
        let decompressed = c.decompress(&full_opts).expect("decompresses");
        let bundle = offload_image::bundle::Bundle::parse(&decompressed, &Limits::DEFAULT)
            .expect("inner bundle");
        let images: Vec<Image<'_>> = bundle
            .entries()
            .enumerate()
            .map(|(i, e)| Image::from_bundle_entry(i, &e))
            .collect();
        for policy in [Policy::Best, Policy::First, Policy::FirstByClass] {
            for verify in [true, false] {
                let options = SelectOptions {
                    policy,
                    ..SelectOptions::default()
                };
                let read = ReadOptions {
                    verify_hash: verify,
                    ..ReadOptions::default()
                };
                let (found, kept) = stream(&data, &devices, &options, &read).expect("streams");
                assert_eq!(found.verified, verify);
                assert_eq!(found.table.entry_count() as usize, images.len());
                for (d, device) in devices.iter().enumerate() {
                    let whole = select(&images, device, &options);
                    let streamed = found.chosen[d].map(|k| k.index);
                    assert_eq!(
                        streamed,
                        whole.chosen(),
                        "{file}, {}, {policy:?}, verify {verify}",
                        DEVICES[d]
                    );
                    assert_eq!(found.chosen[d], whole.key);
                    compared += 1;
                    if let Some(i) = whole.chosen() {
                        chosen += 1;
                        let (index, bytes) = kept.get(&d).expect("the chosen bytes were kept");
                        assert_eq!(*index, i);
                        assert_eq!(bytes.as_slice(), images[i].bytes);
                        let id = images[i].entry_id.expect("bundle entries have IDs");
                        if let Some(sha) = llvm.get(id) {
                            assert_eq!(&common::sha256(bytes), sha, "{file} {id}: LLVM's bytes");
                        }
                    }
                }
            }
        }
    }
    assert!(
        compared > 300 && chosen > 100,
        "{compared} comparisons, {chosen} choices"
    );
}

#[test]
fn content_reader_yields_the_decompressed_bytes_in_any_piece_size() {
    for file in ccob_files() {
        let data = std::fs::read(common::corpus().join(&file)).expect("corpus file");
        let c = ccob(&data);
        let read = ReadOptions::default();
        let whole = c.decompress(&read).expect("decompresses");
        for piece in [1usize, 7, 4096, 1 << 20] {
            let mut r = c.reader(&read).expect("reader");
            let mut got = Vec::new();
            let mut buf = vec![0u8; piece];
            loop {
                let n = r.read(&mut buf).expect("reads");
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, whole, "{file}, pieces of {piece}");
            assert_eq!(r.remaining(), 0);
            let used = r.finish().expect("verifies");
            if c.total_size().is_some() {
                assert_eq!(used, c.payload().len() as u64, "{file}");
            }
        }
        // `copy` and `skip` hash what they pass over too.
        let mut r = c.reader(&read).expect("reader");
        let mut copied = Vec::new();
        r.copy(100, |b| {
            copied.extend_from_slice(b);
            Ok::<(), Error>(())
        })
        .expect("copies");
        assert_eq!(copied, whole[..100]);
        r.skip(r.remaining()).expect("skips");
        r.finish().expect("verifies after skip");
    }
}

/// The error the whole-bundle path reports for `data`, and the streaming path's.
fn both_errors(data: &[u8], read: &ReadOptions) -> (Option<Error>, Option<Error>) {
    let full = ccob(data).decompress(read).err();
    let streamed = stream(data, &devices(), &SelectOptions::default(), read).err();
    (full, streamed)
}

#[test]
fn errors_match_the_whole_bundle_path() {
    let data = std::fs::read(common::corpus().join("compressed/hip_6arch.v3-zstd.llvm22.ccob"))
        .expect("corpus file");
    let c = ccob(&data);
    let header = c.header_len() as usize;
    let read = ReadOptions::default();

    // A wrong stored hash: found only when verifying, at the hash field.
    let mut bad = data.clone();
    bad[header - 1] ^= 0xFF;
    let (full, streamed) = both_errors(&bad, &read);
    let (full, streamed) = (full.expect("full fails"), streamed.expect("stream fails"));
    assert_eq!(full.kind(), ErrorKind::HashMismatch);
    assert_eq!(
        (streamed.kind(), streamed.offset()),
        (full.kind(), full.offset())
    );
    let off = ReadOptions {
        verify_hash: false,
        ..read
    };
    assert!(stream(&bad, &devices(), &SelectOptions::default(), &off).is_ok());

    // A declared size over the limit: refused before any allocation, at the size field.
    let small = ReadOptions {
        limits: Limits {
            max_decompressed_size: 1000,
            ..Limits::DEFAULT
        },
        ..read
    };
    let (full, streamed) = both_errors(&data, &small);
    let (full, streamed) = (full.expect("full fails"), streamed.expect("stream fails"));
    assert_eq!(full.kind(), ErrorKind::LimitExceeded);
    assert_eq!(
        (streamed.kind(), streamed.offset()),
        (full.kind(), full.offset())
    );

    // A corrupt stream (bytes flipped in the middle of the frame).
    let mut bad = data.clone();
    let mid = header + c.payload().len() / 2;
    for b in &mut bad[mid..mid + 16] {
        *b ^= 0x5A;
    }
    let (full, streamed) = both_errors(&bad, &read);
    let (full, streamed) = (full.expect("full fails"), streamed.expect("stream fails"));
    assert_eq!(streamed.kind(), full.kind(), "{full} / {streamed}");
    assert!(streamed.offset() >= header as u64);

    // Bytes after the compressed stream (v3 total size grown by 3, 3 bytes appended).
    let mut bad = data.clone();
    let total = u64::from_le_bytes(bad[8..16].try_into().unwrap()) + 3;
    bad[8..16].copy_from_slice(&total.to_le_bytes());
    bad.extend_from_slice(&[1, 2, 3]);
    let (full, streamed) = both_errors(&bad, &read);
    let (full, streamed) = (full.expect("full fails"), streamed.expect("stream fails"));
    assert_eq!(full.kind(), ErrorKind::Malformed);
    assert_eq!(
        (streamed.kind(), streamed.offset()),
        (full.kind(), full.offset())
    );
}

/// A zlib CCOB v3 of `content` (the hash is computed, so only the content is hostile).
fn zlib_ccob(content: &[u8]) -> Vec<u8> {
    let payload = miniz_oxide::deflate::compress_to_vec_zlib(content, 6);
    let mut v = Vec::new();
    v.extend_from_slice(b"CCOB");
    v.extend_from_slice(&3u16.to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes());
    v.extend_from_slice(&(32 + payload.len() as u64).to_le_bytes());
    v.extend_from_slice(&(content.len() as u64).to_le_bytes());
    v.extend_from_slice(&offload_image::ccob::truncated_md5(content));
    v.extend_from_slice(&payload);
    v
}

#[test]
fn hostile_tables_inside_compressed_content_are_refused_like_uncompressed_ones() {
    let read = ReadOptions::default();
    // An entry count over the limit.
    let mut content = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    content.extend_from_slice(&u64::MAX.to_le_bytes());
    content.resize(4096, 0);
    let blob = zlib_ccob(&content);
    let c = ccob(&blob);
    let mut r = c.reader(&read).expect("reader");
    let e = BundleTable::read(&mut r, &read.limits).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    assert_eq!((e.offset(), e.decompressed_offset()), (0, Some(24)));

    // An ID length over the limit: refused before it is read.
    let mut content = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    content.extend_from_slice(&1u64.to_le_bytes());
    content.extend_from_slice(&[0u8; 16]);
    content.extend_from_slice(&(1u64 << 40).to_le_bytes());
    content.resize(4096, 0);
    let blob = zlib_ccob(&content);
    let mut r = ccob(&blob).reader(&read).expect("reader");
    let e = BundleTable::read(&mut r, &read.limits).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    assert_eq!(e.decompressed_offset(), Some(48));

    // A payload past the declared content: the same error as for the uncompressed bundle.
    let mut content = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    content.extend_from_slice(&1u64.to_le_bytes());
    let id = b"hipv4-amdgcn-amd-amdhsa--gfx90a";
    content.extend_from_slice(&4096u64.to_le_bytes());
    content.extend_from_slice(&100u64.to_le_bytes());
    content.extend_from_slice(&(id.len() as u64).to_le_bytes());
    content.extend_from_slice(id);
    content.resize(4100, 0);
    let whole = offload_image::bundle::Bundle::parse(&content, &read.limits).unwrap_err();
    let blob = zlib_ccob(&content);
    let mut r = ccob(&blob).reader(&read).expect("reader");
    let e = BundleTable::read(&mut r, &read.limits).unwrap_err();
    assert_eq!(e.kind(), whole.kind());
    assert_eq!(e.decompressed_offset(), Some(whole.offset()));

    // Text bundles are not streamed: the caller decompresses them whole.
    let blob = zlib_ccob(b"; __CLANG_OFFLOAD_BUNDLE____START__ host-x86_64-unknown-linux-gnu\n");
    let r = ccob(&blob).reader(&read).expect("reader");
    let none = select_in_stream(
        r,
        &devices(),
        &SelectOptions::default(),
        &read.limits,
        true,
        |_| Ok::<(), Error>(()),
    )
    .expect("no error");
    assert!(none.is_none());
}

#[test]
fn early_stop_without_verification_reads_only_what_selection_needs() {
    // A zlib stream whose tail is corrupt: without verification the streaming selection
    // never decodes it (it stops after the last image's first bytes), with verification
    // it must.
    let data = std::fs::read(common::corpus().join("compressed/hip_6arch.zlib.ccob"))
        .expect("corpus file");
    let read = ReadOptions::default();
    let whole = ccob(&data).decompress(&read).expect("decompresses");
    let table = offload_image::bundle::Bundle::parse(&whole, &read.limits).expect("bundle");
    let last_head = table
        .entries()
        .map(|e| e.offset + (e.data.len() as u64).min(256))
        .max()
        .unwrap();
    assert!(
        (last_head as usize) < whole.len(),
        "an image ends the bundle"
    );
    // Append junk to the content and recompress: the stream is longer than declared.
    let mut longer = whole.clone();
    longer.extend_from_slice(&[0xAB; 1000]);
    let mut blob = zlib_ccob(&longer);
    blob[16..24].copy_from_slice(&(whole.len() as u64).to_le_bytes());
    blob[24..32].copy_from_slice(&offload_image::ccob::truncated_md5(&whole));
    let gfx1030 = [Device::parse("gfx1030").unwrap()];
    let off = ReadOptions {
        verify_hash: false,
        ..read
    };
    let r = ccob(&blob).reader(&off).expect("reader");
    let found = select_in_stream(
        r,
        &gfx1030,
        &SelectOptions::default(),
        &off.limits,
        false,
        |_| Ok::<(), Error>(()),
    )
    .expect("no verification: stops before the extra bytes")
    .expect("a bundle");
    assert!(found.chosen[0].is_some());
    let r = ccob(&blob).reader(&read).expect("reader");
    let e = select_in_stream(
        r,
        &gfx1030,
        &SelectOptions::default(),
        &read.limits,
        false,
        |_| Ok::<(), Error>(()),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::SizeMismatch);
    assert_eq!(
        ccob(&blob).decompress(&read).unwrap_err().kind(),
        ErrorKind::SizeMismatch
    );
}

#[test]
fn zlib_stream_decodes_incrementally() {
    let content: Vec<u8> = (0..200_000u32)
        .flat_map(|i| (i % 251).to_le_bytes())
        .collect();
    let z = miniz_oxide::deflate::compress_to_vec_zlib(&content, 6);
    let mut d = ZlibStream::new(&z);
    let mut out = Vec::new();
    let mut buf = [0u8; 333];
    loop {
        let n = d.read(&mut buf).expect("inflates");
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert_eq!(out, content);
    assert_eq!(d.consumed(), z.len() as u64);
    // Truncated input.
    let mut d = ZlibStream::new(&z[..z.len() / 2]);
    let e = loop {
        match d.read(&mut buf) {
            Ok(0) => panic!("a truncated stream must not end cleanly"),
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert_eq!(e.kind(), ErrorKind::Truncated);
}

#[test]
fn shared_payloads_are_not_streamed() {
    let read = ReadOptions::default();
    let elf = std::fs::read(common::corpus().join("devobj/saxpy.gfx90a.co")).expect("corpus file");
    let ids = [
        "hipv4-amdgcn-amd-amdhsa--gfx90a",
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
    ];
    let table = 32 + ids.iter().map(|i| 24 + i.len()).sum::<usize>();
    let mut b = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    b.extend_from_slice(&2u64.to_le_bytes());
    for id in ids {
        b.extend_from_slice(&(table as u64).to_le_bytes());
        b.extend_from_slice(&(elf.len() as u64).to_le_bytes());
        b.extend_from_slice(&(id.len() as u64).to_le_bytes());
        b.extend_from_slice(id.as_bytes());
    }
    b.extend_from_slice(&elf);
    let blob = zlib_ccob(&b);
    let r = ccob(&blob).reader(&read).expect("reader");
    let found = select_in_stream(
        r,
        &devices(),
        &SelectOptions::default(),
        &read.limits,
        true,
        |_| Ok::<(), Error>(()),
    )
    .expect("no error");
    assert!(found.is_none());
}

/// `ContentReader::read_to_vec` is `decompress` with any decoder, and the caller's
/// decoders of `ReadOptions::decoders` give what the built-in ones give: same content and
/// images (LLVM's bytes per the manifest are checked through `open` in `tests/suite/corpus.rs`),
/// same errors (wrong hash, truncated stream), and content of the wrong length is refused
/// at the size field.
#[test]
fn caller_decoders_equal_the_builtin_ones() {
    fn stream<'a>(
        c: &CompressedBundle<'a>,
        o: &ReadOptions,
    ) -> Result<Box<dyn Decompressor + Send + 'a>, offload_image::Error> {
        Ok(Box::new(c.decoder(o)?))
    }
    fn short(c: &CompressedBundle<'_>, o: &ReadOptions) -> Result<Vec<u8>, offload_image::Error> {
        let mut v = c
            .reader(&ReadOptions {
                decoders: Decoders::BUILTIN,
                ..*o
            })?
            .read_to_vec()?;
        v.pop();
        Ok(v)
    }
    let read = ReadOptions::default();
    let streaming = ReadOptions {
        decoders: Decoders {
            stream: Some(stream),
            whole: None,
            raw: None,
        },
        ..read
    };
    let shortening = ReadOptions {
        decoders: Decoders {
            stream: None,
            whole: Some(short),
            raw: None,
        },
        ..read
    };
    for name in ccob_files() {
        let data = std::fs::read(common::corpus().join(&name)).unwrap();
        let c = ccob(&data);
        let whole = c.decompress(&read).unwrap();
        let via_reader = ContentReader::new(&c, c.decoder(&read).unwrap(), &read)
            .unwrap()
            .read_to_vec()
            .unwrap();
        assert!(whole == via_reader, "{name}");
        assert!(c.decompress(&streaming).unwrap() == whole, "{name}");
        let units = offload_image::units(&data, &read)
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let unit = &units[0];
        let a = unit.open(&read).unwrap();
        let b = unit.open(&streaming).unwrap();
        let ia: Vec<_> = a.images().map(|i| (i.entry_id, i.bytes.to_vec())).collect();
        let ib: Vec<_> = b.images().map(|i| (i.entry_id, i.bytes.to_vec())).collect();
        assert!(ia == ib && !ia.is_empty(), "{name}");
        // Content of the wrong length is refused, whatever the caller's decoder says.
        let e = unit.open(&shortening).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::SizeMismatch, "{name}");
        assert_eq!(e.offset(), c.size_field(), "{name}");
    }
    let data =
        std::fs::read(common::corpus().join("compressed/hip_6arch.v3-zstd.llvm22.ccob")).unwrap();
    let header = ccob(&data).header_len() as usize;
    let mut bad = data.clone();
    bad[header - 1] ^= 0xFF;
    let c = ccob(&bad);
    let full = c.decompress(&read).unwrap_err();
    let via_reader = ContentReader::new(&c, c.decoder(&read).unwrap(), &read)
        .unwrap()
        .read_to_vec()
        .unwrap_err();
    assert_eq!(full.kind(), ErrorKind::HashMismatch);
    assert_eq!(
        (via_reader.kind(), via_reader.offset()),
        (full.kind(), full.offset())
    );
    // A stream cut short (v1 has no total size, so the header still parses).
    let v1 = std::fs::read(common::corpus().join("compressed/hip_6arch.v1-zstd.ccob")).unwrap();
    let truncated = &v1[..v1.len() - 100];
    let c = ccob(truncated);
    let full = c.decompress(&read).unwrap_err();
    let via_reader = ContentReader::new(&c, c.decoder(&read).unwrap(), &read)
        .unwrap()
        .read_to_vec()
        .unwrap_err();
    assert_eq!(
        (via_reader.kind(), via_reader.offset()),
        (full.kind(), full.offset())
    );
}

/// The root tier's streaming choice (`offload_image::choose_streaming`), walked from the file
/// as a plugin walks it: per device the entry `choose` picks on the opened unit, the bytes
/// LLVM's bundler extracts (manifest sha256), kept once per image; `None` for a unit that is
/// not a compressed bundle; entries the caller declines are chosen but not kept.
#[test]
fn the_root_streaming_choice_equals_choose_on_the_opened_unit() {
    use offload_image::{choose, choose_streaming, choose_streaming_keeping, units};
    let devices = devices();
    let manifest = common::manifest();
    let read = ReadOptions::default();
    let options = SelectOptions::default();
    let mut checked = 0;
    for file in ccob_files() {
        let data = std::fs::read(common::corpus().join(&file)).expect("corpus file");
        let sha_of = |id: &str| {
            manifest
                .iter()
                .find(|r| {
                    r["file"] == file.as_str() && r["record"] == "entry" && r["entry_id"] == id
                })
                .map(|r| r["sha256"].as_str().expect("sha").to_string())
        };
        for unit in units(&data, &read) {
            let unit = unit.expect("unit");
            let found = choose_streaming(&unit, &devices, &options, &read)
                .expect("streams")
                .expect("a compressed bundle streams");
            let open = unit.open(&read).expect("opens");
            let choices = choose(open.images(), &devices, &options);
            let images: Vec<Image<'_>> = open.images().collect();
            let mut distinct: Vec<usize> = found.chosen.iter().flatten().copied().collect();
            distinct.sort();
            distinct.dedup();
            assert_eq!(
                found.kept.len(),
                distinct.len(),
                "{file}: each chosen image kept once"
            );
            for (d, choice) in choices.iter().enumerate() {
                assert_eq!(found.chosen[d], choice.chosen(), "{file} {}", DEVICES[d]);
                match choice.chosen() {
                    Some(i) => {
                        let bytes = found.bytes(d).expect("kept");
                        assert_eq!(bytes, images[i].bytes, "{file} {}", DEVICES[d]);
                        let id = images[i].entry_id.expect("bundle entries have IDs");
                        assert_eq!(found.table.entries().nth(i).map(|e| e.id), Some(id));
                        if let Some(sha) = sha_of(id) {
                            assert_eq!(common::sha256(bytes), sha, "{file} {id}: LLVM's bytes");
                            checked += 1;
                        }
                    }
                    None => assert_eq!(found.bytes(d), None),
                }
            }
            // Declining every entry: the same choice, nothing kept.
            let bare = choose_streaming_keeping(&unit, &devices, &options, &read, |_| false)
                .expect("streams")
                .expect("streamed");
            assert_eq!(bare.chosen, found.chosen);
            assert!(bare.kept.is_empty());
        }
    }
    assert!(
        checked > 20,
        "{checked} images checked against LLVM's bytes"
    );
    // An uncompressed bundle is not streamed.
    let data = std::fs::read(common::corpus().join("bundles/hip_6arch.bundle")).expect("corpus");
    let unit = units(&data, &read).next().expect("a unit").expect("reads");
    assert!(choose_streaming(&unit, &devices, &options, &read)
        .expect("no error")
        .is_none());
}
