//! Device images as the rest of the crate sees them: bytes plus what the container says
//! they are, whatever the container format.

use alloc::borrow::Cow;
use alloc::vec::Vec;

use crate::bundle::BundleEntry;
use crate::decompress::Codec;
use crate::nvfatbin::{EntryKind, FatbinEntry};
use crate::offload_binary::{OffloadBinaryEntry, StringMap};
use crate::raw::ELF_MAGIC;
use crate::text::TextEntry;

/// The container format an image was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// A binary clang offload bundle (also the sections of a bundled host object).
    Bundle,
    /// A text clang offload bundle.
    TextBundle,
    /// An LLVM OffloadBinary.
    OffloadBinary,
    /// A bare device ELF file.
    Elf,
    /// An NVIDIA fatbinary entry (cubin or PTX).
    NvFatbin,
    /// An entry of an AMD `.kpack` archive (`KPACK.md`).
    Kpack,
}

impl Format {
    /// The name used by `loader-sim list` (`CLI.md`).
    pub const fn name(self) -> &'static str {
        match self {
            Format::Bundle => "clang-offload-bundle",
            Format::TextBundle => "clang-offload-bundle-text",
            Format::OffloadBinary => "offload-binary",
            Format::Elf => "elf",
            Format::NvFatbin => "nvidia-fatbin",
            Format::Kpack => "kpack",
        }
    }
}

/// What kind of code an image holds (OffloadBinary `ImageKind`, or sniffed from the bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageKind {
    /// 0: not specified.
    None,
    /// 1: an ELF object (AMDGPU code object, host object).
    Object,
    /// 2: LLVM bitcode.
    Bitcode,
    /// 3: an NVIDIA cubin (ELF, `EM_CUDA`).
    Cubin,
    /// 4: an NVIDIA fatbinary container.
    Fatbinary,
    /// 5: PTX assembly text.
    Ptx,
    /// 6: SPIR-V.
    Spirv,
    /// Tile IR bytecode, an NVIDIA fatbinary entry of kind 0x80 (`NVFATBIN.md` §2.8). No
    /// OffloadBinary value names it; [`ImageKind::code`] gives the fatbinary's 0x80.
    TileIr,
    /// LTO IR (NVVM IR for `nvcc -dlto`'s device link), an NVIDIA fatbinary entry of kind 8
    /// (`NVFATBIN.md` §2.9). No OffloadBinary value names it; [`ImageKind::code`] gives
    /// the fatbinary's 8.
    LtoIr,
    /// Any other stored value.
    Other(u16),
}

impl ImageKind {
    tools_pub! {
        /// Decodes an OffloadBinary `ImageKind` value.
        pub const fn from_code(code: u16) -> Self {
            match code {
                0 => ImageKind::None,
                1 => ImageKind::Object,
                2 => ImageKind::Bitcode,
                3 => ImageKind::Cubin,
                4 => ImageKind::Fatbinary,
                5 => ImageKind::Ptx,
                6 => ImageKind::Spirv,
                n => ImageKind::Other(n),
            }
        }
    }

    /// The OffloadBinary `ImageKind` value.
    pub const fn code(self) -> u16 {
        match self {
            ImageKind::None => 0,
            ImageKind::Object => 1,
            ImageKind::Bitcode => 2,
            ImageKind::Cubin => 3,
            ImageKind::Fatbinary => 4,
            ImageKind::Ptx => 5,
            ImageKind::Spirv => 6,
            ImageKind::TileIr => crate::nvfatbin::KIND_TILE_IR,
            ImageKind::LtoIr => crate::nvfatbin::KIND_LTO_IR,
            ImageKind::Other(n) => n,
        }
    }

    /// The name used by `loader-sim list`: `"none"`, `"elf"`, `"bc"`, `"cubin"`,
    /// `"fatbin"`, `"ptx"`, `"spirv"`, `"tile-ir"`, `"lto-ir"`, `"unknown"`.
    pub const fn name(self) -> &'static str {
        match self {
            ImageKind::None => "none",
            ImageKind::Object => "elf",
            ImageKind::Bitcode => "bc",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbinary => "fatbin",
            ImageKind::Ptx => "ptx",
            ImageKind::Spirv => "spirv",
            ImageKind::TileIr => "tile-ir",
            ImageKind::LtoIr => "lto-ir",
            ImageKind::Other(_) => "unknown",
        }
    }

    tools_pub! {
        /// The kind of image whose first 4 bytes are a magic number: LLVM bitcode (bare or
        /// wrapped), an NVIDIA fatbinary or SPIR-V ([`crate::raw`]'s magics); `None` for
        /// anything else (ELF files and PTX text included: [`ImageKind::sniff`] tells those).
        /// The one sniffer of first bytes: [`ImageKind::sniff`] and [`crate::identify`] use it.
        pub fn from_magic(bytes: &[u8]) -> Option<Self> {
            use crate::raw::{BITCODE_MAGIC, BITCODE_WRAPPER_MAGIC, NVFATBIN_MAGIC, SPIRV_MAGIC};
            if bytes.starts_with(BITCODE_MAGIC) || bytes.starts_with(BITCODE_WRAPPER_MAGIC) {
                Some(ImageKind::Bitcode)
            } else if bytes.starts_with(NVFATBIN_MAGIC) {
                Some(ImageKind::Fatbinary)
            } else if bytes.starts_with(SPIRV_MAGIC) {
                Some(ImageKind::Spirv)
            } else {
                None
            }
        }
    }

    tools_pub! {
        /// Identifies image bytes by content: ELF (cubin if `e_machine` is `EM_CUDA`), LLVM
        /// bitcode, NVIDIA fatbinary, SPIR-V, or PTX text (`.version` and `.target` directives
        /// near the start). Reads at most the first 256 bytes, so listing and selecting touch
        /// no more than the first page of an image.
        pub fn sniff(bytes: &[u8]) -> Self {
            if bytes.starts_with(ELF_MAGIC) {
                return if crate::bytes::elf_machine(bytes) == Some(crate::raw::EM_CUDA) {
                    ImageKind::Cubin
                } else {
                    ImageKind::Object
                };
            }
            if let Some(kind) = Self::from_magic(bytes) {
                return kind;
            }
            let head = bytes.get(..bytes.len().min(256)).unwrap_or(bytes);
            // PTX needs a '.': one scan settles the common case (no dot) before the
            // substring searches, 32 bytes a step with no early exit inside a step (a
            // compare the compiler does 16 bytes at a time; `memchr` costs more on these
            // few bytes).
            let mut chunks = head.chunks_exact(32);
            let dot_in = |c: &[u8]| c.iter().fold(false, |dot, &b| dot | (b == b'.'));
            if !chunks.any(dot_in) && !dot_in(chunks.remainder()) {
                return ImageKind::None;
            }
            // `.target sm_…`: AMDGPU assembly also has `.version`/`.target` substrings
            // (`amdhsa.version:`, `amdhsa.target:`), never `.target sm_`.
            if crate::bytes::find(head, b".version", 0).is_some()
                && (crate::bytes::find(head, b".target sm_", 0).is_some()
                    || crate::bytes::find(head, b".target compute_", 0).is_some())
            {
                return ImageKind::Ptx;
            }
            ImageKind::None
        }
    }
}

/// The offload kind of an image: the bundle entry ID's first field, or the OffloadBinary
/// `OffloadKind` value (both numbering eras, `FORMATS.md` §6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OffloadKind {
    /// No kind (OffloadBinary value 0), or a bare ELF.
    None,
    /// `host`: the host side of a bundle.
    Host,
    /// `openmp` / 1.
    OpenMp,
    /// `cuda` / 2.
    Cuda,
    /// `hip` / 3 (LLVM ≤ 20) or 4 (LLVM ≥ 21).
    Hip,
    /// `hipv4`: HIP, code object v4 or later (bundles only).
    HipV4,
    /// `hcc`: legacy HCC (bundles only).
    Hcc,
    /// `sycl` / 8.
    Sycl,
    /// Any other bundle kind string or OffloadBinary value.
    Other,
}

impl OffloadKind {
    tools_pub! {
        /// Decodes an OffloadBinary or offload-entry `OffloadKind` value, accepting both the
        /// sequential (LLVM ≤ 20: HIP = 3) and the bit-flag (LLVM ≥ 21: HIP = 4) numbering.
        pub const fn from_code(code: u16) -> Self {
            match code {
                0 => OffloadKind::None,
                1 => OffloadKind::OpenMp,
                2 => OffloadKind::Cuda,
                3 | 4 => OffloadKind::Hip,
                8 => OffloadKind::Sycl,
                _ => OffloadKind::Other,
            }
        }
    }

    tools_pub! {
        /// Decodes the kind field of a bundle entry ID.
        pub fn from_bundle_kind(kind: &str) -> Self {
            match kind {
                "host" => OffloadKind::Host,
                "openmp" => OffloadKind::OpenMp,
                "cuda" => OffloadKind::Cuda,
                "hip" => OffloadKind::Hip,
                "hipv4" => OffloadKind::HipV4,
                "hcc" => OffloadKind::Hcc,
                "sycl" => OffloadKind::Sycl,
                _ => OffloadKind::Other,
            }
        }
    }

    /// Lowercase name: `"host"`, `"openmp"`, `"cuda"`, `"hip"`, `"hipv4"`, `"hcc"`,
    /// `"sycl"`, `"none"`, `"other"`.
    pub const fn name(self) -> &'static str {
        match self {
            OffloadKind::None => "none",
            OffloadKind::Host => "host",
            OffloadKind::OpenMp => "openmp",
            OffloadKind::Cuda => "cuda",
            OffloadKind::Hip => "hip",
            OffloadKind::HipV4 => "hipv4",
            OffloadKind::Hcc => "hcc",
            OffloadKind::Sycl => "sycl",
            OffloadKind::Other => "other",
        }
    }

    tools_pub! {
        /// True for the HIP family (`hip`, `hipv4`, `hcc`).
        pub const fn is_hip(self) -> bool {
            matches!(
                self,
                OffloadKind::Hip | OffloadKind::HipV4 | OffloadKind::Hcc
            )
        }
    }
}

tools_fields! {
    /// A device image: its bytes and what its container records about it.
    ///
    /// `'a` is the lifetime of the bytes: the caller's buffer for images stored uncompressed,
    /// or the decompressed buffer owned by an [`crate::OpenUnit`].
    #[derive(Clone, Copy, Debug)]
    pub struct Image<'a> {
        /// Discovery index within its unit (header order, then entry order).
        pub index: usize,
        /// The container format.
        pub format: Format,
        /// The bundle entry ID exactly as stored (bundles and text bundles only).
        pub entry_id: Option<&'a str>,
        /// The offload kind.
        pub offload_kind: OffloadKind,
        /// The triple as stored (entry ID triple, or the OffloadBinary `triple` string).
        pub triple: Option<&'a str>,
        /// The target ID as stored (entry ID target, or the OffloadBinary `arch` string).
        /// `None` for a bare ELF: derive it from the ELF header (`crate::arch`).
        pub target_id: Option<&'a str>,
        /// The image kind: the OffloadBinary value, else sniffed from the bytes.
        pub image_kind: ImageKind,
        /// The image bytes; empty while [`Image::encoded`] is set (see [`Image::decode`]).
        pub bytes: &'a [u8],
        /// The compressed payload of an image that has not been decoded: opening a unit
        /// identifies its images from their headers alone, and [`Image::decode`] decodes one
        /// when its bytes are wanted. `None` for images whose bytes are at hand.
        pub encoded: Option<Encoded<'a>>,
        /// Offset of the bytes in the buffer that was walked ([`crate::units`]) when they are
        /// stored there in place; `None` for decompressed content (and for images made
        /// directly from a container reader).
        pub offset: Option<u64>,
        @tools
        /// OffloadBinary entry flags (0 elsewhere).
        pub flags: u32,
        /// OffloadBinary string map (all keys).
        pub strings: Option<StringMap<'a>>,
        /// The PTX ISA version the container records for a PTX entry (an NVIDIA fatbinary
        /// entry header's code version, `NVFATBIN.md` §2.2); `None` elsewhere.
        /// [`crate::identify`] prefers the text's own `.version` when the bytes are at hand.
        pub ptx_isa: Option<crate::driver::PtxIsa>,
    }
}

impl<'a> Image<'a> {
    tools_pub! {
        /// An image from a binary bundle entry.
        pub fn from_bundle_entry(index: usize, e: &BundleEntry<'a>) -> Self {
            Self::from_id(index, Format::Bundle, e.id, e.data)
        }
    }

    tools_pub! {
        /// An image from a text bundle entry.
        pub fn from_text_entry(index: usize, e: &TextEntry<'a>) -> Self {
            Self::from_id(index, Format::TextBundle, e.id, e.data)
        }
    }

    /// An image named by a bundle entry ID.
    pub fn from_id(index: usize, format: Format, id: &'a str, bytes: &'a [u8]) -> Self {
        Self::from_split_id(index, format, id, bytes, None, &mut Default::default())
    }

    /// [`Image::from_id`] with its [`Image::offset`], the ID split by `ids` (which keeps
    /// the split of the IDs before).
    #[inline]
    pub(crate) fn from_split_id(
        index: usize,
        format: Format,
        id: &'a str,
        bytes: &'a [u8],
        offset: Option<u64>,
        ids: &mut crate::entry_id::IdSplitter<'a>,
    ) -> Self {
        let parsed = ids.split(id).ok();
        Image {
            index,
            format,
            entry_id: Some(id),
            offload_kind: parsed
                .map(|p| OffloadKind::from_bundle_kind(p.kind))
                .unwrap_or(OffloadKind::Other),
            triple: parsed.map(|p| p.triple),
            target_id: parsed.and_then(|p| p.target_id),
            image_kind: ImageKind::sniff(bytes),
            flags: 0,
            strings: None,
            bytes,
            encoded: None,
            offset,
            ptx_isa: None,
        }
    }

    tools_pub! {
        /// An image from an OffloadBinary entry.
        pub fn from_offload_entry(index: usize, e: &OffloadBinaryEntry<'a>) -> Self {
            Self::from_offload_entry_at(index, e, ImageKind::from_code(e.image_kind), None)
        }
    }

    /// [`Image::from_offload_entry`] with the image kind and [`Image::offset`] given.
    #[inline(never)]
    pub(crate) fn from_offload_entry_at(
        index: usize,
        e: &OffloadBinaryEntry<'a>,
        image_kind: ImageKind,
        offset: Option<u64>,
    ) -> Self {
        Image {
            index,
            format: Format::OffloadBinary,
            entry_id: None,
            offload_kind: OffloadKind::from_code(e.offload_kind),
            triple: e.strings.get_str("triple"),
            target_id: e.strings.get_str("arch"),
            image_kind,
            flags: e.flags,
            strings: Some(e.strings),
            bytes: e.image,
            encoded: None,
            offset,
            ptx_isa: None,
        }
    }

    tools_pub! {
        /// An entry of an NVIDIA fatbinary; `bytes` is its image (the stored payload or the
        /// decompressed one, without padding: [`crate::nvfatbin::trim_image`]).
        ///
        /// The triple is `nvptx64-nvidia-cuda`, the target the entry's architecture with the
        /// variant it records (`sm_86`, `sm_90a`, `sm_100f`), the offload kind CUDA and
        /// `flags` the low 32 bits of the entry flags (all known flags fit).
        pub fn from_fatbin_entry(index: usize, e: &FatbinEntry<'_>, bytes: &'a [u8]) -> Self {
            Image {
                index,
                format: Format::NvFatbin,
                entry_id: None,
                offload_kind: OffloadKind::Cuda,
                triple: Some("nvptx64-nvidia-cuda"),
                target_id: e.arch_name(),
                image_kind: match e.kind {
                    EntryKind::Cubin => ImageKind::Cubin,
                    EntryKind::Ptx => ImageKind::Ptx,
                    EntryKind::TileIr => ImageKind::TileIr,
                    EntryKind::LtoIr => ImageKind::LtoIr,
                },
                flags: u32::try_from(e.flags & 0xFFFF_FFFF).unwrap_or(0),
                strings: None,
                bytes,
                encoded: None,
                offset: None,
                ptx_isa: match e.kind {
                    EntryKind::Ptx => crate::driver::PtxIsa::of_code_version(e.code_version),
                    EntryKind::Cubin | EntryKind::TileIr | EntryKind::LtoIr => None,
                },
            }
        }
    }

    tools_pub! {
        /// A bare device ELF.
        pub fn from_elf(index: usize, bytes: &'a [u8]) -> Self {
            Image {
                index,
                format: Format::Elf,
                entry_id: None,
                offload_kind: OffloadKind::None,
                triple: None,
                target_id: None,
                image_kind: ImageKind::sniff(bytes),
                flags: 0,
                strings: None,
                bytes,
                encoded: None,
                offset: None,
                ptx_isa: None,
            }
        }
    }

    tools_pub! {
        /// An entry of a `.kpack` archive: a HIP code object for `amdgcn-amd-amdhsa`, its target
        /// the architecture the TOC files it under (e.g. `gfx90a:xnack+`). `bytes` is the
        /// code object when it is stored plain; a zstd entry is made with `encoded` set and
        /// empty bytes (see [`Image::decode`]).
        pub fn from_kpack_entry(
            index: usize,
            e: &crate::kpack::KpackEntry<'a>,
            bytes: &'a [u8],
            encoded: Option<Encoded<'a>>,
        ) -> Self {
            Image {
                index,
                format: Format::Kpack,
                entry_id: None,
                offload_kind: OffloadKind::Hip,
                triple: Some("amdgcn-amd-amdhsa"),
                target_id: Some(e.arch),
                image_kind: if encoded.is_some() {
                    ImageKind::Object
                } else {
                    ImageKind::sniff(bytes)
                },
                flags: 0,
                strings: None,
                bytes,
                encoded,
                offset: None,
                ptx_isa: None,
            }
        }
    }

    tools_pub! {
        /// An entry of an NVIDIA fatbinary whose payload is compressed, identified from its
        /// header alone: its bytes are decoded (and trimmed) by [`Image::decode`].
        pub fn from_encoded_fatbin_entry(
            index: usize,
            e: &FatbinEntry<'_>,
            encoded: Encoded<'a>,
        ) -> Self {
            Image {
                encoded: Some(encoded),
                ..Self::from_fatbin_entry(index, e, &[])
            }
        }
    }

    /// Image size in bytes; for an image not decoded yet, the size its container declares
    /// for the decoded payload (padding included: the image may be shorter).
    pub fn size(&self) -> u64 {
        match &self.encoded {
            Some(e) => e.size,
            None => crate::bytes::u64_of(self.bytes.len()),
        }
    }

    /// The same image with its bytes at hand: `bytes`, what [`Image::decode`] gave.
    ///
    /// A zstd `.kpack` entry, listed as a code object from its TOC alone (rocm-kpack's
    /// writer files every entry as `"hsaco"`), takes the kind its decoded bytes show: a
    /// Tensile `.dat` or a SQLite database is data ([`ImageKind::None`]), never chosen
    /// (`KPACK.md` §5a).
    pub fn with_bytes<'b>(&self, bytes: &'b [u8]) -> Image<'b>
    where
        'a: 'b,
    {
        let image_kind = if self.format == Format::Kpack && self.encoded.is_some() {
            ImageKind::sniff(bytes)
        } else {
            self.image_kind
        };
        Image {
            bytes,
            encoded: None,
            image_kind,
            ..*self
        }
    }

    tools_pub! {
        /// True when the bytes are at hand ([`Image::encoded`] is not set).
        pub fn is_decoded(&self) -> bool {
            self.encoded.is_none()
        }
    }

    /// The image's bytes: borrowed when they are at hand, else decoded from
    /// [`Image::encoded`] (with the caller's decoder of [`crate::ReadOptions::decoders`],
    /// if any) into a buffer of their own. Each call decodes again: keep the result.
    /// Errors are located in the walked buffer.
    pub fn decode(&self, options: &crate::ReadOptions) -> crate::Result<Cow<'a, [u8]>> {
        match &self.encoded {
            None => Ok(Cow::Borrowed(self.bytes)),
            Some(e) => e.decode(options).map(Cow::Owned),
        }
    }

    tools_pub! {
        /// The image checked as [`Image::decode`] checks it (the same errors at the same
        /// offsets), with only as much of it made as identifying it and telling its size need:
        /// [`Checked::Head`], the first `head` bytes, when the rest of the stream can be checked
        /// without decoding it (an LZ4 block, [`crate::decompress::check_head`]) and the
        /// image's length is the declared one; otherwise all of it ([`Checked::Whole`]: the
        /// bytes at hand, or decoded). With `head` at least [`crate::stream::IDENTIFY_LEN`],
        /// [`Image::with_checked`] of the result identifies as the decoded image does.
        ///
        /// A zstd fatbinary cubin larger than one zstd block is checked as far as the CUDA
        /// runtime's choice needs and without a whole decode ([`Encoded::zstd_head`]): its
        /// frame header, its content size against the declared one, its block headers up
        /// to the end of the stream, and the blocks that hold the head, decoded. Damage
        /// inside a later block's compressed data is not found here; the driver finds it
        /// when it decodes the entry to load it, and [`Image::decode`] finds it
        /// (`NVFATBIN.md` §2.6).
        pub fn check(&self, head: usize, options: &crate::ReadOptions) -> crate::Result<Checked<'a>> {
            self.made(head, options, true)
        }
    }

    tools_pub! {
        /// As [`Image::check`], but an LZ4 stream is read only as far as its first `head`
        /// bytes ([`Encoded::peek`]): damage after them is not found.
        pub fn peek(&self, head: usize, options: &crate::ReadOptions) -> crate::Result<Checked<'a>> {
            self.made(head, options, false)
        }
    }

    fn made(
        &self,
        head: usize,
        options: &crate::ReadOptions,
        whole_stream: bool,
    ) -> crate::Result<Checked<'a>> {
        let Some(e) = &self.encoded else {
            return Ok(Checked::Whole(Cow::Borrowed(self.bytes)));
        };
        if e.codec == Codec::Lz4 && e.entry_kind != Some(EntryKind::Ptx) {
            let first = match whole_stream {
                true => Some(e.decode_head(head, options)?),
                false => e.peek(head, options)?,
            };
            if let Some(first) = first.filter(|f| e.is_whole_size(f)) {
                return Ok(Checked::Head(first));
            }
        }
        if e.codec == Codec::Zstd && e.entry_kind.is_some_and(|k| k != EntryKind::Ptx) {
            if let Some(first) = e.zstd_head(head, options)? {
                if e.is_whole_size(&first) {
                    return Ok(Checked::Head(first));
                }
            }
        }
        e.decode(options).map(|v| Checked::Whole(Cow::Owned(v)))
    }

    tools_pub! {
        /// The same image with what [`Image::check`] or [`Image::peek`] made as its bytes:
        /// all of them ([`Image::with_bytes`]), or its first bytes, which header readers
        /// ([`crate::identify`]) see while [`Image::encoded`] stays set, so that
        /// [`Image::size`] is still the decoded size.
        pub fn with_checked<'b>(&self, checked: &'b Checked<'_>) -> Image<'b>
        where
            'a: 'b,
        {
            match checked {
                Checked::Whole(bytes) => self.with_bytes(bytes),
                Checked::Head(head) => Image {
                    bytes: head,
                    ..*self
                },
            }
        }
    }

    /// The byte range of the image in the walked buffer, when it is stored in place (not
    /// for an image that must be decoded).
    pub fn file_range(&self) -> Option<core::ops::Range<u64>> {
        let start = self.offset?;
        Some(start..start.checked_add(self.size())?)
    }
}

/// What [`Image::check`] and [`Image::peek`] made of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked<'a> {
    /// All of its bytes: those at hand, or the decoded image.
    Whole(Cow<'a, [u8]>),
    /// Its first bytes, of an image whose length is its declared size ([`Image::size`]).
    Head(Vec<u8>),
}

impl Checked<'_> {
    /// The bytes made.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Checked::Whole(b) => b,
            Checked::Head(h) => h,
        }
    }
}

/// The compressed payload of an image not decoded yet ([`Image::encoded`]).
#[derive(Clone, Copy, Debug)]
pub struct Encoded<'a> {
    /// The codec.
    pub codec: Codec,
    /// The compressed stream.
    pub stream: &'a [u8],
    /// The declared size of the decoded payload.
    pub size: u64,
    /// Offset of the stream in the walked buffer (errors are located from it).
    pub stream_at: u64,
    /// Offset of the field that declares [`Encoded::size`] in the walked buffer.
    pub size_field: u64,
    /// For a fatbinary entry, what the payload holds: the decoded payload is trimmed to
    /// the image ([`crate::nvfatbin::trim_image`]).
    pub entry_kind: Option<EntryKind>,
}

impl Encoded<'_> {
    /// Whether the decoded image is the whole declared size, as far as its first bytes
    /// `head` tell: always for a payload that is not a fatbinary entry, and for Tile IR; never known from
    /// the head for PTX (its text ends at its first NUL); for a cubin, when its section or
    /// program header table ends exactly at the declared size (so no trim applies,
    /// [`crate::nvfatbin::trim_image`]: ptxas puts the section header table last).
    pub fn is_whole_size(&self, head: &[u8]) -> bool {
        match self.entry_kind {
            // Tile IR is kept whole (`trim_image`).
            None | Some(EntryKind::TileIr | EntryKind::LtoIr) => true,
            Some(EntryKind::Ptx) => false,
            Some(EntryKind::Cubin) => crate::nvfatbin::elf64_tables_end(head)
                .is_some_and(|(sh, ph)| sh == Some(self.size) || ph == Some(self.size)),
        }
    }

    /// Decodes the stream into a buffer of its own: exactly the declared size, trimmed to
    /// the image for a fatbinary entry.
    pub fn decode(&self, options: &crate::ReadOptions) -> crate::Result<Vec<u8>> {
        let out = crate::decompress::decode_with_hook(
            self.codec,
            self.stream,
            self.stream_at,
            self.size,
            self.size_field,
            options,
        )?;
        Ok(self.trimmed(out))
    }

    /// `out`, the decoded payload or its first bytes, cut to the image for a fatbinary
    /// entry ([`crate::nvfatbin::trim_image`]). The trim of a head is the head of the trim:
    /// a PTX text ends at its first NUL; a cubin's end is known only when its headers fit
    /// in the head.
    fn trimmed(&self, mut out: Vec<u8>) -> Vec<u8> {
        if let Some(kind) = self.entry_kind {
            let image = crate::nvfatbin::trim_image(kind, &out).len();
            out.truncate(image);
        }
        out
    }

    /// The first `head` bytes of what [`Encoded::decode`] gives, made without reading the
    /// rest of the stream, for the codecs that allow it (LZ4; `None` for the others). Only
    /// those bytes are checked: [`Encoded::decode_head`] checks the whole stream.
    pub fn peek(
        &self,
        head: usize,
        options: &crate::ReadOptions,
    ) -> crate::Result<Option<Vec<u8>>> {
        let out = crate::decompress::peek(
            self.codec,
            self.stream,
            self.stream_at,
            self.size,
            self.size_field,
            head,
            options,
        )?;
        Ok(out.map(|out| self.trimmed(out)))
    }

    /// The first `head` bytes of what [`Encoded::decode`] gives for a zstd frame whose
    /// content is larger than one block, made by decoding only the blocks that hold them
    /// ([`crate::zstd_prefix::head`]: the frame header, the declared content size and the
    /// block structure up to the end of the stream are checked, the later blocks' data is
    /// not decoded); `None` where that path does not apply (another codec, a small frame,
    /// a stream that does not read as one frame ending at its end), and a whole decode
    /// must check the stream.
    pub fn zstd_head(
        &self,
        head: usize,
        options: &crate::ReadOptions,
    ) -> crate::Result<Option<Vec<u8>>> {
        if self.codec != Codec::Zstd {
            return Ok(None);
        }
        let prefix = crate::zstd_prefix::head(
            self.stream,
            self.stream_at,
            self.size,
            self.size_field,
            head,
            options,
        )?;
        Ok(prefix.map(|p| self.trimmed(p.head)))
    }

    /// The first `head` bytes of what [`Encoded::decode`] gives, with the whole stream
    /// checked as it checks it (the same errors at the same offsets). An LZ4 block is not
    /// decoded past the head ([`crate::decompress::check_head`]); other codecs are.
    pub fn decode_head(&self, head: usize, options: &crate::ReadOptions) -> crate::Result<Vec<u8>> {
        let out = crate::decompress::check_head(
            self.codec,
            self.stream,
            self.stream_at,
            self.size,
            self.size_field,
            head,
            options,
        )?;
        Ok(self.trimmed(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn ptx_is_found_anywhere_in_the_first_256_bytes_and_not_after() {
        let ptx = b".version 8.0\n.target sm_90\n";
        // `.target sm_` ends 24 bytes into `ptx`: the last start inside 256 bytes is 232.
        for k in 0..300 {
            let mut bytes = vec![b'Z'; k];
            bytes.extend_from_slice(ptx);
            bytes.resize(bytes.len() + 40, b'Z');
            let want = if k <= 232 { ImageKind::Ptx } else { ImageKind::None };
            assert_eq!(ImageKind::sniff(&bytes), want, "PTX at {k}");
        }
        // No '.' at all, or only past the first 256 bytes: not PTX, whatever the length.
        for len in 0..300 {
            let mut bytes = vec![b'Z'; len];
            assert_eq!(ImageKind::sniff(&bytes), ImageKind::None, "{len} bytes");
            bytes.extend_from_slice(ptx);
            if len >= 256 {
                assert_eq!(ImageKind::sniff(&bytes), ImageKind::None, "{len} bytes");
            }
        }
    }
}
