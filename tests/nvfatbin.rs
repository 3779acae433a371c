//! NVIDIA fatbinaries against the oracle: every image the reader lists must have exactly
//! the bytes `cuobjdump -xelf all -xptx all` writes (tests/data/nvfatbin/MANIFEST, made by
//! tests/data/nvfatbin/regen.sh with NVIDIA's tools), and bad input must give a located
//! error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use offload_image::nvfatbin::{self, EntryKind, Fatbin, Variant};
use offload_image::{ErrorKind, Limits, ReadOptions};
use sha2::{Digest, Sha256};

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
    assert_eq!((files, images), (14, 55));
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
