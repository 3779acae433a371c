//! NVIDIA fatbinaries (`.nv_fatbin`, magic `0xBA55ED50`, `NVFATBIN.md`).
//!
//! [`Fatbin::parse`] validates one fatbinary completely (header, every entry header, every
//! payload range, the codec of every compressed payload and its size claims against the
//! [`Limits`]) without allocating. [`Fatbin::entries`] lists the entries in stored order.
//! An uncompressed entry's image is a slice of the caller's bytes ([`FatbinEntry::image`]);
//! a compressed one (LZ4 block or zstd frame) is decoded once by
//! [`FatbinEntry::decompress`].
//!
//! The image of an entry is what `cuobjdump -xelf all -xptx all` writes: payloads are
//! stored padded, so a cubin ends where its ELF headers say (the furthest of the header
//! tables and the file data of its sections and segments) and PTX text at its first NUL
//! ([`trim_image`]).

use alloc::vec::Vec;

use crate::bytes::{self, elf64_len, u64_of};
use crate::decompress;
pub use crate::decompress::Codec;
use crate::error::{Error, ErrorKind, Result};
use crate::raw::{
    FatbinEntryHeader, FatbinHeader, BUNDLE_MAGIC, CCOB_MAGIC, NVFATBIN_MAGIC, OFFLOAD_BINARY_MAGIC,
};
use crate::options::{Limits, ReadOptions};

/// Entry flag: 64-bit code.
pub const FLAG_64BIT: u64 = 0x1;
/// Entry flag: Linux host.
pub const FLAG_LINUX: u64 = 0x10;
/// Entry flag: the payload is an LZ4 block.
pub const FLAG_LZ4: u64 = 0x2000;
/// Entry flag: the payload is a zstd frame.
pub const FLAG_ZSTD: u64 = 0x8000;
/// Entry flag: architecture-specific (`a`) entry.
pub const FLAG_ARCH_SPECIFIC: u64 = 0x10_0000;
/// Entry flag: family (`f`) entry.
pub const FLAG_FAMILY: u64 = 0x20_0000;
/// Entry flag seen on every sm_100+ cubin of CUDA 13 (meaning unknown).
pub const FLAG_SM100_CUBIN: u64 = 0x100_0000;
/// Entry flag seen on every LTO IR entry (kind 8, `NVFATBIN.md` §2.9) beside the codec
/// bit, and on no other kind: the payload is then not a plain stream of the codec the
/// flags name (a zstd-flagged one has no zstd magic), so it is never decoded.
pub const FLAG_LTO_IR: u64 = 0x1_0000;
/// The flag bits whose meaning is known (measured); others are reported, never guessed.
pub const KNOWN_FLAGS: u64 = FLAG_64BIT
    | FLAG_LINUX
    | FLAG_LZ4
    | FLAG_ZSTD
    | FLAG_ARCH_SPECIFIC
    | FLAG_FAMILY
    | FLAG_SM100_CUBIN
    | FLAG_LTO_IR;

/// Smallest entry header this reader accepts (it reads fields up to `+0x40`).
pub const MIN_ENTRY_HEADER: u64 = 64;
/// Size of the fatbinary header.
pub const HEADER_SIZE: u64 = 16;

/// Largest expansion of an LZ4 block: a 1-byte token and a 255-run extension add 255
/// bytes of match per input byte at most.
const LZ4_MAX_RATIO: u64 = 256;

/// Returns true if `data` starts with the fatbinary magic.
pub fn is_fatbin(data: &[u8]) -> bool {
    data.starts_with(NVFATBIN_MAGIC)
}

/// What an entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// 1: PTX text.
    Ptx,
    /// 2: an ELF (cubin).
    Cubin,
    /// 0x80: Tile IR bytecode (`nvFatbinAddTileIR`, CUDA 13.1; `NVFATBIN.md` §2.8), which
    /// the CUDA driver compiles for the device; never chosen by this crate.
    TileIr,
    /// 8: LTO IR, the NVVM IR `nvcc -dlto` keeps for the device link (`cuobjdump`: "Fatbin
    /// nvvm code"; `NVFATBIN.md` §2.9). Its payload is stored encoded (flag
    /// [`FLAG_LTO_IR`]) and never decoded; since CUDA 12.0 the driver does not JIT it, so
    /// it is never chosen.
    LtoIr,
}

/// The entry kind of LTO IR (`nvcc -dlto`; `cuobjdump` lists such entries as "Fatbin nvvm
/// code").
pub const KIND_LTO_IR: u16 = 8;

/// The entry kind `nvFatbinAddTileIR` writes (libnvfatbin 13.4; `cuobjdump` lists such
/// entries as "Fatbin tile ir code").
pub const KIND_TILE_IR: u16 = 0x80;

impl EntryKind {
    /// `"ptx"`, `"cubin"`, `"tile-ir"` or `"lto-ir"`.
    pub const fn name(self) -> &'static str {
        match self {
            EntryKind::Ptx => "ptx",
            EntryKind::Cubin => "cubin",
            EntryKind::TileIr => "tile-ir",
            EntryKind::LtoIr => "lto-ir",
        }
    }
}

impl Codec {
    /// The codec the entry flags name (`None`: stored uncompressed, or both bits set,
    /// which [`Fatbin::parse`] refuses).
    pub const fn from_flags(flags: u64) -> Option<Codec> {
        match (flags & FLAG_LZ4 != 0, flags & FLAG_ZSTD != 0) {
            (true, false) => Some(Codec::Lz4),
            (false, true) => Some(Codec::Zstd),
            _ => None,
        }
    }
}

/// The variant an entry records in its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// No suffix.
    Plain,
    /// `a`: architecture-specific (flag `0x100000`).
    ArchSpecific,
    /// `f`: family (flag `0x200000`).
    Family,
}

impl Variant {
    /// The variant recorded by `flags` (both bits: [`Fatbin::parse`] refuses it).
    pub const fn from_flags(flags: u64) -> Variant {
        if flags & FLAG_ARCH_SPECIFIC != 0 {
            Variant::ArchSpecific
        } else if flags & FLAG_FAMILY != 0 {
            Variant::Family
        } else {
            Variant::Plain
        }
    }

    const fn index(self) -> usize {
        match self {
            Variant::Plain => 0,
            Variant::ArchSpecific => 1,
            Variant::Family => 2,
        }
    }
}

/// One NVIDIA fatbinary, borrowed from the caller's bytes and validated.
#[derive(Clone, Copy, Debug)]
pub struct Fatbin<'data> {
    /// Header and body.
    data: &'data [u8],
    body_at: u64,
    count: u64,
    claimed: u64,
}

tools_fields! {
    /// One entry of a fatbinary.
    #[derive(Clone, Copy, Debug)]
    pub struct FatbinEntry<'data> {
        /// Position in the fatbinary (0-based).
        pub index: usize,
        /// Offset of the entry header from the start of the fatbinary.
        pub offset: u64,
        /// PTX, cubin or Tile IR.
        pub kind: EntryKind,
        /// SM number (86 for `sm_86`).
        pub sm: u32,
        @tools
        /// The recorded variant.
        pub variant: Variant,
        /// All flags as stored.
        pub flags: u64,
        /// Size of the entry header.
        pub header_size: u32,
        /// The whole entry header (`header_size` bytes; the reader interprets its first 64).
        pub header: &'data [u8],
        /// The codec of a compressed payload.
        pub codec: Option<Codec>,
        /// The stored (padded) payload.
        pub payload: &'data [u8],
        /// Size of the compressed stream (compressed entries; 0 otherwise).
        pub compressed_size: u64,
        /// Size of the decompressed payload (compressed entries; 0 otherwise).
        pub uncompressed_size: u64,
        /// The code version the entry header records (`+0x18`): for PTX, its ISA version
        /// ([`crate::driver::PtxIsa::of_code_version`]).
        pub code_version: u32,
    }
}

impl<'data> FatbinEntry<'data> {
    /// The entry whose header `h` is at `pos`: its `kind` (already read from `h`), its
    /// `header` bytes and its stored `payload`, the other fields from `h`. One place for
    /// the checked path ([`Fatbin::entry_at`]) and the iteration's.
    #[inline]
    fn from_header(
        h: &FatbinEntryHeader,
        index: usize,
        pos: u64,
        kind: EntryKind,
        header: &'data [u8],
        payload: &'data [u8],
    ) -> Self {
        let flags = h.flags.get();
        FatbinEntry {
            index,
            offset: pos,
            kind,
            sm: h.sm.get(),
            variant: Variant::from_flags(flags),
            flags,
            header_size: h.header_size.get(),
            header,
            codec: Codec::from_flags(flags),
            payload,
            compressed_size: u64::from(h.compressed_size.get()),
            uncompressed_size: h.uncompressed_size.get(),
            code_version: h.code_version.get(),
        }
    }
    tools_pub! {
        /// Flag bits whose meaning is unknown (0 when all are known).
        pub const fn unknown_flags(&self) -> u64 {
            self.flags & !KNOWN_FLAGS
        }
    }

    /// The image of an uncompressed entry: its payload without the padding
    /// ([`trim_image`]); `None` for a compressed entry. An LTO IR entry's image is its
    /// stored stream ([`FatbinEntry::stream`]) as it is: that stream is never decoded
    /// ([`FLAG_LTO_IR`]).
    pub fn image(&self) -> Option<&'data [u8]> {
        match (self.kind, self.codec) {
            (EntryKind::LtoIr, _) => Some(self.stream().unwrap_or(self.payload)),
            (_, None) => Some(trim_image(self.kind, self.payload)),
            (_, Some(_)) => None,
        }
    }

    tools_pub! {
        /// The options string the header of a PTX or LTO IR entry records, without its
        /// trailing NUL and space padding (`NVFATBIN.md` §2.5): the first non-empty (offset,
        /// length) pair of `u32`s at `+0x40` or `+0x48` locates it in the header (offset from
        /// the header's start). `nvcc` puts its `ptxas` options there for PTX (`cuobjdump`:
        /// "ptxasOptions") and its NVVM options for LTO IR ("nvvmOptions"). `None` for cubins
        /// (their pair locates binary data `cuobjdump` does not print), and when there is no
        /// pair, or it points outside the header or at bytes that are not UTF-8.
        pub fn options(&self) -> Option<&'data str> {
            if !matches!(self.kind, EntryKind::Ptx | EntryKind::LtoIr) {
                return None;
            }
            let word = |at: usize| {
                self.header
                    .get(at..at.checked_add(4)?)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map(u32::from_le_bytes)
                    .and_then(|v| usize::try_from(v).ok())
            };
            let (at, len) = [0x40, 0x48]
                .into_iter()
                .map_while(|pair: usize| Some((pair, word(pair)?, word(pair.checked_add(4)?)?)))
                .find(|&(_, at, len)| at != 0 || len != 0)
                .filter(|&(pair, at, len)| len > 0 && at >= pair.saturating_add(8))
                .map(|(_, at, len)| (at, len))?;
            let text = self.header.get(at..at.checked_add(len)?)?;
            core::str::from_utf8(text)
                .ok()
                .map(|t| t.trim_end_matches(['\0', ' ']))
        }
    }

    /// The architecture name `cuobjdump` would give with the recorded variant: `sm_86`,
    /// `sm_90a`, `sm_100f` (for PTX too); `None` for SM numbers outside 10–999.
    pub fn arch_name(&self) -> Option<&'static str> {
        arch_name(self.sm, self.variant)
    }

    /// Decodes a compressed payload (the whole decompressed payload, padding included:
    /// apply [`trim_image`] for the image). The size was checked against the limit and the
    /// codec's largest ratio by [`Fatbin::parse`]; the buffer is reserved fallibly.
    /// Errors are located relative to the fatbinary's start.
    pub fn decompress(&self, options: &ReadOptions) -> Result<Vec<u8>> {
        let size_field = self.offset.saturating_add(0x38);
        let payload_at = self.offset.saturating_add(u64::from(self.header_size));
        let stream = self.stream()?;
        let codec = self.codec.ok_or(Error::new(
            ErrorKind::Malformed,
            self.offset,
            "fatbinary entry is not compressed",
        ))?;
        if self.kind == EntryKind::LtoIr {
            return Err(Error::new(
                ErrorKind::UnsupportedMethod,
                self.offset.saturating_add(0x28),
                "LTO IR entry payload is stored encoded (flag 0x10000) and is not decoded",
            ));
        }
        decompress::decode_with_hook(
            codec,
            stream,
            payload_at,
            self.uncompressed_size,
            size_field,
            options,
        )
    }

    tools_pub! {
        /// The compressed stream of a compressed entry (the first `compressed size` bytes of
        /// its payload); the whole payload of an uncompressed one.
        pub fn stream(&self) -> Result<&'data [u8]> {
            if self.codec.is_none() {
                return Ok(self.payload);
            }
            bytes::sub(self.payload, 0, self.compressed_size, "payload")
                .map_err(|e| Error::new(e.kind(), self.offset.saturating_add(0x10), e.what()))
        }
    }
}

/// The image inside a (decompressed) payload, without the padding the fatbinary stores:
/// a cubin ends at the furthest byte its ELF64 headers account for (header tables,
/// section and segment data; the whole payload if the headers cannot be read or point
/// past it), PTX text at its first NUL. Tile IR bytecode and LTO IR record no length of
/// their own and are kept whole.
pub fn trim_image(kind: EntryKind, payload: &[u8]) -> &[u8] {
    let end = match kind {
        EntryKind::Ptx => payload.iter().position(|&b| b == 0),
        EntryKind::Cubin => elf64_end(payload),
        EntryKind::TileIr | EntryKind::LtoIr => None,
    };
    end.and_then(|e| payload.get(..e)).unwrap_or(payload)
}

/// The header of a little-endian ELF64 file that `data` starts with.
fn elf64_header(data: &[u8]) -> Option<&object::elf::FileHeader64<object::LittleEndian>> {
    use object::read::elf::FileHeader;
    if !data.starts_with(crate::raw::ELF_MAGIC) || data.get(4) != Some(&2) {
        return None;
    }
    object::elf::FileHeader64::parse(data).ok()
}

/// Where the section header table and the program header table of an ELF64 file end, from
/// its header (`None` for a table whose end overflows).
fn table_ends(
    header: &object::elf::FileHeader64<object::LittleEndian>,
) -> (Option<u64>, Option<u64>) {
    use object::read::elf::FileHeader;
    use object::LittleEndian as LE;
    let end = |at: u64, size: u16, count: u16| {
        u64::from(size)
            .checked_mul(u64::from(count))
            .and_then(|n| at.checked_add(n))
    };
    (
        end(
            header.e_shoff(LE),
            header.e_shentsize(LE),
            header.e_shnum(LE),
        ),
        end(
            header.e_phoff(LE),
            header.e_phentsize(LE),
            header.e_phnum(LE),
        ),
    )
}

/// Where the section header table and the program header table of a little-endian ELF64
/// file end, read from its 64-byte header alone (`None` for a table whose end overflows);
/// `None` when `head` does not start with one.
pub(crate) fn elf64_tables_end(head: &[u8]) -> Option<(Option<u64>, Option<u64>)> {
    elf64_header(head).map(table_ends)
}

/// End of a little-endian ELF64 file, if it can be read and lies inside `data`
/// ([`elf64_len`]).
///
/// ptxas puts the section header table last, so for its cubins this is the end of that
/// table; nvlink's relocatable cubins can put the table first, and their sections follow it.
fn elf64_end(data: &[u8]) -> Option<usize> {
    elf64_len(data)
        .ok()
        .and_then(|end| usize::try_from(end).ok())
}

/// True if `data` starts with the magic of a container that may follow a fatbinary in a
/// file: another fatbinary, a bundle, a `CCOB` or an OffloadBinary.
fn starts_container(data: &[u8]) -> bool {
    data.starts_with(NVFATBIN_MAGIC)
        || data.starts_with(BUNDLE_MAGIC)
        || data.starts_with(CCOB_MAGIC)
        || data.starts_with(OFFLOAD_BINARY_MAGIC)
}

/// Where, after the entry that ends at `pos`, another container starts (after zero
/// padding) inside the extent the header gives (`total`): the offset, if one does. A
/// fatbinary's entries never start with a container magic (their first two bytes are the
/// kind, 1 or 2), so such bytes mean the header's size runs past the entries.
fn container_inside(data: &[u8], pos: u64, total: u64) -> Option<u64> {
    let from = usize::try_from(pos).ok()?;
    // The common case, an entry's kind byte, answered without a scan.
    let first = *data.get(from)?;
    if first != 0
        && ![
            NVFATBIN_MAGIC[0],
            BUNDLE_MAGIC[0],
            CCOB_MAGIC[0],
            OFFLOAD_BINARY_MAGIC[0],
        ]
        .contains(&first)
    {
        return None;
    }
    let at = bytes::skip_zeros(data, from)?;
    let at64 = u64_of(at);
    (at64 < total && starts_container(data.get(at..)?)).then_some(at64)
}

/// The length the header of the fatbinary at the start of `data` describes, for a walk
/// that resumes after a fatbinary that does not read: `header_size + size`, or, where the
/// entries (followed by their own header and payload sizes) end before that at the start
/// of another container, that container's offset. `None` when the header does not read.
pub fn described_len(data: &[u8]) -> Option<u64> {
    let h: &FatbinHeader = bytes::read(data, 0, "").ok()?;
    let body_at = u64::from(h.header_size.get());
    let total = body_at.checked_add(h.size.get())?;
    if body_at < HEADER_SIZE {
        return Some(total);
    }
    let mut pos = body_at;
    while pos < total {
        if pos > body_at {
            if let Some(at) = container_inside(data, pos, total) {
                return Some(at);
            }
        }
        let Ok(e) = bytes::read::<FatbinEntryHeader>(data, pos, "") else {
            break;
        };
        let hs = u64::from(e.header_size.get());
        let next = pos
            .checked_add(hs)
            .and_then(|p| p.checked_add(e.payload_size.get()));
        match next {
            Some(next) if hs >= MIN_ENTRY_HEADER && next <= total => pos = next,
            _ => break,
        }
    }
    Some(total)
}

/// The length the header of the fatbinary at the start of `data` declares,
/// `header_size + size`, as a registration measures the fatbinary a wrapper points at
/// (without reading its entries; `REGISTRATION.md` §4.2). Errors: `Truncated` at 0 for a
/// header that does not fit, `OutOfBounds` at 8 for a length that overflows, `Truncated`
/// at 8 for one past the end of `data`. The magic is not checked ([`is_fatbin`]).
pub fn declared_len(data: &[u8]) -> Result<u64> {
    use zerocopy::FromBytes;
    let (h, _) = FatbinHeader::ref_from_prefix(data)
        .map_err(|_| Error::new(ErrorKind::Truncated, 0, "NVIDIA fatbinary header truncated"))?;
    let len = u64::from(h.header_size.get())
        .checked_add(h.size.get())
        .ok_or(Error::new(
            ErrorKind::OutOfBounds,
            8,
            "NVIDIA fatbinary size overflows",
        ))?;
    if len > u64_of(data.len()) {
        return Err(Error::new(
            ErrorKind::Truncated,
            8,
            "NVIDIA fatbinary runs past the end of its region",
        ));
    }
    Ok(len)
}

/// Checks a decompressed size claim against the limit and the LZ4 ratio.
fn check_claim(size: u64, compressed: u64, size_field: u64, limits: &Limits) -> Result<()> {
    if size > limits.max_decompressed_size {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            size_field,
            "declared decompressed size exceeds the limit",
        ));
    }
    if size > compressed.saturating_mul(LZ4_MAX_RATIO).saturating_add(64) {
        return Err(Error::new(
            ErrorKind::SizeMismatch,
            size_field,
            "declared decompressed size is more than the payload can produce",
        ));
    }
    Ok(())
}

/// Checks the header of the fatbinary at `data[0]` (magic, version, header size, a size
/// inside `data`); returns where its body starts and where it ends.
fn read_header(data: &[u8]) -> Result<(u64, u64)> {
    let h: &FatbinHeader = bytes::read(data, 0, "fatbinary header truncated")?;
    if &h.magic != NVFATBIN_MAGIC {
        return Err(Error::new(
            ErrorKind::BadMagic,
            0,
            "not an NVIDIA fatbinary (no 50 ED 55 BA magic)",
        ));
    }
    if h.version.get() != 1 {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            4,
            "fatbinary version is not 1",
        ));
    }
    let body_at = u64::from(h.header_size.get());
    if body_at < HEADER_SIZE {
        return Err(Error::new(
            ErrorKind::Malformed,
            6,
            "fatbinary header size is smaller than 16",
        ));
    }
    let total = bytes::add(body_at, h.size.get(), 8, "fatbinary size overflows")?;
    if total > u64_of(data.len()) {
        return Err(Error::new(
            ErrorKind::Truncated,
            8,
            "fatbinary size runs past the end of the data",
        ));
    }
    Ok((body_at, total))
}

/// Where the payload of the entry whose header `h` is at `pos` starts and ends, checked
/// against the header size's minimum and the fatbinary's size `total`.
fn entry_range(h: &FatbinEntryHeader, pos: u64, total: u64) -> Result<(u64, u64)> {
    let hs = u64::from(h.header_size.get());
    if hs < MIN_ENTRY_HEADER {
        return Err(Error::new(
            ErrorKind::Malformed,
            pos.saturating_add(4),
            "fatbinary entry header is smaller than 64 bytes",
        ));
    }
    let payload_at = bytes::add(pos, hs, pos.saturating_add(4), "fatbinary entry overflows")?;
    let next = bytes::add(
        payload_at,
        h.payload_size.get(),
        pos.saturating_add(8),
        "fatbinary entry overflows",
    )?;
    if payload_at > total {
        return Err(Error::new(
            ErrorKind::Truncated,
            pos.saturating_add(4),
            "fatbinary entry header runs past the end of the fatbinary",
        ));
    }
    if next > total {
        return Err(Error::new(
            ErrorKind::OutOfBounds,
            pos.saturating_add(8),
            "fatbinary entry payload runs past the end of the fatbinary",
        ));
    }
    Ok((payload_at, next))
}

/// The kind of the entry at `pos` from its header's kind field.
fn entry_kind(kind: u16, pos: u64) -> Result<EntryKind> {
    match kind {
        1 => Ok(EntryKind::Ptx),
        2 => Ok(EntryKind::Cubin),
        KIND_TILE_IR => Ok(EntryKind::TileIr),
        KIND_LTO_IR => Ok(EntryKind::LtoIr),
        _ => Err(Error::new(
            ErrorKind::UnsupportedMethod,
            pos,
            "fatbinary entry kind is none of PTX (1), ELF (2), LTO IR (8) and Tile IR (0x80)",
        )),
    }
}

/// Refuses the flags of the entry at `pos` that name two codecs or two variants.
fn check_flags(flags: u64, pos: u64) -> Result<()> {
    if flags & FLAG_LZ4 != 0 && flags & FLAG_ZSTD != 0 {
        return Err(Error::new(
            ErrorKind::UnsupportedMethod,
            pos.saturating_add(0x28),
            "fatbinary entry flags name both LZ4 and zstd",
        ));
    }
    if flags & FLAG_ARCH_SPECIFIC != 0 && flags & FLAG_FAMILY != 0 {
        return Err(Error::new(
            ErrorKind::Malformed,
            pos.saturating_add(0x28),
            "fatbinary entry flags name both the 'a' and the 'f' variant",
        ));
    }
    Ok(())
}

impl<'data> Fatbin<'data> {
    /// Parses the fatbinary at `data[0]`; it must lie inside `data` (bytes after it are
    /// ignored: see [`Fatbin::len`]).
    pub fn parse(data: &'data [u8], limits: &Limits) -> Result<Self> {
        let (body_at, total) = read_header(data)?;
        let whole = data;
        let data = bytes::sub(data, 0, total, "fatbinary")?;
        let mut fatbin = Fatbin {
            data,
            body_at,
            count: 0,
            claimed: 0,
        };
        let mut pos = body_at;
        while pos < total {
            if fatbin.count >= limits.max_entries {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    pos,
                    "fatbinary entry count exceeds the limit",
                ));
            }
            if pos > body_at && container_inside(whole, pos, total).is_some() {
                return Err(Error::new(
                    ErrorKind::SizeMismatch,
                    8,
                    "fatbinary size runs past its entries into the container after it",
                ));
            }
            let (entry, next) = fatbin.walked_entry_at(whole, pos)?;
            fatbin.claim(&entry, pos, limits)?;
            fatbin.count = fatbin.count.saturating_add(1);
            pos = next;
        }
        Ok(fatbin)
    }

    /// The entry at `pos` of the fatbinary being parsed ([`Fatbin::entry_at`]). An entry
    /// that runs past the size the header gives but reads in the `whole` data names the
    /// size as what is wrong.
    fn walked_entry_at(&self, whole: &'data [u8], pos: u64) -> Result<(FatbinEntry<'data>, u64)> {
        self.entry_at(pos, 0).map_err(|e| {
            let fits = Fatbin {
                data: whole,
                ..*self
            }
            .entry_at(pos, 0)
            .is_ok();
            if fits {
                Error::new(
                    ErrorKind::SizeMismatch,
                    8,
                    "fatbinary size ends inside an entry (the entry reads in the data after it)",
                )
            } else {
                e
            }
        })
    }

    /// Checks the decompressed size a compressed `entry` (at `pos`) declares against the
    /// limits (alone, and added to those of the entries before it), and counts it.
    fn claim(&mut self, entry: &FatbinEntry<'data>, pos: u64, limits: &Limits) -> Result<()> {
        let Some(codec) = entry.codec else {
            return Ok(());
        };
        // LTO IR is never decoded: its claim makes nothing.
        if entry.kind == EntryKind::LtoIr {
            return Ok(());
        }
        let size_field = pos.saturating_add(0x38);
        match codec {
            Codec::Lz4 => check_claim(
                entry.uncompressed_size,
                entry.compressed_size,
                size_field,
                limits,
            )?,
            Codec::Zstd | Codec::Zlib => {
                if entry.uncompressed_size > limits.max_decompressed_size {
                    return Err(Error::new(
                        ErrorKind::LimitExceeded,
                        size_field,
                        "declared decompressed size exceeds the limit",
                    ));
                }
            }
        }
        self.claimed = self.claimed.saturating_add(entry.uncompressed_size);
        if self.claimed > limits.max_decompressed_size {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                size_field,
                "decompressed sizes of the fatbinary's entries exceed the limit",
            ));
        }
        Ok(())
    }

    /// Decodes the entry header at `pos` (validated); returns it and the offset after its
    /// payload.
    fn entry_at(&self, pos: u64, index: usize) -> Result<(FatbinEntry<'data>, u64)> {
        let h: &FatbinEntryHeader =
            bytes::read(self.data, pos, "fatbinary entry header truncated")?;
        let header_size = h.header_size.get();
        let (payload_at, next) = entry_range(h, pos, u64_of(self.data.len()))?;
        let kind = entry_kind(h.kind.get(), pos)?;
        let flags = h.flags.get();
        check_flags(flags, pos)?;
        let codec = Codec::from_flags(flags);
        let compressed_size = u64::from(h.compressed_size.get());
        let uncompressed_size = h.uncompressed_size.get();
        let payload = bytes::sub(self.data, payload_at, h.payload_size.get(), "payload")?;
        match codec {
            None if compressed_size != 0 || uncompressed_size != 0 => {
                return Err(Error::new(
                    ErrorKind::UnsupportedMethod,
                    pos.saturating_add(0x28),
                    "fatbinary entry has compressed sizes but no known codec flag",
                ))
            }
            Some(_) if compressed_size > u64_of(payload.len()) => {
                return Err(Error::new(
                    ErrorKind::OutOfBounds,
                    pos.saturating_add(0x10),
                    "compressed size is larger than the stored payload",
                ))
            }
            _ => {}
        }
        let header = bytes::sub(self.data, pos, u64::from(header_size), "entry header")?;
        Ok((
            FatbinEntry::from_header(h, index, pos, kind, header, payload),
            next,
        ))
    }

    /// The entry at `pos` of a fatbinary [`Fatbin::parse`] validated: what
    /// [`Fatbin::entry_at`] gives, without re-making its checks and their errors (`None`
    /// where one would fail, which cannot happen after `parse`). The iteration's path: it
    /// reads the header fields once and slices twice.
    fn parsed_entry_at(&self, pos: u64, index: usize) -> Option<(FatbinEntry<'data>, u64)> {
        use zerocopy::FromBytes;
        let at = usize::try_from(pos).ok()?;
        let (h, _) = FatbinEntryHeader::ref_from_prefix(self.data.get(at..)?).ok()?;
        let header_size = h.header_size.get();
        let payload_at = at.checked_add(usize::try_from(header_size).ok()?)?;
        let end = payload_at.checked_add(usize::try_from(h.payload_size.get()).ok()?)?;
        let kind = entry_kind(h.kind.get(), pos).ok()?;
        Some((
            FatbinEntry::from_header(
                h,
                index,
                pos,
                kind,
                self.data.get(at..payload_at)?,
                self.data.get(payload_at..end)?,
            ),
            u64_of(end),
        ))
    }

    tools_pub! {
        /// Size of the fatbinary (header and body).
        pub fn len(&self) -> u64 {
            u64_of(self.data.len())
        }
    }

    tools_pub! {
        /// True if the fatbinary has no entries.
        pub fn is_empty(&self) -> bool {
            self.count == 0
        }
    }

    tools_pub! {
        /// Number of entries.
        pub fn entry_count(&self) -> u64 {
            self.count
        }
    }

    tools_pub! {
        /// Sum of the decompressed sizes the compressed entries declare.
        pub fn decompressed_claim(&self) -> u64 {
            self.claimed
        }
    }

    tools_pub! {
        /// The fatbinary's bytes (header and body).
        pub fn bytes(&self) -> &'data [u8] {
            self.data
        }
    }

    /// The entries in stored order.
    pub fn entries(&self) -> FatbinEntries<'data> {
        FatbinEntries {
            fatbin: *self,
            pos: self.body_at,
            index: 0,
        }
    }
}

/// Iterator over the entries of a [`Fatbin`].
#[derive(Clone, Debug)]
pub struct FatbinEntries<'data> {
    fatbin: Fatbin<'data>,
    pos: u64,
    index: usize,
}

impl<'data> Iterator for FatbinEntries<'data> {
    type Item = FatbinEntry<'data>;

    fn next(&mut self) -> Option<FatbinEntry<'data>> {
        if self.pos >= self.fatbin.len() {
            return None;
        }
        // Validated by `parse`: a failure cannot happen here; stop if it does.
        match self.fatbin.parsed_entry_at(self.pos, self.index) {
            Some((e, next)) => {
                self.pos = next;
                self.index = self.index.saturating_add(1);
                Some(e)
            }
            None => {
                self.pos = u64::MAX;
                None
            }
        }
    }
}

/// Fatbinaries laid out back to back (a `.nv_fatbin` section), separated by zero padding
/// only. Yields (offset, fatbinary); an error ends the walk.
pub fn sequence<'data>(
    data: &'data [u8],
    limits: &Limits,
) -> impl Iterator<Item = Result<(u64, Fatbin<'data>)>> + 'data {
    let limits = *limits;
    let mut pos = 0usize;
    let mut done = false;
    core::iter::from_fn(move || {
        if done {
            return None;
        }
        let start = bytes::skip_zeros(data, pos)?;
        let at = u64_of(start);
        let blob = data.get(start..).unwrap_or_default();
        let r = if is_fatbin(blob) {
            Fatbin::parse(blob, &limits).map_err(|e| e.rebase(at))
        } else {
            Err(Error::new(
                ErrorKind::Malformed,
                at,
                "unexpected bytes where the next fatbinary should start",
            ))
        };
        match r {
            Ok(f) => {
                let len = usize::try_from(f.len()).unwrap_or(usize::MAX);
                pos = start.saturating_add(len.max(1));
                Some(Ok((at, f)))
            }
            Err(e) => {
                done = true;
                Some(Err(e))
            }
        }
    })
}

/// Width of one slot of [`NAMES`]: up to 7 name bytes and the length.
const SLOT: usize = 8;
/// SM numbers with a name in [`NAMES`].
const FIRST_SM: usize = 10;
const LAST_SM: usize = 999;
const SLOTS: usize = (LAST_SM - FIRST_SM + 1) * 3;

/// `sm_10` … `sm_999f`: every architecture name, three variants per SM number, so that
/// images can name their target with a `&'static str`.
static NAMES: [[u8; SLOT]; SLOTS] = names();

#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn names() -> [[u8; SLOT]; SLOTS] {
    let mut t = [[0u8; SLOT]; SLOTS];
    let mut sm = FIRST_SM;
    while sm <= LAST_SM {
        let mut v = 0;
        while v < 3 {
            let slot = &mut t[(sm - FIRST_SM) * 3 + v];
            slot[0] = b's';
            slot[1] = b'm';
            slot[2] = b'_';
            let mut n = 3;
            if sm >= 100 {
                slot[n] = b'0' + (sm / 100) as u8;
                n += 1;
            }
            slot[n] = b'0' + ((sm / 10) % 10) as u8;
            slot[n + 1] = b'0' + (sm % 10) as u8;
            n += 2;
            if v == 1 {
                slot[n] = b'a';
                n += 1;
            } else if v == 2 {
                slot[n] = b'f';
                n += 1;
            }
            slot[SLOT - 1] = n as u8;
            v += 1;
        }
        sm += 1;
    }
    t
}

/// [`NAMES`] as strings, made at compile time: naming an entry is a table look-up, not a
/// UTF-8 check on every entry of a walk.
static NAME_STRS: [&str; SLOTS] = name_strs(&NAMES);

#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn name_strs(names: &'static [[u8; SLOT]; SLOTS]) -> [&'static str; SLOTS] {
    let mut t = [""; SLOTS];
    let mut i = 0;
    while i < SLOTS {
        let slot: &'static [u8; SLOT] = &names[i];
        let (name, _) = slot.split_at(slot[SLOT - 1] as usize);
        t[i] = match core::str::from_utf8(name) {
            Ok(s) => s,
            Err(_) => "",
        };
        i += 1;
    }
    t
}

/// `sm_86`, `sm_90a`, `sm_100f` for an SM number and variant (`None` outside 10–999).
pub fn arch_name(sm: u32, variant: Variant) -> Option<&'static str> {
    let sm = usize::try_from(sm).ok()?;
    if !(FIRST_SM..=LAST_SM).contains(&sm) {
        return None;
    }
    let i = sm
        .checked_sub(FIRST_SM)?
        .checked_mul(3)?
        .checked_add(variant.index())?;
    NAME_STRS.get(i).copied().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    fn entry(kind: u16, flags: u64, sm: u32, payload: &[u8], csize: u32, usize_: u64) -> Vec<u8> {
        let mut e = vec![0u8; 64];
        e[0..2].copy_from_slice(&kind.to_le_bytes());
        e[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        e[4..8].copy_from_slice(&64u32.to_le_bytes());
        e[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        e[16..20].copy_from_slice(&csize.to_le_bytes());
        e[0x1C..0x20].copy_from_slice(&sm.to_le_bytes());
        e[0x28..0x30].copy_from_slice(&flags.to_le_bytes());
        e[0x38..0x40].copy_from_slice(&usize_.to_le_bytes());
        e.extend_from_slice(payload);
        e
    }

    fn fatbin(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut f = vec![0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0];
        f.extend_from_slice(&(body.len() as u64).to_le_bytes());
        f.extend_from_slice(&body);
        f
    }

    #[test]
    fn names_cover_every_sm() {
        assert_eq!(arch_name(86, Variant::Plain), Some("sm_86"));
        assert_eq!(arch_name(90, Variant::ArchSpecific), Some("sm_90a"));
        assert_eq!(arch_name(100, Variant::Family), Some("sm_100f"));
        assert_eq!(arch_name(121, Variant::Plain), Some("sm_121"));
        assert_eq!(arch_name(999, Variant::Family), Some("sm_999f"));
        assert_eq!(arch_name(9, Variant::Plain), None);
        assert_eq!(arch_name(1000, Variant::Plain), None);
    }

    #[test]
    fn ptx_entry_reads_and_trims() {
        let f = fatbin(&[entry(1, 0x11, 86, b".version 9.5\n\0\0\0", 0, 0)]);
        let fb = Fatbin::parse(&f, &Limits::DEFAULT).unwrap();
        let e: Vec<_> = fb.entries().collect();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].kind, EntryKind::Ptx);
        assert_eq!(e[0].arch_name(), Some("sm_86"));
        assert_eq!(e[0].image(), Some(&b".version 9.5\n"[..]));
        assert_eq!(e[0].unknown_flags(), 0);
    }

    #[test]
    fn bad_input_is_located() {
        let good = fatbin(&[entry(1, 0x11, 86, b"x\0", 0, 0)]);
        let mut k = good.clone();
        k[16] = 7;
        let err = Fatbin::parse(&k, &Limits::DEFAULT).unwrap_err();
        assert_eq!(
            (err.kind(), err.offset()),
            (ErrorKind::UnsupportedMethod, 16)
        );
        let err = Fatbin::parse(&good[..40], &Limits::DEFAULT).unwrap_err();
        assert_eq!((err.kind(), err.offset()), (ErrorKind::Truncated, 8));
        // Unknown codec: sizes set without a codec flag.
        let odd = fatbin(&[entry(1, 0x11, 86, b"x\0", 2, 2)]);
        let err = Fatbin::parse(&odd, &Limits::DEFAULT).unwrap_err();
        assert_eq!(
            (err.kind(), err.offset()),
            (ErrorKind::UnsupportedMethod, 16 + 0x28)
        );
        // LZ4 bomb: 4 bytes cannot make 1 MiB.
        let bomb = fatbin(&[entry(1, 0x2011, 86, b"abcd", 4, 1 << 20)]);
        let err = Fatbin::parse(&bomb, &Limits::DEFAULT).unwrap_err();
        assert_eq!(
            (err.kind(), err.offset()),
            (ErrorKind::SizeMismatch, 16 + 0x38)
        );
        let limits = Limits {
            max_decompressed_size: 10,
            ..Limits::DEFAULT
        };
        let big = fatbin(&[entry(1, 0x8011, 86, b"abcd", 4, 11)]);
        let err = Fatbin::parse(&big, &limits).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    }

    #[test]
    fn iteration_gives_the_entries_the_checked_reader_gives() {
        let block = [0x4F, b'a', b'b', b'c', b'd', 4, 0, 0x00, 0x10, b'e'];
        let f = fatbin(&[
            entry(1, 0x11, 86, b".version 9.5\n\0\0\0", 0, 0),
            entry(2, 0x10_2011, 90, &block, block.len() as u32, 24),
            entry(2, 0x20_8011, 100, b"(\xb5/\xfd....", 8, 4096),
            entry(0x80, 0x11, 120, b"\x7fTileIR\0", 0, 0),
        ]);
        let fb = Fatbin::parse(&f, &Limits::DEFAULT).unwrap();
        let mut pos = fb.body_at;
        let mut n = 0;
        for (i, e) in fb.entries().enumerate() {
            let (want, next) = fb.entry_at(pos, i).unwrap();
            assert_eq!(std::format!("{e:?}"), std::format!("{want:?}"));
            pos = next;
            n += 1;
        }
        assert_eq!((n, pos), (4, fb.len()));
    }

    #[test]
    fn lz4_round_trip() {
        // An LZ4 block: literals "abcd", then a match of offset 4, length 4 + 12.
        // then a last sequence of one literal "e".
        let block = [0x4F, b'a', b'b', b'c', b'd', 4, 0, 0x00, 0x10, b'e'];
        let f = fatbin(&[entry(2, 0x2011, 75, &block, block.len() as u32, 4 + 19 + 1)]);
        let fb = Fatbin::parse(&f, &Limits::DEFAULT).unwrap();
        let e = fb.entries().next().unwrap();
        assert_eq!(e.codec, Some(Codec::Lz4));
        let out = e.decompress(&ReadOptions::default()).unwrap();
        assert_eq!(out.len(), 24);
        assert!(out.starts_with(b"abcdabcdabcd"));
        assert_eq!(out.last(), Some(&b'e'));
        // A wrong claim is refused, not padded.
        let f = fatbin(&[entry(2, 0x2011, 75, &block, block.len() as u32, 30)]);
        let e = Fatbin::parse(&f, &Limits::DEFAULT)
            .unwrap()
            .entries()
            .next()
            .unwrap();
        assert!(e.decompress(&ReadOptions::default()).is_err());
    }
}
