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
//!    ([`crate::registration::abi::RawFatbinWrapper`]), and symbols defined in the
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

use crate::error::{Error, ErrorKind, Result};
use crate::host::elf::{Elf64, Encoding, RelocationKind};
use crate::host::SectionRole;
use crate::registration::abi::{RawFatbinWrapper, FATBIN_WRAPPER_SIZE};

use super::pieces::{apply_patches, cut, standalone, Piece};
use super::plan::UnitPlan;
use super::{diff, err, len64, u64_at};

/// The sections of linked files whose containers are rewritten (compacted, or in place):
/// AMD's bundles, NVIDIA's fatbinaries, and the relocatable fatbinaries of `nvcc -rdc`
/// units (the device link's inputs, each pointed at by its version-1 wrapper).
pub const FATBIN_SECTIONS: [&str; 3] = [".hip_fatbin", ".nv_fatbin", "__nv_relfatbin"];

const PHDR_SIZE: u64 = core::mem::size_of::<ProgramHeader64<LE>>() as u64;
const SYM_SIZE: u64 = core::mem::size_of::<Sym64<LE>>() as u64;
const DYN_SIZE: u64 = core::mem::size_of::<Dyn64<LE>>() as u64;
const RELA_ADDEND: u64 = core::mem::offset_of!(object::elf::Rela64<LE>, r_addend) as u64;
const SYM_VALUE: u64 = core::mem::offset_of!(Sym64<LE>, st_value) as u64;
const SYM_SIZE_FIELD: u64 = core::mem::offset_of!(Sym64<LE>, st_size) as u64;
const WRAPPER_POINTER: u64 = core::mem::offset_of!(RawFatbinWrapper, binary) as u64;

fn bad(at: u64, what: &'static str) -> Error {
    err(ErrorKind::BadContainer, at, what)
}

/// A host ELF file with units to rewrite.
pub(super) fn host_elf(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    shrink: bool,
    move_table: bool,
) -> Result<(Vec<Piece>, String)> {
    let h = FileHeader64::<LE>::parse(data)
        .map_err(|_| bad(4, "only 64-bit little-endian ELF files are pruned"))?;
    if !h.is_little_endian() {
        return Err(bad(5, "only 64-bit little-endian ELF files are pruned"));
    }
    let e_type = h.e_type(LE);
    if e_type == ET_REL {
        return super::relocatable::rewrite(data, plans);
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
            .any(|s| p.location.strip_prefix("section ") == Some(s));
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
            Ok(done) if !done.0.is_empty() => return Ok(done),
            _ => match compact(data, plans, false, move_table) {
                Ok(done) => return Ok(done),
                Err(why) => why,
            },
        }
    } else {
        "--no-shrink".into()
    };
    Ok((
        standalone(data, plans, true),
        format!("in place, zero-filled, file size unchanged ({why})"),
    ))
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
    patches: BTreeMap<u64, Vec<u8>>,
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
    fn repoint(&mut self, at: u64, old: u64, what: &str) -> core::result::Result<(), String> {
        let Some(pack) = self.pack_of(old) else {
            return Ok(());
        };
        let Some(&new) = self.moved.get(&old) else {
            return Err(format!(
                "{what} at offset {at:#x} points into {} ({old:#x}) but not at the start of a container",
                pack.name
            ));
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
) -> core::result::Result<Vec<Packing>, String> {
    let file_len = len64(data.len());
    let mut packs: Vec<Packing> = Vec::new();
    for (index, sh) in sections.iter().enumerate() {
        let name = sections.section_name(LE, sh).unwrap_or_default();
        let Some(sname) = FATBIN_SECTIONS.iter().find(|s| s.as_bytes() == name) else {
            continue;
        };
        // Relocatable device code with nothing to rewrite stays out of the packing, so
        // that its layout cannot keep the other sections from being compacted.
        let (start, len) = (sh.sh_offset(LE), sh.sh_size(LE));
        if *sname == "__nv_relfatbin"
            && !plans.iter().any(|p| {
                p.is_rewritten()
                    && start <= p.range.start
                    && p.range.end <= start.saturating_add(len)
            })
        {
            continue;
        }
        if sh.sh_type(LE) != SHT_PROGBITS || sh.sh_flags(LE).0 & SHF_ALLOC.0 == 0 {
            return Err(format!("{sname} is not an allocated PROGBITS section"));
        }
        let (off, size, addr) = (sh.sh_offset(LE), sh.sh_size(LE), sh.sh_addr(LE));
        let end = off
            .checked_add(size)
            .filter(|e| *e <= file_len)
            .ok_or_else(|| format!("{sname} runs past the end of the file"))?;
        let seg = loads
            .iter()
            .find(|p| p.p_offset(LE) <= off && end <= p.p_offset(LE).saturating_add(p.p_filesz(LE)))
            .ok_or_else(|| format!("{sname} is not inside the file part of one PT_LOAD segment"))?;
        let delta = seg.p_vaddr(LE).wrapping_sub(seg.p_offset(LE));
        if delta != addr.wrapping_sub(off) {
            return Err(format!(
                "{sname}'s address and offset disagree with its segment"
            ));
        }
        let ends_segment = end == seg.p_offset(LE).saturating_add(seg.p_filesz(LE))
            && seg.p_memsz(LE) == seg.p_filesz(LE);
        let sec_align = sh.sh_addralign(LE).max(1);
        if !sec_align.is_power_of_two() {
            return Err(format!("{sname}'s alignment is not a power of two"));
        }
        let mut here: Vec<(usize, &UnitPlan<'_>)> = plans
            .iter()
            .enumerate()
            .filter(|(_, p)| off <= p.range.start && p.range.end <= end)
            .collect();
        if here.is_empty() {
            continue;
        }
        here.sort_by_key(|(_, p)| p.range.start);
        let mut moves = Vec::new();
        let (mut pos, mut cursor) = (off, off);
        for (i, p) in here {
            // Bytes between containers are padding; anything else stays where it is.
            let gap = super::slice(data, &(pos..p.range.start), "gap").unwrap_or_default();
            if p.range.start < pos || gap.iter().any(|b| *b != 0) {
                return Err(format!(
                    "{sname} holds bytes outside its containers at offset {pos:#x}"
                ));
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
                .ok_or("address overflow")?;
            let new = off.saturating_add(diff(new_addr, addr));
            if new > p.range.start || new < cursor {
                return Err("a container would move up".into());
            }
            moves.push(Move {
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
        let tail = super::slice(data, &(pos..end), "section tail").unwrap_or_default();
        if tail.iter().any(|b| *b != 0) {
            return Err(format!(
                "{sname} holds bytes outside its containers at offset {pos:#x}"
            ));
        }
        packs.push(Packing {
            index,
            name: sname,
            off,
            end,
            addr,
            delta,
            ends_segment,
            moves,
            packed_end: cursor,
        });
    }
    if packs.is_empty() {
        return Err("no container in .hip_fatbin, .nv_fatbin or __nv_relfatbin".into());
    }
    packs.sort_by_key(|k| k.off);
    Ok(packs)
}

/// Every pointer to a unit: relative relocations (`RELA` addends, `REL` and `RELR` words
/// in place), the words they apply to, and the wrappers' pointer fields (absolute in
/// executables), as the host reader ([`Elf64::relocations`], the wrapper sections)
/// gives them.
fn find_pointers(elf: &Elf64<'_>, ptrs: &mut Pointers<'_>) -> core::result::Result<(), String> {
    let data = elf.data();
    let machine = elf.machine();
    if machine != EM_X86_64.0 && machine != EM_AARCH64.0 {
        return Err(format!("relocations of machine {machine} are not known"));
    }
    let sections = elf.section_table();
    let packs = ptrs.packs;
    let pack_section = |shndx: u16| packs.iter().any(|k| k.index == usize::from(shndx));
    // The symbol table of the last relocation section read.
    let mut symbols: (usize, &[Sym64<LE>]) = (usize::MAX, &[]);
    for r in elf.relocations() {
        let r = r.map_err(|e| format!("{e}"))?;
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
            (Encoding::Rela(_), _) => {
                if symbols.0 != r.symbols {
                    let table: &[Sym64<LE>] = sections
                        .section(object::SectionIndex(r.symbols))
                        .ok()
                        .and_then(|s| s.data_as_array(LE, data).ok())
                        .unwrap_or_default();
                    symbols = (r.symbols, table);
                }
                let shndx = symbols
                    .1
                    .get(r.symbol as usize)
                    .filter(|_| r.symbol != 0)
                    .map(|s| s.st_shndx.get(LE).0);
                if shndx.is_some_and(pack_section) {
                    let name = sections
                        .section(object::SectionIndex(r.section))
                        .ok()
                        .and_then(|sh| sections.section_name(LE, sh).ok())
                        .unwrap_or_default();
                    return Err(format!(
                        "a relocation of {} refers to a symbol in a fatbinary section",
                        String::from_utf8_lossy(name)
                    ));
                }
            }
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
    let table = elf.sections().map_err(|e| format!("{e}"))?;
    for section in crate::host::Sections::Elf(table).iter() {
        let section = section.map_err(|e| format!("{e}"))?;
        if section.kind != SHT_PROGBITS.0 || section.role() != SectionRole::Wrappers {
            continue;
        }
        let o = section.offset;
        for k in 0..len64(section.data.len()) / FATBIN_WRAPPER_SIZE {
            let at = o.saturating_add(k.saturating_mul(FATBIN_WRAPPER_SIZE));
            let Ok(w) = crate::bytes::read::<RawFatbinWrapper>(data, at, "wrapper") else {
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
fn patch_symbols(
    data: &[u8],
    sections: &Sections<'_>,
    packs: &[Packing],
    patches: &mut BTreeMap<u64, Vec<u8>>,
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

/// The new file offset of `o` once `holes` leave the file.
fn mapped(holes: &[Range<u64>], o: u64) -> u64 {
    diff(
        o,
        holes
            .iter()
            .filter(|h| h.end <= o)
            .map(|h| diff(h.end, h.start))
            .fold(0u64, u64::saturating_add),
    )
}

/// Compacts the [`FATBIN_SECTIONS`] of a linked file (module
/// documentation), freeing whole pages, or with `tail`, the tails of sections that end
/// their segment; `Err` says why the file is rewritten in place instead.
fn compact(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    tail: bool,
    move_table: bool,
) -> core::result::Result<(Vec<Piece>, String), String> {
    let elf = Elf64::parse(data).map_err(|e| format!("{e}"))?;
    let h = elf.header();
    let phdrs = elf.segments().map_err(|e| format!("{e}"))?;
    let sections = *elf.section_table();
    if h.e_shnum(LE) == 0 || h.e_shstrndx(LE) == SHN_XINDEX {
        return Err("extended section numbering".into());
    }
    let loads: Vec<&ProgramHeader64<LE>> = elf.loads().collect();
    let first_delta = loads
        .first()
        .map(|p| p.p_vaddr(LE).wrapping_sub(p.p_offset(LE)))
        .ok_or("no PT_LOAD segment")?;
    let align = loads
        .iter()
        .map(|p| p.p_align(LE))
        .max()
        .unwrap_or(0)
        .max(4096);
    if !align.is_power_of_two() {
        return Err("PT_LOAD alignment is not a power of two".into());
    }
    let file_len = len64(data.len());
    let packs = packings(data, plans, &sections, &loads)?;
    let mut ptrs = Pointers {
        packs: &packs,
        moved: packs
            .iter()
            .flat_map(|k| k.moves.iter().map(|m| (k.address(m.old), k.address(m.new))))
            .collect(),
        patches: BTreeMap::new(),
        referenced: BTreeSet::new(),
    };
    find_pointers(&elf, &mut ptrs)?;
    let units_moved = ptrs.moved.len();
    let unreferenced = units_moved.saturating_sub(ptrs.referenced.len());
    let mut patches = ptrs.patches;
    patch_symbols(data, &sections, &packs, &mut patches);

    // The holes and, when a segment is split, the program header table, which then needs
    // a place of its own: right after the packed units of the first section with room, in
    // a segment mapped like the first one (so that `AT_PHDR` is right under every kernel).
    if u64::from(h.e_phentsize(LE)) != PHDR_SIZE {
        return Err("unexpected program header size".into());
    }
    let mut holes: Vec<Option<Range<u64>>> = packs.iter().map(|k| k.hole(align, 0, tail)).collect();
    let flat = |holes: &[Option<Range<u64>>]| holes.iter().flatten().cloned().collect::<Vec<_>>();
    if holes.iter().all(Option::is_none) {
        let names: Vec<&str> = packs.iter().map(|k| k.name).collect();
        return Err(format!("no whole page of {} is freed", names.join(" and ")));
    }
    for p in phdrs.iter() {
        if p.p_type(LE) == PT_LOAD || p.p_filesz(LE) == 0 {
            continue;
        }
        let r = p.p_offset(LE)..p.p_offset(LE).saturating_add(p.p_filesz(LE));
        if flat(&holes)
            .iter()
            .any(|h| h.start < r.end && r.start < h.end)
        {
            return Err(format!(
                "a segment of type {:#x} overlaps the freed pages",
                p.p_type(LE)
            ));
        }
    }
    let count = {
        let f = flat(&holes);
        split(phdrs, &f, &|o| mapped(&f, o)).len()
    };
    let old_phoff = h.e_phoff(LE);
    let table_len = len64(count).saturating_mul(PHDR_SIZE);
    // (pack number, file offset) of the moved table, if it moves.
    let mut table_at: Option<(usize, u64)> = None;
    // The table grows where it is; (pack number, file offset, block) of the leading
    // sections that move after the kept containers to make room for it.
    let mut grown = false;
    let mut block_at: Option<(usize, u64, Block)> = None;
    let room = if count == phdrs.len() {
        Ok(None)
    } else {
        room_for_table(&elf, phdrs, table_len)
    };
    match room {
        _ if count == phdrs.len() => {}
        Ok(None) => grown = true,
        Ok(Some(block)) => {
            let len = diff(block.range.end, block.range.start);
            let host = packs.iter().enumerate().find_map(|(i, k)| {
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
                let hole = k.hole(align, diff(at, k.packed_end).saturating_add(len), tail)?;
                Some((i, at, hole))
            });
            let Some((i, at, hole)) = host else {
                return Err("no room after the kept containers for the sections that must make room for one more program header".into());
            };
            if let Some(h) = holes.get_mut(i) {
                *h = Some(hole);
            }
            block_at = Some((i, at, block));
            grown = true;
        }
        Err(why) if !move_table => {
            return Err(format!(
                "{why}; the program header table would have to move, which GNU strip/objcopy cannot rewrite (--move-program-headers allows it)"
            ));
        }
        Err(_) => {
            let host = packs.iter().enumerate().find_map(|(i, k)| {
                let at = k.packed_end.checked_next_multiple_of(8)?;
                let hole = k.hole(
                    align,
                    diff(at, k.packed_end).saturating_add(table_len),
                    tail,
                )?;
                (holes.get(i)?.is_some() && k.delta == first_delta).then_some((i, at, hole))
            });
            let Some((i, at, hole)) = host else {
                return Err("no room for the program header table after the kept containers of a section in a segment mapped like the first PT_LOAD".into());
            };
            if let Some(h) = holes.get_mut(i) {
                *h = Some(hole);
            }
            table_at = Some((i, at));
        }
    }
    let holes = flat(&holes);
    let map = |o: u64| mapped(&holes, o);
    let mut new_phdrs = split(phdrs, &holes, &map);
    if new_phdrs.len() != count {
        return Err("the segment count changed".into());
    }
    if let Some((i, at)) = table_at {
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
    if grown {
        for q in new_phdrs.iter_mut().filter(|q| q.p_type(LE) == PT_PHDR) {
            q.p_filesz = U64::new(LE, table_len);
            q.p_memsz = U64::new(LE, table_len);
        }
    }
    // The moved block: its sections, the segments inside it, `.dynamic` entries and
    // symbols follow it; the bytes of its new place are its own with their patches.
    let mut block_bytes = Vec::new();
    let mut moved_sections: BTreeMap<usize, u64> = BTreeMap::new();
    let mut shift = 0u64;
    if let Some((i, at, block)) = &block_at {
        let k = packs.get(*i).ok_or("no section")?;
        shift = at
            .wrapping_add(k.delta)
            .wrapping_sub(block.range.start.wrapping_add(block.delta));
        let new_off = |o: u64| map(at.saturating_add(diff(o, block.range.start)));
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
        for &index in &block.sections {
            if let Ok(sh) = sections.section(object::SectionIndex(index)) {
                moved_sections.insert(index, new_off(sh.sh_offset(LE)));
            }
        }
        let addrs =
            block.range.start.wrapping_add(block.delta)..block.range.end.wrapping_add(block.delta);
        patch_dynamic(data, &sections, &addrs, shift, &mut patches)?;
        patch_moved_symbols(data, &sections, &moved_sections, shift, &mut patches);
        block_bytes = super::slice(data, &block.range, "sections")
            .map_err(|e| format!("{e}"))?
            .to_vec();
        let inside: Vec<u64> = patches
            .range(block.range.clone())
            .map(|(a, _)| *a)
            .collect();
        for a in inside {
            let bytes = patches.remove(&a).unwrap_or_default();
            let from = usize::try_from(diff(a, block.range.start)).unwrap_or(usize::MAX);
            block_bytes
                .get_mut(from..from.saturating_add(bytes.len()))
                .ok_or("a patch crosses the moved sections")?
                .copy_from_slice(&bytes);
        }
    }
    let mut table = Vec::new();
    for q in &new_phdrs {
        table.extend_from_slice(object::pod::bytes_of(q));
    }
    // Section headers: offsets moved, the fatbinary sections end after their units.
    let mut shdrs = Vec::new();
    for (index, sh) in sections.iter().enumerate() {
        let mut s = *sh;
        if index != 0 {
            s.sh_offset = U64::new(LE, map(sh.sh_offset(LE)));
        }
        if let Some(k) = packs.iter().find(|k| k.index == index) {
            s.sh_size = U64::new(LE, diff(k.packed_end, k.off));
        }
        if let Some(&off) = moved_sections.get(&index) {
            s.sh_offset = U64::new(LE, off);
            s.sh_addr = U64::new(LE, sh.sh_addr(LE).wrapping_add(shift));
        }
        shdrs.extend_from_slice(object::pod::bytes_of(&s));
    }

    // The file: everything in place but the packed sections, then the patches, then the
    // holes cut out; the section header table goes to the end.
    let mut pieces = Vec::new();
    let mut pos = 0u64;
    for (i, k) in packs.iter().enumerate() {
        if k.off < pos {
            return Err("fatbinary sections overlap".into());
        }
        if grown && pos == 0 {
            // The table grows where it is, over the padding or the moved block after it.
            let table_end = old_phoff.saturating_add(table_len);
            let region_end = block_at
                .as_ref()
                .map_or(table_end, |b| b.2.range.end.max(table_end));
            if region_end > k.off {
                return Err("the program header table would reach a fatbinary section".into());
            }
            pieces.push(Piece::Copy(0..old_phoff));
            pieces.push(Piece::Owned(table.clone()));
            pieces.push(Piece::Zeros(diff(region_end, table_end)));
            pieces.push(Piece::Copy(region_end..k.off));
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
        if let Some((_, at)) = table_at.filter(|t| t.0 == i) {
            pieces.push(Piece::Zeros(diff(at, cur)));
            pieces.push(Piece::Owned(table.clone()));
            cur = at.saturating_add(table_len);
        }
        if let Some((_, at, b)) = block_at.as_ref().filter(|b| b.0 == i) {
            pieces.push(Piece::Zeros(diff(*at, cur)));
            pieces.push(Piece::Owned(core::mem::take(&mut block_bytes)));
            cur = at.saturating_add(diff(b.range.end, b.range.start));
        }
        pieces.push(Piece::Zeros(diff(k.end, cur)));
        pos = k.end;
    }
    let shoff = h.e_shoff(LE);
    let shtab_end =
        shoff.saturating_add(u64::from(h.e_shnum(LE)).saturating_mul(u64::from(h.e_shentsize(LE))));
    let body_end = if shtab_end == file_len {
        shoff
    } else {
        file_len
    };
    if body_end < pos {
        return Err("the section header table overlaps a fatbinary section".into());
    }
    pieces.push(Piece::Copy(pos..body_end));
    if table_at.is_none() && !grown {
        patches.insert(old_phoff, table);
    }
    let new_len = map(body_end);
    let new_shoff = new_len
        .checked_next_multiple_of(8)
        .ok_or("file size overflows")?;
    let mut eh = *h;
    if let Some((_, at)) = table_at {
        eh.e_phoff = U64::new(LE, map(at));
    }
    eh.e_phnum = object::U16::new(
        LE,
        u16::try_from(count)
            .ok()
            .filter(|n| *n < 0xffff)
            .ok_or("too many segments")?,
    );
    eh.e_shoff = U64::new(LE, new_shoff);
    patches.insert(0, object::pod::bytes_of(&eh).to_vec());
    let pieces = apply_patches(pieces, plans, &patches).map_err(|e| format!("{e}"))?;
    let mut out = cut(pieces, plans, &holes, body_end);
    out.push(Piece::Zeros(diff(new_shoff, new_len)));
    out.push(Piece::Owned(shdrs));
    let removed: u64 = holes
        .iter()
        .map(|h| diff(h.end, h.start))
        .fold(0, u64::saturating_add);
    let moved = packs
        .iter()
        .flat_map(|k| &k.moves)
        .filter(|m| m.old != m.new)
        .count();
    let names: Vec<&str> = packs.iter().map(|k| k.name).collect();
    let mut name = format!(
        "compacted: {units_moved} containers in {} packed from the section start ({moved} moved, their pointers updated), {removed} bytes of freed {} removed from the file, {count} program headers{}",
        names.join(" and "),
        if tail { "section tails" } else { "pages" },
        if table_at.is_some() {
            String::from(" (table moved after the kept containers: GNU strip/objcopy cannot rewrite this file)")
        } else if let Some((_, _, b)) = &block_at {
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
        } else if grown {
            String::from(" (table grown in place)")
        } else {
            String::new()
        },
    );
    if unreferenced > 0 {
        name.push_str(&format!(
            "; {unreferenced} container(s) no wrapper or relocation points to"
        ));
    }
    Ok((out, name))
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
) -> core::result::Result<Option<Block>, String> {
    let h = elf.header();
    let sections = elf.section_table();
    let phoff = h.e_phoff(LE);
    let old_end = phoff.saturating_add(len64(phdrs.len()).saturating_mul(PHDR_SIZE));
    let need_end = phoff.saturating_add(table_len);
    let seg = elf.loads().find(|p| {
        p.p_offset(LE) <= phoff && old_end <= p.p_offset(LE).saturating_add(p.p_filesz(LE))
    });
    if seg.is_none() && phdrs.iter().any(|p| p.p_type(LE) == PT_PHDR) {
        return Err("the program header table is not in a PT_LOAD segment".into());
    }
    let mut after: Vec<(usize, &SectionHeader64<LE>)> = sections
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            *i != 0 && s.sh_type(LE) != SHT_NOBITS && s.sh_size(LE) > 0 && s.sh_offset(LE) >= phoff
        })
        .collect();
    after.sort_by_key(|(_, s)| s.sh_offset(LE));
    if after.iter().any(|(_, s)| s.sh_offset(LE) < old_end) {
        return Err("a section overlaps the program header table".into());
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
    if let Some(seg) = seg {
        if region_end > seg.p_offset(LE).saturating_add(seg.p_filesz(LE)) {
            return Err("no room for the program header table in its segment".into());
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
            Some(p) => Err(format!(
                "a segment of type {:#x} lies after the program header table",
                p.p_type(LE)
            )),
            None => Ok(None),
        };
    };
    let seg = seg.ok_or("the program header table is not in a PT_LOAD segment")?;
    if let Some(&(i, s)) = moved.iter().find(|(_, s)| !movable(sections, s)) {
        let name = sections.section_name(LE, s).unwrap_or_default();
        return Err(format!(
            "section {i} ({}) follows the program header table and cannot make room for one more entry",
            String::from_utf8_lossy(name)
        ));
    }
    let moved_end = moved
        .iter()
        .map(|(_, s)| s.sh_offset(LE).saturating_add(s.sh_size(LE)))
        .fold(0, u64::max);
    let range = first.sh_offset(LE)..moved_end;
    // Segments other than PT_LOAD there must lie inside the block (they move with it).
    for p in phdrs {
        let r = p.p_offset(LE)..p.p_offset(LE).saturating_add(p.p_filesz(LE));
        if matches!(p.p_type(LE), PT_LOAD | PT_PHDR) || p.p_filesz(LE) == 0 {
            continue;
        }
        let overlaps = r.start < region_end && old_end < r.end;
        if overlaps && !(range.start <= r.start && r.end <= range.end) {
            return Err(format!(
                "a segment of type {:#x} covers part of the sections after the program header table",
                p.p_type(LE)
            ));
        }
    }
    let align = moved
        .iter()
        .map(|(_, s)| s.sh_addralign(LE).max(1))
        .max()
        .unwrap_or(1);
    if !align.is_power_of_two() || align > 4096 {
        return Err("a section after the program header table has an unusual alignment".into());
    }
    // Nothing relocated lies in the block, and no relocated pointer points into it.
    let delta = seg.p_vaddr(LE).wrapping_sub(seg.p_offset(LE));
    let addrs = range.start.wrapping_add(delta)..range.end.wrapping_add(delta);
    let data = elf.data();
    for r in elf.relocations() {
        let r = r.map_err(|e| format!("{e}"))?;
        // RELA: the addend; REL and RELR: the word at the place.
        let target = match r.addend {
            Some(a) => Some(a as u64),
            None => elf.file_offset(r.place, 8).and_then(|f| u64_at(data, f)),
        };
        if addrs.contains(&r.place) || (r.dynamic && target.is_some_and(|t| addrs.contains(&t))) {
            return Err(
                "a relocation refers to the sections after the program header table".into(),
            );
        }
    }
    // A named symbol there may be reached by code through a PC-relative address no
    // relocation shows (`__start_<section>`): such a block stays. glibc's `__abi_tag`, a
    // label on the ABI note of executables that nothing reads, is the exception.
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
            let inside = moved.iter().any(|(i, _)| *i == shndx) || addrs.contains(&value);
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
                return Err(format!(
                    "symbol {} lies in the sections after the program header table",
                    String::from_utf8_lossy(name)
                ));
            }
        }
    }
    Ok(Some(Block {
        range,
        delta,
        align,
        sections: moved.iter().map(|(i, _)| *i).collect(),
    }))
}

/// `.dynamic` entries that hold an address in `addrs` get it moved by `shift`.
fn patch_dynamic(
    data: &[u8],
    sections: &Sections<'_>,
    addrs: &Range<u64>,
    shift: u64,
    patches: &mut BTreeMap<u64, Vec<u8>>,
) -> core::result::Result<(), String> {
    for sh in sections.iter().filter(|s| s.sh_type(LE) == SHT_DYNAMIC) {
        let entries: &[Dyn64<LE>] = sh
            .data_as_array(LE, data)
            .map_err(|_| String::from("the dynamic section does not read"))?;
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
    patches: &mut BTreeMap<u64, Vec<u8>>,
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
