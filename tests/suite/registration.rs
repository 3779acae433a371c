//! The registration model against the spec (`REGISTRATION.md`) and the corpus: entry-table
//! layouts and their upgrade, descriptors, fat-binary wrappers and how their blobs are
//! bounded, static discovery in clang-built host files, and the simulated runtime.

use crate::common;

use common::{manifest, read_corpus, sha256, tool};
use offload_image::host::FileKind;
use offload_image::registration::view::{blob_len, c_string};
use offload_image::registration::{
    descriptors, AddressSpace, Descriptor, EntryLayout, EntryTable, FatbinWrapperView, GlobalKind,
    HostFile, RegistrationKind, Registry, RegistryOptions, SimulatedDevice, UnitId, WrapperKind,
};
use offload_image::Policy;
use offload_image::{ErrorKind, ReadOptions};

/// A hand-built address space: regions of bytes at addresses.
#[derive(Default)]
struct Mem {
    regions: Vec<(u64, Vec<u8>)>,
}

impl Mem {
    fn map(&mut self, at: u64, bytes: Vec<u8>) -> u64 {
        self.regions.push((at, bytes));
        at
    }
}

impl<'d> AddressSpace<'d> for &'d Mem {
    fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        self.regions.iter().find_map(|(base, b)| {
            let off = addr.checked_sub(*base)?;
            b.get(usize::try_from(off).ok()?..)
                .filter(|rest| !rest.is_empty())
        })
    }
}

fn p64(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

fn legacy_entry(addr: u64, name: u64, size: u64, flags: i32, data: i32) -> Vec<u8> {
    let mut e = Vec::new();
    e.extend(p64(addr));
    e.extend(p64(name));
    e.extend(p64(size));
    e.extend(flags.to_le_bytes());
    e.extend(data.to_le_bytes());
    assert_eq!(e.len(), 32);
    e
}

#[allow(clippy::too_many_arguments)]
fn entry(
    version: u16,
    kind: u16,
    flags: u32,
    addr: u64,
    name: u64,
    size: u64,
    data: u64,
) -> Vec<u8> {
    let mut e = Vec::new();
    e.extend(p64(0));
    e.extend(version.to_le_bytes());
    e.extend(kind.to_le_bytes());
    e.extend(flags.to_le_bytes());
    e.extend(p64(addr));
    e.extend(p64(name));
    e.extend(p64(size));
    e.extend(p64(data));
    e.extend(p64(0));
    assert_eq!(e.len(), 56);
    e
}

const NAMES: u64 = 0x1000;
const TABLE: u64 = 0x2000;

/// Names "alpha\0beta\0" at NAMES.
fn with_names() -> Mem {
    let mut m = Mem::default();
    m.map(NAMES, b"alpha\0beta\0".to_vec());
    m
}

#[test]
fn legacy_table_is_detected_by_its_non_null_first_word_and_upgraded_on_the_fly() {
    let mut m = with_names();
    let mut t = legacy_entry(0x5000, NAMES, 0, 0, 0);
    t.extend(legacy_entry(0x5008, NAMES + 6, 16, 0x01, -1));
    m.map(TABLE, t);
    let m = &m;
    let table = EntryTable::read(&m, TABLE, TABLE + 64, 100).unwrap();
    assert_eq!((table.layout, table.count), (EntryLayout::Legacy, 2));
    let e: Vec<_> = table.iter(&m).map(Result::unwrap).collect();
    // §1.3: Version 1, Kind OpenMP, Data sign-extended, AuxAddr null.
    assert!(e
        .iter()
        .all(|e| e.legacy && e.version == 1 && e.kind == 1 && e.aux_addr == 0));
    assert_eq!(
        (e[0].address, e[0].size, e[0].global_kind()),
        (0x5000, 0, GlobalKind::Kernel)
    );
    assert_eq!((e[1].size, e[1].flags, e[1].data), (16, 1, u64::MAX));
    assert_eq!(e[1].global_kind(), GlobalKind::Variable);
    assert_eq!(e[0].name(&m).unwrap(), b"alpha");
    assert_eq!(e[1].name(&m).unwrap(), b"beta");
}

#[test]
fn current_table_skips_zero_records_and_keeps_kind_flags_and_version_0() {
    let mut m = with_names();
    let mut t = entry(1, 4, 0x10, 0x5000, NAMES, 4, 0); // HIP (LLVM 21 numbering) __constant__
    t.extend(vec![0; 56]); // an all-zero record (COFF marker, padding)
    t.extend(entry(0, 1, 0x10, 0, 0, 0, 0x008)); // requires USM, Version 0 as in LLVM's tests
    t.extend(entry(1, 3, 0x01, 0x5008, NAMES + 6, 8, 16)); // HIP (LLVM 20 numbering) managed
    m.map(TABLE, t);
    let m = &m;
    let table = EntryTable::read(&m, TABLE, TABLE + 4 * 56, 100).unwrap();
    assert_eq!((table.layout, table.count), (EntryLayout::Current, 4));
    let e: Vec<_> = table.iter(&m).map(Result::unwrap).collect();
    assert_eq!(e.len(), 3, "the all-zero record is skipped");
    assert_eq!(e[0].global_kind(), GlobalKind::Variable);
    assert!(e[1].is_requires() && e[1].version == 0);
    assert_eq!((e[1].global_kind(), e[1].data), (GlobalKind::Requires, 8));
    assert_eq!(e[2].global_kind(), GlobalKind::Managed);
    assert_eq!(e[0].offload_kind(), e[2].offload_kind(), "HIP is 3 or 4");
}

#[test]
fn malformed_tables_are_refused() {
    let mut m = with_names();
    // Legacy table of 2 entries whose first `addr` is null: read as current (LLVM has the
    // same weakness, §1.3), and 64 bytes are not a whole number of 56-byte entries.
    let mut t = legacy_entry(0, NAMES, 0, 0, 0);
    t.extend(legacy_entry(0x5000, NAMES, 0, 0, 0));
    m.map(TABLE, t);
    let m = &m;
    let err = EntryTable::read(&m, TABLE, TABLE + 64, 100).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Malformed);
    assert_eq!(
        EntryTable::read(&m, TABLE + 32, TABLE, 100)
            .unwrap_err()
            .kind(),
        ErrorKind::Malformed,
        "end before begin"
    );
    assert_eq!(
        EntryTable::read(&m, TABLE + 32, TABLE + 32 * 4, 100)
            .unwrap_err()
            .kind(),
        ErrorKind::Truncated,
        "table runs past its region"
    );
    assert_eq!(
        EntryTable::read(&m, TABLE, TABLE + 64, 1)
            .unwrap_err()
            .kind(),
        ErrorKind::Malformed,
        "null first addr: current layout, bad stride"
    );
    assert!(EntryTable::read(&m, TABLE, TABLE, 100).unwrap().is_empty());
    // A name without NUL in its region.
    let mut m2 = Mem::default();
    m2.map(NAMES, b"abc".to_vec());
    assert_eq!(
        c_string(&&m2, NAMES).unwrap_err().kind(),
        ErrorKind::Truncated
    );
}

#[test]
fn hip_and_cuda_wrappers_are_checked_like_the_runtimes_do() {
    let bundle = read_corpus("bundles/hip_6arch.bundle");
    let blob_at = 0x10000;
    let wrapper = |magic: u32, version: u32, binary: u64| {
        let mut w = Vec::new();
        w.extend(magic.to_le_bytes());
        w.extend(version.to_le_bytes());
        w.extend(p64(binary));
        w.extend(p64(0));
        w
    };
    let mut m = Mem::default();
    // The bundle followed directly by another blob: the wrapper's blob ends where its own
    // header says, not at the region's end and not at the next magic.
    let mut region = bundle.clone();
    region.extend(read_corpus("compressed/hip_6arch.zstd.ccob"));
    m.map(blob_at, region);
    m.map(0x100, wrapper(0x4849_5046, 1, blob_at));
    m.map(0x200, wrapper(0x4849_5046, 2, blob_at));
    m.map(0x300, wrapper(0x4B50_4948, 1, blob_at));
    m.map(0x400, wrapper(0x4662_43B1, 2, blob_at));
    m.map(0x500, wrapper(0x4849_5046, 1, 0));
    m.map(
        0x600,
        wrapper(0x4849_5046, 1, blob_at + bundle.len() as u64),
    );
    let m = &m;
    let options = ReadOptions::default();
    let w = FatbinWrapperView::read(&m, 0x100).unwrap();
    assert_eq!((w.kind, w.binary), (WrapperKind::Hip, blob_at));
    assert_eq!(w.fat_binary(&m, &options).unwrap(), &bundle[..]);
    assert_eq!(
        FatbinWrapperView::read(&m, 0x200).unwrap_err().kind(),
        ErrorKind::UnsupportedVersion
    );
    assert_eq!(
        FatbinWrapperView::read(&m, 0x300).unwrap_err().kind(),
        ErrorKind::BadMagic
    );
    assert_eq!(
        FatbinWrapperView::read(&m, 0x400).unwrap().kind,
        WrapperKind::Cuda
    );
    let null = FatbinWrapperView::read(&m, 0x500).unwrap();
    assert_eq!(
        null.fat_binary(&m, &options).unwrap_err().kind(),
        ErrorKind::OutOfBounds
    );
    // A CCOB is bounded by its total size (FORMATS.md §5.5).
    let ccob = read_corpus("compressed/hip_6arch.zstd.ccob");
    let w = FatbinWrapperView::read(&m, 0x600).unwrap();
    assert_eq!(w.fat_binary(&m, &options).unwrap(), &ccob[..]);
    // A bundle whose region is cut short is truncated, not read past its bound.
    let mut cut = Mem::default();
    cut.map(blob_at, bundle[..bundle.len() - 100].to_vec());
    cut.map(0x100, wrapper(0x4849_5046, 1, blob_at));
    let cut = &cut;
    let e = FatbinWrapperView::read(&cut, 0x100)
        .unwrap()
        .fat_binary(&cut, &options)
        .unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Truncated | ErrorKind::OutOfBounds),
        "{e}"
    );
}

#[test]
fn a_bare_device_elf_is_as_long_as_its_furthest_table_or_section() {
    let options = ReadOptions::default();
    for f in [
        "devobj/saxpy.gfx90a.co",
        "devobj/saxpy.gfx1030.co",
        "devobj/saxpy.sm_80.cubin",
    ] {
        let mut b = read_corpus(f);
        let len = b.len() as u64;
        b.extend([0xAA; 64]);
        assert_eq!(blob_len(&b, &options).unwrap(), len, "{f}");
    }
    let host = read_corpus("devobj/host.x86_64.o");
    assert_eq!(
        blob_len(&host, &options).unwrap_err().kind(),
        ErrorKind::BadMagic
    );
}

fn devices(names: &[&str]) -> Vec<SimulatedDevice> {
    names
        .iter()
        .map(|d| SimulatedDevice::parse(d).unwrap())
        .collect()
}

/// A descriptor at 0x100 over `images` (each mapped at its own address) and a legacy table.
fn descriptor(m: &mut Mem, images: &[Vec<u8>]) -> u64 {
    let mut names = b"k\0".to_vec();
    names.resize(8, 0);
    m.map(NAMES, names);
    m.map(TABLE, legacy_entry(0x9000, NAMES, 0, 0, 0));
    let mut array = Vec::new();
    for (i, img) in images.iter().enumerate() {
        let at = 0x100_0000 * (i as u64 + 1);
        m.map(at, img.clone());
        array.extend(p64(at));
        array.extend(p64(at + img.len() as u64));
        array.extend(p64(TABLE));
        array.extend(p64(TABLE + 32));
    }
    m.map(0x800, array);
    let mut d = Vec::new();
    d.extend((images.len() as i32).to_le_bytes());
    d.extend([0; 4]);
    d.extend(p64(0x800));
    d.extend(p64(TABLE));
    d.extend(p64(TABLE + 32));
    m.map(0x100, d)
}

#[test]
fn register_lib_unwraps_offload_binaries_and_takes_the_first_compatible_image() {
    let any = read_corpus("devobj/saxpy.gfx90a.co");
    let offbin = read_corpus("packager/amdgcn_gfx90a_xnack+.openmp.offbin");
    let inner_sha = manifest()
        .into_iter()
        .find(|r| {
            r["file"] == "packager/amdgcn_gfx90a_xnack+.openmp.offbin" && r["record"] == "image"
        })
        .unwrap()["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let mut m = Mem::default();
    let desc = descriptor(&mut m, &[any.clone(), offbin]);
    let m = &m;
    let d = Descriptor::read(&m, desc, &ReadOptions::default()).unwrap();
    assert_eq!(
        (d.num_device_images, d.entries.layout),
        (2, EntryLayout::Legacy)
    );
    for policy in [None, Some(Policy::Best)] {
        let mut r = Registry::new(
            devices(&["gfx90a:xnack+", "gfx90a:xnack-", "gfx906"]),
            RegistryOptions {
                policy,
                ..RegistryOptions::default()
            },
        );
        let id = r.register_lib(&m, desc).unwrap();
        let reg = r.get(id).unwrap();
        assert_eq!(reg.kind(), RegistrationKind::OpenMp);
        let images = reg.images();
        assert_eq!(sha256(images[0].bytes), sha256(&any));
        assert_eq!(
            sha256(images[1].bytes),
            inner_sha,
            "the OffloadBinary's inner image"
        );
        assert_eq!(images[1].target_id, Some("gfx90a:xnack+"));
        let chosen: Vec<_> = (0..3).map(|d| reg.choice(d).unwrap().chosen()).collect();
        match policy {
            // LLVM offload: first compatible in descriptor order (REGISTRATION.md §3.2 step 5).
            None => assert_eq!(chosen, [Some(0), Some(0), None]),
            // The ranking prefers the exact xnack+ image (COMPATIBILITY.md §10 k2).
            _ => assert_eq!(chosen, [Some(1), Some(0), None]),
        }
        assert_eq!(reg.entries().len(), 1);
        assert_eq!(reg.entries()[0].name, b"k");
        // Registering the same descriptor again counts; two unregistrations end it.
        assert_eq!(r.register_lib(&m, desc).unwrap(), id);
        assert_eq!(r.unregister_lib(desc), Some((id, false)));
        assert_eq!(r.unregister_lib(desc), Some((id, true)));
        assert_eq!(r.unregister_lib(desc), None);
    }
}

#[test]
fn contradicting_requirements_are_refused() {
    let img = read_corpus("devobj/saxpy.gfx90a.co");
    let mk = |req: u64| {
        let mut m = Mem::default();
        m.map(0x1_0000, img.clone());
        m.map(TABLE, entry(1, 1, 0x10, 0, 0, 0, req));
        let mut array = Vec::new();
        for v in [0x1_0000, 0x1_0000 + img.len() as u64, TABLE, TABLE + 56] {
            array.extend(p64(v));
        }
        m.map(0x800, array);
        let mut d = 1i32.to_le_bytes().to_vec();
        d.extend([0; 4]);
        for v in [0x800, TABLE, TABLE + 56] {
            d.extend(p64(v));
        }
        m.map(0x100, d);
        m
    };
    let (usm, none) = (mk(0x008), mk(0x001));
    let (usm, none) = (&usm, &none);
    let mut r = Registry::new(devices(&["gfx90a"]), RegistryOptions::default());
    let id = r.register_lib(&usm, 0x100).unwrap();
    assert_eq!(r.get(id).unwrap().requires(), Some(0x008));
    assert_eq!(r.requires(), Some(0x008));
    // A second module without unified shared memory contradicts the first.
    let mut r2 = Registry::new(devices(&["gfx90a"]), RegistryOptions::default());
    r2.register_lib(&usm, 0x100).unwrap();
    r2.unregister_lib(0x100);
    let e = r2.register_lib(&none, 0x100).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
}

#[test]
fn fat_binary_registration_counts_and_binds_globals() {
    let bundle = read_corpus("bundles/hip_6arch.bundle");
    let mut m = Mem::default();
    m.map(0x10000, bundle);
    let mut w = 0x4849_5046u32.to_le_bytes().to_vec();
    w.extend(1u32.to_le_bytes());
    w.extend(p64(0x10000));
    w.extend(p64(0));
    m.map(0x100, w.clone());
    m.map(0x200, w); // a second wrapper of the same blob
    let m = &m;
    let mut r = Registry::new(
        devices(&["gfx942:sramecc+:xnack-"]),
        RegistryOptions::default(),
    );
    let id = r.register_fat_binary(&m, 0x100).unwrap();
    assert_eq!(
        r.register_fat_binary(&m, 0x200).unwrap(),
        id,
        "keyed on the binary"
    );
    assert_eq!(r.get(id).unwrap().count(), 2);
    r.register_function(id, 0x9000, b"_Z5saxpy").unwrap();
    r.register_var(id, 0x9100, b"table", 64, true, true)
        .unwrap();
    let reg = r.get(id).unwrap();
    let images = reg.images();
    let chosen = images[reg.choice(0).unwrap().chosen().unwrap()];
    assert_eq!(
        chosen.entry_id,
        Some("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-")
    );
    let kinds: Vec<_> = reg
        .entries()
        .iter()
        .map(|e| (e.kind, e.flags, e.size))
        .collect();
    assert_eq!(
        kinds,
        [
            (GlobalKind::Kernel, 0, 0),
            (GlobalKind::Variable, 0x08 | 0x10, 64)
        ]
    );
    assert!(!r.unregister_fat_binary(id).unwrap());
    assert!(r.unregister_fat_binary(id).unwrap());
    assert!(
        r.register_function(id, 0, b"late").is_err(),
        "unit no longer registered"
    );
    // A malformed blob registers (CLR records the pointer) but gives no device an image.
    let mut bad = Mem::default();
    bad.map(
        0x10000,
        b"__CLANG_OFFLOAD_BUNDLE__\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(),
    );
    let mut w = 0x4849_5046u32.to_le_bytes().to_vec();
    w.extend(1u32.to_le_bytes());
    w.extend(p64(0x10000));
    w.extend(p64(0));
    bad.map(0x100, w);
    let bad = &bad;
    let mut r = Registry::new(devices(&["gfx906"]), RegistryOptions::default());
    let id = r.register_fat_binary(&bad, 0x100).unwrap();
    let reg = r.get(id).unwrap();
    assert!(reg.error().is_some());
    assert_eq!(reg.choice(0).unwrap().chosen(), None);
}

#[test]
fn hip_object_wrapper_is_resolved_through_its_rela_section() {
    let data = read_corpus("driver/hip_nonrdc.o");
    let elf = HostFile::parse(&data).unwrap();
    assert_eq!(elf.kind(), FileKind::Relocatable);
    let slots = elf.fat_binary_wrappers();
    assert_eq!(slots.len(), 1);
    assert_eq!(slots[0].symbol, Some(&b"__hip_fatbin_wrapper"[..]));
    assert!(!slots[0].is_new_driver());
    let w = FatbinWrapperView::read(&elf, slots[0].address).unwrap();
    let (section, offset) = elf.section_at(w.binary).unwrap();
    assert_eq!((section.name, offset), (&b".hip_fatbin"[..], 0));
    let blob = w.fat_binary(&elf, &ReadOptions::default()).unwrap();
    // One translation unit: the bundle is the whole section (last payload 12288 + 5592).
    assert!(blob.starts_with(b"__CLANG_OFFLOAD_BUNDLE__"));
    assert_eq!(blob, section.data);
    assert_eq!(blob.len(), 12288 + 5592);
}

#[test]
fn hip_rdc_object_points_at_a_symbol_the_device_link_defines() {
    let data = read_corpus("driver/hip_rdc.o");
    let elf = HostFile::parse(&data).unwrap();
    let slot = elf.fat_binary_wrappers()[0];
    let e = FatbinWrapperView::read(&elf, slot.address).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds);
    let sym = elf.undefined_target(slot.address + 8).unwrap();
    assert!(
        sym.starts_with(b"__hip_fatbin_"),
        "{}",
        String::from_utf8_lossy(sym)
    );
}

#[test]
fn pie_wrapper_is_resolved_through_relative_relocations() {
    for (file, new_driver) in [
        ("driver/hip_nonrdc.exe", false),
        ("driver/hip_newdrv_rdc.exe", true),
    ] {
        let data = read_corpus(file);
        let elf = HostFile::parse(&data).unwrap();
        assert_eq!(elf.kind(), FileKind::Shared);
        let slot = elf.fat_binary_wrappers()[0];
        assert_eq!(slot.is_new_driver(), new_driver, "{file}");
        // R_X86_64_RELATIVE gives the section's address (load base 0).
        let w = FatbinWrapperView::read(&elf, slot.address).unwrap();
        assert_eq!(
            Some(w.binary),
            elf.section_by_name(b".hip_fatbin").map(|s| s.address),
            "{file}"
        );
    }
    // The new driver's entry table: one legacy entry naming the kernel's host handle.
    let data = read_corpus("driver/hip_newdrv_rdc.exe");
    let elf = HostFile::parse(&data).unwrap();
    let t = elf.entry_sections();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].name, b"hip_offloading_entries");
    let table = EntryTable::read(&elf, t[0].begin, t[0].end, 100).unwrap();
    let e: Vec<_> = table.iter(&elf).map(Result::unwrap).collect();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].name(&elf).unwrap(), b"_Z5scalePff");
    assert_eq!(
        elf.symbol_at(e[0].address),
        Some(&b"_Z5scalePff"[..]),
        "the host handle"
    );
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs llvm-objcopy-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn openmp_descriptor_is_found_by_structure_even_when_stripped() {
    if !common::external("llvm-objcopy-22") {
        return;
    }
    let data = read_corpus("driver/omp_amd.exe");
    let image = manifest()
        .into_iter()
        .find(|r| r["file"] == "driver/omp_amd.exe" && r["record"] == "image")
        .unwrap();
    let dir = common::scratch("registration-strip");
    let stripped = dir.join("omp_amd.stripped");
    let status = std::process::Command::new(tool("llvm-objcopy-22"))
        .arg("--strip-all")
        .arg(common::corpus().join("driver/omp_amd.exe"))
        .arg(&stripped)
        .status()
        .unwrap();
    assert!(status.success());
    let stripped = std::fs::read(stripped).unwrap();
    for (data, symbols) in [(&data, true), (&stripped, false)] {
        let elf = HostFile::parse(data).unwrap();
        let options = ReadOptions::default();
        let descs = descriptors(&elf, &options);
        assert_eq!(descs.len(), 1);
        if symbols {
            assert_eq!(
                elf.symbol_at(descs[0]),
                Some(&b".omp_offloading.descriptor"[..])
            );
        } else {
            assert_eq!(elf.symbol_at(descs[0]), None);
        }
        let d = Descriptor::read(&elf, descs[0], &options).unwrap();
        assert_eq!(d.num_device_images, 1);
        let img = d.images(&elf).next().unwrap().unwrap();
        // LLVM 19's linker wrapper already points at the inner image of the OffloadBinary
        // in .llvm.offloading (REGISTRATION.md §1.9 dates this to "newest" sources).
        let bytes = img.bytes(&elf).unwrap();
        assert_eq!(sha256(bytes), image["sha256"].as_str().unwrap());
        assert_eq!(
            img.image_start - elf.section_by_name(b".llvm.offloading").unwrap().address,
            image["offset"].as_u64().unwrap()
        );
        let e: Vec<_> = d.entries.iter(&elf).map(Result::unwrap).collect();
        assert_eq!(d.entries.layout, EntryLayout::Legacy);
        assert_eq!(e.len(), 1);
        assert_eq!(
            e[0].name(&elf).unwrap(),
            b"__omp_offloading_fe00_5100a5_omp_saxpy_l3"
        );
        assert_eq!(e[0].global_kind(), GlobalKind::Kernel);
    }
}

/// A nested OffloadBinary (made by clang-offload-packager-22 around another one) is
/// unwrapped to the innermost image, with the innermost metadata (§1.9: "recursing at most
/// a small fixed depth").
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-packager-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn nested_offload_binaries_are_unwrapped_to_the_innermost_image() {
    use offload_image::registration::view::unwrap_image;
    use offload_image::registration::UnwrappedImage;
    if !common::external("clang-offload-packager-22") {
        return;
    }
    let dir = common::scratch("registration-nested");
    let inner = common::corpus().join("packager/amdgcn_gfx90a_xnack+.openmp.offbin");
    let outer = dir.join("nested.offbin");
    let status = std::process::Command::new(tool("clang-offload-packager-22"))
        .arg("-o")
        .arg(&outer)
        .arg(format!(
            "--image=file={},triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=openmp",
            inner.display()
        ))
        .status()
        .unwrap();
    assert!(status.success());
    let outer = std::fs::read(outer).unwrap();
    let want = manifest()
        .into_iter()
        .find(|r| {
            r["file"] == "packager/amdgcn_gfx90a_xnack+.openmp.offbin" && r["record"] == "image"
        })
        .unwrap();
    let UnwrappedImage::Entry(e) = unwrap_image(&outer, &ReadOptions::default().limits) else {
        panic!("not unwrapped");
    };
    assert_eq!(sha256(e.image), want["sha256"].as_str().unwrap());
    assert_eq!(
        e.strings.get_str("arch"),
        Some("gfx90a:xnack+"),
        "the innermost metadata"
    );
    // Through a descriptor: gfx90a:xnack- is refused (the inner image is xnack+), although
    // the outer wrapper claims plain gfx90a.
    let mut m = Mem::default();
    let desc = descriptor(&mut m, &[outer]);
    let m = &m;
    let mut r = Registry::new(
        devices(&["gfx90a:xnack-", "gfx90a:xnack+"]),
        RegistryOptions::default(),
    );
    let id = r.register_lib(&m, desc).unwrap();
    let reg = r.get(id).unwrap();
    assert_eq!(reg.choice(0).unwrap().chosen(), None);
    assert_eq!(reg.choice(1).unwrap().chosen(), Some(0));
    assert!(matches!(
        unwrap_image(b"\x7fELF", &ReadOptions::default().limits),
        UnwrappedImage::Raw(_)
    ));
}

/// A fixed-address executable (`ET_EXEC`, x86-64) with only a section table: `sections` are
/// (name, flags, address, contents); what `HostElf` reads of a linked file.
fn exec_with_sections(sections: &[(&str, u64, u64, Vec<u8>)]) -> Vec<u8> {
    const SHT_PROGBITS: u32 = 1;
    const SHT_STRTAB: u32 = 3;
    let mut names = vec![0u8];
    let mut name_at = Vec::new();
    for (name, ..) in sections {
        name_at.push(u32::try_from(names.len()).unwrap());
        names.extend(name.as_bytes());
        names.push(0);
    }
    let shstrtab_name = u32::try_from(names.len()).unwrap();
    names.extend(b".shstrtab\0");
    let mut file = vec![0u8; 64];
    let mut headers = vec![[0u8; 64]]; // the null section
    let mut header = |name: u32, ty: u32, flags: u64, addr: u64, offset: usize, size: usize| {
        let mut h = [0u8; 64];
        h[0..4].copy_from_slice(&name.to_le_bytes());
        h[4..8].copy_from_slice(&ty.to_le_bytes());
        h[8..16].copy_from_slice(&flags.to_le_bytes());
        h[16..24].copy_from_slice(&addr.to_le_bytes());
        h[24..32].copy_from_slice(&(offset as u64).to_le_bytes());
        h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
        h[48..56].copy_from_slice(&1u64.to_le_bytes());
        headers.push(h);
    };
    for ((_, flags, addr, data), name) in sections.iter().zip(&name_at) {
        header(*name, SHT_PROGBITS, *flags, *addr, file.len(), data.len());
        file.extend(data);
    }
    header(shstrtab_name, SHT_STRTAB, 0, 0, file.len(), names.len());
    file.extend(&names);
    while !file.len().is_multiple_of(8) {
        file.push(0);
    }
    let shoff = file.len() as u64;
    let shnum = u16::try_from(headers.len()).unwrap();
    for h in &headers {
        file.extend(h);
    }
    let mut eh = Vec::new();
    eh.extend(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    eh.extend(2u16.to_le_bytes()); // ET_EXEC
    eh.extend(62u16.to_le_bytes()); // EM_X86_64
    eh.extend(1u32.to_le_bytes());
    eh.extend(0u64.to_le_bytes()); // e_entry
    eh.extend(0u64.to_le_bytes()); // e_phoff
    eh.extend(shoff.to_le_bytes());
    eh.extend(0u32.to_le_bytes()); // e_flags
    eh.extend(64u16.to_le_bytes()); // e_ehsize
    eh.extend(56u16.to_le_bytes()); // e_phentsize
    eh.extend(0u16.to_le_bytes()); // e_phnum
    eh.extend(64u16.to_le_bytes()); // e_shentsize
    eh.extend(shnum.to_le_bytes());
    eh.extend((shnum - 1).to_le_bytes()); // e_shstrndx
    file[..64].copy_from_slice(&eh);
    file
}

const ALLOC: u64 = 2;
const ALLOC_WRITE: u64 = 3;

/// Thousands of offload-entry sections over a megabyte of writable data, in a fixed-address
/// executable (every word a candidate pointer): the descriptors found are exactly the three
/// real ones, and decoy slots (a table's start at +16 of something that is not a
/// descriptor) are rejected. The search indexes the slots by value once; before, it scanned
/// all writable words once per entry section (0.83 s in release for this shape, growing
/// with the product).
#[test]
fn descriptors_among_thousands_of_entry_sections_and_a_megabyte_of_data() {
    const TABLES: u64 = 8000;
    const IMAGE: u64 = 0x1_0000;
    const ENTRIES: u64 = 0x10_0000;
    const DATA: u64 = 0x100_0000;
    const NAMES: u64 = 0x2_0000;
    let mut sections = vec![
        (".llvm.offloading", ALLOC, IMAGE, vec![0x5a; 64]),
        (".rodata", ALLOC, NAMES, b"symbol\0".to_vec()),
    ];
    let table_at = |i: u64| ENTRIES + i * 32;
    for i in 0..TABLES {
        // One legacy entry (its non-null address marks the layout).
        let e = legacy_entry(0x3_0000 + i, NAMES, 0, 0, 0);
        sections.push(("omp_offloading_entries", ALLOC_WRITE, table_at(i), e));
    }
    let mut data = vec![0u8; 1 << 20];
    let mut put = |at: u64, words: &[u64]| {
        let off = usize::try_from(at - DATA).unwrap();
        for (k, w) in words.iter().enumerate() {
            data[off + 8 * k..off + 8 * k + 8].copy_from_slice(&w.to_le_bytes());
        }
    };
    // Decoys: every table's start stored at +16 of a record with no images.
    for i in 0..TABLES {
        let at = DATA + 0x1000 + i * 64;
        put(at, &[0, 0, table_at(i), table_at(i) + 32]);
    }
    // Three descriptors (for tables 7, 4000 and 7999), each with one image whose entry
    // range is its table.
    let mut expected = Vec::new();
    for (k, t) in [7u64, 4000, 7999].into_iter().enumerate() {
        let desc = DATA + 0x9_0000 + 64 * k as u64;
        let array = DATA + 0xa_0000 + 64 * k as u64;
        put(desc, &[1, array, table_at(t), table_at(t) + 32]);
        put(array, &[IMAGE, IMAGE + 64, table_at(t), table_at(t) + 32]);
        expected.push(desc);
    }
    sections.push((".data", ALLOC_WRITE, DATA, data));
    let file = exec_with_sections(&sections);
    let elf = HostFile::parse(&file).unwrap();
    assert_eq!(elf.kind(), FileKind::Executable);
    assert_eq!(elf.entry_sections().len(), TABLES as usize);
    let found = descriptors(&elf, &ReadOptions::default());
    assert_eq!(found, expected);
    // They register, each with its one entry, through the file as an address space.
    let mut registry = Registry::new(devices(&["gfx90a"]), RegistryOptions::default());
    for d in &found {
        let id = registry.register_lib(&elf, *d).unwrap();
        let reg = registry.get(id).unwrap();
        assert_eq!(reg.entries().len(), 1);
        assert_eq!(reg.entries()[0].name, b"symbol");
    }
}

/// Twenty thousand HIP wrappers, each pointing at its own (empty) bundle: twenty thousand
/// units; registering a wrapper of an already registered fat binary counts it, and after
/// it is unregistered as often as registered, registering it again makes a new unit. The
/// registry finds registered units by key; before, every registration scanned all units.
#[test]
fn twenty_thousand_fat_binaries_register_as_distinct_units() {
    const N: u64 = 20_000;
    const WRAPPERS: u64 = 0x10_0000;
    const BUNDLES: u64 = 0x100_0000;
    let mut wrappers = Vec::new();
    let mut bundles = Vec::new();
    for i in 0..N {
        wrappers.extend(0x4849_5046u32.to_le_bytes());
        wrappers.extend(1u32.to_le_bytes());
        wrappers.extend(p64(BUNDLES + 32 * i));
        wrappers.extend(p64(0));
        bundles.extend(b"__CLANG_OFFLOAD_BUNDLE__");
        bundles.extend(p64(0));
    }
    let file = exec_with_sections(&[
        (".hipFatBinSegment", ALLOC_WRITE, WRAPPERS, wrappers),
        (".hip_fatbin", ALLOC, BUNDLES, bundles),
    ]);
    let elf = HostFile::parse(&file).unwrap();
    let slots = elf.fat_binary_wrappers();
    assert_eq!(slots.len(), N as usize);
    let mut registry = Registry::new(devices(&["gfx90a"]), RegistryOptions::default());
    let ids: Vec<_> = slots
        .iter()
        .map(|s| registry.register_fat_binary(&elf, s.address).unwrap())
        .collect();
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), N as usize);
    let last = *ids.last().unwrap();
    let reg = registry.get(last).unwrap();
    assert_eq!(reg.binary(), BUNDLES + 32 * (N - 1));
    assert!(reg.error().is_none(), "{:?}", reg.error());
    assert!(reg.images().is_empty(), "an empty bundle holds no images");
    // A second registration of the same fat binary counts.
    let again = registry
        .register_fat_binary(&elf, slots.last().unwrap().address)
        .unwrap();
    assert_eq!(again, last);
    assert_eq!(registry.get(last).unwrap().count(), 2);
    assert!(!registry.unregister_fat_binary(last).unwrap());
    assert!(registry.unregister_fat_binary(last).unwrap());
    // No longer registered: the next registration is a new unit.
    let fresh = registry
        .register_fat_binary(&elf, slots.last().unwrap().address)
        .unwrap();
    assert_ne!(fresh, last);
    // A removed unit is forgotten too.
    assert!(registry.remove(fresh).is_some());
    let newer = registry
        .register_fat_binary(&elf, slots.last().unwrap().address)
        .unwrap();
    assert_ne!(newer, fresh);
}

/// Every new-driver wrapper binds the whole entry table, so wrappers × entries could grow
/// without bound; the entries bound from tables, all units together, stop at
/// `limits.max_entries` with a limit error at the table, and nothing of the refused table
/// is bound.
#[test]
fn entries_bound_from_tables_are_limited_across_units() {
    let mut m = with_names();
    let mut table = Vec::new();
    for i in 0..3 {
        table.extend(entry(1, 4, 0, 0x5000 + i, NAMES, 0, 0));
    }
    m.map(TABLE, table);
    let mut wrappers = Vec::new();
    for blob in [0x10000u64, 0x10100] {
        wrappers.extend(0x4849_5046u32.to_le_bytes());
        wrappers.extend(1u32.to_le_bytes());
        wrappers.extend(p64(blob));
        wrappers.extend(p64(0));
        let mut empty = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
        empty.extend(p64(0));
        m.map(blob, empty);
    }
    m.map(0x100, wrappers);
    let m = &m;
    let read = ReadOptions {
        limits: offload_image::Limits {
            max_entries: 5,
            ..offload_image::Limits::DEFAULT
        },
        ..ReadOptions::default()
    };
    let table = EntryTable::read(&m, TABLE, TABLE + 3 * 56, read.limits.max_entries).unwrap();
    assert_eq!(table.count, 3);
    let options = RegistryOptions {
        read,
        ..RegistryOptions::default()
    };
    let mut r = Registry::new(devices(&["gfx90a"]), options);
    let a = r.register_fat_binary(&m, 0x100).unwrap();
    let b = r.register_fat_binary(&m, 0x118).unwrap();
    assert_ne!(a, b);
    r.add_entries(a, &m, &table, 4).unwrap();
    assert_eq!(r.get(a).unwrap().entries().len(), 3);
    let e = r.add_entries(b, &m, &table, 4).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    assert_eq!(e.offset(), TABLE);
    assert!(r.get(b).unwrap().entries().is_empty());
    // Under the default limit both units bind the table.
    let mut r = Registry::new(devices(&["gfx90a"]), RegistryOptions::default());
    let a = r.register_fat_binary(&m, 0x100).unwrap();
    let b = r.register_fat_binary(&m, 0x118).unwrap();
    r.add_entries(a, &m, &table, 4).unwrap();
    r.add_entries(b, &m, &table, 4).unwrap();
    assert_eq!(r.get(b).unwrap().entries().len(), 3);
}

/// `release` drops a unit's images (the decompressed content of a compressed bundle with
/// them) and keeps what a runtime keeps after loading: the count and key, the entries and
/// every device's choice.
#[test]
fn release_keeps_choices_entries_and_count_but_drops_the_images() {
    let ccob = read_corpus("compressed/hip_6arch.v3-zstd.llvm22.ccob");
    let mut m = Mem::default();
    m.map(0x10000, ccob);
    let mut w = 0x4849_5046u32.to_le_bytes().to_vec();
    w.extend(1u32.to_le_bytes());
    w.extend(p64(0x10000));
    w.extend(p64(0));
    m.map(0x100, w.clone());
    m.map(0x200, w);
    let m = &m;
    let mut r = Registry::new(
        devices(&["gfx90a:xnack-", "gfx1100"]),
        RegistryOptions::default(),
    );
    let id = r.register_fat_binary(&m, 0x100).unwrap();
    r.register_function(id, 0x9000, b"_Z4kernv").unwrap();
    let before = r.get(id).unwrap().clone();
    assert!(!before.images().is_empty());
    assert!(before.choice(0).unwrap().chosen().is_some());
    assert!(before.choice(1).unwrap().chosen().is_some());
    assert!(r.release(id));
    let after = r.get(id).unwrap();
    assert!(after.images().is_empty());
    assert!(r.explain(after, 0).is_empty());
    for d in 0..2 {
        assert_eq!(
            after.choice(d).unwrap().chosen(),
            before.choice(d).unwrap().chosen()
        );
    }
    assert_eq!(after.entries(), before.entries());
    // Still registered under its key: the second wrapper of the same blob counts.
    assert_eq!(r.register_fat_binary(&m, 0x200).unwrap(), id);
    assert_eq!(r.get(id).unwrap().count(), 2);
    assert!(!r.release(UnitId(99)));
}
