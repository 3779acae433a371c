//! `loader-sim-os`: the operating-system code of `loader-sim`, which has no `unsafe` of its
//! own: read-only maps of input files guarded against truncation ([`mapping`]), removing
//! a temporary file on an interrupt ([`cleanup`]), a buffer one thread decodes into while
//! another reads it ([`fill`]), and loading a shared library ([`load_library`]). Every use of
//! `unsafe` is commented.

#![warn(missing_docs)]

pub mod cleanup;
pub mod fill;
pub mod mapping;

use std::path::Path;

/// Loads the shared library at `path` (and its dependencies) with `dlopen(RTLD_NOW |
/// RTLD_GLOBAL)`, running its constructors, and keeps it loaded until the process exits.
/// Unix only: elsewhere an error (the runtime shim is an ELF library).
#[cfg(not(unix))]
pub fn load_library(path: &Path) -> Result<(), String> {
    Err(format!(
        "{}: loading a library with the runtime shim needs Linux",
        path.display()
    ))
}

/// Loads the shared library at `path` (and its dependencies) with `dlopen(RTLD_NOW |
/// RTLD_GLOBAL)`, running its constructors, and keeps it loaded until the process exits.
#[cfg(unix)]
pub fn load_library(path: &Path) -> Result<(), String> {
    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;
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

/// Sends SIGKILL to the process group `pgid` (a child started as the leader of a group of
/// its own): the child and whatever it forked that stayed in the group. Off Unix, nothing.
pub fn kill_process_group(pgid: u32) {
    #[cfg(unix)]
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        if pgid > 0 {
            // SAFETY: kill has no memory effects; a negative pid names the group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    #[cfg(not(unix))]
    let _ = pgid;
}

/// Gives SIGSEGV, SIGBUS, SIGILL and SIGFPE their default action (the process ends), for
/// the child of `register --load` before it runs a library's constructors: the Rust
/// runtime's stack-overflow handler returns from a SIGSEGV that is no fault of the stack,
/// so a constructor that raised one went on as if nothing happened ("nothing was
/// registered", issue 43). Off Unix, nothing.
pub fn default_crash_signals() {
    #[cfg(unix)]
    for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE] {
        // SAFETY: setting a signal's disposition to its default has no memory effects.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}
