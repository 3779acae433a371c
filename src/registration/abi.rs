//! The C-ABI records of runtime registration (`REGISTRATION.md`), in two forms.
//!
//! * **Native models** (`#[repr(C)]`, raw pointers): exactly what a host program hands to
//!   `__tgt_register_lib` or `__hipRegisterFatBinary` on an LP64 host. A shim that
//!   receives such a record can reinterpret it as one of these types (that step is
//!   `unsafe` and lives in the shim, not here). Sizes and field offsets are checked at
//!   compile time against the tables of `REGISTRATION.md` on 64-bit targets (§8).
//! * **Byte layouts** (`Raw*`, zerocopy, little-endian, alignment 1): the same records as
//!   stored in a file or in memory, read in place from any address by the views of
//!   [`super::view`]. Their sizes and offsets are checked against the native models, so
//!   both forms describe one layout.
//!
//! Pointers are never dereferenced by this crate: a [`super::AddressSpace`] turns an
//! address into bytes with bounds.

use core::ffi::{c_char, c_void};

use zerocopy::byteorder::little_endian::{I32, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

// The wrappers' magics are `crate::raw`'s: `HIP_WRAPPER_MAGIC` ("HIPF", §4.1),
// `NVFATBIN_WRAPPER_MAGIC` (`__cudaFatMAGIC2`, §5), `HIPK_MAGIC`, and the fatbinary's
// `NVFATBIN_MAGIC` (`__cudaFatMAGIC3`).

/// The only HIP wrapper version runtimes accept.
pub const HIP_FATBIN_VERSION: u32 = 1;

/// Size of a legacy offload entry (§1.1).
pub const LEGACY_ENTRY_SIZE: u64 = 32;
/// Size of a current offload entry (§1.2).
pub const ENTRY_SIZE: u64 = 56;
/// Size of `__tgt_device_image` (§1.6).
pub const DEVICE_IMAGE_SIZE: u64 = 32;
/// Size of `__tgt_bin_desc` (§1.7).
pub const BIN_DESC_SIZE: u64 = 32;

// The host reader names entry tables with its own copies of these numbers (it comes
// before this module). The fat-binary wrapper is `crate::raw::FatbinWrapper`, its size
// `crate::raw::FATBIN_WRAPPER_SIZE`.
const _: () = assert!(crate::host::ENTRY_SECTIONS[0].1 == kind::OPENMP);
const _: () = assert!(crate::host::ENTRY_SECTIONS[1].1 == kind::CUDA);
const _: () = assert!(crate::host::ENTRY_SECTIONS[2].1 == kind::HIP);
const _: () = assert!(crate::host::ENTRY_SECTIONS[3].1 == kind::OPENMP);

/// `OffloadKind` values in offload entries (§1.2; both numbering eras of HIP).
pub mod kind {
    /// No consumer.
    pub const NONE: u16 = 0;
    /// OpenMP.
    pub const OPENMP: u16 = 1;
    /// CUDA.
    pub const CUDA: u16 = 2;
    /// HIP as numbered by LLVM 20.
    pub const HIP_LLVM20: u16 = 3;
    /// HIP as numbered by LLVM 21 and later (PR #135809).
    pub const HIP: u16 = 4;
    /// SYCL (LLVM 21 and later).
    pub const SYCL: u16 = 8;
}

/// OpenMP entry flags (`Kind == OpenMP`, §1.4).
pub mod omp_flags {
    /// `declare target link` variable.
    pub const DECLARE_TARGET_LINK: u32 = 0x01;
    /// Historical: device global constructor.
    pub const DECLARE_TARGET_CTOR: u32 = 0x02;
    /// Historical: device global destructor.
    pub const DECLARE_TARGET_DTOR: u32 = 0x04;
    /// Indirectly callable function.
    pub const DECLARE_TARGET_INDIRECT: u32 = 0x08;
    /// Not a symbol: a `#pragma omp requires` record (matched by equality).
    pub const REGISTER_REQUIRES: u32 = 0x10;
    /// Indirect vtable.
    pub const DECLARE_TARGET_INDIRECT_VTABLE: u32 = 0x20;
}

/// CUDA/HIP entry flags (`Kind == CUDA` or HIP, §1.4).
pub mod gpu_flags {
    /// Mask of the global type in bits 0–2.
    pub const TYPE_MASK: u32 = 0x7;
    /// Ordinary global: a kernel if `Size == 0`, else a device variable.
    pub const GLOBAL: u32 = 0;
    /// Managed variable.
    pub const MANAGED: u32 = 1;
    /// Surface reference.
    pub const SURFACE: u32 = 2;
    /// Texture reference.
    pub const TEXTURE: u32 = 3;
    /// Declared `extern` (defined in another translation unit).
    pub const EXTERN: u32 = 0x08;
    /// `__constant__` variable.
    pub const CONSTANT: u32 = 0x10;
    /// Normalized texture coordinates.
    pub const NORMALIZED: u32 = 0x20;
}

/// OpenMP requirement bits carried in `Data` of a requires entry (§1.4).
pub mod requires {
    /// Undefined.
    pub const UNDEFINED: u64 = 0x000;
    /// No requirement.
    pub const NONE: u64 = 0x001;
    /// `reverse_offload`.
    pub const REVERSE_OFFLOAD: u64 = 0x002;
    /// `unified_address`.
    pub const UNIFIED_ADDRESS: u64 = 0x004;
    /// `unified_shared_memory`.
    pub const UNIFIED_SHARED_MEMORY: u64 = 0x008;
    /// `dynamic_allocators`.
    pub const DYNAMIC_ALLOCATORS: u64 = 0x010;
    /// Runtime-internal: automatic zero-copy.
    pub const AUTO_ZERO_COPY: u64 = 0x020;
}

// ---------------------------------------------------------------------------------------
// Native models (LP64).

/// Legacy `__tgt_offload_entry` (32 bytes; LLVM ≤ 20; §1.1).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct LegacyEntry {
    /// Host address identifying the entry (never null in practice: the legacy detector).
    pub addr: *mut c_void,
    /// NUL-terminated symbol name.
    pub name: *mut c_char,
    /// 0 for functions, byte size for variables.
    pub size: usize,
    /// Flags (§1.4).
    pub flags: i32,
    /// `reserved` / `data`: extra per-kind data.
    pub data: i32,
}

/// Current `__tgt_offload_entry` (`llvm::offloading::EntryTy`, 56 bytes; §1.2).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Entry {
    /// Always 0 (the legacy-format detector, §1.3).
    pub reserved: u64,
    /// 1 (0 in hand-written LLVM tests; must not be rejected).
    pub version: u16,
    /// Consumer: an `OffloadKind` value ([`kind`]).
    pub kind: u16,
    /// Flags ([`omp_flags`], [`gpu_flags`]).
    pub flags: u32,
    /// Host address of the global or kernel handle.
    pub address: *mut c_void,
    /// NUL-terminated device-side symbol name.
    pub symbol_name: *mut c_char,
    /// 0 for kernels, byte size for variables.
    pub size: u64,
    /// Kind-specific extra data.
    pub data: u64,
    /// Second pointer (managed variables: the pointer slot); normally null.
    pub aux_addr: *mut c_void,
}

/// `__tgt_device_image` (32 bytes; §1.6).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DeviceImage {
    /// First byte of the device image (or of the OffloadBinary that wraps it).
    pub image_start: *mut c_void,
    /// One past the last byte.
    pub image_end: *mut c_void,
    /// First offload entry (the same range as the descriptor's host entries).
    pub entries_begin: *mut Entry,
    /// One past the last entry.
    pub entries_end: *mut Entry,
}

/// `__tgt_bin_desc` (32 bytes; §1.7).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct BinDesc {
    /// Number of device images.
    pub num_device_images: i32,
    /// Array of `num_device_images` device images.
    pub device_images: *mut DeviceImage,
    /// First host entry (legacy or current layout; §1.3).
    pub host_entries_begin: *mut Entry,
    /// One past the last host entry.
    pub host_entries_end: *mut Entry,
}

/// `__tgt_target_table` (16 bytes; §1.8).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct TargetTable {
    /// First entry.
    pub entries_begin: *mut Entry,
    /// One past the last entry.
    pub entries_end: *mut Entry,
}

/// `__tgt_device_binary` (8 bytes; §1.8).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DeviceBinary {
    /// Plugin handle of a loaded image.
    pub handle: usize,
}

/// `__tgt_device_info` (24 bytes; §1.8).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DeviceInfo {
    /// Context.
    pub context: *mut c_void,
    /// Device.
    pub device: *mut c_void,
    /// Platform.
    pub platform: *mut c_void,
}

/// `__tgt_image_info` of upstream LLVM 16–17 (8 bytes, runtime-internal; §2.1).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct ImageInfoArch {
    /// The `arch` string of the image's OffloadBinary.
    pub arch: *const c_char,
}

/// `__tgt_image_info` of AMD's multi-image proposal (32 bytes; §2.2). Unrelated to
/// [`ImageInfoArch`] despite the shared C name.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct AmdImageInfo {
    /// Version of this struct.
    pub version: i32,
    /// 0-based index of the image in its descriptor (the association key).
    pub image_number: i32,
    /// Number of images in the descriptor.
    pub number_images: i32,
    /// Target ID the image was built for.
    pub offload_arch: *mut c_char,
    /// Reserved.
    pub compile_opts: *mut c_char,
}

/// Header of an NVIDIA fatbinary container (16 bytes; §5): the one on-disk record,
/// [`crate::raw::FatbinHeader`]. The blob is `header_size + size` bytes long.
pub type NvFatbinHeader = crate::raw::FatbinHeader;

/// `__sycl.tgt_device_image`, struct version 3 (80 bytes; §6).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct SyclDeviceImage {
    /// 3.
    pub version: u16,
    /// `OffloadKind`, truncated to 8 bits.
    pub offload_kind: u8,
    /// `ImageKind` (SPIR-V = 6, ...).
    pub format: u8,
    /// The image's `triple` string.
    pub arch: *const c_char,
    /// Compile options.
    pub compile_options: *const c_char,
    /// Link options.
    pub link_options: *const c_char,
    /// First byte of the raw image.
    pub image_start: *mut c_void,
    /// One past the last byte.
    pub image_end: *mut c_void,
    /// Per-image entries (56-byte, `Kind = SYCL`).
    pub entries_begin: *mut Entry,
    /// One past the last entry.
    pub entries_end: *mut Entry,
    /// Properties (null for now).
    pub properties_begin: *mut c_void,
    /// Properties end (null).
    pub properties_end: *mut c_void,
}

/// `__sycl.tgt_bin_desc`, version 1 (32 bytes; §6).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct SyclBinDesc {
    /// 1.
    pub version: u16,
    /// Number of device images.
    pub num_device_images: u16,
    /// The device images.
    pub device_images: *mut SyclDeviceImage,
    /// Null.
    pub host_entries_begin: *mut Entry,
    /// Null.
    pub host_entries_end: *mut Entry,
}

// ---------------------------------------------------------------------------------------
// Byte layouts (LP64, little-endian, alignment 1).

/// [`LegacyEntry`] as stored.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawLegacyEntry {
    /// `addr`.
    pub addr: U64,
    /// `name`.
    pub name: U64,
    /// `size`.
    pub size: U64,
    /// `flags`.
    pub flags: I32,
    /// `reserved` / `data`.
    pub data: I32,
}

/// [`Entry`] as stored.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawEntry {
    /// `Reserved`.
    pub reserved: U64,
    /// `Version`.
    pub version: U16,
    /// `Kind`.
    pub kind: U16,
    /// `Flags`.
    pub flags: U32,
    /// `Address`.
    pub address: U64,
    /// `SymbolName`.
    pub symbol_name: U64,
    /// `Size`.
    pub size: U64,
    /// `Data`.
    pub data: U64,
    /// `AuxAddr`.
    pub aux_addr: U64,
}

/// [`DeviceImage`] as stored.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawDeviceImage {
    /// `ImageStart`.
    pub image_start: U64,
    /// `ImageEnd`.
    pub image_end: U64,
    /// `EntriesBegin`.
    pub entries_begin: U64,
    /// `EntriesEnd`.
    pub entries_end: U64,
}

/// [`BinDesc`] as stored.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawBinDesc {
    /// `NumDeviceImages`.
    pub num_device_images: I32,
    /// Padding.
    pub padding: [u8; 4],
    /// `DeviceImages`.
    pub device_images: U64,
    /// `HostEntriesBegin`.
    pub host_entries_begin: U64,
    /// `HostEntriesEnd`.
    pub host_entries_end: U64,
}

// ---------------------------------------------------------------------------------------
// Layout checks (REGISTRATION.md §8), for LP64 hosts.

/// `assert!` that the byte layout `$raw` has the native model's size and field offsets.
macro_rules! same_layout {
    ($native:ty, $raw:ty, $size:expr, [$($nf:ident / $rf:ident @ $off:expr),* $(,)?]) => {
        const _: () = assert!(core::mem::size_of::<$native>() == $size);
        const _: () = assert!(core::mem::size_of::<$raw>() == $size);
        $(
            const _: () = assert!(core::mem::offset_of!($native, $nf) == $off);
            const _: () = assert!(core::mem::offset_of!($raw, $rf) == $off);
        )*
    };
}

/// `assert!` the size and field offsets of a native model.
macro_rules! layout {
    ($native:ty, $size:expr, [$($f:ident @ $off:expr),* $(,)?]) => {
        const _: () = assert!(core::mem::size_of::<$native>() == $size);
        $(const _: () = assert!(core::mem::offset_of!($native, $f) == $off);)*
    };
}

#[cfg(target_pointer_width = "64")]
mod checks {
    use super::*;

    same_layout!(LegacyEntry, RawLegacyEntry, 32, [
        addr / addr @ 0, name / name @ 8, size / size @ 16, flags / flags @ 24, data / data @ 28,
    ]);
    same_layout!(Entry, RawEntry, 56, [
        reserved / reserved @ 0, version / version @ 8, kind / kind @ 10, flags / flags @ 12,
        address / address @ 16, symbol_name / symbol_name @ 24, size / size @ 32,
        data / data @ 40, aux_addr / aux_addr @ 48,
    ]);
    same_layout!(DeviceImage, RawDeviceImage, 32, [
        image_start / image_start @ 0, image_end / image_end @ 8,
        entries_begin / entries_begin @ 16, entries_end / entries_end @ 24,
    ]);
    same_layout!(BinDesc, RawBinDesc, 32, [
        num_device_images / num_device_images @ 0, device_images / device_images @ 8,
        host_entries_begin / host_entries_begin @ 16, host_entries_end / host_entries_end @ 24,
    ]);
    layout!(TargetTable, 16, [entries_begin @ 0, entries_end @ 8]);
    layout!(DeviceBinary, 8, [handle @ 0]);
    layout!(DeviceInfo, 24, [context @ 0, device @ 8, platform @ 16]);
    layout!(ImageInfoArch, 8, [arch @ 0]);
    layout!(
        AmdImageInfo,
        32,
        [version @ 0, image_number @ 4, number_images @ 8, offload_arch @ 16, compile_opts @ 24]
    );
    layout!(
        NvFatbinHeader,
        16,
        [magic @ 0, version @ 4, header_size @ 6, size @ 8]
    );
    layout!(
        SyclDeviceImage,
        80,
        [version @ 0, offload_kind @ 2, format @ 3, arch @ 8, compile_options @ 16, link_options @ 24, image_start @ 32, image_end @ 40, entries_begin @ 48, entries_end @ 56, properties_begin @ 64, properties_end @ 72]
    );
    layout!(
        SyclBinDesc,
        32,
        [version @ 0, num_device_images @ 2, device_images @ 8, host_entries_begin @ 16, host_entries_end @ 24]
    );
    const _: () = assert!(core::mem::align_of::<Entry>() == 8);
    const _: () = assert!(core::mem::align_of::<BinDesc>() == 8);
}

// The byte layouts do not depend on the pointer width.
const _: () = assert!(core::mem::size_of::<RawLegacyEntry>() as u64 == LEGACY_ENTRY_SIZE);
const _: () = assert!(core::mem::size_of::<RawEntry>() as u64 == ENTRY_SIZE);
const _: () = assert!(core::mem::size_of::<RawDeviceImage>() as u64 == DEVICE_IMAGE_SIZE);
const _: () = assert!(core::mem::size_of::<RawBinDesc>() as u64 == BIN_DESC_SIZE);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hip_magic_spells_hipf_and_matches_llvm_decimal() {
        use crate::raw::{HIP_WRAPPER_MAGIC, NVFATBIN_WRAPPER_MAGIC};
        // offload-wrapper.ll (REGISTRATION.md §9): i32 1212764230 / i32 1180844977.
        assert_eq!(HIP_WRAPPER_MAGIC, 1_212_764_230);
        assert_eq!(NVFATBIN_WRAPPER_MAGIC, 1_180_844_977);
        assert_eq!(&HIP_WRAPPER_MAGIC.to_be_bytes(), b"HIPF");
        assert_eq!(&HIP_WRAPPER_MAGIC.to_le_bytes(), b"FPIH");
    }

    #[test]
    fn raw_entry_reads_a_current_entry() {
        let mut b = [0u8; 56];
        b[8..10].copy_from_slice(&1u16.to_le_bytes());
        b[10..12].copy_from_slice(&4u16.to_le_bytes());
        b[16..24].copy_from_slice(&0x1234u64.to_le_bytes());
        let (e, _) = RawEntry::ref_from_prefix(&b).unwrap();
        assert_eq!(
            (e.version.get(), e.kind.get(), e.address.get()),
            (1, kind::HIP, 0x1234)
        );
    }
}
