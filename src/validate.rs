//! Checking a file before a release: every problem the readers find, what tools and runtimes
//! will trip over, and where the runtimes' rules choose differently (`VALIDATE.md`).
//!
//! [`validate`] walks the file as [`crate::units`] does and reports [`Finding`]s, each with a
//! [`Severity`], a stable [`Code`], the container, the byte offset and one sentence:
//!
//! * errors: every structural error a reader raises ([`Code::Reader`], named after the
//!   [`ErrorKind`]: `truncated`, `out-of-bounds`, `hash-mismatch`, `limit-exceeded`, ...);
//!   the walk cannot go past one, so it is the last finding;
//! * warnings: bytes skipped between containers (`skipped-bytes`), an uncompressed bundle
//!   whose header and descriptor table pass 4096 bytes (`bundle-header-over-4k`), an entry
//!   ID or OffloadBinary `arch` that disagrees with the code object's ELF header
//!   (`id-elf-mismatch`), a generic code object below code object v6
//!   (`generic-below-cov6`), a code object no HSA runtime loads (`unloadable-elf`), a bundle
//!   or `CCOB` magic inside a payload (`magic-in-payload`), an entry ID spelling that some
//!   tools or runtimes reject (`id-spelling`), an entry ID with an offload kind LLVM's
//!   bundler refuses (`unknown-offload-kind`), an empty entry ID (`empty-entry-id`), two
//!   bundle entries whose payloads overlap (`overlapping-entries`);
//! * errors found in readable files: a device entry that the runtime loads as an AMDGPU code
//!   object but whose bytes are not one (`not-code-object`);
//! * in PE images (`PE.md` §3): a wrapper pointer without a DIR64 base relocation
//!   (`pe-wrapper-unrelocated`, error), one that is not a container start
//!   (`pe-wrapper-not-container`, error), a wrapper count that differs from the container
//!   count (`pe-wrapper-count`, warning);
//! * notes: devices for which the runtime that reads a unit (ROCm CLR for bundles, the LLVM
//!   offload runtime for OffloadBinaries) loads another image than the best match
//!   (`runtimes-differ`).
//!
//! Reading the images needs their bytes: compressed bundles are decompressed (with the
//! decoders of [`ReadOptions::decoders`]) one unit at a time.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::bytes::{self, u64_of};
use crate::container::{units, Unit, UnitContent};
use crate::error::{Error, ErrorKind};
use crate::image::{Format, Image, OffloadKind};
use crate::raw::{BUNDLE_MAGIC, CCOB_MAGIC, HIP_WRAPPER_MAGIC, NVFATBIN_WRAPPER_MAGIC};
use crate::select::{select, Policy, SelectOptions};
use crate::arch::amdgpu::{Feature, FeatureState, TargetId};
use crate::arch::elf::{AmdgpuElfProblem, DeviceElf};
use crate::arch::{identify, Device, Target};
use crate::ReadOptions;

/// How serious a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Information: the file is sound, but runtimes behave differently on it.
    Note,
    /// The file reads, but some tool or runtime will mishandle it.
    Warning,
    /// The file, or part of it, cannot be read, or a runtime would load an entry that is
    /// not code.
    Error,
}

impl Severity {
    /// `"note"`, `"warning"`, `"error"`.
    pub const fn name(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// What a finding is about. [`Code::name`] is stable for scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// A reader error, named after its kind.
    Reader(ErrorKind),
    /// Bytes between containers that are neither padding nor a container (`FORMATS.md` §2.4).
    SkippedBytes,
    /// An uncompressed bundle whose header and descriptor table exceed 4096 bytes: ROCm CLR
    /// hands comgr only the first 4 KiB of an uncompressed bundle (`COMPATIBILITY.md` §7.3).
    BundleHeaderOver4k,
    /// The entry ID (or OffloadBinary `arch`) and the code object's ELF header name
    /// different targets.
    IdElfMismatch,
    /// A generic code object in a code object version below 6.
    GenericBelowCov6,
    /// An AMDGPU code object no HSA runtime loads (code object v2, PAL/Mesa OS ABI, unknown
    /// processor or ABI version, features the processor lacks).
    UnloadableElf,
    /// A bundle or `CCOB` magic inside a payload: tools that scan for magic bytes misread
    /// the file.
    MagicInPayload,
    /// An entry ID spelling that some tools or runtimes reject.
    IdSpelling,
    /// The runtimes' rules load different images of one unit on some device.
    RuntimesDiffer,
    /// A device entry that HIP or OpenMP would load as an AMDGPU code object (kind `hip`,
    /// `hipv4`, `hcc` or `openmp`, triple `amdgcn-…`, a target named) whose bytes are not
    /// an ELF code object, bitcode or SPIR-V: comgr still picks it by its ID, and the HSA
    /// loader then refuses it.
    NotCodeObject,
    /// A bundle entry ID whose offload kind LLVM 22's `clang-offload-bundler` refuses
    /// ("unknown offloading kind"; anything but `host`, `openmp`, `hip`, `hipv4` and the
    /// legacy `hcc`, which [`Code::IdSpelling`] reports): it cannot unbundle the entry, and
    /// comgr's lookup skips it.
    UnknownOffloadKind,
    /// A bundle entry with an empty ID (or one of NUL bytes only): no runtime looks it up,
    /// LLVM 22's `clang-offload-bundler` stops unbundling when it meets it, and crashes on
    /// the all-zero descriptor that damage usually leaves.
    EmptyEntryId,
    /// Two entries of a binary bundle whose payloads overlap without being the same range:
    /// LLVM's writers never do this, so one entry's bytes belong to another.
    OverlappingEntries,
    /// A HIP/CUDA wrapper of a PE image whose container pointer has no DIR64 base
    /// relocation: loaded at another base (ASLR), the runtime reads the wrong address.
    PeWrapperUnrelocated,
    /// A HIP/CUDA wrapper of a PE image whose container pointer (`value − ImageBase`) is not
    /// the start of a container.
    PeWrapperNotContainer,
    /// A PE image with another number of HIP/CUDA wrappers than containers in its
    /// `.hip_fat` / `.nv_fatb` sections: some container is never registered, or a wrapper
    /// registers one twice.
    PeWrapperCount,
    /// A split library's `HIPK` wrapper whose code object has no `.kpack` archive
    /// installed where the loader looks (`KPACK.md` §4): it loads on no device. Found by a
    /// caller with a filesystem (`loader-sim validate`); [`validate`] never reports it.
    KpackArchiveMissing,
    /// A `.kpack` archive whose file name holds a `:` (every `xnack±` archive): Windows
    /// file systems refuse the name, and `ROCM_KPACK_PATH` cannot name it on Linux (its
    /// items are split at `:`). Found by a caller that knows the file name.
    KpackArchiveName,
    /// A PTX entry whose ISA version is newer than the given NVIDIA driver compiles
    /// (`COMPATIBILITY.md` §9.5): where the driver picks it, the load fails with
    /// `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` and does not fall back. Found by
    /// [`validate_for_driver`] only.
    PtxTooNewForDriver,
    /// A HIP bundle entry whose triple is an AMDGPU subarch spelling (`amdgpu9.42-amd-amdhsa`,
    /// bare `amdgpu`; `COMPATIBILITY.md` §1.5): ROCm CLR looks entries up as
    /// `hipv4-amdgcn-amd-amdhsa--<isa>` (the compressed path compares the unbundled name
    /// as text), so no CLR release read loads it; comgr's ISA names take the spelling only
    /// from ROCm/llvm-project#3622.
    SubarchTriple,
}

impl Code {
    /// The stable name: the [`ErrorKind`] name for reader errors, else `skipped-bytes`,
    /// `bundle-header-over-4k`, `id-elf-mismatch`, `generic-below-cov6`, `unloadable-elf`,
    /// `magic-in-payload`, `id-spelling`, `runtimes-differ`, `not-code-object`,
    /// `unknown-offload-kind`, `empty-entry-id`, `overlapping-entries`,
    /// `pe-wrapper-unrelocated`, `pe-wrapper-not-container`, `pe-wrapper-count`,
    /// `kpack-archive-missing`, `kpack-archive-name`, `ptx-too-new-for-driver`,
    /// `subarch-triple`.
    pub const fn name(self) -> &'static str {
        match self {
            Code::Reader(kind) => kind.name(),
            Code::SkippedBytes => "skipped-bytes",
            Code::BundleHeaderOver4k => "bundle-header-over-4k",
            Code::IdElfMismatch => "id-elf-mismatch",
            Code::GenericBelowCov6 => "generic-below-cov6",
            Code::UnloadableElf => "unloadable-elf",
            Code::MagicInPayload => "magic-in-payload",
            Code::IdSpelling => "id-spelling",
            Code::RuntimesDiffer => "runtimes-differ",
            Code::NotCodeObject => "not-code-object",
            Code::UnknownOffloadKind => "unknown-offload-kind",
            Code::EmptyEntryId => "empty-entry-id",
            Code::OverlappingEntries => "overlapping-entries",
            Code::PeWrapperUnrelocated => "pe-wrapper-unrelocated",
            Code::PeWrapperNotContainer => "pe-wrapper-not-container",
            Code::PeWrapperCount => "pe-wrapper-count",
            Code::KpackArchiveMissing => "kpack-archive-missing",
            Code::KpackArchiveName => "kpack-archive-name",
            Code::PtxTooNewForDriver => "ptx-too-new-for-driver",
            Code::SubarchTriple => "subarch-triple",
        }
    }

    /// The severity findings of this code have.
    pub const fn severity(self) -> Severity {
        match self {
            Code::Reader(_)
            | Code::NotCodeObject
            | Code::PeWrapperUnrelocated
            | Code::PeWrapperNotContainer => Severity::Error,
            Code::RuntimesDiffer => Severity::Note,
            _ => Severity::Warning,
        }
    }
}

/// One problem found by [`validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// What it is about.
    pub code: Code,
    /// Where the container is (`file`, `section .hip_fatbin`, ...; the walk's
    /// [`crate::Location`]).
    pub container: String,
    /// Byte offset in the file.
    pub offset: u64,
    /// One sentence.
    pub message: String,
}

impl Finding {
    /// The severity ([`Code::severity`]).
    pub const fn severity(&self) -> Severity {
        self.code.severity()
    }

    fn new(code: Code, container: &str, offset: u64, message: String) -> Self {
        Finding {
            code,
            container: container.to_string(),
            offset,
            message,
        }
    }

    fn error(container: &str, e: &Error) -> Self {
        let mut message = e.what().to_string();
        if let Some(inner) = e.decompressed_offset() {
            message.push_str(&format!(" (at byte {inner} of the decompressed content)"));
        }
        Finding::new(Code::Reader(e.kind()), container, e.offset(), message)
    }
}

/// Most bytes of an uncompressed bundle's header and descriptor table ROCm CLR reads.
pub const CLR_BUNDLE_HEADER_LIMIT: u64 = 4096;

/// Checks `data` and returns every finding in discovery order (see the module
/// documentation). A damaged container, an error of the walk and an error opening one
/// unit (a bad hash, a corrupt stream) are reported, and the walk goes on where it can
/// ([`crate::units`]).
///
/// ```
/// use offload_image::validate::{validate, Severity};
/// use offload_image::ReadOptions;
///
/// let data = include_bytes!("../tests/data/corpus/bundles/hip_6arch.bundle");
/// let findings = validate(data, &ReadOptions::default());
/// assert!(findings.iter().all(|f| f.severity() < Severity::Error));
/// ```
pub fn validate(data: &[u8], options: &ReadOptions) -> Vec<Finding> {
    validate_for_driver(data, options, &crate::driver::CudaDriver::default())
}

/// [`validate`], and for an NVIDIA `driver` of known version, every PTX entry whose ISA
/// version the driver does not compile ([`Code::PtxTooNewForDriver`]).
pub fn validate_for_driver(
    data: &[u8],
    options: &ReadOptions,
    driver: &crate::driver::CudaDriver,
) -> Vec<Finding> {
    validate_counting(data, options, driver, &mut Work::default())
}

/// What a validation read of the images: a count of work that tests bound hostile inputs
/// by (issue 43), rather than the clock. Entries that name one range of the input (or of
/// a unit's decompressed content) are checked once: the work is linear in the input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Bytes of images scanned whole (for a container magic), each distinct range once.
    /// The rest of an image's checks read its first 4 KiB at most.
    pub bytes_scanned: u64,
    /// Ranges scanned whole.
    pub ranges_scanned: u64,
}

/// [`validate_for_driver`], adding what it read to `work`.
pub fn validate_counting(
    data: &[u8],
    options: &ReadOptions,
    driver: &crate::driver::CudaDriver,
    work: &mut Work,
) -> Vec<Finding> {
    validate_units(data, options, driver, work, |units, check| {
        units.iter().map(check).collect()
    })
}

/// [`validate_counting`] with the units checked on `jobs` threads
/// ([`crate::parallel::map_ordered`], feature `parallel`: each worker decodes and hashes
/// one compressed unit at a time): the same findings in the same order as with one.
#[cfg(feature = "parallel")]
pub fn validate_jobs(
    data: &[u8],
    options: &ReadOptions,
    driver: &crate::driver::CudaDriver,
    work: &mut Work,
    jobs: usize,
) -> Vec<Finding> {
    validate_units(data, options, driver, work, |units, check| {
        crate::parallel::map_ordered(units, jobs, |_, u| check(u))
    })
}

/// [`validate()`] with the units checked on at most `jobs` threads (feature `parallel`; each
/// worker decodes and hashes one compressed unit at a time): the same findings, in the same
/// order, as with one. The C API's `oi_validate` calls it with the threads of
/// `oi_read_options.flags`.
///
/// ```
/// use offload_image::ReadOptions;
///
/// let data = include_bytes!("../tests/data/corpus/bundles/hip_6arch.bundle");
/// let serial = offload_image::validate(data, &ReadOptions::default());
/// assert_eq!(offload_image::validate_threaded(data, &ReadOptions::default(), 2), serial);
/// ```
#[cfg(feature = "parallel")]
pub fn validate_threaded(data: &[u8], options: &ReadOptions, jobs: usize) -> Vec<Finding> {
    validate_jobs(
        data,
        options,
        &crate::driver::CudaDriver::default(),
        &mut Work::default(),
        jobs,
    )
}

/// The findings of one unit, and what checking it read.
type UnitFindings = (Vec<Finding>, Work);

/// [`validate_counting`], the units (found first: headers only) checked by `each`, which
/// returns their findings in the units' order.
fn validate_units<'d>(
    data: &'d [u8],
    options: &ReadOptions,
    driver: &crate::driver::CudaDriver,
    work: &mut Work,
    each: impl FnOnce(
        &[Result<Unit<'d>, crate::Error>],
        &(dyn Fn(&Result<Unit<'d>, crate::Error>) -> UnitFindings + Sync),
    ) -> Vec<UnitFindings>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    // The offsets of the units of the file itself (not of archive members).
    let mut starts = Vec::new();
    let mut complete = true;
    // A split library: every `HIPK` wrapper's ref record must read (`KPACK.md` §3).
    if data.starts_with(crate::raw::ELF_MAGIC) || data.starts_with(b"MZ") {
        if let Ok(host) = crate::host::HostFile::parse(data) {
            for (i, w) in crate::host::kpack::split_wrappers(&host).iter().enumerate() {
                if let Err((code, e)) = w {
                    let mut f = Finding::error(&format!("wrapper {i}"), e);
                    f.message
                        .push_str(&format!(": the kpack loader answers {}", code.code()));
                    out.push(f);
                }
            }
        }
    }
    let found: Vec<_> = units(data, options).collect();
    for unit in &found {
        match unit {
            Ok(unit) if unit.location.path().len() <= 1 => starts.push(unit.location.offset),
            Ok(_) => {}
            Err(_) => complete = false,
        }
    }
    let check = |unit: &Result<Unit<'d>, crate::Error>| -> UnitFindings {
        let mut findings = Vec::new();
        let mut read = Work::default();
        match unit {
            Ok(unit) => check_unit(unit, options, driver, &mut read, &mut findings),
            Err(e) => findings.push(Finding::error("file", e)),
        }
        (findings, read)
    };
    for (findings, read) in each(&found, &check) {
        out.extend(findings);
        work.bytes_scanned = work.bytes_scanned.saturating_add(read.bytes_scanned);
        work.ranges_scanned = work.ranges_scanned.saturating_add(read.ranges_scanned);
    }
    if complete && data.starts_with(b"MZ") {
        check_pe_wrappers(data, &starts, &mut out);
    }
    out
}

/// The wrappers of a PE image against its containers (`PE.md` §3): each container pointer
/// covered by a DIR64 base relocation and pointing at a container start, as many wrappers
/// as containers.
fn check_pe_wrappers(data: &[u8], starts: &[u64], out: &mut Vec<Finding>) {
    use crate::host::{HostFile, SectionRole};
    let host = match HostFile::parse(data) {
        Ok(HostFile::Pe(pe)) => pe,
        Ok(_) => return,
        Err(e) => {
            out.push(Finding::error("file", &e));
            return;
        }
    };
    let mut wrappers = 0usize;
    for slot in host.fat_binary_wrappers() {
        let record = host.bytes_from(slot.address).and_then(|b| b.get(..8));
        let magic = record
            .and_then(|b| b.get(..4))
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, u32::from_le_bytes);
        if magic != HIP_WRAPPER_MAGIC && magic != NVFATBIN_WRAPPER_MAGIC {
            continue;
        }
        wrappers = wrappers.saturating_add(1);
        let container = format!("section {}", String::from_utf8_lossy(slot.section));
        let field = slot.address.saturating_add(8);
        let at = slot.offset.saturating_add(8);
        if !host.is_relocated(field) {
            out.push(Finding::new(
                Code::PeWrapperUnrelocated,
                &container,
                at,
                format!(
                    "wrapper {} holds its container pointer without a DIR64 base relocation: when Windows loads the image at another base, the runtime reads the container at the wrong address",
                    slot.index
                ),
            ));
            continue;
        }
        let target = host.pointer_at(field).ok();
        let offset = target.and_then(|p| {
            let (s, off) = host.section_at(p)?;
            s.offset.checked_add(off)
        });
        if !offset.is_some_and(|o| starts.contains(&o)) {
            out.push(Finding::new(
                Code::PeWrapperNotContainer,
                &container,
                at,
                match target {
                    Some(rva) => format!(
                        "wrapper {} points at RVA {rva:#x}, which is not the start of a container",
                        slot.index
                    ),
                    None => format!("wrapper {}'s container pointer does not read", slot.index),
                },
            ));
        }
    }
    let containers = host
        .sections()
        .iter()
        .filter(|s| matches!(s.role(), SectionRole::HipFatbin | SectionRole::NvFatbin))
        .map(|s| {
            let end = s.offset.saturating_add(u64_of(s.data.len()));
            starts.iter().filter(|&&o| o >= s.offset && o < end).count()
        })
        .sum::<usize>();
    if (wrappers > 0 || containers > 0) && wrappers != containers {
        out.push(Finding::new(
            Code::PeWrapperCount,
            "file",
            0,
            format!(
                "{wrappers} HIP/CUDA wrappers for {containers} containers: a container without a wrapper is never registered"
            ),
        ));
    }
}

/// Every finding of one unit: its container's header, each of its images, the images
/// side by side (overlaps, runtimes that choose differently), and the bytes skipped after
/// it.
fn check_unit(
    unit: &Unit<'_>,
    options: &ReadOptions,
    driver: &crate::driver::CudaDriver,
    work: &mut Work,
    out: &mut Vec<Finding>,
) {
    let container = unit.location.to_string();
    let at = unit.location.offset;
    check_container(unit, &container, at, out);
    let open = match unit.open(options) {
        Ok(open) => open,
        Err(e) => {
            out.push(Finding::error(&container, &e));
            return;
        }
    };
    // A binary bundle's table (in the file, or decompressed): its bytes and their offset in
    // the file (`None` when decompressed).
    let table: Option<(&[u8], Option<u64>)> = match &unit.content {
        UnitContent::Bundle(b) => Some((b.data(), Some(at))),
        UnitContent::Compressed(_) => open
            .decompressed()
            .filter(|d| crate::bundle::is_bundle(d))
            .map(|d| (d, None)),
        _ => None,
    };
    let place = Place {
        container: &container,
        at,
        table,
    };
    let device_images = check_images(&open, &place, options, driver, work, out);
    if let Some((base, in_file)) = table {
        overlapping(&open, base, in_file, &container, at, out);
    }
    if device_images > 1 {
        runtimes_differ(&open, &container, at, out);
    }
    if let Some(r) = &unit.skipped {
        out.push(Finding::new(
            Code::SkippedBytes,
            &container,
            r.start,
            format!(
                "{} bytes after unit {} are neither padding nor an offload container; readers that stop here miss whatever follows (FORMATS.md §2.4)",
                r.end.saturating_sub(r.start),
                unit.index
            ),
        ));
    }
}

/// Where a unit's findings point: its container's name, its offset in the file, and its
/// binary bundle's table (its bytes and their offset in the file, `None` when
/// decompressed).
struct Place<'a> {
    container: &'a str,
    at: u64,
    table: Option<(&'a [u8], Option<u64>)>,
}

/// Findings from a unit's container header alone: a bundle header larger than ROCm CLR
/// reads, a bundle magic inside a `CCOB`'s compressed payload.
fn check_container(unit: &Unit<'_>, container: &str, at: u64, out: &mut Vec<Finding>) {
    match &unit.content {
        UnitContent::Bundle(b) if b.header_len() > CLR_BUNDLE_HEADER_LIMIT => {
            out.push(Finding::new(
                Code::BundleHeaderOver4k,
                container,
                at,
                format!(
                    "the bundle's header and descriptor table take {} bytes: ROCm CLR hands comgr only the first {CLR_BUNDLE_HEADER_LIMIT}, so HIP cannot look up its {} entries",
                    b.header_len(),
                    b.entry_count()
                ),
            ));
        }
        UnitContent::Compressed(c) => {
            if let Some(p) = magic_in(c.payload()) {
                out.push(Finding::new(
                    Code::MagicInPayload,
                    container,
                    at.saturating_add(c.header_len()).saturating_add(p.0),
                    format!(
                        "the compressed payload contains the {} magic: tools that scan for it (llvm-objdump --offloading, roc-obj) split the file there",
                        p.1
                    ),
                ));
            }
        }
        _ => {}
    }
}

/// The findings of every image of an open unit, each decoded in turn: the image itself,
/// its entry ID, a container magic in its bytes. Returns how many are device images.
///
/// Entries may all name one range (a bundle or OffloadBinary of 65,536 entries naming one
/// image, issue 43): the bytes of a range of the file or of the unit's content are
/// scanned once (every entry naming it gets the finding of that one scan, under its own
/// name); the other checks read an image's first 4 KiB at most.
fn check_images(
    open: &crate::container::OpenUnit<'_>,
    unit: &Place<'_>,
    options: &ReadOptions,
    driver: &crate::driver::CudaDriver,
    work: &mut Work,
    out: &mut Vec<Finding>,
) -> usize {
    // (address, length) of a stable range -> its container magic, if any.
    let mut magic: BTreeMap<(usize, usize), Option<(u64, &'static str)>> = BTreeMap::new();
    let container = unit.container;
    let descriptors = unit
        .table
        .map_or_else(Vec::new, |(t, _)| descriptor_offsets(t));
    let mut device_images = 0usize;
    for image in open.images() {
        let place = image.offset.unwrap_or(unit.at);
        // A slice of the file or of the unit's content stays put for the whole unit; a
        // decoded image lives in a buffer of its own (whose address may be reused).
        let stable = image.encoded.is_none();
        // Images identified from their headers are decoded here, one at a time.
        let decoded = match image.decode(options) {
            Ok(d) => d,
            Err(e) => {
                out.push(Finding::error(container, &e));
                continue;
            }
        };
        let image = image.with_bytes(&decoded);
        let key = (image.bytes.as_ptr() as usize, image.bytes.len());
        check_image(&image, container, place, driver, out);
        // ID findings point at the entry's descriptor where the file holds it.
        let id_place = match (descriptors.get(image.index), unit.table) {
            (Some(&d), Some((_, Some(base)))) => base.saturating_add(d),
            (Some(_), _) => unit.at,
            (None, _) => place,
        };
        let descriptor = descriptors.get(image.index).copied();
        let decompressed = unit.table.is_some_and(|t| t.1.is_none());
        check_id(&image, container, id_place, descriptor, decompressed, out);
        if image.offset.is_some() {
            let found = match magic.get(&key) {
                Some(found) if stable => *found,
                _ => {
                    work.bytes_scanned = work.bytes_scanned.saturating_add(u64_of(key.1));
                    work.ranges_scanned = work.ranges_scanned.saturating_add(1);
                    let found = magic_in(image.bytes);
                    if stable {
                        magic.insert(key, found);
                    }
                    found
                }
            };
            if let Some(p) = found {
                out.push(Finding::new(
                    Code::MagicInPayload,
                    container,
                    place.saturating_add(p.0),
                    format!(
                        "image {} contains the {} magic: tools that scan for it split the file there",
                        name(&image),
                        p.1
                    ),
                ));
            }
        }
        if image.offload_kind != OffloadKind::Host {
            device_images = device_images.saturating_add(1);
        }
    }
    device_images
}

/// Offsets of the entry descriptors of the binary bundle at the start of `bundle`, in
/// header order (the table was validated by the reader; reading stops at its end).
fn descriptor_offsets(bundle: &[u8]) -> Vec<u64> {
    let word = |at: u64| -> Option<u64> {
        let at = usize::try_from(at).ok()?;
        let b = bundle.get(at..at.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    };
    let mut out = Vec::new();
    let Some(count) = word(24) else {
        return out;
    };
    let mut pos: u64 = 32;
    // Each step reads inside `bundle` and moves at least 24 bytes: bounded by its length.
    for _ in 0..count {
        let Some(id_len) = word(pos.saturating_add(16)) else {
            break;
        };
        out.push(pos);
        pos = pos.saturating_add(24).saturating_add(id_len);
    }
    out
}

/// The entry ID findings: an empty ID, an offload kind LLVM's bundler refuses.
/// `place` is the descriptor's offset in the file (see [`check_unit`]); `descriptor` its
/// offset in the bundle, named in the message when the bundle was decompressed.
fn check_id(
    image: &Image<'_>,
    container: &str,
    place: u64,
    descriptor: Option<u64>,
    decompressed: bool,
    out: &mut Vec<Finding>,
) {
    let Some(id) = image.entry_id else { return };
    let inner = match descriptor {
        Some(d) if decompressed => format!(" (descriptor at byte {d} of the decompressed content)"),
        _ => String::new(),
    };
    if id.is_empty() {
        out.push(Finding::new(
            Code::EmptyEntryId,
            container,
            place,
            format!(
                "entry {} has an empty ID{inner}: no runtime looks it up, LLVM 22's clang-offload-bundler stops unbundling when it meets it (\"invalid bundle id read from the bundle\") and crashes on an all-zero descriptor",
                image.index
            ),
        ));
        return;
    }
    let kind = id.split('-').next().unwrap_or(id);
    if !matches!(kind, "host" | "openmp" | "hip" | "hipv4" | "hcc") {
        out.push(Finding::new(
            Code::UnknownOffloadKind,
            container,
            place,
            format!(
                "entry {} `{id}`{inner}: LLVM 22's clang-offload-bundler refuses the offload kind `{kind}` (\"unknown offloading kind\") and cannot unbundle the entry; comgr's lookup skips it",
                image.index
            ),
        ));
    }
}

/// Entries of a binary bundle whose payloads overlap (identical ranges are a shared
/// payload, not an overlap). `base` is the bundle (in the file at `in_file`, or
/// decompressed); each entry is reported once, against the entry that reaches furthest
/// among those that start before it.
fn overlapping(
    open: &crate::container::OpenUnit<'_>,
    base: &[u8],
    in_file: Option<u64>,
    container: &str,
    at: u64,
    out: &mut Vec<Finding>,
) {
    let images: Vec<Image<'_>> = open.images().collect();
    let mut ranges: Vec<(u64, u64, usize)> = images
        .iter()
        .filter(|i| !i.bytes.is_empty())
        .filter_map(|i| {
            let start = bytes::offset_in(base, i.bytes)?;
            Some((start, start.saturating_add(u64_of(i.bytes.len())), i.index))
        })
        .collect();
    ranges.sort_unstable();
    let show = |i: usize| images.get(i).map_or_else(String::new, name);
    let mut reach: Option<(u64, u64, usize)> = None;
    for r in ranges {
        let Some(p) = reach else {
            reach = Some(r);
            continue;
        };
        if r.0 < p.1 && (r.0, r.1) != (p.0, p.1) {
            let (place, inner) = match in_file {
                Some(f) => (f.saturating_add(r.0), ""),
                None => (at, " of the decompressed content"),
            };
            out.push(Finding::new(
                Code::OverlappingEntries,
                container,
                place,
                format!(
                    "entry {} ({}) takes bytes {}..{} of the bundle{inner}, which overlap entry {} ({}, bytes {}..{}): one of them holds the other's bytes",
                    r.2,
                    show(r.2),
                    r.0,
                    r.1,
                    p.2,
                    show(p.2),
                    p.0,
                    p.1
                ),
            ));
        }
        if r.1 > p.1 {
            reach = Some(r);
        }
    }
}

fn name(image: &Image<'_>) -> String {
    crate::arch::image_name(image).to_string()
}

/// The first bundle or `CCOB` magic in `bytes`: (offset, which).
fn magic_in(bytes: &[u8]) -> Option<(u64, &'static str)> {
    let b = bytes::find(bytes, BUNDLE_MAGIC, 0).map(|p| (u64_of(p), "__CLANG_OFFLOAD_BUNDLE__"));
    let c = bytes::find(bytes, CCOB_MAGIC, 0).map(|p| (u64_of(p), "CCOB"));
    match (b, c) {
        (Some(b), Some(c)) => Some(if b.0 <= c.0 { b } else { c }),
        (b, c) => b.or(c),
    }
}

fn check_image(
    image: &Image<'_>,
    container: &str,
    place: u64,
    driver: &crate::driver::CudaDriver,
    out: &mut Vec<Finding>,
) {
    let identity = identify(image);
    if identity.code == crate::arch::Code::Ptx {
        if let Some(refusal) = driver.refusal(identity.ptx_isa) {
            out.push(Finding::new(
                Code::PtxTooNewForDriver,
                container,
                place,
                format!(
                    "{}: {refusal}; where the driver picks this entry the module does not load",
                    name(image)
                ),
            ));
        }
    }
    if is_code_object_entry(image, &identity) && identity.code == crate::arch::Code::Other {
        out.push(Finding::new(
            Code::NotCodeObject,
            container,
            place,
            format!(
                "{}: its {} bytes are not an AMDGPU code object (nor bitcode or SPIR-V), yet comgr picks the entry by its ID and the HSA loader then fails",
                name(image),
                image.bytes.len()
            ),
        ));
    }
    if let Some(d) = identity.disagreement() {
        let who = match identity.target {
            crate::Target::Nvptx(_) => {
                "the CUDA driver picks a fatbinary entry by its header, the LLVM offload runtime checks a cubin's e_flags; the ranking here takes the ELF header"
            }
            _ => {
                "runtimes that read only the ID (comgr's lookup) and those that read the ELF header (ROCr, the ranking here) disagree"
            }
        };
        out.push(Finding::new(
            Code::IdElfMismatch,
            container,
            place,
            format!("{}: {d}; {who}", name(image)),
        ));
    }
    if let Some(DeviceElf::Amdgpu(elf)) = &identity.elf {
        let generic = elf.processor.is_some_and(|p| p.is_generic());
        if let Some(problem) = identity.elf_problem {
            let code = if generic && problem == AmdgpuElfProblem::BadGenericVersion {
                Code::GenericBelowCov6
            } else {
                Code::UnloadableElf
            };
            out.push(Finding::new(
                code,
                container,
                place,
                format!("{}: {problem}; no HSA runtime loads it", name(image)),
            ));
        }
    }
    if let Some(id) = image.entry_id {
        if let Some(f) = subarch_triple(id, image, &identity, container, place) {
            out.push(f);
        }
        if let Some(why) = spelling(id, &identity) {
            out.push(Finding::new(
                Code::IdSpelling,
                container,
                place,
                format!("entry ID `{id}`: {why}"),
            ));
        }
    }
}

/// An entry a runtime loads as an AMDGPU code object: a binary bundle entry or an
/// OffloadBinary image of kind `hip`, `hipv4`, `hcc` or `openmp` for `amdgcn` with a
/// target, holding bytes (an empty payload is no match for comgr).
fn is_code_object_entry(image: &Image<'_>, identity: &crate::arch::Identity<'_>) -> bool {
    matches!(image.format, Format::Bundle | Format::OffloadBinary)
        && image.encoded.is_none()
        && !image.bytes.is_empty()
        && matches!(
            image.offload_kind,
            OffloadKind::Hip | OffloadKind::HipV4 | OffloadKind::Hcc | OffloadKind::OpenMp
        )
        && identity.triple.is_some_and(|t| t.is_amdgpu())
        && identity.stated.is_some()
}

/// A HIP bundle entry stored under an `amdgpu` triple ([`Code::SubarchTriple`]).
fn subarch_triple(
    id: &str,
    image: &Image<'_>,
    identity: &crate::arch::Identity<'_>,
    container: &str,
    place: u64,
) -> Option<Finding> {
    let parsed = crate::entry_id::EntryId::parse(id).ok()?;
    let triple = crate::arch::Triple::parse(parsed.triple).ok()?;
    if image.format != Format::Bundle
        || !matches!(parsed.kind, "hip" | "hipv4" | "hcc")
        || !triple.arch.starts_with("amdgpu")
    {
        return None;
    }
    let legacy = match identity.named_target() {
        Some(t @ Target::Amdgpu(_)) => format!(
            "{}-amdgcn-{}-{}--{t}",
            parsed.kind, triple.vendor, triple.os
        ),
        _ => format!(
            "{}-amdgcn-{}-{}--<target id>",
            parsed.kind, triple.vendor, triple.os
        ),
    };
    Some(Finding::new(
        Code::SubarchTriple,
        container,
        place,
        format!(
            "entry ID `{id}` uses the AMDGPU triple spelling `{}`: ROCm CLR (every version read, to ROCm/rocm-systems 02ba0621) looks HIP entries up as `hipv4-amdgcn-amd-amdhsa--<isa>` and finds none here (a compressed bundle's entries are matched as text); comgr reads `amdgpu<subarch>` ISA names only from ROCm/llvm-project#3622 (2026-07-26; its first release is not known here); clang writes `amdgcn` into HIP bundles for this reason (llvm/llvm-project#217640): write `{legacy}`",
            triple.arch
        ),
    ))
}

/// Why some tools or runtimes reject the spelling of a bundle entry ID.
fn spelling(id: &str, identity: &crate::arch::Identity<'_>) -> Option<&'static str> {
    let parsed = crate::entry_id::EntryId::parse(id).ok()?;
    let fields = parsed.triple.split('-').count();
    if parsed.kind != "host" && fields < 4 {
        return Some(
            "a 3-field triple: LLVM 22's clang-offload-bundler refuses such IDs (\"invalid bundle id\") and runtimes that build 4-field queries do not match it; write `<kind>-<arch>-<vendor>-<os>-<env>-<target>`",
        );
    }
    if parsed.kind == "hcc" {
        return Some(
            "the legacy `hcc` kind: only ROCm's HIP runtime still accepts it; write `hipv4`",
        );
    }
    if identity.target == Target::AmdgcnSpirv
        && parsed.triple != "spirv64-amd-amdhsa-"
        && parsed.triple != "spirv64-amd-amdhsa-unknown"
    {
        return Some(
            "ROCm CLR looks up AMD SPIR-V only as `spirv64-amd-amdhsa--amdgcnspirv` and `spirv64-amd-amdhsa-unknown-amdgcnspirv`",
        );
    }
    if parsed.kind == "hipv4" {
        if let Some(DeviceElf::Amdgpu(elf)) = &identity.elf {
            if (2..4).contains(&elf.code_object_version) {
                return Some("`hipv4` promises code object v4 or later, but the ELF header says v2 or v3; older ROCm runtimes take the target from the ID and load it wrongly");
            }
        }
    }
    None
}

/// Devices worth asking about: every concrete processor an AMDGPU image names, with every
/// combination of its selectable features.
fn devices(images: &[Image<'_>]) -> Vec<Device> {
    let mut out: Vec<Device> = Vec::new();
    for image in images {
        let Target::Amdgpu(t) = identify(image).target else {
            continue;
        };
        if t.processor.is_generic() {
            continue;
        }
        let states = |f: Feature| -> &'static [FeatureState] {
            if t.processor.support(f).is_selectable() {
                &[FeatureState::On, FeatureState::Off]
            } else {
                &[FeatureState::Unsupported]
            }
        };
        for &s in states(Feature::Sramecc) {
            for &x in states(Feature::Xnack) {
                if let Ok(id) = TargetId::new(t.processor, s, x) {
                    let d = Device::Amdgpu(id);
                    if !out.contains(&d) {
                        out.push(d);
                    }
                }
            }
        }
    }
    out
}

/// Notes where the runtime that reads the unit and the full ranking (`COMPATIBILITY.md` §10)
/// load different images: ROCm CLR for bundles (native, then generic, then SPIR-V, each in
/// discovery order; §7.3), the LLVM offload runtime for OffloadBinaries (first compatible
/// image; §7.5). Feature combinations of one processor that agree are reported once.
fn runtimes_differ(
    open: &crate::container::OpenUnit<'_>,
    container: &str,
    at: u64,
    out: &mut Vec<Finding>,
) {
    let images: Vec<Image<'_>> = open.images().collect();
    let format = open.unit().format();
    if format != crate::image::Format::OffloadBinary
        && !images.iter().any(|i| i.offload_kind.is_hip())
    {
        // A bundle no HIP runtime loads (OpenMP bundles of static libraries).
        return;
    }
    let (runtime, runtime_options) = match format {
        crate::image::Format::OffloadBinary => (
            "the LLVM offload runtime",
            SelectOptions {
                policy: Policy::First,
                ..SelectOptions::default()
            },
        ),
        _ => (
            "ROCm CLR",
            SelectOptions {
                kind: crate::select::KindFilter::Hip,
                policy: Policy::FirstByClass,
                ..SelectOptions::default()
            },
        ),
    };
    let show = |i: Option<usize>| {
        i.and_then(|i| images.get(i))
            .map_or_else(|| "nothing".to_string(), name)
    };
    let mut results: Vec<(Device, [Option<usize>; 2])> = Vec::new();
    for device in devices(&images) {
        let pick = |o: &SelectOptions| select(&images, &device, o).chosen();
        results.push((
            device,
            [pick(&runtime_options), pick(&SelectOptions::default())],
        ));
    }
    let mut noted: Vec<&'static crate::arch::amdgpu::Processor> = Vec::new();
    for (device, got) in &results {
        let Device::Amdgpu(t) = device else { continue };
        if got[0] == got[1] || noted.iter().any(|p| core::ptr::eq(*p, t.processor)) {
            continue;
        }
        // All feature combinations of the processor agree: one note for the processor.
        let same = results.iter().all(|(d, g)| match d {
            Device::Amdgpu(o) => !core::ptr::eq(o.processor, t.processor) || g == got,
            Device::Cuda { .. } => true,
        });
        let on = if same {
            noted.push(t.processor);
            t.processor.name.to_string()
        } else {
            device.to_string()
        };
        out.push(Finding::new(
            Code::RuntimesDiffer,
            container,
            at,
            format!(
                "on {on}: {runtime} loads {}, the best match is {}",
                show(got[0]),
                show(got[1])
            ),
        ));
    }
}
