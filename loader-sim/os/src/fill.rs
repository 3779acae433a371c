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

/// See the module documentation.
pub struct FillBuffer {
    /// Owns the memory; never dereferenced after construction.
    _map: MmapMut,
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
            _map: map,
            ptr,
            len,
            filled: AtomicUsize::new(0),
            writer_taken: AtomicBool::new(false),
        })
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
}
