//! PE images and COFF objects (Windows DLLs, EXEs, `.pyd`s, `.obj`s): every unit is
//! written at its own start and the rest of its old extent filled with zeros, so no byte
//! outside the units moves, no RVA, wrapper pointer or base relocation changes, and the
//! file keeps its size (compacting the sections, which moves later sections' raw data, is
//! not implemented: the layout line says so).
//!
//! A signed image (a certificate table, data directory 4, which holds a file offset) no
//! longer matches its Authenticode signature once a byte changes. Its certificate table is
//! removed: the directory entry is zeroed and, when the table ends the file (as every
//! signed file measured has it), the file ends where it started. With
//! [`super::PruneOptions::refuse_signed`] the file is refused instead.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use object::pe::{
    ImageDosHeader, ImageNtHeaders32, ImageNtHeaders64, IMAGE_DIRECTORY_ENTRY_SECURITY,
};
use object::read::pe::ImageNtHeaders;
use object::LittleEndian as LE;

use crate::error::{ErrorKind, Result};

use super::pieces::{apply_patches, cut, standalone, Piece};
use super::plan::UnitPlan;
use super::{err, len64};

/// The certificate table of a PE image: (file offset of its data-directory entry, file
/// offset of the table, its length); `None` for an image without one and for COFF objects.
fn certificate(data: &[u8]) -> Option<(u64, u64, u64)> {
    fn find<H: ImageNtHeaders>(data: &[u8], nt_at: u64) -> Option<(u64, u64, u64)> {
        let mut offset = nt_at;
        let (_, dirs) = H::parse(data, &mut offset).ok()?;
        let entry = dirs.get(IMAGE_DIRECTORY_ENTRY_SECURITY)?;
        let (at, len) = (
            u64::from(entry.virtual_address.get(LE)),
            u64::from(entry.size.get(LE)),
        );
        if len == 0 {
            return None;
        }
        let entry_at = crate::bytes::offset_in(data, object::pod::bytes_of(entry))?;
        Some((entry_at, at, len))
    }
    if !data.starts_with(b"MZ") {
        return None;
    }
    let dos = ImageDosHeader::parse(data).ok()?;
    let nt_at = u64::from(dos.nt_headers_offset());
    find::<ImageNtHeaders64>(data, nt_at).or_else(|| find::<ImageNtHeaders32>(data, nt_at))
}

/// The pieces of a PE image or COFF object with `plans` rewritten in place (module
/// documentation), and the layout line.
pub(super) fn host_pe(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    refuse_signed: bool,
) -> Result<(Vec<Piece>, String)> {
    let mut pieces = standalone(data, plans, true);
    let mut layout =
        String::from("in place, zero-filled (compacting PE/COFF sections is not implemented)");
    let mut cut_at = None;
    if let Some((entry_at, at, len)) = certificate(data) {
        if refuse_signed {
            return Err(err(
                ErrorKind::BadContainer,
                at,
                "the image is signed (Authenticode certificate table): pruning would invalidate the signature",
            ));
        }
        let mut patches = BTreeMap::new();
        patches.insert(entry_at, alloc::vec![0u8; 8]);
        pieces = apply_patches(pieces, plans, &patches)?;
        let file_len = len64(data.len());
        let ends_file = at.checked_add(len) == Some(file_len);
        if ends_file && plans.iter().all(|p| p.range.end <= at) {
            pieces = cut(pieces, plans, &[], at);
            cut_at = Some(at);
            layout.push_str(&format!(
                "; the Authenticode signature no longer matches: its certificate table ({len} bytes) was removed"
            ));
        } else {
            layout.push_str(
                "; the Authenticode signature no longer matches: its certificate table is no longer referenced",
            );
        }
    }
    if cut_at.is_none() {
        layout.push_str(", file size unchanged");
    }
    Ok((pieces, layout))
}
