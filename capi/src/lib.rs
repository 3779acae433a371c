//! C API of offload-image (header `capi/include/offload_image.h`, generated from this file
//! by cbindgen with `capi/cbindgen.toml`; `tests/suite/header.rs` keeps the two in step).
//!
//! A reader handle (`oi_reader`) walks the containers of a caller buffer or a file read
//! into memory once, then lists, selects, explains and hands out images from that walk.
//! Compressed bundles are decoded lazily: a selection streams each one once
//! (`offload_image::choose_streaming_keeping`) and keeps only the chosen images; listing,
//! explaining or asking for an image the selection did not keep decompresses the bundle
//! whole, once. Everything the reader hands out (strings, image bytes, reasons) lives until
//! `oi_reader_close`; error messages live in static storage (`messages`).
//!
//! The C API uses the library's root tier only (and `raw`).
//!
//! Unsafe code: the helpers under "the unsafe boundary", each with its safety contract,
//! their calls in the `extern "C"` functions, and the two places that give the reader's
//! slices the lifetime `'static` (the C contract makes the caller's buffer outlive the
//! reader; the reader owns its mapping, decompressed content and kept images and never
//! moves or frees them before `oi_reader_close`). Those slices leave the handle only as C
//! pointers documented as valid until close.

#![warn(missing_docs)]

use core::cell::Cell;
use core::ffi::{c_char, CStr};
use std::collections::HashMap;
use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use offload_image::{
    choose, choose_streaming_keeping, identify, image_name, split_library, CompressedBundle,
    CompressionMethod, CudaDriver, Decoders, Decompressor, Device, DriverVersion, Error, ErrorKind,
    Format, Image, JitSwitches, KindFilter, Limits, Loss, OpenUnit, Policy, ReadOptions,
    SelectOptions, Severity, Unit,
};

// ---- constants (cbindgen writes them as #defines) --------------------------------------

/// Success.
pub const OI_OK: i32 = 0;
/// `oi_reader_select`: some (unit, target) pair has no compatible image.
pub const OI_NO_MATCH: i32 = 1;
/// The data ends inside a header, table or payload.
pub const OI_ERR_TRUNCATED: i32 = 2;
/// An offset or size points outside the data, or overflows.
pub const OI_ERR_OUT_OF_BOUNDS: i32 = 3;
/// Not an offload container.
pub const OI_ERR_BAD_MAGIC: i32 = 4;
/// A version field holds a value this library does not read.
pub const OI_ERR_UNSUPPORTED_VERSION: i32 = 5;
/// Unknown compression method or enumerated value.
pub const OI_ERR_UNSUPPORTED_METHOD: i32 = 6;
/// Two sizes that must agree do not.
pub const OI_ERR_SIZE_MISMATCH: i32 = 7;
/// The truncated MD5 of a compressed bundle is wrong.
pub const OI_ERR_HASH_MISMATCH: i32 = 8;
/// A resource limit (size, count, depth) was hit.
pub const OI_ERR_LIMIT_EXCEEDED: i32 = 9;
/// Corrupt compressed stream.
pub const OI_ERR_DECOMPRESS: i32 = 10;
/// Internally inconsistent structure.
pub const OI_ERR_MALFORMED: i32 = 11;
/// Bad bundle entry ID, target ID or triple (also a bad target given to `oi_reader_select`).
pub const OI_ERR_INVALID_ID: i32 = 12;
/// Malformed ELF file or archive.
pub const OI_ERR_BAD_CONTAINER: i32 = 13;
/// Memory for decompressed data could not be reserved.
pub const OI_ERR_OUT_OF_MEMORY: i32 = 14;
/// Null pointer where one is required, unknown option value, index out of range.
pub const OI_ERR_INVALID_ARGUMENT: i32 = 15;
/// The caller's array cannot hold the result.
pub const OI_ERR_BUFFER_TOO_SMALL: i32 = 16;
/// A bug in the library (a panic caught at the boundary).
pub const OI_ERR_INTERNAL: i32 = 17;
/// `oi_reader_open_file`: the file cannot be opened or read (`oi_error.os_error` holds the
/// errno, `oi_error.os_message` its text).
pub const OI_ERR_IO: i32 = 18;
/// `oi_reader_select`: results were written for every unit, but some unit is damaged (its
/// container or its compressed stream does not read: `found` 0 there). `oi_error` describes
/// the first damaged unit: its status in `code`, its byte offset, its unit in `index`. Not
/// an `OI_ERR_*`: the results are valid.
pub const OI_PARTIAL: i32 = 19;
/// `oi_reader_open`: the file is a split (kpack) library: its device code objects are not
/// in it but in `.kpack` archives installed beside it (the HIP runtime's kpack loader reads
/// them); `offset` is its first `HIPK` wrapper.
pub const OI_ERR_KPACK_SPLIT: i32 = 20;
/// A valid file of a kind this library does not read (a big-endian or 32-bit host ELF file,
/// a PE file for another machine, a thin archive at the top level).
pub const OI_ERR_UNSUPPORTED: i32 = 21;

/// The major version of this library (`oi_version`), Cargo's version of the C API crate.
pub const OI_VERSION_MAJOR: u32 = 0;
/// The minor version of this library.
pub const OI_VERSION_MINOR: u32 = 2;
/// The patch version of this library.
pub const OI_VERSION_PATCH: u32 = 0;

// The version macros are Cargo's version (the build fails when they differ).
const _: () = {
    const fn number(s: &str) -> u32 {
        let b = s.as_bytes();
        let mut i = 0;
        let mut n = 0u32;
        while i < b.len() {
            n = n * 10 + (b[i] - b'0') as u32;
            i += 1;
        }
        n
    }
    assert!(OI_VERSION_MAJOR == number(env!("CARGO_PKG_VERSION_MAJOR")));
    assert!(OI_VERSION_MINOR == number(env!("CARGO_PKG_VERSION_MINOR")));
    assert!(OI_VERSION_PATCH == number(env!("CARGO_PKG_VERSION_PATCH")));
};

/// Offset reported for an image stored compressed; `oi_error.offset` when the problem is
/// not at a byte of the data, and `oi_error.decompressed_offset` when it is not inside
/// decompressed content.
pub const OI_NO_OFFSET: u64 = u64::MAX;
/// `oi_error.index` when the problem is not about one target, unit or image.
pub const OI_NO_INDEX: u64 = u64::MAX;
/// `oi_selection.image` when no image is compatible.
pub const OI_NO_IMAGE: usize = usize::MAX;

/// `oi_read_options.flags`: do not verify the truncated MD5 of compressed bundles (decoding
/// then stops once the chosen images and every image's first bytes have been read).
pub const OI_READ_NO_VERIFY_HASH: u32 = 1;
/// `oi_read_options.flags`, bits 8 to 15: the number of threads a call that needs every
/// compressed unit's hash checked (`oi_reader_damage_count`, `oi_reader_damage`, `oi_validate`) uses, each
/// thread decoding and hashing one unit at a time (memory: one unit's decoding per thread):
/// `flags |= n << OI_READ_THREADS_SHIFT`. 0 (the default) and 1: one unit after another on
/// the calling thread, as before version 0.2; `OI_READ_THREADS_AUTO`: as many as the
/// machine has CPUs. The damages reported are the same whatever the number.
pub const OI_READ_THREADS_SHIFT: u32 = 8;
/// The bits of `oi_read_options.flags` that hold the number of threads
/// (`OI_READ_THREADS_SHIFT`).
pub const OI_READ_THREADS_MASK: u32 = 0xFF00;
/// The number of threads (`OI_READ_THREADS_SHIFT`) that means: as many as the machine has
/// CPUs.
pub const OI_READ_THREADS_AUTO: u32 = 255;

/// `oi_image_info.format`: binary clang offload bundle (also inside `CCOB`).
pub const OI_FORMAT_BUNDLE: u32 = 0;
/// Text offload bundle.
pub const OI_FORMAT_TEXT_BUNDLE: u32 = 1;
/// LLVM OffloadBinary.
pub const OI_FORMAT_OFFLOAD_BINARY: u32 = 2;
/// A bare device ELF.
pub const OI_FORMAT_ELF: u32 = 3;
/// An entry of an NVIDIA fatbinary (cubin or PTX).
pub const OI_FORMAT_NVIDIA_FATBIN: u32 = 4;
/// An entry of an AMD `.kpack` archive (a HIP code object).
pub const OI_FORMAT_KPACK: u32 = 5;

/// `compression`: stored uncompressed.
pub const OI_COMPRESSION_NONE: u32 = 0;
/// Inside a zlib compressed bundle.
pub const OI_COMPRESSION_ZLIB: u32 = 1;
/// Inside a zstd compressed bundle.
pub const OI_COMPRESSION_ZSTD: u32 = 2;

/// `oi_image_info.image_kind` (LLVM's `ImageKind` values): not known.
pub const OI_IMAGE_KIND_NONE: u32 = 0;
/// An ELF object (AMDGPU code object, host object).
pub const OI_IMAGE_KIND_OBJECT: u32 = 1;
/// LLVM bitcode.
pub const OI_IMAGE_KIND_BITCODE: u32 = 2;
/// NVIDIA cubin.
pub const OI_IMAGE_KIND_CUBIN: u32 = 3;
/// NVIDIA fatbinary.
pub const OI_IMAGE_KIND_FATBINARY: u32 = 4;
/// PTX text.
pub const OI_IMAGE_KIND_PTX: u32 = 5;
/// SPIR-V.
pub const OI_IMAGE_KIND_SPIRV: u32 = 6;

/// `oi_select_options.policy`: native, exact features, newest generic, then order.
pub const OI_POLICY_BEST: u32 = 0;
/// First compatible image in discovery order (comgr, LLVM offload).
pub const OI_POLICY_FIRST: u32 = 1;
/// Native, then generic, then JIT code, each in discovery order (ROCm CLR).
pub const OI_POLICY_FIRST_BY_CLASS: u32 = 2;

/// `oi_select_options.kind`: any device offload kind.
pub const OI_KIND_ANY: u32 = 0;
/// HIP images only (`hip`, `hipv4`, `hcc`).
pub const OI_KIND_HIP: u32 = 1;
/// OpenMP images only.
pub const OI_KIND_OPENMP: u32 = 2;
/// CUDA images only.
pub const OI_KIND_CUDA: u32 = 3;

/// `oi_select_options.flags`: treat `hip*` and `openmp` entries as interchangeable.
pub const OI_SELECT_HIP_OPENMP_COMPATIBLE: u32 = 1;
/// Never choose code that needs a JIT (bitcode, PTX).
pub const OI_SELECT_NO_JIT: u32 = 2;
/// Never choose AMDGPU generic-family code objects.
pub const OI_SELECT_NO_GENERIC: u32 = 4;
/// Never choose AMD SPIR-V.
pub const OI_SELECT_NO_SPIRV: u32 = 8;
/// Reject images whose container and ELF header disagree (default: the ELF header wins).
pub const OI_SELECT_STRICT: u32 = 16;
/// NVIDIA targets: the driver ignores cubins, as under `CUDA_FORCE_PTX_JIT=1`.
pub const OI_SELECT_CUDA_FORCE_PTX_JIT: u32 = 32;
/// NVIDIA targets: the driver compiles no PTX, as under `CUDA_DISABLE_PTX_JIT=1` (it loads
/// PTX only from its JIT cache).
pub const OI_SELECT_CUDA_DISABLE_PTX_JIT: u32 = 64;
/// NVIDIA targets: read `CUDA_FORCE_PTX_JIT`, `CUDA_DISABLE_PTX_JIT` and `CUDA_CACHE_DISABLE`
/// from this process's environment, as the driver reads them (in addition to the two flags
/// above); with the JIT and its cache both disabled no PTX loads.
pub const OI_SELECT_CUDA_JIT_FROM_ENV: u32 = 128;

/// `oi_reason.kind`: (summary) an image was chosen: `oi_reason.image` is it.
pub const OI_REASON_CHOSEN: u32 = 0;
/// Compatible with the device, but the chosen image ranks above it (the policy's order).
pub const OI_REASON_OUTRANKED: u32 = 1;
/// The host entry of a bundle.
pub const OI_REASON_HOST: u32 = 2;
/// The image is empty.
pub const OI_REASON_EMPTY: u32 = 3;
/// Its offload kind is not the one asked for (`oi_select_options.kind`).
pub const OI_REASON_KIND: u32 = 4;
/// Built for another architecture (or no device architecture at all).
pub const OI_REASON_ARCH: u32 = 5;
/// An AMDGPU image for an OS other than HSA (PAL, Mesa).
pub const OI_REASON_NOT_HSA: u32 = 6;
/// Neither the container nor the ELF header names a target processor.
pub const OI_REASON_NO_TARGET: u32 = 7;
/// The stated target does not parse or names an unknown processor.
pub const OI_REASON_INVALID_TARGET: u32 = 8;
/// The AMDGPU ELF header makes the image unloadable.
pub const OI_REASON_ELF: u32 = 9;
/// The container and the ELF header disagree (`OI_SELECT_STRICT`).
pub const OI_REASON_MISMATCH: u32 = 10;
/// Not loadable device code (text, a host object, unrecognised bytes).
pub const OI_REASON_NOT_CODE: u32 = 11;
/// Needs a JIT, which `OI_SELECT_NO_JIT` forbids.
pub const OI_REASON_JIT_NOT_ALLOWED: u32 = 12;
/// Generic code, which `OI_SELECT_NO_GENERIC` forbids.
pub const OI_REASON_GENERIC_NOT_ALLOWED: u32 = 13;
/// AMD SPIR-V, which `OI_SELECT_NO_SPIRV` forbids.
pub const OI_REASON_SPIRV_NOT_ALLOWED: u32 = 14;
/// A different AMDGPU processor.
pub const OI_REASON_PROCESSOR: u32 = 15;
/// Generic code that ROCm CLR's generic map does not take the device to.
pub const OI_REASON_CLR_GENERIC_MAP: u32 = 16;
/// A bundle entry spelled in a way ROCm CLR does not find.
pub const OI_REASON_CLR_SPELLING: u32 = 17;
/// Generic code whose family does not include the device.
pub const OI_REASON_NOT_IN_FAMILY: u32 = 18;
/// Generic code older than the device requires.
pub const OI_REASON_GENERIC_VERSION: u32 = 19;
/// A feature state (`xnack`, `sramecc`) the device does not have.
pub const OI_REASON_FEATURE: u32 = 20;
/// A cubin, which the CUDA driver ignores under `CUDA_FORCE_PTX_JIT`.
pub const OI_REASON_FORCED_JIT: u32 = 21;
/// Native or generic AMDGPU code, passed over under `HIP_FORCE_SPIRV_CODEOBJECT`.
pub const OI_REASON_FORCED_SPIRV: u32 = 22;
/// The CUDA driver picks this PTX and refuses it (its ISA is newer than the driver
/// compiles); the driver does not fall back to another image.
pub const OI_REASON_DRIVER: u32 = 23;
/// An NVIDIA compatibility rule fails (cubin major or minor version, `a` or `f` code,
/// PTX newer than the device).
pub const OI_REASON_NVIDIA_RULE: u32 = 24;
/// (summary) The unit has no images.
pub const OI_REASON_NO_IMAGES: u32 = 25;
/// (summary) The unit is damaged: `oi_reader_unit_status` says why.
pub const OI_REASON_DAMAGED: u32 = 26;
/// A reason this version of the header has no code for (a newer library).
pub const OI_REASON_OTHER: u32 = 255;

// ---- types -----------------------------------------------------------------------------

/// A string owned by the library: `len` bytes at `data`, followed by a NUL byte. Never
/// null; empty when the value is unknown.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OiStr {
    /// The bytes, NUL-terminated.
    pub data: *const c_char,
    /// Length without the NUL.
    pub len: usize,
}

/// Error details of a call: each fact in a field of its own.
#[repr(C)]
#[derive(Debug)]
pub struct OiError {
    /// The kind of problem: `OI_OK` or an `OI_ERR_*` code, the call's return value; for a
    /// call that returns `OI_PARTIAL`, the status of the first damaged unit.
    pub code: i32,
    /// The operating system's error number (`errno`) behind an `OI_ERR_IO`; 0 otherwise.
    pub os_error: i32,
    /// Byte offset of the problem in the reader's data (for a compressed bundle's content:
    /// the start of that bundle); `OI_NO_OFFSET` when the problem is not at a byte of the
    /// data (a bad argument, an I/O error).
    pub offset: u64,
    /// For problems inside the content decompressed from a compressed bundle: the offset
    /// in that content; else `OI_NO_OFFSET`.
    pub decompressed_offset: u64,
    /// What the problem is about: a target's position in `targets` (`oi_reader_select`), a
    /// unit (a damaged unit, a unit index out of range), an image index out of range;
    /// `OI_NO_INDEX` when none.
    pub index: u64,
    /// A count the problem is about: the records `results` must hold
    /// (`OI_ERR_BUFFER_TOO_SMALL`), the `n_targets` refused; 0 when none.
    pub count: u64,
    /// What went wrong (without the offset). Static storage: valid for the life of the
    /// process, never freed by the caller.
    pub message: OiStr,
    /// The system's text for `os_error` (`strerror`), empty when `os_error` is 0. Static
    /// storage, as `message`.
    pub os_message: OiStr,
}

/// Why an image lost, or why a (unit, target) pair has the choice it has
/// (`oi_reader_explain`). `text` is the sentence `loader-sim select --explain` prints,
/// valid until `oi_reader_close`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OiReason {
    /// The image (flat index, as `oi_selection.image`), or `OI_NO_IMAGE`.
    pub image: usize,
    /// `OI_REASON_*`.
    pub kind: u32,
    /// Always 0.
    pub reserved: u32,
    /// The sentence (empty for `OI_REASON_CHOSEN`).
    pub text: OiStr,
}

/// Reading options; zero-initialised means: default limits, hashes verified.
#[repr(C)]
pub struct OiReadOptions {
    /// `OI_READ_*` flags.
    pub flags: u32,
    /// Deepest nesting of containers (archive, ELF, section, bundle); 0: default (6).
    pub max_depth: u32,
    /// Largest decompressed size accepted; 0: default (1 GiB).
    pub max_decompressed_size: u64,
    /// Most entries in one container; 0: default (65536).
    pub max_entries: u64,
    /// Longest bundle entry ID; 0: default (4096).
    pub max_id_len: u64,
}

/// Selection options; zero-initialised means: best policy, any kind, no restriction.
#[repr(C)]
pub struct OiSelectOptions {
    /// `OI_POLICY_*`.
    pub policy: u32,
    /// `OI_KIND_*`.
    pub kind: u32,
    /// `OI_SELECT_*` flags.
    pub flags: u32,
    /// The NVIDIA targets' driver branch: the first field of its version (580 for
    /// 580.159.04). The PTX the driver picks must have an ISA version that branch compiles,
    /// or the unit gives nothing (the driver does not fall back). 0: unknown (PTX ISA
    /// versions not judged).
    pub nvidia_driver_branch: u32,
}

/// One unit: a bundle, a compressed bundle, a run of OffloadBinaries, a bare device ELF,
/// one bundled host object. A runtime registers (and selects for) each unit on its own.
#[repr(C)]
pub struct OiUnitInfo {
    /// Where the unit is (`"section .hip_fatbin"`, `"member a.o / section ..."`; empty at
    /// the top level).
    pub location: OiStr,
    /// Byte offset of the unit in the reader's data.
    pub offset: u64,
    /// Index of the unit within its container (bundle index in a `.hip_fatbin` section).
    pub index_in_container: u64,
    /// `OI_FORMAT_*` of its images.
    pub format: u32,
    /// `OI_COMPRESSION_*`.
    pub compression: u32,
}

/// One image. Strings live in the reader until `oi_reader_close`.
#[repr(C)]
pub struct OiImageInfo {
    /// Unit index (`oi_reader_unit`).
    pub unit: usize,
    /// Index within the unit (header order).
    pub index: usize,
    /// Offset of the bytes in the reader's data, or `OI_NO_OFFSET` if stored compressed.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// `OI_FORMAT_*`.
    pub format: u32,
    /// `OI_COMPRESSION_*` of its unit.
    pub compression: u32,
    /// `OI_IMAGE_KIND_*` (LLVM's values; other stored values as they are).
    pub image_kind: u32,
    /// Always 0.
    pub reserved: u32,
    /// How runtimes name the image: the bundle entry ID, else `<triple>--<target>`.
    pub name: OiStr,
    /// The offload kind: `"hip"`, `"hipv4"`, `"openmp"`, `"cuda"`, `"host"`, `"none"`, ...
    pub offload_kind: OiStr,
    /// The normalised triple (`"amdgcn-amd-amdhsa"`), empty if none.
    pub triple: OiStr,
    /// The canonical target ID (`"gfx90a:xnack+"`, `"sm_90a"`), empty if none.
    pub target: OiStr,
}

/// The choice for one (unit, target) pair.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OiSelection {
    /// The chosen image (index for `oi_reader_image` / `oi_reader_image_data`), or
    /// `OI_NO_IMAGE`.
    pub image: usize,
    /// 1 if an image was chosen.
    pub found: u32,
    /// Always 0.
    pub reserved: u32,
}

/// What a reader has done so far (for diagnostics and tests).
#[repr(C)]
pub struct OiReaderStats {
    /// Passes of a decoder over compressed bundle content.
    pub decode_passes: u64,
    /// Decompressed bytes those passes produced.
    pub decoded_bytes: u64,
    /// Decompressed bytes the reader holds (kept images, whole decompressed bundles).
    pub held_bytes: u64,
}

/// A reader over one buffer or file (opaque).
pub struct OiReader {
    state: Mutex<State>,
    // Declared last: dropped after `state`, whose slices may point into it.
    _data: Option<Box<[u8]>>,
}

// ---- reader internals ------------------------------------------------------------------

// The header promises that a reader may be shared between threads.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<OiReader>();
};

struct State {
    read: ReadOptions,
    /// Threads for checking every unit (`OI_READ_THREADS_SHIFT`).
    threads: usize,
    units: Vec<UnitSlot>,
    /// Errors of the walk outside any unit (a section whose contents lie outside the
    /// file, an archive member that does not read); the walk went on after each.
    walk_errors: Vec<Fail>,
    stats: Stats,
    /// The texts `oi_reader_explain` handed out, each stored once, freed at close.
    texts: HashMap<String, CString>,
}

impl State {
    /// Every damage known: damaged units and errors of the walk, in offset order.
    fn damages(&self) -> Vec<Fail> {
        let mut all: Vec<Fail> = self
            .units
            .iter()
            .enumerate()
            .filter_map(|(u, s)| s.damage.map(|d| d.index(u)))
            .chain(self.walk_errors.iter().copied())
            .collect();
        all.sort_by_key(|f| f.offset);
        all
    }
}

#[derive(Default)]
struct Stats {
    passes: u64,
    decoded: u64,
    held: u64,
}

struct UnitSlot {
    unit: Unit<'static>,
    location: CString,
    /// Why the unit does not read or open (`UnitContent::Damaged`, a bad hash, a corrupt
    /// stream): it has no images, and the other units are unaffected.
    damage: Option<Fail>,
    /// Set when the unit has been opened whole (decompressed content held here).
    open: Option<OpenUnit<'static>>,
    /// A compressed bundle whose whole stream has been decoded (and its hash checked when
    /// verifying): its damage, if any, is known. Always true for other units.
    checked: bool,
    /// One slot per image, once the number of images is known.
    images: Option<Vec<ImageSlot>>,
}

#[derive(Default)]
struct ImageSlot {
    /// Entry ID from a streamed descriptor table (compressed units).
    table_id: Option<String>,
    /// The image bytes once available: in place, in `UnitSlot::open`, or in `kept`.
    bytes: Option<&'static [u8]>,
    /// Bytes kept by a streaming selection, or decoded on demand from `encoded` (a Vec,
    /// not a Box: handed-out pointers into it must survive moves of the slot).
    kept: Option<Vec<u8>>,
    /// An image identified from its header alone (a compressed fatbinary entry): decoded
    /// when its bytes or its description are first asked for.
    pending: Option<Image<'static>>,
    /// The description, made once.
    info: Option<Box<Described>>,
}

struct Described {
    offset: u64,
    size: u64,
    format: u32,
    image_kind: u32,
    name: CString,
    offload_kind: CString,
    triple: CString,
    target: CString,
}

/// A failure on its way to the caller (the fields of `oi_error`).
#[derive(Clone, Copy, Debug)]
struct Fail {
    code: i32,
    offset: u64,
    decompressed_offset: u64,
    index: u64,
    count: u64,
    os_error: i32,
    message: &'static CStr,
    /// The call's return value when it is not `code` (`OI_PARTIAL`).
    returned: Option<i32>,
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail {
            offset: e.offset(),
            decompressed_offset: e.decompressed_offset().unwrap_or(OI_NO_OFFSET),
            ..fail(code_of(e.kind()), messages::intern(e.what()))
        }
    }
}

impl Fail {
    /// The failure at byte `offset` of the data.
    fn at(self, offset: u64) -> Self {
        Fail { offset, ..self }
    }

    /// The failure about target, unit or image `index`.
    fn index(self, index: usize) -> Self {
        Fail {
            index: index as u64,
            ..self
        }
    }

    /// The failure about a count (records needed, targets given).
    fn count(self, count: usize) -> Self {
        Fail {
            count: count as u64,
            ..self
        }
    }

    /// The `oi_error` the caller gets.
    fn to_c(self) -> OiError {
        let os_message = if self.os_error == 0 {
            c""
        } else {
            messages::intern(&os_text(self.os_error))
        };
        OiError {
            code: self.code,
            os_error: self.os_error,
            offset: self.offset,
            decompressed_offset: self.decompressed_offset,
            index: self.index,
            count: self.count,
            message: str_of(self.message),
            os_message: str_of(os_message),
        }
    }
}

/// A failure of kind `code`, about nothing in particular (no offset, no index).
fn fail(code: i32, message: &'static CStr) -> Fail {
    Fail {
        code,
        offset: OI_NO_OFFSET,
        decompressed_offset: OI_NO_OFFSET,
        index: OI_NO_INDEX,
        count: 0,
        os_error: 0,
        message,
        returned: None,
    }
}

fn invalid(message: &'static CStr) -> Fail {
    fail(OI_ERR_INVALID_ARGUMENT, message)
}

/// An `OI_ERR_IO` for the system error `errno`.
fn io_fail(errno: i32, message: &'static CStr) -> Fail {
    Fail {
        os_error: errno,
        ..fail(OI_ERR_IO, message)
    }
}

/// The system's text for `errno` (`strerror`'s), without std's " (os error N)".
fn os_text(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The C strings of messages, in static storage: no heap block is ever allocated for them,
/// so nothing is left for a leak checker (valgrind) to report, and a message stays valid
/// for the life of the process. The library's messages are literals (`Error::what` is
/// `&'static str`) and the system's error texts a short list: a bounded set, each stored
/// once.
mod messages {
    use core::cell::UnsafeCell;
    use core::ffi::CStr;
    use std::sync::Mutex;

    /// Bytes for the messages (the library has fewer than 1,000, most under 80 bytes).
    const BYTES: usize = 96 * 1024;
    /// Messages held.
    const ENTRIES: usize = 2048;

    /// (bytes used, entries used, each entry's start and length without the NUL).
    type Index = (usize, usize, [(u32, u32); ENTRIES]);

    struct Arena {
        bytes: UnsafeCell<[u8; BYTES]>,
        index: Mutex<Index>,
    }

    // SAFETY: the bytes are written only under the lock, each byte once, before any
    // reference to it is made; afterwards they are only read.
    unsafe impl Sync for Arena {}

    static ARENA: Arena = Arena {
        bytes: UnsafeCell::new([0; BYTES]),
        index: Mutex::new((0, 0, [(0, 0); ENTRIES])),
    };

    /// The stored message `[start, start + len]` (with its NUL).
    ///
    /// # Safety
    /// The range must have been written (under the lock) and lie within the arena.
    unsafe fn stored(start: usize, len: usize) -> &'static [u8] {
        // SAFETY: within the arena, written once and never again (forwarded contract); no
        // `&mut` to the array is ever made, writers use raw pointers to other bytes.
        unsafe { std::slice::from_raw_parts(ARENA.bytes.get().cast::<u8>().add(start), len + 1) }
    }

    /// `s` as a C string in static storage (a NUL inside `s` becomes a space).
    pub(super) fn intern(s: &str) -> &'static CStr {
        const FULL: &CStr = c"(message table full)";
        let Ok(mut guard) = ARENA.index.lock() else {
            return FULL;
        };
        let (used, count, entries) = &mut *guard;
        let want = s.as_bytes();
        for &(start, len) in entries.iter().take(*count) {
            let (start, len) = (start as usize, len as usize);
            if len == want.len() {
                // SAFETY: an entry written under the lock.
                let have = unsafe { stored(start, len) };
                if have.get(..len).is_some_and(|h| {
                    h.iter()
                        .zip(want)
                        .all(|(a, b)| *a == if *b == 0 { b' ' } else { *b })
                }) {
                    return CStr::from_bytes_with_nul(have).unwrap_or(FULL);
                }
            }
        }
        let start = *used;
        let Some(end) = start.checked_add(want.len()).filter(|e| *e < BYTES) else {
            return FULL;
        };
        if *count >= ENTRIES {
            return FULL;
        }
        let (Ok(s32), Ok(l32)) = (u32::try_from(start), u32::try_from(want.len())) else {
            return FULL;
        };
        let base = ARENA.bytes.get().cast::<u8>();
        for (i, b) in want.iter().enumerate() {
            // SAFETY: `start + i < end < BYTES`, past every byte handed out (only this
            // thread writes, under the lock).
            unsafe { base.add(start + i).write(if *b == 0 { b' ' } else { *b }) };
        }
        // The NUL is already there (the arena starts zeroed and is written only here).
        *used = end + 1;
        if let Some(e) = entries.get_mut(*count) {
            *e = (s32, l32);
        }
        *count += 1;
        // SAFETY: written just above.
        CStr::from_bytes_with_nul(unsafe { stored(start, want.len()) }).unwrap_or(FULL)
    }
}

/// The status code of an error kind.
fn code_of(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::Truncated => OI_ERR_TRUNCATED,
        ErrorKind::OutOfBounds => OI_ERR_OUT_OF_BOUNDS,
        ErrorKind::BadMagic => OI_ERR_BAD_MAGIC,
        ErrorKind::UnsupportedVersion => OI_ERR_UNSUPPORTED_VERSION,
        ErrorKind::UnsupportedMethod => OI_ERR_UNSUPPORTED_METHOD,
        ErrorKind::SizeMismatch => OI_ERR_SIZE_MISMATCH,
        ErrorKind::HashMismatch => OI_ERR_HASH_MISMATCH,
        ErrorKind::LimitExceeded => OI_ERR_LIMIT_EXCEEDED,
        ErrorKind::Decompress => OI_ERR_DECOMPRESS,
        ErrorKind::Malformed => OI_ERR_MALFORMED,
        ErrorKind::InvalidId => OI_ERR_INVALID_ID,
        ErrorKind::BadContainer => OI_ERR_BAD_CONTAINER,
        ErrorKind::OutOfMemory => OI_ERR_OUT_OF_MEMORY,
        ErrorKind::Unsupported => OI_ERR_UNSUPPORTED,
        _ => OI_ERR_INTERNAL,
    }
}

fn str_of(s: &CStr) -> OiStr {
    OiStr {
        data: s.as_ptr(),
        len: s.to_bytes().len(),
    }
}

fn cstring(s: &str) -> CString {
    // Entry IDs and strings come from the data: an embedded NUL cannot be represented in a
    // NUL-terminated string and is shown as U+FFFD.
    CString::new(s.replace('\0', "\u{FFFD}")).unwrap_or_default()
}

fn compression_of(unit: &Unit<'_>) -> u32 {
    match unit.compressed().map(|c| c.method()) {
        None => OI_COMPRESSION_NONE,
        Some(CompressionMethod::Zlib) => OI_COMPRESSION_ZLIB,
        Some(_) => OI_COMPRESSION_ZSTD,
    }
}

fn format_code(format: Format) -> u32 {
    match format {
        Format::Bundle => OI_FORMAT_BUNDLE,
        Format::TextBundle => OI_FORMAT_TEXT_BUNDLE,
        Format::OffloadBinary => OI_FORMAT_OFFLOAD_BINARY,
        Format::Elf => OI_FORMAT_ELF,
        Format::NvFatbin => OI_FORMAT_NVIDIA_FATBIN,
        Format::Kpack => OI_FORMAT_KPACK,
    }
}

fn describe(image: &Image<'_>, offset: Option<u64>) -> Described {
    let id = identify(image);
    let triple = id
        .triple()
        .map(|t| t.to_string())
        .or_else(|| image.triple.map(str::to_string))
        .unwrap_or_default();
    Described {
        offset: offset.unwrap_or(OI_NO_OFFSET),
        size: image.size(),
        format: format_code(image.format),
        image_kind: u32::from(image.image_kind.code()),
        name: cstring(&image_name(image).to_string()),
        offload_kind: cstring(image.offload_kind.name()),
        triple: cstring(&triple),
        target: cstring(&id.named_target().map(|t| t.to_string()).unwrap_or_default()),
    }
}

thread_local! {
    /// Decompressed bytes the reader's decoders produced on this thread. Calls on a
    /// reader are serialised and decode on the calling thread, so the difference around
    /// a call is that call's.
    static PRODUCED: Cell<u64> = const { Cell::new(0) };
}

fn produced() -> u64 {
    PRODUCED.with(Cell::get)
}

/// A decoder that counts what it produces (`oi_reader_get_stats`).
struct Counting<D>(D);

impl<D: Decompressor> Decompressor for Counting<D> {
    fn read(&mut self, out: &mut [u8]) -> offload_image::Result<usize> {
        let n = self.0.read(out)?;
        PRODUCED.with(|p| p.set(p.get().saturating_add(n as u64)));
        Ok(n)
    }
    fn consumed(&self) -> u64 {
        self.0.consumed()
    }
    fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> offload_image::Result<usize> {
        let n = self.0.read_with(max, f)?;
        PRODUCED.with(|p| p.set(p.get().saturating_add(n as u64)));
        Ok(n)
    }
}

/// The reader's decoder hook (`ReadOptions::decoders`): the built-in decoders, counted.
fn counted<'a>(
    c: &CompressedBundle<'a>,
    options: &ReadOptions,
) -> offload_image::Result<Box<dyn Decompressor + Send + 'a>> {
    Ok(Box::new(Counting(c.decoder(options)?)))
}

/// What a streaming selection hands back.
struct Streamed {
    ids: Vec<String>,
    chosen: Vec<Option<usize>>,
    kept: Vec<(usize, Vec<u8>)>,
    /// The whole stream was decoded and its hash checked.
    verified: bool,
}

impl State {
    /// Opens unit `u` whole (decompressing a compressed bundle once) and fills its slots.
    fn open_unit(&mut self, u: usize) -> Result<(), Fail> {
        let Some(slot) = self.units.get(u) else {
            return Err(invalid(c"no unit with that index"));
        };
        if slot.open.is_some() {
            return Ok(());
        }
        if let Some(d) = slot.damage {
            return Err(d);
        }
        let before = produced();
        let passes = u64::from(slot.unit.compressed().is_some());
        let open = match slot.unit.open(&self.read) {
            Ok(open) => open,
            Err(e) => {
                let d = Fail::from(e);
                // Memory is not the unit's fault: a later call may succeed.
                if d.code != OI_ERR_OUT_OF_MEMORY {
                    if let Some(slot) = self.units.get_mut(u) {
                        slot.damage = Some(d);
                    }
                }
                return Err(d);
            }
        };
        self.stats.passes = self.stats.passes.saturating_add(passes);
        self.stats.decoded = self
            .stats
            .decoded
            .saturating_add(produced().saturating_sub(before));
        let held = open.decompressed().map_or(0, |d| d.len() as u64);
        self.stats.held = self.stats.held.saturating_add(held);
        let Some(slot) = self.units.get_mut(u) else {
            return Err(invalid(c"no unit with that index"));
        };
        slot.checked = true;
        let open = slot.open.insert(open);
        // SAFETY: the slices point into the caller's buffer or the reader's mapping (which
        // outlive the reader) or into `open`'s decompressed buffers, which stay where they
        // are until the reader is dropped: `open` is never replaced or mutated, and the
        // unit slots are never moved (their Vec is never resized).
        let images: Vec<(Image<'static>, Option<u64>)> = open
            .images()
            .map(|i| {
                let off = open.offset_of(&i);
                (unsafe { extend_image(i) }, off)
            })
            .collect();
        let slots = slot.images.get_or_insert_with(Vec::new);
        if slots.len() < images.len() {
            slots.resize_with(images.len(), ImageSlot::default);
        }
        for ((image, offset), s) in images.iter().zip(slots.iter_mut()) {
            if image.encoded.is_some() {
                // Described once decoded (its size is the decoded image's).
                if s.bytes.is_none() {
                    s.pending = Some(*image);
                }
                continue;
            }
            if s.bytes.is_none() {
                s.bytes = Some(image.bytes);
            }
            if s.info.is_none() {
                s.info = Some(Box::new(describe(image, *offset)));
            }
        }
        Ok(())
    }

    /// The damage of unit `u`, found by decoding a compressed bundle's whole stream once
    /// (nothing kept) if no call has yet; without hash verification a compressed bundle is
    /// not decoded here (its damage is found when a call reads it).
    fn check(&mut self, u: usize) -> Result<Option<Fail>, Fail> {
        let slot = self
            .units
            .get(u)
            .ok_or_else(|| invalid(c"no unit with that index").index(u))?;
        if slot.damage.is_some() || slot.checked || !self.read.verify_hash {
            return Ok(slot.damage);
        }
        let Some(c) = slot.unit.compressed() else {
            return Ok(None);
        };
        let at = slot.unit.location.offset;
        let before = produced();
        let result = c.reader(&self.read).and_then(|r| r.finish());
        self.stats.passes = self.stats.passes.saturating_add(1);
        self.stats.decoded = self
            .stats
            .decoded
            .saturating_add(produced().saturating_sub(before));
        let slot = self
            .units
            .get_mut(u)
            .ok_or_else(|| invalid(c"no unit with that index").index(u))?;
        match result {
            Ok(_) => slot.checked = true,
            Err(e) if e.kind() == ErrorKind::OutOfMemory => return Err(Fail::from(e)),
            Err(e) => slot.damage = Some(Fail::from(e.rebase(at))),
        }
        Ok(slot.damage)
    }

    /// Checks every unit ([`State::check`]). A unit that cannot be checked for want of
    /// memory is left unchecked: the damages known are still reported.
    ///
    /// With more than one thread (`OI_READ_THREADS_SHIFT`) the compressed units not yet
    /// checked are decoded and hashed on that many threads
    /// (`offload_image::parallel::map_ordered`), one unit at a time each, and their results
    /// recorded in the units' order: the same damages as one after another.
    fn check_all(&mut self) {
        if self.threads > 1 && self.read.verify_hash {
            let todo: Vec<(usize, CompressedBundle<'static>, u64)> = self
                .units
                .iter()
                .enumerate()
                .filter(|(_, s)| s.damage.is_none() && !s.checked)
                .filter_map(|(u, s)| Some((u, *s.unit.compressed()?, s.unit.location.offset)))
                .collect();
            let read = self.read;
            let checked = offload_image::parallel::map_ordered(&todo, self.threads, |_, t| {
                // Counted on the worker's thread.
                let before = produced();
                let result = t.1.reader(&read).and_then(|r| r.finish());
                (result, produced().saturating_sub(before))
            });
            for ((u, _, at), (result, decoded)) in todo.into_iter().zip(checked) {
                self.stats.passes = self.stats.passes.saturating_add(1);
                self.stats.decoded = self.stats.decoded.saturating_add(decoded);
                let Some(slot) = self.units.get_mut(u) else {
                    continue;
                };
                match result {
                    Ok(_) => slot.checked = true,
                    // Left unchecked, as `check` leaves it.
                    Err(e) if e.kind() == ErrorKind::OutOfMemory => {}
                    Err(e) => slot.damage = Some(Fail::from(e.rebase(at))),
                }
            }
            return;
        }
        for u in 0..self.units.len() {
            let _ = self.check(u);
        }
    }

    /// Number of images of unit `u`, opening it if nothing else told.
    fn count(&mut self, u: usize) -> Result<usize, Fail> {
        if let Some(v) = self.units.get(u).and_then(|s| s.images.as_ref()) {
            return Ok(v.len());
        }
        // A damaged unit has no images; `oi_reader_unit_status` says why.
        if self.open_unit(u).is_err() && self.units.get(u).is_some_and(|s| s.damage.is_some()) {
            return Ok(0);
        }
        Ok(self
            .units
            .get(u)
            .and_then(|s| s.images.as_ref())
            .map_or(0, Vec::len))
    }

    /// The (unit, index) of flat image index `i`.
    fn locate(&mut self, image: usize) -> Result<(usize, usize), Fail> {
        let mut i = image;
        for u in 0..self.units.len() {
            let n = self.count(u)?;
            if i < n {
                return Ok((u, i));
            }
            i -= n;
        }
        Err(invalid(c"no image with that index").index(image))
    }

    fn slot(&mut self, u: usize, i: usize) -> Result<&mut ImageSlot, Fail> {
        self.units
            .get_mut(u)
            .and_then(|s| s.images.as_mut())
            .and_then(|v| v.get_mut(i))
            .ok_or_else(|| invalid(c"no image with that index"))
    }

    /// The description of image `i` of unit `u`.
    fn info(&mut self, u: usize, i: usize) -> Result<&Described, Fail> {
        let slot = self.slot(u, i)?;
        if slot.info.is_none() {
            if let (Some(id), Some(bytes)) = (slot.table_id.as_deref(), slot.bytes) {
                // A kept image of a streamed unit: described from its own bytes, exactly
                // as the whole-unit reader would.
                let image = Image::from_id(i, Format::Bundle, id, bytes);
                slot.info = Some(Box::new(describe(&image, None)));
            } else {
                self.open_unit(u)?;
            }
        }
        let slot = self.slot(u, i)?;
        if let (true, Some(image)) = (slot.info.is_none(), slot.pending) {
            let bytes = self.bytes(u, i)?;
            let slot = self.slot(u, i)?;
            slot.info = Some(Box::new(describe(&image.with_bytes(bytes), None)));
        }
        self.slot(u, i)?
            .info
            .as_deref()
            .ok_or_else(|| fail(OI_ERR_INTERNAL, c"image not described"))
    }

    fn bytes(&mut self, u: usize, i: usize) -> Result<&'static [u8], Fail> {
        if self.slot(u, i)?.bytes.is_none() {
            self.open_unit(u)?;
        }
        let read = self.read;
        let slot = self.slot(u, i)?;
        if let (None, Some(encoded)) = (slot.bytes, slot.pending.and_then(|p| p.encoded)) {
            let decoded = encoded.decode(&read)?;
            let kept = slot.kept.insert(decoded);
            // SAFETY: the buffer is owned by this slot, never replaced or resized, and
            // freed only when the reader is dropped.
            // Not in the reader's statistics, which count compressed bundles (as before
            // fatbinary entries were decoded lazily).
            slot.bytes = Some(unsafe { extend(kept) });
        }
        self.slot(u, i)?
            .bytes
            .ok_or_else(|| fail(OI_ERR_INTERNAL, c"image bytes missing"))
    }

    /// One pass over compressed unit `u` (`offload_image::choose_streaming_keeping`): the
    /// choice for every device, chosen images the reader does not hold yet kept. `None` if
    /// the content cannot be streamed (text bundle, overlapping payloads).
    fn stream(
        &mut self,
        u: usize,
        devices: &[Device],
        options: &SelectOptions,
    ) -> Result<Option<Streamed>, Fail> {
        let slot = self
            .units
            .get(u)
            .ok_or_else(|| invalid(c"no unit with that index"))?;
        let have: Vec<usize> = slot.images.as_ref().map_or_else(Vec::new, |v| {
            v.iter()
                .enumerate()
                .filter(|(_, s)| s.bytes.is_some())
                .map(|(i, _)| i)
                .collect()
        });
        let before = produced();
        let found = choose_streaming_keeping(&slot.unit, devices, options, &self.read, |i| {
            !have.contains(&i)
        });
        let decoded = produced().saturating_sub(before);
        // A pass: the stream was read (its size is checked before a decoder is made).
        if decoded > 0 || matches!(found, Ok(Some(_))) {
            self.stats.passes = self.stats.passes.saturating_add(1);
        }
        self.stats.decoded = self.stats.decoded.saturating_add(decoded);
        let Some(found) = found.map_err(Fail::from)? else {
            return Ok(None);
        };
        Ok(Some(Streamed {
            ids: found.table.entries().map(|e| e.id.to_string()).collect(),
            chosen: found.chosen,
            kept: found.kept.into_iter().map(|k| (k.index, k.bytes)).collect(),
            verified: found.verified,
        }))
    }

    /// Takes what one pass over compressed unit `u` found ([`State::stream`]): the entry
    /// IDs of its table and the chosen images' bytes into its slots.
    fn keep_streamed(&mut self, u: usize, s: Streamed) -> Result<Vec<Option<usize>>, Fail> {
        let slot = self
            .units
            .get_mut(u)
            .ok_or_else(|| invalid(c"no unit with that index"))?;
        let slots = slot.images.get_or_insert_with(Vec::new);
        if slots.len() < s.ids.len() {
            slots.resize_with(s.ids.len(), ImageSlot::default);
        }
        for (s, id) in slots.iter_mut().zip(&s.ids) {
            if s.table_id.is_none() {
                s.table_id = Some(id.clone());
            }
        }
        for (index, bytes) in s.kept {
            if let Some(s) = slots.get_mut(index) {
                if s.bytes.is_none() {
                    let kept = s.kept.insert(bytes);
                    self.stats.held = self.stats.held.saturating_add(kept.len() as u64);
                    // SAFETY: the buffer is owned by this slot, never replaced or
                    // resized, and freed only when the reader is dropped.
                    s.bytes = Some(unsafe { extend(kept) });
                }
            }
        }
        Ok(s.chosen)
    }

    /// The choice for every device in unit `u` (indices within the unit).
    fn select_unit(
        &mut self,
        u: usize,
        devices: &[Device],
        options: &SelectOptions,
    ) -> Result<Vec<Option<usize>>, Fail> {
        if self.units.get(u).is_some_and(|s| s.damage.is_some()) {
            return Ok(vec![None; devices.len()]);
        }
        // The library's rule: a compressed bundle not yet open is streamed.
        if self.units.get(u).is_some_and(|s| s.open.is_none()) {
            match self.stream(u, devices, options) {
                Ok(Some(s)) => {
                    if let Some(slot) = self.units.get_mut(u) {
                        slot.checked |= s.verified;
                    }
                    return self.keep_streamed(u, s);
                }
                Ok(None) => {}
                // Memory is not the unit's fault: the call fails.
                Err(e) if e.code == OI_ERR_OUT_OF_MEMORY => return Err(e),
                Err(e) => {
                    if let Some(slot) = self.units.get_mut(u) {
                        slot.damage = Some(e);
                    }
                    return Err(e);
                }
            }
        }
        self.open_unit(u)?;
        let slot = self
            .units
            .get(u)
            .and_then(|s| s.open.as_ref())
            .ok_or_else(|| fail(OI_ERR_INTERNAL, c"unit not open"))?;
        Ok(choose(slot.images(), devices, options)
            .iter()
            .map(|c| c.chosen())
            .collect())
    }
}

// ---- the unsafe boundary ---------------------------------------------------------------

/// Gives a slice the reader's lifetime.
///
/// # Safety
/// The memory must stay valid and unmodified until the reader is dropped, and the result
/// must not leave the reader except as a C pointer documented as valid until close.
unsafe fn extend(s: &[u8]) -> &'static [u8] {
    // SAFETY: forwarded contract.
    unsafe { std::slice::from_raw_parts(s.as_ptr(), s.len()) }
}

/// [`extend`] for an image's borrowed fields.
///
/// # Safety
/// As for [`extend`], for every slice the image borrows.
unsafe fn extend_image(image: Image<'_>) -> Image<'static> {
    // SAFETY: forwarded contract; `Image` is covariant plain data over its borrows.
    unsafe { core::mem::transmute::<Image<'_>, Image<'static>>(image) }
}

/// The caller's buffer.
///
/// # Safety
/// `data` must be null (then `len` must be 0) or point to `len` readable bytes that stay
/// valid and unmodified until the reader made from them is closed.
unsafe fn input(data: *const u8, len: usize) -> Result<&'static [u8], Fail> {
    if data.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(invalid(c"data is null"))
        };
    }
    // SAFETY: guaranteed by the caller (header contract).
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// Stores `value` through an optional out pointer.
///
/// # Safety
/// `p` must be null or valid for a write of `T`.
unsafe fn store<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: guaranteed by the caller (header contract).
        unsafe { p.write(value) }
    }
}

/// The reader behind a handle.
///
/// # Safety
/// `reader` must be null or a handle from `oi_reader_open*` not yet closed.
unsafe fn reader_ref<'a>(reader: *const OiReader) -> Result<&'a OiReader, Fail> {
    // SAFETY: guaranteed by the caller (header contract).
    unsafe { reader.as_ref() }.ok_or_else(|| invalid(c"reader is null"))
}

/// Runs `f`, turning a panic (a bug) into `OI_ERR_INTERNAL`, and reports the outcome.
///
/// # Safety
/// `error` must be null or valid for a write of `oi_error`.
unsafe fn boundary(error: *mut OiError, f: impl FnOnce() -> Result<i32, Fail>) -> i32 {
    let result = catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(fail(OI_ERR_INTERNAL, c"internal error (a bug)")));
    let (returned, e) = match result {
        Ok(code) => (code, fail(code, c"").to_c()),
        Err(f) => (f.returned.unwrap_or(f.code), f.to_c()),
    };
    // SAFETY: forwarded contract.
    unsafe { store(error, e) };
    returned
}

// ---- safe helpers ----------------------------------------------------------------------

fn read_options(o: Option<&OiReadOptions>) -> Result<ReadOptions, Fail> {
    let mut read = ReadOptions {
        decoders: Decoders {
            stream: Some(counted),
            whole: None,
            raw: None,
        },
        ..ReadOptions::default()
    };
    if let Some(o) = o {
        if o.flags & !(OI_READ_NO_VERIFY_HASH | OI_READ_THREADS_MASK) != 0 {
            return Err(invalid(c"unknown oi_read_options flag"));
        }
        read.verify_hash = o.flags & OI_READ_NO_VERIFY_HASH == 0;
        let or = |v: u64, d: u64| if v == 0 { d } else { v };
        read.limits = Limits {
            max_decompressed_size: or(
                o.max_decompressed_size,
                Limits::DEFAULT.max_decompressed_size,
            ),
            max_entries: or(o.max_entries, Limits::DEFAULT.max_entries),
            max_id_len: or(o.max_id_len, Limits::DEFAULT.max_id_len),
            max_depth: match o.max_depth {
                0 => Limits::DEFAULT.max_depth,
                d => usize::try_from(d)
                    .unwrap_or(usize::MAX)
                    .min(Limits::MAX_DEPTH),
            },
        };
    }
    Ok(read)
}

/// The threads of `oi_read_options.flags` (`OI_READ_THREADS_SHIFT`), at least 1.
fn read_threads(o: Option<&OiReadOptions>) -> usize {
    match o.map_or(0, |o| {
        (o.flags & OI_READ_THREADS_MASK) >> OI_READ_THREADS_SHIFT
    }) {
        OI_READ_THREADS_AUTO => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => usize::try_from(n).unwrap_or(1).max(1),
    }
}

fn select_options(o: Option<&OiSelectOptions>) -> Result<SelectOptions, Fail> {
    let mut select = SelectOptions::default();
    if let Some(o) = o {
        let known = OI_SELECT_HIP_OPENMP_COMPATIBLE
            | OI_SELECT_NO_JIT
            | OI_SELECT_NO_GENERIC
            | OI_SELECT_NO_SPIRV
            | OI_SELECT_STRICT
            | OI_SELECT_CUDA_FORCE_PTX_JIT
            | OI_SELECT_CUDA_DISABLE_PTX_JIT
            | OI_SELECT_CUDA_JIT_FROM_ENV;
        if o.flags & !known != 0 {
            return Err(invalid(c"unknown oi_select_options flag"));
        }
        select.policy = match o.policy {
            OI_POLICY_BEST => Policy::Best,
            OI_POLICY_FIRST => Policy::First,
            OI_POLICY_FIRST_BY_CLASS => Policy::FirstByClass,
            _ => return Err(invalid(c"unknown policy")),
        };
        select.kind = match o.kind {
            OI_KIND_ANY => KindFilter::Any,
            OI_KIND_HIP => KindFilter::Hip,
            OI_KIND_OPENMP => KindFilter::OpenMp,
            OI_KIND_CUDA => KindFilter::Cuda,
            _ => return Err(invalid(c"unknown kind")),
        };
        select.hip_openmp_compatible = o.flags & OI_SELECT_HIP_OPENMP_COMPATIBLE != 0;
        select.allow_jit = o.flags & OI_SELECT_NO_JIT == 0;
        select.allow_generic = o.flags & OI_SELECT_NO_GENERIC == 0;
        select.allow_spirv = o.flags & OI_SELECT_NO_SPIRV == 0;
        select.strict = o.flags & OI_SELECT_STRICT != 0;
        let from_env = o.flags & OI_SELECT_CUDA_JIT_FROM_ENV != 0;
        let switches = if from_env {
            JitSwitches::from_env(|name| {
                std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
            })
        } else {
            JitSwitches::default()
        };
        select.cuda = CudaDriver {
            version: (o.nvidia_driver_branch != 0).then_some(DriverVersion {
                major: o.nvidia_driver_branch,
                minor: 0,
                patch: None,
            }),
            switches: JitSwitches {
                force_ptx_jit: switches.force_ptx_jit
                    || o.flags & OI_SELECT_CUDA_FORCE_PTX_JIT != 0,
                disable_ptx_jit: switches.disable_ptx_jit
                    || o.flags & OI_SELECT_CUDA_DISABLE_PTX_JIT != 0,
                cache_disabled: switches.cache_disabled,
            },
        };
    }
    Ok(select)
}

/// The bytes of the regular file at `path`, read whole (errors: `oi_reader_open_file`).
fn read_file(path: &std::path::Path) -> Result<Box<[u8]>, Fail> {
    use std::io::Read;
    // errno values for the two failures that are not the system's own.
    #[cfg(unix)]
    const EINVAL: i32 = libc::EINVAL;
    #[cfg(unix)]
    const EIO: i32 = libc::EIO;
    #[cfg(not(unix))]
    const EINVAL: i32 = 22;
    #[cfg(not(unix))]
    const EIO: i32 = 5;
    let io = |e: std::io::Error| {
        io_fail(
            e.raw_os_error().unwrap_or(0),
            c"cannot open or read the file",
        )
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO without a writer would block the open; no effect on a regular file.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(io_fail(EINVAL, c"not a regular file"));
    }
    let len = usize::try_from(meta.len())
        .map_err(|_| fail(OI_ERR_OUT_OF_MEMORY, c"the file does not fit in memory"))?;
    let mut data = Vec::new();
    data.try_reserve_exact(len)
        .map_err(|_| fail(OI_ERR_OUT_OF_MEMORY, c"the file does not fit in memory"))?;
    // One byte more than its size: a file that grew is seen too.
    (&file)
        .take(meta.len().saturating_add(1))
        .read_to_end(&mut data)
        .map_err(io)?;
    if data.len() != len {
        return Err(io_fail(EIO, c"the file changed size while it was read"));
    }
    Ok(data.into_boxed_slice())
}

/// Walks `data` and builds the reader; non-compressed units are opened at once (that
/// allocates nothing but for compressed OffloadBinaries), compressed bundles are left for
/// the first call that needs them.
fn build(
    data: &'static [u8],
    read: ReadOptions,
    threads: usize,
    owned: Option<Box<[u8]>>,
) -> Result<OiReader, Fail> {
    // A damaged container costs its unit only (`offload_image::units`): it is kept, with
    // its error, and so are the errors of the walk outside any unit. Only a walk that
    // finds nothing at all fails the open.
    let mut units = Vec::new();
    let mut walk_errors = Vec::new();
    for unit in offload_image::units(data, &read) {
        match unit {
            Ok(u) => units.push(u),
            Err(e) => walk_errors.push(Fail::from(e)),
        }
    }
    // No unit at all in a split (kpack) library: its code objects are elsewhere, say so.
    if units.is_empty() {
        if let Some(at) = split_library(data) {
            return Err(fail(
                OI_ERR_KPACK_SPLIT,
                c"a split (kpack) library: its device code objects are not in the file but in .kpack archives installed beside it, which the HIP runtime's kpack loader reads",
            )
            .at(at));
        }
    }
    // Nothing that reads (every unit damaged, or only errors): the open fails with the
    // first problem, as `loader-sim list` prints only its errors then.
    if units.iter().all(|u| u.damage().is_some()) {
        let first = units
            .first()
            .and_then(|u| u.damage())
            .map(|d| Fail::from(d.error))
            .or_else(|| walk_errors.first().copied());
        if let Some(e) = first {
            return Err(e);
        }
    }
    let mut state = State {
        read,
        threads,
        units: units
            .into_iter()
            .map(|unit| UnitSlot {
                location: cstring(&unit.location.to_string()),
                damage: unit.damage().map(|d| Fail::from(d.error)),
                checked: unit.compressed().is_none(),
                unit,
                open: None,
                images: None,
            })
            .collect(),
        walk_errors,
        stats: Stats::default(),
        texts: HashMap::new(),
    };
    for u in 0..state.units.len() {
        let compressed = state
            .units
            .get(u)
            .is_some_and(|s| s.unit.compressed().is_some());
        if !compressed {
            // A unit that does not open keeps its error (`oi_reader_unit_status`).
            let _ = state.open_unit(u);
        }
    }
    Ok(OiReader {
        state: Mutex::new(state),
        _data: owned,
    })
}

impl OiReader {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> Result<T, Fail>) -> Result<T, Fail> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| fail(OI_ERR_INTERNAL, c"reader is unusable after an earlier bug"))?;
        f(&mut state)
    }
}

// ---- the API ---------------------------------------------------------------------------

/// Opens a reader over `data[0..len)`, which it borrows: the buffer must stay valid and
/// unmodified until `oi_reader_close`. Walks the containers (ELF sections, archive
/// members, bundles, OffloadBinaries) and checks them; compressed bundles are decoded
/// later, when first needed. `options` may be NULL (defaults).
///
/// A damaged container costs its unit only: the reader keeps it as a unit without images
/// (`oi_reader_unit_status`, `oi_reader_damage`) and reads the others. Returns NULL on
/// failure (nothing in the data reads; or `OI_ERR_KPACK_SPLIT` for a split library, whose
/// code objects are in `.kpack` archives beside it, with `error->offset` at its first
/// `HIPK` wrapper), with the reason in `*error` (when `error` is not NULL).
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_open(
    data: *const u8,
    len: usize,
    options: *const OiReadOptions,
    error: *mut OiError,
) -> *mut OiReader {
    let mut out: *mut OiReader = core::ptr::null_mut();
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let data = input(data, len)?;
            let read = read_options(options.as_ref())?;
            let threads = read_threads(options.as_ref());
            out = Box::into_raw(Box::new(build(data, read, threads, None)?));
            Ok(OI_OK)
        })
    };
    out
}

/// Opens a reader over the file at `path` (NUL-terminated), which it reads into memory
/// (not mapped: a file another process truncates or rewrites meanwhile cannot fault the
/// host process). Otherwise as `oi_reader_open`; `OI_ERR_IO` (with the errno in
/// `error->os_error` and the system's text for it in `error->os_message`) if the file cannot
/// be opened or read, is not a regular file (a FIFO, a device, a directory: `EINVAL`,
/// without blocking on a FIFO), or changed size while it was read (`EIO`);
/// `OI_ERR_OUT_OF_MEMORY` if it does not fit in memory.
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_open_file(
    path: *const c_char,
    options: *const OiReadOptions,
    error: *mut OiError,
) -> *mut OiReader {
    let mut out: *mut OiReader = core::ptr::null_mut();
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            if path.is_null() {
                return Err(invalid(c"path is null"));
            }
            let path = CStr::from_ptr(path);
            #[cfg(unix)]
            let path: &std::path::Path =
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path.to_bytes())
                    .as_ref();
            #[cfg(not(unix))]
            let path =
                std::path::Path::new(path.to_str().map_err(|_| invalid(c"path is not UTF-8"))?);
            let read = read_options(options.as_ref())?;
            let data = read_file(path)?;
            // SAFETY: the heap buffer lives in the reader (it does not move when the box
            // does) and is dropped after its state.
            let bytes: &'static [u8] = extend(&data);
            let threads = read_threads(options.as_ref());
            out = Box::into_raw(Box::new(build(bytes, read, threads, Some(data))?));
            Ok(OI_OK)
        })
    };
    out
}

/// Closes a reader and frees everything it handed out. NULL is accepted.
///
/// # Safety
/// `reader` must be NULL or an open reader, not used by another thread during the call
/// nor afterwards.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_close(reader: *mut OiReader) {
    if !reader.is_null() {
        // SAFETY: guaranteed by the caller (header contract): made by Box::into_raw.
        let r = unsafe { Box::from_raw(reader) };
        // A panic in a destructor is a bug; it must not unwind into C.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(r)));
    }
}

/// Number of units (0 for a NULL reader).
///
/// # Safety
/// `reader` must be NULL or an open reader.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_unit_count(reader: *const OiReader) -> usize {
    // SAFETY: forwarded contract.
    let Ok(r) = (unsafe { reader_ref(reader) }) else {
        return 0;
    };
    catch_unwind(AssertUnwindSafe(|| {
        r.with(|s| Ok(s.units.len())).unwrap_or(0)
    }))
    .unwrap_or(0)
}

/// Whether unit `unit` reads: `OI_OK`, or the error that makes it damaged (its container
/// does not read, or it does not open: a bad hash, a corrupt stream), with its offset and
/// the unit (`index`) in `*error`. A damaged unit has no images and no selection (`found`
/// 0); the other units are unaffected. Right from the first call: a compressed bundle that
/// no call has decoded yet is decoded once here to check its stream and hash (nothing is
/// kept; with `OI_READ_NO_VERIFY_HASH` it is not decoded here, and its damage is found by
/// the call that reads it).
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_unit_status(
    reader: *const OiReader,
    unit: usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let r = reader_ref(reader)?;
            r.with(|s| match s.check(unit)? {
                Some(d) => Err(d.index(unit)),
                None => Ok(OI_OK),
            })
        })
    }
}

/// The number of damages: damaged units (`oi_reader_unit_status`, which checks each unit
/// as it does) and errors of the walk outside any unit, after which it went on. 0 for a
/// NULL reader.
///
/// # Safety
/// `reader` must be NULL or an open reader.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_damage_count(reader: *const OiReader) -> usize {
    // SAFETY: forwarded contract.
    let Ok(r) = (unsafe { reader_ref(reader) }) else {
        return 0;
    };
    catch_unwind(AssertUnwindSafe(|| {
        r.with(|s| {
            s.check_all();
            Ok(s.damages().len())
        })
        .unwrap_or(0)
    }))
    .unwrap_or(0)
}

/// Damage `index` (in offset order, below `oi_reader_damage_count`): returns its error
/// code and fills `*error` with it, its offset and, for a damaged unit, the unit
/// (`error->index`; `OI_NO_INDEX` for an error of the walk outside any unit).
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_damage(
    reader: *const OiReader,
    index: usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let r = reader_ref(reader)?;
            r.with(|s| {
                s.check_all();
                let d = s
                    .damages()
                    .get(index)
                    .copied()
                    .ok_or_else(|| invalid(c"no damage with that index"))?;
                Err(d)
            })
        })
    }
}

/// Describes unit `unit` (never decodes anything).
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_unit(
    reader: *const OiReader,
    unit: usize,
    info: *mut OiUnitInfo,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let r = reader_ref(reader)?;
            if info.is_null() {
                return Err(invalid(c"info is null"));
            }
            let i = r.with(|s| {
                let slot = s
                    .units
                    .get(unit)
                    .ok_or_else(|| invalid(c"no unit with that index").index(unit))?;
                Ok(OiUnitInfo {
                    location: str_of(&slot.location),
                    offset: slot.unit.location.offset,
                    index_in_container: slot.unit.index as u64,
                    format: format_code(slot.unit.format()),
                    compression: compression_of(&slot.unit),
                })
            })?;
            store(info, i);
            Ok(OI_OK)
        })
    }
}

/// Sets `*count` to the number of images of all units. Decompresses, once, every
/// compressed bundle whose table no earlier call has read.
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_image_count(
    reader: *const OiReader,
    count: *mut usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let r = reader_ref(reader)?;
            let n = r.with(|s| {
                let mut n = 0usize;
                for u in 0..s.units.len() {
                    n = n.saturating_add(s.count(u)?);
                }
                Ok(n)
            })?;
            store(count, n);
            Ok(OI_OK)
        })
    }
}

/// Describes image `image` (flat index over all units, in discovery order). The strings
/// stay valid until `oi_reader_close`. A kept image of a selection is described without
/// decoding; other images of a compressed bundle decompress it whole, once. A flat index
/// needs the image counts of the units before it: after `oi_reader_select` or
/// `oi_reader_image_count` they are known; before, finding them decompresses the earlier
/// compressed bundles.
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_image(
    reader: *const OiReader,
    image: usize,
    info: *mut OiImageInfo,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let r = reader_ref(reader)?;
            if info.is_null() {
                return Err(invalid(c"info is null"));
            }
            let i = r.with(|s| {
                let (u, i) = s.locate(image)?;
                let compression = s.units.get(u).map_or(0, |s| compression_of(&s.unit));
                let d = s.info(u, i)?;
                Ok(OiImageInfo {
                    unit: u,
                    index: i,
                    offset: d.offset,
                    size: d.size,
                    format: d.format,
                    compression,
                    image_kind: d.image_kind,
                    reserved: 0,
                    name: str_of(&d.name),
                    offload_kind: str_of(&d.offload_kind),
                    triple: str_of(&d.triple),
                    target: str_of(&d.target),
                })
            })?;
            store(info, i);
            Ok(OI_OK)
        })
    }
}

/// Sets `*data`/`*len` to the bytes of image `image`, valid until `oi_reader_close`:
/// in place in the reader's buffer for images stored uncompressed; for compressed bundles,
/// the copy a selection kept, else the bundle is decompressed whole once and the bytes
/// point into that copy. Repeated calls return the same pointer.
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_image_data(
    reader: *const OiReader,
    image: usize,
    data: *mut *const u8,
    len: *mut usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let r = reader_ref(reader)?;
            let bytes = r.with(|s| {
                let (u, i) = s.locate(image)?;
                s.bytes(u, i)
            })?;
            store(data, bytes.as_ptr());
            store(len, bytes.len());
            Ok(OI_OK)
        })
    }
}

/// The most devices one `oi_reader_select` call takes.
const MAX_TARGETS: usize = 1 << 16;

/// Chooses, for every unit and every device in `targets[0..n_targets)` (NUL-terminated:
/// `"gfx90a:sramecc+:xnack-"`, `"amdgcn-amd-amdhsa--gfx1100"`, `"sm_90"`), the image to
/// load, in one pass: a compressed bundle not yet decompressed is streamed once for all
/// devices and only the chosen images are kept (their bytes then come from
/// `oi_reader_image_data` without decoding again).
///
/// Writes `results[unit * n_targets + t]`; `capacity` must be at least
/// `oi_reader_unit_count(reader) * n_targets` (else `OI_ERR_BUFFER_TOO_SMALL`, nothing
/// done; `error->count` is the number needed). `options` may be NULL.
///
/// Returns `OI_OK` if every pair has an image, `OI_NO_MATCH` if some has none, and
/// `OI_PARTIAL` if some unit is damaged (its container, its compressed stream or its hash
/// does not read; found by this call or earlier): every unit's results are written, the
/// damaged unit's with `found` 0, and `*error` holds the first damaged unit's status
/// (`code`), byte offset and unit (`index`); the other units are chosen in as if it were
/// not there. Otherwise an error, after which the contents of `results` are unspecified: a
/// bad target (`OI_ERR_INVALID_ID` with its position in `error->index`), more than 65,536
/// targets (`OI_ERR_INVALID_ARGUMENT` with `n_targets` in `error->count`, checked before
/// anything is read or allocated), out of memory. Selecting again for other devices streams
/// the compressed bundles again; what earlier calls handed out stays valid.
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_select(
    reader: *const OiReader,
    targets: *const *const c_char,
    n_targets: usize,
    options: *const OiSelectOptions,
    results: *mut OiSelection,
    capacity: usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let r = reader_ref(reader)?;
            if targets.is_null() && n_targets > 0 {
                return Err(invalid(c"targets is null"));
            }
            // Checked before anything is read or allocated: a huge count is a caller's bug
            // (or an attack), not a reason to abort the host process.
            if n_targets > MAX_TARGETS {
                return Err(invalid(c"n_targets is over 65536 (count: n_targets)").count(n_targets));
            }
            let devices = parse_targets(targets, n_targets)?;
            let select = select_options(options.as_ref())?;
            if n_targets == 0 {
                return Ok(OI_OK);
            }
            r.with(|s| s.select_all(&devices, &select, results, capacity))
        })
    }
}

/// The devices of `targets[0..n)` for [`oi_reader_select`]: a bad one is
/// `OI_ERR_INVALID_ID` (or `OI_ERR_INVALID_ARGUMENT` when null) with its position as the
/// offset.
///
/// # Safety
/// `targets` must be valid for `n` reads of pointers that are null or NUL-terminated.
unsafe fn parse_targets(targets: *const *const c_char, n: usize) -> Result<Vec<Device>, Fail> {
    let mut devices = Vec::new();
    devices
        .try_reserve_exact(n)
        .map_err(|_| fail(OI_ERR_OUT_OF_MEMORY, c"out of memory"))?;
    for t in 0..n {
        // SAFETY: guaranteed by the caller.
        let p = unsafe { *targets.add(t) };
        if p.is_null() {
            return Err(invalid(c"target is null").index(t));
        }
        // SAFETY: non-null and NUL-terminated, guaranteed by the caller.
        let parsed = unsafe { CStr::from_ptr(p) }
            .to_str()
            .map_err(|_| fail(OI_ERR_INVALID_ID, c"target is not UTF-8").index(t))
            .and_then(|s| {
                // The error's offset is in the target string, not in the data.
                Device::parse(s).map_err(|e| Fail::from(e).at(OI_NO_OFFSET).index(t))
            })?;
        devices.push(parsed);
    }
    Ok(devices)
}

impl State {
    /// [`oi_reader_select`] once its arguments are read: the choice for every unit and
    /// device, written to `results[unit * devices.len() + t]`.
    ///
    /// # Safety
    /// `results` must be null or valid for `capacity` writes.
    unsafe fn select_all(
        &mut self,
        devices: &[Device],
        select: &SelectOptions,
        results: *mut OiSelection,
        capacity: usize,
    ) -> Result<i32, Fail> {
        let n_targets = devices.len();
        const SMALL: &CStr =
            c"results must hold unit_count * n_targets records (count: that number)";
        let need = self
            .units
            .len()
            .checked_mul(n_targets)
            .ok_or_else(|| fail(OI_ERR_BUFFER_TOO_SMALL, SMALL).count(usize::MAX))?;
        if capacity < need || (results.is_null() && need > 0) {
            return Err(fail(OI_ERR_BUFFER_TOO_SMALL, SMALL).count(need));
        }
        let mut base = 0usize;
        let mut missing = false;
        let mut damaged: Option<Fail> = None;
        for u in 0..self.units.len() {
            // A unit that does not read (its container, its stream, its hash) is recorded
            // as damaged and gives nothing; the others are chosen in as before.
            let chosen = match self.select_unit(u, devices, select) {
                Ok(chosen) => chosen,
                Err(e) => match self.units.get(u).and_then(|s| s.damage) {
                    Some(_) => vec![None; n_targets],
                    None => return Err(e),
                },
            };
            if let (None, Some(d)) = (damaged, self.units.get(u).and_then(|s| s.damage)) {
                damaged = Some(d.index(u));
            }
            for (t, c) in chosen.iter().enumerate() {
                missing |= c.is_none();
                let sel = OiSelection {
                    image: c.map_or(OI_NO_IMAGE, |c| base.saturating_add(c)),
                    found: u32::from(c.is_some()),
                    reserved: 0,
                };
                // SAFETY: within `capacity`, checked above.
                unsafe { results.add(u * n_targets + t).write(sel) };
            }
            base = base.saturating_add(self.count(u)?);
        }
        match damaged {
            Some(d) => Err(Fail {
                returned: Some(OI_PARTIAL),
                ..d
            }),
            None => Ok(if missing { OI_NO_MATCH } else { OI_OK }),
        }
    }
}

/// The `OI_REASON_*` code of why an image lost: the code whose `oi_reason_name` is the
/// library's name of the loss ([`Loss::name`]).
fn reason_kind(loss: &Loss<'_>) -> u32 {
    let name = loss.name().as_bytes();
    (OI_REASON_OUTRANKED..=OI_REASON_NVIDIA_RULE)
        .find(|&k| reason_name(k).to_bytes() == name)
        .unwrap_or(OI_REASON_OTHER)
}

/// What `oi_reader_explain` found: (image within the unit, kind, text) for the summary
/// and for every image that lost.
struct Explained {
    summary: (Option<usize>, u32, String),
    losses: Vec<(usize, u32, String)>,
}

impl State {
    /// Why each image of unit `u` lost on `device`, and why the pair has the choice it
    /// has: the sentences of `loader-sim select --explain` (the library's `Display` of
    /// each loss, with the same note when the ELF header overrides the container).
    fn explain(
        &mut self,
        u: usize,
        device: &Device,
        options: &SelectOptions,
    ) -> Result<Explained, Fail> {
        if let Err(e) = self.open_unit(u) {
            return Err(match self.units.get(u).and_then(|s| s.damage) {
                Some(d) => d.index(u),
                None => e,
            });
        }
        let open = self
            .units
            .get(u)
            .and_then(|s| s.open.as_ref())
            .ok_or_else(|| fail(OI_ERR_INTERNAL, c"unit not open"))?;
        let images: Vec<Image<'_>> = open.images().collect();
        let choice = choose(
            images.iter().copied(),
            core::slice::from_ref(device),
            options,
        )
        .into_iter()
        .next()
        .ok_or_else(|| fail(OI_ERR_INTERNAL, c"no choice for the device"))?;
        let losses = choice
            .losses()
            .filter_map(|lost| {
                lost.image?;
                Some((lost.index, reason_kind(&lost.loss), lost.reason(options)))
            })
            .collect();
        let summary = match (choice.chosen(), choice.rejection) {
            (Some(i), _) => (Some(i), OI_REASON_CHOSEN, String::new()),
            (None, Some((i, why))) => {
                let loss = Loss::Rejected(why);
                (Some(i), reason_kind(&loss), loss.to_string())
            }
            (None, None) => (
                None,
                OI_REASON_NO_IMAGES,
                "the unit has no images".to_string(),
            ),
        };
        Ok(Explained { summary, losses })
    }

    /// `text` as a C string owned by the reader (each distinct text stored once).
    fn text(&mut self, text: &str) -> OiStr {
        let c = self
            .texts
            .entry(text.to_string())
            .or_insert_with(|| cstring(text));
        // The CString's buffer does not move when the map grows.
        str_of(c)
    }

    /// The flat index of the first image of unit `u` (the counts of the units before it).
    fn first_image(&mut self, u: usize) -> Result<usize, Fail> {
        let mut base = 0usize;
        for v in 0..u {
            base = base.saturating_add(self.count(v)?);
        }
        Ok(base)
    }
}

/// Explains the choice for unit `unit` and the device `target` (NUL-terminated, as in
/// `oi_reader_select`; `options` may be NULL): why each image lost and why the pair has
/// the choice it has, with the kinds (`OI_REASON_*`) and sentences of
/// `loader-sim select --explain`.
///
/// `*summary` (may be NULL): the chosen image with `OI_REASON_CHOSEN`; when nothing is
/// chosen, the most telling rejection (its image, kind and sentence), `OI_REASON_NO_IMAGES`
/// for a unit without images, or `OI_REASON_DAMAGED` with the damage's message for a
/// damaged unit. `losses[0..min(capacity, *count))`: every image that lost, in discovery
/// order; `*count` is set to their number (call again with a larger array when it exceeds
/// `capacity`; `losses` may be NULL when `capacity` is 0). Image indices are flat, as in
/// `oi_selection`. The texts stay valid until `oi_reader_close`; they may hold bytes of the
/// file (an entry ID, a target as stored): escape them before printing to a terminal.
///
/// The unit is opened whole (a compressed bundle decompressed once, as `oi_reader_image`
/// does), and the image counts of the units before it are found (as for `oi_reader_image`).
/// Returns `OI_OK` when an image is chosen, `OI_NO_MATCH` when none is, the unit's status
/// for a damaged unit (with `error->index` the unit), or an error (a bad target:
/// `OI_ERR_INVALID_ID`; a unit out of range: `OI_ERR_INVALID_ARGUMENT`).
///
/// # Safety
/// Pointers must be NULL or valid for their documented use (`losses` for `capacity`
/// records); `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_explain(
    reader: *const OiReader,
    unit: usize,
    target: *const c_char,
    options: *const OiSelectOptions,
    summary: *mut OiReason,
    losses: *mut OiReason,
    capacity: usize,
    count: *mut usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let r = reader_ref(reader)?;
            if losses.is_null() && capacity > 0 {
                return Err(invalid(c"losses is null"));
            }
            let target = [target];
            let device = parse_targets(target.as_ptr(), 1)?
                .pop()
                .ok_or_else(|| invalid(c"target is null"))?;
            let select = select_options(options.as_ref())?;
            r.with(|s| {
                if unit >= s.units.len() {
                    return Err(invalid(c"no unit with that index").index(unit));
                }
                let explained = match s.explain(unit, &device, &select) {
                    Ok(e) => e,
                    Err(e) => {
                        if s.units.get(unit).is_some_and(|slot| slot.damage.is_some()) {
                            let text = str_of(e.message);
                            store(
                                summary,
                                OiReason {
                                    image: OI_NO_IMAGE,
                                    kind: OI_REASON_DAMAGED,
                                    reserved: 0,
                                    text,
                                },
                            );
                            store(count, 0);
                        }
                        return Err(e);
                    }
                };
                let base = s.first_image(unit)?;
                let flat = |i: Option<usize>| i.map_or(OI_NO_IMAGE, |i| base.saturating_add(i));
                let (image, kind, text) = &explained.summary;
                let sum = OiReason {
                    image: flat(*image),
                    kind: *kind,
                    reserved: 0,
                    text: s.text(text),
                };
                for (k, (i, kind, text)) in explained.losses.iter().take(capacity).enumerate() {
                    let reason = OiReason {
                        image: flat(Some(*i)),
                        kind: *kind,
                        reserved: 0,
                        text: s.text(text),
                    };
                    // SAFETY: `k < capacity`, and `losses` holds `capacity` records.
                    losses.add(k).write(reason);
                }
                store(summary, sum);
                store(count, explained.losses.len());
                Ok(if image.is_some() && *kind == OI_REASON_CHOSEN {
                    OI_OK
                } else {
                    OI_NO_MATCH
                })
            })
        })
    }
}

/// Sets `*first` to the flat index of unit `unit`'s first image and `*count` to its number
/// of images (0 for a damaged unit): its images are `first .. first + count`. Needs the
/// image counts of that unit and the ones before it: after `oi_reader_select` or
/// `oi_reader_image_count` they are known; before, finding them decompresses those
/// compressed bundles whose tables no call has read (as `oi_reader_image`).
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_unit_images(
    reader: *const OiReader,
    unit: usize,
    first: *mut usize,
    count: *mut usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let r = reader_ref(reader)?;
            let (f, n) = r.with(|s| {
                if unit >= s.units.len() {
                    return Err(invalid(c"no unit with that index").index(unit));
                }
                Ok((s.first_image(unit)?, s.count(unit)?))
            })?;
            store(first, f);
            store(count, n);
            Ok(OI_OK)
        })
    }
}

/// Fills `*stats` (zeros for a NULL reader).
///
/// # Safety
/// `reader` must be NULL or an open reader; `stats` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn oi_reader_get_stats(reader: *const OiReader, stats: *mut OiReaderStats) {
    // SAFETY: forwarded contract.
    let r = unsafe { reader_ref(reader) }.ok();
    let s = r
        .and_then(|r| {
            catch_unwind(AssertUnwindSafe(|| {
                r.with(|s| {
                    Ok(OiReaderStats {
                        decode_passes: s.stats.passes,
                        decoded_bytes: s.stats.decoded,
                        held_bytes: s.stats.held,
                    })
                })
                .ok()
            }))
            .ok()
            .flatten()
        })
        .unwrap_or(OiReaderStats {
            decode_passes: 0,
            decoded_bytes: 0,
            held_bytes: 0,
        });
    // SAFETY: forwarded contract.
    unsafe { store(stats, s) };
}

// ---- validation ------------------------------------------------------------------------

/// `oi_finding.severity`: the file is sound, but runtimes differ on it.
pub const OI_SEVERITY_NOTE: u32 = 0;
/// `oi_finding.severity`: some tool or runtime will mishandle the file.
pub const OI_SEVERITY_WARNING: u32 = 1;
/// `oi_finding.severity`: the file, or part of it, cannot be read.
pub const OI_SEVERITY_ERROR: u32 = 2;

/// One finding of `oi_validate` (`loader-sim validate`). Strings stay valid until
/// `oi_validation_free`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OiFinding {
    /// `OI_SEVERITY_*`.
    pub severity: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// Byte offset in the data.
    pub offset: u64,
    /// The stable code (`skipped-bytes`, `id-elf-mismatch`, `hash-mismatch`, ...).
    pub code: OiStr,
    /// Where the container is (`file`, `section .hip_fatbin`, ...).
    pub container: OiStr,
    /// One sentence.
    pub message: OiStr,
}

/// The findings of one `oi_validate` call (opaque).
pub struct OiValidation {
    // Owns the strings the findings point into.
    _strings: Vec<CString>,
    findings: Vec<OiFinding>,
    worst: Option<u32>,
}

// The findings hold pointers into `strings`, which never change after construction.
// SAFETY: nothing is mutated after construction; the pointers point into owned CStrings.
unsafe impl Send for OiValidation {}
// SAFETY: as above: read-only after construction.
unsafe impl Sync for OiValidation {}

/// Checks `len` bytes at `data` as `loader-sim validate` does: every problem the readers
/// find (errors), what tools and runtimes will mishandle (warnings), where runtimes' rules
/// choose differently (notes). Unlike `oi_reader_open`, a file that does not read is not
/// a failed call: its error is a finding. `options` may be NULL; with threads
/// (`OI_READ_THREADS_SHIFT`) the units are checked on that many threads, the findings
/// those of one thread in the same order. Returns a handle to free with
/// `oi_validation_free`, or NULL with `error` set (bad arguments, out of memory).
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_validate(
    data: *const u8,
    len: usize,
    options: *const OiReadOptions,
    error: *mut OiError,
) -> *mut OiValidation {
    let mut out: *mut OiValidation = core::ptr::null_mut();
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let data = input(data, len)?;
            let read = ReadOptions {
                decoders: Decoders::BUILTIN,
                ..read_options(options.as_ref())?
            };
            // Threads (`OI_READ_THREADS_SHIFT`): the units checked on several threads,
            // the findings those of one, in the same order.
            let found =
                offload_image::validate_threaded(data, &read, read_threads(options.as_ref()));
            let mut strings = Vec::with_capacity(found.len().saturating_mul(3));
            let mut findings = Vec::with_capacity(found.len());
            let mut worst = None;
            for f in &found {
                let severity = match f.severity() {
                    Severity::Note => OI_SEVERITY_NOTE,
                    Severity::Warning => OI_SEVERITY_WARNING,
                    Severity::Error => OI_SEVERITY_ERROR,
                };
                worst = worst.max(Some(severity));
                let (code, container, message) = (
                    cstring(f.code.name()),
                    cstring(&f.container),
                    cstring(&f.message),
                );
                findings.push(OiFinding {
                    severity,
                    reserved: 0,
                    offset: f.offset,
                    code: str_of(&code),
                    container: str_of(&container),
                    message: str_of(&message),
                });
                // Moving a CString keeps its heap buffer: the pointers stay valid.
                strings.extend([code, container, message]);
            }
            out = Box::into_raw(Box::new(OiValidation {
                _strings: strings,
                findings,
                worst,
            }));
            Ok(OI_OK)
        })
    };
    out
}

/// The number of findings.
///
/// # Safety
/// `validation` must be NULL (0 findings) or a handle from `oi_validate` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn oi_validation_count(validation: *const OiValidation) -> usize {
    // SAFETY: guaranteed by the caller (header contract).
    unsafe { validation.as_ref() }.map_or(0, |v| v.findings.len())
}

/// The most severe finding's `OI_SEVERITY_*`, or -1 when there is none.
///
/// # Safety
/// `validation` must be NULL or a handle from `oi_validate` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn oi_validation_worst(validation: *const OiValidation) -> i32 {
    // SAFETY: guaranteed by the caller (header contract).
    unsafe { validation.as_ref() }
        .and_then(|v| v.worst)
        .map_or(-1, |w| w as i32)
}

/// Copies finding `index` (in discovery order) into `*finding`; `OI_ERR_INVALID_ARGUMENT`
/// for an index out of range.
///
/// # Safety
/// Pointers must be NULL or valid for their documented use; `error` may always be NULL.
#[no_mangle]
pub unsafe extern "C" fn oi_validation_finding(
    validation: *const OiValidation,
    index: usize,
    finding: *mut OiFinding,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            // SAFETY: guaranteed by the caller (header contract).
            let v = validation
                .as_ref()
                .ok_or_else(|| invalid(c"validation is null"))?;
            if finding.is_null() {
                return Err(invalid(c"finding is null"));
            }
            let f = *v
                .findings
                .get(index)
                .ok_or_else(|| invalid(c"finding index out of range").index(index))?;
            store(finding, f);
            Ok(OI_OK)
        })
    }
}

/// Frees the findings and their strings. NULL is accepted.
///
/// # Safety
/// `validation` must be NULL or a handle from `oi_validate`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn oi_validation_free(validation: *mut OiValidation) {
    if !validation.is_null() {
        // SAFETY: guaranteed by the caller (header contract): made by Box::into_raw.
        drop(unsafe { Box::from_raw(validation) });
    }
}

/// A static string naming a status code (`"ok"`, `"no-match"`, `"truncated"`, ...), or
/// `"unknown status"` for a code this library does not return.
#[no_mangle]
pub extern "C" fn oi_status_name(code: i32) -> *const c_char {
    let name: &'static CStr = match code {
        OI_OK => c"ok",
        OI_NO_MATCH => c"no-match",
        OI_ERR_TRUNCATED => c"truncated",
        OI_ERR_OUT_OF_BOUNDS => c"out-of-bounds",
        OI_ERR_BAD_MAGIC => c"bad-magic",
        OI_ERR_UNSUPPORTED_VERSION => c"unsupported-version",
        OI_ERR_UNSUPPORTED_METHOD => c"unsupported-method",
        OI_ERR_SIZE_MISMATCH => c"size-mismatch",
        OI_ERR_HASH_MISMATCH => c"hash-mismatch",
        OI_ERR_LIMIT_EXCEEDED => c"limit-exceeded",
        OI_ERR_DECOMPRESS => c"decompress",
        OI_ERR_MALFORMED => c"malformed",
        OI_ERR_INVALID_ID => c"invalid-id",
        OI_ERR_BAD_CONTAINER => c"bad-container",
        OI_ERR_OUT_OF_MEMORY => c"out-of-memory",
        OI_ERR_INVALID_ARGUMENT => c"invalid-argument",
        OI_ERR_BUFFER_TOO_SMALL => c"buffer-too-small",
        OI_ERR_INTERNAL => c"internal",
        OI_ERR_IO => c"io",
        OI_PARTIAL => c"partial",
        OI_ERR_KPACK_SPLIT => c"kpack-split",
        OI_ERR_UNSUPPORTED => c"unsupported",
        _ => c"unknown status",
    };
    name.as_ptr()
}

/// A static string naming an `OI_REASON_*` code (`"outranked"`, `"processor"`,
/// `"feature"`, ...), or `"unknown reason"`.
#[no_mangle]
pub extern "C" fn oi_reason_name(kind: u32) -> *const c_char {
    reason_name(kind).as_ptr()
}

/// The name of an `OI_REASON_*` code ([`oi_reason_name`]).
fn reason_name(kind: u32) -> &'static CStr {
    match kind {
        OI_REASON_CHOSEN => c"chosen",
        OI_REASON_OUTRANKED => c"outranked",
        OI_REASON_HOST => c"host",
        OI_REASON_EMPTY => c"empty",
        OI_REASON_KIND => c"kind",
        OI_REASON_ARCH => c"arch",
        OI_REASON_NOT_HSA => c"not-hsa",
        OI_REASON_NO_TARGET => c"no-target",
        OI_REASON_INVALID_TARGET => c"invalid-target",
        OI_REASON_ELF => c"elf",
        OI_REASON_MISMATCH => c"mismatch",
        OI_REASON_NOT_CODE => c"not-code",
        OI_REASON_JIT_NOT_ALLOWED => c"jit-not-allowed",
        OI_REASON_GENERIC_NOT_ALLOWED => c"generic-not-allowed",
        OI_REASON_SPIRV_NOT_ALLOWED => c"spirv-not-allowed",
        OI_REASON_PROCESSOR => c"processor",
        OI_REASON_CLR_GENERIC_MAP => c"clr-generic-map",
        OI_REASON_CLR_SPELLING => c"clr-spelling",
        OI_REASON_NOT_IN_FAMILY => c"not-in-family",
        OI_REASON_GENERIC_VERSION => c"generic-version",
        OI_REASON_FEATURE => c"feature",
        OI_REASON_FORCED_JIT => c"forced-jit",
        OI_REASON_FORCED_SPIRV => c"forced-spirv",
        OI_REASON_DRIVER => c"driver",
        OI_REASON_NVIDIA_RULE => c"nvidia-rule",
        OI_REASON_NO_IMAGES => c"no-images",
        OI_REASON_DAMAGED => c"damaged",
        OI_REASON_OTHER => c"other",
        _ => c"unknown reason",
    }
}

/// This library's version, `"MAJOR.MINOR.PATCH"` (static storage): compare with the
/// `OI_VERSION_*` macros of the header a program was built with.
#[no_mangle]
pub extern "C" fn oi_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => c"unknown",
        };
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_match_error_kind_names() {
        for kind in [
            ErrorKind::Truncated,
            ErrorKind::OutOfBounds,
            ErrorKind::BadMagic,
            ErrorKind::UnsupportedVersion,
            ErrorKind::UnsupportedMethod,
            ErrorKind::SizeMismatch,
            ErrorKind::HashMismatch,
            ErrorKind::LimitExceeded,
            ErrorKind::Decompress,
            ErrorKind::Malformed,
            ErrorKind::InvalidId,
            ErrorKind::BadContainer,
            ErrorKind::OutOfMemory,
            ErrorKind::Unsupported,
        ] {
            // SAFETY: oi_status_name returns a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(oi_status_name(code_of(kind))) };
            assert_eq!(name.to_str().unwrap(), kind.name());
        }
        // A code this library does not return is named as such (before: "internal").
        for code in [-1, 22, 1000, i32::MIN] {
            // SAFETY: as above.
            let name = unsafe { CStr::from_ptr(oi_status_name(code)) };
            assert_eq!(name.to_str().unwrap(), "unknown status", "{code}");
        }
        // SAFETY: as above.
        let internal = unsafe { CStr::from_ptr(oi_status_name(OI_ERR_INTERNAL)) };
        assert_eq!(internal.to_str().unwrap(), "internal");
        // SAFETY: oi_reason_name returns a static NUL-terminated string.
        let reason = |k| {
            unsafe { CStr::from_ptr(oi_reason_name(k)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(reason(OI_REASON_NVIDIA_RULE), "nvidia-rule");
        assert_eq!(reason(27), "unknown reason");
    }

    // ---- the C API called as C calls it ----------------------------------------------

    fn corpus(path: &str) -> Vec<u8> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/corpus");
        std::fs::read(dir.join(path)).unwrap()
    }

    fn no_error() -> OiError {
        OiError {
            code: -1,
            os_error: -1,
            offset: 0,
            decompressed_offset: 0,
            index: 0,
            count: 0,
            message: str_of(c""),
            os_message: str_of(c""),
        }
    }

    fn message(e: &OiError) -> &'static str {
        // SAFETY: messages are static NUL-terminated strings.
        unsafe { CStr::from_ptr(e.message.data) }.to_str().unwrap()
    }

    fn options(flags: u32) -> OiReadOptions {
        OiReadOptions {
            flags,
            max_depth: 0,
            max_decompressed_size: 0,
            max_entries: 0,
            max_id_len: 0,
        }
    }

    /// A reader over `data` (which the caller keeps alive), or the error.
    fn open(data: &[u8], flags: u32) -> Result<*mut OiReader, OiError> {
        let mut e = no_error();
        // SAFETY: valid pointers; `data` outlives the reader in every test.
        let r = unsafe { oi_reader_open(data.as_ptr(), data.len(), &options(flags), &mut e) };
        if r.is_null() {
            assert_ne!(e.code, OI_OK);
            Err(e)
        } else {
            assert_eq!(e.code, OI_OK);
            Ok(r)
        }
    }

    fn select(r: *const OiReader, targets: &[&str]) -> (i32, Vec<OiSelection>, OiError) {
        let owned: Vec<CString> = targets.iter().map(|t| CString::new(*t).unwrap()).collect();
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        // SAFETY: valid reader and arrays.
        let units = unsafe { oi_reader_unit_count(r) };
        let none = OiSelection {
            image: 0,
            found: 7,
            reserved: 7,
        };
        let mut out = vec![none; units * targets.len()];
        let mut e = no_error();
        // SAFETY: as above.
        let rc = unsafe {
            oi_reader_select(
                r,
                ptrs.as_ptr(),
                ptrs.len(),
                core::ptr::null(),
                out.as_mut_ptr(),
                out.len(),
                &mut e,
            )
        };
        (rc, out, e)
    }

    fn data(r: *const OiReader, image: usize) -> Result<&'static [u8], OiError> {
        let (mut p, mut n) = (core::ptr::null(), 0usize);
        let mut e = no_error();
        // SAFETY: valid reader and out pointers; the bytes live until close, and every
        // test closes its reader after its last use of them.
        match unsafe { oi_reader_image_data(r, image, &mut p, &mut n, &mut e) } {
            OI_OK => Ok(unsafe { std::slice::from_raw_parts(p, n) }),
            _ => Err(e),
        }
    }

    #[test]
    fn a_damaged_bundle_costs_its_unit_only() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/damage/libthree.so");
        let original = std::fs::read(path).unwrap();
        // The second bundle of `.hip_fatbin` (at 24576, `tests/suite/damage.rs` finds it the
        // same way) loses its magic.
        let at = original
            .windows(24)
            .enumerate()
            .filter(|(_, w)| *w == b"__CLANG_OFFLOAD_BUNDLE__")
            .map(|(i, _)| i)
            .nth(1)
            .unwrap();
        let mut damaged = original.clone();
        damaged[at + 1] ^= 0xFF;
        let sound = open(&original, 0).unwrap();
        let r = open(&damaged, 0).unwrap();
        // SAFETY: valid readers.
        unsafe {
            assert_eq!(oi_reader_unit_count(r), 3);
            assert_eq!(oi_reader_damage_count(sound), 0);
            assert_eq!(oi_reader_damage_count(r), 1);
            let mut e = no_error();
            assert_eq!(oi_reader_unit_status(r, 0, &mut e), OI_OK);
            assert_eq!(oi_reader_unit_status(r, 1, &mut e), OI_ERR_MALFORMED);
            assert_eq!((e.offset, e.index), (at as u64, 1));
            let mut d = no_error();
            assert_eq!(oi_reader_damage(r, 0, &mut d), OI_ERR_MALFORMED);
            assert_eq!((d.offset, d.index), (at as u64, 1));
            assert_eq!(oi_reader_damage(r, 1, &mut d), OI_ERR_INVALID_ARGUMENT);
            let (mut n, mut m) = (0usize, 0usize);
            assert_eq!(oi_reader_image_count(sound, &mut n, &mut e), OI_OK);
            assert_eq!(oi_reader_image_count(r, &mut m, &mut e), OI_OK);
            assert_eq!((n, m), (12, 8));
        }
        // The sound units choose as before; the damaged one finds nothing, and the call
        // says so (before: OI_NO_MATCH, which hid the damage).
        let (rc, picks, e) = select(r, &["gfx90a:xnack+"]);
        assert_eq!(rc, OI_PARTIAL);
        assert_eq!(
            (e.code, e.offset, e.index),
            (OI_ERR_MALFORMED, at as u64, 1)
        );
        let (_, sound_picks, _) = select(sound, &["gfx90a:xnack+"]);
        assert_eq!(picks[1].found, 0);
        for u in [0, 2] {
            assert_eq!(picks[u].found, 1);
            let ours = data(r, picks[u].image).unwrap();
            let theirs = data(sound, sound_picks[u].image).unwrap();
            assert_eq!(ours, theirs);
        }
        // SAFETY: open readers, closed once.
        unsafe {
            oi_reader_close(r);
            oi_reader_close(sound);
        }
    }

    /// A good compressed bundle then one with a bad hash: the damage is known from the
    /// first call (each compressed unit decoded once to check it, nothing kept), and a
    /// selection streams only the good one.
    #[test]
    fn damage_is_known_from_the_first_call() {
        let mut bytes = corpus("compressed/hip_6arch.zstd.ccob");
        let good = bytes.len() as u64;
        bytes.extend(corpus("malformed/ccob_bad_hash.ccob"));
        let r = open(&bytes, 0).unwrap();
        // SAFETY: a valid reader and out pointers.
        unsafe {
            assert_eq!(oi_reader_damage_count(r), 1);
            let mut e = no_error();
            assert_eq!(oi_reader_damage(r, 0, &mut e), OI_ERR_HASH_MISMATCH);
            assert_eq!((e.offset, e.index), (good + 16, 1));
            assert_eq!(oi_reader_unit_status(r, 0, &mut e), OI_OK);
        }
        assert_eq!(
            stats(r),
            (2, 2 * 22368, 0),
            "each unit decoded once, nothing held"
        );
        let (rc, out, e) = select(r, &["gfx906", "gfx1100"]);
        assert_eq!(
            (rc, e.code, e.offset, e.index),
            (OI_PARTIAL, OI_ERR_HASH_MISMATCH, good + 16, 1)
        );
        assert_eq!((out[0].found, out[1].found), (1, 1));
        assert_eq!((out[2].found, out[3].found), (0, 0));
        assert_eq!(
            stats(r),
            (3, 3 * 22368, 3024 + 3536),
            "the good unit streamed once"
        );
        close(r);
    }

    /// Compressed bundles back to back, a good one (`true`) or one whose hash differs from
    /// its content (`false`) at each place of `good`, and the offsets of the bad ones' hash
    /// fields.
    fn good_and_bad_units(good: &[bool]) -> (Vec<u8>, Vec<u64>) {
        let (ok, bad) = (
            corpus("compressed/hip_6arch.zstd.ccob"),
            corpus("malformed/ccob_bad_hash.ccob"),
        );
        let mut bytes = Vec::new();
        let mut bad_at = Vec::new();
        for &g in good {
            if !g {
                bad_at.push(bytes.len() as u64 + 16);
            }
            bytes.extend_from_slice(if g { &ok } else { &bad });
        }
        (bytes, bad_at)
    }

    /// With threads (`OI_READ_THREADS_SHIFT`) the units are checked on several threads:
    /// the damages, their order, offsets and units, and the decoding counted are those of
    /// one thread, on good and bad-hash units interleaved; an unknown flag bit is still
    /// refused.
    #[test]
    fn damage_checked_on_threads_is_the_serial_damage() {
        let (bytes, bad_at) = good_and_bad_units(&[true, false, true, true, false, true]);
        let damages = |threads: u32| {
            let r = open(&bytes, threads << OI_READ_THREADS_SHIFT).unwrap();
            let mut found = Vec::new();
            // SAFETY: a valid reader and out pointer.
            unsafe {
                for i in 0..oi_reader_damage_count(r) {
                    let mut e = no_error();
                    let code = oi_reader_damage(r, i, &mut e);
                    found.push((code, e.offset, e.index));
                }
            }
            let s = stats(r);
            close(r);
            (found, s)
        };
        let serial = damages(0);
        let want: Vec<_> = [(bad_at[0], 1), (bad_at[1], 4)]
            .iter()
            .map(|&(at, u)| (OI_ERR_HASH_MISMATCH, at, u))
            .collect();
        assert_eq!(serial.0, want);
        assert_eq!(serial.1, (6, 6 * 22368, 0));
        for threads in [1, 2, 4, OI_READ_THREADS_AUTO] {
            assert_eq!(damages(threads), serial, "{threads} threads");
        }
        assert_eq!(
            open(&bytes, 1 << 16).unwrap_err().code,
            OI_ERR_INVALID_ARGUMENT
        );
    }

    /// `oi_validate` with threads: the findings (severity, code, offset, message) and
    /// their order are those of one thread, on good and bad-hash units interleaved; the
    /// bad units' hash mismatches are errors at their header's hash field.
    #[test]
    fn validate_on_threads_is_the_serial_validate() {
        let (bytes, bad_at) = good_and_bad_units(&[true, false, true, false, true]);
        let findings = |threads: u32| {
            let options = OiReadOptions {
                flags: threads << OI_READ_THREADS_SHIFT,
                max_depth: 0,
                max_decompressed_size: 0,
                max_entries: 0,
                max_id_len: 0,
            };
            let mut e = no_error();
            let mut found = Vec::new();
            // SAFETY: valid data, options and out pointers; the handle is freed once.
            unsafe {
                let v = oi_validate(bytes.as_ptr(), bytes.len(), &options, &mut e);
                assert!(!v.is_null());
                for i in 0..oi_validation_count(v) {
                    let mut f = core::mem::zeroed::<OiFinding>();
                    assert_eq!(oi_validation_finding(v, i, &mut f, &mut e), OI_OK);
                    let text = |p: OiStr| CStr::from_ptr(p.data).to_str().unwrap().to_owned();
                    found.push((f.severity, f.offset, text(f.code), text(f.message)));
                }
                oi_validation_free(v);
            }
            found
        };
        let serial = findings(0);
        let mismatches: Vec<u64> = serial
            .iter()
            .filter(|f| f.0 == OI_SEVERITY_ERROR && f.2 == "hash-mismatch")
            .map(|f| f.1)
            .collect();
        assert_eq!(mismatches, bad_at, "{serial:?}");
        for threads in [1, 2, 3, OI_READ_THREADS_AUTO] {
            assert_eq!(findings(threads), serial, "{threads} threads");
        }
    }

    fn stats(r: *const OiReader) -> (u64, u64, u64) {
        let mut s = OiReaderStats {
            decode_passes: 0,
            decoded_bytes: 0,
            held_bytes: 0,
        };
        // SAFETY: valid reader and out pointer.
        unsafe { oi_reader_get_stats(r, &mut s) };
        (s.decode_passes, s.decoded_bytes, s.held_bytes)
    }

    fn close(r: *mut OiReader) {
        // SAFETY: a reader from `open`, closed once.
        unsafe { oi_reader_close(r) }
    }

    #[test]
    fn malformed_files_give_their_code_and_offset() {
        for (file, code, offset) in [
            ("malformed/ccob_trunc_header.ccob", OI_ERR_TRUNCATED, 0),
            (
                "malformed/ccob_unknown_method.ccob",
                OI_ERR_UNSUPPORTED_METHOD,
                6,
            ),
            ("malformed/ccob_trunc_payload.ccob", OI_ERR_TRUNCATED, 8),
            (
                "malformed/bundle_trunc_header.bundle",
                OI_ERR_TRUNCATED,
                u64::MAX,
            ),
        ] {
            let bytes = corpus(file);
            let e = open(&bytes, 0).map(close).unwrap_err();
            assert_eq!(e.code, code, "{file}: {}", message(&e));
            if offset != u64::MAX {
                assert_eq!(e.offset, offset, "{file}");
            }
            assert!(!message(&e).is_empty());
        }
        // The bad hash shows when the stream is checked: at the selection, at the hash
        // field of the header (byte 16 of a v2 header); not checked, the choice is made.
        // The selection's results are valid (the unit gives nothing): OI_PARTIAL, with the
        // unit's status in the error (before: the call returned OI_ERR_HASH_MISMATCH).
        let bytes = corpus("malformed/ccob_bad_hash.ccob");
        let r = open(&bytes, 0).unwrap();
        let (rc, out, e) = select(r, &["gfx906"]);
        assert_eq!(
            (rc, e.code, e.offset, e.index),
            (OI_PARTIAL, OI_ERR_HASH_MISMATCH, 16, 0)
        );
        assert_eq!((out[0].found, out[0].image), (0, OI_NO_IMAGE));
        close(r);
        let r = open(&bytes, OI_READ_NO_VERIFY_HASH).unwrap();
        let (rc, out, _) = select(r, &["gfx906"]);
        assert_eq!(rc, OI_OK);
        assert_eq!(
            Sha256Hex::of(data(r, out[0].image).unwrap()),
            "66dfd04eb5272fdaab3a5898848b1a41a3c212b9718fe31b34364c9e78e19d39"
        );
        close(r);
    }

    /// Every prefix of real files, and every one-byte corruption: a status code (never a
    /// panic, never OI_ERR_INTERNAL) from every call.
    #[test]
    fn damaged_files_give_a_status_never_a_crash() {
        for (file, step) in [
            ("compressed/hip_6arch.zstd.ccob", 1),
            ("compressed/hip_6arch.zlib.ccob", 3),
            ("bundles/hip_6arch.bundle", 5),
            ("driver/hip_compress.exe", 11),
            ("packager/concat.offbin", 7),
        ] {
            let bytes = corpus(file);
            let mut opened = 0;
            // Prefixes, then one byte flipped at a time (inside compressed payloads these
            // pass the walk and fail in the decoder, the table or the hash).
            let variants = (0..bytes.len())
                .step_by(step)
                .map(|len| bytes[..len].to_vec());
            let flips = (0..bytes.len()).step_by(step).map(|at| {
                let mut b = bytes.clone();
                b[at] ^= 0xA5;
                b
            });
            for (len, variant) in variants.chain(flips).chain([bytes.clone()]).enumerate() {
                let r = match open(&variant, 0) {
                    Ok(r) => r,
                    Err(e) => {
                        assert!(e.code > OI_NO_MATCH && e.code < OI_ERR_INTERNAL, "{file}");
                        continue;
                    }
                };
                opened += 1;
                let (rc, _, _) = select(r, &["gfx90a:xnack+", "gfx1100"]);
                assert!(
                    rc < OI_ERR_INTERNAL || rc == OI_PARTIAL,
                    "{file} {len}: {rc}"
                );
                let mut n = 0usize;
                let mut e = no_error();
                // SAFETY: valid reader and out pointers.
                let rc = unsafe { oi_reader_image_count(r, &mut n, &mut e) };
                assert!(rc < OI_ERR_INTERNAL, "{file} {len}");
                for i in 0..n {
                    if let Err(e) = data(r, i) {
                        assert!(e.code < OI_ERR_INTERNAL, "{file} {len}");
                    }
                }
                close(r);
            }
            assert!(opened > 0, "{file}");
        }
    }

    /// The driver's branch and JIT switches reach selection: a driver-oracle fatbinary whose
    /// picked PTX (compute_90, ISA 9.1) driver 580 cannot compile gives nothing (the driver
    /// does not fall back to its compute_86 PTX); a branch of 0 judges no ISA.
    #[test]
    fn selection_follows_the_nvidia_driver_branch() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/cuda-driver/fatbin/0020.fatbin");
        let bytes = std::fs::read(path).unwrap();
        let r = open(&bytes, 0).unwrap();
        let pick = |branch: u32, flags: u32| {
            let options = OiSelectOptions {
                policy: OI_POLICY_BEST,
                kind: OI_KIND_ANY,
                flags,
                nvidia_driver_branch: branch,
            };
            let t = [c"sm_90".as_ptr()];
            let mut out = [OiSelection {
                image: 0,
                found: 0,
                reserved: 0,
            }];
            let mut e = no_error();
            // SAFETY: valid reader, arrays of the stated sizes.
            let rc = unsafe {
                oi_reader_select(r, t.as_ptr(), 1, &options, out.as_mut_ptr(), 1, &mut e)
            };
            (rc, out[0].found, out[0].image)
        };
        let (_, found, image) = pick(0, 0);
        assert_eq!(
            (found, image),
            (1, 0),
            "compute_90 is chosen when no driver is known"
        );
        assert_eq!(
            pick(580, 0).1,
            0,
            "driver 580 refuses ISA 9.1 and does not fall back"
        );
        assert_eq!(pick(590, 0).1, 1, "driver 590 (CUDA 13.1) compiles ISA 9.1");
        assert_eq!(pick(0, OI_SELECT_CUDA_FORCE_PTX_JIT).1, 1);
        close(r);
    }

    #[test]
    fn bad_arguments_are_refused() {
        let bytes = corpus("bundles/hip_6arch.bundle");
        let mut e = no_error();
        // SAFETY: null pointers are part of the contract.
        unsafe {
            assert!(oi_reader_open(core::ptr::null(), 5, core::ptr::null(), &mut e).is_null());
            assert_eq!(e.code, OI_ERR_INVALID_ARGUMENT);
            assert_eq!(oi_reader_unit_count(core::ptr::null()), 0);
            let mut n = 0;
            assert_eq!(
                oi_reader_image_count(core::ptr::null(), &mut n, core::ptr::null_mut()),
                OI_ERR_INVALID_ARGUMENT
            );
            oi_reader_close(core::ptr::null_mut());
            let o = OiReadOptions {
                flags: 2,
                ..options(0)
            };
            assert!(oi_reader_open(bytes.as_ptr(), bytes.len(), &o, &mut e).is_null());
            assert_eq!(e.code, OI_ERR_INVALID_ARGUMENT);
            let mut e = no_error();
            assert!(
                oi_reader_open_file(c"/nonexistent/x".as_ptr(), core::ptr::null(), &mut e)
                    .is_null()
            );
            assert_eq!((e.code, e.os_error), (OI_ERR_IO, libc::ENOENT), "ENOENT");
            assert_eq!(e.offset, OI_NO_OFFSET, "not a byte of any data");
            // SAFETY: os_message is a static NUL-terminated string.
            let text = CStr::from_ptr(e.os_message.data).to_str().unwrap();
            let want = CStr::from_ptr(libc::strerror(libc::ENOENT))
                .to_str()
                .unwrap();
            assert_eq!(text, want);
            assert_eq!(e.os_message.len, want.len());
        }
        let r = open(&bytes, 0).unwrap();
        // A bad target: its position in the list.
        let (rc, _, e) = select(r, &["gfx90a", "gfx9000"]);
        assert_eq!((rc, e.index), (OI_ERR_INVALID_ID, 1), "{}", message(&e));
        assert_eq!(e.offset, OI_NO_OFFSET, "{}", message(&e));
        let (rc, _, _) = select(r, &["gfx9-generic"]);
        assert_eq!(rc, OI_ERR_INVALID_ID, "a generic processor is no device");
        // SAFETY: valid reader, arrays of the stated sizes.
        unsafe {
            let t = [c"gfx90a".as_ptr()];
            let mut out = [OiSelection {
                image: 0,
                found: 0,
                reserved: 0,
            }];
            let mut e = no_error();
            assert_eq!(
                oi_reader_select(
                    r,
                    t.as_ptr(),
                    1,
                    core::ptr::null(),
                    out.as_mut_ptr(),
                    0,
                    &mut e
                ),
                OI_ERR_BUFFER_TOO_SMALL
            );
            assert_eq!(e.count, 1, "the size needed");
            let bad = OiSelectOptions {
                policy: 3,
                kind: 0,
                flags: 0,
                nvidia_driver_branch: 0,
            };
            assert_eq!(
                oi_reader_select(r, t.as_ptr(), 1, &bad, out.as_mut_ptr(), 1, &mut e),
                OI_ERR_INVALID_ARGUMENT
            );
            let mut info = core::mem::MaybeUninit::<OiImageInfo>::uninit();
            assert_eq!(
                oi_reader_image(r, 7, info.as_mut_ptr(), &mut e),
                OI_ERR_INVALID_ARGUMENT
            );
            assert_eq!((e.index, e.offset, e.count), (7, OI_NO_OFFSET, 0));
            assert_eq!(oi_reader_unit_status(r, 1, &mut e), OI_ERR_INVALID_ARGUMENT);
            assert_eq!(e.index, 1, "the unit out of range");
            assert_eq!(oi_reader_image(r, 6, info.as_mut_ptr(), &mut e), OI_OK);
        }
        close(r);
    }

    /// A second selection streams the bundle again for the new devices; what the first
    /// one handed out stays where it is.
    #[test]
    fn a_later_selection_keeps_earlier_bytes_in_place() {
        let bytes = corpus("compressed/hip_6arch.zstd.ccob");
        let r = open(&bytes, 0).unwrap();
        let (rc, first, _) = select(r, &["gfx906"]);
        assert_eq!(rc, OI_OK);
        let a = data(r, first[0].image).unwrap();
        assert_eq!(stats(r), (1, 22368, 3024));
        let (rc, second, _) = select(r, &["gfx1100", "gfx906"]);
        assert_eq!(rc, OI_OK);
        assert_eq!(second[1].image, first[0].image);
        assert_eq!(data(r, second[1].image).unwrap().as_ptr(), a.as_ptr());
        assert_eq!(
            stats(r),
            (2, 2 * 22368, 3024 + 3536),
            "gfx906 not kept twice"
        );
        assert_eq!(
            Sha256Hex::of(data(r, second[0].image).unwrap()),
            "fc567f53d6472bf1dabbe8e093d6353973d4ca2f43fbd7df2777159c3ef44134"
        );
        close(r);
    }

    /// Without hash verification the decoder stops after the last image's first bytes.
    #[test]
    fn unverified_selection_stops_early() {
        let bytes = corpus("compressed/hip_6arch.zstd.ccob");
        let r = open(&bytes, OI_READ_NO_VERIFY_HASH).unwrap();
        let (rc, out, _) = select(r, &["gfx906"]);
        assert_eq!(rc, OI_OK);
        let (passes, decoded, held) = stats(r);
        assert_eq!((passes, held), (1, 3024));
        assert!(decoded < 22368, "{decoded}");
        assert_eq!(data(r, out[0].image).unwrap().len(), 3024);
        close(r);
    }

    /// A text bundle in a CCOB cannot be streamed: decompressed whole (held), same
    /// choice (text is never loadable code) and the same images.
    #[test]
    fn compressed_text_bundle_is_decompressed_whole() {
        use offload_image::write::ccob::{compress, CcobOptions};
        let text = corpus("text/omp.ll.bundle");
        let ccob = compress(&text, &CcobOptions::default()).unwrap();
        let plain = open(&text, 0).unwrap();
        let packed = open(&ccob, 0).unwrap();
        let targets = ["gfx90a", "sm_80"];
        let (rc, a, _) = select(plain, &targets);
        let (rc2, b, _) = select(packed, &targets);
        assert_eq!((rc, rc2), (OI_NO_MATCH, OI_NO_MATCH));
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.image, x.found, y.found), (y.image, 0, 0));
        }
        assert_eq!(stats(packed).2, text.len() as u64, "whole content held");
        let count = |r| {
            let mut n = 0usize;
            // SAFETY: valid reader and out pointer.
            assert_eq!(
                unsafe { oi_reader_image_count(r, &mut n, core::ptr::null_mut()) },
                0
            );
            n
        };
        assert_eq!(count(plain), 3);
        assert_eq!(count(packed), 3);
        for i in 0..3 {
            assert_eq!(data(plain, i).unwrap(), data(packed, i).unwrap());
        }
        assert_eq!(
            Sha256Hex::of(data(packed, 2).unwrap()),
            "30b16da8ec88d98baf899beb56a3cb1827beca01d78d9df86d76a5368ce1d6eb"
        );
        close(plain);
        close(packed);
    }

    /// One reader shared by threads gives each what it gives one thread.
    #[test]
    fn a_reader_can_be_shared_between_threads() {
        struct Shared(*mut OiReader);
        // SAFETY: the C API serialises calls on a reader (its lock).
        unsafe impl Sync for Shared {}
        let bytes = corpus("compressed/hip_6arch.zlib.ccob");
        let r = Shared(open(&bytes, 0).unwrap());
        let targets = [
            "gfx906",
            "gfx90a:xnack+",
            "gfx942:sramecc+:xnack-",
            "gfx1030",
        ];
        let single = open(&bytes, 0).unwrap();
        let (_, want, _) = select(single, &targets);
        let want: Vec<Vec<u8>> = want
            .iter()
            .map(|s| data(single, s.image).unwrap().to_vec())
            .collect();
        close(single);
        std::thread::scope(|scope| {
            for (t, w) in targets.iter().zip(&want) {
                let r = &r;
                scope.spawn(move || {
                    let (rc, out, _) = select(r.0, &[t]);
                    assert_eq!(rc, OI_OK);
                    assert_eq!(data(r.0, out[0].image).unwrap(), &w[..]);
                });
            }
        });
        close(r.0);
    }

    struct Sha256Hex;
    impl Sha256Hex {
        fn of(bytes: &[u8]) -> String {
            use sha2::Digest;
            sha2::Sha256::digest(bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        }
    }

    #[test]
    fn interned_messages_are_shared_and_nul_terminated() {
        let a = messages::intern("bundle header truncated");
        let b = messages::intern(&String::from("bundle header truncated"));
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(a.to_str().unwrap(), "bundle header truncated");
    }

    // ---- hostile callers and files (issue 38) ------------------------------------------

    /// Counts no machine has are refused before anything is read or allocated (before:
    /// `n_targets` ≥ 2^28 aborted the host process, larger ones printed a panic into its
    /// standard error): `OI_ERR_INVALID_ARGUMENT`, `n_targets` in `offset`. The array holds
    /// one pointer, so reading past it would be caught by the sanitizers and Miri.
    #[test]
    fn huge_target_counts_are_refused_before_allocating() {
        let bytes = corpus("bundles/hip_6arch.bundle");
        let r = open(&bytes, 0).unwrap();
        let t = [c"gfx90a".as_ptr()];
        let mut out = [OiSelection {
            image: 0,
            found: 0,
            reserved: 0,
        }];
        for n in [(1usize << 16) + 1, 1 << 28, 1 << 40, usize::MAX] {
            let mut e = no_error();
            // SAFETY: valid reader and arrays; the count is the lie under test.
            let rc = unsafe {
                oi_reader_select(
                    r,
                    t.as_ptr(),
                    n,
                    core::ptr::null(),
                    out.as_mut_ptr(),
                    usize::MAX,
                    &mut e,
                )
            };
            assert_eq!((rc, e.count), (OI_ERR_INVALID_ARGUMENT, n as u64), "{n}");
            assert!(message(&e).contains("n_targets"), "{}", message(&e));
        }
        // At the limit the count is taken (and every target read): a null target found.
        let many = vec![core::ptr::null::<c_char>(); 1 << 16];
        let mut e = no_error();
        // SAFETY: an array of 65,536 pointers.
        let rc = unsafe {
            oi_reader_select(
                r,
                many.as_ptr(),
                many.len(),
                core::ptr::null(),
                out.as_mut_ptr(),
                1,
                &mut e,
            )
        };
        assert_eq!((rc, e.index), (OI_ERR_INVALID_ARGUMENT, 0));
        close(r);
    }

    fn open_file(path: &std::path::Path) -> Result<*mut OiReader, OiError> {
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        let mut e = no_error();
        // SAFETY: valid pointers.
        let r = unsafe { oi_reader_open_file(c.as_ptr(), core::ptr::null(), &mut e) };
        if r.is_null() {
            Err(e)
        } else {
            Ok(r)
        }
    }

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("oi-capi-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A FIFO or a device is refused at once (no blocking open, no endless read):
    /// `OI_ERR_IO` with `EINVAL`.
    #[cfg(unix)]
    #[test]
    fn open_file_refuses_fifos_and_devices_at_once() {
        let dir = temp_dir("fifo");
        let fifo = dir.join("pipe");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        for path in [fifo.as_path(), std::path::Path::new("/dev/zero"), &dir] {
            let e = open_file(path).unwrap_err();
            assert_eq!((e.code, e.os_error), (OI_ERR_IO, libc::EINVAL), "{path:?}");
            assert_eq!(message(&e), "not a regular file");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file another thread truncates while readers are opened over it (before: SIGBUS in
    /// the host process once the mapped pages were gone): every open gives a reader over
    /// the bytes read, or an error code; images read after the truncation are the bytes
    /// read at open.
    #[cfg(unix)]
    #[test]
    fn open_file_of_a_file_truncated_meanwhile_never_faults() {
        let dir = temp_dir("trunc");
        let path = dir.join("big.bundle");
        let mut bundle = corpus("bundles/hip_6arch.bundle");
        // Padding to 32 MiB after the bundle: zero padding is skipped by the walk.
        bundle.resize(32 << 20, 0);
        let (mut readers, mut errors) = (0, 0);
        for run in 0..12u64 {
            std::fs::write(&path, &bundle).unwrap();
            let cutter = {
                let path = path.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(run));
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .unwrap()
                        .set_len(100)
                        .unwrap();
                })
            };
            match open_file(&path) {
                Ok(r) => {
                    cutter.join().unwrap();
                    // The reader's bytes are its own: reading them after the cut is safe.
                    let (rc, sel, e) = select(r, &["gfx90a"]);
                    assert!(rc == OI_OK || rc == OI_NO_MATCH, "{}", message(&e));
                    if let Some(s) = sel.first().filter(|s| s.found == 1) {
                        assert!(!data(r, s.image).unwrap().is_empty());
                    }
                    close(r);
                    readers += 1;
                }
                Err(e) => {
                    cutter.join().unwrap();
                    // Cut while read: the size changed; cut before: a damaged bundle.
                    if e.code == OI_ERR_IO {
                        assert_eq!(e.os_error, libc::EIO);
                        assert_eq!(message(&e), "the file changed size while it was read");
                    } else {
                        assert!(e.code > OI_NO_MATCH && e.code < OI_ERR_INTERNAL, "{e:?}");
                    }
                    errors += 1;
                }
            }
        }
        assert_eq!(readers + errors, 12);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
