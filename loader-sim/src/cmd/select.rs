//! `loader-sim select FILE --target TARGET ... [--kind K] [--policy P] [--explain] [--json]
//! [--sha256] [-o OUT]`: the image a runtime would load, per unit and target (`CLI.md`).

use std::io::Write;
use std::path::{Path, PathBuf};

use offload_image::select::Choice;
use offload_image::stream::{self as streaming, Plan, IDENTIFY_LEN};
use offload_image::{
    identify, units, Checked, Device, Image, KindFilter, ReadOptions, SelectOptions, Unit,
};
use serde::Serialize;

use crate::cmd::{OnOff, PolicyArg};
use crate::decode::ZstdDecoder;
use crate::input::Input;
use crate::kpack::{isa_name, sentence, Library};
use crate::output::{
    arch_name, code_name, image_name, json_line, sha256_hex, table, Damaged, Skipped,
};
use crate::stream::{SinkError, Streamer, When};
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
    /// Reject images whose container and ELF header disagree (default: the ELF header
    /// wins), and refuse bytes between containers that are neither padding nor a container
    /// (default: skipped and noted, FORMATS.md §2.4).
    #[arg(long)]
    strict: bool,
    /// List every image not selected, with the reason.
    #[arg(long)]
    pub(crate) explain: bool,
    /// Add the SHA-256 of the selected image (reads its bytes).
    #[arg(long)]
    sha256: bool,
    /// Write the selected image to OUT (one unit and one target only).
    #[arg(short = 'o', value_name = "OUT")]
    pub(crate) output: Option<PathBuf>,
    /// Write JSON Lines instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
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
    /// What the selected image holds: `elf`, `cubin`, `ptx`, `bitcode`, `spirv`,
    /// `fatbinary` ([`crate::output::code_name`]).
    image_kind: Option<&'static str>,
    /// The selected image's architecture as the toolchain names it: `sm_86` for a cubin,
    /// `compute_86` for PTX (nvcc's virtual architecture), the target ID for AMDGPU code.
    arch: Option<String>,
    offset: Option<u64>,
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    /// For a split library: where its code object came from, or why the loader gives
    /// none.
    #[serde(flatten)]
    split: Option<Split>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rejected: Option<Vec<Rejected>>,
    /// With `--explain`: the selected image's entry ID / arch and ELF header disagree.
    #[serde(skip_serializing_if = "Option::is_none")]
    disagreement: Option<String>,
    /// With `--explain`: bytes after this unit that were skipped (FORMATS.md §2.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<Skipped>,
    /// What the runtime does beyond the choice: the CUDA driver refuses the PTX it picks
    /// (no fallback), or loads the chosen PTX only from its JIT cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime_note: Option<String>,
}

/// The fields of a split library's record (`KPACK.md`): where the code object came from.
#[derive(Serialize)]
struct Split {
    /// The archive the code object was read from.
    archive: Option<String>,
    /// Its TOC key (`kernel_name#co_index`).
    toc_key: Option<String>,
    /// The loader's error code when it gives nothing.
    kpack_error: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// The archive paths the loader tried, in order, with whether each opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    tried: Option<Vec<(String, bool)>>,
}

/// The image `-o` writes.
enum Selected {
    /// Stored uncompressed in the input: (offset, size).
    InFile(usize, usize),
    /// Decompressed.
    Owned(Vec<u8>),
    /// Already written while streaming a compressed bundle.
    Written,
}

/// What `select` found: a record per unit (or split-library wrapper) and target, the image
/// `-o` writes, and the damaged containers.
#[derive(Default)]
struct Found {
    records: Vec<Record>,
    output: Option<Selected>,
    damaged: Vec<Damaged>,
    /// The records are a split library's (`KPACK.md`): printed with their archives.
    split: bool,
}

/// Why each image other than the chosen one was not chosen.
fn reasons(images: &[Image<'_>], choice: &Choice<'_>, options: &SelectOptions) -> Vec<Rejected> {
    choice
        .losses()
        .filter_map(|(i, loss)| {
            let img = images.get(i)?;
            let mut reason = loss.to_string();
            if let (false, Some(d)) = (options.strict, identify(img).disagreement()) {
                reason += &format!(" (note: {d}; the ELF header wins)");
            }
            Some(Rejected {
                image: image_name(img),
                reason,
            })
        })
        .collect()
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
        Some(library) => split(args, &library, &devices, &read),
        None => {
            let walk = Walk {
                args,
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
    print(args, &found, out)
}

/// `select` on a split library: one record per `HIPK` wrapper and device, the code object
/// the loader takes from the archives on disk.
fn split(
    args: &Args,
    library: &Library<'_>,
    devices: &[(String, Device)],
    read: &ReadOptions,
) -> Found {
    let env = crate::kpack::Env::from_process();
    let mut archives = crate::kpack::Archives::default();
    let mut found = Found {
        split: true,
        ..Found::default()
    };
    for (name, device) in devices {
        let isa = isa_name(device);
        let arches: Vec<&str> = isa.as_deref().into_iter().collect();
        for r in library.resolve(&arches, &env, &mut archives, read) {
            let picked = r.outcome.as_ref().ok();
            let refused = r.outcome.as_ref().err();
            if let (Some(p), true) = (picked, found.records.is_empty()) {
                found.output = Some(Selected::Owned(p.code.clone()));
            }
            found.records.push(Record {
                container: format!("wrapper {}", r.wrapper),
                bundle_index: r.wrapper,
                target: name.clone(),
                selected: picked.map(|p| format!("amdgcn-amd-amdhsa--{}", p.target)),
                image_kind: picked.map(|_| "elf"),
                arch: picked.map(|p| p.target.clone()),
                offset: None,
                size: picked.map(|p| p.code.len() as u64),
                sha256: picked.map(|p| sha256_hex(&p.code)),
                split: Some(Split {
                    archive: picked.map(|p| p.archive.clone()),
                    toc_key: r.key.clone(),
                    kpack_error: refused.map(|e| e.error.code()),
                    reason: refused.map(|e| match &e.package {
                        Some(p) => format!("{}; install {p}", sentence(e)),
                        None => sentence(e),
                    }),
                    tried: args.explain.then(|| r.tried.clone()),
                }),
                rejected: None,
                disagreement: None,
                skipped: None,
                runtime_note: None,
            });
        }
    }
    found
}

/// The walk over the units of a file, choosing in each.
struct Walk<'a> {
    args: &'a Args,
    input: &'a Input,
    devices: &'a [(String, Device)],
    targets: Vec<Device>,
    options: SelectOptions,
    read: ReadOptions,
}

impl Walk<'_> {
    /// Chooses in every unit: a damaged container costs its unit only (reported, and the
    /// walk goes on).
    fn run(&self) -> Result<Found, Failure> {
        let mut found = Found::default();
        // The bytes of the previous unit, released when the walk has moved past them (the
        // walk reads the zero padding after a bundle before it hands out the next one).
        let mut finished: Option<&[u8]> = None;
        for unit in units(self.input.bytes(), &self.read) {
            let unit = match unit {
                Ok(unit) => unit,
                Err(e) => {
                    found.damaged.push(Damaged::outside(&e));
                    continue;
                }
            };
            if let Some(d) = unit.damage() {
                found.damaged.push(Damaged::unit(&unit, &d.error));
                continue;
            }
            if let Some(done) = finished.take() {
                self.input.release(done);
            }
            // The library's rule: a compressed bundle is streamed unless every verdict is
            // wanted.
            if let Plan::Stream(c) = streaming::plan(&unit, self.args.explain) {
                match self.streamed(&unit, c, &mut found)? {
                    Some(true) => {
                        finished = unit.bytes(&self.read).ok();
                        continue;
                    }
                    Some(false) => continue,
                    None => {}
                }
            }
            let read = ReadOptions {
                decoders: crate::decode::decoders(self.args.zstd_decoder),
                ..self.read
            };
            match unit.open(&read) {
                Ok(open) => self.opened(&unit, &open, &read, &mut found),
                Err(e) => {
                    found.damaged.push(Damaged::unit(&unit, &e));
                    continue;
                }
            }
            finished = unit.bytes(&read).ok();
        }
        if let Some(done) = finished.take() {
            self.input.release(done);
        }
        Ok(found)
    }

    /// Chooses in compressed bundle `c` in one pass over its stream: `Some(true)` when
    /// recorded, `Some(false)` when damaged (recorded as such), `None` when the unit must
    /// be opened instead.
    fn streamed(
        &self,
        unit: &Unit<'_>,
        c: &offload_image::ccob::CompressedBundle<'_>,
        found: &mut Found,
    ) -> Result<Option<bool>, Failure> {
        let args = self.args;
        // The -o image of this unit, if -o applies to it (the first record).
        let out_path = args.output.as_deref().filter(|_| found.records.is_empty());
        self.input.will_read(c.payload());
        let streamed = Streamer {
            targets: &self.targets,
            options: &self.options,
            read: &self.read,
            zstd: args.zstd_decoder,
            threaded: args.decode_thread.threaded(self.read.verify_hash),
            sha256: args.sha256,
            out_path,
        }
        .run(c);
        let picks = match streamed {
            Ok(Some(picks)) => picks,
            Ok(None) => return Ok(None),
            Err(SinkError::Read(e)) => {
                let e = e.rebase(unit.location.offset);
                found.damaged.push(Damaged::unit(unit, &e));
                return Ok(Some(false));
            }
            Err(SinkError::Io(e)) => {
                return Err(Failure::file(
                    args.output.as_deref().unwrap_or(Path::new("-")),
                    format!("cannot write: {e}"),
                ))
            }
        };
        for ((given, _), pick) in self.devices.iter().zip(picks) {
            let identity = pick.as_ref().and_then(|p| p.identity());
            found.records.push(Record {
                container: unit.location.to_string(),
                bundle_index: unit.index,
                target: given.clone(),
                selected: pick.as_ref().map(|p| p.id.clone()),
                image_kind: identity.as_ref().map(code_name),
                arch: identity.as_ref().and_then(arch_name),
                offset: None,
                size: pick.as_ref().map(|p| p.size),
                sha256: pick.and_then(|p| p.sha256),
                split: None,
                rejected: None,
                disagreement: None,
                skipped: None,
                runtime_note: None,
            });
        }
        if out_path.is_some() {
            found.output = Some(Selected::Written);
        }
        Ok(Some(true))
    }

    /// Chooses among the images of an opened unit, in one pass for every device (images
    /// are identified from their headers).
    fn opened(
        &self,
        unit: &Unit<'_>,
        open: &offload_image::OpenUnit<'_>,
        read: &ReadOptions,
        found: &mut Found,
    ) {
        let args = self.args;
        let images: Vec<Image<'_>> = open.images().collect();
        let choices = offload_image::choose(images.iter().copied(), &self.targets, &self.options);
        for ((given, _), choice) in self.devices.iter().zip(&choices) {
            let chosen = choice.chosen().and_then(|i| images.get(i));
            let made = match chosen.map(|img| self.make(img, read)).transpose() {
                Ok(b) => b,
                Err(e) => {
                    found.damaged.push(Damaged::unit(unit, &e));
                    continue;
                }
            };
            let chosen = chosen
                .zip(made.as_ref())
                .map(|(img, made)| img.with_checked(made));
            let chosen = chosen.as_ref();
            let explain = args.explain;
            found.records.push(Record {
                container: unit.location.to_string(),
                bundle_index: unit.index,
                target: given.clone(),
                selected: chosen.map(image_name),
                image_kind: chosen.map(|img| code_name(&identify(img))),
                arch: chosen.and_then(|img| arch_name(&identify(img))),
                offset: chosen.and_then(|img| open.offset_of(img)),
                size: chosen.map(|img| img.size()),
                sha256: chosen
                    .filter(|_| args.sha256)
                    .map(|img| sha256_hex(img.bytes)),
                split: None,
                rejected: explain.then(|| reasons(&images, choice, &self.options)),
                disagreement: chosen
                    .filter(|_| explain)
                    .and_then(|img| identify(img).disagreement())
                    .map(|d| format!("{d}; the ELF header wins")),
                skipped: unit.skipped.clone().filter(|_| explain).map(Skipped::new),
                // With --explain the refused image's own line says it.
                runtime_note: runtime_note(choice)
                    .filter(|_| !(explain && choice.refused.is_some())),
            });
            if args.output.is_some() && found.records.len() == 1 {
                found.output = chosen.map(|img| match self.input.offset_of(img.bytes) {
                    Some(at) => Selected::InFile(at, img.bytes.len()),
                    None => Selected::Owned(img.bytes.to_vec()),
                });
            }
        }
    }

    /// The chosen image, checked as the runtime decodes the one it loads, so that a
    /// damaged entry is reported. Only `--sha256` and `-o` need its bytes; otherwise only
    /// its ELF header is made: an LZ4 stream is walked, not decoded (`Image::check`), and
    /// with `--no-verify-hash` read only as far as the header (`Image::peek`).
    fn make<'i>(
        &self,
        img: &Image<'i>,
        read: &ReadOptions,
    ) -> Result<Checked<'i>, offload_image::Error> {
        let whole = self.args.sha256 || self.args.output.is_some();
        match (whole, read.verify_hash) {
            (true, _) => img.decode(read).map(Checked::Whole),
            (false, true) => img.check(IDENTIFY_LEN, read),
            (false, false) => img.peek(IDENTIFY_LEN, read),
        }
    }
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

/// What the runtime does beyond the ranking, for the record's note.
fn runtime_note(choice: &Choice<'_>) -> Option<String> {
    match choice.rejection {
        Some((_, why @ offload_image::Rejection::Driver(_))) if choice.refused.is_some() => {
            Some(format!("nothing loads: {why}"))
        }
        _ => choice.from_jit_cache.then(|| {
            "CUDA_DISABLE_PTX_JIT is set: the driver loads this PTX only from its JIT cache \
             (compiled on an earlier run), else fails with CUDA_ERROR_JIT_COMPILATION_DISABLED"
                .to_string()
        }),
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
            writeln!(
                out,
                "note: {} unit {}, target {}: {note}",
                r.container, r.bundle_index, r.target
            )?;
        }
    }
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
            if let Some(s) = &r.skipped {
                writeln!(out, "  note: {}", s.message)?;
            }
            if let Some(n) = &r.runtime_note {
                writeln!(out, "  note: {n}")?;
            }
            for x in rejected {
                writeln!(out, "  not {}: {}", x.image, x.reason)?;
            }
        }
    }
    Ok(())
}
