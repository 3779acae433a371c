//! Relocatable host objects: every section holding a rewritten unit gets its new size and
//! the sections are laid out again in their file order (each at its alignment), with the
//! section header table after them.
//!
//! No section index changes, so symbols, relocations and `sh_link`/`sh_info` stay valid;
//! what is checked is that nothing points *into* a resized section beyond its start: such
//! a section must hold exactly one unit, at its start; no relocation section may apply to
//! it; symbols defined in it must be at offset 0 (their size, when it was the section's,
//! becomes the new size); relocations against them must have addend 0 (`RELA`; `REL`
//! relocations against them are refused). The `__CLANG_OFFLOAD_BUNDLE__<id>` sections of
//! a bundled object's dropped entries are removed, when nothing references them or any
//! section after them (the bundler appends its sections last).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;

use object::elf::{
    SectionHeader64, Sym64, SHF_INFO_LINK, SHN_LORESERVE, SHN_XINDEX, SHT_DYNSYM, SHT_GROUP,
    SHT_NOBITS, SHT_REL, SHT_RELA, SHT_SYMTAB, SHT_SYMTAB_SHNDX,
};
use object::read::elf::{FileHeader, SectionHeader};
use object::{LittleEndian as LE, U64};

use crate::error::{Error, ErrorKind, Result};
use crate::host::elf::{Elf64, Encoding};

use super::pieces::Piece;
use super::plan::{Body, UnitPlan};
use super::{diff, err, len64};

const SYM_SIZE: usize = core::mem::size_of::<Sym64<LE>>();

fn bad(at: u64, what: &'static str) -> Error {
    err(ErrorKind::BadContainer, at, what)
}

fn elf(what: &'static str) -> impl Fn(object::read::Error) -> Error {
    move |_| bad(0, what)
}

/// The section of a changed unit and its new contents.
struct Change {
    unit: usize,
    tail: Range<u64>,
    new_size: u64,
}

/// Lays out a relocatable object again (see the module documentation).
pub(super) fn rewrite(data: &[u8], plans: &[UnitPlan<'_>]) -> Result<(Vec<Piece>, String)> {
    let file = Elf64::parse(data)?;
    let h = file.header();
    if h.e_phnum(LE) != 0 {
        return Err(bad(56, "relocatable object with program headers"));
    }
    if h.e_shnum(LE) == 0 || h.e_shstrndx(LE) == SHN_XINDEX {
        return Err(bad(60, "extended section numbering is not handled"));
    }
    let sections = file.section_table();
    let shdrs: Vec<SectionHeader64<LE>> = sections.iter().copied().collect();
    let file_range = |sh: &SectionHeader64<LE>| -> Range<u64> {
        let off = sh.sh_offset(LE);
        let size = if sh.sh_type(LE) == SHT_NOBITS {
            0
        } else {
            sh.sh_size(LE)
        };
        off..off.saturating_add(size)
    };
    let shdr = |i: usize| shdrs.get(i).ok_or(bad(0, "section index out of range"));

    // Sections of a bundled host object to remove.
    let mut removed: Vec<usize> = Vec::new();
    for p in plans {
        if let Body::DropSections(ids) = &p.body {
            for id in ids {
                let name = format!("__CLANG_OFFLOAD_BUNDLE__{id}");
                let i = shdrs
                    .iter()
                    .position(|sh| {
                        sections
                            .section_name(LE, sh)
                            .is_ok_and(|n| n == name.as_bytes())
                    })
                    .ok_or(bad(p.range.start, "bundle section not found"))?;
                removed.push(i);
            }
        }
    }
    removed.sort_unstable();

    // The section of every changed unit, and its new contents.
    let mut changes: Vec<(usize, Change)> = Vec::new();
    for (n, p) in plans.iter().enumerate() {
        if matches!(p.body, Body::DropSections(_)) {
            continue;
        }
        let index = shdrs
            .iter()
            .position(|sh| {
                let r = file_range(sh);
                r.start <= p.range.start && p.range.end <= r.end && r.end > r.start
            })
            .ok_or(bad(p.range.start, "the unit is not inside one section"))?;
        if !p.is_rewritten() {
            continue;
        }
        let r = file_range(shdr(index)?);
        let others = plans
            .iter()
            .filter(|q| r.start <= q.range.start && q.range.end <= r.end)
            .count();
        if p.range.start != r.start || others != 1 {
            return Err(bad(
                p.range.start,
                "a rewritten unit must be alone at the start of its section in a relocatable object",
            ));
        }
        let mut tail = p.range.end..r.end;
        if super::slice(data, &tail, "section")?
            .iter()
            .all(|x| *x == 0)
        {
            tail = tail.end..tail.end;
        }
        let new_size = p.len_after.saturating_add(diff(tail.end, tail.start));
        changes.push((
            index,
            Change {
                unit: n,
                tail,
                new_size,
            },
        ));
    }
    let changed = |i: usize| changes.iter().find(|(j, _)| *j == i).map(|(_, c)| c);

    // References into the resized sections.
    let mut symtab_patch: Option<(usize, Vec<u8>)> = None;
    for (si, sh) in shdrs.iter().enumerate() {
        let ty = sh.sh_type(LE);
        if (ty == SHT_RELA || ty == SHT_REL) && changed(sh.sh_info(LE) as usize).is_some() {
            return Err(bad(
                sh.sh_offset(LE),
                "relocations apply to a section holding device code",
            ));
        }
        if ty != SHT_SYMTAB {
            continue;
        }
        let syms: &[Sym64<LE>] = sh.data_as_array(LE, data).map_err(elf("symbol table"))?;
        let original = sh.data(LE, data).map_err(elf("symbol table"))?;
        let mut patched = original.to_vec();
        for (k, sym) in syms.iter().enumerate() {
            let shndx = usize::from(sym.st_shndx.get(LE).0);
            let Some(c) = changed(shndx) else {
                continue;
            };
            let old = shdr(shndx)?.sh_size(LE);
            if sym.st_value.get(LE) != 0 {
                return Err(bad(
                    sh.sh_offset(LE),
                    "a symbol points inside a section holding device code",
                ));
            }
            let size = sym.st_size.get(LE);
            if size == old && size != c.new_size {
                let mut q = *sym;
                q.st_size = U64::new(LE, c.new_size);
                let at = k.saturating_mul(SYM_SIZE);
                patched
                    .get_mut(at..at.saturating_add(SYM_SIZE))
                    .ok_or(bad(sh.sh_offset(LE), "symbol table"))?
                    .copy_from_slice(object::pod::bytes_of(&q));
            } else if size > c.new_size {
                return Err(bad(
                    sh.sh_offset(LE),
                    "a symbol is larger than the pruned section",
                ));
            }
        }
        // Relocations against symbols of the resized sections.
        let targets_changed = |sym: usize| {
            syms.get(sym)
                .is_some_and(|s| changed(usize::from(s.st_shndx.get(LE).0)).is_some())
        };
        for r in file.relocations() {
            let r = r?;
            if r.symbols != si || !targets_changed(r.symbol as usize) {
                continue;
            }
            match r.encoding {
                Encoding::Rela(at) if r.addend != Some(0) => {
                    return Err(bad(
                        at,
                        "a relocation points inside a section holding device code",
                    ));
                }
                Encoding::Rel(at) => {
                    return Err(bad(
                        at,
                        "REL relocations against device code are not handled",
                    ));
                }
                _ => {}
            }
        }
        if patched != original {
            if symtab_patch.is_some() {
                return Err(bad(sh.sh_offset(LE), "more than one symbol table"));
            }
            symtab_patch = Some((si, patched));
        }
    }

    // Removing sections renumbers those after them: allowed only when no reference
    // (sh_link, the sh_info of relocation sections, e_shstrndx, a symbol's section) names
    // the first removed section or any after it.
    if let Some(&first) = removed.first() {
        let mut highest = usize::from(h.e_shstrndx(LE).0);
        for sh in &shdrs {
            highest = highest.max(sh.sh_link(LE) as usize);
            let ty = sh.sh_type(LE);
            if ty == SHT_RELA || ty == SHT_REL || sh.sh_flags(LE).0 & SHF_INFO_LINK.0 != 0 {
                highest = highest.max(sh.sh_info(LE) as usize);
            }
            if ty == SHT_SYMTAB || ty == SHT_DYNSYM {
                let syms: &[Sym64<LE>] = sh.data_as_array(LE, data).map_err(elf("symbol table"))?;
                for sym in syms {
                    let x = sym.st_shndx.get(LE).0;
                    if x < SHN_LORESERVE {
                        highest = highest.max(usize::from(x));
                    }
                }
            }
            if ty == SHT_GROUP || ty == SHT_SYMTAB_SHNDX {
                return Err(bad(
                    sh.sh_offset(LE),
                    "section groups or extended symbol indices with bundle sections to remove",
                ));
            }
        }
        if highest >= first {
            return Err(bad(
                0,
                "a bundle section cannot be removed: it or a section after it is referenced",
            ));
        }
    }

    // Lay the sections out again, in file order.
    let mut order: Vec<usize> = (1..shdrs.len()).filter(|i| !removed.contains(i)).collect();
    order.sort_by_key(|&i| shdrs.get(i).map_or(0, |s| s.sh_offset(LE)));
    let mut last_end = 0u64;
    for &i in &order {
        let r = file_range(shdr(i)?);
        if r.end > r.start {
            if r.start < last_end {
                return Err(bad(r.start, "sections overlap in the file"));
            }
            last_end = r.end;
        }
    }
    let mut pieces = Vec::new();
    let mut new_shdrs = shdrs.clone();
    let ehsize = u64::from(h.e_ehsize(LE)).max(64);
    let mut pos = ehsize;
    for &i in &order {
        let sh = shdr(i)?;
        let align = sh.sh_addralign(LE).max(1);
        let at = pos
            .checked_next_multiple_of(align)
            .ok_or(bad(sh.sh_offset(LE), "section alignment overflows"))?;
        let new = new_shdrs
            .get_mut(i)
            .ok_or(bad(0, "section index out of range"))?;
        new.sh_offset = U64::new(LE, at);
        if sh.sh_type(LE) == SHT_NOBITS {
            continue;
        }
        pieces.push(Piece::Zeros(diff(at, pos)));
        pos = at;
        if let Some(c) = changed(i) {
            pieces.push(Piece::Unit(c.unit));
            if c.tail.end > c.tail.start {
                pieces.push(Piece::Copy(c.tail.clone()));
            }
            new.sh_size = U64::new(LE, c.new_size);
            pos = pos.saturating_add(c.new_size);
        } else if let Some((_, bytes)) = symtab_patch.as_ref().filter(|(k, _)| *k == i) {
            pos = pos.saturating_add(len64(bytes.len()));
            pieces.push(Piece::Owned(bytes.clone()));
        } else {
            let r = file_range(sh);
            pos = pos.saturating_add(diff(r.end, r.start));
            pieces.push(Piece::Copy(r));
        }
    }
    let shoff = pos
        .checked_next_multiple_of(8)
        .ok_or(bad(0, "file size overflows"))?;
    pieces.push(Piece::Zeros(diff(shoff, pos)));
    let mut table = Vec::new();
    for (i, sh) in new_shdrs.iter().enumerate() {
        if !removed.contains(&i) {
            table.extend_from_slice(object::pod::bytes_of(sh));
        }
    }
    pieces.push(Piece::Owned(table));
    let mut eh = *h;
    eh.e_shoff = U64::new(LE, shoff);
    let shnum = shdrs.len().saturating_sub(removed.len());
    eh.e_shnum = object::U16::new(
        LE,
        u16::try_from(shnum).map_err(|_| bad(60, "too many sections"))?,
    );
    let mut header = object::pod::bytes_of(&eh).to_vec();
    // Bytes of a longer ELF header than the structure, as they were.
    let ehsize = usize::try_from(ehsize).unwrap_or(64);
    if let Some(extra) = data.get(header.len()..ehsize) {
        header.extend_from_slice(extra);
    }
    header.resize(ehsize, 0);
    pieces.insert(0, Piece::Owned(header));
    Ok((
        pieces,
        format!(
            "relocatable object: {} section(s) resized, {} bundle section(s) removed, sections laid out again (symbols and relocations unchanged)",
            changes.len(),
            removed.len()
        ),
    ))
}
