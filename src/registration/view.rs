//! Read-only views of registration records, given as bytes plus a way to resolve pointers
//! (the sections cited below are those of `REGISTRATION.md`).
//!
//! A record handed to a runtime is a graph of pointers: a descriptor points at an image
//! array and an entry table, entries point at names. The views follow those pointers
//! through an [`AddressSpace`] — the caller's model of memory: a host ELF file whose
//! relocations give the pointer values ([`super::HostElf`]), or the loaded segments of the
//! running process (the runtime shim). Every read is bounded by the region the space
//! reports; nothing is dereferenced, nothing is allocated.
//!
//! Errors carry the **address** of the problem in [`Error::offset`].

use alloc::vec::Vec;

use crate::error::{Error, ErrorKind, Result};
use crate::image::OffloadKind;
use crate::offload_binary::{OffloadBinary, OffloadBinaryEntry};
use crate::options::{Limits, ReadOptions};
use crate::raw::{
    FatbinWrapper, ELF_MAGIC, EM_AMDGPU, EM_CUDA, HIP_WRAPPER_MAGIC, NVFATBIN_MAGIC,
    NVFATBIN_WRAPPER_MAGIC,
};
use crate::{bundle, ccob, offload_binary};

use super::abi::{
    self, gpu_flags, omp_flags, RawBinDesc, RawDeviceImage, RawEntry, RawLegacyEntry, ENTRY_SIZE,
    HIP_FATBIN_VERSION, LEGACY_ENTRY_SIZE,
};

use zerocopy::{FromBytes, Immutable, KnownLayout};

/// Longest symbol name read through a pointer (a NUL must come within this many bytes).
pub const MAX_NAME_LEN: usize = 1 << 16;
/// Deepest OffloadBinary nesting unwrapped for one device image (§1.9).
pub const MAX_UNWRAP_DEPTH: usize = 4;

/// Memory as a program sees it: addresses to bytes, and pointer values after relocation.
///
/// `'d` is the lifetime of the bytes (a mapped file, or process memory that stays mapped
/// while the caller uses the views).
pub trait AddressSpace<'d> {
    /// The bytes from `addr` to the end of the region (ELF section, loaded segment) that
    /// contains it; `None` when nothing is mapped there. Regions bound every read: a
    /// pointer gives a start, never a length.
    fn bytes_from(&self, addr: u64) -> Option<&'d [u8]>;

    /// The pointer-sized value the program sees at `addr` once relocated.
    ///
    /// The default reads 8 little-endian bytes (running process, non-PIE file). Spaces
    /// over relocatable or position-independent files apply their relocations, and report
    /// a pointer to a symbol they do not define as an error.
    fn pointer_at(&self, addr: u64) -> Result<u64> {
        read_u64(self, addr)
    }
}

impl<'d, S: AddressSpace<'d> + ?Sized> AddressSpace<'d> for &S {
    fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
        (**self).bytes_from(addr)
    }
    fn pointer_at(&self, addr: u64) -> Result<u64> {
        (**self).pointer_at(addr)
    }
}

const UNMAPPED: &str = "address is not inside any mapped region";

/// `addr + offset`: the address of a field; overflow is [`ErrorKind::OutOfBounds`].
pub fn field(addr: u64, offset: u64) -> Result<u64> {
    addr.checked_add(offset).ok_or(Error::new(
        ErrorKind::OutOfBounds,
        addr,
        "record address + field offset overflows",
    ))
}

/// The relocated pointer stored `offset` bytes into the record at `addr`.
fn pointer_field<'d, S: AddressSpace<'d> + ?Sized>(
    space: &S,
    addr: u64,
    offset: u64,
) -> Result<u64> {
    space.pointer_at(field(addr, offset)?)
}

/// The bytes from `addr` to the end of its region.
pub fn region<'d, S: AddressSpace<'d> + ?Sized>(space: &S, addr: u64) -> Result<&'d [u8]> {
    space
        .bytes_from(addr)
        .ok_or(Error::new(ErrorKind::OutOfBounds, addr, UNMAPPED))
}

/// `len` bytes at `addr`, which must lie in one region.
pub fn read_bytes<'d, S: AddressSpace<'d> + ?Sized>(
    space: &S,
    addr: u64,
    len: u64,
    what: &'static str,
) -> Result<&'d [u8]> {
    let r = region(space, addr)?;
    usize::try_from(len)
        .ok()
        .and_then(|l| r.get(..l))
        .ok_or(Error::new(ErrorKind::Truncated, addr, what))
}

/// A record of type `T` read in place at `addr`.
pub fn read_record<'d, T, S>(space: &S, addr: u64, what: &'static str) -> Result<&'d T>
where
    T: FromBytes + KnownLayout + Immutable + 'd,
    S: AddressSpace<'d> + ?Sized,
{
    let r = region(space, addr)?;
    T::ref_from_prefix(r)
        .map(|(t, _)| t)
        .map_err(|_| Error::new(ErrorKind::Truncated, addr, what))
}

/// The raw little-endian `u64` at `addr` (no relocation).
pub fn read_u64<'d, S: AddressSpace<'d> + ?Sized>(space: &S, addr: u64) -> Result<u64> {
    let b = read_bytes(space, addr, 8, "pointer runs past the end of its region")?;
    let a: [u8; 8] = b
        .try_into()
        .map_err(|_| Error::new(ErrorKind::Truncated, addr, "pointer truncated"))?;
    Ok(u64::from_le_bytes(a))
}

/// The NUL-terminated string at `addr`, without its NUL.
pub fn c_string<'d, S: AddressSpace<'d> + ?Sized>(space: &S, addr: u64) -> Result<&'d [u8]> {
    if addr == 0 {
        return Err(Error::new(ErrorKind::OutOfBounds, 0, "null string pointer"));
    }
    let r = region(space, addr)?;
    let window = r.get(..r.len().min(MAX_NAME_LEN)).unwrap_or(r);
    match window.iter().position(|&b| b == 0) {
        Some(n) => Ok(window.get(..n).unwrap_or(window)),
        None if window.len() < r.len() => Err(Error::new(
            ErrorKind::LimitExceeded,
            addr,
            "symbol name is longer than the limit",
        )),
        None => Err(Error::new(
            ErrorKind::Truncated,
            addr,
            "symbol name runs past the end of its region (no NUL)",
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Offload entries.

/// Which of the two entry layouts a table uses (§1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryLayout {
    /// 32-byte `__tgt_offload_entry` of LLVM ≤ 20.
    Legacy,
    /// 56-byte versioned `EntryTy` of LLVM 21+.
    Current,
}

impl EntryLayout {
    /// Size of one entry.
    pub const fn stride(self) -> u64 {
        match self {
            EntryLayout::Legacy => LEGACY_ENTRY_SIZE,
            EntryLayout::Current => ENTRY_SIZE,
        }
    }
}

/// A table of offload entries `[begin, end)`, its layout decided as the LLVM runtime does
/// (`PluginManager::upgradeLegacyEntries`, §1.3): the first 8 bytes of the first entry are
/// `Reserved == 0` in the current layout and a non-null host address in the legacy one.
///
/// Limitation shared with LLVM: a legacy table whose first entry has a null `addr` is
/// read as current (and then usually fails the stride check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryTable {
    /// Address of the first entry.
    pub begin: u64,
    /// Address one past the last entry.
    pub end: u64,
    /// The layout.
    pub layout: EntryLayout,
    /// Number of records (including all-zero records that iteration skips).
    pub count: u64,
}

impl EntryTable {
    /// An empty table at `at`.
    pub const fn empty(at: u64) -> Self {
        EntryTable {
            begin: at,
            end: at,
            layout: EntryLayout::Current,
            count: 0,
        }
    }

    /// Reads the table header information for `[begin, end)`: detects the layout and checks
    /// that the byte distance is a whole number of entries and that the table is mapped.
    pub fn read<'d, S: AddressSpace<'d> + ?Sized>(
        space: &S,
        begin: u64,
        end: u64,
        max_entries: u64,
    ) -> Result<Self> {
        if begin == end {
            return Ok(EntryTable::empty(begin));
        }
        let len = end.checked_sub(begin).ok_or(Error::new(
            ErrorKind::Malformed,
            begin,
            "offload entry table ends before it begins",
        ))?;
        let layout = if space.pointer_at(begin)? != 0 {
            EntryLayout::Legacy
        } else {
            EntryLayout::Current
        };
        if len.checked_rem(layout.stride()) != Some(0) {
            return Err(Error::new(
                ErrorKind::Malformed,
                begin,
                "offload entry table size is not a multiple of the entry size",
            ));
        }
        let count = len.checked_div(layout.stride()).unwrap_or(0);
        if count > max_entries {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                begin,
                "offload entry table has more entries than the limit",
            ));
        }
        read_bytes(
            space,
            begin,
            len,
            "offload entry table runs past the end of its region",
        )?;
        Ok(EntryTable {
            begin,
            end,
            layout,
            count,
        })
    }

    /// True if the table has no records.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The entries in the current layout, legacy ones upgraded on the fly (§1.3); all-zero
    /// records (COFF markers, padding) are skipped.
    pub fn iter<'s, 'd, S: AddressSpace<'d> + ?Sized>(&self, space: &'s S) -> Entries<'s, S> {
        Entries {
            space,
            table: *self,
            index: 0,
        }
    }
}

/// Iterator over an [`EntryTable`]: see [`EntryTable::iter`].
#[derive(Debug)]
pub struct Entries<'s, S: ?Sized> {
    space: &'s S,
    table: EntryTable,
    index: u64,
}

impl<'d, S: AddressSpace<'d> + ?Sized> Iterator for Entries<'_, S> {
    type Item = Result<HostEntry>;

    fn next(&mut self) -> Option<Result<HostEntry>> {
        while self.index < self.table.count {
            let i = self.index;
            self.index = i.saturating_add(1);
            let at = i
                .checked_mul(self.table.layout.stride())
                .ok_or(Error::new(
                    ErrorKind::OutOfBounds,
                    self.table.begin,
                    "entry index overflows",
                ))
                .and_then(|off| field(self.table.begin, off));
            match at.and_then(|at| HostEntry::read(self.space, at, self.table.layout, i)) {
                Ok(e) if e.is_all_zero() => continue,
                r => return Some(r),
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left =
            usize::try_from(self.table.count.saturating_sub(self.index)).unwrap_or(usize::MAX);
        (0, Some(left))
    }
}

/// The kind of global an entry names (§1.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GlobalKind {
    /// A kernel (function with a host handle).
    Kernel,
    /// A device variable.
    Variable,
    /// A managed variable (CUDA/HIP).
    Managed,
    /// A surface reference (CUDA/HIP).
    Surface,
    /// A texture reference (CUDA/HIP).
    Texture,
    /// An OpenMP `requires` record, not a symbol.
    Requires,
    /// An OpenMP indirectly callable function (or vtable).
    Indirect,
    /// Anything else (unknown type bits, null-address function entries).
    Other,
}

impl GlobalKind {
    /// Lowercase name used in reports: `kernel`, `variable`, `managed`, `surface`,
    /// `texture`, `requires`, `indirect`, `other`.
    pub const fn name(self) -> &'static str {
        match self {
            GlobalKind::Kernel => "kernel",
            GlobalKind::Variable => "variable",
            GlobalKind::Managed => "managed",
            GlobalKind::Surface => "surface",
            GlobalKind::Texture => "texture",
            GlobalKind::Requires => "requires",
            GlobalKind::Indirect => "indirect",
            GlobalKind::Other => "other",
        }
    }
}

/// One offload entry in the current layout (a legacy entry is shown upgraded: `Version`
/// 1, `Kind` OpenMP, `Data` sign-extended, `AuxAddr` null; §1.3). Pointer fields are
/// addresses in the [`AddressSpace`] it was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostEntry {
    /// Index of the record in its table.
    pub index: u64,
    /// Address of the record.
    pub at: u64,
    /// True if the record was stored in the legacy layout.
    pub legacy: bool,
    /// `Reserved` (0 for a valid current entry).
    pub reserved: u64,
    /// `Version`.
    pub version: u16,
    /// `Kind` (raw; [`HostEntry::offload_kind`] decodes both eras).
    pub kind: u16,
    /// `Flags`.
    pub flags: u32,
    /// `Address`.
    pub address: u64,
    /// `SymbolName` (address of the NUL-terminated name).
    pub symbol_name: u64,
    /// `Size`.
    pub size: u64,
    /// `Data`.
    pub data: u64,
    /// `AuxAddr`.
    pub aux_addr: u64,
}

impl HostEntry {
    /// Reads the record at `at` in `layout`.
    pub fn read<'d, S: AddressSpace<'d> + ?Sized>(
        space: &S,
        at: u64,
        layout: EntryLayout,
        index: u64,
    ) -> Result<Self> {
        match layout {
            EntryLayout::Legacy => {
                let r: &RawLegacyEntry = read_record(space, at, "legacy offload entry truncated")?;
                Ok(HostEntry {
                    index,
                    at,
                    legacy: true,
                    reserved: 0,
                    version: 1,
                    kind: abi::kind::OPENMP,
                    flags: r.flags.get() as u32,
                    address: space.pointer_at(at)?,
                    symbol_name: pointer_field(space, at, 8)?,
                    size: r.size.get(),
                    data: i64::from(r.data.get()) as u64,
                    aux_addr: 0,
                })
            }
            EntryLayout::Current => {
                let r: &RawEntry = read_record(space, at, "offload entry truncated")?;
                Ok(HostEntry {
                    index,
                    at,
                    legacy: false,
                    reserved: r.reserved.get(),
                    version: r.version.get(),
                    kind: r.kind.get(),
                    flags: r.flags.get(),
                    address: pointer_field(space, at, 16)?,
                    symbol_name: pointer_field(space, at, 24)?,
                    size: r.size.get(),
                    data: r.data.get(),
                    aux_addr: pointer_field(space, at, 48)?,
                })
            }
        }
    }

    fn is_all_zero(&self) -> bool {
        !self.legacy
            && self.reserved == 0
            && self.version == 0
            && self.kind == 0
            && self.flags == 0
            && self.address == 0
            && self.symbol_name == 0
            && self.size == 0
            && self.data == 0
            && self.aux_addr == 0
    }

    /// The consumer, with HIP accepted as 3 (LLVM 20) or 4 (LLVM 21+).
    pub const fn offload_kind(&self) -> OffloadKind {
        OffloadKind::from_code(self.kind)
    }

    /// An OpenMP `requires` record: `Kind == OpenMP && Flags == 0x10` (equality, §1.4).
    pub const fn is_requires(&self) -> bool {
        self.kind == abi::kind::OPENMP && self.flags == omp_flags::REGISTER_REQUIRES
    }

    /// What the entry names, by the rules of its kind (§1.4).
    pub fn global_kind(&self) -> GlobalKind {
        match self.offload_kind() {
            OffloadKind::OpenMp => {
                if self.is_requires() {
                    GlobalKind::Requires
                } else if self.flags
                    & (omp_flags::DECLARE_TARGET_INDIRECT
                        | omp_flags::DECLARE_TARGET_INDIRECT_VTABLE)
                    != 0
                {
                    GlobalKind::Indirect
                } else if self.size != 0 {
                    GlobalKind::Variable
                } else if self.address != 0 {
                    GlobalKind::Kernel
                } else {
                    GlobalKind::Other
                }
            }
            OffloadKind::Cuda | OffloadKind::Hip => match self.flags & gpu_flags::TYPE_MASK {
                gpu_flags::GLOBAL if self.size == 0 => GlobalKind::Kernel,
                gpu_flags::GLOBAL => GlobalKind::Variable,
                gpu_flags::MANAGED => GlobalKind::Managed,
                gpu_flags::SURFACE => GlobalKind::Surface,
                gpu_flags::TEXTURE => GlobalKind::Texture,
                _ => GlobalKind::Other,
            },
            _ => GlobalKind::Other,
        }
    }

    /// The symbol name (without its NUL).
    pub fn name<'d, S: AddressSpace<'d> + ?Sized>(&self, space: &S) -> Result<&'d [u8]> {
        c_string(space, self.symbol_name)
    }
}

// ---------------------------------------------------------------------------------------
// Descriptors and device images.

/// A `__tgt_bin_desc` (§1.7) read at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Address of the descriptor.
    pub address: u64,
    /// `NumDeviceImages`.
    pub num_device_images: u32,
    /// `DeviceImages`.
    pub device_images: u64,
    /// The host entry table.
    pub entries: EntryTable,
}

impl Descriptor {
    /// Reads the descriptor at `addr` and checks its image array and entry table.
    pub fn read<'d, S: AddressSpace<'d> + ?Sized>(
        space: &S,
        addr: u64,
        options: &ReadOptions,
    ) -> Result<Self> {
        let raw: &RawBinDesc = read_record(space, addr, "__tgt_bin_desc truncated")?;
        let n = raw.num_device_images.get();
        let n = u32::try_from(n).map_err(|_| {
            Error::new(
                ErrorKind::Malformed,
                addr,
                "__tgt_bin_desc has a negative image count",
            )
        })?;
        if u64::from(n) > options.limits.max_entries {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                addr,
                "__tgt_bin_desc has more images than the limit",
            ));
        }
        let device_images = pointer_field(space, addr, 8)?;
        if n > 0 {
            read_bytes(
                space,
                device_images,
                u64::from(n) * abi::DEVICE_IMAGE_SIZE,
                "__tgt_device_image array runs past the end of its region",
            )?;
        }
        let begin = pointer_field(space, addr, 16)?;
        let end = pointer_field(space, addr, 24)?;
        let entries = EntryTable::read(space, begin, end, options.limits.max_entries)?;
        Ok(Descriptor {
            address: addr,
            num_device_images: n,
            device_images,
            entries,
        })
    }

    /// The device images in array order.
    pub fn images<'s, 'd, S: AddressSpace<'d> + ?Sized>(
        &self,
        space: &'s S,
    ) -> DeviceImages<'s, S> {
        DeviceImages {
            space,
            desc: *self,
            index: 0,
        }
    }
}

/// Iterator over the images of a [`Descriptor`].
#[derive(Debug)]
pub struct DeviceImages<'s, S: ?Sized> {
    space: &'s S,
    desc: Descriptor,
    index: u32,
}

impl<'d, S: AddressSpace<'d> + ?Sized> Iterator for DeviceImages<'_, S> {
    type Item = Result<DeviceImageView>;

    fn next(&mut self) -> Option<Result<DeviceImageView>> {
        if self.index >= self.desc.num_device_images {
            return None;
        }
        let i = self.index;
        self.index = i.saturating_add(1);
        // i < 2^31 and the array was bounds-checked by `Descriptor::read`.
        let at = u64::from(i)
            .checked_mul(abi::DEVICE_IMAGE_SIZE)
            .ok_or(Error::new(
                ErrorKind::OutOfBounds,
                self.desc.address,
                "image index overflows",
            ))
            .and_then(|off| field(self.desc.device_images, off));
        Some(at.and_then(|at| DeviceImageView::read(self.space, at, i)))
    }
}

/// A `__tgt_device_image` (§1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceImageView {
    /// Index in the descriptor's array.
    pub index: u32,
    /// Address of the record.
    pub at: u64,
    /// `ImageStart`.
    pub image_start: u64,
    /// `ImageEnd`.
    pub image_end: u64,
    /// `EntriesBegin`.
    pub entries_begin: u64,
    /// `EntriesEnd`.
    pub entries_end: u64,
}

impl DeviceImageView {
    /// Reads the record at `at`.
    pub fn read<'d, S: AddressSpace<'d> + ?Sized>(space: &S, at: u64, index: u32) -> Result<Self> {
        let _: &RawDeviceImage = read_record(space, at, "__tgt_device_image truncated")?;
        Ok(DeviceImageView {
            index,
            at,
            image_start: space.pointer_at(at)?,
            image_end: pointer_field(space, at, 8)?,
            entries_begin: pointer_field(space, at, 16)?,
            entries_end: pointer_field(space, at, 24)?,
        })
    }

    /// The image as the LLVM runtime uses it: [`unwrap_image`] of [`DeviceImageView::bytes`].
    pub fn image<'d, S: AddressSpace<'d> + ?Sized>(
        &self,
        space: &S,
        limits: &Limits,
    ) -> Result<UnwrappedImage<'d>> {
        Ok(unwrap_image(self.bytes(space)?, limits))
    }

    /// The bytes `[ImageStart, ImageEnd)`, which must lie in one region.
    pub fn bytes<'d, S: AddressSpace<'d> + ?Sized>(&self, space: &S) -> Result<&'d [u8]> {
        let len = self
            .image_end
            .checked_sub(self.image_start)
            .ok_or(Error::new(
                ErrorKind::Malformed,
                self.at,
                "device image ends before it starts",
            ))?;
        read_bytes(
            space,
            self.image_start,
            len,
            "device image runs past the end of its region",
        )
    }
}

/// A descriptor's device image as the LLVM runtime uses it (§1.9, `DeviceImageTy`).
#[derive(Clone, Copy, Debug)]
pub enum UnwrappedImage<'d> {
    /// Not an OffloadBinary (or one that does not parse, or nested too deep): the bytes
    /// are the image.
    Raw(&'d [u8]),
    /// The first entry of the (innermost) OffloadBinary: its image and string metadata.
    Entry(OffloadBinaryEntry<'d>),
    /// A compressed OffloadBinary (v3): its entries need [`OffloadBinary::inflate`].
    Compressed(OffloadBinary<'d>),
}

/// Unwraps `bytes` as the LLVM runtime does: if they parse as an OffloadBinary, the image
/// is its first entry's image (recursively, up to [`MAX_UNWRAP_DEPTH`] levels: nested
/// OffloadBinaries exist); otherwise the bytes are used raw. Allocation-free.
pub fn unwrap_image<'d>(bytes: &'d [u8], limits: &Limits) -> UnwrappedImage<'d> {
    let mut current = bytes;
    let mut last = UnwrappedImage::Raw(bytes);
    for _ in 0..MAX_UNWRAP_DEPTH {
        if !offload_binary::is_offload_binary(current) {
            break;
        }
        let Ok(binary) = OffloadBinary::parse(current, limits) else {
            break;
        };
        if binary.is_compressed() {
            return UnwrappedImage::Compressed(binary);
        }
        let Some(entry) = binary.entries().next() else {
            break;
        };
        last = UnwrappedImage::Entry(entry);
        current = entry.image;
    }
    last
}

// ---------------------------------------------------------------------------------------
// Fat-binary wrappers.

/// Which runtime a fat-binary wrapper is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WrapperKind {
    /// `HIPF`.
    Hip,
    /// CUDA's `0x466243B1`.
    Cuda,
}

/// A HIP or CUDA fat-binary wrapper (§4.1, §5) read at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FatbinWrapperView {
    /// Address of the wrapper.
    pub address: u64,
    /// The runtime it is for.
    pub kind: WrapperKind,
    /// `version`.
    pub version: u32,
    /// `binary`: where the fat binary starts.
    pub binary: u64,
    /// `unused` (CUDA: file name or pre-linked fatbins).
    pub unused: u64,
}

impl FatbinWrapperView {
    /// Reads and checks the wrapper at `addr` as the runtimes do: HIP requires
    /// `magic == 0x48495046 && version == 1` (anything else, including the downstream
    /// `HIPK` variant, is [`ErrorKind::BadMagic`] / [`ErrorKind::UnsupportedVersion`]);
    /// CUDA accepts versions 1 and 2.
    pub fn read<'d, S: AddressSpace<'d> + ?Sized>(space: &S, addr: u64) -> Result<Self> {
        let raw: &FatbinWrapper = read_record(space, addr, "fat-binary wrapper truncated")?;
        let (magic, version) = (raw.magic.get(), raw.version.get());
        let kind = match magic {
            HIP_WRAPPER_MAGIC => WrapperKind::Hip,
            NVFATBIN_WRAPPER_MAGIC => WrapperKind::Cuda,
            _ => {
                return Err(Error::new(
                    ErrorKind::BadMagic,
                    addr,
                    "not a HIP (HIPF) or CUDA fat-binary wrapper",
                ))
            }
        };
        let supported = match kind {
            WrapperKind::Hip => version == HIP_FATBIN_VERSION,
            WrapperKind::Cuda => version == 1 || version == 2,
        };
        if !supported {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                addr.saturating_add(4),
                "fat-binary wrapper version is not supported",
            ));
        }
        Ok(FatbinWrapperView {
            address: addr,
            kind,
            version,
            binary: pointer_field(space, addr, 8)?,
            unused: pointer_field(space, addr, 16)?,
        })
    }

    /// True for a CUDA wrapper of relocatable device code (`nvcc -rdc`, clang
    /// `-fgpu-rdc`): version 1, its fat binary in `__nv_relfatbin` (`binary_section`, the
    /// role of the section its pointer lands in). Its translation unit's constructor hands
    /// it to `__cudaRegisterLinkedBinary_<id>`, which only records it for the device link:
    /// the runtime registers the linked result instead, the fat binary of the version-2
    /// wrapper in `.nv_fatbin` (`REGISTRATION.md` §5.3).
    pub fn is_link_input(&self, binary_section: Option<crate::host::SectionRole<'_>>) -> bool {
        self.kind == WrapperKind::Cuda
            && self.version == 1
            && binary_section == Some(crate::host::SectionRole::NvRelFatbin)
    }

    /// The fat binary the wrapper points at, bounded by its own header (§4.2): a bundle
    /// ends at max(offset + size) of its entries, a `CCOB` at its total size, an NVIDIA
    /// fatbinary at `header_size + fat_size`, a bare ELF at the end of its furthest header
    /// table, section or segment. The region containing the pointer bounds everything; the
    /// bytes are never scanned for a magic.
    pub fn fat_binary<'d, S: AddressSpace<'d> + ?Sized>(
        &self,
        space: &S,
        options: &ReadOptions,
    ) -> Result<&'d [u8]> {
        if self.binary == 0 {
            return Err(Error::new(
                ErrorKind::OutOfBounds,
                self.address.saturating_add(8),
                "fat-binary wrapper has a null binary pointer",
            ));
        }
        fat_binary_at(space, self.binary, options)
    }

    /// The pre-linked list of a CUDA version-2 wrapper (§5.3): `unused` points at a
    /// null-terminated array of fat-binary addresses, which the device link's stub fills at
    /// run time from the version-1 wrappers of the relocatable units (their fat binaries in
    /// `__nv_relfatbin`) before it registers this wrapper. Empty for other wrappers and
    /// where `unused` is null. More than `max` addresses is [`ErrorKind::LimitExceeded`]; in
    /// a file, where the list is zero-filled memory (`.bss`), reading it fails.
    pub fn prelinked<'d, S: AddressSpace<'d> + ?Sized>(
        &self,
        space: &S,
        max: u64,
    ) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        if self.kind != WrapperKind::Cuda || self.version != 2 || self.unused == 0 {
            return Ok(out);
        }
        let mut at = self.unused;
        loop {
            let p = space.pointer_at(at)?;
            if p == 0 {
                return Ok(out);
            }
            if u64::try_from(out.len()).unwrap_or(u64::MAX) >= max {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    self.unused,
                    "pre-linked list names more fat binaries than the entry limit",
                ));
            }
            out.push(p);
            at = at.checked_add(8).ok_or(Error::new(
                ErrorKind::OutOfBounds,
                at,
                "pre-linked list runs past the end of the address space",
            ))?;
        }
    }
}

/// The fat binary (bundle, compressed bundle, OffloadBinary, ELF image or NVIDIA
/// fatbinary) at `addr`, as long as its own header says (§4.2).
pub fn fat_binary_at<'d, S: AddressSpace<'d> + ?Sized>(
    space: &S,
    addr: u64,
    options: &ReadOptions,
) -> Result<&'d [u8]> {
    let r = region(space, addr)?;
    let len = blob_len(r, options).map_err(|e| e.rebase(addr))?;
    usize::try_from(len)
        .ok()
        .and_then(|l| r.get(..l))
        .ok_or(Error::new(
            ErrorKind::Truncated,
            addr,
            "fat binary runs past the end of its region",
        ))
}

/// Size of the blob at the start of `data` as its own header gives it (§4.2).
pub fn blob_len(data: &[u8], options: &ReadOptions) -> Result<u64> {
    if bundle::is_bundle(data) {
        Ok(bundle::Bundle::parse(data, &options.limits)?.len())
    } else if ccob::is_compressed_bundle(data) {
        ccob::CompressedBundle::parse(data)?.len(options)
    } else if offload_binary::is_offload_binary(data) {
        Ok(offload_binary::OffloadBinaries::parse(data, &options.limits)?.len())
    } else if data.starts_with(ELF_MAGIC) {
        elf_len(data)
    } else if data.get(..4) == Some(&NVFATBIN_MAGIC[..]) {
        crate::nvfatbin::declared_len(data)
    } else {
        Err(Error::new(
            ErrorKind::BadMagic,
            0,
            "fat binary is not a bundle, CCOB, OffloadBinary, ELF or NVIDIA fatbinary",
        ))
    }
}

/// Size of a bare device ELF: the end of its furthest header table, section or segment
/// file range (`FORMATS.md` §7). Only 64-bit little-endian AMDGPU/CUDA objects.
pub fn elf_len(data: &[u8]) -> Result<u64> {
    use object::elf::FileHeader64;
    use object::read::elf::FileHeader;
    use object::LittleEndian as LE;

    let h = FileHeader64::<LE>::parse(data)
        .map_err(|_| Error::new(ErrorKind::BadContainer, 0, "device ELF header is malformed"))?;
    let machine = h.e_machine(LE).0;
    if machine != EM_AMDGPU && machine != EM_CUDA {
        return Err(Error::new(
            ErrorKind::BadMagic,
            18,
            "ELF fat binary is not an AMDGPU or CUDA device object",
        ));
    }
    crate::bytes::elf64_len(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Memory from `base`: one region.
    struct Flat<'d> {
        base: u64,
        bytes: &'d [u8],
    }

    impl<'d> AddressSpace<'d> for Flat<'d> {
        fn bytes_from(&self, addr: u64) -> Option<&'d [u8]> {
            let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
            self.bytes.get(off..)
        }
    }

    /// A CUDA wrapper of `version` at 0x1000 whose `unused` points at 0x1018, followed by
    /// `list` there.
    fn memory(version: u32, list: &[u64]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&crate::raw::NVFATBIN_WRAPPER_MAGIC.to_le_bytes());
        m.extend_from_slice(&version.to_le_bytes());
        m.extend_from_slice(&0x4000u64.to_le_bytes());
        m.extend_from_slice(&0x1018u64.to_le_bytes());
        for p in list {
            m.extend_from_slice(&p.to_le_bytes());
        }
        m
    }

    #[test]
    fn a_version_2_wrapper_names_its_prelinked_fat_binaries() {
        let m = memory(2, &[0x2000, 0x3000, 0]);
        let space = Flat {
            base: 0x1000,
            bytes: &m,
        };
        let w = FatbinWrapperView::read(&space, 0x1000).unwrap();
        assert_eq!(w.prelinked(&space, 16).unwrap(), vec![0x2000, 0x3000]);
        let e = w.prelinked(&space, 1).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::LimitExceeded, 0x1018));
        // A list without its terminator runs off the mapped memory.
        let m = memory(2, &[0x2000]);
        let space = Flat {
            base: 0x1000,
            bytes: &m,
        };
        let e = w.prelinked(&space, 16).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, 0x1020));
        // Version 1 has no list, whatever `unused` holds.
        let m = memory(1, &[0x2000, 0]);
        let space = Flat {
            base: 0x1000,
            bytes: &m,
        };
        let w = FatbinWrapperView::read(&space, 0x1000).unwrap();
        assert_eq!(w.prelinked(&space, 16).unwrap(), Vec::<u64>::new());
    }
}
