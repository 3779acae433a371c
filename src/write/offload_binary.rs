//! LLVM OffloadBinaries (`10 FF 10 AD`, `FORMATS.md` §6).
//!
//! * [`write_v1`]: one image per binary, byte for byte as LLVM 15–22's
//!   `OffloadBinary::write` (and so `clang-offload-packager`) writes it: header, entry,
//!   `{key, value}` offset pairs in the order given, the string table
//!   ([`super::strtab`]: leading NUL, deduplicated, tail-merged), zero padding to 8, the
//!   image, zero padding to 8.
//! * [`write_v2`]: several images in one binary, byte for byte as LLVM 23's
//!   `OffloadBinary::write` (and so LLVM 23's `llvm-offload-binary`, which packages all
//!   its `--image`s into one binary) lays them out with the 32-byte version-2 header:
//!   header, all entries, all string records (`{key, value, value size}`, grouped per
//!   entry), one shared string table, padding to 8, the images back to back (only the
//!   first is aligned), padding to 8. [`v2_empty`] is the binary of no images.
//! * [`write_v3`] / [`v3_compressed_to_vec`]: the same layout with the 40-byte version-3
//!   header (`InflatedSize` 0), as LLVM 24's `OffloadBinary::write` lays it out, and the
//!   compressed binary its `write(Images, compression::Params)` makes of it
//!   (`llvm-offload-binary --compress`, llvm/llvm-project#227765 on #222774): the
//!   uncompressed binary's header with `Size` = 40 + the stream's size and `InflatedSize` =
//!   the uncompressed binary's size, then one zstd or zlib stream of everything after the
//!   header, then zero padding to 8 (`FORMATS.md` §6.6).
//!
//! The order of the string records is the caller's: `clang-offload-packager` stores them
//! in the iteration order of an LLVM `StringMap` over its `--image` arguments, which the
//! caller must reproduce when byte identity with the tool matters.

use std::vec::Vec;

use std::io::Write;

use zerocopy::byteorder::little_endian::{U16, U32, U64};
use zerocopy::IntoBytes;

use super::strtab::{FinalStringTable, StringTable};
use super::{len64, write_zeros, WriteError};
use crate::error::{Error, ErrorKind};
use crate::raw::{
    OffloadBinaryHeader, OffloadEntry, StringEntryV1, StringEntryV2, OFFLOAD_BINARY_MAGIC,
    OFFLOAD_ENTRY_SIZE,
};

/// One image and its metadata.
#[derive(Clone, Copy, Debug)]
pub struct OffloadImage<'a> {
    /// `ImageKind` (1 object, 2 bitcode, 3 cubin, 4 fatbinary, 5 PTX, 6 SPIR-V).
    pub image_kind: u16,
    /// `OffloadKind` as the producer numbers it (LLVM 21+: 1 OpenMP, 2 CUDA, 4 HIP, 8 SYCL).
    pub offload_kind: u16,
    /// Entry flags.
    pub flags: u32,
    /// Key/value strings in stored order (`triple`, `arch`, ...). Keys and v1 values must
    /// not contain NUL bytes (they are stored NUL-terminated); keys must be UTF-8 (the
    /// reader hands them out as `&str`).
    pub strings: &'a [(&'a [u8], &'a [u8])],
    /// The image bytes.
    pub image: &'a [u8],
}

/// Alignment of OffloadBinaries and of their (first) image.
const ALIGN: u64 = 8;

fn align8(n: u64) -> Option<u64> {
    crate::bytes::align_up(n, ALIGN)
}

fn too_big() -> Error {
    Error::new(
        ErrorKind::OutOfBounds,
        8,
        "OffloadBinary size overflows 64 bits",
    )
}

fn check_strings(images: &[OffloadImage<'_>], values_nul_free: bool) -> Result<(), Error> {
    for img in images {
        for (k, v) in img.strings {
            if k.contains(&0) || (values_nul_free && v.contains(&0)) {
                return Err(Error::new(
                    ErrorKind::Malformed,
                    0,
                    "OffloadBinary string contains a NUL byte",
                ));
            }
            // The reader hands keys out as text and refuses a binary whose key is not.
            if core::str::from_utf8(k).is_err() {
                return Err(Error::new(
                    ErrorKind::Malformed,
                    0,
                    "OffloadBinary string key is not valid UTF-8",
                ));
            }
        }
    }
    Ok(())
}

fn string_table<'a>(images: &[OffloadImage<'a>]) -> FinalStringTable<'a> {
    let mut t = StringTable::new();
    for img in images {
        for (k, v) in img.strings {
            t.add(k);
            t.add(v);
        }
    }
    t.finalize()
}

fn entry(img: &OffloadImage<'_>, string_offset: u64, image_offset: u64) -> OffloadEntry {
    OffloadEntry {
        image_kind: U16::new(img.image_kind),
        offload_kind: U16::new(img.offload_kind),
        flags: U32::new(img.flags),
        string_offset: U64::new(string_offset),
        num_strings: U64::new(len64(img.strings.len())),
        image_offset: U64::new(image_offset),
        image_size: U64::new(len64(img.image.len())),
    }
}

tools_pub! {
    /// Size of the version-1 binary of `image`.
    pub fn v1_len(image: &OffloadImage<'_>) -> Result<u64, Error> {
        let strtab = string_table(core::slice::from_ref(image));
        v1_layout(image, &strtab).map(|(_, _, size)| size)
    }
}

/// (string table offset, image offset, size) of a version-1 binary.
fn v1_layout(
    image: &OffloadImage<'_>,
    strtab: &FinalStringTable<'_>,
) -> Result<(u64, u64, u64), Error> {
    let records = len64(image.strings.len())
        .checked_mul(16)
        .ok_or_else(too_big)?;
    let strtab_at = (32 + OFFLOAD_ENTRY_SIZE)
        .checked_add(records)
        .ok_or_else(too_big)?;
    let image_at = strtab_at
        .checked_add(strtab.size())
        .and_then(align8)
        .ok_or_else(too_big)?;
    let size = image_at
        .checked_add(len64(image.image.len()))
        .and_then(align8)
        .ok_or_else(too_big)?;
    Ok((strtab_at, image_at, size))
}

/// Writes `image` as one version-1 OffloadBinary (what `clang-offload-packager` writes per
/// `--image`); returns its size (a multiple of 8).
pub fn write_v1<W: Write + ?Sized>(
    out: &mut W,
    image: &OffloadImage<'_>,
) -> Result<u64, WriteError> {
    check_strings(core::slice::from_ref(image), true)?;
    let strtab = string_table(core::slice::from_ref(image));
    let (strtab_at, image_at, size) = v1_layout(image, &strtab)?;
    let header = OffloadBinaryHeader {
        magic: *OFFLOAD_BINARY_MAGIC,
        version: U32::new(1),
        size: U64::new(size),
        entries_offset: U64::new(32),
        entry_size_or_count: U64::new(OFFLOAD_ENTRY_SIZE),
    };
    out.write_all(header.as_bytes())?;
    out.write_all(entry(image, 32 + OFFLOAD_ENTRY_SIZE, image_at).as_bytes())?;
    for (k, v) in image.strings {
        let r = StringEntryV1 {
            key_offset: U64::new(strtab_at.saturating_add(strtab.offset(k).unwrap_or(0))),
            value_offset: U64::new(strtab_at.saturating_add(strtab.offset(v).unwrap_or(0))),
        };
        out.write_all(r.as_bytes())?;
    }
    out.write_all(&strtab.to_vec())?;
    write_zeros(
        out,
        image_at.saturating_sub(strtab_at.saturating_add(strtab.size())),
    )?;
    out.write_all(image.image)?;
    write_zeros(
        out,
        size.saturating_sub(image_at.saturating_add(len64(image.image.len()))),
    )?;
    Ok(size)
}

/// `image` as one version-1 OffloadBinary in a new buffer.
pub fn v1_to_vec(image: &OffloadImage<'_>) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    match write_v1(&mut out, image) {
        Ok(_) => Ok(out),
        Err(WriteError::Invalid(e)) => Err(e),
        Err(WriteError::Io(_)) => Err(Error::new(
            ErrorKind::OutOfMemory,
            0,
            "cannot grow the buffer",
        )),
    }
}

/// Writes `images` as one version-2 OffloadBinary with `images.len()` entries; returns its
/// size (a multiple of 8).
pub fn write_v2<W: Write + ?Sized>(
    out: &mut W,
    images: &[OffloadImage<'_>],
) -> Result<u64, WriteError> {
    write_multi(out, images, 2)
}

/// Writes `images` as one uncompressed version-3 OffloadBinary (LLVM 24's
/// `OffloadBinary::write`): [`write_v2`]'s layout after a 40-byte header whose
/// `InflatedSize` is 0; returns its size (a multiple of 8).
pub fn write_v3<W: Write + ?Sized>(
    out: &mut W,
    images: &[OffloadImage<'_>],
) -> Result<u64, WriteError> {
    write_multi(out, images, 3)
}

/// `images` as one uncompressed version-3 OffloadBinary in a new buffer.
pub fn v3_to_vec(images: &[OffloadImage<'_>]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    match write_v3(&mut out, images) {
        Ok(_) => Ok(out),
        Err(WriteError::Invalid(e)) => Err(e),
        Err(WriteError::Io(_)) => Err(Error::new(
            ErrorKind::OutOfMemory,
            0,
            "cannot grow the buffer",
        )),
    }
}

/// `images` as one compressed version-3 OffloadBinary, as LLVM 24's
/// `OffloadBinary::write(Images, compression::Params)` makes it: the uncompressed binary
/// ([`v3_to_vec`]), its body (everything after the 40-byte header) compressed by `codec`
/// into one stream, the header's `Size` set to 40 + the stream's length and `InflatedSize`
/// to the uncompressed binary's size, then zero padding to 8. LLVM compresses with
/// `compression::compress`: zstd through `ZSTD_compress2` without long-distance matching
/// (`ccob::Codec::LibZstd`, feature `llvm-compress`, with `long_distance_matching: false`), zlib through
/// `compress2` (`ccob::Codec::LibZlib`).
pub fn v3_compressed_to_vec(
    images: &[OffloadImage<'_>],
    codec: super::ccob::Codec,
) -> Result<Vec<u8>, Error> {
    let uncompressed = v3_to_vec(images)?;
    let body = uncompressed.get(40..).unwrap_or_default();
    let stream = codec.compress(body);
    let size = len64(stream.len()).checked_add(40).ok_or_else(too_big)?;
    let header = crate::raw::OffloadBinaryHeaderV3 {
        common: OffloadBinaryHeader {
            magic: *OFFLOAD_BINARY_MAGIC,
            version: U32::new(3),
            size: U64::new(size),
            entries_offset: U64::new(40),
            entry_size_or_count: U64::new(len64(images.len())),
        },
        inflated_size: U64::new(len64(uncompressed.len())),
    };
    let padded = align8(size).ok_or_else(too_big)?;
    let mut out = Vec::new();
    out.try_reserve_exact(usize::try_from(padded).map_err(|_| too_big())?)
        .map_err(|_| Error::new(ErrorKind::OutOfMemory, 0, "cannot grow the buffer"))?;
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&stream);
    out.resize(
        out.len()
            .saturating_add(usize::try_from(padded.saturating_sub(size)).unwrap_or(0)),
        0,
    );
    Ok(out)
}

/// [`write_v2`] and [`write_v3`]: the header of `version` (32 bytes for 2, 40 for 3), the
/// entries, the string records, one string table, padding to 8, the images, padding to 8.
fn write_multi<W: Write + ?Sized>(
    out: &mut W,
    images: &[OffloadImage<'_>],
    version: u32,
) -> Result<u64, WriteError> {
    let header_size: u64 = if version >= 3 { 40 } else { 32 };
    if images.is_empty() {
        return Err(Error::new(
            ErrorKind::Malformed,
            24,
            "an OffloadBinary needs at least one image",
        )
        .into());
    }
    check_strings(images, false)?;
    let strtab = string_table(images);
    let count = len64(images.len());
    let total_strings = images
        .iter()
        .try_fold(0u64, |n, i| n.checked_add(len64(i.strings.len())))
        .ok_or_else(too_big)?;
    let entries_size = count.checked_mul(OFFLOAD_ENTRY_SIZE).ok_or_else(too_big)?;
    let records_at = entries_size.checked_add(header_size).ok_or_else(too_big)?;
    let strtab_at = total_strings
        .checked_mul(24)
        .and_then(|r| r.checked_add(records_at))
        .ok_or_else(too_big)?;
    let data_at = strtab_at
        .checked_add(strtab.size())
        .and_then(align8)
        .ok_or_else(too_big)?;
    let images_size = images
        .iter()
        .try_fold(0u64, |n, i| n.checked_add(len64(i.image.len())))
        .ok_or_else(too_big)?;
    let size = data_at
        .checked_add(images_size)
        .and_then(align8)
        .ok_or_else(too_big)?;
    let header = OffloadBinaryHeader {
        magic: *OFFLOAD_BINARY_MAGIC,
        version: U32::new(version),
        size: U64::new(size),
        entries_offset: U64::new(header_size),
        entry_size_or_count: U64::new(count),
    };
    out.write_all(header.as_bytes())?;
    if version >= 3 {
        // `InflatedSize`: 0, not compressed.
        out.write_all(&[0u8; 8])?;
    }
    let mut string_at = records_at;
    let mut image_at = data_at;
    for img in images {
        out.write_all(entry(img, string_at, image_at).as_bytes())?;
        // Both stay below `size`, which was computed with checked arithmetic.
        string_at = string_at.saturating_add(len64(img.strings.len()).saturating_mul(24));
        image_at = image_at.saturating_add(len64(img.image.len()));
    }
    for img in images {
        for (k, v) in img.strings {
            let r = StringEntryV2 {
                key_offset: U64::new(strtab_at.saturating_add(strtab.offset(k).unwrap_or(0))),
                value_offset: U64::new(strtab_at.saturating_add(strtab.offset(v).unwrap_or(0))),
                value_size: U64::new(len64(v.len())),
            };
            out.write_all(r.as_bytes())?;
        }
    }
    out.write_all(&strtab.to_vec())?;
    write_zeros(
        out,
        data_at.saturating_sub(strtab_at.saturating_add(strtab.size())),
    )?;
    for img in images {
        out.write_all(img.image)?;
    }
    write_zeros(
        out,
        size.saturating_sub(data_at.saturating_add(images_size)),
    )?;
    Ok(size)
}

tools_pub! {
    /// The version-2 OffloadBinary of no images that LLVM 23's `OffloadBinary::write` lays out
    /// when it is given none (`llvm-offload-binary -o FILE` without `--image`): its source
    /// asserts at least one image, so only a build without assertions (as distributions ship
    /// LLVM) writes these 40 bytes: the header (size 40, entries at 32, count 0), the string
    /// table's leading NUL, and zero padding to 8 (`FORMATS.md` §6.4).
    pub fn v2_empty() -> Vec<u8> {
        let header = OffloadBinaryHeader {
            magic: *OFFLOAD_BINARY_MAGIC,
            version: U32::new(2),
            size: U64::new(40),
            entries_offset: U64::new(32),
            entry_size_or_count: U64::new(0),
        };
        let mut out = header.as_bytes().to_vec();
        out.resize(40, 0);
        out
    }
}

/// `images` as one version-2 OffloadBinary in a new buffer.
pub fn v2_to_vec(images: &[OffloadImage<'_>]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    match write_v2(&mut out, images) {
        Ok(_) => Ok(out),
        Err(WriteError::Invalid(e)) => Err(e),
        Err(WriteError::Io(_)) => Err(Error::new(
            ErrorKind::OutOfMemory,
            0,
            "cannot grow the buffer",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload_binary::OffloadBinary;
    use crate::options::Limits;
    use std::vec;

    #[test]
    fn v1_layout_matches_the_packager() {
        // Same fields as `clang-offload-packager-22 --image=file=x.co,triple=amdgcn-amd-amdhsa,
        // arch=gfx906,kind=hip`; its string records come in StringMap order: arch, triple.
        let image = vec![0xAB; 3024];
        let strings: [(&[u8], &[u8]); 2] =
            [(b"arch", b"gfx906"), (b"triple", b"amdgcn-amd-amdhsa")];
        let img = OffloadImage {
            image_kind: 0,
            offload_kind: 4,
            flags: 0,
            strings: &strings,
            image: &image,
        };
        let v = v1_to_vec(&img).unwrap();
        assert_eq!(v.len(), 0xc60);
        assert_eq!(&v[8..16], &0xc60u64.to_le_bytes());
        assert_eq!(&v[0x38..0x40], &0x90u64.to_le_bytes()); // image offset
        assert_eq!(&v[0x48..0x50], &0x69u64.to_le_bytes()); // "arch"
        assert_eq!(&v[0x50..0x58], &0x87u64.to_le_bytes()); // "gfx906"
        assert_eq!(
            &v[0x68..0x8e],
            b"\0arch\0triple\0amdgcn-amd-amdhsa\0gfx906\0"
        );
        let b = OffloadBinary::parse(&v, &Limits::default()).unwrap();
        let e = b.entries().next().unwrap();
        assert_eq!(e.image, &image[..]);
        assert_eq!(e.strings.get_str("triple"), Some("amdgcn-amd-amdhsa"));
    }

    #[test]
    fn v2_holds_several_images() {
        let s0: [(&[u8], &[u8]); 2] = [(b"triple", b"amdgcn-amd-amdhsa"), (b"arch", b"gfx90a")];
        let s1: [(&[u8], &[u8]); 2] = [(b"triple", b"nvptx64-nvidia-cuda"), (b"arch", b"sm_80")];
        let imgs = [
            OffloadImage {
                image_kind: 1,
                offload_kind: 1,
                flags: 0,
                strings: &s0,
                image: b"abc",
            },
            OffloadImage {
                image_kind: 3,
                offload_kind: 2,
                flags: 0,
                strings: &s1,
                image: b"defgh",
            },
        ];
        let v = v2_to_vec(&imgs).unwrap();
        assert_eq!(v.len() % 8, 0);
        let b = OffloadBinary::parse(&v, &Limits::default()).unwrap();
        assert_eq!(b.version(), 2);
        let e: Vec<_> = b.entries().collect();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].image, b"abc");
        assert_eq!(e[1].image, b"defgh");
        assert_eq!(e[1].image_offset, e[0].image_offset + 3);
        assert_eq!(e[1].strings.get_str("arch"), Some("sm_80"));
    }

    #[test]
    fn v3_compressed_inflates_to_the_uncompressed_v3() {
        let s0: [(&[u8], &[u8]); 2] = [(b"arch", b"abc"), (b"triple", b"x-y-z")];
        let image = vec![7u8; 1000];
        let imgs = [OffloadImage {
            image_kind: 0,
            offload_kind: 0,
            flags: 0,
            strings: &s0,
            image: &image,
        }];
        let plain = v3_to_vec(&imgs).unwrap();
        assert_eq!(&plain[4..8], &3u32.to_le_bytes());
        assert_eq!(&plain[16..24], &40u64.to_le_bytes());
        assert_eq!(&plain[32..40], &[0; 8]);
        let b = OffloadBinary::parse(&plain, &Limits::default()).unwrap();
        assert_eq!(b.entries().next().unwrap().image, &image[..]);
        for codec in [
            crate::write::ccob::Codec::Zlib { level: 6 },
            crate::write::ccob::Codec::Zstd(crate::write::ccob::ZstdMode::Fastest),
        ] {
            let c = v3_compressed_to_vec(&imgs, codec).unwrap();
            assert_eq!(c.len() % 8, 0);
            assert!(c.len() < plain.len());
            let b = OffloadBinary::parse(&c, &Limits::default()).unwrap();
            assert!(b.is_compressed());
            assert_eq!(b.inflated_size(), plain.len() as u64);
            let inflated = b.inflate(&crate::ReadOptions::default()).unwrap();
            // The inflated binary is the uncompressed one, but for the header's size
            // fields, which inflate rebuilds as LLVM does (`size` = inflated size).
            assert_eq!(&inflated[..], &plain[..]);
        }
    }
}
