//! A `#![no_std]`, `#![no_main]` binary over offload-image with its own panic handler and
//! global allocator (libc `posix_memalign`/`free`). If anything in the dependency graph
//! linked std, the build would fail with "duplicate lang item `panic_impl`".
//!
//! It decompresses real CCOB fixtures (zstd v2, zstd v3, zlib v2), verifies their hashes and
//! lists the images of the result, then writes "all checks OK".

#![no_std]
#![no_main]

extern crate alloc;

use core::alloc::{GlobalAlloc, Layout};
use offload_image::{for_each_unit, ReadOptions};

#[link(name = "c")]
extern "C" {
    fn posix_memalign(out: *mut *mut u8, align: usize, size: usize) -> i32;
    fn free(p: *mut u8);
    fn write(fd: i32, buf: *const u8, n: usize) -> isize;
    fn abort() -> !;
}

struct Libc;

unsafe impl GlobalAlloc for Libc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let mut p = core::ptr::null_mut();
        let align = layout.align().max(core::mem::size_of::<usize>());
        // SAFETY: `p` is a valid out pointer; align is a power of two multiple of usize.
        if unsafe { posix_memalign(&mut p, align, layout.size()) } != 0 {
            return core::ptr::null_mut();
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, _: Layout) {
        // SAFETY: `p` came from posix_memalign.
        unsafe { free(p) }
    }
}

#[global_allocator]
static ALLOC: Libc = Libc;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    say("panic\n");
    // SAFETY: abort never returns.
    unsafe { abort() }
}

/// The prebuilt core/alloc are compiled with panic=unwind and refer to these.
#[no_mangle]
pub extern "C" fn rust_eh_personality() {}
/// See [`rust_eh_personality`].
#[no_mangle]
pub extern "C" fn _Unwind_Resume() -> ! {
    // SAFETY: abort never returns.
    unsafe { abort() }
}

fn say(s: &str) {
    // SAFETY: the buffer is valid for its length.
    unsafe {
        write(1, s.as_ptr(), s.len());
    }
}

const FIXTURES: [&[u8]; 3] = [
    include_bytes!("../../tests/data/corpus/compressed/hip_6arch.zstd.ccob"),
    include_bytes!("../../tests/data/corpus/compressed/hip_6arch.v3-zstd.llvm22.ccob"),
    include_bytes!("../../tests/data/corpus/compressed/hip_6arch.zlib.ccob"),
];

fn check() -> Result<(), &'static str> {
    let options = ReadOptions::default();
    for data in FIXTURES {
        let mut images = 0usize;
        let mut bytes = 0u64;
        for_each_unit(data, &options, |unit| {
            let open = unit.open(&options)?;
            for image in open.images() {
                images += 1;
                bytes += image.size();
            }
            Ok(())
        })
        .map_err(|e| e.what())?;
        // hip_6arch: a host entry and six code objects, 21920 bytes of code.
        if images != 7 || bytes != 21920 {
            return Err("unexpected image list");
        }
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
    match check() {
        Ok(()) => {
            say("all checks OK\n");
            0
        }
        Err(e) => {
            say(e);
            say("\n");
            1
        }
    }
}
