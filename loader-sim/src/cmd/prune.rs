//! `loader-sim prune FILE --keep TARGET [--keep TARGET ...] -o OUT [--dry-run] [--json]
//! [--no-shrink] [--keep-unloadable-units]`: drops the device images no kept device can
//! load (issue 14).
//!
//! The plan and the rewrite are the library's [`offload_image::prune`]; this command parses
//! the arguments, maps FILE, reports, and writes OUT.
//!
//! # Output
//!
//! The result is written to a temporary file next to OUT (created exclusively, under an
//! unpredictable name `.OUT.prune-RANDOM.tmp`, removed on SIGINT, SIGTERM and SIGHUP) and
//! renamed over OUT once complete: a failed or interrupted prune leaves no partial OUT (a
//! temporary file only after SIGKILL) and FILE is only read. An OUT that is not a regular
//! file (a symbolic link, `/dev/stdout`, `/dev/null`, a FIFO) is written through, never
//! replaced. Images are copied from the
//! memory-mapped input in chunks whose pages are released afterwards, so the resident set
//! stays small on 1 GB libraries.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use offload_image::prune::{self, Plan, PruneOptions, Pruned};
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
    /// Leave units of host files in which no kept device can load anything whole (by
    /// default they are emptied: bundles keep their host entries, fatbinaries no entry).
    #[arg(long)]
    keep_unloadable_units: bool,
    /// Refuse a signed Windows image instead of removing its certificate table (the
    /// Authenticode signature no longer matches once the file changes).
    #[arg(long)]
    refuse_signed: bool,
    /// Linked ELF files: where one more program header is needed and the table cannot grow
    /// where it is, move it after the kept containers (the smallest file) instead of
    /// rewriting the file in place. GNU strip/objcopy cannot rewrite such a file: strip
    /// before pruning, or use llvm-strip.
    #[arg(long)]
    move_program_headers: bool,
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
    missing: Vec<&'r str>,
    whole: bool,
    emptied: bool,
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
    units_emptied: usize,
    images_kept: usize,
    images_dropped: usize,
    size_before: u64,
    size_after: u64,
    saved: u64,
    dry_run: bool,
}

/// C libzstd for recompressed bundles: level 9, then 19 if the payload would be larger
/// than the original.
#[cfg(feature = "libzstd")]
fn zstd_compress(content: &[u8], budget: u64) -> Option<Vec<u8>> {
    let mut payload = Vec::new();
    for level in [9, 19] {
        payload = zstd::bulk::compress(content, level).ok()?;
        if payload.len() as u64 <= budget {
            break;
        }
    }
    Some(payload)
}

/// Runs `prune`.
pub fn run(args: &Args, mut out: &mut dyn std::io::Write) -> Result<Outcome, Failure> {
    let devices = crate::cmd::parse_devices("--keep", &args.keep)?;
    let keep: Vec<_> = devices.iter().map(|(_, d)| *d).collect();
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
    let options = PruneOptions {
        read: crate::decode::read_options(crate::decode::ZstdDecoder::DEFAULT, true),
        shrink: !args.no_shrink,
        keep_unloadable_units: args.keep_unloadable_units,
        refuse_signed: args.refuse_signed,
        move_program_headers: args.move_program_headers,
        #[cfg(feature = "libzstd")]
        zstd: Some(zstd_compress),
        #[cfg(not(feature = "libzstd"))]
        zstd: None,
    };
    // Identifying an image reads its first page, and the kernel maps up to 16 pages around
    // every fault: drop them once a unit is planned (RSS on 1 GB libraries).
    let mut release = |range: Range<u64>| {
        if let Some(part) = data.get(range.start as usize..range.end as usize) {
            input.release(part);
        }
    };
    let plan = prune::plan_with(data, &keep, &options, &mut release)
        .map_err(|e| Failure::file(&args.file, e))?;
    let pruned = prune::rewrite(&plan).map_err(|e| Failure::file(&args.file, e))?;

    report(args, &plan, &pruned, &mut out)
        .map_err(|e| Failure::msg(format!("cannot write the report: {e}")))?;
    if args.dry_run {
        return Ok(Outcome::Ok);
    }
    let Some(path) = &args.output else {
        return Err(Failure::msg("-o OUT is required without --dry-run".into()));
    };
    write_atomically(path, &args.file, |file| {
        let mut w = Releasing {
            out: BufWriter::with_capacity(1 << 20, file),
            input: &input,
        };
        pruned.write_to(&mut w).map_err(std::io::Error::other)?;
        w.flush()?;
        // FILE changed while read: what was written is not its pruned form.
        input.check().map_err(|f| std::io::Error::other(f.message))
    })
    .map_err(|e| Failure::file(path, format!("cannot write: {e}")))?;
    Ok(Outcome::Ok)
}

/// True when `a` and `b` name the same existing file: the same device and inode (a hard
/// link, a bind mount, a symbolic link to it; issue 43: a bind mount got past a comparison
/// of paths and the input was overwritten), or the same final path after links.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            if x.dev() == y.dev() && x.ino() == y.ino() {
                return true;
            }
        }
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// A writer that copies large parts of the input kernel-side, and releases the input
/// pages of what it has written from the map.
struct Releasing<'i, 'f> {
    out: BufWriter<&'f mut File>,
    input: &'i Input,
}

/// Parts of the input at least this long are copied by the kernel (`copy_file_range`).
const KERNEL_COPY: usize = 1 << 20;

impl Write for Releasing<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if buf.len() >= KERNEL_COPY && self.input.offset_of(buf).is_some() {
            self.out.flush()?;
            if self.input.copy_part(buf, self.out.get_mut())? {
                return Ok(());
            }
        }
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

/// Writes OUT. A regular file (or a name not yet taken) is written through a temporary
/// file in the same directory, renamed over OUT when complete: the temporary file is
/// created exclusively (`O_EXCL`, so a link planted at its name is not followed), under an
/// unpredictable name, and removed on an interrupt. Anything else — a symbolic link, a
/// device, a FIFO (`-o /dev/stdout`, `-o /dev/null`) — is written through, never replaced;
/// a directory is refused.
fn write_atomically(
    path: &Path,
    original: &Path,
    f: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(std::io::Error::other("OUT is a directory"));
        }
        Ok(meta) if !meta.is_file() => return write_through(path, f),
        _ => {}
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("OUT has no file name"))?;
    let (mut file, tmp, _remove) = create_temp(&dir, &name.to_string_lossy())?;
    let result = (|| {
        if let Ok(meta) = std::fs::metadata(original) {
            let _ = file.set_permissions(meta.permissions());
        }
        f(&mut file)?;
        // No fsync: like cp, strip and nvprune, prune leaves writeback to the kernel (waiting
        // for it took twice as long as the rest of pruning libnccl); the rename still
        // replaces OUT in one step for anyone reading it.
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes OUT that is not a regular file (a link, a device, a FIFO) through what it names:
/// opened for writing without creating or replacing anything (truncated only when it
/// leads to a regular file).
fn write_through(
    path: &Path,
    f: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(regular)
        .open(path)?;
    f(&mut file)?;
    file.flush()
}

/// Creates a new file `.NAME.loader-sim-prune.PID.RANDOM.tmp` in `dir`, exclusively (never
/// an existing file or a link's target), with a name nobody can predict. The name says
/// whose it is: a prune killed with SIGKILL (which no process can catch) leaves it behind,
/// and `.*.loader-sim-prune.PID.*.tmp` finds it (docs/RELIABILITY.md).
///
/// The file is removed on a signal from before it exists (the guard returned is armed
/// first: a signal between the creation and the guard left the file behind).
fn create_temp(
    dir: &Path,
    name: &str,
) -> std::io::Result<(File, PathBuf, loader_sim_os::cleanup::RemoveOnSignal)> {
    let mut last = None;
    for _ in 0..16 {
        let tmp = dir.join(format!(
            ".{name}.loader-sim-prune.{}.{:016x}.tmp",
            std::process::id(),
            random_u64()
        ));
        let remove = loader_sim_os::cleanup::RemoveOnSignal::new(&tmp);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(file) => return Ok((file, tmp, remove)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

/// 64 unpredictable bits: the standard library's randomly keyed hasher (seeded from the
/// operating system's random source) over the time and the process ID.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// The report of a prune: a line per unit and a summary line ([`report_json`] with `--json`).
fn report(
    args: &Args,
    plan: &Plan<'_>,
    pruned: &Pruned<'_, '_>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    if args.json {
        return report_json(args, plan, pruned, out);
    }
    let s = pruned.summary();
    let missing = |m: &[usize]| missing(&args.keep, m);
    let rows: Vec<Vec<String>> = plan
        .units()
        .iter()
        .map(|p| {
            let mut note = p.note.clone().unwrap_or_default();
            if !p.missing.is_empty() && !p.whole && !p.emptied {
                note = format!("no image for {}", missing(&p.missing).join(", "));
            }
            vec![
                format!("{} #{}", p.location, p.index),
                p.format.to_string(),
                p.kept.join(" "),
                p.dropped.join(" "),
                p.len_before.to_string(),
                p.len_after.to_string(),
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
        "{}: {} images kept, {} dropped, {} unit(s) emptied; {} -> {} bytes ({} saved){}; layout: {}",
        args.file.display(),
        s.images_kept,
        s.images_dropped,
        s.units_emptied,
        s.size_before,
        s.size_after,
        s.size_before.saturating_sub(s.size_after),
        if args.dry_run {
            ", dry run: nothing written"
        } else {
            ""
        },
        pruned.layout()
    )
}

/// The `--keep` devices of `m` (indices into `keep`).
fn missing<'k>(keep: &'k [String], m: &[usize]) -> Vec<&'k str> {
    m.iter()
        .filter_map(|i| keep.get(*i).map(String::as_str))
        .collect()
}

/// [`report`] with `--json`: one record per unit, then the summary.
fn report_json(
    args: &Args,
    plan: &Plan<'_>,
    pruned: &Pruned<'_, '_>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let s = pruned.summary();
    let missing = |m: &[usize]| missing(&args.keep, m);
    for p in plan.units() {
        json_line(
            out,
            &UnitRecord {
                unit: &p.location,
                index: p.index,
                format: p.format,
                offset: p.offset,
                kept: &p.kept,
                dropped: &p.dropped,
                missing: missing(&p.missing),
                whole: p.whole,
                emptied: p.emptied,
                bytes_before: p.len_before,
                bytes_after: p.len_after,
                note: p.note.as_deref(),
            },
        )?;
    }
    json_line(
        out,
        &Summary {
            file: &args.file.display().to_string(),
            layout: pruned.layout(),
            keep: &args.keep,
            units: s.units,
            units_emptied: s.units_emptied,
            images_kept: s.images_kept,
            images_dropped: s.images_dropped,
            size_before: s.size_before,
            size_after: s.size_after,
            saved: s.size_before.saturating_sub(s.size_after),
            dry_run: args.dry_run,
        },
    )?;
    Ok(())
}
