//! `loader-sim-rt`: a runtime shim that real programs register their device code into.
//!
//! Built as `libloader_sim_rt.so`, it exports the HIP registration entry points
//! (`__hipRegisterFatBinary`, `__hipRegisterFunction`, `__hipRegisterVar`, ...,
//! `__hipUnregisterFatBinary`, with the `hip_4.2` symbol version ROCm 5 libraries require)
//! and the LLVM offload ones (`__tgt_register_lib`, `__tgt_unregister_lib`, version
//! `VERS1.0`), plus stubs for the rest of the HIP API a library needs in order to load.
//! Loaded under the name `libamdhip64.so.5` (a symlink in a directory on
//! `LD_LIBRARY_PATH`), it receives the registrations a library's constructors make.
//!
//! Every registration goes to an [`offload_image::registration::Registry`] that reads the
//! process's memory ([`process::ProcessSpace`]); simulated devices come from
//! `LOADER_SIM_DEVICES` (comma-separated targets), and the chosen images are written as
//! JSON Lines ([`report::Record`]) to the file named by `LOADER_SIM_REPORT` when a unit is
//! unregistered or the shim is unloaded.
//!
//! `unsafe` is confined to this FFI crate, and within it to [`process`] (reading the
//! process's own mappings) and one write in `hipGetDeviceCount`; every use is commented.
//! The operating-system code of the command line (file maps, the fill buffer, loading a
//! library) is in `loader-sim-os`.

#![warn(missing_docs)]

// The shim itself is an ELF library for Linux processes; the kpack model and the record
// types are shared with `loader-sim` on every platform.
#[cfg(target_os = "linux")]
pub mod exports;
pub mod kpack;
#[cfg(target_os = "linux")]
pub mod process;
pub mod report;
#[cfg(target_os = "linux")]
pub mod shim;
