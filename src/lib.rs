//! In-place reader, selector and registration model for GPU offload device images.
//!
//! `offload-image` reads the containers clang puts device code in — binary and text
//! offload bundles (`__CLANG_OFFLOAD_BUNDLE__`), compressed bundles (`CCOB` v1–v3, zlib or
//! zstd) and LLVM OffloadBinaries (`10 FF 10 AD`) — directly from the caller's bytes, also
//! when they sit inside ELF sections or `ar` archives. Every image it hands out is a
//! `&[u8]` into the caller's buffer; only decompressed content is owned, once.
//!
//! # Tiers
//!
//! As `object` does, the crate is cut in tiers (`docs/ARCHITECTURE.md`, "Tiers"):
//!
//! * **The plugin tier, at the crate root**: what a runtime plugin holds, listed below.
//!   The C API and the Python module are its first users.
//! * **[`read`]**: the format readers, one module per format (`read::bundle`, `read::ccob`,
//!   `read::text`, `read::offload_binary`, `read::nvfatbin`, `read::kpack`: each format's
//!   reader type and entry type), and **[`raw`]**: the on-disk records (zerocopy, little-endian,
//!   alignment 1) and magic numbers.
//! * **`write`** (feature `write`, which implies `std`): writers for every format,
//!   byte-identical to LLVM 22's tools.
//! * **The tools' layer** (feature `tools`): the modules `loader-sim`, the drop-in LLVM tools
//!   and the tests build on — the simulated runtime's registry and the runtime records
//!   (`registration`), host files (`host`, with kpack's host side in `host::kpack`), judging a library for devices
//!   (`judge`), pruning (`prune`, with `write`), the driver and target tables (`driver`,
//!   `arch`), and the per-format and unified modules whole (`bundle`, `ccob`, `container`,
//!   `image`, `select`, `stream`, ...), the root names of the plugin tier's detail types
//!   (`Identity`, `Rejection`, `RankKey`, ...: a plugin reads them through fields and
//!   methods) and the members of plugin-tier types that only the tools use. Not a stable
//!   plugin API: without the feature these modules are private to the crate.
//!
//! The plugin tier:
//!
//! | step | names |
//! |---|---|
//! | open a buffer | [`units`] → [`Units`] of [`Unit`] (or [`for_each_unit`]) (its [`Location`], [`Damage`]); [`Unit::open`] → [`OpenUnit`]; [`split_library`]: why a kpack-split library has no unit |
//! | images | [`OpenUnit::images`] → [`Image`] ([`Format`], [`ImageKind`], [`OffloadKind`]); [`Image::name`], [`image_name`] |
//! | devices and targets | [`Device`] ([`Device::parse`]), [`Target`], [`identify`] |
//! | choose | [`choose`] → [`Choice`] per device; [`SelectOptions`] ([`Policy`], [`KindFilter`], [`hip_force_spirv`], and the CUDA driver's [`CudaDriver`], [`DriverVersion`], [`JitSwitches`]) |
//! | choose while streaming | [`choose_streaming`], [`choose_streaming_keeping`] → [`StreamChoice`] ([`KeptImage`]): a compressed bundle chosen in without holding its content |
//! | bytes | [`Image::decode`] (borrowed, or decoded now) |
//! | explain | [`Choice::rejection`] and [`Choice::losses`] → [`Lost`] ([`Loss`], [`Loss::name`]; [`Lost::reason`]: the text `select --explain` prints) |
//! | check a file | [`validate()`] → [`Finding`] ([`Severity`]) |
//! | options | [`ReadOptions`] ([`Limits`], [`Decoders`]: [`Decompressor`], [`CompressedBundle`], [`CompressionMethod`]) |
//! | errors | [`Error`], [`ErrorKind`], [`Result`] |
//!
//! Beneath the tiers the modules lie along one road, and every module knows only the steps
//! before it; the road's exact order is written once, in `docs/ARCHITECTURE.md`, and a test
//! enforces it.
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
// Without `tools` the tools' layer is private to the crate, and the plugin tier's documentation
// may name its items (the tools' build documents them all, as docs.rs does).
#![cfg_attr(not(feature = "tools"), allow(rustdoc::private_intra_doc_links))]
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

/// The README's code blocks, run as doc tests (its Rust example in a `main` returning
/// `Box<dyn std::error::Error>`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

/// Declares modules of the tools' layer: public with feature `tools` (the layer `loader-sim`,
/// the drop-in tools and the tests build on), private to the crate without it, where the
/// plugin tier re-exports what a runtime needs. Without `tools` some of their items serve
/// only the tools, hence `dead_code` allowed there.
macro_rules! tools_layer {
    ($($(#[$attr:meta])* $name:ident;)*) => {$(
        #[cfg(feature = "tools")]
        $(#[$attr])*
        pub mod $name;
        #[cfg(not(feature = "tools"))]
        $(#[$attr])*
        #[allow(dead_code, unused_imports)]
        pub(crate) mod $name;
    )*};
}

/// Declares one method, associated function or constant of a plugin-tier type that serves
/// the tools' layer: `pub` with feature `tools`, `pub(crate)` without it (where it may be
/// unused, hence `dead_code` allowed). `pub(crate)` and `pub` cannot be switched by
/// `cfg_attr`, hence the item twice, one of the two compiled.
macro_rules! tools_pub {
    ($(#[$attr:meta])* pub $($item:tt)*) => {
        #[cfg(feature = "tools")]
        $(#[$attr])*
        pub $($item)*
        #[cfg(not(feature = "tools"))]
        $(#[$attr])*
        #[allow(dead_code)]
        pub(crate) $($item)*
    };
}

/// Declares a plugin-tier struct whose fields after `@tools` serve the tools' layer: `pub`
/// with feature `tools`, `pub(crate)` without it (the struct twice, one of the two compiled).
/// The fields before `@tools` keep their own visibility.
macro_rules! tools_fields {
    (
        $(#[$attr:meta])*
        pub struct $name:ident $(<$($lt:lifetime),*>)? {
            $($(#[$pattr:meta])* $pv:vis $pf:ident : $pty:ty,)*
            @tools
            $($(#[$tattr:meta])* pub $tf:ident : $tty:ty,)*
        }
    ) => {
        #[cfg(feature = "tools")]
        $(#[$attr])*
        pub struct $name $(<$($lt),*>)? {
            $($(#[$pattr])* $pv $pf: $pty,)*
            $($(#[$tattr])* pub $tf: $tty,)*
        }
        #[cfg(not(feature = "tools"))]
        $(#[$attr])*
        pub struct $name $(<$($lt),*>)? {
            $($(#[$pattr])* $pv $pf: $pty,)*
            $($(#[$tattr])* pub(crate) $tf: $tty,)*
        }
    };
}

// The bytes step: the plugin tier re-exports the error and the options; `raw` is public.
mod bytes;
mod compressed;
mod error;
mod md5;
mod options;
pub mod raw;

// The format readers: public as `read::<format>` (their reader types), whole with `tools`.
tools_layer! {
    bundle;
    ccob;
    decompress;
    entry_id;
    kpack;
    nvfatbin;
    offload_binary;
    text;
    zstd_prefix;
}
pub mod read;

// The unified layer, whose front door is the crate root, and the tools' layer.
tools_layer! {
    container;
    driver;
    host;
    image;
    select;
    arch;
    stream;
    validate;
}
/// AOTriton's `.aks2` kernel archives (xz), read where `judge` finds them.
#[cfg(all(feature = "tools", feature = "std"))]
pub mod aks2;
#[cfg(feature = "tools")]
pub mod judge;
#[cfg(all(feature = "tools", feature = "write"))]
pub mod prune;
#[cfg(feature = "tools")]
pub mod registration;

#[cfg(feature = "write")]
pub mod write;

/// Work on many units on a few threads, results in order (feature `parallel`: the driver
/// `loader-sim` and the C API share; issue 47).
#[cfg(feature = "parallel")]
pub mod parallel;

// The plugin tier.
pub use arch::{identify, image_name, Device, Target};
pub use compressed::{CompressedBundle, CompressionMethod, Decompressor};
pub use container::{for_each_unit, units, Damage, Location, OpenUnit, Unit, Units};
pub use driver::{CudaDriver, DriverVersion, JitSwitches};
pub use error::{Error, ErrorKind, Result};
pub use host::kpack::split_library;
pub use image::{Format, Image, ImageKind, OffloadKind};
pub use options::{Decoders, Limits, ReadOptions};
pub use select::{choose, hip_force_spirv, Choice, KindFilter, Loss, Lost, Policy, SelectOptions};
pub use stream::{choose_streaming, choose_streaming_keeping, KeptImage, StreamChoice};
/// [`validate()`] on several threads (feature `parallel`).
#[cfg(feature = "parallel")]
pub use validate::validate_threaded;
pub use validate::{validate, Finding, Severity};

// The root names the tools' layer adds: the detail types the plugin tier's fields hold (a
// plugin reads them through their fields and methods without naming them), and what the
// root held before the tiers.
#[cfg(feature = "tools")]
pub use arch::{Identity, TargetId};
#[cfg(feature = "tools")]
pub use container::{PathElem, UnitContent};
#[cfg(feature = "tools")]
pub use image::{Checked, Encoded};
#[cfg(feature = "tools")]
pub use select::{check, explain, select, Candidate, RankKey, Rejection, Selection, Verdict};
#[cfg(feature = "tools")]
pub use validate::Code as FindingCode;
