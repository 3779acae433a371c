//! `loader-sim register FILE --device T... [--json]` and
//! `loader-sim register --load LIB --device T... [--json]`.
//!
//! Static mode reads FILE (a host executable, shared library or object) as the program
//! would be in memory and makes the registration calls its constructors would make:
//! `__hipRegisterFatBinary` for every `.hipFatBinSegment` wrapper (in section order), then
//! `__tgt_register_lib` for every descriptor (in address order)
//! ([`crate::registration::statically`]).
//!
//! `--load` runs a child process (`loader-sim __load LIB`) in which the runtime shim
//! `libloader_sim_rt.so` is found under the names of the runtimes (`libamdhip64.so.5`/`.6`/`.7`, ...; symlinks in a
//! temporary directory put first on `LD_LIBRARY_PATH`), loads LIB with its dependencies so
//! that LIB's own constructors register their device code, and prints what the shim
//! reported at unregistration / exit.

use std::path::{Path, PathBuf};
use std::process::Command;

use loader_sim_rt::report::Record;
use offload_image::registration::SimulatedDevice;
use offload_image::{Policy, ReadOptions};

use crate::output::{json_line, table};
use crate::registration::{note, statically};
use crate::{Failure, Outcome};

/// Arguments of `register`.
#[derive(clap::Args)]
pub struct Args {
    /// The host executable, shared library or object to read (not with --load).
    #[arg(required_unless_present = "load", conflicts_with = "load")]
    file: Option<PathBuf>,
    /// Load this shared library with the runtime shim in place and report what its
    /// constructors register.
    #[arg(long, value_name = "LIB")]
    load: Option<PathBuf>,
    /// A simulated device: a target as a runtime detects it (gfx90a:sramecc+:xnack-, sm_80).
    #[arg(long = "device", value_name = "TARGET", required = true)]
    devices: Vec<String>,
    /// How a device picks among compatible images: the registering runtime's own rule,
    /// the ranking of COMPATIBILITY.md §10, or the first compatible image.
    #[arg(long, value_enum, default_value = "runtime")]
    policy: PolicyArg,
    /// Also list every image not chosen and why.
    #[arg(long)]
    explain: bool,
    /// Write JSON Lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Do not verify the truncated MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
    /// The runtime shim to load with --load (default: libloader_sim_rt.so next to this
    /// program, in its deps/ directory, or in ../lib of an installation).
    #[arg(long, value_name = "SO")]
    shim: Option<PathBuf>,
}

/// `--policy`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PolicyArg {
    /// Ranking for HIP/CUDA fat binaries, first compatible for OpenMP descriptors.
    Runtime,
    /// The ranking of COMPATIBILITY.md §10.
    Best,
    /// The first compatible image in discovery order.
    First,
    /// Native, then generic, then SPIR-V code; first in discovery order within a class
    /// (ROCm CLR).
    FirstByClass,
}

impl PolicyArg {
    fn policy(self) -> Option<Policy> {
        match self {
            PolicyArg::Runtime => None,
            PolicyArg::Best => Some(Policy::Best),
            PolicyArg::First => Some(Policy::First),
            PolicyArg::FirstByClass => Some(Policy::FirstByClass),
        }
    }

    fn env(self) -> &'static str {
        match self {
            PolicyArg::Runtime => "runtime",
            PolicyArg::Best => "best",
            PolicyArg::First => "first",
            PolicyArg::FirstByClass => "first-by-class",
        }
    }
}

/// Runs `register`.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> Result<Outcome, Failure> {
    let devices = args
        .devices
        .iter()
        .map(|d| {
            crate::gpu_names::device_arg("--device", d.trim())
                .map(|device| SimulatedDevice::new(d.trim(), device))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let records = match (&args.load, &args.file) {
        (Some(lib), _) => load(args, lib)?,
        (None, Some(file)) => {
            let (read, policy) = (read_options(args), args.policy.policy());
            statically(file, devices, read, policy, args.explain)?
        }
        (None, None) => return Err(Failure::msg("give FILE or --load LIB".into())),
    };
    print(args, &records, out)?;
    Ok(if records.iter().any(|r| r.selected.is_none()) {
        Outcome::NoMatch
    } else {
        Outcome::Ok
    })
}

fn read_options(args: &Args) -> ReadOptions {
    crate::decode::read_options(crate::decode::ZstdDecoder::DEFAULT, !args.no_verify_hash)
}

/// The runtime shim: `--shim`, else next to this program or in its `deps/` directory
/// (where cargo puts it when it builds `loader-sim`, which depends on the shim's crate).
fn find_shim(args: &Args) -> Result<PathBuf, Failure> {
    if let Some(s) = &args.shim {
        return Ok(s.clone());
    }
    let exe = std::env::current_exe()
        .map_err(|e| Failure::msg(format!("cannot locate this program: {e}")))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    // Inside a cargo target directory the first two may exist; the newer one is this
    // build's. An installation (scripts/install.sh) puts it in <prefix>/lib.
    [
        dir.join("libloader_sim_rt.so"),
        dir.join("deps/libloader_sim_rt.so"),
        dir.join("../lib/libloader_sim_rt.so"),
    ]
    .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
        .ok_or_else(|| {
            Failure::msg(format!(
                "runtime shim libloader_sim_rt.so not found next to {} or in ../lib (build the workspace: cargo build --release, or install with scripts/install.sh), or give --shim",
                exe.display()
            ))
        })
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<Self, Failure> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("loader-sim-load-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| Failure::msg(format!("cannot create {}: {e}", dir.display())))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Names under which programs look for the runtimes the shim stands in for.
const SHIM_NAMES: [&str; 6] = [
    "libamdhip64.so.5",
    "libamdhip64.so.6",
    "libamdhip64.so.7",
    "libamdhip64.so",
    "libomptarget.so",
    "libcudart.so.13",
];

fn load(args: &Args, lib: &Path) -> Result<Vec<Record>, Failure> {
    let shim = find_shim(args)?;
    let shim = shim
        .canonicalize()
        .map_err(|e| Failure::file(&shim, format!("cannot open: {e}")))?;
    // An absolute path: dlopen searches the library path for a name without a slash.
    let lib_abs = lib
        .canonicalize()
        .map_err(|e| Failure::file(lib, format!("cannot open: {e}")))?;
    let tmp = TempDir::new()?;
    for name in SHIM_NAMES {
        #[cfg(unix)]
        let linked = std::os::unix::fs::symlink(&shim, tmp.0.join(name));
        #[cfg(not(unix))]
        let linked = std::fs::copy(&shim, tmp.0.join(name)).map(|_| ());
        linked.map_err(|e| Failure::msg(format!("cannot link the shim as {name}: {e}")))?;
    }
    let report = tmp.0.join("report.jsonl");
    let mut path = std::ffi::OsString::from(&tmp.0);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        path.push(":");
        path.push(old);
    }
    let exe = std::env::current_exe()
        .map_err(|e| Failure::msg(format!("cannot locate this program: {e}")))?;
    let limit = crate::child::time_limit(LOAD_TIME).map_err(|m| Failure {
        message: m,
        kind: Some("usage"),
        offset: None,
    })?;
    let child = crate::child::run(
        Command::new(exe)
            .arg("__load")
            .arg(&lib_abs)
            .env("LD_LIBRARY_PATH", path)
            .env("LOADER_SIM_DEVICES", args.devices.join(","))
            .env("LOADER_SIM_REPORT", &report)
            .env("LOADER_SIM_POLICY", args.policy.env()),
        limit,
        LOAD_OUTPUT,
    )
    .map_err(|e| Failure::msg(format!("cannot start the loader process: {e}")))?
    .map_err(|stopped| Failure::file(lib, format!("cannot load: the loader process: {stopped}")))?;
    let stderr = String::from_utf8_lossy(&child.stderr);
    if !child.status.success() {
        // The child's own one-line error (dlopen's message), else how it ended.
        let why = stderr
            .lines()
            .find_map(|l| l.strip_prefix("loader-sim: error: "))
            .map(|l| {
                // "<path>: <dlerror>", where dlerror itself starts with the path.
                let abs = format!("{}: ", lib_abs.display());
                let l = l.strip_prefix(&abs).unwrap_or(l);
                l.strip_prefix(&abs).unwrap_or(l).to_string()
            })
            .unwrap_or_else(|| {
                format!(
                    "the loader process ended before the load finished ({}): the library's constructors crashed or ended the process",
                    crate::child::describe(&child.status)
                )
            });
        return Err(Failure::file(lib, format!("cannot load: {why}")));
    }
    // A constructor that calls exit(0) ends the child with success, before `dlopen` returns.
    if !String::from_utf8_lossy(&child.stdout)
        .lines()
        .any(|l| l == LOADED)
    {
        return Err(Failure::file(
            lib,
            format!(
                "cannot load: the loader process ended before the load finished ({}): the library's constructors ended the process",
                crate::child::describe(&child.status)
            ),
        ));
    }
    // The shim's diagnostics (refused registrations, ...) pass through.
    eprint!("{stderr}");
    let text = match std::fs::read_to_string(&report) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Failure::file(&report, format!("cannot read: {e}"))),
    };
    let records = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Record>(l)
                .map_err(|e| Failure::file(&report, format!("bad record: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if records.is_empty() {
        note(lib, "nothing was registered");
    }
    Ok(records)
}

/// How long `register --load` lets the library load (`LOADER_SIM_CHILD_TIMEOUT` overrides
/// it): a constructor that never returns is killed there.
const LOAD_TIME: std::time::Duration = std::time::Duration::from_secs(300);

/// The most bytes read of each output of the loader process.
const LOAD_OUTPUT: usize = 4 << 20;

/// What the loader process prints on standard output once `dlopen` has returned: a
/// constructor that ends the process with `exit(0)` leaves it out.
const LOADED: &str = "loader-sim: loaded";

/// `loader-sim __load LIB` (internal): the child of `register --load`.
pub fn load_child(lib: &Path) -> Result<Outcome, Failure> {
    // A crash in a constructor ends this process with its signal, which the parent names.
    loader_sim_os::default_crash_signals();
    loader_sim_os::load_library(lib).map_err(|e| Failure::file(lib, e))?;
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{LOADED}");
    let _ = out.flush();
    Ok(Outcome::Ok)
}

fn print(args: &Args, records: &[Record], mut out: &mut dyn std::io::Write) -> Result<(), Failure> {
    let written = if args.json {
        records.iter().try_for_each(|r| json_line(&mut out, r))
    } else {
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|r| {
                let dash = || "-".to_string();
                vec![
                    r.device.clone().unwrap_or_else(dash),
                    r.unit.clone(),
                    r.registration.clone(),
                    r.selected
                        .clone()
                        .or_else(|| r.error.clone())
                        .unwrap_or_else(dash),
                    r.size.map_or_else(dash, |s| s.to_string()),
                    r.sha256.clone().unwrap_or_else(dash),
                    entries_cell(r),
                ]
            })
            .collect();
        table(
            &mut out,
            &[
                "DEVICE",
                "UNIT",
                "REGISTRATION",
                "SELECTED",
                "SIZE",
                "SHA256",
                "ENTRIES",
            ],
            &rows,
        )
    };
    written
        .and_then(|_| out.flush())
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))
}

fn entries_cell(r: &Record) -> String {
    const SHOWN: usize = 3;
    let names: Vec<&str> = r
        .entries
        .iter()
        .take(SHOWN)
        .map(|e| e.name.as_str())
        .collect();
    let mut cell = format!("{} ({})", r.entries.len(), r.entries_from);
    if !names.is_empty() {
        cell.push_str(": ");
        cell.push_str(&names.join(", "));
        if r.entries.len() > SHOWN {
            cell.push_str(", ...");
        }
    }
    cell
}
