//! `.kpack` archives read by their table of contents (`KpackArchive::parse_toc`,
//! `code_object_read`) give what the archives read whole give: the committed archives
//! and 100 seeded mutants of each (bytes changed in the header, the TOC and the blobs,
//! truncations): the same error (kind and offset), or the same entries and code objects.
//! The fuzz target `kpack` asserts the same on any bytes.

use std::path::PathBuf;

use offload_image::kpack::KpackArchive;
use offload_image::{ErrorKind, ReadOptions};

fn archives() -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/kpack");
    let mut out = Vec::new();
    for dir in ["rocrand/.kpack", "jax/.kpack", "jax/none"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "kpack"))
            .collect();
        files.sort();
        for f in files {
            out.push((f.display().to_string(), std::fs::read(&f).unwrap()));
        }
    }
    assert!(out.len() >= 6, "{}", out.len());
    out
}

fn read_from(data: &[u8], at: u64, buf: &mut [u8]) -> bool {
    let Ok(at) = usize::try_from(at) else {
        return false;
    };
    match at.checked_add(buf.len()).and_then(|end| data.get(at..end)) {
        Some(b) => {
            buf.copy_from_slice(b);
            true
        }
        None => false,
    }
}

/// Reads `data` both ways and compares; returns whether it read (and how many code
/// objects were compared).
fn same_both_ways(data: &[u8], what: &str) -> Option<usize> {
    let options = ReadOptions::default();
    let whole = KpackArchive::parse(data, &options.limits);
    let len = data.len() as u64;
    let mut reads = 0usize;
    let by_toc = KpackArchive::toc_offset_of(data, len).and_then(|toc_at| {
        KpackArchive::parse_toc(
            &data[toc_at as usize..],
            toc_at,
            len,
            &mut |at, buf| {
                reads += 1;
                read_from(data, at, buf)
            },
            &options.limits,
        )
    });
    match (&whole, &by_toc) {
        (Err(a), Err(b)) => {
            assert_eq!(
                (a.kind(), a.offset()),
                (b.kind(), b.offset()),
                "{what}: {a} / {b}"
            );
            None
        }
        (Ok(a), Ok(b)) => {
            assert!(a.entries().eq(b.entries()), "{what}");
            assert_eq!(a.compression(), b.compression(), "{what}");
            assert_eq!(a.gfx_arches(), b.gfx_arches(), "{what}");
            let mut n = 0;
            for e in a.entries() {
                let plain = a.code_object_coded(e, &options).map(|c| c.into_owned());
                let read = b.code_object_read(e, &mut |at, buf| read_from(data, at, buf), &options);
                match (plain, read) {
                    (Ok(x), Ok(y)) => {
                        assert_eq!(x, y, "{what}");
                        n += 1;
                    }
                    (Err((c1, e1)), Err((c2, e2))) => {
                        assert_eq!(c1, c2, "{what}");
                        assert_eq!((e1.kind(), e1.offset()), (e2.kind(), e2.offset()), "{what}");
                    }
                    (a, b) => panic!(
                        "{what}: whole {:?}, by the TOC {:?}",
                        a.map(|v| v.len()),
                        b.map(|v| v.len())
                    ),
                }
            }
            Some(n)
        }
        (a, b) => panic!("{what}: whole {a:?}, by the TOC {b:?}"),
    }
}

#[test]
fn archives_read_by_their_toc_are_the_archives_read_whole() {
    let mut codes = 0;
    for (name, data) in archives() {
        codes += same_both_ways(&data, &name).unwrap_or_else(|| panic!("{name} does not read"));
    }
    assert!(codes >= 6, "{codes}");
    // Seeded mutants (SplitMix64): a byte set to an extreme value, a truncation.
    let mut state = 38u64;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let (mut read, mut refused) = (0, 0);
    for (name, data) in archives() {
        let toc_at = u64::from_le_bytes(data[8..16].try_into().unwrap()) as usize;
        for i in 0..100 {
            let mut m = data.clone();
            let r = next();
            match r % 4 {
                // Header and TOC bytes (where the structure is), blobs sometimes.
                0 => m[(r >> 8) as usize % 16] = [0, 1, 0x7f, 0xff][(r >> 40) as usize % 4],
                1 | 2 => {
                    let at = toc_at + (r >> 8) as usize % (m.len() - toc_at);
                    m[at] = [0, 1, 0x7f, 0x80, 0xc0, 0xcc, 0xcf, 0xff][(r >> 40) as usize % 8];
                }
                _ => {
                    if r & 0x100 == 0 {
                        let at = 16 + (r >> 9) as usize % (m.len() - 16);
                        m[at] ^= 0xff;
                    } else {
                        m.truncate((r >> 9) as usize % m.len());
                    }
                }
            }
            match same_both_ways(&m, &format!("{name} mutant {i}")) {
                Some(_) => read += 1,
                None => refused += 1,
            }
        }
    }
    eprintln!("mutants read: {read}, refused: {refused}");
    assert!(read > 20 && refused > 20, "{read} {refused}");
}

/// A code object larger than the decompressed-size limit is refused before it is read.
#[test]
fn a_code_object_over_the_limit_is_not_read() {
    let (name, data) = archives().into_iter().next().unwrap();
    let mut options = ReadOptions::default();
    let whole = KpackArchive::parse(&data, &options.limits).unwrap();
    let entry = *whole.entries().next().unwrap();
    let (_, size, _) = whole.stored_range(&entry).unwrap();
    options.limits.max_decompressed_size = size - 1;
    let toc_at = whole.toc_offset();
    let archive = KpackArchive::parse_toc(
        &data[toc_at as usize..],
        toc_at,
        data.len() as u64,
        &mut |at, buf| read_from(&data, at, buf),
        &options.limits,
    )
    .unwrap();
    let mut reads = 0;
    let err = archive
        .code_object_read(
            &entry,
            &mut |at, buf| {
                reads += 1;
                read_from(&data, at, buf)
            },
            &options,
        )
        .unwrap_err()
        .1;
    assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{name}: {err}");
    assert_eq!(reads, 0);
    // A TOC that is not the bytes from its offset to the end is refused.
    let short = KpackArchive::parse_toc(
        &data[toc_at as usize..data.len() - 1],
        toc_at,
        data.len() as u64,
        &mut |_, _| false,
        &options.limits,
    )
    .unwrap_err();
    assert_eq!((short.kind(), short.offset()), (ErrorKind::SizeMismatch, 8));
}
