//! `register FILE` without `--load` (`CLI.md`): a host executable, shared library or
//! object read as the program would be in memory ([`HostFile`]), and the registration calls
//! its constructors would make: `__hipRegisterFatBinary` for every `.hipFatBinSegment`
//! wrapper (in section order; a split library's `HIPK` wrappers through the kpack loader),
//! then `__tgt_register_lib` for every descriptor (in address order), on a simulated
//! runtime ([`Registry`]).

use std::collections::BTreeSet;
use std::path::Path;

use loader_sim_rt::report::{unit_records, Record, RecordOptions};
use offload_image::host::{EntrySection, FileKind, HostFile, WrapperSlot};
use offload_image::registration::{
    descriptors, EntryTable, FatbinWrapperView, RegistrationKind, Registry, RegistryOptions,
    SimulatedDevice, UnitId,
};
use offload_image::{Policy, ReadOptions};

use crate::input::Input;
use crate::Failure;

/// `<section>+<offset>` for an address of `elf`.
fn place(elf: &HostFile<'_>, addr: u64) -> String {
    match elf.section_at(addr) {
        Some((s, off)) => format!("{}+{off:#x}", String::from_utf8_lossy(s.name)),
        None => format!("{addr:#x}"),
    }
}

/// Writes a note about `file` to standard error.
pub(crate) fn note(file: &Path, what: impl std::fmt::Display) {
    crate::output::stderr_line(format_args!("loader-sim: note: {}: {what}", file.display()));
}

/// `register FILE`: reads `file` as the program would be in memory ([`HostFile`]) and
/// makes the registration calls its constructors would make for `devices` (read with
/// `read`, choosing by `policy`, `None` for each runtime's own), giving the records of every
/// unit (with `explain`, every image not chosen and why). What nothing registers is noted
/// on standard error.
pub(crate) fn statically(
    file: &Path,
    devices: Vec<SimulatedDevice>,
    read: ReadOptions,
    policy: Option<Policy>,
    explain: bool,
) -> Result<Vec<Record>, Failure> {
    let input = Input::open(file)?;
    let elf = HostFile::parse(input.bytes()).map_err(|e| {
        Failure::file(
            file,
            format!("{e} (register reads host ELF executables, shared libraries and objects)"),
        )
        .at(&e)
    })?;
    let targets: Vec<(String, Option<String>)> = devices
        .iter()
        .map(|d| (d.name().to_string(), crate::kpack::isa_name(d.device())))
        .collect();
    let registry = Registry::new(
        devices,
        RegistryOptions {
            read,
            policy,
            ..RegistryOptions::default()
        },
    );
    let mut s = Static {
        explain,
        file,
        elf: &elf,
        registry,
        read,
        units: Vec::new(),
        seen: BTreeSet::new(),
        records: Vec::new(),
    };
    // A split library's `HIPK` wrappers: the runtime hands each to rocm-kpack's loader,
    // which finds the code object in the archives installed beside the library.
    let split = crate::kpack::Library::open(file, input.bytes());
    let split_units = s.wrappers(split.as_ref(), &targets)?;
    s.descriptors()?;
    s.section_notes();
    if s.units.is_empty() && split_units == 0 {
        note(file, "no registration units found");
    }
    Ok(s.records)
}

/// A static registration in progress ([`statically`]): the host file as its program would
/// be in memory, the simulated runtime, and what was registered so far.
struct Static<'a, 'd> {
    explain: bool,
    file: &'a Path,
    elf: &'a HostFile<'d>,
    registry: Registry<'d>,
    read: ReadOptions,
    /// (unit, label, address, entries come from the device image)
    units: Vec<(UnitId, String, u64, bool)>,
    seen: BTreeSet<UnitId>,
    records: Vec<Record>,
}

impl Static<'_, '_> {
    /// Registers every fat-binary wrapper, in section order: a split library's `HIPK`
    /// wrappers through the kpack loader (`targets`: each device's name and ISA name).
    /// Returns the number of those.
    fn wrappers(
        &mut self,
        split: Option<&crate::kpack::Library<'_>>,
        targets: &[(String, Option<String>)],
    ) -> Result<usize, Failure> {
        let elf = self.elf;
        let env = crate::kpack::Env::from_process();
        let mut archives = crate::kpack::Archives::default();
        let mut split_units = 0usize;
        let hip_tables: Vec<_> = elf
            .entry_sections()
            .into_iter()
            .filter(|t| t.name == b"hip_offloading_entries" || t.name == b"llvm_offload_entries")
            .collect();
        for slot in elf.fat_binary_wrappers() {
            if let Some((lib, i)) = split.and_then(|l| Some((l, l.wrapper_at(slot.address)?))) {
                let address = lib.ref_address(i).unwrap_or(slot.address);
                let unit = format!("{} (kpack)", place(elf, address));
                for (name, isa) in targets {
                    let arches: Vec<&str> = isa.as_deref().into_iter().collect();
                    let r = lib.resolve_wrapper(i, &arches, &env, &mut archives, &self.read);
                    let record = crate::kpack::record(&r, name, &unit, address, true);
                    self.records.push(record);
                }
                split_units += 1;
                continue;
            }
            self.fat_binary(&slot, &hip_tables)?;
        }
        Ok(split_units)
    }

    /// Registers the fat binary of the wrapper at `slot` as its constructor would
    /// (`__hipRegisterFatBinary`), with the entry tables `hip_tables` when the new driver
    /// wrote it; a wrapper of relocatable device code, or of a fat binary the device link
    /// provides, is noted and skipped.
    fn fat_binary(
        &mut self,
        slot: &WrapperSlot<'_>,
        hip_tables: &[EntrySection<'_>],
    ) -> Result<(), Failure> {
        let (elf, file) = (self.elf, self.file);
        let at = place(elf, slot.address);
        if let Ok(w) = FatbinWrapperView::read(elf, slot.address) {
            if w.is_link_input(elf.section_at(w.binary).map(|(s, _)| s.role())) {
                note(
                    file,
                    format!(
                        "fat-binary wrapper at {at} points at relocatable device code ({}): its constructor hands it to __cudaRegisterLinkedBinary, which keeps it for the device link; the runtime registers the linked fat binary instead",
                        place(elf, w.binary)
                    ),
                );
                return Ok(());
            }
        }
        let id = match self.registry.register_fat_binary(elf, slot.address) {
            Ok(id) => id,
            Err(e) => {
                if let Some(sym) = elf.undefined_target(slot.address + 8) {
                    note(
                        file,
                        format!(
                            "fat-binary wrapper at {at} points at {}, which this file does not define (the device link provides it); not registered",
                            String::from_utf8_lossy(sym)
                        ),
                    );
                    return Ok(());
                }
                return Err(Failure::file(file, format!("wrapper at {at}: {e}")).at(&e));
            }
        };
        let Some(reg) = self.registry.get(id) else {
            return Ok(());
        };
        let binary = reg.binary();
        // The new driver's wrapper registers the entry table; clang codegen's wrapper
        // registers each kernel from code, which a static reader cannot run.
        let new_driver = slot.is_new_driver() || (slot.symbol.is_none() && !hip_tables.is_empty());
        let first = self.seen.insert(id);
        if new_driver && elf.kind() != FileKind::Relocatable && first {
            for t in hip_tables {
                let table = EntryTable::read(elf, t.begin, t.end, self.read.limits.max_entries)
                    .and_then(|table| self.registry.add_entries(id, elf, &table, t.legacy_kind));
                if let Err(e) = table {
                    return Err(Failure::file(
                        file,
                        format!("entry table {}: {e}", String::from_utf8_lossy(t.name)),
                    )
                    .at(&e));
                }
            }
        }
        if first {
            self.units
                .push((id, place(elf, binary), binary, !new_driver));
            self.report();
        }
        Ok(())
    }

    /// Registers every `__tgt_bin_desc` (in address order) as `__tgt_register_lib` would.
    fn descriptors(&mut self) -> Result<(), Failure> {
        let elf = self.elf;
        for desc in descriptors(elf, &self.read) {
            let id = self.registry.register_lib(elf, desc).map_err(|e| {
                Failure::file(
                    self.file,
                    format!("__tgt_bin_desc at {}: {e}", place(elf, desc)),
                )
                .at(&e)
            })?;
            if self.seen.insert(id) {
                let label = format!("__tgt_bin_desc {}", place(elf, desc));
                self.units.push((id, label, desc, false));
                self.report();
            }
        }
        Ok(())
    }

    /// Notes the offloading sections nothing registers: link-time device code of a
    /// relocatable object, or sections no descriptor refers to.
    fn section_notes(&self) {
        let relocatable = self.elf.kind() == FileKind::Relocatable;
        let has_descriptor = self.units.iter().any(|u| {
            self.registry
                .get(u.0)
                .is_some_and(|r| r.kind() == RegistrationKind::OpenMp)
        });
        for s in self.elf.offloading_sections() {
            let name = String::from_utf8_lossy(s.name);
            if relocatable {
                // SHF_EXCLUDE: a translation unit's device code for the device link; loaded
                // (SHF_ALLOC): the images of a registration wrapper (`loader-sim wrap`,
                // `clang-linker-wrapper`), whose descriptor points at entry-table bounds only
                // the final link defines.
                const SHF_EXCLUDE: u64 = 0x8000_0000;
                let what = if s.flags & SHF_EXCLUDE != 0 {
                    "holds link-time device code"
                } else {
                    "holds the device images of a registration wrapper"
                };
                let text = format!("section {name} {what}; it is registered only once linked");
                note(self.file, text);
            } else if !has_descriptor {
                let text = format!("section {name} is not referenced by any __tgt_bin_desc found");
                note(self.file, text);
            }
        }
    }

    /// [`report`] on the unit registered last.
    fn report(&mut self) {
        let explain = self.explain;
        report(
            &mut self.registry,
            &mut self.records,
            self.units.last(),
            explain,
        );
    }
}

/// Appends the records of a unit that is complete (registered, entries bound) and drops its
/// images: only one unit's decompressed content is alive at a time.
fn report(
    registry: &mut Registry<'_>,
    records: &mut Vec<Record>,
    unit: Option<&(UnitId, String, u64, bool)>,
    explain: bool,
) {
    let Some((id, label, address, device_entries)) = unit else {
        return;
    };
    if let Some(reg) = registry.get(*id) {
        records.extend(unit_records(
            registry,
            reg,
            label,
            *address,
            RecordOptions {
                device_entries: *device_entries,
                explain,
            },
        ));
    }
    registry.release(*id);
}
