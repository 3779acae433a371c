//! Registration data in ELF files, found statically (`REGISTRATION.md` §7).
//!
//! The host file itself is read by [`crate::host`]: [`HostElf`] (re-exported here) is the
//! address space over an ELF executable, shared library or object, with its wrappers,
//! entry tables and descriptors. This module adds what registration reads from the device
//! images: their kernels ([`device_kernels`]).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use object::elf::{FileHeader64, Sym64};
use object::read::elf::{FileHeader, SectionTable, Sym};
use object::LittleEndian as LE;

use crate::bytes::u64_of;
use crate::error::{Error, ErrorKind, Result};
use crate::host::{FileKind, HostFile};
use crate::options::ReadOptions;

use super::abi::BIN_DESC_SIZE;
use super::view::{AddressSpace, Descriptor};

pub use crate::host::elf::HostElf;
pub use crate::host::FileKind as ElfType;
pub use crate::host::{EntrySection, Section, WrapperSlot, ENTRY_SECTIONS, WRAPPER_SECTIONS};

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

/// Addresses of the `__tgt_bin_desc` records of a host file, in address order, found
/// by structure (`host::elf` documents the rule). Only linked files have descriptors.
///
/// The pointer slots of the file are indexed by value once, so the search takes
/// O((slots + tables) log slots) whatever the number of entry sections.
pub fn descriptors(host: &HostFile<'_>, options: &ReadOptions) -> Vec<u64> {
    if host.kind() == FileKind::Relocatable {
        return Vec::new();
    }
    let index = SlotIndex(host.pointer_slots());
    let mut prefixes = BTreeMap::new();
    let mut out = BTreeSet::new();
    let tables: BTreeSet<(u64, u64)> = host
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
                && is_descriptor(host, d, Some((begin, end)), options, &mut prefixes)
            {
                out.insert(d);
            }
        }
    }
    // Modules without entries: slots pointing into `.llvm.offloading` are candidate
    // first images (`ImageStart` at +0 of the array), slots holding such an array's
    // address candidate descriptors (`DeviceImages` at +8).
    let mut arrays: Vec<u64> = host
        .offloading_sections()
        .iter()
        .filter(|s| s.mapped)
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
        if !out.contains(&d) && is_descriptor(host, d, None, options, &mut prefixes) {
            out.insert(d);
        }
    }
    out.into_iter().collect()
}

/// True if `at` holds a descriptor whose images all share its entry range, and that
/// range is `table` (`[begin, end)` of an entry section) or, with `None`, empty.
///
/// `prefixes` remembers, per image array and entry range, how many leading images are
/// valid, so descriptors sharing an array cost one walk of it.
fn is_descriptor(
    host: &HostFile<'_>,
    at: u64,
    table: Option<(u64, u64)>,
    options: &ReadOptions,
    prefixes: &mut BTreeMap<(u64, u64, u64), u64>,
) -> bool {
    let last = at.checked_add(BIN_DESC_SIZE - 1);
    if last.and_then(|l| host.section_at(l)).is_none() {
        return false;
    }
    let Ok(d) = Descriptor::read(host, at, options) else {
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
                num_device_images: u32::try_from(options.limits.max_entries).unwrap_or(u32::MAX),
                ..d
            };
            let ok = probe.images(host).take_while(|i| {
                i.as_ref().is_ok_and(|i| {
                    i.entries_begin == begin && i.entries_end == end && i.bytes(host).is_ok()
                })
            });
            u64_of(ok.count())
        });
    u64::from(d.num_device_images) <= valid
}

impl<'d> AddressSpace<'d> for HostElf<'d> {
    fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        HostElf::bytes_from(self, addr)
    }

    fn pointer_at(&self, addr: u64) -> Result<u64> {
        HostElf::pointer_at(self, addr)
    }
}

impl<'d> AddressSpace<'d> for HostFile<'d> {
    fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        HostFile::bytes_from(self, addr)
    }

    fn pointer_at(&self, addr: u64) -> Result<u64> {
        HostFile::pointer_at(self, addr)
    }
}

fn elf_error(what: &'static str) -> impl Fn(object::read::Error) -> Error {
    move |_| Error::new(ErrorKind::BadContainer, 0, what)
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
    let mut out = Vec::new();
    kernel_symbols(image, false, &mut |k| {
        out.push(k);
        true
    })?;
    Ok(out)
}

/// Whether a device code object holds any kernel: as [`device_kernels`], but local kernels
/// count too (a `static __global__` function is a local entry point, which its unit's
/// registration still makes launchable).
pub fn has_kernels(image: &[u8]) -> Result<bool> {
    let mut found = false;
    kernel_symbols(image, true, &mut |_| {
        found = true;
        false
    })?;
    Ok(found)
}

/// Calls `each` with every kernel symbol of `image` (global ones, and local ones with
/// `local`) until it returns false.
fn kernel_symbols<'d>(
    image: &'d [u8],
    local: bool,
    each: &mut dyn FnMut(DeviceSymbol<'d>) -> bool,
) -> Result<()> {
    if !image.starts_with(crate::raw::ELF_MAGIC) {
        return Ok(());
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
    let cuda = h.e_machine(LE).0 == crate::raw::EM_CUDA;
    for sym in symtab.iter() {
        let sym: &Sym64<LE> = sym;
        if sym.st_shndx(LE).0 == 0 || (sym.st_bind().0 == 0 && !local) {
            continue;
        }
        let Ok(name) = sym.name(LE, symtab.strings()) else {
            continue;
        };
        let kernel = if cuda {
            (sym.st_type().0 == STT_FUNC && sym.st_other().0 & STO_CUDA_ENTRY != 0).then_some(name)
        } else {
            name.strip_suffix(b".kd")
        };
        if let Some(name) = kernel {
            let more = each(DeviceSymbol {
                name,
                size: sym.st_size(LE),
            });
            if !more {
                break;
            }
        }
    }
    Ok(())
}
