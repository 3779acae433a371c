//! The test binary's global allocator: the system allocator, metered per thread.
//!
//! Every test of this binary runs on a thread of its own next to the others, so each meter
//! counts only what the calling thread does: [`allocations`] counts the allocations made by
//! a closure (`alloc_free`, `zero_alloc`), [`peak`] records the peak of the live heap bytes
//! above the level at its start (`peak_memory`). Memory that the metered thread frees but
//! another thread allocated lowers its live level, as in a program with one thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Metered;

thread_local! {
    /// Set while [`allocations`] runs on this thread.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocations (`alloc`, `alloc_zeroed`, `realloc`) counted on this thread.
    static COUNT: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated minus bytes freed on this thread.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The highest `LIVE` since [`peak`] last reset it.
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// Counts one allocation of `size` bytes (and `freed` bytes released with it) on this thread.
fn note(size: usize, freed: usize) {
    // `try_with`: the thread-locals may be gone while a thread shuts down.
    let _ = COUNTING.try_with(|c| {
        if c.get() {
            let _ = COUNT.try_with(|n| n.set(n.get() + 1));
        }
    });
    // The new block is counted before the old one is released (a moving realloc holds both).
    let _ = LIVE.try_with(|live| {
        let now = live.get() + size as isize;
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
        live.set(now - freed as isize);
    });
}

// SAFETY: forwards to the system allocator unchanged; only counts calls and sizes.
unsafe impl GlobalAlloc for Metered {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size(), 0);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size(), 0);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size, layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|live| live.set(live.get() - layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Metered = Metered;

/// `f`'s result and the allocations it made on this thread.
pub fn allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    COUNT.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, COUNT.with(|n| n.get()))
}

/// `f`'s result and the peak of the live heap bytes of this thread while it ran, above the
/// level at its start.
pub fn peak<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let base = LIVE.with(|l| l.get());
    PEAK.with(|p| p.set(base));
    let r = f();
    let peak = PEAK.with(|p| p.get()) - base;
    (r, peak.max(0) as u64)
}
