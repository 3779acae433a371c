//! The host-file reader (`offload_image::host`): sections, roles, wrappers and relocations
//! of real ELF files, checked against what the files hold and against `llvm-readelf-22`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_image::host::elf::{Elf64, Encoding};
use offload_image::host::{FileKind, HostFile, SectionRole, Sections};

/// Linked and relocatable host files of the corpus, made by clang-22 (`PROVENANCE.md`).
fn corpus_hosts() -> Vec<PathBuf> {
    let dir = common::corpus().join("driver");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus driver directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("exe" | "o")))
        .collect();
    out.sort();
    assert!(out.len() >= 8, "corpus driver files: {out:?}");
    out
}

/// `HIPF`, little-endian: the magic of a HIP fat-binary wrapper.
const HIP_WRAPPER_MAGIC: [u8; 4] = 0x4849_5046u32.to_le_bytes();

#[test]
fn roles_follow_section_names_and_wrappers_sit_where_the_reader_says() {
    let mut wrappers = 0;
    let mut fatbin_sections = 0;
    for path in corpus_hosts() {
        let data = std::fs::read(&path).expect("read corpus file");
        let sections = match Sections::parse(&data) {
            Some(Ok(s)) => s,
            other => panic!("{}: {other:?}", path.display()),
        };
        for s in sections.iter() {
            let s = s.expect("section header");
            let expected = match s.name {
                b".hip_fatbin" => SectionRole::HipFatbin,
                b".nv_fatbin" => SectionRole::NvFatbin,
                b".hipFatBinSegment" | b".nvFatBinSegment" => SectionRole::Wrappers,
                b"hip_offloading_entries" => SectionRole::Entries(4),
                b"omp_offloading_entries" | b"llvm_offload_entries" => SectionRole::Entries(1),
                n if n.starts_with(b".llvm.offloading") => SectionRole::Offloading,
                n if n.starts_with(b"__CLANG_OFFLOAD_BUNDLE__") => {
                    SectionRole::ObjectBundle(&n[b"__CLANG_OFFLOAD_BUNDLE__".len()..])
                }
                _ => SectionRole::Other,
            };
            assert_eq!(s.role(), expected, "{}: {:?}", path.display(), s);
            fatbin_sections += usize::from(s.role() == SectionRole::HipFatbin);
            // Every slice is the file's bytes at the section's offset.
            let at = s.data.as_ptr() as usize - data.as_ptr() as usize;
            if !s.data.is_empty() {
                assert_eq!(at as u64, s.offset, "{}", path.display());
            }
        }
        let host = HostFile::parse(&data).expect("host file");
        for slot in host.fat_binary_wrappers() {
            let at = slot.offset as usize;
            assert_eq!(
                data[at..at + 4],
                HIP_WRAPPER_MAGIC,
                "{}: wrapper {} at file offset {:#x}",
                path.display(),
                slot.index,
                slot.offset
            );
            assert_eq!(host.file_offset(slot.address), Some(slot.offset));
            wrappers += 1;
        }
    }
    assert!(wrappers >= 6, "wrappers seen: {wrappers}");
    assert!(
        fatbin_sections >= 6,
        ".hip_fatbin sections seen: {fatbin_sections}"
    );
}

/// One relocation as `llvm-readelf -r` prints it: (section, place, type, symbol index).
type Row = (String, u64, u32, u32);

/// The relocations `llvm-readelf-22 -r` lists, RELR places decoded.
fn readelf_relocations(path: &Path) -> Vec<Row> {
    let out = Command::new("llvm-readelf-22")
        .arg("-r")
        .arg(path)
        .output()
        .expect("run llvm-readelf-22");
    assert!(
        out.status.success(),
        "llvm-readelf-22 -r {}",
        path.display()
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut rows = Vec::new();
    let mut section = String::new();
    let mut relr = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Relocation section '") {
            section = rest.split('\'').next().unwrap_or_default().to_string();
            relr = section.contains("relr");
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if relr {
            // `Index: Entry Address [Symbolic Address]`
            let index = words.first().and_then(|w| w.strip_suffix(':'));
            // `Index: Entry Address [symbol]`, then one `Address [symbol]` line per
            // further place of a bitmap entry.
            let address = if index.is_some_and(|i| u64::from_str_radix(i, 16).is_ok()) {
                words.get(2)
            } else if line.starts_with("        ") {
                words.first()
            } else {
                None
            };
            if let Some(place) = address.and_then(|a| u64::from_str_radix(a, 16).ok()) {
                rows.push((section.clone(), place, 0, 0));
            }
        } else if words.len() >= 3 {
            let (Ok(place), Ok(info)) = (
                u64::from_str_radix(words[0], 16),
                u64::from_str_radix(words[1], 16),
            ) else {
                continue;
            };
            rows.push((section.clone(), place, info as u32, (info >> 32) as u32));
        }
    }
    rows
}

/// The relocations the reader gives, in the same shape.
fn our_relocations(data: &[u8]) -> Vec<Row> {
    let elf = Elf64::parse(data).expect("64-bit ELF");
    let sections = Sections::parse(data).unwrap().unwrap();
    elf.relocations()
        .map(|r| {
            let r = r.expect("relocation table inside the file");
            let name = sections.section(r.section).unwrap().name;
            let name = String::from_utf8_lossy(name).into_owned();
            match r.encoding {
                Encoding::Relr => (name, r.place, 0, 0),
                _ => (name, r.place, r.r_type, r.symbol),
            }
        })
        .collect()
}

/// A shared library whose relative relocations are packed (`SHT_RELR`), linked here.
fn relr_library(dir: &Path) -> PathBuf {
    let src = dir.join("relr.c");
    std::fs::write(
        &src,
        "static int a[64];\n\
         int *p[12] = {&a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7], &a[40], &a[9], &a[2], &a[63]};\n\
         int *q = &a[5];\nextern int e; int *r = &e;\n",
    )
    .unwrap();
    let lib = dir.join("librelr.so");
    let status = Command::new("clang-22")
        .args([
            "-shared",
            "-fPIC",
            "-fuse-ld=lld",
            "-Wl,-z,pack-relative-relocs",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&lib)
        .status()
        .expect("run clang-22");
    assert!(status.success());
    lib
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs llvm-readelf-22, clang-22 and lld-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn relocations_equal_llvm_readelf() {
    if !common::external("llvm-readelf-22, clang-22 and lld-22") {
        return;
    }
    let dir = tempdir();
    let mut files = corpus_hosts();
    files.push(relr_library(&dir));
    let mut relr = 0;
    for path in &files {
        let data = std::fs::read(path).unwrap();
        let ours = our_relocations(&data);
        let theirs = readelf_relocations(path);
        assert_eq!(ours, theirs, "{}", path.display());
        relr += ours.iter().filter(|r| r.0.contains("relr")).count();
        let kind = Elf64::parse(&data).unwrap().kind();
        let expect = if path.extension().is_some_and(|e| e == "o") {
            FileKind::Relocatable
        } else {
            FileKind::Executable
        };
        if path.starts_with(common::corpus()) {
            assert!(
                kind == expect || (expect == FileKind::Executable && kind == FileKind::Shared),
                "{}: {kind:?}",
                path.display()
            );
        }
    }
    assert!(relr >= 12, "RELR places compared: {relr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs llvm-readelf-22 and the fetched ROCm and NVIDIA libraries; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn relocations_of_real_libraries_equal_llvm_readelf() {
    if !common::external("llvm-readelf-22 and the fetched ROCm and NVIDIA libraries") {
        return;
    }
    let rocm = common::external_lib_dir();
    let external = common::external_dir();
    let mut compared = 0;
    for path in [
        rocm.join("librocrand.so.1.1"),
        external.join("nvidia/libcurand.so.10"),
    ] {
        assert!(
            path.exists(),
            "{} (scripts/setup.sh fetches it)",
            path.display()
        );
        let data = std::fs::read(&path).unwrap();
        let ours = our_relocations(&data);
        assert_eq!(ours, readelf_relocations(&path), "{}", path.display());
        compared += ours.len();
    }
    assert!(compared > 1000, "relocations compared: {compared}");
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("offload-image-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
