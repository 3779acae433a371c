//! LLVM OffloadBinary (`10 FF 10 AD`, `FORMATS.md` §6), versions 1, 2 and 3.
//!
//! [`OffloadBinary::parse`] validates one binary completely (header, entry table, every
//! string record, every image range, with checked arithmetic) without allocating and
//! without requiring alignment. [`OffloadBinaries`] walks a sequence of binaries laid out
//! back to back (a `.llvm.offloading` section, `clang-offload-packager` output).
//!
//! A version 3 binary may be compressed; it then parses with
//! [`OffloadBinary::is_compressed`] set and no entries, and [`OffloadBinary::inflate`]
//! rebuilds the uncompressed binary (`FORMATS.md` §6.6).

use alloc::vec::Vec;

use zerocopy::FromBytes;

use crate::bytes::{self, u64_of};
use crate::decompress::Codec;
use crate::error::{Error, ErrorKind, Result};
use crate::options::{Limits, ReadOptions};
use crate::raw::{
    OffloadBinaryHeader, OffloadBinaryHeaderV3, OffloadEntry, StringEntryV1, StringEntryV2,
    OFFLOAD_BINARY_MAGIC, OFFLOAD_ENTRY_SIZE, ZSTD_MAGIC,
};

/// Returns true if `data` starts with the OffloadBinary magic.
pub fn is_offload_binary(data: &[u8]) -> bool {
    data.starts_with(OFFLOAD_BINARY_MAGIC)
}

/// One parsed OffloadBinary borrowing the caller's bytes.
#[derive(Clone, Copy, Debug)]
pub struct OffloadBinary<'data> {
    data: &'data [u8],
    version: u32,
    entries_offset: u64,
    count: u64,
    inflated_size: u64,
    /// The bytes holding the binary's strings, checked as UTF-8 once (see [`Span`]); empty
    /// when they were not (a lookup then checks the value it returns).
    text: &'data str,
    /// What the entries' images may be ([`Holds`]): noted by a sequence's parse (a binary
    /// read again from the sequence has the sequence's); anything after
    /// [`OffloadBinary::parse`], which does not read the images.
    holds: Holds,
}

/// What the images of an OffloadBinary's entries are, as a sequence's parse saw them: an
/// OffloadBinary ([`Holds::NESTED`], `FORMATS.md` §6.8), a fatbinary of image kind 4
/// ([`Holds::FATBINS`]). The walks that look for them skip a binary without.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Holds(u8);

impl Holds {
    const NESTED: Holds = Holds(1);
    const FATBINS: Holds = Holds(2);
    /// Anything: a binary not checked.
    const ANY: Holds = Holds(3);

    fn has(self, what: Holds) -> bool {
        self.0 & what.0 != 0
    }

    /// What the entry of image kind `kind` with image `image` is.
    #[inline]
    fn of(kind: u16, image: &[u8]) -> Holds {
        let mut holds = 0;
        if is_offload_binary(image) {
            holds |= Holds::NESTED.0;
        }
        // `ImageKind` 4: a fatbinary (`FORMATS.md` §6).
        if kind == 4 && crate::nvfatbin::is_fatbin(image) {
            holds |= Holds::FATBINS.0;
        }
        Holds(holds)
    }
}

impl core::ops::BitOrAssign for Holds {
    fn bitor_assign(&mut self, other: Holds) {
        self.0 |= other.0;
    }
}

tools_fields! {
    /// One entry (image) of an OffloadBinary.
    #[derive(Clone, Copy, Debug)]
    pub struct OffloadBinaryEntry<'data> {
        /// Position of the entry in its binary (0-based).
        pub index: usize,
        /// The raw `ImageKind` value (1 object, 2 bitcode, 3 cubin, 4 fatbinary, 5 PTX, 6 SPIR-V).
        pub image_kind: u16,
        /// The raw `OffloadKind` value (1 OpenMP, 2 CUDA, 3 or 4 HIP, 8 SYCL; see `FORMATS.md` §6.5).
        pub offload_kind: u16,
        /// The image.
        pub image: &'data [u8],
        /// The string map.
        pub strings: StringMap<'data>,
        @tools
        /// Entry flags.
        pub flags: u32,
        /// Offset of the image from the start of its binary.
        pub image_offset: u64,
    }
}

/// The key/value strings of an entry (`triple`, `arch`, and any others), in stored order.
#[derive(Clone, Copy, Debug)]
pub struct StringMap<'data> {
    binary: &'data [u8],
    offset: u64,
    count: u64,
    version: u32,
    /// The binary's strings checked as UTF-8 ([`OffloadBinary`]'s `text`).
    text: &'data str,
}

impl<'data> StringMap<'data> {
    /// Number of key/value pairs.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True if there are no strings.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The pairs in stored order.
    pub fn iter(&self) -> StringIter<'data> {
        StringIter {
            map: *self,
            index: 0,
        }
    }

    /// The value of `key` (the first record with that key), if any.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&'data [u8]> {
        // The records were checked when the binary was parsed: the record table is sliced
        // once, each key compared in place (its bytes, then the NUL after them) and only
        // the match's value decoded.
        let key = key.as_bytes();
        // A key shorter than 8 bytes and its NUL, as one little-endian word and the mask of
        // its bytes: compared with one load where 8 bytes follow the stored key's offset.
        let word = if key.len() < 8 {
            // Built from the last byte down; the mask starts with the NUL's byte.
            let (mut word, mut mask) = (0u64, 0xFFu64);
            for &b in key.iter().rev() {
                word = word.wrapping_shl(8) | u64::from(b);
                mask = mask.wrapping_shl(8) | 0xFF;
            }
            // A stored key holds no NUL: a key with one matches none.
            if has_zero_byte(word | !(mask >> 8)) {
                return None;
            }
            Some((word, mask))
        } else {
            if key.contains(&0) {
                return None;
            }
            None
        };
        self.find(key, word)
    }

    /// [`StringMap::get`] once the key is known to hold no NUL (`word`: the key as one word
    /// and its mask, when it is shorter than 8 bytes).
    fn find(&self, key: &[u8], word: Option<(u64, u64)>) -> Option<&'data [u8]> {
        let len = self.count.checked_mul(self.stride())?;
        let table = bytes::sub(self.binary, self.offset, len, "").ok()?;
        // The record's value field: (offset, size), or (offset, no size) for version 1.
        let (offset, size) = if self.version == 1 {
            let r = find_key::<16>(self.binary, table, key, word)?;
            (u64_of_le(r.get(8..)?)?, None)
        } else {
            let r = find_key::<24>(self.binary, table, key, word)?;
            (u64_of_le(r.get(8..)?)?, Some(u64_of_le(r.get(16..)?)?))
        };
        match size {
            Some(size) => bytes::sub(self.binary, offset, size, "").ok(),
            None => c_string(self.binary, offset, 0, u64::MAX).ok(),
        }
    }

    /// The value of `key` as UTF-8 text, if present and valid.
    #[inline]
    pub fn get_str(&self, key: &str) -> Option<&'data str> {
        let value = self.get(key)?;
        // A value inside the strings `parse` checked as UTF-8 is text exactly when it
        // starts and ends on character boundaries there (UTF-8 synchronises itself): a
        // slice of that text, without decoding it again.
        match bytes::offset_in(self.text.as_bytes(), value).and_then(|d| usize::try_from(d).ok())
        {
            Some(start) => self.text.get(start..start.checked_add(value.len())?),
            None => core::str::from_utf8(value).ok(),
        }
    }

    fn stride(&self) -> u64 {
        if self.version == 1 {
            16
        } else {
            24
        }
    }

    /// Offset of record `i` in the binary.
    fn record_at(&self, i: u64) -> Result<u64> {
        bytes::add(
            self.offset,
            bytes::mul(
                i,
                self.stride(),
                self.offset,
                "string record offset overflows",
            )?,
            self.offset,
            "string record offset overflows",
        )
    }

    /// Decodes record `i`: (key, value).
    fn record(&self, i: u64) -> Result<(&'data str, &'data [u8])> {
        self.record_limited(i, u64::MAX)
    }

    /// Reads record `i` (the key and value checked against the binary, strings no longer
    /// than `max_len`): (key bytes, value, offset of the record).
    fn record_bytes(&self, i: u64, max_len: u64) -> Result<(&'data [u8], &'data [u8], u64)> {
        let at = self.record_at(i)?;
        let (key_offset, value_offset, size) = if self.version == 1 {
            let r: &StringEntryV1 = bytes::read(self.binary, at, "string record truncated")?;
            (r.key_offset.get(), r.value_offset.get(), None)
        } else {
            let r: &StringEntryV2 = bytes::read(self.binary, at, "string record truncated")?;
            let size = Some(r.value_size.get());
            (r.key_offset.get(), r.value_offset.get(), size)
        };
        let (value, _) = self.value(at, value_offset, size, max_len)?;
        let key = c_string(self.binary, key_offset, at, max_len)?;
        Ok((key, value, at))
    }

    /// The value of the string record read at `at` whose value lies at `offset`:
    /// NUL-terminated and no longer than `max_len` in a version 1 map (`size` `None`),
    /// `size` bytes in later ones, checked against the binary (errors located at the
    /// record's value field); and the bytes it takes there (a version 1 value's NUL
    /// included).
    #[inline(always)]
    fn value(
        &self,
        at: u64,
        offset: u64,
        size: Option<u64>,
        max_len: u64,
    ) -> Result<(&'data [u8], u64)> {
        let field = at.saturating_add(8);
        match size {
            None => {
                let v = c_string(self.binary, offset, field, max_len)?;
                Ok((v, u64_of(v.len()).saturating_add(1)))
            }
            Some(size) => {
                let v = bytes::sub(
                    self.binary,
                    offset,
                    size,
                    "string value runs past the end of the binary",
                )
                .map_err(|e| Error::new(e.kind(), field, e.what()))?;
                Ok((v, size))
            }
        }
    }

    /// Decodes record `i`, refusing NUL-terminated strings longer than `max_len` (the scan
    /// for the NUL stops there).
    fn record_limited(&self, i: u64, max_len: u64) -> Result<(&'data str, &'data [u8])> {
        let (key, value, at) = self.record_bytes(i, max_len)?;
        let key = core::str::from_utf8(key).map_err(|_| key_not_utf8(at))?;
        Ok((key, value))
    }

    /// Checks the `N`-byte string records `table` (this map's, at its offset) with
    /// [`StringMap::check_record`]; `N` is a constant, so the records are stepped through
    /// without a division. A record equal to the one `checked` holds for its position in an
    /// entry was checked already (the same bytes, the same limit: entries written by LLVM
    /// share one `triple` record), and its strings are in `span`.
    #[inline(always)]
    fn check_records<const N: usize>(
        &self,
        table: &[u8],
        max_len: u64,
        checked: &mut RecordCache<N>,
        span: &mut Span,
    ) -> Result<()> {
        let mut at = self.offset;
        for (s, record) in table.chunks_exact(N).enumerate() {
            let slot = checked.get_mut(s);
            if let (Some(Some((last, _))), Some(record)) = (&slot, record.first_chunk::<N>()) {
                if last == record {
                    at = at.saturating_add(u64_of(N));
                    continue;
                }
            }
            self.check_record(record, at, max_len, slot, span)?;
            at = at.saturating_add(u64_of(N));
        }
        Ok(())
    }

    /// Checks the string record `record`, read at `at`, as [`StringMap::record_limited`]
    /// does, without building the key (an ASCII key, the usual one, needs no UTF-8
    /// decoding), and adds its key and value to `span`. A key at the offset of the record
    /// `last` holds (the last record checked at this position in an entry, and its key's
    /// length) was checked already: the same bytes, the same limit (entries written by LLVM
    /// share one `arch` key). The record is left in `last`.
    #[inline(always)]
    fn check_record<const N: usize>(
        &self,
        record: &[u8],
        at: u64,
        max_len: u64,
        last: Option<&mut Option<([u8; N], u64)>>,
        span: &mut Span,
    ) -> Result<()> {
        let truncated = || Error::new(ErrorKind::Truncated, at, "string record truncated");
        let (key_offset, value_offset, size) = if self.version == 1 {
            let r = StringEntryV1::ref_from_bytes(record).map_err(|_| truncated())?;
            (r.key_offset.get(), r.value_offset.get(), None)
        } else {
            let r = StringEntryV2::ref_from_bytes(record).map_err(|_| truncated())?;
            let size = Some(r.value_size.get());
            (r.key_offset.get(), r.value_offset.get(), size)
        };
        let (_, taken) = self.value(at, value_offset, size, max_len)?;
        span.add(value_offset, taken);
        let known = match &last {
            Some(Some((record, len))) if u64_of_le(record) == Some(key_offset) => Some(*len),
            _ => None,
        };
        let key_len = match known {
            Some(len) => len,
            None => {
                let key = c_string(self.binary, key_offset, at, max_len)?;
                if !key.is_ascii() && core::str::from_utf8(key).is_err() {
                    return Err(key_not_utf8(at));
                }
                let len = u64_of(key.len());
                // The key and its NUL.
                span.add(key_offset, len.saturating_add(1));
                len
            }
        };
        if let (Some(last), Some(record)) = (last, record.first_chunk::<N>()) {
            *last = Some((*record, key_len));
        }
        Ok(())
    }
}

/// The string records [`OffloadBinary::parse`] checked last at the first positions of an
/// entry, each with its key's length.
type RecordCache<const N: usize> = [Option<([u8; N], u64)>; 4];

/// Where the strings [`OffloadBinary::parse`] checked lie: the smallest range of the binary
/// holding every key and value, and how many bytes they take (a string shared by several
/// records counted each time).
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u64,
    end: u64,
    bytes: u64,
}

impl Span {
    const EMPTY: Span = Span {
        start: u64::MAX,
        end: 0,
        bytes: 0,
    };

    /// Adds the `len` bytes at `offset` (checked to lie in the binary).
    #[inline]
    fn add(&mut self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        self.start = self.start.min(offset);
        self.end = self.end.max(offset.saturating_add(len));
        self.bytes = self.bytes.saturating_add(len);
    }

    /// The range of `data` as text, when it is UTF-8 and not much larger than the strings
    /// (so checking it costs about what the strings' own checks would: laid out as LLVM
    /// writes them, the strings are one table); else empty.
    fn text<'d>(&self, data: &'d [u8]) -> &'d str {
        let Some(len) = self.end.checked_sub(self.start) else {
            return "";
        };
        if len > self.bytes.saturating_mul(2).saturating_add(4096) {
            return "";
        }
        bytes::sub(data, self.start, len, "")
            .ok()
            .and_then(|t| core::str::from_utf8(t).ok())
            .unwrap_or("")
    }
}

/// The first of the `N`-byte string records in `table` whose key (at the offset in its
/// first 8 bytes of `binary`) is `key`; `word` is `key` and its NUL as a little-endian word
/// and its mask, when it is shorter than 8 bytes. `N` is a constant, so the records are
/// stepped through without a division.
#[inline(always)]
fn find_key<'t, const N: usize>(
    binary: &[u8],
    table: &'t [u8],
    key: &[u8],
    word: Option<(u64, u64)>,
) -> Option<&'t [u8]> {
    table.chunks_exact(N).find(|record| {
        let Some(stored) = u64_of_le(record)
            .and_then(|o| usize::try_from(o).ok())
            .and_then(|o| binary.get(o..))
        else {
            return false;
        };
        match (word, stored.first_chunk::<8>()) {
            (Some((word, mask)), Some(first)) => u64::from_le_bytes(*first) & mask == word,
            // Keys are a few bytes: compared inline rather than by a call to `memcmp`.
            _ => stored.get(key.len()) == Some(&0) && stored.iter().zip(key).all(|(a, b)| a == b),
        }
    })
}

/// Whether a byte of `word` is 0 (exact: borrows only reach past a zero byte).
#[inline]
fn has_zero_byte(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    word.wrapping_sub(ONES) & !word & HIGHS != 0
}

/// The little-endian `u64` at the start of `b`, if it holds 8 bytes.
#[inline]
fn u64_of_le(b: &[u8]) -> Option<u64> {
    b.first_chunk::<8>().map(|w| u64::from_le_bytes(*w))
}

/// The error of a string record at `at` whose key is not UTF-8.
fn key_not_utf8(at: u64) -> Error {
    Error::new(ErrorKind::Malformed, at, "string key is not valid UTF-8")
}

/// Iterator over the pairs of a [`StringMap`].
#[derive(Clone, Debug)]
pub struct StringIter<'data> {
    map: StringMap<'data>,
    index: u64,
}

impl<'data> Iterator for StringIter<'data> {
    type Item = (&'data str, &'data [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.index >= self.map.count {
            return None;
        }
        let r = self.map.record(self.index).ok();
        self.index = self.index.saturating_add(1);
        r
    }
}

/// A NUL-terminated string at `offset` inside `data` (without the NUL), at most `max_len`
/// bytes long.
fn c_string(data: &[u8], offset: u64, field_at: u64, max_len: u64) -> Result<&[u8]> {
    let tail = bytes::rest(data, offset, "string").map_err(|_| {
        Error::new(
            ErrorKind::OutOfBounds,
            field_at,
            "string offset points outside the binary",
        )
    })?;
    // Scan at most max_len + 1 bytes: many records pointing at one long string must not
    // make validation quadratic.
    let scan = usize::try_from(max_len.saturating_add(1)).unwrap_or(usize::MAX);
    let window = tail.get(..scan).unwrap_or(tail);
    let nul = match window.iter().position(|&b| b == 0) {
        Some(n) => n,
        None if window.len() < tail.len() => {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                field_at,
                "string is longer than the ID length limit",
            ))
        }
        None => {
            return Err(Error::new(
                ErrorKind::Malformed,
                field_at,
                "string is not NUL-terminated inside the binary",
            ))
        }
    };
    Ok(tail.get(..nul).unwrap_or(tail))
}

/// What an OffloadBinary's header says, read once and checked against the data it lies in
/// (magic, version, size); [`OffloadBinary::parse`] checks the rest.
struct Header {
    version: u32,
    /// 32 bytes, 40 for version 3.
    header_len: u64,
    /// Version 3's uncompressed size; 0 when the body is stored as it is.
    inflated_size: u64,
    size: u64,
    entries_offset: u64,
    /// Entries in the table (version 1: one).
    count: u64,
}

impl Header {
    /// Reads the header at `data[0]`: the magic, a known version, and a size that covers the
    /// header and lies inside `data`.
    fn read(data: &[u8]) -> Result<Self> {
        let h: &OffloadBinaryHeader = bytes::read(data, 0, "OffloadBinary header truncated")?;
        if &h.magic != OFFLOAD_BINARY_MAGIC {
            return Err(Error::new(
                ErrorKind::BadMagic,
                0,
                "not an OffloadBinary (no 10 FF 10 AD magic)",
            ));
        }
        let version = h.version.get();
        if !(1..=3).contains(&version) {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                4,
                "OffloadBinary version is not 1, 2 or 3",
            ));
        }
        let (header_len, inflated_size) = if version >= 3 {
            let h3: &OffloadBinaryHeaderV3 =
                bytes::read(data, 0, "OffloadBinary v3 header truncated")?;
            (40u64, h3.inflated_size.get())
        } else {
            (32u64, 0)
        };
        let size = h.size.get();
        if size < header_len {
            return Err(Error::new(
                ErrorKind::SizeMismatch,
                8,
                "OffloadBinary size is smaller than its header",
            ));
        }
        if size > u64_of(data.len()) {
            return Err(Error::new(
                ErrorKind::Truncated,
                8,
                "OffloadBinary size runs past the end of the data",
            ));
        }
        Ok(Header {
            version,
            header_len,
            inflated_size,
            size,
            entries_offset: h.entries_offset.get(),
            count: if version == 1 {
                1
            } else {
                h.entry_size_or_count.get()
            },
        })
    }

    /// A compressed (version 3) binary's header is consistent: its entry table starts after
    /// the header and inside both the stored and the inflated body.
    fn check_compressed(&self) -> Result<()> {
        if self.entries_offset < self.header_len
            || self.entries_offset > self.size
            || self.inflated_size < self.entries_offset
        {
            return Err(Error::new(
                ErrorKind::Malformed,
                16,
                "compressed OffloadBinary has an inconsistent header",
            ));
        }
        Ok(())
    }

    /// The entry table: at most `limits.max_entries` entries, lying after the header and
    /// inside the binary.
    fn check_table(&self, limits: &Limits) -> Result<()> {
        if self.count > limits.max_entries {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                24,
                "OffloadBinary entry count exceeds the limit",
            ));
        }
        let table = bytes::mul(
            self.count,
            OFFLOAD_ENTRY_SIZE,
            24,
            "OffloadBinary entry table size overflows",
        )?;
        let table_end = bytes::add(
            self.entries_offset,
            table,
            16,
            "OffloadBinary entry table overflows",
        )?;
        if self.entries_offset < self.header_len || table_end > self.size {
            return Err(Error::new(
                ErrorKind::OutOfBounds,
                16,
                "OffloadBinary entry table lies outside the binary",
            ));
        }
        Ok(())
    }
}

/// The length the OffloadBinary header at `data[0]` declares (its `size` field), whether or
/// not the rest reads: what a walk skips when the binary is damaged. `None` when there is no
/// header to read.
pub fn described_len(data: &[u8]) -> Option<u64> {
    bytes::read::<OffloadBinaryHeader>(data, 0, "")
        .ok()
        .map(|h| h.size.get())
}

impl<'data> OffloadBinary<'data> {
    /// Parses the OffloadBinary at `data[0]`; it must lie inside `data`.
    pub fn parse(data: &'data [u8], limits: &Limits) -> Result<Self> {
        Self::parse_images(data, limits, false)
    }

    /// [`OffloadBinary::parse`]; with `images`, also notes what the entries' images are
    /// ([`Holds`], from their first bytes: the walks of a sequence's units look for nested
    /// binaries and fatbinaries), else leaves the images unread.
    fn parse_images(data: &'data [u8], limits: &Limits, images: bool) -> Result<Self> {
        let h = Header::read(data)?;
        let data = bytes::sub(data, 0, h.size, "OffloadBinary")?;
        let mut binary = OffloadBinary {
            data,
            version: h.version,
            entries_offset: h.entries_offset,
            count: h.count,
            inflated_size: h.inflated_size,
            text: "",
            holds: Holds::ANY,
        };
        if h.inflated_size != 0 {
            // Compressed (v3): the body is checked when it is inflated.
            h.check_compressed()?;
            return Ok(binary);
        }
        h.check_table(limits)?;
        let (span, holds) = binary.check_entries(limits, images)?;
        binary.text = span.text(data);
        binary.holds = holds;
        Ok(binary)
    }

    /// The binary at `data[0]` of a sequence that [`OffloadBinaries::parse`] accepted: its
    /// header is read again, its entries and strings (checked then) are not; `text` is the
    /// text the sequence's parse checked (used where this binary's strings lie in it), and
    /// `holds` what the images of the sequence's binaries are. `None` only if `data` is not
    /// such a binary.
    fn parse_validated(data: &'data [u8], text: &'data str, holds: Holds) -> Option<Self> {
        let h = Header::read(data).ok()?;
        Some(OffloadBinary {
            data: bytes::sub(data, 0, h.size, "OffloadBinary").ok()?,
            version: h.version,
            entries_offset: h.entries_offset,
            count: h.count,
            inflated_size: h.inflated_size,
            text,
            holds,
        })
    }

    /// Checks every entry, every string record, and that the entries' string records fit in
    /// the binary: entries may not share string records, which keeps validation linear in
    /// its size. Returns where the strings lie, and what the entries' images are (with
    /// `images`; else anything: they are not read).
    fn check_entries(&self, limits: &Limits, images: bool) -> Result<(Span, Holds)> {
        let size = u64_of(self.data.len());
        let mut records = 0u64;
        let mut span = Span::EMPTY;
        let mut holds = if images { Holds::default() } else { Holds::ANY };
        // One pass over the entry table (`check_table` put it inside the binary) and each
        // entry's string records, sliced once rather than read by index.
        let truncated = |at| Error::new(ErrorKind::Truncated, at, "OffloadBinary entry truncated");
        let table_len = self.count.saturating_mul(OFFLOAD_ENTRY_SIZE);
        let table = bytes::sub(self.data, self.entries_offset, table_len, "")
            .map_err(|_| truncated(self.entries_offset))?;
        let mut at = self.entries_offset;
        let entry_size = usize::try_from(OFFLOAD_ENTRY_SIZE).unwrap_or(usize::MAX);
        let mut v1_records = RecordCache::<16>::default();
        let mut v2_records = RecordCache::<24>::default();
        for raw in table.chunks_exact(entry_size) {
            let e = OffloadEntry::ref_from_bytes(raw).map_err(|_| truncated(at))?;
            let (image, strings, table) = self.entry_parts(e, at, Some(limits))?;
            let stride = strings.stride();
            let max_len = limits.max_id_len;
            if self.version == 1 {
                strings.check_records(table, max_len, &mut v1_records, &mut span)?;
            } else {
                strings.check_records(table, max_len, &mut v2_records, &mut span)?;
            }
            if images {
                holds |= Holds::of(e.image_kind.get(), image);
            }
            records = records.saturating_add(strings.len());
            if records.saturating_mul(stride) > size {
                return Err(Error::new(
                    ErrorKind::Malformed,
                    at,
                    "string records of the entries overlap (more than the binary can hold)",
                ));
            }
            at = at.saturating_add(OFFLOAD_ENTRY_SIZE);
        }
        Ok((span, holds))
    }

    /// Whether an entry's image may be an OffloadBinary (false only when the parse of the
    /// sequence it was read from saw that none is).
    pub(crate) fn may_nest(&self) -> bool {
        self.holds.has(Holds::NESTED)
    }


    /// The image, the string map and the string records of the entry `e` read at `at`,
    /// checked against the binary (and the string count against `limits`).
    #[inline(always)]
    fn entry_parts(
        &self,
        e: &OffloadEntry,
        at: u64,
        limits: Option<&Limits>,
    ) -> Result<(&'data [u8], StringMap<'data>, &'data [u8])> {
        let image = bytes::sub(
            self.data,
            e.image_offset.get(),
            e.image_size.get(),
            "OffloadBinary image runs past the end of the binary",
        )
        .map_err(|err| Error::new(err.kind(), at.saturating_add(24), err.what()))?;
        let num_strings = e.num_strings.get();
        if limits.is_some_and(|l| num_strings > l.max_entries) {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                at.saturating_add(16),
                "OffloadBinary string count exceeds the limit",
            ));
        }
        let strings = StringMap {
            binary: self.data,
            offset: e.string_offset.get(),
            count: num_strings,
            version: self.version,
            text: self.text,
        };
        let table = bytes::mul(
            num_strings,
            strings.stride(),
            at.saturating_add(16),
            "string table size overflows",
        )?;
        let records = bytes::sub(
            self.data,
            strings.offset,
            table,
            "string records lie outside the binary",
        )
        .map_err(|err| Error::new(err.kind(), at.saturating_add(8), err.what()))?;
        Ok((image, strings, records))
    }

    tools_pub! {
        /// The format version (1, 2 or 3).
        pub fn version(&self) -> u32 {
            self.version
        }
    }

    tools_pub! {
        /// Size of this binary (the `size` header field).
        pub fn len(&self) -> u64 {
            u64_of(self.data.len())
        }
    }

    tools_pub! {
        /// True if the binary has no entries.
        pub fn is_empty(&self) -> bool {
            self.count == 0 || self.is_compressed()
        }
    }

    tools_pub! {
        /// The binary's bytes.
        pub fn data(&self) -> &'data [u8] {
            self.data
        }
    }

    tools_pub! {
        /// True for a compressed version 3 binary; call [`OffloadBinary::inflate`] to read it.
        pub fn is_compressed(&self) -> bool {
            self.inflated_size != 0
        }
    }

    tools_pub! {
        /// The size a compressed binary inflates to (its `inflated_size` field; 0 when not
        /// compressed).
        pub fn inflated_size(&self) -> u64 {
            self.inflated_size
        }
    }

    tools_pub! {
        /// Number of entries (0 for a compressed binary until inflated).
        pub fn entry_count(&self) -> u64 {
            if self.is_compressed() {
                0
            } else {
                self.count
            }
        }
    }

    /// The entries in stored order.
    pub fn entries(&self) -> OffloadBinaryEntries<'data> {
        // `parse` checked that the table lies in the binary (none is read while compressed).
        let len = self.entry_count().saturating_mul(OFFLOAD_ENTRY_SIZE);
        OffloadBinaryEntries {
            binary: *self,
            index: 0,
            table: bytes::sub(self.data, self.entries_offset, len, "").unwrap_or_default(),
        }
    }

    tools_pub! {
        /// Rebuilds the uncompressed binary of a compressed v3 binary (`FORMATS.md` §6.6):
        /// the header with `size = inflated_size` and `inflated_size = 0`, then the inflated body,
        /// decoded by the caller's [`crate::ccob::Decoders::raw`] when set, else built in.
        pub fn inflate(&self, options: &ReadOptions) -> Result<Vec<u8>> {
            if !self.is_compressed() {
                return Err(Error::new(
                    ErrorKind::Malformed,
                    32,
                    "OffloadBinary is not compressed",
                ));
            }
            let total = self.inflated_size;
            if total > options.limits.max_decompressed_size {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    32,
                    "declared inflated size exceeds the limit",
                ));
            }
            let head = bytes::sub(self.data, 0, self.entries_offset, "OffloadBinary header")?;
            let body = bytes::rest(self.data, self.entries_offset, "OffloadBinary body")?;
            let body_len = total.saturating_sub(self.entries_offset);
            let codec = if body.starts_with(ZSTD_MAGIC) {
                Codec::Zstd
            } else {
                Codec::Zlib
            };
            if options.decoders.raw.is_some() {
                // The caller's decoder (it may decline the codec, and the built-in one runs).
                let decoded = crate::decompress::decode_with_hook(
                    codec,
                    body,
                    self.entries_offset,
                    body_len,
                    32,
                    options,
                )?;
                let mut out = with_header(head, decoded.len())?;
                out.extend_from_slice(&decoded);
                return Ok(Self::finish_inflated(out, total));
            }
            // The header is copied first and the body decoded right behind it, in one buffer
            // that grows only as the stream produces output.
            let mut out = with_header(head, 0)?;
            crate::decompress::decode_append(
                codec,
                body,
                self.entries_offset,
                body_len,
                32,
                options,
                &mut out,
            )?;
            Ok(Self::finish_inflated(out, total))
        }
    }

    /// The inflated binary's header: its total size, and no inflated size (it is no
    /// longer compressed).
    fn finish_inflated(mut out: Vec<u8>, total: u64) -> Vec<u8> {
        if let Some(size) = out.get_mut(8..16) {
            size.copy_from_slice(&total.to_le_bytes());
        }
        if let Some(infl) = out.get_mut(32..40) {
            infl.copy_from_slice(&0u64.to_le_bytes());
        }
        out
    }
}

/// A buffer holding `head`, with room reserved (fallibly) for `more` bytes after it.
fn with_header(head: &[u8], more: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve_exact(head.len().saturating_add(more))
        .map_err(|_| {
            Error::new(
                ErrorKind::OutOfMemory,
                32,
                "cannot reserve memory for the inflated binary",
            )
        })?;
    out.extend_from_slice(head);
    Ok(out)
}

/// Iterator over the entries of an [`OffloadBinary`].
#[derive(Clone, Debug)]
pub struct OffloadBinaryEntries<'data> {
    binary: OffloadBinary<'data>,
    index: u64,
    /// The entries not yet handed out.
    table: &'data [u8],
}

impl<'data> Iterator for OffloadBinaryEntries<'data> {
    type Item = OffloadBinaryEntry<'data>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (raw, rest) = self.table.split_first_chunk::<40>()?;
        self.table = rest;
        let i = self.index;
        self.index = i.saturating_add(1);
        // Checked by `parse`: reading it again cannot fail, and a failure ends nothing.
        let at = self
            .binary
            .entries_offset
            .saturating_add(i.saturating_mul(OFFLOAD_ENTRY_SIZE));
        let e = OffloadEntry::ref_from_bytes(raw.as_slice()).ok()?;
        let (image, strings, _) = self.binary.entry_parts(e, at, None).ok()?;
        Some(OffloadBinaryEntry {
            index: usize::try_from(i).unwrap_or(usize::MAX),
            image_kind: e.image_kind.get(),
            offload_kind: e.offload_kind.get(),
            flags: e.flags.get(),
            image_offset: e.image_offset.get(),
            image,
            strings,
        })
    }

}

/// A sequence of OffloadBinaries laid out back to back, each padded with zeros
/// (`FORMATS.md` §6.8).
#[derive(Clone, Copy, Debug)]
pub struct OffloadBinaries<'data> {
    data: &'data [u8],
    count: u64,
    extent: u64,
    /// The first binary's strings, checked as UTF-8 (`OffloadBinary`'s `text`).
    text: &'data str,
    /// What the images of the binaries' entries are, all binaries together.
    holds: Holds,
}

impl<'data> OffloadBinaries<'data> {
    /// Parses every binary from `data[0]` up to the first byte after zero padding that does
    /// not start another binary. The sequence's size is [`OffloadBinaries::len`].
    pub fn parse(data: &'data [u8], limits: &Limits) -> Result<Self> {
        let mut pos = 0usize;
        let mut count = 0u64;
        let mut extent = 0u64;
        let mut text = "";
        let mut holds = Holds::default();
        loop {
            let tail = data.get(pos..).unwrap_or(&[]);
            if count > 0 && !is_offload_binary(tail) {
                break;
            }
            if count >= limits.max_entries {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    u64_of(pos),
                    "number of OffloadBinaries exceeds the limit",
                ));
            }
            let b = OffloadBinary::parse_images(tail, limits, true)
                .map_err(|e| e.rebase(u64_of(pos)))?;
            if count == 0 {
                text = b.text;
            }
            holds |= b.holds;
            count = count.saturating_add(1);
            let end = pos.saturating_add(b.data.len());
            extent = u64_of(end);
            match bytes::skip_zeros(data, end) {
                Some(next) => pos = next,
                None => break,
            }
        }
        Ok(OffloadBinaries {
            data,
            count,
            extent,
            text,
            holds,
        })
    }

    tools_pub! {
        /// Number of binaries.
        pub fn count(&self) -> u64 {
            self.count
        }
    }

    tools_pub! {
        /// Size of the sequence: the end of its last binary.
        pub fn len(&self) -> u64 {
            self.extent
        }
    }

    tools_pub! {
        /// True if the sequence holds no binary (never true after a successful parse).
        pub fn is_empty(&self) -> bool {
            self.count == 0
        }
    }

    /// Whether an entry of image kind 4 (fatbinary) of one of the binaries may hold an
    /// NVIDIA fatbinary (false only when their parses saw that none does; compressed
    /// binaries are not looked into).
    pub(crate) fn may_hold_fatbins(&self) -> bool {
        self.holds.has(Holds::FATBINS)
    }

    /// The binaries, with their offsets from the start of the sequence.
    pub fn iter(&self) -> OffloadBinaryIter<'data> {
        OffloadBinaryIter {
            data: self.data,
            pos: Some(0),
            remaining: self.count,
            text: self.text,
            holds: self.holds,
        }
    }
}

/// Iterator over the binaries of an [`OffloadBinaries`] sequence: (offset, binary).
#[derive(Clone, Debug)]
pub struct OffloadBinaryIter<'data> {
    data: &'data [u8],
    pos: Option<usize>,
    remaining: u64,
    text: &'data str,
    holds: Holds,
}

impl<'data> Iterator for OffloadBinaryIter<'data> {
    type Item = (u64, OffloadBinary<'data>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining = self.remaining.saturating_sub(1);
        let pos = self.pos?;
        let b = OffloadBinary::parse_validated(self.data.get(pos..)?, self.text, self.holds)?;
        self.pos = bytes::skip_zeros(self.data, pos.saturating_add(b.data.len()));
        Some((u64_of(pos), b))
    }
}

/// Deepest nesting [`nested_entries`] follows, whatever [`Limits::max_depth`] allows: the
/// outermost binaries count as one level, each OffloadBinary found in an image as one more.
pub const MAX_NESTING: usize = 8;

/// Where a [`NestedEntry`] sits: one index per level, outermost first.
pub type NestedPath = heapless::Vec<u32, MAX_NESTING>;

/// One image of a sequence of OffloadBinaries after the OffloadBinaries found in images
/// were opened (`FORMATS.md` §6.8): an entry whose image is not itself an OffloadBinary.
#[derive(Clone, Debug)]
pub struct NestedEntry<'data> {
    /// The entry; its `image` is not an OffloadBinary.
    pub entry: OffloadBinaryEntry<'data>,
    /// Offset of the binary holding the entry from the start of the walked data.
    pub binary_offset: u64,
    /// The entry's position: at each level, its index among the entries of all binaries of
    /// that level's sequence, outermost first. `[0, 1, 0]` is what `llvm-objdump
    /// --offloading` (LLVM 23) labels `OFFLOADING IMAGE [0.1.0]`: the first entry of the
    /// binary in the image of the second entry of the binary in the image of the first
    /// outer entry.
    pub path: NestedPath,
}

impl NestedEntry<'_> {
    /// Offset of the image from the start of the walked data.
    pub fn image_at(&self) -> u64 {
        self.binary_offset.saturating_add(self.entry.image_offset)
    }

    /// Nesting level of the entry: 0 for an entry of an outermost binary.
    pub fn depth(&self) -> usize {
        self.path.len().saturating_sub(1)
    }
}

/// Lists the images of the OffloadBinaries laid out back to back from `data[0]` (as
/// [`OffloadBinaries::parse`] finds them), opening every image that is itself a sequence of
/// OffloadBinaries and listing its entries in its place, depth first, in discovery order
/// (LLVM 23's `llvm-offload-binary` extracts nested images in this order).
///
/// Every nested binary must lie inside the image that holds it and is validated as a
/// binary of its own. Errors carry offsets from `data[0]`: a binary that does not parse, a
/// compressed (v3) binary (inflate it first: [`OffloadBinary::inflate`]), an image that
/// starts at its own binary's header (a cycle: the binary would hold itself), nesting
/// deeper than [`Limits::max_depth`] or [`MAX_NESTING`] levels, and more than
/// [`Limits::max_entries`] images in all. Allocates the list.
pub fn nested_entries<'data>(
    data: &'data [u8],
    limits: &Limits,
) -> Result<Vec<NestedEntry<'data>>> {
    let mut out = Vec::new();
    let mut path = NestedPath::new();
    walk_nested(data, 0, limits, &mut path, &mut out)?;
    Ok(out)
}

/// [`nested_entries`] for the sequence at `data`, which starts `base` bytes into the walked
/// data, at the level below `path`.
fn walk_nested<'data>(
    data: &'data [u8],
    base: u64,
    limits: &Limits,
    path: &mut NestedPath,
    out: &mut Vec<NestedEntry<'data>>,
) -> Result<()> {
    let seq = OffloadBinaries::parse(data, limits).map_err(|e| e.rebase(base))?;
    let max_levels = limits.max_depth.min(MAX_NESTING);
    let mut index = 0u32;
    for (offset, binary) in seq.iter() {
        let at = base.saturating_add(offset);
        if binary.is_compressed() {
            return Err(Error::new(
                ErrorKind::UnsupportedMethod,
                at.saturating_add(32),
                "compressed OffloadBinary: inflate it before listing nested images",
            ));
        }
        for (i, entry) in binary.entries().enumerate() {
            let entry_at = binary
                .entries_offset
                .saturating_add(u64_of(i).saturating_mul(OFFLOAD_ENTRY_SIZE));
            let field_at = at.saturating_add(entry_at).saturating_add(24);
            path.push(index).map_err(|_| {
                Error::new(
                    ErrorKind::LimitExceeded,
                    field_at,
                    "OffloadBinaries nested deeper than the depth limit",
                )
            })?;
            let image_at = at.saturating_add(entry.image_offset);
            if is_offload_binary(entry.image) {
                if entry.image_offset == 0 {
                    return Err(Error::new(
                        ErrorKind::Malformed,
                        field_at,
                        "OffloadBinary image is its own binary (the nesting is a cycle)",
                    ));
                }
                if path.len() >= max_levels {
                    return Err(Error::new(
                        ErrorKind::LimitExceeded,
                        image_at,
                        "OffloadBinaries nested deeper than the depth limit",
                    ));
                }
                walk_nested(entry.image, image_at, limits, path, out)?;
            } else {
                push_leaf(out, entry, at, path, limits)?;
            }
            path.pop();
            index = index.saturating_add(1);
        }
    }
    Ok(())
}

/// Lists one leaf image of [`nested_entries`], under [`Limits::max_entries`].
fn push_leaf<'data>(
    out: &mut Vec<NestedEntry<'data>>,
    entry: OffloadBinaryEntry<'data>,
    binary_offset: u64,
    path: &NestedPath,
    limits: &Limits,
) -> Result<()> {
    let image_at = binary_offset.saturating_add(entry.image_offset);
    if u64_of(out.len()) >= limits.max_entries {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            image_at,
            "number of nested OffloadBinary images exceeds the limit",
        ));
    }
    out.try_reserve(1).map_err(|_| {
        Error::new(
            ErrorKind::OutOfMemory,
            image_at,
            "cannot reserve memory for the list of images",
        )
    })?;
    out.push(NestedEntry {
        entry,
        binary_offset,
        path: path.clone(),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// An entry's string records: (key, value, value size), offsets from the string table.
    type Records<'r> = &'r [(u64, u64, u64)];

    /// Where [`v2`] puts the string table and the first image for `entries` entries of
    /// `records` string records each and a string table of `strtab` bytes: the layout of
    /// `OffloadBinary::write` (header, entries, records, string table, 8-aligned images).
    fn layout(entries: usize, records: usize, strtab: usize) -> (u64, u64) {
        let strtab_at = 32 + 40 * entries as u64 + 24 * (entries * records) as u64;
        (strtab_at, (strtab_at + strtab as u64).div_ceil(8) * 8)
    }

    /// A version 2 OffloadBinary whose entries each have `records` string records (key,
    /// value, size; key and value offsets from the string table's start) and an image of 16
    /// bytes `0xC3` (half a UTF-8 character).
    fn v2(strtab: &[u8], entries: &[Records<'_>]) -> Vec<u8> {
        let per = entries.first().map_or(0, |e| e.len());
        assert!(entries.iter().all(|e| e.len() == per));
        let (strtab_at, images_at) = layout(entries.len(), per, strtab.len());
        let total = images_at + 16 * entries.len() as u64;
        let mut out = vec![0x10, 0xFF, 0x10, 0xAD];
        out.extend_from_slice(&2u32.to_le_bytes());
        for v in [total, 32, entries.len() as u64] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let records_at = 32 + 40 * entries.len() as u64;
        for i in 0..entries.len() as u64 {
            out.extend_from_slice(&[1, 0, 4, 0, 0, 0, 0, 0]);
            for v in [records_at + 24 * per as u64 * i, per as u64, images_at + 16 * i, 16] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        for e in entries {
            for &(key, value, size) in e.iter() {
                for v in [strtab_at + key, strtab_at + value, size] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        out.extend_from_slice(strtab);
        out.resize(images_at as usize, 0);
        out.resize(total as usize, 0xC3);
        out
    }

    /// The value of `key` as text, the way every lookup did before the strings were
    /// checked once: decoded on each lookup.
    fn decoded<'d>(m: &StringMap<'d>, key: &str) -> Option<&'d str> {
        m.get(key).and_then(|v| core::str::from_utf8(v).ok())
    }

    #[test]
    fn text_lookups_agree_with_decoding_each_value() {
        // triple\0 arch\0 amdgcn-amd-amdhsa\0 gfx90a:xnack-\0 é\0 日本\0 \xff\0 k\0
        let strtab = "triple\0arch\0amdgcn-amd-amdhsa\0gfx90a:xnack-\0\u{e9}\0\u{65e5}\u{672c}\0";
        let mut table = strtab.as_bytes().to_vec();
        let bad = table.len() as u64;
        table.extend_from_slice(b"\xff\0k\0");
        let at = |s: &str| strtab.find(s).unwrap() as u64;
        let (triple, arch) = (at("triple"), at("arch"));
        let (amd, gfx, e_acute, nihon) = (at("amdgcn"), at("gfx90a"), at("\u{e9}"), at("\u{65e5}"));
        let k = bad + 2;
        // Values: whole strings, one cut inside 日 (3 bytes), an empty one, one in an image
        // (bytes 0xC3: not UTF-8), and the non-UTF-8 byte of the table.
        let (_, images_at) = layout(4, 2, table.len());
        let (strtab_at, _) = layout(4, 2, table.len());
        let image = images_at - strtab_at;
        let cases: [(Records<'_>, Option<&str>, Option<&str>); 4] = [
            (&[(triple, amd, 17), (arch, gfx, 13)], Some("amdgcn-amd-amdhsa"), Some("gfx90a:xnack-")),
            (&[(triple, e_acute, 2), (arch, nihon, 6)], Some("\u{e9}"), Some("\u{65e5}\u{672c}")),
            (&[(triple, nihon + 1, 2), (arch, nihon, 0)], None, Some("")),
            (&[(triple, image, 4), (k, bad, 1)], None, None),
        ];
        // The same entries with the non-UTF-8 byte out of the table (checked once, sliced)
        // and in it (no text: each lookup decodes).
        let entries: Vec<Records<'_>> = cases.iter().map(|c| c.0).collect();
        let with_bad = v2(&table, &entries);
        let b = OffloadBinary::parse(&with_bad, &Limits::default()).unwrap();
        assert!(b.text.is_empty(), "a table with a byte that is not UTF-8 is not text");
        let clean: Vec<Records<'_>> = entries.iter().take(3).copied().collect();
        let without = v2(&table, &clean);
        let c = OffloadBinary::parse(&without, &Limits::default()).unwrap();
        assert!(c.text.starts_with("triple\0arch\0"), "{:?}", c.text);
        for binary in [b, c] {
            for (e, case) in binary.entries().zip(&cases) {
                assert_eq!(e.strings.get_str("triple"), case.1, "entry {}", e.index);
                assert_eq!(e.strings.get_str("arch"), case.2, "entry {}", e.index);
                for key in ["triple", "arch", "k", "arc", "archx", "", "arch\0"] {
                    assert_eq!(e.strings.get_str(key), decoded(&e.strings, key), "{key:?}");
                }
            }
        }
        // The last entry: a key outside the first 8 bytes' reach of a short key.
        let last = b.entries().nth(3).unwrap();
        assert_eq!(last.strings.get("k"), Some(&b"\xff"[..]));
        assert_eq!(last.strings.get("triple"), Some(&[0xC3u8; 4][..]));
    }

    #[test]
    fn keys_match_whole_and_not_by_prefix() {
        let strtab = b"arch\0architecture-long-key\0v1\0v2\0";
        let long = 5u64;
        let e: Records<'_> = &[(0, 27, 2), (long, 30, 2)];
        let data = v2(strtab, &[e]);
        let b = OffloadBinary::parse(&data, &Limits::default()).unwrap();
        let m = b.entries().next().unwrap().strings;
        assert_eq!(m.get("arch"), Some(&b"v1"[..]));
        assert_eq!(m.get("architecture-long-key"), Some(&b"v2"[..]));
        for no in ["arc", "archi", "architecture-long-ke", "architecture-long-keys", "arch\0"] {
            assert_eq!(m.get(no), None, "{no:?}");
        }
        // No record has an empty key.
        assert_eq!(m.get(""), None);
    }

    #[test]
    fn records_equal_to_the_last_are_not_rechecked_but_others_are() {
        let strtab = b"triple\0arch\0amdgcn-amd-amdhsa\0gfx90a\0";
        let ok: Records<'_> = &[(0, 12, 17), (7, 30, 6)];
        // Entry 2: the `triple` record as before, the `arch` record's value past the end
        // (its key the one checked before); entry 3: a key offset past the end.
        let value_past: Records<'_> = &[(0, 12, 17), (7, 30, 1 << 20)];
        let key_past: Records<'_> = &[(0, 12, 17), (1 << 20, 30, 6)];
        let good = v2(strtab, &[ok, ok, ok]);
        assert!(OffloadBinary::parse(&good, &Limits::default()).is_ok());
        let records_at = |entry: u64, record: u64| 32 + 40 * 3 + 24 * (2 * entry + record);
        let e = OffloadBinary::parse(&v2(strtab, &[ok, ok, value_past]), &Limits::default())
            .unwrap_err();
        assert_eq!(
            (e.kind(), e.offset()),
            (ErrorKind::OutOfBounds, records_at(2, 1) + 8)
        );
        let e = OffloadBinary::parse(&v2(strtab, &[ok, ok, key_past]), &Limits::default())
            .unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::OutOfBounds, records_at(2, 1)));
        // A key offset not seen before, at the last byte (an image's): not terminated.
        let mut unterminated = v2(strtab, &[ok, ok, ok]);
        let end = unterminated.len() as u64;
        let at = records_at(2, 1) as usize;
        unterminated[at..at + 8].copy_from_slice(&(end - 1).to_le_bytes());
        let e = OffloadBinary::parse(&unterminated, &Limits::default()).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, records_at(2, 1)));
    }
}
