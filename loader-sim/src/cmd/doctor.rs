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
//! Units and reasons come from the library (`offload_image::judge`): in a linked host file
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
//! Speed and memory: what is scanned and how (files probed by their first bytes and
//! mapped, wheels read member by member, pages dropped once judged) is `crate::scan`; how
//! little of a compressed bundle is decoded (its entry table; with `--deep`, the first
//! bytes of every image) is `offload_image::judge::Judge`. Hashes of compressed bundles
//! are not verified.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use offload_image::driver::DriverNeed;
use offload_image::judge::{self as doctor, DriverVersion};
use offload_image::{Device, SelectOptions};
use serde::Serialize;

use crate::cmd::OnOff;
use crate::decode::{read_options, ZstdDecoder};
use crate::output::{json_line, table};
use crate::scan::{collect_files, scan_all, Ctx, Tally, WheelArchives};
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
    /// Threads (default: the number of CPUs): files probed in parallel, and with `--deep` the
    /// compressed bundles of a file decoded in parallel with the threads the files leave.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    jobs: Option<u32>,
    /// The NVIDIA driver version (`535.183.01`) that NVIDIA devices have: a chosen entry
    /// stored compressed with a codec this driver cannot decode does not load (zstd needs
    /// 550.54.14). Default: the version NVML reports when it detects the GPUs; none
    /// (compression not judged) with --target alone.
    #[arg(long, value_name = "VERSION", value_parser = parse_driver)]
    nvidia_driver: Option<DriverVersion>,
    /// Output format: text, json (as --json), or sarif (a SARIF 2.1.0 log).
    #[arg(long, value_enum)]
    format: Option<crate::sarif::ReportFormat>,
}

use crate::cmd::parse_driver;

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

/// One hint (JSON field names are part of the command's contract).
#[derive(Serialize, Clone, Debug)]
struct Hint {
    kind: &'static str,
    env: Option<&'static str>,
    value: Option<String>,
    offload_arch: Option<String>,
    safe: bool,
    /// What the hint says where no value names it (a driver whose number the release table
    /// does not give: "an NVIDIA driver for CUDA 13.4 or later").
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
}

impl Hint {
    fn text(&self) -> String {
        if let Some(text) = &self.text {
            return text.clone();
        }
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
    /// With `--python`: each package's verdict per device (crate::packages).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    packages: Vec<crate::packages::PackageVerdict>,
}

/// The devices to judge (name as given, device) and the NVIDIA driver they have
/// ([`crate::gpus::judged`]).
fn devices(args: &Args) -> Result<crate::gpus::Judged, Failure> {
    crate::gpus::judged(
        crate::cmd::parse_devices("--target", &args.targets)?,
        args.kfd_topology.as_deref(),
        args.xnack.map(|x| matches!(x, OnOff::On)),
        args.nvidia_driver,
    )
}

/// The hints for real device `k` of a library that does not cover it: the device package
/// a split library lacks, then the library's ([`doctor::hints`]). In a Python environment
/// (`owner`: the distribution that owns the library) the fix is another build of that
/// distribution, unless a device package is missing (kpack) or the driver is too old for
/// the code it has, which the first hint then names.
fn hints(plan: &Plan, k: usize, tally: &Tally, owner: Option<&String>) -> Vec<Hint> {
    let mut out = Vec::new();
    if let Some(Some(package)) = tally.packages.get(k) {
        // A split library: the archive for the device is not installed (kpack 13, 14).
        out.push(Hint {
            kind: "install",
            env: None,
            value: Some(package.clone()),
            offload_arch: None,
            safe: true,
            text: None,
        });
    }
    let hint = |kind, env, value: Option<String>, offload_arch: Option<String>, safe| Hint {
        kind,
        env,
        value,
        offload_arch,
        safe,
        text: None,
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
                doctor::Hint::Driver(DriverNeed::Version(needs)) => {
                    hint("driver", None, Some(needs.to_string()), None, true)
                }
                // No driver number the release table gives: the text says which driver.
                doctor::Hint::Driver(need) => Hint {
                    text: Some(need.to_string()),
                    ..hint("driver", None, None, None, true)
                },
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
    if let Some(p) = owner {
        if out
            .first()
            .is_none_or(|h| !matches!(h.kind, "install" | "driver"))
        {
            out.insert(0, hint("package", None, Some(p.clone()), None, true));
        }
    }
    out
}

/// One library as scanned, for its records: the file, the zip member, the installed
/// distribution that owns the file (`--python`), and what it holds.
struct Library<'a> {
    file: &'a Path,
    member: &'a Option<String>,
    package: Option<&'a String>,
    tally: &'a Tally,
}

impl Record {
    /// The record of `library` for real device `k` of `plan`.
    fn new(plan: &Plan, k: usize, library: &Library<'_>) -> Record {
        let tally = library.tally;
        let coverage = &tally.counts.coverage[k];
        let judged = match &tally.loose {
            Some((found, n)) => doctor::LooseCode::judgement(found, n[k]),
            None => coverage.judgement(),
        };
        let status = match tally.error {
            Some(_) => "damaged",
            None => judged.status.name(),
        };
        let ok = judged.loads;
        let (no_kernels, other_gpus) = coverage.set_aside_counts();
        Record {
            file: library.file.display().to_string(),
            member: library.member.clone(),
            package: library.package.cloned(),
            device: plan.real[k].0.clone(),
            units: tally.counts.units,
            units_covered: tally.counts.covered[k],
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
                hints(plan, k, tally, library.package)
            },
            error: tally.error.clone(),
        }
    }
}

impl Summary {
    /// The summary of `records`.
    fn new(
        records: &[Record],
        files: usize,
        libraries: usize,
        plan: &Plan,
        start: Instant,
    ) -> Self {
        let count = |s: &str| records.iter().filter(|r| r.status == s).count();
        Summary {
            summary: true,
            files_scanned: files,
            libraries,
            devices: plan.real.len(),
            ok: count("ok"),
            partial: count("partial"),
            none: count("none"),
            no_kernels: count("no-kernels"),
            outside: count("outside"),
            damaged: count("damaged"),
            seconds: (start.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            packages: plan
                .real
                .iter()
                .flat_map(|(name, _)| {
                    let mine = records.iter().filter(|r| &r.device == name);
                    crate::packages::verdicts(name, &library_verdicts(mine))
                })
                .collect(),
        }
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
        judge: doctor::Judge {
            probes: &plan.probes,
            select: SelectOptions {
                cuda: crate::cmd::cuda_driver(nvidia_driver),
                ..SelectOptions::default()
            },
            read: read_options(ZstdDecoder::DEFAULT, false),
            deep: args.deep,
        },
        wheels: &wheels,
        unit_jobs: 1,
    };
    let results = scan_all(&files, &ctx, args.jobs);
    let mut records = Vec::new();
    let mut library_count = 0usize;
    for (i, found) in &results {
        for (member, tally) in found {
            library_count += 1;
            let library = Library {
                file: &files[*i],
                member,
                package: owners.get(&files[*i]),
                tally,
            };
            records.extend((0..plan.real.len()).map(|k| Record::new(&plan, k, &library)));
        }
    }
    if args.python.is_some() {
        // Grouped by the installed distribution that owns each library (`package`; files
        // no distribution lists last), in scan order within each.
        records.sort_by(|a, b| {
            (a.package.is_none(), &a.package).cmp(&(b.package.is_none(), &b.package))
        });
    }
    // The CUDA runtime's own driver floor (issue 46 item 6): crate::cuda_runtime.
    let cuda = plan
        .real
        .iter()
        .any(|(_, d)| matches!(d, Device::Cuda { .. }));
    let runtime = crate::cuda_runtime::findings(&files, nvidia_driver, cuda);
    if let Some((floor, _)) = runtime.first() {
        let driver_hints = records.iter_mut().flat_map(|r| r.hints.iter_mut());
        for h in driver_hints.filter(|h| h.kind == "driver") {
            crate::cuda_runtime::raise(&mut h.value, *floor);
        }
    }
    let summary = Summary::new(&records, files.len(), library_count, &plan, start);
    let written = if args.format == Some(crate::sarif::ReportFormat::Sarif) {
        // SARIF 2.1.0 (crate::sarif) from the JSON records.
        let values: Vec<serde_json::Value> = records
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .chain(
                runtime
                    .iter()
                    .filter_map(|f| serde_json::to_value(&f.1).ok()),
            )
            .collect();
        let findings = crate::sarif::doctor_findings(&values);
        crate::sarif::write(&mut out, &findings, &crate::sarif::doctor_rule)
    } else if args.json || args.format == Some(crate::sarif::ReportFormat::Json) {
        records
            .iter()
            .try_for_each(|r| json_line(&mut out, r))
            .and_then(|()| runtime.iter().try_for_each(|f| json_line(&mut out, &f.1)))
            .and_then(|()| json_line(&mut out, &summary))
    } else {
        crate::cuda_runtime::text(&runtime)
            .iter()
            .try_for_each(|l| writeln!(out, "{l}"))
            .and_then(|()| write_tables(&mut out, &plan, &records, &summary))
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
    if records.iter().all(|r| r.loads) && runtime.is_empty() {
        Ok(Outcome::Ok)
    } else {
        Ok(Outcome::NoMatch)
    }
}

/// The table of every library for one device, then the summary line.
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
        // With packages known (--python), the headline counts packages (crate::packages).
        if let Some(h) = package_headline(name, device, &mine) {
            writeln!(out, "{h}")?;
        }
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
        if !mine.is_empty() {
            device_table(out, &mine)?;
        }
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

/// The per-package headline of device `name` ([`crate::packages::headline`]).
fn package_headline(name: &str, device: &Device, mine: &[&Record]) -> Option<String> {
    let libs = library_verdicts(mine.iter().copied());
    let label = match name == device.to_string() {
        true => name.to_string(),
        false => format!("{name} ({device})"),
    };
    crate::packages::headline(&label, &crate::packages::verdicts(name, &libs))
}

/// The package and verdict of each of `records`.
fn library_verdicts<'a>(
    records: impl Iterator<Item = &'a Record>,
) -> Vec<crate::packages::LibraryVerdict<'a>> {
    records
        .map(|r| crate::packages::LibraryVerdict {
            package: r.package.as_deref(),
            loads: r.loads,
        })
        .collect()
}

/// One device's table: a line per library (in a Python environment the first column is
/// the distribution).
fn device_table(out: &mut impl Write, mine: &[&Record]) -> std::io::Result<()> {
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
    table(out, &header[usize::from(!packaged)..], &rows)
}
