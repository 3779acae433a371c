//! PE images (DLL, EXE, PYD) and COFF objects as host files (`PE.md`): the section table
//! read in place for discovery ([`PeSections`]) and the address space static registration
//! reads ([`HostPe`]).
//!
//! Names. In an object a section name longer than 8 bytes is `/N`, an offset into the
//! string table after the symbol table; in an image every linker measured cuts the name to
//! its first 8 bytes (`.hip_fatbin` is `.hip_fat`, `.hipFatBinSegment` is `.hipFatB`,
//! `llvm_offload_entries` is `llvm_off`), so image sections are matched by those 8 bytes.
//! A section whose name says nothing but whose contents start with a bundle or `CCOB` is
//! read as a `.hip_fatbin` (LLVM finds COFF bundles by content).
//!
//! Bounds. An object's section holds `SizeOfRawData` bytes at `PointerToRawData`; an
//! image's holds `min(VirtualSize, SizeOfRawData)` (the raw data is padded to the file
//! alignment, the last container ends at `VirtualSize`); sections of uninitialised data
//! hold none.
//!
//! Addresses. An image's sections are placed at their RVAs (`VirtualAddress`), so every
//! address of [`HostPe`] is an RVA. A pointer slot covered by a DIR64 base relocation
//! holds a preferred VA (`ImageBase + RVA`) and reads as the RVA (`value − ImageBase`);
//! type-0 (padding) entries are skipped. An object's sections get distinct synthetic
//! bases (`(index + 1) * 2^40`), and its `IMAGE_REL_AMD64_ADDR64` / `IMAGE_REL_ARM64_ADDR64`
//! relocations give the slot the symbol's address plus the in-place addend; a relocation
//! against a symbol the object does not define reads as an error naming that absence.
//!
//! Only PE32+ images and x86-64 / AArch64 objects are read (the LP64 layouts of the
//! records); the `/bigobj` object format is not.

use alloc::vec::Vec;

use object::pe::{
    ImageDosHeader, ImageFileHeader, ImageNtHeaders64, ImageSectionHeader, ImageSymbol,
};
use object::read::coff::{CoffHeader, Symbol as _, SymbolTable};
use object::read::pe::{DataDirectories, ImageNtHeaders, ImageOptionalHeader};
use object::read::{ReadRef, StringTable};
use object::LittleEndian as LE;

use crate::bundle;
use crate::bytes::{self, u64_of};
use crate::ccob;
use crate::error::{Error, ErrorKind, Result};

use super::{
    EntrySection, FileKind, Section, SectionMap, SectionRole, WrapperSlot, ENTRY_SECTIONS,
    WRAPPER_SECTIONS,
};
use crate::raw::{
    HIP_FATBIN_SECTION, NV_FATBIN_SECTION, NV_RELFATBIN_SECTION, OBJECT_BUNDLE_PREFIX,
    OFFLOADING_SECTION,
};

/// `IMAGE_FILE_MACHINE_AMD64`.
pub const MACHINE_AMD64: u16 = object::pe::IMAGE_FILE_MACHINE_AMD64.0;
/// `IMAGE_FILE_MACHINE_ARM64`.
pub const MACHINE_ARM64: u16 = object::pe::IMAGE_FILE_MACHINE_ARM64.0;
/// The base relocation type of a 64-bit pointer (`IMAGE_REL_BASED_DIR64`).
pub const REL_BASED_DIR64: u16 = object::pe::IMAGE_REL_BASED_DIR64.0;
const REL_AMD64_ADDR64: u16 = object::pe::IMAGE_REL_AMD64_ADDR64.0;
const REL_ARM64_ADDR64: u16 = object::pe::IMAGE_REL_ARM64_ADDR64.0;
const SCN_UNINITIALIZED: u32 = object::pe::IMAGE_SCN_CNT_UNINITIALIZED_DATA.0;
/// An object's sections that do not become part of the image (`IMAGE_SCN_LNK_REMOVE`,
/// `IMAGE_SCN_LNK_INFO`).
const SCN_NOT_LINKED: u32 = object::pe::IMAGE_SCN_LNK_REMOVE.0 | object::pe::IMAGE_SCN_LNK_INFO.0;
const FILE_DLL: u16 = object::pe::IMAGE_FILE_DLL.0;
const PE32_MAGIC: u16 = object::pe::IMAGE_NT_OPTIONAL_HDR32_MAGIC;
const PE32_PLUS_MAGIC: u16 = object::pe::IMAGE_NT_OPTIONAL_HDR64_MAGIC;
/// Size of a section header.
const SECTION_HEADER_SIZE: u64 = 40;
/// Size of the COFF file header.
const FILE_HEADER_SIZE: u64 = 20;
/// Offset of `e_lfanew` in the DOS header.
const E_LFANEW: u64 = 0x3C;
/// Offset of `PointerToRawData` in a section header.
const POINTER_TO_RAW_DATA: u64 = 20;
/// Offset of `NumberOfRvaAndSizes` in the PE32+ optional header.
const NUMBER_OF_RVA_AND_SIZES: u64 = 108;
/// Distance between the synthetic base addresses of an object's sections.
const SYNTHETIC_STRIDE: u64 = 1 << 40;

/// True if `data` starts like a PE image (`MZ`) or an x86-64 / AArch64 COFF object (its
/// machine, and no optional header).
pub fn is_pe_or_coff(data: &[u8]) -> bool {
    data.starts_with(b"MZ") || is_coff_object(data)
}

fn is_coff_object(data: &[u8]) -> bool {
    let (Some(m), Some(opt)) = (le16(data, 0), le16(data, 16)) else {
        return false;
    };
    (m == MACHINE_AMD64 || m == MACHINE_ARM64) && opt == 0 && data.len() >= 20
}

fn le16(data: &[u8], at: usize) -> Option<u16> {
    let b = data.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([*b.first()?, *b.get(1)?]))
}

/// What a section of a PE image holds, by its (at most 8-byte) name.
pub fn image_section_role(name: &[u8], _kind: u32) -> SectionRole<'_> {
    match name {
        b".hip_fat" | HIP_FATBIN_SECTION => SectionRole::HipFatbin,
        b".nv_fatb" | NV_FATBIN_SECTION => SectionRole::NvFatbin,
        OFFLOADING_SECTION => SectionRole::Offloading,
        b".hipFatB" | b".nvFatBi" => SectionRole::Wrappers,
        _ if WRAPPER_SECTIONS.contains(&name) => SectionRole::Wrappers,
        _ => entry_role(name, true),
    }
}

/// What a section of a COFF object holds, by its (resolved) name. A `$` suffix groups
/// sections for the linker (`llvm_offload_entries$OE`) and is not part of the name.
pub fn object_section_role(name: &[u8], _kind: u32) -> SectionRole<'_> {
    if let Some(id) = name.strip_prefix(OBJECT_BUNDLE_PREFIX) {
        return SectionRole::ObjectBundle(id);
    }
    match name {
        HIP_FATBIN_SECTION => SectionRole::HipFatbin,
        NV_FATBIN_SECTION => SectionRole::NvFatbin,
        NV_RELFATBIN_SECTION => SectionRole::NvRelFatbin,
        _ if name.starts_with(OFFLOADING_SECTION) => SectionRole::Offloading,
        _ if WRAPPER_SECTIONS.contains(&name) => SectionRole::Wrappers,
        _ => entry_role(group_name(name), false),
    }
}

/// A section found by its contents (a bundle or `CCOB` at its start): HIP bundles.
fn by_content_role(_name: &[u8], _kind: u32) -> SectionRole<'_> {
    SectionRole::HipFatbin
}

/// The name before a `$` grouping suffix.
fn group_name(name: &[u8]) -> &[u8] {
    match name.iter().position(|&b| b == b'$') {
        Some(i) => name.get(..i).unwrap_or(name),
        None => name,
    }
}

fn entry_role(name: &[u8], image: bool) -> SectionRole<'static> {
    ENTRY_SECTIONS
        .iter()
        .find(|(n, _)| *n == name || (image && name.len() == 8 && n.starts_with(name)))
        .map_or(SectionRole::Other, |(_, kind)| SectionRole::Entries(*kind))
}

/// What the headers of an image say beyond the COFF header.
#[derive(Clone, Copy, Debug)]
struct ImageInfo<'d> {
    image_base: u64,
    directories: DataDirectories<'d>,
    /// File offset of the data directories.
    directories_at: u64,
}

/// The section table of a PE image or COFF object, read in place (`Copy`,
/// allocation-free).
#[derive(Clone, Copy, Debug)]
pub struct PeSections<'d> {
    data: &'d [u8],
    header: &'d ImageFileHeader,
    /// File offset of the COFF file header.
    header_at: u64,
    headers: &'d [ImageSectionHeader],
    /// File offset of the section table.
    table_at: u64,
    /// The string table (for `/N` names), when the file has a symbol table.
    strings: Option<StringTable<'d>>,
    image: Option<ImageInfo<'d>>,
}

fn err(kind: ErrorKind, at: u64, what: &'static str) -> Error {
    Error::new(kind, at, what)
}

/// Every header error names a field inside the file; a structure that starts past the end
/// is reported at the end (a safety net: the readers above locate errors at the field).
fn within_file(e: Error, data: &[u8]) -> Error {
    let end = u64_of(data.len());
    if e.offset() > end {
        Error::new(e.kind(), end, e.what())
    } else {
        e
    }
}

/// Checks the headers of a PE image up to its optional header's magic (the DOS header,
/// the `PE\0\0` signature, the file header, PE32+); returns the offsets of the NT headers
/// and of the optional header.
fn image_headers_at(data: &[u8]) -> Result<(u64, u64)> {
    let dos = ImageDosHeader::parse(data)
        .map_err(|_| err(ErrorKind::Truncated, 0, "PE DOS header is truncated"))?;
    let nt_at = u64::from(dos.nt_headers_offset());
    let signature = data.read_at::<[u8; 4]>(nt_at).map_err(|_| {
        err(
            ErrorKind::OutOfBounds,
            E_LFANEW,
            "PE header offset (e_lfanew) lies outside the file",
        )
    })?;
    if signature != b"PE\0\0" {
        return Err(err(
            ErrorKind::BadMagic,
            nt_at,
            "PE signature is not PE\\0\\0",
        ));
    }
    let header_at = nt_at.saturating_add(4);
    data.read_at::<ImageFileHeader>(header_at).map_err(|_| {
        err(
            ErrorKind::Truncated,
            header_at,
            "PE file header is truncated",
        )
    })?;
    let opt_at = header_at.saturating_add(FILE_HEADER_SIZE);
    let magic = data
        .read_at::<object::U16<LE>>(opt_at)
        .map_err(|_| {
            err(
                ErrorKind::Truncated,
                opt_at,
                "PE optional header is truncated",
            )
        })?
        .get(LE);
    match magic {
        PE32_PLUS_MAGIC => Ok((nt_at, opt_at)),
        PE32_MAGIC => Err(err(
            ErrorKind::UnsupportedVersion,
            opt_at,
            "32-bit PE image (PE32): only PE32+ is read",
        )),
        _ => Err(err(
            ErrorKind::BadMagic,
            opt_at,
            "PE optional header magic is neither PE32 nor PE32+",
        )),
    }
}

/// Why the NT headers of the PE32+ image at `nt_at` (optional header at `opt_at`) do not
/// read: a truncated optional header, one smaller than PE32+'s, or data directories that
/// do not fit.
fn nt_headers_error(data: &[u8], nt_at: u64, opt_at: u64) -> Error {
    let dirs_at = opt_at.saturating_add(NUMBER_OF_RVA_AND_SIZES);
    match nt_header_size(data, nt_at) {
        Some(size) if opt_at.saturating_add(u64::from(size)) > u64_of(data.len()) => err(
            ErrorKind::Truncated,
            opt_at,
            "PE optional header is truncated",
        ),
        Some(size) if size < 112 => err(
            ErrorKind::Malformed,
            nt_at.saturating_add(4 + 16),
            "PE SizeOfOptionalHeader is smaller than the PE32+ optional header",
        ),
        Some(_) => err(
            ErrorKind::Malformed,
            dirs_at,
            "PE data directories (NumberOfRvaAndSizes) do not fit the optional header or the file",
        ),
        None => err(ErrorKind::Truncated, nt_at, "PE headers are truncated"),
    }
}

impl<'d> PeSections<'d> {
    /// Reads the headers and the section table of `data`, a PE image or a COFF object.
    ///
    /// Every malformed header is an error at the offset of the field that is wrong.
    pub fn parse(data: &'d [u8]) -> Result<Self> {
        let parsed = if data.starts_with(b"MZ") {
            Self::parse_image(data)
        } else {
            Self::parse_object(data)
        };
        parsed.map_err(|e| within_file(e, data))
    }

    /// Reads a PE32+ image: its headers up to the optional header's magic
    /// ([`image_headers_at`]), the NT headers and data directories, the machine, the
    /// section table and, when one reads, the symbol table's strings.
    fn parse_image(data: &'d [u8]) -> Result<Self> {
        let (nt_at, opt_at) = image_headers_at(data)?;
        let mut offset = nt_at;
        let (nt, directories) = ImageNtHeaders64::parse(data, &mut offset)
            .map_err(|_| nt_headers_error(data, nt_at, opt_at))?;
        let header = nt.file_header();
        let machine = header.machine.get(LE).0;
        if machine != MACHINE_AMD64 && machine != MACHINE_ARM64 {
            return Err(err(
                ErrorKind::Unsupported,
                nt_at.saturating_add(4),
                "PE machine is neither x86-64 nor AArch64",
            ));
        }
        let table_at = offset;
        let headers = nt.sections(data, table_at).map_err(|_| {
            err(
                ErrorKind::Truncated,
                table_at,
                "PE section table lies outside the file",
            )
        })?;
        // Images rarely keep a symbol table; when one reads, its strings resolve `/N` names.
        let strings = nt.symbols(data).ok().map(|s| s.strings());
        Ok(PeSections {
            data,
            header,
            header_at: nt_at.saturating_add(4),
            headers: headers.iter().as_slice(),
            table_at,
            strings,
            image: Some(ImageInfo {
                image_base: nt.optional_header().image_base(),
                directories,
                directories_at: opt_at.saturating_add(112),
            }),
        })
    }

    fn parse_object(data: &'d [u8]) -> Result<Self> {
        let mut offset = 0;
        let header = ImageFileHeader::parse(data, &mut offset)
            .map_err(|_| err(ErrorKind::Truncated, 0, "COFF file header is truncated"))?;
        let machine = header.machine.get(LE).0;
        if machine != MACHINE_AMD64 && machine != MACHINE_ARM64 {
            return Err(err(
                ErrorKind::BadMagic,
                0,
                "COFF machine is neither x86-64 nor AArch64",
            ));
        }
        let table_at = offset;
        let headers = header.sections(data, table_at).map_err(|_| {
            err(
                ErrorKind::Truncated,
                table_at,
                "COFF section table lies outside the file",
            )
        })?;
        let symbols = SymbolTable::<&[u8]>::parse(header, data).map_err(|_| {
            err(
                ErrorKind::OutOfBounds,
                8,
                "COFF symbol or string table lies outside the file",
            )
        })?;
        Ok(PeSections {
            data,
            header,
            header_at: 0,
            headers: headers.iter().as_slice(),
            table_at,
            strings: Some(symbols.strings()),
            image: None,
        })
    }

    /// Number of sections.
    pub fn len(&self) -> usize {
        self.headers.len()
    }

    /// True if there are no sections.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// True for an image (DLL, EXE, PYD), false for an object.
    pub fn is_image(&self) -> bool {
        self.image.is_some()
    }

    /// The kind of file: an object, a DLL (`IMAGE_FILE_DLL`) or an executable.
    pub fn kind(&self) -> FileKind {
        match self.image {
            None => FileKind::Relocatable,
            Some(_) if self.header.characteristics.get(LE).0 & FILE_DLL != 0 => FileKind::Shared,
            Some(_) => FileKind::Executable,
        }
    }

    /// `Machine` of the COFF header.
    pub fn machine(&self) -> u16 {
        self.header.machine.get(LE).0
    }

    /// `ImageBase` of an image.
    pub fn image_base(&self) -> Option<u64> {
        self.image.map(|i| i.image_base)
    }

    /// The file's bytes.
    pub fn data(&self) -> &'d [u8] {
        self.data
    }

    /// True if a section is named `__CLANG_OFFLOAD_BUNDLE__<id>` (`FORMATS.md` §2.5).
    pub fn has_object_bundle(&self) -> bool {
        (0..self.len()).any(|i| {
            self.section(i)
                .is_ok_and(|s| matches!(s.role(), SectionRole::ObjectBundle(_)))
        })
    }

    fn header(&self, i: usize) -> Result<(&'d ImageSectionHeader, u64)> {
        let at = u64_of(i)
            .saturating_mul(SECTION_HEADER_SIZE)
            .saturating_add(self.table_at);
        let h = self.headers.get(i).ok_or(err(
            ErrorKind::OutOfBounds,
            self.header_at.saturating_add(2),
            "section index is past the number of sections",
        ))?;
        Ok((h, at))
    }

    /// Section `i` (0-based): its name (`/N` resolved), contents (see the module
    /// documentation for the bounds), header address and size, and role.
    pub fn section(&self, i: usize) -> Result<Section<'d>> {
        let (h, at) = self.header(i)?;
        let name = match (h.name_offset(), self.strings) {
            (Ok(Some(_)), Some(strings)) => match h.name(strings) {
                Ok(n) => n,
                Err(_) if self.image.is_some() => h.raw_name(),
                Err(_) => {
                    return Err(err(
                        ErrorKind::Malformed,
                        at,
                        "COFF section name (/N) is not in the string table",
                    ))
                }
            },
            (Err(_), _) if self.image.is_none() => {
                return Err(err(
                    ErrorKind::Malformed,
                    at,
                    "COFF section name (/N) is not a decimal string-table offset",
                ))
            }
            _ => h.raw_name(),
        };
        let flags = h.characteristics.get(LE).0;
        let file_offset = u64::from(h.pointer_to_raw_data.get(LE));
        let raw = u64::from(h.size_of_raw_data.get(LE));
        let virtual_size = u64::from(h.virtual_size.get(LE));
        let len = if flags & SCN_UNINITIALIZED != 0 {
            0
        } else if self.image.is_some() {
            raw.min(virtual_size)
        } else {
            raw
        };
        let contents = if len == 0 {
            bytes::sub(self.data, file_offset, 0, "section")
                .or_else(|_| bytes::rest(self.data, u64_of(self.data.len()), "section"))?
        } else {
            bytes::sub(self.data, file_offset, len, "section").map_err(|_| {
                err(
                    ErrorKind::OutOfBounds,
                    at.saturating_add(POINTER_TO_RAW_DATA),
                    "section contents lie outside the file",
                )
            })?
        };
        let image = self.image.is_some();
        let named: fn(&'d [u8], u32) -> SectionRole<'d> = if image {
            image_section_role
        } else {
            object_section_role
        };
        let role_of: fn(&'d [u8], u32) -> SectionRole<'d> = if named(name, 0) == SectionRole::Other
            && (bundle::is_bundle(contents) || ccob::is_compressed_bundle(contents))
        {
            by_content_role
        } else {
            named
        };
        Ok(Section {
            index: i,
            name,
            kind: 0,
            flags: u64::from(flags),
            address: u64::from(h.virtual_address.get(LE)),
            size: if image { virtual_size } else { raw },
            offset: bytes::offset_in(self.data, contents).unwrap_or(file_offset),
            data: contents,
            mapped: image || flags & SCN_NOT_LINKED == 0,
            role_of,
        })
    }

    /// The DIR64 base relocations of an image, as RVAs in file order (type-0 padding
    /// skipped): `f` is called with each. A block that does not read is an error at its
    /// file offset.
    pub fn for_each_dir64(&self, mut f: impl FnMut(u32)) -> Result<()> {
        let Some(image) = self.image else {
            return Ok(());
        };
        let dir_at = image
            .directories_at
            .saturating_add(8 * u64::from(object::pe::IMAGE_DIRECTORY_ENTRY_BASERELOC as u32));
        let Some(dir) = image
            .directories
            .get(object::pe::IMAGE_DIRECTORY_ENTRY_BASERELOC)
        else {
            return Ok(());
        };
        if dir.virtual_address.get(LE) == 0 && dir.size.get(LE) == 0 {
            return Ok(());
        }
        let sections = object::read::pe::SectionTable::parse(self.header, self.data, self.table_at)
            .map_err(|_| {
                err(
                    ErrorKind::Truncated,
                    self.table_at,
                    "PE section table lies outside the file",
                )
            })?;
        let (start, _) = dir.file_range(&sections).map_err(|_| {
            err(
                ErrorKind::OutOfBounds,
                dir_at,
                "PE base relocation directory lies outside its section",
            )
        })?;
        let blocks_data = dir.data(self.data, &sections).map_err(|_| {
            err(
                ErrorKind::OutOfBounds,
                dir_at,
                "PE base relocation directory lies outside its section",
            )
        })?;
        let mut blocks = object::read::pe::RelocationBlockIterator::new(blocks_data);
        let mut block_at = u64::from(start);
        loop {
            let block = match blocks.next() {
                Ok(Some(b)) => b,
                Ok(None) => return Ok(()),
                Err(_) => {
                    return Err(err(
                        ErrorKind::Malformed,
                        block_at,
                        "PE base relocation block size is not a multiple of 4 above 8, or runs past the directory",
                    ))
                }
            };
            block_at = block_at.saturating_add(u64::from(block.size()));
            for r in block {
                if r.typ.0 == REL_BASED_DIR64 {
                    f(r.virtual_address);
                }
            }
        }
    }

    /// The symbol table of an object.
    fn symbols(&self) -> Option<SymbolTable<'d, &'d [u8]>> {
        if self.image.is_some() {
            return None;
        }
        SymbolTable::parse(self.header, self.data).ok()
    }
}

/// The size of the optional header an NT header claims, if the COFF header reads.
fn nt_header_size(data: &[u8], nt_at: u64) -> Option<u16> {
    let h = data
        .read_at::<ImageFileHeader>(nt_at.checked_add(4)?)
        .ok()?;
    Some(h.size_of_optional_header.get(LE))
}

/// What a pointer slot holds after relocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value<'d> {
    /// An image's DIR64 slot: the stored preferred VA is turned into an RVA when read.
    Based,
    Known(u64),
    Undefined(&'d [u8]),
}

/// One 64-bit pointer relocation: the slot's address and its value.
#[derive(Clone, Copy, Debug)]
struct Reloc<'d> {
    at: u64,
    value: Value<'d>,
}

/// A PE image or COFF object read as the address space its program would see (see the
/// module documentation): the sections at their RVAs (images) or synthetic bases
/// (objects), pointer slots valued through the base relocations or the COFF relocations.
#[derive(Clone, Debug)]
pub struct HostPe<'d> {
    table: PeSections<'d>,
    map: SectionMap<'d>,
    relocs: Vec<Reloc<'d>>,
    /// (address, name, section index) of an object's defined symbols, sorted by address.
    symbols: Vec<(u64, &'d [u8], usize)>,
}

impl<'d> HostPe<'d> {
    /// Reads the headers, the section table and the relocations of `data`.
    pub fn parse(data: &'d [u8]) -> Result<Self> {
        Self::read(data).map_err(|e| within_file(e, data))
    }

    fn read(data: &'d [u8]) -> Result<Self> {
        let table = PeSections::parse(data)?;
        let image = table.is_image();
        let mut sections = Vec::with_capacity(table.len());
        for index in 0..table.len() {
            let mut s = table.section(index)?;
            if !image {
                s.address = u64_of(index)
                    .saturating_add(1)
                    .saturating_mul(SYNTHETIC_STRIDE);
            }
            sections.push(s);
        }
        let map = SectionMap::new(sections, |_| true);
        let mut host = HostPe {
            table,
            map,
            relocs: Vec::new(),
            symbols: Vec::new(),
        };
        if image {
            let mut relocs = Vec::new();
            table.for_each_dir64(|rva| {
                relocs.push(Reloc {
                    at: u64::from(rva),
                    value: Value::Based,
                })
            })?;
            host.relocs = relocs;
        } else {
            host.read_object_relocations()?;
        }
        host.relocs.sort_by_key(|r| r.at);
        Ok(host)
    }

    fn base_of(&self, section: usize) -> Option<u64> {
        self.sections().get(section).map(|s| s.address)
    }

    /// The `ADDR64` relocations of every section of an object, and its defined symbols.
    fn read_object_relocations(&mut self) -> Result<()> {
        let Some(symbols) = self.table.symbols() else {
            return Ok(());
        };
        let data = self.table.data;
        let strings = symbols.strings();
        let addr64 = match self.table.machine() {
            MACHINE_ARM64 => REL_ARM64_ADDR64,
            _ => REL_AMD64_ADDR64,
        };
        let mut relocs = Vec::new();
        for i in 0..self.table.len() {
            let (h, at) = self.table.header(i)?;
            let list = h.coff_relocations(data).map_err(|_| {
                err(
                    ErrorKind::OutOfBounds,
                    at.saturating_add(24),
                    "COFF relocations lie outside the file",
                )
            })?;
            let Some(base) = self.base_of(i) else {
                continue;
            };
            for r in list {
                if r.typ.get(LE).0 != addr64 {
                    continue;
                }
                let slot = base.saturating_add(u64::from(r.virtual_address.get(LE)));
                let index = r.symbol_table_index.get(LE);
                let sym: &ImageSymbol = symbols
                    .symbol(object::SymbolIndex(index as usize))
                    .map_err(|_| {
                        err(
                            ErrorKind::OutOfBounds,
                            at.saturating_add(24),
                            "COFF relocation names a symbol past the symbol table",
                        )
                    })?;
                let value = self.symbol_value(sym, strings, slot);
                relocs.push(Reloc { at: slot, value });
            }
        }
        self.relocs = relocs;
        self.symbols = self.defined_symbols(&symbols);
        Ok(())
    }

    /// The value an `ADDR64` relocation at `slot` against `sym` gives: the symbol's
    /// address (in its section, or absolute) plus the addend stored in the slot; the
    /// symbol's name when it is defined nowhere in the object.
    fn symbol_value(
        &self,
        sym: &'d ImageSymbol,
        strings: StringTable<'d, &'d [u8]>,
        slot: u64,
    ) -> Value<'d> {
        match sym.section_number().index() {
            Some(sec) => {
                let sec_base = usize::try_from(sec)
                    .ok()
                    .and_then(|s| s.checked_sub(1))
                    .and_then(|s| self.base_of(s));
                match sec_base {
                    Some(b) => Value::Known(
                        b.saturating_add(u64::from(sym.value()))
                            .saturating_add(self.raw_u64(slot).unwrap_or(0)),
                    ),
                    None => Value::Undefined(sym.name(strings).unwrap_or(b"")),
                }
            }
            None if sym.section_number() == object::pe::IMAGE_SYM_ABSOLUTE => {
                Value::Known(u64::from(sym.value()).saturating_add(self.raw_u64(slot).unwrap_or(0)))
            }
            None => Value::Undefined(sym.name(strings).unwrap_or(b"")),
        }
    }

    /// (address, name, section index) of the symbols an object defines in its sections,
    /// sorted by address.
    fn defined_symbols(&self, symbols: &SymbolTable<'d, &'d [u8]>) -> Vec<(u64, &'d [u8], usize)> {
        let strings = symbols.strings();
        let mut defined = Vec::new();
        for (_, sym) in symbols.iter() {
            let Some(sec) = sym.section_number().index() else {
                continue;
            };
            if sym.has_aux_section() || sym.has_aux_file_name() {
                continue;
            }
            let Some(idx) = usize::try_from(sec).ok().and_then(|s| s.checked_sub(1)) else {
                continue;
            };
            let (Some(base), Ok(name)) = (self.base_of(idx), sym.name(strings)) else {
                continue;
            };
            defined.push((base.saturating_add(u64::from(sym.value())), name, idx));
        }
        defined.sort_by_key(|s| s.0);
        defined
    }

    fn raw_u64(&self, addr: u64) -> Option<u64> {
        self.map.raw_u64(addr)
    }

    fn reloc(&self, addr: u64) -> Option<&Reloc<'d>> {
        let i = self.relocs.binary_search_by_key(&addr, |r| r.at).ok()?;
        self.relocs.get(i)
    }

    /// The section table underneath.
    pub fn table(&self) -> &PeSections<'d> {
        &self.table
    }

    /// The file's bytes.
    pub fn data(&self) -> &'d [u8] {
        self.table.data
    }

    /// The kind of file: object, DLL or executable.
    pub fn kind(&self) -> FileKind {
        self.table.kind()
    }

    /// `Machine` of the COFF header.
    pub fn machine(&self) -> u16 {
        self.table.machine()
    }

    /// `ImageBase` of an image (addresses of this space are RVAs: pointers read as
    /// `value − ImageBase`).
    pub fn image_base(&self) -> Option<u64> {
        self.table.image_base()
    }

    /// True if a DIR64 base relocation (image) or an `ADDR64` relocation (object)
    /// covers the 8 bytes at `addr`.
    pub fn is_relocated(&self, addr: u64) -> bool {
        self.reloc(addr).is_some()
    }

    /// Every section, in section-table order.
    pub fn sections(&self) -> &[Section<'d>] {
        self.map.sections()
    }

    /// The section with contents holding `addr`, and the offset of `addr` in it.
    pub fn section_at(&self, addr: u64) -> Option<(&Section<'d>, u64)> {
        self.map.section_at(addr)
    }

    /// The name of a symbol an object defines at `addr` (section symbols excluded); images
    /// have none.
    pub fn symbol_at(&self, addr: u64) -> Option<&'d [u8]> {
        let section = self.section_at(addr).map(|(s, _)| s.index);
        let pos = self.symbols.partition_point(|s| s.0 < addr);
        self.symbols
            .get(pos..)?
            .iter()
            .take_while(|s| s.0 == addr)
            .filter(|s| section.is_none_or(|i| s.2 == i))
            .map(|s| s.1)
            .next()
    }

    /// The name of the undefined symbol the slot at `addr` is relocated against, if it is.
    pub fn undefined_target(&self, addr: u64) -> Option<&'d [u8]> {
        match self.reloc(addr)?.value {
            Value::Undefined(n) => Some(n),
            _ => None,
        }
    }

    /// Every 24-byte slot of the wrapper sections (`.hipFatB`/`.nvFatBi` in images,
    /// `.hipFatBinSegment`/`.nvFatBinSegment` in objects), in section order.
    pub fn fat_binary_wrappers(&self) -> Vec<WrapperSlot<'d>> {
        self.map.wrapper_slots(|address| self.symbol_at(address))
    }

    /// Every relocated pointer slot whose value the file gives, as `(value, slot
    /// address)` sorted by value.
    pub fn pointer_slots(&self) -> Vec<(u64, u64)> {
        let mut pairs: Vec<(u64, u64)> = self
            .relocs
            .iter()
            .filter_map(|r| match r.value {
                Value::Undefined(_) => None,
                _ => self.pointer_at(r.at).ok().map(|v| (v, r.at)),
            })
            .collect();
        pairs.sort_unstable();
        pairs
    }

    /// The offload-entry sections (`llvm_off` in images), in section order: an image's
    /// by its `VirtualSize`, an object's by its raw size.
    pub fn entry_sections(&self) -> Vec<EntrySection<'d>> {
        self.sections()
            .iter()
            .filter_map(|s| match s.role() {
                SectionRole::Entries(kind) => Some(EntrySection {
                    name: s.name,
                    begin: s.address,
                    end: s.address.saturating_add(s.size),
                    legacy_kind: kind,
                }),
                _ => None,
            })
            .collect()
    }
}

impl<'d> HostPe<'d> {
    /// The bytes from `addr` to the end of the section holding it.
    pub fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        self.map.bytes_from(addr)
    }

    /// The pointer the program sees at `addr` once relocated: an image's DIR64 slot as
    /// `value − ImageBase` (an RVA), an object's `ADDR64` slot as symbol + addend, any
    /// other slot as stored.
    pub fn pointer_at(&self, addr: u64) -> Result<u64> {
        let raw = || {
            self.raw_u64(addr).ok_or(Error::new(
                ErrorKind::OutOfBounds,
                addr,
                "pointer slot is not inside any section's contents",
            ))
        };
        match self.reloc(addr).map(|r| r.value) {
            Some(Value::Known(v)) => Ok(v),
            Some(Value::Based) => {
                let base = self.table.image_base().unwrap_or(0);
                raw()?.checked_sub(base).ok_or(Error::new(
                    ErrorKind::OutOfBounds,
                    addr,
                    "base-relocated pointer lies below ImageBase",
                ))
            }
            Some(Value::Undefined(_)) => Err(Error::new(
                ErrorKind::OutOfBounds,
                addr,
                "pointer is relocated against a symbol this file does not define",
            )),
            None => raw(),
        }
    }
}
