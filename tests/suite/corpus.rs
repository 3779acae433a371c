//! The reader against the corpus manifest: every non-malformed container lists the images
//! LLVM's tools extract from it (same IDs / triple+arch+kind, sizes, sha256, offsets), and
//! every malformed file is refused with the right kind of error.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{manifest, read_corpus, sha256};
use offload_image::container::{PathElem, UnitContent};
use offload_image::{for_each_unit, ErrorKind, Format, ReadOptions};
use serde_json::Value;

/// One image as our reader reports it.
#[derive(Debug, Clone)]
struct Listed {
    member: Option<String>,
    entry_id: Option<String>,
    triple: Option<String>,
    arch: Option<String>,
    offload_kind: &'static str,
    image_kind_code: u16,
    offset: Option<u64>,
    size: u64,
    sha256: String,
    compressed: bool,
    object_bundle: bool,
}

fn list(data: &[u8]) -> offload_image::Result<Vec<Listed>> {
    let options = ReadOptions::default();
    let mut out = Vec::new();
    for_each_unit(data, &options, |unit| {
        if matches!(unit.content, UnitContent::NvFatbin(_)) {
            // NVIDIA fatbinaries: checked against cuobjdump by tests/suite/nvfatbin.rs.
            return Ok(());
        }
        let open = unit.open(&options)?;
        let member = unit.location.path().iter().find_map(|p| match p {
            PathElem::Member(m) => Some(String::from_utf8_lossy(m).into_owned()),
            PathElem::Section(_) => None,
        });
        for image in open.images() {
            // Every image slice lies inside the input (or inside the decompressed buffer).
            if let Some(off) = open.offset_of(&image) {
                assert!(off + image.size() <= data.len() as u64);
            } else {
                assert!(
                    unit.compressed().is_some(),
                    "only decompressed images have no file offset"
                );
            }
            out.push(Listed {
                member: member.clone(),
                entry_id: image.entry_id.map(str::to_string),
                triple: image.triple.map(str::to_string),
                arch: image.target_id.map(str::to_string),
                offload_kind: image.offload_kind.name(),
                image_kind_code: image.image_kind.code(),
                offset: open.offset_of(&image),
                size: image.decode(&ReadOptions::default()).unwrap().len() as u64,
                sha256: sha256(&image.decode(&ReadOptions::default()).unwrap()),
                compressed: unit.compressed().is_some(),
                object_bundle: matches!(unit.content, UnitContent::ObjectBundle(_)),
            });
        }
        Ok(())
    })?;
    Ok(out)
}

fn records_for<'a>(all: &'a [Value], file: &str, kind: &str) -> Vec<&'a Value> {
    all.iter()
        .filter(|r| r["file"] == file && r["record"] == kind)
        .collect()
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// Formats whose files are offload containers (or may hold them).
fn is_container(format: &str) -> bool {
    matches!(
        format,
        "clang-offload-bundle"
            | "clang-offload-bundle-text"
            | "ccob"
            | "offload-binary"
            | "elf"
            | "ar-archive"
    )
}

#[test]
fn every_container_lists_what_llvm_extracts() {
    let all = manifest();
    let mut checked_files = 0;
    let mut checked_images = 0;
    for file in all.iter().filter(|r| r["record"] == "file") {
        let name = s(&file["file"]);
        let format = s(&file["format"]);
        if file.get("malformed").and_then(Value::as_bool) == Some(true) || !is_container(&format) {
            continue;
        }
        let data = read_corpus(&name);
        assert_eq!(
            sha256(&data),
            s(&file["sha256"]),
            "{name}: corpus copy differs from the manifest"
        );
        let listed = list(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
        checked_files += 1;

        let entries = records_for(&all, &name, "entry");
        let images = records_for(&all, &name, "image");
        let members = records_for(&all, &name, "member");

        if !entries.is_empty() {
            // Bundles: header order where the manifest gives an index, else by ID.
            let (ordered, by_id): (Vec<&Value>, Vec<&Value>) =
                entries.iter().partition(|e| e.get("index").is_some());
            let mut ordered = ordered;
            ordered.sort_by_key(|e| e["index"].as_u64());
            assert_eq!(listed.len(), entries.len(), "{name}: image count");
            for (i, e) in ordered.iter().enumerate() {
                let l = &listed[i];
                assert_eq!(
                    l.entry_id.as_deref(),
                    e["entry_id"].as_str(),
                    "{name}: entry {i} id"
                );
                assert_eq!(
                    l.size,
                    e["size"].as_u64().unwrap(),
                    "{name}: entry {i} size"
                );
                assert_eq!(l.sha256, s(&e["sha256"]), "{name}: entry {i} sha256");
                let container = s(&e["container"]);
                let expect_offset = if container == "ccob" || l.compressed {
                    None
                } else if let Some(fo) = e.get("file_offset").and_then(Value::as_u64) {
                    Some(fo)
                } else {
                    e["offset"].as_u64()
                };
                if container == "ccob" || l.compressed {
                    assert_eq!(
                        l.offset, None,
                        "{name}: compressed images have no file offset"
                    );
                } else if l.size > 0 {
                    assert_eq!(l.offset, expect_offset, "{name}: entry {i} offset");
                }
                checked_images += 1;
            }
            for e in by_id {
                let id = e["entry_id"].as_str();
                let l = listed
                    .iter()
                    .find(|l| l.entry_id.as_deref() == id)
                    .unwrap_or_else(|| panic!("{name}: {id:?} not listed"));
                assert!(
                    l.object_bundle,
                    "{name}: {id:?} should come from a bundle section"
                );
                assert_eq!(l.size, e["size"].as_u64().unwrap(), "{name}: {id:?} size");
                assert_eq!(l.sha256, s(&e["sha256"]), "{name}: {id:?} sha256");
                assert_eq!(
                    l.offset,
                    e["offset"].as_u64(),
                    "{name}: {id:?} section offset"
                );
                checked_images += 1;
            }
            if let Some(list) = file.get("list").and_then(Value::as_array) {
                let want: BTreeSet<String> = list.iter().map(s).collect();
                let got: BTreeSet<String> =
                    listed.iter().filter_map(|l| l.entry_id.clone()).collect();
                assert_eq!(got, want, "{name}: same IDs as clang-offload-bundler -list");
            }
        } else if !images.is_empty() {
            assert_eq!(listed.len(), images.len(), "{name}: image count");
            for (i, (l, m)) in listed.iter().zip(&images).enumerate() {
                assert_eq!(
                    l.triple.as_deref(),
                    m["triple"].as_str(),
                    "{name}: image {i} triple"
                );
                assert_eq!(
                    l.arch.as_deref(),
                    m["arch"].as_str(),
                    "{name}: image {i} arch"
                );
                assert_eq!(
                    l.offload_kind,
                    kind_name(&m["kind"]),
                    "{name}: image {i} kind"
                );
                assert_eq!(
                    u64::from(l.image_kind_code),
                    m["image_kind_code"].as_u64().unwrap(),
                    "{name}: image {i} image kind"
                );
                assert_eq!(
                    l.size,
                    m["size"].as_u64().unwrap(),
                    "{name}: image {i} size"
                );
                assert_eq!(l.sha256, s(&m["sha256"]), "{name}: image {i} sha256");
                let expect_offset = m
                    .get("file_offset")
                    .and_then(Value::as_u64)
                    .unwrap_or_else(|| m["offset"].as_u64().unwrap());
                assert_eq!(l.offset, Some(expect_offset), "{name}: image {i} offset");
                checked_images += 1;
            }
        } else if !members.is_empty() {
            // Archives: each member's images carry the IDs `-list` printed for it.
            let mut got: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for l in &listed {
                if let (Some(m), Some(id)) = (&l.member, &l.entry_id) {
                    got.entry(m.clone()).or_default().insert(id.clone());
                }
            }
            for m in members {
                let want: BTreeSet<String> = m
                    .get("list")
                    .and_then(Value::as_array)
                    .map(|l| l.iter().map(s).collect())
                    .unwrap_or_default();
                let have = got.remove(&s(&m["name"])).unwrap_or_default();
                assert_eq!(have, want, "{name}: member {}", s(&m["name"]));
                checked_images += have.len();
            }
            assert!(
                got.is_empty(),
                "{name}: images in unexpected members: {got:?}"
            );
        } else if format == "elf" && file["elf_machine"] != "Advanced Micro Devices X86-64" {
            // A bare device ELF is one image: the whole file.
            assert_eq!(listed.len(), 1, "{name}: a device ELF is one image");
            assert_eq!(listed[0].sha256, s(&file["sha256"]));
            assert_eq!(listed[0].offset, Some(0));
            checked_images += 1;
        } else {
            assert!(
                listed.is_empty(),
                "{name}: no offload content expected, got {listed:?}"
            );
        }
    }
    assert!(checked_files >= 50, "only {checked_files} files checked");
    assert!(
        checked_images >= 150,
        "only {checked_images} images checked"
    );
}

fn kind_name(v: &Value) -> &'static str {
    match v.as_str() {
        Some("openmp") => "openmp",
        Some("hip") => "hip",
        Some("cuda") => "cuda",
        Some("sycl") => "sycl",
        _ => "none",
    }
}

#[test]
fn every_malformed_file_is_refused_with_its_kind_and_offset() {
    let all = manifest();
    let expected: BTreeMap<&str, (ErrorKind, u64)> = [
        (
            "malformed/bundle_trunc_header.bundle",
            (ErrorKind::Truncated, 86),
        ),
        (
            "malformed/bundle_offset_past_end.bundle",
            (ErrorKind::OutOfBounds, 86),
        ),
        (
            "malformed/bundle_size_overflow.bundle",
            (ErrorKind::OutOfBounds, 149),
        ),
        (
            "malformed/bundle_trunc_data.bundle",
            (ErrorKind::Truncated, 400),
        ),
        (
            "malformed/ccob_bad_hash.ccob",
            (ErrorKind::HashMismatch, 16),
        ),
        (
            "malformed/ccob_trunc_payload.ccob",
            (ErrorKind::Truncated, 8),
        ),
        (
            "malformed/ccob_trunc_header.ccob",
            (ErrorKind::Truncated, 0),
        ),
        (
            "malformed/ccob_unknown_method.ccob",
            (ErrorKind::UnsupportedMethod, 6),
        ),
        (
            "malformed/offbin_bad_magic.offbin",
            (ErrorKind::BadMagic, 0),
        ),
        (
            "malformed/offbin_image_past_end.offbin",
            (ErrorKind::OutOfBounds, 56),
        ),
        ("malformed/offbin_trunc.offbin", (ErrorKind::Truncated, 8)),
    ]
    .into_iter()
    .collect();
    let mut seen = 0;
    for file in all.iter().filter(|r| r["malformed"] == true) {
        let name = s(&file["file"]);
        let data = read_corpus(&name);
        let err = list(&data).expect_err(&name);
        seen += 1;
        if let Some((kind, offset)) = expected.get(name.as_str()) {
            assert_eq!(err.kind(), *kind, "{name}: {err}");
            assert_eq!(err.offset(), *offset, "{name}: {err}");
        }
    }
    assert_eq!(seen, 12, "the corpus has 12 malformed files");
}

#[test]
fn bad_version_offload_binary_is_refused() {
    // Version 2 changes the meaning of word 3 (entry count) and the string record stride:
    // read as v2, the v1 file's layout no longer fits.
    let data = read_corpus("malformed/offbin_bad_version.offbin");
    let err = list(&data).unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::OutOfBounds | ErrorKind::Malformed | ErrorKind::Truncated
    ));
}

#[test]
fn ccob_versions_and_methods_decompress_to_the_same_bundle() {
    let bundle = read_corpus("bundles/hip_6arch.bundle");
    for rel in [
        "compressed/hip_6arch.zstd.ccob",
        "compressed/hip_6arch.zstd-l19.ccob",
        "compressed/hip_6arch.zlib.ccob",
        "compressed/hip_6arch.v1-zstd.ccob",
        "compressed/hip_6arch.v3-zstd.llvm22.ccob",
    ] {
        let data = read_corpus(rel);
        let c = offload_image::ccob::CompressedBundle::parse(&data).unwrap();
        let out = c.decompress(&ReadOptions::default()).unwrap();
        assert_eq!(out, bundle, "{rel}");
        assert_eq!(
            c.len(&ReadOptions::default()).unwrap(),
            data.len() as u64,
            "{rel}: extent"
        );
    }
}

#[test]
fn formats_are_reported() {
    let data = read_corpus("driver/hip_compress.exe");
    let options = ReadOptions::default();
    let mut formats = Vec::new();
    for_each_unit(&data, &options, |u| {
        formats.push((
            u.location.to_string(),
            u.format(),
            u.compressed().map(|c| (c.version(), c.method().name())),
        ));
        Ok(())
    })
    .unwrap();
    assert_eq!(
        formats,
        vec![(
            "section .hip_fatbin".to_string(),
            Format::Bundle,
            Some((2, "zstd"))
        )]
    );
}

/// Pads `v` with zeros to a multiple of `align`.
fn pad(v: &mut Vec<u8>, align: usize) {
    while !v.len().is_multiple_of(align) {
        v.push(0);
    }
}

#[test]
fn blobs_back_to_back_are_walked_by_their_sizes() {
    // What a `.hip_fatbin` section of a real library looks like: one fat binary per
    // translation unit, 4096-aligned, zero padded; here mixing every kind of blob, with a v1
    // CCOB (no size field: bounded by the end of its stream) in the middle.
    let parts = [
        "bundles/hip_6arch.bundle",
        "compressed/hip_6arch.zstd.ccob",
        "compressed/hip_6arch.v1-zstd.ccob",
        "compressed/hip_6arch.v3-zstd.llvm22.ccob",
        "compressed/hip_6arch.zlib.ccob",
        "bundles/hip_align4096.bundle",
    ];
    let mut buf = Vec::new();
    let mut starts = Vec::new();
    for p in parts {
        starts.push(buf.len() as u64);
        buf.extend_from_slice(&read_corpus(p));
        pad(&mut buf, 4096);
    }
    let options = ReadOptions::default();
    let mut units = Vec::new();
    for_each_unit(&buf, &options, |u| {
        let n = u.open(&options)?.images().count();
        units.push((u.index, u.location.offset, n));
        Ok(())
    })
    .unwrap();
    let want: Vec<(usize, u64, usize)> = starts
        .iter()
        .enumerate()
        .map(|(i, &s)| (i, s, if i == 5 { 4 } else { 7 }))
        .collect();
    assert_eq!(units, want);

    // OffloadBinaries back to back form one unit.
    let mut buf = read_corpus("packager/multi3.offbin");
    buf.extend_from_slice(&read_corpus("packager/extra_keys.offbin"));
    let listed = list(&buf).unwrap();
    assert_eq!(listed.len(), 4);
    assert_eq!(listed[3].arch.as_deref(), Some("gfx942:sramecc+:xnack-"));

    // Anything but zeros between blobs (FORMATS.md §2.4): in strict mode an error, reported
    // where it starts; by default skipped up to the next container magic at or after the
    // end of the last container, and reported on the unit before it.
    let mut buf = read_corpus("bundles/hip_6arch.bundle");
    let end = buf.len();
    buf.extend_from_slice(b"\0\0\0garbage");
    let strict = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    let err = offload_image::units(&buf, &strict)
        .find_map(|u| u.err())
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::Malformed);
    assert_eq!(err.offset(), end as u64 + 3);
    let lenient: Vec<_> = offload_image::units(&buf, &options)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(lenient.len(), 1);
    assert_eq!(lenient[0].skipped, Some(end as u64 + 3..buf.len() as u64));
    drop(lenient);
    // A container after the garbage is found at its magic; the garbage is not searched
    // for a magic inside the first container's payloads (which hold no bundle magic
    // anyway: the skip starts at the end of the container).
    let second_at = buf.len();
    buf.extend_from_slice(&read_corpus("compressed/hip_6arch.zstd.ccob"));
    let lenient: Vec<_> = offload_image::units(&buf, &options)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(lenient.len(), 2);
    assert_eq!(lenient[0].skipped, Some(end as u64 + 3..second_at as u64));
    assert_eq!(lenient[1].location.offset, second_at as u64);
    assert_eq!(lenient[1].skipped, None);
    assert_eq!(lenient[1].open(&options).unwrap().images().count(), 7);
}
