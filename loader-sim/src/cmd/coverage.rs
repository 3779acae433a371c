//! `loader-sim coverage PATH... [--format text|markdown|json]`: which GPUs a file, wheel,
//! folder or environment serves, per library and per package, as a matrix.
//!
//! Every library with device code under PATH (as `doctor` finds them: files, directory
//! trees, wheels) is judged for every GPU of a catalogue ([`CATALOGUE`]: the compute
//! capabilities NVIDIA ships and the AMD processors ROCm supports, Instinct GPUs in both
//! xnack modes) exactly as `doctor` judges it (`offload_image::judge`, whose selection is
//! `select`'s): a library **serves** a GPU when every unit of it that could be launched
//! there has an image the GPU loads; **partial** when some do. A package (the wheel a
//! library came from, or the installed distribution whose `RECORD` lists it) serves the
//! GPUs every library of it with device code serves: what it can promise. The union is
//! what any library serves. GPUs nothing serves at all are left out of the matrix.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use offload_image::judge as doctor;
use offload_image::{Device, SelectOptions};
use serde::Serialize;

use crate::decode::{read_options, ZstdDecoder};
use crate::output::json_line;
use crate::scan::{collect_files, scan_all, Ctx, WheelArchives};
use crate::{Failure, Outcome};

/// The GPUs judged: NVIDIA compute capabilities (the CUDA C++ Programming Guide's table of
/// compute capabilities, 5.0 to 12.1) and the AMD processors of ROCm's GPU specifications,
/// Instinct GPUs with ECC on in both xnack modes (`HSA_XNACK`), Radeon GPUs as they are.
pub const CATALOGUE: &[&str] = &[
    "sm_50",
    "sm_52",
    "sm_53",
    "sm_60",
    "sm_61",
    "sm_62",
    "sm_70",
    "sm_72",
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_89",
    "sm_90",
    "sm_100",
    "sm_103",
    "sm_110",
    "sm_120",
    "sm_121",
    "gfx900",
    "gfx906:sramecc+:xnack-",
    "gfx908:sramecc+:xnack-",
    "gfx90a:sramecc+:xnack-",
    "gfx90a:sramecc+:xnack+",
    "gfx942:sramecc+:xnack-",
    "gfx942:sramecc+:xnack+",
    "gfx950:sramecc+:xnack-",
    "gfx950:sramecc+:xnack+",
    "gfx1010",
    "gfx1030",
    "gfx1031",
    "gfx1032",
    "gfx1100",
    "gfx1101",
    "gfx1102",
    "gfx1103",
    "gfx1150",
    "gfx1151",
    "gfx1200",
    "gfx1201",
];

/// Output formats.
#[derive(Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum Format {
    /// Aligned text: per library the GPUs it serves and partly serves, then per package.
    Text,
    /// A Markdown table (libraries and packages × GPUs), for release notes.
    Markdown,
    /// JSON Lines: a record per library, per package, then the union.
    Json,
}

/// Arguments of `coverage`.
#[derive(clap::Args)]
pub struct Args {
    /// Files, directories (walked recursively; a site-packages directory attributes each
    /// library to the distribution whose RECORD lists it), wheels and other zip files.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// The output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Files probed in parallel (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    jobs: Option<u32>,
}

/// One library's cell for one GPU.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    /// `ok` (serves), `partial`, `none`, `no-kernels`, `outside`, `damaged` (doctor's).
    pub status: &'static str,
    /// Units with an image the GPU loads.
    pub units_covered: usize,
}

/// One library (JSON record `"record": "library"`).
#[derive(Serialize)]
pub struct LibraryRow {
    record: &'static str,
    file: String,
    member: Option<String>,
    package: Option<String>,
    units: usize,
    /// The GPUs every unit with kernels loads on.
    serves: Vec<String>,
    /// The GPUs some units load on, with how many.
    partial: Vec<(String, usize)>,
    /// How: the targets of its images by kind (`cubin`, `PTX`, `code object`, `LTO IR`,
    /// `SPIR-V`), as `list` names them (`sm_90a`, `gfx90a:xnack-`, `gfx9-generic`).
    code: std::collections::BTreeMap<String, Vec<String>>,
    /// Its PTX: per target, the ISA version and the oldest Linux driver that compiles it
    /// (`offload_image::driver`: the release that introduced the ISA, its GA driver).
    ptx: Vec<Ptx>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// How each GPU it serves or partly serves is served: per GPU, the images `select`
    /// chooses for it in the library's units, grouped by kind and architecture.
    how: Vec<Served>,
    #[serde(skip)]
    cells: Vec<Cell>,
}

/// How one GPU is served by a library (JSON `how` of a library record).
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The GPU (as in `serves`).
    gpu: String,
    /// The images chosen for it, one entry per kind and architecture, in first-seen order.
    by: Vec<Way>,
}

/// One way a GPU is served: the kind and architecture of the image `select` chooses in
/// some units, and how many units.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Way {
    /// The chosen image's kind, as `select --json` names it (`image_kind`: `cubin`, `ptx`,
    /// `elf`, `bitcode`, `spirv`).
    image_kind: &'static str,
    /// Its architecture, as `select --json` names it (`arch`: `sm_80`, `compute_90a`,
    /// `gfx90a:xnack-`, `gfx11-generic`).
    arch: Option<String>,
    /// In words: `cubin (SASS)`, `PTX (JIT)`, `code object (exact target)`, `code object
    /// (generic family)`, `LTO IR`, `SPIR-V`.
    served_as: &'static str,
    /// An NVIDIA `a` (architecture-specific) or `f` (family-specific) variant.
    #[serde(skip_serializing_if = "Option::is_none")]
    variant: Option<&'static str>,
    /// For PTX: its ISA version (`.version`), the oldest CUDA version whose driver JITs
    /// it and that release's minimum Linux driver, as in `ptx`.
    #[serde(skip_serializing_if = "Option::is_none")]
    isa: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    needs_cuda: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    needs_driver: Option<String>,
    /// The units served this way.
    units: usize,
}

impl Way {
    /// The way `image` (the one chosen, its first bytes made) serves.
    fn of(image: &offload_image::Image<'_>) -> Way {
        let identity = offload_image::identify(image);
        let image_kind = crate::output::code_name(&identity);
        let arch = crate::output::arch_name(&identity);
        let (served_as, variant) = match (image_kind, &identity.target) {
            ("cubin", offload_image::Target::Nvptx(a)) => {
                ("cubin (SASS)", suffix(a.variant.suffix()))
            }
            ("ptx", offload_image::Target::Nvptx(a)) => ("PTX (JIT)", suffix(a.variant.suffix())),
            ("cubin", _) => ("cubin (SASS)", None),
            ("ptx", _) => ("PTX (JIT)", None),
            ("elf", _) if arch.as_deref().is_some_and(|a| a.contains("-generic")) => {
                ("code object (generic family)", None)
            }
            ("elf", _) => ("code object (exact target)", None),
            ("bitcode", _) => ("LTO IR", None),
            ("spirv", _) => ("SPIR-V", None),
            _ => ("other", None),
        };
        let ptx = (image_kind == "ptx")
            .then(|| Ptx::new("", offload_image::driver::PtxIsa::of_text(image.bytes)));
        Way {
            image_kind,
            arch,
            served_as,
            variant,
            isa: ptx.as_ref().and_then(|p| p.isa.clone()),
            needs_cuda: ptx.as_ref().and_then(|p| p.needs_cuda.clone()),
            needs_driver: ptx.and_then(|p| p.needs_driver),
            units: 0,
        }
    }

    /// In words, for text and Markdown: `cubin sm_80`, `PTX compute_90 JIT (ISA 7.8,
    /// driver >= 520.61.05)`, `code object gfx9-generic (generic family)`.
    fn words(&self) -> String {
        let arch = self.arch.as_deref().unwrap_or("?");
        let what = match self.image_kind {
            "cubin" => format!("cubin {arch}"),
            "ptx" => {
                let mut s = format!("PTX {arch} JIT");
                if let Some(isa) = &self.isa {
                    s.push_str(&format!(" (ISA {isa}"));
                    if let Some(d) = &self.needs_driver {
                        s.push_str(&format!(", driver >= {d}"));
                    }
                    s.push(')');
                }
                s
            }
            "elf" if self.served_as.contains("generic") => format!("code object {arch} (generic)"),
            "elf" => format!("code object {arch}"),
            _ => format!("{} {arch}", self.served_as),
        };
        match self.variant {
            Some(v) => format!("{what} [{v} variant]"),
            None => what,
        }
    }
}

/// An NVIDIA architecture suffix as a variant name.
fn suffix(s: &str) -> Option<&'static str> {
    match s {
        "a" => Some("a"),
        "f" => Some("f"),
        _ => None,
    }
}

/// One PTX of a library: what the driver must JIT.
#[derive(Serialize)]
struct Ptx {
    target: String,
    /// `8.8`, when known.
    isa: Option<String>,
    /// The oldest CUDA version whose driver compiles it.
    needs_cuda: Option<String>,
    /// That release's minimum Linux driver.
    needs_driver: Option<String>,
}

impl Ptx {
    fn new(target: &str, isa: Option<offload_image::driver::PtxIsa>) -> Self {
        let cuda = isa.and_then(|i| i.needs_cuda());
        Ptx {
            target: target.to_string(),
            isa: isa.map(|i| i.to_string()),
            needs_cuda: cuda.map(|c| c.to_string()),
            needs_driver: cuda
                .and_then(|c| offload_image::driver::RELEASES.iter().find(|r| r.cuda == c))
                .and_then(|r| r.min_driver)
                .map(|d| d.to_string()),
        }
    }
}

/// One package (JSON record `"record": "package"`).
#[derive(Serialize)]
pub struct PackageRow {
    record: &'static str,
    package: String,
    libraries: usize,
    /// The GPUs every library of it serves: what it can promise.
    serves: Vec<String>,
    /// The GPUs some library of it serves.
    any: Vec<String>,
}

/// The union (JSON record `"record": "union"`).
#[derive(Serialize)]
struct Union {
    record: &'static str,
    libraries: usize,
    /// The GPUs any library serves.
    serves: Vec<String>,
    /// The GPUs every library serves.
    every: Vec<String>,
}

/// The package of a library: the distribution owning the file, else the wheel it is a
/// member of (`name version` from the wheel's file name).
fn package_of(
    file: &Path,
    member: &Option<String>,
    owners: &HashMap<PathBuf, String>,
) -> Option<String> {
    if let Some(o) = owners.get(file) {
        return Some(o.clone());
    }
    member.as_ref()?;
    let name = file.file_name()?.to_str()?;
    let stem = name.strip_suffix(".whl")?;
    let mut parts = stem.split('-');
    let (dist, version) = (parts.next()?, parts.next()?);
    Some(format!("{} {version}", dist.replace('_', "-")))
}

/// Runs `coverage`.
pub fn run(args: &Args, mut out: &mut dyn Write) -> Result<Outcome, Failure> {
    let devices: Vec<Device> = CATALOGUE
        .iter()
        .map(|t| Device::parse(t).map_err(|e| Failure::msg(format!("catalogue {t}: {e}"))))
        .collect::<Result<_, _>>()?;
    // The catalogue itself, no variants: coverage has no hints to offer.
    let probes = doctor::Probes {
        real: devices.len(),
        devices,
        variants: Vec::new(),
        nvidia_driver: None,
    };
    let dirs: Vec<PathBuf> = args.paths.iter().filter(|p| p.is_dir()).cloned().collect();
    let owners = crate::python::owners(&dirs);
    let files = collect_files(&args.paths)?;
    let wheels = WheelArchives::new(&files);
    let ctx = Ctx {
        judge: doctor::Judge {
            probes: &probes,
            select: SelectOptions::default(),
            read: read_options(ZstdDecoder::DEFAULT, false),
            // The images' own headers, as `select` reads them, also in compressed bundles.
            deep: true,
        },
        wheels: &wheels,
        unit_jobs: 1,
    };
    let results = scan_all(&files, &ctx, args.jobs);
    let mut rows = library_rows(&results, &files, &owners);
    add_code_and_how(&mut rows, &probes.devices);
    let packages = package_rows(&rows);
    let union = union_of(&rows);
    let written = match args.format {
        Format::Json => rows
            .iter()
            .try_for_each(|r| json_line(&mut out, r))
            .and_then(|()| packages.iter().try_for_each(|p| json_line(&mut out, p)))
            .and_then(|()| json_line(&mut out, &union)),
        Format::Text => text(&mut out, &rows, &packages, &union),
        Format::Markdown => markdown(&mut out, &rows, &packages),
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
    Ok(Outcome::Ok)
}

/// One row per library of the scan `results` (over `files`; `owners`: the distribution
/// owning each file), a cell per GPU of the catalogue.
fn library_rows(
    results: &[(usize, crate::scan::Found)],
    files: &[PathBuf],
    owners: &HashMap<PathBuf, String>,
) -> Vec<LibraryRow> {
    let mut rows = Vec::new();
    for (i, found) in results {
        for (member, tally) in found {
            let cells: Vec<Cell> = (0..CATALOGUE.len())
                .map(|k| {
                    let judged = match &tally.loose {
                        Some((found, n)) => doctor::LooseCode::judgement(found, n[k]),
                        None => tally.counts.coverage[k].judgement(),
                    };
                    Cell {
                        status: match tally.error {
                            Some(_) => "damaged",
                            None => judged.status.name(),
                        },
                        units_covered: tally.counts.covered[k],
                    }
                })
                .collect();
            let serves = (0..CATALOGUE.len())
                .filter(|&k| cells[k].status == "ok")
                .map(|k| CATALOGUE[k].to_string())
                .collect();
            let partial = (0..CATALOGUE.len())
                .filter(|&k| cells[k].status == "partial")
                .map(|k| (CATALOGUE[k].to_string(), cells[k].units_covered))
                .collect();
            rows.push(LibraryRow {
                record: "library",
                file: files[*i].display().to_string(),
                member: member.clone(),
                package: package_of(&files[*i], member, owners),
                units: tally.counts.units,
                serves,
                partial,
                code: Default::default(),
                ptx: Vec::new(),
                error: tally.error.clone(),
                how: Vec::new(),
                cells,
            });
        }
    }
    rows
}

/// The union record of `rows`.
fn union_of(rows: &[LibraryRow]) -> Union {
    Union {
        record: "union",
        libraries: rows.len(),
        serves: CATALOGUE
            .iter()
            .filter(|t| rows.iter().any(|r| r.serves.iter().any(|s| s == *t)))
            .map(|t| t.to_string())
            .collect(),
        every: CATALOGUE
            .iter()
            .filter(|t| !rows.is_empty() && rows.iter().all(|r| r.serves.iter().any(|s| s == *t)))
            .map(|t| t.to_string())
            .collect(),
    }
}

/// Fills each row's `code` (its images' targets by kind, read as `list` reads them) and
/// `how` (for each GPU the row serves or partly serves, the images `select` chooses for
/// it: [`ways_in`]), in one pass over each file: every unit is opened (decoded) once for
/// both, a wheel's members by name.
fn add_code_and_how(rows: &mut [LibraryRow], devices: &[Device]) {
    let mut files: Vec<String> = rows.iter().map(|r| r.file.clone()).collect();
    files.dedup();
    let read = read_options(ZstdDecoder::DEFAULT, false);
    for file in files {
        // Per library (`None`: the file itself; else the member), the ways of its units.
        let mut ways: Vec<(Option<String>, Vec<Vec<Way>>)> = Vec::new();
        let mut see = |member: Option<&str>, images: &[offload_image::Image<'_>]| {
            let at = match ways.iter().position(|(m, _)| m.as_deref() == member) {
                Some(at) => at,
                None => {
                    ways.push((member.map(str::to_string), vec![Vec::new(); devices.len()]));
                    ways.len() - 1
                }
            };
            ways_in(images, devices, &read, &mut ways[at].1);
        };
        // A file that does not read again is left without: its row has the error.
        let Ok(libraries) =
            crate::images::libraries_seeing(Path::new(&file), false, Some(&mut see))
        else {
            continue;
        };
        for lib in libraries {
            let Some(row) = rows
                .iter_mut()
                .find(|r| r.file == file && r.member == lib.member)
            else {
                continue;
            };
            row.ptx = lib.ptx.iter().map(|(t, isa)| Ptx::new(t, *isa)).collect();
            for line in &lib.lines {
                let crate::listing::Line::Image(r) = line else {
                    continue;
                };
                let kind = match r.image_kind {
                    "cubin" => "cubin",
                    "ptx" => "PTX",
                    "elf" => "code object",
                    "bitcode" => "LTO IR",
                    "spirv" => "SPIR-V",
                    _ => continue,
                };
                let Some(target) = &r.target_id else { continue };
                let list = row.code.entry(kind.to_string()).or_default();
                if !list.contains(target) {
                    list.push(target.clone());
                }
            }
            let Some((_, by_device)) = ways.iter_mut().find(|(m, _)| *m == lib.member) else {
                continue;
            };
            row.how = std::mem::take(by_device)
                .into_iter()
                .enumerate()
                .filter(|(k, by)| {
                    !by.is_empty()
                        && row
                            .cells
                            .get(*k)
                            .is_some_and(|c| matches!(c.status, "ok" | "partial"))
                })
                .map(|(k, by)| Served {
                    gpu: CATALOGUE[k].to_string(),
                    by,
                })
                .collect();
        }
    }
}

/// Adds to `out` how `select` serves each of `devices` in one opened unit whose images
/// (as stored) are `images`: per device, the kind and architecture of the image chosen
/// for it (`offload_image::choose` with `select`'s default options, the chosen image
/// identified from its first bytes as `select` identifies it), counted in units. A split
/// library (`KPACK.md`) and damaged units are never opened, so give nothing here.
fn ways_in(
    images: &[offload_image::Image<'_>],
    devices: &[Device],
    read: &offload_image::ReadOptions,
    out: &mut [Vec<Way>],
) {
    // The PTX `.version` is within the text's first 4 KiB (`PtxIsa::of_text`).
    const HEAD: usize = if offload_image::stream::IDENTIFY_LEN > 4096 {
        offload_image::stream::IDENTIFY_LEN
    } else {
        4096
    };
    let options = SelectOptions::default();
    let choices = offload_image::choose(images.iter().copied(), devices, &options);
    for (ways, choice) in out.iter_mut().zip(&choices) {
        let Some(image) = choice.chosen().and_then(|i| images.get(i)) else {
            continue;
        };
        let Ok(made) = image.peek(HEAD, read) else {
            continue;
        };
        let way = Way::of(&image.with_checked(&made));
        match ways
            .iter_mut()
            .find(|w| w.image_kind == way.image_kind && w.arch == way.arch)
        {
            Some(w) => w.units += 1,
            None => ways.push(Way { units: 1, ..way }),
        }
    }
}

/// One row per package, in first-seen order.
fn package_rows(rows: &[LibraryRow]) -> Vec<PackageRow> {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if let Some(p) = r.package.as_deref() {
            if !names.contains(&p) {
                names.push(p);
            }
        }
    }
    names
        .into_iter()
        .map(|name| {
            let mine: Vec<&LibraryRow> = rows
                .iter()
                .filter(|r| r.package.as_deref() == Some(name))
                .collect();
            let served_by = |t: &str, r: &&LibraryRow| r.serves.iter().any(|s| s == t);
            PackageRow {
                record: "package",
                package: name.to_string(),
                libraries: mine.len(),
                serves: CATALOGUE
                    .iter()
                    .filter(|t| mine.iter().all(|r| served_by(t, r)))
                    .map(|t| t.to_string())
                    .collect(),
                any: CATALOGUE
                    .iter()
                    .filter(|t| mine.iter().any(|r| served_by(t, r)))
                    .map(|t| t.to_string())
                    .collect(),
            }
        })
        .collect()
}

/// A library's name as shown: `file`, or `wheel!member`.
fn library_name(r: &LibraryRow) -> String {
    match &r.member {
        Some(m) => format!("{}!{m}", r.file),
        None => r.file.clone(),
    }
}

/// A list of GPUs, `-` when empty.
fn list(v: &[String]) -> String {
    if v.is_empty() {
        "-".to_string()
    } else {
        v.join(" ")
    }
}

fn text(
    out: &mut dyn Write,
    rows: &[LibraryRow],
    packages: &[PackageRow],
    union: &Union,
) -> std::io::Result<()> {
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                library_name(r),
                r.units.to_string(),
                match &r.error {
                    Some(_) => "damaged".to_string(),
                    None => list(&r.serves),
                },
                if r.partial.is_empty() {
                    "-".to_string()
                } else {
                    r.partial
                        .iter()
                        .map(|(t, n)| format!("{t} ({n}/{})", r.units))
                        .collect::<Vec<_>>()
                        .join(" ")
                },
            ]
        })
        .collect();
    crate::output::table(
        &mut &mut *out,
        &["LIBRARY", "UNITS", "SERVES", "PARTLY"],
        &table,
    )?;
    if !packages.is_empty() {
        writeln!(out)?;
        let table: Vec<Vec<String>> = packages
            .iter()
            .map(|p| {
                vec![
                    p.package.clone(),
                    p.libraries.to_string(),
                    list(&p.serves),
                    list(&p.any),
                ]
            })
            .collect();
        crate::output::table(
            &mut &mut *out,
            &[
                "PACKAGE",
                "LIBRARIES",
                "EVERY LIBRARY SERVES",
                "SOME LIBRARY SERVES",
            ],
            &table,
        )?;
    }
    let how = how_rows(rows, |s| s.to_string());
    if !how.is_empty() {
        writeln!(out)?;
        crate::output::table(&mut &mut *out, &["LIBRARY", "GPUS", "SERVED BY"], &how)?;
    }
    writeln!(
        out,
        "\n{} libraries with device code; some library serves: {}; every library serves: {}",
        union.libraries,
        list(&union.serves),
        list(&union.every)
    )
}

/// The rows of the "how" tables: per library, the GPUs served the same way (grouped, in
/// catalogue order) and that way in words (`cubin sm_80`; with several ways, each with its
/// units: `cubin sm_80 (3 units); PTX compute_80 JIT (ISA 7.0, driver >= 450.36.06) (1
/// unit)`). `name` shows a library's name (escaped for the format).
fn how_rows(rows: &[LibraryRow], name: impl Fn(&str) -> String) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for r in rows {
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for served in &r.how {
            let words = if served.by.len() == 1 && served.by[0].units == r.units {
                served.by[0].words()
            } else {
                served
                    .by
                    .iter()
                    .map(|w| {
                        let s = if w.units == 1 { "" } else { "s" };
                        format!("{} ({} unit{s})", w.words(), w.units)
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            match groups.iter_mut().find(|(w, _)| *w == words) {
                Some((_, gpus)) => gpus.push(&served.gpu),
                None => groups.push((words, vec![&served.gpu])),
            }
        }
        let shown = name(&library_name(r));
        for (words, gpus) in groups {
            out.push(vec![shown.clone(), gpus.join(" "), words]);
        }
    }
    out
}

/// The Markdown matrix: a column per GPU some library serves or partly serves.
fn markdown(
    out: &mut dyn Write,
    rows: &[LibraryRow],
    packages: &[PackageRow],
) -> std::io::Result<()> {
    let columns: Vec<usize> = (0..CATALOGUE.len())
        .filter(|&k| {
            rows.iter()
                .any(|r| matches!(r.cells[k].status, "ok" | "partial"))
        })
        .collect();
    // Names come from files: control characters and Markdown's `|` and `` ` `` neutralised.
    let escape = |s: &str| -> String {
        s.chars()
            .map(|c| match c {
                c if c.is_control() => "?".to_string(),
                '|' => "\\|".to_string(),
                '`' => "'".to_string(),
                c => c.to_string(),
            })
            .collect()
    };
    write!(out, "| library | units |")?;
    for &k in &columns {
        write!(out, " {} |", CATALOGUE[k])?;
    }
    writeln!(out)?;
    write!(out, "|---|---:|")?;
    for _ in &columns {
        write!(out, ":---:|")?;
    }
    writeln!(out)?;
    for p in packages {
        write!(
            &mut *out,
            "| **{}** ({} libraries) | |",
            escape(&p.package),
            p.libraries
        )?;
        for &k in &columns {
            let t = CATALOGUE[k];
            let cell = if p.serves.iter().any(|s| s == t) {
                "✅"
            } else if p.any.iter().any(|s| s == t) {
                "some"
            } else {
                ""
            };
            write!(out, " {cell} |")?;
        }
        writeln!(out)?;
    }
    for r in rows {
        let name = r.member.as_deref().unwrap_or(&r.file);
        write!(out, "| `{}` | {} |", escape(name), r.units)?;
        for &k in &columns {
            let c = &r.cells[k];
            let cell = match c.status {
                "ok" => "✅".to_string(),
                "partial" => format!("{}/{}", c.units_covered, r.units),
                _ => String::new(),
            };
            write!(out, " {cell} |")?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "\n✅: every unit with kernels has code the GPU loads (as `loader-sim select` chooses); \
         n/m: n of m units; a package row: ✅ when every library of it serves the GPU, \
         `some` when some library does."
    )?;
    // How each GPU is served: the image kinds `select` chooses.
    let how = how_rows(rows, |n| {
        let short = rows
            .iter()
            .find(|r| library_name(r) == n)
            .map(|r| r.member.as_deref().unwrap_or(&r.file))
            .unwrap_or(n);
        format!("`{}`", escape(short))
    });
    if how.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n| library | GPUs | served by |\n|---|---|---|")?;
    for row in how {
        writeln!(
            out,
            "| {} | {} | {} |",
            row[0],
            escape(&row[1]),
            escape(&row[2])
        )?;
    }
    Ok(())
}
