//! `loader-sim prune FILE --keep TARGET [--keep TARGET ...] -o OUT [--dry-run] [--json]
//! [--no-shrink]`: drops the device images no kept device can load (issue 14).
//!
//! # What is kept
//!
//! In every unit, every image that at least one kept device accepts by the rules of
//! `COMPATIBILITY.md` ([`offload_image::select::check`] gives [`Verdict::Compatible`]:
//! native code, generic code objects and `xnack`/`sramecc`-any images that cover the
//! device, SPIR-V or bitcode it can JIT), plus the host entries. Text payloads (assembly,
//! preprocessed source, textual IR in text bundles) are judged by the target their entry ID
//! states, as bitcode for that target would be. Every other image is
//! dropped. A unit in which no kept device has an image is left whole and reported (it is
//! never emptied); a unit that covers some kept devices but not all is pruned and the
//! missing devices are reported.
//!
//! # Containers
//!
//! * Binary bundles are rewritten with [`offload_image::write::bundle`] in their stored
//!   entry order, with the payload alignment they were written with (the smallest power of
//!   two up to 4096 whose layout reproduces the stored offsets: 1 for the bundler's
//!   default, 4096 for the HIP driver's), text bundles with [`offload_image::write::text`] (same
//!   comment style).
//! * Compressed bundles (`CCOB` v1–v3) are decompressed, the inner bundle rewritten, and
//!   compressed again in the same version and with the same codec (header from
//!   [`offload_image::write::ccob::header`], the hash that of the new content; see
//!   `recompress`). Version 1, which the library does not write (LLVM stopped in LLVM 19),
//!   gets the 20-byte header of [`offload_image::raw::CcobHeaderV1`].
//! * OffloadBinaries: each binary keeps its kept entries (a v1 binary whose entry is kept
//!   is copied unchanged, a v2 binary is written again with
//!   [`offload_image::write::offload_binary::write_v2`]); binaries with nothing kept are
//!   dropped. A compressed OffloadBinary is kept or dropped whole and refused when only
//!   part of it would be kept.
//! * A bare device ELF is one image: kept, or left whole when no kept device can load it.
//! * NVIDIA fatbinaries (bare, in `.nv_fatbin`): the original header with its size field
//!   set to the sum of the kept entries, then the kept entries (entry header and stored
//!   payload, compressed or not) copied verbatim in stored order (`nv_fatbin`). A
//!   fatbinary inside an OffloadBinary image with something to drop is refused.
//!
//! # Files
//!
//! * A standalone container (a bundle, `CCOB`, OffloadBinary sequence, or several of them
//!   back to back): every unit is rewritten, bytes between units are copied.
//! * A relocatable 64-bit little-endian host object (`.hip_fatbin`, `.llvm.offloading`):
//!   the sections holding rewritten units shrink and are laid out again (see
//!   `relocatable` for what is checked and refused).
//! * A linked 64-bit little-endian ELF (executable or shared library) whose device code
//!   to drop is in `.hip_fatbin` or `.nv_fatbin` (next section; what is said there of
//!   `.hip_fatbin` and its wrappers holds for `.nv_fatbin` and `.nvFatBinSegment`).
//! * A bundled host object (`-fgpu-rdc`): the `__CLANG_OFFLOAD_BUNDLE__<id>` sections of
//!   the dropped entries are removed (only when nothing references them or any section
//!   after them, as in what the bundler writes; see `relocatable`).
//! * An `ar` archive: every member with device code is pruned as a file of its own and the
//!   archive written again (see `archive`).
//! * Refused with an error naming the reason: thin and BSD archives with something to drop,
//!   32-bit or big-endian ELF files, device code to drop outside `.hip_fatbin` and
//!   `.nv_fatbin` in linked files, and every layout condition the
//!   functions below check.
//!
//! # Linked files
//!
//! `.hip_fatbin` lies in a `PT_LOAD` segment, and the wrappers (`.hipFatBinSegment`,
//! `__hip_fatbin_wrapper`) hold the virtual address of each bundle, relocated
//! (`R_X86_64_RELATIVE` addends in shared libraries and position-independent executables,
//! absolute values in others). No address outside the fatbinary sections may move, so
//! (`compact`):
//!
//! 1. The units of each section are packed together from its start, in their order, each
//!    at the alignment its address had (at most the section's), and every pointer to a
//!    unit is set to its new address: `R_*_RELATIVE` addends of `SHT_RELA` sections (and
//!    the relocated word when it holds the address too), words that `SHT_REL`/`SHT_RELR`
//!    relocations relocate, the pointer field of every wrapper, and symbols defined in the
//!    section. A pointer into the middle of a unit, a symbolic relocation against the
//!    section, or bytes between units that are not zero keep the file in place (3).
//!    Units no pointer refers to move too (libcurand has one: dead code the runtime never
//!    registers); the layout line counts them.
//! 2. The whole pages (of the largest `PT_LOAD` alignment) after the packed units leave the
//!    file: the section's `sh_size` ends after its last unit, its `PT_LOAD` is split there
//!    into a segment that ends on the page boundary (`p_filesz` = `p_memsz`: nothing is
//!    mapped in the freed range, so no kernel's handling of zero-fill matters) and one
//!    that starts where the freed pages end, at the address it had. File offsets after the
//!    freed pages drop by their size (a multiple of the alignment, so `p_offset ≡
//!    p_vaddr` holds); every program header's `p_offset`, section's `sh_offset` and
//!    `e_shoff` move accordingly. The program header table grows by one entry per split
//!    and is written after the packed units of the first split section, inside its
//!    segment (mapped, so `PT_PHDR`, updated, stays valid for the kernel and `ld.so`),
//!    provided that segment maps file offsets as the first `PT_LOAD` does (older kernels
//!    compute `AT_PHDR` from the first one). One section header per section, so tools that
//!    read `.nv_fatbin` by name (`cuobjdump`) see every kept fatbinary. GNU `strip` and
//!    `objcopy` expect the program header table after the ELF header and cannot rewrite the
//!    result; `llvm-strip`/`llvm-objcopy` can.
//! 3. Otherwise (`--no-shrink`, or a reason the layout line gives), each unit is rewritten
//!    *at its own start address* and the rest of its old extent filled with zeros: no
//!    byte outside the units moves and the file keeps its size.
//!
//! # Output
//!
//! The result is written to a temporary file next to OUT and renamed over OUT once
//! complete and synced: a failed or interrupted prune leaves no partial OUT (at worst a
//! `.OUT.prune-PID.tmp` after a kill) and FILE is only read. Images are copied from the
//! memory-mapped input in chunks whose pages are released afterwards, so the resident set
//! stays small on 1 GB libraries.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use object::elf::{
    FileHeader64, ProgramHeader64, SectionHeader64, ET_DYN, ET_EXEC, ET_REL, PT_LOAD, PT_PHDR,
    SHF_ALLOC, SHT_PROGBITS,
};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym as _};
use object::{LittleEndian as LE, U64};
use offload_image::ccob::CompressionMethod;
use offload_image::container::UnitContent;
use offload_image::offload_binary::OffloadBinary;
use offload_image::select::{check, Verdict};
use offload_image::target::Code;
use offload_image::text::TextBundle;
use offload_image::write::ccob::{CcobOptions, Codec, ZstdMode};
use offload_image::write::offload_binary::OffloadImage;
use offload_image::{
    identify, units, Device, Image, OffloadKind, ReadOptions, SelectOptions, Unit,
};
use serde::Serialize;

use crate::input::Input;
use crate::output::{json_line, table};
use crate::{Failure, Outcome};

/// Arguments of `prune`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to prune (bundle, CCOB, OffloadBinary, NVIDIA fatbinary, object, archive,
    /// linked executable or shared library).
    file: PathBuf,
    /// A device to keep code for: AMDGPU target ID (`gfx90a:sramecc+:xnack-`, `gfx1100`) or
    /// NVPTX architecture (`sm_86`), as in `select`. Repeatable.
    #[arg(long = "keep", value_name = "TARGET", required = true)]
    keep: Vec<String>,
    /// The pruned file (written to a temporary file and renamed).
    #[arg(short = 'o', value_name = "OUT", required_unless_present = "dry_run")]
    output: Option<PathBuf>,
    /// Report what would be kept and dropped, and the bytes saved, without writing.
    #[arg(long)]
    dry_run: bool,
    /// Write JSON Lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Linked files: rewrite `.hip_fatbin` in place (zero-filled slack) without removing
    /// pages from the file.
    #[arg(long)]
    no_shrink: bool,
}

/// What a unit becomes.
enum Body<'a> {
    /// Unchanged.
    Same,
    /// A binary bundle of these entries, payloads aligned to `align`.
    Bundle {
        entries: Vec<(&'a str, &'a [u8])>,
        align: u64,
    },
    /// New bytes (text bundles, compressed bundles, OffloadBinaries).
    Owned(Vec<u8>),
    /// New bytes followed by parts of the input, written from the input without a copy
    /// in memory (NVIDIA fatbinaries: a new header, then the kept entries).
    Spliced(Vec<u8>, Vec<&'a [u8]>),
    /// A bundled host object: the `__CLANG_OFFLOAD_BUNDLE__<id>` sections of these entry
    /// IDs go (the object is rewritten by `relocatable`).
    DropSections(Vec<String>),
}

/// The plan for one unit.
struct UnitPlan<'a> {
    location: String,
    index: usize,
    format: &'static str,
    /// File range of the unit.
    range: Range<u64>,
    kept: Vec<String>,
    dropped: Vec<String>,
    /// Kept devices without an image in this unit.
    missing: Vec<String>,
    /// Left whole because no kept device has an image here.
    whole: bool,
    note: Option<String>,
    body: Body<'a>,
    new_len: u64,
}

/// One `prune` record per unit (JSON Lines).
#[derive(Serialize)]
struct UnitRecord<'r> {
    unit: &'r str,
    index: usize,
    format: &'r str,
    offset: u64,
    kept: &'r [String],
    dropped: &'r [String],
    missing: &'r [String],
    whole: bool,
    bytes_before: u64,
    bytes_after: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'r str>,
}

/// The closing record.
#[derive(Serialize)]
struct Summary<'r> {
    file: &'r str,
    layout: &'r str,
    keep: &'r [String],
    units: usize,
    images_kept: usize,
    images_dropped: usize,
    size_before: u64,
    size_after: u64,
    saved: u64,
    dry_run: bool,
}

/// The sections of linked files whose containers are rewritten (compacted, or in place):
/// AMD's bundles and NVIDIA's fatbinaries.
const FATBIN_SECTIONS: [&str; 2] = [".hip_fatbin", ".nv_fatbin"];

/// How the output file is put together.
enum Piece {
    /// Bytes of the input.
    Copy(Range<u64>),
    /// The rewritten unit number `n` of the plan.
    Unit(usize),
    /// Zero bytes.
    Zeros(u64),
    /// New bytes (ELF headers).
    Owned(Vec<u8>),
}

/// Runs `prune`.
pub fn run(args: &Args) -> Result<Outcome, Failure> {
    let devices = crate::cmd::parse_devices("--keep", &args.keep)?;
    if let Some(out) = &args.output {
        if same_file(&args.file, out) {
            return Err(Failure::file(
                out,
                "OUT must not be the input file (FILE is never modified)",
            ));
        }
    }
    let input = Input::open(&args.file)?;
    let data = input.bytes();
    let options = crate::decode::read_options(crate::decode::ZstdDecoder::DEFAULT, true);
    // Identifying an image reads its first page, and the kernel maps up to 16 pages around
    // every fault: drop them once a unit is planned (RSS on 1 GB libraries).
    let release = |base: u64, range: &Range<u64>| {
        if let Some(part) = data.get((base + range.start) as usize..(base + range.end) as usize) {
            input.release(part);
        }
    };
    let (plans, pieces, layout) = if data.starts_with(b"!<arch>\n") {
        archive(data, &options, &devices, !args.no_shrink, &release)
    } else {
        plan_units(data, &options, &devices, |r| release(0, r)).and_then(|plans| {
            let (pieces, layout) = assemble(data, &plans, !args.no_shrink)?;
            Ok((plans, pieces, layout))
        })
    }
    .map_err(|e| Failure::file(&args.file, e))?;
    let size_after = pieces_len(&pieces, &plans);
    let size_before = data.len() as u64;
    if size_after > size_before {
        // Pruning never adds bytes; a layout that would (alignments out of proportion in
        // a damaged file) is refused before anything is written.
        return Err(Failure::file(
            &args.file,
            format!("the pruned file would be larger than the input ({size_after} > {size_before} bytes)"),
        ));
    }

    let mut out = std::io::stdout().lock();
    report(args, &plans, &layout, size_before, size_after, &mut out)
        .map_err(|e| Failure(format!("cannot write the report: {e}")))?;
    if args.dry_run {
        return Ok(Outcome::Ok);
    }
    let Some(path) = &args.output else {
        return Err(Failure("-o OUT is required without --dry-run".into()));
    };
    write_atomically(path, &args.file, |w| {
        write_pieces(w, &input, &pieces, &plans)
    })
    .map_err(|e| Failure::file(path, format!("cannot write: {e}")))?;
    Ok(Outcome::Ok)
}

/// True when `a` and `b` name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Plans every unit of `data`.
fn plan_units<'a>(
    data: &'a [u8],
    options: &ReadOptions,
    devices: &[(String, Device)],
    mut done: impl FnMut(&Range<u64>),
) -> Result<Vec<UnitPlan<'a>>, String> {
    let mut plans = Vec::new();
    for unit in units(data, options) {
        let unit = unit.map_err(|e| describe_error(&e))?;
        let plan = plan_unit(data, &unit, options, devices)?;
        done(&plan.range);
        plans.push(plan);
    }
    // A fatbinary inside an OffloadBinary image is a unit of its own, within the
    // OffloadBinary's range: it is never rewritten there.
    for p in &plans {
        let nested = plans.iter().any(|q| {
            !std::ptr::eq(p, q) && q.range.start <= p.range.start && p.range.end <= q.range.end
        });
        if p.format == "nvidia-fatbin" && !matches!(p.body, Body::Same) && nested {
            return Err(format!(
                "{}: a fatbinary inside another container (an OffloadBinary image) is not pruned",
                p.location
            ));
        }
    }
    Ok(plans)
}

fn describe_error(e: &offload_image::Error) -> String {
    format!("{}, at byte {}", e.what(), e.offset())
}

/// Whether an image stays: host entries, and images some kept device accepts
/// ([`offload_image::select::check`] gives [`Verdict::Compatible`]). Also marks the kept
/// devices it covers.
fn covers(image: &Image<'_>, devices: &[(String, Device)], covered: &mut [bool]) -> bool {
    if image.offload_kind == OffloadKind::Host {
        return true;
    }
    // Text payloads (assembly, preprocessed source, IR text) are never loadable: they are
    // judged by the target their container states, as bitcode for that target would be.
    let mut identity = identify(image);
    if identity.code == Code::Other && !image.bytes.starts_with(b"\x7fELF") {
        identity.code = Code::Bitcode;
    }
    let mut keep = false;
    for ((_, device), c) in devices.iter().zip(covered.iter_mut()) {
        if matches!(
            check(&identity, image.index, device, &SelectOptions::default()),
            Verdict::Compatible(_)
        ) {
            keep = true;
            *c = true;
        }
    }
    keep
}

/// Extent of a unit in `data` (file offsets).
fn unit_range(data: &[u8], unit: &Unit<'_>, options: &ReadOptions) -> Result<Range<u64>, String> {
    let start = unit.location.offset;
    let len = match &unit.content {
        UnitContent::Bundle(b) => b.len(),
        UnitContent::Compressed(c) => c.len(options).map_err(|e| describe_error(&e))?,
        UnitContent::OffloadBinaries(s) => s.len(),
        UnitContent::DeviceElf(d) => d.len() as u64,
        UnitContent::NvFatbin(f) => f.len(),
        // Text bundles, object bundles and fatbinaries are never rewritten in place inside
        // a larger buffer: they run to the end of what was walked.
        _ => (data.len() as u64).saturating_sub(start),
    };
    Ok(start..start.saturating_add(len))
}

/// The payload alignment a stored bundle was written with: the smallest power of two up
/// to 4096 whose layout ([`offload_image::write::bundle::layout`]) reproduces every stored
/// payload offset; for a bundle no such alignment reproduces (not written by LLVM's
/// rules), the largest power of two up to 4096 dividing every non-empty payload offset.
fn bundle_align(b: &offload_image::bundle::Bundle<'_>) -> u64 {
    let entries: Vec<(&str, &[u8])> = b.entries().map(|e| (e.id, e.data)).collect();
    let stored: Vec<u64> = b.entries().map(|e| e.offset).collect();
    let mut align = 1u64;
    while align <= 4096 {
        if offload_image::write::bundle::layout(&entries, align).is_ok_and(|l| l.offsets == stored)
        {
            return align;
        }
        align *= 2;
    }
    let mut align = 4096u64;
    for e in b.entries() {
        if e.data.is_empty() {
            continue;
        }
        while align > 1 && e.offset % align != 0 {
            align /= 2;
        }
    }
    align
}

fn plan_unit<'a>(
    data: &'a [u8],
    unit: &Unit<'a>,
    options: &ReadOptions,
    devices: &[(String, Device)],
) -> Result<UnitPlan<'a>, String> {
    let range = unit_range(data, unit, options)?;
    let mut covered = vec![false; devices.len()];
    let mut keep = Vec::new();
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    let mut judge = |image: &Image<'_>| {
        let k = covers(image, devices, &mut covered);
        keep.push(k);
        let name = format!("{}", offload_image::target::image_name(image));
        if k {
            kept.push(name);
        } else {
            dropped.push(name);
        }
    };
    // NVIDIA fatbinaries one decoded entry at a time (a damaged compressed entry is
    // refused, not written out again); other units opened (a compressed bundle's content
    // is rewritten below).
    let open = match &unit.content {
        UnitContent::NvFatbin(_) => {
            crate::decode::for_each_image(unit, options, |image| judge(image))
                .map_err(|e| describe_error(&e))?;
            None
        }
        _ => {
            let open = unit.open(options).map_err(|e| describe_error(&e))?;
            open.images().for_each(|image| judge(&image));
            Some(open)
        }
    };
    let missing: Vec<String> = devices
        .iter()
        .zip(&covered)
        .filter(|(_, c)| !**c)
        .map(|((t, _), _)| t.clone())
        .collect();
    let mut plan = UnitPlan {
        location: unit.location.to_string(),
        index: unit.index,
        format: unit.format().name(),
        range: range.clone(),
        kept,
        dropped,
        missing,
        whole: false,
        note: None,
        body: Body::Same,
        new_len: range.end.saturating_sub(range.start),
    };
    let leave_whole = |plan: &mut UnitPlan<'a>, note: Option<String>| {
        plan.kept.append(&mut plan.dropped);
        plan.note = note;
    };
    if !covered.iter().any(|c| *c) {
        plan.whole = true;
        leave_whole(
            &mut plan,
            Some("no image for any kept device: left whole".into()),
        );
        return Ok(plan);
    }
    if plan.dropped.is_empty() {
        return Ok(plan);
    }
    let body = match &unit.content {
        UnitContent::Bundle(b) => {
            let entries = b
                .entries()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(e, _)| (e.id, e.data))
                .collect();
            Body::Bundle {
                entries,
                align: bundle_align(b),
            }
        }
        UnitContent::Text(t) => Body::Owned(text_bundle(t, &keep)),
        UnitContent::Compressed(c) => {
            let inner = open
                .as_ref()
                .and_then(|o| o.decompressed())
                .ok_or("compressed bundle has no content")?;
            let rewritten = if offload_image::bundle::is_bundle(inner) {
                let b = offload_image::bundle::Bundle::parse(inner, &options.limits)
                    .map_err(|e| describe_error(&e))?;
                let entries: Vec<(&str, &[u8])> = b
                    .entries()
                    .zip(&keep)
                    .filter(|(_, k)| **k)
                    .map(|(e, _)| (e.id, e.data))
                    .collect();
                offload_image::write::bundle::bundle_to_vec(&entries, bundle_align(&b))
                    .map_err(|e| describe_error(&e))?
            } else {
                let t =
                    TextBundle::parse(inner, &options.limits).map_err(|e| describe_error(&e))?;
                text_bundle(&t, &keep)
            };
            Body::Owned(recompress(
                &rewritten,
                c.version(),
                c.method(),
                range.end - range.start,
            )?)
        }
        UnitContent::OffloadBinaries(seq) => {
            let mut out = Vec::new();
            let mut flags = keep.iter();
            for (_, b) in seq.iter() {
                let n = usize::try_from(b.entry_count()).unwrap_or(usize::MAX);
                let these: Vec<bool> = flags.by_ref().take(n).copied().collect();
                if these.iter().all(|k| *k) {
                    out.extend_from_slice(b.data());
                } else if these.iter().any(|k| *k) {
                    if b.is_compressed() {
                        return Err(format!(
                            "{}: a compressed OffloadBinary would be kept only in part; \
                             pruning inside compressed OffloadBinaries is not supported",
                            plan.location
                        ));
                    }
                    rewrite_offload_binary(&b, &these, &mut out)?;
                }
            }
            Body::Owned(out)
        }
        UnitContent::DeviceElf(_) => {
            // One image, which no kept device can load (else nothing would be dropped).
            plan.whole = true;
            leave_whole(
                &mut plan,
                Some("a bare device ELF is one image: left whole".into()),
            );
            return Ok(plan);
        }
        UnitContent::ObjectBundle(o) => Body::DropSections(
            o.sections()
                .zip(&keep)
                .filter(|(_, k)| !**k)
                .map(|((id, _), _)| id.to_string())
                .collect(),
        ),
        UnitContent::NvFatbin(f) => {
            if data.get(range.start as usize..range.end as usize) != Some(f.bytes())
                || !std::ptr::eq(
                    data.as_ptr().wrapping_add(range.start as usize),
                    f.bytes().as_ptr(),
                )
            {
                return Err(format!(
                    "{}: a fatbinary inside another container (an OffloadBinary image) is not pruned",
                    plan.location
                ));
            }
            let (header, entries) = nv_fatbin(f, &keep)?;
            Body::Spliced(header, entries)
        }
    };
    plan.new_len = match &body {
        Body::Same => plan.new_len,
        Body::Bundle { entries, align } => {
            offload_image::write::bundle::layout(entries, *align)
                .map_err(|e| describe_error(&e))?
                .len
        }
        Body::Owned(v) => v.len() as u64,
        Body::Spliced(head, parts) => {
            head.len() as u64 + parts.iter().map(|p| p.len() as u64).sum::<u64>()
        }
        // The object shrinks by the sections removed: their contents and headers (the
        // exact size, after the new layout, is in the summary).
        Body::DropSections(ids) => {
            let removed: u64 = match &unit.content {
                UnitContent::ObjectBundle(o) => o
                    .sections()
                    .filter(|(id, _)| ids.iter().any(|d| d == id))
                    .map(|(_, d)| d.len() as u64 + 64)
                    .sum(),
                _ => 0,
            };
            plan.note = Some(format!(
                "sections removed: __CLANG_OFFLOAD_BUNDLE__{}",
                ids.join(", __CLANG_OFFLOAD_BUNDLE__")
            ));
            plan.new_len.saturating_sub(removed)
        }
    };
    plan.body = body;
    Ok(plan)
}

/// The kept entries of an NVIDIA fatbinary as a fatbinary: the original header with its
/// size field (`+8`, u64) set to the sum of the kept entries, then each kept entry (entry
/// header and stored payload, compressed or not) copied verbatim in stored order.
fn nv_fatbin<'a>(
    f: &offload_image::nvfatbin::Fatbin<'a>,
    keep: &[bool],
) -> Result<(Vec<u8>, Vec<&'a [u8]>), String> {
    let bytes = f.bytes();
    let header_len = bytes
        .get(6..8)
        .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
        .ok_or("fatbinary header is truncated")?;
    let header = bytes
        .get(..header_len)
        .filter(|h| h.len() >= 16)
        .ok_or("fatbinary header is truncated")?;
    let mut out = header.to_vec();
    let mut parts = Vec::new();
    let mut body = 0u64;
    for (e, _) in f.entries().zip(keep).filter(|(_, k)| **k) {
        let start = usize::try_from(e.offset).map_err(|_| "fatbinary entry offset overflows")?;
        let end = start
            .checked_add(e.header_size as usize)
            .and_then(|x| x.checked_add(e.payload.len()))
            .ok_or("fatbinary entry size overflows")?;
        let entry = bytes
            .get(start..end)
            .ok_or("fatbinary entry runs past the end of the fatbinary")?;
        body += entry.len() as u64;
        parts.push(entry);
    }
    out[8..16].copy_from_slice(&body.to_le_bytes());
    Ok((out, parts))
}

fn text_bundle(t: &TextBundle<'_>, keep: &[bool]) -> Vec<u8> {
    let entries: Vec<(&str, &[u8])> = t
        .entries()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(e, _)| (e.id, e.data))
        .collect();
    offload_image::write::text::text_bundle_to_vec(t.style(), &entries)
}

/// Compresses `content` as a `CCOB` of `version` with the codec of `method`; `budget` is
/// the size of the original blob (a smaller payload is tried harder for when it is
/// exceeded).
///
/// The header comes from [`offload_image::write::ccob::header`] (v2, v3) or is the v1
/// layout of [`offload_image::raw::CcobHeaderV1`]. zstd payloads come from C libzstd
/// (level 9, then 19 if the blob would be larger than the original) when loader-sim is
/// built with it, else from the library's pure-Rust encoder; zlib payloads from
/// `miniz_oxide` at its best level.
fn recompress(
    content: &[u8],
    version: u16,
    method: CompressionMethod,
    budget: u64,
) -> Result<Vec<u8>, String> {
    let codec = match method {
        CompressionMethod::Zlib => Codec::Zlib { level: 10 },
        _ => Codec::Zstd(ZstdMode::Fastest),
    };
    let header_len: u64 = match version {
        1 => 20,
        2 => 24,
        _ => 32,
    };
    let payload = compress_payload(content, codec, budget.saturating_sub(header_len))?;
    let mut out = if version == 1 {
        let size = u32::try_from(content.len())
            .map_err(|_| "content too large for a version 1 compressed bundle".to_string())?;
        let mut v = Vec::with_capacity(20);
        v.extend_from_slice(offload_image::raw::CCOB_MAGIC);
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&method.code().to_le_bytes());
        v.extend_from_slice(&size.to_le_bytes());
        v.extend_from_slice(&offload_image::ccob::truncated_md5(content));
        v
    } else {
        offload_image::write::ccob::header(
            content,
            payload.len() as u64,
            &CcobOptions { version, codec },
        )
        .map_err(|e| describe_error(&e))?
    };
    out.extend_from_slice(&payload);
    Ok(out)
}

#[cfg(feature = "libzstd")]
fn compress_payload(content: &[u8], codec: Codec, budget: u64) -> Result<Vec<u8>, String> {
    if let Codec::Zstd(_) = codec {
        let mut payload = Vec::new();
        for level in [9, 19] {
            payload = zstd::bulk::compress(content, level)
                .map_err(|e| format!("zstd compression failed: {e}"))?;
            if payload.len() as u64 <= budget {
                break;
            }
        }
        return Ok(payload);
    }
    Ok(codec.compress(content))
}

#[cfg(not(feature = "libzstd"))]
fn compress_payload(content: &[u8], codec: Codec, _budget: u64) -> Result<Vec<u8>, String> {
    Ok(codec.compress(content))
}

/// Writes the kept entries of an uncompressed OffloadBinary.
fn rewrite_offload_binary(
    b: &OffloadBinary<'_>,
    keep: &[bool],
    out: &mut Vec<u8>,
) -> Result<(), String> {
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
    let bytes = if b.version() == 1 && images.len() == 1 {
        images
            .first()
            .map(offload_image::write::offload_binary::v1_to_vec)
            .transpose()
    } else {
        offload_image::write::offload_binary::v2_to_vec(&images).map(Some)
    }
    .map_err(|e| describe_error(&e))?;
    out.extend_from_slice(&bytes.unwrap_or_default());
    Ok(())
}

/// The shape of the output (for the report).
struct Layout {
    name: String,
}

/// Decides how the output is made of input bytes and rewritten units.
fn assemble(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    shrink: bool,
) -> Result<(Vec<Piece>, Layout), String> {
    if plans.iter().all(|p| matches!(p.body, Body::Same)) {
        return Ok((
            vec![Piece::Copy(0..data.len() as u64)],
            Layout {
                name: "unchanged (nothing to drop)".into(),
            },
        ));
    }
    if data.starts_with(b"!<thin>\n") {
        return Err("thin archives are not pruned (their members are other files)".into());
    }
    let is_host_elf = data.starts_with(b"\x7fELF")
        && !plans
            .iter()
            .any(|p| p.format == "elf" && p.range.start == 0);
    if !is_host_elf {
        return Ok((
            standalone(data, plans, false),
            Layout {
                name: "standalone".into(),
            },
        ));
    }
    linked(data, plans, shrink)
}

/// An `ar` archive (GNU or System V layout): every member is pruned as a file of its own
/// (bundles, host objects), the member headers get the new sizes (and the padding byte
/// that keeps members at even offsets), and the offsets of the symbol table (`/`, 32-bit,
/// or `/SYM64/`, 64-bit, big-endian) are moved to where the members now start. The long
/// name table and the symbols themselves are unchanged. BSD archives (`#1/` names, `__.SYMDEF`)
/// with something to drop are refused.
#[allow(clippy::type_complexity)]
fn archive<'a>(
    data: &'a [u8],
    options: &ReadOptions,
    devices: &[(String, Device)],
    shrink: bool,
    release: &dyn Fn(u64, &Range<u64>),
) -> Result<(Vec<UnitPlan<'a>>, Vec<Piece>, Layout), String> {
    struct Member {
        header: u64,
        data: Range<u64>,
        name: String,
        pieces: Option<Vec<Piece>>,
        new_size: u64,
    }
    // Members holding units, as the walk of the whole archive finds them (members that
    // are not containers, such as bitcode, are copied as they are).
    let mut with_units: Vec<Vec<u8>> = Vec::new();
    for unit in units(data, options) {
        let unit = unit.map_err(|e| describe_error(&e))?;
        if let Some(offload_image::container::PathElem::Member(name)) = unit.location.path().first()
        {
            if !with_units.iter().any(|n| n == name) {
                with_units.push(name.to_vec());
            }
        }
    }
    let mut members = Vec::new();
    let mut pos = 8u64;
    let mut long_names: &[u8] = &[];
    let mut plans: Vec<UnitPlan<'a>> = Vec::new();
    let end = data.len() as u64;
    while pos + 60 <= end {
        let h = &data[pos as usize..pos as usize + 60];
        if &h[58..60] != b"`\n" {
            return Err(format!("archive member header at byte {pos} is malformed"));
        }
        let size: u64 = std::str::from_utf8(&h[48..58])
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| format!("archive member size at byte {} is malformed", pos + 48))?;
        let start = pos + 60;
        let stop = start
            .checked_add(size)
            .filter(|e| *e <= end)
            .ok_or_else(|| format!("archive member at byte {pos} runs past the end"))?;
        let raw = String::from_utf8_lossy(&h[..16]).trim_end().to_string();
        let body = &data[start as usize..stop as usize];
        if raw == "//" {
            long_names = body;
        }
        let name = match raw.strip_prefix('/').and_then(|n| n.parse::<usize>().ok()) {
            Some(off) => long_names
                .get(off..)
                .and_then(|t| t.split(|b| *b == b'\n').next())
                .map(|t| String::from_utf8_lossy(t).trim_end_matches('/').to_string())
                .unwrap_or(raw.clone()),
            None => raw.trim_end_matches('/').to_string(),
        };
        let special = raw == "/" || raw == "//" || raw == "/SYM64/" || raw.starts_with("__.SYMDEF");
        let mut m = Member {
            header: pos,
            data: start..stop,
            name: if special { raw.clone() } else { name },
            pieces: None,
            new_size: size,
        };
        if !special && with_units.iter().any(|n| n == m.name.as_bytes()) {
            let first = plans.len();
            let mut member_plans = plan_units(body, options, devices, |r| release(start, r))?;
            for p in &mut member_plans {
                p.location = format!("member {} / {}", m.name, p.location);
            }
            if member_plans.iter().any(|p| !matches!(p.body, Body::Same)) {
                if raw.starts_with("#1/") {
                    return Err("BSD archives are not pruned".into());
                }
                let (pieces, _) = assemble(body, &member_plans, shrink)
                    .map_err(|e| format!("member {}: {e}", m.name))?;
                m.new_size = pieces_len(&pieces, &member_plans);
                m.pieces = Some(rebase(pieces, start, first));
            }
            plans.extend(member_plans);
        }
        members.push(m);
        pos = stop + (stop & 1);
    }
    if pos < end && data[pos as usize..].iter().any(|b| *b != b'\n') {
        return Err(format!("bytes after the last archive member at byte {pos}"));
    }
    // New member offsets.
    let mut new_header = Vec::with_capacity(members.len());
    let mut at = 8u64;
    for m in &members {
        new_header.push(at);
        at += 60 + m.new_size;
        at += at & 1;
    }
    let moved = |old: u64| -> Option<u64> {
        members
            .iter()
            .position(|m| m.header == old)
            .map(|i| new_header[i])
    };
    let mut pieces = vec![Piece::Copy(0..8)];
    for (i, m) in members.iter().enumerate() {
        let h = &data[m.header as usize..m.header as usize + 60];
        let mut header = h[..48].to_vec();
        header.extend_from_slice(format!("{:<10}", m.new_size).as_bytes());
        header.extend_from_slice(b"`\n");
        pieces.push(Piece::Owned(header));
        let body = &data[m.data.start as usize..m.data.end as usize];
        if m.name == "/" || m.name == "/SYM64/" {
            let w = if m.name == "/" { 4 } else { 8 };
            let mut table = body.to_vec();
            let count = read_be(&table, 0, w).ok_or("archive symbol table is truncated")?;
            for k in 0..count as usize {
                let at = w + k * w;
                let old = read_be(&table, at, w).ok_or("archive symbol table is truncated")?;
                let new = moved(old).ok_or("archive symbol table names no member")?;
                let bytes = new.to_be_bytes();
                table[at..at + w].copy_from_slice(&bytes[8 - w..]);
                if w == 4 && new > u64::from(u32::MAX) {
                    return Err("archive too large for a 32-bit symbol table".into());
                }
            }
            pieces.push(Piece::Owned(table));
        } else if m.name.starts_with("__.SYMDEF") && members.iter().any(|m| m.pieces.is_some()) {
            return Err("BSD archives are not pruned".into());
        } else {
            match &m.pieces {
                Some(p) => pieces.extend(p.iter().map(clone_piece)),
                None => pieces.push(Piece::Copy(m.data.clone())),
            }
        }
        let stop = new_header[i] + 60 + m.new_size;
        if stop & 1 == 1 {
            pieces.push(Piece::Owned(b"\n".to_vec()));
        }
    }
    let changed = members.iter().filter(|m| m.pieces.is_some()).count();
    Ok((
        plans,
        pieces,
        Layout {
            name: format!("archive: {changed} member(s) pruned, member headers and symbol table offsets updated"),
        },
    ))
}

fn read_be(b: &[u8], at: usize, w: usize) -> Option<u64> {
    let s = b.get(at..at + w)?;
    Some(s.iter().fold(0u64, |a, x| (a << 8) | u64::from(*x)))
}

fn clone_piece(p: &Piece) -> Piece {
    match p {
        Piece::Copy(r) => Piece::Copy(r.clone()),
        Piece::Unit(i) => Piece::Unit(*i),
        Piece::Zeros(n) => Piece::Zeros(*n),
        Piece::Owned(v) => Piece::Owned(v.clone()),
    }
}

/// Pieces of a member: input ranges from `base`, plan indices from `first`.
fn rebase(pieces: Vec<Piece>, base: u64, first: usize) -> Vec<Piece> {
    pieces
        .into_iter()
        .map(|p| match p {
            Piece::Copy(r) => Piece::Copy(r.start + base..r.end + base),
            Piece::Unit(i) => Piece::Unit(i + first),
            other => other,
        })
        .collect()
}

/// Pieces that rewrite each unit where it is; with `pad`, each is zero-filled to its old
/// length.
fn standalone(data: &[u8], plans: &[UnitPlan<'_>], pad: bool) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut pos = 0u64;
    for (i, p) in plans.iter().enumerate() {
        if p.range.start < pos {
            // Nested or overlapping units cannot happen in a walk; keep the bytes.
            continue;
        }
        if p.range.start > pos {
            pieces.push(Piece::Copy(pos..p.range.start));
        }
        if matches!(p.body, Body::Same) {
            pieces.push(Piece::Copy(p.range.clone()));
        } else {
            pieces.push(Piece::Unit(i));
            let old = p.range.end - p.range.start;
            if pad && old > p.new_len {
                pieces.push(Piece::Zeros(old - p.new_len));
            }
        }
        pos = p.range.end;
    }
    let end = data.len() as u64;
    if end > pos {
        pieces.push(Piece::Copy(pos..end));
    }
    pieces
}

fn elf_err(what: &str) -> impl Fn(object::read::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// A linked ELF file (see the module documentation for what is handled).
fn linked(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    shrink: bool,
) -> Result<(Vec<Piece>, Layout), String> {
    let h = FileHeader64::<LE>::parse(data)
        .map_err(elf_err("only 64-bit little-endian ELF files are pruned"))?;
    if !h.is_little_endian() {
        return Err("only 64-bit little-endian ELF files are pruned".into());
    }
    let e_type = h.e_type(LE);
    if e_type == ET_REL {
        return relocatable(data, plans);
    }
    if e_type != ET_DYN && e_type != ET_EXEC {
        return Err("ELF file is neither relocatable, an executable nor a shared library".into());
    }
    for p in plans {
        if !FATBIN_SECTIONS
            .iter()
            .any(|s| p.location == format!("section {s}"))
            && !p.dropped.is_empty()
        {
            return Err(format!(
                "{}: device code outside .hip_fatbin and .nv_fatbin is not rewritten in linked files",
                p.location
            ));
        }
        if !matches!(p.body, Body::Same) && p.new_len > p.range.end - p.range.start {
            return Err(format!(
                "{}: rewritten unit {} would be larger than the original ({} > {} bytes)",
                p.location,
                p.index,
                p.new_len,
                p.range.end - p.range.start
            ));
        }
    }
    let in_place = standalone(data, plans, true);
    let why = if shrink {
        match compact(data, plans) {
            Ok(done) => return Ok(done),
            Err(why) => why,
        }
    } else {
        "--no-shrink".into()
    };
    Ok((
        in_place,
        Layout {
            name: format!("in place, zero-filled, file size unchanged ({why})"),
        },
    ))
}

/// One `.hip_fatbin`/`.nv_fatbin` section of a linked file and where its units go.
struct Packing {
    /// Section index and name.
    index: usize,
    name: &'static str,
    /// File range and address of the section.
    off: u64,
    end: u64,
    addr: u64,
    /// `p_vaddr - p_offset` of the segment holding it.
    delta: u64,
    /// The units in it, in file order.
    moves: Vec<Move>,
    /// File offset after the last unit: the new end of the section.
    packed_end: u64,
}

/// Where a unit of a [`Packing`] goes.
struct Move {
    /// Index of the unit's plan.
    plan: usize,
    /// Old and new file offset.
    old: u64,
    new: u64,
    /// Old and new length.
    old_len: u64,
    new_len: u64,
}

impl Packing {
    /// The address of file offset `off` of the section.
    fn address(&self, off: u64) -> u64 {
        self.addr.wrapping_add(off - self.off)
    }

    /// The whole pages (of `align`) of the section that hold nothing once its units are
    /// packed and `extra` more bytes follow them.
    fn hole(&self, align: u64, extra: u64) -> Option<Range<u64>> {
        let a = self
            .packed_end
            .checked_add(extra)?
            .checked_next_multiple_of(align)?;
        let b = self.end / align * align;
        (b > a).then_some(a..b)
    }
}

/// Reads a little-endian word of `n` bytes at file offset `at`.
fn le(data: &[u8], at: u64, n: usize) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    let b = data.get(at..at.checked_add(n)?)?;
    Some(b.iter().rev().fold(0u64, |v, x| (v << 8) | u64::from(*x)))
}

/// Pointer fields that hold the address of a unit, to be set to where it moves.
struct Pointers<'p> {
    packs: &'p [Packing],
    /// Old address of every unit start → new address.
    moved: std::collections::BTreeMap<u64, u64>,
    /// File offset → new bytes.
    patches: std::collections::BTreeMap<u64, Vec<u8>>,
    /// Old addresses some pointer holds.
    referenced: std::collections::BTreeSet<u64>,
}

impl Pointers<'_> {
    /// The section (`.hip_fatbin`/`.nv_fatbin`) whose address range holds `v`.
    fn pack_of(&self, v: u64) -> Option<&Packing> {
        self.packs
            .iter()
            .find(|k| k.addr <= v && v - k.addr < k.end - k.off)
    }

    /// The field at `at` holds `old`; if `old` is inside a section being compacted it must
    /// be the start of a unit, and the field gets the unit's new address.
    fn repoint(&mut self, at: u64, old: u64, what: &str) -> Result<(), String> {
        let Some(pack) = self.pack_of(old) else {
            return Ok(());
        };
        let Some(&new) = self.moved.get(&old) else {
            return Err(format!(
                "{what} at offset {at:#x} points into {} ({old:#x}) but not at the start of a container",
                pack.name
            ));
        };
        self.patches.insert(at, new.to_le_bytes().to_vec());
        self.referenced.insert(old);
        Ok(())
    }
}

/// The file offset of the 8 bytes at address `vaddr`, when a `PT_LOAD` segment holds
/// them in the file.
fn file_offset(phdrs: &[ProgramHeader64<LE>], vaddr: u64) -> Option<u64> {
    phdrs
        .iter()
        .filter(|p| p.p_type(LE) == PT_LOAD)
        .find(|p| {
            p.p_vaddr(LE) <= vaddr
                && vaddr
                    .checked_add(8)
                    .is_some_and(|e| e <= p.p_vaddr(LE).saturating_add(p.p_filesz(LE)))
        })
        .map(|p| p.p_offset(LE) + (vaddr - p.p_vaddr(LE)))
}

/// Compacts the `.hip_fatbin`/`.nv_fatbin` sections of a linked file (module
/// documentation); `Err` says why the file is rewritten in place instead.
fn compact(data: &[u8], plans: &[UnitPlan<'_>]) -> Result<(Vec<Piece>, Layout), String> {
    use object::elf::{
        EM_AARCH64, EM_X86_64, R_AARCH64_RELATIVE, R_X86_64_RELATIVE, SHN_XINDEX, SHT_DYNSYM,
        SHT_REL, SHT_RELA, SHT_RELR, SHT_SYMTAB,
    };
    let h = FileHeader64::<LE>::parse(data).map_err(elf_err("ELF header"))?;
    let phdrs = h
        .program_headers(LE, data)
        .map_err(elf_err("program headers"))?;
    let sections = h.sections(LE, data).map_err(elf_err("section headers"))?;
    if h.e_shnum(LE) == 0 || h.e_shstrndx(LE) == SHN_XINDEX {
        return Err("extended section numbering".into());
    }
    let relative = match h.e_machine(LE) {
        EM_X86_64 => R_X86_64_RELATIVE.0,
        EM_AARCH64 => R_AARCH64_RELATIVE.0,
        m => return Err(format!("relocations of machine {m} are not known")),
    };
    let loads: Vec<&ProgramHeader64<LE>> =
        phdrs.iter().filter(|p| p.p_type(LE) == PT_LOAD).collect();
    let first_delta = loads
        .first()
        .map(|p| p.p_vaddr(LE).wrapping_sub(p.p_offset(LE)))
        .ok_or("no PT_LOAD segment")?;
    let align = loads
        .iter()
        .map(|p| p.p_align(LE))
        .max()
        .unwrap_or(0)
        .max(4096);
    if !align.is_power_of_two() {
        return Err("PT_LOAD alignment is not a power of two".into());
    }
    let file_len = data.len() as u64;

    // Where the units of every .hip_fatbin/.nv_fatbin go: back to back from the start of
    // the section, each at the alignment its address had (at most the section's).
    let mut packs: Vec<Packing> = Vec::new();
    for (index, sh) in sections.iter().enumerate() {
        let name = sections.section_name(LE, sh).unwrap_or_default();
        let Some(sname) = FATBIN_SECTIONS.iter().find(|s| s.as_bytes() == name) else {
            continue;
        };
        if sh.sh_type(LE) != SHT_PROGBITS || sh.sh_flags(LE).0 & SHF_ALLOC.0 == 0 {
            return Err(format!("{sname} is not an allocated PROGBITS section"));
        }
        let (off, size, addr) = (sh.sh_offset(LE), sh.sh_size(LE), sh.sh_addr(LE));
        let end = off
            .checked_add(size)
            .filter(|e| *e <= file_len)
            .ok_or_else(|| format!("{sname} runs past the end of the file"))?;
        let seg = loads
            .iter()
            .find(|p| p.p_offset(LE) <= off && end <= p.p_offset(LE).saturating_add(p.p_filesz(LE)))
            .ok_or_else(|| format!("{sname} is not inside the file part of one PT_LOAD segment"))?;
        let delta = seg.p_vaddr(LE).wrapping_sub(seg.p_offset(LE));
        if delta != addr.wrapping_sub(off) {
            return Err(format!(
                "{sname}'s address and offset disagree with its segment"
            ));
        }
        let sec_align = sh.sh_addralign(LE).max(1);
        if !sec_align.is_power_of_two() {
            return Err(format!("{sname}'s alignment is not a power of two"));
        }
        let mut here: Vec<(usize, &UnitPlan<'_>)> = plans
            .iter()
            .enumerate()
            .filter(|(_, p)| off <= p.range.start && p.range.end <= end)
            .collect();
        if here.is_empty() {
            continue;
        }
        here.sort_by_key(|(_, p)| p.range.start);
        let mut moves = Vec::new();
        let (mut pos, mut cursor) = (off, off);
        for (i, p) in here {
            // Bytes between containers are padding; anything else stays where it is.
            let gap = data
                .get(pos as usize..p.range.start as usize)
                .unwrap_or(&[]);
            if p.range.start < pos || gap.iter().any(|b| *b != 0) {
                return Err(format!(
                    "{sname} holds bytes outside its containers at offset {pos:#x}"
                ));
            }
            let old_len = p.range.end - p.range.start;
            let new_len = if matches!(p.body, Body::Same) {
                old_len
            } else {
                p.new_len
            };
            let old_addr = addr.wrapping_add(p.range.start - off);
            let unit_align = if old_addr == 0 {
                sec_align
            } else {
                (1u64 << old_addr.trailing_zeros().min(63)).min(sec_align)
            };
            let new_addr = addr
                .checked_add(cursor - off)
                .and_then(|a| a.checked_next_multiple_of(unit_align))
                .ok_or("address overflow")?;
            let new = off.saturating_add(new_addr - addr);
            if new > p.range.start || new < cursor {
                return Err("a container would move up".into());
            }
            moves.push(Move {
                plan: i,
                old: p.range.start,
                new,
                old_len,
                new_len,
            });
            cursor = new + new_len;
            pos = p.range.end;
        }
        packs.push(Packing {
            index,
            name: sname,
            off,
            end,
            addr,
            delta,
            moves,
            packed_end: cursor,
        });
    }
    if packs.is_empty() {
        return Err("no container in .hip_fatbin or .nv_fatbin".into());
    }
    packs.sort_by_key(|k| k.off);

    // Every pointer to a unit: relative relocations (RELA addends, REL and RELR words in
    // place), the words they apply to, and the wrappers' pointer fields (absolute in
    // executables); symbols defined in the sections get the new values.
    let mut ptrs = Pointers {
        packs: &packs,
        moved: packs
            .iter()
            .flat_map(|k| k.moves.iter().map(|m| (k.address(m.old), k.address(m.new))))
            .collect(),
        patches: Default::default(),
        referenced: Default::default(),
    };
    let pack_section = |shndx: u64| packs.iter().any(|k| k.index as u64 == shndx);
    for (index, sh) in sections.iter().enumerate() {
        let t = sh.sh_type(LE);
        let (o, n) = (sh.sh_offset(LE), sh.sh_size(LE));
        let sname = String::from_utf8_lossy(sections.section_name(LE, sh).unwrap_or_default());
        let in_file = || -> Result<(), String> {
            if o.checked_add(n).is_some_and(|e| e <= file_len) {
                Ok(())
            } else {
                Err(format!(
                    "section {index} ({sname}) runs past the end of the file"
                ))
            }
        };
        let alloc = sh.sh_flags(LE).0 & SHF_ALLOC.0 != 0;
        match t {
            SHT_RELA if alloc => {
                in_file()?;
                // The symbol table the relocations refer to.
                let symtab = sections
                    .section(object::SectionIndex(sh.sh_link(LE) as usize))
                    .ok();
                for k in 0..n / 24 {
                    let at = o + k * 24;
                    let (Some(r_offset), Some(info), Some(addend)) =
                        (le(data, at, 8), le(data, at + 8, 8), le(data, at + 16, 8))
                    else {
                        break;
                    };
                    let (ty, sym) = (info as u32, info >> 32);
                    if ty == relative {
                        if ptrs.pack_of(addend).is_some() {
                            ptrs.repoint(at + 16, addend, "a relocation addend")?;
                            if let Some(f) = file_offset(phdrs, r_offset) {
                                if le(data, f, 8) == Some(addend) {
                                    ptrs.repoint(f, addend, "a relocated word")?;
                                }
                            }
                        }
                    } else if sym != 0 {
                        let shndx = symtab.and_then(|s| {
                            le(
                                data,
                                s.sh_offset(LE).checked_add(sym.checked_mul(24)?)? + 6,
                                2,
                            )
                        });
                        if shndx.is_some_and(pack_section) {
                            return Err(format!(
                                "relocation {k} of {sname} refers to a symbol in a fatbinary section"
                            ));
                        }
                    }
                }
            }
            SHT_REL if alloc => {
                in_file()?;
                for k in 0..n / 16 {
                    let at = o + k * 16;
                    let (Some(r_offset), Some(info)) = (le(data, at, 8), le(data, at + 8, 8))
                    else {
                        break;
                    };
                    if info as u32 == relative {
                        if let Some(f) = file_offset(phdrs, r_offset) {
                            if let Some(w) = le(data, f, 8) {
                                ptrs.repoint(f, w, "a relocated word")?;
                            }
                        }
                    }
                }
            }
            SHT_RELR if alloc => {
                in_file()?;
                let mut place = 0u64;
                for k in 0..n / 8 {
                    let Some(e) = le(data, o + k * 8, 8) else {
                        break;
                    };
                    let mut words = Vec::new();
                    if e & 1 == 0 {
                        words.push(e);
                        place = e.wrapping_add(8);
                    } else {
                        for bit in 0..63 {
                            if (e >> (bit + 1)) & 1 == 1 {
                                words.push(place.wrapping_add(bit * 8));
                            }
                        }
                        place = place.wrapping_add(63 * 8);
                    }
                    for v in words {
                        if let Some(f) = file_offset(phdrs, v) {
                            if let Some(w) = le(data, f, 8) {
                                ptrs.repoint(f, w, "a relocated word")?;
                            }
                        }
                    }
                }
            }
            _ if t == SHT_PROGBITS
                && matches!(&*sname, ".hipFatBinSegment" | ".nvFatBinSegment") =>
            {
                in_file()?;
                // { magic: u32, version: u32, pointer: u64, _: u64 }
                for k in 0..n / 24 {
                    let at = o + k * 24 + 8;
                    if let Some(w) = le(data, at, 8) {
                        ptrs.repoint(at, w, "a wrapper's pointer")?;
                    }
                }
            }
            _ => {}
        }
    }
    let unreferenced = ptrs.moved.len() - ptrs.referenced.len();
    let mut patches = ptrs.patches;
    for sh in sections.iter() {
        if !matches!(sh.sh_type(LE), SHT_SYMTAB | SHT_DYNSYM) {
            continue;
        }
        let (o, n) = (sh.sh_offset(LE), sh.sh_size(LE));
        if o.checked_add(n).is_none_or(|e| e > file_len) {
            continue;
        }
        for k in 0..n / 24 {
            let at = o + k * 24;
            let (Some(shndx), Some(value), Some(size)) = (
                le(data, at + 6, 2),
                le(data, at + 8, 8),
                le(data, at + 16, 8),
            ) else {
                break;
            };
            let Some(pack) = packs.iter().find(|p| p.index as u64 == shndx) else {
                continue;
            };
            let unit = pack.moves.iter().find(|m| {
                let old = pack.address(m.old);
                old <= value && value - old < m.old_len
            });
            if let Some(m) = unit {
                let (old, new) = (pack.address(m.old), pack.address(m.new));
                patches.insert(
                    at + 8,
                    new.wrapping_add((value - old).min(m.new_len))
                        .to_le_bytes()
                        .to_vec(),
                );
                if value == old && size == m.old_len {
                    patches.insert(at + 16, m.new_len.to_le_bytes().to_vec());
                }
            } else if value == pack.address(pack.end) {
                let new_end = pack.address(pack.packed_end);
                patches.insert(at + 8, new_end.to_le_bytes().to_vec());
            }
        }
    }

    // The holes (whole pages freed at the end of each section) and, when a segment is
    // split, the program header table, which then needs a place of its own: right after
    // the packed units of the first section with room, in a segment mapped like the first
    // one (so that `AT_PHDR` is right under every kernel).
    let phdr_size = u64::from(h.e_phentsize(LE));
    if phdr_size != 56 {
        return Err("unexpected program header size".into());
    }
    let split = |holes: &[Range<u64>], map: &dyn Fn(u64) -> u64| -> Vec<ProgramHeader64<LE>> {
        let mut out = Vec::new();
        for p in phdrs.iter() {
            let off = p.p_offset(LE);
            let fend = off.saturating_add(p.p_filesz(LE));
            let inside: Vec<&Range<u64>> = holes
                .iter()
                .filter(|h| off <= h.start && h.end <= fend)
                .collect();
            let mut q = *p;
            q.p_offset = U64::new(LE, map(off));
            if p.p_type(LE) != PT_LOAD || inside.is_empty() {
                out.push(q);
                continue;
            }
            let delta = p.p_vaddr(LE).wrapping_sub(off);
            let pdelta = p.p_paddr(LE).wrapping_sub(off);
            let mut start = off;
            for hole in inside {
                let mut q = *p;
                q.p_offset = U64::new(LE, map(start));
                q.p_vaddr = U64::new(LE, start.wrapping_add(delta));
                q.p_paddr = U64::new(LE, start.wrapping_add(pdelta));
                q.p_filesz = U64::new(LE, hole.start - start);
                q.p_memsz = U64::new(LE, hole.start - start);
                out.push(q);
                start = hole.end;
            }
            let memsz = p.p_memsz(LE).saturating_sub(start - off);
            if fend > start || memsz > 0 {
                q.p_offset = U64::new(LE, map(start));
                q.p_vaddr = U64::new(LE, start.wrapping_add(delta));
                q.p_paddr = U64::new(LE, start.wrapping_add(pdelta));
                q.p_filesz = U64::new(LE, fend - start);
                q.p_memsz = U64::new(LE, memsz);
                out.push(q);
            }
        }
        out
    };
    let mapper = |holes: Vec<Range<u64>>| {
        move |o: u64| -> u64 {
            o - holes
                .iter()
                .filter(|h| h.end <= o)
                .map(|h| h.end - h.start)
                .sum::<u64>()
        }
    };
    let mut holes: Vec<Option<Range<u64>>> = packs.iter().map(|k| k.hole(align, 0)).collect();
    let flat = |holes: &[Option<Range<u64>>]| holes.iter().flatten().cloned().collect::<Vec<_>>();
    if holes.iter().all(Option::is_none) {
        return Err(format!(
            "no whole page of {} is freed",
            packs
                .iter()
                .map(|k| k.name)
                .collect::<Vec<_>>()
                .join(" and ")
        ));
    }
    for p in phdrs.iter() {
        if p.p_type(LE) == PT_LOAD || p.p_filesz(LE) == 0 {
            continue;
        }
        let r = p.p_offset(LE)..p.p_offset(LE).saturating_add(p.p_filesz(LE));
        if flat(&holes)
            .iter()
            .any(|h| h.start < r.end && r.start < h.end)
        {
            return Err(format!(
                "a segment of type {:#x} overlaps the freed pages",
                p.p_type(LE)
            ));
        }
    }
    let count = split(&flat(&holes), &mapper(flat(&holes))).len();
    let old_phoff = h.e_phoff(LE);
    let table_len = count as u64 * phdr_size;
    // (pack number, file offset) of the moved table, if it moves.
    let mut table_at: Option<(usize, u64)> = None;
    if count != phdrs.len() {
        let host = packs.iter().enumerate().find(|(i, k)| {
            holes[*i].is_some()
                && k.delta == first_delta
                && k.hole(
                    align,
                    k.packed_end.next_multiple_of(8) - k.packed_end + table_len,
                )
                .is_some()
        });
        let Some((i, k)) = host else {
            return Err("no room for the program header table after the kept containers of a section in a segment mapped like the first PT_LOAD".into());
        };
        let at = k.packed_end.next_multiple_of(8);
        holes[i] = k.hole(align, at - k.packed_end + table_len);
        table_at = Some((i, at));
    }
    let holes = flat(&holes);
    let map = mapper(holes.clone());
    let mut new_phdrs = split(&holes, &map);
    if new_phdrs.len() != count {
        return Err("the segment count changed".into());
    }
    if let Some((i, at)) = table_at {
        let vaddr = at.wrapping_add(packs[i].delta);
        for q in new_phdrs.iter_mut().filter(|q| q.p_type(LE) == PT_PHDR) {
            let pdelta = q.p_paddr(LE).wrapping_sub(q.p_vaddr(LE));
            q.p_offset = U64::new(LE, map(at));
            q.p_vaddr = U64::new(LE, vaddr);
            q.p_paddr = U64::new(LE, vaddr.wrapping_add(pdelta));
            q.p_filesz = U64::new(LE, table_len);
            q.p_memsz = U64::new(LE, table_len);
        }
    }
    let mut table = Vec::new();
    for q in &new_phdrs {
        table.extend_from_slice(object::pod::bytes_of(q));
    }
    // Section headers: offsets moved, the fatbinary sections end after their units.
    let mut shdrs = Vec::new();
    for (index, sh) in sections.iter().enumerate() {
        let mut s = *sh;
        if index != 0 {
            s.sh_offset = U64::new(LE, map(sh.sh_offset(LE)));
        }
        if let Some(k) = packs.iter().find(|k| k.index == index) {
            s.sh_size = U64::new(LE, k.packed_end - k.off);
        }
        shdrs.extend_from_slice(object::pod::bytes_of(&s));
    }

    // The file: everything in place but the packed sections, then the patches, then the
    // holes cut out; the section header table goes to the end.
    let mut pieces = Vec::new();
    let mut pos = 0u64;
    for (i, k) in packs.iter().enumerate() {
        if k.off < pos {
            return Err("fatbinary sections overlap".into());
        }
        pieces.push(Piece::Copy(pos..k.off));
        let mut cur = k.off;
        for m in &k.moves {
            pieces.push(Piece::Zeros(m.new - cur));
            match plans.get(m.plan).map(|p| &p.body) {
                Some(Body::Same) => pieces.push(Piece::Copy(m.old..m.old + m.old_len)),
                _ => pieces.push(Piece::Unit(m.plan)),
            }
            cur = m.new + m.new_len;
        }
        if let Some((_, at)) = table_at.filter(|t| t.0 == i) {
            pieces.push(Piece::Zeros(at - cur));
            pieces.push(Piece::Owned(table.clone()));
            cur = at + table_len;
        }
        pieces.push(Piece::Zeros(k.end - cur));
        pos = k.end;
    }
    let shoff = h.e_shoff(LE);
    let shtab_end = shoff.saturating_add(u64::from(h.e_shnum(LE)) * u64::from(h.e_shentsize(LE)));
    let body_end = if shtab_end == file_len {
        shoff
    } else {
        file_len
    };
    if body_end < pos {
        return Err("the section header table overlaps a fatbinary section".into());
    }
    pieces.push(Piece::Copy(pos..body_end));
    if table_at.is_none() {
        patches.insert(old_phoff, table);
    }
    let new_len = map(body_end);
    let new_shoff = new_len.next_multiple_of(8);
    let mut eh = *h;
    if let Some((_, at)) = table_at {
        eh.e_phoff = U64::new(LE, map(at));
    }
    eh.e_phnum = object::U16::new(
        LE,
        u16::try_from(count)
            .ok()
            .filter(|n| *n < 0xffff)
            .ok_or("too many segments")?,
    );
    eh.e_shoff = U64::new(LE, new_shoff);
    patches.insert(0, object::pod::bytes_of(&eh).to_vec());
    let pieces = apply_patches(pieces, plans, &patches)?;
    let mut out = cut(pieces, plans, &holes, body_end);
    out.push(Piece::Zeros(new_shoff - new_len));
    out.push(Piece::Owned(shdrs));
    let removed: u64 = holes.iter().map(|h| h.end - h.start).sum();
    let moved = packs
        .iter()
        .flat_map(|k| &k.moves)
        .filter(|m| m.old != m.new)
        .count();
    let names: Vec<&str> = packs.iter().map(|k| k.name).collect();
    let mut name = format!(
        "compacted: {} containers in {} packed from the section start ({moved} moved, their pointers updated), {removed} bytes of freed pages removed from the file, {} program headers{}",
        ptrs.moved.len(),
        names.join(" and "),
        count,
        if table_at.is_some() { " (table moved after the kept containers)" } else { "" },
    );
    if unreferenced > 0 {
        name.push_str(&format!(
            "; {unreferenced} container(s) no wrapper or relocation points to"
        ));
    }
    Ok((out, Layout { name }))
}

/// `pieces` with the bytes at each patch's offset (in the output `pieces` make) replaced.
/// A patch lies in copied input or in new bytes, never in a rewritten unit or zero fill.
fn apply_patches(
    pieces: Vec<Piece>,
    plans: &[UnitPlan<'_>],
    patches: &std::collections::BTreeMap<u64, Vec<u8>>,
) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    for piece in pieces {
        let len = piece_len(&piece, plans);
        let end = pos + len;
        let here: Vec<(u64, &Vec<u8>)> = patches.range(pos..end).map(|(at, b)| (*at, b)).collect();
        if here.is_empty() {
            out.push(piece);
            pos = end;
            continue;
        }
        if here.iter().any(|(at, b)| at + b.len() as u64 > end) {
            return Err(format!("a patch at {:#x} crosses a piece", here[0].0));
        }
        match piece {
            Piece::Copy(r) => {
                let mut at_in = r.start;
                for (at, bytes) in here {
                    let start = r.start + (at - pos);
                    if start > at_in {
                        out.push(Piece::Copy(at_in..start));
                    }
                    out.push(Piece::Owned(bytes.clone()));
                    at_in = start + bytes.len() as u64;
                }
                if at_in < r.end {
                    out.push(Piece::Copy(at_in..r.end));
                }
            }
            Piece::Owned(mut v) => {
                for (at, bytes) in here {
                    let i = (at - pos) as usize;
                    v[i..i + bytes.len()].copy_from_slice(bytes);
                }
                out.push(Piece::Owned(v));
            }
            Piece::Zeros(_) | Piece::Unit(_) => {
                return Err(format!(
                    "a pointer at {:#x} lies in a rewritten container",
                    here[0].0
                ));
            }
        }
        pos = end;
    }
    Ok(out)
}

/// A relocatable host object: every section holding a rewritten unit gets its new size and
/// the sections are laid out again in their file order (each at its alignment), with the
/// section header table after them. No section index changes, so symbols, relocations and
/// `sh_link`/`sh_info` stay valid; what is checked is that nothing points *into* a resized
/// section beyond its start: such a section must hold exactly one unit, at its start; no
/// relocation section may apply to it; symbols defined in it must be at offset 0 (their
/// size, when it was the section's, becomes the new size); relocations against them must
/// have addend 0 (`RELA`; `REL` relocations against them are refused). Anything else is
/// refused with the reason.
fn relocatable(data: &[u8], plans: &[UnitPlan<'_>]) -> Result<(Vec<Piece>, Layout), String> {
    use object::elf::{Rela64, Sym64, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_SYMTAB};
    let h = FileHeader64::<LE>::parse(data).map_err(elf_err("ELF header"))?;
    if h.e_phnum(LE) != 0 {
        return Err("relocatable object with program headers".into());
    }
    if h.e_shnum(LE) == 0 || h.e_shstrndx(LE) == object::elf::SHN_XINDEX {
        return Err("extended section numbering is not handled".into());
    }
    let sections = h.sections(LE, data).map_err(elf_err("section headers"))?;
    let shdrs: Vec<SectionHeader64<LE>> = sections.iter().copied().collect();
    let file_range = |sh: &SectionHeader64<LE>| -> Range<u64> {
        let off = sh.sh_offset(LE);
        let size = if sh.sh_type(LE) == SHT_NOBITS {
            0
        } else {
            sh.sh_size(LE)
        };
        off..off.saturating_add(size)
    };
    // The section of every changed unit, and its new contents.
    struct Change {
        unit: usize,
        tail: Range<u64>,
        new_size: u64,
    }
    let mut changes: Vec<(usize, Change)> = Vec::new();
    // Sections of a bundled host object to remove.
    let mut removed: Vec<usize> = Vec::new();
    for p in plans {
        if let Body::DropSections(ids) = &p.body {
            for id in ids {
                let name = format!("__CLANG_OFFLOAD_BUNDLE__{id}");
                let i = (0..shdrs.len())
                    .find(|&i| {
                        sections
                            .section_name(LE, &shdrs[i])
                            .is_ok_and(|n| n == name.as_bytes())
                    })
                    .ok_or_else(|| format!("section {name} not found"))?;
                removed.push(i);
            }
        }
    }
    removed.sort_unstable();
    for (n, p) in plans.iter().enumerate() {
        if matches!(p.body, Body::DropSections(_)) {
            continue;
        }
        let index = shdrs
            .iter()
            .position(|sh| {
                let r = file_range(sh);
                r.start <= p.range.start && p.range.end <= r.end && r.end > r.start
            })
            .ok_or_else(|| format!("{}: the unit is not inside one section", p.location))?;
        if matches!(p.body, Body::Same) {
            continue;
        }
        let r = file_range(&shdrs[index]);
        let others = plans
            .iter()
            .filter(|q| r.start <= q.range.start && q.range.end <= r.end)
            .count();
        if p.range.start != r.start || others != 1 {
            return Err(format!(
                "{}: a rewritten unit must be alone at the start of its section in a relocatable object",
                p.location
            ));
        }
        let mut tail = p.range.end..r.end;
        if data
            .get(tail.start as usize..tail.end as usize)
            .is_some_and(|b| b.iter().all(|x| *x == 0))
        {
            tail = tail.end..tail.end;
        }
        let new_size = p.new_len + (tail.end - tail.start);
        changes.push((
            index,
            Change {
                unit: n,
                tail,
                new_size,
            },
        ));
    }
    let changed = |i: usize| changes.iter().find(|(j, _)| *j == i).map(|(_, c)| c);
    // References into the resized sections.
    let mut symtab_patch: Option<(usize, Vec<u8>)> = None;
    for (si, sh) in shdrs.iter().enumerate() {
        let ty = sh.sh_type(LE);
        if (ty == SHT_RELA || ty == SHT_REL) && changed(sh.sh_info(LE) as usize).is_some() {
            return Err("relocations apply to a section holding device code".into());
        }
        if ty != SHT_SYMTAB {
            continue;
        }
        let syms: &[Sym64<LE>] = sh
            .data_as_array(LE, data)
            .map_err(elf_err("symbol table"))?;
        let mut patched = sh.data(LE, data).map_err(elf_err("symbol table"))?.to_vec();
        for (k, sym) in syms.iter().enumerate() {
            let Some(c) = changed(usize::from(sym.st_shndx.get(LE).0)) else {
                continue;
            };
            let old = shdrs[usize::from(sym.st_shndx.get(LE).0)].sh_size(LE);
            if sym.st_value(LE) != 0 {
                return Err("a symbol points inside a section holding device code".into());
            }
            let size = sym.st_size(LE);
            if size == old && size != c.new_size {
                let mut q = *sym;
                q.st_size = U64::new(LE, c.new_size);
                let at = k * std::mem::size_of::<Sym64<LE>>();
                patched[at..at + std::mem::size_of::<Sym64<LE>>()]
                    .copy_from_slice(object::pod::bytes_of(&q));
            } else if size > c.new_size {
                return Err("a symbol is larger than the pruned section".into());
            }
        }
        // Relocations against symbols of the resized sections.
        for rsh in shdrs.iter() {
            if rsh.sh_link(LE) as usize != si {
                continue;
            }
            let targets_changed = |sym: usize| {
                syms.get(sym)
                    .is_some_and(|s| changed(usize::from(s.st_shndx.get(LE).0)).is_some())
            };
            if rsh.sh_type(LE) == SHT_RELA {
                let relas: &[Rela64<LE>] = rsh
                    .data_as_array(LE, data)
                    .map_err(elf_err("relocations"))?;
                for r in relas {
                    if targets_changed(r.r_sym(LE, false) as usize) && r.r_addend.get(LE) != 0 {
                        return Err(
                            "a relocation points inside a section holding device code".into()
                        );
                    }
                }
            } else if rsh.sh_type(LE) == SHT_REL {
                let rels: &[object::elf::Rel64<LE>] = rsh
                    .data_as_array(LE, data)
                    .map_err(elf_err("relocations"))?;
                if rels.iter().any(|r| targets_changed(r.r_sym(LE) as usize)) {
                    return Err("REL relocations against device code are not handled".into());
                }
            }
        }
        if patched != sh.data(LE, data).map_err(elf_err("symbol table"))? {
            if symtab_patch.is_some() {
                return Err("more than one symbol table".into());
            }
            symtab_patch = Some((si, patched));
        }
    }
    // Removing sections renumbers those after them: allowed only when no reference
    // (sh_link, the sh_info of relocation sections, e_shstrndx, a symbol's section) names
    // the first removed section or any after it. The bundler appends its sections last.
    if let Some(&first) = removed.first() {
        let mut highest = usize::from(h.e_shstrndx(LE).0);
        for sh in &shdrs {
            highest = highest.max(sh.sh_link(LE) as usize);
            let ty = sh.sh_type(LE);
            if ty == SHT_RELA
                || ty == SHT_REL
                || sh.sh_flags(LE).0 & object::elf::SHF_INFO_LINK.0 != 0
            {
                highest = highest.max(sh.sh_info(LE) as usize);
            }
            if ty == SHT_SYMTAB || ty == object::elf::SHT_DYNSYM {
                let syms: &[Sym64<LE>] = sh
                    .data_as_array(LE, data)
                    .map_err(elf_err("symbol table"))?;
                for sym in syms {
                    let x = sym.st_shndx.get(LE).0;
                    if x < object::elf::SHN_LORESERVE {
                        highest = highest.max(usize::from(x));
                    }
                }
            }
            if ty == object::elf::SHT_GROUP || ty == object::elf::SHT_SYMTAB_SHNDX {
                return Err(
                    "section groups or extended symbol indices with bundle sections to remove"
                        .into(),
                );
            }
        }
        if highest >= first {
            return Err(format!(
                "bundle section {first} cannot be removed: section {highest} or an earlier one after it is referenced"
            ));
        }
    }
    // Lay the sections out again, in file order.
    let mut order: Vec<usize> = (1..shdrs.len()).filter(|i| !removed.contains(i)).collect();
    order.sort_by_key(|&i| shdrs[i].sh_offset(LE));
    let mut last_end = 0u64;
    for &i in &order {
        let r = file_range(&shdrs[i]);
        if r.end > r.start {
            if r.start < last_end {
                return Err("sections overlap in the file".into());
            }
            last_end = r.end;
        }
    }
    let mut pieces = Vec::new();
    let mut new_shdrs = shdrs.clone();
    let ehsize = u64::from(h.e_ehsize(LE)).max(64);
    let mut pos = ehsize;
    for &i in &order {
        let sh = &shdrs[i];
        let align = sh.sh_addralign(LE).max(1);
        let at = pos.div_ceil(align) * align;
        new_shdrs[i].sh_offset = U64::new(LE, at);
        if sh.sh_type(LE) == SHT_NOBITS {
            continue;
        }
        pieces.push(Piece::Zeros(at - pos));
        pos = at;
        if let Some(c) = changed(i) {
            pieces.push(Piece::Unit(c.unit));
            if c.tail.end > c.tail.start {
                pieces.push(Piece::Copy(c.tail.clone()));
            }
            new_shdrs[i].sh_size = U64::new(LE, c.new_size);
            pos += c.new_size;
        } else if let Some((_, bytes)) = symtab_patch.as_ref().filter(|(k, _)| *k == i) {
            pos += bytes.len() as u64;
            pieces.push(Piece::Owned(bytes.clone()));
        } else {
            let r = file_range(sh);
            pos += r.end - r.start;
            pieces.push(Piece::Copy(r));
        }
    }
    let shoff = pos.div_ceil(8) * 8;
    pieces.push(Piece::Zeros(shoff - pos));
    let mut table = Vec::new();
    for (i, sh) in new_shdrs.iter().enumerate() {
        if !removed.contains(&i) {
            table.extend_from_slice(object::pod::bytes_of(sh));
        }
    }
    pieces.push(Piece::Owned(table));
    let mut eh = *h;
    eh.e_shoff = U64::new(LE, shoff);
    let shnum = shdrs.len() - removed.len();
    eh.e_shnum = object::U16::new(LE, u16::try_from(shnum).map_err(|_| "too many sections")?);
    let mut header = object::pod::bytes_of(&eh).to_vec();
    header.resize(ehsize as usize, 0);
    if let Some(extra) = data.get(64..ehsize as usize) {
        header[64..].copy_from_slice(extra);
    }
    pieces.insert(0, Piece::Owned(header));
    Ok((
        pieces,
        Layout {
            name: format!(
                "relocatable object: {} section(s) resized, {} bundle section(s) removed, sections laid out again (symbols and relocations unchanged)",
                changes.len(),
                removed.len()
            ),
        },
    ))
}

/// `pieces` (whose output offsets are those of the input) without the bytes in `holes`
/// and without anything from `end` on.
fn cut(pieces: Vec<Piece>, plans: &[UnitPlan<'_>], holes: &[Range<u64>], end: u64) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    for piece in pieces {
        let len = piece_len(&piece, plans);
        let r = pos..pos + len;
        pos += len;
        // Parts of r outside every hole and before `end`.
        let first = r.start..r.end.min(end);
        let mut keep: Vec<Range<u64>> = std::iter::once(first).collect();
        for h in holes {
            keep = keep
                .into_iter()
                .flat_map(|k| {
                    let mut v = Vec::new();
                    if k.start < h.start.min(k.end) {
                        v.push(k.start..h.start.min(k.end));
                    }
                    if h.end.max(k.start) < k.end {
                        v.push(h.end.max(k.start)..k.end);
                    }
                    v
                })
                .collect();
        }
        let whole = keep.len() == 1 && keep.first() == Some(&r);
        match piece {
            p if whole => out.push(p),
            Piece::Copy(c) => {
                for k in keep {
                    out.push(Piece::Copy(
                        c.start + (k.start - r.start)..c.start + (k.end - r.start),
                    ));
                }
            }
            Piece::Zeros(_) => {
                for k in keep {
                    out.push(Piece::Zeros(k.end - k.start));
                }
            }
            // A rewritten unit never reaches into a hole (holes start after its new end).
            p @ (Piece::Unit(_) | Piece::Owned(_)) => {
                if !keep.is_empty() {
                    out.push(p);
                }
            }
        }
    }
    out
}

fn piece_len(p: &Piece, plans: &[UnitPlan<'_>]) -> u64 {
    match p {
        Piece::Copy(r) => r.end - r.start,
        Piece::Unit(i) => plans.get(*i).map_or(0, |p| p.new_len),
        Piece::Zeros(n) => *n,
        Piece::Owned(v) => v.len() as u64,
    }
}

fn pieces_len(pieces: &[Piece], plans: &[UnitPlan<'_>]) -> u64 {
    pieces.iter().map(|p| piece_len(p, plans)).sum()
}

/// A writer that releases the input pages of what it has written from the map.
struct Releasing<'i, W: Write> {
    out: W,
    input: &'i Input,
}

impl<W: Write> Write for Releasing<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let mapped = self.input.offset_of(buf).is_some();
        if mapped {
            self.input.will_read(buf);
        }
        for chunk in buf.chunks(CHUNK) {
            self.out.write_all(chunk)?;
            if mapped {
                self.input.release(chunk);
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

const CHUNK: usize = 4 << 20;

fn write_pieces(
    out: &mut File,
    input: &Input,
    pieces: &[Piece],
    plans: &[UnitPlan<'_>],
) -> std::io::Result<()> {
    let data = input.bytes();
    let mut w = Releasing {
        out: BufWriter::with_capacity(1 << 20, out),
        input,
    };
    for piece in pieces {
        match piece {
            Piece::Copy(r) => {
                let part = data
                    .get(r.start as usize..r.end as usize)
                    .ok_or_else(|| std::io::Error::other("range outside the input"))?;
                w.write_all(part)?;
            }
            Piece::Zeros(n) => {
                let zeros = [0u8; 4096];
                let mut left = *n;
                while left > 0 {
                    let k = left.min(4096) as usize;
                    w.write_all(&zeros[..k])?;
                    left -= k as u64;
                }
            }
            Piece::Owned(v) => w.write_all(v)?,
            Piece::Unit(i) => {
                let p = plans
                    .get(*i)
                    .ok_or_else(|| std::io::Error::other("unit index"))?;
                match &p.body {
                    Body::Same | Body::DropSections(_) => {}
                    Body::Owned(v) => w.write_all(v)?,
                    Body::Spliced(head, parts) => {
                        w.write_all(head)?;
                        for part in parts {
                            w.write_all(part)?;
                        }
                    }
                    Body::Bundle { entries, align } => {
                        offload_image::write::bundle::write_bundle(&mut w, entries, *align)
                            .map_err(|e| std::io::Error::other(e.to_string()))?;
                    }
                }
            }
        }
    }
    w.flush()
}

/// Writes OUT through a temporary file in the same directory, renamed when complete.
fn write_atomically(
    path: &Path,
    original: &Path,
    f: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("OUT has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.prune-{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = File::create(&tmp)?;
        if let Ok(meta) = std::fs::metadata(original) {
            let _ = file.set_permissions(meta.permissions());
        }
        f(&mut file)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn report(
    args: &Args,
    plans: &[UnitPlan<'_>],
    layout: &Layout,
    size_before: u64,
    size_after: u64,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let kept: usize = plans.iter().map(|p| p.kept.len()).sum();
    let dropped: usize = plans.iter().map(|p| p.dropped.len()).sum();
    if args.json {
        for p in plans {
            json_line(
                out,
                &UnitRecord {
                    unit: &p.location,
                    index: p.index,
                    format: p.format,
                    offset: p.range.start,
                    kept: &p.kept,
                    dropped: &p.dropped,
                    missing: &p.missing,
                    whole: p.whole,
                    bytes_before: p.range.end - p.range.start,
                    bytes_after: p.new_len,
                    note: p.note.as_deref(),
                },
            )?;
        }
        json_line(
            out,
            &Summary {
                file: &args.file.display().to_string(),
                layout: &layout.name,
                keep: &args.keep,
                units: plans.len(),
                images_kept: kept,
                images_dropped: dropped,
                size_before,
                size_after,
                saved: size_before.saturating_sub(size_after),
                dry_run: args.dry_run,
            },
        )?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = plans
        .iter()
        .map(|p| {
            let mut note = p.note.clone().unwrap_or_default();
            if !p.missing.is_empty() && !p.whole {
                note = format!("no image for {}", p.missing.join(", "));
            }
            vec![
                format!("{} #{}", p.location, p.index),
                p.format.to_string(),
                p.kept.join(" "),
                p.dropped.join(" "),
                (p.range.end - p.range.start).to_string(),
                p.new_len.to_string(),
                note,
            ]
        })
        .collect();
    table(
        out,
        &[
            "UNIT", "FORMAT", "KEPT", "DROPPED", "BYTES", "AFTER", "NOTE",
        ],
        &rows,
    )?;
    writeln!(
        out,
        "{}: {} images kept, {} dropped; {} -> {} bytes ({} saved){}; layout: {}",
        args.file.display(),
        kept,
        dropped,
        size_before,
        size_after,
        size_before.saturating_sub(size_after),
        if args.dry_run {
            ", dry run: nothing written"
        } else {
            ""
        },
        layout.name
    )
}
