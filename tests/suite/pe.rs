//! PE images and COFF objects (`docs/PE.md`): every container of the clang-22 / lld-link-22
//! files of `tests/data/pe/` and of the fetched Windows DLLs and `.pyd` (external switch)
//! is listed with the bytes LLVM's bundler, `clang-offload-packager` and `cuobjdump`
//! extracted from the cut-out containers (`ORACLES.json`, `REAL_ORACLES.json`, written by
//! `scripts/pe-oracles.py`); the section bounds are what `llvm-objcopy --dump-section`
//! wrote; the wrappers' pointers resolve (ImageBase, DIR64 base relocations, COFF
//! `ADDR64` relocations) to the containers the oracle cut; `select` on the file equals
//! `select` on each cut-out container; malformed headers are refused with their kind and
//! offset.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use offload_image::container::PathElem;
use offload_image::host::{HostFile, SectionRole};
use offload_image::{
    choose, units, Device, ErrorKind, ImageKind, ReadOptions, SelectOptions, UnitContent,
};
use serde_json::Value;

fn pe_dir() -> PathBuf {
    common::root().join("tests/data/pe")
}

fn oracles(name: &str) -> Value {
    let text = std::fs::read_to_string(pe_dir().join(name)).expect("oracle file");
    serde_json::from_str(&text).expect("oracle JSON")
}

fn external_windows() -> PathBuf {
    common::external_dir().join("windows")
}

fn u(v: &Value) -> u64 {
    v.as_u64().expect("number")
}

fn s(v: &Value) -> &str {
    v.as_str().expect("string")
}

/// One listed image: (entry ID or architecture, sha256 of its bytes).
type Listed = (String, String);

/// What the library lists of one unit.
struct UnitSeen {
    section: String,
    member: Option<String>,
    offset: u64,
    extent_sha: String,
    extent_len: u64,
    images: Vec<Listed>,
    /// For fatbinaries: (kind elf|ptx, sha256), as cuobjdump names them.
    fatbin: Vec<(String, String)>,
    /// The `__CLANG_OFFLOAD_BUNDLE__` sections of a bundled object.
    object_bundle: bool,
}

fn walk(data: &[u8]) -> Vec<UnitSeen> {
    walk_with(data, true)
}

/// [`walk`]; without `hash`, images are not decoded and their sha256 is left empty.
fn walk_with(data: &[u8], hash: bool) -> Vec<UnitSeen> {
    let options = ReadOptions::default();
    let mut out = Vec::new();
    for unit in units(data, &options) {
        let unit = unit.expect("unit");
        let mut section = String::new();
        let mut member = None;
        for p in unit.location.path() {
            match p {
                PathElem::Section(n) => section = String::from_utf8_lossy(n).into_owned(),
                PathElem::Member(n) => member = Some(String::from_utf8_lossy(n).into_owned()),
            }
        }
        let extent = unit.bytes(&options).expect("extent");
        let open = unit.open(&options).expect("open");
        let mut images = Vec::new();
        let mut fatbin = Vec::new();
        for image in open.images() {
            let sha = if hash {
                common::sha256(&image.decode(&options).expect("decode"))
            } else {
                String::new()
            };
            let name = image
                .entry_id
                .map(str::to_owned)
                .or(image.target_id.map(str::to_owned))
                .unwrap_or_default();
            if let UnitContent::NvFatbin(_) = unit.content {
                let kind = if image.image_kind == ImageKind::Ptx {
                    "ptx"
                } else {
                    "elf"
                };
                fatbin.push((kind.to_owned(), sha.clone()));
            }
            images.push((name, sha));
        }
        out.push(UnitSeen {
            section,
            member,
            offset: unit.location.offset,
            extent_sha: common::sha256(extent),
            extent_len: extent.len() as u64,
            images,
            fatbin,
            object_bundle: matches!(unit.content, UnitContent::ObjectBundle(_)),
        });
    }
    out
}

/// Checks one COFF file (or archive member) against its oracle record: the units the
/// library finds in each container section, their extents and images.
fn check_coff(file: &str, data: &[u8], rec: &Value, seen: &[&UnitSeen], in_archive: bool) {
    let host = HostFile::parse(data).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut checked = 0;
    for sec in rec["sections"].as_array().unwrap() {
        let name = s(&sec["name"]);
        // The section's bytes are what llvm-objcopy --dump-section writes.
        let section = host
            .section_by_name(name.as_bytes())
            .unwrap_or_else(|| panic!("{file}: no section {name}"));
        assert_eq!(
            section.data.len() as u64,
            u(&sec["dumped_bytes"]),
            "{file} {name}"
        );
        assert_eq!(
            common::sha256(section.data),
            s(&sec["dumped_sha256"]),
            "{file} {name}"
        );
        assert_eq!(section.offset, u(&sec["file_offset"]), "{file} {name}");
        let units: Vec<&&UnitSeen> = seen.iter().filter(|x| x.section == name).collect();
        if name == ".llvm.offloading" {
            // The OffloadBinaries back to back are one unit; LLVM lists their images.
            assert_eq!(units.len(), 1, "{file}");
            let want: Vec<(String, String)> = sec["images"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| (s(&i["arch"]).to_owned(), s(&i["sha256"]).to_owned()))
                .collect();
            let got: Vec<(String, String)> = units[0].images.clone();
            assert_eq!(got, want, "{file}: .llvm.offloading images");
            checked += 1;
            continue;
        }
        let containers = sec["containers"].as_array().unwrap();
        assert_eq!(units.len(), containers.len(), "{file} {name}: containers");
        for (unit, c) in units.iter().zip(containers) {
            if !in_archive {
                assert_eq!(
                    unit.offset,
                    u(&sec["file_offset"]) + u(&c["offset"]),
                    "{file} {name}: container offset"
                );
            }
            assert_eq!(unit.extent_len, u(&c["bytes"]), "{file} {name}");
            assert_eq!(
                unit.extent_sha,
                s(&c["sha256"]),
                "{file} {name}: container bytes"
            );
            let entries = c["entries"].as_array().unwrap();
            if s(&c["kind"]) == "fatbin" {
                let mut want: Vec<(String, String)> = entries
                    .iter()
                    .map(|e| (s(&e["kind"]).to_owned(), s(&e["sha256"]).to_owned()))
                    .collect();
                let mut got = unit.fatbin.clone();
                want.sort();
                got.sort();
                assert_eq!(got, want, "{file} {name}: cuobjdump's entries");
            } else {
                let mut want: Vec<Listed> = entries
                    .iter()
                    .map(|e| (s(&e["id"]).to_owned(), s(&e["sha256"]).to_owned()))
                    .collect();
                let mut got = unit.images.clone();
                want.sort();
                got.sort();
                assert_eq!(got, want, "{file} {name}: the bundler's entries");
            }
            checked += 1;
        }
    }
    if let Some(sections) = rec["object_bundle_sections"].as_array() {
        let unit = seen
            .iter()
            .find(|x| x.object_bundle)
            .unwrap_or_else(|| panic!("{file}: no object bundle unit"));
        let want: Vec<Listed> = sections
            .iter()
            .map(|e| (s(&e["id"]).to_owned(), s(&e["sha256"]).to_owned()))
            .collect();
        assert_eq!(
            unit.images, want,
            "{file}: __CLANG_OFFLOAD_BUNDLE__ sections"
        );
        // The device entries are what the bundler unbundles (its host entry is a copy of
        // the object without those sections).
        for e in rec["object_bundle"].as_array().unwrap() {
            if !s(&e["id"]).starts_with("host-") {
                assert!(
                    unit.images
                        .contains(&(s(&e["id"]).to_owned(), s(&e["sha256"]).to_owned())),
                    "{file}: {} as unbundled",
                    s(&e["id"])
                );
            }
        }
        checked += 1;
    }
    check_wrappers(file, &host, rec);
    assert!(checked > 0, "{file}: the oracle records no container");
}

/// The wrappers point at the containers the oracle cut: through ImageBase and a DIR64 base
/// relocation in images, through an `ADDR64` relocation against the container section in
/// objects.
fn check_wrappers(file: &str, host: &HostFile<'_>, rec: &Value) {
    let want = rec["wrappers"].as_array().unwrap();
    let slots = host.fat_binary_wrappers();
    assert_eq!(slots.len(), want.len(), "{file}: wrapper slots");
    let HostFile::Pe(pe) = host else {
        panic!("{file}: not read as PE/COFF")
    };
    for (slot, w) in slots.iter().zip(want) {
        let ptr = host.pointer_at(slot.address + 8).expect("wrapper pointer");
        if rec["kind"] == "image" {
            assert_eq!(ptr, u(&w["target_rva"]), "{file}: wrapper {}", slot.index);
            assert_eq!(
                pe.is_relocated(slot.address + 8),
                w["dir64_at_8"] == true,
                "{file}"
            );
            assert_eq!(
                pe.is_relocated(slot.address + 16),
                w["dir64_at_16"] == true,
                "{file}"
            );
            // The RVA is the start of a container the oracle cut.
            let (section, off) = host.section_at(ptr).expect("pointer into a section");
            let container = rec["sections"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s2| s(&s2["name"]).as_bytes() == section.name)
                .flat_map(|s2| s2["containers"].as_array().unwrap())
                .find(|c| u(&c["offset"]) == off);
            assert!(
                container.is_some() || w["version"] == 2,
                "{file}: wrapper {} points at {}+{off:#x}, not a container",
                slot.index,
                String::from_utf8_lossy(section.name)
            );
        } else {
            let relocs = &rec["wrapper_relocations"][std::str::from_utf8(slot.section).unwrap()];
            let target = s(&relocs[slot.index]["symbol"]);
            let section = host
                .section_by_name(target.as_bytes())
                .expect("target section");
            assert_eq!(
                ptr, section.address,
                "{file}: wrapper {} → {target}+0",
                slot.index
            );
        }
    }
}

fn check_oracle_file(name: &str, root: &std::path::Path) {
    let oracle = oracles(name);
    let files = oracle["files"].as_object().unwrap();
    assert!(!files.is_empty());
    for (file, rec) in files {
        let data = std::fs::read(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(
            common::sha256(&data),
            s(&rec["sha256"]),
            "{file}: not the file the oracle read"
        );
        let seen = walk(&data);
        if rec["kind"] == "archive" {
            for m in rec["members"].as_array().unwrap() {
                let mname = s(&m["name"]);
                let member_seen: Vec<&UnitSeen> = seen
                    .iter()
                    .filter(|x| x.member.as_deref() == Some(mname))
                    .collect();
                let bytes = member_bytes(&data, mname);
                check_coff(&format!("{file}({mname})"), bytes, m, &member_seen, true);
            }
        } else {
            let all: Vec<&UnitSeen> = seen.iter().collect();
            check_coff(file, &data, rec, &all, false);
        }
    }
}

fn member_bytes<'a>(archive: &'a [u8], name: &str) -> &'a [u8] {
    let a = object::read::archive::ArchiveFile::parse(archive).unwrap();
    for m in a.members() {
        let m = m.unwrap();
        if m.name() == name.as_bytes() {
            return m.data(archive).unwrap();
        }
    }
    panic!("no member {name}")
}

#[test]
fn corpus_containers_are_the_oracles_bytes() {
    check_oracle_file("ORACLES.json", &pe_dir());
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the Windows wheels of scripts/fetch-windows-wheels.sh; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn real_windows_dlls_are_the_oracles_bytes() {
    if !common::external("the Windows wheels of scripts/fetch-windows-wheels.sh") {
        return;
    }
    check_oracle_file("REAL_ORACLES.json", &external_windows());
}

/// The figures of `PE.md` §3 for the real files, from the library alone.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the Windows wheels of scripts/fetch-windows-wheels.sh; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn real_windows_dlls_hold_what_pe_md_counts() {
    if !common::external("the Windows wheels of scripts/fetch-windows-wheels.sh") {
        return;
    }
    let root = external_windows();
    // (file, units, images without the hosts of bundles, wrappers)
    let expected: &[(&str, usize, usize, usize)] = &[
        ("cu12/curand64_10.dll", 11, 153, 11),
        ("cu13/curand64_10.dll", 11, 120, 11),
        ("hip-quant-0.4.3/hip_quantize.dll", 1, 1, 1),
        ("hip-quant-0.4.7/hip_quantize.dll", 1, 4, 1),
        ("hip-quant-0.4.7/hip_quantize_rocm721.dll", 1, 8, 1),
        ("hip-quant-2.2.4/hip_quantize.dll", 1, 8, 1),
        ("hip-quant-2.2.4/hip_quantize_rocm721.dll", 1, 8, 1),
        ("hip-quant-2.2.4/_C.cp312-win_amd64.pyd", 32, 256, 32),
    ];
    for &(file, n_units, n_images, n_wrappers) in expected {
        let data = std::fs::read(root.join(file)).unwrap();
        let seen = walk_with(&data, false);
        assert_eq!(seen.len(), n_units, "{file}");
        let images: usize = seen
            .iter()
            .map(|x| {
                x.images
                    .iter()
                    .filter(|(id, _)| !id.starts_with("host-"))
                    .count()
            })
            .sum();
        assert_eq!(images, n_images, "{file}");
        let host = HostFile::parse(&data).unwrap();
        let wrappers = host.fat_binary_wrappers();
        assert_eq!(wrappers.len(), n_wrappers, "{file}");
        // Every wrapper's pointer is the start of a unit (the NVIDIA version-2 wrapper's
        // too: it points at the first fatbinary).
        let starts: Vec<u64> = seen.iter().map(|x| x.offset).collect();
        for w in &wrappers {
            let p = host.pointer_at(w.address + 8).unwrap();
            assert!(
                starts.contains(&host.file_offset(p).unwrap()),
                "{file}: {w:?}"
            );
        }
    }
}

const DEVICES: &[&str] = &[
    "gfx90a:xnack-",
    "gfx942",
    "gfx1100",
    "gfx1201",
    "gfx1200",
    "sm_75",
    "sm_86",
    "sm_89",
    "sm_120",
];

/// `select` on the file equals `select` on every container cut out of it by the oracle.
fn select_equals_cut_out(name: &str, root: &std::path::Path) {
    let oracle = oracles(name);
    let options = ReadOptions::default();
    let devices: Vec<Device> = DEVICES.iter().map(|d| Device::parse(d).unwrap()).collect();
    for (file, rec) in oracle["files"].as_object().unwrap() {
        if rec["kind"] != "image" {
            continue;
        }
        let data = std::fs::read(root.join(file)).unwrap();
        let mut pieces = BTreeMap::new();
        for sec in rec["sections"].as_array().unwrap() {
            for c in sec["containers"].as_array().unwrap() {
                let at = (u(&sec["file_offset"]) + u(&c["offset"])) as usize;
                let piece = &data[at..at + u(&c["bytes"]) as usize];
                assert_eq!(common::sha256(piece), s(&c["sha256"]));
                pieces.insert(at as u64, piece);
            }
        }
        let mut compared = 0;
        for unit in units(&data, &options) {
            let unit = unit.unwrap();
            let open = unit.open(&options).unwrap();
            let in_file = choose(open.images(), &devices, &SelectOptions::default());
            let piece = pieces[&unit.location.offset];
            let mut cut = units(piece, &options);
            let cut_unit = cut.next().unwrap().unwrap();
            assert!(cut.next().is_none());
            let cut_open = cut_unit.open(&options).unwrap();
            let alone = choose(cut_open.images(), &devices, &SelectOptions::default());
            for (d, (a, b)) in DEVICES.iter().zip(in_file.iter().zip(&alone)) {
                let pick = |c: &offload_image::Choice<'_>| {
                    c.image.as_ref().map(|i| {
                        (
                            i.index,
                            i.entry_id.map(str::to_owned),
                            i.target_id.map(str::to_owned),
                        )
                    })
                };
                assert_eq!(pick(a), pick(b), "{file} unit {} on {d}", unit.index);
                assert_eq!(a.candidates, b.candidates);
                compared += usize::from(a.image.is_some());
            }
        }
        assert!(compared > 0, "{file}: no device chose anything");
    }
}

#[test]
fn select_on_corpus_dlls_equals_select_on_cut_out_containers() {
    select_equals_cut_out("ORACLES.json", &pe_dir());
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the Windows wheels of scripts/fetch-windows-wheels.sh; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn select_on_real_dlls_equals_select_on_cut_out_containers() {
    if !common::external("the Windows wheels of scripts/fetch-windows-wheels.sh") {
        return;
    }
    select_equals_cut_out("REAL_ORACLES.json", &external_windows());
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(pe_dir().join(name)).unwrap()
}

fn le32(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}

fn le16(d: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(d[at..at + 2].try_into().unwrap())
}

/// Section header offset of `name` (8-byte name as stored).
fn section_header(d: &[u8], table: usize, count: usize, raw: &[u8]) -> usize {
    (0..count)
        .map(|i| table + 40 * i)
        .find(|&h| d[h..h + 8].starts_with(raw) && (raw.len() == 8 || d[h + raw.len()] == 0))
        .expect("section header")
}

/// What the walk and the address space say of a damaged file: the error kind and offset.
fn refusal(data: &[u8]) -> (ErrorKind, u64) {
    let options = ReadOptions::default();
    let e = units(data, &options)
        .find_map(Result::err)
        .or_else(|| HostFile::parse(data).err())
        .expect("the damaged file is refused");
    (e.kind(), e.offset())
}

#[test]
fn malformed_image_headers_are_refused_where_they_are_wrong() {
    let good = read("k3.dll");
    let nt = le32(&good, 0x3C) as usize;
    let opt = nt + 24;
    let table = opt + le16(&good, nt + 20) as usize;
    let count = le16(&good, nt + 6) as usize;
    let hip = section_header(&good, table, count, b".hip_fat");
    let patch = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut d = good.clone();
        f(&mut d);
        d
    };
    let cases: Vec<(&str, Vec<u8>, ErrorKind, u64)> = vec![
        (
            "truncated DOS header",
            good[..40].to_vec(),
            ErrorKind::Truncated,
            0,
        ),
        (
            "e_lfanew past the end",
            patch(&|d| d[0x3C..0x40].copy_from_slice(&0x7fff_0000u32.to_le_bytes())),
            ErrorKind::OutOfBounds,
            0x3C,
        ),
        (
            "bad PE signature",
            patch(&|d| d[nt] = b'X'),
            ErrorKind::BadMagic,
            nt as u64,
        ),
        (
            "PE32 optional header",
            patch(&|d| d[opt..opt + 2].copy_from_slice(&0x10Bu16.to_le_bytes())),
            ErrorKind::UnsupportedVersion,
            opt as u64,
        ),
        (
            "unknown optional header magic",
            patch(&|d| d[opt..opt + 2].copy_from_slice(&0x1234u16.to_le_bytes())),
            ErrorKind::BadMagic,
            opt as u64,
        ),
        (
            "optional header smaller than PE32+",
            patch(&|d| d[nt + 20..nt + 22].copy_from_slice(&16u16.to_le_bytes())),
            ErrorKind::Malformed,
            (nt + 20) as u64,
        ),
        (
            "more data directories than the optional header holds",
            patch(&|d| d[opt + 108..opt + 112].copy_from_slice(&1000u32.to_le_bytes())),
            ErrorKind::Malformed,
            (opt + 108) as u64,
        ),
        (
            "i386 machine",
            patch(&|d| d[nt + 4..nt + 6].copy_from_slice(&0x14Cu16.to_le_bytes())),
            ErrorKind::Unsupported,
            (nt + 4) as u64,
        ),
        (
            "section table past the end",
            patch(&|d| d[nt + 6..nt + 8].copy_from_slice(&0xFFFFu16.to_le_bytes())),
            ErrorKind::Truncated,
            table as u64,
        ),
        (
            ".hip_fat contents past the end",
            patch(&|d| d[hip + 20..hip + 24].copy_from_slice(&0x00F0_0000u32.to_le_bytes())),
            ErrorKind::OutOfBounds,
            (hip + 20) as u64,
        ),
        (
            "file cut inside the optional header",
            good[..opt + 50].to_vec(),
            ErrorKind::Truncated,
            opt as u64,
        ),
        (
            "file cut inside the COFF file header",
            good[..nt + 10].to_vec(),
            ErrorKind::Truncated,
            (nt + 4) as u64,
        ),
        (
            "truncated section table",
            good[..table + 40].to_vec(),
            ErrorKind::Truncated,
            table as u64,
        ),
        (
            "file cut inside .hip_fat",
            good[..le32(&good, hip + 20) as usize + 100].to_vec(),
            ErrorKind::OutOfBounds,
            (hip + 20) as u64,
        ),
    ];
    for (what, data, kind, offset) in cases {
        assert_eq!(refusal(&data), (kind, offset), "{what}");
    }
}

#[test]
fn malformed_base_relocations_are_refused_at_their_block() {
    let good = read("k3.dll");
    let nt = le32(&good, 0x3C) as usize;
    let opt = nt + 24;
    let table = opt + le16(&good, nt + 20) as usize;
    let count = le16(&good, nt + 6) as usize;
    let reloc = section_header(&good, table, count, b".reloc");
    let at = le32(&good, reloc + 20) as usize;
    // The first block claims 3 bytes: not a multiple of 4 above 8.
    let mut d = good.clone();
    d[at + 4..at + 8].copy_from_slice(&3u32.to_le_bytes());
    let e = HostFile::parse(&d).unwrap_err();
    assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, at as u64));
    // The directory points past its section.
    let mut d = good.clone();
    let dir = opt + 112 + 5 * 8;
    d[dir + 4..dir + 8].copy_from_slice(&0x10_0000u32.to_le_bytes());
    let e = HostFile::parse(&d).unwrap_err();
    assert_eq!((e.kind(), e.offset()), (ErrorKind::OutOfBounds, dir as u64));
    // Discovery does not need the relocations: the file still lists.
    assert_eq!(walk(&d).len(), 3);
}

#[test]
fn malformed_object_headers_are_refused_where_they_are_wrong() {
    let good = read("k.obj");
    let count = le16(&good, 2) as usize;
    let symtab = le32(&good, 8) as usize;
    let nsyms = le32(&good, 12) as usize;
    let strtab = symtab + 18 * nsyms;
    let table = 20;
    // `.hip_fatbin` is a `/N` name.
    let hip = (0..count)
        .map(|i| table + 40 * i)
        .find(|&h| {
            let n = &good[h..h + 8];
            n[0] == b'/' && {
                let off: usize = std::str::from_utf8(&n[1..])
                    .unwrap()
                    .trim_end_matches('\0')
                    .parse()
                    .unwrap();
                good[strtab + off..].starts_with(b".hip_fatbin\0")
            }
        })
        .expect("/N header of .hip_fatbin");
    let patch = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut d = good.clone();
        f(&mut d);
        d
    };
    let cases: Vec<(&str, Vec<u8>, ErrorKind, u64)> = vec![
        (
            "section table past the end",
            patch(&|d| d[2..4].copy_from_slice(&0xFFFFu16.to_le_bytes())),
            ErrorKind::Truncated,
            20,
        ),
        (
            "symbol table past the end",
            patch(&|d| d[8..12].copy_from_slice(&0x7fff_0000u32.to_le_bytes())),
            ErrorKind::OutOfBounds,
            8,
        ),
        (
            "/N past the string table",
            patch(&|d| d[hip..hip + 8].copy_from_slice(b"/9999999")),
            ErrorKind::Malformed,
            hip as u64,
        ),
        (
            "/N not decimal",
            patch(&|d| d[hip..hip + 8].copy_from_slice(b"/12x4\0\0\0")),
            ErrorKind::Malformed,
            hip as u64,
        ),
        (
            ".hip_fatbin contents past the end",
            patch(&|d| d[hip + 20..hip + 24].copy_from_slice(&0x00F0_0000u32.to_le_bytes())),
            ErrorKind::OutOfBounds,
            (hip + 20) as u64,
        ),
    ];
    for (what, data, kind, offset) in cases {
        assert_eq!(refusal(&data), (kind, offset), "{what}");
    }
    // Relocations past the end are an error of the address space (discovery does not read
    // them).
    let seg = (0..count)
        .map(|i| table + 40 * i)
        .find(|&h| {
            le16(&good, h + 32) > 0 && {
                let n = &good[h..h + 8];
                n[0] == b'/'
                    && good[strtab
                        + std::str::from_utf8(&n[1..])
                            .unwrap()
                            .trim_end_matches('\0')
                            .parse::<usize>()
                            .unwrap()..]
                        .starts_with(b".hipFatBinSegment\0")
            }
        })
        .expect(".hipFatBinSegment header");
    let mut d = good.clone();
    d[seg + 24..seg + 28].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    let e = HostFile::parse(&d).unwrap_err();
    assert_eq!(
        (e.kind(), e.offset()),
        (ErrorKind::OutOfBounds, (seg + 24) as u64)
    );
}

#[test]
fn image_sections_are_found_by_their_8_byte_names_and_objects_by_their_long_names() {
    let dll = read("knr.dll");
    let host = HostFile::parse(&dll).unwrap();
    let roles: Vec<(&[u8], SectionRole<'_>)> =
        host.sections().iter().map(|s| (s.name, s.role())).collect();
    assert!(roles.contains(&(&b".hip_fat"[..], SectionRole::HipFatbin)));
    assert!(roles.contains(&(&b".hipFatB"[..], SectionRole::Wrappers)));
    assert!(roles
        .iter()
        .any(|(n, r)| *n == b"llvm_off" && matches!(r, SectionRole::Entries(_))));
    // The new driver's entry table: 56-byte records whose name pointers (DIR64-relocated)
    // lead to the kernel's name in `.llvm`.
    let entries = host.entry_sections();
    assert_eq!(entries.len(), 1);
    let t = entries[0];
    assert_eq!(t.end - t.begin, 56);
    let name_at = host.pointer_at(t.begin + 24).unwrap();
    let (sec, _) = host.section_at(name_at).unwrap();
    assert_eq!(sec.name, b".llvm");
    assert!(host.bytes_from(name_at).unwrap().starts_with(b"scale\0"));
    let obj = read("knr.obj");
    let host = HostFile::parse(&obj).unwrap();
    let names: Vec<&[u8]> = host.sections().iter().map(|s| s.name).collect();
    assert!(names.contains(&&b".llvm.offloading"[..]));
    assert!(host
        .sections()
        .iter()
        .any(|s| s.role() == SectionRole::Offloading));
}

#[test]
fn a_bundle_in_an_unnamed_section_is_found_by_its_contents() {
    // Rename `.hip_fat` in k3.dll: LLVM's readers find COFF bundles by content.
    let mut d = read("k3.dll");
    let nt = le32(&d, 0x3C) as usize;
    let table = nt + 24 + le16(&d, nt + 20) as usize;
    let count = le16(&d, nt + 6) as usize;
    let hip = section_header(&d, table, count, b".hip_fat");
    d[hip..hip + 8].copy_from_slice(b".mydata\0");
    let seen = walk(&d);
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|x| x.section == ".mydata"));
}

fn pe_codes(data: &[u8]) -> Vec<(String, u64)> {
    offload_image::validate::validate(data, &ReadOptions::default())
        .iter()
        .filter(|f| f.code.name().starts_with("pe-") || f.severity() == Severity::Error)
        .map(|f| (f.code.name().to_owned(), f.offset))
        .collect()
}

use offload_image::validate::Severity;

#[test]
fn validate_finds_nothing_wrong_with_the_corpus_dlls() {
    for f in ["k3.dll", "knr.dll", "kc.dll"] {
        assert_eq!(pe_codes(&read(f)), vec![], "{f}");
    }
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the Windows wheels of scripts/fetch-windows-wheels.sh; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn validate_finds_nothing_wrong_with_the_real_dlls() {
    if !common::external("the Windows wheels of scripts/fetch-windows-wheels.sh") {
        return;
    }
    for f in [
        "cu12/curand64_10.dll",
        "cu13/curand64_10.dll",
        "hip-quant-2.2.4/_C.cp312-win_amd64.pyd",
    ] {
        let data = std::fs::read(external_windows().join(f)).unwrap();
        assert_eq!(pe_codes(&data), vec![], "{f}");
    }
}

/// The three Windows checks of `validate` (`VALIDATE.md` §2.15–§2.17) on damaged copies of
/// `k3.dll`: a DIR64 entry turned into padding, a pointer moved off its container, a wrapper
/// erased.
#[test]
fn validate_finds_damaged_wrappers() {
    let good = read("k3.dll");
    let host = HostFile::parse(&good).unwrap();
    let slots = host.fat_binary_wrappers();
    assert_eq!(slots.len(), 3);
    let nt = le32(&good, 0x3C) as usize;
    let table = nt + 24 + le16(&good, nt + 20) as usize;
    let count = le16(&good, nt + 6) as usize;
    let reloc = section_header(&good, table, count, b".reloc");
    let (at, size) = (
        le32(&good, reloc + 20) as usize,
        le32(&good, reloc + 8) as usize,
    );
    // The DIR64 entry of wrapper 1's pointer.
    let want = slots[1].address + 8;
    let mut entry = None;
    let mut pos = at;
    while pos + 8 <= at + size {
        let (page, len) = (le32(&good, pos) as u64, le32(&good, pos + 4) as usize);
        for e in (pos + 8..pos + len).step_by(2) {
            let v = le16(&good, e);
            if v >> 12 == 10 && page + u64::from(v & 0xFFF) == want {
                entry = Some(e);
            }
        }
        pos += len;
    }
    let mut d = good.clone();
    let e = entry.expect("DIR64 entry of wrapper 1");
    d[e..e + 2].copy_from_slice(&0u16.to_le_bytes());
    assert_eq!(
        pe_codes(&d),
        vec![("pe-wrapper-unrelocated".to_owned(), slots[1].offset + 8)]
    );
    let mut d = good.clone();
    let p = slots[2].offset as usize + 8;
    let moved = u64::from_le_bytes(d[p..p + 8].try_into().unwrap()) + 0x10;
    d[p..p + 8].copy_from_slice(&moved.to_le_bytes());
    assert_eq!(
        pe_codes(&d),
        vec![("pe-wrapper-not-container".to_owned(), slots[2].offset + 8)]
    );
    let mut d = good.clone();
    let w = slots[0].offset as usize;
    d[w..w + 24].fill(0);
    assert_eq!(pe_codes(&d), vec![("pe-wrapper-count".to_owned(), 0)]);
}
