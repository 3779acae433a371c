//! Host files: the executables, shared libraries and relocatable objects that carry device
//! code, read in place as their loader and the offload runtime see them.
//!
//! One reader serves the three users of a host file:
//!
//! * discovery ([`crate::container`]) walks its [`Sections`] (allocation-free) and asks
//!   each [`Section::role`] whether it holds containers;
//! * static registration ([`crate::registration`]) reads it as an address space
//!   ([`HostFile`], which `registration` makes an `AddressSpace`): section
//!   contents at their addresses, pointer slots valued after relocation, the fat-binary
//!   wrappers ([`WrapperSlot`]), the offload-entry tables ([`EntrySection`]);
//! * prune ([`crate::prune`], feature `write`) rewrites it from the same sections,
//!   segments and relocations ([`elf::Elf64`], [`elf::Relocation`]).
//!
//! Each host format is a module of its own behind the format-neutral types of this one:
//! [`elf`] for ELF, [`pe`] for PE images and COFF objects: each is one arm of
//! [`Sections`] and [`HostFile`].

use alloc::vec::Vec;

use crate::error::Result;
use crate::raw::{ELF_MAGIC, FATBIN_WRAPPER_SIZE, HIP_WRAPPER_SECTION, NV_WRAPPER_SECTION};

pub mod elf;
pub mod kpack;
pub mod pe;

pub use elf::HostElf;
pub use pe::HostPe;

/// The kind of a host file, in the terms every host format shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A relocatable object (ELF `ET_REL`).
    Relocatable,
    /// A fixed-address executable (ELF `ET_EXEC`).
    Executable,
    /// A shared library or position-independent executable (ELF `ET_DYN`).
    Shared,
}

/// What a section holds for an offload runtime, by its name (and, in ELF, its type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionRole<'d> {
    /// HIP offload bundles and `CCOB`s back to back (`.hip_fatbin`).
    HipFatbin,
    /// NVIDIA fatbinaries back to back, the ones the CUDA runtime registers
    /// (`.nv_fatbin`).
    NvFatbin,
    /// NVIDIA fatbinaries of relocatable device code (`nvcc -rdc`), input to the device
    /// link (`__nv_relfatbin`).
    NvRelFatbin,
    /// LLVM OffloadBinaries (`.llvm.offloading`, or ELF type `SHT_LLVM_OFFLOADING`).
    Offloading,
    /// One entry of a bundled host object: `__CLANG_OFFLOAD_BUNDLE__<id>`, with the ID.
    ObjectBundle(&'d [u8]),
    /// HIP or CUDA fat-binary wrappers (`.hipFatBinSegment`, `.nvFatBinSegment`).
    Wrappers,
    /// An offload-entry table, with the kind of its legacy entries
    /// ([`ENTRY_SECTIONS`]).
    Entries(u16),
    /// Nothing an offload runtime reads.
    Other,
}

impl SectionRole<'_> {
    /// True if the section holds offload containers the walk reads (all roles but
    /// wrappers, entry tables and others).
    pub fn holds_containers(&self) -> bool {
        matches!(
            self,
            SectionRole::HipFatbin
                | SectionRole::NvFatbin
                | SectionRole::NvRelFatbin
                | SectionRole::Offloading
                | SectionRole::ObjectBundle(_)
        )
    }

    /// True for the sections of NVIDIA fatbinaries.
    pub fn holds_fatbins(&self) -> bool {
        matches!(self, SectionRole::NvFatbin | SectionRole::NvRelFatbin)
    }
}

/// The names of offload-entry sections, with the kind of their legacy entries
/// (`REGISTRATION.md` §1.5).
/// The kinds are `registration::abi::kind`'s OpenMP (1), CUDA (2) and HIP (4).
pub const ENTRY_SECTIONS: [(&[u8], u16); 4] = [
    (b"omp_offloading_entries", 1),
    (b"cuda_offloading_entries", 2),
    (b"hip_offloading_entries", 4),
    (b"llvm_offload_entries", 1),
];

/// Sections holding HIP/CUDA fat-binary wrappers.
pub const WRAPPER_SECTIONS: [&[u8]; 2] = [HIP_WRAPPER_SECTION, NV_WRAPPER_SECTION];

/// One section of a host file, placed at its (possibly synthetic) address.
#[derive(Clone, Copy)]
pub struct Section<'d> {
    /// Index in the section table.
    pub index: usize,
    /// Name.
    pub name: &'d [u8],
    /// The format's section type (ELF `sh_type`).
    pub kind: u32,
    /// The format's section flags (ELF `sh_flags`).
    pub flags: u64,
    /// Address: where the program sees it, or a synthetic base in a relocatable object
    /// (see [`HostElf`]); for discovery, the address the header records.
    pub address: u64,
    /// Size in memory.
    pub size: u64,
    /// File offset of its contents.
    pub offset: u64,
    /// File contents: empty for sections without any (ELF `SHT_NOBITS`), and always a
    /// slice of the file (an empty section is the empty slice at its offset).
    pub data: &'d [u8],
    /// Loaded with the program (ELF `SHF_ALLOC`).
    pub mapped: bool,
    /// The host format's rule for what the section holds.
    role_of: fn(&'d [u8], u32) -> SectionRole<'d>,
}

impl core::fmt::Debug for Section<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Section")
            .field("index", &self.index)
            .field(
                "name",
                &core::str::from_utf8(self.name).unwrap_or("<not UTF-8>"),
            )
            .field("kind", &self.kind)
            .field("flags", &self.flags)
            .field("address", &self.address)
            .field("size", &self.size)
            .field("offset", &self.offset)
            .field("data_len", &self.data.len())
            .field("mapped", &self.mapped)
            .finish()
    }
}

impl<'d> Section<'d> {
    /// What the section holds for an offload runtime.
    pub fn role(&self) -> SectionRole<'d> {
        (self.role_of)(self.name, self.kind)
    }

    /// True if `addr` lies within the section's file contents.
    pub fn holds(&self, addr: u64) -> bool {
        addr.checked_sub(self.address)
            .is_some_and(|d| d < crate::bytes::u64_of(self.data.len()))
    }
}

/// The sections of a host file placed at their addresses, with an index of those the
/// address space holds (sorted by address): what both formats' address spaces look
/// addresses up in.
#[derive(Clone, Debug)]
pub(crate) struct SectionMap<'d> {
    sections: Vec<Section<'d>>,
    /// Indices into `sections` of the ones in the address space, sorted by address.
    mapped: Vec<usize>,
}

impl<'d> SectionMap<'d> {
    /// The map of `sections`, holding those with contents for which `in_space` is true.
    pub(crate) fn new(sections: Vec<Section<'d>>, in_space: impl Fn(&Section<'d>) -> bool) -> Self {
        let mut mapped: Vec<usize> = sections
            .iter()
            .filter(|s| !s.data.is_empty() && in_space(s))
            .map(|s| s.index)
            .collect();
        mapped.sort_by_key(|&i| sections.get(i).map_or(0, |s| s.address));
        SectionMap { sections, mapped }
    }

    /// Every section, in section-table order.
    pub(crate) fn sections(&self) -> &[Section<'d>] {
        &self.sections
    }

    /// The section in the space containing `addr`, and the offset of `addr` in it.
    pub(crate) fn section_at(&self, addr: u64) -> Option<(&Section<'d>, u64)> {
        let pos = self
            .mapped
            .partition_point(|&i| self.sections.get(i).is_some_and(|s| s.address <= addr));
        let i = *self.mapped.get(pos.checked_sub(1)?)?;
        let s = self.sections.get(i)?;
        let off = addr.checked_sub(s.address)?;
        s.holds(addr).then_some((s, off))
    }

    /// The bytes from `addr` to the end of the section holding it.
    pub(crate) fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        let (s, off) = self.section_at(addr)?;
        s.data.get(usize::try_from(off).ok()?..)
    }

    /// The little-endian u64 stored at `addr`.
    pub(crate) fn raw_u64(&self, addr: u64) -> Option<u64> {
        let b = self.bytes_from(addr)?.get(..8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// Every 24-byte slot of the wrapper sections, in section order, named by `symbol_at`.
    pub(crate) fn wrapper_slots(
        &self,
        symbol_at: impl Fn(u64) -> Option<&'d [u8]>,
    ) -> Vec<WrapperSlot<'d>> {
        let mut out = Vec::new();
        for s in &self.sections {
            if s.role() != SectionRole::Wrappers {
                continue;
            }
            let n = crate::bytes::u64_of(s.data.len()) / FATBIN_WRAPPER_SIZE;
            for i in 0..n {
                let Some(address) = i
                    .checked_mul(FATBIN_WRAPPER_SIZE)
                    .and_then(|o| s.address.checked_add(o))
                else {
                    break;
                };
                out.push(WrapperSlot {
                    address,
                    offset: s
                        .offset
                        .saturating_add(i.saturating_mul(FATBIN_WRAPPER_SIZE)),
                    section: s.name,
                    index: usize::try_from(i).unwrap_or(usize::MAX),
                    symbol: symbol_at(address),
                });
            }
        }
        out
    }
}

/// The section table of a host file, read in place: `Copy`, indexable and allocation-free
/// (the container walk keeps one per host file it is in).
#[derive(Clone, Copy, Debug)]
pub enum Sections<'d> {
    /// An ELF file's sections.
    Elf(elf::ElfSections<'d>),
    /// A PE image's or COFF object's sections.
    Pe(pe::PeSections<'d>),
}

impl<'d> Sections<'d> {
    /// The section table of `data`, if `data` starts like a host format this module
    /// reads; `None` for other bytes.
    pub fn parse(data: &'d [u8]) -> Option<Result<Self>> {
        if data.starts_with(ELF_MAGIC) {
            Some(elf::ElfSections::parse(data).map(Sections::Elf))
        } else if pe::is_pe_or_coff(data) {
            Some(pe::PeSections::parse(data).map(Sections::Pe))
        } else {
            None
        }
    }

    /// Number of sections.
    pub fn len(&self) -> usize {
        match self {
            Sections::Elf(s) => s.len(),
            Sections::Pe(s) => s.len(),
        }
    }

    /// True if there are no sections.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Section `index`.
    pub fn section(&self, index: usize) -> Result<Section<'d>> {
        match self {
            Sections::Elf(s) => s.section(index),
            Sections::Pe(s) => s.section(index),
        }
    }

    /// The sections in table order; a section whose header does not read ends the
    /// iteration with its error.
    pub fn iter(&self) -> SectionIter<'d> {
        SectionIter {
            sections: *self,
            next: 0,
        }
    }
}

/// Iterator over [`Sections`].
#[derive(Clone, Debug)]
pub struct SectionIter<'d> {
    sections: Sections<'d>,
    next: usize,
}

impl<'d> Iterator for SectionIter<'d> {
    type Item = Result<Section<'d>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.sections.len() {
            return None;
        }
        let i = self.next;
        self.next = i.saturating_add(1);
        let s = self.sections.section(i);
        if s.is_err() {
            self.next = usize::MAX;
        }
        Some(s)
    }
}

/// An offload-entry section and the language its legacy entries belong to.
#[derive(Clone, Copy, Debug)]
pub struct EntrySection<'d> {
    /// The section name.
    pub name: &'d [u8],
    /// First byte (the `__start_` symbol).
    pub begin: u64,
    /// One past the last byte (the `__stop_` symbol).
    pub end: u64,
    /// `Kind` of its entries when they use the legacy layout (which has no kind):
    /// OpenMP for `omp_offloading_entries`, CUDA, HIP for `hip_offloading_entries`.
    pub legacy_kind: u16,
}

/// A fat-binary wrapper slot found in a wrapper section.
#[derive(Clone, Copy, Debug)]
pub struct WrapperSlot<'d> {
    /// Address of the 24-byte record.
    pub address: u64,
    /// File offset of the record.
    pub offset: u64,
    /// The section it is in (`.hipFatBinSegment`, `.nvFatBinSegment`).
    pub section: &'d [u8],
    /// Index of the slot in its section.
    pub index: usize,
    /// Name of the symbol defined at the slot, if the file has a symbol table:
    /// `__hip_fatbin_wrapper` (clang codegen), `.fatbin_wrapper` (new offload driver).
    pub symbol: Option<&'d [u8]>,
}

impl WrapperSlot<'_> {
    /// True if the wrapper was made by the new offload driver's `clang-linker-wrapper`
    /// (its registration code walks an offload-entry table; clang codegen's registers
    /// each kernel from code).
    pub fn is_new_driver(&self) -> bool {
        self.symbol
            .is_some_and(|s| s.starts_with(b".fatbin_wrapper"))
    }
}

/// A host file read as the address space its program would see, whatever its format:
/// what static registration, `register`, doctor and validate read wrappers, entry tables
/// and descriptors from.
#[derive(Clone, Debug)]
pub enum HostFile<'d> {
    /// An ELF executable, shared library or relocatable object.
    Elf(HostElf<'d>),
    /// A PE image (DLL, EXE, PYD) or COFF object.
    Pe(HostPe<'d>),
}

impl<'d> HostFile<'d> {
    /// Reads `data` as a host file of any format this module knows.
    pub fn parse(data: &'d [u8]) -> Result<Self> {
        if !data.starts_with(ELF_MAGIC) && pe::is_pe_or_coff(data) {
            return HostPe::parse(data).map(HostFile::Pe);
        }
        HostElf::parse(data).map(HostFile::Elf)
    }

    /// The file's bytes.
    pub fn data(&self) -> &'d [u8] {
        match self {
            HostFile::Elf(e) => e.data(),
            HostFile::Pe(p) => p.data(),
        }
    }

    /// The kind of file.
    pub fn kind(&self) -> FileKind {
        match self {
            HostFile::Elf(e) => e.elf_type(),
            HostFile::Pe(p) => p.kind(),
        }
    }

    /// Every section, in section-table order.
    pub fn sections(&self) -> &[Section<'d>] {
        match self {
            HostFile::Elf(e) => e.sections(),
            HostFile::Pe(p) => p.sections(),
        }
    }

    /// The first section named `name`.
    pub fn section_by_name(&self, name: &[u8]) -> Option<&Section<'d>> {
        self.sections().iter().find(|s| s.name == name)
    }

    /// The mapped section containing `addr`, and the offset of `addr` in it.
    pub fn section_at(&self, addr: u64) -> Option<(&Section<'d>, u64)> {
        match self {
            HostFile::Elf(e) => e.section_at(addr),
            HostFile::Pe(p) => p.section_at(addr),
        }
    }

    /// Every slot of the fat-binary wrapper sections, in section order.
    pub fn fat_binary_wrappers(&self) -> Vec<WrapperSlot<'d>> {
        match self {
            HostFile::Elf(e) => e.fat_binary_wrappers(),
            HostFile::Pe(p) => p.fat_binary_wrappers(),
        }
    }

    /// The offload-entry sections, in section order.
    pub fn entry_sections(&self) -> Vec<EntrySection<'d>> {
        match self {
            HostFile::Elf(e) => e.entry_sections(),
            HostFile::Pe(p) => p.entry_sections(),
        }
    }

    /// The sections of OffloadBinaries.
    pub fn offloading_sections(&self) -> Vec<&Section<'d>> {
        self.sections()
            .iter()
            .filter(|s| s.role() == SectionRole::Offloading)
            .collect()
    }

    /// Every pointer slot whose value the file gives, as `(value, slot address)` sorted
    /// by value (what `registration::descriptors` searches).
    pub fn pointer_slots(&self) -> Vec<(u64, u64)> {
        match self {
            HostFile::Elf(e) => e.pointer_slots(),
            HostFile::Pe(p) => p.pointer_slots(),
        }
    }

    /// The name of the undefined symbol the slot at `addr` is relocated against, if it is.
    pub fn undefined_target(&self, addr: u64) -> Option<&'d [u8]> {
        match self {
            HostFile::Elf(e) => e.undefined_target(addr),
            HostFile::Pe(p) => p.undefined_target(addr),
        }
    }

    /// The name of a symbol defined at `addr`, if any.
    pub fn symbol_at(&self, addr: u64) -> Option<&'d [u8]> {
        match self {
            HostFile::Elf(e) => e.symbol_at(addr),
            HostFile::Pe(p) => p.symbol_at(addr),
        }
    }

    /// The bytes from `addr` to the end of the mapped section holding it.
    pub fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        match self {
            HostFile::Elf(e) => e.bytes_from(addr),
            HostFile::Pe(p) => p.bytes_from(addr),
        }
    }

    /// The pointer the program sees at `addr` once relocated.
    pub fn pointer_at(&self, addr: u64) -> Result<u64> {
        match self {
            HostFile::Elf(e) => e.pointer_at(addr),
            HostFile::Pe(p) => p.pointer_at(addr),
        }
    }

    /// The file offset of address `addr`, if a section holds it in the file.
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        let (s, off) = self.section_at(addr)?;
        s.offset.checked_add(off)
    }
}
