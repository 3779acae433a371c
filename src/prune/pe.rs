//! PE images and COFF objects (Windows DLLs, EXEs, `.pyd`s, `.obj`s).
//!
//! Images (64-bit, PE32+) are compacted when they can be: the containers of each fatbinary
//! section (`.hip_fat`, `.nv_fatb`) are packed from the section's start, each at the
//! alignment its RVA had (at most 4096), and the section's raw data ends after them,
//! rounded up to `FileAlignment`. No RVA changes: the section keeps its place and its
//! `VirtualSize` in memory (Windows maps sections back to back; the memory past the raw
//! data is zero-filled), and the raw data of the sections after
//! it moves down in the file (`PointerToRawData`, the debug directory's file offsets and
//! `PointerToSymbolTable` follow). Every pointer to a container moves with it: the wrapper
//! records' pointer fields (`.hipFatB`, `.nvFatBi`) and any other DIR64 base-relocated
//! word that points into the section, whose base relocations stay where they are (they
//! address the pointer fields, which do not move). `SizeOfInitializedData` drops by the
//! bytes removed, and a non-zero `CheckSum` is computed again over the new file. A pointer
//! into the middle of a container, non-zero bytes between containers, or a file this
//! reader does not lay out (PE32, an object) keeps the file in place instead: every unit
//! written at its own start and the rest of its old extent filled with zeros, so no byte
//! outside the units moves and the file keeps its size; the layout line says why.
//!
//! A signed image (a certificate table, data directory 4, which holds a file offset) no
//! longer matches its Authenticode signature once a byte changes. Its certificate table is
//! removed: the directory entry is zeroed and, when the table ends the file (as every
//! signed file measured has it), the file ends where it started. With
//! [`super::PruneOptions::refuse_signed`] the file is refused instead.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use core::ops::Range;

use object::pe::{
    ImageDosHeader, ImageNtHeaders32, ImageNtHeaders64, ImageSectionHeader,
    IMAGE_DIRECTORY_ENTRY_DEBUG, IMAGE_DIRECTORY_ENTRY_SECURITY,
};
use object::read::pe::{DataDirectories, ImageNtHeaders, SectionTable};
use object::LittleEndian as LE;

use crate::error::{ErrorKind, Result};
use crate::host::pe::{image_section_role, HostPe};
use crate::host::SectionRole;

use super::error::{Compact, PruneError, PruneErrorKind};
use super::layout::{in_place_reason, Laid};
use super::pieces::{apply_patches, cut, hole_bytes, mapped, standalone, Patches, Piece};
use super::plan::UnitPlan;
use super::{err, len64, u32_at, u64_at};

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
    shrink: bool,
    refuse_signed: bool,
) -> Result<Laid> {
    let cert = certificate(data);
    if let (Some((_, at, _)), true) = (cert, refuse_signed) {
        return Err(err(
            ErrorKind::BadContainer,
            at,
            "the image is signed (Authenticode certificate table): pruning would invalidate the signature",
        ));
    }
    let why = if shrink {
        match compact(data, plans, cert) {
            Ok((pieces, layout)) => return Ok((pieces, layout, None)),
            Err(why) => Some(why),
        }
    } else {
        None
    };
    let mut pieces = standalone(data, plans, true);
    let mut layout = format!("in place, zero-filled ({})", in_place_reason(why.as_ref()));
    let mut cut_at = None;
    if let Some((entry_at, at, len)) = cert {
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
    Ok((pieces, layout, why))
}

/// One fatbinary section of an image and where its units go.
struct Packing {
    /// Offset of its section header.
    header_at: u64,
    /// File offset of its raw data, old raw size, and its RVA.
    raw_at: u64,
    raw_len: u64,
    rva: u64,
    /// Where the packed units end (file offset).
    packed_end: u64,
    /// `IMAGE_SCN_CNT_INITIALIZED_DATA`.
    initialized: bool,
    /// Where each unit goes.
    moves: Vec<UnitMove>,
}

/// (plan index, old file offset, new file offset, new length) of a unit.
type UnitMove = (usize, u64, u64, u64);

const SECTION_HEADER_SIZE: u64 = 40;
const SIZE_OF_RAW_DATA: u64 = 16;
const POINTER_TO_RAW_DATA: u64 = 20;
const SCN_CNT_INITIALIZED_DATA: u32 = 0x40;
const DEBUG_ENTRY_SIZE: u64 = 28;
const DEBUG_POINTER_TO_RAW_DATA: u64 = 24;

/// The headers of a PE32+ image that compacting reads.
struct Image<'d> {
    data: &'d [u8],
    /// File offset of the NT headers.
    nt_at: u64,
    /// File offset of the section table.
    table_at: u64,
    headers: &'d [ImageSectionHeader],
    dirs: DataDirectories<'d>,
    file_align: u64,
    image_base: u64,
    host: HostPe<'d>,
    file_len: u64,
}

impl<'d> Image<'d> {
    /// Reads the headers of a PE32+ image; `Err` says why the file is not compacted.
    fn read(data: &'d [u8]) -> Compact<Self> {
        if !data.starts_with(b"MZ") {
            return Err(PruneError::new(
                PruneErrorKind::Unsupported,
                "COFF objects are not laid out again",
            ));
        }
        let dos = ImageDosHeader::parse(data)
            .map_err(|_| PruneError::new(PruneErrorKind::Read, "no DOS header"))?;
        let nt_at = u64::from(dos.nt_headers_offset());
        let mut offset = nt_at;
        let (nt, dirs) = ImageNtHeaders64::parse(data, &mut offset).map_err(|_| {
            PruneError::new(
                PruneErrorKind::Unsupported,
                "only PE32+ images are compacted",
            )
        })?;
        let table_at = offset;
        let sections = SectionTable::parse(nt.file_header(), data, offset).map_err(|_| {
            PruneError::new(PruneErrorKind::Read, "the section table does not read")
        })?;
        let opt = nt.optional_header();
        let file_align = u64::from(opt.file_alignment.get(LE));
        if !file_align.is_power_of_two() || !(512..=65536).contains(&file_align) {
            return Err(PruneError::new(
                PruneErrorKind::Unsupported,
                "unusual FileAlignment",
            ));
        }
        let host = HostPe::parse(data).map_err(PruneError::read)?;
        Ok(Image {
            data,
            nt_at,
            table_at,
            headers: sections.iter().as_slice(),
            dirs,
            file_align,
            image_base: opt.image_base.get(LE),
            host,
            file_len: len64(data.len()),
        })
    }

    /// File offset of the header of section `i`.
    fn header_at(&self, i: usize) -> u64 {
        self.table_at
            .saturating_add(len64(i).saturating_mul(SECTION_HEADER_SIZE))
    }
}

/// Compacts the fatbinary sections of a PE32+ image (module documentation); `Err` says
/// why the file is rewritten in place instead.
fn compact(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    cert: Option<(u64, u64, u64)>,
) -> Compact<(Vec<Piece>, String)> {
    let img = Image::read(data)?;
    let packs = packings(&img, plans)?;
    let holes = freed(&packs, img.file_align)?;
    let removed = hole_bytes(&holes);
    let mut patches: Patches = BTreeMap::new();
    let repointed = repoint(&img, &packs, &mut patches)?;
    patch_file_offsets(&img, &packs, &holes, &mut patches)?;
    patch_initialized_size(&img, &packs, &holes, &mut patches)?;
    let (end, cert_note) = drop_certificate(cert, img.file_len, &holes, &mut patches);
    let checksum_at = img.nt_at.saturating_add(24).saturating_add(64);
    let old_checksum = u32_at(data, checksum_at)
        .ok_or(PruneError::new(PruneErrorKind::Read, "no optional header"))?;
    if old_checksum != 0 {
        patches.insert(checksum_at, alloc::vec![0u8; 4]);
    }
    let pieces = packed_pieces(&packs, plans, img.file_len);
    let pieces = apply_patches(pieces, plans, &patches).map_err(PruneError::read)?;
    let mut pieces = cut(pieces, plans, &holes, end);
    if old_checksum != 0 {
        let sum = checksum(data, plans, &pieces, checksum_at)?;
        let mut fix = BTreeMap::new();
        fix.insert(checksum_at, sum.to_le_bytes().to_vec());
        pieces = apply_patches(pieces, plans, &fix).map_err(PruneError::read)?;
    }
    let units: usize = packs.iter().map(|k| k.moves.len()).sum();
    let moved_units = packs
        .iter()
        .flat_map(|k| &k.moves)
        .filter(|m| m.1 != m.2)
        .count();
    Ok((
        pieces,
        format!(
            "compacted: {units} containers packed from the start of their sections ({moved_units} moved, {repointed} pointers updated), {removed} bytes of raw data removed from the file, no RVA changed{}{cert_note}",
            if old_checksum != 0 { ", CheckSum computed again" } else { "" }
        ),
    ))
}

/// The fatbinary sections of the image and their packing, in file order; every unit to
/// rewrite must be in one.
fn packings(img: &Image<'_>, plans: &[UnitPlan<'_>]) -> Compact<Vec<Packing>> {
    let mut packs: Vec<Packing> = Vec::new();
    for (i, h) in img.headers.iter().enumerate() {
        if let Some(k) = pack_section(img, plans, i, h)? {
            packs.push(k);
        }
    }
    if packs.is_empty() {
        return Err(PruneError::new(
            PruneErrorKind::NoContainer,
            "no container in .hip_fat or .nv_fatb",
        ));
    }
    // Units elsewhere (relocatable device code, say) are rewritten where they are.
    let packed: BTreeSet<usize> = packs
        .iter()
        .flat_map(|k| k.moves.iter().map(|m| m.0))
        .collect();
    if plans
        .iter()
        .enumerate()
        .any(|(i, p)| p.is_rewritten() && !packed.contains(&i))
    {
        return Err(PruneError::new(
            PruneErrorKind::NoContainer,
            "device code to rewrite outside .hip_fat and .nv_fatb",
        ));
    }
    packs.sort_by_key(|k| k.raw_at);
    if packs
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.raw_at.saturating_add(a.raw_len) > b.raw_at))
    {
        return Err(PruneError::new(
            PruneErrorKind::Section,
            "fatbinary sections overlap in the file",
        ));
    }
    Ok(packs)
}

/// The packing of section `i` (header `h`) when it is a fatbinary section holding units;
/// `Err` when its layout keeps the file from being compacted.
fn pack_section(
    img: &Image<'_>,
    plans: &[UnitPlan<'_>],
    i: usize,
    h: &ImageSectionHeader,
) -> Compact<Option<Packing>> {
    let role = image_section_role(h.raw_name(), 0);
    if !matches!(role, SectionRole::HipFatbin | SectionRole::NvFatbin) {
        return Ok(None);
    }
    let raw_at = u64::from(h.pointer_to_raw_data.get(LE));
    let raw_len = u64::from(h.size_of_raw_data.get(LE));
    let vsize = u64::from(h.virtual_size.get(LE));
    let end = raw_at.saturating_add(raw_len.min(vsize));
    let mut here: Vec<(usize, &UnitPlan<'_>)> = plans
        .iter()
        .enumerate()
        .filter(|(_, p)| raw_at <= p.range.start && p.range.end <= end)
        .collect();
    if here.is_empty() {
        return Ok(None);
    }
    if raw_at.checked_add(raw_len).is_none_or(|e| e > img.file_len) {
        return Err(PruneError::new(
            PruneErrorKind::Section,
            "a fatbinary section's raw data runs past the end of the file",
        ));
    }
    let file_align = img.file_align;
    if raw_at.checked_rem(file_align) != Some(0) || raw_len.checked_rem(file_align) != Some(0) {
        return Err(PruneError::new(
            PruneErrorKind::Section,
            "a fatbinary section's raw data is not aligned to FileAlignment",
        ));
    }
    if h.pointer_to_relocations.get(LE) != 0 || h.pointer_to_linenumbers.get(LE) != 0 {
        return Err(PruneError::new(
            PruneErrorKind::Section,
            "a fatbinary section has relocations or line numbers",
        ));
    }
    here.sort_by_key(|(_, p)| p.range.start);
    let rva = u64::from(h.virtual_address.get(LE));
    let (moves, cursor, pos) = place_units(img.data, &here, raw_at, rva)?;
    let tail = super::slice(
        img.data,
        &(pos..raw_at.saturating_add(raw_len)),
        "section tail",
    )
    .unwrap_or_default();
    if tail.iter().any(|b| *b != 0) {
        return Err(PruneError::new(
            PruneErrorKind::BytesOutsideContainers,
            format!("bytes outside the containers at offset {pos:#x}"),
        )
        .at(pos));
    }
    Ok(Some(Packing {
        header_at: img.header_at(i),
        raw_at,
        raw_len,
        rva,
        packed_end: cursor,
        initialized: h.characteristics.get(LE).0 & SCN_CNT_INITIALIZED_DATA != 0,
        moves,
    }))
}

/// Where the units `here` (in file order) of the section whose raw data starts at
/// `raw_at` (RVA `rva`) go: back to back, each at the alignment its RVA had (at most
/// 4096). Returns the moves, where the packed units end and where the last unit ended.
fn place_units(
    data: &[u8],
    here: &[(usize, &UnitPlan<'_>)],
    raw_at: u64,
    rva: u64,
) -> Compact<(Vec<UnitMove>, u64, u64)> {
    let (mut pos, mut cursor) = (raw_at, raw_at);
    let mut moves = Vec::new();
    for &(k, p) in here {
        let gap = super::slice(data, &(pos..p.range.start), "gap").unwrap_or_default();
        if p.range.start < pos || gap.iter().any(|b| *b != 0) {
            return Err(PruneError::new(
                PruneErrorKind::BytesOutsideContainers,
                format!("bytes outside the containers at offset {pos:#x}"),
            )
            .at(pos));
        }
        let old_rva = rva.saturating_add(p.range.start.saturating_sub(raw_at));
        let align = if old_rva == 0 {
            4096
        } else {
            1u64.wrapping_shl(old_rva.trailing_zeros().min(12))
        };
        let new = raw_at.saturating_add(
            cursor
                .saturating_sub(raw_at)
                .checked_next_multiple_of(align)
                .ok_or(PruneError::new(PruneErrorKind::TooLarge, "offset overflow"))?,
        );
        if new > p.range.start {
            return Err(PruneError::new(
                PruneErrorKind::NothingFreed,
                "a container would move up",
            ));
        }
        let len = if p.is_rewritten() {
            p.len_after
        } else {
            p.len_before
        };
        moves.push((k, p.range.start, new, len));
        cursor = new.saturating_add(len);
        pos = p.range.end;
    }
    Ok((moves, cursor, pos))
}

/// The holes: the raw data after the packed units, in whole FileAlignment units.
fn freed(packs: &[Packing], file_align: u64) -> Compact<Vec<Range<u64>>> {
    let holes: Vec<Range<u64>> = packs
        .iter()
        .filter_map(|k| {
            let keep = k
                .packed_end
                .saturating_sub(k.raw_at)
                .checked_next_multiple_of(file_align)?;
            let start = k.raw_at.saturating_add(keep);
            let end = k.raw_at.saturating_add(k.raw_len);
            (end > start).then_some(start..end)
        })
        .collect();
    if holes.is_empty() {
        return Err(PruneError::new(
            PruneErrorKind::NothingFreed,
            "no whole FileAlignment unit is freed",
        ));
    }
    Ok(holes)
}

/// Every pointer to a unit (the wrappers' pointer fields and every DIR64-relocated word)
/// patched to the unit's new address; returns how many.
fn repoint(img: &Image<'_>, packs: &[Packing], patches: &mut Patches) -> Compact<usize> {
    let moved: BTreeMap<u64, u64> = packs
        .iter()
        .flat_map(|k| {
            k.moves.iter().map(move |&(_, old, new, _)| {
                (
                    k.rva.saturating_add(old.saturating_sub(k.raw_at)),
                    k.rva.saturating_add(new.saturating_sub(k.raw_at)),
                )
            })
        })
        .collect();
    let inside = |rva: u64| {
        packs
            .iter()
            .any(|k| k.rva <= rva && rva < k.rva.saturating_add(k.raw_len.max(1)))
    };
    let mut repointed = 0usize;
    for at in pointer_fields(&img.host)? {
        let Some(va) = u64_at(img.data, at) else {
            continue;
        };
        let rva = va.wrapping_sub(img.image_base);
        if !inside(rva) {
            continue;
        }
        let Some(&new) = moved.get(&rva) else {
            return Err(PruneError::new(PruneErrorKind::Pointer, format!(
                "a pointer at offset {at:#x} points into a fatbinary section ({rva:#x}) but not at the start of a container"
            )).at(at));
        };
        if packs
            .iter()
            .any(|k| k.raw_at <= at && at < k.raw_at.saturating_add(k.raw_len))
        {
            return Err(PruneError::new(
                PruneErrorKind::Pointer,
                "a pointer lies inside a fatbinary section",
            ));
        }
        patches.insert(at, img.image_base.wrapping_add(new).to_le_bytes().to_vec());
        repointed = repointed.saturating_add(1);
    }
    Ok(repointed)
}

/// The file offsets of the words that may point to a unit: the wrappers' pointer fields
/// and every DIR64-relocated word, sorted, without repeats.
fn pointer_fields(host: &HostPe<'_>) -> Compact<Vec<u64>> {
    let mut fields: Vec<u64> = host
        .fat_binary_wrappers()
        .iter()
        .map(|w| w.offset.saturating_add(8))
        .collect();
    let mut relocated = Vec::new();
    host.table()
        .for_each_dir64(|rva| relocated.push(u64::from(rva)))
        .map_err(PruneError::read)?;
    for rva in relocated {
        if let Some((s, off)) = host.section_at(rva) {
            if off.saturating_add(8) <= len64(s.data.len()) {
                fields.push(s.offset.saturating_add(off));
            }
        }
    }
    fields.sort_unstable();
    fields.dedup();
    Ok(fields)
}

/// A `u32` file-offset field patched to `value`.
fn offset_patch(value: u64) -> Compact<Vec<u8>> {
    let p = u32::try_from(value)
        .map_err(|_| PruneError::new(PruneErrorKind::TooLarge, "offset too large"))?;
    Ok(p.to_le_bytes().to_vec())
}

/// The file offsets that follow the holes: the packed sections' raw sizes, later
/// sections' raw data pointers, the symbol table pointer and the debug directory's file
/// offsets.
fn patch_file_offsets(
    img: &Image<'_>,
    packs: &[Packing],
    holes: &[Range<u64>],
    patches: &mut Patches,
) -> Compact<()> {
    let map = |o: u64| mapped(holes, o);
    for (i, h) in img.headers.iter().enumerate() {
        let at = img.header_at(i);
        let ptr = u64::from(h.pointer_to_raw_data.get(LE));
        if let Some(k) = packs.iter().find(|k| k.header_at == at) {
            // VirtualSize stays: Windows maps the sections back to back (each one's
            // VirtualAddress follows the previous one's VirtualSize), and the memory past
            // the raw data is zero-filled.
            let raw = map(k.raw_at.saturating_add(k.raw_len)).saturating_sub(map(k.raw_at));
            let r = u32::try_from(raw)
                .map_err(|_| PruneError::new(PruneErrorKind::TooLarge, "section too large"))?;
            patches.insert(
                at.saturating_add(SIZE_OF_RAW_DATA),
                r.to_le_bytes().to_vec(),
            );
            if map(ptr) != ptr {
                patches.insert(
                    at.saturating_add(POINTER_TO_RAW_DATA),
                    offset_patch(map(ptr))?,
                );
            }
        } else if ptr != 0 && map(ptr) != ptr {
            patches.insert(
                at.saturating_add(POINTER_TO_RAW_DATA),
                offset_patch(map(ptr))?,
            );
        }
    }
    let symtab_at = img.nt_at.saturating_add(4).saturating_add(8);
    if let Some(sym) = u32_at(img.data, symtab_at).filter(|s| *s != 0) {
        patches.insert(symtab_at, offset_patch(map(u64::from(sym)))?);
    }
    let Some(debug) = img.dirs.get(IMAGE_DIRECTORY_ENTRY_DEBUG) else {
        return Ok(());
    };
    let (rva, size) = (
        u64::from(debug.virtual_address.get(LE)),
        u64::from(debug.size.get(LE)),
    );
    if size == 0 {
        return Ok(());
    }
    let (s, off) = img.host.section_at(rva).ok_or(PruneError::new(
        PruneErrorKind::Layout,
        "the debug directory is not in a section",
    ))?;
    let at = s.offset.saturating_add(off);
    for n in 0..size / DEBUG_ENTRY_SIZE {
        let field = at
            .saturating_add(n.saturating_mul(DEBUG_ENTRY_SIZE))
            .saturating_add(DEBUG_POINTER_TO_RAW_DATA);
        let ptr = u64::from(u32_at(img.data, field).ok_or(PruneError::new(
            PruneErrorKind::Layout,
            "the debug directory is truncated",
        ))?);
        if ptr != 0 && map(ptr) != ptr {
            patches.insert(field, offset_patch(map(ptr))?);
        }
    }
    Ok(())
}

/// `SizeOfInitializedData` drops by the bytes removed from initialized-data sections.
fn patch_initialized_size(
    img: &Image<'_>,
    packs: &[Packing],
    holes: &[Range<u64>],
    patches: &mut Patches,
) -> Compact<()> {
    let initialized: u64 = packs
        .iter()
        .filter(|k| k.initialized)
        .map(|k| {
            holes
                .iter()
                .filter(|h| k.raw_at <= h.start && h.end <= k.raw_at.saturating_add(k.raw_len))
                .map(|h| h.end.saturating_sub(h.start))
                .fold(0u64, u64::saturating_add)
        })
        .fold(0, u64::saturating_add);
    let init_at = img.nt_at.saturating_add(24).saturating_add(8);
    let old_init = u32_at(img.data, init_at)
        .ok_or(PruneError::new(PruneErrorKind::Read, "no optional header"))?;
    let new_init = u64::from(old_init).saturating_sub(initialized);
    patches.insert(
        init_at,
        u32::try_from(new_init).unwrap_or(0).to_le_bytes().to_vec(),
    );
    Ok(())
}

/// The certificate table: its directory entry zeroed, and cut when it ends the file.
/// Returns where the output ends (in input offsets) and the note for the layout line.
fn drop_certificate(
    cert: Option<(u64, u64, u64)>,
    file_len: u64,
    holes: &[Range<u64>],
    patches: &mut Patches,
) -> (u64, String) {
    let Some((entry_at, at, len)) = cert else {
        return (file_len, String::new());
    };
    patches.insert(entry_at, alloc::vec![0u8; 8]);
    if at.checked_add(len) == Some(file_len) && holes.iter().all(|h| h.end <= at) {
        (
            at,
            format!(
                "; the Authenticode signature no longer matches: its certificate table ({len} bytes) was removed"
            ),
        )
    } else {
        (
            file_len,
            "; the Authenticode signature no longer matches: its certificate table is no longer referenced".into(),
        )
    }
}

/// The file: each packed section's units back to back, the rest copied.
fn packed_pieces(packs: &[Packing], plans: &[UnitPlan<'_>], file_len: u64) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut pos = 0u64;
    for k in packs {
        pieces.push(Piece::Copy(pos..k.raw_at));
        let mut cur = k.raw_at;
        for &(plan, old, new, len) in &k.moves {
            pieces.push(Piece::Zeros(new.saturating_sub(cur)));
            match plans.get(plan) {
                Some(p) if p.is_rewritten() => pieces.push(Piece::Unit(plan)),
                _ => pieces.push(Piece::Copy(old..old.saturating_add(len))),
            }
            cur = new.saturating_add(len);
        }
        let section_end = k.raw_at.saturating_add(k.raw_len);
        pieces.push(Piece::Zeros(section_end.saturating_sub(cur)));
        pos = section_end;
    }
    pieces.push(Piece::Copy(pos..file_len));
    pieces
}

/// The PE checksum of the output of `pieces` (the `CheckSum` field at `checksum_at` read
/// as zero): 16-bit one's-complement-style sum with carries folded, plus the file length.
fn checksum(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    pieces: &[Piece],
    checksum_at: u64,
) -> Compact<u32> {
    struct Sum {
        sum: u64,
        len: u64,
        odd: Option<u8>,
    }
    impl Sum {
        fn add(&mut self, bytes: &[u8]) {
            let mut b = bytes;
            if let (Some(lo), Some((&hi, rest))) = (self.odd, b.split_first()) {
                self.word(u16::from_le_bytes([lo, hi]));
                self.odd = None;
                b = rest;
            }
            let mut chunks = b.chunks_exact(2);
            for c in &mut chunks {
                if let [a, b] = c {
                    self.word(u16::from_le_bytes([*a, *b]));
                }
            }
            if let [last] = chunks.remainder() {
                self.odd = Some(*last);
            }
            self.len = self.len.saturating_add(len64(bytes.len()));
        }
        fn word(&mut self, w: u16) {
            self.sum = self.sum.wrapping_add(u64::from(w));
            self.sum = (self.sum & 0xffff).wrapping_add(self.sum >> 16);
        }
    }
    impl std::io::Write for Sum {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.add(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let _ = checksum_at; // the field is zero in `pieces`
    let mut s = Sum {
        sum: 0,
        len: 0,
        odd: None,
    };
    super::pieces::write(&mut s, data, plans, pieces)
        .map_err(|e| PruneError::new(PruneErrorKind::Read, format!("{e:?}")))?;
    if let Some(lo) = s.odd.take() {
        s.word(u16::from(lo));
    }
    let folded = (s.sum & 0xffff).wrapping_add(s.sum >> 16) & 0xffff;
    u32::try_from(folded.wrapping_add(s.len))
        .map_err(|_| PruneError::new(PruneErrorKind::TooLarge, "file too large"))
}
