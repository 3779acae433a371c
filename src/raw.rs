//! On-disk structures, exactly as stored: little-endian, alignment 1, no logic.
//!
//! Every type here derives zerocopy's `FromBytes`/`IntoBytes`/`Unaligned`, so a header is
//! read in place from any byte offset (`T::ref_from_prefix`) and written back with
//! `as_bytes`. Field names follow the LLVM sources; sections refer to `FORMATS.md`.

use zerocopy::byteorder::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Magic of an uncompressed binary offload bundle (24 bytes, no NUL).
pub const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Magic of a compressed offload bundle.
pub const CCOB_MAGIC: &[u8; 4] = b"CCOB";
/// Magic of an LLVM OffloadBinary (`0x10FF10AD` in the sources, bytes `10 FF 10 AD`).
pub const OFFLOAD_BINARY_MAGIC: &[u8; 4] = &[0x10, 0xFF, 0x10, 0xAD];
/// ELF magic.
pub const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
/// `ar` archive magic.
pub const AR_MAGIC: &[u8; 8] = b"!<arch>\n";
/// Thin `ar` archive magic (members are not stored in the archive).
pub const AR_THIN_MAGIC: &[u8; 8] = b"!<thin>\n";
/// zstd frame magic (`FORMATS.md` §6.6 uses it to tell zstd from zlib).
pub const ZSTD_MAGIC: &[u8; 4] = &[0x28, 0xB5, 0x2F, 0xFD];
/// Magic of LLVM bitcode (`BC C0 DE`).
pub const BITCODE_MAGIC: &[u8; 4] = &[0x42, 0x43, 0xC0, 0xDE];
/// Magic of LLVM's bitcode wrapper header (`0x0B17C0DE`, bytes `DE C0 17 0B`), which
/// Apple's and some offload toolchains put before the bitcode.
pub const BITCODE_WRAPPER_MAGIC: &[u8; 4] = &[0xDE, 0xC0, 0x17, 0x0B];
/// Magic of a SPIR-V module (`0x07230203`, little-endian).
pub const SPIRV_MAGIC: &[u8; 4] = &[0x03, 0x02, 0x23, 0x07];
/// `e_machine` of AMDGPU code objects (`object::elf::EM_AMDGPU`).
pub const EM_AMDGPU: u16 = object::elf::EM_AMDGPU.0;
/// `e_machine` of NVIDIA cubins (`object::elf::EM_CUDA`).
pub const EM_CUDA: u16 = object::elf::EM_CUDA.0;

/// Section of host files holding HIP offload bundles and `CCOB`s back to back.
pub const HIP_FATBIN_SECTION: &[u8] = b".hip_fatbin";
/// Section of host files holding NVIDIA fatbinaries back to back.
pub const NV_FATBIN_SECTION: &[u8] = b".nv_fatbin";
/// Section of relocatable-device-code objects (`nvcc -rdc`) holding their fatbinary.
pub const NV_RELFATBIN_SECTION: &[u8] = b"__nv_relfatbin";
/// Section of LLVM OffloadBinaries (ELF type `SHT_LLVM_OFFLOADING` too).
pub const OFFLOADING_SECTION: &[u8] = b".llvm.offloading";
/// Section of HIP fat-binary wrappers ([`FatbinWrapper`]).
pub const HIP_WRAPPER_SECTION: &[u8] = b".hipFatBinSegment";
/// Section of CUDA fat-binary wrappers ([`FatbinWrapper`]).
pub const NV_WRAPPER_SECTION: &[u8] = b".nvFatBinSegment";
/// Prefix of the per-entry sections of a bundled host object, `__CLANG_OFFLOAD_BUNDLE__<id>`
/// (`FORMATS.md` §2.5): the bundle magic.
pub const OBJECT_BUNDLE_PREFIX: &[u8] = BUNDLE_MAGIC;

/// The text bundle marker that follows the comment token (`FORMATS.md` §3).
pub const TEXT_START_MARKER: &[u8] = b" __CLANG_OFFLOAD_BUNDLE____START__ ";
/// The text bundle end marker that follows the comment token.
pub const TEXT_END_MARKER: &[u8] = b" __CLANG_OFFLOAD_BUNDLE____END__ ";

/// `__CLANG_OFFLOAD_BUNDLE__` header: magic and entry count (`FORMATS.md` §2.1).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct BundleHeader {
    /// `__CLANG_OFFLOAD_BUNDLE__`.
    pub magic: [u8; 24],
    /// Number of entry descriptors that follow.
    pub num_entries: U64,
}

/// Fixed part of a bundle entry descriptor; `id_len` bytes of ID follow it.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct BundleEntryHeader {
    /// Payload offset from the start of the bundle.
    pub offset: U64,
    /// Payload size.
    pub size: U64,
    /// Length of the entry ID that follows.
    pub id_len: U64,
}

/// Common prefix of every `CCOB` header (`FORMATS.md` §5.1).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct CcobPrefix {
    /// `CCOB`.
    pub magic: [u8; 4],
    /// 1, 2 or 3.
    pub version: U16,
    /// 0 = zlib, 1 = zstd.
    pub method: U16,
}

/// `CCOB` version 1 header (20 bytes): no total size.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct CcobHeaderV1 {
    /// Common prefix.
    pub prefix: CcobPrefix,
    /// Size of the decompressed bundle.
    pub uncompressed_size: U32,
    /// First 8 bytes of the MD5 digest of the decompressed bundle.
    pub hash: [u8; 8],
}

/// `CCOB` version 2 header (24 bytes): 32-bit sizes.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct CcobHeaderV2 {
    /// Common prefix.
    pub prefix: CcobPrefix,
    /// Size of the whole blob, header included.
    pub total_size: U32,
    /// Size of the decompressed bundle.
    pub uncompressed_size: U32,
    /// First 8 bytes of the MD5 digest of the decompressed bundle.
    pub hash: [u8; 8],
}

/// `CCOB` version 3 header (32 bytes): 64-bit sizes.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct CcobHeaderV3 {
    /// Common prefix.
    pub prefix: CcobPrefix,
    /// Size of the whole blob, header included.
    pub total_size: U64,
    /// Size of the decompressed bundle.
    pub uncompressed_size: U64,
    /// First 8 bytes of the MD5 digest of the decompressed bundle.
    pub hash: [u8; 8],
}

/// OffloadBinary header, versions 1 and 2 (32 bytes, `FORMATS.md` §6.1).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct OffloadBinaryHeader {
    /// `10 FF 10 AD`.
    pub magic: [u8; 4],
    /// 1, 2 or 3.
    pub version: U32,
    /// Size of this binary in bytes (the compressed size for a compressed v3 binary).
    pub size: U64,
    /// Offset of the first entry.
    pub entries_offset: U64,
    /// v1: size of one entry (40); v2 and later: number of entries.
    pub entry_size_or_count: U64,
}

/// OffloadBinary v3 header (40 bytes): the v2 header plus the inflated size.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct OffloadBinaryHeaderV3 {
    /// The fields shared with versions 1 and 2.
    pub common: OffloadBinaryHeader,
    /// Size of the uncompressed binary, or 0 when it is not compressed.
    pub inflated_size: U64,
}

/// OffloadBinary entry (40 bytes in every version, `FORMATS.md` §6.2).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct OffloadEntry {
    /// `ImageKind`.
    pub image_kind: U16,
    /// `OffloadKind`.
    pub offload_kind: U16,
    /// Entry flags.
    pub flags: U32,
    /// Offset of this entry's string-map records.
    pub string_offset: U64,
    /// Number of string-map records.
    pub num_strings: U64,
    /// Offset of the image.
    pub image_offset: U64,
    /// Size of the image.
    pub image_size: U64,
}

/// OffloadBinary v1 string-map record: NUL-terminated key and value.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct StringEntryV1 {
    /// Offset of the NUL-terminated key.
    pub key_offset: U64,
    /// Offset of the NUL-terminated value.
    pub value_offset: U64,
}

/// OffloadBinary v2/v3 string-map record: the value has an explicit size.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct StringEntryV2 {
    /// Offset of the NUL-terminated key.
    pub key_offset: U64,
    /// Offset of the value.
    pub value_offset: U64,
    /// Size of the value in bytes.
    pub value_size: U64,
}

/// Size of [`OffloadEntry`] on disk.
pub const OFFLOAD_ENTRY_SIZE: u64 = 40;

/// Magic of an NVIDIA fatbinary (`0xBA55ED50`, bytes `50 ED 55 BA`, `NVFATBIN.md`).
pub const NVFATBIN_MAGIC: &[u8; 4] = &[0x50, 0xED, 0x55, 0xBA];
/// Magic of a `__fatBinC_Wrapper_t` in `.nvFatBinSegment` (`0x466243B1`,
/// `__cudaFatMAGIC2`; `REGISTRATION.md` §5).
pub const NVFATBIN_WRAPPER_MAGIC: u32 = 0x4662_43B1;
/// Magic of the HIP fat-binary wrapper in `.hipFatBinSegment`: `0x48495046` ("HIPF", bytes
/// `46 50 49 48`; `REGISTRATION.md` §4.1).
pub const HIP_WRAPPER_MAGIC: u32 = 0x4849_5046;

/// NVIDIA fatbinary header (16 bytes, `NVFATBIN.md` "Layout").
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct FatbinHeader {
    /// `50 ED 55 BA`.
    pub magic: [u8; 4],
    /// 1.
    pub version: U16,
    /// Size of this header (16).
    pub header_size: U16,
    /// Size of everything after the header (entries and payloads).
    pub size: U64,
}

/// The fields of an NVIDIA fatbinary entry header this crate reads (its first 64 bytes;
/// `header_size` says where the payload starts).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct FatbinEntryHeader {
    /// 1 = PTX, 2 = ELF (cubin).
    pub kind: U16,
    /// Unknown (`0x0101` seen).
    pub unknown_02: U16,
    /// Size of the entry header; the payload follows it.
    pub header_size: U32,
    /// Stored (padded) payload size.
    pub payload_size: U64,
    /// Size of the compressed stream of a compressed payload, else 0.
    pub compressed_size: U32,
    /// Unknown (0, or 0x40 on PTX and sm_100+ entries).
    pub unknown_14: U32,
    /// Code version: major in the high half, minor in the low half. For PTX the ISA
    /// version of its text (`0x90005`: 9.5); `0x10008` on cubins.
    pub code_version: U32,
    /// SM number (86 for `sm_86`).
    pub sm: U32,
    /// Unknown (0 seen).
    pub unknown_20: U64,
    /// Flags: `0x2000` LZ4, `0x8000` zstd, `0x100000` `a`, `0x200000` `f`, ...
    pub flags: U64,
    /// Unknown (0 seen).
    pub unknown_30: U64,
    /// Size of the decompressed payload of a compressed entry, else 0.
    pub uncompressed_size: U64,
}

/// A fat-binary wrapper as a file stores it (24 bytes; `REGISTRATION.md` §4.1, §5): CUDA's
/// `__fatBinC_Wrapper_t` in `.nvFatBinSegment` ([`NVFATBIN_WRAPPER_MAGIC`]), HIP's in
/// `.hipFatBinSegment` ([`HIP_WRAPPER_MAGIC`]), and a split library's ([`HIPK_MAGIC`],
/// `KPACK.md` §3). The one declaration and the one name of the record; its size is
/// [`FATBIN_WRAPPER_SIZE`].
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct FatbinWrapper {
    /// [`NVFATBIN_WRAPPER_MAGIC`], [`HIP_WRAPPER_MAGIC`] or [`HIPK_MAGIC`].
    pub magic: U32,
    /// 1 (CUDA: 1 or 2).
    pub version: U32,
    /// Address of the fat binary (relocated); for `HIPK`, of the ref record
    /// (`.rocm_kpack_ref`, PE `.kpackrf`). In ELF files the kpack splitter zeroes these
    /// bytes and the `R_X86_64_RELATIVE` addend holds the address.
    pub binary: U64,
    /// CUDA version 2: the address of the pre-linked list (`REGISTRATION.md` §5.3); `HIPK`:
    /// the wrapper's index, the `co_index` of the `<kernel_name>#<co_index>` key; else 0.
    pub data: U64,
}

/// Size of [`FatbinWrapper`] on disk.
pub const FATBIN_WRAPPER_SIZE: u64 = 24;
const _: () = assert!(core::mem::size_of::<FatbinWrapper>() as u64 == FATBIN_WRAPPER_SIZE);

/// Magic of a `.kpack` archive (`KPACK.md` §2): `KPAK`.
pub const KPACK_MAGIC: &[u8; 4] = b"KPAK";
/// Magic of a HIP wrapper whose device code was moved into `.kpack` archives: `0x4B504948`
/// (bytes `48 49 50 4B`, "HIPK"; `KPACK.md` §3).
pub const HIPK_MAGIC: u32 = 0x4B50_4948;

/// Header of a `.kpack` archive (16 bytes; zeros pad it to 64, where the blobs start).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct KpackHeader {
    /// [`KPACK_MAGIC`].
    pub magic: [u8; 4],
    /// 1 (the only version rocm-kpack's loader reads).
    pub version: U32,
    /// Absolute offset of the MessagePack table of contents, which runs to the end of the
    /// file.
    pub toc_offset: U64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    #[test]
    fn sizes_match_the_spec() {
        assert_eq!(size_of::<BundleHeader>(), 32);
        assert_eq!(size_of::<BundleEntryHeader>(), 24);
        assert_eq!(size_of::<CcobHeaderV1>(), 20);
        assert_eq!(size_of::<CcobHeaderV2>(), 24);
        assert_eq!(size_of::<CcobHeaderV3>(), 32);
        assert_eq!(size_of::<OffloadBinaryHeader>(), 32);
        assert_eq!(size_of::<OffloadBinaryHeaderV3>(), 40);
        assert_eq!(size_of::<OffloadEntry>(), OFFLOAD_ENTRY_SIZE as usize);
        assert_eq!(size_of::<StringEntryV1>(), 16);
        assert_eq!(size_of::<StringEntryV2>(), 24);
        assert_eq!(size_of::<FatbinHeader>(), 16);
        assert_eq!(size_of::<FatbinEntryHeader>(), 64);
        assert_eq!(size_of::<FatbinWrapper>(), 24);
        assert_eq!(size_of::<KpackHeader>(), 16);
    }
}
