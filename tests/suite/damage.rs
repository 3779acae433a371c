//! One broken container hides no other (`units`: `UnitContent::Damaged`, the resumed
//! walk): on a linked HIP library of three translation units made by clang-22
//! (`tests/data/damage/`, `regen.sh`), on back-to-back containers, and on the real
//! `libggml-hip` of the cyllama-rocm wheel.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use offload_image::{units, ErrorKind, Format, ReadOptions, UnitContent};

/// `libthree.so`: `.hip_fatbin` with three bundles, `.hipFatBinSegment` with three wrappers.
fn libthree() -> Vec<u8> {
    std::fs::read(common::root().join("tests/data/damage/libthree.so")).expect("libthree.so")
}

/// What a walk gives: per unit offset, `Ok(sha256 of every image)` or `Err(kind)` for a
/// unit that is damaged or does not open.
type Walk = BTreeMap<u64, Result<Vec<String>, ErrorKind>>;

fn walk(data: &[u8]) -> (Walk, usize) {
    let options = ReadOptions::default();
    let mut out = Walk::new();
    let mut errors = 0;
    for unit in units(data, &options) {
        let unit = match unit {
            Ok(u) => u,
            Err(_) => {
                errors += 1;
                continue;
            }
        };
        let at = unit.location.offset;
        let entry = match unit.open(&options) {
            Ok(open) => Ok(open
                .images()
                .map(|i| common::sha256(&i.decode(&options).expect("decode")))
                .collect()),
            Err(e) => Err(e.kind()),
        };
        assert!(out.insert(at, entry).is_none(), "two units at {at}");
    }
    (out, errors)
}

/// File offsets of the bundles of `.hip_fatbin` in `libthree.so`.
fn bundle_starts(data: &[u8]) -> Vec<u64> {
    let (w, _) = walk(data);
    w.keys().copied().collect()
}

#[test]
fn a_damaged_magic_costs_its_bundle_only() {
    let original = libthree();
    let starts = bundle_starts(&original);
    assert_eq!(starts.len(), 3);
    let (sound, _) = walk(&original);
    for (k, &at) in starts.iter().enumerate() {
        let mut data = original.clone();
        data[at as usize + 5] ^= 0x20; // "__CLANG_OFFLOAD_BUNDLE__" no more
        let options = ReadOptions::default();
        let all: Vec<_> = units(&data, &options).map(|u| u.expect("unit")).collect();
        assert_eq!(all.len(), 3, "bundle {k} damaged");
        let damaged = &all[k];
        let d = damaged
            .damage()
            .expect("the damaged bundle is a unit of its own");
        assert_eq!(damaged.index, k);
        assert_eq!(damaged.location.offset, at);
        assert_eq!(d.error.kind(), ErrorKind::Malformed);
        assert_eq!(d.error.offset(), at);
        assert_eq!(d.format, Format::Bundle);
        // It ends where the next bundle starts (the next wrapper's target), or at the end
        // of the section.
        if let Some(next) = starts.get(k + 1) {
            assert_eq!(at + d.bytes.len() as u64, *next);
        }
        let (w, _) = walk(&data);
        for (&o, images) in &sound {
            if o == at {
                assert_eq!(w[&o], Err(ErrorKind::Malformed));
            } else {
                assert_eq!(&w[&o], images, "sound bundle at {o} after damage at {at}");
            }
        }
        // The index of every other unit is its wrapper's index, as the runtime numbers
        // them.
        for (i, u) in all.iter().enumerate() {
            assert_eq!(u.index, i);
        }
    }
}

#[test]
fn every_header_mutation_keeps_the_sound_bundles() {
    // The mutation suite of the resumed walk: every byte of each bundle's header and
    // first descriptor, three ways. Whatever a mutant does to its own bundle, the walk
    // ends, and when the bundle no longer reads, the two sound bundles are read as before.
    let original = libthree();
    let starts = bundle_starts(&original);
    let (sound, _) = walk(&original);
    let mut damaged_cases = 0;
    for &at in &starts {
        for i in 0..64u64 {
            for x in [0x01u8, 0x80, 0xFF] {
                let mut data = original.clone();
                data[(at + i) as usize] ^= x;
                let (w, _) = walk(&data);
                if matches!(w.get(&at), Some(Err(_)) | None) {
                    damaged_cases += 1;
                    for (&o, images) in sound.iter().filter(|(o, _)| **o != at) {
                        assert_eq!(
                            w.get(&o),
                            Some(images),
                            "byte {i} of the bundle at {at} ^ {x:#x}: sound bundle at {o}"
                        );
                    }
                }
            }
        }
    }
    assert!(
        damaged_cases > 100,
        "mutants that damaged their bundle: {damaged_cases}"
    );
}

/// Three containers back to back, 4096-aligned: bundle, `CCOB`, bundle.
fn back_to_back(ccob: &[u8]) -> (Vec<u8>, [u64; 3]) {
    let b = common::craft::hip_bundle();
    let mut data = b.clone();
    let mut at = [0u64; 3];
    for (i, part) in [ccob, &b].into_iter().enumerate() {
        data.resize(data.len().next_multiple_of(4096), 0);
        at[i + 1] = data.len() as u64;
        data.extend_from_slice(part);
    }
    (data, at)
}

#[test]
fn a_bad_hash_costs_its_unit_only() {
    let content = common::craft::hip_bundle();
    let mut ccob = common::craft::ccob(3, 1, &content);
    // The truncated MD5 sits at bytes 24..32 of a version 3 header.
    ccob[24] ^= 0xFF;
    let (data, at) = back_to_back(&ccob);
    let (w, errors) = walk(&data);
    assert_eq!(errors, 0);
    assert_eq!(w.len(), 3);
    assert_eq!(w[&at[1]], Err(ErrorKind::HashMismatch));
    assert!(w[&at[0]].is_ok() && w[&at[2]].is_ok());
    assert_eq!(w[&at[0]], w[&at[2]]);

    // LLVM 22's bundler lists and unbundles such a CCOB (the mismatch is reported only
    // under -verbose).
    if !common::external_part("clang-offload-bundler-22") {
        return;
    }
    let dir = common::scratch("damage-hash");
    let path = dir.join("bad-hash.ccob");
    std::fs::write(&path, &ccob).unwrap();
    let out = Command::new("clang-offload-bundler-22")
        .args(["-list", "-type=o"])
        .arg(format!("-input={}", path.display()))
        .output()
        .expect("run clang-offload-bundler-22");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("hipv4-amdgcn-amd-amdhsa--gfx"));
    // Without the hash check, the unit reads as LLVM reads it.
    let options = ReadOptions {
        verify_hash: false,
        ..ReadOptions::default()
    };
    let unit = units(&data, &options).nth(1).unwrap().unwrap();
    assert!(unit.open(&options).is_ok());
}

#[test]
fn the_walk_never_resumes_inside_a_described_payload() {
    // A bundle whose one entry is itself a whole bundle, damaged so that it does not
    // parse (its entry ID is not UTF-8) while its descriptor table still reads: the walk
    // resumes after the extent the table describes, not at the bundle inside it.
    let inner = common::craft::hip_bundle();
    let mut outer = common::craft::bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx906", &inner)], 4096);
    // The first ID byte follows the 32-byte header and the 24-byte descriptor.
    outer[32 + 24] = 0xFF;
    let (data, at) = back_to_back(&outer);
    let (w, _) = walk(&data);
    assert_eq!(w.keys().copied().collect::<Vec<_>>(), at.to_vec(), "{w:?}");
    assert!(w[&at[1]].is_err());
    let options = ReadOptions::default();
    let damaged = units(&data, &options).nth(1).unwrap().unwrap();
    assert!(matches!(damaged.content, UnitContent::Damaged(_)));
    // The inner bundle's magic lies inside the damaged unit's bytes.
    let d = damaged.damage().unwrap();
    assert!(d
        .bytes
        .windows(24)
        .skip(1)
        .any(|w| w == b"__CLANG_OFFLOAD_BUNDLE__"));
}

#[test]
fn strict_walks_stop_at_the_damage() {
    let mut data = libthree();
    let at = bundle_starts(&data)[1];
    data[at as usize] ^= 0x01;
    let options = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    let walked: Vec<_> = units(&data, &options).collect();
    assert!(walked[0].is_ok());
    let e = walked[1]
        .as_ref()
        .expect_err("strict: the damage is an error");
    assert_eq!(e.offset(), at);
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs libggml-hip.so (scripts/fetch-cyllama-rocm.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn libggml_hip_lists_129_of_130_bundles_after_damage_to_the_first() {
    if !common::external("libggml-hip.so (scripts/fetch-cyllama-rocm.sh)") {
        return;
    }
    let base = common::external_dir();
    let original = std::fs::read(base.join("cyllama-rocm/libggml-hip.so")).expect("libggml-hip");
    let options = ReadOptions::default();
    let offsets = |data: &[u8]| -> Vec<(u64, bool)> {
        units(data, &options)
            .map(|u| u.expect("unit"))
            .map(|u| (u.location.offset, u.damage().is_none()))
            .collect()
    };
    let sound = offsets(&original);
    assert_eq!(sound.len(), 130);
    for k in [0usize, 64, 129] {
        let mut data = original.clone();
        data[sound[k].0 as usize + 3] ^= 0xFF;
        let damaged = offsets(&data);
        assert_eq!(damaged.len(), 130, "damage to bundle {k}");
        for (i, (o, ok)) in damaged.iter().enumerate() {
            assert_eq!(*o, sound[i].0);
            assert_eq!(*ok, i != k, "bundle {i} after damage to bundle {k}");
        }
    }
}
