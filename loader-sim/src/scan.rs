//! What `loader-sim doctor` scans: the files under the paths given (directory trees walked,
//! wheels and other zip files read member by member without unpacking), the `.kpack`
//! archives a split library finds beside it or in the other wheels given, and, for every
//! library with device code, its units judged by the library ([`doctor::Judge`]).
//!
//! Speed and memory: files are probed by their first bytes and mapped; only container
//! headers and the first bytes of each image are read, and the pages of a unit are
//! dropped from the process once it has been judged. Deflated zip members that may hold
//! offload containers are decoded as a stream into an unlinked temporary file and mapped
//! (`crate::wheel`), so a wheel costs no more memory than the unpacked tree.

use std::fs::File;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use offload_image::container::{Unit, UnitContent};
use offload_image::host::HostFile;
use offload_image::judge::{self as doctor, Gap, Prepared};
use offload_image::ErrorKind;

use crate::input::Input;
use crate::wheel::{Content, Zip};
use crate::Failure;

/// What one library (a file or a zip member) holds for every probe.
pub struct Tally {
    /// Units, and what each probe loads (see [`offload_image::judge`]).
    pub counts: doctor::Tally,
    /// The first problem reading the library.
    pub error: Option<String>,
    /// Per probe of a split library: the device package that would carry its archives.
    pub packages: Vec<Option<String>>,
    /// A library without registered device code that carries code objects outside any
    /// container (`doctor::LooseCode`): what was found, and per real device how many of them
    /// it could load.
    pub loose: Option<(String, Vec<usize>)>,
}

impl Tally {
    fn new(probes: &doctor::Probes) -> Self {
        Tally {
            counts: doctor::Tally::new(probes),
            error: None,
            packages: vec![None; probes.devices.len()],
            loose: None,
        }
    }

    fn fail(&mut self, what: String) {
        self.error.get_or_insert(what);
    }
}

/// What a worker found in one file: (zip member, tally) per library.
pub type Found = Vec<(Option<String>, Tally)>;

/// Shared by the workers.
pub struct Ctx<'a> {
    /// How units are judged (the probes, the options, `--deep`).
    pub judge: doctor::Judge<'a>,
    /// The `.kpack` archives of the wheels given, as installed.
    pub wheels: &'a WheelArchives,
    /// Threads for the units of one file (`--deep`: each decodes a compressed bundle's
    /// entry table and image heads, [`doctor::Judge::prepare`]); [`scan_all`] shares
    /// `--jobs` between files and units.
    pub unit_jobs: usize,
}

/// Where the wheels given would be installed: their members lie under one root,
/// `site-packages`, as pip puts them.
const SITE_PACKAGES: &str = "/site-packages";

/// The `.kpack` archives of every wheel given (host wheel and device wheels together): a
/// split library in one of them finds its archives in the others, as it would once they
/// are installed side by side.
#[derive(Default)]
pub struct WheelArchives {
    /// Installed path → (wheel, member index).
    files: std::collections::HashMap<String, (PathBuf, usize)>,
}

impl WheelArchives {
    /// The `.kpack` members of every wheel among `files`.
    pub fn new(files: &[PathBuf]) -> Self {
        let mut out = WheelArchives::default();
        for path in files {
            let zip = File::open(path)
                .and_then(|mut f| head_of(&mut f))
                .is_ok_and(|h| crate::wheel::is_zip(&h));
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
    use offload_image::raw::{
        AR_MAGIC, BUNDLE_MAGIC, CCOB_MAGIC, ELF_MAGIC, NVFATBIN_MAGIC, OFFLOAD_BINARY_MAGIC,
    };
    // PE images (DLL, EXE, PYD), and COFF objects by machine (x86-64, ARM64).
    const MZ: [u8; 2] = object::pe::IMAGE_DOS_SIGNATURE.to_le_bytes();
    const AMD64: [u8; 2] = object::pe::IMAGE_FILE_MACHINE_AMD64.0.to_le_bytes();
    const ARM64: [u8; 2] = object::pe::IMAGE_FILE_MACHINE_ARM64.0.to_le_bytes();
    // `.kpack` archives are not libraries: doctor judges a split library from them.
    const PREFIXES: [&[u8]; 10] = [
        ELF_MAGIC,
        &MZ,
        &AMD64,
        &ARM64,
        NVFATBIN_MAGIC,
        AR_MAGIC,
        CCOB_MAGIC,
        OFFLOAD_BINARY_MAGIC,
        BUNDLE_MAGIC,
        // AOTriton's kernel archives (`judge::LooseCode::from_aks2`).
        offload_image::aks2::AKS2_MAGIC,
    ];
    PREFIXES
        .iter()
        .any(|p| head.starts_with(p) || (head.len() < p.len() && p.starts_with(head)))
        && !head.is_empty()
        || head.first() == Some(&b'\n')
}

/// Judges every unit of `data` (a file, or a zip member); `None` when it holds no device
/// code and nothing is wrong with it. In a linked host file with HIP or CUDA fat-binary
/// wrappers, the units are what the runtime registers (`offload_image::judge`); otherwise
/// those of the container walk.
fn scan_buffer(data: &[u8], input: Option<&Input>, ctx: &Ctx<'_>) -> Option<Tally> {
    if offload_image::aks2::is_aks2(data) {
        return Some(scan_aks2(data, ctx));
    }
    {
        // ELF, PE image or COFF object: whatever the host-file reader reads.
        if let Ok(elf) = HostFile::parse(data) {
            let registered = doctor::registered_fat_binaries(&elf, &ctx.judge.read);
            if !registered.is_empty() {
                let tally = scan_registered(&elf, &registered, input, ctx);
                if let Some(input) = input {
                    input.release(data);
                }
                return Some(tally);
            }
        }
    }
    let mut tally = Tally::new(ctx.judge.probes);
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
    let real = &ctx.judge.probes.devices[..ctx.judge.probes.real];
    let counts = real
        .iter()
        .map(|d| loose.for_device(d, &ctx.judge.select))
        .collect();
    tally.loose = Some((loose.summary(), counts));
    Some(tally)
}

/// An AOTriton archive (`.aks2`): its code objects are loaded by AOTriton's runtime itself,
/// so they are reported as code outside any offload container, judged per device.
fn scan_aks2(data: &[u8], ctx: &Ctx<'_>) -> Tally {
    let mut tally = Tally::new(ctx.judge.probes);
    let archive = match offload_image::aks2::Aks2::parse(data, &ctx.judge.read.limits) {
        Ok(a) => a,
        Err(e) => {
            tally.fail(e.to_string());
            return tally;
        }
    };
    let loose = doctor::LooseCode::from_aks2(&archive);
    let real = &ctx.judge.probes.devices[..ctx.judge.probes.real];
    let counts = real
        .iter()
        .map(|d| loose.for_device(d, &ctx.judge.select))
        .collect();
    tally.loose = Some((loose.summary(), counts));
    tally
}

/// What [`doctor::Judge::prepare`] reads of each unit ahead of judging, on
/// [`Ctx::unit_jobs`] threads when that is more than one and `--deep` makes it worth it
/// (else nothing is read ahead, and each unit is decoded as it is judged). The compressed
/// units' payloads are announced to `input` first.
fn prepare(units: &[Option<&Unit<'_>>], input: Option<&Input>, ctx: &Ctx<'_>) -> Vec<Prepared> {
    if ctx.unit_jobs <= 1 || !ctx.judge.deep || units.len() <= 1 {
        return units.iter().map(|_| Prepared::default()).collect();
    }
    if let Some(input) = input {
        for unit in units.iter().flatten() {
            if let UnitContent::Compressed(c) = &unit.content {
                input.will_read(c.payload());
            }
        }
    }
    offload_image::parallel::map_ordered(units, ctx.unit_jobs, |_, unit| match unit {
        Some(unit) => ctx.judge.prepare(unit),
        None => Prepared::default(),
    })
}

/// Judges the units of the container walk over `data` into `tally`; false when `data` is
/// not an offload file after all.
fn scan_units(data: &[u8], input: Option<&Input>, ctx: &Ctx<'_>, tally: &mut Tally) -> bool {
    // The units first (descriptors: nothing is decoded), so that `--deep` can prepare them
    // on several threads; then judged in order, and the walk's error (if any) after them.
    let mut units = Vec::new();
    let mut end = None;
    for (seen, unit) in offload_image::units(data, &ctx.judge.read).enumerate() {
        match unit {
            Ok(u) => units.push(u),
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
                end = Some(e.to_string());
                break;
            }
        }
    }
    let listed: Vec<Option<&Unit<'_>>> = units.iter().map(Some).collect();
    let prepared = prepare(&listed, input, ctx);
    let mut finished: Option<&[u8]> = None;
    for (unit, prepared) in units.iter().zip(prepared) {
        if let (Some(done), Some(input)) = (finished.take(), input) {
            input.release(done);
        }
        if let (UnitContent::Compressed(c), Some(input)) = (&unit.content, input) {
            input.will_read(c.payload());
        }
        let label = format!("{} unit {}", unit.location, unit.index);
        let judged = ctx
            .judge
            .unit_prepared(&mut tally.counts, unit, &label, false, prepared);
        if let Err(e) = judged {
            tally.fail(format!("{}: {e}", unit.location));
        }
        finished = unit.bytes(&ctx.judge.read).ok();
    }
    if let (Some(done), Some(input)) = (finished.take(), input) {
        input.release(done);
    }
    if let Some(e) = end {
        tally.fail(e);
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
    let mut tally = Tally::new(ctx.judge.probes);
    // Each wrapper's fat binary as a unit, or why the runtime refuses it.
    #[allow(clippy::type_complexity)]
    let units: Vec<Result<(&[u8], Result<Unit<'_>, Gap>), Gap>> = registered
        .iter()
        .map(|r| {
            let blob = r.fat_binary.clone()?;
            Ok((blob, doctor::registered_unit(blob, &ctx.judge.read)))
        })
        .collect();
    let listed: Vec<Option<&Unit<'_>>> = units
        .iter()
        .map(|u| u.as_ref().ok().and_then(|(_, unit)| unit.as_ref().ok()))
        .collect();
    let prepared = prepare(&listed, input, ctx);
    for ((r, unit), prepared) in registered.iter().zip(&units).zip(prepared) {
        let (blob, unit) = match unit {
            Ok(u) => u,
            Err(gap) => {
                tally.counts.refuse(gap.clone());
                continue;
            }
        };
        match unit {
            Ok(unit) => {
                if let (UnitContent::Compressed(c), Some(input)) = (&unit.content, input) {
                    input.will_read(c.payload());
                }
                let label = format!("fat binary of the wrapper at {:#x}", r.wrapper);
                let judged =
                    ctx.judge
                        .unit_prepared(&mut tally.counts, unit, &label, true, prepared);
                if let Err(e) = judged {
                    tally.counts.refuse(Gap::Unreadable {
                        kind: e.kind(),
                        what: e.what(),
                    });
                }
            }
            Err(gap) => tally.counts.refuse(gap.clone()),
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
    let mut tally = Tally::new(ctx.judge.probes);
    tally.counts.units = library.wrappers();
    for (p, device) in ctx.judge.probes.devices.iter().enumerate() {
        let isa = crate::kpack::isa_name(device);
        let arches: Vec<&str> = isa.as_deref().into_iter().collect();
        for r in library.resolve(&arches, &env, &mut archives, &ctx.judge.read) {
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
        let mut t = Tally::new(ctx.judge.probes);
        t.fail(what);
        vec![(None, t)]
    };
    // Only a regular file, opened without blocking (a FIFO put in its place would hang).
    let head = match offload_dropin::input::open_regular(path).and_then(|mut f| head_of(&mut f)) {
        Ok(h) => h,
        Err(e) => return damaged(format!("cannot read: {e}")),
    };
    if crate::wheel::is_zip(&head) {
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
        let mut t = Tally::new(ctx.judge.probes);
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
                let mut t = Tally::new(ctx.judge.probes);
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
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
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
                    offload_dropin::input::file_type_name(&meta.file_type())
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

/// Scans `files` on `jobs` threads (default: the number of CPUs), with a progress line on
/// a terminal: per file with device code, its index in `files` and what it holds, in the
/// order of `files`.
pub fn scan_all(files: &[PathBuf], ctx: &Ctx<'_>, jobs: Option<u32>) -> Vec<(usize, Found)> {
    let all = crate::jobs(jobs.map(|j| j as usize));
    let jobs = all.min(files.len().max(1));
    // The threads the files leave idle go to the units of each file (`--deep`).
    let ctx = &Ctx {
        judge: ctx.judge.clone(),
        wheels: ctx.wheels,
        unit_jobs: (all / jobs).max(1),
    };
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
                    let found = scan_file(path, ctx);
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
    results
}
