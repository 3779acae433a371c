//! Agreement with AMD comgr's `amd_comgr_lookup_code_object` (the lookup HIP's runtime uses
//! for uncompressed bundles, `COMPATIBILITY.md` §7.1).
//!
//! A small C harness (`tests/comgr/lookup.c`, built here with `cc … -lamd_comgr`; Debian
//! package `libamd-comgr-dev`) hands comgr the first 4096 bytes of each bundle, as ROCm CLR
//! does, and looks every ISA up in a call of its own. For every bundle and every ISA name
//! comgr knows, in every feature combination (on, off, unspecified), this crate's selection
//! with [`SelectOptions::comgr`] must return the same entry (offset and size within the
//! bundle), and the default ranking (`Policy::Best`, same filters) must too: the bundles are
//! compiler-produced, where `COMPATIBILITY.md` §10 says the two agree.
//!
//! Inputs: the uncompressed bundles of the corpus, and `librocrand.so.1` from Debian's
//! `librocrand1` (fetched by `scripts/fetch-rocm-libs.sh` into `target/external`, or
//! `$OFFLOAD_IMAGE_EXTERNAL`). `librocsparse.so.0` is compared by the ignored test
//! `rocsparse` (`scripts/comgr-agreement.sh`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common;
use common::external_lib;

use offload_image::arch::{Processor, TargetId};
use offload_image::container::UnitContent;
use offload_image::{for_each_unit, select, Device, Policy, ReadOptions, SelectOptions};

/// The data size CLR passes to comgr (`FatBinaryInfo::ExtractFatBinaryUsingCOMGR`).
const CLR_DATA_SIZE: u64 = 4096;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every ISA name comgr knows, each with every combination of its selectable features
/// (`+`, `-`, unspecified), in canonical order.
fn device_isas() -> Vec<String> {
    let out = Command::new(common::comgr_lookup())
        .arg("--isas")
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut isas = Vec::new();
    for name in String::from_utf8(out.stdout).unwrap().lines() {
        let proc_name = name.strip_prefix("amdgcn-amd-amdhsa--").unwrap();
        let p = Processor::by_name(proc_name)
            .unwrap_or_else(|| panic!("comgr knows {name}, the processor table does not"));
        let states = |f| {
            if p.support(f).is_selectable() {
                vec!["", "+", "-"]
            } else {
                vec![""]
            }
        };
        for s in states(offload_image::arch::Feature::Sramecc) {
            for x in states(offload_image::arch::Feature::Xnack) {
                let mut isa = format!("amdgcn-amd-amdhsa--{}", p.name);
                if !s.is_empty() {
                    isa += &format!(":sramecc{s}");
                }
                if !x.is_empty() {
                    isa += &format!(":xnack{x}");
                }
                isas.push(isa);
            }
        }
    }
    isas
}

/// One uncompressed bundle: where it starts and what each policy picks per ISA
/// ((offset within the bundle, size), (0, 0) = none).
struct Ours {
    offset: u64,
    entries: usize,
    first: Vec<(u64, u64)>,
    best: Vec<(u64, u64)>,
}

fn ours(data: &[u8], isas: &[String]) -> Vec<Ours> {
    let read = ReadOptions::default();
    let devices: Vec<Device> = isas.iter().map(|i| Device::parse(i).unwrap()).collect();
    let first = SelectOptions::comgr();
    let best = SelectOptions {
        policy: Policy::Best,
        ..SelectOptions::comgr()
    };
    let mut bundles = Vec::new();
    for_each_unit(data, &read, |unit| {
        let UnitContent::Bundle(b) = unit.content else {
            return Ok(());
        };
        assert!(
            b.header_len() <= CLR_DATA_SIZE,
            "bundle header longer than the 4096 bytes CLR hands comgr"
        );
        let open = unit.open(&read)?;
        let start = unit.location.offset;
        let pick = |options: &SelectOptions, device: &Device| {
            let s = select(open.images(), device, options);
            s.chosen()
                .and_then(|i| open.images().nth(i))
                .map_or((0, 0), |img| {
                    (open.offset_of(&img).unwrap() - start, img.size())
                })
        };
        bundles.push(Ours {
            offset: start,
            entries: open.images().count(),
            first: devices.iter().map(|d| pick(&first, d)).collect(),
            best: devices.iter().map(|d| pick(&best, d)).collect(),
        });
        Ok(())
    })
    .unwrap();
    bundles
}

/// comgr's answers: per bundle, per ISA.
fn comgr(file: &Path, offsets: &[u64], isas: &[String]) -> Vec<Vec<(u64, u64)>> {
    let mut child = Command::new(common::comgr_lookup())
        .arg(file)
        .arg(CLR_DATA_SIZE.to_string())
        .args(isas)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for o in offsets {
            writeln!(stdin, "{o}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let mut answers = vec![vec![(u64::MAX, u64::MAX); isas.len()]; offsets.len()];
    let index: BTreeMap<&str, usize> = isas
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 4, "comgr harness: {line}");
        assert_ne!(f[2], "error", "comgr failed: {line}");
        let b: usize = f[0].parse().unwrap();
        answers[b][index[f[1]]] = (f[2].parse().unwrap(), f[3].parse().unwrap());
    }
    answers
}

/// Compares every bundle of `file` × every ISA; returns (bundles, entries, comparisons, matches found).
fn compare(file: &Path) -> (usize, usize, usize, usize) {
    let isas = device_isas();
    let data = std::fs::read(file).unwrap();
    let ours = ours(&data, &isas);
    let offsets: Vec<u64> = ours.iter().map(|b| b.offset).collect();
    let theirs = comgr(file, &offsets, &isas);
    let (mut n, mut found, mut entries) = (0, 0, 0);
    for (b, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        entries += o.entries;
        for (i, isa) in isas.iter().enumerate() {
            assert_eq!(
                o.first[i],
                t[i],
                "{} bundle {b} at {}: {isa}: ours (policy first) vs comgr",
                file.display(),
                o.offset
            );
            assert_eq!(
                o.best[i],
                t[i],
                "{} bundle {b}: {isa}: ours (policy best) vs comgr",
                file.display()
            );
            n += 1;
            found += usize::from(t[i].1 != 0);
        }
    }
    (ours.len(), entries, n, found)
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs comgr (libamd-comgr-dev); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn comgr_agrees_on_the_corpus() {
    if !common::external("comgr (libamd-comgr-dev)") {
        return;
    }
    let corpus = manifest_dir().join("tests/data/corpus");
    let mut total = (0, 0, 0, 0);
    for f in [
        "bundles/hip_6arch.bundle",
        "bundles/hip_3field.bundle",
        "bundles/hip_align4096.bundle",
        "bundles/hip_bc.bundle",
        "bundles/hip_generic.bundle",
        "bundles/hip_nohost.bundle",
        "bundles/hip_unsorted.bundle",
        "bundles/omp_amd_nv.bundle",
        "nvptx/omp_nv_cubins.bundle",
        "driver/hip_nonrdc.o",
        "driver/hip_nonrdc.exe",
        "driver/hip_newdrv.o",
        "driver/hip_newdrv_rdc.exe",
        "driver/hip_rdc.exe",
    ] {
        let r = compare(&corpus.join(f));
        assert_eq!(r.0, 1, "{f}: one bundle");
        total = (total.0 + r.0, total.1 + r.1, total.2 + r.2, total.3 + r.3);
    }
    eprintln!(
        "corpus: {} bundles ({} entries) x {} ISAs: {} comparisons agree, {} of them matches",
        total.0,
        total.1,
        device_isas().len(),
        total.2,
        total.3
    );
    assert!(total.3 > 0);
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs comgr (libamd-comgr-dev) and librocrand.so.1 (scripts/fetch-rocm-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn comgr_agrees_on_librocrand() {
    if !common::external(
        "comgr (libamd-comgr-dev) and librocrand.so.1 (scripts/fetch-rocm-libs.sh)",
    ) {
        return;
    }
    let (bundles, entries, n, found) = compare(&external_lib("librocrand.so.1"));
    eprintln!(
        "librocrand.so.1: {bundles} bundles ({entries} entries) x {} ISAs: {n} comparisons agree, {found} of them matches",
        device_isas().len()
    );
    assert!(bundles >= 1 && found >= 8);
}

/// `scripts/comgr-agreement.sh` (1.3 GB library; not part of `cargo test`).
#[test]
#[ignore]
fn rocsparse() {
    if !common::external(
        "comgr (libamd-comgr-dev) and librocsparse.so.0 (scripts/fetch-rocm-libs.sh)",
    ) {
        return;
    }
    let file = std::env::var_os("COMGR_AGREEMENT_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|| external_lib("librocsparse.so.0"));
    let (bundles, entries, n, found) = compare(&file);
    eprintln!(
        "{}: {bundles} bundles ({entries} entries) x {} ISAs: {n} comparisons agree, {found} of them matches",
        file.display(),
        device_isas().len()
    );
    assert!(bundles >= 1);
}

/// Comgr quirk (`COMPATIBILITY.md` §7.1): in one call, an entry answers at most one query.
/// Two devices that both accept the same `xnack`-any entry get it only for the first
/// query; CLR passes all its devices' ISAs in one call. This crate answers per device.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs comgr (libamd-comgr-dev); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn comgr_gives_an_entry_to_one_query_only() {
    if !common::external("comgr (libamd-comgr-dev)") {
        return;
    }
    let file = manifest_dir().join("tests/data/corpus/bundles/hip_6arch.bundle");
    let isas = [
        "amdgcn-amd-amdhsa--gfx906:sramecc+:xnack-".to_string(),
        "amdgcn-amd-amdhsa--gfx906:sramecc-:xnack+".to_string(),
    ];
    let mut child = Command::new(common::comgr_lookup())
        .arg("--together")
        .arg(&file)
        .arg(CLR_DATA_SIZE.to_string())
        .args(&isas)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "0").unwrap();
    let out = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
    let sizes: Vec<&str> = out.lines().map(|l| l.rsplit(' ').next().unwrap()).collect();
    assert_eq!(sizes, ["3024", "0"], "{out}");
    let data = std::fs::read(&file).unwrap();
    let o = ours(&data, &isas);
    assert_eq!(o[0].first, [(448, 3024), (448, 3024)]);
    // Both states are valid target IDs of gfx906.
    assert!(isas
        .iter()
        .all(|i| TargetId::parse(i.strip_prefix("amdgcn-amd-amdhsa--").unwrap()).is_ok()));
}
