//! `loader-sim register FILE --device T... [--json]` and
//! `loader-sim register --load LIB --device T... [--json]`.
//!
//! Static mode reads FILE (a host executable, shared library or object) as the program
//! would be in memory ([`HostFile`]) and makes the registration calls its constructors
//! would make: `__hipRegisterFatBinary` for every `.hipFatBinSegment` wrapper (in section
//! order), then `__tgt_register_lib` for every descriptor (in address order).
//!
//! `--load` runs a child process (`loader-sim __load LIB`) in which the runtime shim
//! `libloader_sim_rt.so` is found under the names of the runtimes (`libamdhip64.so.5`/`.6`/`.7`, ...; symlinks in a
//! temporary directory put first on `LD_LIBRARY_PATH`), loads LIB with its dependencies so
//! that LIB's own constructors register their device code, and prints what the shim
//! reported at unregistration / exit.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use loader_sim_rt::report::{unit_records, Record, RecordOptions};
use offload_image::host::{EntrySection, FileKind, HostFile, WrapperSlot};
use offload_image::registration::{
    descriptors, EntryTable, FatbinWrapperView, RegistrationKind, Registry, RegistryOptions,
    SimulatedDevice, UnitId,
};
use offload_image::Policy;
use offload_image::ReadOptions;

use crate::input::Input;
use crate::output::{json_line, table};
use crate::{Failure, Outcome};

/// Arguments of `register`.
#[derive(clap::Args)]
pub struct Args {
    /// The host executable, shared library or object to read (not with --load).
    #[arg(required_unless_present = "load", conflicts_with = "load")]
    file: Option<PathBuf>,
    /// Load this shared library with the runtime shim in place and report what its
    /// constructors register.
    #[arg(long, value_name = "LIB")]
    load: Option<PathBuf>,
    /// A simulated device: a target as a runtime detects it (gfx90a:sramecc+:xnack-, sm_80).
    #[arg(long = "device", value_name = "TARGET", required = true)]
    devices: Vec<String>,
    /// How a device picks among compatible images: the registering runtime's own rule,
    /// the ranking of COMPATIBILITY.md §10, or the first compatible image.
    #[arg(long, value_enum, default_value = "runtime")]
    policy: PolicyArg,
    /// Also list every image not chosen and why.
    #[arg(long)]
    explain: bool,
    /// Write JSON Lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Do not verify the truncated MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
    /// The runtime shim to load with --load (default: libloader_sim_rt.so next to this
    /// program, in its deps/ directory, or in ../lib of an installation).
    #[arg(long, value_name = "SO")]
    shim: Option<PathBuf>,
}

/// `--policy`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PolicyArg {
    /// Ranking for HIP/CUDA fat binaries, first compatible for OpenMP descriptors.
    Runtime,
    /// The ranking of COMPATIBILITY.md §10.
    Best,
    /// The first compatible image in discovery order.
    First,
    /// Native, then generic, then SPIR-V code; first in discovery order within a class
    /// (ROCm CLR).
    FirstByClass,
}

impl PolicyArg {
    fn policy(self) -> Option<Policy> {
        match self {
            PolicyArg::Runtime => None,
            PolicyArg::Best => Some(Policy::Best),
            PolicyArg::First => Some(Policy::First),
            PolicyArg::FirstByClass => Some(Policy::FirstByClass),
        }
    }

    fn env(self) -> &'static str {
        match self {
            PolicyArg::Runtime => "runtime",
            PolicyArg::Best => "best",
            PolicyArg::First => "first",
            PolicyArg::FirstByClass => "first-by-class",
        }
    }
}

/// Runs `register`.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> Result<Outcome, Failure> {
    let devices = args
        .devices
        .iter()
        .map(|d| {
            SimulatedDevice::parse(d)
                .map_err(|e| Failure::msg(format!("invalid --device '{d}': {}", e.what())))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let records = match (&args.load, &args.file) {
        (Some(lib), _) => load(args, lib)?,
        (None, Some(file)) => statically(args, file, devices)?,
        (None, None) => return Err(Failure::msg("give FILE or --load LIB".into())),
    };
    print(args, &records, out)?;
    Ok(if records.iter().any(|r| r.selected.is_none()) {
        Outcome::NoMatch
    } else {
        Outcome::Ok
    })
}

fn read_options(args: &Args) -> ReadOptions {
    crate::decode::read_options(crate::decode::ZstdDecoder::DEFAULT, !args.no_verify_hash)
}

/// `<section>+<offset>` for an address of `elf`.
fn place(elf: &HostFile<'_>, addr: u64) -> String {
    match elf.section_at(addr) {
        Some((s, off)) => format!("{}+{off:#x}", String::from_utf8_lossy(s.name)),
        None => format!("{addr:#x}"),
    }
}

fn note(file: &Path, what: impl std::fmt::Display) {
    crate::output::stderr_line(format_args!("loader-sim: note: {}: {what}", file.display()));
}

fn statically(
    args: &Args,
    file: &Path,
    devices: Vec<SimulatedDevice>,
) -> Result<Vec<Record>, Failure> {
    let input = Input::open(file)?;
    let elf = HostFile::parse(input.bytes()).map_err(|e| {
        Failure::file(
            file,
            format!("{e} (register reads host ELF executables, shared libraries and objects)"),
        )
        .at(&e)
    })?;
    let read = read_options(args);
    let targets: Vec<(String, Option<String>)> = devices
        .iter()
        .map(|d| (d.name().to_string(), crate::kpack::isa_name(d.device())))
        .collect();
    let registry = Registry::new(
        devices,
        RegistryOptions {
            read,
            policy: args.policy.policy(),
            ..RegistryOptions::default()
        },
    );
    let mut s = Static {
        args,
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
    args: &'a Args,
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
        let explain = self.args.explain;
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

/// The runtime shim: `--shim`, else next to this program or in its `deps/` directory
/// (where cargo puts it when it builds `loader-sim`, which depends on the shim's crate).
fn find_shim(args: &Args) -> Result<PathBuf, Failure> {
    if let Some(s) = &args.shim {
        return Ok(s.clone());
    }
    let exe = std::env::current_exe()
        .map_err(|e| Failure::msg(format!("cannot locate this program: {e}")))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    // Inside a cargo target directory the first two may exist; the newer one is this
    // build's. An installation (scripts/install.sh) puts it in <prefix>/lib.
    [
        dir.join("libloader_sim_rt.so"),
        dir.join("deps/libloader_sim_rt.so"),
        dir.join("../lib/libloader_sim_rt.so"),
    ]
    .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
        .ok_or_else(|| {
            Failure::msg(format!(
                "runtime shim libloader_sim_rt.so not found next to {} or in ../lib (build the workspace: cargo build --release, or install with scripts/install.sh), or give --shim",
                exe.display()
            ))
        })
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<Self, Failure> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("loader-sim-load-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| Failure::msg(format!("cannot create {}: {e}", dir.display())))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Names under which programs look for the runtimes the shim stands in for.
const SHIM_NAMES: [&str; 6] = [
    "libamdhip64.so.5",
    "libamdhip64.so.6",
    "libamdhip64.so.7",
    "libamdhip64.so",
    "libomptarget.so",
    "libcudart.so.13",
];

fn load(args: &Args, lib: &Path) -> Result<Vec<Record>, Failure> {
    let shim = find_shim(args)?;
    let shim = shim
        .canonicalize()
        .map_err(|e| Failure::file(&shim, format!("cannot open: {e}")))?;
    // An absolute path: dlopen searches the library path for a name without a slash.
    let lib_abs = lib
        .canonicalize()
        .map_err(|e| Failure::file(lib, format!("cannot open: {e}")))?;
    let tmp = TempDir::new()?;
    for name in SHIM_NAMES {
        #[cfg(unix)]
        let linked = std::os::unix::fs::symlink(&shim, tmp.0.join(name));
        #[cfg(not(unix))]
        let linked = std::fs::copy(&shim, tmp.0.join(name)).map(|_| ());
        linked.map_err(|e| Failure::msg(format!("cannot link the shim as {name}: {e}")))?;
    }
    let report = tmp.0.join("report.jsonl");
    let mut path = std::ffi::OsString::from(&tmp.0);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        path.push(":");
        path.push(old);
    }
    let exe = std::env::current_exe()
        .map_err(|e| Failure::msg(format!("cannot locate this program: {e}")))?;
    let child = Command::new(exe)
        .arg("__load")
        .arg(&lib_abs)
        .env("LD_LIBRARY_PATH", path)
        .env("LOADER_SIM_DEVICES", args.devices.join(","))
        .env("LOADER_SIM_REPORT", &report)
        .env("LOADER_SIM_POLICY", args.policy.env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| Failure::msg(format!("cannot start the loader process: {e}")))?;
    let stderr = String::from_utf8_lossy(&child.stderr);
    if !child.status.success() {
        // The child's own one-line error (dlopen's message), else its exit status.
        let why = stderr
            .lines()
            .find_map(|l| l.strip_prefix("loader-sim: error: "))
            .map(|l| {
                // "<path>: <dlerror>", where dlerror itself starts with the path.
                let abs = format!("{}: ", lib_abs.display());
                let l = l.strip_prefix(&abs).unwrap_or(l);
                l.strip_prefix(&abs).unwrap_or(l).to_string()
            })
            .unwrap_or_else(|| format!("the loader process failed ({})", child.status));
        return Err(Failure::file(lib, format!("cannot load: {why}")));
    }
    // The shim's diagnostics (refused registrations, ...) pass through.
    eprint!("{stderr}");
    let text = match std::fs::read_to_string(&report) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Failure::file(&report, format!("cannot read: {e}"))),
    };
    let records = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Record>(l)
                .map_err(|e| Failure::file(&report, format!("bad record: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if records.is_empty() {
        note(lib, "nothing was registered");
    }
    Ok(records)
}

/// `loader-sim __load LIB` (internal): the child of `register --load`.
pub fn load_child(lib: &Path) -> Result<Outcome, Failure> {
    loader_sim_os::load_library(lib).map_err(|e| Failure::file(lib, e))?;
    Ok(Outcome::Ok)
}

fn print(args: &Args, records: &[Record], mut out: &mut dyn std::io::Write) -> Result<(), Failure> {
    let written = if args.json {
        records.iter().try_for_each(|r| json_line(&mut out, r))
    } else {
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|r| {
                let dash = || "-".to_string();
                vec![
                    r.device.clone().unwrap_or_else(dash),
                    r.unit.clone(),
                    r.registration.clone(),
                    r.selected
                        .clone()
                        .or_else(|| r.error.clone())
                        .unwrap_or_else(dash),
                    r.size.map_or_else(dash, |s| s.to_string()),
                    r.sha256.clone().unwrap_or_else(dash),
                    entries_cell(r),
                ]
            })
            .collect();
        table(
            &mut out,
            &[
                "DEVICE",
                "UNIT",
                "REGISTRATION",
                "SELECTED",
                "SIZE",
                "SHA256",
                "ENTRIES",
            ],
            &rows,
        )
    };
    written
        .and_then(|_| out.flush())
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))
}

fn entries_cell(r: &Record) -> String {
    const SHOWN: usize = 3;
    let names: Vec<&str> = r
        .entries
        .iter()
        .take(SHOWN)
        .map(|e| e.name.as_str())
        .collect();
    let mut cell = format!("{} ({})", r.entries.len(), r.entries_from);
    if !names.is_empty() {
        cell.push_str(": ");
        cell.push_str(&names.join(", "));
        if r.entries.len() > SHOWN {
            cell.push_str(", ...");
        }
    }
    cell
}
