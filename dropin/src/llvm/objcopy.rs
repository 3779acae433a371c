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
//! replays that for relocatable little-endian ELF files (32- and 64-bit, no program
//! headers) — the only host inputs the bundler sees in practice — so the output is byte
//! for byte the same:
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
//! segment. Big-endian files, `SHT_CREL` and `SHT_SYMTAB_SHNDX` sections are refused with
//! an error rather than written differently.

use offload_image::write::strtab::{FinalStringTable, StringTable};

const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_RELA: u32 = 4;
const SHT_NOBITS: u32 = 8;
const SHT_REL: u32 = 9;
const SHT_DYNSYM: u32 = 11;
const SHT_GROUP: u32 = 17;
const SHT_SYMTAB_SHNDX: u32 = 18;
const SHT_CREL: u32 = 0x4000_0014;
const SHT_PROGBITS: u32 = 1;
const SHF_WRITE: u64 = 0x1;
const SHF_ALLOC: u64 = 0x2;
const SHF_EXCLUDE: u64 = 0x8000_0000;
const SHN_LORESERVE: u16 = 0xff00;
const SHN_XINDEX: u16 = 0xffff;
const GRP_COMDAT: u32 = 1;
const STB_LOCAL: u8 = 0;

type Id = usize;

#[derive(Clone, Debug)]
struct Reloc {
    offset: u64,
    addend: u64,
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
    osabi: u8,
    abiversion: u8,
    e_type: u16,
    machine: u16,
    version: u32,
    entry: u64,
    flags: u32,
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

struct Reader<'a> {
    data: &'a [u8],
}

impl Reader<'_> {
    fn bytes(&self, at: u64, n: u64) -> Result<&[u8], String> {
        let s = usize::try_from(at).map_err(|_| "offset too large")?;
        let e = usize::try_from(at.checked_add(n).ok_or("offset overflows")?)
            .map_err(|_| "offset too large")?;
        self.data
            .get(s..e)
            .ok_or_else(|| format!("range {at}+{n} is outside the file"))
    }
    fn u8(&self, at: u64) -> Result<u8, String> {
        Ok(self.bytes(at, 1)?[0])
    }
    fn u16(&self, at: u64) -> Result<u16, String> {
        let b = self.bytes(at, 2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&self, at: u64) -> Result<u32, String> {
        let b = self.bytes(at, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&self, at: u64) -> Result<u64, String> {
        let b = self.bytes(at, 8)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| "short read")?))
    }
    /// A word (u32 in ELF32, u64 in ELF64).
    fn word(&self, at: u64, is64: bool) -> Result<u64, String> {
        if is64 {
            self.u64(at)
        } else {
            self.u32(at).map(u64::from)
        }
    }
    fn cstr(&self, at: u64) -> Result<&[u8], String> {
        let tail = self
            .data
            .get(usize::try_from(at).map_err(|_| "offset too large")?..)
            .ok_or("string offset outside the file")?;
        let n = tail
            .iter()
            .position(|&b| b == 0)
            .ok_or("unterminated string")?;
        Ok(&tail[..n])
    }
}

/// Raw section header fields.
struct Shdr {
    name: u32,
    typ: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
}

struct Header {
    is64: bool,
    shoff: u64,
    shnum: u64,
    shstrndx: u32,
    phoff: u64,
    phnum: u16,
    phentsize: u16,
}

fn header(r: &Reader<'_>) -> Result<Header, String> {
    if !r.data.starts_with(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    let is64 = match r.u8(4)? {
        1 => false,
        2 => true,
        c => return Err(format!("invalid ELF class {c}")),
    };
    if r.u8(5)? != 1 {
        return Err("big-endian ELF files are not supported".into());
    }
    let (phoff, phentsize) = if is64 {
        (r.u64(0x20)?, r.u16(0x36)?)
    } else {
        (u64::from(r.u32(0x1c)?), r.u16(0x2a)?)
    };
    let (shoff, phnum, shentsize, mut shnum, mut shstrndx) = if is64 {
        (
            r.u64(0x28)?,
            r.u16(0x38)?,
            r.u16(0x3a)?,
            u64::from(r.u16(0x3c)?),
            u32::from(r.u16(0x3e)?),
        )
    } else {
        (
            u64::from(r.u32(0x20)?),
            r.u16(0x2c)?,
            r.u16(0x2e)?,
            u64::from(r.u16(0x30)?),
            u32::from(r.u16(0x32)?),
        )
    };
    let want = if is64 { 64 } else { 40 };
    if shoff != 0 && usize::from(shentsize) != want {
        return Err("unexpected section header size".into());
    }
    if shoff != 0 && (shnum == 0 || shstrndx == u32::from(SHN_XINDEX)) {
        // Extended numbering: the real values live in section header 0.
        let s0 = shdr(r, shoff, is64)?;
        if shnum == 0 {
            shnum = s0.size;
        }
        if shstrndx == u32::from(SHN_XINDEX) {
            shstrndx = s0.link;
        }
    }
    Ok(Header {
        is64,
        shoff,
        shnum: if shoff == 0 { 0 } else { shnum },
        shstrndx,
        phoff,
        phnum,
        phentsize,
    })
}

fn shdr(r: &Reader<'_>, at: u64, is64: bool) -> Result<Shdr, String> {
    Ok(if is64 {
        Shdr {
            name: r.u32(at)?,
            typ: r.u32(at.wrapping_add(4))?,
            flags: r.u64(at.wrapping_add(8))?,
            addr: r.u64(at.wrapping_add(16))?,
            offset: r.u64(at.wrapping_add(24))?,
            size: r.u64(at.wrapping_add(32))?,
            link: r.u32(at.wrapping_add(40))?,
            info: r.u32(at.wrapping_add(44))?,
            align: r.u64(at.wrapping_add(48))?,
            entsize: r.u64(at.wrapping_add(56))?,
        }
    } else {
        Shdr {
            name: r.u32(at)?,
            typ: r.u32(at.wrapping_add(4))?,
            flags: u64::from(r.u32(at.wrapping_add(8))?),
            addr: u64::from(r.u32(at.wrapping_add(12))?),
            offset: u64::from(r.u32(at.wrapping_add(16))?),
            size: u64::from(r.u32(at.wrapping_add(20))?),
            link: r.u32(at.wrapping_add(24))?,
            info: r.u32(at.wrapping_add(28))?,
            align: u64::from(r.u32(at.wrapping_add(32))?),
            entsize: u64::from(r.u32(at.wrapping_add(36))?),
        }
    })
}

fn section_headers(r: &Reader<'_>, h: &Header) -> Result<Vec<Shdr>, String> {
    let size = if h.is64 { 64 } else { 40 };
    if h.shnum > 0x10_0000 {
        return Err("too many sections".into());
    }
    (0..h.shnum)
        .map(|i| shdr(r, h.shoff + i * size, h.is64))
        .collect()
}

fn section_name(
    r: &Reader<'_>,
    headers: &[Shdr],
    shstrndx: u32,
    name: u32,
) -> Result<Vec<u8>, String> {
    if shstrndx == 0 {
        return Ok(Vec::new());
    }
    let t = headers
        .get(shstrndx as usize)
        .ok_or("invalid section name string table index")?;
    if u64::from(name) >= t.size {
        return Err("section name offset outside the string table".into());
    }
    r.cstr(t.offset.wrapping_add(u64::from(name)))
        .map(<[u8]>::to_vec)
}

/// A section's name and contents.
pub type NamedSection = (Vec<u8>, Vec<u8>);

/// The sections of an ELF file as `ELFObjectFile` lists them: (name, contents), in
/// section-header order without the null section. `SHT_NOBITS` sections are empty.
pub fn sections(elf: &[u8]) -> Result<Vec<NamedSection>, String> {
    let r = Reader { data: elf };
    let h = header(&r)?;
    let headers = section_headers(&r, &h)?;
    headers
        .iter()
        .skip(1)
        .map(|s| {
            let name = section_name(&r, &headers, h.shstrndx, s.name)?;
            let data = if s.typ == SHT_NOBITS {
                Vec::new()
            } else {
                r.bytes(s.offset, s.size)?.to_vec()
            };
            Ok((name, data))
        })
        .collect()
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

/// The sections of an ELF file with their types: (sh_type, contents).
pub fn typed_sections(elf: &[u8]) -> Result<Vec<(u32, Vec<u8>)>, String> {
    let r = Reader { data: elf };
    let h = header(&r)?;
    let headers = section_headers(&r, &h)?;
    headers
        .iter()
        .skip(1)
        .map(|s| {
            let data = if s.typ == SHT_NOBITS {
                Vec::new()
            } else {
                r.bytes(s.offset, s.size)?.to_vec()
            };
            Ok((s.typ, data))
        })
        .collect()
}

impl Object {
    fn parse(elf: &[u8]) -> Result<Object, String> {
        let r = Reader { data: elf };
        let h = header(&r)?;
        let e_type = r.u16(16)?;
        if h.shstrndx == 0 || h.shoff == 0 {
            return Err("ELF objects without a section name table are not supported".into());
        }
        let headers = section_headers(&r, &h)?;
        let mut obj = Object {
            is64: h.is64,
            osabi: r.u8(7)?,
            abiversion: r.u8(8)?,
            e_type,
            machine: r.u16(18)?,
            version: r.u32(20)?,
            entry: r.word(24, h.is64)?,
            flags: r.u32(if h.is64 { 0x30 } else { 0x24 })?,
            sections: Vec::new(),
            symbols: Vec::new(),
            symtab: None,
            shstrtab: None,
            indices_changed: false,
            next_id: 0,
            segments: Vec::new(),
            removed_in_segments: Vec::new(),
        };
        // readSectionHeaders + makeSection.
        for (i, s) in headers.iter().enumerate().skip(1) {
            let kind = match s.typ {
                SHT_REL | SHT_RELA if s.flags & SHF_ALLOC == 0 => Kind::Rel {
                    relocs: Vec::new(),
                    target: None,
                    symtab: None,
                    rela: s.typ == SHT_RELA,
                },
                SHT_STRTAB if s.flags & SHF_ALLOC == 0 => Kind::StrTab,
                SHT_SYMTAB => {
                    if obj.symtab.is_some() {
                        return Err("found multiple SHT_SYMTAB sections".into());
                    }
                    obj.symtab = Some(i);
                    Kind::SymTab { strtab: None }
                }
                SHT_SYMTAB_SHNDX => {
                    return Err("SHT_SYMTAB_SHNDX sections are not supported".into())
                }
                SHT_CREL => return Err("SHT_CREL sections are not supported".into()),
                SHT_NOBITS => Kind::NoBits,
                SHT_REL | SHT_RELA => Kind::DynRel {
                    data: r.bytes(s.offset, s.size)?.to_vec(),
                    dynsym: None,
                    target: None,
                },
                _ => Kind::Raw(r.bytes(s.offset, s.size)?.to_vec()),
            };
            let name = section_name(&r, &headers, h.shstrndx, s.name)?;
            if !matches!(kind, Kind::NoBits | Kind::Raw(_)) {
                // Bounds are checked by LLVM's getSectionContents for every type that reads data.
                r.bytes(s.offset, s.size)?;
            }
            obj.sections.push(Section {
                id: i,
                name,
                typ: s.typ,
                flags: s.flags,
                addr: s.addr,
                original_offset: s.offset,
                size: s.size,
                link: s.link,
                info: s.info,
                align: s.align,
                entsize: s.entsize,
                kind,
                link_section: None,
                has_symtab_link: false,
                parent: None,
                index: i as u32,
                offset: s.offset,
            });
        }
        obj.next_id = headers.len();
        let by_index = |idx: u32| -> Option<Id> {
            (idx != 0 && (idx as usize) < headers.len()).then_some(idx as usize)
        };
        // e_shstrndx must name a string table section.
        match obj.sections.get(h.shstrndx as usize - 1).map(|s| &s.kind) {
            Some(Kind::StrTab) => obj.shstrtab = Some(h.shstrndx as usize),
            _ => return Err("e_shstrndx does not reference a string table".into()),
        }
        // The symbol table and its symbols.
        if let Some(st) = obj.symtab {
            let s = &headers[st];
            let strtab = by_index(s.link)
                .filter(|&l| matches!(obj.sections[l - 1].kind, Kind::StrTab))
                .ok_or("symbol table link is not a string table")?;
            if let Kind::SymTab { strtab: t } = &mut obj.sections[st - 1].kind {
                *t = Some(strtab);
            }
            let names = &headers[strtab];
            let entsize = if h.is64 { 24 } else { 16 };
            let count = s.size / entsize;
            for n in 0..count {
                let at = s.offset.wrapping_add(n.wrapping_mul(entsize));
                let (name, value, size, info, other, shndx) = if h.is64 {
                    (
                        r.u32(at)?,
                        r.u64(at.wrapping_add(8))?,
                        r.u64(at.wrapping_add(16))?,
                        r.u8(at.wrapping_add(4))?,
                        r.u8(at.wrapping_add(5))?,
                        r.u16(at.wrapping_add(6))?,
                    )
                } else {
                    (
                        r.u32(at)?,
                        u64::from(r.u32(at.wrapping_add(4))?),
                        u64::from(r.u32(at.wrapping_add(8))?),
                        r.u8(at.wrapping_add(12))?,
                        r.u8(at.wrapping_add(13))?,
                        r.u16(at.wrapping_add(14))?,
                    )
                };
                if u64::from(name) >= names.size && name != 0 {
                    return Err("symbol name offset outside the string table".into());
                }
                let sym_name = r.cstr(names.offset.wrapping_add(u64::from(name)))?.to_vec();
                let (defined_in, reserved) = if shndx == SHN_XINDEX {
                    return Err("SHN_XINDEX symbols are not supported".into());
                } else if shndx >= SHN_LORESERVE {
                    let ok =
                        matches!(shndx, 0xfff1 | 0xfff2) || (obj.machine == 224 && shndx == 0xff00);
                    if !ok {
                        return Err(format!("symbol has unsupported section index {shndx:#x}"));
                    }
                    (None, shndx)
                } else if shndx != 0 {
                    (
                        Some(
                            by_index(u32::from(shndx))
                                .ok_or("symbol has an invalid section index")?,
                        ),
                        0,
                    )
                } else {
                    (None, 0)
                };
                obj.symbols.push(Symbol {
                    id: n as usize,
                    name: sym_name,
                    bind: info >> 4,
                    typ: info & 0xf,
                    defined_in,
                    reserved,
                    value,
                    other,
                    size,
                });
            }
        }
        // Initialise the other sections: links, relocations, groups.
        for i in 0..obj.sections.len() {
            let s = &headers[obj.sections[i].id];
            let typ = obj.sections[i].typ;
            match &obj.sections[i].kind {
                Kind::Rel { rela, .. } => {
                    let rela = *rela;
                    let symtab = if s.link != 0 {
                        let l = by_index(s.link).ok_or("relocation section link is invalid")?;
                        if !matches!(obj.sections[l - 1].kind, Kind::SymTab { .. }) {
                            return Err("relocation section link is not a symbol table".into());
                        }
                        Some(l)
                    } else {
                        None
                    };
                    let target = if s.info != 0 {
                        Some(by_index(s.info).ok_or("relocation section info is invalid")?)
                    } else {
                        None
                    };
                    let entsize = match (h.is64, rela) {
                        (true, true) => 24,
                        (true, false) => 16,
                        (false, true) => 12,
                        (false, false) => 8,
                    };
                    let mut relocs = Vec::new();
                    for n in 0..s.size / entsize {
                        let at = s.offset.wrapping_add(n.wrapping_mul(entsize));
                        let (offset, info, addend) = if h.is64 {
                            (
                                r.u64(at)?,
                                r.u64(at.wrapping_add(8))?,
                                if rela { r.u64(at.wrapping_add(16))? } else { 0 },
                            )
                        } else {
                            let a = if rela {
                                r.u32(at.wrapping_add(8))? as i32 as i64 as u64
                            } else {
                                0
                            };
                            (
                                u64::from(r.u32(at)?),
                                u64::from(r.u32(at.wrapping_add(4))?),
                                a,
                            )
                        };
                        let (sym, t) = if h.is64 {
                            ((info >> 32) as usize, (info & 0xffff_ffff) as u32)
                        } else {
                            ((info >> 8) as usize, (info & 0xff) as u32)
                        };
                        let sym = if sym != 0 {
                            if obj.symtab.is_none() || sym >= obj.symbols.len() {
                                return Err(format!(
                                    "relocation references invalid symbol index {sym}"
                                ));
                            }
                            Some(sym)
                        } else {
                            None
                        };
                        relocs.push(Reloc {
                            offset,
                            addend,
                            typ: t,
                            sym,
                        });
                    }
                    obj.sections[i].kind = Kind::Rel {
                        relocs,
                        target,
                        symtab,
                        rela,
                    };
                }
                _ if typ == SHT_GROUP => {
                    let raw = r.bytes(s.offset, s.size)?;
                    if s.align % 4 != 0 {
                        return Err("invalid alignment of a group section".into());
                    }
                    if raw.len() % 4 != 0 || raw.is_empty() {
                        return Err("malformed group section".into());
                    }
                    let (sym, symtab) = if s.link != 0 {
                        let l = by_index(s.link).ok_or("group section link is invalid")?;
                        if !matches!(obj.sections[l - 1].kind, Kind::SymTab { .. }) {
                            return Err("group section link is not a symbol table".into());
                        }
                        if s.info as usize >= obj.symbols.len() {
                            return Err("group section info is not a valid symbol index".into());
                        }
                        (Some(s.info as usize), Some(l))
                    } else {
                        (None, None)
                    };
                    let words: Vec<u32> = raw
                        .chunks(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    let members = words[1..]
                        .iter()
                        .map(|&w| by_index(w).ok_or("invalid group member index"))
                        .collect::<Result<Vec<_>, _>>()?;
                    obj.sections[i].kind = Kind::Group {
                        flags: words[0],
                        members,
                        sym,
                        symtab,
                    };
                }
                Kind::DynRel { data, .. } => {
                    let data = data.clone();
                    let dynsym = if s.link != 0 {
                        let l = by_index(s.link).ok_or("relocation section link is invalid")?;
                        if obj.sections[l - 1].typ != SHT_DYNSYM {
                            return Err(
                                "dynamic relocation section link is not a dynamic symbol table"
                                    .into(),
                            );
                        }
                        Some(l)
                    } else {
                        None
                    };
                    let target = if s.info != 0 {
                        Some(by_index(s.info).ok_or("relocation section info is invalid")?)
                    } else {
                        None
                    };
                    obj.sections[i].kind = Kind::DynRel {
                        data,
                        dynsym,
                        target,
                    };
                }
                Kind::Raw(_) | Kind::NoBits if s.link != 0 => {
                    let l = by_index(s.link).ok_or("section link is invalid")?;
                    if obj.sections[l - 1].typ == SHT_SYMTAB {
                        obj.sections[i].has_symtab_link = true;
                    } else {
                        obj.sections[i].link_section = Some(l);
                    }
                }
                _ => {}
            }
        }
        obj.read_program_headers(&r, &h)?;
        Ok(obj)
    }

    /// `ELFBuilder::readProgramHeaders`.
    fn read_program_headers(&mut self, r: &Reader<'_>, h: &Header) -> Result<(), String> {
        let size: u64 = if h.is64 { 56 } else { 32 };
        if h.phnum != 0 && u64::from(h.phentsize) != size {
            return Err("unexpected program header size".into());
        }
        for i in 0..u64::from(h.phnum) {
            let at = h.phoff.wrapping_add(i.wrapping_mul(size));
            let (typ, flags, offset, vaddr, paddr, filesz, memsz, align) = if h.is64 {
                (
                    r.u32(at)?,
                    r.u32(at.wrapping_add(4))?,
                    r.u64(at.wrapping_add(8))?,
                    r.u64(at.wrapping_add(16))?,
                    r.u64(at.wrapping_add(24))?,
                    r.u64(at.wrapping_add(32))?,
                    r.u64(at.wrapping_add(40))?,
                    r.u64(at.wrapping_add(48))?,
                )
            } else {
                (
                    r.u32(at)?,
                    r.u32(at.wrapping_add(24))?,
                    u64::from(r.u32(at.wrapping_add(4))?),
                    u64::from(r.u32(at.wrapping_add(8))?),
                    u64::from(r.u32(at.wrapping_add(12))?),
                    u64::from(r.u32(at.wrapping_add(16))?),
                    u64::from(r.u32(at.wrapping_add(20))?),
                    u64::from(r.u32(at.wrapping_add(28))?),
                )
            };
            let contents = r
                .bytes(offset, filesz)
                .map_err(|_| "program header goes past the end of the file".to_string())?
                .to_vec();
            let seg = Segment {
                typ,
                flags,
                original_offset: offset,
                offset,
                vaddr,
                paddr,
                filesz,
                memsz,
                align,
                index: i as u32,
                parent: None,
                contents,
            };
            let si = self.segments.len();
            for sec in self.sections.iter_mut() {
                if section_within_segment(sec, &seg) {
                    let replace = match sec.parent {
                        None => true,
                        Some(p) => self.segments[p].offset > seg.offset,
                    };
                    if replace {
                        sec.parent = Some(si);
                    }
                }
            }
            self.segments.push(seg);
        }
        let n = self.segments.len() as u32;
        let word: u64 = if h.is64 { 8 } else { 4 };
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
            original_offset: h.phoff,
            offset: h.phoff,
            vaddr: h.phoff,
            paddr: 0,
            filesz: u64::from(h.phentsize) * u64::from(h.phnum),
            memsz: u64::from(h.phentsize) * u64::from(h.phnum),
            align: word,
            index: n + 1,
            parent: None,
            contents: Vec::new(),
        });
        // setParentSegment for every segment, the ELF header and the program headers.
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
        Ok(())
    }

    fn position(&self, id: Id) -> Option<usize> {
        self.sections.iter().position(|s| s.id == id)
    }

    /// `Object::removeSections(AllowBrokenLinks = false, pred)`.
    fn remove_sections(&mut self, pred: impl Fn(&Section) -> bool) -> Result<(), String> {
        let removed_ids: Vec<Id> = self
            .sections
            .iter()
            .filter(|s| pred(s))
            .map(|s| s.id)
            .collect();
        let is_removed = |id: Id| removed_ids.contains(&id);
        let mut remove = Vec::new();
        for s in &self.sections {
            let gone = pred(s)
                || match &s.kind {
                    Kind::Rel {
                        target: Some(t), ..
                    }
                    | Kind::DynRel {
                        target: Some(t), ..
                    } => is_removed(*t),
                    Kind::Group { members, .. } => members.iter().all(|m| is_removed(*m)),
                    _ => false,
                };
            remove.push(gone);
        }
        let removed: Vec<Id> = self
            .sections
            .iter()
            .zip(&remove)
            .filter(|(_, g)| **g)
            .map(|(s, _)| s.id)
            .collect();
        if removed.is_empty() {
            return Ok(());
        }
        if self.symtab.is_some_and(|t| removed.contains(&t))
            || self.shstrtab.is_some_and(|t| removed.contains(&t))
        {
            return Err("cannot remove the symbol table or the section name table".into());
        }
        // onRemove: a removed group drops SHF_GROUP from its members.
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
        // removeSectionReferences on the sections that stay.
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
        if self.symtab.is_some() {
            // SymbolTableSection::removeSectionReferences -> removeSymbols.
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
            7
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
        let is64 = self.is64;
        // removeUnneededSections: an empty symbol table of a non-relocatable file goes,
        // with its string table unless that also names the sections.
        if self.e_type != 1 && self.symbols.len() == 1 {
            if let Some(st) = self.symtab.take() {
                let strtab = self
                    .sections
                    .iter()
                    .find(|s| s.id == st)
                    .and_then(|s| match s.kind {
                        Kind::SymTab { strtab } => strtab,
                        _ => None,
                    });
                let strtab = strtab.filter(|t| Some(*t) != self.shstrtab);
                self.sections.retain(|s| s.id != st && Some(s.id) != strtab);
            }
        }
        if let Some(st) = self.symtab {
            if !self.indices_changed {
                for s in self.sections.iter_mut() {
                    if s.has_symtab_link {
                        s.link_section = Some(st);
                    }
                }
            }
        }
        // Indices (layoutSections numbers from 1 in order).
        for (i, s) in self.sections.iter_mut().enumerate() {
            s.index = (i + 1) as u32;
        }
        let index_of: std::collections::HashMap<Id, u32> =
            self.sections.iter().map(|s| (s.id, s.index)).collect();
        let sym_index: std::collections::HashMap<usize, u32> = self
            .symbols
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id, i as u32))
            .collect();
        // Sizes (ELFSectionSizer).
        let word = if is64 { 8 } else { 4 };
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
        // String tables: section names into e_shstrndx's table, symbol names into the
        // symbol table's.
        let mut tables: Vec<(Id, StringTable<'_>)> = self
            .sections
            .iter()
            .filter(|s| matches!(s.kind, Kind::StrTab))
            .map(|s| (s.id, StringTable::new()))
            .collect();
        let names: Vec<Vec<u8>> = self.sections.iter().map(|s| s.name.clone()).collect();
        let sym_names: Vec<Vec<u8>> = self.symbols.iter().map(|s| s.name.clone()).collect();
        let sym_strtab = self.symtab.and_then(|st| {
            self.sections
                .iter()
                .find(|s| s.id == st)
                .and_then(|s| match s.kind {
                    Kind::SymTab { strtab } => strtab,
                    _ => None,
                })
        });
        for (id, t) in tables.iter_mut() {
            if Some(*id) == self.shstrtab {
                for n in &names {
                    t.add(n);
                }
            }
            if Some(*id) == sym_strtab {
                for n in &sym_names {
                    t.add(n);
                }
            }
        }
        let finals: std::collections::HashMap<Id, FinalStringTable<'_>> = tables
            .into_iter()
            .map(|(id, t)| (id, t.finalize()))
            .collect();
        for s in self.sections.iter_mut() {
            if let Some(f) = finals.get(&s.id) {
                s.size = f.size();
            }
        }
        // Layout (assignOffsets): segments in `compareSegmentsByOffset` order, each at its
        // parent's relative position or aligned after the previous one; then the sections
        // that are in a segment keep their place in it, the others follow by original
        // offset.
        let ehdr_size: u64 = if is64 { 64 } else { 52 };
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
        let mut seg_order: Vec<usize> = (0..nseg).collect();
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
        let shoff = offset
            .checked_next_multiple_of(word)
            .ok_or("file size overflows")?;
        let shentsize: u64 = if is64 { 64 } else { 40 };
        let total = (self.sections.len() as u64 + 1)
            .checked_mul(shentsize)
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
        // writeSegmentData: the original bytes of every segment, then zeros over removed
        // sections that were inside one.
        let real_segments = nseg.saturating_sub(2);
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

        // Symbol string offsets.
        let sym_name_index = |name: &[u8]| -> u32 {
            sym_strtab
                .and_then(|t| finals.get(&t))
                .and_then(|f| f.offset(name))
                .unwrap_or(0) as u32
        };
        let shstr = self.shstrtab.and_then(|t| finals.get(&t));
        let max_local = self
            .symbols
            .iter()
            .enumerate()
            .filter(|(_, s)| s.bind == STB_LOCAL)
            .map(|(i, _)| i as u32)
            .max()
            .unwrap_or(0);

        // Section contents and headers.
        let put = |out: &mut Vec<u8>, at: u64, bytes: &[u8]| -> Result<(), String> {
            usize::try_from(at)
                .ok()
                .and_then(|a| out.get_mut(a..a.checked_add(bytes.len())?))
                .map(|dst| dst.copy_from_slice(bytes))
                .ok_or_else(|| {
                    "section data lies outside the output (corrupt offsets?)".to_string()
                })
        };
        let wword = |v: u64| -> Vec<u8> {
            if is64 {
                v.to_le_bytes().to_vec()
            } else {
                (v as u32).to_le_bytes().to_vec()
            }
        };
        for s in &self.sections {
            // Sections inside a segment were written with the segment's bytes.
            let own = s.parent.is_none();
            let mut link = s.link;
            let mut info = s.info;
            match &s.kind {
                Kind::Raw(d) => {
                    if own {
                        put(&mut out, s.offset, d)?;
                    }
                    link = s
                        .link_section
                        .and_then(|l| index_of.get(&l).copied())
                        .unwrap_or(0);
                }
                Kind::DynRel {
                    data,
                    dynsym,
                    target,
                } => {
                    if own {
                        put(&mut out, s.offset, data)?;
                    }
                    link = dynsym.and_then(|t| index_of.get(&t).copied()).unwrap_or(0);
                    if let Some(t) = target {
                        info = index_of.get(t).copied().unwrap_or(0);
                    }
                }
                Kind::NoBits => {
                    link = s
                        .link_section
                        .and_then(|l| index_of.get(&l).copied())
                        .unwrap_or(0);
                }
                Kind::StrTab => {
                    if let Some(f) = finals.get(&s.id) {
                        if own {
                            put(&mut out, s.offset, &f.to_vec())?;
                        }
                    }
                }
                Kind::SymTab { strtab } => {
                    let mut at = s.offset;
                    for sym in &self.symbols {
                        let shndx = match sym.defined_in {
                            Some(d) => *index_of
                                .get(&d)
                                .ok_or("symbol defined in a removed section")?
                                as u16,
                            None => sym.reserved,
                        };
                        let info_b = (sym.bind << 4) | (sym.typ & 0xf);
                        let name = sym_name_index(&sym.name);
                        let mut e = Vec::with_capacity(24);
                        if is64 {
                            e.extend_from_slice(&name.to_le_bytes());
                            e.push(info_b);
                            e.push(sym.other);
                            e.extend_from_slice(&shndx.to_le_bytes());
                            e.extend_from_slice(&sym.value.to_le_bytes());
                            e.extend_from_slice(&sym.size.to_le_bytes());
                        } else {
                            e.extend_from_slice(&name.to_le_bytes());
                            e.extend_from_slice(&(sym.value as u32).to_le_bytes());
                            e.extend_from_slice(&(sym.size as u32).to_le_bytes());
                            e.push(info_b);
                            e.push(sym.other);
                            e.extend_from_slice(&shndx.to_le_bytes());
                        }
                        if own {
                            put(&mut out, at, &e)?;
                        }
                        at += e.len() as u64;
                    }
                    link = strtab.and_then(|t| index_of.get(&t).copied()).unwrap_or(0);
                    info = max_local + 1;
                }
                Kind::Rel {
                    relocs,
                    target,
                    symtab,
                    rela,
                } => {
                    let mut at = s.offset;
                    for r in relocs {
                        let sym = r
                            .sym
                            .and_then(|id| sym_index.get(&id).copied())
                            .unwrap_or(0);
                        let mut e = wword(r.offset);
                        let info_v = if is64 {
                            (u64::from(sym) << 32) | u64::from(r.typ)
                        } else {
                            (u64::from(sym) << 8) | u64::from(r.typ & 0xff)
                        };
                        e.extend_from_slice(&wword(info_v));
                        if *rela {
                            e.extend_from_slice(&wword(r.addend));
                        }
                        if own {
                            put(&mut out, at, &e)?;
                        }
                        at += e.len() as u64;
                    }
                    link = symtab.and_then(|t| index_of.get(&t).copied()).unwrap_or(0);
                    if let Some(t) = target {
                        info = index_of.get(t).copied().unwrap_or(0);
                    }
                }
                Kind::Group {
                    flags,
                    members,
                    sym,
                    symtab,
                } => {
                    let mut flags = *flags;
                    let sym_entry = sym.and_then(|id| self.symbols.iter().position(|x| x.id == id));
                    if flags & GRP_COMDAT != 0
                        && sym_entry.is_some_and(|p| self.symbols[p].bind == STB_LOCAL)
                    {
                        flags &= !GRP_COMDAT;
                    }
                    let mut e = flags.to_le_bytes().to_vec();
                    for m in members {
                        e.extend_from_slice(&index_of.get(m).copied().unwrap_or(0).to_le_bytes());
                    }
                    if own {
                        put(&mut out, s.offset, &e)?;
                    }
                    info = sym_entry.map_or(0, |p| p as u32);
                    link = symtab.and_then(|t| index_of.get(&t).copied()).unwrap_or(0);
                }
            }
            // Section header.
            let name = shstr.and_then(|f| f.offset(&s.name)).unwrap_or(0) as u32;
            let at = shoff + u64::from(s.index) * shentsize;
            let mut h = Vec::with_capacity(64);
            h.extend_from_slice(&name.to_le_bytes());
            h.extend_from_slice(&s.typ.to_le_bytes());
            h.extend_from_slice(&wword(s.flags));
            h.extend_from_slice(&wword(s.addr));
            h.extend_from_slice(&wword(s.offset));
            h.extend_from_slice(&wword(s.size));
            h.extend_from_slice(&link.to_le_bytes());
            h.extend_from_slice(&info.to_le_bytes());
            h.extend_from_slice(&wword(s.align));
            h.extend_from_slice(&wword(s.entsize));
            put(&mut out, at, &h)?;
        }
        // ELF header.
        let mut e = Vec::with_capacity(64);
        e.extend_from_slice(b"\x7fELF");
        e.push(if is64 { 2 } else { 1 });
        e.push(1);
        e.push(1);
        e.push(self.osabi);
        e.push(self.abiversion);
        e.extend_from_slice(&[0; 7]);
        e.extend_from_slice(&self.e_type.to_le_bytes());
        e.extend_from_slice(&self.machine.to_le_bytes());
        e.extend_from_slice(&self.version.to_le_bytes());
        e.extend_from_slice(&wword(self.entry));
        let phnum = nseg.saturating_sub(2);
        let phoff = if phnum != 0 {
            self.segments[nseg - 1].offset
        } else {
            0
        };
        e.extend_from_slice(&wword(phoff)); // e_phoff
        e.extend_from_slice(&wword(shoff));
        e.extend_from_slice(&self.flags.to_le_bytes());
        e.extend_from_slice(&(ehdr_size as u16).to_le_bytes());
        let phentsize: u16 = if phnum == 0 {
            0
        } else if is64 {
            56
        } else {
            32
        };
        e.extend_from_slice(&phentsize.to_le_bytes()); // e_phentsize
        e.extend_from_slice(&(phnum as u16).to_le_bytes()); // e_phnum
        e.extend_from_slice(&(shentsize as u16).to_le_bytes());
        e.extend_from_slice(&((self.sections.len() + 1) as u16).to_le_bytes());
        let shstrndx = self
            .shstrtab
            .and_then(|t| index_of.get(&t).copied())
            .unwrap_or(0);
        e.extend_from_slice(&(shstrndx as u16).to_le_bytes());
        put(&mut out, 0, &e)?;
        // Program headers.
        for seg in &self.segments[..phnum] {
            let mut ph = Vec::with_capacity(56);
            if is64 {
                ph.extend_from_slice(&seg.typ.to_le_bytes());
                ph.extend_from_slice(&seg.flags.to_le_bytes());
                for v in [
                    seg.offset, seg.vaddr, seg.paddr, seg.filesz, seg.memsz, seg.align,
                ] {
                    ph.extend_from_slice(&v.to_le_bytes());
                }
            } else {
                ph.extend_from_slice(&seg.typ.to_le_bytes());
                for v in [seg.offset, seg.vaddr, seg.paddr, seg.filesz, seg.memsz] {
                    ph.extend_from_slice(&(v as u32).to_le_bytes());
                }
                ph.extend_from_slice(&seg.flags.to_le_bytes());
                ph.extend_from_slice(&(seg.align as u32).to_le_bytes());
            }
            put(
                &mut out,
                phoff + u64::from(seg.index) * u64::from(phentsize),
                &ph,
            )?;
        }
        Ok(out)
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
