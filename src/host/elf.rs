//! ELF host files: the section table read in place for discovery ([`ElfSections`]), the
//! typed 64-bit reader that prune rewrites from ([`Elf64`]: header, sections, segments,
//! [`Relocation`]s), and the address space static registration reads ([`HostElf`]).
//!
//! [`HostElf`] is the address space (`registration::AddressSpace`) over a host executable, shared library or
//! relocatable object: section contents at their addresses, and pointer slots valued as
//! the program would see them after relocation:
//!
//! * executables and shared objects: `SHT_RELA`/`SHT_REL` sections with `SHF_ALLOC`
//!   (`.rela.dyn`, `.rela.plt`): `R_*_RELATIVE` gives the addend (load base 0), absolute
//!   and `GLOB_DAT` relocations give the symbol's value when the file defines it; packed
//!   `SHT_RELR` relocations need nothing, since their addend is the slot's own content;
//! * relocatable objects: every section gets a distinct synthetic base address
//!   (`(index + 1) * 2^40`), and the per-section `.rela<name>` tables are applied with the
//!   same rules.
//!
//! A pointer relocated against a symbol the file does not define (a fat binary that the
//! device link will provide, a runtime function) reads as an error naming that symbol's
//! absence. Only 64-bit little-endian files are read as address spaces (the LP64 layouts
//! of the records); relocations are decoded for x86-64 and AArch64. Discovery reads 32-
//! and 64-bit files of either byte order.
//!
//! Finding the registration records (`REGISTRATION.md` §7):
//!
//! * HIP/CUDA fat-binary wrappers: every 24-byte slot of `.hipFatBinSegment` /
//!   `.nvFatBinSegment` ([`HostElf::fat_binary_wrappers`]);
//! * `__tgt_bin_desc` descriptors: they are internal constants the constructor passes by
//!   address, so they are found by structure: a 32-byte record
//!   whose entry range is exactly an offload-entry section (`omp_offloading_entries`,
//!   `cuda_offloading_entries`, `hip_offloading_entries`, `llvm_offload_entries`) and
//!   whose images all point at that same range (§1.6); or, for a module without offload
//!   entries (the wrapper's zero-length `__dummy` keeps the bounds defined, but linkers drop
//!   the empty section, so `__start_`/`__stop_` are one address), a record whose entry
//!   range is empty and whose image array starts with an image in a `.llvm.offloading`
//!   section; the search is `registration::descriptors`, over [`HostElf::pointer_slots`];
//! * offload-entry tables: [`HostElf::entry_sections`].

use alloc::vec::Vec;

use object::elf::{FileHeader32, FileHeader64, ProgramHeader64, Rel64, Rela64, Sym64};
use object::read::elf::{
    FileHeader, ProgramHeader, Rel as _, Rela as _, RelrIterator, SectionHeader, SectionTable, Sym,
    SymbolTable,
};
use object::{Endianness, LittleEndian as LE};

use crate::bytes::{self, u64_of};
use crate::error::{Error, ErrorKind, Result};

use super::{
    EntrySection, FileKind, Section, SectionMap, SectionRole, WrapperSlot, ENTRY_SECTIONS,
    WRAPPER_SECTIONS,
};
use crate::raw::{
    HIP_FATBIN_SECTION, NV_FATBIN_SECTION, NV_RELFATBIN_SECTION, OBJECT_BUNDLE_PREFIX,
    OFFLOADING_SECTION,
};

/// ELF section type of `.llvm.offloading` (`SHT_LLVM_OFFLOADING`; `object::elf` does not
/// define it).
pub const SHT_LLVM_OFFLOADING: u32 = 0x6FFF_4C0B;

// The ELF constants this module matches on, as plain integers (`object::elf` has them as
// typed values).
const R_X86_64_64: u32 = object::elf::R_X86_64_64.0;
const R_X86_64_GLOB_DAT: u32 = object::elf::R_X86_64_GLOB_DAT.0;
const R_X86_64_JUMP_SLOT: u32 = object::elf::R_X86_64_JUMP_SLOT.0;
const R_X86_64_RELATIVE: u32 = object::elf::R_X86_64_RELATIVE.0;
const R_AARCH64_ABS64: u32 = object::elf::R_AARCH64_ABS64.0;
const R_AARCH64_GLOB_DAT: u32 = object::elf::R_AARCH64_GLOB_DAT.0;
const R_AARCH64_JUMP_SLOT: u32 = object::elf::R_AARCH64_JUMP_SLOT.0;
const R_AARCH64_RELATIVE: u32 = object::elf::R_AARCH64_RELATIVE.0;
const EM_X86_64: u16 = object::elf::EM_X86_64.0;
const EM_AARCH64: u16 = object::elf::EM_AARCH64.0;
const SHT_NOBITS: u32 = object::elf::SHT_NOBITS.0;
const SHT_RELA: u32 = object::elf::SHT_RELA.0;
const SHT_REL: u32 = object::elf::SHT_REL.0;
const SHT_RELR: u32 = object::elf::SHT_RELR.0;
const SHF_WRITE: u64 = object::elf::SHF_WRITE.0;
const SHF_ALLOC: u64 = object::elf::SHF_ALLOC.0;
const PT_LOAD: object::elf::ProgramType = object::elf::PT_LOAD;
/// Size of an `Elf64_Rela` record.
const RELA_SIZE: u64 = core::mem::size_of::<Rela64<LE>>() as u64;
/// Size of an `Elf64_Rel` record.
const REL_SIZE: u64 = core::mem::size_of::<Rel64<LE>>() as u64;
/// Distance between the synthetic base addresses of a relocatable object's sections.
const SYNTHETIC_STRIDE: u64 = 1 << 40;

const BAD_HEADER: &str = "ELF header is malformed";
const BAD_SECTIONS: &str = "ELF section header table is malformed";

/// An `object` error in context (its message is not available as a `&'static str`).
fn elf_error(what: &'static str) -> impl Fn(object::read::Error) -> Error {
    move |_| Error::new(ErrorKind::BadContainer, 0, what)
}

/// The ELF header's section-table fields of `data` (class and byte order from
/// `e_ident`), for locating errors: where each field is and what it holds.
struct TableFields {
    /// Offset of `e_shoff`, `e_shentsize`, `e_shnum`, `e_shstrndx` in the file.
    at: [u64; 4],
    shoff: u64,
    shentsize: u64,
    shnum: u64,
    shstrndx: u64,
    /// Offset of `sh_offset` within a section header.
    sh_offset_at: u64,
    /// The section header size of this class.
    entsize: u64,
    /// Bytes of an address-sized word (`sh_offset`, `sh_size`).
    word_len: usize,
    big: bool,
}

/// The unsigned `n`-byte word at `at` of `data`, big- or little-endian.
fn word(data: &[u8], big: bool, at: u64, n: usize) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    let b = data.get(at..at.checked_add(n)?)?;
    let fold = |a: u64, x: &u8| a.wrapping_shl(8) | u64::from(*x);
    Some(if big {
        b.iter().fold(0, fold)
    } else {
        b.iter().rev().fold(0, fold)
    })
}

impl TableFields {
    fn read(data: &[u8]) -> Option<Self> {
        let class64 = *data.get(4)? == 2;
        let big = *data.get(5)? == 2;
        let word = |at: u64, n: usize| word(data, big, at, n);
        let (at, shoff_len, sh_offset_at, entsize) = if class64 {
            ([0x28, 0x3A, 0x3C, 0x3E], 8, 0x18, 64)
        } else {
            ([0x20, 0x2E, 0x30, 0x32], 4, 0x10, 40)
        };
        Some(TableFields {
            shoff: word(at[0], shoff_len)?,
            shentsize: word(at[1], 2)?,
            shnum: word(at[2], 2)?,
            shstrndx: word(at[3], 2)?,
            at,
            sh_offset_at,
            entsize,
            word_len: shoff_len,
            big,
        })
    }

    /// Offset of the string table's `sh_offset` when its contents lie outside the file.
    fn strtab_outside(&self, data: &[u8]) -> Option<u64> {
        let at = self.field_of(self.shstrndx, self.sh_offset_at);
        let size_at = at.checked_add(u64_of(self.word_len))?;
        let offset = word(data, self.big, at, self.word_len)?;
        let size = word(data, self.big, size_at, self.word_len)?;
        offset
            .checked_add(size)
            .is_none_or(|end| end > u64_of(data.len()))
            .then_some(at)
    }

    /// Offset of section header `i`'s field at `field` within the header.
    fn field_of(&self, i: u64, field: u64) -> u64 {
        self.shoff
            .saturating_add(i.saturating_mul(self.shentsize))
            .saturating_add(field)
    }

    /// The field that makes the section table unreadable: `e_shentsize` of the wrong
    /// size, `e_shoff` when the table runs past the file, `e_shstrndx` out of range, else
    /// the string table's `sh_offset`.
    fn table_error_at(&self, len: u64) -> u64 {
        let [shoff_at, shentsize_at, _, shstrndx_at] = self.at;
        if self.shentsize != self.entsize {
            return shentsize_at;
        }
        let end = self
            .shnum
            .max(1)
            .checked_mul(self.shentsize)
            .and_then(|n| n.checked_add(self.shoff));
        if end.is_none_or(|e| e > len) {
            return shoff_at;
        }
        if self.shstrndx != 0xFFFF && self.shnum != 0 && self.shstrndx >= self.shnum {
            return shstrndx_at;
        }
        self.field_of(self.shstrndx, self.sh_offset_at)
    }
}

/// [`elf_error`] for the section table of `data`, at the offending field's offset.
fn sections_error(data: &[u8]) -> impl Fn(object::read::Error) -> Error + '_ {
    move |_| {
        let at = TableFields::read(data).map_or(0, |f| f.table_error_at(u64_of(data.len())));
        Error::new(ErrorKind::BadContainer, at, BAD_SECTIONS)
    }
}

/// [`elf_error`] for section `i` of `data`, at its header's field `field` (`sh_name`:
/// 0; `sh_offset`: `None`, the class's offset).
fn section_error<'a>(
    data: &'a [u8],
    i: usize,
    field: Option<u64>,
    what: &'static str,
) -> impl Fn(object::read::Error) -> Error + 'a {
    move |_| {
        let at = TableFields::read(data).map_or(0, |f| match field {
            // A name outside the string table: the table itself, when it lies outside the
            // file, else this section's `sh_name`.
            Some(name) => f
                .strtab_outside(data)
                .unwrap_or_else(|| f.field_of(u64_of(i), name)),
            None => f.field_of(u64_of(i), f.sh_offset_at),
        });
        Error::new(ErrorKind::BadContainer, at, what)
    }
}

/// What an ELF section holds, by name and type ([`SectionRole`]).
pub fn section_role(name: &[u8], sh_type: u32) -> SectionRole<'_> {
    if let Some(id) = name.strip_prefix(OBJECT_BUNDLE_PREFIX) {
        return SectionRole::ObjectBundle(id);
    }
    match name {
        HIP_FATBIN_SECTION => SectionRole::HipFatbin,
        NV_FATBIN_SECTION => SectionRole::NvFatbin,
        NV_RELFATBIN_SECTION => SectionRole::NvRelFatbin,
        _ if sh_type == SHT_LLVM_OFFLOADING || name.starts_with(OFFLOADING_SECTION) => {
            SectionRole::Offloading
        }
        _ if WRAPPER_SECTIONS.contains(&name) => SectionRole::Wrappers,
        _ => match ENTRY_SECTIONS.iter().find(|(n, _)| *n == name) {
            Some((_, kind)) => SectionRole::Entries(*kind),
            None => SectionRole::Other,
        },
    }
}

/// The section table of a 32- or 64-bit ELF file of either byte order, read in place
/// (`Copy`, allocation-free).
#[derive(Clone, Copy, Debug)]
pub enum ElfSections<'d> {
    /// A 32-bit file.
    E32(
        Endianness,
        SectionTable<'d, FileHeader32<Endianness>>,
        &'d [u8],
    ),
    /// A 64-bit file.
    E64(
        Endianness,
        SectionTable<'d, FileHeader64<Endianness>>,
        &'d [u8],
    ),
}

impl<'d> ElfSections<'d> {
    /// Reads the section header table of `data`.
    pub fn parse(data: &'d [u8]) -> Result<Self> {
        match data.get(4) {
            Some(1) => {
                let h = FileHeader32::<Endianness>::parse(data).map_err(elf_error(BAD_HEADER))?;
                let e = h.endian().map_err(elf_error(BAD_HEADER))?;
                Ok(ElfSections::E32(
                    e,
                    h.sections(e, data).map_err(sections_error(data))?,
                    data,
                ))
            }
            Some(2) => {
                let h = FileHeader64::<Endianness>::parse(data).map_err(elf_error(BAD_HEADER))?;
                let e = h.endian().map_err(elf_error(BAD_HEADER))?;
                Ok(ElfSections::E64(
                    e,
                    h.sections(e, data).map_err(sections_error(data))?,
                    data,
                ))
            }
            _ => Err(Error::new(
                ErrorKind::BadContainer,
                4,
                "ELF class is neither 32- nor 64-bit",
            )),
        }
    }

    /// Number of sections.
    pub fn len(&self) -> usize {
        match self {
            ElfSections::E32(_, t, _) => t.len(),
            ElfSections::E64(_, t, _) => t.len(),
        }
    }

    /// True if the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True if a section is named `__CLANG_OFFLOAD_BUNDLE__<id>` (`FORMATS.md` §2.5).
    pub fn has_object_bundle(&self) -> bool {
        (0..self.len()).any(|i| {
            self.section(i)
                .is_ok_and(|s| s.name.starts_with(OBJECT_BUNDLE_PREFIX))
        })
    }

    /// Section `i`, at the address its header records.
    pub fn section(&self, i: usize) -> Result<Section<'d>> {
        fn get<'d, H: FileHeader<Endian = Endianness>>(
            e: Endianness,
            t: &SectionTable<'d, H>,
            data: &'d [u8],
            i: usize,
        ) -> Result<Section<'d>> {
            let sh = t.iter().as_slice().get(i).ok_or(Error::new(
                ErrorKind::BadContainer,
                0,
                BAD_SECTIONS,
            ))?;
            let name = t.section_name(e, sh).map_err(section_error(
                data,
                i,
                Some(0),
                "ELF section name is outside the string table",
            ))?;
            let kind = sh.sh_type(e).0;
            let offset: u64 = sh.sh_offset(e).into();
            let flags: u64 = sh.sh_flags(e).0;
            let contents = if kind == SHT_NOBITS {
                &[][..]
            } else {
                sh.data(e, data).map_err(section_error(
                    data,
                    i,
                    None,
                    "ELF section contents lie outside the file",
                ))?
            };
            // `object` hands out a detached `&[]` for empty and NOBITS sections: keep every
            // slice inside the file (at the section's offset, else at the end of the file).
            let contents = if contents.is_empty() {
                bytes::sub(data, offset, 0, "section")
                    .or_else(|_| bytes::rest(data, u64_of(data.len()), "section"))?
            } else {
                contents
            };
            Ok(Section {
                index: i,
                name,
                kind,
                flags,
                address: sh.sh_addr(e).into(),
                size: sh.sh_size(e).into(),
                offset,
                data: contents,
                mapped: flags & SHF_ALLOC != 0,
                role_of: section_role,
            })
        }
        match self {
            ElfSections::E32(e, t, d) => get(*e, t, d, i),
            ElfSections::E64(e, t, d) => get(*e, t, d, i),
        }
    }
}

/// A little-endian 64-bit ELF file read with `object`'s typed structures: header, section
/// table and program headers. Prune rewrites linked files from it; [`HostElf`] is built on
/// it.
#[derive(Clone, Copy, Debug)]
pub struct Elf64<'d> {
    data: &'d [u8],
    header: &'d FileHeader64<LE>,
    kind: FileKind,
    sections: SectionTable<'d, FileHeader64<LE>>,
}

impl<'d> Elf64<'d> {
    /// Reads the header, section table and program headers of `data`.
    pub fn parse(data: &'d [u8]) -> Result<Self> {
        let header = FileHeader64::<LE>::parse(data).map_err(elf_error(BAD_HEADER))?;
        if !header.is_little_endian() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                5,
                "only little-endian 64-bit host ELF files are supported",
            ));
        }
        let kind = match header.e_type(LE).0 {
            1 => FileKind::Relocatable,
            2 => FileKind::Executable,
            3 => FileKind::Shared,
            // ET_NONE: no file type at all.
            0 => {
                return Err(Error::new(
                    ErrorKind::BadContainer,
                    16,
                    "ELF file is not an object, executable or shared library",
                ))
            }
            // A core file or an OS- or processor-specific type: valid, not a host file.
            _ => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    16,
                    "ELF file is not an object, executable or shared library",
                ))
            }
        };
        let sections = header.sections(LE, data).map_err(sections_error(data))?;
        Ok(Elf64 {
            data,
            header,
            kind,
            sections,
        })
    }

    /// The file's bytes.
    pub fn data(&self) -> &'d [u8] {
        self.data
    }

    /// The file header.
    pub fn header(&self) -> &'d FileHeader64<LE> {
        self.header
    }

    /// The kind of file (`e_type`).
    pub fn kind(&self) -> FileKind {
        self.kind
    }

    /// `e_machine`.
    pub fn machine(&self) -> u16 {
        self.header.e_machine(LE).0
    }

    /// The section header table.
    pub fn section_table(&self) -> &SectionTable<'d, FileHeader64<LE>> {
        &self.sections
    }

    /// The sections, as discovery reads them ([`ElfSections`]).
    pub fn sections(&self) -> Result<ElfSections<'d>> {
        ElfSections::parse(self.data)
    }

    /// The program headers (read when asked for: discovery and registration need none).
    pub fn segments(&self) -> Result<&'d [ProgramHeader64<LE>]> {
        self.header.program_headers(LE, self.data).map_err(|_| {
            Error::new(
                ErrorKind::BadContainer,
                self.header.e_phoff(LE),
                "ELF program header table lies outside the file",
            )
        })
    }

    /// The `PT_LOAD` program headers, in table order (none if the table does not read).
    pub fn loads(&self) -> impl Iterator<Item = &'d ProgramHeader64<LE>> + 'd {
        self.segments()
            .unwrap_or_default()
            .iter()
            .filter(|p| p.p_type(LE) == PT_LOAD)
    }

    /// The file offset of the `len` bytes at address `vaddr`, when one `PT_LOAD` segment
    /// holds all of them in the file.
    pub fn file_offset(&self, vaddr: u64, len: u64) -> Option<u64> {
        let end = vaddr.checked_add(len)?;
        self.loads()
            .find(|p| p.p_vaddr(LE) <= vaddr && end <= p.p_vaddr(LE).saturating_add(p.p_filesz(LE)))
            .and_then(|p| {
                p.p_offset(LE)
                    .checked_add(vaddr.checked_sub(p.p_vaddr(LE))?)
            })
    }

    /// What a relocation does, for this file's machine (`SHT_RELR` places are relative).
    pub fn kind_of(&self, r: &Relocation) -> RelocationKind {
        if r.encoding == Encoding::Relr {
            RelocationKind::Relative
        } else {
            self.relocation_kind(r.r_type)
        }
    }

    /// What relocation type `r_type` does, for this file's machine.
    pub fn relocation_kind(&self, r_type: u32) -> RelocationKind {
        let (abs, glob, slot, relative) = match self.machine() {
            EM_X86_64 => (
                R_X86_64_64,
                R_X86_64_GLOB_DAT,
                R_X86_64_JUMP_SLOT,
                R_X86_64_RELATIVE,
            ),
            EM_AARCH64 => (
                R_AARCH64_ABS64,
                R_AARCH64_GLOB_DAT,
                R_AARCH64_JUMP_SLOT,
                R_AARCH64_RELATIVE,
            ),
            _ => return RelocationKind::Other,
        };
        match r_type {
            t if t == relative => RelocationKind::Relative,
            t if t == abs => RelocationKind::Absolute,
            t if t == glob => RelocationKind::GlobDat,
            t if t == slot => RelocationKind::JumpSlot,
            _ => RelocationKind::Other,
        }
    }

    /// Every relocation of every `SHT_RELA`, `SHT_REL` and `SHT_RELR` section, in section
    /// order and record order. A relocation table outside the file ends the iteration
    /// with a located error.
    pub fn relocations(&self) -> Relocations<'d> {
        Relocations {
            elf: *self,
            next: 0,
            current: Current::None,
        }
    }
}

/// How a relocation is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// An `Elf64_Rela` record at this file offset (the addend is at +16).
    Rela(u64),
    /// An `Elf64_Rel` record at this file offset (the addend is the relocated word).
    Rel(u64),
    /// One place of an `SHT_RELR` section (relative; the addend is the relocated word).
    Relr,
}

/// What a relocation computes, for the machines whose pointer relocations are decoded
/// (x86-64, AArch64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelocationKind {
    /// `R_*_RELATIVE`: load base + addend.
    Relative,
    /// `R_X86_64_64` / `R_AARCH64_ABS64`: symbol + addend.
    Absolute,
    /// `R_*_GLOB_DAT`: the symbol's address (plus the addend on AArch64).
    GlobDat,
    /// `R_*_JUMP_SLOT`: as `GLOB_DAT`.
    JumpSlot,
    /// Anything else (not a 64-bit pointer this reader values).
    Other,
}

/// One relocation, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relocation {
    /// Index of the relocation section.
    pub section: usize,
    /// `SHF_ALLOC` relocation section: applied by the dynamic loader.
    pub dynamic: bool,
    /// The section the relocations apply to (`sh_info`; 0 for dynamic tables).
    pub target: usize,
    /// The symbol table (`sh_link`).
    pub symbols: usize,
    /// How it is stored.
    pub encoding: Encoding,
    /// `r_offset`: the place (an address in linked files, an offset into `target` in
    /// relocatable objects).
    pub place: u64,
    /// `r_type` (0 for `SHT_RELR`).
    pub r_type: u32,
    /// `r_sym`.
    pub symbol: u32,
    /// The explicit addend of a `Rela` record.
    pub addend: Option<i64>,
}

/// Iterator over the relocations of an [`Elf64`] ([`Elf64::relocations`]).
#[derive(Debug)]
pub struct Relocations<'d> {
    elf: Elf64<'d>,
    next: usize,
    current: Current<'d>,
}

#[derive(Debug)]
enum Current<'d> {
    None,
    Rela(Relocation, &'d [Rela64<LE>], usize),
    Rel(Relocation, &'d [Rel64<LE>], usize),
    Relr(Relocation, RelrIterator<'d, FileHeader64<LE>>),
}

impl Iterator for Relocations<'_> {
    type Item = Result<Relocation>;

    fn next(&mut self) -> Option<Result<Relocation>> {
        loop {
            if let Some(r) = self.current.next_record() {
                return Some(Ok(r));
            }
            self.current = Current::None;
            if let Err(e) = self.open_next_table()? {
                return Some(Err(e));
            }
        }
    }
}

impl<'d> Relocations<'d> {
    /// Moves on to the next section and, if it is a relocation table, starts reading it.
    /// `None` after the last section; an error (and the end) for a table that lies outside
    /// the file.
    fn open_next_table(&mut self) -> Option<Result<()>> {
        let table = self.elf.sections;
        let sh = table.iter().as_slice().get(self.next)?;
        let index = self.next;
        self.next = self.next.saturating_add(1);
        let ty = sh.sh_type(LE).0;
        if ty != SHT_RELA && ty != SHT_REL && ty != SHT_RELR {
            return Some(Ok(()));
        }
        let offset = sh.sh_offset(LE);
        let base = Relocation {
            section: index,
            dynamic: sh.sh_flags(LE).0 & SHF_ALLOC != 0,
            target: usize::try_from(sh.sh_info(LE)).unwrap_or(usize::MAX),
            symbols: usize::try_from(sh.sh_link(LE)).unwrap_or(usize::MAX),
            encoding: Encoding::Relr,
            place: 0,
            r_type: 0,
            symbol: 0,
            addend: None,
        };
        let data = self.elf.data;
        let current = match ty {
            SHT_RELA => sh.data_as_array(LE, data).ok().map(|recs| {
                let encoding = Encoding::Rela(offset);
                Current::Rela(Relocation { encoding, ..base }, recs, 0)
            }),
            SHT_REL => sh.data_as_array(LE, data).ok().map(|recs| {
                let encoding = Encoding::Rel(offset);
                Current::Rel(Relocation { encoding, ..base }, recs, 0)
            }),
            _ => match sh.relr(LE, data) {
                Ok(Some(places)) => Some(Current::Relr(Relocation { r_type: 0, ..base }, places)),
                _ => None,
            },
        };
        match current {
            Some(current) => {
                self.current = current;
                Some(Ok(()))
            }
            None => {
                self.next = usize::MAX;
                Some(Err(Error::new(
                    ErrorKind::BadContainer,
                    offset,
                    "ELF relocation table lies outside the file",
                )))
            }
        }
    }
}

impl Current<'_> {
    /// The next record of the table being read, with the offset of its bytes; `None` at
    /// the table's end.
    fn next_record(&mut self) -> Option<Relocation> {
        match self {
            Current::Rela(base, recs, k) => {
                let r = recs.get(*k)?;
                let Encoding::Rela(o) = base.encoding else {
                    return None;
                };
                let at = o.saturating_add(u64_of(*k).saturating_mul(RELA_SIZE));
                *k = k.saturating_add(1);
                Some(Relocation {
                    encoding: Encoding::Rela(at),
                    place: r.r_offset(LE),
                    r_type: r.r_type(LE, false).0,
                    symbol: r.r_sym(LE, false),
                    addend: Some(r.r_addend(LE)),
                    ..*base
                })
            }
            Current::Rel(base, recs, k) => {
                let r = recs.get(*k)?;
                let Encoding::Rel(o) = base.encoding else {
                    return None;
                };
                let at = o.saturating_add(u64_of(*k).saturating_mul(REL_SIZE));
                *k = k.saturating_add(1);
                Some(Relocation {
                    encoding: Encoding::Rel(at),
                    place: r.r_offset(LE),
                    r_type: r.r_type(LE).0,
                    symbol: r.r_sym(LE),
                    addend: None,
                    ..*base
                })
            }
            Current::Relr(base, places) => {
                let place = places.next()?;
                Some(Relocation { place, ..*base })
            }
            Current::None => None,
        }
    }
}

/// What a pointer slot holds after relocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value<'d> {
    Known(u64),
    Undefined(&'d [u8]),
}

/// One 64-bit pointer relocation: the slot's address and its value.
#[derive(Clone, Copy, Debug)]
struct Reloc<'d> {
    at: u64,
    value: Value<'d>,
}

/// A host ELF file read as the address space its program would see (see the module
/// documentation).
///
/// `.symtab` is read only when a name is asked for ([`HostElf::symbol_at`], the wrappers'
/// symbols), and then only the names of the sections asked about: large libraries carry
/// tens of megabytes of symbol names that registration does not need.
#[derive(Clone, Debug)]
pub struct HostElf<'d> {
    elf: Elf64<'d>,
    map: SectionMap<'d>,
    relocs: Vec<Reloc<'d>>,
}

impl<'d> HostElf<'d> {
    /// Reads the section table, the relocations and the symbol table of `data`.
    pub fn parse(data: &'d [u8]) -> Result<Self> {
        let elf = Elf64::parse(data)?;
        let kind = elf.kind();
        let table = elf.sections()?;
        let mut sections = Vec::with_capacity(table.len());
        for index in 0..table.len() {
            let mut s = table.section(index)?;
            if kind == FileKind::Relocatable {
                s.address = u64_of(index)
                    .saturating_add(1)
                    .saturating_mul(SYNTHETIC_STRIDE);
            }
            if s.kind == SHT_NOBITS {
                s.data = s.data.get(..0).unwrap_or_default();
            }
            sections.push(s);
        }
        let map = SectionMap::new(sections, |s| {
            s.index != 0
                && match kind {
                    FileKind::Relocatable => true,
                    _ => s.flags & SHF_ALLOC != 0 && s.address != 0,
                }
        });
        let mut host = HostElf {
            elf,
            map,
            relocs: Vec::new(),
        };
        host.read_relocations()?;
        Ok(host)
    }

    fn base_of(&self, section: usize) -> Option<u64> {
        self.sections().get(section).map(|s| s.address)
    }

    fn read_relocations(&mut self) -> Result<()> {
        // Pointer relocations are decoded for x86-64 and AArch64 only.
        if !matches!(self.elf.machine(), EM_X86_64 | EM_AARCH64) {
            return Ok(());
        }
        let data = self.elf.data();
        let table = *self.elf.section_table();
        let kind = self.elf.kind();
        let aarch64 = self.elf.machine() == EM_AARCH64;
        let mut relocs = Vec::new();
        let mut symtab: Option<(usize, Option<SymbolTable<'d, FileHeader64<LE>>>)> = None;
        for r in self.elf.relocations() {
            let r = r?;
            if r.encoding == Encoding::Relr {
                continue;
            }
            let target_base = match kind {
                FileKind::Relocatable => {
                    let Some(b) = self.base_of(r.target) else {
                        continue;
                    };
                    b
                }
                _ if r.dynamic => 0,
                // Static relocation sections kept in a linked file (`--emit-relocs`)
                // describe the link, not the loaded program.
                _ => continue,
            };
            let rk = self.elf.relocation_kind(r.r_type);
            if rk == RelocationKind::Other {
                continue;
            }
            let at = target_base.wrapping_add(r.place);
            let addend = match r.addend {
                Some(a) => a,
                // REL: the implicit addend is the slot's content.
                None => self.raw_u64(at).unwrap_or(0) as i64,
            };
            let value = if rk == RelocationKind::Relative {
                Value::Known(addend as u64)
            } else {
                let add =
                    if rk == RelocationKind::Absolute || kind == FileKind::Relocatable || aarch64 {
                        addend
                    } else {
                        // GLOB_DAT / JUMP_SLOT on x86-64 take S only; AArch64 adds A.
                        0
                    };
                if symtab.as_ref().is_none_or(|(i, _)| *i != r.symbols) {
                    let t = table
                        .symbol_table_by_index(LE, data, object::SectionIndex(r.symbols))
                        .ok();
                    symtab = Some((r.symbols, t));
                }
                let t = symtab.as_ref().and_then(|(_, t)| t.as_ref());
                self.symbol_value(t, r.symbol)
                    .map_or_else(Value::Undefined, |s| {
                        Value::Known(s.wrapping_add(add as u64))
                    })
            };
            relocs.push(Reloc { at, value });
        }
        relocs.sort_by_key(|r| r.at);
        // Keep the last relocation of a slot, as a loader applying them in order would.
        relocs.reverse();
        relocs.dedup_by_key(|r| r.at);
        relocs.reverse();
        self.relocs = relocs;
        Ok(())
    }

    /// The value of symbol `index` of `symtab`, or its name when the file does not define it.
    fn symbol_value(
        &self,
        symtab: Option<&SymbolTable<'d, FileHeader64<LE>>>,
        index: u32,
    ) -> core::result::Result<u64, &'d [u8]> {
        let Some(symtab) = symtab else {
            return Err(b"?");
        };
        let Ok(sym) = symtab.symbol(object::SymbolIndex(index as usize)) else {
            return Err(b"?");
        };
        let name = sym.name(LE, symtab.strings()).unwrap_or(b"?");
        let shndx = sym.st_shndx(LE).0;
        match shndx {
            0 => Err(name),
            0xfff1 => Ok(sym.st_value(LE)),
            n if n >= 0xff00 => Err(name),
            n => match self.elf.kind() {
                FileKind::Relocatable => self
                    .base_of(usize::from(n))
                    .map(|b| b.wrapping_add(sym.st_value(LE)))
                    .ok_or(name),
                _ => Ok(sym.st_value(LE)),
            },
        }
    }

    /// The defined, named `.symtab` symbols of the sections in `sections` (every section
    /// with `None`), as (address, name, section index), sorted by address. Names are read
    /// only for those symbols.
    fn symbols_in(&self, sections: Option<&[usize]>) -> Vec<(u64, &'d [u8], usize)> {
        let table = self.elf.section_table();
        let Ok(symtab) = table.symbols(LE, self.elf.data(), object::elf::SHT_SYMTAB) else {
            return Vec::new();
        };
        let mut symbols = Vec::new();
        for sym in symtab.iter() {
            let sym: &Sym64<LE> = sym;
            let shndx = sym.st_shndx(LE).0;
            if shndx == 0 || shndx >= 0xff00 {
                continue;
            }
            let index = usize::from(shndx);
            if sections.is_some_and(|want| !want.contains(&index)) {
                continue;
            }
            let Ok(name) = sym.name(LE, symtab.strings()) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let addr = match self.elf.kind() {
                FileKind::Relocatable => match self.base_of(index) {
                    Some(b) => b.wrapping_add(sym.st_value(LE)),
                    None => continue,
                },
                _ => sym.st_value(LE),
            };
            symbols.push((addr, name, index));
        }
        symbols.sort_by_key(|s| s.0);
        symbols
    }

    /// The first name of `symbols` (sorted by address) defined at `addr`, bounds markers
    /// aside.
    fn name_at(symbols: &[(u64, &'d [u8], usize)], addr: u64) -> Option<&'d [u8]> {
        let pos = symbols.partition_point(|s| s.0 < addr);
        symbols
            .get(pos..)?
            .iter()
            .take_while(|s| s.0 == addr)
            .map(|s| s.1)
            .find(|n| !n.starts_with(b"__start_") && !n.starts_with(b"__stop_"))
    }

    fn raw_u64(&self, addr: u64) -> Option<u64> {
        self.map.raw_u64(addr)
    }

    /// The file type.
    pub fn elf_type(&self) -> FileKind {
        self.elf.kind()
    }

    /// `e_machine`.
    pub fn machine(&self) -> u16 {
        self.elf.machine()
    }

    /// The file's bytes.
    pub fn data(&self) -> &'d [u8] {
        self.elf.data()
    }

    /// The typed reader underneath.
    pub fn elf(&self) -> &Elf64<'d> {
        &self.elf
    }

    /// Every section, in section-table order.
    pub fn sections(&self) -> &[Section<'d>] {
        self.map.sections()
    }

    /// The mapped section containing `addr`, and the offset of `addr` in it.
    pub fn section_at(&self, addr: u64) -> Option<(&Section<'d>, u64)> {
        self.map.section_at(addr)
    }

    /// The first section named `name`.
    pub fn section_by_name(&self, name: &[u8]) -> Option<&Section<'d>> {
        self.sections().iter().find(|s| s.name == name)
    }

    /// The name of a symbol defined at `addr` (from `.symtab`), if any. Section symbols and
    /// file symbols have no name and are not returned. When `addr` lies in a section, only
    /// that section's symbols count: a zero-sized symbol at the end of the section before
    /// (the wrapper's `__dummy.llvm_offload_entries`, a `__stop_` bound) has the same
    /// address but names nothing there.
    pub fn symbol_at(&self, addr: u64) -> Option<&'d [u8]> {
        match self.section_at(addr).map(|(s, _)| s.index) {
            Some(i) => Self::name_at(&self.symbols_in(Some(&[i])), addr),
            None => Self::name_at(&self.symbols_in(None), addr),
        }
    }

    /// The name of the undefined symbol the slot at `addr` is relocated against, if it is.
    pub fn undefined_target(&self, addr: u64) -> Option<&'d [u8]> {
        match self.reloc(addr)?.value {
            Value::Undefined(n) => Some(n),
            Value::Known(_) => None,
        }
    }

    fn reloc(&self, addr: u64) -> Option<&Reloc<'d>> {
        let i = self.relocs.binary_search_by_key(&addr, |r| r.at).ok()?;
        self.relocs.get(i)
    }

    /// Every 24-byte slot of the fat-binary wrapper sections, in section order.
    pub fn fat_binary_wrappers(&self) -> Vec<WrapperSlot<'d>> {
        let wrapper_sections: Vec<usize> = self
            .sections()
            .iter()
            .filter(|s| s.role() == SectionRole::Wrappers)
            .map(|s| s.index)
            .collect();
        if wrapper_sections.is_empty() {
            return Vec::new();
        }
        let symbols = self.symbols_in(Some(&wrapper_sections));
        self.map
            .wrapper_slots(|address| Self::name_at(&symbols, address))
    }

    /// The offload-entry sections, in section order.
    pub fn entry_sections(&self) -> Vec<EntrySection<'d>> {
        self.sections()
            .iter()
            .filter_map(|s| match s.role() {
                SectionRole::Entries(kind) => Some(EntrySection {
                    name: s.name,
                    begin: s.address,
                    end: s.address.saturating_add(s.size),
                    legacy_kind: kind,
                }),
                _ => None,
            })
            .collect()
    }

    /// The `.llvm.offloading` sections (by type `SHT_LLVM_OFFLOADING` or by name), with
    /// whether they are loaded with the program (`SHF_ALLOC`; per-TU sections of objects
    /// are `SHF_EXCLUDE` link inputs).
    pub fn offloading_sections(&self) -> Vec<&Section<'d>> {
        self.sections()
            .iter()
            .filter(|s| s.role() == SectionRole::Offloading)
            .collect()
    }

    /// Every pointer slot whose value the file gives, as `(value, slot address)` sorted
    /// by value: relocated slots, and in fixed-address executables (absolute pointers
    /// without relocations) every non-zero 8-byte word of the writable loaded sections.
    pub fn pointer_slots(&self) -> Vec<(u64, u64)> {
        let mut pairs: Vec<(u64, u64)> = self
            .relocs
            .iter()
            .filter_map(|r| match r.value {
                Value::Known(v) => Some((v, r.at)),
                Value::Undefined(_) => None,
            })
            .collect();
        if self.elf.kind() == FileKind::Executable {
            for s in self.sections() {
                if s.flags & SHF_ALLOC == 0 || s.flags & SHF_WRITE == 0 {
                    continue;
                }
                for (k, w) in s.data.chunks_exact(8).enumerate() {
                    let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
                    if v == 0 {
                        continue;
                    }
                    let slot = u64_of(k)
                        .checked_mul(8)
                        .and_then(|o| s.address.checked_add(o));
                    pairs.extend(slot.map(|at| (v, at)));
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        pairs
    }

    /// The bytes from `addr` to the end of the mapped section holding it.
    pub fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        self.map.bytes_from(addr)
    }

    /// The pointer the program sees at `addr` once relocated (see the module
    /// documentation); a pointer relocated against a symbol the file does not define is an
    /// error.
    pub fn pointer_at(&self, addr: u64) -> Result<u64> {
        match self.reloc(addr).map(|r| r.value) {
            Some(Value::Known(v)) => Ok(v),
            Some(Value::Undefined(_)) => Err(Error::new(
                ErrorKind::OutOfBounds,
                addr,
                "pointer is relocated against a symbol this file does not define",
            )),
            None => self.raw_u64(addr).ok_or(Error::new(
                ErrorKind::OutOfBounds,
                addr,
                "pointer slot is not inside any mapped section",
            )),
        }
    }
}
