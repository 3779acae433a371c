//! Binary offload bundles (`__CLANG_OFFLOAD_BUNDLE__`, `FORMATS.md` §2) as LLVM's
//! `BinaryFileHandler::WriteHeader`/`WriteBundle` write them.
//!
//! Layout: the 32-byte header, one descriptor per entry *in the order given* (no padding
//! between descriptors), then the payloads in the same order, each starting at the next
//! multiple of the alignment (counted from the start of the bundle) with zero bytes
//! before it. An empty entry (the HIP driver's host entry) takes no space: it gets the
//! aligned offset the next payload starts at. Any non-zero alignment is accepted, as in
//! LLVM (`alignTo` rounds up to a multiple, powers of two are not required).

use std::vec::Vec;

use std::io::Write;

use zerocopy::byteorder::little_endian::U64;
use zerocopy::IntoBytes;

use super::{len64, write_zeros, WriteError};
use crate::error::{Error, ErrorKind};
use crate::raw::{BundleEntryHeader, BundleHeader, BUNDLE_MAGIC};

tools_pub! {
    /// Where each payload goes, computed before anything is written.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct BundleLayout {
        /// Payload offset of each entry, in entry order.
        pub offsets: Vec<u64>,
        /// Size of header and descriptor table.
        pub header_len: u64,
        /// Total size of the bundle (end of the last payload, at least `header_len`).
        pub len: u64,
    }
}

/// Rounds `n` up to a multiple of `align` (`align > 0`), as LLVM's `alignTo` does.
fn align_to(n: u64, align: u64) -> Option<u64> {
    let rem = n.checked_rem(align)?;
    if rem == 0 {
        Some(n)
    } else {
        n.checked_add(align.checked_sub(rem)?)
    }
}

tools_pub! {
    /// Computes the layout of a bundle holding `entries` (`(id, payload)`) with payloads
    /// aligned to `align`.
    pub fn layout(entries: &[(&str, &[u8])], align: u64) -> Result<BundleLayout, Error> {
        if align == 0 {
            return Err(Error::new(
                ErrorKind::Malformed,
                0,
                "bundle alignment must not be zero",
            ));
        }
        let overflow = || Error::new(ErrorKind::OutOfBounds, 0, "bundle size overflows 64 bits");
        let mut header_len: u64 = 32;
        for (id, _) in entries {
            header_len = header_len
                .checked_add(24)
                .and_then(|n| n.checked_add(len64(id.len())))
                .ok_or_else(overflow)?;
        }
        let mut cursor = header_len;
        let mut offsets = Vec::with_capacity(entries.len());
        for (_, data) in entries {
            cursor = align_to(cursor, align).ok_or_else(overflow)?;
            offsets.push(cursor);
            cursor = cursor.checked_add(len64(data.len())).ok_or_else(overflow)?;
        }
        Ok(BundleLayout {
            offsets,
            header_len,
            len: cursor,
        })
    }
}

/// Writes the bundle of `entries` (`(id, payload)`, in this order) with payload alignment
/// `align` to `out`; returns its size.
pub fn write_bundle<W: Write + ?Sized>(
    out: &mut W,
    entries: &[(&str, &[u8])],
    align: u64,
) -> Result<u64, WriteError> {
    let l = layout(entries, align)?;
    let header = BundleHeader {
        magic: *BUNDLE_MAGIC,
        num_entries: U64::new(len64(entries.len())),
    };
    out.write_all(header.as_bytes())?;
    for ((id, data), offset) in entries.iter().zip(&l.offsets) {
        let d = BundleEntryHeader {
            offset: U64::new(*offset),
            size: U64::new(len64(data.len())),
            id_len: U64::new(len64(id.len())),
        };
        out.write_all(d.as_bytes())?;
        out.write_all(id.as_bytes())?;
    }
    let mut pos = l.header_len;
    for ((_, data), offset) in entries.iter().zip(&l.offsets) {
        write_zeros(out, offset.saturating_sub(pos))?;
        out.write_all(data)?;
        pos = offset.saturating_add(len64(data.len()));
    }
    Ok(l.len)
}

/// The bundle of `entries` with payload alignment `align`, as a new buffer.
pub fn bundle_to_vec(entries: &[(&str, &[u8])], align: u64) -> Result<Vec<u8>, Error> {
    let l = layout(entries, align)?;
    let mut out = Vec::new();
    out.try_reserve_exact(usize::try_from(l.len).unwrap_or(usize::MAX))
        .map_err(|_| {
            Error::new(
                ErrorKind::OutOfMemory,
                0,
                "cannot reserve memory for the bundle",
            )
        })?;
    match write_bundle(&mut out, entries, align) {
        Ok(_) => Ok(out),
        Err(WriteError::Invalid(e)) => Err(e),
        // Writing to a Vec cannot fail.
        Err(WriteError::Io(_)) => Err(Error::new(
            ErrorKind::OutOfMemory,
            0,
            "cannot grow the bundle buffer",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::Bundle;
    use crate::options::Limits;
    use std::vec;

    #[test]
    fn layout_matches_llvm_rules() {
        let host: &[u8] = b"";
        let dev: &[u8] = b"\x7fELF....";
        let entries = [
            ("host-x86_64-unknown-linux-gnu-", host),
            ("hipv4-amdgcn-amd-amdhsa--gfx906", dev),
        ];
        let l = layout(&entries, 4096).unwrap();
        assert_eq!(l.header_len, 32 + 24 + 30 + 24 + 31);
        // The empty host entry sits where the next payload starts.
        assert_eq!(l.offsets, vec![4096, 4096]);
        assert_eq!(l.len, 4104);
        let v = bundle_to_vec(&entries, 4096).unwrap();
        assert_eq!(v.len(), 4104);
        assert!(v[l.header_len as usize..4096].iter().all(|&b| b == 0));
        let b = Bundle::parse(&v, &Limits::default()).unwrap();
        let e: Vec<_> = b.entries().collect();
        assert_eq!(e[1].data, dev);
        assert_eq!(e[0].offset, 4096);
        // Non-power-of-two alignments round up to a multiple, like llvm::alignTo.
        assert_eq!(layout(&entries, 3).unwrap().offsets, vec![141, 141]);
        assert_eq!(
            layout(&entries, 0).unwrap_err().kind(),
            ErrorKind::Malformed
        );
    }
}
