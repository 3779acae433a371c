//! Read-only memory maps of input files, for `loader-sim` (which has no `unsafe` of its own).

use std::fs::File;

pub use memmap2::Mmap;

/// Maps `file` read-only and private.
///
/// The map's contents are what the file holds; another process truncating the file while it
/// is mapped would make later reads fault (SIGBUS). `loader-sim` reads build artefacts that
/// are not modified while it runs, which is the condition under which this is sound.
pub fn map_file(file: &File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: see the function's documentation: the mapping is read-only and private, and
    // the caller's files are not truncated while mapped.
    unsafe { memmap2::Mmap::map(file) }
}

/// Drops the pages of `map[offset .. offset + len]` (rounded out to whole pages) from this
/// process's page tables (`MADV_DONTNEED`), keeping the peak resident set of a walk over a
/// big file small. The bytes stay readable: touching them again maps the same file pages
/// back in from the page cache.
/// Elsewhere than on Unix, nothing is dropped.
pub fn release(map: &Mmap, offset: usize, len: usize) -> std::io::Result<()> {
    #[cfg(not(unix))]
    {
        let _ = (map, offset, len);
        Ok(())
    }
    #[cfg(unix)]
    // SAFETY: `MADV_DONTNEED` on a read-only file mapping, which nobody can write through,
    // only removes page-table entries: the next access maps the same file page again, so
    // every `&[u8]` into the map keeps its contents (the one hazard of DONTNEED, losing
    // private modifications of the pages, cannot arise without writes).
    unsafe {
        map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len)
    }
}
