//! Split host libraries, read as the HIP runtime reads them (`KPACK.md` §3): per `HIPK`
//! wrapper, the ref record its pointer addresses and the TOC key of its code object.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{Error, ErrorKind};
use crate::host::{HostFile, WrapperSlot};
use crate::raw::HIPK_MAGIC;

use crate::kpack::{HipkWrapper, KpackRef, LoaderError, REF_READ_LIMIT};

/// One `HIPK` wrapper of a split library and what the runtime hands the loader for it.
#[derive(Clone, Debug)]
pub struct SplitWrapper<'d> {
    /// The wrapper's slot in `.hipFatBinSegment`.
    pub slot: WrapperSlot<'d>,
    /// The wrapper record.
    pub wrapper: HipkWrapper,
    /// The ref record's address: the wrapper's pointer once relocated.
    pub ref_address: u64,
    /// The ref record's file offset.
    pub ref_offset: u64,
    /// The ref record.
    pub reference: KpackRef<'d>,
    /// `<kernel_name>#<co_index>`: the key of the wrapper's code object in the archives'
    /// TOC ([`KpackRef::lookup_key`]).
    pub lookup_key: String,
}

/// The `HIPK` wrappers of a host file, in wrapper-section order, each with its ref record,
/// or the error that keeps the runtime from loading it and the loader code it gives.
///
/// `HIPF` wrappers (device code still in the library) are passed over, so the result is
/// empty for a library that is not split. The pointer is read as the program sees it
/// ([`HostFile::pointer_at`]: in ELF files the splitter's `R_X86_64_RELATIVE` addend), and
/// the ref record is read from at most [`REF_READ_LIMIT`] bytes at it, up to the end of its
/// section. A ref record that does not parse, or a pointer outside the file's mapped
/// sections, is [`LoaderError::InvalidMetadata`] (12) with an error located in the file; a
/// wrapper of another version [`LoaderError::InvalidArgument`] (the runtime does not take
/// it). Allocates the result and the ref records' path lists only.
pub fn split_wrappers<'d>(
    host: &HostFile<'d>,
) -> Vec<core::result::Result<SplitWrapper<'d>, (LoaderError, Error)>> {
    hipk_slots(host)
        .into_iter()
        .map(|slot| read_one(host, slot))
        .collect()
}

/// Whether `data` is a kpack-split host library (`KPACK.md`): the file offset of its first
/// `HIPK` wrapper, or `None` when `data` is no host file or holds no `HIPK` wrapper. Such a
/// library's device code lives in `.kpack` archives beside it, so [`crate::units`] finds no
/// unit in it: this says why.
pub fn split_library(data: &[u8]) -> Option<u64> {
    let host = HostFile::parse(data).ok()?;
    hipk_slots(&host).first().map(|slot| slot.offset)
}

/// The wrapper slots of a host file that hold a `HIPK` wrapper, in wrapper-section order:
/// the slots of [`split_wrappers`]' items, readable or not.
pub fn hipk_slots<'d>(host: &HostFile<'d>) -> Vec<WrapperSlot<'d>> {
    let data = host.data();
    host.fat_binary_wrappers()
        .into_iter()
        .filter(|slot| is_hipk(data, slot.offset))
        .collect()
}

/// True when the host file has at least one `HIPK` wrapper.
pub fn is_split(host: &HostFile<'_>) -> bool {
    let data = host.data();
    host.fat_binary_wrappers()
        .iter()
        .any(|slot| is_hipk(data, slot.offset))
}

fn is_hipk(data: &[u8], offset: u64) -> bool {
    usize::try_from(offset)
        .ok()
        .and_then(|o| data.get(o..o.checked_add(4)?))
        .is_some_and(|m| m == HIPK_MAGIC.to_le_bytes())
}

fn read_one<'d>(
    host: &HostFile<'d>,
    slot: WrapperSlot<'d>,
) -> core::result::Result<SplitWrapper<'d>, (LoaderError, Error)> {
    let meta = |e| (LoaderError::InvalidMetadata, e);
    let wrapper = HipkWrapper::read(host.data(), slot.offset)
        .map_err(|e| (LoaderError::InvalidArgument, e))?;
    let ptr_field = slot.offset.saturating_add(8);
    let ref_address = host
        .pointer_at(slot.address.saturating_add(8))
        .map_err(|_| {
            meta(Error::new(
                ErrorKind::OutOfBounds,
                ptr_field,
                "HIPK wrapper pointer cannot be read",
            ))
        })?;
    let outside = || {
        meta(Error::new(
            ErrorKind::OutOfBounds,
            ptr_field,
            "HIPK wrapper points outside the file's mapped sections",
        ))
    };
    let bytes = host.bytes_from(ref_address).ok_or_else(outside)?;
    let ref_offset = host.file_offset(ref_address).ok_or_else(outside)?;
    let bytes = bytes
        .get(..bytes.len().min(REF_READ_LIMIT))
        .unwrap_or(bytes);
    let reference = KpackRef::parse(bytes).map_err(|e| meta(e.rebase(ref_offset)))?;
    let lookup_key = reference.lookup_key(wrapper.co_index());
    Ok(SplitWrapper {
        slot,
        wrapper,
        ref_address,
        ref_offset,
        reference,
        lookup_key,
    })
}
