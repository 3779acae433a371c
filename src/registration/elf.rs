//! Registration data in ELF files, found statically (`REGISTRATION.md` §7).
//!
//! [`HostElf`] is an [`AddressSpace`] over a host executable, shared library or
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
//! absence. Only 64-bit little-endian files are read (the LP64 layouts of the records);
//! relocations are decoded for x86-64 and AArch64.
//!
//! Finding the registration records:
//!
//! * HIP/CUDA fat-binary wrappers: every 24-byte slot of `.hipFatBinSegment` /
//!   `.nvFatBinSegment` ([`HostElf::fat_binary_wrappers`]);
//! * `__tgt_bin_desc` descriptors: they are internal constants the constructor passes by
//!   address, so they are found by structure ([`HostElf::descriptors`]): a 32-byte record
//!   whose entry range is exactly an offload-entry section (`omp_offloading_entries`,
//!   `cuda_offloading_entries`, `hip_offloading_entries`, `llvm_offload_entries`) and
//!   whose images all point at that same range (§1.6); or, for a module without offload
//!   entries (the wrapper's zero-length `__dummy` keeps the bounds defined, but linkers drop
//!   the empty section, so `__start_`/`__stop_` are one address), a record whose entry
//!   range is empty and whose image array starts with an image in a `.llvm.offloading`
//!   section;
//! * offload-entry tables: [`HostElf::entry_sections`].

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use object::elf::{FileHeader64, Sym64};
use object::read::elf::{FileHeader, SectionHeader, SectionTable, Sym, SymbolTable};
use object::LittleEndian as LE;

use crate::bytes::u64_of;
use crate::error::{Error, ErrorKind, Result};
use crate::ReadOptions;

use super::abi::{self, BIN_DESC_SIZE, FATBIN_WRAPPER_SIZE};
use super::view::{AddressSpace, Descriptor};

/// ELF file type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElfType {
    /// `ET_REL`: a relocatable object.
    Relocatable,
    /// `ET_EXEC`: a fixed-address executable.
    Executable,
    /// `ET_DYN`: a shared library or position-independent executable.
    Shared,
}

/// One section, placed at its (possibly synthetic) address.
#[derive(Clone, Copy, Debug)]
pub struct Section<'d> {
    /// Section index.
    pub index: usize,
    /// Name.
    pub name: &'d [u8],
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// Address: `sh_addr`, or the synthetic base in a relocatable object.
    pub address: u64,
    /// Size in memory.
    pub size: u64,
    /// File contents (empty for `SHT_NOBITS`).
    pub data: &'d [u8],
}

impl Section<'_> {
    /// True if `addr` lies within the section's file contents.
    fn holds(&self, addr: u64) -> bool {
        addr.checked_sub(self.address)
            .is_some_and(|d| d < u64_of(self.data.len()))
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

/// Pointer slots sorted by the value they hold: `(value, slot address)`.
struct SlotIndex(Vec<(u64, u64)>);

impl SlotIndex {
    /// Addresses of the slots whose value lies in `[begin, end)`, in address order of
    /// value, then of slot.
    fn slots_holding(&self, begin: u64, end: u64) -> impl Iterator<Item = u64> + '_ {
        let from = self.0.partition_point(|&(v, _)| v < begin);
        let to = self.0.partition_point(|&(v, _)| v < end);
        self.0
            .get(from..to.max(from))
            .unwrap_or(&[])
            .iter()
            .map(|&(_, at)| at)
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
const SHF_WRITE: u64 = object::elf::SHF_WRITE.0;
const SHF_ALLOC: u64 = object::elf::SHF_ALLOC.0;
/// Distance between the synthetic base addresses of a relocatable object's sections.
const SYNTHETIC_STRIDE: u64 = 1 << 40;

/// The names of offload-entry sections, with the kind of their legacy entries (§1.5).
pub const ENTRY_SECTIONS: [(&[u8], u16); 4] = [
    (b"omp_offloading_entries", abi::kind::OPENMP),
    (b"cuda_offloading_entries", abi::kind::CUDA),
    (b"hip_offloading_entries", abi::kind::HIP),
    (b"llvm_offload_entries", abi::kind::OPENMP),
];

/// Sections holding HIP/CUDA fat-binary wrappers.
pub const WRAPPER_SECTIONS: [&[u8]; 2] = [b".hipFatBinSegment", b".nvFatBinSegment"];

fn elf_error(what: &'static str) -> impl Fn(object::read::Error) -> Error {
    move |_| Error::new(ErrorKind::BadContainer, 0, what)
}

/// A host ELF file read as the address space its program would see (see the module
/// documentation).
#[derive(Clone, Debug)]
pub struct HostElf<'d> {
    data: &'d [u8],
    elf_type: ElfType,
    machine: u16,
    sections: Vec<Section<'d>>,
    /// Indices into `sections` of the mapped ones, sorted by address.
    mapped: Vec<usize>,
    relocs: Vec<Reloc<'d>>,
    /// (address, name, section index) of defined symbols, from `.symtab`, sorted by
    /// address.
    symbols: Vec<(u64, &'d [u8], usize)>,
}

impl<'d> HostElf<'d> {
    /// Reads the section table, the relocations and the symbol table of `data`.
    pub fn parse(data: &'d [u8]) -> Result<Self> {
        let h = FileHeader64::<LE>::parse(data).map_err(elf_error("ELF header is malformed"))?;
        if !h.is_little_endian() {
            return Err(Error::new(
                ErrorKind::BadContainer,
                5,
                "only little-endian 64-bit host ELF files are supported",
            ));
        }
        let elf_type = match h.e_type(LE).0 {
            1 => ElfType::Relocatable,
            2 => ElfType::Executable,
            3 => ElfType::Shared,
            _ => {
                return Err(Error::new(
                    ErrorKind::BadContainer,
                    16,
                    "ELF file is not an object, executable or shared library",
                ))
            }
        };
        let machine = h.e_machine(LE).0;
        let table = h
            .sections(LE, data)
            .map_err(elf_error("ELF section header table is malformed"))?;
        let mut sections = Vec::with_capacity(table.len());
        for (index, sh) in table.iter().enumerate() {
            let name = table
                .section_name(LE, sh)
                .map_err(elf_error("ELF section name is outside the string table"))?;
            let sh_type = sh.sh_type(LE).0;
            let contents = if sh_type == SHT_NOBITS {
                &[][..]
            } else {
                sh.data(LE, data)
                    .map_err(elf_error("ELF section contents lie outside the file"))?
            };
            let address = match elf_type {
                ElfType::Relocatable => u64_of(index)
                    .saturating_add(1)
                    .saturating_mul(SYNTHETIC_STRIDE),
                _ => sh.sh_addr(LE),
            };
            sections.push(Section {
                index,
                name,
                sh_type,
                flags: sh.sh_flags(LE).0,
                address,
                size: sh.sh_size(LE),
                data: contents,
            });
        }
        let mut mapped: Vec<usize> = sections
            .iter()
            .filter(|s| {
                !s.data.is_empty()
                    && s.index != 0
                    && match elf_type {
                        ElfType::Relocatable => true,
                        _ => s.flags & SHF_ALLOC != 0 && s.address != 0,
                    }
            })
            .map(|s| s.index)
            .collect();
        mapped.sort_by_key(|&i| sections.get(i).map_or(0, |s| s.address));
        let mut elf = HostElf {
            data,
            elf_type,
            machine,
            sections,
            mapped,
            relocs: Vec::new(),
            symbols: Vec::new(),
        };
        elf.read_relocations(&table)?;
        elf.read_symbols(&table)?;
        Ok(elf)
    }

    fn base_of(&self, section: usize) -> Option<u64> {
        self.sections.get(section).map(|s| s.address)
    }

    fn read_relocations(&mut self, table: &SectionTable<'d, FileHeader64<LE>>) -> Result<()> {
        let (abs, glob, slot, relative) = match self.machine {
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
            _ => return Ok(()),
        };
        let data = self.data;
        let mut relocs = Vec::new();
        for sh in table.iter() {
            let ty = sh.sh_type(LE).0;
            if ty != SHT_RELA && ty != SHT_REL {
                continue;
            }
            let dynamic = sh.sh_flags(LE).0 & SHF_ALLOC != 0;
            let target_base = match self.elf_type {
                ElfType::Relocatable => {
                    let Some(b) = self.base_of(sh.sh_info(LE) as usize) else {
                        continue;
                    };
                    b
                }
                _ if dynamic => 0,
                // Static relocation sections kept in a linked file (`--emit-relocs`)
                // describe the link, not the loaded program.
                _ => continue,
            };
            let symtab = table
                .symbol_table_by_index(LE, data, object::SectionIndex(sh.sh_link(LE) as usize))
                .ok();
            let mut push = |offset: u64, r_type: u32, sym: u32, addend: Option<i64>| {
                let at = target_base.wrapping_add(offset);
                if r_type != abs && r_type != glob && r_type != slot && r_type != relative {
                    return;
                }
                let addend = match addend {
                    Some(a) => a,
                    // REL: the implicit addend is the slot's content.
                    None => self.raw_u64(at).unwrap_or(0) as i64,
                };
                let value = if r_type == relative {
                    Value::Known(addend as u64)
                } else {
                    let add = if r_type == abs || self.elf_type == ElfType::Relocatable {
                        addend
                    } else {
                        // GLOB_DAT / JUMP_SLOT on x86-64 take S only; AArch64 adds A.
                        if self.machine == EM_AARCH64 {
                            addend
                        } else {
                            0
                        }
                    };
                    self.symbol_value(symtab.as_ref(), sym)
                        .map_or_else(Value::Undefined, |s| {
                            Value::Known(s.wrapping_add(add as u64))
                        })
                };
                relocs.push(Reloc { at, value });
            };
            if ty == SHT_RELA {
                let rela: &[object::elf::Rela64<LE>] = sh
                    .data_as_array(LE, data)
                    .map_err(elf_error("ELF relocation table lies outside the file"))?;
                for r in rela {
                    use object::read::elf::Rela;
                    push(
                        r.r_offset(LE),
                        r.r_type(LE, false).0,
                        r.r_sym(LE, false),
                        Some(r.r_addend(LE)),
                    );
                }
            } else {
                let rel: &[object::elf::Rel64<LE>] = sh
                    .data_as_array(LE, data)
                    .map_err(elf_error("ELF relocation table lies outside the file"))?;
                for r in rel {
                    use object::read::elf::Rel;
                    push(r.r_offset(LE), r.r_type(LE).0, r.r_sym(LE), None);
                }
            }
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
            n => match self.elf_type {
                ElfType::Relocatable => self
                    .base_of(usize::from(n))
                    .map(|b| b.wrapping_add(sym.st_value(LE)))
                    .ok_or(name),
                _ => Ok(sym.st_value(LE)),
            },
        }
    }

    fn read_symbols(&mut self, table: &SectionTable<'d, FileHeader64<LE>>) -> Result<()> {
        let Ok(symtab) = table.symbols(LE, self.data, object::elf::SHT_SYMTAB) else {
            return Ok(());
        };
        let mut symbols = Vec::new();
        for sym in symtab.iter() {
            let sym: &Sym64<LE> = sym;
            let shndx = sym.st_shndx(LE).0;
            if shndx == 0 || shndx >= 0xff00 {
                continue;
            }
            let Ok(name) = sym.name(LE, symtab.strings()) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let addr = match self.elf_type {
                ElfType::Relocatable => match self.base_of(usize::from(shndx)) {
                    Some(b) => b.wrapping_add(sym.st_value(LE)),
                    None => continue,
                },
                _ => sym.st_value(LE),
            };
            symbols.push((addr, name, usize::from(shndx)));
        }
        symbols.sort_by_key(|s| s.0);
        self.symbols = symbols;
        Ok(())
    }

    fn raw_u64(&self, addr: u64) -> Option<u64> {
        let b = self.bytes_from(addr)?.get(..8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// The file type.
    pub fn elf_type(&self) -> ElfType {
        self.elf_type
    }

    /// `e_machine`.
    pub fn machine(&self) -> u16 {
        self.machine
    }

    /// The file's bytes.
    pub fn data(&self) -> &'d [u8] {
        self.data
    }

    /// Every section, in section-table order.
    pub fn sections(&self) -> &[Section<'d>] {
        &self.sections
    }

    /// The mapped section containing `addr`, and the offset of `addr` in it.
    pub fn section_at(&self, addr: u64) -> Option<(&Section<'d>, u64)> {
        let pos = self
            .mapped
            .partition_point(|&i| self.sections.get(i).is_some_and(|s| s.address <= addr));
        let i = *self.mapped.get(pos.checked_sub(1)?)?;
        let s = self.sections.get(i)?;
        let off = addr.checked_sub(s.address)?;
        s.holds(addr).then_some((s, off))
    }

    /// The first section named `name`.
    pub fn section_by_name(&self, name: &[u8]) -> Option<&Section<'d>> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// The name of a symbol defined at `addr` (from `.symtab`), if any. Section symbols and
    /// file symbols have no name and are not returned. When `addr` lies in a section, only
    /// that section's symbols count: a zero-sized symbol at the end of the section before
    /// (the wrapper's `__dummy.llvm_offload_entries`, a `__stop_` bound) has the same
    /// address but names nothing there.
    pub fn symbol_at(&self, addr: u64) -> Option<&'d [u8]> {
        let section = self.section_at(addr).map(|(s, _)| s.index);
        let pos = self.symbols.partition_point(|s| s.0 < addr);
        self.symbols
            .get(pos..)?
            .iter()
            .take_while(|s| s.0 == addr)
            .filter(|s| section.is_none_or(|i| s.2 == i))
            .map(|s| s.1)
            .find(|n| !n.starts_with(b"__start_") && !n.starts_with(b"__stop_"))
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
        let mut out = Vec::new();
        for s in &self.sections {
            if !WRAPPER_SECTIONS.contains(&s.name) {
                continue;
            }
            let n = u64_of(s.data.len()) / FATBIN_WRAPPER_SIZE;
            for i in 0..n {
                let Some(address) = i
                    .checked_mul(FATBIN_WRAPPER_SIZE)
                    .and_then(|o| s.address.checked_add(o))
                else {
                    break;
                };
                out.push(WrapperSlot {
                    address,
                    section: s.name,
                    index: usize::try_from(i).unwrap_or(usize::MAX),
                    symbol: self.symbol_at(address),
                });
            }
        }
        out
    }

    /// The offload-entry sections, in section order.
    pub fn entry_sections(&self) -> Vec<EntrySection<'d>> {
        self.sections
            .iter()
            .filter_map(|s| {
                let (_, kind) = ENTRY_SECTIONS.iter().find(|(n, _)| *n == s.name)?;
                Some(EntrySection {
                    name: s.name,
                    begin: s.address,
                    end: s.address.saturating_add(s.size),
                    legacy_kind: *kind,
                })
            })
            .collect()
    }

    /// The `.llvm.offloading` sections (by type `SHT_LLVM_OFFLOADING` or by name), with
    /// whether they are loaded with the program (`SHF_ALLOC`; per-TU sections of objects
    /// are `SHF_EXCLUDE` link inputs).
    pub fn offloading_sections(&self) -> Vec<&Section<'d>> {
        self.sections
            .iter()
            .filter(|s| {
                s.sh_type == crate::container::SHT_LLVM_OFFLOADING
                    || s.name.starts_with(b".llvm.offloading")
            })
            .collect()
    }

    /// Addresses of the `__tgt_bin_desc` records of the file, in address order, found by
    /// structure (see the module documentation). Only linked files have descriptors.
    ///
    /// The pointer slots of the file are indexed by value once, so the search takes
    /// O((slots + tables) log slots) whatever the number of entry sections.
    pub fn descriptors(&self, options: &ReadOptions) -> Vec<u64> {
        if self.elf_type == ElfType::Relocatable {
            return Vec::new();
        }
        let index = self.slot_index();
        let mut prefixes = BTreeMap::new();
        let mut out = BTreeSet::new();
        let tables: BTreeSet<(u64, u64)> = self
            .entry_sections()
            .iter()
            .map(|t| (t.begin, t.end))
            .collect();
        for (begin, end) in tables {
            // Slots holding the table's start: a descriptor's `HostEntriesBegin` at +16.
            for at in index.slots_holding(begin, begin.saturating_add(1)) {
                let Some(d) = at.checked_sub(16) else {
                    continue;
                };
                if d.is_multiple_of(8)
                    && !out.contains(&d)
                    && self.is_descriptor(d, Some((begin, end)), options, &mut prefixes)
                {
                    out.insert(d);
                }
            }
        }
        // Modules without entries: slots pointing into `.llvm.offloading` are candidate
        // first images (`ImageStart` at +0 of the array), slots holding such an array's
        // address candidate descriptors (`DeviceImages` at +8).
        let mut arrays: Vec<u64> = self
            .offloading_sections()
            .iter()
            .filter(|s| s.flags & SHF_ALLOC != 0)
            .flat_map(|s| {
                index.slots_holding(s.address, s.address.saturating_add(u64_of(s.data.len())))
            })
            .collect();
        arrays.sort_unstable();
        arrays.dedup();
        let mut candidates: Vec<u64> = arrays
            .iter()
            .flat_map(|&a| index.slots_holding(a, a.saturating_add(1)))
            .filter_map(|at| at.checked_sub(8))
            .filter(|d| d.is_multiple_of(8))
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        for d in candidates {
            if !out.contains(&d) && self.is_descriptor(d, None, options, &mut prefixes) {
                out.insert(d);
            }
        }
        out.into_iter().collect()
    }

    /// Every pointer slot with its value: relocated slots, and in fixed-address executables
    /// (absolute pointers without relocations) every non-zero 8-byte word of the writable
    /// loaded sections.
    fn slot_index(&self) -> SlotIndex {
        let mut pairs: Vec<(u64, u64)> = self
            .relocs
            .iter()
            .filter_map(|r| match r.value {
                Value::Known(v) => Some((v, r.at)),
                Value::Undefined(_) => None,
            })
            .collect();
        if self.elf_type == ElfType::Executable {
            for s in &self.sections {
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
        SlotIndex(pairs)
    }

    /// True if `at` holds a descriptor whose images all share its entry range, and that
    /// range is `table` (`[begin, end)` of an entry section) or, with `None`, empty.
    ///
    /// `prefixes` remembers, per image array and entry range, how many leading images are
    /// valid, so descriptors sharing an array cost one walk of it.
    fn is_descriptor(
        &self,
        at: u64,
        table: Option<(u64, u64)>,
        options: &ReadOptions,
        prefixes: &mut BTreeMap<(u64, u64, u64), u64>,
    ) -> bool {
        let last = at.checked_add(BIN_DESC_SIZE - 1);
        if last.and_then(|l| self.section_at(l)).is_none() {
            return false;
        }
        let Ok(d) = Descriptor::read(self, at, options) else {
            return false;
        };
        let (begin, end) = (d.entries.begin, d.entries.end);
        let entries_ok = match table {
            Some(t) => (begin, end) == t,
            None => begin == end,
        };
        if d.num_device_images == 0 || !entries_ok {
            return false;
        }
        let valid = *prefixes
            .entry((d.device_images, begin, end))
            .or_insert_with(|| {
                let probe = Descriptor {
                    num_device_images: u32::try_from(options.limits.max_entries)
                        .unwrap_or(u32::MAX),
                    ..d
                };
                let ok = probe.images(self).take_while(|i| {
                    i.as_ref().is_ok_and(|i| {
                        i.entries_begin == begin && i.entries_end == end && i.bytes(self).is_ok()
                    })
                });
                u64_of(ok.count())
            });
        u64::from(d.num_device_images) <= valid
    }
}

impl<'d> AddressSpace<'d> for HostElf<'d> {
    fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        let (s, off) = self.section_at(addr)?;
        s.data.get(usize::try_from(off).ok()?..)
    }

    fn pointer_at(&self, addr: u64) -> Result<u64> {
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

/// `st_other` bit of a cubin's kernel entry points.
const STO_CUDA_ENTRY: u8 = 0x10;
/// `STT_FUNC`.
const STT_FUNC: u8 = 2;

/// A kernel or variable a device code object exports (its dynamic symbols).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceSymbol<'d> {
    /// The name (for kernels: without the `.kd` suffix of the kernel descriptor).
    pub name: &'d [u8],
    /// Symbol size (kernels: the size of the kernel descriptor, 64).
    pub size: u64,
}

/// The kernels of an AMDGPU code object: its defined `<name>.kd` kernel-descriptor
/// symbols (what CLR looks a registered kernel up by), in symbol-table order. Uses the
/// dynamic symbol table (what the ROCr loader sees), else `.symtab`. A code object
/// without symbols has no kernels; a non-ELF image (bitcode) gives an empty list.
///
/// For a cubin (`EM_CUDA`): its defined global functions marked as entry points
/// (`st_other` bit `0x10`, `STO_CUDA_ENTRY`: what `readelf` prints as `[<other>: 10]`),
/// with their code size.
pub fn device_kernels(image: &[u8]) -> Result<Vec<DeviceSymbol<'_>>> {
    if !image.starts_with(crate::raw::ELF_MAGIC) {
        return Ok(Vec::new());
    }
    let h =
        FileHeader64::<LE>::parse(image).map_err(elf_error("device ELF header is malformed"))?;
    let table: SectionTable<'_, FileHeader64<LE>> = h
        .sections(LE, image)
        .map_err(elf_error("device ELF section header table is malformed"))?;
    let mut symtab = table
        .symbols(LE, image, object::elf::SHT_DYNSYM)
        .map_err(elf_error("device ELF symbol table is malformed"))?;
    if symtab.is_empty() {
        symtab = table
            .symbols(LE, image, object::elf::SHT_SYMTAB)
            .map_err(elf_error("device ELF symbol table is malformed"))?;
    }
    let cuda = h.e_machine(LE).0 == crate::target::elf::EM_CUDA;
    let mut out = Vec::new();
    for sym in symtab.iter() {
        let sym: &Sym64<LE> = sym;
        if sym.st_shndx(LE).0 == 0 || sym.st_bind().0 == 0 {
            continue;
        }
        let Ok(name) = sym.name(LE, symtab.strings()) else {
            continue;
        };
        if cuda {
            if sym.st_type().0 == STT_FUNC && sym.st_other().0 & STO_CUDA_ENTRY != 0 {
                out.push(DeviceSymbol {
                    name,
                    size: sym.st_size(LE),
                });
            }
        } else if let Some(kernel) = name.strip_suffix(b".kd") {
            out.push(DeviceSymbol {
                name: kernel,
                size: sym.st_size(LE),
            });
        }
    }
    Ok(out)
}
