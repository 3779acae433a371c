//! Bounds-checked access to byte slices: the only place that turns offsets into slices.

use crate::error::{Error, ErrorKind, Result};
use zerocopy::{FromBytes, Immutable, KnownLayout};

/// Converts a `usize` to `u64` (lossless on every supported platform).
#[inline]
pub(crate) fn u64_of(n: usize) -> u64 {
    n as u64
}

/// `data[offset .. offset + size]`, with overflow and bounds checked.
///
/// A range that starts inside the data but runs past its end is [`ErrorKind::Truncated`]
/// when `truncated_if_short` holds, else [`ErrorKind::OutOfBounds`].
pub(crate) fn sub<'d>(
    data: &'d [u8],
    offset: u64,
    size: u64,
    what: &'static str,
) -> Result<&'d [u8]> {
    let end = offset
        .checked_add(size)
        .ok_or(Error::new(ErrorKind::OutOfBounds, offset, what))?;
    let (start, end) = match (usize::try_from(offset), usize::try_from(end)) {
        (Ok(s), Ok(e)) => (s, e),
        _ => return Err(Error::new(ErrorKind::OutOfBounds, offset, what)),
    };
    data.get(start..end)
        .ok_or(Error::new(ErrorKind::OutOfBounds, offset, what))
}

/// `data[offset..]`, bounds checked.
pub(crate) fn rest<'d>(data: &'d [u8], offset: u64, what: &'static str) -> Result<&'d [u8]> {
    usize::try_from(offset)
        .ok()
        .and_then(|o| data.get(o..))
        .ok_or(Error::new(ErrorKind::OutOfBounds, offset, what))
}

/// Reads a `T` in place at `offset`; a short buffer is [`ErrorKind::Truncated`].
pub(crate) fn read<'d, T: FromBytes + KnownLayout + Immutable>(
    data: &'d [u8],
    offset: u64,
    what: &'static str,
) -> Result<&'d T> {
    let tail =
        rest(data, offset, what).map_err(|e| Error::new(ErrorKind::Truncated, e.offset(), what))?;
    T::ref_from_prefix(tail)
        .map(|(t, _)| t)
        .map_err(|_| Error::new(ErrorKind::Truncated, offset, what))
}

/// `e_machine` of an ELF file, if the header can be read: the one place the crate reads
/// it before knowing anything else of the file (container discovery, image sniffing and
/// device ELF identification all ask here).
pub fn elf_machine(data: &[u8]) -> Option<u16> {
    if !data.starts_with(crate::raw::ELF_MAGIC) {
        return None;
    }
    let m = data.get(18..20)?;
    let v = <[u8; 2]>::try_from(m).ok()?;
    Some(match data.get(5) {
        Some(2) => u16::from_be_bytes(v),
        _ => u16::from_le_bytes(v),
    })
}

/// Rounds `n` up to a multiple of `align` (a power of two), `None` on overflow.
#[allow(dead_code)]
pub(crate) fn align_up(n: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    let mask = align.checked_sub(1)?;
    n.checked_add(mask).map(|v| v & !mask)
}

/// The offset of the first non-zero byte at or after `from`, or `None` if only zeros follow.
pub(crate) fn skip_zeros(data: &[u8], from: usize) -> Option<usize> {
    let tail = data.get(from..)?;
    tail.iter()
        .position(|&b| b != 0)
        .and_then(|p| from.checked_add(p))
}

/// Checked `a + b` that reports [`ErrorKind::OutOfBounds`] at `offset` on overflow.
pub(crate) fn add(a: u64, b: u64, offset: u64, what: &'static str) -> Result<u64> {
    a.checked_add(b)
        .ok_or(Error::new(ErrorKind::OutOfBounds, offset, what))
}

/// Checked `a * b` that reports [`ErrorKind::OutOfBounds`] at `offset` on overflow.
pub(crate) fn mul(a: u64, b: u64, offset: u64, what: &'static str) -> Result<u64> {
    a.checked_mul(b)
        .ok_or(Error::new(ErrorKind::OutOfBounds, offset, what))
}

/// Position of `needle` in `haystack` at or after `from`.
pub(crate) fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    let tail = haystack.get(from..)?;
    if needle.is_empty() {
        return Some(from);
    }
    tail.windows(needle.len())
        .position(|w| w == needle)
        .and_then(|p| from.checked_add(p))
}

/// Offset of `inner` within `outer`, when `inner` is a sub-slice of `outer`.
///
/// Uses address arithmetic only (no unsafe); returns `None` for unrelated slices.
pub(crate) fn offset_in(outer: &[u8], inner: &[u8]) -> Option<u64> {
    let o = outer.as_ptr() as usize;
    let i = inner.as_ptr() as usize;
    let d = i.checked_sub(o)?;
    let end = d.checked_add(inner.len())?;
    (end <= outer.len()).then_some(u64_of(d))
}

/// Length of the little-endian ELF64 file at the start of `data`: the furthest byte its
/// headers account for (the header, its non-empty section and program header tables, the
/// file data of every section but `SHT_NOBITS` ones and of every segment; `FORMATS.md` §7).
///
/// The one answer to "where does this ELF file end", for a cubin in a fatbinary
/// (`nvfatbin::trim_image`) and a bare device ELF a registration wrapper points at
/// (`registration::view::elf_len`). Errors (at offset 0 of `data`): `BadContainer`
/// for a header or a header table that does not read, `OutOfBounds` for a range that
/// overflows, `Truncated` for an end past `data`.
pub(crate) fn elf64_len(data: &[u8]) -> Result<u64> {
    use object::elf::FileHeader64;
    use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
    use object::LittleEndian as LE;

    let bad = |what| move |_| Error::new(ErrorKind::BadContainer, 0, what);
    let overflow = |what| Error::new(ErrorKind::OutOfBounds, 0, what);
    let h = FileHeader64::<LE>::parse(data).map_err(bad("device ELF header is malformed"))?;
    let mut end = u64::from(h.e_ehsize(LE));
    let sections = h
        .section_headers(LE, data)
        .map_err(bad("device ELF section table lies outside the data"))?;
    if !sections.is_empty() {
        end = end.max(table_end(h.e_shoff(LE), sections.len(), h.e_shentsize(LE))?);
    }
    for s in sections {
        if s.sh_type(LE) != object::elf::SHT_NOBITS {
            let e = s
                .sh_offset(LE)
                .checked_add(s.sh_size(LE))
                .ok_or(overflow("device ELF section range overflows"))?;
            end = end.max(e);
        }
    }
    let segments = h
        .program_headers(LE, data)
        .map_err(bad("device ELF program header table lies outside the data"))?;
    if !segments.is_empty() {
        end = end.max(table_end(h.e_phoff(LE), segments.len(), h.e_phentsize(LE))?);
    }
    for p in segments {
        let e = p
            .p_offset(LE)
            .checked_add(p.p_filesz(LE))
            .ok_or(overflow("device ELF segment range overflows"))?;
        end = end.max(e);
    }
    if end > u64_of(data.len()) {
        return Err(Error::new(
            ErrorKind::Truncated,
            0,
            "device ELF runs past the end of its region",
        ));
    }
    Ok(end)
}

/// End of an ELF header table of `n` entries of `size` bytes at `offset`.
fn table_end(offset: u64, n: usize, size: u16) -> Result<u64> {
    u64_of(n)
        .checked_mul(u64::from(size))
        .and_then(|len| offset.checked_add(len))
        .ok_or(Error::new(
            ErrorKind::OutOfBounds,
            0,
            "device ELF header table range overflows",
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_checks_overflow_and_bounds() {
        let d = [0u8; 16];
        assert_eq!(sub(&d, 4, 4, "x").unwrap().len(), 4);
        assert_eq!(sub(&d, 16, 0, "x").unwrap().len(), 0);
        assert_eq!(
            sub(&d, 8, 9, "x").unwrap_err().kind(),
            ErrorKind::OutOfBounds
        );
        assert_eq!(
            sub(&d, u64::MAX, 2, "x").unwrap_err().kind(),
            ErrorKind::OutOfBounds
        );
        assert_eq!(align_up(5, 8), Some(8));
        assert_eq!(align_up(u64::MAX, 8), None);
        assert_eq!(skip_zeros(&[0, 0, 3], 0), Some(2));
        assert_eq!(skip_zeros(&[0, 0], 0), None);
        assert_eq!(offset_in(&d, &d[3..5]), Some(3));
        assert_eq!(find(b"abcabc", b"ca", 0), Some(2));
    }
}
