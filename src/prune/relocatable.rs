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

use crate::error::{Error, Result};
use crate::host::elf::{Elf64, Encoding};

use super::pieces::Piece;
use super::plan::{Body, UnitPlan};
use super::{bad, diff, len64};

const SYM_SIZE: usize = core::mem::size_of::<Sym64<LE>>();

fn elf(what: &'static str) -> impl Fn(object::read::Error) -> Error {
    move |_| bad(0, what)
}

/// The section of a changed unit and its new contents.
struct Change {
    unit: usize,
    tail: Range<u64>,
    new_size: u64,
}

/// The file range of a section (empty for `SHT_NOBITS`).
fn file_range(sh: &SectionHeader64<LE>) -> Range<u64> {
    let off = sh.sh_offset(LE);
    let size = if sh.sh_type(LE) == SHT_NOBITS {
        0
    } else {
        sh.sh_size(LE)
    };
    off..off.saturating_add(size)
}

/// The object being laid out again and what changes in it.
struct Object<'d> {
    data: &'d [u8],
    file: Elf64<'d>,
    /// The section headers, as read.
    shdrs: Vec<SectionHeader64<LE>>,
    /// Sections of a bundled host object to remove, in index order.
    removed: Vec<usize>,
    /// The section of every changed unit (by section index).
    changes: Vec<(usize, Change)>,
}

impl Object<'_> {
    /// The header of section `i`.
    fn shdr(&self, i: usize) -> Result<&SectionHeader64<LE>> {
        self.shdrs
            .get(i)
            .ok_or(bad(0, "section index out of range"))
    }

    /// The change of section `i`, if it holds a rewritten unit.
    fn changed(&self, i: usize) -> Option<&Change> {
        self.changes.iter().find(|(j, _)| *j == i).map(|(_, c)| c)
    }
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
    let shdrs: Vec<SectionHeader64<LE>> = file.section_table().iter().copied().collect();
    let removed = removed_sections(&file, &shdrs, plans)?;
    let changes = changed_sections(data, &shdrs, plans)?;
    let obj = Object {
        data,
        file,
        shdrs,
        removed,
        changes,
    };
    let symtab_patch = patch_symbols(&obj)?;
    check_renumbering(&obj)?;
    let pieces = lay_out(&obj, symtab_patch.as_ref())?;
    Ok((
        pieces,
        format!(
            "relocatable object: {} section(s) resized, {} bundle section(s) removed, sections laid out again (symbols and relocations unchanged)",
            obj.changes.len(),
            obj.removed.len()
        ),
    ))
}

/// The `__CLANG_OFFLOAD_BUNDLE__<id>` sections of the dropped entries of a bundled host
/// object, in index order.
fn removed_sections(
    file: &Elf64<'_>,
    shdrs: &[SectionHeader64<LE>],
    plans: &[UnitPlan<'_>],
) -> Result<Vec<usize>> {
    let sections = file.section_table();
    let mut removed: Vec<usize> = Vec::new();
    for p in plans {
        if let Body::DropSections(ids) = &p.body {
            for id in ids {
                let i = shdrs
                    .iter()
                    .position(|sh| {
                        sections.section_name(LE, sh).is_ok_and(|n| {
                            n.strip_prefix(crate::raw::OBJECT_BUNDLE_PREFIX) == Some(id.as_bytes())
                        })
                    })
                    .ok_or(bad(p.range.start, "bundle section not found"))?;
                removed.push(i);
            }
        }
    }
    removed.sort_unstable();
    Ok(removed)
}

/// The section of every changed unit and its new contents; a rewritten unit must be alone
/// at the start of its section.
fn changed_sections(
    data: &[u8],
    shdrs: &[SectionHeader64<LE>],
    plans: &[UnitPlan<'_>],
) -> Result<Vec<(usize, Change)>> {
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
        let r = file_range(
            shdrs
                .get(index)
                .ok_or(bad(0, "section index out of range"))?,
        );
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
    Ok(changes)
}

/// Checks the references into the resized sections (no relocation section applies to
/// one, symbols in them are at offset 0) and returns the symbol table with the sizes of
/// those symbols updated, when one changes: (section index, new contents).
fn patch_symbols(obj: &Object<'_>) -> Result<Option<(usize, Vec<u8>)>> {
    let mut symtab_patch: Option<(usize, Vec<u8>)> = None;
    for (si, sh) in obj.shdrs.iter().enumerate() {
        let ty = sh.sh_type(LE);
        if (ty == SHT_RELA || ty == SHT_REL) && obj.changed(sh.sh_info(LE) as usize).is_some() {
            return Err(bad(
                sh.sh_offset(LE),
                "relocations apply to a section holding device code",
            ));
        }
        if ty != SHT_SYMTAB {
            continue;
        }
        let syms: &[Sym64<LE>] = sh
            .data_as_array(LE, obj.data)
            .map_err(elf("symbol table"))?;
        let original = sh.data(LE, obj.data).map_err(elf("symbol table"))?;
        let mut patched = original.to_vec();
        for (k, sym) in syms.iter().enumerate() {
            let shndx = usize::from(sym.st_shndx.get(LE).0);
            let Some(c) = obj.changed(shndx) else {
                continue;
            };
            let old = obj.shdr(shndx)?.sh_size(LE);
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
        check_relocations(obj, si, syms)?;
        if patched != original {
            if symtab_patch.is_some() {
                return Err(bad(sh.sh_offset(LE), "more than one symbol table"));
            }
            symtab_patch = Some((si, patched));
        }
    }
    Ok(symtab_patch)
}

/// Relocations against the symbols (of symbol table `si`) of the resized sections: `RELA`
/// with addend 0 only, no `REL`.
fn check_relocations(obj: &Object<'_>, si: usize, syms: &[Sym64<LE>]) -> Result<()> {
    let targets_changed = |sym: usize| {
        syms.get(sym)
            .is_some_and(|s| obj.changed(usize::from(s.st_shndx.get(LE).0)).is_some())
    };
    for r in obj.file.relocations() {
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
    Ok(())
}

/// Removing sections renumbers those after them: allowed only when no reference
/// (sh_link, the sh_info of relocation sections, e_shstrndx, a symbol's section) names
/// the first removed section or any after it.
fn check_renumbering(obj: &Object<'_>) -> Result<()> {
    let Some(&first) = obj.removed.first() else {
        return Ok(());
    };
    let mut highest = usize::from(obj.file.header().e_shstrndx(LE).0);
    for sh in &obj.shdrs {
        highest = highest.max(sh.sh_link(LE) as usize);
        let ty = sh.sh_type(LE);
        if ty == SHT_RELA || ty == SHT_REL || sh.sh_flags(LE).0 & SHF_INFO_LINK.0 != 0 {
            highest = highest.max(sh.sh_info(LE) as usize);
        }
        if ty == SHT_SYMTAB || ty == SHT_DYNSYM {
            let syms: &[Sym64<LE>] = sh
                .data_as_array(LE, obj.data)
                .map_err(elf("symbol table"))?;
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
    Ok(())
}

/// The kept sections in file order; sections must not overlap in the file.
fn file_order(obj: &Object<'_>) -> Result<Vec<usize>> {
    let mut order: Vec<usize> = (1..obj.shdrs.len())
        .filter(|i| !obj.removed.contains(i))
        .collect();
    order.sort_by_key(|&i| obj.shdrs.get(i).map_or(0, |s| s.sh_offset(LE)));
    let mut last_end = 0u64;
    for &i in &order {
        let r = file_range(obj.shdr(i)?);
        if r.end > r.start {
            if r.start < last_end {
                return Err(bad(r.start, "sections overlap in the file"));
            }
            last_end = r.end;
        }
    }
    Ok(order)
}

/// The pieces of the new file: the ELF header, the sections in file order each at its
/// alignment (resized units, the patched symbol table), the section header table last.
fn lay_out(obj: &Object<'_>, symtab_patch: Option<&(usize, Vec<u8>)>) -> Result<Vec<Piece>> {
    let order = file_order(obj)?;
    let h = obj.file.header();
    let mut pieces = Vec::new();
    let mut new_shdrs = obj.shdrs.clone();
    let ehsize = u64::from(h.e_ehsize(LE)).max(64);
    let mut pos = ehsize;
    for &i in &order {
        let sh = obj.shdr(i)?;
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
        if let Some(c) = obj.changed(i) {
            pieces.push(Piece::Unit(c.unit));
            if c.tail.end > c.tail.start {
                pieces.push(Piece::Copy(c.tail.clone()));
            }
            new.sh_size = U64::new(LE, c.new_size);
            pos = pos.saturating_add(c.new_size);
        } else if let Some((_, bytes)) = symtab_patch.filter(|(k, _)| *k == i) {
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
        if !obj.removed.contains(&i) {
            table.extend_from_slice(object::pod::bytes_of(sh));
        }
    }
    pieces.push(Piece::Owned(table));
    pieces.insert(0, Piece::Owned(elf_header(obj, shoff, ehsize)?));
    Ok(pieces)
}

/// The new ELF header (`e_shoff`, `e_shnum`), `ehsize` bytes long: the bytes of a longer
/// header than the structure as they were.
fn elf_header(obj: &Object<'_>, shoff: u64, ehsize: u64) -> Result<Vec<u8>> {
    let mut eh = *obj.file.header();
    eh.e_shoff = U64::new(LE, shoff);
    let shnum = obj.shdrs.len().saturating_sub(obj.removed.len());
    eh.e_shnum = object::U16::new(
        LE,
        u16::try_from(shnum).map_err(|_| bad(60, "too many sections"))?,
    );
    let mut header = object::pod::bytes_of(&eh).to_vec();
    let ehsize = usize::try_from(ehsize).unwrap_or(64);
    if let Some(extra) = obj.data.get(header.len()..ehsize) {
        header.extend_from_slice(extra);
    }
    header.resize(ehsize, 0);
    Ok(header)
}
