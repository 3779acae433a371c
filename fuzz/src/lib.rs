//! Shared code of the fuzz targets: the `loader-sim list`, `select` and `register` paths over
//! untrusted bytes, with the invariants the library promises asserted (a failed assertion is
//! a fuzzing crash): images lie inside the input or inside decompressed content, the chosen
//! image is compatible and ranked best, views hand out bytes of the memory they were given.

use offload_image::arch::{EntryId, Triple};
use offload_image::container::UnitContent;
use offload_image::{for_each_unit, Error, Image, Limits, ReadOptions};

/// The options the targets read with: the library's defaults except a 64 MiB decompressed
/// size limit, so that a legitimate 1 GiB expansion does not dominate a fuzzing run.
pub fn options() -> ReadOptions {
    ReadOptions {
        limits: Limits {
            max_decompressed_size: 64 << 20,
            ..Limits::DEFAULT
        },
        verify_hash: true,
        ..ReadOptions::default()
    }
}

/// True if `inner` lies inside `outer` (by address).
pub fn within(outer: &[u8], inner: &[u8]) -> bool {
    let o = outer.as_ptr() as usize;
    let i = inner.as_ptr() as usize;
    i >= o && i + inner.len() <= o + outer.len()
}

/// Reads every field of an image the way `list` and selection do.
pub fn touch(image: &Image<'_>) -> usize {
    let mut n = image.bytes.len();
    if let Some(id) = image.entry_id {
        if let Ok(e) = EntryId::parse(id) {
            n += e.kind.len() + e.triple.len();
            assert!(within(id.as_bytes(), e.kind.as_bytes()));
            assert!(within(id.as_bytes(), e.triple.as_bytes()));
            if let Some(t) = e.target_id {
                assert!(within(id.as_bytes(), t.as_bytes()));
            }
        }
    }
    if let Some(t) = image.triple {
        if let Ok(t) = Triple::parse(t) {
            n += t.to_string().len();
        }
    }
    if let Some(s) = image.strings {
        for (k, v) in s.iter() {
            n += k.len() + v.len();
        }
    }
    n += image.image_kind.name().len() + image.offload_kind.name().len();
    n
}

/// The `loader-sim list` path: walk, open every unit, list every image. Asserts that every
/// image lies in the input, or in content the library decompressed.
pub fn list(data: &[u8], options: &ReadOptions) -> Result<usize, Error> {
    let mut images = 0usize;
    let mut first_error = None;
    // As `loader-sim list`: a damaged unit (or an error of the walk) costs that unit only,
    // and the walk goes on.
    for unit in offload_image::units(data, options) {
        let unit = match unit {
            Ok(u) => u,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        if let Err(e) = list_unit(data, options, &unit, &mut images) {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(images),
    }
}

fn list_unit(
    data: &[u8],
    options: &ReadOptions,
    unit: &offload_image::Unit<'_>,
    images: &mut usize,
) -> Result<(), Error> {
    {
        assert!(unit.location.offset <= data.len() as u64);
        let _ = unit.location.to_string();
        if let Some(d) = unit.damage() {
            assert!(within(data, d.bytes));
            assert_eq!(
                d.bytes.as_ptr() as usize - data.as_ptr() as usize,
                unit.location.offset as usize
            );
        }
        let open = unit.open(options)?;
        for image in open.images() {
            // `list` decodes every image it hashes (compressed fatbinary entries are
            // identified from their headers and decoded on demand).
            let decoded = image.decode(options)?;
            let image = image.with_bytes(&decoded);
            let inside = within(data, image.bytes);
            match &unit.content {
                UnitContent::Compressed(_) => {
                    let d = open.decompressed().expect("compressed unit has content");
                    assert!(within(d, image.bytes), "image outside decompressed content");
                }
                UnitContent::OffloadBinaries(seq) => {
                    assert!(inside || seq.iter().any(|(_, b)| b.is_compressed()));
                }
                UnitContent::NvFatbin(fb) => {
                    assert!(inside || fb.entries().any(|e| e.codec.is_some()));
                }
                _ => assert!(inside, "image outside the input"),
            }
            if inside {
                let off = open
                    .offset_of(&image)
                    .expect("offset of an image in the input");
                assert!(off + image.size() <= data.len() as u64);
            }
            touch(&image);
            *images += 1;
        }
        Ok(())
    }
}

/// The devices the selection targets choose for: AMDGPU processors with every feature
/// state (on, off, unknown), generic-family members, and CUDA capabilities.
pub fn devices() -> Vec<offload_image::Device> {
    [
        "gfx906",
        "gfx906:xnack-",
        "gfx90a:sramecc+:xnack+",
        "gfx90a:xnack-",
        "gfx90a",
        "gfx942:sramecc+:xnack-",
        "gfx1030",
        "gfx1100",
        "gfx1201",
        "sm_70",
        "sm_80",
        "sm_90a",
        "sm_100",
        "sm_120",
    ]
    .iter()
    .map(|d| offload_image::Device::parse(d).expect("a device from the tables"))
    .collect()
}

/// The `loader-sim select` path over the images of one unit: identify every image, select
/// for every device under every policy, explain every verdict. Asserts that the chosen
/// image is compatible and that its key is the best.
pub fn select_all(images: &[Image<'_>], devices: &[offload_image::Device]) {
    use offload_image::select::{check, Verdict};
    use offload_image::{identify, select, Policy, SelectOptions};
    let identities: Vec<_> = images.iter().map(identify).collect();
    for id in &identities {
        let _ = id.disagreement().map(|d| d.to_string());
        let _ = id.target.to_string();
        let _ = id.triple().map(|t| t.to_string());
    }
    for device in devices {
        for policy in [Policy::Best, Policy::First, Policy::FirstByClass] {
            for base in [SelectOptions::default(), SelectOptions::comgr()] {
                let options = SelectOptions { policy, ..base };
                let s = select(images, device, &options);
                let mut compatible = 0usize;
                for (i, id) in identities.iter().enumerate() {
                    match check(id, i, device, &options) {
                        Verdict::Compatible(key) => {
                            compatible += 1;
                            let best = s.key.expect("a compatible image means a choice");
                            assert!(
                                !key.cmp_under(&best, policy).is_lt(),
                                "chosen is not the best"
                            );
                        }
                        Verdict::Rejected(r) => {
                            let _ = r.to_string();
                        }
                    }
                }
                assert_eq!(compatible, s.compatible);
                if let Some(c) = s.chosen() {
                    assert!(c < images.len());
                    let v = check(&identities[c], c, device, &options);
                    assert_eq!(v.key(), s.key);
                }
            }
        }
    }
}

/// [`list`] followed by [`select_all`] on every unit.
pub fn list_and_select(
    data: &[u8],
    options: &ReadOptions,
    devices: &[offload_image::Device],
) -> Result<usize, Error> {
    let n = list(data, options)?;
    for_each_unit(data, options, |unit| {
        let open = unit.open(options)?;
        let images: Vec<Image<'_>> = open.images().collect();
        select_all(&images, devices);
        Ok(())
    })?;
    Ok(n)
}

// ---------------------------------------------------------------------------------------
// Registration.

use offload_image::registration::{
    descriptors, AddressSpace, Descriptor, EntryTable, FatbinWrapperView, HostFile, Registry,
    RegistryOptions, SimulatedDevice, UnwrappedImage,
};

/// Address of region A (the records) in [`Space`].
pub const REGION_A: u64 = 0x1_0000;
/// Address of region B (the images) in [`Space`].
pub const REGION_B: u64 = 0x20_0000;

/// A process memory model over fuzz bytes: two regions, pointers read raw (little-endian).
pub struct Space<'d> {
    regions: [(u64, &'d [u8]); 2],
}

impl<'d> Space<'d> {
    /// Region A at [`REGION_A`], region B at [`REGION_B`].
    pub fn new(a: &'d [u8], b: &'d [u8]) -> Self {
        Space {
            regions: [(REGION_A, a), (REGION_B, b)],
        }
    }
}

impl<'d> AddressSpace<'d> for Space<'d> {
    fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        self.regions.iter().find_map(|(base, r)| {
            let off = usize::try_from(addr.checked_sub(*base)?).ok()?;
            (off < r.len()).then(|| &r[off..])
        })
    }
}

/// The devices a [`Registry`] simulates in the registration targets.
pub fn simulated_devices() -> Vec<SimulatedDevice> {
    ["gfx90a:sramecc+:xnack+", "gfx906", "gfx1100", "sm_80"]
        .iter()
        .map(|d| SimulatedDevice::parse(d).expect("a device"))
        .collect()
}

fn check_unwrapped(img: UnwrappedImage<'_>, inside: &dyn Fn(&[u8]) -> bool, options: &ReadOptions) {
    match img {
        UnwrappedImage::Raw(b) => assert!(inside(b)),
        UnwrappedImage::Entry(e) => {
            assert!(inside(e.image));
            for (k, v) in e.strings.iter() {
                assert!(inside(k.as_bytes()) && inside(v));
            }
        }
        UnwrappedImage::Compressed(b) => {
            assert!(inside(b.data()));
            let _ = b.inflate(options);
        }
    }
}

/// Every view over `space`: a descriptor at `desc`, a fat-binary wrapper at `wrapper`, their
/// images and entries; then the simulated runtime registers both, chooses per device and
/// explains. `inside` says whether a slice lies in the memory the space was made from.
pub fn registration_views<'d, S: AddressSpace<'d>>(
    space: &S,
    desc: u64,
    wrapper: u64,
    inside: &dyn Fn(&[u8]) -> bool,
) {
    let options = options();
    if let Ok(d) = Descriptor::read(space, desc, &options) {
        for img in d.images(space) {
            let Ok(img) = img else { continue };
            if let Ok(bytes) = img.bytes(space) {
                assert!(inside(bytes));
            }
            if let Ok(u) = img.image(space, &options.limits) {
                check_unwrapped(u, inside, &options);
            }
            if let Ok(t) = EntryTable::read(space, img.entries_begin, img.entries_end, 64) {
                for e in t.iter(space).take(64).flatten() {
                    let _ = e.name(space).map(|n| assert!(inside(n)));
                }
            }
        }
        for e in d.entries.iter(space).take(1024).flatten() {
            let _ = (
                e.global_kind().name(),
                e.offload_kind().name(),
                e.is_requires(),
            );
            if let Ok(n) = e.name(space) {
                assert!(inside(n));
            }
        }
    }
    if let Ok(w) = FatbinWrapperView::read(space, wrapper) {
        if let Ok(fat) = w.fat_binary(space, &options) {
            assert!(inside(fat));
            let _ = list(fat, &options);
        }
    }
    let mut registry = Registry::new(
        simulated_devices(),
        RegistryOptions {
            read: options,
            ..RegistryOptions::default()
        },
    );
    let lib = registry.register_lib(space, desc);
    let fat = registry.register_fat_binary(space, wrapper);
    if let Ok(id) = fat {
        // An entry table after the wrapper, as the new HIP driver lays them out.
        let begin = wrapper.saturating_add(24);
        if let Ok(t) = EntryTable::read(space, begin, begin.saturating_add(56 * 2), 64) {
            let _ = registry.add_entries(id, space, &t, 4);
        }
        let _ = registry.register_function(id, 0x1234, b"kernel");
        let _ = registry.register_var(id, 0x2345, b"var", 8, false, true);
    }
    for id in [lib.ok(), fat.ok()].into_iter().flatten() {
        if let Some(reg) = registry.get(id) {
            let images = reg.images();
            for image in &images {
                touch(image);
            }
            for dev in 0..registry.devices().len() {
                if let Some(c) = reg.choice(dev) {
                    if let Some(i) = c.chosen() {
                        assert!(i < images.len());
                    }
                }
                let _ = registry.explain(reg, dev);
            }
            for e in reg.entries() {
                let _ = e.name_lossy();
            }
        }
        // Releasing the images keeps the choices, the entries and the count.
        let before = registry.get(id).cloned();
        assert!(registry.release(id));
        if let (Some(b), Some(a)) = (before, registry.get(id)) {
            assert!(a.images().is_empty());
            for dev in 0..registry.devices().len() {
                assert_eq!(
                    a.choice(dev).map(|c| c.chosen()),
                    b.choice(dev).map(|c| c.chosen())
                );
            }
            assert_eq!(a.entries().len(), b.entries().len());
            assert_eq!(a.count(), b.count());
        }
    }
    if let Ok(id) = fat {
        let _ = registry.unregister_fat_binary(id);
    }
    let _ = registry.unregister_lib(desc);
}

/// `loader-sim register FILE`: a host ELF as an address space, its wrappers, entry tables
/// and descriptors registered with the simulated runtime.
pub fn register_elf(data: &[u8]) {
    let Ok(elf) = HostFile::parse(data) else {
        return;
    };
    let inside = |s: &[u8]| within(data, s);
    for s in elf.sections() {
        assert!(s.data.is_empty() || inside(s.data));
    }
    let wrappers = elf.fat_binary_wrappers();
    let found = descriptors(&elf, &options());
    let first = found.first().copied().unwrap_or(0);
    for w in wrappers.iter().take(16) {
        registration_views(&elf, first, w.address, &inside);
    }
    for d in found.iter().take(16) {
        registration_views(&elf, *d, 0, &inside);
    }
    for t in elf.entry_sections().iter().take(16) {
        if let Ok(table) = EntryTable::read(&elf, t.begin, t.end, 1 << 16) {
            for e in table.iter(&elf).take(4096).flatten() {
                let _ = e.name(&elf);
            }
        }
    }
    // (`HostElf` sections hand out a detached empty slice for empty and NOBITS sections.)
    for s in elf.offloading_sections() {
        assert!(s.data.is_empty() || inside(s.data));
    }
}

// ---------------------------------------------------------------------------------------
// Streaming selection in compressed bundles.

/// `select_in_stream` (one pass over a `CCOB`'s content, the chosen images streamed to a
/// sink) against the in-memory path (decompress, parse, `select`): where both read the
/// bundle they choose the same entry for every device, and the streamed bytes are that
/// entry's bytes. Also reads the whole content through `ContentReader` (piece by piece,
/// and with `read_to_vec`) and compares it with `decompress`.
pub fn stream_vs_memory(data: &[u8], devices: &[offload_image::Device]) {
    for verify_hash in [true, false] {
        let options = ReadOptions {
            verify_hash,
            ..options()
        };
        stream_vs_memory_with(data, devices, &options);
    }
}

fn stream_vs_memory_with(data: &[u8], devices: &[offload_image::Device], options: &ReadOptions) {
    use offload_image::bundle::Bundle;
    use offload_image::ccob::CompressedBundle;
    use offload_image::stream::{select_in_stream, Kept};
    use offload_image::{select, SelectOptions};

    let Ok(c) = CompressedBundle::parse(data) else {
        return;
    };
    let full = c.decompress(options);
    // The content front to back through the streaming reader.
    if let Ok(mut reader) = c.reader(options) {
        let mut streamed = Vec::new();
        let mut buf = [0u8; 4096];
        let ok = loop {
            match reader.read(&mut buf) {
                Ok(0) => break reader.finish().is_ok(),
                Ok(n) => streamed.extend_from_slice(&buf[..n]),
                Err(_) => break false,
            }
        };
        if let (true, Ok(full)) = (ok, &full) {
            assert!(
                streamed == *full,
                "streamed content differs from decompress"
            );
        }
    }
    // The same through `read_to_vec` (what `Unit::open_with` callers use).
    if let (Ok(reader), Ok(full)) = (c.reader(options), &full) {
        if let Ok(v) = reader.read_to_vec() {
            assert!(v == *full, "read_to_vec differs from decompress");
        }
    }
    let Ok(reader) = c.reader(options) else {
        return;
    };
    let select_options = SelectOptions::default();
    let mut kept: Vec<(Option<usize>, Vec<u8>)> = vec![(None, Vec::new()); devices.len()];
    let streamed = select_in_stream::<_, Error, _>(
        reader,
        devices,
        &select_options,
        &options.limits,
        true,
        |k| {
            match k {
                Kept::Start { device, index, .. } => kept[device] = (Some(index), Vec::new()),
                Kept::Bytes { device, bytes } => kept[device].1.extend_from_slice(bytes),
            }
            Ok(())
        },
    );
    let (Ok(Some(s)), Ok(content)) = (streamed, full) else {
        return;
    };
    let Ok(bundle) = Bundle::parse(&content, &options.limits) else {
        return;
    };
    let images: Vec<Image<'_>> = bundle
        .entries()
        .map(|e| Image::from_bundle_entry(e.index, &e))
        .collect();
    for (d, device) in devices.iter().enumerate() {
        let in_memory = select(&images, device, &select_options).chosen();
        let in_stream = s.chosen[d].map(|k| k.index);
        assert_eq!(
            in_stream, in_memory,
            "device {d}: stream and memory choose differently"
        );
        assert_eq!(kept[d].0, in_memory);
        if let Some(i) = in_memory {
            assert!(kept[d].1 == images[i].bytes, "streamed image bytes differ");
        }
    }
}

// ---------------------------------------------------------------------------------------
// PE images and COFF objects.

/// A PE image or COFF object: the section table in place (names, bounds, roles, the DIR64
/// base relocations), then the whole `list` path over it and `register`'s address space
/// (wrappers through ImageBase and the relocations, entry tables).
pub fn pe(data: &[u8]) {
    use offload_image::host::pe::PeSections;
    if let Ok(table) = PeSections::parse(data) {
        for i in 0..table.len() {
            let Ok(s) = table.section(i) else {
                continue;
            };
            assert!(within(data, s.data), "section contents lie in the file");
            let _ = s.role();
        }
        let mut n = 0usize;
        let _ = table.for_each_dir64(|_| n += 1);
        assert!(
            n <= data.len() / 2,
            "at most one base relocation per two bytes"
        );
    }
    let _ = list(data, &options());
    register_elf(data);
}

/// `prune` of any file for an AMD and an NVIDIA device, compacting or in place: planning
/// and the layout either fail with an error or give an output of the length they report,
/// never longer than the input (the ELF and PE rewrites move sections, pointers, program
/// headers and checksums).
pub fn prune(data: &[u8]) {
    use offload_image::prune::{plan, rewrite, PruneOptions};
    let keep = [
        offload_image::Device::parse("gfx90a:xnack-").expect("a target"),
        offload_image::Device::parse("sm_86").expect("a target"),
    ];
    for shrink in [true, false] {
        let options = PruneOptions {
            read: options(),
            shrink,
            move_program_headers: shrink,
            ..PruneOptions::default()
        };
        let Ok(p) = plan(data, &keep, &options) else {
            continue;
        };
        let Ok(pruned) = rewrite(&p) else {
            continue;
        };
        if let Ok(out) = pruned.to_vec() {
            assert!(out.len() <= data.len(), "prune never grows a file");
            assert_eq!(
                out.len() as u64,
                pruned.summary().size_after,
                "the reported size"
            );
        }
    }
}
