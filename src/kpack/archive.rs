//! The `.kpack` archive: header, MessagePack table of contents, and the code objects it
//! stores plain or as one zstd frame per kernel (`KPACK.md` §2).

use alloc::borrow::Cow;
use alloc::vec::Vec;

use crate::bytes::{read, sub, u64_of};
use crate::decompress::{decode_with_hook, Codec};
use crate::error::{Error, ErrorKind, Result};
use crate::raw::{KpackHeader, KPACK_MAGIC};
use crate::options::{Limits, ReadOptions};

use super::msgpack::{Head, Reader};
use super::LoaderError;

/// The only archive version rocm-kpack's reader accepts (`KPACK_CURRENT_VERSION`,
/// `runtime/include/rocm_kpack/kpack_types.h`).
pub const KPACK_VERSION: u32 = 1;

/// Most frames a `zstd-per-kernel` blob may declare in rocm-kpack's reader
/// (`MAX_KERNELS`, `runtime/src/compression.cpp`: `build_zstd_frame_index`); the
/// [`Limits::max_entries`] bound applies as well.
pub const MAX_ZSTD_FRAMES: u64 = 1 << 20;

/// Largest `zstd_size` rocm-kpack's reader accepts (4 GiB, `MAX_BLOB_SIZE` in
/// `build_zstd_frame_index`).
pub const MAX_ZSTD_BLOB: u64 = 4 << 30;

/// How an archive stores its code objects (the TOC's `compression_scheme`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// `"none"`: each code object is a blob, `blobs[ordinal]` gives its offset and size.
    /// Also what the C reader assumes when the key is missing, is not a string, or names
    /// another scheme (its archive record is zero-initialised,
    /// `runtime/src/toc_parser.cpp`: `parse_toc`).
    None,
    /// `"zstd-per-kernel"`: one blob at `zstd_offset` holding a `u32` frame count, then per
    /// kernel a `u32` size and one zstd frame; the ordinal is the frame's index.
    ZstdPerKernel,
}

tools_fields! {
    /// One entry of the TOC: the code object of `binary_key` for `arch`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct KpackEntry<'data> {
        /// `"<kernel_name>#<co_index>"`: the ref record's kernel name and the wrapper index.
        pub binary_key: &'data str,
        /// The architecture the TOC files the entry under (e.g. `gfx90a:xnack+`).
        pub arch: &'data str,
        /// The entry's `type` (`"hsaco"`), when it is a string.
        pub kind: Option<&'data str>,
        /// Offset of the entry's metadata map in the archive.
        pub offset: u64,
        @tools
        /// The code object's size: what a zstd frame must decode to.
        pub original_size: u64,
        /// Index into `blobs` (`none`) or into the frames of the zstd blob.
        pub ordinal: u32,
        /// Offset of its `ordinal` value.
        pub ordinal_at: u64,
        /// Offset of its `original_size` value.
        pub original_size_at: u64,
    }
}

/// A `none` blob: where the code object of one ordinal is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Blob {
    offset: u64,
    size: u64,
    /// Offset of the blob's map in the TOC.
    at: u64,
}

/// One frame of a `zstd-per-kernel` blob: its absolute offset and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    offset: u64,
    size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Storage {
    Blobs(Vec<Blob>),
    Zstd {
        offset: u64,
        size: u64,
        frames: Vec<Frame>,
    },
}

/// A code object as the archive stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored<'data> {
    /// The code object itself, in place.
    Plain(&'data [u8]),
    /// One zstd frame that decodes to `original_size` bytes, and its offset in the archive.
    Zstd {
        /// The frame's bytes, in place.
        frame: &'data [u8],
        /// Offset of the frame in the archive.
        offset: u64,
    },
}

/// A parsed `.kpack` archive, borrowing the caller's bytes.
///
/// [`KpackArchive::parse`] reads the header and the whole TOC, and for `zstd-per-kernel`
/// the frame index, as rocm-kpack's `kpack_open` does (`runtime/src/archive.cpp`,
/// `toc_parser.cpp`, `compression.cpp`); a failure there is where the C loader skips the
/// archive. Blob bounds and ordinals are checked when a code object is asked for, as
/// `kpack_get_kernel` does: a bad entry spoils only itself.
///
/// ```
/// use offload_image::kpack::{Compression, KpackArchive};
/// use offload_image::Limits;
///
/// // An archive with one 4-byte code object stored plain.
/// let mut a = Vec::new();
/// a.extend_from_slice(b"KPAK");
/// a.extend_from_slice(&1u32.to_le_bytes());
/// a.extend_from_slice(&68u64.to_le_bytes()); // TOC offset
/// a.resize(64, 0);
/// a.extend_from_slice(b"\x7fELF");
/// // {"gfx_arches": ["gfx90a"], "compression_scheme": "none",
/// //  "blobs": [{"offset": 64, "size": 4}],
/// //  "toc": {"lib.so#0": {"gfx90a": {"type": "hsaco", "ordinal": 0, "original_size": 4}}}}
/// a.push(0x84);
/// a.extend_from_slice(b"\xaagfx_arches\x91\xa6gfx90a");
/// a.extend_from_slice(b"\xb2compression_scheme\xa4none");
/// a.extend_from_slice(b"\xa5blobs\x91\x82\xa6offset\x40\xa4size\x04");
/// a.extend_from_slice(b"\xa3toc\x81\xa8lib.so#0\x81\xa6gfx90a\x83");
/// a.extend_from_slice(b"\xa4type\xa5hsaco\xa7ordinal\x00\xadoriginal_size\x04");
///
/// let archive = KpackArchive::parse(&a, &Limits::DEFAULT)?;
/// assert_eq!(archive.compression(), Compression::None);
/// assert_eq!(archive.gfx_arches(), ["gfx90a"]);
/// let entry = archive.entry("lib.so#0", "gfx90a").unwrap();
/// let code = archive.code_object(entry, &Default::default())?;
/// assert_eq!(&code[..], b"\x7fELF");
/// # Ok::<(), offload_image::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KpackArchive<'data> {
    /// The bytes parsed: the whole archive, or (read by its TOC,
    /// [`KpackArchive::parse_toc`]) the TOC alone.
    data: &'data [u8],
    /// Offset of `data[0]` in the archive file.
    base: u64,
    /// Size of the archive file.
    file_len: u64,
    toc_offset: u64,
    format_version: Option<u64>,
    group_name: Option<&'data str>,
    gfx_arch_family: Option<&'data str>,
    scheme_name: Option<&'data str>,
    gfx_arches: Vec<&'data str>,
    entries: Vec<KpackEntry<'data>>,
    storage: Storage,
}

fn utf8<'d>(bytes: &'d [u8], at: u64, what: &'static str) -> Result<&'d str> {
    core::str::from_utf8(bytes).map_err(|_| Error::new(ErrorKind::Malformed, at, what))
}

fn too_many(at: u64) -> Error {
    Error::new(
        ErrorKind::LimitExceeded,
        at,
        "kpack TOC has more entries than the limit",
    )
}

/// The first value of each key rocm-kpack's TOC parser looks up (`find_key` returns the
/// first match; keys that are not strings are passed over).
#[derive(Default)]
struct TopKeys<'a> {
    format_version: Option<Reader<'a>>,
    group_name: Option<Reader<'a>>,
    gfx_arch_family: Option<Reader<'a>>,
    gfx_arches: Option<Reader<'a>>,
    compression_scheme: Option<Reader<'a>>,
    blobs: Option<Reader<'a>>,
    zstd_offset: Option<Reader<'a>>,
    zstd_size: Option<Reader<'a>>,
    toc: Option<Reader<'a>>,
}

impl<'a> TopKeys<'a> {
    /// Reads the top-level map of the TOC `toc` (at file offset `toc_offset`): where the
    /// first value of each key the C reader looks up starts.
    fn read(toc: &'a [u8], toc_offset: u64) -> Result<Self> {
        let mut r = Reader::new(toc, toc_offset);
        let (at, head) = r.head()?;
        let Head::Map(len) = head else {
            return Err(Error::new(
                ErrorKind::Malformed,
                at,
                "kpack TOC is not a MessagePack map",
            ));
        };
        let mut keys = TopKeys::default();
        for _ in 0..len {
            let (_, key) = r.head()?;
            let slot = match key {
                Head::Str(b"format_version") => Some(&mut keys.format_version),
                Head::Str(b"group_name") => Some(&mut keys.group_name),
                Head::Str(b"gfx_arch_family") => Some(&mut keys.gfx_arch_family),
                Head::Str(b"gfx_arches") => Some(&mut keys.gfx_arches),
                Head::Str(b"compression_scheme") => Some(&mut keys.compression_scheme),
                Head::Str(b"blobs") => Some(&mut keys.blobs),
                Head::Str(b"zstd_offset") => Some(&mut keys.zstd_offset),
                Head::Str(b"zstd_size") => Some(&mut keys.zstd_size),
                Head::Str(b"toc") => Some(&mut keys.toc),
                other => {
                    r.skip_rest(other)?;
                    None
                }
            };
            if let Some(slot) = slot {
                if slot.is_none() {
                    *slot = Some(r.clone());
                }
            }
            r.skip()?;
        }
        Ok(keys)
    }
}

/// The `gfx_arches` array (informational): its string items, at most the entry limit;
/// items that are not strings are passed over, as the C reader does. Anything but an
/// array gives none.
fn read_gfx_arches<'a>(mut v: Reader<'a>, limits: &Limits) -> Result<Vec<&'a str>> {
    let mut arches = Vec::new();
    if let (_, Head::Array(n)) = v.head()? {
        for _ in 0..n {
            let (at, item) = v.head()?;
            match item {
                Head::Str(s) => {
                    if u64_of(arches.len()) >= limits.max_entries {
                        return Err(too_many(at));
                    }
                    arches.push(utf8(s, at, "kpack gfx_arches item is not UTF-8")?);
                }
                // The C reader passes over items that are not strings.
                other => v.skip_rest(other)?,
            }
        }
    }
    Ok(arches)
}

impl<'data> KpackArchive<'data> {
    /// Parses an archive: the 16-byte header, the MessagePack TOC from the header's offset
    /// to the end of the data, and for `zstd-per-kernel` the frame index of the blob.
    ///
    /// Errors, with the C reader's code in brackets: a short file or another magic
    /// ([`ErrorKind::Truncated`], [`ErrorKind::BadMagic`]; 3), a version other than 1
    /// ([`ErrorKind::UnsupportedVersion`]; 4), a TOC offset at or past the end
    /// ([`ErrorKind::OutOfBounds`]; 3), a TOC that is not one MessagePack map (10), a zstd
    /// blob outside the file (9), shorter than its count, with more than
    /// [`MAX_ZSTD_FRAMES`] frames or frames running past it (3). Where the C reader would
    /// throw through its C API or read an uninitialised field (a number field of another
    /// type, a blob or entry without its `offset`/`size` or `ordinal`/`original_size`),
    /// this gives [`ErrorKind::Malformed`] at the value. Counts above
    /// [`Limits::max_entries`] are [`ErrorKind::LimitExceeded`].
    pub fn parse(data: &'data [u8], limits: &Limits) -> Result<Self> {
        let toc_offset = Self::toc_offset_of(data, u64_of(data.len()))?;
        let toc = sub(
            data,
            toc_offset,
            u64_of(data.len()).saturating_sub(toc_offset),
            "kpack TOC",
        )?;
        let mut in_data = |at: u64, buf: &mut [u8]| match sub(data, at, u64_of(buf.len()), "") {
            Ok(b) if b.len() == buf.len() => {
                buf.copy_from_slice(b);
                true
            }
            _ => false,
        };
        Self::parse_parts(
            data,
            0,
            toc,
            toc_offset,
            u64_of(data.len()),
            &mut in_data,
            limits,
        )
    }

    tools_pub! {
        /// The TOC offset the header at the start of `header` (the archive's first bytes, at
        /// least 16 of them) gives for an archive file of `file_len` bytes: the checks of
        /// [`KpackArchive::parse`] on the header, for callers that read an archive by its TOC
        /// ([`KpackArchive::parse_toc`]) and so read the bytes from that offset to the end.
        pub fn toc_offset_of(header: &[u8], file_len: u64) -> Result<u64> {
            if header.is_empty() || file_len == 0 {
                return Err(Error::new(ErrorKind::Truncated, 0, "empty kpack file"));
            }
            let header: &KpackHeader = read(header, 0, "kpack header")?;
            if &header.magic != KPACK_MAGIC {
                return Err(Error::new(
                    ErrorKind::BadMagic,
                    0,
                    "not a kpack archive (no KPAK)",
                ));
            }
            if header.version.get() != KPACK_VERSION {
                return Err(Error::new(
                    ErrorKind::UnsupportedVersion,
                    4,
                    "kpack version is not 1",
                ));
            }
            let toc_offset = header.toc_offset.get();
            if toc_offset >= file_len {
                return Err(Error::new(
                    ErrorKind::OutOfBounds,
                    8,
                    "kpack TOC offset is at or past the end of the file",
                ));
            }
            Ok(toc_offset)
        }
    }

    tools_pub! {
        /// Parses an archive read by its table of contents, without its code objects: `toc`
        /// is the file's bytes from `toc_offset` ([`KpackArchive::toc_offset_of`]) to its end
        /// (`file_len`). `read_at(offset, buf)` fills `buf` from the file at `offset` and says
        /// whether it could; it is asked only for the 4-byte frame count and frame sizes of a
        /// `zstd-per-kernel` blob (the frame index `kpack_open` builds). The checks and errors
        /// are those of [`KpackArchive::parse`], at the same file offsets; a code object is
        /// then read with [`KpackArchive::code_object_read`].
        pub fn parse_toc(
            toc: &'data [u8],
            toc_offset: u64,
            file_len: u64,
            read_at: &mut dyn FnMut(u64, &mut [u8]) -> bool,
            limits: &Limits,
        ) -> Result<Self> {
            let end = toc_offset.checked_add(u64_of(toc.len()));
            if toc_offset >= file_len || end != Some(file_len) {
                return Err(Error::new(
                    ErrorKind::SizeMismatch,
                    8,
                    "kpack TOC read is not the bytes from the TOC offset to the end of the file",
                ));
            }
            Self::parse_parts(toc, toc_offset, toc, toc_offset, file_len, read_at, limits)
        }
    }

    /// Parses the TOC `toc` (at file offset `toc_offset`) of the archive whose bytes are
    /// `data` (at file offset `base`): its top-level keys, the informational ones, the
    /// storage the compression scheme names, and the code-object table.
    fn parse_parts(
        data: &'data [u8],
        base: u64,
        toc: &'data [u8],
        toc_offset: u64,
        file_len: u64,
        read_at: &mut dyn FnMut(u64, &mut [u8]) -> bool,
        limits: &Limits,
    ) -> Result<Self> {
        let keys = TopKeys::read(toc, toc_offset)?;
        let mut archive = KpackArchive {
            data,
            base,
            file_len,
            toc_offset,
            format_version: None,
            group_name: None,
            gfx_arch_family: None,
            scheme_name: None,
            gfx_arches: Vec::new(),
            entries: Vec::new(),
            storage: Storage::Blobs(Vec::new()),
        };
        let compression = archive.read_informational(&keys)?;
        if let Some(v) = keys.gfx_arches {
            archive.gfx_arches = read_gfx_arches(v, limits)?;
        }
        archive.storage = match compression {
            Compression::None => Storage::Blobs(match keys.blobs {
                Some(v) => read_blobs(v, limits)?,
                None => Vec::new(),
            }),
            Compression::ZstdPerKernel => {
                read_zstd(read_at, file_len, keys.zstd_offset, keys.zstd_size, limits)?
            }
        };
        if let Some(v) = keys.toc {
            archive.entries = read_toc(v, limits)?;
        }
        Ok(archive)
    }

    /// Takes the informational keys (the C reader does not read them) where they are well
    /// typed: the format version, the group name, the architecture family and the
    /// compression scheme's name. Returns the compression the scheme names.
    fn read_informational(&mut self, keys: &TopKeys<'data>) -> Result<Compression> {
        if let Some(mut v) = keys.format_version.clone() {
            if let (_, Head::Uint(n)) = v.head()? {
                self.format_version = Some(n);
            }
        }
        if let Some(mut v) = keys.group_name.clone() {
            if let (at, Head::Str(s)) = v.head()? {
                self.group_name = Some(utf8(s, at, "kpack group_name is not UTF-8")?);
            }
        }
        if let Some(mut v) = keys.gfx_arch_family.clone() {
            if let (at, Head::Str(s)) = v.head()? {
                self.gfx_arch_family = Some(utf8(s, at, "kpack gfx_arch_family is not UTF-8")?);
            }
        }
        let mut compression = Compression::None;
        if let Some(mut v) = keys.compression_scheme.clone() {
            if let (at, Head::Str(s)) = v.head()? {
                let name = utf8(s, at, "kpack compression_scheme is not UTF-8")?;
                self.scheme_name = Some(name);
                if name == "zstd-per-kernel" {
                    compression = Compression::ZstdPerKernel;
                }
            }
        }
        Ok(compression)
    }

    tools_pub! {
        /// The archive's bytes (the TOC alone for an archive read by its TOC,
        /// [`KpackArchive::parse_toc`]).
        pub fn data(&self) -> &'data [u8] {
            self.data
        }
    }

    tools_pub! {
        /// Size of the archive file.
        pub fn file_len(&self) -> u64 {
            self.file_len
        }
    }

    tools_pub! {
        /// Where `entry`'s code object is stored in the archive file: its offset, its size,
        /// and whether it is a zstd frame (else the code object itself). Errors as
        /// [`KpackArchive::stored`].
        pub fn stored_range(&self, entry: &KpackEntry<'data>) -> Result<(u64, u64, bool)> {
            self.stored_range_coded(entry).map_err(|(_, e)| e)
        }
    }

    fn stored_range_coded(
        &self,
        entry: &KpackEntry<'data>,
    ) -> Result<(u64, u64, bool), (LoaderError, Error)> {
        let no_ordinal = (
            LoaderError::KernelNotFound,
            Error::new(
                ErrorKind::OutOfBounds,
                entry.ordinal_at,
                "kpack ordinal has no blob",
            ),
        );
        let index = usize::try_from(entry.ordinal).map_err(|_| no_ordinal)?;
        match &self.storage {
            Storage::Blobs(blobs) => {
                let blob = blobs.get(index).ok_or(no_ordinal)?;
                let inside = blob
                    .offset
                    .checked_add(blob.size)
                    .is_some_and(|end| end <= self.file_len);
                if !inside {
                    return Err((
                        LoaderError::IoError,
                        Error::new(
                            ErrorKind::OutOfBounds,
                            blob.at,
                            "kpack blob lies outside the file",
                        ),
                    ));
                }
                Ok((blob.offset, blob.size, false))
            }
            Storage::Zstd { frames, .. } => {
                let frame = frames.get(index).ok_or(no_ordinal)?;
                let size = u64::from(frame.size);
                if frame
                    .offset
                    .checked_add(size)
                    .is_none_or(|e| e > self.file_len)
                {
                    return Err((
                        LoaderError::IoError,
                        Error::new(ErrorKind::OutOfBounds, frame.offset, "zstd frame"),
                    ));
                }
                Ok((frame.offset, size, true))
            }
        }
    }

    tools_pub! {
        /// The code object of `entry` of an archive read by its TOC
        /// ([`KpackArchive::parse_toc`]), its stored bytes read with `read_at` (as there) and
        /// decoded as [`KpackArchive::code_object`] does. Nothing is read or allocated past the
        /// limits: a plain blob or a zstd frame over [`Limits::max_decompressed_size`] is
        /// [`ErrorKind::LimitExceeded`] at its TOC record or frame; the buffer is reserved
        /// fallibly ([`ErrorKind::OutOfMemory`]). A read that fails is the C reader's I/O error
        /// (9), [`ErrorKind::Truncated`] at the stored bytes.
        pub fn code_object_read(
            &self,
            entry: &KpackEntry<'data>,
            read_at: &mut dyn FnMut(u64, &mut [u8]) -> bool,
            options: &ReadOptions,
        ) -> Result<Vec<u8>, (LoaderError, Error)> {
            let (offset, size, zstd) = self.stored_range_coded(entry)?;
            let limit_at = match &self.storage {
                Storage::Blobs(blobs) => usize::try_from(entry.ordinal)
                    .ok()
                    .and_then(|i| blobs.get(i))
                    .map_or(entry.ordinal_at, |b| b.at),
                Storage::Zstd { .. } => offset,
            };
            let too_big = (
                LoaderError::IoError,
                Error::new(
                    ErrorKind::LimitExceeded,
                    limit_at,
                    "kpack code object is larger than the decompressed-size limit",
                ),
            );
            if size > options.limits.max_decompressed_size {
                return Err(too_big);
            }
            let len = usize::try_from(size).map_err(|_| too_big)?;
            let mut bytes = Vec::new();
            bytes.try_reserve_exact(len).map_err(|_| {
                (
                    LoaderError::IoError,
                    Error::new(
                        ErrorKind::OutOfMemory,
                        limit_at,
                        "no memory for the kpack code object",
                    ),
                )
            })?;
            bytes.resize(len, 0);
            if !read_at(offset, &mut bytes) {
                return Err((
                    LoaderError::IoError,
                    Error::new(
                        ErrorKind::Truncated,
                        offset,
                        "kpack code object could not be read from the file",
                    ),
                ));
            }
            if !zstd {
                return Ok(bytes);
            }
            decode_with_hook(
                Codec::Zstd,
                &bytes,
                offset,
                entry.original_size,
                entry.original_size_at,
                options,
            )
            .map_err(|e| (LoaderError::DecompressionFailed, e))
        }
    }

    tools_pub! {
        /// Offset of the TOC (from the header).
        pub fn toc_offset(&self) -> u64 {
            self.toc_offset
        }
    }

    tools_pub! {
        /// The TOC's `format_version` (1), when it is an integer; the C reader ignores it.
        pub fn format_version(&self) -> Option<u64> {
            self.format_version
        }
    }

    tools_pub! {
        /// The TOC's `group_name` (e.g. `rand_lib`), when it is a string.
        pub fn group_name(&self) -> Option<&'data str> {
            self.group_name
        }
    }

    tools_pub! {
        /// The TOC's `gfx_arch_family`, free text, when it is a string.
        pub fn gfx_arch_family(&self) -> Option<&'data str> {
            self.gfx_arch_family
        }
    }

    tools_pub! {
        /// The TOC's `compression_scheme` as written, when it is a string.
        pub fn compression_scheme(&self) -> Option<&'data str> {
            self.scheme_name
        }
    }

    tools_pub! {
        /// The scheme the C reader applies ([`Compression::None`] unless the TOC says
        /// `zstd-per-kernel`).
        pub fn compression(&self) -> Compression {
            match self.storage {
                Storage::Blobs(_) => Compression::None,
                Storage::Zstd { .. } => Compression::ZstdPerKernel,
            }
        }
    }

    tools_pub! {
        /// The string items of `gfx_arches`, in order: the architectures the loader matches
        /// (not the file name, not the TOC's per-entry architectures).
        pub fn gfx_arches(&self) -> &[&'data str] {
            &self.gfx_arches
        }
    }

    tools_pub! {
        /// Whether `gfx_arches` lists `arch` exactly (the loader's test, `loader.cpp`:
        /// `kpack_load_code_object`).
        pub fn has_arch(&self, arch: &str) -> bool {
            self.gfx_arches.contains(&arch)
        }
    }

    /// The TOC's entries in file order (string keys whose values are maps; the C reader
    /// passes over the others).
    pub fn entries(&self) -> core::slice::Iter<'_, KpackEntry<'data>> {
        self.entries.iter()
    }

    /// The entry for (`binary_key`, `arch`): the last in file order, as the C reader's
    /// `toc[binary][arch] = ...` assignment keeps the last of repeated keys.
    pub fn entry(&self, binary_key: &str, arch: &str) -> Option<&KpackEntry<'data>> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.binary_key == binary_key && e.arch == arch)
    }

    tools_pub! {
        /// Where `entry`'s code object is stored.
        ///
        /// An ordinal with no blob or frame is [`ErrorKind::OutOfBounds`] at the ordinal (the C
        /// reader: 5, kernel not found); a `none` blob outside the file is
        /// [`ErrorKind::OutOfBounds`] at its TOC record (the C reader: 9, I/O error).
        pub fn stored(&self, entry: &KpackEntry<'data>) -> Result<Stored<'data>> {
            self.stored_coded(entry).map_err(|(_, e)| e)
        }
    }

    fn stored_coded(
        &self,
        entry: &KpackEntry<'data>,
    ) -> Result<Stored<'data>, (LoaderError, Error)> {
        let (offset, size, zstd) = self.stored_range_coded(entry)?;
        let bytes = offset
            .checked_sub(self.base)
            .ok_or(ErrorKind::OutOfBounds)
            .and_then(|at| sub(self.data, at, size, "").map_err(|e| e.kind()))
            .map_err(|_| {
                (
                    LoaderError::IoError,
                    Error::new(
                        ErrorKind::OutOfBounds,
                        offset,
                        "kpack code object is not in the bytes read (the archive was read by its TOC: use code_object_read)",
                    ),
                )
            })?;
        Ok(if zstd {
            Stored::Zstd {
                frame: bytes,
                offset,
            }
        } else {
            Stored::Plain(bytes)
        })
    }

    /// The code object of `entry`: borrowed when stored plain (the blob's bytes, whatever
    /// `original_size` says, as the C reader returns them), decoded now when stored as a
    /// zstd frame.
    ///
    /// The frame must decode to exactly `original_size` bytes (the C reader's check, error
    /// 6): [`ErrorKind::SizeMismatch`] at `original_size` otherwise, decoding errors at the
    /// frame; `original_size` is checked against [`Limits::max_decompressed_size`] and what
    /// the frame can produce before anything is allocated, and the decoder of
    /// [`ReadOptions::decoders`] is used when it has one.
    pub fn code_object(
        &self,
        entry: &KpackEntry<'data>,
        options: &ReadOptions,
    ) -> Result<Cow<'data, [u8]>> {
        self.code_object_coded(entry, options).map_err(|(_, e)| e)
    }

    tools_pub! {
        /// [`KpackArchive::code_object`], with the code the C reader's `kpack_get_kernel`
        /// gives for the same failure.
        pub fn code_object_coded(
            &self,
            entry: &KpackEntry<'data>,
            options: &ReadOptions,
        ) -> Result<Cow<'data, [u8]>, (LoaderError, Error)> {
            match self.stored_coded(entry)? {
                Stored::Plain(bytes) => Ok(Cow::Borrowed(bytes)),
                Stored::Zstd { frame, offset } => decode_with_hook(
                    Codec::Zstd,
                    frame,
                    offset,
                    entry.original_size,
                    entry.original_size_at,
                    options,
                )
                .map(Cow::Owned)
                .map_err(|e| (LoaderError::DecompressionFailed, e)),
            }
        }
    }
}

fn read_blobs<'a>(mut v: Reader<'a>, limits: &Limits) -> Result<Vec<Blob>> {
    let mut blobs = Vec::new();
    let (_, head) = v.head()?;
    let Head::Array(n) = head else {
        return Ok(blobs);
    };
    for _ in 0..n {
        let (at, item) = v.head()?;
        let Head::Map(fields) = item else {
            // Items that are not maps are passed over (and so do not take an ordinal).
            v.skip_rest(item)?;
            continue;
        };
        let (mut offset, mut size) = (None, None);
        for _ in 0..fields {
            let (_, key) = v.head()?;
            match key {
                Head::Str(b"offset") if offset.is_none() => {
                    offset = Some(v.uint("kpack blob offset is not an unsigned integer")?.1)
                }
                Head::Str(b"size") if size.is_none() => {
                    size = Some(v.uint("kpack blob size is not an unsigned integer")?.1)
                }
                other => {
                    v.skip_rest(other)?;
                    v.skip()?;
                }
            }
        }
        let (Some(offset), Some(size)) = (offset, size) else {
            return Err(Error::new(
                ErrorKind::Malformed,
                at,
                "kpack blob has no offset or no size",
            ));
        };
        if u64_of(blobs.len()) >= limits.max_entries {
            return Err(too_many(at));
        }
        blobs.push(Blob { offset, size, at });
    }
    Ok(blobs)
}

/// The storage of a `zstd-per-kernel` archive: the zstd blob at `zstd_offset` of
/// `zstd_size` bytes (missing keys are zero, as in the C reader's zero-initialised
/// record), checked to lie in the file, and its frame index, read with `read_at`.
fn read_zstd(
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> bool,
    file_len: u64,
    offset: Option<Reader<'_>>,
    size: Option<Reader<'_>>,
    limits: &Limits,
) -> Result<Storage> {
    let (offset, offset_at) = uint_or_zero(offset, "kpack zstd_offset is not an unsigned integer")?;
    let (size, size_at) = uint_or_zero(size, "kpack zstd_size is not an unsigned integer")?;
    if size > MAX_ZSTD_BLOB {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            size_at,
            "kpack zstd_size is over 4 GiB",
        ));
    }
    if offset.checked_add(size).is_none_or(|end| end > file_len) {
        return Err(Error::new(
            ErrorKind::OutOfBounds,
            offset_at,
            "kpack zstd blob lies outside the file",
        ));
    }
    let frames = read_frames(read_at, offset, size, limits)?;
    Ok(Storage::Zstd {
        offset,
        size,
        frames,
    })
}

/// The unsigned integer `v` holds and its offset; `(0, 0)` for a missing key (the C
/// reader's record is zero-initialised).
fn uint_or_zero(v: Option<Reader<'_>>, what: &'static str) -> Result<(u64, u64)> {
    match v {
        Some(mut v) => {
            let (at, n) = v.uint(what)?;
            Ok((n, at))
        }
        None => Ok((0, 0)),
    }
}

/// The frame index of the zstd blob at file offset `offset`, `size` bytes long: a 32-bit
/// frame count, then each frame's 32-bit size and bytes, all inside the blob.
fn read_frames(
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> bool,
    offset: u64,
    size: u64,
    limits: &Limits,
) -> Result<Vec<Frame>> {
    // Four bytes of the blob at `pos` (from its start), read from the file.
    let mut le32 = |pos: u64| -> Option<u32> {
        let end = pos.checked_add(4)?;
        if end > size {
            return None;
        }
        let mut b = [0u8; 4];
        read_at(offset.checked_add(pos)?, &mut b).then(|| u32::from_le_bytes(b))
    };
    let count = le32(0).ok_or(Error::new(
        ErrorKind::Truncated,
        offset,
        "kpack zstd blob is shorter than its frame count",
    ))?;
    if u64::from(count) > MAX_ZSTD_FRAMES || u64::from(count) > limits.max_entries {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            offset,
            "kpack zstd blob has too many frames",
        ));
    }
    let mut frames = Vec::new();
    let mut pos: u64 = 4;
    for _ in 0..count {
        let at = offset.saturating_add(pos);
        let frame_size = le32(pos).ok_or(Error::new(
            ErrorKind::Truncated,
            at,
            "kpack zstd frame size runs past the blob",
        ))?;
        pos = pos.saturating_add(4);
        let end = pos.saturating_add(u64::from(frame_size));
        if end > size {
            return Err(Error::new(
                ErrorKind::Truncated,
                at,
                "kpack zstd frame runs past the blob",
            ));
        }
        frames.push(Frame {
            offset: offset.saturating_add(pos),
            size: frame_size,
        });
        pos = end;
    }
    Ok(frames)
}

/// The code-object table (`toc`): binary key → architecture → entry metadata. Keys that
/// are not strings and values that are not maps are passed over, as the C reader does.
fn read_toc<'a>(mut v: Reader<'a>, limits: &Limits) -> Result<Vec<KpackEntry<'a>>> {
    let mut entries = Vec::new();
    let (_, head) = v.head()?;
    let Head::Map(binaries) = head else {
        v.skip_rest(head)?;
        return Ok(entries);
    };
    for _ in 0..binaries {
        let (key_at, key) = v.head()?;
        let Head::Str(key) = key else {
            v.skip_rest(key)?;
            v.skip()?;
            continue;
        };
        let binary_key = utf8(key, key_at, "kpack binary key is not UTF-8")?;
        let (_, archs) = v.head()?;
        let Head::Map(archs) = archs else {
            v.skip_rest(archs)?;
            continue;
        };
        for _ in 0..archs {
            let (arch_at, arch) = v.head()?;
            let Head::Str(arch) = arch else {
                v.skip_rest(arch)?;
                v.skip()?;
                continue;
            };
            let arch = utf8(arch, arch_at, "kpack TOC architecture is not UTF-8")?;
            let (at, meta) = v.head()?;
            let Head::Map(fields) = meta else {
                v.skip_rest(meta)?;
                continue;
            };
            let entry = read_entry(&mut v, fields, binary_key, arch, at)?;
            if u64_of(entries.len()) >= limits.max_entries {
                return Err(too_many(at));
            }
            entries.push(entry);
        }
    }
    Ok(entries)
}

/// The entry of `binary_key` for `arch` from its metadata map of `fields` entries at `at`
/// (the first `ordinal`, `original_size` and `type` count; both numbers are required).
fn read_entry<'a>(
    v: &mut Reader<'a>,
    fields: u32,
    binary_key: &'a str,
    arch: &'a str,
    at: u64,
) -> Result<KpackEntry<'a>> {
    let (mut ordinal, mut original_size, mut kind) = (None, None, None);
    for _ in 0..fields {
        let (_, field) = v.head()?;
        match field {
            Head::Str(b"ordinal") if ordinal.is_none() => {
                let (vat, n) = v.uint("kpack ordinal is not an unsigned integer")?;
                let n = u32::try_from(n).map_err(|_| {
                    Error::new(
                        ErrorKind::Malformed,
                        vat,
                        "kpack ordinal does not fit in 32 bits",
                    )
                })?;
                ordinal = Some((vat, n));
            }
            Head::Str(b"original_size") if original_size.is_none() => {
                original_size = Some(v.uint("kpack original_size is not an unsigned integer")?);
            }
            Head::Str(b"type") if kind.is_none() => {
                let (tat, t) = v.head()?;
                kind = Some(match t {
                    Head::Str(s) => Some(utf8(s, tat, "kpack entry type is not UTF-8")?),
                    other => {
                        v.skip_rest(other)?;
                        None
                    }
                });
            }
            other => {
                v.skip_rest(other)?;
                v.skip()?;
            }
        }
    }
    let (Some((ordinal_at, ordinal)), Some((original_size_at, original_size))) =
        (ordinal, original_size)
    else {
        return Err(Error::new(
            ErrorKind::Malformed,
            at,
            "kpack TOC entry has no ordinal or no original_size",
        ));
    };
    Ok(KpackEntry {
        binary_key,
        arch,
        kind: kind.flatten(),
        ordinal,
        original_size,
        offset: at,
        ordinal_at,
        original_size_at,
    })
}
