//! Pruning: dropping the device images no kept device can load (feature `write`).
//!
//! Pruning has two halves:
//!
//! * the **plan** ([`plan`]): for every unit of a file, which images stay (host entries, and
//!   every image at least one kept device accepts by the rules of `COMPATIBILITY.md`:
//!   native code, generic code objects and `xnack`/`sramecc`-any images that cover the
//!   device, SPIR-V, bitcode or PTX it can JIT) and what the unit becomes;
//! * the **rewrite** ([`rewrite`]): how the output file is put together from the input's
//!   bytes and the rewritten units, for every layout a unit can sit in.
//!
//! [`prune`] does both. The output is described as a list of pieces (input ranges, new
//! bytes, zero fill, rewritten units) that [`Pruned::write_to`] streams into any
//! [`std::io::Write`]: kept images are copied from the caller's buffer, never held twice.
//!
//! # What each unit becomes
//!
//! * Binary bundles are written again with [`crate::write::bundle`] in their stored entry
//!   order, with the payload alignment they were written with (the smallest power of two
//!   up to 4096 whose layout reproduces the stored offsets); text bundles with
//!   [`crate::write::text`] (same comment style).
//! * Compressed bundles (`CCOB` v1–v3) are decompressed, the inner bundle written again,
//!   and compressed in the same version with the same codec (the hash is that of the new
//!   content). zstd payloads come from [`PruneOptions::zstd`] when the caller supplies a
//!   compressor, else from the library's encoder.
//! * OffloadBinaries keep the binaries and entries that stay (v1 binaries copied, v2
//!   written again); a compressed OffloadBinary is kept or dropped whole.
//! * NVIDIA fatbinaries keep their header, with its size field set to the kept entries,
//!   which follow as stored (entry header and payload, compressed or not). Entries are
//!   judged from their headers; a compressed entry is decoded once, on its own, to check
//!   it (a damaged entry is refused, not copied).
//! * A unit in a host file (an ELF section, an archive member) in which no kept device can
//!   load anything is **emptied** (bundles keep their host entries only, fatbinaries keep
//!   no entry), as `nvprune` does, unless [`PruneOptions::keep_unloadable_units`] is set;
//!   it is then left whole. Units of standalone container files, OffloadBinaries, bare
//!   device ELFs and bundled objects with nothing for a kept device are always left whole.
//!
//! # Layouts
//!
//! * Standalone containers (one or several back to back): every unit is written where it
//!   was, bytes between units are copied.
//! * Relocatable 64-bit little-endian host objects: the sections holding rewritten units
//!   shrink and the sections are laid out again; bundled objects lose the
//!   `__CLANG_OFFLOAD_BUNDLE__<id>` sections of dropped entries (see [`rewrite`]).
//! * `ar` archives (GNU, System V): each member is pruned as a file of its own, member
//!   headers and symbol table offsets are updated.
//! * Linked 64-bit little-endian executables and shared libraries (x86-64, AArch64):
//!   the containers of `.hip_fatbin`/`.nv_fatbin`/`__nv_relfatbin` are packed from the section start, every
//!   pointer to them (wrappers, `R_*_RELATIVE` relocations of `RELA`, `REL` and `RELR`
//!   tables, symbols) is set to the new address, and the freed pages leave the file: a
//!   section that ends its segment is cut at its end, which keeps every program header;
//!   otherwise its `PT_LOAD` segment is split around the freed pages and the program
//!   header table, one entry longer, grows where it is (the sections right after it move
//!   behind the kept containers when they must make room), so that GNU `strip`/`objcopy`
//!   can still rewrite the file. When none of this can be done, each unit is written at
//!   its own address and zero-filled (the file keeps its size);
//!   [`PruneOptions::move_program_headers`] moves the table instead. [`Pruned::layout`]
//!   says which layout was made and why.
//!
//! # Modules
//!
//! Each module uses only those listed before it (and the helpers of this one):
//!
//! 1. `plan`: what every unit keeps and becomes ([`UnitPlan`]);
//! 2. `pieces`: the output as pieces (`Piece`), and what every layout
//!    does with them (write units where they are, patch, cut holes, stream);
//! 3. `relocatable`: relocatable ELF objects laid out again;
//! 4. `pe`: PE images and COFF objects, compacted or rewritten in place;
//! 5. `linked`: host ELF files; linked ones compacted or rewritten in place, relocatable
//!    ones handed to `relocatable`;
//! 6. `layout`: which of those a file goes to (or standalone containers);
//! 7. `archive`: `ar` archives, each member through `layout`.
//!
//! # Example
//!
//! ```
//! use offload_image::prune::{prune, PruneOptions};
//! use offload_image::write::bundle::bundle_to_vec;
//! use offload_image::Device;
//!
//! let entries: [(&str, &[u8]); 3] = [
//!     ("host-x86_64-unknown-linux-gnu-", b""),
//!     ("hipv4-amdgcn-amd-amdhsa--gfx906", b"code for gfx906"),
//!     ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"code for gfx90a"),
//! ];
//! let bundle = bundle_to_vec(&entries, 1)?;
//! let keep = [Device::parse("gfx90a")?];
//! let plan = offload_image::prune::plan(&bundle, &keep, &PruneOptions::default())?;
//! assert_eq!(plan.units()[0].dropped, ["hipv4-amdgcn-amd-amdhsa--gfx906"]);
//! let pruned = offload_image::prune::rewrite(&plan)?;
//! let bytes = pruned.to_vec()?;
//! assert_eq!(bytes, bundle_to_vec(&[entries[0], entries[2]], 1)?);
//! assert_eq!(pruned.summary().images_dropped, 1);
//! # let _ = prune;
//! # Ok::<(), offload_image::Error>(())
//! ```

mod archive;
mod error;
mod layout;
mod linked;
mod pe;
mod pieces;
mod plan;
mod relocatable;

use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;

use crate::arch::Device;
use crate::error::{Error, ErrorKind, Result};
use crate::write::WriteError;
use crate::ReadOptions;

pub use error::{PruneError, PruneErrorKind};
use pieces::Piece;
use plan::Body;
pub use plan::UnitPlan;

/// A zstd compressor supplied by the caller: `content` and the most bytes the payload
/// should take (the stored size of the original); `None` when compression failed.
pub type ZstdCompressor = fn(content: &[u8], budget: u64) -> Option<Vec<u8>>;

/// How to prune.
#[derive(Clone, Copy, Debug)]
pub struct PruneOptions {
    /// How containers are read (limits, decoders).
    pub read: ReadOptions,
    /// Linked files: remove the freed pages from the file (default). Off, every unit is
    /// written at its own address, zero-filled, and the file keeps its size.
    pub shrink: bool,
    /// Leave units of host files whole when no kept device can load anything in them
    /// (default: off, they are emptied).
    pub keep_unloadable_units: bool,
    /// The zstd compressor for compressed bundles (default: the library's encoder).
    pub zstd: Option<ZstdCompressor>,
    /// Refuse a signed PE image (an Authenticode certificate table) instead of removing
    /// its certificate table, which no longer matches once the file changes (default: off).
    pub refuse_signed: bool,
    /// Linked ELF files: allow the layout that moves the program header table after the
    /// kept containers when a split segment needs one more program header and the table
    /// cannot grow where it is (default: off). GNU `strip`/`objcopy` (BFD) cannot rewrite
    /// that layout (they exit 0 and the result no longer loads); off, such a file is
    /// rewritten in place instead.
    pub move_program_headers: bool,
}

impl Default for PruneOptions {
    fn default() -> Self {
        PruneOptions {
            read: ReadOptions::default(),
            shrink: true,
            keep_unloadable_units: false,
            zstd: None,
            refuse_signed: false,
            move_program_headers: false,
        }
    }
}

/// What every unit of a file keeps: the first half of pruning ([`plan`]).
#[derive(Debug)]
pub struct Plan<'d> {
    data: &'d [u8],
    units: Vec<UnitPlan<'d>>,
    /// For an `ar` archive, its members (units are numbered across them).
    members: Option<Vec<archive::Member>>,
    shrink: bool,
    move_table: bool,
    refuse_signed: bool,
}

impl<'d> Plan<'d> {
    /// The units, in discovery order (members of an archive one after the other).
    pub fn units(&self) -> &[UnitPlan<'d>] {
        &self.units
    }

    /// The file the plan is for.
    pub fn data(&self) -> &'d [u8] {
        self.data
    }

    /// True when nothing is dropped.
    pub fn is_unchanged(&self) -> bool {
        self.units.iter().all(|u| matches!(u.body, Body::Same))
    }
}

/// Counts over a pruned file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Units planned.
    pub units: usize,
    /// Images kept (host entries included).
    pub images_kept: usize,
    /// Images dropped.
    pub images_dropped: usize,
    /// Units emptied because no kept device can load anything in them.
    pub units_emptied: usize,
    /// Units left whole because no kept device can load anything in them.
    pub units_whole: usize,
    /// Size of the input.
    pub size_before: u64,
    /// Size of the output.
    pub size_after: u64,
}

/// The pruned file: the second half of pruning ([`rewrite`]), ready to be written.
#[derive(Debug)]
pub struct Pruned<'p, 'd> {
    plan: &'p Plan<'d>,
    pieces: Vec<Piece>,
    layout: String,
    in_place: Option<PruneError>,
    len: u64,
}

impl Pruned<'_, '_> {
    /// What was done to the file's layout (`standalone`, `compacted: ...`, `in place, ...
    /// (reason)`, `relocatable object: ...`, `archive: ...`, `unchanged (...)`).
    pub fn layout(&self) -> &str {
        &self.layout
    }

    /// For a linked file (ELF or PE) rewritten in place, zero-filled, instead of
    /// compacted: why it could not be compacted ([`PruneError`], the text the layout line
    /// ends with). `None` for every other layout and for `--no-shrink`
    /// ([`PruneOptions::shrink`] off).
    pub fn in_place_because(&self) -> Option<&PruneError> {
        self.in_place.as_ref()
    }

    /// The size of the output in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the output is empty (never for a real file).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Counts of units and images, sizes before and after.
    pub fn summary(&self) -> Summary {
        let units = self.plan.units();
        Summary {
            units: units.len(),
            images_kept: units.iter().map(|u| u.kept.len()).sum(),
            images_dropped: units.iter().map(|u| u.dropped.len()).sum(),
            units_emptied: units.iter().filter(|u| u.emptied).count(),
            units_whole: units.iter().filter(|u| u.whole).count(),
            size_before: crate::bytes::u64_of(self.plan.data.len()),
            size_after: self.len,
        }
    }

    /// Streams the output into `out`. Input bytes are written as slices of the plan's
    /// buffer (a caller that maps the input can recognise and release them).
    pub fn write_to<W: std::io::Write + ?Sized>(
        &self,
        out: &mut W,
    ) -> core::result::Result<(), WriteError> {
        pieces::write(out, self.plan.data, &self.plan.units, &self.pieces)
    }

    /// The output as one buffer.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        if let Ok(n) = usize::try_from(self.len) {
            v.reserve(n);
        }
        self.write_to(&mut v).map_err(|e| match e {
            WriteError::Invalid(e) => e,
            WriteError::Io(_) => Error::new(ErrorKind::OutOfMemory, 0, "cannot write the output"),
        })?;
        Ok(v)
    }
}

/// Plans every unit of `data` for the devices in `keep` (see the module documentation).
pub fn plan<'d>(data: &'d [u8], keep: &[Device], options: &PruneOptions) -> Result<Plan<'d>> {
    plan_with(data, keep, options, &mut |_| {})
}

/// [`plan`], calling `planned` with the file range of each unit once it is planned (a
/// caller that maps the input may release its pages).
pub fn plan_with<'d>(
    data: &'d [u8],
    keep: &[Device],
    options: &PruneOptions,
    planned: &mut dyn FnMut(Range<u64>),
) -> Result<Plan<'d>> {
    if data.starts_with(crate::raw::AR_MAGIC) {
        let (units, members) = archive::plan(data, keep, options, planned)?;
        return Ok(Plan {
            data,
            units,
            members: Some(members),
            shrink: options.shrink,
            move_table: options.move_program_headers,
            refuse_signed: options.refuse_signed,
        });
    }
    let units = plan::plan_units(data, keep, options, &mut |r| planned(r))?;
    Ok(Plan {
        data,
        units,
        members: None,
        shrink: options.shrink,
        move_table: options.move_program_headers,
        refuse_signed: options.refuse_signed,
    })
}

/// Lays out the pruned file of `plan` (see the module documentation). Refused with an
/// error: thin and BSD archives with something to drop, 32-bit or big-endian ELF files,
/// device code to drop outside `.hip_fatbin`, `.nv_fatbin` and `__nv_relfatbin` in linked
/// files, references
/// into resized sections of relocatable objects, and an output larger than the input.
pub fn rewrite<'p, 'd>(plan: &'p Plan<'d>) -> Result<Pruned<'p, 'd>> {
    let (pieces, layout, in_place) = match &plan.members {
        Some(members) => {
            let (pieces, layout) = archive::assemble(plan.data, &plan.units, members, plan.shrink)?;
            (pieces, layout, None)
        }
        None => layout::assemble(
            plan.data,
            &plan.units,
            plan.shrink,
            plan.move_table,
            plan.refuse_signed,
        )?,
    };
    let len = pieces::total_len(&pieces, &plan.units)?;
    if len > crate::bytes::u64_of(plan.data.len()) {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            0,
            "the pruned file would be larger than the input",
        ));
    }
    Ok(Pruned {
        plan,
        pieces,
        layout,
        in_place,
        len,
    })
}

/// Plans and lays out the pruned file: [`plan`] then [`rewrite`]; the output is
/// [`Pruned::to_vec`] of the result.
pub fn prune(data: &[u8], keep: &[Device], options: &PruneOptions) -> Result<Vec<u8>> {
    let plan = plan(data, keep, options)?;
    rewrite(&plan)?.to_vec()
}

/// An error of kind `kind` at `at`.
fn err(kind: ErrorKind, at: u64, what: &'static str) -> Error {
    Error::new(kind, at, what)
}

/// An error of kind [`ErrorKind::BadContainer`] at `at`.
fn bad(at: u64, what: &'static str) -> Error {
    err(ErrorKind::BadContainer, at, what)
}

/// `a - b` for `b <= a` (saturating otherwise).
fn diff(a: u64, b: u64) -> u64 {
    a.saturating_sub(b)
}

/// The little-endian `u32` at file offset `at`.
fn u32_at(data: &[u8], at: u64) -> Option<u32> {
    let at = usize::try_from(at).ok()?;
    Some(u32::from_le_bytes(
        data.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u64` at file offset `at`.
fn u64_at(data: &[u8], at: u64) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    Some(u64::from_le_bytes(
        data.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// `usize` → `u64`.
fn len64(n: usize) -> u64 {
    crate::bytes::u64_of(n)
}

/// `data[range]`, checked.
fn slice<'d>(data: &'d [u8], range: &Range<u64>, what: &'static str) -> Result<&'d [u8]> {
    crate::bytes::sub(data, range.start, diff(range.end, range.start), what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registration::elf::HostElf;
    use crate::registration::view::read_u64;
    use alloc::string::ToString;

    fn corpus(name: &str) -> Vec<u8> {
        std::fs::read(std::format!(
            "{}/tests/data/corpus/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    fn devices(keep: &[&str]) -> Vec<Device> {
        keep.iter().map(|k| Device::parse(k).unwrap()).collect()
    }

    /// (name, decoded bytes) of every image of `data`, in discovery order.
    fn images(data: &[u8]) -> Vec<(String, Vec<u8>)> {
        let options = ReadOptions::default();
        let mut out = Vec::new();
        for unit in crate::units(data, &options) {
            let open = unit.unwrap().open(&options).unwrap();
            for image in open.images() {
                let name = image.name().to_string();
                out.push((name, image.decode(&options).unwrap().into_owned()));
            }
        }
        out
    }

    /// Prunes `data`; checks that the output holds exactly the kept images of the plan,
    /// with their bytes, and that the plan's sizes agree with the output; returns the
    /// output and its layout line.
    fn check(data: &[u8], keep: &[&str], options: &PruneOptions) -> (Vec<u8>, String, Summary) {
        let plan = plan(data, &devices(keep), options).unwrap();
        let pruned = rewrite(&plan).unwrap();
        let out = pruned.to_vec().unwrap();
        assert_eq!(len64(out.len()), pruned.len());
        let kept: Vec<&String> = plan.units().iter().flat_map(|u| &u.kept).collect();
        let before = images(data);
        let after = images(&out);
        assert_eq!(
            after.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            kept,
            "{}",
            pruned.layout()
        );
        for image in &after {
            assert!(before.contains(image), "{} changed", image.0);
        }
        (out, pruned.layout().to_string(), pruned.summary())
    }

    #[test]
    fn standalone_bundle() {
        let data = corpus("bundles/hip_6arch.bundle");
        let (out, layout, s) = check(&data, &["gfx906"], &PruneOptions::default());
        assert_eq!(layout, "standalone");
        assert!(s.images_dropped > 0 && out.len() < data.len());
        assert!(crate::bundle::is_bundle(&out));
    }

    #[test]
    fn compressed_bundles_keep_version_and_codec() {
        for name in [
            "compressed/hip_6arch.zlib.ccob",
            "compressed/hip_6arch.v1-zstd.ccob",
            "compressed/hip_6arch.v3-zstd.llvm22.ccob",
        ] {
            let data = corpus(name);
            let (out, _, s) = check(&data, &["gfx906"], &PruneOptions::default());
            assert!(s.images_dropped > 0, "{name}");
            // Magic, version and method as stored.
            assert_eq!(out[..8], data[..8], "{name}");
        }
    }

    #[test]
    fn archive_members() {
        let data = corpus("driver/libfat.a");
        let (out, layout, s) = check(&data, &["gfx906"], &PruneOptions::default());
        assert!(
            layout.starts_with("archive: 2 member(s) pruned"),
            "{layout}"
        );
        assert!(s.images_dropped == 2 && out.len() < data.len());
        // Every symbol of the archive symbol table still names a member header.
        let a = object::read::archive::ArchiveFile::parse(&*out).unwrap();
        let members: Vec<u64> = a
            .members()
            .map(|m| m.unwrap().file_range().0 - 60)
            .collect();
        let mut symbols = 0;
        for sym in a.symbols().unwrap().unwrap() {
            let sym = sym.unwrap();
            assert!(members.contains(&sym.offset().0), "{sym:?}");
            symbols += 1;
        }
        assert!(symbols > 0);
    }

    #[test]
    fn relocatable_object() {
        use object::{Object, ObjectSection};
        let data = corpus("driver/hip_nonrdc.o");
        let (out, layout, s) = check(&data, &["gfx906"], &PruneOptions::default());
        assert!(
            layout.starts_with("relocatable object: 1 section(s) resized"),
            "{layout}"
        );
        assert_eq!(s.images_dropped, 1);
        let f = object::File::parse(&*out).unwrap();
        let fatbin = f.section_by_name(".hip_fatbin").unwrap();
        let bundle = crate::bundle::Bundle::parse(fatbin.data().unwrap(), &crate::Limits::DEFAULT);
        assert_eq!(bundle.unwrap().len(), fatbin.size());
    }

    #[test]
    fn text_bundle() {
        let data = corpus("text/omp.ll.bundle");
        let (out, layout, s) = check(&data, &["sm_80"], &PruneOptions::default());
        assert_eq!(layout, "standalone");
        assert!(s.images_dropped > 0 && out.len() < data.len());
    }

    #[test]
    fn offload_binaries() {
        let data = corpus("packager/multi3.offbin");
        let (out, _, s) = check(&data, &["gfx90a:xnack+"], &PruneOptions::default());
        assert!(s.images_dropped > 0 && out.len() < data.len());
        assert!(out.starts_with(crate::raw::OFFLOAD_BINARY_MAGIC));
    }

    /// A compressed (version 3) OffloadBinary before a plain one in the same unit: its
    /// entries are counted from its inflated bytes, so the plain binary's keep flags are its
    /// own. (Before: the compressed binary counted 0 entries, was kept whole for nothing,
    /// and the flags of its entries were read as the next binary's, dropping gfx90a.)
    #[cfg(feature = "write")]
    #[test]
    fn compressed_offload_binary_before_a_plain_one() {
        use crate::write::offload_binary::{v1_to_vec, v3_compressed_to_vec, OffloadImage};
        let multi = corpus("packager/multi3.offbin");
        let seq = crate::offload_binary::OffloadBinaries::parse(&multi, &crate::Limits::default())
            .unwrap();
        let binaries: Vec<_> = seq.iter().map(|(_, b)| b).collect();
        let entries: Vec<_> = binaries.iter().flat_map(|b| b.entries()).collect();
        let strings: Vec<Vec<(&[u8], &[u8])>> = entries
            .iter()
            .map(|e| e.strings.iter().map(|(k, v)| (k.as_bytes(), v)).collect())
            .collect();
        let image = |i: usize| OffloadImage {
            image_kind: entries[i].image_kind,
            offload_kind: entries[i].offload_kind,
            flags: entries[i].flags,
            strings: &strings[i],
            image: entries[i].image,
        };
        // [sm_80 PTX, sm_80 bitcode] compressed, then [gfx90a:xnack+] plain.
        let mut data = v3_compressed_to_vec(
            &[image(1), image(2)],
            crate::write::ccob::Codec::Zlib { level: 6 },
        )
        .unwrap();
        data.extend(v1_to_vec(&image(0)).unwrap());
        let (out, _, s) = check(&data, &["gfx90a:xnack+"], &PruneOptions::default());
        assert_eq!((s.images_kept, s.images_dropped), (1, 2));
        assert_eq!(images(&out), [(images(&multi)[0].clone())]);
        // Keeping sm_80 keeps the compressed binary whole and drops the plain one.
        let (out, _, s) = check(&data, &["sm_80"], &PruneOptions::default());
        assert_eq!(s.images_dropped, 1);
        assert!(out.len() < data.len());
    }

    #[test]
    fn bundled_object_loses_the_sections_of_dropped_entries() {
        use object::{Object, ObjectSection};
        let data = corpus("driver/hip_rdc.o");
        let (out, layout, _) = check(&data, &["gfx906"], &PruneOptions::default());
        assert!(layout.contains("1 bundle section(s) removed"), "{layout}");
        let f = object::File::parse(&*out).unwrap();
        let names: Vec<&str> = f.sections().map(|s| s.name().unwrap()).collect();
        assert!(names.contains(&"__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx906"));
        assert!(!names.iter().any(|n| n.contains("gfx90a")), "{names:?}");
    }

    #[test]
    fn linked_nvidia_fatbinaries() {
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/nvfatbin/files/libk.so"
        ))
        .unwrap();
        let (out, layout, s) = check(&data, &["sm_86"], &PruneOptions::default());
        assert!(
            layout.starts_with("compacted: 2 containers in .nv_fatbin"),
            "{layout}"
        );
        assert!(s.images_dropped == 2 && out.len() < data.len());
        // Nothing for sm_50: both fatbinaries emptied, still wrapped.
        let (out, _, s) = check(&data, &["sm_50"], &PruneOptions::default());
        assert_eq!((s.units_emptied, s.images_kept), (2, 0));
        assert_eq!(crate::units(&out, &ReadOptions::default()).count(), 2);
    }

    /// The address the first fat-binary wrapper of `data` points at.
    fn wrapped(data: &[u8]) -> u64 {
        let elf = HostElf::parse(data).unwrap();
        let slot = elf.fat_binary_wrappers()[0];
        read_u64(&elf, slot.address + 8).unwrap()
    }

    #[test]
    fn linked_file_is_compacted_or_rewritten_in_place() {
        use object::{Object, ObjectSection};
        let data = corpus("driver/hip_nonrdc.exe");
        let (out, layout, _) = check(&data, &["gfx906"], &PruneOptions::default());
        assert!(
            layout.starts_with("compacted: 1 containers in .hip_fatbin"),
            "{layout}"
        );
        assert!(out.len() < data.len());
        let f = object::File::parse(&*out).unwrap();
        let fatbin = f.section_by_name(".hip_fatbin").unwrap();
        assert_eq!(wrapped(&out), fatbin.address());
        let no_shrink = PruneOptions {
            shrink: false,
            ..PruneOptions::default()
        };
        let (out, layout, _) = check(&data, &["gfx906"], &no_shrink);
        assert_eq!(
            layout,
            "in place, zero-filled, file size unchanged (--no-shrink)"
        );
        assert_eq!(out.len(), data.len());
        assert_eq!(wrapped(&out), wrapped(&data));
    }

    #[test]
    fn unloadable_units_of_host_files_are_emptied_unless_kept_whole() {
        let data = corpus("driver/hip_nonrdc.exe");
        let (_, _, s) = check(&data, &["gfx1100"], &PruneOptions::default());
        assert_eq!((s.units_emptied, s.units_whole, s.images_kept), (1, 0, 1));
        let whole = PruneOptions {
            keep_unloadable_units: true,
            ..PruneOptions::default()
        };
        let (out, layout, s) = check(&data, &["gfx1100"], &whole);
        assert_eq!((s.units_emptied, s.units_whole), (0, 1));
        assert_eq!(layout, "unchanged (nothing to drop)");
        assert_eq!(out, data);
    }

    #[test]
    fn damaged_files_give_errors_not_panics() {
        let data = corpus("driver/hip_nonrdc.exe");
        let keep = devices(&["gfx906"]);
        let options = PruneOptions::default();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let (mut errors, mut pruned_files) = (0, 0);
        for n in 0..200 {
            let mut d = data.clone();
            for _ in 0..3 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let at = if n % 2 == 0 {
                    (rng % 4096) as usize
                } else {
                    d.len() - 1 - (rng % 2048) as usize
                };
                d[at] = (rng >> 32) as u8;
            }
            // Every damaged file is refused with an error or pruned to a file of the
            // length the rewrite declared; none panics.
            let outcome = plan(&d, &keep, &options).and_then(|plan| {
                let pruned = rewrite(&plan)?;
                let out = pruned.to_vec()?;
                assert_eq!(out.len() as u64, pruned.len(), "damage {n}");
                Ok(out)
            });
            match outcome {
                Ok(_) => pruned_files += 1,
                Err(_) => errors += 1,
            }
        }
        // The damage reaches the readers: some files are refused, some still prune.
        assert!(
            errors > 0 && pruned_files > 0,
            "{errors} errors, {pruned_files} pruned"
        );
    }

    /// A pointer into `.hip_fatbin` that is not at the start of a container keeps the file
    /// from being compacted: the typed reason says where the pointer is, and the layout
    /// line ends with its text.
    #[test]
    fn a_pointer_inside_a_container_is_a_typed_reason_with_its_offset() {
        let mut data = corpus("driver/hip_nonrdc.exe");
        // The R_X86_64_RELATIVE that sets the wrapper's pointer (place 0x9020, addend
        // 0x3000, the start of .hip_fatbin): `readelf -r`.
        let mut rela = std::vec::Vec::new();
        rela.extend_from_slice(&0x9020u64.to_le_bytes());
        rela.extend_from_slice(&8u64.to_le_bytes());
        rela.extend_from_slice(&0x3000u64.to_le_bytes());
        let at = data.windows(24).position(|w| w == rela).unwrap() + 16;
        data[at..at + 8].copy_from_slice(&0x3008u64.to_le_bytes());
        let keep = devices(&["gfx906"]);
        let p = plan(&data, &keep, &PruneOptions::default()).unwrap();
        let pruned = rewrite(&p).unwrap();
        let why = pruned.in_place_because().expect("rewritten in place");
        assert_eq!(why.kind(), PruneErrorKind::Pointer);
        let offset = why.offset().expect("the pointer's offset");
        // The field that holds the pointer: the relocation's addend.
        assert_eq!(offset, at as u64);
        let text = why.to_string();
        assert!(
            text.contains(&std::format!("at offset {offset:#x} points into .hip_fatbin (0x3008) but not at the start of a container")),
            "{text}"
        );
        assert!(core::error::Error::source(why).is_none());
        assert_eq!(
            pruned.layout(),
            std::format!("in place, zero-filled, file size unchanged ({why})")
        );
        // `--no-shrink` is no error.
        let no_shrink = PruneOptions {
            shrink: false,
            ..PruneOptions::default()
        };
        let p = plan(&data, &keep, &no_shrink).unwrap();
        assert!(rewrite(&p).unwrap().in_place_because().is_none());
    }
}
