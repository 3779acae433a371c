//! Uncompressed binary offload bundles (`__CLANG_OFFLOAD_BUNDLE__`, `FORMATS.md` §2).
//!
//! [`Bundle::parse`] validates the whole descriptor table once (bounds, overflow, limits,
//! ID encoding) without allocating; [`Bundle::entries`] then walks it again and hands out
//! the payloads as slices of the caller's buffer, in header order.

use alloc::vec::Vec;

use crate::bytes::{self, u64_of};
use crate::ccob::{ContentReader, Decompressor};
use crate::error::{Error, ErrorKind, Result};
use crate::options::Limits;
use crate::raw::{BundleEntryHeader, BundleHeader, BUNDLE_MAGIC};

/// Size of the fixed bundle header.
const HEADER_SIZE: u64 = 32;
/// Size of the fixed part of an entry descriptor.
const DESCRIPTOR_SIZE: u64 = 24;

/// A parsed binary offload bundle borrowing the caller's bytes.
#[derive(Clone, Copy, Debug)]
pub struct Bundle<'data> {
    data: &'data [u8],
    num_entries: u64,
    table_end: u64,
    extent: u64,
}

/// One entry of a [`Bundle`]: its ID exactly as stored and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundleEntry<'data> {
    /// Position in the header (0-based).
    pub index: usize,
    /// The bundle entry ID as stored, with trailing NUL bytes removed.
    pub id: &'data str,
    /// Payload offset from the start of the bundle.
    pub offset: u64,
    /// The payload.
    pub data: &'data [u8],
}

/// Returns true if `data` starts with the binary bundle magic.
pub fn is_bundle(data: &[u8]) -> bool {
    data.starts_with(BUNDLE_MAGIC)
}

/// The length the header of the bundle at the start of `data` describes, for a walk that
/// resumes after a bundle that does not read: the furthest end of its entries' payloads
/// (the first 4096 entries). `None` when the header or one of those descriptors does not
/// read, or an end overflows, and for a bundle without entries.
pub fn described_len(data: &[u8]) -> Option<u64> {
    let h = bytes::read::<BundleHeader>(data, 0, "").ok()?;
    let mut at = HEADER_SIZE;
    let mut end: Option<u64> = None;
    for _ in 0..h.num_entries.get().min(4096) {
        let e = bytes::read::<BundleEntryHeader>(data, at, "").ok()?;
        let e_end = e.offset.get().checked_add(e.size.get())?;
        end = Some(end.map_or(e_end, |x| x.max(e_end)));
        at = at
            .checked_add(DESCRIPTOR_SIZE)?
            .checked_add(e.id_len.get())?;
    }
    end
}

impl<'data> Bundle<'data> {
    /// Parses the bundle that starts at `data[0]`.
    ///
    /// `data` may extend past the bundle (the rest of a `.hip_fatbin` section); payloads
    /// must lie inside `data`. The bundle's own size is [`Bundle::len`].
    pub fn parse(data: &'data [u8], limits: &Limits) -> Result<Self> {
        let (num_entries, table_end, extent) = parse_table(data, u64_of(data.len()), limits)?;
        Ok(Bundle {
            data,
            num_entries,
            table_end,
            extent,
        })
    }

    tools_pub! {
        /// Size of the bundle: the end of its last payload (at least the end of its header).
        pub fn len(&self) -> u64 {
            self.extent
        }
    }

    tools_pub! {
        /// True if the bundle has no entries.
        pub fn is_empty(&self) -> bool {
            self.num_entries == 0
        }
    }

    tools_pub! {
        /// Number of entries declared in the header.
        pub fn entry_count(&self) -> u64 {
            self.num_entries
        }
    }

    tools_pub! {
        /// Size of the header including the descriptor table.
        pub fn header_len(&self) -> u64 {
            self.table_end
        }
    }

    tools_pub! {
        /// The bundle's bytes, `[0, len)`.
        pub fn data(&self) -> &'data [u8] {
            bytes::sub(self.data, 0, self.extent, "bundle").unwrap_or(self.data)
        }
    }

    /// The entries in header order.
    pub fn entries(&self) -> BundleEntries<'data> {
        BundleEntries {
            data: self.data,
            pos: HEADER_SIZE,
            index: 0,
            remaining: self.num_entries,
        }
    }
}

/// Validates the header and descriptor table at the start of `data` and the payload bounds
/// against `content_len` (the size of the whole bundle content, which `data` may only
/// begin): (entry count, end of the table, end of the last payload).
fn parse_table(data: &[u8], content_len: u64, limits: &Limits) -> Result<(u64, u64, u64)> {
    let header: &BundleHeader = bytes::read(data, 0, "bundle header truncated")?;
    if &header.magic != BUNDLE_MAGIC {
        return Err(Error::new(
            ErrorKind::BadMagic,
            0,
            "not a clang offload bundle (no __CLANG_OFFLOAD_BUNDLE__ magic)",
        ));
    }
    let num_entries = header.num_entries.get();
    if num_entries > limits.max_entries {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            24,
            "bundle entry count exceeds the limit",
        ));
    }
    // Each descriptor takes at least 24 bytes, so the pass below stops after at most
    // len / 24 steps whatever the declared count.
    // One pass over the descriptor table: every descriptor and ID is checked, and the
    // payload ranges are summed up (the furthest end, the lowest start of a non-empty
    // payload, whether any range overflows or runs past the content). A payload can only be
    // judged against the end of the table once the table has been read; when one fails,
    // `payload_error` walks the table again to report the first failing entry.
    let mut pos = HEADER_SIZE;
    let mut extent = 0u64;
    let mut lowest_start = u64::MAX;
    let mut out_of_bounds = false;
    for _ in 0..num_entries {
        let (d, next) = check_descriptor(data, pos, limits)?;
        let (offset, size) = (d.offset.get(), d.size.get());
        match offset.checked_add(size) {
            Some(end) if end <= content_len => {
                extent = extent.max(end);
                if size != 0 {
                    lowest_start = lowest_start.min(offset);
                }
            }
            _ => out_of_bounds = true,
        }
        pos = next;
    }
    let table_end = pos;
    if out_of_bounds || lowest_start < table_end {
        return Err(payload_error(data, content_len, num_entries, table_end));
    }
    Ok((num_entries, table_end, extent.max(table_end)))
}

/// The error of the first entry (in header order) whose payload overflows, runs past
/// `content_len` or overlaps the header ending at `table_end`; the table was read whole.
fn payload_error(data: &[u8], content_len: u64, num_entries: u64, table_end: u64) -> Error {
    let mut pos = HEADER_SIZE;
    for _ in 0..num_entries {
        let Ok((d, next)) = fixed_part(data, pos) else {
            break;
        };
        let (offset, size) = (d.offset.get(), d.size.get());
        let size_at = pos.saturating_add(8);
        let Some(end) = offset.checked_add(size) else {
            return Error::new(
                ErrorKind::OutOfBounds,
                size_at,
                "bundle entry offset + size overflows",
            );
        };
        if end > content_len {
            let at = if offset > content_len { pos } else { size_at };
            let kind = if offset <= content_len && size <= content_len {
                ErrorKind::Truncated
            } else {
                ErrorKind::OutOfBounds
            };
            return Error::new(
                kind,
                at,
                "bundle entry payload runs past the end of the data",
            );
        }
        if size != 0 && offset < table_end {
            return Error::new(
                ErrorKind::Malformed,
                pos,
                "bundle entry payload overlaps the bundle header",
            );
        }
        pos = next;
    }
    // Not reached: the caller saw a failing entry in the same table.
    Error::new(
        ErrorKind::Malformed,
        HEADER_SIZE,
        "bundle entry payloads are inconsistent",
    )
}

/// The fixed part of the descriptor at `pos` and the offset of the next descriptor
/// (neither the ID's length against a limit nor its bytes are checked).
#[inline]
fn fixed_part(data: &[u8], pos: u64) -> Result<(&BundleEntryHeader, u64)> {
    let d: &BundleEntryHeader = bytes::read(data, pos, "bundle entry descriptor truncated")?;
    let next = pos
        .saturating_add(DESCRIPTOR_SIZE)
        .saturating_add(d.id_len.get());
    Ok((d, next))
}

/// Checks the descriptor at `pos` (its ID's length against the limit and the data, its
/// bytes as UTF-8) without building the ID: (fixed part, offset of the next descriptor).
fn check_descriptor<'data>(
    data: &'data [u8],
    pos: u64,
    limits: &Limits,
) -> Result<(&'data BundleEntryHeader, u64)> {
    let d: &BundleEntryHeader = bytes::read(data, pos, "bundle entry descriptor truncated")?;
    let id_len = d.id_len.get();
    if id_len > limits.max_id_len {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            pos.saturating_add(16),
            "bundle entry ID length exceeds the limit",
        ));
    }
    let id_at = pos.saturating_add(DESCRIPTOR_SIZE);
    let raw = bytes::sub(data, id_at, id_len, "bundle entry ID truncated")
        .map_err(|e| Error::new(ErrorKind::Truncated, e.offset(), e.what()))?;
    // IDs are ASCII in practice: the word-at-a-time ASCII test settles them; anything
    // else gets the full UTF-8 check (on the ID without its trailing NULs).
    if !raw.is_ascii() && core::str::from_utf8(trim_nuls(raw)).is_err() {
        return Err(Error::new(
            ErrorKind::InvalidId,
            id_at,
            "bundle entry ID is not valid UTF-8",
        ));
    }
    Ok((d, id_at.saturating_add(id_len)))
}

/// `raw` without its trailing NUL bytes.
#[inline]
fn trim_nuls(raw: &[u8]) -> &[u8] {
    match raw.iter().rposition(|&b| b != 0) {
        Some(last) => raw.get(..=last).unwrap_or(raw),
        None => raw.get(..0).unwrap_or_default(),
    }
}

/// Reads the descriptor at `pos` of a table that `parse_table` accepted: (fixed part, ID,
/// offset of the next descriptor). `None` only if the table is not one it accepted.
#[inline]
fn descriptor(data: &[u8], pos: u64) -> Option<(&BundleEntryHeader, &str, u64)> {
    let (d, next) = fixed_part(data, pos).ok()?;
    let raw = bytes::sub(data, pos.saturating_add(DESCRIPTOR_SIZE), d.id_len.get(), "").ok()?;
    let id = core::str::from_utf8(trim_nuls(raw)).ok()?;
    Some((d, id, next))
}

/// Iterator over the entries of a [`Bundle`], in header order.
#[derive(Clone, Debug)]
pub struct BundleEntries<'data> {
    data: &'data [u8],
    pos: u64,
    index: usize,
    remaining: u64,
}

impl<'data> Iterator for BundleEntries<'data> {
    type Item = BundleEntry<'data>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining = self.remaining.saturating_sub(1);
        // The table was validated by `Bundle::parse`; a failure here cannot happen, and
        // ends the iteration rather than panicking.
        let (d, id, next) = descriptor(self.data, self.pos)?;
        let data = bytes::sub(self.data, d.offset.get(), d.size.get(), "payload").ok()?;
        let entry = BundleEntry {
            index: self.index,
            id,
            offset: d.offset.get(),
            data,
        };
        self.pos = next;
        self.index = self.index.saturating_add(1);
        Some(entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

/// The header and descriptor table of a binary bundle whose payloads are not in memory:
/// the front of a compressed bundle's content, read from a [`ContentReader`].
///
/// Payload bounds are checked against the declared size of the whole content, as
/// [`Bundle::parse`] checks them against the buffer.
#[derive(Clone, Debug)]
pub struct BundleTable {
    header: Vec<u8>,
    num_entries: u64,
    table_end: u64,
    extent: u64,
}

/// One entry of a [`BundleTable`]: its ID and where its payload lies in the content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableEntry<'a> {
    /// Position in the header (0-based).
    pub index: usize,
    /// The bundle entry ID as stored, with trailing NUL bytes removed.
    pub id: &'a str,
    /// Payload offset from the start of the bundle.
    pub offset: u64,
    /// Payload size.
    pub size: u64,
}

impl BundleTable {
    /// Reads the bundle header and the descriptor table from the front of `reader` (which
    /// must be at position 0), and nothing more.
    ///
    /// `Ok(None)` when the content does not start with the binary bundle magic (a text
    /// bundle, or something that [`CompressedBundle::decompress`] plus the full readers
    /// will judge). Errors in the table are located in the decompressed content
    /// ([`Error::decompressed_offset`], with `offset` 0 = the compressed bundle); errors of
    /// the stream are located in the compressed bundle.
    ///
    /// [`CompressedBundle::decompress`]: crate::ccob::CompressedBundle::decompress
    pub fn read<D: Decompressor>(
        reader: &mut ContentReader<'_, D>,
        limits: &Limits,
    ) -> Result<Option<Self>> {
        let content_len = reader.bundle().uncompressed_size();
        if content_len < HEADER_SIZE {
            return Ok(None);
        }
        let mut header = Vec::new();
        grow(reader, &mut header, HEADER_SIZE)?;
        if !header.starts_with(BUNDLE_MAGIC) {
            return Ok(None);
        }
        let in_content = |e: Error| e.in_decompressed(0);
        let h: &BundleHeader =
            bytes::read(&header, 0, "bundle header truncated").map_err(in_content)?;
        let num_entries = h.num_entries.get();
        if num_entries > limits.max_entries {
            return Err(in_content(Error::new(
                ErrorKind::LimitExceeded,
                24,
                "bundle entry count exceeds the limit",
            )));
        }
        let mut pos = HEADER_SIZE;
        for _ in 0..num_entries {
            if !grow(reader, &mut header, DESCRIPTOR_SIZE)? {
                break;
            }
            let d: &BundleEntryHeader =
                bytes::read(&header, pos, "bundle entry descriptor truncated")
                    .map_err(in_content)?;
            let id_len = d.id_len.get();
            if id_len > limits.max_id_len {
                return Err(in_content(Error::new(
                    ErrorKind::LimitExceeded,
                    pos.saturating_add(16),
                    "bundle entry ID length exceeds the limit",
                )));
            }
            if !grow(reader, &mut header, id_len)? {
                break;
            }
            pos = pos.saturating_add(DESCRIPTOR_SIZE).saturating_add(id_len);
        }
        // A table cut short by the end of the content is reported by the full check.
        Self::parse(header, content_len, limits)
            .map(Some)
            .map_err(in_content)
    }

    /// Checks a header and descriptor table (`header` must hold all of it) of a bundle
    /// whose content is `content_len` bytes long.
    pub fn parse(header: Vec<u8>, content_len: u64, limits: &Limits) -> Result<Self> {
        let (num_entries, table_end, extent) = parse_table(&header, content_len, limits)?;
        Ok(BundleTable {
            header,
            num_entries,
            table_end,
            extent,
        })
    }

    /// Number of entries declared in the header.
    pub fn entry_count(&self) -> u64 {
        self.num_entries
    }

    /// Size of the header including the descriptor table.
    pub fn header_len(&self) -> u64 {
        self.table_end
    }

    /// The end of the last payload (at least the end of the table).
    pub fn len(&self) -> u64 {
        self.extent
    }

    /// True if the bundle has no entries.
    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// The entries in header order.
    pub fn entries(&self) -> TableEntries<'_> {
        TableEntries {
            header: &self.header,
            pos: HEADER_SIZE,
            index: 0,
            remaining: self.num_entries,
        }
    }
}

/// Appends the next `n` bytes of `reader` (fewer at the end of the content) to `header`.
/// Returns false if the content ended first.
fn grow<D: Decompressor>(
    reader: &mut ContentReader<'_, D>,
    header: &mut Vec<u8>,
    n: u64,
) -> Result<bool> {
    let short = n > reader.remaining();
    let n = n.min(reader.remaining());
    let start = header.len();
    let add = usize::try_from(n).map_err(|_| {
        Error::new(
            ErrorKind::OutOfMemory,
            u64_of(start),
            "bundle header does not fit in memory",
        )
        .in_decompressed(0)
    })?;
    let end = start.checked_add(add).ok_or(
        Error::new(
            ErrorKind::OutOfMemory,
            u64_of(start),
            "bundle header does not fit in memory",
        )
        .in_decompressed(0),
    )?;
    header.try_reserve_exact(add).map_err(|_| {
        Error::new(
            ErrorKind::OutOfMemory,
            u64_of(start),
            "cannot reserve memory for the bundle header",
        )
        .in_decompressed(0)
    })?;
    header.resize(end, 0);
    reader.read_exact(header.get_mut(start..).unwrap_or_default())?;
    Ok(!short)
}

/// Iterator over the entries of a [`BundleTable`], in header order.
#[derive(Clone, Debug)]
pub struct TableEntries<'a> {
    header: &'a [u8],
    pos: u64,
    index: usize,
    remaining: u64,
}

impl<'a> Iterator for TableEntries<'a> {
    type Item = TableEntry<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining = self.remaining.saturating_sub(1);
        // Validated by `BundleTable::parse`.
        let (d, id, next) = descriptor(self.header, self.pos)?;
        let entry = TableEntry {
            index: self.index,
            id,
            offset: d.offset.get(),
            size: d.size.get(),
        };
        self.pos = next;
        self.index = self.index.saturating_add(1);
        Some(entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for TableEntries<'_> {}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn build(entries: &[(&str, &[u8])], align: u64) -> Vec<u8> {
        let mut table = 32u64;
        for (id, _) in entries {
            table += 24 + id.len() as u64;
        }
        let mut out = Vec::new();
        out.extend_from_slice(BUNDLE_MAGIC);
        out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        let mut cursor = table;
        let mut offsets = Vec::new();
        for (_, data) in entries {
            cursor = cursor.div_ceil(align) * align;
            offsets.push(cursor);
            cursor += data.len() as u64;
        }
        for ((id, data), off) in entries.iter().zip(&offsets) {
            out.extend_from_slice(&off.to_le_bytes());
            out.extend_from_slice(&(data.len() as u64).to_le_bytes());
            out.extend_from_slice(&(id.len() as u64).to_le_bytes());
            out.extend_from_slice(id.as_bytes());
        }
        for ((_, data), off) in entries.iter().zip(&offsets) {
            out.resize(*off as usize, 0);
            out.extend_from_slice(data);
        }
        out
    }

    #[test]
    fn parses_entries_in_header_order() {
        let b = build(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx906", b"abc"),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"defg"),
            ],
            8,
        );
        let bundle = Bundle::parse(&b, &Limits::default()).unwrap();
        let e: Vec<_> = bundle.entries().collect();
        assert_eq!(e.len(), 3);
        assert_eq!(e[1].id, "hipv4-amdgcn-amd-amdhsa--gfx906");
        assert_eq!(e[1].data, b"abc");
        assert_eq!(e[2].data, b"defg");
        assert_eq!(bundle.len(), b.len() as u64);
    }

    #[test]
    fn rejects_bad_tables() {
        let b = build(&[("hip-amdgcn-amd-amdhsa--gfx906", b"abc")], 1);
        // Truncated inside the descriptor table.
        let err = Bundle::parse(&b[..40], &Limits::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Truncated);
        // Payload offset + size overflow.
        let mut bad = b.clone();
        bad[40..48].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
        let err = Bundle::parse(&bad, &Limits::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OutOfBounds);
        assert_eq!(err.offset(), 40);
        // A huge entry count is refused up front.
        let mut bad = b.clone();
        bad[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = Bundle::parse(&bad, &Limits::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    }
}
