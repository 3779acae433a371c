//! Issue 43 in the library (what the C API and the Python module read through): entries
//! that alias one image cost one scan in `validate`, and `CCOB` payloads of several zstd
//! frames, skippable frames, or a zlib stream with bytes after it decode with the built-in
//! decoders as LLVM decodes them (`ZSTD_decompress`, zlib's `uncompress`).

use crate::common;

use offload_image::ccob::CompressedBundle;
use offload_image::validate::{validate_counting, Work};
use offload_image::ReadOptions;

/// A zstd frame of `data` by hand: single segment, content size stated, RLE blocks for
/// runs of one byte and raw blocks for the rest (RFC 8878).
fn zstd_frame(data: &[u8]) -> Vec<u8> {
    let mut out = 0xFD2F_B528u32.to_le_bytes().to_vec();
    out.push(0xE0);
    out.extend((data.len() as u64).to_le_bytes());
    let mut at = 0;
    while at < data.len() {
        let chunk = &data[at..data.len().min(at + (128 << 10))];
        let rle = chunk.iter().all(|&b| b == chunk[0]);
        let last = at + chunk.len() == data.len();
        let header = ((chunk.len() as u32) << 3) | (u32::from(rle) << 1) | u32::from(last);
        out.extend(&header.to_le_bytes()[..3]);
        if rle {
            out.push(chunk[0]);
        } else {
            out.extend(chunk);
        }
        at += chunk.len();
    }
    out
}

fn skippable(n: usize) -> Vec<u8> {
    let mut out = 0x184D_2A5Fu32.to_le_bytes().to_vec();
    out.extend((n as u32).to_le_bytes());
    out.extend(std::iter::repeat_n(0x5Au8, n));
    out
}

/// A v3 `CCOB` header around `payload` (the hash is not checked here).
fn ccob(content: &[u8], method: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = b"CCOB".to_vec();
    out.extend(3u16.to_le_bytes());
    out.extend(method.to_le_bytes());
    out.extend((32 + payload.len() as u64).to_le_bytes());
    out.extend((content.len() as u64).to_le_bytes());
    out.extend([0u8; 8]);
    out.extend(payload);
    out
}

/// Every shape decodes to the bundle with the built-in decoders, whole and streamed; a
/// frame whose content overruns the declared size, a truncated skippable frame and bytes
/// that are no frame are errors of the documented kinds.
#[test]
fn multi_frame_payloads_decode_as_llvm_decodes_them() {
    let bundle = common::read_corpus("bundles/hip_3field.bundle");
    let options = ReadOptions {
        verify_hash: false,
        ..ReadOptions::default()
    };
    let half = bundle.len() / 3;
    let zlib = miniz_oxide::deflate::compress_to_vec_zlib(&bundle, 6);
    let shapes: Vec<(&str, u16, Vec<u8>)> = vec![
        (
            "three frames",
            1,
            [
                zstd_frame(&bundle[..half]),
                zstd_frame(&bundle[half..2 * half]),
                zstd_frame(&bundle[2 * half..]),
            ]
            .concat(),
        ),
        (
            "skippable around and between",
            1,
            [
                skippable(0),
                zstd_frame(&bundle[..half]),
                skippable(5),
                zstd_frame(&bundle[half..]),
                skippable(3),
            ]
            .concat(),
        ),
        (
            "zlib with bytes after it",
            0,
            [zlib.clone(), b"trailing".to_vec()].concat(),
        ),
    ];
    for (name, method, payload) in &shapes {
        let blob = ccob(&bundle, *method, payload);
        let c = CompressedBundle::parse(&blob).unwrap();
        assert_eq!(c.decompress(&options).unwrap(), bundle, "{name}: whole");
        let streamed = c.reader(&options).unwrap().read_to_vec().unwrap();
        assert_eq!(streamed, bundle, "{name}: streamed");
    }
    use offload_image::ErrorKind;
    let bad: Vec<(&str, Vec<u8>, ErrorKind)> = vec![
        (
            "a frame past the declared size",
            [zstd_frame(&bundle), zstd_frame(b"x")].concat(),
            ErrorKind::SizeMismatch,
        ),
        (
            "a truncated skippable frame",
            [zstd_frame(&bundle), skippable(16)[..12].to_vec()].concat(),
            ErrorKind::Truncated,
        ),
        (
            "bytes that are no frame",
            [zstd_frame(&bundle), b"JUNKJUNKJUNK".to_vec()].concat(),
            ErrorKind::Malformed,
        ),
    ];
    for (name, payload, kind) in bad {
        let blob = ccob(&bundle, 1, &payload);
        let c = CompressedBundle::parse(&blob).unwrap();
        let e = c.decompress(&options).unwrap_err();
        assert_eq!(e.kind(), kind, "{name}: {e}");
    }
}

/// `validate` of an OffloadBinary whose 2,048 entries name one 128 KiB image scans it
/// once: 128 KiB, one range.
#[test]
fn validate_scans_an_aliased_image_once() {
    let image = vec![0x41u8; 128 << 10];
    let n = 2048usize;
    let strtab = b"\0triple\0amdgcn-amd-amdhsa\0arch\0gfx906\0";
    let records_at = 32 + 40 * n;
    let strtab_at = records_at + 48 * n;
    let image_at = (strtab_at + strtab.len()).next_multiple_of(8);
    let size = (image_at + image.len()).next_multiple_of(8);
    let mut ob = b"\x10\xff\x10\xad".to_vec();
    ob.extend(2u32.to_le_bytes());
    for w in [size, 32, n] {
        ob.extend((w as u64).to_le_bytes());
    }
    for i in 0..n {
        ob.extend([1, 0, 4, 0, 0, 0, 0, 0]);
        for w in [records_at + 48 * i, 2, image_at, image.len()] {
            ob.extend((w as u64).to_le_bytes());
        }
    }
    for _ in 0..n {
        for w in [
            strtab_at + 1,
            strtab_at + 8,
            17,
            strtab_at + 26,
            strtab_at + 31,
            6,
        ] {
            ob.extend((w as u64).to_le_bytes());
        }
    }
    ob.extend(strtab);
    ob.resize(image_at, 0);
    ob.extend(&image);
    ob.resize(size, 0);
    let mut work = Work::default();
    let findings = validate_counting(&ob, &ReadOptions::default(), &Default::default(), &mut work);
    // Each entry still gets its finding (the bytes are no code object).
    let not_co = findings
        .iter()
        .filter(|f| f.code.name() == "not-code-object")
        .count();
    assert_eq!(not_co, n, "{findings:?}");
    assert_eq!(
        work,
        Work {
            bytes_scanned: 128 << 10,
            ranges_scanned: 1
        }
    );
}
