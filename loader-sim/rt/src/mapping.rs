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
