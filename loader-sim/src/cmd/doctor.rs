//! `loader-sim doctor PATH... [--target TARGET ...] [--kfd-topology DIR] [--xnack on|off]
//! [--json] [--deep] [--jobs N]`: for every library with device code under PATH (files, directory
//! trees, wheels and other zip files) and every device, how many units have an image the
//! device loads, why the others do not, and what would make them run.
//!
//! Hints, each marked with how safe it is:
//! * `xnack` (safe): `HSA_XNACK=1` or `=0`, when the other xnack mode covers every unit;
//! * `rebuild` (safe): the `--offload-arch` values that cover the device (its own name, its
//!   generic family);
//! * `override` (unsupported): `HSA_OVERRIDE_GFX_VERSION=X.Y.Z` for another processor of the
//!   device's generic family, only when selection for that processor (with the device's
//!   own feature modes) finds an image in every unit of the library.
//!
//! Every hint that names a runtime setting is checked by selection itself: each unit's
//! images are identified once and checked (`select::check`) against the real devices and
//! all their variants, and a setting is offered only when its variant loads every unit.
//!
//! Units and reasons come from the library (`offload_image::doctor`): in a linked host file
//! with fat-binary wrappers the units are what the runtime registers (a refused wrapper,
//! an unreadable fat binary or a unit without images loads nowhere), elsewhere those of
//! the container walk; a library's reason is what most of its failing units lack, with the
//! count.
//!
//! Output: a table per device (one line per library: covered/total units, status, the
//! reason, the first hint) and a summary; with `--json`, one record per (library, device)
//! — `file`, `member` (path inside a zip, or null), `device`, `units`, `units_covered`,
//! `status` (`ok`, `partial`, `none`, or `damaged` with an `error` field), `reason`,
//! `gaps` ({`reason`, `units`, `closest`}: every reason with its count), `hints` ({`kind`,
//! `env`, `value`, `offload_arch`, `safe`}) — then one summary record. Exit status 0 when
//! every library loads on every device, 1 otherwise (also for a damaged library), 2 on
//! bad usage.
//!
//! Speed and memory: files are probed by their first bytes and mapped; only container
//! headers and the first [`IDENTIFY_LEN`] bytes of each image are read, and the pages of a
//! unit are dropped from the process once it has been judged. Of a compressed bundle only
//! the start of the decompressed stream is decoded, up to the end of its entry table, and
//! its entries are judged by entry ID as the HIP runtime's code object lookup (comgr) judges
//! them; `--deep` decodes up to the first bytes of the last image so that the ELF header
//! wins as in `select`. Hashes of compressed bundles are not verified.
//! Deflated zip members that may hold offload containers are decoded as a stream into an
//! unlinked temporary file and mapped (`crate::wheel`), so a wheel costs no more memory
//! than the unpacked tree.

use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use offload_image::bundle::BundleTable;
use offload_image::ccob::CompressedBundle;
use offload_image::container::UnitContent;
use offload_image::decompress::Codec;
use offload_image::doctor::{self, DriverVersion, Gap, Kernels};
use offload_image::host::HostFile;
use offload_image::stream::IDENTIFY_LEN;
use offload_image::target::Code;
use offload_image::{
    identify, Device, ErrorKind, Format, Identity, Image, ReadOptions, SelectOptions, Unit,
};
use serde::Serialize;

use crate::cmd::OnOff;
use crate::decode::{read_options, ZstdDecoder};
use crate::input::Input;
use crate::output::{json_line, table};
use crate::wheel::{Content, Zip};
use crate::{Failure, Outcome};

/// Arguments of `doctor`.
#[derive(clap::Args)]
pub struct Args {
    /// Files, directories (walked recursively, symbolic links inside not followed), wheels
    /// and other zip files.
    #[arg(required_unless_present = "python", value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Scan the site-packages of a Python environment instead (INTERPRETER, default
    /// `python3`): every directory of its `sys.path` but the standard library's, each
    /// library attributed to the installed distribution whose `RECORD` lists it.
    #[arg(long, value_name = "INTERPRETER", num_args = 0..=1, default_missing_value = "python3")]
    python: Option<PathBuf>,
    /// A device: AMDGPU target ID with its feature states (`gfx90a:sramecc+:xnack-`) or an
    /// NVPTX architecture (`sm_80`).
    #[arg(long = "target", value_name = "TARGET")]
    targets: Vec<String>,
    /// Every GPU node of a KFD topology directory (default, when no --target is given:
    /// /sys/class/kfd/kfd/topology if present).
    #[arg(long, value_name = "DIR")]
    kfd_topology: Option<PathBuf>,
    /// The xnack mode of the KFD devices (KFD does not record it; default: unknown).
    #[arg(long, value_enum)]
    xnack: Option<OnOff>,
    /// Write JSON Lines (one record per library and device, then a summary) instead of
    /// tables.
    #[arg(long)]
    json: bool,
    /// Inside compressed bundles, also read the first bytes of every image, so that the
    /// ELF header wins over the entry ID as in `select` (decodes each compressed bundle up
    /// to its last image). Without it their entries are judged by entry ID, as the HIP
    /// runtime's code object lookup (comgr) judges them.
    #[arg(long)]
    deep: bool,
    /// Files probed in parallel (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    jobs: Option<u32>,
    /// The NVIDIA driver version (`535.183.01`) that NVIDIA devices have: a chosen entry
    /// stored compressed with a codec this driver cannot decode does not load (zstd needs
    /// 550.54.14). Default: the version NVML reports when it detects the GPUs; none
    /// (compression not judged) with --target alone.
    #[arg(long, value_name = "VERSION", value_parser = parse_driver)]
    nvidia_driver: Option<DriverVersion>,
}

use crate::cmd::parse_driver;

/// The machine's KFD topology, used when neither --target nor --kfd-topology is given.
const SYSTEM_KFD: &str = "/sys/class/kfd/kfd/topology";

/// The devices as given, and every device selection runs against (the library's
/// [`doctor::Probes`]: the real devices first, then their variants).
struct Plan {
    /// (name as given, device).
    real: Vec<(String, Device)>,
    probes: doctor::Probes,
}

impl Plan {
    fn new(real: Vec<(String, Device)>, nvidia_driver: Option<DriverVersion>) -> Self {
        let devices: Vec<Device> = real.iter().map(|(_, d)| *d).collect();
        Plan {
            probes: doctor::Probes::new(&devices, nvidia_driver),
            real,
        }
    }
}

/// What one library (a file or a zip member) holds for every probe.
struct Tally {
    /// Units, and what each probe loads (see [`offload_image::doctor`]).
    counts: doctor::Tally,
    /// The first problem reading the library.
    error: Option<String>,
    /// Per probe of a split library: the device package that would carry its archives.
    packages: Vec<Option<String>>,
    /// A library without registered device code that carries code objects outside any
    /// container (`doctor::LooseCode`): what was found, and per real device how many of them
    /// it could load.
    loose: Option<(String, Vec<usize>)>,
}

impl Tally {
    fn new(plan: &Plan) -> Self {
        Tally {
            counts: doctor::Tally::new(&plan.probes),
            error: None,
            packages: vec![None; plan.probes.devices.len()],
            loose: None,
        }
    }

    fn fail(&mut self, what: String) {
        self.error.get_or_insert(what);
    }
}

/// One hint (JSON field names are part of the command's contract).
#[derive(Serialize, Clone, Debug)]
struct Hint {
    kind: &'static str,
    env: Option<&'static str>,
    value: Option<String>,
    offload_arch: Option<String>,
    safe: bool,
}

impl Hint {
    fn text(&self) -> String {
        match (self.kind, &self.value) {
            ("package", Some(p)) => return format!("a build of {p} with code for this device"),
            ("driver", Some(v)) => return format!("NVIDIA driver {v} or later"),
            _ => {}
        }
        match (self.env, &self.value, &self.offload_arch) {
            (Some(env), Some(v), _) if !self.safe => {
                format!("{env}={v} (unsupported: may fail or miscompute)")
            }
            (Some(env), Some(v), _) => format!("{env}={v}"),
            (_, _, Some(arch)) => format!("rebuild with --offload-arch={arch}"),
            (None, Some(package), None) => format!("install {package}"),
            _ => self.kind.to_string(),
        }
    }
}

/// One record per (library, device).
#[derive(Serialize)]
struct Record {
    file: String,
    member: Option<String>,
    /// With `--python`: the installed distribution that owns the file (`name version`).
    #[serde(skip_serializing_if = "Option::is_none")]
    package: Option<String>,
    device: String,
    units: usize,
    units_covered: usize,
    status: &'static str,
    reason: Option<String>,
    /// Why the units that do not load do not: one entry per reason, with its count.
    gaps: Vec<GapRecord>,
    /// Units that do not load but count neither way (`COMPATIBILITY.md` §12).
    set_aside: SetAsideCounts,
    /// Each unit set aside, with why.
    set_aside_units: Vec<SetAsideRecord>,
    hints: Vec<Hint>,
    /// Set when the library is damaged (status `damaged`): the first problem found.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Nothing stands in the device's way (the exit status): `ok`, `no-kernels`, or
    /// `outside` with code objects for the device.
    #[serde(skip)]
    loads: bool,
}

/// How many units were set aside, per reason.
#[derive(Serialize)]
struct SetAsideCounts {
    /// Code for other GPUs only, where the library has code for this one.
    other_gpus: usize,
    /// Images without kernels.
    no_kernels: usize,
}

impl SetAsideCounts {
    fn text(&self) -> String {
        let mut parts = Vec::new();
        let units = |n: usize| format!("{n} unit{}", if n == 1 { "" } else { "s" });
        if self.other_gpus > 0 {
            parts.push(format!("other GPUs: {}", units(self.other_gpus)));
        }
        if self.no_kernels > 0 {
            parts.push(format!("no kernels: {}", units(self.no_kernels)));
        }
        if parts.is_empty() {
            "-".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// One unit set aside, with why.
#[derive(Serialize)]
struct SetAsideRecord {
    unit: String,
    why: String,
}

/// One reason of a library, with the number of units it holds for.
#[derive(Serialize)]
struct GapRecord {
    reason: String,
    units: usize,
    /// The closest rejection among those units, for missing code.
    #[serde(skip_serializing_if = "Option::is_none")]
    closest: Option<String>,
}

/// The summary record.
#[derive(Serialize)]
struct Summary {
    summary: bool,
    files_scanned: usize,
    libraries: usize,
    devices: usize,
    ok: usize,
    partial: usize,
    none: usize,
    no_kernels: usize,
    outside: usize,
    damaged: usize,
    seconds: f64,
}

/// What a worker found in one file: (zip member, tally) per library.
type Found = Vec<(Option<String>, Tally)>;

/// Shared by the workers.
struct Ctx<'a> {
    plan: &'a Plan,
    select: SelectOptions,
    read: ReadOptions,
    /// `--deep`.
    deep: bool,
    /// The `.kpack` archives of the wheels given, as installed.
    wheels: &'a WheelArchives,
}

/// Where the wheels given would be installed: their members lie under one root,
/// `site-packages`, as pip puts them.
const SITE_PACKAGES: &str = "/site-packages";

/// The `.kpack` archives of every wheel given (host wheel and device wheels together): a
/// split library in one of them finds its archives in the others, as it would once they
/// are installed side by side.
#[derive(Default)]
struct WheelArchives {
    /// Installed path → (wheel, member index).
    files: std::collections::HashMap<String, (PathBuf, usize)>,
}

impl WheelArchives {
    fn new(files: &[PathBuf]) -> Self {
        let mut out = WheelArchives::default();
        for path in files {
            let zip = File::open(path)
                .and_then(|mut f| head_of(&mut f))
                .is_ok_and(|h| is_zip(&h));
            let Some(mut zip) = zip.then(|| Zip::open(path).ok()).flatten() else {
                continue;
            };
            for (i, name) in zip.file_names() {
                if name.ends_with(".kpack") {
                    let installed =
                        offload_image::kpack::lexically_normal(&format!("{SITE_PACKAGES}/{name}"));
                    out.files.entry(installed).or_insert((path.clone(), i));
                }
            }
        }
        out
    }
}

impl crate::kpack::FileSource for WheelArchives {
    /// The member installed at `path`, copied to a temporary file under the spill limit
    /// (`crate::wheel`), so that the archive is read by its TOC, never held whole.
    fn open(&self, path: &str) -> Option<Result<File, String>> {
        let (wheel, i) = self.files.get(path)?;
        Some(Zip::open(wheel).and_then(|mut zip| zip.member_file(*i)))
    }
}

/// True when `head` (the first bytes of a file) may start an offload container or a file
/// that holds one (an NVIDIA fatbinary too). Thin archives are left out: their members
/// are other files.
fn is_candidate(head: &[u8]) -> bool {
    // `.kpack` archives are not libraries: doctor judges a split library from them.
    const PREFIXES: [&[u8]; 9] = [
        b"\x7fELF",
        // PE images (DLL, EXE, PYD), and COFF objects by machine (x86-64, ARM64).
        b"MZ",
        b"\x64\x86",
        b"\x64\xaa",
        b"\x50\xed\x55\xba",
        b"!<arch>\n",
        b"CCOB",
        b"\x10\xff\x10\xad",
        b"__CLANG_OFFLOAD_BUNDLE__",
    ];
    PREFIXES
        .iter()
        .any(|p| head.starts_with(p) || (head.len() < p.len() && p.starts_with(head)))
        && !head.is_empty()
        || head.first() == Some(&b'\n')
}

fn is_zip(head: &[u8]) -> bool {
    head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06")
}

/// The entry table of a compressed bundle and the first [`IDENTIFY_LEN`] bytes of every
/// payload (indexed by entry), read from the start of the decompressed stream. `None` when
/// the content is not a binary bundle or payloads overlap (then the unit is opened whole).
fn stream_heads(
    c: &CompressedBundle<'_>,
    read: &ReadOptions,
) -> offload_image::Result<Option<(BundleTable, Vec<Vec<u8>>)>> {
    c.check_size(read)?;
    let mut reader = c.reader(read)?;
    let Some(table) = BundleTable::read(&mut reader, &read.limits)? else {
        return Ok(None);
    };
    let mut order: Vec<(u64, usize, u64)> = table
        .entries()
        .map(|e| (e.offset, e.index, e.size))
        .collect();
    order.sort_unstable();
    let mut heads = vec![Vec::new(); order.len()];
    for (offset, index, size) in order {
        let n = usize::try_from(size)
            .unwrap_or(IDENTIFY_LEN)
            .min(IDENTIFY_LEN);
        if n == 0 {
            continue;
        }
        if offset < reader.position() {
            return Ok(None);
        }
        reader.skip(offset - reader.position())?;
        let mut head = vec![0u8; n];
        reader.read_exact(&mut head)?;
        if let Some(slot) = heads.get_mut(index) {
            *slot = head;
        }
    }
    Ok(Some((table, heads)))
}

/// The identity of a compressed bundle's entry from its entry ID alone, as comgr's code
/// object lookup (which the HIP runtime uses) sees it: a code object for the stated target.
fn identify_by_id<'a>(index: usize, id: &'a str, size: u64) -> Identity<'a> {
    let mut identity = identify(&Image::from_id(index, Format::Bundle, id, &[]));
    identity.size = size;
    if identity.code == Code::Other {
        identity.code = Code::Elf;
    }
    identity
}

/// Judges one unit.
fn judge_unit(
    unit: &Unit<'_>,
    label: &str,
    tally: &mut Tally,
    ctx: &Ctx<'_>,
    registered: bool,
) -> offload_image::Result<()> {
    let at = unit.location.offset;
    let code = |ids, codecs| doctor::UnitCode {
        label,
        ids,
        codecs,
        registered,
    };
    if let UnitContent::Compressed(c) = &unit.content {
        if !ctx.deep {
            // Only the entry table: the first kilobytes of the decompressed stream.
            c.check_size(&ctx.read).map_err(|e| e.rebase(at))?;
            let mut reader = c.reader(&ctx.read).map_err(|e| e.rebase(at))?;
            if let Some(table) =
                BundleTable::read(&mut reader, &ctx.read.limits).map_err(|e| e.rebase(at))?
            {
                let ids: Vec<(usize, Identity<'_>)> = table
                    .entries()
                    .map(|e| (e.index, identify_by_id(e.index, e.id, e.size)))
                    .collect();
                tally.counts.offer(
                    &code(&ids, &[]),
                    &mut || Kernels::Unknown,
                    &ctx.plan.probes,
                    &ctx.select,
                );
                return Ok(());
            }
        } else if let Some((table, heads)) = stream_heads(c, &ctx.read).map_err(|e| e.rebase(at))? {
            let ids: Vec<(usize, Identity<'_>)> = table
                .entries()
                .map(|e| {
                    let head = heads.get(e.index).map(Vec::as_slice).unwrap_or_default();
                    let mut id = identify(&Image::from_id(e.index, Format::Bundle, e.id, head));
                    id.size = e.size;
                    (e.index, id)
                })
                .collect();
            tally.counts.offer(
                &code(&ids, &[]),
                &mut || Kernels::Unknown,
                &ctx.plan.probes,
                &ctx.select,
            );
            return Ok(());
        }
    }
    let open = unit.open(&ctx.read)?;
    let mut ids: Vec<(usize, Identity<'_>)> = Vec::new();
    let mut codecs: Vec<(usize, Codec)> = Vec::new();
    for image in open.images() {
        if let Some(encoded) = image.encoded {
            codecs.push((image.index, encoded.codec));
        }
        ids.push((image.index, identify(&image)));
    }
    let read = &ctx.read;
    tally.counts.offer(
        &code(&ids, &codecs),
        &mut || Kernels::of_unit(open.images(), read),
        &ctx.plan.probes,
        &ctx.select,
    );
    Ok(())
}

/// Judges every unit of `data` (a file, or a zip member); `None` when it holds no device
/// code and nothing is wrong with it. In a linked host file with HIP or CUDA fat-binary
/// wrappers, the units are what the runtime registers (`offload_image::doctor`); otherwise
/// those of the container walk.
fn scan_buffer(data: &[u8], input: Option<&Input>, ctx: &Ctx<'_>) -> Option<Tally> {
    {
        // ELF, PE image or COFF object: whatever the host-file reader reads.
        if let Ok(elf) = HostFile::parse(data) {
            let registered = doctor::registered_fat_binaries(&elf, &ctx.read);
            if !registered.is_empty() {
                let tally = scan_registered(&elf, &registered, input, ctx);
                if let Some(input) = input {
                    input.release(data);
                }
                return Some(tally);
            }
        }
    }
    let mut tally = Tally::new(ctx.plan);
    let found = scan_units(data, input, ctx, &mut tally);
    if found && (tally.counts.units > 0 || tally.error.is_some()) {
        return Some(tally);
    }
    // No device code a runtime registers: code objects outside any container, which the
    // program loads itself, are reported as such (COMPATIBILITY.md §12).
    let host = HostFile::parse(data).ok()?;
    let loose = doctor::LooseCode::find(&host);
    if loose.is_empty() {
        return None;
    }
    let real = &ctx.plan.probes.devices[..ctx.plan.probes.real];
    let counts = real
        .iter()
        .map(|d| loose.for_device(d, &ctx.select))
        .collect();
    tally.loose = Some((loose.summary(), counts));
    Some(tally)
}

/// Judges the units of the container walk over `data` into `tally`; false when `data` is
/// not an offload file after all.
fn scan_units(data: &[u8], input: Option<&Input>, ctx: &Ctx<'_>, tally: &mut Tally) -> bool {
    let mut finished: Option<&[u8]> = None;
    for (seen, unit) in offload_image::units(data, &ctx.read).enumerate() {
        if let (Some(done), Some(input)) = (finished.take(), input) {
            input.release(done);
        }
        let unit = match unit {
            Ok(u) => u,
            Err(e) if seen == 0 && e.kind() == ErrorKind::BadMagic && e.offset() == 0 => {
                // Not an offload file after all (a text file starting with a newline).
                return false;
            }
            Err(e) if seen == 0 && data.starts_with(b"MZ") && not_pe32_plus(&e) => {
                // A DOS program, or a 32-bit PE image (setuptools' `cli-32.exe` launchers):
                // HIP and CUDA on Windows are 64-bit only, so no device code to judge.
                return false;
            }
            Err(e) => {
                tally.fail(e.to_string());
                break;
            }
        };
        if let (UnitContent::Compressed(c), Some(input)) = (&unit.content, input) {
            input.will_read(c.payload());
        }
        let label = format!("{} unit {}", unit.location, unit.index);
        if let Err(e) = judge_unit(&unit, &label, tally, ctx, false) {
            tally.fail(format!("{}: {e}", unit.location));
        }
        finished = unit.bytes(&ctx.read).ok();
    }
    if let (Some(done), Some(input)) = (finished.take(), input) {
        input.release(done);
    }
    true
}

/// True for the reader's answer on an `MZ` file that is not a PE32+ image: no `PE\0\0`
/// signature (a DOS program), its offset outside the file, or a PE32 optional header.
fn not_pe32_plus(e: &offload_image::Error) -> bool {
    const E_LFANEW: u64 = 0x3c;
    match e.kind() {
        ErrorKind::UnsupportedVersion | ErrorKind::BadMagic => true,
        ErrorKind::OutOfBounds => e.offset() == E_LFANEW,
        _ => false,
    }
}

/// Judges what the runtime registers from a linked host file: one unit per fat binary of
/// its wrappers (a refused or unreadable one loads nowhere), and the units of its
/// `.llvm.offloading` sections (registered through `__tgt_bin_desc` descriptors).
fn scan_registered(
    elf: &HostFile<'_>,
    registered: &[doctor::Registered<'_>],
    input: Option<&Input>,
    ctx: &Ctx<'_>,
) -> Tally {
    let mut tally = Tally::new(ctx.plan);
    for r in registered {
        let blob = match &r.fat_binary {
            Ok(blob) => *blob,
            Err(gap) => {
                tally.counts.refuse(gap.clone());
                continue;
            }
        };
        match doctor::registered_unit(blob, &ctx.read) {
            Ok(unit) => {
                if let (UnitContent::Compressed(c), Some(input)) = (&unit.content, input) {
                    input.will_read(c.payload());
                }
                let label = format!("fat binary of the wrapper at {:#x}", r.wrapper);
                if let Err(e) = judge_unit(&unit, &label, &mut tally, ctx, true) {
                    tally.counts.refuse(Gap::Unreadable {
                        kind: e.kind(),
                        what: e.what(),
                    });
                }
            }
            Err(gap) => tally.counts.refuse(gap),
        }
        if let Some(input) = input {
            input.release(blob);
        }
    }
    for s in elf.offloading_sections() {
        scan_units(s.data, input, ctx, &mut tally);
    }
    tally
}

/// Judges a split library (`KPACK.md`) from its archives on disk: one unit per `HIPK`
/// wrapper, loaded where rocm-kpack's loader finds its code object for the probe, else
/// refused with the loader's error code (13: no archive, with the path expected; 14: the
/// archives found and their architectures).
fn scan_split(path: &Path, data: &[u8], ctx: &Ctx<'_>) -> Option<Tally> {
    let library = crate::kpack::Library::open(path, data)?;
    Some(judge_split(
        &library,
        crate::kpack::Archives::default(),
        ctx,
    ))
}

/// [`scan_split`] for a library inside a wheel: its archives are looked for among the
/// members of every wheel given, installed together under one `site-packages`.
fn scan_split_member(member: &str, data: &[u8], ctx: &Ctx<'_>) -> Option<Tally> {
    let dir = match member.rsplit_once('/') {
        Some((dir, _)) => format!("{SITE_PACKAGES}/{dir}"),
        None => SITE_PACKAGES.to_string(),
    };
    let library = crate::kpack::Library::open_in(dir, data)?;
    Some(judge_split(
        &library,
        crate::kpack::Archives::from_source(ctx.wheels),
        ctx,
    ))
}

fn judge_split(
    library: &crate::kpack::Library<'_>,
    mut archives: crate::kpack::Archives<'_>,
    ctx: &Ctx<'_>,
) -> Tally {
    let env = crate::kpack::Env::from_process();
    let mut tally = Tally::new(ctx.plan);
    tally.counts.units = library.wrappers();
    for (p, device) in ctx.plan.probes.devices.iter().enumerate() {
        let isa = crate::kpack::isa_name(device);
        let arches: Vec<&str> = isa.as_deref().into_iter().collect();
        for r in library.resolve(&arches, &env, &mut archives, &ctx.read) {
            let gap = match &r.outcome {
                Ok(_) => None,
                Err(e) => {
                    if e.package.is_some() {
                        tally.packages[p] = e.package.clone();
                    }
                    Some(Gap::Other(crate::kpack::sentence(e)))
                }
            };
            tally.counts.count(p, gap);
        }
    }
    tally
}

/// The first bytes of `file` (up to 32).
fn head_of(file: &mut File) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(32);
    file.take(32).read_to_end(&mut head)?;
    Ok(head)
}

/// Probes one file.
fn scan_file(path: &Path, ctx: &Ctx<'_>) -> Found {
    let damaged = |what: String| {
        let mut t = Tally::new(ctx.plan);
        t.fail(what);
        vec![(None, t)]
    };
    // Only a regular file, opened without blocking (a FIFO put in its place would hang).
    let head = match loader_sim_os::open_regular(path).and_then(|mut f| head_of(&mut f)) {
        Ok(h) => h,
        Err(e) => return damaged(format!("cannot read: {e}")),
    };
    if is_zip(&head) {
        return scan_zip(path, ctx);
    }
    if !is_candidate(&head) {
        return Vec::new();
    }
    let input = match Input::open(path) {
        Ok(i) => i,
        Err(f) => return damaged(f.message),
    };
    if let Some(tally) = scan_split(path, input.bytes(), ctx) {
        return vec![(None, tally)];
    }
    scan_buffer(input.bytes(), Some(&input), ctx)
        .map(|t| vec![(None, t)])
        .unwrap_or_default()
}

/// Probes every member of a zip file (a wheel), without unpacking it: stored members are
/// read in place from the map, deflated ones whose first bytes look like an offload
/// container or a file that holds one are decoded into a temporary file and mapped
/// ([`crate::wheel`]).
fn scan_zip(path: &Path, ctx: &Ctx<'_>) -> Found {
    let mut found = Found::new();
    let damaged = |member: Option<String>, what: String| {
        let mut t = Tally::new(ctx.plan);
        t.fail(what);
        (member, t)
    };
    let mut zip = match Zip::open(path) {
        Ok(z) => z,
        Err(e) => return vec![damaged(None, e)],
    };
    for i in 0..zip.len() {
        let member = match zip.member(i, is_candidate) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                found.push(damaged(
                    Some(format!("#{i}")),
                    format!("cannot read member: {e}"),
                ));
                continue;
            }
        };
        let tally = match &member.content {
            Content::Stored(range) => {
                let input = zip.input();
                let data = input.bytes().get(range.clone()).unwrap_or_default();
                let tally = scan_split_member(&member.name, data, ctx)
                    .or_else(|| scan_buffer(data, Some(input), ctx));
                input.release(data);
                tally
            }
            Content::Spilled(input) => scan_split_member(&member.name, input.bytes(), ctx)
                .or_else(|| scan_buffer(input.bytes(), Some(input), ctx)),
            Content::Skipped => None,
            Content::Unreadable(e) => {
                let mut t = Tally::new(ctx.plan);
                t.fail(format!("cannot read member: {e}"));
                Some(t)
            }
        };
        if let Some(t) = tally {
            found.push((Some(member.name), t));
        }
    }
    found
}

/// Every regular file under the given paths, in a stable order (directory entries sorted
/// by name); symbolic links inside directories are not followed. A directory that cannot
/// be read is a warning; a named path that is neither a regular file nor a directory (a
/// FIFO, a device), or a directory under which nothing could be read, is an error.
fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut files = Vec::new();
    for p in paths {
        let meta =
            std::fs::metadata(p).map_err(|e| Failure::file(p, format!("cannot read: {e}")))?;
        if meta.is_dir() {
            let (before, mut unreadable) = (files.len(), Vec::new());
            walk(p, &mut files, &mut unreadable);
            for u in &unreadable {
                crate::output::stderr_line(format_args!("loader-sim: warning: {u}"));
            }
            if files.len() == before {
                if let Some(first) = unreadable.first() {
                    return Err(Failure::file(
                        p,
                        format!(
                            "nothing under it could be read ({} director{} not read; first: {first})",
                            unreadable.len(),
                            if unreadable.len() == 1 { "y" } else { "ies" }
                        ),
                    ));
                }
            }
        } else if meta.is_file() {
            files.push(p.clone());
        } else {
            return Err(Failure::file(
                p,
                format!(
                    "not a regular file or a directory ({}): nothing to read",
                    loader_sim_os::file_type_name(&meta.file_type())
                ),
            ));
        }
    }
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, unreadable: &mut Vec<String>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            unreadable.push(format!("{}: cannot read the directory: {e}", dir.display()));
            return;
        }
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(ty) = e.file_type() else { continue };
        if ty.is_dir() {
            walk(&e.path(), files, unreadable);
        } else if ty.is_file() {
            files.push(e.path());
        }
    }
}

/// The devices to judge (name as given, device) and the NVIDIA driver they have.
type Devices = (Vec<(String, Device)>, Option<DriverVersion>);

/// The devices: every --target, then every GPU of --kfd-topology; with neither, the GPUs
/// of this machine as the runtimes see them (`crate::gpus`: KFD and NVML, narrowed by the
/// `*_VISIBLE_DEVICES` variables, `HSA_OVERRIDE_GFX_VERSION` applied); without duplicates.
/// And the NVIDIA driver they have: `--nvidia-driver`, else NVML's.
fn devices(args: &Args) -> Result<Devices, Failure> {
    let mut driver = args.nvidia_driver;
    let mut devices = crate::cmd::parse_devices("--target", &args.targets)?;
    let xnack = args.xnack.map(|x| matches!(x, OnOff::On));
    let detect = args.targets.is_empty() && args.kfd_topology.is_none();
    let mut looked = Vec::new();
    if let Some(dir) = &args.kfd_topology {
        // Given explicitly: a topology that does not read is an error.
        Device::from_kfd_topology(dir, xnack)
            .map_err(|e| Failure::file(dir, format!("cannot read the KFD topology: {e}")))?;
    }
    if detect || args.kfd_topology.is_some() {
        let env = |k: &str| std::env::var(k).ok();
        let kfd = args
            .kfd_topology
            .clone()
            .unwrap_or_else(|| PathBuf::from(SYSTEM_KFD));
        let found = crate::gpus::detect(Some(&kfd), detect, xnack, &env);
        for f in &found.devices {
            crate::output::stderr_line(format_args!(
                "loader-sim: doctor: detected {} ({})",
                f.device, f.source
            ));
        }
        looked = found.looked;
        driver = driver.or(found
            .nvidia_driver
            .as_deref()
            .and_then(DriverVersion::parse));
        devices.extend(
            found
                .devices
                .into_iter()
                .map(|f| (f.device.to_string(), f.device)),
        );
    }
    let mut unique: Vec<(String, Device)> = Vec::new();
    for (name, d) in devices {
        match unique.iter().find(|(_, u)| *u == d) {
            // Two names for one device (`sm_90` and `sm_90a`: a GPU is a compute capability;
            // `a` and `f` name code, not devices): judged once, and said so.
            Some((first, _)) => crate::output::stderr_line(format_args!(
                "loader-sim: doctor: --target {name} is the same device as {first} ({d}): judged once"
            )),
            None => unique.push((name, d)),
        }
    }
    if unique.is_empty() {
        return Err(Failure::msg(match &args.kfd_topology {
            Some(dir) => format!(
                "{}: the KFD topology has no visible GPU node ({})",
                dir.display(),
                looked.join("; ")
            ),
            None => format!(
                "no device to check: give --target TARGET or --kfd-topology DIR (looked for this machine's GPUs: {})",
                looked.join("; ")
            ),
        }));
    }
    Ok((unique, driver))
}

/// The hints for real device `k` of a library that does not cover it: the device package
/// a split library lacks, then the library's ([`doctor::hints`]).
fn hints(plan: &Plan, k: usize, tally: &Tally) -> Vec<Hint> {
    let mut out = Vec::new();
    if let Some(Some(package)) = tally.packages.get(k) {
        // A split library: the archive for the device is not installed (kpack 13, 14).
        out.push(Hint {
            kind: "install",
            env: None,
            value: Some(package.clone()),
            offload_arch: None,
            safe: true,
        });
    }
    let hint = |kind, env, value: Option<String>, offload_arch: Option<String>, safe| Hint {
        kind,
        env,
        value,
        offload_arch,
        safe,
    };
    out.extend(
        doctor::hints(&plan.probes, k, &tally.counts)
            .into_iter()
            .map(|h| match h {
                doctor::Hint::Xnack(on) => hint(
                    "xnack",
                    Some("HSA_XNACK"),
                    Some(if on { "1" } else { "0" }.to_string()),
                    None,
                    true,
                ),
                doctor::Hint::Driver(needs) => {
                    hint("driver", None, Some(needs.to_string()), None, true)
                }
                doctor::Hint::Rebuild(arch) => hint("rebuild", None, None, Some(arch), true),
                doctor::Hint::Override(p) => hint(
                    "override",
                    Some("HSA_OVERRIDE_GFX_VERSION"),
                    p.isa_version.map(|(a, b, c)| format!("{a}.{b}.{c}")),
                    None,
                    false,
                ),
            }),
    );
    out
}

/// Prints a progress line on a terminal while the scan runs longer than a second.
fn progress(done: &AtomicUsize, total: usize, libraries: &AtomicUsize, stop: &AtomicBool) {
    let start = Instant::now();
    let mut shown = false;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if start.elapsed() < Duration::from_secs(1) || stop.load(Ordering::Relaxed) {
            continue;
        }
        shown = true;
        eprint!(
            "\r\x1b[Kdoctor: {}/{total} files, {} libraries with device code",
            done.load(Ordering::Relaxed),
            libraries.load(Ordering::Relaxed)
        );
    }
    if shown {
        eprint!("\r\x1b[K");
    }
}

/// Runs `doctor`.
pub fn run(args: &Args, mut out: &mut dyn std::io::Write) -> Result<Outcome, Failure> {
    let start = Instant::now();
    let (devices, nvidia_driver) = devices(args)?;
    let plan = Plan::new(devices, nvidia_driver);
    let (paths, owners) = match &args.python {
        Some(python) => {
            let dirs = crate::python::site_dirs(python)?;
            let owners = crate::python::owners(&dirs);
            (dirs, owners)
        }
        None => (args.paths.clone(), Default::default()),
    };
    let files = collect_files(&paths)?;
    let wheels = WheelArchives::new(&files);
    let ctx = Ctx {
        plan: &plan,
        select: SelectOptions {
            cuda: crate::cmd::cuda_driver(nvidia_driver),
            ..SelectOptions::default()
        },
        read: read_options(ZstdDecoder::DEFAULT, false),
        deep: args.deep,
        wheels: &wheels,
    };
    let jobs = args
        .jobs
        .map(|j| j as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let libraries = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<Vec<(usize, Found)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        let ticker = std::io::stderr()
            .is_terminal()
            .then(|| s.spawn(|| progress(&done, files.len(), &libraries, &stop)));
        let workers: Vec<_> = (0..jobs)
            .map(|_| {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = files.get(i) else { break };
                    let found = scan_file(path, &ctx);
                    libraries.fetch_add(found.len(), Ordering::Relaxed);
                    done.fetch_add(1, Ordering::Relaxed);
                    if !found.is_empty() {
                        results
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((i, found));
                    }
                })
            })
            .collect();
        for w in workers {
            let _ = w.join();
        }
        stop.store(true, Ordering::Relaxed);
        if let Some(t) = ticker {
            let _ = t.join();
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);

    let mut records = Vec::new();
    let mut library_count = 0usize;
    for (i, found) in &results {
        for (member, tally) in found {
            library_count += 1;
            for (k, (name, _)) in plan.real.iter().enumerate() {
                let covered = tally.counts.covered[k];
                let coverage = &tally.counts.coverage[k];
                let judged = match &tally.loose {
                    Some((found, n)) => doctor::LooseCode::judgement(found, n[k]),
                    None => coverage.judgement(),
                };
                let status = if tally.error.is_some() {
                    "damaged"
                } else {
                    judged.status.name()
                };
                let ok = judged.loads;
                let (no_kernels, other_gpus) = coverage.set_aside_counts();
                records.push(Record {
                    file: files[*i].display().to_string(),
                    member: member.clone(),
                    package: owners.get(&files[*i]).cloned(),
                    device: name.clone(),
                    units: tally.counts.units,
                    units_covered: covered,
                    status,
                    reason: match &tally.error {
                        Some(e) => Some(format!("damaged: {e}")),
                        None => judged.reason,
                    },
                    set_aside: SetAsideCounts {
                        other_gpus,
                        no_kernels,
                    },
                    set_aside_units: coverage
                        .set_aside()
                        .map(|a| SetAsideRecord {
                            unit: a.unit.clone(),
                            why: a.why.to_string(),
                        })
                        .collect(),
                    gaps: coverage
                        .gaps()
                        .map(|g| GapRecord {
                            reason: g.gap.to_string(),
                            units: g.units,
                            closest: g.closest.clone(),
                        })
                        .collect(),
                    loads: ok && tally.error.is_none(),
                    hints: if ok || tally.error.is_some() || tally.loose.is_some() {
                        Vec::new()
                    } else {
                        let mut h = hints(&plan, k, tally);
                        // In a Python environment the fix is another build of the
                        // distribution that owns the library, unless a device package is
                        // missing (kpack) or the driver is too old for the code it has,
                        // which the first hint then names.
                        if let Some(p) = owners.get(&files[*i]) {
                            if h.first()
                                .is_none_or(|h| !matches!(h.kind, "install" | "driver"))
                            {
                                h.insert(
                                    0,
                                    Hint {
                                        kind: "package",
                                        env: None,
                                        value: Some(p.clone()),
                                        offload_arch: None,
                                        safe: true,
                                    },
                                );
                            }
                        }
                        h
                    },
                    error: tally.error.clone(),
                });
            }
        }
    }
    if args.python.is_some() {
        // Grouped by the installed distribution that owns each library (`package`; files
        // no distribution lists last), in scan order within each.
        records.sort_by(|a, b| {
            (a.package.is_none(), &a.package).cmp(&(b.package.is_none(), &b.package))
        });
    }
    let count = |s: &str| records.iter().filter(|r| r.status == s).count();
    let summary = Summary {
        summary: true,
        files_scanned: files.len(),
        libraries: library_count,
        devices: plan.real.len(),
        ok: count("ok"),
        partial: count("partial"),
        none: count("none"),
        no_kernels: count("no-kernels"),
        outside: count("outside"),
        damaged: count("damaged"),
        seconds: (start.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
    };
    let written = if args.json {
        records
            .iter()
            .try_for_each(|r| json_line(&mut out, r))
            .and_then(|()| json_line(&mut out, &summary))
    } else {
        write_tables(&mut out, &plan, &records, &summary)
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
    if records.iter().all(|r| r.loads) {
        Ok(Outcome::Ok)
    } else {
        Ok(Outcome::NoMatch)
    }
}

fn write_tables(
    out: &mut impl Write,
    plan: &Plan,
    records: &[Record],
    s: &Summary,
) -> std::io::Result<()> {
    for (name, device) in &plan.real {
        let mine: Vec<&Record> = records.iter().filter(|r| &r.device == name).collect();
        let ok = mine.iter().filter(|r| r.loads).count();
        let no_kernels = mine.iter().filter(|r| r.status == "no-kernels").count();
        writeln!(
            out,
            "{name}{}: {ok} of {} libraries load{}",
            if name == &device.to_string() {
                String::new()
            } else {
                format!(" ({device})")
            },
            mine.len(),
            if no_kernels > 0 {
                format!(", {no_kernels} register no kernels")
            } else {
                String::new()
            }
        )?;
        if mine.is_empty() {
            writeln!(out)?;
            continue;
        }
        // In a Python environment the first column is the distribution.
        let packaged = mine.iter().any(|r| r.package.is_some());
        let rows: Vec<Vec<String>> = mine
            .iter()
            .map(|r| {
                let library = match &r.member {
                    Some(m) => format!("{}!{m}", r.file),
                    None => r.file.clone(),
                };
                let hint = match r.hints.split_first() {
                    None => "-".to_string(),
                    Some((h, [])) => h.text(),
                    Some((h, rest)) => format!("{} (+{} more)", h.text(), rest.len()),
                };
                let package = packaged.then(|| r.package.clone().unwrap_or_else(|| "-".into()));
                package
                    .into_iter()
                    .chain([
                        library,
                        format!("{}/{}", r.units_covered, r.units),
                        r.status.to_string(),
                        r.set_aside.text(),
                        r.reason.clone().unwrap_or_else(|| "-".to_string()),
                        hint,
                    ])
                    .collect()
            })
            .collect();
        let header = [
            "PACKAGE",
            "LIBRARY",
            "UNITS",
            "STATUS",
            "SET ASIDE",
            "REASON",
            "HINT",
        ];
        table(out, &header[usize::from(!packaged)..], &rows)?;
        writeln!(out)?;
    }
    writeln!(
        out,
        "{} files scanned in {:.2} s: {} libraries with device code, {} device(s); \
         ok {}, partial {}, none {}, no-kernels {}, outside {}, damaged {}",
        s.files_scanned,
        s.seconds,
        s.libraries,
        s.devices,
        s.ok,
        s.partial,
        s.none,
        s.no_kernels,
        s.outside,
        s.damaged
    )?;
    if records.iter().any(|r| r.hints.iter().any(|h| !h.safe)) {
        writeln!(
            out,
            "HSA_OVERRIDE_GFX_VERSION is unsupported: the code was built for another \
             processor and may fail or compute wrong results. --json lists every hint."
        )?;
    }
    Ok(())
}
