//! Runtime registration: the records a host program hands to an offload runtime, views
//! that read them through pointers, static discovery in host ELF files, and a simulated
//! runtime that registers them and gives every device an image (`REGISTRATION.md`).
//!
//! * [`abi`]: `#[repr(C)]` models of `__tgt_offload_entry` (legacy 32-byte and current
//!   56-byte layouts), `__tgt_device_image`, `__tgt_bin_desc`, both `__tgt_image_info`
//!   variants, the HIP/CUDA fat-binary wrapper and the SYCL records, with compile-time size
//!   and offset checks, plus their little-endian byte layouts;
//! * [`view`]: the [`AddressSpace`] trait (addresses → bounded bytes, relocated pointers)
//!   and read-only views: [`Descriptor`], [`DeviceImageView`], [`EntryTable`] (legacy
//!   tables upgraded on the fly, without allocating), [`FatbinWrapperView`];
//! * [`elf`]: [`HostElf`], a host executable, shared library or object as an address
//!   space, and where its registration records are;
//! * [`registry`]: [`Registry`], the simulated runtime (`register_lib`,
//!   `register_fat_binary`, `register_function`, ...), which asks [`crate::container`] for
//!   images and the selection rules for a choice; it parses no container format itself.
//!
//! # Example: what a host file registers
//!
//! ```no_run
//! use offload_image::registration::{HostElf, Registry, RegistryOptions, SimulatedDevice};
//!
//! let data = std::fs::read("app").expect("read the host file");
//! let elf = HostElf::parse(&data)?;
//! let devices = vec![SimulatedDevice::parse("gfx90a:xnack+")?];
//! let mut registry = Registry::new(devices, RegistryOptions::default());
//! for w in elf.fat_binary_wrappers() {
//!     registry.register_fat_binary(&elf, w.address)?;
//! }
//! for (id, unit) in registry.registrations() {
//!     let images = unit.images();
//!     let chosen = unit.choice(0).and_then(|c| c.chosen()).map(|i| images[i].entry_id);
//!     println!("{id:?}: {chosen:?}");
//! }
//! # Ok::<(), offload_image::Error>(())
//! ```

pub mod abi;
pub mod elf;
pub mod registry;
pub mod view;

pub use crate::host::HostFile;
pub use elf::{
    descriptors, device_kernels, DeviceSymbol, ElfType, EntrySection, HostElf, WrapperSlot,
};
pub use registry::{
    runtime_policy, BoundEntry, Registration, RegistrationKind, Registry, RegistryOptions,
    SimulatedDevice, UnitId,
};
pub use view::{
    fat_binary_at, AddressSpace, Descriptor, DeviceImageView, EntryLayout, EntryTable,
    FatbinWrapperView, GlobalKind, HostEntry, UnwrappedImage, WrapperKind,
};
