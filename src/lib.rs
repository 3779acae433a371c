//! In-place reader, selector and registration model for GPU offload device images.
//!
//! `offload-image` reads the containers clang puts device code in — binary and text
//! offload bundles (`__CLANG_OFFLOAD_BUNDLE__`), compressed bundles (`CCOB` v1–v3, zlib or
//! zstd) and LLVM OffloadBinaries (`10 FF 10 AD`) — directly from the caller's bytes, also
//! when they sit inside ELF sections or `ar` archives. Every image it hands out is a
//! `&[u8]` into the caller's buffer; only decompressed content is owned, once.
//!
//! The data takes one road, and every module knows only the steps before it; the road's
//! exact order is written once, in `docs/ARCHITECTURE.md`, and a test enforces it. The
//! modules, step by step:
//!
//! * bytes: [`raw`], the on-disk structures (zerocopy, little-endian, alignment 1);
//!   [`decompress`] (every codec) and [`driver`] (the NVIDIA driver's versions, the PTX ISA
//!   it compiles and its environment switches);
//! * containers: [`bundle`], [`text`], [`ccob`], [`offload_binary`], [`nvfatbin`] (one
//!   reader per format), [`kpack`] (AMD `.kpack` archives, `HIPK` wrappers, ref records and
//!   the kpack loader's path rules),
//!   [`entry_id`] (bundle entry IDs split as stored), and [`container`] (finding those inside
//!   files, ELF sections and archives: [`units`], an iterator of [`Unit`]s);
//! * images: [`image`], the format-independent [`Image`];
//! * host files: [`host`], the address space a host file gives its program, and [`split`]
//!   (per `HIPK` wrapper of a split library, its ref record and TOC key);
//! * candidates: [`target`]: AMDGPU target IDs and processors, NVPTX architectures, device
//!   ELF headers, devices, and [`identify`] (what an image is built for);
//! * choice: [`mod@select`] (the compatibility predicate, the ranking, and [`choose`]: any
//!   iterator of images, any number of devices) and [`stream`] (the same choice made in one pass over a
//!   compressed bundle's decompressed stream, without holding it);
//! * checks: [`validate`], every problem of a file with a severity, a code and its offset;
//! * registration: [`registration`], the runtime records, views that follow their pointers,
//!   static discovery in host ELF files, and the simulated runtime [`registration::Registry`];
//! * `write` (feature `write`, which implies `std`), beside the road: writers for every format, byte-identical to
//!   LLVM 22's tools, and `prune` (the same feature): dropping the device images no kept
//!   device can load, from every container and host file layout.
//!
//! The crate is `#![no_std]` (with `alloc`) and forbids `unsafe`. Malformed input gives an
//! [`Error`] with a matchable [`ErrorKind`] and the byte offset, never a panic.
//!
//! Section references in this documentation, such as `FORMATS.md` §2.4 or
//! `COMPATIBILITY.md` §10, are to the documents in the repository's `docs/` directory.
//!
//! # Example
//!
//! ```
//! use offload_image::{choose, units, Device, ReadOptions, SelectOptions};
//!
//! // A bundle with one (empty) host entry and one 4-byte device image.
//! let mut b = Vec::new();
//! b.extend_from_slice(b"__CLANG_OFFLOAD_BUNDLE__");
//! b.extend_from_slice(&2u64.to_le_bytes());
//! let ids: [&[u8]; 2] = [b"host-x86_64-unknown-linux-gnu-", b"hipv4-amdgcn-amd-amdhsa--gfx90a"];
//! let data_at = 32 + ids.iter().map(|id| 24 + id.len() as u64).sum::<u64>();
//! for (id, size) in ids.iter().zip([0u64, 4]) {
//!     b.extend_from_slice(&data_at.to_le_bytes());
//!     b.extend_from_slice(&size.to_le_bytes());
//!     b.extend_from_slice(&(id.len() as u64).to_le_bytes());
//!     b.extend_from_slice(id);
//! }
//! b.extend_from_slice(b"\x7fELF");
//!
//! let options = ReadOptions::default();
//! let device = Device::parse("gfx90a:xnack-")?;
//! for unit in units(&b, &options) {           // an iterator; allocation-free
//!     let unit = unit?;
//!     let open = unit.open(&options)?;         // headers; CCOB content decompressed once
//!     for image in open.images() {             // discovery order
//!         println!("{:?} {} bytes at {:?}", image.entry_id, image.size(), image.offset);
//!     }
//!     assert_eq!(open.images().nth(1).unwrap().file_range(), Some(data_at..data_at + 4));
//!     // The choice for a device, and why: four bytes are not a loadable code object.
//!     let choices = choose(open.images(), &[device], &SelectOptions::default());
//!     assert!(choices[0].image.is_none());
//!     let (index, why) = choices[0].rejection.unwrap();
//!     println!("nothing for {device}: image {index}: {why}");
//! }
//! # Ok::<(), offload_image::Error>(())
//! ```

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Untrusted bytes must never take the process down: no indexing or slicing that can panic,
// no unchecked arithmetic, no explicit panics, unwraps or expects in library code.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::panic,
        clippy::unwrap_used,
        clippy::expect_used
    )
)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod bundle;
mod bytes;
pub mod ccob;
pub mod container;
pub mod decompress;
pub mod doctor;
pub mod driver;
pub mod entry_id;
mod error;
pub mod host;
pub mod image;
pub mod kpack;
pub mod nvfatbin;
pub mod offload_binary;
#[cfg(feature = "write")]
pub mod prune;
pub mod raw;
pub mod registration;
pub mod select;
pub mod split;
pub mod stream;
pub mod target;
pub mod text;
pub mod validate;
#[cfg(feature = "write")]
pub mod write;

pub use ccob::{CompressedBundle, CompressionMethod, Decoders, Decompressor};
pub use container::{for_each_unit, units, Location, OpenUnit, Unit, UnitContent, Units};
pub use driver::{CudaDriver, DriverVersion, JitSwitches};
pub use error::{Error, ErrorKind, Result};
pub use image::{Checked, Encoded, Format, Image, ImageKind, OffloadKind};
pub use select::{
    check, choose, explain, select, Candidate, Choice, KindFilter, Loss, Policy, RankKey,
    Rejection, SelectOptions, Selection, Verdict,
};
pub use stream::{choose_streaming, choose_streaming_keeping, KeptImage, StreamChoice};
pub use target::{identify, image_name, Device, Identity, Target, TargetId};
pub use validate::{validate, Code as FindingCode, Finding, Severity};

/// Resource limits applied while reading untrusted bytes: part of the API contract.
///
/// The defaults are generous for real files (the largest real bundles hold a few hundred
/// MB of code and a handful of entries) and keep hostile input from exhausting memory or
/// time. Every limit is checked before anything is allocated for what it bounds:
///
/// | limit | what it bounds | default | refused with |
/// |---|---|---|---|
/// | [`max_decompressed_size`](Limits::max_decompressed_size) | the content of one `CCOB`; all compressed OffloadBinaries of one unit together; all compressed entries of one NVIDIA fatbinary together | 1 GiB | [`ErrorKind::LimitExceeded`] at the field that claims the size |
/// | [`max_entries`](Limits::max_entries) | entries of a bundle, text bundle, OffloadBinary or fatbinary; strings per entry; binaries in a sequence; containers in one section; offload-entry tables, and entries bound from them to all registered units together | 65 536 | [`ErrorKind::LimitExceeded`] at the count field (or the table) |
/// | [`max_id_len`](Limits::max_id_len) | bundle entry IDs; NUL-terminated OffloadBinary strings | 4 KiB | [`ErrorKind::LimitExceeded`] |
/// | [`max_depth`](Limits::max_depth) | archive in archive in ELF section ... (hard cap [`container::MAX_DEPTH`] = 8) | 6 | [`ErrorKind::LimitExceeded`] |
///
/// A header's claim is never trusted for allocation: a declared decompressed size is also
/// checked against what the payload could produce at most (zlib 1032:1, zstd 32768:1), and
/// the output grows only as the stream really produces bytes, up to the declared size (a
/// longer stream is [`ErrorKind::SizeMismatch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest decompressed size accepted (compressed bundles, compressed OffloadBinaries).
    /// Checked against the header's claim before anything is allocated.
    pub max_decompressed_size: u64,
    /// Most entries in one bundle, OffloadBinary or sequence; most strings per entry.
    pub max_entries: u64,
    /// Longest bundle entry ID.
    pub max_id_len: u64,
    /// Deepest nesting of containers (archive → ELF → section → bundle, ...).
    pub max_depth: usize,
}

impl Limits {
    /// The default limits: 1 GiB decompressed, 65 536 entries, 4 KiB IDs, depth 6.
    pub const DEFAULT: Limits = Limits {
        max_decompressed_size: 1 << 30,
        max_entries: 1 << 16,
        max_id_len: 4096,
        max_depth: 6,
    };

    /// The hard cap on [`Limits::max_depth`]: containers nest at most this deep whatever
    /// the limits say.
    pub const MAX_DEPTH: usize = container::MAX_DEPTH;

    /// No limits beyond the size of the data (depth is still capped at
    /// [`container::MAX_DEPTH`]).
    pub const UNLIMITED: Limits = Limits {
        max_decompressed_size: u64::MAX,
        max_entries: u64::MAX,
        max_id_len: u64::MAX,
        max_depth: container::MAX_DEPTH,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Options for reading containers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Resource limits.
    pub limits: Limits,
    /// Verify the truncated MD5 of decompressed bundles (default: on; costs an MD5 pass).
    pub verify_hash: bool,
    /// The caller's decoders for compressed bundles (default: the built-in ones).
    pub decoders: ccob::Decoders,
    /// Refuse bytes between containers that are neither zero padding nor a container
    /// (default: off, they are skipped and reported in [`Unit::skipped`]; `FORMATS.md`
    /// §2.4).
    pub strict: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            limits: Limits::DEFAULT,
            verify_hash: true,
            decoders: ccob::Decoders::BUILTIN,
            strict: false,
        }
    }
}
