//! Read-only memory maps of input files, for `loader-sim` (which has no `unsafe` of its own),
//! guarded against the file shrinking while it is mapped.
//!
//! A page of a file map that lies past the file's end raises `SIGBUS` when it is touched:
//! another process truncating an input (a package manager or a build rewriting it in place)
//! would kill the reader. On Unix every map made here is registered in a fixed table that a
//! `SIGBUS` handler (installed once, on the first map) consults: a fault inside a registered
//! map replaces the map from the faulting page to its end with zero-filled anonymous pages
//! (`mmap(MAP_FIXED)`), marks the map faulted and returns, so the read goes on (seeing
//! zeros) instead of killing the process. The caller then asks [`Map::faulted`] and
//! reports the file instead of anything read from it ([`fault_count`] tells at once that
//! some map faulted). A fault
//! anywhere else goes to the handler that was installed before (Rust's stack-overflow
//! handler, a host's `faulthandler`, or the default action: the process dies as it would
//! have).
//!
//! Elsewhere (Windows), a mapped file cannot be truncated (the system refuses with a sharing
//! violation), so the maps are not guarded.

use std::fs::File;

pub use memmap2::Mmap;

/// A read-only, private map of a file, guarded against the file shrinking (module docs).
/// Dereferences to the file's bytes.
pub struct Map {
    map: Mmap,
    /// The slot of the fault table it is registered in (`None`: not guarded, off Unix).
    slot: Option<usize>,
}

impl Map {
    /// The underlying map, for advice.
    pub fn mmap(&self) -> &Mmap {
        &self.map
    }

    /// Whether a read touched a page past the file's end (the file became shorter while
    /// mapped): the bytes read from there on were zeros, not the file's.
    pub fn faulted(&self) -> bool {
        self.slot.is_some_and(guard::faulted)
    }
}

impl std::ops::Deref for Map {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            // Unregistered before `map` is unmapped (fields drop after this body).
            guard::unregister(slot);
        }
    }
}

/// Maps `file` read-only and private, guarded (module docs). `Ok(None)` when it cannot be
/// guarded (256 maps alive at once, or the handler could not be installed): the caller
/// reads the file instead.
pub fn map_file(file: &File) -> std::io::Result<Option<Map>> {
    #[cfg(unix)]
    {
        if !guard::install() {
            return Ok(None);
        }
        // SAFETY: read-only private map. Another process may truncate the file meanwhile:
        // the pages past its new end then fault, and the handler registered below maps
        // zero pages there (module docs), so every `&[u8]` into the map stays readable.
        // Between `map` and `register` nothing reads the map.
        let map = unsafe { memmap2::Mmap::map(file)? };
        let Some(slot) = guard::register(map.as_ptr() as usize, map.len()) else {
            return Ok(None);
        };
        Ok(Some(Map {
            map,
            slot: Some(slot),
        }))
    }
    #[cfg(not(unix))]
    {
        // SAFETY: off Unix a mapped file cannot be truncated or written by others (sharing
        // violation), so the map's contents stay the file's.
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(Some(Map { map, slot: None }))
    }
}

/// How many faults the guard has absorbed since the process started (a cheap check, for
/// stopping output at once).
pub fn fault_count() -> u64 {
    #[cfg(unix)]
    {
        guard::fault_count()
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// Drops the pages of `map[offset .. offset + len]` (rounded out to whole pages) from this
/// process's page tables (`MADV_DONTNEED`), keeping the peak resident set of a walk over a
/// big file small. The bytes stay readable: touching them again maps the same file pages
/// back in from the page cache (or, past a new end of the file, faults into the guard).
/// Elsewhere than on Unix, nothing is dropped.
pub fn release(map: &Map, offset: usize, len: usize) -> std::io::Result<()> {
    #[cfg(not(unix))]
    {
        let _ = (map, offset, len);
        Ok(())
    }
    #[cfg(unix)]
    // SAFETY: `MADV_DONTNEED` on a read-only file mapping, which nobody can write through,
    // only removes page-table entries: the next access maps the same file page again, so
    // every `&[u8]` into the map keeps its contents (the one hazard of DONTNEED, losing
    // private modifications of the pages, cannot arise without writes; the guard's zero
    // pages are anonymous and read-only, and come back as zeros).
    unsafe {
        map.map
            .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len)
    }
}

#[cfg(unix)]
pub(crate) use guard::chain;

#[cfg(unix)]
mod guard {
    //! The fault table and the `SIGBUS` handler. The handler touches only atomics and calls
    //! `mmap` and `sigaction` (system calls that take no user-space lock).

    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::sync::OnceLock;

    /// Maps alive at once that can be guarded.
    const SLOTS: usize = 256;
    /// A slot being filled or emptied: the handler skips it.
    const BUSY: usize = usize::MAX;

    struct Slot {
        /// Start address of the map; 0 when free, [`BUSY`] while changing.
        start: AtomicUsize,
        len: AtomicUsize,
        faulted: AtomicBool,
    }

    #[allow(clippy::declare_interior_mutable_const)]
    const FREE: Slot = Slot {
        start: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        faulted: AtomicBool::new(false),
    };
    static TABLE: [Slot; SLOTS] = [FREE; SLOTS];
    static FAULTS: AtomicU64 = AtomicU64::new(0);
    static PAGE: AtomicUsize = AtomicUsize::new(4096);
    /// The `SIGBUS` action before ours, to pass faults that are not ours on to; set once,
    /// before the handler is installed.
    static PREVIOUS: OnceLock<Previous> = OnceLock::new();
    /// Whether the handler is installed.
    static INSTALLED: OnceLock<bool> = OnceLock::new();

    struct Previous(libc::sigaction);
    // SAFETY: a `sigaction` is plain data (a function address, flags and a signal mask),
    // written once before it is shared and only read afterwards.
    unsafe impl Sync for Previous {}
    // SAFETY: as above.
    unsafe impl Send for Previous {}

    /// Installs the handler (once); false if that failed.
    pub fn install() -> bool {
        *INSTALLED.get_or_init(|| {
            // SAFETY: `sysconf` has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if let Ok(page) = usize::try_from(page) {
                if page.is_power_of_two() {
                    PAGE.store(page, Ordering::Relaxed);
                }
            }
            // SAFETY: `sigaction` structs are plain data, zero is a valid value; the new
            // action's handler has the `SA_SIGINFO` signature, and the previous action is
            // stored before the new one can run.
            unsafe {
                let mut previous: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                    return false;
                }
                if PREVIOUS.set(Previous(previous)).is_err() {
                    return false;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_sigbus as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0
            }
        })
    }

    /// Registers the map `[start, start + len)`; `None` when the table is full.
    pub fn register(start: usize, len: usize) -> Option<usize> {
        for (i, slot) in TABLE.iter().enumerate() {
            if slot
                .start
                .compare_exchange(0, BUSY, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                slot.faulted.store(false, Ordering::Relaxed);
                slot.len.store(len, Ordering::Relaxed);
                slot.start.store(start, Ordering::Release);
                return Some(i);
            }
        }
        None
    }

    /// Frees slot `i`.
    pub fn unregister(i: usize) {
        let Some(slot) = TABLE.get(i) else { return };
        slot.start.store(BUSY, Ordering::Release);
        slot.faulted.store(false, Ordering::Relaxed);
        slot.len.store(0, Ordering::Relaxed);
        slot.start.store(0, Ordering::Release);
    }

    /// Whether slot `i`'s map faulted.
    pub fn faulted(i: usize) -> bool {
        TABLE
            .get(i)
            .is_some_and(|s| s.faulted.load(Ordering::Acquire))
    }

    /// Faults absorbed so far.
    pub fn fault_count() -> u64 {
        FAULTS.load(Ordering::Acquire)
    }

    /// The `SIGBUS` handler.
    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
        let addr = unsafe { info.as_ref().map_or(0, |i| i.si_addr() as usize) };
        let page = PAGE.load(Ordering::Relaxed);
        for slot in &TABLE {
            let start = slot.start.load(Ordering::Acquire);
            if start == 0 || start == BUSY {
                continue;
            }
            let len = slot.len.load(Ordering::Relaxed);
            let Some(off) = addr.checked_sub(start).filter(|&o| o < len) else {
                continue;
            };
            // From the faulting page to the map's last page: zero pages.
            let first = start + (off & !(page - 1));
            let end = (start + len).div_ceil(page) * page;
            // SAFETY: `[first, end)` lies inside the registered map, which is alive (it is
            // unregistered before it is unmapped), and nobody holds a `&mut` into it; an
            // anonymous read-only private map over it makes those bytes read as zeros.
            let replaced = unsafe {
                libc::mmap(
                    first as *mut libc::c_void,
                    end - first,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if replaced != libc::MAP_FAILED {
                slot.faulted.store(true, Ordering::Release);
                FAULTS.fetch_add(1, Ordering::AcqRel);
                return;
            }
        }
        // Not ours: the previous action.
        let Some(Previous(previous)) = PREVIOUS.get() else {
            return;
        };
        let handler = previous.sa_sigaction;
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            // SAFETY: restores the action that was in place; returning re-runs the faulting
            // access, which then gets that action (the default: the process dies of SIGBUS).
            unsafe { libc::sigaction(sig, previous, std::ptr::null_mut()) };
        } else {
            // SAFETY: the action in place before ours, neither SIG_DFL nor SIG_IGN.
            unsafe { chain(previous, sig, info, ctx) };
        }
    }

    /// Calls the handler of `previous` with a handler's arguments: the three of an
    /// `SA_SIGINFO` handler, or the signal number alone.
    ///
    /// # Safety
    /// `previous` is an action `sigaction` reported, whose handler is neither `SIG_DFL` nor
    /// `SIG_IGN`.
    pub(crate) unsafe fn chain(
        previous: &libc::sigaction,
        sig: libc::c_int,
        info: *mut libc::siginfo_t,
        ctx: *mut libc::c_void,
    ) {
        let handler = previous.sa_sigaction;
        if previous.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: an `SA_SIGINFO` handler has this signature; it gets our arguments.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(handler) };
            f(sig, info, ctx);
        } else {
            // SAFETY: a plain handler takes the signal number.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            f(sig);
        }
    }
}
