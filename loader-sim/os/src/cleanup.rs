//! Removing a temporary file when the process is interrupted (`SIGINT`, `SIGTERM`,
//! `SIGHUP`, `SIGQUIT`, `SIGUSR1`, `SIGUSR2`, `SIGALRM`, `SIGVTALRM`, `SIGPROF`, `SIGXCPU`,
//! `SIGXFSZ`, `SIGPIPE`: every catchable signal whose default ends the process): `prune` writes its result to a temporary file next to OUT, which a caught
//! interrupt would otherwise leave behind (up to the size of the output).
//!
//! While a [`RemoveOnSignal`] is alive, those signals first unlink its file, then get the
//! action they had before: the default one (the process ends, as it would have), or the
//! handler that was installed (Python's `KeyboardInterrupt` flag, say), which is called.
//! A signal that was ignored stays ignored and removes nothing. One file at a time: a
//! second guard replaces the first's file.

use std::path::Path;

/// Unlinks a file when the process is interrupted, until dropped (module docs).
pub struct RemoveOnSignal {
    #[cfg(unix)]
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

#[cfg(unix)]
mod imp {
    use std::sync::atomic::{AtomicPtr, Ordering};

    /// The path to unlink (a leaked NUL-terminated string), or null.
    pub static PATH: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());
    /// The actions before ours, indexed by signal number (read by the handler).
    pub static PREVIOUS: [AtomicPtr<libc::sigaction>; 32] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; 32];

    /// Every signal whose default action ends the process and that a process can catch
    /// (issue 43 found SIGQUIT, SIGUSR1 and SIGXFSZ leaving the file behind). SIGKILL
    /// cannot be caught: the file's name says whose it is (`prune`'s
    /// `.OUT.loader-sim-prune.PID.RANDOM.tmp`). Crashes (SIGSEGV, SIGBUS, SIGABRT) are not
    /// handled here.
    pub const SIGNALS: [libc::c_int; 12] = [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGPIPE,
    ];

    /// The handler: unlink, then the previous action.
    pub extern "C" fn on_signal(
        sig: libc::c_int,
        info: *mut libc::siginfo_t,
        ctx: *mut libc::c_void,
    ) {
        let previous = usize::try_from(sig)
            .ok()
            .and_then(|i| PREVIOUS.get(i))
            .map(|p| p.load(Ordering::Acquire))
            .unwrap_or(std::ptr::null_mut());
        // SAFETY: the pointer is null or a leaked `sigaction` (never freed).
        let Some(previous) = (unsafe { previous.as_ref() }) else {
            return;
        };
        let handler = previous.sa_sigaction;
        if handler == libc::SIG_IGN {
            return;
        }
        let path = PATH.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !path.is_null() {
            // SAFETY: a leaked NUL-terminated string (never freed); unlink is
            // async-signal-safe.
            unsafe { libc::unlink(path) };
        }
        if handler == libc::SIG_DFL {
            // SAFETY: the default action back, then the signal again: the process ends as
            // it would have without us (signal and raise are async-signal-safe).
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
        } else {
            // SAFETY: the action in place before ours, neither SIG_DFL nor SIG_IGN (both
            // handled above).
            unsafe { crate::mapping::chain(previous, sig, info, ctx) };
        }
    }
}

impl RemoveOnSignal {
    /// Unlinks `path` if the process is interrupted before the guard is dropped. Off Unix,
    /// nothing is done.
    pub fn new(path: &Path) -> RemoveOnSignal {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            use std::sync::atomic::Ordering;
            let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
                return RemoveOnSignal {
                    previous: Vec::new(),
                };
            };
            // Leaked: the handler may read it at any time (one short path per prune).
            imp::PATH.store(c.into_raw(), Ordering::Release);
            let mut previous = Vec::new();
            for sig in imp::SIGNALS {
                // SAFETY: plain-data structs, zero is valid; the previous action is
                // published (leaked, never freed) before ours is installed.
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                        continue;
                    }
                    let Some(slot) = usize::try_from(sig).ok().and_then(|i| imp::PREVIOUS.get(i))
                    else {
                        continue;
                    };
                    // Ours already (a guard alive on another thread): keep what was before.
                    if old.sa_sigaction != imp::on_signal as *const () as usize {
                        slot.store(Box::into_raw(Box::new(old)), Ordering::Release);
                    }
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = imp::on_signal as *const () as usize;
                    action.sa_flags = libc::SA_SIGINFO;
                    libc::sigemptyset(&mut action.sa_mask);
                    if libc::sigaction(sig, &action, std::ptr::null_mut()) == 0 {
                        previous.push((sig, old));
                    }
                }
            }
            RemoveOnSignal { previous }
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            RemoveOnSignal {}
        }
    }
}

impl Drop for RemoveOnSignal {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            for (sig, old) in &self.previous {
                // SAFETY: restores the action that was in place when the guard was made.
                unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
            }
            imp::PATH.store(std::ptr::null_mut(), std::sync::atomic::Ordering::Release);
        }
    }
}
