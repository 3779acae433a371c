//! The format readers, one module per format, beneath the plugin tier (as `object` has
//! `read::<format>`): each parses its container in place and hands out borrowed views. A
//! runtime plugin rarely needs them: [`crate::units`] finds the containers of a file and
//! [`crate::Unit::open`] reads them. They are the re-exported reader types of the crate's
//! per-format modules, which feature `tools` makes public whole.

/// Binary offload bundles (`__CLANG_OFFLOAD_BUNDLE__`; `FORMATS.md` §2).
pub mod bundle {
    pub use crate::bundle::{is_bundle, Bundle, BundleEntry, BundleTable, TableEntry};
}

/// Compressed offload bundles (`CCOB` v1–v3; `FORMATS.md` §5): the header, the decoders and
/// the content read as a stream.
pub mod ccob {
    pub use crate::ccob::{
        is_compressed_bundle, truncated_md5, BuiltinDecoder, CompressedBundle, CompressionMethod,
        ContentReader, Decoder, Decoders, Decompressor, StreamDecoderFn, WholeDecoderFn,
    };
    pub use crate::decompress::RawDecoderFn;
}

/// Text offload bundles (`FORMATS.md` §3).
pub mod text {
    pub use crate::text::{CommentStyle, TextBundle, TextEntry};
}

/// LLVM OffloadBinaries (`10 FF 10 AD`; `FORMATS.md` §6).
pub mod offload_binary {
    pub use crate::offload_binary::{
        is_offload_binary, OffloadBinaries, OffloadBinary, OffloadBinaryEntry, StringMap,
    };
}

/// NVIDIA fatbinaries (`NVFATBIN.md` §2).
pub mod nvfatbin {
    pub use crate::nvfatbin::{is_fatbin, EntryKind, Fatbin, FatbinEntry, Variant};
}

/// AMD `.kpack` archives (`KPACK.md` §2).
pub mod kpack {
    pub use crate::kpack::{KpackArchive, KpackEntry};
}

/// Bundle entry IDs split as stored (`COMPATIBILITY.md` §1).
pub mod entry_id {
    pub use crate::entry_id::{EntryId, Triple};
}
