//! How the tools get the bytes of their input files.
//!
//! The library has no `unsafe` code, so it cannot memory-map files itself. A program that
//! can (`loader-sim` maps through its FFI crate) passes a [`MapFile`] to
//! [`crate::bundler::run_with`]; by default inputs are read into memory with
//! [`read_file`].

use std::fs::File;
use std::io::Read;

/// The bytes of an open input file, as the embedding program supplies them.
pub trait MappedInput {
    /// The file's bytes.
    fn bytes(&self) -> &[u8];

    /// Says that `part` (a slice of [`MappedInput::bytes`]) has been written out and will
    /// not be read again, so a memory map may drop its pages. Does nothing by default.
    fn release(&self, part: &[u8]) {
        let _ = part;
    }
}

impl MappedInput for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// Opens an input file: a memory map, or its bytes read into memory ([`read_file`]).
pub type MapFile = fn(&File) -> std::io::Result<Box<dyn MappedInput>>;

/// A [`MapFile`] that reads the whole file into memory.
pub fn read_file(file: &File) -> std::io::Result<Box<dyn MappedInput>> {
    let mut v = Vec::new();
    let mut f = file;
    f.read_to_end(&mut v)?;
    Ok(Box::new(v))
}

/// True when `part` lies inside `whole` (compared by address).
pub(crate) fn contains(whole: &[u8], part: &[u8]) -> bool {
    let (w, p) = (whole.as_ptr() as usize, part.as_ptr() as usize);
    p >= w && p.saturating_add(part.len()) <= w.saturating_add(whole.len())
}
