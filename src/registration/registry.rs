//! A simulated offload runtime: the registrations it receives, the devices it has, and
//! the image each device gets from each registered unit.
//!
//! [`Registry`] follows the calls a host program makes (`REGISTRATION.md` §3, §4):
//! `__tgt_register_lib` / `__tgt_unregister_lib` ([`Registry::register_lib`],
//! [`Registry::unregister_lib`]) and HIP's `__hipRegisterFatBinary`,
//! `__hipRegisterFunction`, `__hipRegisterVar`, ... `__hipUnregisterFatBinary`. Records are
//! read through an [`AddressSpace`], so the same code serves a host file read statically
//! ([`super::HostElf`]) and a running process (the runtime shim).
//!
//! Modelling decisions (each matches the runtime named):
//!
//! * Images are chosen **at registration**, for every device, with the rule of the runtime
//!   the registration is for (`COMPATIBILITY.md` §7): by default the deterministic ranking
//!   for HIP/CUDA fat binaries, and "first compatible image in descriptor order" for
//!   `__tgt_bin_desc` descriptors (LLVM offload, §7.5). CLR and libomptarget defer loading
//!   to first use; the choice is the same, only its time differs.
//! * A wrapper with a bad magic or version is refused (CLR returns a null handle). A
//!   well-formed wrapper whose fat binary cannot be read is registered with an error and
//!   gives no device an image (CLR fails later, at launch, with `hipErrorInvalidImage`).
//! * Registering the same fat binary (same `binary` pointer) or the same descriptor again
//!   returns the existing unit and counts the registration (CLR keys its bookkeeping on the
//!   pointer); the unit is unregistered when the count drops to zero.
//! * A device image of a descriptor that is an OffloadBinary is unwrapped to its first
//!   entry's image, recursively up to [`super::view::MAX_UNWRAP_DEPTH`] (the LLVM runtime's
//!   `DeviceImageTy`); one that is not, or does not parse, is used raw.
//! * Entries: for descriptors, the host entries with `Kind == OpenMP` after the legacy
//!   upgrade (what libomptarget binds, `REGISTRATION.md` §3.3); for fat binaries, what
//!   `__hipRegisterFunction`/`Var`/... reported, or an entry table given by the caller
//!   ([`Registry::add_entries`], the new-driver wrapper's `.hip.globals_reg` loop).
//! * A unit only offers images of its registration's offload kinds
//!   ([`RegistrationKind::kind_filter`]): a HIP fat binary's `openmp-` entries are not
//!   candidates, nor a bundle's host entry.
//! * `requires` entries of descriptors are merged as libomptarget's
//!   `RequirementCollection` does; a contradiction refuses the descriptor.

use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::arch::Device;
use crate::container::{units, OpenUnit};
use crate::error::{Error, ErrorKind, Result};
use crate::image::{Image, OffloadKind};
use crate::offload_binary::OffloadBinaryEntry;
use crate::options::ReadOptions;
use crate::select::{self, select, KindFilter, Policy, SelectOptions, Selection};

use super::abi::{self, gpu_flags, requires};
use super::view::{
    unwrap_image, AddressSpace, Descriptor, EntryTable, FatbinWrapperView, GlobalKind, HostEntry,
    UnwrappedImage, WrapperKind,
};

/// What a runtime binds for an offload entry: its kind, the flags it keeps, its size,
/// its data and the host address (a managed variable's is its `aux_addr`). `None` for an
/// entry of a type no runtime binds.
fn bound_global(e: &HostEntry) -> Option<(GlobalKind, u32, u64, u64, u64)> {
    if e.size == 0 {
        return Some((GlobalKind::Kernel, 0, 0, 0, e.address));
    }
    let kept = |bits: u32| e.flags & bits;
    let data = u64::from(e.data as u32);
    Some(match e.flags & gpu_flags::TYPE_MASK {
        gpu_flags::GLOBAL => (
            GlobalKind::Variable,
            kept(gpu_flags::EXTERN | gpu_flags::CONSTANT),
            e.size,
            0,
            e.address,
        ),
        gpu_flags::MANAGED => (
            GlobalKind::Managed,
            gpu_flags::MANAGED,
            e.size,
            data,
            e.aux_addr,
        ),
        gpu_flags::SURFACE => (
            GlobalKind::Surface,
            gpu_flags::SURFACE | kept(gpu_flags::EXTERN),
            0,
            data,
            e.address,
        ),
        gpu_flags::TEXTURE => (
            GlobalKind::Texture,
            gpu_flags::TEXTURE | kept(gpu_flags::EXTERN | gpu_flags::NORMALIZED),
            0,
            data,
            e.address,
        ),
        _ => return None,
    })
}

/// Which registration interface a unit came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RegistrationKind {
    /// `__hipRegisterFatBinary`.
    Hip,
    /// `__cudaRegisterFatBinary`.
    Cuda,
    /// `__tgt_register_lib` (OpenMP, and CUDA/HIP/SYCL under the new driver's descriptors).
    OpenMp,
}

impl RegistrationKind {
    /// `"hip"`, `"cuda"` or `"openmp"` (the `registration` field of `loader-sim register`).
    pub const fn name(self) -> &'static str {
        match self {
            RegistrationKind::Hip => "hip",
            RegistrationKind::Cuda => "cuda",
            RegistrationKind::OpenMp => "openmp",
        }
    }

    /// The offload kinds a unit of this registration may load: the HIP family for HIP,
    /// CUDA for CUDA, OpenMP for descriptors (images without a kind serve every one).
    pub const fn kind_filter(self) -> KindFilter {
        match self {
            RegistrationKind::Hip => KindFilter::Hip,
            RegistrationKind::Cuda => KindFilter::Cuda,
            RegistrationKind::OpenMp => KindFilter::OpenMp,
        }
    }
}

/// The selection policy a registering runtime applies to a unit of `kind` when
/// [`RegistryOptions::policy`] is `None`: for `__tgt_register_lib` descriptors the LLVM
/// offload runtime's "first compatible image in descriptor order" (`COMPATIBILITY.md`
/// §7.5); for HIP/CUDA fat binaries the ranking of §10, which agrees with ROCm CLR (§7.3)
/// on every compiler-made bundle and is deterministic where CLR's compressed path follows
/// hash order.
pub const fn runtime_policy(kind: RegistrationKind) -> Policy {
    match kind {
        RegistrationKind::OpenMp => Policy::First,
        RegistrationKind::Hip | RegistrationKind::Cuda => Policy::Best,
    }
}

/// Options of a [`Registry`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegistryOptions {
    /// How containers are read (limits, hash verification).
    pub read: ReadOptions,
    /// How images are chosen: `None` (the default) for each registering runtime's own
    /// rule ([`runtime_policy`]), or one policy for every registration.
    pub policy: Option<Policy>,
    /// Further selection options (JIT, generic code, SPIR-V, strict mode). Their `kind` and
    /// `policy` are set per unit from the registration kind and [`RegistryOptions::policy`],
    /// and ROCm CLR's own rules ([`SelectOptions::clr`]) are added for HIP units.
    pub select: SelectOptions,
}

impl RegistryOptions {
    /// The selection options for a unit of `kind`.
    pub fn select_for(&self, kind: RegistrationKind) -> SelectOptions {
        SelectOptions {
            kind: kind.kind_filter(),
            policy: match self.policy {
                Some(p) => p,
                None => runtime_policy(kind),
            },
            clr: self.select.clr || kind == RegistrationKind::Hip,
            ..self.select
        }
    }
}

/// A simulated device: a target as a runtime detects it, and the name it was given by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimulatedDevice {
    name: String,
    device: Device,
}

impl SimulatedDevice {
    /// Parses a target as a runtime detects it (`gfx90a:sramecc+:xnack-`, `sm_80`, with or
    /// without the `amdgcn-amd-amdhsa--` prefix; [`Device::parse`]).
    pub fn parse(target: &str) -> Result<Self> {
        let t = target.trim();
        Ok(SimulatedDevice {
            name: t.to_owned(),
            device: Device::parse(t)?,
        })
    }

    /// A device with a name of the caller's choosing.
    pub fn new(name: &str, device: Device) -> Self {
        SimulatedDevice {
            name: name.to_owned(),
            device,
        }
    }

    /// The name the device was given by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }
}

/// What one device gets from one unit: the selection rules' answer ([`select`]) for
/// the unit's images.
fn pick(images: &[Image<'_>], device: &Device, options: &SelectOptions) -> Selection {
    select(images, device, options)
}

/// An entry bound to a unit: a kernel, variable or other global the unit registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundEntry {
    /// The device-side symbol name.
    pub name: Vec<u8>,
    /// What it names.
    pub kind: GlobalKind,
    /// The entry's consumer (`Kind`; HIP entries from `__hipRegister*` calls: 4).
    pub offload_kind: u16,
    /// Flags (OpenMP or CUDA/HIP meaning, `REGISTRATION.md` §1.4).
    pub flags: u32,
    /// Byte size (0 for kernels).
    pub size: u64,
    /// Kind-specific data (alignment of a managed variable, requirement bits, ...).
    pub data: u64,
    /// Host address (kernel handle, host shadow variable).
    pub address: u64,
}

impl BoundEntry {
    fn from_host<'d, S: AddressSpace<'d> + ?Sized>(e: &HostEntry, space: &S) -> Result<Self> {
        let name = if e.is_requires() && e.symbol_name == 0 {
            &[][..]
        } else {
            e.name(space)?
        };
        Ok(BoundEntry {
            name: name.to_vec(),
            kind: e.global_kind(),
            offload_kind: e.kind,
            flags: e.flags,
            size: e.size,
            data: e.data,
            address: e.address,
        })
    }

    /// The name as text (lossy for non-UTF-8 bytes).
    pub fn name_lossy(&self) -> alloc::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.name)
    }
}

/// Where the images of a registration come from.
#[derive(Clone, Debug)]
enum Part<'d> {
    /// Every image of a unit (a fat binary).
    All(OpenUnit<'d>),
    /// The first image of a unit (a descriptor's device image in a compressed OffloadBinary).
    First(OpenUnit<'d>),
    /// The first entry of a descriptor's device image that is an OffloadBinary.
    Entry(OffloadBinaryEntry<'d>),
    /// A raw device image (not an OffloadBinary).
    Raw(&'d [u8]),
}

/// Identifies a registered unit within its [`Registry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnitId(pub usize);

/// One registered unit: a fat binary or a descriptor.
#[derive(Clone, Debug)]
pub struct Registration<'d> {
    kind: RegistrationKind,
    address: u64,
    binary: u64,
    count: u32,
    parts: Vec<Part<'d>>,
    entries: Vec<BoundEntry>,
    choices: Vec<Selection>,
    requires: Option<u64>,
    error: Option<Error>,
}

impl<'d> Registration<'d> {
    /// The registration interface.
    pub fn kind(&self) -> RegistrationKind {
        self.kind
    }

    /// Address of the registered record (the wrapper, or the descriptor).
    pub fn address(&self) -> u64 {
        self.address
    }

    /// Address of the fat binary (fat binaries) or of the first device image (descriptors).
    pub fn binary(&self) -> u64 {
        self.binary
    }

    /// True while registered (the count of registrations minus unregistrations is positive).
    pub fn is_registered(&self) -> bool {
        self.count > 0
    }

    /// How many times the unit is currently registered.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// What identifies the unit among registered ones: the fat binary's address, or the
    /// descriptor's.
    fn key(&self) -> (RegistrationKind, u64) {
        match self.kind {
            RegistrationKind::OpenMp => (self.kind, self.address),
            _ => (self.kind, self.binary),
        }
    }

    /// The images, in discovery order, indexed as in [`Selection::chosen`].
    pub fn images(&self) -> Vec<Image<'_>> {
        let mut out = Vec::new();
        for part in &self.parts {
            match part {
                Part::All(open) => out.extend(open.images()),
                Part::First(open) => out.extend(open.images().next()),
                Part::Entry(e) => out.push(Image::from_offload_entry(0, e)),
                Part::Raw(b) => out.push(Image::from_elf(0, b)),
            }
        }
        for (i, image) in out.iter_mut().enumerate() {
            image.index = i;
        }
        out
    }

    /// The entries bound to the unit, in registration order.
    pub fn entries(&self) -> &[BoundEntry] {
        &self.entries
    }

    /// What device `device` (an index into [`Registry::devices`]) gets.
    pub fn choice(&self, device: usize) -> Option<&Selection> {
        self.choices.get(device)
    }

    /// The OpenMP requirement bits of a descriptor's `requires` entries, if it has any.
    pub fn requires(&self) -> Option<u64> {
        self.requires
    }

    /// Why the unit's images could not be read, if they could not (no device gets one).
    pub fn error(&self) -> Option<Error> {
        self.error
    }
}

/// The simulated runtime: devices and registered units.
#[derive(Clone, Debug)]
pub struct Registry<'d> {
    devices: Vec<SimulatedDevice>,
    options: RegistryOptions,
    units: Vec<Option<Registration<'d>>>,
    /// The registered units by what identifies them: (kind, fat binary address) for fat
    /// binaries, (kind, descriptor address) for descriptors.
    live: BTreeMap<(RegistrationKind, u64), UnitId>,
    /// Entries bound so far by [`Registry::add_entries`], all units together.
    table_entries: u64,
    requires: Option<u64>,
}

impl<'d> Registry<'d> {
    /// A runtime with `devices`.
    pub fn new(devices: Vec<SimulatedDevice>, options: RegistryOptions) -> Self {
        Registry {
            devices,
            options,
            units: Vec::new(),
            live: BTreeMap::new(),
            table_entries: 0,
            requires: None,
        }
    }

    /// The options the runtime was made with (the read options decode chosen images:
    /// [`crate::Image::decode`]).
    pub fn options(&self) -> &RegistryOptions {
        &self.options
    }

    /// The devices, in the order given.
    pub fn devices(&self) -> &[SimulatedDevice] {
        &self.devices
    }

    /// The registration `id`, unless it was [`Registry::remove`]d.
    pub fn get(&self, id: UnitId) -> Option<&Registration<'d>> {
        self.units.get(id.0).and_then(Option::as_ref)
    }

    /// Every unit not removed, in registration order.
    pub fn registrations(&self) -> impl Iterator<Item = (UnitId, &Registration<'d>)> + '_ {
        self.units
            .iter()
            .enumerate()
            .filter_map(|(i, u)| u.as_ref().map(|u| (UnitId(i), u)))
    }

    /// Drops the images of unit `id` (and with them any content decompressed for it),
    /// keeping everything else: its registration count and key, its entries, and each
    /// device's [`Selection`]. Afterwards [`Registration::images`] is empty and
    /// [`Registry::explain`] has nothing to say, so a caller reports the unit first. This is
    /// what a runtime keeps of a fat binary once it has loaded its image: a library of many
    /// compressed bundles then holds one bundle's content at a time, not all of them.
    /// Returns false if there is no unit `id`.
    pub fn release(&mut self, id: UnitId) -> bool {
        match self.units.get_mut(id.0).and_then(Option::as_mut) {
            Some(reg) => {
                reg.parts = Vec::new();
                true
            }
            None => false,
        }
    }

    /// Forgets unit `id` and returns it (its images borrow nothing from the registry, so a
    /// caller can report it and drop it; the id is never reused).
    pub fn remove(&mut self, id: UnitId) -> Option<Registration<'d>> {
        let reg = self.units.get_mut(id.0).and_then(Option::take)?;
        self.forget(id, &reg);
        Some(reg)
    }

    /// Drops `id` from the index of registered units (it was removed or its count fell to
    /// zero).
    fn forget(&mut self, id: UnitId, reg: &Registration<'_>) {
        let key = reg.key();
        if self.live.get(&key) == Some(&id) {
            self.live.remove(&key);
        }
    }

    /// The merged OpenMP requirements of every registered descriptor.
    pub fn requires(&self) -> Option<u64> {
        self.requires
    }

    /// The registered unit of `kind` identified by `key` (see `Registration::key`).
    fn find(&self, kind: RegistrationKind, key: u64) -> Option<UnitId> {
        self.live.get(&(kind, key)).copied()
    }

    fn insert(&mut self, mut reg: Registration<'d>) -> UnitId {
        let select = self.options.select_for(reg.kind);
        let images = reg.images();
        let choices = self
            .devices
            .iter()
            .map(|d| {
                if reg.error.is_some() {
                    Selection::default()
                } else {
                    pick(&images, d.device(), &select)
                }
            })
            .collect();
        drop(images);
        reg.choices = choices;
        let id = UnitId(self.units.len());
        self.live.insert(reg.key(), id);
        self.units.push(Some(reg));
        id
    }

    /// Why device `device` did not get each image of `reg` other than the chosen one: the
    /// selection rules' reason (`built for xnack+, device has xnack-`), or for a compatible
    /// image what the chosen one wins on. `(image index, reason)`, in discovery order.
    pub fn explain(&self, reg: &Registration<'_>, device: usize) -> Vec<(usize, String)> {
        let Some(d) = self.devices.get(device) else {
            return Vec::new();
        };
        let options = self.options.select_for(reg.kind);
        let choices = select::choose(reg.images(), core::slice::from_ref(d.device()), &options);
        choices
            .first()
            .map(|c| c.losses().map(|l| (l.index, l.loss.to_string())).collect())
            .unwrap_or_default()
    }

    /// `__hipRegisterFatBinary(wrapper)` (or CUDA's): reads the wrapper at `wrapper`, bounds
    /// the fat binary it points at by its own header inside the region that holds it, and
    /// chooses an image for every device.
    ///
    /// Fails only when the wrapper itself is unreadable or has a bad magic/version; a
    /// malformed fat binary is registered with [`Registration::error`] set.
    pub fn register_fat_binary<S: AddressSpace<'d> + ?Sized>(
        &mut self,
        space: &S,
        wrapper: u64,
    ) -> Result<UnitId> {
        let w = FatbinWrapperView::read(space, wrapper)?;
        let kind = match w.kind {
            WrapperKind::Hip => RegistrationKind::Hip,
            WrapperKind::Cuda => RegistrationKind::Cuda,
        };
        let existing = self.find(kind, w.binary);
        if let Some(id) = existing {
            if let Some(u) = self.units.get_mut(id.0).and_then(Option::as_mut) {
                u.count = u.count.saturating_add(1);
            }
            return Ok(id);
        }
        let mut reg = Registration {
            kind,
            address: wrapper,
            binary: w.binary,
            count: 1,
            parts: Vec::new(),
            entries: Vec::new(),
            choices: Vec::new(),
            requires: None,
            error: None,
        };
        match self.open_fat_binary(space, &w) {
            Ok(open) => reg.parts.push(Part::All(open)),
            Err(e) => reg.error = Some(e),
        }
        Ok(self.insert(reg))
    }

    fn open_fat_binary<S: AddressSpace<'d> + ?Sized>(
        &self,
        space: &S,
        w: &FatbinWrapperView,
    ) -> Result<OpenUnit<'d>> {
        let options = &self.options.read;
        let blob = w.fat_binary(space, options)?;
        let rebase = |e: Error| e.rebase(w.binary);
        let unit = units(blob, options)
            .next()
            .transpose()
            .map_err(rebase)?
            .ok_or(Error::new(
                ErrorKind::Malformed,
                w.binary,
                "fat binary holds no device images",
            ))?;
        unit.open(options).map_err(rebase)
    }

    fn registration_mut(&mut self, id: UnitId) -> Result<&mut Registration<'d>> {
        self.units
            .get_mut(id.0)
            .and_then(Option::as_mut)
            .filter(|u| u.is_registered())
            .ok_or(Error::new(
                ErrorKind::Malformed,
                0,
                "handle does not name a registered unit",
            ))
    }

    /// `__hipRegisterFunction(h, hostFunction, deviceFunction, deviceName, ...)`: binds the
    /// kernel `name` (the `deviceName` argument) with host handle `host` to unit `id`.
    pub fn register_function(&mut self, id: UnitId, host: u64, name: &[u8]) -> Result<()> {
        let kind = self.registration_mut(id)?.kind;
        self.push_entry(id, host, name, GlobalKind::Kernel, kind, 0, 0, 0)
    }

    /// `__hipRegisterVar(h, var, hostVar, deviceVar, ext, size, constant, global)`.
    pub fn register_var(
        &mut self,
        id: UnitId,
        host: u64,
        name: &[u8],
        size: u64,
        external: bool,
        constant: bool,
    ) -> Result<()> {
        let kind = self.registration_mut(id)?.kind;
        let flags = gpu_flags::GLOBAL
            | if external { gpu_flags::EXTERN } else { 0 }
            | if constant { gpu_flags::CONSTANT } else { 0 };
        self.push_entry(id, host, name, GlobalKind::Variable, kind, flags, size, 0)
    }

    /// `__hipRegisterManagedVar(h, pointer, init_value, name, size, align)`: `host` is the
    /// pointer slot, `align` goes to [`BoundEntry::data`].
    pub fn register_managed_var(
        &mut self,
        id: UnitId,
        host: u64,
        name: &[u8],
        size: u64,
        align: u64,
    ) -> Result<()> {
        let kind = self.registration_mut(id)?.kind;
        self.push_entry(
            id,
            host,
            name,
            GlobalKind::Managed,
            kind,
            gpu_flags::MANAGED,
            size,
            align,
        )
    }

    /// `__hipRegisterSurface` / `__hipRegisterTexture`: `kind` is
    /// [`GlobalKind::Surface`] or [`GlobalKind::Texture`], `ty` the surface/texture type,
    /// `normalized` the texture's `norm` argument (normalized coordinates).
    #[allow(clippy::too_many_arguments)]
    pub fn register_reference(
        &mut self,
        id: UnitId,
        host: u64,
        name: &[u8],
        kind: GlobalKind,
        ty: u64,
        normalized: bool,
        external: bool,
    ) -> Result<()> {
        let reg_kind = self.registration_mut(id)?.kind;
        let flags = match kind {
            GlobalKind::Surface => gpu_flags::SURFACE,
            _ => gpu_flags::TEXTURE,
        } | if external { gpu_flags::EXTERN } else { 0 }
            | if normalized && kind == GlobalKind::Texture {
                gpu_flags::NORMALIZED
            } else {
                0
            };
        self.push_entry(id, host, name, kind, reg_kind, flags, 0, ty)
    }

    #[allow(clippy::too_many_arguments)]
    fn push_entry(
        &mut self,
        id: UnitId,
        host: u64,
        name: &[u8],
        kind: GlobalKind,
        reg: RegistrationKind,
        flags: u32,
        size: u64,
        data: u64,
    ) -> Result<()> {
        let offload_kind = match reg {
            RegistrationKind::Hip => abi::kind::HIP,
            RegistrationKind::Cuda => abi::kind::CUDA,
            RegistrationKind::OpenMp => abi::kind::OPENMP,
        };
        self.registration_mut(id)?.entries.push(BoundEntry {
            name: name.to_vec(),
            kind,
            offload_kind,
            flags,
            size,
            data,
            address: host,
        });
        Ok(())
    }

    /// Binds the entries of `table` to fat-binary unit `id` exactly as the new-driver
    /// wrapper's `.hip.globals_reg` loop (`OffloadWrapper.cpp`) registers them: only
    /// entries of the unit's kind (HIP: `Kind` 3 or 4); an entry of size 0 is a kernel
    /// (`__hipRegisterFunction`, whatever its type bits); otherwise the type bits choose
    /// `__hipRegisterVar` (extern and constant bits kept), `__hipRegisterManagedVar` (the
    /// host pointer slot `AuxAddr`, alignment `Data` truncated to 32 bits),
    /// `__hipRegisterSurface` / `__hipRegisterTexture` (no size; type `Data`; extern and
    /// normalized bits kept), and types 4–7 register nothing. The bound entries are thus
    /// the ones the `__hipRegister*` calls of the running wrapper bind
    /// ([`Registry::register_function`], ...).
    ///
    /// A legacy table cannot say its kind (`REGISTRATION.md` §1.3); `legacy_kind` names it
    /// (the caller knows it from the section, e.g. `hip_offloading_entries`).
    ///
    /// Every unit that registers a table gets all of its entries (as every new-driver
    /// wrapper registers the whole `__start_`..`__stop_` range), so many wrappers over one
    /// large table would multiply it: the entries bound through this call, all units
    /// together, are limited to `limits.max_entries` of the read options
    /// ([`ErrorKind::LimitExceeded`] at the table, nothing bound).
    pub fn add_entries<S: AddressSpace<'d> + ?Sized>(
        &mut self,
        id: UnitId,
        space: &S,
        table: &EntryTable,
        legacy_kind: u16,
    ) -> Result<()> {
        let bound = self.table_entries.saturating_add(table.count);
        if bound > self.options.read.limits.max_entries {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                table.begin,
                "offload entries bound from tables exceed the entry limit",
            ));
        }
        let reg = self.registration_mut(id)?;
        let (want, offload_kind) = match reg.kind {
            RegistrationKind::Hip => (OffloadKind::Hip, abi::kind::HIP),
            RegistrationKind::Cuda => (OffloadKind::Cuda, abi::kind::CUDA),
            RegistrationKind::OpenMp => (OffloadKind::OpenMp, abi::kind::OPENMP),
        };
        let mut entries = Vec::new();
        for e in table.iter(space) {
            let mut e = e?;
            if e.legacy {
                e.kind = legacy_kind;
            }
            if e.offload_kind() != want {
                continue;
            }
            let Some((kind, flags, size, data, address)) = bound_global(&e) else {
                continue;
            };
            entries.push(BoundEntry {
                name: e.name(space)?.to_vec(),
                kind,
                offload_kind,
                flags,
                size,
                data,
                address,
            });
        }
        reg.entries.extend(entries);
        self.table_entries = bound;
        Ok(())
    }

    /// `__hipUnregisterFatBinary(h)`: one registration of unit `id` fewer. Returns true when
    /// the unit is no longer registered.
    pub fn unregister_fat_binary(&mut self, id: UnitId) -> Result<bool> {
        let reg = self.registration_mut(id)?;
        reg.count = reg.count.saturating_sub(1);
        let gone = reg.count == 0;
        if gone {
            let key = reg.key();
            if self.live.get(&key) == Some(&id) {
                self.live.remove(&key);
            }
        }
        Ok(gone)
    }

    /// `__tgt_register_lib(desc)`: reads the descriptor at `desc`, unwraps its device
    /// images, upgrades legacy entries, merges `requires` entries, and gives every device
    /// the first compatible image in descriptor order (LLVM offload, `REGISTRATION.md` §3.2;
    /// unless the policy says otherwise).
    ///
    /// Fails on an unreadable descriptor, image array or entry table, and on requirements
    /// that contradict an earlier descriptor's (a fatal error in libomptarget).
    pub fn register_lib<S: AddressSpace<'d> + ?Sized>(
        &mut self,
        space: &S,
        desc: u64,
    ) -> Result<UnitId> {
        if let Some(id) = self.find(RegistrationKind::OpenMp, desc) {
            if let Some(u) = self.units.get_mut(id.0).and_then(Option::as_mut) {
                u.count = u.count.saturating_add(1);
            }
            return Ok(id);
        }
        let options = self.options.read;
        let d = Descriptor::read(space, desc, &options)?;
        let mut entries = Vec::new();
        let mut req: Option<u64> = None;
        for e in d.entries.iter(space) {
            let e = e?;
            if e.offload_kind() != OffloadKind::OpenMp {
                continue;
            }
            if e.is_requires() {
                req = Some(req.unwrap_or(0) | e.data);
            }
            entries.push(BoundEntry::from_host(&e, space)?);
        }
        if let Some(r) = req {
            self.requires = Some(merge_requires(self.requires, r, desc)?);
        }
        let mut parts = Vec::new();
        let mut binary = 0;
        for image in d.images(space) {
            let image = image?;
            let bytes = image.bytes(space)?;
            if image.index == 0 {
                binary = image.image_start;
            }
            parts.push(device_image_part(bytes, &options));
        }
        let reg = Registration {
            kind: RegistrationKind::OpenMp,
            address: desc,
            binary,
            count: 1,
            parts,
            entries,
            choices: Vec::new(),
            requires: req,
            error: None,
        };
        Ok(self.insert(reg))
    }

    /// `__tgt_unregister_lib(desc)`: one registration of the descriptor at `desc` fewer.
    /// Returns the unit and whether it is no longer registered, or `None` if `desc` was not
    /// registered.
    pub fn unregister_lib(&mut self, desc: u64) -> Option<(UnitId, bool)> {
        let id = self.find(RegistrationKind::OpenMp, desc)?;
        let reg = self.units.get_mut(id.0).and_then(Option::as_mut)?;
        reg.count = reg.count.saturating_sub(1);
        let gone = reg.count == 0;
        if gone {
            self.live.remove(&(RegistrationKind::OpenMp, desc));
        }
        Some((id, gone))
    }
}

/// libomptarget's `RequirementCollection::addRequirements`: the first set wins; later sets
/// must agree on reverse offload, unified address and unified shared memory.
fn merge_requires(current: Option<u64>, new: u64, at: u64) -> Result<u64> {
    let Some(cur) = current.filter(|&c| c != requires::UNDEFINED) else {
        return Ok(new);
    };
    let checked =
        requires::REVERSE_OFFLOAD | requires::UNIFIED_ADDRESS | requires::UNIFIED_SHARED_MEMORY;
    if cur & checked != new & checked {
        return Err(Error::new(
            ErrorKind::Malformed,
            at,
            "OpenMP requirements contradict those of an earlier registration",
        ));
    }
    Ok(cur | new)
}

/// A descriptor's device image as the LLVM runtime sees it (`REGISTRATION.md` §1.9,
/// [`unwrap_image`]).
fn device_image_part<'d>(bytes: &'d [u8], options: &ReadOptions) -> Part<'d> {
    match unwrap_image(bytes, &options.limits) {
        UnwrappedImage::Raw(b) => Part::Raw(b),
        UnwrappedImage::Entry(e) => Part::Entry(e),
        UnwrappedImage::Compressed(binary) => units(binary.data(), options)
            .next()
            .and_then(|u| u.ok())
            .and_then(|u| u.open(options).ok())
            .map_or(Part::Raw(bytes), Part::First),
    }
}
