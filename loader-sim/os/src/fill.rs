//! A buffer that one thread fills front to back while other threads read the part already
//! filled, without copies: `loader-sim` decodes a compressed bundle into it on one thread
//! (libzstd writes straight into it) and hashes the decoded prefix on another.
//!
//! The protocol: a single [`FillWriter`] writes at and after its position, through a raw
//! pointer, and publishes a length with a release store; readers see the published prefix
//! ([`FillBuffer::filled`]) with an acquire load. Bytes before the published length are
//! never written again, so shared references to them stay valid; no `&mut` to the buffer
//! is ever made. The memory is an anonymous map advised for transparent huge pages (the
//! first touch of ~100 MB costs about 4x less on 2 MiB pages than on 4 KiB ones).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use memmap2::MmapMut;

/// What owns a [`FillBuffer`]'s memory.
enum Storage {
    /// An anonymous map; never dereferenced after construction.
    Map(#[allow(dead_code)] MmapMut),
    /// A heap allocation of `len` bytes' capacity, handed back by
    /// [`FillBuffer::into_vec`]; never touched through the `Vec` while shared.
    Heap(Vec<u8>),
}

/// See the module documentation.
pub struct FillBuffer {
    /// Owns the memory.
    storage: Storage,
    ptr: *mut u8,
    len: usize,
    filled: AtomicUsize,
    writer_taken: AtomicBool,
}

// SAFETY: the buffer's bytes are shared under the protocol of the module documentation:
// readers only read `[0, filled)`, published with release/acquire ordering; the one writer
// (handed out once by `writer`) only writes at `[filled, len)`.
unsafe impl Sync for FillBuffer {}
// SAFETY: the raw pointer is into the map the struct owns; moving the struct moves both.
unsafe impl Send for FillBuffer {}

impl FillBuffer {
    /// A zero-filled buffer of `len` bytes (at least 1 byte is mapped).
    pub fn new(len: usize) -> io::Result<FillBuffer> {
        let mut map = MmapMut::map_anon(len.max(1))?;
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::HugePage);
        let ptr = map.as_mut_ptr();
        Ok(FillBuffer {
            storage: Storage::Map(map),
            ptr,
            len,
            filled: AtomicUsize::new(0),
            writer_taken: AtomicBool::new(false),
        })
    }

    /// A buffer of `len` bytes on the heap, whose filled prefix [`FillBuffer::into_vec`]
    /// hands back without a copy: a decoder thread fills it while the caller hashes it,
    /// and the caller keeps it as the decoded content (one buffer of the content's size,
    /// not a map and a copy of it). Fails when the memory cannot be reserved.
    pub fn on_heap(len: usize) -> io::Result<FillBuffer> {
        let mut v: Vec<u8> = Vec::new();
        v.try_reserve_exact(len.max(1))
            .map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
        #[cfg(target_os = "linux")]
        advise_huge_pages(v.as_mut_ptr(), v.capacity());
        let ptr = v.as_mut_ptr();
        Ok(FillBuffer {
            storage: Storage::Heap(v),
            ptr,
            len,
            filled: AtomicUsize::new(0),
            writer_taken: AtomicBool::new(false),
        })
    }

    /// The filled prefix as a `Vec`, without a copy, for a buffer made by
    /// [`FillBuffer::on_heap`]; `Err(self)` for a mapped buffer.
    pub fn into_vec(mut self) -> Result<Vec<u8>, FillBuffer> {
        let n = *self.filled.get_mut();
        match &mut self.storage {
            Storage::Heap(v) => {
                let mut v = std::mem::take(v);
                // SAFETY: `n <= len <= capacity` (the writer publishes positions within
                // the buffer) and the bytes below a published length were written
                // (module documentation); `self` is owned, so no reader or writer is left.
                unsafe { v.set_len(n) };
                Ok(v)
            }
            Storage::Map(_) => Err(self),
        }
    }

    /// Capacity in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes published by the writer so far.
    pub fn filled(&self) -> &[u8] {
        let n = self.filled.load(Ordering::Acquire);
        // SAFETY: `n <= len` (the writer publishes positions within the buffer), the
        // memory is mapped for the life of `self`, and bytes below a published length are
        // initialised and never written again (module documentation).
        unsafe { std::slice::from_raw_parts(self.ptr, n) }
    }

    /// The buffer's one writer; `None` once it has been handed out.
    pub fn writer(self: &Arc<Self>) -> Option<FillWriter> {
        if self.writer_taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(FillWriter {
            buf: Arc::clone(self),
            pos: 0,
        })
    }
}

/// Advises the whole 2 MiB pages inside `[ptr, ptr + len)` for transparent huge pages, as
/// the mapped buffer is (a large heap block is a map of its own; its first bytes are the
/// allocator's).
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    const HUGE: usize = 2 << 20;
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize).saturating_add(len) / HUGE * HUGE;
    if end > start {
        // SAFETY: `[start, end)` lies inside the allocation; MADV_HUGEPAGE changes no
        // content and no mapping, only how the kernel backs the pages.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// The single writer of a [`FillBuffer`]: writes at and after [`FillWriter::position`]
/// (through [`zstd::zstd_safe::WriteBuf`] with the `libzstd` feature), then
/// [`FillWriter::publish`]es.
pub struct FillWriter {
    buf: Arc<FillBuffer>,
    pos: usize,
}

impl FillWriter {
    /// Bytes written so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Makes everything written so far visible to readers.
    pub fn publish(&self) {
        self.buf.filled.store(self.pos, Ordering::Release);
    }
}

// SAFETY: `as_slice` covers exactly the bytes written so far (initialised; readers hold at
// most shared references to a prefix of them); `as_mut_ptr` and `capacity` describe the
// whole buffer, which zstd writes only at and after the position it is given (stable
// output mode keeps earlier output in place, and reads it for matches); `filled_until`
// records what zstd reports as written.
#[cfg(feature = "libzstd")]
unsafe impl zstd::zstd_safe::WriteBuf for FillWriter {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: `[0, pos)` has been written (zstd reported it) and is not written again.
        unsafe { std::slice::from_raw_parts(self.buf.ptr, self.pos) }
    }

    fn capacity(&self) -> usize {
        self.buf.len
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf.ptr
    }

    unsafe fn filled_until(&mut self, n: usize) {
        self.pos = n.min(self.buf.len);
    }
}

#[cfg(all(test, feature = "libzstd"))]
mod tests {
    use super::*;
    use zstd::zstd_safe::WriteBuf;

    #[test]
    fn one_writer_and_a_growing_prefix() {
        let b = Arc::new(FillBuffer::new(100).unwrap());
        let mut w = b.writer().unwrap();
        assert!(b.writer().is_none());
        assert!(b.filled().is_empty());
        // SAFETY: writes 10 bytes within the capacity, at the writer's position.
        unsafe {
            std::ptr::write_bytes(w.as_mut_ptr(), 7, 10);
            w.filled_until(10);
        }
        assert_eq!(w.as_slice(), &[7u8; 10][..]);
        assert!(b.filled().is_empty(), "nothing is visible before publish");
        w.publish();
        assert_eq!(b.filled(), &[7u8; 10][..]);
        assert_eq!(b.len(), 100);
    }

    /// A heap buffer hands back exactly its published prefix, without a copy (the same
    /// address), once its writer is gone; a mapped one is returned as it is.
    #[test]
    fn a_heap_buffer_becomes_the_vec_it_was_filled_into() {
        let b = Arc::new(FillBuffer::on_heap(1 << 20).unwrap());
        let mut w = b.writer().unwrap();
        let at = w.as_mut_ptr() as usize;
        // SAFETY: writes 4096 bytes within the capacity, at the writer's position.
        unsafe {
            std::ptr::write_bytes(w.as_mut_ptr(), 9, 4096);
            w.filled_until(4096);
        }
        w.publish();
        drop(w);
        let v = Arc::try_unwrap(b).ok().unwrap().into_vec().ok().unwrap();
        assert_eq!(v, vec![9u8; 4096]);
        assert_eq!(v.as_ptr() as usize, at);
        assert!(FillBuffer::new(10).unwrap().into_vec().is_err());
    }
}
