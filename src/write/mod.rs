//! Writers for every container the readers understand (`std` feature).
//!
//! Each writer produces exactly the bytes LLVM 22's tools write for the same input, except
//! for compressed payloads (see [`ccob`]):
//!
//! * [`bundle`]: binary offload bundles (`clang-offload-bundler -type=bc|o|gch|ast`);
//! * [`text`]: text offload bundles (`-type=ll|s|i|ii|cui|hipi|d`);
//! * [`ccob`]: compressed bundles (`CCOB` v2 and v3, zlib or zstd);
//! * [`offload_binary`]: OffloadBinaries (v1 as `clang-offload-packager` writes them, and the
//!   multi-entry v2);
//! * [`strtab`]: the ELF-style string table with suffix sharing that LLVM's
//!   `StringTableBuilder` lays out (used by OffloadBinaries and ELF string tables).
//!
//! Writers borrow their inputs and either append to a caller's `Vec<u8>` or stream into a
//! [`std::io::Write`]; nothing is copied beyond what the output needs. On-disk layouts come
//! from [`crate::raw`] (serialised with zerocopy's `IntoBytes`), never from a second
//! definition.
//!
//! Invalid requests (an alignment of zero, a version the format does not have, sizes a
//! 32-bit field cannot hold) are reported as [`crate::Error`]; I/O failures of the sink as
//! [`std::io::Error`]. [`WriteError`] carries either.
//!
//! # Example
//!
//! ```
//! use offload_image::write::{bundle::bundle_to_vec, ccob};
//! use offload_image::{for_each_unit, ReadOptions};
//!
//! // What the HIP driver embeds: an empty host entry and the code objects, 4096-aligned.
//! let entries: [(&str, &[u8]); 2] = [
//!     ("host-x86_64-unknown-linux-gnu-", b""),
//!     ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", b"\x7fELF code object"),
//! ];
//! let bundle = bundle_to_vec(&entries, 4096)?;
//! // Compressed as LLVM 22 does by default (CCOB v3, zstd).
//! let compressed = ccob::compress(&bundle, &ccob::CcobOptions::default())?;
//!
//! // Both read back to the same images.
//! let options = ReadOptions::default();
//! for data in [&bundle, &compressed] {
//!     for_each_unit(data, &options, |unit| {
//!         let open = unit.open(&options)?;
//!         let image = open.images().nth(1).expect("two entries");
//!         assert_eq!(image.bytes, b"\x7fELF code object");
//!         Ok(())
//!     })?;
//! }
//! # Ok::<(), offload_image::Error>(())
//! ```

pub mod bundle;
pub mod ccob;
pub mod offload_binary;
tools_layer! {
    strtab;
}
pub mod text;

use std::fmt;

/// A failure while writing: the request was invalid, or the sink failed.
#[derive(Debug)]
pub enum WriteError {
    /// The input cannot be represented (see [`crate::ErrorKind`] for the reason).
    Invalid(crate::Error),
    /// The sink returned an error.
    Io(std::io::Error),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Invalid(e) => write!(f, "{}", e.what()),
            WriteError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriteError::Invalid(e) => Some(e),
            WriteError::Io(e) => Some(e),
        }
    }
}

impl From<crate::Error> for WriteError {
    fn from(e: crate::Error) -> Self {
        WriteError::Invalid(e)
    }
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// `usize` → `u64` (lossless on every supported platform).
#[inline]
pub(crate) fn len64(n: usize) -> u64 {
    n as u64
}

/// Writes `n` zero bytes.
pub(crate) fn write_zeros<W: std::io::Write + ?Sized>(
    out: &mut W,
    mut n: u64,
) -> std::io::Result<()> {
    const ZEROS: [u8; 4096] = [0; 4096];
    while n > 0 {
        let chunk = n.min(len64(ZEROS.len()));
        out.write_all(ZEROS.get(..chunk as usize).unwrap_or(&ZEROS))?;
        n = n.saturating_sub(chunk);
    }
    Ok(())
}
