//! The options of every read, at the bottom of the road: [`ReadOptions`], its [`Limits`]
//! and the decoders hook ([`Decoders`]), the one place a caller plugs in faster decoders.
//! Every module takes them from here; none reaches up for them.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::compressed::{Codec, CompressedBundle, Decompressor};
use crate::error::Result;

/// Resource limits applied while reading untrusted bytes: part of the API contract.
///
/// The defaults are generous for real files (the largest real bundles hold a few hundred
/// MB of code and a handful of entries) and keep hostile input from exhausting memory or
/// time. Every limit is checked before anything is allocated for what it bounds:
///
/// | limit | what it bounds | default | refused with |
/// |---|---|---|---|
/// | [`max_decompressed_size`](Limits::max_decompressed_size) | the content of one `CCOB`; all compressed OffloadBinaries of one unit together; all compressed entries of one NVIDIA fatbinary together | 1 GiB | [`crate::ErrorKind::LimitExceeded`] at the field that claims the size |
/// | [`max_entries`](Limits::max_entries) | entries of a bundle, text bundle, OffloadBinary or fatbinary; strings per entry; binaries in a sequence; containers in one section; offload-entry tables, and entries bound from them to all registered units together | 65 536 | [`crate::ErrorKind::LimitExceeded`] at the count field (or the table) |
/// | [`max_id_len`](Limits::max_id_len) | bundle entry IDs; NUL-terminated OffloadBinary strings | 4 KiB | [`crate::ErrorKind::LimitExceeded`] |
/// | [`max_depth`](Limits::max_depth) | archive in archive in ELF section ... (hard cap [`Limits::MAX_DEPTH`] = 8) | 6 | [`crate::ErrorKind::LimitExceeded`] |
///
/// A header's claim is never trusted for allocation: a declared decompressed size is also
/// checked against what the payload could produce at most (zlib 1032:1, zstd 32768:1), and
/// the output grows only as the stream really produces bytes, up to the declared size (a
/// longer stream is [`crate::ErrorKind::SizeMismatch`]).
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
    pub const MAX_DEPTH: usize = 8;

    tools_pub! {
        /// No limits beyond the size of the data (depth is still capped at
        /// [`Limits::MAX_DEPTH`]).
        pub const UNLIMITED: Limits = Limits {
            max_decompressed_size: u64::MAX,
            max_entries: u64::MAX,
            max_id_len: u64::MAX,
            max_depth: Limits::MAX_DEPTH,
        };
    }
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
    pub decoders: Decoders,
    /// Refuse bytes between containers that are neither zero padding nor a container
    /// (default: off, they are skipped and reported in [`crate::Unit::skipped`]; `FORMATS.md`
    /// §2.4).
    pub strict: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            limits: Limits::DEFAULT,
            verify_hash: true,
            decoders: Decoders::BUILTIN,
            strict: false,
        }
    }
}

/// A caller's streaming decoder ([`Decoders::stream`]): a decoder of `bundle`'s payload,
/// with errors located relative to the bundle's start.
pub type StreamDecoderFn =
    for<'a> fn(&CompressedBundle<'a>, &ReadOptions) -> Result<Box<dyn Decompressor + Send + 'a>>;

/// A caller's whole-content decoder ([`Decoders::whole`]): the content of `bundle`, checked
/// as [`CompressedBundle::decompress`] checks it (declared size, trailing bytes, the hash
/// when [`ReadOptions::verify_hash`] is set), with errors located relative to the bundle's
/// start. [`ContentReader::read_to_vec`](crate::read::ccob::ContentReader::read_to_vec) does all of that over any [`Decompressor`].
pub type WholeDecoderFn = for<'a> fn(&CompressedBundle<'a>, &ReadOptions) -> Result<Vec<u8>>;

/// The one place a caller plugs in faster decoders (C libzstd, a decoder on a second
/// thread): a field of [`ReadOptions`], used wherever the crate decompresses a compressed
/// bundle — [`crate::Unit::open`], [`CompressedBundle::decompress`] and
/// [`CompressedBundle::reader`] (and so streaming selection, [`crate::choose_streaming`]),
/// and the simulated runtime (`registration::Registry`, feature `tools`). Unset fields fall back to the
/// built-in decoders (miniz_oxide, ruzstd). Whatever decodes, the content's length, the
/// limits and (when enabled) the hash are checked.
///
#[derive(Clone, Copy, Default)]
pub struct Decoders {
    /// A streaming decoder of compressed-bundle payloads.
    pub stream: Option<StreamDecoderFn>,
    /// A whole-content decoder (for example one that decodes on a second thread while the
    /// calling thread verifies the hash); without it, whole-content decoding reads
    /// [`Decoders::stream`] to the end.
    pub whole: Option<WholeDecoderFn>,
    /// A decoder of every other compressed payload: NVIDIA fatbinary entries (zstd, LZ4)
    /// and compressed OffloadBinaries (zlib, zstd). It may decline a codec (`None`), and
    /// the built-in decoder runs instead.
    pub raw: Option<RawDecoderFn>,
}

impl Decoders {
    /// The built-in decoders only.
    pub const BUILTIN: Decoders = Decoders {
        stream: None,
        whole: None,
        raw: None,
    };
}

impl core::fmt::Debug for Decoders {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Decoders")
            .field("stream", &self.stream.map(|_| "caller's"))
            .field("whole", &self.whole.map(|_| "caller's"))
            .field("raw", &self.raw.map(|_| "caller's"))
            .finish()
    }
}

/// Two `Decoders` are equal when the same fields are set (function pointers have no
/// reliable identity to compare).
impl PartialEq for Decoders {
    fn eq(&self, other: &Self) -> bool {
        self.stream.is_some() == other.stream.is_some()
            && self.whole.is_some() == other.whole.is_some()
            && self.raw.is_some() == other.raw.is_some()
    }
}

impl Eq for Decoders {}

/// A caller's decoder of a whole compressed payload ([`crate::ccob::Decoders::raw`]): the
/// `size` bytes that `stream` (a complete stream of `codec`) decodes to, or an error located
/// in `stream`. The crate checks `size` against the limits before calling it, and the
/// length of what it returns afterwards; a decoder may return `None` for a codec it does not
/// handle, and the built-in one runs instead.
pub type RawDecoderFn = fn(Codec, &[u8], u64, &ReadOptions) -> Option<Result<Vec<u8>>>;
