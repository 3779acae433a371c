//! `loader-sim select FILE --target TARGET ... [--kind K] [--policy P] [--explain] [--json]
//! [--sha256] [-o OUT]`: the image a runtime would load, per unit and target (`CLI.md`).

use std::io::Write;
use std::path::PathBuf;

use offload_image::{Device, KindFilter, ReadOptions, SelectOptions};

use crate::cmd::{OnOff, PolicyArg};
use crate::decode::ZstdDecoder;
use crate::input::Input;
use crate::kpack::Library;
use crate::output::{json_line, table, text_line};
use crate::selection::{split, Found, Record, Selected, Split, Walk, Wanted};
use crate::stream::When;
use crate::{Failure, Outcome};

/// `--kind`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Kind {
    Hip,
    Openmp,
    Cuda,
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
    /// ROCm CLR's own rules too: a generic code object only where CLR's generic map takes
    /// the device there, and no entry under an `amdgpu<subarch>` triple
    /// (COMPATIBILITY.md §7.8, §1.5). ROCm CLR's choice is `--kind hip --policy
    /// first-by-class --clr`.
    #[arg(long)]
    clr: bool,
    /// Reject images whose container and ELF header disagree (default: the ELF header
    /// wins), and refuse bytes between containers that are neither padding nor a container
    /// (default: skipped and noted, FORMATS.md §2.4).
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
    /// The NVIDIA driver version (`580.159.04`) of the NVIDIA targets: the PTX the driver
    /// picks must have an ISA version it compiles, or the fatbinary does not load (no
    /// fallback). The driver's `CUDA_FORCE_PTX_JIT` and `CUDA_DISABLE_PTX_JIT` are read
    /// from the environment. Default: unknown (PTX ISA versions not judged).
    #[arg(long, value_name = "VERSION", value_parser = crate::cmd::parse_driver)]
    nvidia_driver: Option<offload_image::driver::DriverVersion>,
    /// Do not verify the truncated MD5 of compressed bundles (then decoding stops as soon
    /// as the selected image and the first bytes of every image have been read), nor check
    /// the whole stream of a chosen NVIDIA cubin stored as an LZ4 block (only its first
    /// bytes are read).
    #[arg(long)]
    no_verify_hash: bool,
    /// The zstd decoder for compressed bundles.
    #[arg(long, value_enum, default_value_t = ZstdDecoder::DEFAULT)]
    zstd_decoder: ZstdDecoder,
    /// Decode compressed bundles on a thread of their own, overlapping the MD5 check
    /// (auto: when verifying and more than one CPU is available).
    #[arg(long, value_enum, default_value = "auto")]
    decode_thread: When,
    /// Units chosen in at once, each decoded and hashed on a thread of its own (default:
    /// the number of CPUs; 1: one unit after another). Output is the same for every N.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

/// The devices of `--target` and `--kfd-topology`, each with the text it was given.
fn devices(args: &Args) -> Result<Vec<(String, Device)>, Failure> {
    let mut devices = crate::cmd::parse_devices("--target", &args.targets)?;
    if let Some(dir) = &args.kfd_topology {
        let xnack = args.xnack.map(|x| matches!(x, OnOff::On));
        let found = Device::from_kfd_topology(dir, xnack)
            .map_err(|e| Failure::file(dir, format!("cannot read the KFD topology: {e}")))?;
        devices.extend(found.into_iter().map(|d| (d.to_string(), d)));
    }
    Ok(devices)
}

/// The selection options the arguments give.
fn select_options(args: &Args) -> SelectOptions {
    SelectOptions {
        kind: match args.kind {
            None => KindFilter::Any,
            Some(Kind::Hip) => KindFilter::Hip,
            Some(Kind::Openmp) => KindFilter::OpenMp,
            Some(Kind::Cuda) => KindFilter::Cuda,
        },
        hip_openmp_compatible: args.hip_openmp_compatible,
        policy: args.policy.policy(),
        allow_jit: !args.no_jit,
        allow_generic: !args.no_generic,
        allow_spirv: !args.no_spirv,
        strict: args.strict,
        cuda: crate::cmd::cuda_driver(args.nvidia_driver),
        force_spirv: crate::cmd::hip_force_spirv(),
        clr: args.clr,
    }
}

/// Runs `select`.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> Result<Outcome, Failure> {
    let devices = devices(args)?;
    let options = select_options(args);
    let input = Input::open(&args.file)?;
    let read = ReadOptions {
        verify_hash: !args.no_verify_hash,
        strict: args.strict,
        ..ReadOptions::default()
    };
    // A split library: its code objects are in the `.kpack` archives (KPACK.md).
    let found = match Library::open(&args.file, input.bytes()) {
        Some(library) => split(args.explain, &library, &devices, &read),
        // An AOTriton archive: per kernel family, the code object each device loads.
        None if offload_image::aks2::is_aks2(input.bytes()) => {
            crate::aks2::select(input.bytes(), &devices, &options, &read, args.sha256)
                .unwrap_or_default()
        }
        None => {
            let walk = Walk {
                wanted: Wanted {
                    explain: args.explain,
                    sha256: args.sha256,
                    output: args.output.as_deref(),
                    zstd: args.zstd_decoder,
                    decode_thread: args.decode_thread,
                    jobs: crate::jobs(args.jobs),
                },
                input: &input,
                devices: &devices,
                targets: devices.iter().map(|(_, d)| *d).collect(),
                options,
                read,
            };
            walk.run()?
        }
    };
    write_output(args, &input, &found, devices.len())?;
    if found.records.is_empty() && found.damaged.is_empty() {
        // Code outside any container is all the file has: say so (issue 45).
        if let Some(note) = offload_image::judge::outside_note(input.bytes()) {
            eprintln!("{}: {note}", args.file.display());
        }
    }
    print(args, &found, out)
}

/// Writes `-o`: exactly one record, and its image.
fn write_output(args: &Args, input: &Input, found: &Found, devices: usize) -> Result<(), Failure> {
    let Some(out) = &args.output else {
        return Ok(());
    };
    if found.records.len() != 1 {
        if matches!(found.output, Some(Selected::Written)) {
            let _ = std::fs::remove_file(out);
        }
        return Err(Failure::msg(format!(
            "-o needs exactly one unit and one target, {} has {} unit(s) and {} target(s)",
            args.file.display(),
            found.records.len() / devices.max(1),
            devices
        )));
    }
    if matches!(
        found.output,
        Some(Selected::InFile(..) | Selected::Owned(_))
    ) {
        crate::output::wrote(out);
    }
    match &found.output {
        Some(Selected::InFile(at, len)) => input.copy_to(*at, *len, out),
        Some(Selected::Owned(bytes)) => std::fs::write(out, bytes),
        Some(Selected::Written) | None => Ok(()),
    }
    .map_err(|e| Failure::file(out, format!("cannot write: {e}")))
}

/// Prints the records (and the damaged containers), and the outcome they give.
fn print(args: &Args, found: &Found, mut out: &mut dyn Write) -> Result<Outcome, Failure> {
    let (records, damaged) = (&found.records, &found.damaged);
    for d in damaged {
        d.warn(&args.file);
    }
    for w in &found.warnings {
        crate::output::stderr_line(format_args!(
            "loader-sim: warning: {}: {w}",
            args.file.display()
        ));
    }
    let written = if args.json {
        records
            .iter()
            .try_for_each(|r| json_line(&mut out, r))
            .and_then(|_| damaged.iter().try_for_each(|d| json_line(&mut out, d)))
    } else if records.is_empty() && !damaged.is_empty() {
        // Nothing read at all: the error lines say it all.
        Ok(())
    } else if found.split {
        write_split_table(&mut out, records)
    } else {
        write_table(&mut out, records, args.sha256)
    };
    written
        .and_then(|_| out.flush())
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
    if !damaged.is_empty() {
        Ok(Outcome::Invalid)
    } else if records.is_empty() || records.iter().any(|r| r.selected.is_none()) {
        Ok(Outcome::NoMatch)
    } else {
        Ok(Outcome::Ok)
    }
}

/// The table of a split library's records.
fn write_split_table(out: &mut impl Write, records: &[Record]) -> std::io::Result<()> {
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let split = r.split.as_ref();
            let field = |f: fn(&Split) -> Option<String>| split.and_then(f);
            vec![
                r.container.clone(),
                r.target.clone(),
                r.selected.clone().unwrap_or_else(|| "-".into()),
                field(|s| s.archive.clone()).unwrap_or_else(|| "-".into()),
                field(|s| s.toc_key.clone()).unwrap_or_else(|| "-".into()),
                field(|s| s.reason.clone()).unwrap_or_default(),
            ]
        })
        .collect();
    let header = [
        "CONTAINER",
        "TARGET",
        "SELECTED",
        "ARCHIVE",
        "TOC KEY",
        "REASON",
    ];
    table(out, &header, &rows)
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
                r.image_kind.unwrap_or("-").to_string(),
                r.arch.clone().unwrap_or_else(|| "-".to_string()),
                r.offset.map_or_else(|| "-".to_string(), |o| o.to_string()),
                r.size.map_or_else(|| "-".to_string(), |o| o.to_string()),
            ];
            if sha {
                row.push(r.sha256.clone().unwrap_or_else(|| "-".to_string()));
            }
            row
        })
        .collect();
    let mut header = vec![
        "CONTAINER",
        "UNIT",
        "TARGET",
        "SELECTED",
        "KIND",
        "ARCH",
        "OFFSET",
        "SIZE",
    ];
    if sha {
        header.push("SHA256");
    }
    table(out, &header, &rows)?;
    for r in records.iter().filter(|r| r.rejected.is_none()) {
        if let Some(note) = &r.runtime_note {
            text_line(
                out,
                format_args!(
                    "note: {} unit {}, target {}: {note}",
                    r.container, r.bundle_index, r.target
                ),
            )?;
        }
    }
    for r in records {
        if let Some(rejected) = &r.rejected {
            writeln!(out)?;
            text_line(
                out,
                format_args!(
                    "{} unit {}, target {}:",
                    r.container, r.bundle_index, r.target
                ),
            )?;
            if let Some(s) = &r.selected {
                text_line(out, format_args!("  selected {s}"))?;
            }
            if let Some(d) = &r.disagreement {
                text_line(out, format_args!("  note: {d}"))?;
            }
            if let Some(s) = &r.skipped {
                text_line(out, format_args!("  note: {}", s.message))?;
            }
            if let Some(n) = &r.runtime_note {
                text_line(out, format_args!("  note: {n}"))?;
            }
            for x in rejected {
                text_line(out, format_args!("  not {}: {}", x.image, x.reason))?;
            }
        }
    }
    Ok(())
}
