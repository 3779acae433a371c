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
//! process's own mappings), one write in `hipGetDeviceCount`, [`load_library`] and
//! [`mapping`] (the input files of `loader-sim`) and [`fill`] (a buffer one thread decodes
//! into while another reads it); every use is commented.

#![warn(missing_docs)]

pub mod exports;
pub mod fill;
pub mod mapping;
pub mod process;
pub mod report;
pub mod shim;

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Loads the shared library at `path` (and its dependencies) with `dlopen(RTLD_NOW |
/// RTLD_GLOBAL)`, running its constructors, and keeps it loaded until the process exits.
pub fn load_library(path: &Path) -> Result<(), String> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: path contains a NUL byte", path.display()))?;
    // SAFETY: `c` is a valid NUL-terminated path. Loading a library runs its constructors,
    // which is the purpose: the caller chose to trust it.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns null or a NUL-terminated string valid until the next
        // dl* call on this thread; it is copied at once.
        let msg = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                "dlopen failed".to_string()
            } else {
                CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        return Err(msg);
    }
    Ok(())
}
