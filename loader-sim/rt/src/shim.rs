//! The shim's state: one [`Registry`] over the process's memory, the handles given out,
//! and the report.
//!
//! Configuration comes from the environment, read at the first registration:
//! `LOADER_SIM_DEVICES` (comma-separated targets), `LOADER_SIM_REPORT` (JSON Lines file,
//! appended to), `LOADER_SIM_POLICY` (`runtime`, `best`, `first`, `first-by-class`). A unit's records are
//! written when it is unregistered (its count drops to zero), and for units still
//! registered when the shim is unloaded (process exit).
//!
//! What the records say of the chosen images (name, size, SHA-256) is taken when the unit
//! is registered; then the unit's images are released ([`Registry::release`]), as a
//! runtime keeps only what it loaded: a library of many compressed bundles holds one
//! bundle's decompressed content at a time. The entries are added at the end, as bound by
//! then.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use offload_image::registration::{GlobalKind, Registry, RegistryOptions, SimulatedDevice, UnitId};
use offload_image::Policy;

use crate::process::{object_of, ProcessSpace};
use crate::report::{entry_records, link_inputs, unit_records, EntryRecord, Record, RecordOptions};

/// True when the wrapper at `addr` of this process has the `HIPK` magic of a split
/// library.
fn is_hipk(addr: u64) -> bool {
    use offload_image::registration::AddressSpace;
    ProcessSpace
        .bytes_from(addr)
        .and_then(|b| b.get(..4))
        .is_some_and(|m| m == offload_image::kpack::HIPK_MAGIC.to_le_bytes())
}

/// Prefix of the shim's diagnostics on standard error.
const TAG: &str = "loader-sim-rt";

/// An error of a view over process memory: its offset is an address.
fn describe(e: &offload_image::Error) -> String {
    format!("{}, at address {:#x}", e.what(), e.offset())
}

/// A unit's records as taken at registration: where it is, the chosen images (entries
/// still to come).
struct Label {
    records: Vec<Record>,
}

/// Everything the shim knows.
pub struct Shim {
    registry: Registry<'static>,
    /// Handle given by `__hipRegisterFatBinary` (address of a leaked slot) → unit.
    handles: HashMap<usize, UnitId>,
    /// The inverse: unit → its handle.
    handle_of: HashMap<UnitId, usize>,
    labels: HashMap<UnitId, Label>,
    /// Handles of the `HIPK` wrappers of split libraries → their records (rocm-kpack's
    /// loader gives their code objects; the registry does not hold them) and how often
    /// they were registered.
    split: HashMap<usize, (Vec<Record>, u32)>,
    /// Handle by `HIPK` wrapper address.
    split_handle_of: HashMap<u64, usize>,
    report: Option<PathBuf>,
}

static SHIM: Mutex<Option<Shim>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<Shim>> {
    SHIM.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `f` on the shim, creating it from the environment on first use.
pub fn with<R>(f: impl FnOnce(&mut Shim) -> R) -> R {
    let mut guard = lock();
    let shim = guard.get_or_insert_with(Shim::from_env);
    f(shim)
}

/// Writes the records of every unit still registered (called when the shim is unloaded).
pub fn finish() {
    if let Some(shim) = lock().as_mut() {
        let ids: Vec<UnitId> = shim.registry.registrations().map(|(id, _)| id).collect();
        for id in ids {
            shim.flush(id, false);
        }
        let handles: Vec<usize> = shim.split.keys().copied().collect();
        for h in handles {
            shim.flush_split(h, false);
        }
    }
}

fn parse_devices(spec: &str) -> Vec<SimulatedDevice> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter_map(|t| match SimulatedDevice::parse(t) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("{TAG}: LOADER_SIM_DEVICES: ignoring {t:?}: {e}");
                None
            }
        })
        .collect()
}

impl Shim {
    fn from_env() -> Shim {
        let devices = parse_devices(&std::env::var("LOADER_SIM_DEVICES").unwrap_or_default());
        let policy = match std::env::var("LOADER_SIM_POLICY").as_deref() {
            Ok("best") => Some(Policy::Best),
            Ok("first") => Some(Policy::First),
            Ok("first-by-class") => Some(Policy::FirstByClass),
            _ => None,
        };
        let options = RegistryOptions {
            policy,
            ..RegistryOptions::default()
        };
        Shim {
            registry: Registry::new(devices, options),
            handles: HashMap::new(),
            handle_of: HashMap::new(),
            labels: HashMap::new(),
            split: HashMap::new(),
            split_handle_of: HashMap::new(),
            report: std::env::var_os("LOADER_SIM_REPORT").map(PathBuf::from),
        }
    }

    /// Names unit `id` (registered at `addr`), takes its records and releases its images.
    fn label(&mut self, id: UnitId, addr: u64) {
        let (unit, address, base) = match object_of(addr) {
            Some(o) => {
                let name = o
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| o.path.display().to_string());
                let vaddr = addr.wrapping_sub(o.base);
                (format!("{name}+{vaddr:#x}"), vaddr, o.base)
            }
            None => (format!("{addr:#x}"), addr, 0),
        };
        let records = self.registry.get(id).map_or_else(Vec::new, |reg| {
            // A version-2 wrapper's pre-linked list is read now, as the program hands it
            // over: the device link's stub has just filled it.
            let links = link_inputs(
                &ProcessSpace,
                reg.address(),
                base,
                &self.registry.options().read,
            );
            let mut records = unit_records(
                &self.registry,
                reg,
                &unit,
                address,
                RecordOptions::default(),
            );
            for r in &mut records {
                r.link_inputs.clone_from(&links);
            }
            records
        });
        self.registry.release(id);
        self.labels.insert(id, Label { records });
    }

    /// `__hipRegisterFatBinary` / `__cudaRegisterFatBinary` (`call`): the handle (a pointer
    /// to a slot) or 0 on refusal.
    pub fn register_fat_binary(&mut self, call: &str, wrapper: u64) -> usize {
        match self.registry.register_fat_binary(&ProcessSpace, wrapper) {
            Ok(id) => {
                if let Some(&h) = self.handle_of.get(&id) {
                    return h;
                }
                let binary = self.registry.get(id).map_or(wrapper, |r| r.binary());
                self.label(id, binary);
                // The slot the program keeps the handle in points at; leaked on purpose
                // (a program may hold its handle until exit).
                let handle = Box::into_raw(Box::new(wrapper)) as usize;
                self.handles.insert(handle, id);
                self.handle_of.insert(id, handle);
                handle
            }
            Err(_) if is_hipk(wrapper) => self.register_split(call, wrapper),
            Err(e) => {
                eprintln!("{TAG}: {call}({wrapper:#x}) refused: {}", describe(&e));
                0
            }
        }
    }

    /// A `HIPK` wrapper of a split library: as the HIP runtime does, find the library that
    /// holds it and ask rocm-kpack's loader ([`crate::kpack`]) for each device's code
    /// object, relative to the library's real directory.
    fn register_split(&mut self, call: &str, wrapper: u64) -> usize {
        if let Some(&h) = self.split_handle_of.get(&wrapper) {
            if let Some(unit) = self.split.get_mut(&h) {
                unit.1 = unit.1.saturating_add(1);
            }
            return h;
        }
        let Some(object) = object_of(wrapper) else {
            eprintln!(
                "{TAG}: {call}({wrapper:#x}) refused: no loaded object holds the HIPK wrapper"
            );
            return 0;
        };
        let data = match std::fs::read(&object.path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!(
                    "{TAG}: {call}({wrapper:#x}) refused: cannot read {}: {e}",
                    object.path.display()
                );
                return 0;
            }
        };
        let vaddr = wrapper.wrapping_sub(object.base);
        let library = crate::kpack::Library::open(&object.path, &data);
        let Some((library, i)) = library
            .as_ref()
            .and_then(|l| Some((l, l.wrapper_at(vaddr)?)))
        else {
            eprintln!(
                "{TAG}: {call}({wrapper:#x}) refused: {} has no HIPK wrapper of a split library at {vaddr:#x}",
                object.path.display()
            );
            return 0;
        };
        let name = object
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| object.path.display().to_string());
        let address = library.ref_address(i).unwrap_or(vaddr);
        let unit = format!("{name}+{address:#x} (kpack)");
        let env = crate::kpack::Env::from_process();
        let mut archives = crate::kpack::Archives::default();
        let read = self.registry.options().read;
        let records: Vec<Record> = self
            .registry
            .devices()
            .iter()
            .map(|d| {
                let isa = crate::kpack::isa_name(d.device());
                let arches: Vec<&str> = isa.as_deref().into_iter().collect();
                let r = library.resolve_wrapper(i, &arches, &env, &mut archives, &read);
                crate::kpack::record(&r, d.name(), &unit, address, false)
            })
            .collect();
        let handle = Box::into_raw(Box::new(wrapper)) as usize;
        self.split.insert(handle, (records, 1));
        self.split_handle_of.insert(wrapper, handle);
        handle
    }

    /// A `__hipRegister*` call on the handle of a split library's wrapper: the entry goes
    /// to its records.
    fn register_split_global(&mut self, handle: usize, name: Option<&[u8]>, global: Global) {
        let Some((records, _)) = self.split.get_mut(&handle) else {
            return;
        };
        let Some(name) = name else {
            eprintln!("{TAG}: __hipRegister*: null name");
            return;
        };
        let (kind, size) = match global {
            Global::Function => ("kernel", 0),
            Global::Var { size, .. } => ("variable", size),
            Global::Managed { size, .. } => ("managed", size),
            Global::Reference { kind, .. } => (kind.name(), 0),
        };
        for r in records.iter_mut() {
            r.entries.push(EntryRecord {
                name: String::from_utf8_lossy(name).into_owned(),
                kind: kind.to_string(),
                size,
                flags: 0,
            });
        }
    }

    /// Writes and forgets the records of a split library's wrapper.
    fn flush_split(&mut self, handle: usize, unregistered: bool) {
        let Some((mut records, _)) = self.split.remove(&handle) else {
            return;
        };
        self.split_handle_of.retain(|_, h| *h != handle);
        for r in &mut records {
            r.unregistered = Some(unregistered);
        }
        if let Some(path) = &self.report {
            if let Err(e) = append(path, &records) {
                eprintln!("{TAG}: cannot write {}: {e}", path.display());
            }
        }
    }

    fn unit(&self, handle: usize, call: &str) -> Option<UnitId> {
        let id = self.handles.get(&handle).copied();
        if id.is_none() {
            eprintln!("{TAG}: {call}: unknown handle {handle:#x}");
        }
        id
    }

    /// `__hipRegisterFunction` / `Var` / `ManagedVar` / `Surface` / `Texture`.
    pub fn register_global(
        &mut self,
        handle: usize,
        call: &str,
        host: u64,
        name: Option<&[u8]>,
        global: Global,
    ) {
        if self.split.contains_key(&handle) {
            self.register_split_global(handle, name, global);
            return;
        }
        let Some(id) = self.unit(handle, call) else {
            return;
        };
        let Some(name) = name else {
            eprintln!("{TAG}: {call}: null name");
            return;
        };
        let r = match global {
            Global::Function => self.registry.register_function(id, host, name),
            Global::Var {
                size,
                external,
                constant,
            } => self
                .registry
                .register_var(id, host, name, size, external, constant),
            Global::Managed { size, align } => self
                .registry
                .register_managed_var(id, host, name, size, align),
            Global::Reference {
                kind,
                ty,
                normalized,
                external,
            } => self
                .registry
                .register_reference(id, host, name, kind, ty, normalized, external),
        };
        if let Err(e) = r {
            eprintln!("{TAG}: {call}: {}", describe(&e));
        }
    }

    /// `__hipUnregisterFatBinary`.
    pub fn unregister_fat_binary(&mut self, handle: usize) {
        if let Some(unit) = self.split.get_mut(&handle) {
            unit.1 = unit.1.saturating_sub(1);
            if unit.1 == 0 {
                self.flush_split(handle, true);
            }
            return;
        }
        let Some(id) = self.unit(handle, "__hipUnregisterFatBinary") else {
            return;
        };
        match self.registry.unregister_fat_binary(id) {
            Ok(true) => {
                self.handles.remove(&handle);
                self.handle_of.remove(&id);
                self.flush(id, true);
            }
            Ok(false) => {}
            Err(e) => eprintln!("{TAG}: __hipUnregisterFatBinary: {}", describe(&e)),
        }
    }

    /// `__tgt_register_lib`.
    pub fn register_lib(&mut self, desc: u64) {
        match self.registry.register_lib(&ProcessSpace, desc) {
            Ok(id) => {
                if !self.labels.contains_key(&id) {
                    self.label(id, desc);
                }
            }
            Err(e) => eprintln!(
                "{TAG}: __tgt_register_lib({desc:#x}) refused: {}",
                describe(&e)
            ),
        }
    }

    /// `__tgt_unregister_lib`.
    pub fn unregister_lib(&mut self, desc: u64) {
        match self.registry.unregister_lib(desc) {
            Some((id, true)) => self.flush(id, true),
            Some((_, false)) => {}
            None => eprintln!("{TAG}: __tgt_unregister_lib({desc:#x}): not registered"),
        }
    }

    /// Writes the records of unit `id` (`unregistered`: by the program, or still
    /// registered at unload) and forgets it.
    fn flush(&mut self, id: UnitId, unregistered: bool) {
        let Some(reg) = self.registry.get(id) else {
            return;
        };
        let mut records = match self.labels.remove(&id) {
            Some(label) => label.records,
            None => unit_records(
                &self.registry,
                reg,
                &format!("{:#x}", reg.address()),
                reg.address(),
                RecordOptions::default(),
            ),
        };
        let entries = entry_records(reg);
        for r in &mut records {
            r.entries.clone_from(&entries);
            r.unregistered = Some(unregistered);
        }
        if let Some(path) = &self.report {
            if let Err(e) = append(path, &records) {
                eprintln!("{TAG}: cannot write {}: {e}", path.display());
            }
        }
        self.registry.remove(id);
    }
}

/// What a `__hipRegister*` call registers.
#[derive(Clone, Copy, Debug)]
pub enum Global {
    /// `__hipRegisterFunction`.
    Function,
    /// `__hipRegisterVar`.
    Var {
        /// Size.
        size: u64,
        /// `ext`.
        external: bool,
        /// `constant`.
        constant: bool,
    },
    /// `__hipRegisterManagedVar`.
    Managed {
        /// Size.
        size: u64,
        /// Alignment.
        align: u64,
    },
    /// `__hipRegisterSurface` / `__hipRegisterTexture`.
    Reference {
        /// Surface or texture.
        kind: GlobalKind,
        /// Surface/texture type.
        ty: u64,
        /// `norm` (textures: normalized coordinates).
        normalized: bool,
        /// `ext`.
        external: bool,
    },
}

fn append(path: &Path, records: &[crate::report::Record]) -> std::io::Result<()> {
    let mut text = Vec::new();
    for r in records {
        serde_json::to_writer(&mut text, r)?;
        text.push(b'\n');
    }
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(&text)
}
