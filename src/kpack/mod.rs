//! AMD `.kpack` archives and the split host libraries that point at them (`KPACK.md`).
//!
//! ROCm's TheRock build moves the device code of its host libraries into one `.kpack`
//! archive per architecture. A split library keeps, per HIP wrapper, a `HIPK` record that
//! points at a MessagePack ref record naming the kernel and the archives' search paths; the
//! HIP runtime hands both to rocm-kpack's C loader, which finds the archive and the code
//! object. This module reads all of it, in place and under [`Limits`](crate::Limits), and
//! models the loader's choices as pure functions (no filesystem):
//!
//! * [`KpackArchive`]: the archive (header, TOC, blobs plain or one zstd frame per kernel);
//! * [`HipkWrapper`] and [`KpackRef`]: the wrapper record and the ref record;
//! * [`crate::host::kpack::split_wrappers`]: per `HIPK` wrapper of a host file, its ref record
//!   and TOC key;
//! * [`candidate_paths`]: the archive paths the loader tries, in order, for a library
//!   directory, the ref's search paths, the device's ISA names and the environment
//!   ([`LoaderEnv`]); [`compatible_targets`] is the `@GFXARCH@` expansion;
//! * [`find_entry`]: given the archives that opened, the archive, target and entry the
//!   loader takes, or its [`LoaderError`].
//!
//! Every rule cites the file and function of rocm-kpack's runtime (`runtime/src/`, commit
//! e3483286) it follows; `docs/KPACK.md` describes them, and `tests/suite/kpack.rs` checks them
//! against that loader's answers on real split libraries.

mod archive;
mod msgpack;
mod path;
mod reference;
pub(crate) mod sniff;

pub use archive::{
    Compression, KpackArchive, KpackEntry, Stored, KPACK_VERSION, MAX_ZSTD_BLOB, MAX_ZSTD_FRAMES,
};
pub use path::{
    candidate_paths, compatible_targets, expected_archives, lexically_normal, resolve_embedded,
    split_path_list, strip_target_prefix, CandidatePath, LoaderEnv, PathOrigin,
    GFXARCH_PLACEHOLDER, MAX_FEATURES, PATH_LIST_SEPARATOR, PATH_LIST_SEPARATOR_WINDOWS,
    TARGET_PREFIX,
};
pub use reference::{
    HipkWrapper, KpackRef, HIPK_VERSION, REF_READ_LIMIT, REF_SECTION_ELF, REF_SECTION_PE,
};

pub use crate::raw::{HIPK_MAGIC, KPACK_MAGIC};

use alloc::string::String;
use core::fmt;

use crate::error::Result;

/// The error codes of rocm-kpack's C API (`kpack_error_t`,
/// `runtime/include/rocm_kpack/kpack_types.h`), with what each means in the loader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum LoaderError {
    /// 1: a null or empty argument.
    InvalidArgument = 1,
    /// 2: `kpack_open`: the file does not exist.
    FileNotFound = 2,
    /// 3: not a kpack archive: short header, no `KPAK`, TOC offset past the end, a zstd
    /// blob too large, too short or with frames past its end.
    InvalidFormat = 3,
    /// 4: the header's version is not 1.
    UnsupportedVersion = 4,
    /// 5: the archive that has the architecture has no entry for the kernel's key (or the
    /// entry's ordinal has no blob).
    KernelNotFound = 5,
    /// 6: a zstd frame does not decode, or not to `original_size` bytes.
    DecompressionFailed = 6,
    /// 7: an allocation failed.
    OutOfMemory = 7,
    /// 8: not implemented, and what the loader answers when `ROCM_KPACK_DISABLE` is set.
    NotImplemented = 8,
    /// 9: reading failed (an empty file, a blob outside the file).
    IoError = 9,
    /// 10: the TOC is not a MessagePack map.
    MsgpackParseFailed = 10,
    /// 11: the library could not be found from an address.
    PathDiscoveryFailed = 11,
    /// 12: the ref record is not a map with `kernel_name` and a non-empty
    /// `kpack_search_paths`.
    InvalidMetadata = 12,
    /// 13: none of the candidate archive paths opened (the archive, or the device package
    /// that carries it, is not installed).
    ArchiveNotFound = 13,
    /// 14: archives opened, but none lists a target the device is compatible with.
    ArchNotFound = 14,
}

impl LoaderError {
    /// Every code, in numeric order.
    pub const ALL: [LoaderError; 14] = [
        LoaderError::InvalidArgument,
        LoaderError::FileNotFound,
        LoaderError::InvalidFormat,
        LoaderError::UnsupportedVersion,
        LoaderError::KernelNotFound,
        LoaderError::DecompressionFailed,
        LoaderError::OutOfMemory,
        LoaderError::NotImplemented,
        LoaderError::IoError,
        LoaderError::MsgpackParseFailed,
        LoaderError::PathDiscoveryFailed,
        LoaderError::InvalidMetadata,
        LoaderError::ArchiveNotFound,
        LoaderError::ArchNotFound,
    ];

    /// The numeric code, as the runtime logs it (`kpack_load_code_object failed with
    /// error: N`).
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The code of a number, if it is one.
    pub fn from_code(code: i32) -> Option<Self> {
        LoaderError::ALL.iter().copied().find(|e| e.code() == code)
    }

    /// The C enumerator's name, e.g. `KPACK_ERROR_ARCHIVE_NOT_FOUND`.
    pub const fn name(self) -> &'static str {
        match self {
            LoaderError::InvalidArgument => "KPACK_ERROR_INVALID_ARGUMENT",
            LoaderError::FileNotFound => "KPACK_ERROR_FILE_NOT_FOUND",
            LoaderError::InvalidFormat => "KPACK_ERROR_INVALID_FORMAT",
            LoaderError::UnsupportedVersion => "KPACK_ERROR_UNSUPPORTED_VERSION",
            LoaderError::KernelNotFound => "KPACK_ERROR_KERNEL_NOT_FOUND",
            LoaderError::DecompressionFailed => "KPACK_ERROR_DECOMPRESSION_FAILED",
            LoaderError::OutOfMemory => "KPACK_ERROR_OUT_OF_MEMORY",
            LoaderError::NotImplemented => "KPACK_ERROR_NOT_IMPLEMENTED",
            LoaderError::IoError => "KPACK_ERROR_IO_ERROR",
            LoaderError::MsgpackParseFailed => "KPACK_ERROR_MSGPACK_PARSE_FAILED",
            LoaderError::PathDiscoveryFailed => "KPACK_ERROR_PATH_DISCOVERY_FAILED",
            LoaderError::InvalidMetadata => "KPACK_ERROR_INVALID_METADATA",
            LoaderError::ArchiveNotFound => "KPACK_ERROR_ARCHIVE_NOT_FOUND",
            LoaderError::ArchNotFound => "KPACK_ERROR_ARCH_NOT_FOUND",
        }
    }

    /// What the code means for someone whose program failed with it.
    pub const fn meaning(self) -> &'static str {
        match self {
            LoaderError::InvalidArgument => "invalid argument",
            LoaderError::FileNotFound => "archive file not found",
            LoaderError::InvalidFormat => "not a valid kpack archive",
            LoaderError::UnsupportedVersion => "kpack archive version is not 1",
            LoaderError::KernelNotFound => {
                "the archive for this architecture has no code object for this library"
            }
            LoaderError::DecompressionFailed => "a code object failed to decompress",
            LoaderError::OutOfMemory => "out of memory",
            LoaderError::NotImplemented => "kpack loading is disabled (ROCM_KPACK_DISABLE)",
            LoaderError::IoError => "an archive could not be read",
            LoaderError::MsgpackParseFailed => "an archive's table of contents is not valid",
            LoaderError::PathDiscoveryFailed => "the library's path could not be found",
            LoaderError::InvalidMetadata => "the library's kpack ref record is not valid",
            LoaderError::ArchiveNotFound => {
                "no kpack archive for this device's architecture is installed"
            }
            LoaderError::ArchNotFound => {
                "the archives found hold no code for this device's architecture"
            }
        }
    }
}

impl fmt::Display for LoaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kpack error {} ({}): {}",
            self.code(),
            self.name(),
            self.meaning()
        )
    }
}

/// What the loader takes: the archive (index into the caller's list), the target of the
/// device's compatible targets that matched its `gfx_arches`, and the TOC entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found<'a, 'data> {
    /// Index of the archive in the list given to [`find_entry`].
    pub archive: usize,
    /// Index of the requested ISA name that matched.
    pub arch: usize,
    /// The compatible target (an item of the archive's `gfx_arches`) that matched.
    pub target: String,
    /// The entry for the lookup key under that target.
    pub entry: &'a KpackEntry<'data>,
}

/// The loader's choice among the archives that opened, in candidate order
/// (`kpack_load_code_object`, `runtime/src/loader.cpp`, after the archives are opened).
///
/// `archives` holds one item per candidate path ([`candidate_paths`]): `None` where the
/// file is missing, not a regular file or failed to parse (the loader skips it whatever
/// the reason). Then:
///
/// * no archive at all: [`LoaderError::ArchiveNotFound`] (13);
/// * for each requested ISA name in order, for each of its [`compatible_targets`], the
///   first archive whose `gfx_arches` lists the target decides: its entry for
///   (`lookup_key`, target), or [`LoaderError::KernelNotFound`] (5) at once (rocm-kpack at
///   e3483286; a later rocm-systems copy tries the other archives);
/// * no archive lists any compatible target: [`LoaderError::ArchNotFound`] (14).
///
/// Fetching the code object ([`KpackArchive::code_object_coded`]) can still fail with 5, 6
/// or 9. An error here is the ISA expansion limit ([`MAX_FEATURES`]).
pub fn find_entry<'a, 'data>(
    archives: &'a [Option<KpackArchive<'data>>],
    arches: &[&str],
    lookup_key: &str,
) -> Result<core::result::Result<Found<'a, 'data>, LoaderError>> {
    if archives.iter().all(Option::is_none) {
        return Ok(Err(LoaderError::ArchiveNotFound));
    }
    for (arch, isa) in arches.iter().enumerate() {
        for target in compatible_targets(isa)? {
            let hit = archives
                .iter()
                .enumerate()
                .find_map(|(i, a)| a.as_ref().filter(|a| a.has_arch(&target)).map(|a| (i, a)));
            if let Some((index, archive)) = hit {
                return Ok(match archive.entry(lookup_key, &target) {
                    Some(entry) => Ok(Found {
                        archive: index,
                        arch,
                        target,
                        entry,
                    }),
                    None => Err(LoaderError::KernelNotFound),
                });
            }
        }
    }
    Ok(Err(LoaderError::ArchNotFound))
}
