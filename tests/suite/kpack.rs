//! The kpack reader and the loader model against real split libraries
//! (`tests/data/kpack`, made by rocm-kpack's own splitter; see its PROVENANCE.md):
//!
//! * every code object read from the committed archives has the sha256 that
//!   `clang-offload-bundler` gave for the same architecture and wrapper of the unsplit
//!   original (`expected.json`), and, with the external tests on, the one this crate reads
//!   from Debian's unsplit librocrand;
//! * for every case of `oracle.json` (rocm-kpack's C loader run through
//!   `oracle/kpack_probe.cpp`), the candidate paths, the archive that opened or not, the
//!   archive and target matched and the answer (sha256, or the kpack error code) are the
//!   loader's;
//! * malformed archives, ref records and wrappers give the expected kind at the expected
//!   offset.

use crate::common;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use offload_image::kpack::{
    candidate_paths, find_entry, Compression, HipkWrapper, KpackArchive, KpackRef, LoaderEnv,
    LoaderError, PathOrigin, HIPK_MAGIC, REF_READ_LIMIT,
};
use offload_image::{ErrorKind, Limits, ReadOptions};
use serde_json::Value;

fn data_dir() -> PathBuf {
    common::root().join("tests/data/kpack")
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(data_dir().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn json(rel: &str) -> Value {
    serde_json::from_slice(&read(rel)).unwrap()
}

#[test]
fn archives_hold_the_originals_code_objects() {
    let expected = json("expected.json");
    let options = ReadOptions::default();
    let mut checked = 0;
    for want in expected["archives"].as_array().unwrap() {
        let file = want["file"].as_str().unwrap();
        let data = read(file);
        assert_eq!(
            common::sha256(&data),
            want["sha256"].as_str().unwrap(),
            "{file}"
        );
        let archive = KpackArchive::parse(&data, &Limits::DEFAULT).unwrap();
        assert_eq!(archive.toc_offset(), want["toc_offset"].as_u64().unwrap());
        assert_eq!(
            archive.compression_scheme(),
            want["compression_scheme"].as_str()
        );
        let scheme = match want["compression_scheme"].as_str().unwrap() {
            "none" => Compression::None,
            "zstd-per-kernel" => Compression::ZstdPerKernel,
            other => panic!("{other}"),
        };
        assert_eq!(archive.compression(), scheme);
        let arches: Vec<&str> = want["gfx_arches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(archive.gfx_arches(), arches.as_slice());
        assert_eq!(archive.group_name(), want["group_name"].as_str());
        assert_eq!(archive.format_version(), Some(1));
        let entries: Vec<_> = archive.entries().collect();
        let wanted = want["entries"].as_array().unwrap();
        assert_eq!(entries.len(), wanted.len(), "{file}");
        for (entry, w) in entries.iter().zip(wanted) {
            assert_eq!(entry.binary_key, w["binary_key"].as_str().unwrap());
            assert_eq!(entry.arch, w["arch"].as_str().unwrap());
            assert_eq!(u64::from(entry.ordinal), w["ordinal"].as_u64().unwrap());
            assert_eq!(entry.original_size, w["original_size"].as_u64().unwrap());
            assert_eq!(entry.kind, Some("hsaco"));
            assert_eq!(archive.entry(entry.binary_key, entry.arch), Some(*entry));
            let code = archive.code_object(entry, &options).unwrap();
            match (&code, scheme) {
                (Cow::Borrowed(_), Compression::None)
                | (Cow::Owned(_), Compression::ZstdPerKernel) => {}
                _ => panic!("{file}: a plain blob is borrowed, a zstd frame decoded"),
            }
            assert_eq!(code.len() as u64, entry.original_size);
            let sha = common::sha256(&code);
            assert_eq!(
                sha,
                w["sha256"].as_str().unwrap(),
                "{file} {}",
                entry.binary_key
            );
            assert_eq!(
                sha,
                w["original_sha256"].as_str().unwrap(),
                "{file} {}",
                entry.binary_key
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3 + 4 * 4 + 8);
}

/// With the external tests on: the code objects of the committed librocrand archives are
/// the images this crate reads from the unsplit library.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs librocrand.so.1.1 (scripts/fetch-rocm-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn archives_match_the_unsplit_librocrand() {
    if !common::external("librocrand.so.1.1 (scripts/fetch-rocm-libs.sh)") {
        return;
    }
    let original = std::fs::read(common::external_lib("librocrand.so.1.1")).unwrap();
    let expected = json("expected.json");
    let host = &expected["hosts"]["rocrand"];
    assert_eq!(
        common::sha256(&original),
        host["original_sha256"].as_str().unwrap()
    );
    let options = ReadOptions::default();
    let mut images = BTreeMap::new();
    for unit in offload_image::units(&original, &options) {
        let unit = unit.unwrap();
        let open = unit.open(&options).unwrap();
        for image in open.images() {
            if let Some(id) = image.entry_id {
                if let Some((_, arch)) = id.rsplit_once("--") {
                    let bytes = image.decode(&options).unwrap();
                    images.insert(arch.to_string(), common::sha256(&bytes));
                }
            }
        }
    }
    let mut compared = 0;
    for want in expected["archives"].as_array().unwrap() {
        let file = want["file"].as_str().unwrap();
        if !file.starts_with("rocrand/") {
            continue;
        }
        let data = read(file);
        let archive = KpackArchive::parse(&data, &Limits::DEFAULT).unwrap();
        for entry in archive.entries() {
            let code = archive.code_object(entry, &options).unwrap();
            assert_eq!(
                Some(&common::sha256(&code)),
                images.get(entry.arch),
                "{file}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 3);
}

#[test]
fn ref_records_and_wrappers_of_the_split_libraries() {
    let r = read("rocrand/ref.msgpack");
    let rocrand = KpackRef::parse(&r).unwrap();
    assert_eq!(
        rocrand.kernel_name,
        "math-libs/rocRAND/stage/lib/librocrand.so.1.1"
    );
    assert_eq!(rocrand.search_paths, ["../.kpack/rand_lib_@GFXARCH@.kpack"]);
    assert_eq!(rocrand.size, 116);
    assert_eq!(
        rocrand.lookup_key(0),
        "math-libs/rocRAND/stage/lib/librocrand.so.1.1#0"
    );
    // What follows the record is ignored, as the loader parses one value.
    let mut longer = r.clone();
    longer.extend_from_slice(&[0xc1; 100]);
    assert_eq!(KpackRef::parse(&longer).unwrap(), rocrand);

    let j = read("jax/ref.msgpack");
    let jax = KpackRef::parse(&j).unwrap();
    assert_eq!(jax.kernel_name, "jax_plugins/xla_rocm7/xla_rocm_plugin.so");
    assert_eq!(jax.search_paths, [".kpack/jax_lib_@GFXARCH@.kpack"]);
    assert_eq!(jax.size, j.len());

    // The one name of the HIPK wrapper magic spells "HIPK" in the file (KPACK.md §3).
    assert_eq!(&HIPK_MAGIC.to_le_bytes(), b"HIPK");
    for (file, count) in [("rocrand/wrappers.bin", 1u32), ("jax/wrappers.bin", 45)] {
        let w = read(file);
        assert_eq!(w.len() as u32, count * 24);
        for i in 0..count {
            let wrapper = HipkWrapper::read(&w, u64::from(i) * 24).unwrap();
            assert_eq!(
                (wrapper.version, wrapper.ptr),
                (1, 0),
                "{file}: the ELF pass zeroes ptr"
            );
            assert_eq!(wrapper.co_index(), i, "{file}");
        }
    }
}

/// "$ROOT" in the oracle's paths stands for the case's tree; here it is `/ROOT`.
fn rooted(s: &str) -> String {
    s.replace("$ROOT", "/ROOT")
}

/// The bytes of a tree file of a case: a committed file, patched.
fn case_file(spec: &Value) -> Vec<u8> {
    let mut data = read(spec["from"].as_str().unwrap());
    for patch in spec["patch"].as_array().unwrap() {
        let at = patch[0].as_u64().unwrap() as usize;
        let hex = patch[1].as_str().unwrap();
        for (i, b) in (0..hex.len()).step_by(2).enumerate() {
            data[at + i] = u8::from_str_radix(&hex[b..b + 2], 16).unwrap();
        }
    }
    data
}

#[test]
fn loader_model_answers_as_rocm_kpacks_loader() {
    let oracle = json("oracle.json");
    let cases = oracle["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 30);
    let options = ReadOptions::default();
    let mut codes = BTreeMap::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let host = case["host"].as_str().unwrap();
        let ref_bytes = read(&format!("{host}/ref.msgpack"));
        let r = KpackRef::parse(&ref_bytes).unwrap();
        let wrappers = read(&format!("{host}/wrappers.bin"));
        let wrapper = case["wrapper"].as_u64().unwrap();
        let co_index = HipkWrapper::read(&wrappers, wrapper * 24)
            .unwrap()
            .co_index();
        let lib = rooted(case["lib"].as_str().unwrap());
        let dir = lib.rsplit_once('/').unwrap().0;
        let arches: Vec<&str> = case["arches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let env_of = |k: &str| case["env"][k].as_str().map(rooted);
        let (path, prefix, disable) = (
            env_of("ROCM_KPACK_PATH"),
            env_of("ROCM_KPACK_PATH_PREFIX"),
            env_of("ROCM_KPACK_DISABLE"),
        );
        let env = LoaderEnv::linux(path.as_deref(), prefix.as_deref(), disable.as_deref());
        let result = &case["result"];
        let error = result["error"]
            .as_i64()
            .map(|c| LoaderError::from_code(c as i32).unwrap());
        *codes.entry(error.map_or(0, |e| e.code())).or_insert(0) += 1;
        if env.disabled() {
            assert_eq!(error, Some(LoaderError::NotImplemented), "{name}");
            continue;
        }

        // The paths tried, in order.
        let candidates = candidate_paths(dir, &r.search_paths, &arches, &env).unwrap();
        let probed = case["probed"].as_array().unwrap();
        let got: Vec<&str> = candidates.iter().map(|c| c.path.as_str()).collect();
        let want: Vec<String> = probed
            .iter()
            .map(|p| rooted(p[0].as_str().unwrap()))
            .collect();
        assert_eq!(got, want, "{name}: candidate paths");
        if path.is_some() {
            assert!(
                candidates.iter().all(|c| c.origin == PathOrigin::EnvPath),
                "{name}"
            );
        }

        // Which opened: the case's tree holds the files listed; relative paths are
        // relative to the tree, the probe's working directory.
        let files: BTreeMap<String, Vec<u8>> = case["files"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (format!("/ROOT/{k}"), case_file(v)))
            .collect();
        let absolute = |p: &str| {
            if p.starts_with('/') {
                p.to_string()
            } else {
                format!("/ROOT/{p}")
            }
        };
        let archives: Vec<Option<KpackArchive>> = candidates
            .iter()
            .zip(probed)
            .map(|(c, p)| {
                let status = p[1].as_str().unwrap();
                match files.get(&absolute(&c.path)) {
                    None => {
                        assert_eq!(status, "missing", "{name}: {}", c.path);
                        None
                    }
                    Some(data) => {
                        let parsed = KpackArchive::parse(data, &Limits::DEFAULT);
                        assert_eq!(
                            parsed.is_ok(),
                            status == "opened",
                            "{name}: {} {parsed:?}",
                            c.path
                        );
                        parsed.ok()
                    }
                }
            })
            .collect();

        // The archive and target matched, and the answer.
        let key = r.lookup_key(co_index);
        let found = find_entry(&archives, &arches, &key).unwrap();
        let matched = &case["matched"];
        let answer = match &found {
            Ok(f) => {
                assert_eq!(
                    absolute(&candidates[f.archive].path),
                    rooted(matched["archive"].as_str().unwrap()),
                    "{name}"
                );
                assert_eq!(f.target, matched["arch"].as_str().unwrap(), "{name}");
                let archive = archives[f.archive].as_ref().unwrap();
                archive
                    .code_object_coded(f.entry, &options)
                    .map_err(|(code, _)| code)
            }
            Err(code) => {
                if *code == LoaderError::KernelNotFound {
                    assert!(
                        matched.is_object(),
                        "{name}: 5 comes from a matched archive"
                    );
                } else {
                    assert!(matched.is_null(), "{name}");
                }
                Err(*code)
            }
        };
        match answer {
            Ok(code) => {
                assert_eq!(error, None, "{name}");
                assert_eq!(
                    code.len() as u64,
                    result["ok"]["size"].as_u64().unwrap(),
                    "{name}"
                );
                assert_eq!(
                    common::sha256(&code),
                    result["ok"]["sha256"].as_str().unwrap(),
                    "{name}"
                );
            }
            Err(code) => assert_eq!(Some(code), error, "{name}"),
        }
    }
    // The cases cover success and the codes 5, 6, 8, 13 and 14.
    assert_eq!(
        codes.keys().copied().collect::<Vec<_>>(),
        [0, 5, 6, 8, 13, 14]
    );
}

#[test]
fn error_codes_as_the_c_header_numbers_them() {
    for (i, e) in LoaderError::ALL.iter().enumerate() {
        assert_eq!(e.code(), i as i32 + 1);
        assert_eq!(LoaderError::from_code(e.code()), Some(*e));
    }
    assert_eq!(
        LoaderError::ArchiveNotFound.name(),
        "KPACK_ERROR_ARCHIVE_NOT_FOUND"
    );
    assert_eq!(LoaderError::from_code(0), None);
    assert_eq!(LoaderError::from_code(15), None);
}

// Malformed input. A tiny MessagePack writer for the TOCs below.

fn s(out: &mut Vec<u8>, text: &str) {
    assert!(text.len() < 32);
    out.push(0xa0 | text.len() as u8);
    out.extend_from_slice(text.as_bytes());
}

fn u(out: &mut Vec<u8>, n: u64) {
    out.push(0xcf);
    out.extend_from_slice(&n.to_be_bytes());
}

/// An archive: header, `blob` at 64, then `toc`.
fn archive(blob: &[u8], toc: &[u8]) -> Vec<u8> {
    let mut a = b"KPAK\x01\0\0\0".to_vec();
    a.extend_from_slice(&(64 + blob.len() as u64).to_le_bytes());
    a.resize(64, 0);
    a.extend_from_slice(blob);
    a.extend_from_slice(toc);
    a
}

/// A TOC of one entry `k#0`/`gfx90a` (ordinal, original size) with `extra` key/value pairs
/// (already encoded, `n_extra` of them).
fn toc(ordinal: &[u8], original_size: u64, extra: &[u8], n_extra: u8) -> Vec<u8> {
    let mut t = vec![0x82 + n_extra];
    s(&mut t, "gfx_arches");
    t.push(0x91);
    s(&mut t, "gfx90a");
    s(&mut t, "toc");
    t.push(0x81);
    s(&mut t, "k#0");
    t.push(0x81);
    s(&mut t, "gfx90a");
    t.push(0x82);
    s(&mut t, "ordinal");
    t.extend_from_slice(ordinal);
    s(&mut t, "original_size");
    u(&mut t, original_size);
    t.extend_from_slice(extra);
    t
}

fn kind_at(r: Result<impl std::fmt::Debug, offload_image::Error>) -> (ErrorKind, u64) {
    let e = r.unwrap_err();
    (e.kind(), e.offset())
}

#[test]
fn malformed_archives_give_located_errors() {
    let l = Limits::DEFAULT;
    let good = archive(b"CODE", &toc(&[0], 4, &none_blobs(64, 4), 2));
    let a = KpackArchive::parse(&good, &l).unwrap();
    let e = a.entry("k#0", "gfx90a").unwrap();
    assert_eq!(
        a.code_object(e, &ReadOptions::default()).unwrap().as_ref(),
        b"CODE"
    );

    assert_eq!(
        kind_at(KpackArchive::parse(&[], &l)),
        (ErrorKind::Truncated, 0)
    );
    assert_eq!(
        kind_at(KpackArchive::parse(&good[..15], &l)),
        (ErrorKind::Truncated, 0)
    );
    let mut bad = good.clone();
    bad[3] = b'X';
    assert_eq!(
        kind_at(KpackArchive::parse(&bad, &l)),
        (ErrorKind::BadMagic, 0)
    );
    let mut bad = good.clone();
    bad[4] = 2;
    assert_eq!(
        kind_at(KpackArchive::parse(&bad, &l)),
        (ErrorKind::UnsupportedVersion, 4)
    );
    let mut bad = good.clone();
    bad[8..16].copy_from_slice(&(good.len() as u64).to_le_bytes());
    assert_eq!(
        kind_at(KpackArchive::parse(&bad, &l)),
        (ErrorKind::OutOfBounds, 8)
    );
    // The TOC is an array, or ends early.
    let mut bad = archive(b"", &[0x91, 0x00]);
    assert_eq!(
        kind_at(KpackArchive::parse(&bad, &l)),
        (ErrorKind::Malformed, 64)
    );
    bad = good[..good.len() - 1].to_vec();
    assert_eq!(
        kind_at(KpackArchive::parse(&bad, &l)).0,
        ErrorKind::Truncated
    );
    // An ordinal of another type, too large, or missing.
    let t = toc(&[0xa1, b'0'], 4, &none_blobs(64, 4), 2);
    let at = find(&t, b"\xa1\x30") as u64 + 68;
    assert_eq!(
        kind_at(KpackArchive::parse(&archive(b"CODE", &t), &l)),
        (ErrorKind::Malformed, at)
    );
    let t = toc(&[0xcf, 0, 0, 0, 1, 0, 0, 0, 0], 4, &[], 0);
    let at = find(&t, &[0xcf, 0, 0, 0, 1]) as u64 + 64;
    assert_eq!(
        kind_at(KpackArchive::parse(&archive(b"", &t), &l)),
        (ErrorKind::Malformed, at)
    );
    // An ordinal with no blob, and a blob outside the file: found when asked for, as the C
    // reader does (5 and 9).
    let t = toc(&[1], 4, &none_blobs(64, 4), 2);
    let bytes = archive(b"CODE", &t);
    let a = KpackArchive::parse(&bytes, &l).unwrap();
    let e = a.entry("k#0", "gfx90a").unwrap();
    let (code, err) = a.code_object_coded(e, &ReadOptions::default()).unwrap_err();
    assert_eq!(
        (code, err.kind(), err.offset()),
        (
            LoaderError::KernelNotFound,
            ErrorKind::OutOfBounds,
            e.ordinal_at
        )
    );
    let t = toc(&[0], 4, &none_blobs(64, 1 << 40), 2);
    let bytes = archive(b"CODE", &t);
    let a = KpackArchive::parse(&bytes, &l).unwrap();
    let e = a.entry("k#0", "gfx90a").unwrap();
    let (code, err) = a.code_object_coded(e, &ReadOptions::default()).unwrap_err();
    assert_eq!(
        (code, err.kind()),
        (LoaderError::IoError, ErrorKind::OutOfBounds)
    );
    assert_eq!(err.offset(), 68 + find(&t, b"\x82\xa6offset") as u64);
    // zstd: a blob outside the file, a count over the limit, a frame past the blob.
    let zstd = |blob: &[u8], size: u64| {
        let mut extra = Vec::new();
        s(&mut extra, "compression_scheme");
        s(&mut extra, "zstd-per-kernel");
        s(&mut extra, "zstd_offset");
        u(&mut extra, 64);
        s(&mut extra, "zstd_size");
        u(&mut extra, size);
        archive(blob, &toc(&[0], 4, &extra, 3))
    };
    let bytes = zstd(b"\x01\0\0\0\x00\0\0\0", 1 << 30);
    assert_eq!(
        kind_at(KpackArchive::parse(&bytes, &l)).0,
        ErrorKind::OutOfBounds
    );
    let bytes = zstd(b"\0\0\x10\0", 4);
    assert_eq!(
        kind_at(KpackArchive::parse(&bytes, &l)),
        (ErrorKind::LimitExceeded, 64)
    );
    let bytes = zstd(b"\x01\0\0\0\x05\0\0\0abcd", 12);
    assert_eq!(
        kind_at(KpackArchive::parse(&bytes, &l)),
        (ErrorKind::Truncated, 68)
    );
    let bytes = zstd(b"\x01\0", 2);
    assert_eq!(
        kind_at(KpackArchive::parse(&bytes, &l)),
        (ErrorKind::Truncated, 64)
    );
    // Limits: no entries allowed.
    let tight = Limits {
        max_entries: 0,
        ..Limits::DEFAULT
    };
    assert_eq!(
        kind_at(KpackArchive::parse(&good, &tight)).0,
        ErrorKind::LimitExceeded
    );
}

fn none_blobs(offset: u64, size: u64) -> Vec<u8> {
    let mut b = Vec::new();
    s(&mut b, "compression_scheme");
    s(&mut b, "none");
    s(&mut b, "blobs");
    b.push(0x91);
    b.push(0x82);
    s(&mut b, "offset");
    u(&mut b, offset);
    s(&mut b, "size");
    u(&mut b, size);
    b
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}

#[test]
fn a_frame_of_the_wrong_size_is_refused() {
    // librocrand's gfx1030 code object is 1,642,416 bytes (0xce 00 19 0f b0 in the TOC);
    // claiming one byte less is the C reader's error 6.
    let mut data = read("rocrand/.kpack/rand_lib_gfx1030.kpack");
    let size_at = find(&data, &[0xce, 0x00, 0x19, 0x0f, 0xb0]);
    data[size_at + 4] = 0xaf;
    let a = KpackArchive::parse(&data, &Limits::DEFAULT).unwrap();
    let e = a
        .entry("math-libs/rocRAND/stage/lib/librocrand.so.1.1#0", "gfx1030")
        .unwrap();
    assert_eq!(e.original_size, 1_642_415);
    assert_eq!(e.original_size_at, size_at as u64);
    let (code, err) = a.code_object_coded(e, &ReadOptions::default()).unwrap_err();
    assert_eq!(code, LoaderError::DecompressionFailed);
    assert_eq!(err.kind(), ErrorKind::SizeMismatch);
    // The size limit is checked before decoding.
    let small = ReadOptions {
        limits: Limits {
            max_decompressed_size: 1 << 20,
            ..Limits::DEFAULT
        },
        ..ReadOptions::default()
    };
    let err = a.code_object(e, &small).unwrap_err();
    assert_eq!(
        (err.kind(), err.offset()),
        (ErrorKind::LimitExceeded, size_at as u64)
    );
}

#[test]
fn malformed_ref_records_and_wrappers() {
    let good = read("rocrand/ref.msgpack");
    // Not a map; no kernel_name; paths not an array; no string path; truncated.
    assert_eq!(kind_at(KpackRef::parse(&[0x90])), (ErrorKind::Malformed, 0));
    assert_eq!(kind_at(KpackRef::parse(&[])), (ErrorKind::Truncated, 0));
    let mut m = vec![0x81];
    s(&mut m, "kernel_name");
    s(&mut m, "x");
    assert_eq!(kind_at(KpackRef::parse(&m)), (ErrorKind::Malformed, 0));
    let mut m = vec![0x82];
    s(&mut m, "kernel_name");
    s(&mut m, "x");
    s(&mut m, "kpack_search_paths");
    m.extend_from_slice(&[0x92, 0x01, 0xc0]);
    let paths_at = find(&m, &[0x92]) as u64;
    assert_eq!(
        kind_at(KpackRef::parse(&m)),
        (ErrorKind::Malformed, paths_at)
    );
    // Items that are not strings are passed over, as the loader does.
    let last = m.len() - 1;
    m[last] = 0xa1;
    m.push(b'p');
    let r = KpackRef::parse(&m).unwrap();
    assert_eq!(r.search_paths, ["p"]);
    assert_eq!(
        kind_at(KpackRef::parse(&good[..100])).0,
        ErrorKind::Truncated
    );
    // Only 64 KiB are read: a string that ends after them is cut.
    let mut long = vec![0x81];
    s(&mut long, "kernel_name");
    long.push(0xdb);
    long.extend_from_slice(&(REF_READ_LIMIT as u32).to_be_bytes());
    long.resize(REF_READ_LIMIT + 100, b'a');
    assert_eq!(kind_at(KpackRef::parse(&long)).0, ErrorKind::Truncated);

    let mut w = read("rocrand/wrappers.bin");
    assert_eq!(kind_at(HipkWrapper::read(&w, 1)), (ErrorKind::Truncated, 1));
    w[4] = 2;
    assert_eq!(
        kind_at(HipkWrapper::read(&w, 0)),
        (ErrorKind::UnsupportedVersion, 4)
    );
    w[..4].copy_from_slice(b"FPIH");
    assert_eq!(kind_at(HipkWrapper::read(&w, 0)), (ErrorKind::BadMagic, 0));
}

/// `split_library` (the plugin tier's word for a library with no unit) finds the first `HIPK`
/// wrapper of the committed split librocrand where the ELF section table puts the wrapper
/// section (`.hipFatBinSegment`, read here with `object`, as `llvm-readelf -S` lists it at
/// 0x388), and nothing in an unsplit host object or a bare bundle.
#[test]
fn split_library_names_the_first_hipk_wrapper() {
    use object::{Object, ObjectSection};
    let split = read("split/librocrand.so.1.1");
    let elf = object::File::parse(&*split).unwrap();
    let section = elf.section_by_name(".hipFatBinSegment").unwrap();
    let (at, _) = section.file_range().unwrap();
    assert_eq!(at, 0x388);
    assert_eq!(split.get(at as usize..at as usize + 4), Some(&b"HIPK"[..]));
    assert_eq!(offload_image::split_library(&split), Some(at));
    // No unit in it: `split_library` is the reason.
    assert_eq!(
        offload_image::units(&split, &ReadOptions::default()).count(),
        0
    );

    for unsplit in ["devobj/host.x86_64.o", "bundles/hip_6arch.bundle"] {
        let data = std::fs::read(common::root().join("tests/data/corpus").join(unsplit)).unwrap();
        assert_eq!(offload_image::split_library(&data), None, "{unsplit}");
    }
}
