//! Host ELF files: relocatable objects go to [`super::relocatable`]; linked executables
//! and shared libraries have the containers of `.hip_fatbin`/`.nv_fatbin` (and of
//! `__nv_relfatbin`, relocatable device code, [`FATBIN_SECTIONS`]) compacted, or
//! rewritten in place.
//!
//! `.hip_fatbin` lies in a `PT_LOAD` segment, and the wrappers (`.hipFatBinSegment`,
//! `__hip_fatbin_wrapper`) hold the virtual address of each bundle, relocated
//! (`R_*_RELATIVE` addends in shared libraries and position-independent executables,
//! absolute values in others). No address outside the fatbinary sections may move, so:
//!
//! 1. The units of each section are packed together from its start, in their order, each
//!    at the alignment its address had (at most the section's), and every pointer to a
//!    unit is set to its new address: `R_*_RELATIVE` addends of `SHT_RELA` sections (and
//!    the relocated word when it holds the address too), words that `SHT_REL`/`SHT_RELR`
//!    relocations relocate, the pointer field of every wrapper
//!    ([`crate::raw::FatbinWrapper`]), and symbols defined in the
//!    section. A pointer into the middle of a unit, a symbolic relocation against the
//!    section, or bytes between units that are not zero keep the file in place (3).
//! 2. The freed bytes leave the file in multiples of the largest `PT_LOAD` alignment, so
//!    that `p_offset ≡ p_vaddr` holds for everything after them:
//!    * *pages*: the whole pages after the packed units; the section's `PT_LOAD` is split
//!      there into a segment that ends on the page boundary (`p_filesz` = `p_memsz`) and
//!      one that starts where the freed pages end, at the address it had. The program
//!      header table grows by one entry per split, *where it is*, so that GNU
//!      `strip`/`objcopy` (BFD, which always writes the table right after the ELF header)
//!      can rewrite the file: over free bytes after it, or else after the sections that
//!      follow it directly move behind the packed units of a split section (notes, the
//!      interpreter name, the dynamic symbol, string, hash and version tables: nothing but
//!      program headers, `.dynamic` entries and symbols refer to where they are, and those
//!      follow them). Only with [`super::PruneOptions::move_program_headers`], where
//!      neither is possible, the table itself moves after the packed units of the first
//!      split section, inside its segment (`PT_PHDR` updated), provided that segment maps
//!      file offsets as the first `PT_LOAD` does (older kernels compute `AT_PHDR` from
//!      the first one); BFD cannot rewrite that layout;
//!    * *tail*: when that is not possible (a section in a segment of its own whose
//!      `p_vaddr - p_offset` differs from the first segment's, as patchelf and
//!      `auditwheel` leave) and the section ends the file part of its segment, which maps
//!      nothing beyond it, the last whole multiples of the alignment before its end leave
//!      the file and the segment ends earlier: no segment is added and the program header
//!      table stays where it is.
//!
//!    File offsets after the freed bytes drop by their size; every program header's
//!    `p_offset`, section's `sh_offset` and `e_shoff` move accordingly.
//! 3. Otherwise (no shrinking asked for, or a reason the layout line gives), each unit is
//!    written *at its own start address* and the rest of its old extent filled with zeros:
//!    no byte outside the units moves and the file keeps its size.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;

use object::elf::{
    Dyn64, DynamicTag, FileHeader64, ProgramHeader64, SectionHeader64, Sym64, DT_GNU_HASH, DT_HASH,
    DT_STRTAB, DT_SYMTAB, DT_VERDEF, DT_VERNEED, DT_VERSYM, EM_AARCH64, EM_X86_64, ET_DYN, ET_EXEC,
    ET_REL, PT_LOAD, PT_PHDR, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHN_XINDEX, SHT_DYNAMIC,
    SHT_DYNSYM, SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM, SHT_HASH,
    SHT_NOBITS, SHT_NOTE, SHT_PROGBITS, SHT_STRTAB, SHT_SYMTAB,
};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable};
use object::{LittleEndian as LE, U64};

use crate::error::{ErrorKind, Result};
use crate::host::elf::{Elf64, Encoding, RelocationKind};
use crate::host::SectionRole;
use crate::raw::{
    FatbinWrapper, FATBIN_WRAPPER_SIZE, HIP_FATBIN_SECTION, NV_FATBIN_SECTION, NV_RELFATBIN_SECTION,
};

use super::error::{Compact, PruneError, PruneErrorKind};
use super::layout::{in_place_reason, Laid};
use super::pieces::{apply_patches, cut, hole_bytes, mapped, standalone, Patches, Piece};
use super::plan::UnitPlan;
use super::{bad, diff, err, len64, u64_at};

/// The sections of linked files whose containers are rewritten (compacted, or in place):
/// AMD's bundles, NVIDIA's fatbinaries, and the relocatable fatbinaries of `nvcc -rdc`
/// units (the device link's inputs, each pointed at by its version-1 wrapper).
pub const FATBIN_SECTIONS: [&[u8]; 3] =
    [HIP_FATBIN_SECTION, NV_FATBIN_SECTION, NV_RELFATBIN_SECTION];

/// A section name of [`FATBIN_SECTIONS`] as text (they are ASCII).
fn section_text(name: &'static [u8]) -> &'static str {
    core::str::from_utf8(name).unwrap_or_default()
}

const PHDR_SIZE: u64 = core::mem::size_of::<ProgramHeader64<LE>>() as u64;
const SYM_SIZE: u64 = core::mem::size_of::<Sym64<LE>>() as u64;
const DYN_SIZE: u64 = core::mem::size_of::<Dyn64<LE>>() as u64;
const RELA_ADDEND: u64 = core::mem::offset_of!(object::elf::Rela64<LE>, r_addend) as u64;
const SYM_VALUE: u64 = core::mem::offset_of!(Sym64<LE>, st_value) as u64;
const SYM_SIZE_FIELD: u64 = core::mem::offset_of!(Sym64<LE>, st_size) as u64;
const WRAPPER_POINTER: u64 = core::mem::offset_of!(FatbinWrapper, binary) as u64;

/// A host ELF file with units to rewrite.
pub(super) fn host_elf(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    shrink: bool,
    move_table: bool,
) -> Result<Laid> {
    let h = FileHeader64::<LE>::parse(data)
        .map_err(|_| bad(4, "only 64-bit little-endian ELF files are pruned"))?;
    if !h.is_little_endian() {
        return Err(bad(5, "only 64-bit little-endian ELF files are pruned"));
    }
    let e_type = h.e_type(LE);
    if e_type == ET_REL {
        let (pieces, layout) = super::relocatable::rewrite(data, plans)?;
        return Ok((pieces, layout, None));
    }
    if e_type != ET_DYN && e_type != ET_EXEC {
        return Err(bad(
            16,
            "ELF file is neither relocatable, an executable nor a shared library",
        ));
    }
    for p in plans {
        let in_fatbin = FATBIN_SECTIONS
            .iter()
            .any(|s| p.location.strip_prefix("section ").map(str::as_bytes) == Some(*s));
        if !in_fatbin && !p.dropped.is_empty() {
            return Err(bad(
                p.range.start,
                "device code outside .hip_fatbin, .nv_fatbin and __nv_relfatbin is not rewritten in linked files",
            ));
        }
        if p.is_rewritten() && p.len_after > p.len_before {
            return Err(err(
                ErrorKind::LimitExceeded,
                p.range.start,
                "a rewritten unit would be larger than the original",
            ));
        }
    }
    // The tail layout first: it adds no program header, so the file keeps a layout GNU
    // strip/objcopy (BFD) can rewrite; whole pages (a split segment, a moved program
    // header table) where the tail frees nothing.
    let why = if shrink {
        match compact(data, plans, true, move_table) {
            Ok((pieces, layout)) if !pieces.is_empty() => return Ok((pieces, layout, None)),
            _ => match compact(data, plans, false, move_table) {
                Ok((pieces, layout)) => return Ok((pieces, layout, None)),
                Err(why) => Some(why),
            },
        }
    } else {
        None
    };
    let layout = format!(
        "in place, zero-filled, file size unchanged ({})",
        in_place_reason(why.as_ref())
    );
    Ok((standalone(data, plans, true), layout, why))
}

/// One fatbinary section ([`FATBIN_SECTIONS`]) of a linked file and where its units go.
struct Packing {
    /// Section index and name.
    index: usize,
    name: &'static str,
    /// File range and address of the section.
    off: u64,
    end: u64,
    addr: u64,
    /// `p_vaddr - p_offset` of the segment holding it.
    delta: u64,
    /// The section ends the file part of its segment, which maps nothing after it.
    ends_segment: bool,
    /// The units in it, in file order.
    moves: Vec<Move>,
    /// File offset after the last unit: the new end of the section.
    packed_end: u64,
}

/// Where a unit of a [`Packing`] goes.
struct Move {
    /// Index of the unit's plan.
    plan: usize,
    /// Old and new file offset.
    old: u64,
    new: u64,
    /// Old and new length.
    old_len: u64,
    new_len: u64,
}

impl Packing {
    /// The address of file offset `off` of the section.
    fn address(&self, off: u64) -> u64 {
        self.addr.wrapping_add(diff(off, self.off))
    }

    /// The bytes of the section that leave the file once its units are packed and `extra`
    /// more bytes follow them: whole pages (of `align`), or with `tail`, the last whole
    /// multiples of `align` before the section's end.
    fn hole(&self, align: u64, extra: u64, tail: bool) -> Option<Range<u64>> {
        let from = self.packed_end.checked_add(extra)?;
        if tail {
            if !self.ends_segment {
                return None;
            }
            let n = diff(self.end, from)
                .checked_div(align)?
                .checked_mul(align)?;
            return (n > 0).then(|| diff(self.end, n)..self.end);
        }
        let a = from.checked_next_multiple_of(align)?;
        let b = self.end.checked_div(align)?.checked_mul(align)?;
        (b > a).then_some(a..b)
    }
}

/// Pointer fields that hold the address of a unit, to be set to where it moves.
struct Pointers<'p> {
    packs: &'p [Packing],
    /// Old address of every unit start → new address.
    moved: BTreeMap<u64, u64>,
    /// File offset → new bytes.
    patches: Patches,
    /// Old addresses some pointer holds.
    referenced: BTreeSet<u64>,
}

impl Pointers<'_> {
    /// The section (one of [`FATBIN_SECTIONS`]) whose address range holds `v`.
    fn pack_of(&self, v: u64) -> Option<&Packing> {
        self.packs
            .iter()
            .find(|k| k.addr <= v && diff(v, k.addr) < diff(k.end, k.off))
    }

    /// The field at `at` holds `old`; if `old` is inside a section being compacted it must
    /// be the start of a unit, and the field gets the unit's new address.
    fn repoint(&mut self, at: u64, old: u64, what: &str) -> Compact<()> {
        let Some(pack) = self.pack_of(old) else {
            return Ok(());
        };
        let Some(&new) = self.moved.get(&old) else {
            return Err(PruneError::new(PruneErrorKind::Pointer, format!(
                "{what} at offset {at:#x} points into {} ({old:#x}) but not at the start of a container",
                pack.name
            )).at(at));
        };
        self.patches.insert(at, new.to_le_bytes().to_vec());
        self.referenced.insert(old);
        Ok(())
    }
}

type Sections<'d> = SectionTable<'d, FileHeader64<LE>>;

/// Where the units of every section of [`FATBIN_SECTIONS`] go: back to back from the start of
/// the section, each at the alignment its address had (at most the section's).
fn packings(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    sections: &Sections<'_>,
    loads: &[&ProgramHeader64<LE>],
) -> Compact<Vec<Packing>> {
    let mut packs: Vec<Packing> = Vec::new();
    for (index, sh) in sections.iter().enumerate() {
        let name = sections.section_name(LE, sh).unwrap_or_default();
        let Some(sname) = FATBIN_SECTIONS.iter().find(|s| **s == name) else {
            continue;
        };
        let sname = section_text(sname);
        if let Some(k) = pack_section(data, plans, loads, index, sname, sh)? {
            packs.push(k);
        }
    }
    if packs.is_empty() {
        return Err(PruneError::new(
            PruneErrorKind::NoContainer,
            "no container in .hip_fatbin, .nv_fatbin or __nv_relfatbin",
        ));
    }
    packs.sort_by_key(|k| k.off);
    Ok(packs)
}

/// The packing of section `index` (`sname`, header `sh`) when it holds units to pack;
/// `Err` when its layout keeps the file from being compacted.
fn pack_section(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    loads: &[&ProgramHeader64<LE>],
    index: usize,
    sname: &'static str,
    sh: &SectionHeader64<LE>,
) -> Compact<Option<Packing>> {
    // Relocatable device code with nothing to rewrite stays out of the packing, so
    // that its layout cannot keep the other sections from being compacted.
    let (start, len) = (sh.sh_offset(LE), sh.sh_size(LE));
    if sname.as_bytes() == NV_RELFATBIN_SECTION
        && !plans.iter().any(|p| {
            p.is_rewritten() && start <= p.range.start && p.range.end <= start.saturating_add(len)
        })
    {
        return Ok(None);
    }
    if sh.sh_type(LE) != SHT_PROGBITS || sh.sh_flags(LE).0 & SHF_ALLOC.0 == 0 {
        return Err(PruneError::new(
            PruneErrorKind::Section,
            format!("{sname} is not an allocated PROGBITS section"),
        ));
    }
    let (off, size, addr) = (sh.sh_offset(LE), sh.sh_size(LE), sh.sh_addr(LE));
    let end = off
        .checked_add(size)
        .filter(|e| *e <= len64(data.len()))
        .ok_or_else(|| {
            PruneError::new(
                PruneErrorKind::Section,
                format!("{sname} runs past the end of the file"),
            )
        })?;
    let seg = loads
        .iter()
        .find(|p| p.p_offset(LE) <= off && end <= p.p_offset(LE).saturating_add(p.p_filesz(LE)))
        .ok_or_else(|| {
            PruneError::new(
                PruneErrorKind::Section,
                format!("{sname} is not inside the file part of one PT_LOAD segment"),
            )
        })?;
    let delta = seg.p_vaddr(LE).wrapping_sub(seg.p_offset(LE));
    if delta != addr.wrapping_sub(off) {
        return Err(PruneError::new(
            PruneErrorKind::Section,
            format!("{sname}'s address and offset disagree with its segment"),
        ));
    }
    let ends_segment = end == seg.p_offset(LE).saturating_add(seg.p_filesz(LE))
        && seg.p_memsz(LE) == seg.p_filesz(LE);
    let sec_align = sh.sh_addralign(LE).max(1);
    if !sec_align.is_power_of_two() {
        return Err(PruneError::new(
            PruneErrorKind::Section,
            format!("{sname}'s alignment is not a power of two"),
        ));
    }
    let mut here: Vec<(usize, &UnitPlan<'_>)> = plans
        .iter()
        .enumerate()
        .filter(|(_, p)| off <= p.range.start && p.range.end <= end)
        .collect();
    if here.is_empty() {
        return Ok(None);
    }
    here.sort_by_key(|(_, p)| p.range.start);
    let mut k = Packing {
        index,
        name: sname,
        off,
        end,
        addr,
        delta,
        ends_segment,
        moves: Vec::new(),
        packed_end: off,
    };
    place_units(data, &mut k, &here, sec_align)?;
    Ok(Some(k))
}

/// Packs the units `here` (in file order) of section `k` back to back from its start,
/// each at the alignment its address had (at most `sec_align`): fills `k.moves` and
/// `k.packed_end`. Anything but zeros between and after the units keeps the file as it
/// is.
fn place_units(
    data: &[u8],
    k: &mut Packing,
    here: &[(usize, &UnitPlan<'_>)],
    sec_align: u64,
) -> Compact<()> {
    let (off, addr, sname) = (k.off, k.addr, k.name);
    let (mut pos, mut cursor) = (off, off);
    for &(i, p) in here {
        // Bytes between containers are padding; anything else stays where it is.
        let gap = super::slice(data, &(pos..p.range.start), "gap").unwrap_or_default();
        if p.range.start < pos || gap.iter().any(|b| *b != 0) {
            return Err(PruneError::new(
                PruneErrorKind::BytesOutsideContainers,
                format!("{sname} holds bytes outside its containers at offset {pos:#x}"),
            )
            .at(pos));
        }
        let new_len = if p.is_rewritten() {
            p.len_after
        } else {
            p.len_before
        };
        let old_addr = addr.wrapping_add(diff(p.range.start, off));
        let unit_align = if old_addr == 0 {
            sec_align
        } else {
            1u64.wrapping_shl(old_addr.trailing_zeros().min(63))
                .min(sec_align)
        };
        let new_addr = addr
            .checked_add(diff(cursor, off))
            .and_then(|a| a.checked_next_multiple_of(unit_align))
            .ok_or(PruneError::new(
                PruneErrorKind::TooLarge,
                "address overflow",
            ))?;
        let new = off.saturating_add(diff(new_addr, addr));
        if new > p.range.start || new < cursor {
            return Err(PruneError::new(
                PruneErrorKind::NothingFreed,
                "a container would move up",
            ));
        }
        k.moves.push(Move {
            plan: i,
            old: p.range.start,
            new,
            old_len: p.len_before,
            new_len,
        });
        cursor = new.saturating_add(new_len);
        pos = p.range.end;
    }
    // Past the last container up to the section's end: padding only.
    let tail = super::slice(data, &(pos..k.end), "section tail").unwrap_or_default();
    if tail.iter().any(|b| *b != 0) {
        return Err(PruneError::new(
            PruneErrorKind::BytesOutsideContainers,
            format!("{sname} holds bytes outside its containers at offset {pos:#x}"),
        )
        .at(pos));
    }
    k.packed_end = cursor;
    Ok(())
}

/// Every pointer to a unit: relative relocations (`RELA` addends, `REL` and `RELR` words
/// in place), the words they apply to, and the wrappers' pointer fields (absolute in
/// executables), as the host reader ([`Elf64::relocations`], the wrapper sections)
/// gives them.
fn find_pointers(elf: &Elf64<'_>, ptrs: &mut Pointers<'_>) -> Compact<()> {
    let machine = elf.machine();
    if machine != EM_X86_64.0 && machine != EM_AARCH64.0 {
        return Err(PruneError::new(
            PruneErrorKind::Unsupported,
            format!("relocations of machine {machine} are not known"),
        ));
    }
    relocated_pointers(elf, ptrs)?;
    wrapper_pointers(elf, ptrs)
}

/// The pointers dynamic relocations give: relative ones are repointed; a symbolic `RELA`
/// relocation against a symbol in a packed section keeps the file as it is.
fn relocated_pointers(elf: &Elf64<'_>, ptrs: &mut Pointers<'_>) -> Compact<()> {
    let data = elf.data();
    // The symbol table of the last relocation section read.
    let mut symbols: (usize, &[Sym64<LE>]) = (usize::MAX, &[]);
    for r in elf.relocations() {
        let r = r.map_err(PruneError::read)?;
        if !r.dynamic {
            continue;
        }
        match (r.encoding, elf.kind_of(&r)) {
            (Encoding::Rela(record), RelocationKind::Relative) => {
                let addend = r.addend.unwrap_or(0) as u64;
                if ptrs.pack_of(addend).is_some() {
                    ptrs.repoint(
                        record.saturating_add(RELA_ADDEND),
                        addend,
                        "a relocation addend",
                    )?;
                    if let Some(f) = elf.file_offset(r.place, 8) {
                        if u64_at(data, f) == Some(addend) {
                            ptrs.repoint(f, addend, "a relocated word")?;
                        }
                    }
                }
            }
            (Encoding::Rela(_), _) => symbolic(elf, ptrs.packs, &r, &mut symbols)?,
            (Encoding::Rel(_) | Encoding::Relr, RelocationKind::Relative) => {
                if let Some(f) = elf.file_offset(r.place, 8) {
                    if let Some(w) = u64_at(data, f) {
                        ptrs.repoint(f, w, "a relocated word")?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A symbolic relocation `r` must not refer to a symbol defined in a packed section.
/// `symbols` caches the symbol table of the last relocation section read.
fn symbolic<'d>(
    elf: &Elf64<'d>,
    packs: &[Packing],
    r: &crate::host::elf::Relocation,
    symbols: &mut (usize, &'d [Sym64<LE>]),
) -> Compact<()> {
    let sections = elf.section_table();
    if symbols.0 != r.symbols {
        let table: &[Sym64<LE>] = sections
            .section(object::SectionIndex(r.symbols))
            .ok()
            .and_then(|s| s.data_as_array(LE, elf.data()).ok())
            .unwrap_or_default();
        *symbols = (r.symbols, table);
    }
    let shndx = symbols
        .1
        .get(r.symbol as usize)
        .filter(|_| r.symbol != 0)
        .map(|s| s.st_shndx.get(LE).0);
    if shndx.is_some_and(|x| packs.iter().any(|k| k.index == usize::from(x))) {
        let name = sections
            .section(object::SectionIndex(r.section))
            .ok()
            .and_then(|sh| sections.section_name(LE, sh).ok())
            .unwrap_or_default();
        return Err(PruneError::new(
            PruneErrorKind::Pointer,
            format!(
                "a relocation of {} refers to a symbol in a fatbinary section",
                String::from_utf8_lossy(name)
            ),
        ));
    }
    Ok(())
}

/// The pointer field of every wrapper record in the wrapper sections.
fn wrapper_pointers(elf: &Elf64<'_>, ptrs: &mut Pointers<'_>) -> Compact<()> {
    let data = elf.data();
    let table = elf.sections().map_err(PruneError::read)?;
    for section in crate::host::Sections::Elf(table).iter() {
        let section = section.map_err(PruneError::read)?;
        if section.kind != SHT_PROGBITS.0 || section.role() != SectionRole::Wrappers {
            continue;
        }
        let o = section.offset;
        for k in 0..len64(section.data.len()) / FATBIN_WRAPPER_SIZE {
            let at = o.saturating_add(k.saturating_mul(FATBIN_WRAPPER_SIZE));
            let Ok(w) = crate::bytes::read::<FatbinWrapper>(data, at, "wrapper") else {
                break;
            };
            ptrs.repoint(
                at.saturating_add(WRAPPER_POINTER),
                w.binary.get(),
                "a wrapper's pointer",
            )?;
        }
    }
    Ok(())
}

/// Symbols defined in the packed sections get the new values (and sizes).
fn patch_symbols(data: &[u8], sections: &Sections<'_>, packs: &[Packing], patches: &mut Patches) {
    for sh in sections.iter() {
        if !matches!(sh.sh_type(LE), SHT_SYMTAB | SHT_DYNSYM) {
            continue;
        }
        let Ok(syms) = sh.data_as_array::<Sym64<LE>, _>(LE, data) else {
            continue;
        };
        let o = sh.sh_offset(LE);
        for (k, sym) in (0u64..).zip(syms) {
            let at = o.saturating_add(k.saturating_mul(SYM_SIZE));
            let (shndx, value, size) = (
                sym.st_shndx.get(LE).0,
                sym.st_value.get(LE),
                sym.st_size.get(LE),
            );
            let Some(pack) = packs.iter().find(|p| p.index == usize::from(shndx)) else {
                continue;
            };
            let unit = pack.moves.iter().find(|m| {
                let old = pack.address(m.old);
                old <= value && diff(value, old) < m.old_len
            });
            if let Some(m) = unit {
                let (old, new) = (pack.address(m.old), pack.address(m.new));
                let v = new.wrapping_add(diff(value, old).min(m.new_len));
                patches.insert(at.saturating_add(SYM_VALUE), v.to_le_bytes().to_vec());
                if value == old && size == m.old_len {
                    patches.insert(
                        at.saturating_add(SYM_SIZE_FIELD),
                        m.new_len.to_le_bytes().to_vec(),
                    );
                }
            } else if value == pack.address(pack.end) {
                let new_end = pack.address(pack.packed_end);
                patches.insert(at.saturating_add(SYM_VALUE), new_end.to_le_bytes().to_vec());
            }
        }
    }
}

/// The program headers once `holes` leave the file: `PT_LOAD` segments holding a hole are
/// split around it; `map` gives new file offsets.
fn split(
    phdrs: &[ProgramHeader64<LE>],
    holes: &[Range<u64>],
    map: &dyn Fn(u64) -> u64,
) -> Vec<ProgramHeader64<LE>> {
    let mut out = Vec::new();
    for p in phdrs {
        let off = p.p_offset(LE);
        let fend = off.saturating_add(p.p_filesz(LE));
        let inside: Vec<&Range<u64>> = holes
            .iter()
            .filter(|h| off <= h.start && h.end <= fend)
            .collect();
        let mut q = *p;
        q.p_offset = U64::new(LE, map(off));
        if p.p_type(LE) != PT_LOAD || inside.is_empty() {
            out.push(q);
            continue;
        }
        let delta = p.p_vaddr(LE).wrapping_sub(off);
        let pdelta = p.p_paddr(LE).wrapping_sub(off);
        let mut start = off;
        for hole in inside {
            let mut q = *p;
            q.p_offset = U64::new(LE, map(start));
            q.p_vaddr = U64::new(LE, start.wrapping_add(delta));
            q.p_paddr = U64::new(LE, start.wrapping_add(pdelta));
            q.p_filesz = U64::new(LE, diff(hole.start, start));
            q.p_memsz = U64::new(LE, diff(hole.start, start));
            out.push(q);
            start = hole.end;
        }
        let memsz = p.p_memsz(LE).saturating_sub(diff(start, off));
        if fend > start || memsz > 0 {
            q.p_offset = U64::new(LE, map(start));
            q.p_vaddr = U64::new(LE, start.wrapping_add(delta));
            q.p_paddr = U64::new(LE, start.wrapping_add(pdelta));
            q.p_filesz = U64::new(LE, diff(fend, start));
            q.p_memsz = U64::new(LE, memsz);
            out.push(q);
        }
    }
    out
}

/// The linked file being compacted: its headers and the alignment the freed bytes keep.
struct Linked<'d> {
    data: &'d [u8],
    elf: Elf64<'d>,
    phdrs: &'d [ProgramHeader64<LE>],
    sections: Sections<'d>,
    /// `p_vaddr - p_offset` of the first `PT_LOAD` segment.
    first_delta: u64,
    /// The largest `PT_LOAD` alignment (at least 4096).
    align: u64,
    file_len: u64,
}

impl<'d> Linked<'d> {
    /// Reads the headers of a linked file; `Err` says why it is not compacted.
    fn read(data: &'d [u8]) -> Compact<Self> {
        let elf = Elf64::parse(data).map_err(PruneError::read)?;
        let h = elf.header();
        let phdrs = elf.segments().map_err(PruneError::read)?;
        let sections = *elf.section_table();
        if h.e_shnum(LE) == 0 || h.e_shstrndx(LE) == SHN_XINDEX {
            return Err(PruneError::new(
                PruneErrorKind::Unsupported,
                "extended section numbering",
            ));
        }
        let first_delta = elf
            .loads()
            .next()
            .map(|p| p.p_vaddr(LE).wrapping_sub(p.p_offset(LE)))
            .ok_or(PruneError::new(
                PruneErrorKind::Layout,
                "no PT_LOAD segment",
            ))?;
        let align = elf
            .loads()
            .map(|p| p.p_align(LE))
            .max()
            .unwrap_or(0)
            .max(4096);
        if !align.is_power_of_two() {
            return Err(PruneError::new(
                PruneErrorKind::Section,
                "PT_LOAD alignment is not a power of two",
            ));
        }
        Ok(Linked {
            data,
            elf,
            phdrs,
            sections,
            first_delta,
            align,
            file_len: len64(data.len()),
        })
    }
}

/// Where the program header table goes when a segment is split (nothing when none is).
#[derive(Default)]
struct TablePlace {
    /// (pack number, file offset) of the moved table, if it moves.
    moved: Option<(usize, u64)>,
    /// The table grows where it is.
    grown: bool,
    /// (pack number, file offset, block) of the leading sections that move after the
    /// kept containers to make room for the grown table.
    block: Option<(usize, u64, Block)>,
}

/// The moved block once placed: its bytes (with their patches), the new file offset of
/// each of its sections, and how far its addresses move.
#[derive(Default)]
struct MovedBlock {
    bytes: Vec<u8>,
    sections: BTreeMap<usize, u64>,
    shift: u64,
}

/// The holes, one per pack (`None` where it frees nothing), as a list.
fn flat(holes: &[Option<Range<u64>>]) -> Vec<Range<u64>> {
    holes.iter().flatten().cloned().collect()
}

/// Compacts the [`FATBIN_SECTIONS`] of a linked file (module
/// documentation), freeing whole pages, or with `tail`, the tails of sections that end
/// their segment; `Err` says why the file is rewritten in place instead.
fn compact(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    tail: bool,
    move_table: bool,
) -> Compact<(Vec<Piece>, String)> {
    let l = Linked::read(data)?;
    let loads: Vec<&ProgramHeader64<LE>> = l.elf.loads().collect();
    let packs = packings(data, plans, &l.sections, &loads)?;
    let Repointed {
        mut patches,
        units: units_moved,
        unreferenced,
    } = pointer_patches(&l, &packs)?;
    let h = l.elf.header();
    if u64::from(h.e_phentsize(LE)) != PHDR_SIZE {
        return Err(PruneError::new(
            PruneErrorKind::Unsupported,
            "unexpected program header size",
        ));
    }
    let mut holes = first_holes(&l, &packs, tail)?;
    let count = {
        let f = flat(&holes);
        split(l.phdrs, &f, &|o| mapped(&f, o)).len()
    };
    let table_len = len64(count).saturating_mul(PHDR_SIZE);
    let place = place_table(&l, &packs, &mut holes, count, table_len, tail, move_table)?;
    let holes = flat(&holes);
    let mut new_phdrs = program_headers(&l, &packs, &holes, count, table_len, &place)?;
    let moved = match &place.block {
        Some(b) => move_block(&l, &packs, &holes, b, &mut new_phdrs, &mut patches)?,
        None => MovedBlock::default(),
    };
    let mut table = Vec::new();
    for q in &new_phdrs {
        table.extend_from_slice(object::pod::bytes_of(q));
    }
    let shdrs = section_headers(&l.sections, &packs, &holes, &moved);
    let (pieces, body_end) =
        file_pieces(&l, plans, &packs, &place, &table, table_len, moved.bytes)?;
    if place.moved.is_none() && !place.grown {
        patches.insert(l.elf.header().e_phoff(LE), table);
    }
    let new_len = mapped(&holes, body_end);
    let new_shoff = new_len.checked_next_multiple_of(8).ok_or(PruneError::new(
        PruneErrorKind::TooLarge,
        "file size overflows",
    ))?;
    let mut eh = *h;
    if let Some((_, at)) = place.moved {
        eh.e_phoff = U64::new(LE, mapped(&holes, at));
    }
    eh.e_phnum = object::U16::new(
        LE,
        u16::try_from(count)
            .ok()
            .filter(|n| *n < 0xffff)
            .ok_or(PruneError::new(
                PruneErrorKind::ProgramHeaders,
                "too many segments",
            ))?,
    );
    eh.e_shoff = U64::new(LE, new_shoff);
    patches.insert(0, object::pod::bytes_of(&eh).to_vec());
    let pieces = apply_patches(pieces, plans, &patches).map_err(PruneError::read)?;
    let mut out = cut(pieces, plans, &holes, body_end);
    out.push(Piece::Zeros(diff(new_shoff, new_len)));
    out.push(Piece::Owned(shdrs));
    let mut name = layout_line(&l, &packs, &holes, &place, units_moved, count, tail);
    if unreferenced > 0 {
        name.push_str(&format!(
            "; {unreferenced} container(s) no wrapper or relocation points to"
        ));
    }
    Ok((out, name))
}

/// The patches that set every pointer to a unit, and how many units no pointer refers to.
struct Repointed {
    /// File offset → new bytes.
    patches: Patches,
    /// Units in the packed sections.
    units: usize,
    /// Units no wrapper or relocation points to.
    unreferenced: usize,
}

/// The patches that set every pointer to a unit (and the symbols defined in the packed
/// sections) to the new addresses.
fn pointer_patches(l: &Linked<'_>, packs: &[Packing]) -> Compact<Repointed> {
    let mut ptrs = Pointers {
        packs,
        moved: packs
            .iter()
            .flat_map(|k| k.moves.iter().map(|m| (k.address(m.old), k.address(m.new))))
            .collect(),
        patches: BTreeMap::new(),
        referenced: BTreeSet::new(),
    };
    find_pointers(&l.elf, &mut ptrs)?;
    let units_moved = ptrs.moved.len();
    let unreferenced = units_moved.saturating_sub(ptrs.referenced.len());
    let mut patches = ptrs.patches;
    patch_symbols(l.data, &l.sections, packs, &mut patches);
    Ok(Repointed {
        patches,
        units: units_moved,
        unreferenced,
    })
}

/// The hole of each pack before the program header table is placed; `Err` when none
/// frees anything or a segment other than `PT_LOAD` overlaps one.
fn first_holes(l: &Linked<'_>, packs: &[Packing], tail: bool) -> Compact<Vec<Option<Range<u64>>>> {
    let holes: Vec<Option<Range<u64>>> = packs.iter().map(|k| k.hole(l.align, 0, tail)).collect();
    if holes.iter().all(Option::is_none) {
        let names: Vec<&str> = packs.iter().map(|k| k.name).collect();
        return Err(PruneError::new(
            PruneErrorKind::NothingFreed,
            format!("no whole page of {} is freed", names.join(" and ")),
        ));
    }
    for p in l.phdrs.iter() {
        if p.p_type(LE) == PT_LOAD || p.p_filesz(LE) == 0 {
            continue;
        }
        let r = p.p_offset(LE)..p.p_offset(LE).saturating_add(p.p_filesz(LE));
        if flat(&holes)
            .iter()
            .any(|h| h.start < r.end && r.start < h.end)
        {
            return Err(PruneError::new(
                PruneErrorKind::ProgramHeaders,
                format!(
                    "a segment of type {:#x} overlaps the freed pages",
                    p.p_type(LE)
                ),
            ));
        }
    }
    Ok(holes)
}

/// Where the program header table of `count` entries (`table_len` bytes) goes when a
/// segment is split: right after the packed units of the first section with room, in a
/// segment mapped like the first one (so that `AT_PHDR` is right under every kernel), or
/// grown in place, with the sections in the way moved after the kept containers. The
/// hole of the section that takes them shrinks.
fn place_table(
    l: &Linked<'_>,
    packs: &[Packing],
    holes: &mut [Option<Range<u64>>],
    count: usize,
    table_len: u64,
    tail: bool,
    move_table: bool,
) -> Compact<TablePlace> {
    if count == l.phdrs.len() {
        return Ok(TablePlace::default());
    }
    match room_for_table(&l.elf, l.phdrs, table_len) {
        Ok(None) => Ok(TablePlace {
            grown: true,
            ..TablePlace::default()
        }),
        Ok(Some(block)) => {
            let Some((i, at, hole)) = block_host(l, packs, holes, &block, tail) else {
                return Err(PruneError::new(PruneErrorKind::ProgramHeaders, "no room after the kept containers for the sections that must make room for one more program header"));
            };
            if let Some(h) = holes.get_mut(i) {
                *h = Some(hole);
            }
            Ok(TablePlace {
                grown: true,
                block: Some((i, at, block)),
                ..TablePlace::default()
            })
        }
        Err(why) if !move_table => Err(why.then(
            "; the program header table would have to move, which GNU strip/objcopy cannot rewrite (--move-program-headers allows it)",
        )),
        Err(_) => {
            let host = packs.iter().enumerate().find_map(|(i, k)| {
                let at = k.packed_end.checked_next_multiple_of(8)?;
                let hole = k.hole(
                    l.align,
                    diff(at, k.packed_end).saturating_add(table_len),
                    tail,
                )?;
                (holes.get(i)?.is_some() && k.delta == l.first_delta).then_some((i, at, hole))
            });
            let Some((i, at, hole)) = host else {
                return Err(PruneError::new(PruneErrorKind::ProgramHeaders, "no room for the program header table after the kept containers of a section in a segment mapped like the first PT_LOAD"));
            };
            if let Some(h) = holes.get_mut(i) {
                *h = Some(hole);
            }
            Ok(TablePlace {
                moved: Some((i, at)),
                ..TablePlace::default()
            })
        }
    }
}

/// The first pack with a hole that can take `block` after its kept containers: (pack
/// number, new file offset of the block, the pack's smaller hole).
fn block_host(
    l: &Linked<'_>,
    packs: &[Packing],
    holes: &[Option<Range<u64>>],
    block: &Block,
    tail: bool,
) -> Option<(usize, u64, Range<u64>)> {
    let len = diff(block.range.end, block.range.start);
    packs.iter().enumerate().find_map(|(i, k)| {
        holes.get(i)?.as_ref()?;
        // The block's addresses keep their alignment only if both segments map
        // offsets alike modulo it.
        if k.delta.wrapping_sub(block.delta).checked_rem(block.align)? != 0 {
            return None;
        }
        let at = k
            .packed_end
            .checked_next_multiple_of(block.align)?
            .checked_add(block.range.start.checked_rem(block.align)?)?;
        let hole = k.hole(l.align, diff(at, k.packed_end).saturating_add(len), tail)?;
        Some((i, at, hole))
    })
}

/// The new program headers: segments split around `holes`, `PT_PHDR` following the
/// table where it moves or grows.
fn program_headers(
    l: &Linked<'_>,
    packs: &[Packing],
    holes: &[Range<u64>],
    count: usize,
    table_len: u64,
    place: &TablePlace,
) -> Compact<Vec<ProgramHeader64<LE>>> {
    let map = |o: u64| mapped(holes, o);
    let mut new_phdrs = split(l.phdrs, holes, &map);
    if new_phdrs.len() != count {
        return Err(PruneError::new(
            PruneErrorKind::ProgramHeaders,
            "the segment count changed",
        ));
    }
    if let Some((i, at)) = place.moved {
        let vaddr = at.wrapping_add(packs.get(i).map_or(0, |k| k.delta));
        for q in new_phdrs.iter_mut().filter(|q| q.p_type(LE) == PT_PHDR) {
            let pdelta = q.p_paddr(LE).wrapping_sub(q.p_vaddr(LE));
            q.p_offset = U64::new(LE, map(at));
            q.p_vaddr = U64::new(LE, vaddr);
            q.p_paddr = U64::new(LE, vaddr.wrapping_add(pdelta));
            q.p_filesz = U64::new(LE, table_len);
            q.p_memsz = U64::new(LE, table_len);
        }
    }
    if place.grown {
        for q in new_phdrs.iter_mut().filter(|q| q.p_type(LE) == PT_PHDR) {
            q.p_filesz = U64::new(LE, table_len);
            q.p_memsz = U64::new(LE, table_len);
        }
    }
    Ok(new_phdrs)
}

/// Moves the block `(i, at, block)` to `at`: its sections, the segments inside it,
/// `.dynamic` entries and symbols follow it; the bytes of its new place are its own with
/// their patches (taken out of `patches`).
fn move_block(
    l: &Linked<'_>,
    packs: &[Packing],
    holes: &[Range<u64>],
    (i, at, block): &(usize, u64, Block),
    new_phdrs: &mut [ProgramHeader64<LE>],
    patches: &mut Patches,
) -> Compact<MovedBlock> {
    let k = packs
        .get(*i)
        .ok_or(PruneError::new(PruneErrorKind::Layout, "no section"))?;
    let shift = at
        .wrapping_add(k.delta)
        .wrapping_sub(block.range.start.wrapping_add(block.delta));
    let new_off = |o: u64| mapped(holes, at.saturating_add(diff(o, block.range.start)));
    for q in new_phdrs.iter_mut() {
        let o = q.p_offset(LE);
        if matches!(q.p_type(LE), PT_LOAD | PT_PHDR)
            || q.p_filesz(LE) == 0
            || !(block.range.start <= o && o < block.range.end)
        {
            continue;
        }
        q.p_offset = U64::new(LE, new_off(o));
        q.p_vaddr = U64::new(LE, q.p_vaddr(LE).wrapping_add(shift));
        q.p_paddr = U64::new(LE, q.p_paddr(LE).wrapping_add(shift));
    }
    let mut sections: BTreeMap<usize, u64> = BTreeMap::new();
    for &index in &block.sections {
        if let Ok(sh) = l.sections.section(object::SectionIndex(index)) {
            sections.insert(index, new_off(sh.sh_offset(LE)));
        }
    }
    let addrs = block_addresses(block);
    patch_dynamic(l.data, &l.sections, &addrs, shift, patches)?;
    patch_moved_symbols(l.data, &l.sections, &sections, shift, patches);
    let mut bytes = super::slice(l.data, &block.range, "sections")
        .map_err(PruneError::read)?
        .to_vec();
    let inside: Vec<u64> = patches
        .range(block.range.clone())
        .map(|(a, _)| *a)
        .collect();
    for a in inside {
        let patch = patches.remove(&a).unwrap_or_default();
        let from = usize::try_from(diff(a, block.range.start)).unwrap_or(usize::MAX);
        bytes
            .get_mut(from..from.saturating_add(patch.len()))
            .ok_or(PruneError::new(
                PruneErrorKind::Layout,
                "a patch crosses the moved sections",
            ))?
            .copy_from_slice(&patch);
    }
    Ok(MovedBlock {
        bytes,
        sections,
        shift,
    })
}

/// The new section header table: offsets moved, the fatbinary sections end after their
/// units, the moved block's sections at their new place.
fn section_headers(
    sections: &Sections<'_>,
    packs: &[Packing],
    holes: &[Range<u64>],
    moved: &MovedBlock,
) -> Vec<u8> {
    let mut shdrs = Vec::new();
    for (index, sh) in sections.iter().enumerate() {
        let mut s = *sh;
        if index != 0 {
            s.sh_offset = U64::new(LE, mapped(holes, sh.sh_offset(LE)));
        }
        if let Some(k) = packs.iter().find(|k| k.index == index) {
            s.sh_size = U64::new(LE, diff(k.packed_end, k.off));
        }
        if let Some(&off) = moved.sections.get(&index) {
            s.sh_offset = U64::new(LE, off);
            s.sh_addr = U64::new(LE, sh.sh_addr(LE).wrapping_add(moved.shift));
        }
        shdrs.extend_from_slice(object::pod::bytes_of(&s));
    }
    shdrs
}

/// The file (in input offsets, before patches and holes): everything in place but the
/// packed sections, the program header table grown in place or moved, the moved block;
/// it stops before a section header table that ends the file. Returns the pieces and
/// where they end.
fn file_pieces(
    l: &Linked<'_>,
    plans: &[UnitPlan<'_>],
    packs: &[Packing],
    place: &TablePlace,
    table: &[u8],
    table_len: u64,
    mut block_bytes: Vec<u8>,
) -> Compact<(Vec<Piece>, u64)> {
    let mut pieces = Vec::new();
    let mut pos = 0u64;
    for (i, k) in packs.iter().enumerate() {
        if k.off < pos {
            return Err(PruneError::new(
                PruneErrorKind::Section,
                "fatbinary sections overlap",
            ));
        }
        if place.grown && pos == 0 {
            grown_table(l, k, place, table, table_len, &mut pieces)?;
        } else {
            pieces.push(Piece::Copy(pos..k.off));
        }
        let mut cur = k.off;
        for m in &k.moves {
            pieces.push(Piece::Zeros(diff(m.new, cur)));
            match plans.get(m.plan) {
                Some(p) if p.is_rewritten() => pieces.push(Piece::Unit(m.plan)),
                _ => pieces.push(Piece::Copy(m.old..m.old.saturating_add(m.old_len))),
            }
            cur = m.new.saturating_add(m.new_len);
        }
        if let Some((_, at)) = place.moved.filter(|t| t.0 == i) {
            pieces.push(Piece::Zeros(diff(at, cur)));
            pieces.push(Piece::Owned(table.to_vec()));
            cur = at.saturating_add(table_len);
        }
        if let Some((_, at, b)) = place.block.as_ref().filter(|b| b.0 == i) {
            pieces.push(Piece::Zeros(diff(*at, cur)));
            pieces.push(Piece::Owned(core::mem::take(&mut block_bytes)));
            cur = at.saturating_add(diff(b.range.end, b.range.start));
        }
        pieces.push(Piece::Zeros(diff(k.end, cur)));
        pos = k.end;
    }
    let h = l.elf.header();
    let shoff = h.e_shoff(LE);
    let shtab_end =
        shoff.saturating_add(u64::from(h.e_shnum(LE)).saturating_mul(u64::from(h.e_shentsize(LE))));
    let body_end = if shtab_end == l.file_len {
        shoff
    } else {
        l.file_len
    };
    if body_end < pos {
        return Err(PruneError::new(
            PruneErrorKind::Layout,
            "the section header table overlaps a fatbinary section",
        ));
    }
    pieces.push(Piece::Copy(pos..body_end));
    Ok((pieces, body_end))
}

/// The start of the file up to the first packed section `k` when the program header
/// table grows where it is, over the padding or the moved block after it.
fn grown_table(
    l: &Linked<'_>,
    k: &Packing,
    place: &TablePlace,
    table: &[u8],
    table_len: u64,
    pieces: &mut Vec<Piece>,
) -> Compact<()> {
    let old_phoff = l.elf.header().e_phoff(LE);
    let table_end = old_phoff.saturating_add(table_len);
    let region_end = place
        .block
        .as_ref()
        .map_or(table_end, |b| b.2.range.end.max(table_end));
    if region_end > k.off {
        return Err(PruneError::new(
            PruneErrorKind::ProgramHeaders,
            "the program header table would reach a fatbinary section",
        ));
    }
    pieces.push(Piece::Copy(0..old_phoff));
    pieces.push(Piece::Owned(table.to_vec()));
    pieces.push(Piece::Zeros(diff(region_end, table_end)));
    pieces.push(Piece::Copy(region_end..k.off));
    Ok(())
}

/// The layout line of a compacted file.
fn layout_line(
    l: &Linked<'_>,
    packs: &[Packing],
    holes: &[Range<u64>],
    place: &TablePlace,
    units_moved: usize,
    count: usize,
    tail: bool,
) -> String {
    let removed = hole_bytes(holes);
    let moved = packs
        .iter()
        .flat_map(|k| &k.moves)
        .filter(|m| m.old != m.new)
        .count();
    let names: Vec<&str> = packs.iter().map(|k| k.name).collect();
    let sections = &l.sections;
    format!(
        "compacted: {units_moved} containers in {} packed from the section start ({moved} moved, their pointers updated), {removed} bytes of freed {} removed from the file, {count} program headers{}",
        names.join(" and "),
        if tail { "section tails" } else { "pages" },
        if place.moved.is_some() {
            String::from(" (table moved after the kept containers: GNU strip/objcopy cannot rewrite this file)")
        } else if let Some((_, _, b)) = &place.block {
            let names: Vec<String> = b
                .sections
                .iter()
                .filter_map(|i| sections.section(object::SectionIndex(*i)).ok())
                .map(|sh| String::from_utf8_lossy(sections.section_name(LE, sh).unwrap_or_default()).into_owned())
                .collect();
            format!(
                " (table grown in place; {} moved after the kept containers to make room)",
                names.join(", ")
            )
        } else if place.grown {
            String::from(" (table grown in place)")
        } else {
            String::new()
        },
    )
}

/// Sections that may leave the start of the file to make room for a longer program header
/// table: nothing but program headers, `.dynamic` entries and symbols refer to where they
/// are (notes, the program interpreter's name, the dynamic symbol, string, hash and
/// version tables).
fn movable(sections: &Sections<'_>, sh: &SectionHeader64<LE>) -> bool {
    let name = sections.section_name(LE, sh).unwrap_or_default();
    let flags = sh.sh_flags(LE);
    if flags.0 & SHF_ALLOC.0 == 0 || flags.0 & (SHF_WRITE.0 | SHF_EXECINSTR.0) != 0 {
        return false;
    }
    match sh.sh_type(LE) {
        SHT_NOTE | SHT_GNU_HASH | SHT_HASH | SHT_DYNSYM | SHT_GNU_VERSYM | SHT_GNU_VERNEED
        | SHT_GNU_VERDEF => true,
        SHT_STRTAB => name == b".dynstr",
        SHT_PROGBITS => name == b".interp",
        _ => false,
    }
}

/// `.dynamic` tags whose value is an address.
const DYNAMIC_POINTERS: [DynamicTag; 7] = [
    DT_HASH,
    DT_STRTAB,
    DT_SYMTAB,
    DT_GNU_HASH,
    DT_VERSYM,
    DT_VERNEED,
    DT_VERDEF,
];

/// The leading sections that leave their place for the program header table.
struct Block {
    /// File range (the sections and the padding between them).
    range: Range<u64>,
    /// `p_vaddr - p_offset` of the segment holding it.
    delta: u64,
    /// Largest alignment of its sections.
    align: u64,
    /// Section indices.
    sections: Vec<usize>,
}

/// Where a program header table of `table_len` bytes fits at its own offset: `Ok(None)`
/// when nothing is in the way, `Ok(Some(block))` when the sections of `block` must make
/// room, `Err` with the reason when neither.
fn room_for_table(
    elf: &Elf64<'_>,
    phdrs: &[ProgramHeader64<LE>],
    table_len: u64,
) -> Compact<Option<Block>> {
    let sections = elf.section_table();
    let phoff = elf.header().e_phoff(LE);
    let old_end = phoff.saturating_add(len64(phdrs.len()).saturating_mul(PHDR_SIZE));
    let need_end = phoff.saturating_add(table_len);
    let seg = elf.loads().find(|p| {
        p.p_offset(LE) <= phoff && old_end <= p.p_offset(LE).saturating_add(p.p_filesz(LE))
    });
    if seg.is_none() && phdrs.iter().any(|p| p.p_type(LE) == PT_PHDR) {
        return Err(PruneError::new(
            PruneErrorKind::ProgramHeaders,
            "the program header table is not in a PT_LOAD segment",
        ));
    }
    let (moved, region_end) = in_the_way(sections, phoff, old_end, need_end)?;
    if let Some(seg) = seg {
        if region_end > seg.p_offset(LE).saturating_add(seg.p_filesz(LE)) {
            return Err(PruneError::new(
                PruneErrorKind::ProgramHeaders,
                "no room for the program header table in its segment",
            ));
        }
    }
    let Some(&(_, first)) = moved.first() else {
        // Nothing but padding after the table: it grows where it is, unless a segment
        // without a section lies there.
        return match phdrs.iter().find(|p| {
            !matches!(p.p_type(LE), PT_LOAD | PT_PHDR)
                && p.p_filesz(LE) > 0
                && p.p_offset(LE) < need_end
                && old_end < p.p_offset(LE).saturating_add(p.p_filesz(LE))
        }) {
            Some(p) => Err(PruneError::new(
                PruneErrorKind::ProgramHeaders,
                format!(
                    "a segment of type {:#x} lies after the program header table",
                    p.p_type(LE)
                ),
            )),
            None => Ok(None),
        };
    };
    let seg = seg.ok_or(PruneError::new(
        PruneErrorKind::ProgramHeaders,
        "the program header table is not in a PT_LOAD segment",
    ))?;
    if let Some(&(i, s)) = moved.iter().find(|(_, s)| !movable(sections, s)) {
        let name = sections.section_name(LE, s).unwrap_or_default();
        return Err(PruneError::new(PruneErrorKind::Layout, format!(
            "section {i} ({}) follows the program header table and cannot make room for one more entry",
            String::from_utf8_lossy(name)
        )));
    }
    let moved_end = moved
        .iter()
        .map(|(_, s)| s.sh_offset(LE).saturating_add(s.sh_size(LE)))
        .fold(0, u64::max);
    let range = first.sh_offset(LE)..moved_end;
    check_block_segments(phdrs, &range, old_end, region_end)?;
    let align = moved
        .iter()
        .map(|(_, s)| s.sh_addralign(LE).max(1))
        .max()
        .unwrap_or(1);
    if !align.is_power_of_two() || align > 4096 {
        return Err(PruneError::new(
            PruneErrorKind::Layout,
            "a section after the program header table has an unusual alignment",
        ));
    }
    let delta = seg.p_vaddr(LE).wrapping_sub(seg.p_offset(LE));
    let block = Block {
        range,
        delta,
        align,
        sections: moved.iter().map(|(i, _)| *i).collect(),
    };
    check_block_relocations(elf, &block)?;
    check_block_symbols(elf, &block)?;
    Ok(Some(block))
}

/// A section header with its index.
type Indexed<'d> = (usize, &'d SectionHeader64<LE>);

/// The sections (index, header) in the way of a program header table at `phoff` that
/// grows from `old_end` to `need_end`, in file order, and where the region they and the
/// table take ends.
fn in_the_way<'d>(
    sections: &Sections<'d>,
    phoff: u64,
    old_end: u64,
    need_end: u64,
) -> Compact<(Vec<Indexed<'d>>, u64)> {
    let mut after: Vec<(usize, &SectionHeader64<LE>)> = sections
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            *i != 0 && s.sh_type(LE) != SHT_NOBITS && s.sh_size(LE) > 0 && s.sh_offset(LE) >= phoff
        })
        .collect();
    after.sort_by_key(|(_, s)| s.sh_offset(LE));
    if after.iter().any(|(_, s)| s.sh_offset(LE) < old_end) {
        return Err(PruneError::new(
            PruneErrorKind::Layout,
            "a section overlaps the program header table",
        ));
    }
    let moved: Vec<(usize, &SectionHeader64<LE>)> = after
        .iter()
        .copied()
        .take_while(|(_, s)| s.sh_offset(LE) < need_end)
        .collect();
    let region_end = moved
        .iter()
        .map(|(_, s)| s.sh_offset(LE).saturating_add(s.sh_size(LE)))
        .fold(need_end, u64::max);
    Ok((moved, region_end))
}

/// Segments other than `PT_LOAD` in the region after the table (`old_end` to
/// `region_end`) must lie inside the block's file `range` (they move with it).
fn check_block_segments(
    phdrs: &[ProgramHeader64<LE>],
    range: &Range<u64>,
    old_end: u64,
    region_end: u64,
) -> Compact<()> {
    for p in phdrs {
        let r = p.p_offset(LE)..p.p_offset(LE).saturating_add(p.p_filesz(LE));
        if matches!(p.p_type(LE), PT_LOAD | PT_PHDR) || p.p_filesz(LE) == 0 {
            continue;
        }
        let overlaps = r.start < region_end && old_end < r.end;
        if overlaps && !(range.start <= r.start && r.end <= range.end) {
            return Err(PruneError::new(PruneErrorKind::Layout, format!(
                "a segment of type {:#x} covers part of the sections after the program header table",
                p.p_type(LE)
            )));
        }
    }
    Ok(())
}

/// The addresses of `block`.
fn block_addresses(block: &Block) -> Range<u64> {
    block.range.start.wrapping_add(block.delta)..block.range.end.wrapping_add(block.delta)
}

/// Nothing relocated lies in the block, and no relocated pointer points into it.
fn check_block_relocations(elf: &Elf64<'_>, block: &Block) -> Compact<()> {
    let addrs = block_addresses(block);
    let data = elf.data();
    for r in elf.relocations() {
        let r = r.map_err(PruneError::read)?;
        // RELA: the addend; REL and RELR: the word at the place.
        let target = match r.addend {
            Some(a) => Some(a as u64),
            None => elf.file_offset(r.place, 8).and_then(|f| u64_at(data, f)),
        };
        if addrs.contains(&r.place) || (r.dynamic && target.is_some_and(|t| addrs.contains(&t))) {
            return Err(PruneError::new(
                PruneErrorKind::Layout,
                "a relocation refers to the sections after the program header table",
            ));
        }
    }
    Ok(())
}

/// A named symbol in the block may be reached by code through a PC-relative address no
/// relocation shows (`__start_<section>`): such a block stays. glibc's `__abi_tag`, a
/// label on the ABI note of executables that nothing reads, is the exception.
fn check_block_symbols(elf: &Elf64<'_>, block: &Block) -> Compact<()> {
    let addrs = block_addresses(block);
    let (data, sections) = (elf.data(), elf.section_table());
    for sh in sections.iter() {
        if !matches!(sh.sh_type(LE), SHT_SYMTAB | SHT_DYNSYM) {
            continue;
        }
        let Ok(syms) = sh.data_as_array::<Sym64<LE>, _>(LE, data) else {
            continue;
        };
        let strings = sections
            .strings(LE, data, object::SectionIndex(sh.sh_link(LE) as usize))
            .ok();
        for sym in syms {
            let value = sym.st_value.get(LE);
            let shndx = usize::from(sym.st_shndx.get(LE).0);
            let inside = block.sections.contains(&shndx) || addrs.contains(&value);
            if !inside
                || sym.st_info.st_type() == object::elf::STT_SECTION
                || sym.st_name.get(LE) == 0
            {
                continue;
            }
            let name = strings
                .and_then(|t| t.get(sym.st_name.get(LE)).ok())
                .unwrap_or_default();
            if name != b"__abi_tag" {
                return Err(PruneError::new(
                    PruneErrorKind::Layout,
                    format!(
                        "symbol {} lies in the sections after the program header table",
                        String::from_utf8_lossy(name)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `.dynamic` entries that hold an address in `addrs` get it moved by `shift`.
fn patch_dynamic(
    data: &[u8],
    sections: &Sections<'_>,
    addrs: &Range<u64>,
    shift: u64,
    patches: &mut Patches,
) -> Compact<()> {
    for sh in sections.iter().filter(|s| s.sh_type(LE) == SHT_DYNAMIC) {
        let entries: &[Dyn64<LE>] = sh.data_as_array(LE, data).map_err(|_| {
            PruneError::new(PruneErrorKind::Read, "the dynamic section does not read")
        })?;
        let o = sh.sh_offset(LE);
        for (k, d) in (0u64..).zip(entries) {
            let (tag, value) = (d.d_tag.get(LE), d.d_val.get(LE));
            if DYNAMIC_POINTERS.contains(&tag) && addrs.contains(&value) {
                let at = o
                    .saturating_add(k.saturating_mul(DYN_SIZE))
                    .saturating_add(8);
                patches.insert(at, value.wrapping_add(shift).to_le_bytes().to_vec());
            }
        }
    }
    Ok(())
}

/// Symbols defined in moved sections follow them.
fn patch_moved_symbols(
    data: &[u8],
    sections: &Sections<'_>,
    moved: &BTreeMap<usize, u64>,
    shift: u64,
    patches: &mut Patches,
) {
    for sh in sections.iter() {
        if !matches!(sh.sh_type(LE), SHT_SYMTAB | SHT_DYNSYM) {
            continue;
        }
        let Ok(syms) = sh.data_as_array::<Sym64<LE>, _>(LE, data) else {
            continue;
        };
        let o = sh.sh_offset(LE);
        for (k, sym) in (0u64..).zip(syms) {
            if moved.contains_key(&usize::from(sym.st_shndx.get(LE).0)) {
                let at = o.saturating_add(k.saturating_mul(SYM_SIZE));
                let v = sym.st_value.get(LE).wrapping_add(shift);
                patches.insert(at.saturating_add(SYM_VALUE), v.to_le_bytes().to_vec());
            }
        }
    }
}
