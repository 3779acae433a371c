//! The plan: which images of every unit stay, and what the unit becomes.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use crate::arch::{identify, Code, Device};
use crate::bundle::Bundle;
use crate::ccob::CompressedBundle;
use crate::ccob::CompressionMethod;
use crate::container::{units, ObjectBundle, OpenUnit, Unit, UnitContent};
use crate::error::{ErrorKind, Result};
use crate::image::{Image, OffloadKind};
use crate::nvfatbin::Fatbin;
use crate::offload_binary::{OffloadBinaries, OffloadBinary};
use crate::select::{check, SelectOptions, Verdict};
use crate::text::TextBundle;
use crate::write::ccob::{CcobOptions, Codec, ZstdMode};
use crate::write::offload_binary::OffloadImage;

use super::{diff, err, len64, PruneOptions};

/// What a unit becomes.
#[derive(Debug)]
pub(super) enum Body<'a> {
    /// Unchanged.
    Same,
    /// A binary bundle of these entries, payloads aligned to `align`.
    Bundle {
        entries: Vec<(&'a str, &'a [u8])>,
        align: u64,
    },
    /// New bytes (text bundles, compressed bundles, OffloadBinaries).
    Owned(Vec<u8>),
    /// New bytes followed by parts of the input, written without a copy (NVIDIA
    /// fatbinaries: a new header, then the kept entries).
    Spliced(Vec<u8>, Vec<&'a [u8]>),
    /// A bundled host object: the `__CLANG_OFFLOAD_BUNDLE__<id>` sections of these entry
    /// IDs go (the object is laid out again by the relocatable-object rewrite).
    DropSections(Vec<String>),
}

/// The plan for one unit: what it keeps and drops, and its size before and after.
#[derive(Debug)]
pub struct UnitPlan<'d> {
    /// Where the unit is (`file`, `section .hip_fatbin`, `member a.o / section ...`).
    pub location: String,
    /// Index of the unit in its container.
    pub index: usize,
    /// Container format name ([`crate::Format::name`]).
    pub format: &'static str,
    /// Offset of the unit in the file (in its member for archives).
    pub offset: u64,
    /// Size of the unit before pruning.
    pub len_before: u64,
    /// Size of the unit after pruning.
    pub len_after: u64,
    /// Names of the images kept (host entries included).
    pub kept: Vec<String>,
    /// Names of the images dropped.
    pub dropped: Vec<String>,
    /// Indices (into the kept devices) of the devices without an image in this unit.
    pub missing: Vec<usize>,
    /// Left whole because no kept device can load anything in it.
    pub whole: bool,
    /// Emptied because no kept device can load anything in it.
    pub emptied: bool,
    /// A remark on what was done.
    pub note: Option<String>,
    pub(super) range: Range<u64>,
    pub(super) body: Body<'d>,
}

impl UnitPlan<'_> {
    /// True when the unit is written again (something is dropped).
    pub fn is_rewritten(&self) -> bool {
        !matches!(self.body, Body::Same)
    }

    /// True when the unit is a bundled host object's entry sections, of which some go:
    /// only the ELF relocatable-object rewrite can remove sections.
    pub(super) fn drops_sections(&self) -> bool {
        matches!(self.body, Body::DropSections(_))
    }
}

/// Plans every unit of `data` (a file, or an archive member).
pub(super) fn plan_units<'a>(
    data: &'a [u8],
    keep: &[Device],
    options: &PruneOptions,
    done: &mut dyn FnMut(Range<u64>),
) -> Result<Vec<UnitPlan<'a>>> {
    let mut plans: Vec<UnitPlan<'a>> = Vec::new();
    for unit in units(data, &options.read) {
        let unit = unit?;
        let plan = plan_unit(data, &unit, keep, options)?;
        done(plan.range.clone());
        plans.push(plan);
    }
    // A fatbinary inside an OffloadBinary image is a unit of its own, within the
    // OffloadBinary's range: it is never rewritten there.
    for (i, p) in plans.iter().enumerate() {
        let nested = plans
            .iter()
            .enumerate()
            .any(|(j, q)| i != j && q.range.start <= p.range.start && p.range.end <= q.range.end);
        if p.format == "nvidia-fatbin" && p.is_rewritten() && nested {
            return Err(err(
                ErrorKind::BadContainer,
                p.range.start,
                "a fatbinary inside another container (an OffloadBinary image) is not pruned",
            ));
        }
    }
    Ok(plans)
}

/// Whether an image stays: host entries, and images some kept device accepts
/// ([`check`] gives [`Verdict::Compatible`]). Marks the kept devices it covers.
fn covers(image: &Image<'_>, keep: &[Device], covered: &mut [bool]) -> bool {
    if image.offload_kind == OffloadKind::Host {
        return true;
    }
    // Text payloads (assembly, preprocessed source, IR text) are never loadable: they are
    // judged by the target their container states, as bitcode for that target would be.
    let mut identity = identify(image);
    if identity.code == Code::Other
        && !image.bytes.starts_with(crate::raw::ELF_MAGIC)
        && image.encoded.is_none()
    {
        identity.code = Code::Bitcode;
    }
    let mut stays = false;
    for (device, c) in keep.iter().zip(covered.iter_mut()) {
        if matches!(
            check(&identity, image.index, device, &SelectOptions::default()),
            Verdict::Compatible(_)
        ) {
            stays = true;
            *c = true;
        }
    }
    stays
}

/// The payload alignment a stored bundle was written with: the smallest power of two up
/// to 4096 whose layout ([`crate::write::bundle::layout`]) reproduces every stored
/// payload offset; for a bundle no such alignment reproduces (not written by LLVM's
/// rules), the largest power of two up to 4096 dividing every non-empty payload offset.
fn bundle_align(b: &Bundle<'_>) -> u64 {
    let entries: Vec<(&str, &[u8])> = b.entries().map(|e| (e.id, e.data)).collect();
    let stored: Vec<u64> = b.entries().map(|e| e.offset).collect();
    let mut align = 1u64;
    while align <= 4096 {
        if crate::write::bundle::layout(&entries, align).is_ok_and(|l| l.offsets == stored) {
            return align;
        }
        align = align.saturating_mul(2);
    }
    let mut align = 4096u64;
    for e in b.entries().filter(|e| !e.data.is_empty()) {
        while align > 1 && e.offset.checked_rem(align).is_some_and(|r| r != 0) {
            align = align.wrapping_shr(1);
        }
    }
    align
}

/// The kept entries of `entries` as (id, data) pairs.
fn kept_pairs<'a>(
    entries: impl Iterator<Item = (&'a str, &'a [u8])>,
    keep: &[bool],
) -> Vec<(&'a str, &'a [u8])> {
    entries
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(e, _)| e)
        .collect()
}

/// What the kept devices make of the images of one unit.
struct Judgement {
    /// Whether each image stays, in image order.
    keep: Vec<bool>,
    /// Names of the images kept and dropped.
    kept: Vec<String>,
    dropped: Vec<String>,
    /// Whether each kept device has an image in the unit.
    covered: Vec<bool>,
    /// How many images are not host entries.
    device_images: usize,
}

/// Judges every image of `open` ([`covers`]).
fn judge(open: &OpenUnit<'_>, devices: &[Device]) -> Judgement {
    let mut j = Judgement {
        keep: Vec::new(),
        kept: Vec::new(),
        dropped: Vec::new(),
        covered: vec![false; devices.len()],
        device_images: 0,
    };
    let mut names = Vec::new();
    for image in open.images() {
        let k = covers(&image, devices, &mut j.covered);
        if image.offload_kind != OffloadKind::Host {
            j.device_images = j.device_images.saturating_add(1);
        }
        j.keep.push(k);
        names.push(image.name().to_string());
    }
    // An entry whose image is a nested OffloadBinary stays, whole, when a kept device
    // accepts one of the nested images (listed after the unit's own entries); the nested
    // images then all stay with it, and all go with it otherwise.
    let nested = open.nested();
    for (leaf, outer, _) in &nested {
        if j.keep.get(*leaf).copied().unwrap_or(false) {
            if let Some(k) = j.keep.get_mut(*outer) {
                *k = true;
            }
        }
    }
    for (leaf, outer, _) in &nested {
        let outer_kept = j.keep.get(*outer).copied().unwrap_or(false);
        if let Some(k) = j.keep.get_mut(*leaf) {
            *k = outer_kept;
        }
    }
    for (k, name) in j.keep.iter().zip(names) {
        if *k {
            j.kept.push(name);
        } else {
            j.dropped.push(name);
        }
    }
    j
}

/// The unit is left whole: everything counts as kept, with `note` saying why.
fn leave_whole(plan: &mut UnitPlan<'_>, note: &str) {
    plan.kept.append(&mut plan.dropped);
    plan.whole = true;
    plan.note = Some(note.to_string());
}

/// Plans one unit: which images stay and what the unit becomes.
fn plan_unit<'a>(
    data: &'a [u8],
    unit: &Unit<'a>,
    devices: &[Device],
    options: &PruneOptions,
) -> Result<UnitPlan<'a>> {
    let range = unit.extent(&options.read)?;
    // NVIDIA fatbinary entries are judged by their headers and written as stored, their
    // payloads copied unchanged and never decoded: the output holds the bytes the input
    // held, and checking that a compressed payload decodes is `validate`'s job (decoding
    // every entry of libnccl took 5x the time of copying the file). A compressed bundle's
    // content is decoded and rewritten below.
    let open = unit.open(&options.read)?;
    let j = judge(&open, devices);
    let missing: Vec<usize> = j
        .covered
        .iter()
        .enumerate()
        .filter(|(_, c)| !**c)
        .map(|(i, _)| i)
        .collect();
    let len_before = diff(range.end, range.start);
    let mut plan = UnitPlan {
        location: unit.location.to_string(),
        index: unit.index,
        format: unit.format().name(),
        offset: range.start,
        len_before,
        len_after: len_before,
        kept: j.kept,
        dropped: j.dropped,
        missing,
        whole: false,
        emptied: false,
        note: None,
        range,
        body: Body::Same,
    };
    // Relocatable device code (`__nv_relfatbin`, `nvcc -rdc` units' fat binaries that
    // feed the device link, `REGISTRATION.md` §5.3) is pruned by the same rule: what a
    // kept device can load stays, so whatever reads the link inputs for it finds them.
    if !j.covered.iter().any(|c| *c)
        && j.device_images > 0
        && !empty_unloadable(&mut plan, unit, options)
    {
        return Ok(plan);
    }
    if plan.dropped.is_empty() {
        return Ok(plan);
    }
    if let Some(body) = new_body(data, unit, &open, &j.keep, &mut plan, options)? {
        plan.len_after = body_len(&body)?;
        plan.body = body;
    }
    Ok(plan)
}

/// A unit in which no kept device can load anything: units of host files are emptied
/// (returns true), as nvprune does; standalone container files, and formats whose empty
/// form no runtime registers, are left whole (returns false).
fn empty_unloadable(plan: &mut UnitPlan<'_>, unit: &Unit<'_>, options: &PruneOptions) -> bool {
    let in_host_file = !unit.location.path().is_empty();
    let emptiable = matches!(
        unit.content,
        UnitContent::Bundle(_)
            | UnitContent::Compressed(_)
            | UnitContent::Text(_)
            | UnitContent::NvFatbin(_)
    );
    if options.keep_unloadable_units || !in_host_file || !emptiable {
        leave_whole(plan, "no image for any kept device: left whole");
        return false;
    }
    plan.emptied = true;
    plan.note = Some("no image for any kept device: emptied".into());
    true
}

/// What a unit with images to drop becomes (`keep`: whether each image stays); `None`
/// when `plan` is already final (left whole, or sections to remove).
fn new_body<'a>(
    data: &'a [u8],
    unit: &Unit<'a>,
    open: &OpenUnit<'_>,
    keep: &[bool],
    plan: &mut UnitPlan<'a>,
    options: &PruneOptions,
) -> Result<Option<Body<'a>>> {
    let at = plan.range.start;
    Ok(Some(match &unit.content {
        UnitContent::Bundle(b) => Body::Bundle {
            entries: kept_pairs(b.entries().map(|e| (e.id, e.data)), keep),
            align: bundle_align(b),
        },
        UnitContent::Text(t) => Body::Owned(text_bundle(t, keep)),
        UnitContent::Compressed(c) => Body::Owned(compressed_bundle(
            c,
            open,
            keep,
            plan.len_before,
            options,
            at,
        )?),
        UnitContent::OffloadBinaries(seq) => {
            Body::Owned(offload_binaries(seq, open.inflated(), keep, at)?)
        }
        // Opening the unit gave its error already; a damaged file is not pruned.
        UnitContent::Damaged(d) => return Err(d.error),
        UnitContent::Kpack(_) => {
            // Archives are per architecture: pruning one is deleting the file.
            leave_whole(plan, "a kpack archive is not rewritten: left whole");
            return Ok(None);
        }
        UnitContent::DeviceElf(_) => {
            // One image, which no kept device can load (else nothing would be dropped).
            leave_whole(plan, "a bare device ELF is one image: left whole");
            return Ok(None);
        }
        UnitContent::ObjectBundle(o) => {
            drop_sections(plan, o, keep);
            return Ok(None);
        }
        UnitContent::NvFatbin(f) => {
            let inside = crate::bytes::offset_in(data, f.bytes());
            if inside != Some(at) {
                return Err(err(
                    ErrorKind::BadContainer,
                    at,
                    "a fatbinary inside another container (an OffloadBinary image) is not pruned",
                ));
            }
            let (header, entries) = nv_fatbin(f, keep, at)?;
            Body::Spliced(header, entries)
        }
    }))
}

/// A compressed bundle (`c`, its content decoded in `open`) with the kept entries only,
/// compressed again as it was.
fn compressed_bundle(
    c: &CompressedBundle<'_>,
    open: &OpenUnit<'_>,
    keep: &[bool],
    len_before: u64,
    options: &PruneOptions,
    at: u64,
) -> Result<Vec<u8>> {
    let inner = open.decompressed().ok_or(err(
        ErrorKind::Malformed,
        at,
        "compressed bundle has no content",
    ))?;
    let rewritten = if crate::bundle::is_bundle(inner) {
        let b = Bundle::parse(inner, &options.read.limits).map_err(|e| e.in_decompressed(at))?;
        let entries = kept_pairs(b.entries().map(|e| (e.id, e.data)), keep);
        crate::write::bundle::bundle_to_vec(&entries, bundle_align(&b))?
    } else {
        let t =
            TextBundle::parse(inner, &options.read.limits).map_err(|e| e.in_decompressed(at))?;
        text_bundle(&t, keep)
    };
    recompress(&rewritten, c.version(), c.method(), len_before, options, at)
}

/// OffloadBinaries back to back with the kept binaries and entries: whole binaries
/// copied, partly kept ones written again (a compressed one is kept or dropped whole).
/// `inflated` holds the compressed binaries' inflated bytes in order, as the unit was
/// opened: a compressed binary's entries are counted from them, so that the flags of the
/// binaries after it stay theirs.
fn offload_binaries(
    seq: &OffloadBinaries<'_>,
    inflated: &[Vec<u8>],
    keep: &[bool],
    at: u64,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut flags = keep.iter();
    let mut inflated = inflated.iter();
    for (_, b) in seq.iter() {
        let count = if b.is_compressed() {
            let data = inflated.next().ok_or(err(
                ErrorKind::Malformed,
                at,
                "compressed OffloadBinary was not inflated when its unit was opened",
            ))?;
            crate::offload_binary::OffloadBinary::parse(data, &crate::options::Limits::UNLIMITED)
                .map_err(|e| e.in_decompressed(at))?
                .entry_count()
        } else {
            b.entry_count()
        };
        let n = usize::try_from(count).unwrap_or(usize::MAX);
        let these: Vec<bool> = flags.by_ref().take(n).copied().collect();
        if these.iter().all(|k| *k) {
            out.extend_from_slice(b.data());
        } else if these.iter().any(|k| *k) {
            if b.is_compressed() {
                return Err(err(
                    ErrorKind::BadContainer,
                    at,
                    "a compressed OffloadBinary would be kept only in part; pruning inside compressed OffloadBinaries is not supported",
                ));
            }
            rewrite_offload_binary(&b, &these, &mut out)?;
        }
    }
    Ok(out)
}

/// A bundled host object: the `__CLANG_OFFLOAD_BUNDLE__<id>` sections of the dropped
/// entries go; the object shrinks by their contents and headers (the exact size, after
/// the new layout, is that of the output).
fn drop_sections(plan: &mut UnitPlan<'_>, o: &ObjectBundle<'_>, keep: &[bool]) {
    let ids: Vec<String> = o
        .sections()
        .zip(keep)
        .filter(|(_, k)| !**k)
        .map(|((id, _), _)| id.to_string())
        .collect();
    let removed: u64 = o
        .sections()
        .filter(|(id, _)| ids.iter().any(|d| d == id))
        .map(|(_, d)| len64(d.len()).saturating_add(64))
        .sum();
    plan.note = Some(format!(
        "sections removed: __CLANG_OFFLOAD_BUNDLE__{}",
        ids.join(", __CLANG_OFFLOAD_BUNDLE__")
    ));
    plan.len_after = diff(plan.len_after, removed);
    plan.body = Body::DropSections(ids);
}

/// The size of a rewritten unit.
pub(super) fn body_len(body: &Body<'_>) -> Result<u64> {
    Ok(match body {
        Body::Same | Body::DropSections(_) => 0,
        Body::Bundle { entries, align } => crate::write::bundle::layout(entries, *align)?.len,
        Body::Owned(v) => len64(v.len()),
        Body::Spliced(head, parts) => parts
            .iter()
            .fold(len64(head.len()), |a, p| a.saturating_add(len64(p.len()))),
    })
}

/// The kept entries of an NVIDIA fatbinary as a fatbinary: the original header with its
/// size field (`+8`, u64) set to the sum of the kept entries, then each kept entry (entry
/// header and stored payload, compressed or not) copied verbatim in stored order. With
/// nothing kept, the header alone, of size 0 (an empty fatbinary, as `nvprune` leaves).
fn nv_fatbin<'a>(f: &Fatbin<'a>, keep: &[bool], at: u64) -> Result<(Vec<u8>, Vec<&'a [u8]>)> {
    let bytes = f.bytes();
    let truncated = err(ErrorKind::Truncated, at, "fatbinary header is truncated");
    let header_len = bytes
        .get(6..8)
        .and_then(|b| <[u8; 2]>::try_from(b).ok())
        .map(|b| usize::from(u16::from_le_bytes(b)))
        .ok_or(truncated)?;
    let header = bytes
        .get(..header_len)
        .filter(|h| h.len() >= 16)
        .ok_or(truncated)?;
    let mut out = header.to_vec();
    let mut parts = Vec::new();
    let mut body = 0u64;
    for (e, _) in f.entries().zip(keep).filter(|(_, k)| **k) {
        let end = e
            .offset
            .checked_add(u64::from(e.header_size))
            .and_then(|x| x.checked_add(len64(e.payload.len())))
            .ok_or(err(
                ErrorKind::OutOfBounds,
                at,
                "fatbinary entry size overflows",
            ))?;
        let entry = super::slice(
            bytes,
            &(e.offset..end),
            "fatbinary entry runs past the end of the fatbinary",
        )
        .map_err(|x| x.rebase(at))?;
        body = body.saturating_add(len64(entry.len()));
        parts.push(entry);
    }
    if let Some(size) = out.get_mut(8..16) {
        size.copy_from_slice(&body.to_le_bytes());
    }
    Ok((out, parts))
}

/// A text bundle (in the style of `t`) of the kept entries of `t`.
fn text_bundle(t: &TextBundle<'_>, keep: &[bool]) -> Vec<u8> {
    let entries = kept_pairs(t.entries().map(|e| (e.id, e.data)), keep);
    crate::write::text::text_bundle_to_vec(t.style(), &entries)
}

/// Compresses `content` as a `CCOB` of `version` with the codec of `method`; `budget` is
/// the size of the original blob (a caller's zstd compressor may try harder when the
/// payload would exceed it).
///
/// The header comes from [`crate::write::ccob::header`] (v2, v3) or is the v1 layout of
/// [`crate::raw::CcobHeaderV1`]; zlib payloads come from `miniz_oxide` at its best level.
fn recompress(
    content: &[u8],
    version: u16,
    method: CompressionMethod,
    budget: u64,
    options: &PruneOptions,
    at: u64,
) -> Result<Vec<u8>> {
    let codec = match method {
        CompressionMethod::Zlib => Codec::Zlib { level: 10 },
        _ => Codec::Zstd(ZstdMode::Fastest),
    };
    let header_len: u64 = match version {
        1 => 20,
        2 => 24,
        _ => 32,
    };
    let payload = match (codec, options.zstd) {
        (Codec::Zstd(_), Some(compress)) => compress(content, diff(budget, header_len))
            .ok_or(err(ErrorKind::Decompress, at, "zstd compression failed"))?,
        _ => codec.compress(content),
    };
    let mut out = if version == 1 {
        let size = u32::try_from(content.len()).map_err(|_| {
            err(
                ErrorKind::LimitExceeded,
                at,
                "content too large for a version 1 compressed bundle",
            )
        })?;
        let mut v = Vec::with_capacity(20);
        v.extend_from_slice(crate::raw::CCOB_MAGIC);
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&method.code().to_le_bytes());
        v.extend_from_slice(&size.to_le_bytes());
        v.extend_from_slice(&crate::ccob::truncated_md5(content));
        v
    } else {
        crate::write::ccob::header(
            content,
            len64(payload.len()),
            &CcobOptions { version, codec },
        )?
    };
    out.extend_from_slice(&payload);
    Ok(out)
}

/// Writes the kept entries of an uncompressed OffloadBinary.
fn rewrite_offload_binary(b: &OffloadBinary<'_>, keep: &[bool], out: &mut Vec<u8>) -> Result<()> {
    let entries: Vec<_> = b
        .entries()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(e, _)| e)
        .collect();
    let strings: Vec<Vec<(&[u8], &[u8])>> = entries
        .iter()
        .map(|e| e.strings.iter().map(|(k, v)| (k.as_bytes(), v)).collect())
        .collect();
    let images: Vec<OffloadImage<'_>> = entries
        .iter()
        .zip(&strings)
        .map(|(e, s)| OffloadImage {
            image_kind: e.image_kind,
            offload_kind: e.offload_kind,
            flags: e.flags,
            strings: s,
            image: e.image,
        })
        .collect();
    let bytes = match images.first() {
        Some(first) if b.version() == 1 && images.len() == 1 => {
            crate::write::offload_binary::v1_to_vec(first)?
        }
        _ => crate::write::offload_binary::v2_to_vec(&images)?,
    };
    out.extend_from_slice(&bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::bundle::bundle_to_vec;

    const HOST: &str = "host-x86_64-unknown-linux-gnu-";

    fn plan_of<'a>(data: &'a [u8], keep: &[&str], options: &PruneOptions) -> Vec<UnitPlan<'a>> {
        let keep: Vec<Device> = keep.iter().map(|k| Device::parse(k).unwrap()).collect();
        plan_units(data, &keep, options, &mut |_| {}).unwrap()
    }

    #[test]
    fn bundle_alignment_is_recovered() {
        let entries: [(&str, &[u8]); 2] = [(HOST, b""), ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"x")];
        for align in [1u64, 8, 4096] {
            let b = bundle_to_vec(&entries, align).unwrap();
            let parsed = Bundle::parse(&b, &crate::Limits::DEFAULT).unwrap();
            // The alignment found lays the entries out as stored.
            let found = bundle_align(&parsed);
            assert_eq!(bundle_to_vec(&entries, found).unwrap(), b, "{align}");
            assert!(found <= align);
        }
    }

    #[test]
    fn standalone_bundle_with_nothing_kept_is_left_whole() {
        let entries: [(&str, &[u8]); 2] = [(HOST, b""), ("hipv4-amdgcn-amd-amdhsa--gfx906", b"x")];
        let b = bundle_to_vec(&entries, 1).unwrap();
        let plans = plan_of(&b, &["gfx90a"], &PruneOptions::default());
        assert_eq!(plans.len(), 1);
        assert!(plans[0].whole && !plans[0].emptied && !plans[0].is_rewritten());
        assert_eq!(plans[0].missing, [0]);
    }

    #[test]
    fn fatbinary_with_nothing_kept_becomes_an_empty_fatbinary() {
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/nvfatbin/files/cubin_only.fatbin"
        ))
        .unwrap();
        let f = Fatbin::parse(&data, &crate::Limits::DEFAULT).unwrap();
        let n = f.entries().count();
        let (head, parts) = nv_fatbin(&f, &vec![false; n], 0).unwrap();
        assert!(parts.is_empty());
        assert_eq!(&head[8..16], &0u64.to_le_bytes());
        assert_eq!(&head[..8], &data[..8]);
        // It reads back as a fatbinary without entries.
        let empty = Fatbin::parse(&head, &crate::Limits::DEFAULT).unwrap();
        assert_eq!(empty.entries().count(), 0);
        let (head, parts) = nv_fatbin(&f, &vec![true; n], 0).unwrap();
        let whole: Vec<u8> = head
            .iter()
            .chain(parts.iter().copied().flatten())
            .copied()
            .collect();
        assert_eq!(whole, &data[..whole.len()]);
    }
}
