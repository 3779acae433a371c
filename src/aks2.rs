//! AOTriton kernel storage, version 2 (`.aks2`, magic `AKS2`; `FORMATS.md` §12): the xz
//! archives of AMDGPU code objects that AOTriton's runtime (torch's ROCm builds, hipengine)
//! loads itself from `aotriton.images/<family>/...`, outside any offload container.
//!
//! The layout is the one AOTriton's writer gives it (ROCm/aotriton `v2python/aks2.py`): a
//! 16-byte header (`AKS2`, then little-endian `u32` total uncompressed size, number of
//! kernels, directory size) and one xz stream holding the directory (per kernel: `u32`
//! shared memory size, block threads, offset, image size, name length counting its NUL,
//! then the name and the NUL) followed by the code objects back to back, each at its
//! offset from the end of the directory.
//!
//! [`Aks2::parse`](crate::aks2::Aks2::parse) checks the header against the data and the [`Limits`] (the claimed size
//! is checked before anything is allocated), decodes the stream with `lzma-rs` into a
//! buffer that refuses to grow past the claim, then reads every directory entry and checks
//! its code object's range. Errors carry the offset of the field or stream at fault.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{Error, ErrorKind, Result};
use crate::Limits;

/// The magic an `.aks2` archive starts with.
pub const AKS2_MAGIC: &[u8; 4] = b"AKS2";
/// Size of the header before the xz stream.
pub const HEADER_SIZE: u64 = 16;
/// Size of a directory entry before its name.
const ENTRY_FIXED: usize = 20;

/// Returns true if `data` starts with the `.aks2` magic.
pub fn is_aks2(data: &[u8]) -> bool {
    data.starts_with(AKS2_MAGIC)
}

/// A kernel's name without its `--Arch_<processor>` suffix (the whole name when it has
/// none; every one of the 72 names of hipengine's `attn_fwd_F_F_3_0_gfx11xx.aks2` has it).
pub fn kernel_family(name: &str) -> &str {
    name.rsplit_once("--Arch_")
        .map_or(name, |(family, _)| family)
}

/// One kernel of an archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aks2Kernel {
    /// Its name in the archive (AOTriton's kernel and configuration, ending in
    /// `--Arch_<processor>`), as stored (lossy UTF-8).
    pub name: String,
    /// The LDS size the kernel uses, from the compiler's JSON.
    pub shared_memory_size: u32,
    /// Work-group size (warps × warp size).
    pub block_threads: u32,
    /// Offset of the code object after the directory, in the decoded body.
    pub offset: u32,
    /// Size of the code object (0 for a kernel whose compilation failed).
    pub image_size: u32,
}

/// A decoded `.aks2` archive: its directory and the decoded body.
#[derive(Clone, Debug)]
pub struct Aks2 {
    /// The kernels in stored order.
    pub kernels: Vec<Aks2Kernel>,
    body: Vec<u8>,
    directory_size: usize,
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    <[u8; 4]>::try_from(b).ok().map(u32::from_le_bytes)
}

/// A writer that takes at most `limit` bytes (the claimed size) and fails past it.
struct Bounded {
    out: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len().saturating_add(buf.len()) > self.limit {
            return Err(std::io::Error::other("more than the claimed size"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Aks2 {
    /// Reads and decodes the archive `data` (a whole `.aks2` file).
    ///
    /// Errors: `BadMagic` (offset 0); `Truncated` for a header shorter than 16 bytes;
    /// `LimitExceeded` for a claimed size over `limits.max_decompressed_size` (offset 4) or
    /// a kernel count over `limits.max_entries` (offset 8); `Decompress` for a stream that
    /// is not valid xz or decodes to more than the claim (offset 16); `SizeMismatch` for a
    /// body shorter than the claim (offset 4) or a directory size past the body (offset
    /// 12); `Malformed` or `OutOfBounds` for a directory entry or code object range that
    /// does not lie in the body (offset 12).
    pub fn parse(data: &[u8], limits: &Limits) -> Result<Self> {
        if !is_aks2(data) {
            return Err(Error::new(ErrorKind::BadMagic, 0, "not an AKS2 archive"));
        }
        let (Some(total), Some(count), Some(dsize)) =
            (u32_at(data, 4), u32_at(data, 8), u32_at(data, 12))
        else {
            return Err(Error::new(
                ErrorKind::Truncated,
                0,
                "AKS2 header is truncated",
            ));
        };
        if u64::from(total) > limits.max_decompressed_size {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                4,
                "AKS2 uncompressed size exceeds the limit",
            ));
        }
        if u64::from(count) > limits.max_entries {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                8,
                "AKS2 kernel count exceeds the limit",
            ));
        }
        let limit = usize::try_from(total)
            .map_err(|_| Error::new(ErrorKind::LimitExceeded, 4, "AKS2 size too large"))?;
        let mut out = Bounded {
            out: Vec::new(),
            limit,
        };
        out.out
            .try_reserve_exact(limit)
            .map_err(|_| Error::new(ErrorKind::OutOfMemory, 4, "cannot reserve the AKS2 body"))?;
        let mut stream = data.get(16..).unwrap_or_default();
        lzma_rs::xz_decompress(&mut stream, &mut out).map_err(|_| {
            Error::new(
                ErrorKind::Decompress,
                HEADER_SIZE,
                "AKS2 xz stream does not decode to the claimed size",
            )
        })?;
        let body = out.out;
        if body.len() != limit {
            return Err(Error::new(
                ErrorKind::SizeMismatch,
                4,
                "AKS2 body is shorter than the claimed size",
            ));
        }
        let directory_size = usize::try_from(dsize).unwrap_or(usize::MAX);
        if directory_size > body.len() {
            return Err(Error::new(
                ErrorKind::SizeMismatch,
                12,
                "AKS2 directory size runs past the body",
            ));
        }
        let bad = |what| Error::new(ErrorKind::Malformed, 12, what);
        let mut kernels = Vec::new();
        kernels
            .try_reserve_exact(
                usize::try_from(count)
                    .unwrap_or(0)
                    .min(directory_size / ENTRY_FIXED),
            )
            .map_err(|_| {
                Error::new(
                    ErrorKind::OutOfMemory,
                    8,
                    "cannot reserve the AKS2 directory",
                )
            })?;
        let directory = body.get(..directory_size).unwrap_or_default();
        let mut at = 0usize;
        for _ in 0..count {
            let field = |i: usize| u32_at(directory, at.saturating_add(i.saturating_mul(4)));
            let (Some(shm), Some(threads), Some(offset), Some(size), Some(nlen)) =
                (field(0), field(1), field(2), field(3), field(4))
            else {
                return Err(bad("AKS2 directory entry runs past the directory"));
            };
            let name_at = at.saturating_add(ENTRY_FIXED);
            let nlen = usize::try_from(nlen).unwrap_or(usize::MAX);
            let name = directory
                .get(name_at..name_at.saturating_add(nlen))
                .and_then(|n| n.strip_suffix(&[0]))
                .ok_or_else(|| bad("AKS2 kernel name runs past the directory or lacks its NUL"))?;
            let start =
                directory_size.saturating_add(usize::try_from(offset).unwrap_or(usize::MAX));
            if start
                .checked_add(usize::try_from(size).unwrap_or(usize::MAX))
                .is_none_or(|end| end > body.len())
            {
                return Err(Error::new(
                    ErrorKind::OutOfBounds,
                    12,
                    "AKS2 code object lies outside the body",
                ));
            }
            kernels.push(Aks2Kernel {
                name: String::from_utf8_lossy(name).into_owned(),
                shared_memory_size: shm,
                block_threads: threads,
                offset,
                image_size: size,
            });
            at = name_at.saturating_add(nlen);
        }
        if at != directory_size {
            return Err(bad("AKS2 directory entries do not fill the directory"));
        }
        Ok(Aks2 {
            kernels,
            body,
            directory_size,
        })
    }

    /// The kernels grouped by name without the `--Arch_<processor>` suffix
    /// ([`kernel_family`]): one kernel built for several processors. Each family has the
    /// indices of its kernels that have a code object; families come in the order of their
    /// first kernel. `loader-sim select` chooses among a family's images for each device
    /// ([`crate::choose`], the rule `doctor` judges them by).
    pub fn families(&self) -> Vec<(&str, Vec<usize>)> {
        let mut families: Vec<(&str, Vec<usize>)> = Vec::new();
        let mut at = alloc::collections::BTreeMap::new();
        for (i, k) in self.kernels.iter().enumerate() {
            if k.image_size == 0 {
                continue;
            }
            let family = kernel_family(&k.name);
            let slot = *at.entry(family).or_insert_with(|| {
                families.push((family, Vec::new()));
                families.len().saturating_sub(1)
            });
            if let Some((_, members)) = families.get_mut(slot) {
                members.push(i);
            }
        }
        families
    }

    /// The code object of `kernel` (checked by [`Aks2::parse`] to lie in the body).
    pub fn code_object(&self, kernel: &Aks2Kernel) -> &[u8] {
        let start = self
            .directory_size
            .saturating_add(usize::try_from(kernel.offset).unwrap_or(usize::MAX));
        let end = start.saturating_add(usize::try_from(kernel.image_size).unwrap_or(0));
        self.body.get(start..end).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_headers_are_refused_where_they_are_wrong() {
        let limits = Limits::default();
        let e = |d: &[u8]| {
            let e = Aks2::parse(d, &limits).unwrap_err();
            (e.kind(), e.offset())
        };
        assert_eq!(e(b"AKS3"), (ErrorKind::BadMagic, 0));
        assert_eq!(e(b"AKS2\0\0"), (ErrorKind::Truncated, 0));
        let mut big = b"AKS2".to_vec();
        big.extend_from_slice(&u32::MAX.to_le_bytes());
        big.extend_from_slice(&[0; 8]);
        let small = Limits {
            max_decompressed_size: 1 << 20,
            ..Limits::default()
        };
        let err = Aks2::parse(&big, &small).unwrap_err();
        assert_eq!((err.kind(), err.offset()), (ErrorKind::LimitExceeded, 4));
        let mut junk = b"AKS2".to_vec();
        junk.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        junk.extend_from_slice(&[0x55; 32]);
        assert_eq!(e(&junk), (ErrorKind::Decompress, 16));
    }
}
