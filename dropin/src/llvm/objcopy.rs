//! What `clang-offload-bundler` does to ELF host objects through `llvm-objcopy`:
//!
//! * bundling (`-type=o` with an ELF host input) runs
//!   `llvm-objcopy --add-section=__CLANG_OFFLOAD_BUNDLE__<id>=<file>
//!   --set-section-flags=__CLANG_OFFLOAD_BUNDLE__<id>=readonly,exclude ... -- host out`;
//! * unbundling the host entry runs
//!   `llvm-objcopy --regex --remove-section=__CLANG_OFFLOAD_BUNDLE__.* -- in out`.
//!
//! `llvm-objcopy` does not patch the file: it parses it into sections, symbols and
//! relocations and writes a new file (`llvm/lib/ObjCopy/ELF/ELFObject.cpp`). This module
//! replays that for ELF files of either class and byte order (relocatable objects,
//! executables and shared objects), so the output is byte for byte the same:
//!
//! * non-allocated string tables are rebuilt with LLVM's `StringTableBuilder` layout
//!   (section names and symbol names, tail-merged, sorted by reversed name);
//! * symbols are re-emitted with locals first (a stable partition), relocations and
//!   groups re-encoded with the new symbol and section indices;
//! * sections are laid out in the order of their original offsets (new sections last),
//!   each aligned, starting after the ELF header; the section header table follows at the
//!   next multiple of the word size; gaps are zero;
//! * a section that linked to `.symtab` loses that link (`sh_link = 0`) if symbol indices
//!   changed, like `llvm-objcopy`.
//!
//! Executables and shared objects keep their segments: program headers are re-emitted,
//! sections inside a segment keep their place relative to it and their bytes come from the
//! segment. `SHT_CREL` and `SHT_SYMTAB_SHNDX` sections are refused with an error rather
//! than written differently.
//!
//! # What `object` does here, and what stays hand-written
//!
//! Reading is `object::read::elf` and encoding is `object::write::elf::Encoder` (every
//! header, symbol and relocation) and `object::write::StringTable` (whose tail-merged,
//! reverse-sorted layout is LLVM's `StringTableBuilder`'s), in the file's own class and
//! byte order: 32- and 64-bit, little- and big-endian files are all handled (the hand-written
//! reader and writer before were little-endian only; big-endian inputs were not even
//! recognised as objects).
//!
//! What stays hand-written is the model of `llvm-objcopy`'s `Object` and its layout, which
//! `object::build::elf::Builder` does not reproduce. Measured on a clang-22 x86-64 object
//! and on a gcc one, with `--add-section` of a 3000-byte payload:
//!
//! * the builder refuses `SHT_LLVM_ADDRSIG` (`.llvm_addrsig`, in every clang object):
//!   "Unsupported section type 6fff4c03";
//! * it cannot write one string table for both section and symbol names, which is what
//!   clang emits (`.strtab` is also `e_shstrndx`): ".shstrtab section is needed but not
//!   present";
//! * on the gcc object, which it can rewrite, its layout differs from `llvm-objcopy`'s in
//!   3556 of 4816 bytes: it writes non-allocated data first, then `.symtab`, `.strtab`,
//!   the relocations and `.shstrtab`, so the new section lands at 0xe8 and `.rela.text` at
//!   0xda0, where `llvm-objcopy` keeps the input's order by offset and appends new
//!   sections (0x318, 0x1e8). Its string tables and symbol table bytes were identical.
//!
//! `object::write::elf::Writer` could be driven in LLVM's order, but it keeps section names
//! and symbol names in two tables and writes sequentially, so the shared `.strtab` and
//! sections placed inside segments do not fit it; its `Encoder` is used instead, into a
//! buffer laid out here.

use std::borrow::Cow;
use std::collections::HashMap;

use object::elf;
use object::read::elf::{FileHeader, Rel as _, Rela as _, SectionHeader, Sym as _};
use object::write::elf::{
    Encoder, FileHeader as FileHeaderFields, ProgramHeader as ProgramHeaderFields,
    SectionHeader as SectionHeaderFields,
};
use object::write::{StringId, StringTable};
use object::{Endian, Endianness};

const SHT_SYMTAB: u32 = elf::SHT_SYMTAB.0;
const SHT_STRTAB: u32 = elf::SHT_STRTAB.0;
const SHT_RELA: u32 = elf::SHT_RELA.0;
const SHT_NOBITS: u32 = elf::SHT_NOBITS.0;
const SHT_REL: u32 = elf::SHT_REL.0;
const SHT_DYNSYM: u32 = elf::SHT_DYNSYM.0;
const SHT_GROUP: u32 = elf::SHT_GROUP.0;
const SHT_SYMTAB_SHNDX: u32 = elf::SHT_SYMTAB_SHNDX.0;
const SHT_CREL: u32 = 0x4000_0014;
const SHT_PROGBITS: u32 = elf::SHT_PROGBITS.0;
const SHT_NOTE: u32 = elf::SHT_NOTE.0;
const SHF_WRITE: u64 = elf::SHF_WRITE.0;
const SHF_ALLOC: u64 = elf::SHF_ALLOC.0;
const SHF_EXCLUDE: u64 = elf::SHF_EXCLUDE.0;
const SHN_LORESERVE: u16 = 0xff00;
const SHN_XINDEX: u16 = 0xffff;
const GRP_COMDAT: u32 = 1;
const STB_LOCAL: u8 = 0;

type Id = usize;

#[derive(Clone, Debug)]
struct Reloc {
    offset: u64,
    addend: i64,
    typ: u32,
    sym: Option<usize>, // symbol id
}

#[derive(Clone, Debug)]
enum Kind {
    /// Contents copied verbatim (`Section`, `OwnedDataSection`, compressed sections).
    Raw(Vec<u8>),
    /// `SHT_NOBITS`.
    NoBits,
    /// A rebuilt string table.
    StrTab,
    /// The symbol table.
    SymTab { strtab: Option<Id> },
    /// A relocation section.
    Rel {
        relocs: Vec<Reloc>,
        target: Option<Id>,
        symtab: Option<Id>,
        rela: bool,
    },
    /// An allocated relocation section (`DynamicRelocationSection`): contents verbatim,
    /// links renumbered.
    DynRel {
        data: Vec<u8>,
        dynsym: Option<Id>,
        target: Option<Id>,
    },
    /// A section group.
    Group {
        flags: u32,
        members: Vec<Id>,
        sym: Option<usize>,
        symtab: Option<Id>,
    },
}

#[derive(Clone, Debug)]
struct Section {
    id: Id,
    name: Vec<u8>,
    typ: u32,
    flags: u64,
    addr: u64,
    original_offset: u64,
    size: u64,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
    kind: Kind,
    /// `Section::LinkSection` for plain sections.
    link_section: Option<Id>,
    has_symtab_link: bool,
    /// Index into `Object::segments` of the segment that owns the section.
    parent: Option<usize>,
    // Assigned by the writer.
    index: u32,
    offset: u64,
}

/// A program header (`Segment`); the ELF header and the program header table are two
/// extra pseudo-segments at the end of `Object::segments`.
#[derive(Clone, Debug)]
struct Segment {
    typ: u32,
    flags: u32,
    original_offset: u64,
    offset: u64,
    vaddr: u64,
    paddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
    index: u32,
    parent: Option<usize>,
    contents: Vec<u8>,
}

/// `compareSegmentsByOffset`.
fn segment_before(a: &Segment, b: &Segment) -> bool {
    if a.original_offset != b.original_offset {
        return a.original_offset < b.original_offset;
    }
    if a.align != b.align {
        return a.align > b.align;
    }
    a.index < b.index
}

/// `alignTo(Value, Align, Skew)`.
/// `alignTo(Value, Align, Skew)`, in LLVM's wrapping unsigned arithmetic.
fn align_to_skew(value: u64, align: u64, skew: u64) -> u64 {
    let skew = skew % align;
    (value.wrapping_add(align).wrapping_sub(1).wrapping_sub(skew) / align)
        .wrapping_mul(align)
        .wrapping_add(skew)
}

#[derive(Clone, Debug)]
struct Symbol {
    id: usize,
    name: Vec<u8>,
    bind: u8,
    typ: u8,
    defined_in: Option<Id>,
    /// Reserved `st_shndx` (ABS, COMMON, ...) when not defined in a section.
    reserved: u16,
    value: u64,
    other: u8,
    size: u64,
}

struct Object {
    is64: bool,
    endian: Endianness,
    /// The ELF header fields `llvm-objcopy` copies (`e_version` apart: the encoder writes
    /// `EV_CURRENT`, LLVM copies the input's).
    header: FileHeaderFields,
    version: u32,
    sections: Vec<Section>,
    symbols: Vec<Symbol>,
    symtab: Option<Id>,
    shstrtab: Option<Id>,
    indices_changed: bool,
    next_id: Id,
    /// Real segments, then the ELF header and program header pseudo-segments.
    segments: Vec<Segment>,
    /// Sections removed from a segment: (offset, size) to zero in the segment data.
    removed_in_segments: Vec<(usize, u64, u64)>,
}

/// A symbol table entry, in plain integers.
struct RawSym {
    name: Vec<u8>,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

/// What `object::read::elf` gives for one file, whatever its class and byte order.
struct Raw<'a> {
    is64: bool,
    endian: Endianness,
    header: FileHeaderFields,
    version: u32,
    /// `e_shstrndx`, extended numbering resolved.
    shstrndx: u32,
    phoff: u64,
    phentsize: u16,
    /// Section headers, the null one included (none without a section header table).
    headers: Vec<SectionHeaderFields>,
    /// Contents of every section (empty for `SHT_NOBITS`), bounds checked.
    contents: Vec<&'a [u8]>,
    phdrs: Vec<ProgramHeaderFields>,
    /// With [`read_raw`]'s `full`: the symbols of the `SHT_SYMTAB` section, and the
    /// relocations of every `SHT_REL`/`SHT_RELA` section (by section index).
    symbols: Vec<RawSym>,
    relocs: Vec<Option<Vec<Reloc>>>,
}

/// A NUL-terminated string at `at` in `table`.
fn cstr(table: &[u8], at: u32) -> Result<&[u8], String> {
    let tail = table
        .get(at as usize..)
        .ok_or("string offset outside the string table")?;
    let n = tail
        .iter()
        .position(|&b| b == 0)
        .ok_or("unterminated string")?;
    Ok(&tail[..n])
}

fn oerr(what: &str) -> impl Fn(object::read::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn read_raw(elf: &[u8], full: bool) -> Result<Raw<'_>, String> {
    if !elf.starts_with(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    match elf.get(4) {
        Some(1) => read_as::<elf::FileHeader32<Endianness>>(elf, full),
        Some(2) => read_as::<elf::FileHeader64<Endianness>>(elf, full),
        c => Err(format!("invalid ELF class {}", c.copied().unwrap_or(0))),
    }
}

/// [`read_raw`] for one class (`H`): the headers, every section's contents and, with
/// `full`, the symbols and relocations.
fn read_as<H: FileHeader<Endian = Endianness>>(data: &[u8], full: bool) -> Result<Raw<'_>, String> {
    let h = H::parse(data).map_err(oerr("invalid ELF header"))?;
    let endian = h.endian().map_err(oerr("invalid ELF header"))?;
    let shoff: u64 = h.e_shoff(endian).into();
    let shentsize = usize::from(h.e_shentsize(endian));
    if shoff != 0 && shentsize != core::mem::size_of::<H::SectionHeader>() {
        return Err("unexpected section header size".into());
    }
    let shdrs = h
        .section_headers(endian, data)
        .map_err(oerr("invalid section header table"))?;
    let shstrndx = if shdrs.is_empty() {
        0
    } else {
        h.shstrndx(endian, data)
            .map_err(oerr("invalid section name string table index"))?
    };
    let (headers, contents) = read_sections::<H>(shdrs, endian, data)?;
    let phdrs = h
        .program_headers(endian, data)
        .map_err(|_| "program header goes past the end of the file".to_string())?
        .iter()
        .map(|p| ProgramHeaderFields::from_raw(endian, p))
        .collect();
    let mut raw = Raw {
        is64: h.is_type_64(),
        endian,
        header: FileHeaderFields::from_raw(endian, h),
        version: h.e_version(endian),
        shstrndx,
        phoff: h.e_phoff(endian).into(),
        phentsize: h.e_phentsize(endian),
        headers,
        contents,
        phdrs,
        symbols: Vec::new(),
        relocs: Vec::new(),
    };
    if full {
        raw.symbols = read_symbol_table::<H>(&raw, shdrs, data)?;
        raw.relocs = read_relocations::<H>(shdrs, endian, data, h.is_mips64el(endian))?;
    }
    Ok(raw)
}

/// Section headers and contents: every header in plain fields, and its contents
/// (empty for `SHT_NOBITS` and the null section), bounds checked.
type Sections<'a> = (Vec<SectionHeaderFields>, Vec<&'a [u8]>);

/// The section headers in plain fields, and every section's contents.
fn read_sections<'a, H: FileHeader<Endian = Endianness>>(
    shdrs: &[H::SectionHeader],
    endian: Endianness,
    data: &'a [u8],
) -> Result<Sections<'a>, String> {
    let mut headers = Vec::with_capacity(shdrs.len());
    let mut contents = Vec::with_capacity(shdrs.len());
    for s in shdrs {
        let typ = s.sh_type(endian).0;
        headers.push(SectionHeaderFields::from_raw(endian, s));
        contents.push(if typ == SHT_NOBITS || headers.len() == 1 {
            &[][..]
        } else {
            let (offset, size): (u64, u64) = (s.sh_offset(endian).into(), s.sh_size(endian).into());
            usize::try_from(offset)
                .ok()
                .zip(usize::try_from(size).ok())
                .and_then(|(o, n)| data.get(o..o.checked_add(n)?))
                .ok_or_else(|| format!("range {offset}+{size} is outside the file"))?
        });
    }
    Ok((headers, contents))
}

/// The symbols of the symbol table (LLVM allows one), their names from the linked
/// string table.
fn read_symbol_table<H: FileHeader<Endian = Endianness>>(
    raw: &Raw<'_>,
    shdrs: &[H::SectionHeader],
    data: &[u8],
) -> Result<Vec<RawSym>, String> {
    let endian = raw.endian;
    let mut symtabs = shdrs.iter().filter(|s| s.sh_type(endian).0 == SHT_SYMTAB);
    let Some(s) = symtabs.next() else {
        return Ok(Vec::new());
    };
    if symtabs.next().is_some() {
        return Err("found multiple SHT_SYMTAB sections".into());
    }
    let link = s.sh_link(endian) as usize;
    let names = match raw.headers.get(link) {
        Some(l) if link != 0 && l.sh_type.0 == SHT_STRTAB && l.sh_flags.0 & SHF_ALLOC == 0 => {
            raw.contents[link]
        }
        _ => return Err("symbol table link is not a string table".into()),
    };
    let syms: &[H::Sym] = s
        .data_as_array(endian, data)
        .map_err(oerr("invalid symbol table"))?;
    let mut symbols = Vec::with_capacity(syms.len());
    for sym in syms {
        let name = match sym.st_name(endian) {
            0 => Vec::new(),
            n if n as usize >= names.len() => {
                return Err("symbol name offset outside the string table".into())
            }
            n => cstr(names, n)?.to_vec(),
        };
        symbols.push(RawSym {
            name,
            info: sym.st_info().0,
            other: sym.st_other().0,
            shndx: sym.st_shndx(endian).0,
            value: sym.st_value(endian).into(),
            size: sym.st_size(endian).into(),
        });
    }
    Ok(symbols)
}

/// The relocations of every non-allocated `SHT_REL`/`SHT_RELA` section, by section
/// index (`None` for the other sections).
fn read_relocations<H: FileHeader<Endian = Endianness>>(
    shdrs: &[H::SectionHeader],
    endian: Endianness,
    data: &[u8],
    mips64el: bool,
) -> Result<Vec<Option<Vec<Reloc>>>, String> {
    let mut relocs = Vec::with_capacity(shdrs.len());
    for s in shdrs {
        relocs.push(if s.sh_flags(endian).0 & SHF_ALLOC != 0 {
            None
        } else if let Some((rels, _)) = s.rel(endian, data).map_err(oerr("invalid relocations"))? {
            Some(
                rels.iter()
                    .map(|r| Reloc {
                        offset: r.r_offset(endian).into(),
                        addend: 0,
                        typ: r.r_type(endian).0,
                        sym: Some(r.r_sym(endian) as usize).filter(|&s| s != 0),
                    })
                    .collect(),
            )
        } else if let Some((rels, _)) = s.rela(endian, data).map_err(oerr("invalid relocations"))? {
            Some(
                rels.iter()
                    .map(|r| Reloc {
                        offset: r.r_offset(endian).into(),
                        addend: r.r_addend(endian).into(),
                        typ: r.r_type(endian, mips64el).0,
                        sym: Some(r.r_sym(endian, mips64el) as usize).filter(|&s| s != 0),
                    })
                    .collect(),
            )
        } else {
            None
        });
    }
    Ok(relocs)
}

impl Raw<'_> {
    /// The section a header field's index names (`None` for 0 or out of range).
    fn section_id(&self, index: u32) -> Option<Id> {
        (index != 0 && (index as usize) < self.headers.len()).then_some(index as usize)
    }

    /// The name of section header `s` (empty without a section name table).
    fn section_name(&self, s: &SectionHeaderFields) -> Result<Vec<u8>, String> {
        if self.shstrndx == 0 {
            return Ok(Vec::new());
        }
        let t = self
            .contents
            .get(self.shstrndx as usize)
            .ok_or("invalid section name string table index")?;
        if s.sh_name as usize >= t.len() {
            return Err("section name offset outside the string table".into());
        }
        cstr(t, s.sh_name).map(<[u8]>::to_vec)
    }
}

/// A section's name and contents.
pub type NamedSection = (Vec<u8>, Vec<u8>);

/// The sections of an ELF file as `ELFObjectFile` lists them: (name, contents), in
/// section-header order without the null section. `SHT_NOBITS` sections are empty.
pub fn sections(elf: &[u8]) -> Result<Vec<NamedSection>, String> {
    let raw = read_raw(elf, false)?;
    raw.headers
        .iter()
        .zip(&raw.contents)
        .skip(1)
        .map(|(s, c)| Ok((raw.section_name(s)?, c.to_vec())))
        .collect()
}

/// The sections of an ELF file with their types: (sh_type, contents).
pub fn typed_sections(elf: &[u8]) -> Result<Vec<(u32, Vec<u8>)>, String> {
    let raw = read_raw(elf, false)?;
    Ok(raw
        .headers
        .iter()
        .zip(&raw.contents)
        .skip(1)
        .map(|(s, c)| (s.sh_type.0, c.to_vec()))
        .collect())
}

/// `sectionWithinSegment`.
fn section_within_segment(sec: &Section, seg: &Segment) -> bool {
    let size = if sec.size == 0 { 1 } else { sec.size };
    if sec.original_offset == u64::MAX {
        return false;
    }
    if sec.typ == SHT_NOBITS {
        if sec.flags & SHF_ALLOC == 0 {
            return false;
        }
        if (sec.flags & 0x400 != 0) != (seg.typ == 7) {
            return false;
        }
        return seg.vaddr <= sec.addr && seg.vaddr + seg.memsz >= sec.addr + size;
    }
    seg.original_offset <= sec.original_offset
        && seg.original_offset + seg.filesz >= sec.original_offset + size
}

/// `ELFBuilder::makeSection`: the kind of section a header gives, from its type and
/// flags (with `bytes`, its contents, for those kept verbatim).
fn make_section(s: &SectionHeaderFields, bytes: &[u8]) -> Result<Kind, String> {
    Ok(match s.sh_type.0 {
        SHT_REL | SHT_RELA if s.sh_flags.0 & SHF_ALLOC == 0 => Kind::Rel {
            relocs: Vec::new(),
            target: None,
            symtab: None,
            rela: s.sh_type.0 == SHT_RELA,
        },
        SHT_STRTAB if s.sh_flags.0 & SHF_ALLOC == 0 => Kind::StrTab,
        SHT_SYMTAB => Kind::SymTab { strtab: None },
        SHT_SYMTAB_SHNDX => return Err("SHT_SYMTAB_SHNDX sections are not supported".into()),
        SHT_CREL => return Err("SHT_CREL sections are not supported".into()),
        SHT_NOBITS => Kind::NoBits,
        SHT_REL | SHT_RELA => Kind::DynRel {
            data: bytes.to_vec(),
            dynsym: None,
            target: None,
        },
        _ => Kind::Raw(bytes.to_vec()),
    })
}

impl Object {
    /// `ELFReader::create` + `ELFBuilder::build`: the object model of `elf`.
    fn parse(elf: &[u8]) -> Result<Object, String> {
        let raw = read_raw(elf, true)?;
        if raw.shstrndx == 0 || raw.headers.is_empty() {
            return Err("ELF objects without a section name table are not supported".into());
        }
        let mut obj = Object {
            is64: raw.is64,
            endian: raw.endian,
            header: raw.header.clone(),
            version: raw.version,
            sections: Vec::new(),
            symbols: Vec::new(),
            symtab: None,
            shstrtab: None,
            indices_changed: false,
            next_id: 0,
            segments: Vec::new(),
            removed_in_segments: Vec::new(),
        };
        obj.read_section_headers(&raw)?;
        obj.next_id = raw.headers.len();
        // e_shstrndx must name a string table section.
        match obj.sections.get(raw.shstrndx as usize - 1).map(|s| &s.kind) {
            Some(Kind::StrTab) => obj.shstrtab = Some(raw.shstrndx as usize),
            _ => return Err("e_shstrndx does not reference a string table".into()),
        }
        obj.read_symbols(&raw)?;
        obj.init_sections(&raw)?;
        obj.read_program_headers(&raw, elf)?;
        Ok(obj)
    }

    /// `ELFBuilder::readSectionHeaders`: one section per header (the null one apart), of
    /// the kind [`make_section`] gives; links, relocations and group members are filled
    /// in by [`Object::init_sections`].
    fn read_section_headers(&mut self, raw: &Raw<'_>) -> Result<(), String> {
        for (i, s) in raw.headers.iter().enumerate().skip(1) {
            let kind = make_section(s, raw.contents[i])?;
            if let Kind::SymTab { .. } = kind {
                self.symtab = Some(i);
            }
            self.sections.push(Section {
                id: i,
                name: raw.section_name(s)?,
                typ: s.sh_type.0,
                flags: s.sh_flags.0,
                addr: s.sh_addr,
                original_offset: s.sh_offset,
                size: s.sh_size,
                link: s.sh_link,
                info: s.sh_info,
                align: s.sh_addralign,
                entsize: s.sh_entsize,
                kind,
                link_section: None,
                has_symtab_link: false,
                parent: None,
                index: i as u32,
                offset: s.sh_offset,
            });
        }
        Ok(())
    }

    /// `ELFBuilder::readSymbols` (`initSymbolTable`): the symbols of the symbol table,
    /// each with the section it is defined in or its reserved index.
    fn read_symbols(&mut self, raw: &Raw<'_>) -> Result<(), String> {
        let Some(st) = self.symtab else {
            return Ok(());
        };
        let strtab = raw.headers[st].sh_link as usize;
        if let Kind::SymTab { strtab: t } = &mut self.sections[st - 1].kind {
            *t = Some(strtab);
        }
        for (n, sym) in raw.symbols.iter().enumerate() {
            let (defined_in, reserved) = self.symbol_section(raw, sym.shndx)?;
            self.symbols.push(Symbol {
                id: n,
                name: sym.name.clone(),
                bind: sym.info >> 4,
                typ: sym.info & 0xf,
                defined_in,
                reserved,
                value: sym.value,
                other: sym.other,
                size: sym.size,
            });
        }
        Ok(())
    }

    /// A symbol's `st_shndx`: the section it is defined in, or the reserved index LLVM
    /// accepts (`SHN_ABS`, `SHN_COMMON`, AMDGPU's `SHN_AMDGPU_LDS`).
    fn symbol_section(&self, raw: &Raw<'_>, shndx: u16) -> Result<(Option<Id>, u16), String> {
        if shndx == SHN_XINDEX {
            Err("SHN_XINDEX symbols are not supported".into())
        } else if shndx >= SHN_LORESERVE {
            let ok = matches!(shndx, 0xfff1 | 0xfff2)
                || (self.header.e_machine == elf::EM_AMDGPU && shndx == 0xff00);
            if !ok {
                return Err(format!("symbol has unsupported section index {shndx:#x}"));
            }
            Ok((None, shndx))
        } else if shndx != 0 {
            let id = raw
                .section_id(u32::from(shndx))
                .ok_or("symbol has an invalid section index")?;
            Ok((Some(id), 0))
        } else {
            Ok((None, 0))
        }
    }

    /// `ELFBuilder::initSections`: every section's `initialize`, now that all sections
    /// and symbols exist (relocations, groups, dynamic relocations, links).
    fn init_sections(&mut self, raw: &Raw<'_>) -> Result<(), String> {
        for i in 0..self.sections.len() {
            let id = self.sections[i].id;
            let s = &raw.headers[id];
            let kind = match &self.sections[i].kind {
                Kind::Rel { rela, .. } => self.init_relocations(raw, id, *rela)?,
                _ if self.sections[i].typ == SHT_GROUP => self.init_group(raw, id)?,
                Kind::DynRel { data, .. } => self.init_dynamic_relocations(raw, s, data.clone())?,
                Kind::Raw(_) | Kind::NoBits if s.sh_link != 0 => {
                    let l = raw.section_id(s.sh_link).ok_or("section link is invalid")?;
                    if self.sections[l - 1].typ == SHT_SYMTAB {
                        self.sections[i].has_symtab_link = true;
                    } else {
                        self.sections[i].link_section = Some(l);
                    }
                    continue;
                }
                _ => continue,
            };
            self.sections[i].kind = kind;
        }
        Ok(())
    }

    /// `RelocationSection::initialize`: the linked symbol table, the target section and
    /// the relocations of section `id`, whose symbols must exist.
    fn init_relocations(&self, raw: &Raw<'_>, id: Id, rela: bool) -> Result<Kind, String> {
        let s = &raw.headers[id];
        let symtab = if s.sh_link != 0 {
            let l = raw
                .section_id(s.sh_link)
                .ok_or("relocation section link is invalid")?;
            if !matches!(self.sections[l - 1].kind, Kind::SymTab { .. }) {
                return Err("relocation section link is not a symbol table".into());
            }
            Some(l)
        } else {
            None
        };
        let target = if s.sh_info != 0 {
            Some(
                raw.section_id(s.sh_info)
                    .ok_or("relocation section info is invalid")?,
            )
        } else {
            None
        };
        let relocs = raw.relocs[id].clone().unwrap_or_default();
        for r in &relocs {
            if let Some(sym) = r.sym {
                if self.symtab.is_none() || sym >= self.symbols.len() {
                    return Err(format!("relocation references invalid symbol index {sym}"));
                }
            }
        }
        Ok(Kind::Rel {
            relocs,
            target,
            symtab,
            rela,
        })
    }

    /// `ELFBuilder::initGroupSection`: the flags, the signature symbol and the members of
    /// the group section `id`.
    fn init_group(&self, raw: &Raw<'_>, id: Id) -> Result<Kind, String> {
        let s = &raw.headers[id];
        let raw_words = raw.contents[id];
        if !s.sh_addralign.is_multiple_of(4) {
            return Err("invalid alignment of a group section".into());
        }
        if !raw_words.len().is_multiple_of(4) || raw_words.is_empty() {
            return Err("malformed group section".into());
        }
        let (sym, symtab) = if s.sh_link != 0 {
            let l = raw
                .section_id(s.sh_link)
                .ok_or("group section link is invalid")?;
            if !matches!(self.sections[l - 1].kind, Kind::SymTab { .. }) {
                return Err("group section link is not a symbol table".into());
            }
            if s.sh_info as usize >= self.symbols.len() {
                return Err("group section info is not a valid symbol index".into());
            }
            (Some(s.sh_info as usize), Some(l))
        } else {
            (None, None)
        };
        let words: Vec<u32> = raw_words
            .chunks(4)
            .map(|c| raw.endian.read_u32([c[0], c[1], c[2], c[3]]))
            .collect();
        let members = words[1..]
            .iter()
            .map(|&w| raw.section_id(w).ok_or("invalid group member index"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Kind::Group {
            flags: words[0],
            members,
            sym,
            symtab,
        })
    }

    /// `DynamicRelocationSection::initialize`: the linked dynamic symbol table and the
    /// target section; the contents stay as they are.
    fn init_dynamic_relocations(
        &self,
        raw: &Raw<'_>,
        s: &SectionHeaderFields,
        data: Vec<u8>,
    ) -> Result<Kind, String> {
        let dynsym = if s.sh_link != 0 {
            let l = raw
                .section_id(s.sh_link)
                .ok_or("relocation section link is invalid")?;
            if self.sections[l - 1].typ != SHT_DYNSYM {
                return Err("dynamic relocation section link is not a dynamic symbol table".into());
            }
            Some(l)
        } else {
            None
        };
        let target = if s.sh_info != 0 {
            Some(
                raw.section_id(s.sh_info)
                    .ok_or("relocation section info is invalid")?,
            )
        } else {
            None
        };
        Ok(Kind::DynRel {
            data,
            dynsym,
            target,
        })
    }

    /// `ELFBuilder::readProgramHeaders`: the segments, the sections each one holds, the
    /// ELF header and program header pseudo-segments, and every segment's parent.
    fn read_program_headers(&mut self, raw: &Raw<'_>, elf: &[u8]) -> Result<(), String> {
        for (i, p) in raw.phdrs.iter().enumerate() {
            let contents = usize::try_from(p.p_offset)
                .ok()
                .zip(usize::try_from(p.p_filesz).ok())
                .and_then(|(o, n)| elf.get(o..o.checked_add(n)?))
                .ok_or("program header goes past the end of the file")?
                .to_vec();
            let seg = Segment {
                typ: p.p_type.0,
                flags: p.p_flags.0,
                original_offset: p.p_offset,
                offset: p.p_offset,
                vaddr: p.p_vaddr,
                paddr: p.p_paddr,
                filesz: p.p_filesz,
                memsz: p.p_memsz,
                align: p.p_align,
                index: i as u32,
                parent: None,
                contents,
            };
            self.claim_sections(&seg);
            self.segments.push(seg);
        }
        self.add_header_segments(raw);
        self.set_parent_segments();
        Ok(())
    }

    /// The sections within `seg`, which is about to be added, get it as their parent
    /// segment unless they have one at a lower offset.
    fn claim_sections(&mut self, seg: &Segment) {
        let si = self.segments.len();
        for sec in self.sections.iter_mut() {
            if section_within_segment(sec, seg) {
                let replace = match sec.parent {
                    None => true,
                    Some(p) => self.segments[p].offset > seg.offset,
                };
                if replace {
                    sec.parent = Some(si);
                }
            }
        }
    }

    /// The ELF header (`ElfHdrSegment`) and program header (`ProgramHdrSegment`)
    /// pseudo-segments, after the real ones.
    fn add_header_segments(&mut self, raw: &Raw<'_>) {
        let n = self.segments.len() as u32;
        let word: u64 = if raw.is64 { 8 } else { 4 };
        let phnum = raw.phdrs.len() as u64;
        self.segments.push(Segment {
            typ: 0,
            flags: 0,
            original_offset: 0,
            offset: 0,
            vaddr: 0,
            paddr: 0,
            filesz: 0,
            memsz: 0,
            align: 0,
            index: n,
            parent: None,
            contents: Vec::new(),
        });
        self.segments.push(Segment {
            typ: 6,
            flags: 0,
            original_offset: raw.phoff,
            offset: raw.phoff,
            vaddr: raw.phoff,
            paddr: 0,
            filesz: u64::from(raw.phentsize) * phnum,
            memsz: u64::from(raw.phentsize) * phnum,
            align: word,
            index: n + 1,
            parent: None,
            contents: Vec::new(),
        });
    }

    /// `setParentSegment` for every segment, the ELF header and the program headers: the
    /// first real segment (in `compareSegmentsByOffset` order) that contains it.
    fn set_parent_segments(&mut self) {
        let real = self.segments.len() - 2;
        for child in 0..self.segments.len() {
            let mut parent: Option<usize> = None;
            for p in 0..real {
                if p == child {
                    continue;
                }
                let (c, q) = (&self.segments[child], &self.segments[p]);
                let overlaps = q.original_offset <= c.original_offset
                    && q.original_offset + q.filesz > c.original_offset;
                if overlaps
                    && segment_before(q, c)
                    && parent.is_none_or(|cur| segment_before(q, &self.segments[cur]))
                {
                    parent = Some(p);
                }
            }
            self.segments[child].parent = parent;
        }
    }

    fn position(&self, id: Id) -> Option<usize> {
        self.sections.iter().position(|s| s.id == id)
    }

    /// `Object::removeSections(AllowBrokenLinks = false, pred)`.
    fn remove_sections(&mut self, pred: impl Fn(&Section) -> bool) -> Result<(), String> {
        let removed = self.sections_to_remove(pred);
        if removed.is_empty() {
            return Ok(());
        }
        if self.symtab.is_some_and(|t| removed.contains(&t))
            || self.shstrtab.is_some_and(|t| removed.contains(&t))
        {
            return Err("cannot remove the symbol table or the section name table".into());
        }
        self.on_remove(&removed);
        self.remove_section_references(&removed)?;
        self.remove_symbols(&removed);
        // A removed section inside a segment is zeroed in the segment's data.
        for s in self.sections.iter().filter(|s| removed.contains(&s.id)) {
            if let Some(p) = s.parent {
                if s.typ != SHT_NOBITS && s.size != 0 {
                    let rel = s.original_offset - self.segments[p].original_offset;
                    self.removed_in_segments.push((p, rel, s.size));
                }
            }
        }
        self.sections.retain(|s| !removed.contains(&s.id));
        Ok(())
    }

    /// The sections `pred` removes, with the relocation sections of removed sections and
    /// the groups whose members all go (as `replaceAndRemoveSections` extends the
    /// predicate), in section order.
    fn sections_to_remove(&self, pred: impl Fn(&Section) -> bool) -> Vec<Id> {
        let removed_ids: Vec<Id> = self
            .sections
            .iter()
            .filter(|s| pred(s))
            .map(|s| s.id)
            .collect();
        let is_removed = |id: Id| removed_ids.contains(&id);
        self.sections
            .iter()
            .filter(|s| {
                pred(s)
                    || match &s.kind {
                        Kind::Rel {
                            target: Some(t), ..
                        }
                        | Kind::DynRel {
                            target: Some(t), ..
                        } => is_removed(*t),
                        Kind::Group { members, .. } => members.iter().all(|m| is_removed(*m)),
                        _ => false,
                    }
            })
            .map(|s| s.id)
            .collect()
    }

    /// `GroupSection::onRemove`: a removed group drops `SHF_GROUP` from its members.
    fn on_remove(&mut self, removed: &[Id]) {
        for s in self
            .sections
            .clone()
            .iter()
            .filter(|s| removed.contains(&s.id))
        {
            if let Kind::Group { members, .. } = &s.kind {
                for m in members {
                    if let Some(p) = self.position(*m) {
                        self.sections[p].flags &= !0x200;
                    }
                }
            }
        }
    }

    /// `removeSectionReferences` on the sections that stay: a relocation against a
    /// symbol of a removed section, or a link to a removed section, is an error; groups
    /// forget removed members.
    fn remove_section_references(&mut self, removed: &[Id]) -> Result<(), String> {
        for s in self
            .sections
            .iter_mut()
            .filter(|s| !removed.contains(&s.id))
        {
            match &mut s.kind {
                Kind::Rel { relocs, .. } => {
                    for r in relocs.iter() {
                        if let Some(sym) = r.sym {
                            if self
                                .symbols
                                .iter()
                                .find(|x| x.id == sym)
                                .and_then(|x| x.defined_in)
                                .is_some_and(|d| removed.contains(&d))
                            {
                                return Err(
                                    "a removed section is referenced by a relocation".into()
                                );
                            }
                        }
                    }
                }
                Kind::Group { members, .. } => members.retain(|m| !removed.contains(m)),
                _ => {
                    if s.link_section.is_some_and(|l| removed.contains(&l)) {
                        return Err(format!(
                            "section is referenced by the section '{}'",
                            String::from_utf8_lossy(&s.name)
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// `SymbolTableSection::removeSectionReferences` → `removeSymbols`: the symbols
    /// defined in removed sections go (the null symbol stays).
    fn remove_symbols(&mut self, removed: &[Id]) {
        if self.symtab.is_none() {
            return;
        }
        let before = self.symbols.len();
        let first = self.symbols.first().cloned();
        let mut kept: Vec<Symbol> = first.into_iter().collect();
        kept.extend(
            self.symbols
                .iter()
                .skip(1)
                .filter(|s| !s.defined_in.is_some_and(|d| removed.contains(&d)))
                .cloned(),
        );
        if kept.len() < before {
            self.indices_changed = true;
        }
        self.symbols = kept;
    }

    /// `updateAndRemoveSymbols` with no symbol options: `updateSymbols` stably partitions
    /// the symbols, locals first, and renumbers them.
    fn partition_symbols(&mut self) {
        if self.symtab.is_none() {
            return;
        }
        let before: Vec<usize> = self.symbols.iter().map(|s| s.id).collect();
        let (mut locals, globals): (Vec<Symbol>, Vec<Symbol>) =
            self.symbols.drain(..).partition(|s| s.bind == STB_LOCAL);
        locals.extend(globals);
        self.symbols = locals;
        if self.symbols.iter().map(|s| s.id).ne(before) {
            self.indices_changed = true;
        }
    }

    fn add_section(&mut self, name: &[u8], data: &[u8]) {
        let typ = if name.starts_with(b".note") && name != b".note.GNU-stack" {
            SHT_NOTE
        } else {
            SHT_PROGBITS
        };
        let id = self.next_id;
        self.next_id += 1;
        self.sections.push(Section {
            id,
            name: name.to_vec(),
            typ,
            flags: 0,
            addr: 0,
            original_offset: u64::MAX,
            size: data.len() as u64,
            link: 0,
            info: 0,
            align: 1,
            entsize: 0,
            kind: Kind::Raw(data.to_vec()),
            link_section: None,
            has_symtab_link: false,
            parent: None,
            index: 0,
            offset: 0,
        });
    }

    /// `--set-section-flags=NAME=readonly,exclude`.
    fn set_readonly_exclude(&mut self, name: &[u8]) {
        // getSectionFlagsPreserveMask keeps COMPRESSED, GROUP, LINK_ORDER, TLS, INFO_LINK
        // and the OS/processor bits other than EXCLUDE.
        const PRESERVE: u64 =
            (0x800 | 0x200 | 0x80 | 0x0ff0_0000 | 0xf000_0000 | 0x400 | 0x40) & !SHF_EXCLUDE;
        for s in self.sections.iter_mut().filter(|s| s.name == name) {
            let new = SHF_EXCLUDE & !SHF_WRITE;
            s.flags = (s.flags & PRESERVE) | (new & !PRESERVE);
            if s.typ == SHT_NOBITS && s.flags & SHF_ALLOC == 0 {
                s.typ = SHT_PROGBITS;
            }
        }
    }

    /// `ELFWriter::finalize` + `write`.
    fn write(mut self) -> Result<Vec<u8>, String> {
        if self.sections.len() + 1 >= usize::from(SHN_LORESERVE) {
            return Err("objects with 65280 or more sections are not supported".into());
        }
        self.remove_unneeded_sections();
        self.relink_symbol_table();
        // Indices (layoutSections numbers from 1 in order).
        for (i, s) in self.sections.iter_mut().enumerate() {
            s.index = (i + 1) as u32;
        }
        self.size_sections();
        let section_names: Vec<Vec<u8>> = self.sections.iter().map(|s| s.name.clone()).collect();
        let symbol_names: Vec<Vec<u8>> = self.symbols.iter().map(|s| s.name.clone()).collect();
        let encoder = Encoder::new(self.endian, self.is64, self.header.e_machine);
        let strings = self.string_tables(encoder, &section_names, &symbol_names)?;
        let end = self.assign_offsets()?;
        let shoff = end
            .checked_next_multiple_of(self.word_size())
            .ok_or("file size overflows")?;
        let mut out = self.allocate_output(shoff)?;
        self.write_segment_data(&mut out);
        let writer = Writer::new(&self, encoder, &strings, shoff);
        for s in &self.sections {
            writer.write_section(&mut out, s)?;
        }
        writer.write_file_header(&mut out)?;
        writer.write_program_headers(&mut out)?;
        Ok(out)
    }

    /// `sizeof(Elf_Addr)`: 8 or 4.
    fn word_size(&self) -> u64 {
        if self.is64 {
            8
        } else {
            4
        }
    }

    /// `sizeof(Elf_Shdr)`: 64 or 40.
    fn section_header_size(&self) -> u64 {
        if self.is64 {
            64
        } else {
            40
        }
    }

    /// The string table linked from the symbol table `st`.
    fn symtab_strtab(&self, st: Id) -> Option<Id> {
        self.sections
            .iter()
            .find(|s| s.id == st)
            .and_then(|s| match s.kind {
                Kind::SymTab { strtab } => strtab,
                _ => None,
            })
    }

    /// `removeUnneededSections`: an empty symbol table of a non-relocatable file goes,
    /// with its string table unless that also names the sections.
    fn remove_unneeded_sections(&mut self) {
        if self.header.e_type != elf::ET_REL && self.symbols.len() == 1 {
            if let Some(st) = self.symtab.take() {
                let strtab = self.symtab_strtab(st).filter(|t| Some(*t) != self.shstrtab);
                self.sections.retain(|s| s.id != st && Some(s.id) != strtab);
            }
        }
    }

    /// Sections that linked to the symbol table link to it again, unless symbol indices
    /// changed (then their `sh_link` is 0, as `llvm-objcopy` leaves it).
    fn relink_symbol_table(&mut self) {
        if let Some(st) = self.symtab {
            if !self.indices_changed {
                for s in self.sections.iter_mut() {
                    if s.has_symtab_link {
                        s.link_section = Some(st);
                    }
                }
            }
        }
    }

    /// `ELFSectionSizer`: the sizes, entry sizes and alignments of the symbol table, the
    /// relocation sections and the groups.
    fn size_sections(&mut self) {
        let is64 = self.is64;
        let word = self.word_size();
        let nsyms = self.symbols.len() as u64;
        for s in self.sections.iter_mut() {
            match &s.kind {
                Kind::SymTab { .. } => {
                    s.entsize = if is64 { 24 } else { 16 };
                    s.size = nsyms * s.entsize;
                    s.align = word;
                }
                Kind::Rel { relocs, rela, .. } => {
                    s.entsize = match (is64, *rela) {
                        (true, true) => 24,
                        (true, false) => 16,
                        (false, true) => 12,
                        (false, false) => 8,
                    };
                    s.size = relocs.len() as u64 * s.entsize;
                    s.align = word;
                }
                Kind::Group { members, .. } => s.size = 4 + 4 * members.len() as u64,
                _ => {}
            }
        }
    }

    /// The string tables rebuilt (`StringTableBuilder`), and their sizes set: section
    /// names (`section_names`) go into `e_shstrndx`'s table, symbol names
    /// (`symbol_names`) into the symbol table's.
    fn string_tables<'n>(
        &mut self,
        encoder: Encoder<Endianness>,
        section_names: &'n [Vec<u8>],
        symbol_names: &'n [Vec<u8>],
    ) -> Result<StringTables<'n>, String> {
        let symbols = self.symtab.and_then(|st| self.symtab_strtab(st));
        let mut tables: HashMap<Id, Strings<'n>> = HashMap::new();
        for s in self
            .sections
            .iter()
            .filter(|s| matches!(s.kind, Kind::StrTab))
        {
            let mut t = Strings::default();
            if Some(s.id) == self.shstrtab {
                section_names.iter().for_each(|n| t.add(n));
            }
            if Some(s.id) == symbols {
                symbol_names.iter().for_each(|n| t.add(n));
            }
            t.finish(encoder)?;
            tables.insert(s.id, t);
        }
        for s in self.sections.iter_mut() {
            if let Some(f) = tables.get(&s.id) {
                s.size = f.data.len() as u64;
            }
        }
        Ok(StringTables {
            tables,
            symbols,
            sections: self.shstrtab,
        })
    }

    /// `assignOffsets`: the ELF header pseudo-segment set up, the segments laid out, then
    /// the sections. Returns the end of the laid-out data.
    fn assign_offsets(&mut self) -> Result<u64, String> {
        self.init_ehdr_segment();
        let end = self.layout_segments();
        self.layout_sections(end)
    }

    /// `ELFWriter::initEhdrSegment`: the ELF header pseudo-segment covers the header.
    fn init_ehdr_segment(&mut self) {
        let ehdr_size: u64 = if self.is64 { 64 } else { 52 };
        let nseg = self.segments.len();
        if nseg >= 2 {
            let e = &mut self.segments[nseg - 2];
            e.typ = 6;
            e.flags = 0;
            e.vaddr = 0;
            e.paddr = 0;
            e.filesz = ehdr_size;
            e.memsz = ehdr_size;
            e.align = 0;
        }
    }

    /// `layoutSegments` (after `orderSegments`): segments in `compareSegmentsByOffset`
    /// order, each at its parent's relative position or aligned after the previous one.
    /// Returns the end of the last one.
    fn layout_segments(&mut self) -> u64 {
        let mut seg_order: Vec<usize> = (0..self.segments.len()).collect();
        seg_order.sort_by(|&a, &b| {
            if segment_before(&self.segments[a], &self.segments[b]) {
                std::cmp::Ordering::Less
            } else if segment_before(&self.segments[b], &self.segments[a]) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        let mut offset = 0u64;
        for si in seg_order {
            let seg = &self.segments[si];
            let new_offset = match seg.parent {
                Some(p) => {
                    let parent = &self.segments[p];
                    parent
                        .offset
                        .wrapping_add(seg.original_offset.wrapping_sub(parent.original_offset))
                }
                None => align_to_skew(offset, seg.align.max(1), seg.vaddr),
            };
            self.segments[si].offset = new_offset;
            offset = offset.max(new_offset.wrapping_add(self.segments[si].filesz));
        }
        offset
    }

    /// `layoutSections`: the sections that are in a segment keep their place in it, the
    /// others follow `offset` by original offset, each aligned. Returns the end.
    fn layout_sections(&mut self, mut offset: u64) -> Result<u64, String> {
        let mut order: Vec<usize> = Vec::new();
        for i in 0..self.sections.len() {
            match self.sections[i].parent {
                Some(p) => {
                    let seg = &self.segments[p];
                    self.sections[i].offset = seg.offset.wrapping_add(
                        self.sections[i]
                            .original_offset
                            .wrapping_sub(seg.original_offset),
                    );
                }
                None => order.push(i),
            }
        }
        order.sort_by_key(|&i| self.sections[i].original_offset);
        for i in order {
            let s = &mut self.sections[i];
            let a = s.align.max(1);
            offset = offset
                .checked_add(a - 1)
                .map(|v| v / a * a)
                .ok_or("section alignment overflows")?;
            s.offset = offset;
            if s.typ != SHT_NOBITS {
                offset = offset.checked_add(s.size).ok_or("file size overflows")?;
            }
        }
        Ok(offset)
    }

    /// The output, zeroed: the laid-out data and the section header table at `shoff`.
    fn allocate_output(&self, shoff: u64) -> Result<Vec<u8>, String> {
        let total = (self.sections.len() as u64 + 1)
            .checked_mul(self.section_header_size())
            .and_then(|t| t.checked_add(shoff))
            .ok_or("file size overflows")?;
        // Alignments and offsets come from the input; a corrupt one could ask for an
        // absurd file. Allow generous padding, refuse the rest instead of allocating it.
        let content: u64 = self
            .sections
            .iter()
            .filter(|s| s.typ != SHT_NOBITS)
            .map(|s| s.size)
            .chain(self.segments.iter().map(|s| s.filesz))
            .fold(0u64, u64::saturating_add);
        let limit = content.saturating_mul(2).saturating_add(64 << 20);
        if total > limit {
            return Err(format!(
                "the output would be {total} bytes for {content} bytes of contents (corrupt alignment or offsets?)"
            ));
        }
        let len = usize::try_from(total).map_err(|_| "output too large")?;
        let mut out = Vec::new();
        out.try_reserve_exact(len)
            .map_err(|_| format!("cannot allocate {total} bytes for the output"))?;
        out.resize(len, 0);
        Ok(out)
    }

    /// `writeSegmentData`: the original bytes of every segment, then zeros over removed
    /// sections that were inside one.
    fn write_segment_data(&self, out: &mut [u8]) {
        let real_segments = self.segments.len().saturating_sub(2);
        for seg in &self.segments[..real_segments] {
            let n = (seg.filesz as usize).min(seg.contents.len());
            let at = seg.offset as usize;
            if let Some(dst) = out.get_mut(at..at + n) {
                dst.copy_from_slice(&seg.contents[..n]);
            }
        }
        for &(p, rel, size) in &self.removed_in_segments {
            let at = (self.segments[p].offset + rel) as usize;
            if let Some(dst) = out.get_mut(at..at + size as usize) {
                dst.fill(0);
            }
        }
    }
}

/// The rebuilt string tables of an object being written, by section id.
struct StringTables<'a> {
    tables: HashMap<Id, Strings<'a>>,
    /// The table of the symbol names.
    symbols: Option<Id>,
    /// The table of the section names (`e_shstrndx`).
    sections: Option<Id>,
}

impl StringTables<'_> {
    /// `st_name` of a symbol named `name`.
    fn symbol_name(&self, name: &[u8]) -> u32 {
        self.symbols
            .and_then(|t| self.tables.get(&t))
            .map_or(0, |f| f.offset(name))
    }

    /// `sh_name` of a section named `name`.
    fn section_name(&self, name: &[u8]) -> u32 {
        self.sections
            .and_then(|t| self.tables.get(&t))
            .map_or(0, |f| f.offset(name))
    }
}

/// Copies `bytes` into `out` at `at`, or fails if they do not fit.
fn put(out: &mut [u8], at: u64, bytes: &[u8]) -> Result<(), String> {
    usize::try_from(at)
        .ok()
        .and_then(|a| out.get_mut(a..a.checked_add(bytes.len())?))
        .map(|dst| dst.copy_from_slice(bytes))
        .ok_or_else(|| "section data lies outside the output (corrupt offsets?)".to_string())
}

/// A section's contents as written (`None` for none) and its renumbered `sh_link` and
/// `sh_info`.
type Body<'a> = (Option<Cow<'a, [u8]>>, u32, u32);

/// `ELFWriter`'s `SectionWriter` and header writers, over a laid-out object: the
/// encoder, the new section and symbol indices, the string tables and the section header
/// table's offset.
struct Writer<'a> {
    obj: &'a Object,
    encoder: Encoder<Endianness>,
    strings: &'a StringTables<'a>,
    /// New section index by section id.
    section_index: HashMap<Id, u32>,
    /// New symbol index by symbol id.
    symbol_index: HashMap<usize, u32>,
    /// The index of the last local symbol.
    max_local: u32,
    shoff: u64,
}

impl<'a> Writer<'a> {
    fn new(
        obj: &'a Object,
        encoder: Encoder<Endianness>,
        strings: &'a StringTables<'a>,
        shoff: u64,
    ) -> Self {
        let max_local = obj
            .symbols
            .iter()
            .enumerate()
            .filter(|(_, s)| s.bind == STB_LOCAL)
            .map(|(i, _)| i as u32)
            .max()
            .unwrap_or(0);
        Writer {
            obj,
            encoder,
            strings,
            section_index: obj.sections.iter().map(|s| (s.id, s.index)).collect(),
            symbol_index: (obj.symbols.iter().enumerate())
                .map(|(i, s)| (s.id, i as u32))
                .collect(),
            max_local,
            shoff,
        }
    }

    /// The new index of section `id` (0 if it was removed).
    fn index(&self, id: &Id) -> u32 {
        self.section_index.get(id).copied().unwrap_or(0)
    }

    /// The new index of an optional linked section (0 for none).
    fn link(&self, id: &Option<Id>) -> u32 {
        id.as_ref().map_or(0, |i| self.index(i))
    }

    /// One section: its contents (unless it is inside a segment, whose bytes were written
    /// already) and its section header.
    fn write_section(&self, out: &mut [u8], s: &Section) -> Result<(), String> {
        let (data, link, info) = self.section_body(s)?;
        if let Some(data) = data.filter(|_| s.parent.is_none()) {
            put(out, s.offset, &data)?;
        }
        let mut h = Vec::new();
        self.encoder.section_header(
            &mut h,
            &object::write::elf::SectionHeader {
                sh_name: self.strings.section_name(&s.name),
                sh_type: elf::SectionType(s.typ),
                sh_flags: elf::SectionFlags(s.flags),
                sh_addr: s.addr,
                sh_offset: s.offset,
                sh_size: s.size,
                sh_link: link,
                sh_info: info,
                sh_addralign: s.align,
                sh_entsize: s.entsize,
            },
        );
        let at = self.shoff + u64::from(s.index) * self.obj.section_header_size();
        put(out, at, &h)
    }

    /// A section's contents, `sh_link` and `sh_info` as written (each kind's
    /// `writeSection`).
    fn section_body<'s>(&'s self, s: &'s Section) -> Result<Body<'s>, String> {
        let target = |t: &Option<Id>| t.as_ref().map_or(s.info, |t| self.index(t));
        Ok(match &s.kind {
            Kind::Raw(d) => (Some(Cow::Borrowed(d)), self.link(&s.link_section), s.info),
            Kind::DynRel {
                data,
                dynsym,
                target: t,
            } => (Some(Cow::Borrowed(data)), self.link(dynsym), target(t)),
            Kind::NoBits => (None, self.link(&s.link_section), s.info),
            Kind::StrTab => {
                let data = self.strings.tables.get(&s.id);
                (data.map(|f| Cow::Borrowed(&f.data[..])), s.link, s.info)
            }
            Kind::SymTab { strtab } => {
                let data = self.symbol_table()?;
                (
                    Some(Cow::Owned(data)),
                    self.link(strtab),
                    self.max_local + 1,
                )
            }
            Kind::Rel {
                relocs,
                target: t,
                symtab,
                rela,
            } => {
                let data = self.relocations(relocs, *rela);
                (Some(Cow::Owned(data)), self.link(symtab), target(t))
            }
            Kind::Group {
                flags,
                members,
                sym,
                symtab,
            } => {
                let (data, info) = self.group(*flags, members, *sym);
                (Some(Cow::Owned(data)), self.link(symtab), info)
            }
        })
    }

    /// `SymbolTableSection`'s entries, with the new section indices and name offsets.
    fn symbol_table(&self) -> Result<Vec<u8>, String> {
        let mut e = Vec::new();
        for sym in &self.obj.symbols {
            let shndx = match sym.defined_in {
                Some(d) => *self
                    .section_index
                    .get(&d)
                    .ok_or("symbol defined in a removed section")?
                    as u16,
                None => sym.reserved,
            };
            self.encoder.symbol(
                &mut e,
                &object::write::elf::Sym {
                    section: None,
                    st_name: self.strings.symbol_name(&sym.name),
                    st_info: elf::SymbolInfo((sym.bind << 4) | (sym.typ & 0xf)),
                    st_other: elf::SymbolOther(sym.other),
                    st_shndx: elf::SymbolSection(shndx),
                    st_value: sym.value,
                    st_size: sym.size,
                },
            );
        }
        Ok(e)
    }

    /// `RelocationSection`'s entries, with the new symbol indices.
    fn relocations(&self, relocs: &[Reloc], rela: bool) -> Vec<u8> {
        let mut e = Vec::new();
        for r in relocs {
            let sym = r
                .sym
                .and_then(|id| self.symbol_index.get(&id).copied())
                .unwrap_or(0);
            self.encoder.relocation(
                &mut e,
                rela,
                &object::write::elf::Rel {
                    r_offset: r.offset,
                    r_sym: sym,
                    r_type: elf::RelocationType(r.typ),
                    r_addend: r.addend,
                },
            );
        }
        e
    }

    /// `GroupSection`'s words (flags, then the new member indices) and its `sh_info`
    /// (the signature symbol's new index). A group whose signature became local loses
    /// `GRP_COMDAT`.
    fn group(&self, flags: u32, members: &[Id], sym: Option<usize>) -> (Vec<u8>, u32) {
        let symbols = &self.obj.symbols;
        let mut flags = flags;
        let sym_entry = sym.and_then(|id| symbols.iter().position(|x| x.id == id));
        if flags & GRP_COMDAT != 0 && sym_entry.is_some_and(|p| symbols[p].bind == STB_LOCAL) {
            flags &= !GRP_COMDAT;
        }
        let endian = self.obj.endian;
        let mut e = endian.write_u32(flags).to_vec();
        for m in members {
            e.extend_from_slice(&endian.write_u32(self.index(m)));
        }
        (e, sym_entry.map_or(0, |p| p as u32))
    }

    /// `writeEhdr`: the ELF header, with the input's `e_version`.
    fn write_file_header(&self, out: &mut [u8]) -> Result<(), String> {
        let obj = self.obj;
        let phnum = obj.segments.len().saturating_sub(2);
        let mut e = Vec::new();
        self.encoder
            .file_header(
                &mut e,
                &obj.header,
                &object::write::elf::FileHeaderLayout {
                    e_phoff: self.phoff(),
                    segment_num: phnum as u32,
                    e_shoff: self.shoff,
                    section_num: obj.sections.len() as u32 + 1,
                    shstrtab_index: obj
                        .shstrtab
                        .and_then(|t| self.section_index.get(&t).copied())
                        .unwrap_or(0),
                },
            )
            .map_err(|e| format!("cannot write the ELF header: {e}"))?;
        // The encoder writes EV_CURRENT; llvm-objcopy copies the input's e_version.
        if let Some(v) = e.get_mut(20..24) {
            v.copy_from_slice(&obj.endian.write_u32(obj.version));
        }
        put(out, 0, &e)
    }

    /// `e_phoff`: where the program header pseudo-segment was laid out (0 without
    /// program headers).
    fn phoff(&self) -> u64 {
        let nseg = self.obj.segments.len();
        if nseg.saturating_sub(2) != 0 {
            self.obj.segments[nseg - 1].offset
        } else {
            0
        }
    }

    /// `writePhdrs`: the program headers of the real segments.
    fn write_program_headers(&self, out: &mut [u8]) -> Result<(), String> {
        let phnum = self.obj.segments.len().saturating_sub(2);
        let phoff = self.phoff();
        let phentsize = self.encoder.program_header_size();
        for seg in &self.obj.segments[..phnum] {
            let mut ph = Vec::new();
            self.encoder.program_header(
                &mut ph,
                &object::write::elf::ProgramHeader {
                    p_type: elf::ProgramType(seg.typ),
                    p_flags: elf::ProgramFlags(seg.flags),
                    p_offset: seg.offset,
                    p_vaddr: seg.vaddr,
                    p_paddr: seg.paddr,
                    p_filesz: seg.filesz,
                    p_memsz: seg.memsz,
                    p_align: seg.align,
                },
            );
            put(out, phoff + u64::from(seg.index) * phentsize, &ph)?;
        }
        Ok(())
    }
}

/// A string table built with `object::write::StringTable`, whose layout is LLVM's
/// `StringTableBuilder`'s for ELF (a leading NUL, then the strings sorted by their reversed
/// bytes, each suffix of the one before it merged into it). The empty string is at 0.
#[derive(Default)]
struct Strings<'a> {
    table: StringTable<'a>,
    ids: std::collections::HashMap<&'a [u8], StringId>,
    data: Vec<u8>,
}

impl<'a> Strings<'a> {
    fn add(&mut self, s: &'a [u8]) {
        if !s.is_empty() && !self.ids.contains_key(s) {
            let id = self.table.add(s);
            self.ids.insert(s, id);
        }
    }

    /// Lays the table out (offsets are known from here on).
    fn finish(&mut self, encoder: Encoder<Endianness>) -> Result<(), String> {
        encoder
            .strtab(&mut self.data, &mut self.table)
            .map_err(|e| format!("cannot write a string table: {e}"))?;
        Ok(())
    }

    fn offset(&self, s: &[u8]) -> u32 {
        self.ids.get(s).map_or(0, |&id| self.table.get_offset(id))
    }
}

/// `llvm-objcopy --add-section=N=F --set-section-flags=N=readonly,exclude ...` on `host`.
pub fn add_sections(host: &[u8], sections: &[NamedSection]) -> Result<Vec<u8>, String> {
    let mut obj = Object::parse(host)?;
    obj.remove_sections(|_| false)?;
    obj.partition_symbols();
    for (name, data) in sections {
        obj.add_section(name, data);
    }
    for (name, _) in sections {
        obj.set_readonly_exclude(name);
    }
    obj.write()
}

/// `llvm-objcopy --regex --remove-section=__CLANG_OFFLOAD_BUNDLE__.*` on `elf`.
pub fn remove_offload_sections(elf: &[u8]) -> Result<Vec<u8>, String> {
    let mut obj = Object::parse(elf)?;
    obj.remove_sections(|s| s.name.starts_with(b"__CLANG_OFFLOAD_BUNDLE__"))?;
    obj.partition_symbols();
    obj.write()
}
