//! `loader-sim select FILE --target TARGET ... [--kind K] [--policy P] [--explain] [--json]
//! [--sha256] [-o OUT]`: the image a runtime would load, per unit and target (`CLI.md`).

use std::io::Write;
use std::path::PathBuf;

use offload_image::select::{check, Outranked, Verdict};
use offload_image::{
    for_each_unit, identify, Device, Image, KindFilter, Policy, ReadOptions, SelectOptions,
};
use serde::Serialize;

use crate::cmd::list::image_name;
use crate::input::Input;
use crate::output::{json_line, sha256_hex, table};
use crate::{Failure, Outcome};

/// `--kind`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Kind {
    Hip,
    Openmp,
    Cuda,
}

/// `--xnack`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

/// `--policy`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum PolicyArg {
    /// The ranking of COMPATIBILITY.md §10 (native, exact, newest generic, then order).
    Best,
    /// First compatible image in discovery order (comgr lookup, LLVM offload runtime).
    First,
    /// Native, then generic, then JIT code, each in discovery order (ROCm CLR).
    FirstByClass,
}

/// Arguments of `select`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to read (bundle, CCOB, OffloadBinary, ELF, archive, ...).
    file: PathBuf,
    /// A device: AMDGPU target ID with its feature states (`gfx90a:sramecc+:xnack-`, with or
    /// without `amdgcn-amd-amdhsa--`) or an NVPTX architecture (`sm_80`).
    #[arg(
        long = "target",
        value_name = "TARGET",
        required_unless_present = "kfd_topology"
    )]
    targets: Vec<String>,
    /// Also select for every GPU node of a KFD topology directory (normally
    /// /sys/class/kfd/kfd/topology): processor from gfx_target_version, sramecc from the
    /// capability bits.
    #[arg(long, value_name = "DIR")]
    kfd_topology: Option<PathBuf>,
    /// The xnack mode of the KFD devices (KFD does not record it; default: unknown).
    #[arg(long, value_enum, requires = "kfd_topology")]
    xnack: Option<OnOff>,
    /// Accept only images of this offload kind (default: any device kind).
    #[arg(long, value_enum)]
    kind: Option<Kind>,
    /// Treat `hip*` and `openmp` entries as interchangeable (comgr's unbundle mode).
    #[arg(long)]
    hip_openmp_compatible: bool,
    /// How to choose among compatible images.
    #[arg(long, value_enum, default_value = "best")]
    policy: PolicyArg,
    /// Never choose code for a named architecture that needs a JIT (bitcode, PTX).
    #[arg(long)]
    no_jit: bool,
    /// Never choose AMDGPU generic-family code objects.
    #[arg(long)]
    no_generic: bool,
    /// Never choose AMD SPIR-V (amdgcnspirv). comgr's lookup for one native ISA is
    /// `--kind hip --no-generic --no-spirv --policy first`.
    #[arg(long)]
    no_spirv: bool,
    /// Reject images whose container and ELF header disagree (default: the ELF header wins).
    #[arg(long)]
    strict: bool,
    /// List every image not selected, with the reason.
    #[arg(long)]
    explain: bool,
    /// Add the SHA-256 of the selected image (reads its bytes).
    #[arg(long)]
    sha256: bool,
    /// Write the selected image to OUT (one unit and one target only).
    #[arg(short = 'o', value_name = "OUT")]
    output: Option<PathBuf>,
    /// Write JSON Lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Do not verify the truncated MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
}

/// One rejected (or outranked) image.
#[derive(Serialize)]
struct Rejected {
    image: String,
    reason: String,
}

/// One `select` record (field names are part of the CLI contract).
#[derive(Serialize)]
struct Record {
    container: String,
    bundle_index: usize,
    target: String,
    selected: Option<String>,
    offset: Option<u64>,
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rejected: Option<Vec<Rejected>>,
    /// With `--explain`: the selected image's entry ID / arch and ELF header disagree.
    #[serde(skip_serializing_if = "Option::is_none")]
    disagreement: Option<String>,
}

/// Why each image other than the chosen one was not chosen.
fn reasons(
    images: &[Image<'_>],
    chosen: Option<usize>,
    device: &Device,
    options: &SelectOptions,
) -> Vec<Rejected> {
    let winner = chosen.and_then(|i| {
        images
            .get(i)
            .and_then(|img| check(&identify(img), i, device, options).key())
    });
    images
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != chosen)
        .map(|(i, img)| {
            let identity = identify(img);
            let mut reason = match check(&identity, i, device, options) {
                Verdict::Rejected(r) => r.to_string(),
                Verdict::Compatible(loser) => match winner {
                    Some(winner) => Outranked {
                        loser,
                        winner,
                        policy: options.policy,
                    }
                    .to_string(),
                    None => "compatible".to_string(),
                },
            };
            if let (false, Some(d)) = (options.strict, identity.disagreement()) {
                reason += &format!(" (note: {d}; the ELF header wins)");
            }
            Rejected {
                image: image_name(img),
                reason,
            }
        })
        .collect()
}

/// Runs `select`.
pub fn run(args: &Args) -> Result<Outcome, Failure> {
    let mut devices = args
        .targets
        .iter()
        .map(|t| {
            Device::parse(t)
                .map(|d| (t.clone(), d))
                .map_err(|e| Failure(format!("invalid --target '{t}': {}", e.what())))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(dir) = &args.kfd_topology {
        let xnack = args.xnack.map(|x| matches!(x, OnOff::On));
        let found = Device::from_kfd_topology(dir, xnack)
            .map_err(|e| Failure::file(dir, format!("cannot read the KFD topology: {e}")))?;
        devices.extend(found.into_iter().map(|d| (d.to_string(), d)));
    }
    let options = SelectOptions {
        kind: match args.kind {
            None => KindFilter::Any,
            Some(Kind::Hip) => KindFilter::Hip,
            Some(Kind::Openmp) => KindFilter::OpenMp,
            Some(Kind::Cuda) => KindFilter::Cuda,
        },
        hip_openmp_compatible: args.hip_openmp_compatible,
        policy: match args.policy {
            PolicyArg::Best => Policy::Best,
            PolicyArg::First => Policy::First,
            PolicyArg::FirstByClass => Policy::FirstByClass,
        },
        allow_jit: !args.no_jit,
        allow_generic: !args.no_generic,
        allow_spirv: !args.no_spirv,
        strict: args.strict,
    };
    let input = Input::open(&args.file)?;
    let read = ReadOptions {
        verify_hash: !args.no_verify_hash,
        ..ReadOptions::default()
    };
    let mut records = Vec::new();
    let mut output: Option<Vec<u8>> = None;
    for_each_unit(input.bytes(), &read, |unit| {
        let open = unit.open(&read)?;
        let images: Vec<Image<'_>> = open.images().collect();
        for (given, device) in &devices {
            let selection = offload_image::select(&images, device, &options);
            let chosen = selection.chosen.and_then(|i| images.get(i));
            records.push(Record {
                container: unit.location.to_string(),
                bundle_index: unit.index,
                target: given.clone(),
                selected: chosen.map(image_name),
                offset: chosen.and_then(|img| open.offset_of(img)),
                size: chosen.map(|img| img.size()),
                sha256: if args.sha256 {
                    chosen.map(|img| sha256_hex(img.bytes))
                } else {
                    None
                },
                rejected: args
                    .explain
                    .then(|| reasons(&images, selection.chosen, device, &options)),
                disagreement: chosen
                    .filter(|_| args.explain)
                    .and_then(|img| identify(img).disagreement())
                    .map(|d| format!("{d}; the ELF header wins")),
            });
            if args.output.is_some() && records.len() == 1 {
                output = chosen.map(|img| img.bytes.to_vec());
            }
        }
        Ok(())
    })
    .map_err(|e| Failure::file(&args.file, e))?;

    if let Some(out) = &args.output {
        if records.len() != 1 {
            return Err(Failure(format!(
                "-o needs exactly one unit and one target, {} has {} unit(s) and {} target(s)",
                args.file.display(),
                records.len() / devices.len().max(1),
                devices.len()
            )));
        }
        if let Some(bytes) = &output {
            std::fs::write(out, bytes)
                .map_err(|e| Failure::file(out, format!("cannot write: {e}")))?;
        }
    }

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written = if args.json {
        records.iter().try_for_each(|r| json_line(&mut out, r))
    } else {
        write_table(&mut out, &records, args.sha256)
    };
    written
        .and_then(|_| out.flush())
        .map_err(|e| Failure(format!("cannot write output: {e}")))?;
    if records.is_empty() || records.iter().any(|r| r.selected.is_none()) {
        Ok(Outcome::NoMatch)
    } else {
        Ok(Outcome::Ok)
    }
}

fn write_table(out: &mut impl Write, records: &[Record], sha: bool) -> std::io::Result<()> {
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let mut row = vec![
                r.container.clone(),
                r.bundle_index.to_string(),
                r.target.clone(),
                r.selected.clone().unwrap_or_else(|| "-".to_string()),
                r.offset.map_or_else(|| "-".to_string(), |o| o.to_string()),
                r.size.map_or_else(|| "-".to_string(), |o| o.to_string()),
            ];
            if sha {
                row.push(r.sha256.clone().unwrap_or_else(|| "-".to_string()));
            }
            row
        })
        .collect();
    let mut header = vec!["CONTAINER", "UNIT", "TARGET", "SELECTED", "OFFSET", "SIZE"];
    if sha {
        header.push("SHA256");
    }
    table(out, &header, &rows)?;
    for r in records {
        if let Some(rejected) = &r.rejected {
            writeln!(
                out,
                "\n{} unit {}, target {}:",
                r.container, r.bundle_index, r.target
            )?;
            if let Some(s) = &r.selected {
                writeln!(out, "  selected {s}")?;
            }
            if let Some(d) = &r.disagreement {
                writeln!(out, "  note: {d}")?;
            }
            for x in rejected {
                writeln!(out, "  not {}: {}", x.image, x.reason)?;
            }
        }
    }
    Ok(())
}
