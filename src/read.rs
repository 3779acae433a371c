//! The format readers, one module per format, beneath the plugin tier (as `object` has
//! `read::<format>`): each parses its container in place and hands out borrowed views. A
//! runtime plugin rarely needs them: [`crate::units`] finds the containers of a file and
//! [`crate::Unit::open`] reads them. Each module re-exports its format's reader type and entry
//! type (whose `entries()` is the iterator); the rest of the per-format modules (tables,
//! helpers, detail enums) is the tools' layer, which feature `tools` makes public whole.

/// Binary offload bundles (`__CLANG_OFFLOAD_BUNDLE__`; `FORMATS.md` §2).
pub mod bundle {
    pub use crate::bundle::{Bundle, BundleEntry};
}

/// Compressed offload bundles (`CCOB` v1–v3; `FORMATS.md` §5): the content read as a stream
/// ([`crate::CompressedBundle`], the header, is at the root).
pub mod ccob {
    pub use crate::ccob::ContentReader;
}

/// Text offload bundles (`FORMATS.md` §3).
pub mod text {
    pub use crate::text::{TextBundle, TextEntry};
}

/// LLVM OffloadBinaries (`10 FF 10 AD`; `FORMATS.md` §6): a sequence of binaries, each with
/// its entries.
pub mod offload_binary {
    pub use crate::offload_binary::{OffloadBinaries, OffloadBinary, OffloadBinaryEntry};
}

/// NVIDIA fatbinaries (`NVFATBIN.md` §2).
pub mod nvfatbin {
    pub use crate::nvfatbin::{Fatbin, FatbinEntry};
}

/// AMD `.kpack` archives (`KPACK.md` §2).
pub mod kpack {
    pub use crate::kpack::{KpackArchive, KpackEntry};
}
