//! `loader-sim select FILE --target TARGET ... [--kind K] [--policy P] [--explain] [--json]
//! [--sha256] [-o OUT]`: the image a runtime would load, per unit and target (`CLI.md`).

use std::io::Write;
use std::path::PathBuf;

use offload_image::select::Choice;
use std::fs::File;
use std::io::Seek;

use offload_image::ccob::{CompressedBundle, ContentReader};
use offload_image::container::UnitContent;
use offload_image::stream::{select_in_stream, Kept};
use sha2::{Digest, Sha256};

use crate::decode::{decoder, threaded_decoder, ZstdDecoder};
use offload_image::stream::IDENTIFY_LEN;
use offload_image::target::Code;
use offload_image::{
    identify, units, Checked, Device, Format, Image, KindFilter, ReadOptions, SelectOptions,
};
use serde::Serialize;

use crate::cmd::{OnOff, PolicyArg};
use crate::input::Input;
use crate::output::{
    arch_name, code_name, hex, image_name, json_line, sha256_hex, table, Damaged, Skipped,
};
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

/// `--decode-thread`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum When {
    Auto,
    Always,
    Never,
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

/// The image `-o` writes.
enum Selected {
    /// Stored uncompressed in the input: (offset, size).
    InFile(usize, usize),
    /// Decompressed.
    Owned(Vec<u8>),
    /// Already written while streaming a compressed bundle.
    Written,
}

/// A failure while streaming a compressed unit: reading it, or writing `-o`.
enum SinkError {
    Read(offload_image::Error),
    Io(std::io::Error),
}

impl From<offload_image::Error> for SinkError {
    fn from(e: offload_image::Error) -> Self {
        SinkError::Read(e)
    }
}

/// What the streaming path found for one device.
struct Pick {
    id: String,
    /// What it holds, as the stream's identification saw it.
    code: Option<Code>,
    size: u64,
    sha256: Option<String>,
}

impl Pick {
    /// The chosen entry's identity: its entry ID, and what the stream saw it hold.
    fn identity(&self) -> Option<offload_image::Identity<'_>> {
        let mut identity = identify(&Image::from_id(0, Format::Bundle, &self.id, &[]));
        identity.code = self.code?;
        Some(identity)
    }
}

/// Selection in a compressed bundle in one pass over its decompressed stream
/// (`offload_image::stream`), writing `-o` and hashing `--sha256` as the chosen image
/// streams past; the decoder runs on its own thread.
struct Stream<'a> {
    args: &'a Args,
    targets: &'a [Device],
    options: &'a SelectOptions,
    read: &'a ReadOptions,
    out_path: Option<&'a std::path::Path>,
}

impl Stream<'_> {
    /// `Ok(None)`: the content cannot be streamed (a text bundle, overlapping payloads);
    /// the caller decompresses it whole.
    fn run(&self, c: &CompressedBundle<'_>) -> Result<Option<Vec<Option<Pick>>>, SinkError> {
        // Limits first: the decoders allocate as soon as they run.
        c.check_size(self.read)?;
        let keep = self.args.sha256 || self.out_path.is_some();
        let mut hashes: Vec<Option<Sha256>> = vec![None; self.targets.len()];
        let mut file: Option<File> = None;
        let threaded = match self.args.decode_thread {
            When::Always => true,
            When::Never => false,
            When::Auto => {
                self.read.verify_hash
                    && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
            }
        };
        let found = std::thread::scope(|scope| {
            let sink = |k: Kept<'_>| -> Result<(), SinkError> {
                match k {
                    Kept::Start { device, .. } => {
                        if self.args.sha256 {
                            hashes[device] = Some(Sha256::new());
                        }
                        if let (0, Some(path)) = (device, self.out_path) {
                            match &mut file {
                                Some(f) => {
                                    f.set_len(0).map_err(SinkError::Io)?;
                                    f.rewind().map_err(SinkError::Io)?;
                                }
                                None => {
                                    file = Some(File::create(path).map_err(SinkError::Io)?);
                                    crate::output::wrote(path);
                                }
                            }
                        }
                    }
                    Kept::Bytes { device, bytes } => {
                        if let Some(h) = &mut hashes[device] {
                            h.update(bytes);
                        }
                        if let (0, Some(f)) = (device, &mut file) {
                            f.write_all(bytes).map_err(SinkError::Io)?;
                        }
                    }
                }
                Ok(())
            };
            let decoder = if threaded {
                threaded_decoder(scope, c, self.args.zstd_decoder, self.read)?
            } else {
                decoder(c, self.args.zstd_decoder, self.read)?
            };
            let reader = ContentReader::new(c, decoder, self.read)?;
            select_in_stream(
                reader,
                self.targets,
                self.options,
                &self.read.limits,
                keep,
                sink,
            )
        })?;
        let Some(found) = found else {
            // Overlapping payloads found after an image was already streamed out: the
            // caller decompresses the bundle whole and writes -o itself.
            if let (Some(_), Some(path)) = (file.take(), self.out_path) {
                std::fs::remove_file(path).map_err(SinkError::Io)?;
            }
            return Ok(None);
        };
        if let Some(f) = &mut file {
            f.flush().map_err(SinkError::Io)?;
        }
        // The image streamed out for -o was refused afterwards (the CUDA driver's PTX
        // judgement): no output.
        if let (Some(None), Some(_), Some(path)) =
            (found.chosen.first(), file.take(), self.out_path)
        {
            std::fs::remove_file(path).map_err(SinkError::Io)?;
        }
        let ids: Vec<_> = found.table.entries().collect();
        Ok(Some(
            found
                .chosen
                .iter()
                .zip(&found.codes)
                .zip(hashes)
                .map(|((key, code), hash)| {
                    let e = key.and_then(|k| ids.get(k.index))?;
                    Some(Pick {
                        id: e.id.to_string(),
                        code: *code,
                        size: e.size,
                        sha256: hash.map(|h| hex(&h.finalize())),
                    })
                })
                .collect(),
        ))
    }
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

/// Runs `select`.
pub fn run(args: &Args, mut out: &mut dyn std::io::Write) -> Result<Outcome, Failure> {
    let mut devices = crate::cmd::parse_devices("--target", &args.targets)?;
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
        policy: args.policy.policy(),
        allow_jit: !args.no_jit,
        allow_generic: !args.no_generic,
        allow_spirv: !args.no_spirv,
        strict: args.strict,
        cuda: crate::cmd::cuda_driver(args.nvidia_driver),
        force_spirv: crate::cmd::hip_force_spirv(),
    };
    let input = Input::open(&args.file)?;
    let read = ReadOptions {
        verify_hash: !args.no_verify_hash,
        strict: args.strict,
        ..ReadOptions::default()
    };
    // A split library: its code objects are in the `.kpack` archives (KPACK.md).
    if let Some(done) = crate::kpack::select(&args.file, input.bytes(), &devices, &read, args, out)
    {
        return done;
    }
    let mut records = Vec::new();
    let mut output: Option<Selected> = None;
    let targets: Vec<Device> = devices.iter().map(|(_, d)| *d).collect();
    // The bytes of the previous unit, released when the walk has moved past them (the walk
    // reads the zero padding after a bundle before it hands out the next one).
    let mut finished: Option<&[u8]> = None;
    let probes: Vec<Device> = devices.iter().map(|(_, d)| *d).collect();
    // Damaged containers cost their unit only: reported, and the walk goes on.
    let mut damaged: Vec<Damaged> = Vec::new();
    for unit in units(input.bytes(), &read) {
        let unit = match unit {
            Ok(unit) => unit,
            Err(e) => {
                damaged.push(Damaged::outside(&e));
                continue;
            }
        };
        if let Some(d) = unit.damage() {
            damaged.push(Damaged::unit(&unit, &d.error));
            continue;
        }
        if let Some(done) = finished.take() {
            input.release(done);
        }
        if let (UnitContent::Compressed(c), false) = (&unit.content, args.explain) {
            // The -o image of this unit, if -o applies to it (the first record).
            let out_path = args.output.as_deref().filter(|_| records.is_empty());
            input.will_read(c.payload());
            let streamed = Stream {
                args,
                targets: &targets,
                options: &options,
                read: &read,
                out_path,
            }
            .run(c);
            let streamed = match streamed {
                Ok(s) => s,
                Err(SinkError::Read(e)) => {
                    damaged.push(Damaged::unit(&unit, &e.rebase(unit.location.offset)));
                    continue;
                }
                Err(SinkError::Io(e)) => {
                    return Err(Failure::file(
                        args.output.as_deref().unwrap_or(std::path::Path::new("-")),
                        format!("cannot write: {e}"),
                    ))
                }
            };
            if let Some(found) = streamed {
                for ((given, _), pick) in devices.iter().zip(found) {
                    records.push(Record {
                        container: unit.location.to_string(),
                        bundle_index: unit.index,
                        target: given.clone(),
                        selected: pick.as_ref().map(|p| p.id.clone()),
                        image_kind: pick
                            .as_ref()
                            .and_then(|p| p.identity().map(|i| code_name(&i))),
                        arch: pick
                            .as_ref()
                            .and_then(|p| p.identity().and_then(|i| arch_name(&i))),
                        offset: None,
                        size: pick.as_ref().map(|p| p.size),
                        sha256: pick.and_then(|p| p.sha256),
                        rejected: None,
                        disagreement: None,
                        skipped: None,
                        runtime_note: None,
                    });
                }
                if out_path.is_some() {
                    output = Some(Selected::Written);
                }
                finished = unit.bytes(&read).ok();
                continue;
            }
        }
        let read = ReadOptions {
            decoders: crate::decode::decoders(args.zstd_decoder),
            ..read
        };
        let open = match unit.open(&read) {
            Ok(open) => open,
            Err(e) => {
                damaged.push(Damaged::unit(&unit, &e));
                continue;
            }
        };
        let images: Vec<Image<'_>> = open.images().collect();
        // One pass for every device; images are identified from their headers.
        let choices = offload_image::choose(images.iter().copied(), &probes, &options);
        for ((given, _), choice) in devices.iter().zip(&choices) {
            // The chosen image is checked as the runtime decodes the one it loads, so that a
            // damaged entry is reported. Only `--sha256` and `-o` need its bytes; otherwise
            // only its ELF header is made: an LZ4 stream is walked, not decoded
            // (`Image::check`), and with `--no-verify-hash` read only as far as the header
            // (`Image::peek`).
            let whole = args.sha256 || args.output.is_some();
            let chosen = choice.chosen().and_then(|i| images.get(i));
            let made = chosen.map(|img| match (whole, read.verify_hash) {
                (true, _) => img.decode(&read).map(Checked::Whole),
                (false, true) => img.check(IDENTIFY_LEN, &read),
                (false, false) => img.peek(IDENTIFY_LEN, &read),
            });
            let made = match made.transpose() {
                Ok(b) => b,
                Err(e) => {
                    damaged.push(Damaged::unit(&unit, &e));
                    continue;
                }
            };
            let chosen = chosen
                .zip(made.as_ref())
                .map(|(img, made)| img.with_checked(made));
            let chosen = chosen.as_ref();
            records.push(Record {
                container: unit.location.to_string(),
                bundle_index: unit.index,
                target: given.clone(),
                selected: chosen.map(image_name),
                image_kind: chosen.map(|img| code_name(&identify(img))),
                arch: chosen.and_then(|img| arch_name(&identify(img))),
                offset: chosen.and_then(|img| open.offset_of(img)),
                size: chosen.map(|img| img.size()),
                sha256: if args.sha256 {
                    chosen.map(|img| sha256_hex(img.bytes))
                } else {
                    None
                },
                rejected: args.explain.then(|| reasons(&images, choice, &options)),
                disagreement: chosen
                    .filter(|_| args.explain)
                    .and_then(|img| identify(img).disagreement())
                    .map(|d| format!("{d}; the ELF header wins")),
                skipped: unit
                    .skipped
                    .clone()
                    .filter(|_| args.explain)
                    .map(Skipped::new),
                // With --explain the refused image's own line says it.
                runtime_note: runtime_note(choice)
                    .filter(|_| !(args.explain && choice.refused.is_some())),
            });
            if args.output.is_some() && records.len() == 1 {
                output = chosen.map(|img| match input.offset_of(img.bytes) {
                    Some(at) => Selected::InFile(at, img.bytes.len()),
                    None => Selected::Owned(img.bytes.to_vec()),
                });
            }
        }
        finished = unit.bytes(&read).ok();
    }
    if let Some(done) = finished.take() {
        input.release(done);
    }

    if let Some(out) = &args.output {
        if records.len() != 1 {
            if matches!(output, Some(Selected::Written)) {
                let _ = std::fs::remove_file(out);
            }
            return Err(Failure::msg(format!(
                "-o needs exactly one unit and one target, {} has {} unit(s) and {} target(s)",
                args.file.display(),
                records.len() / devices.len().max(1),
                devices.len()
            )));
        }
        if matches!(output, Some(Selected::InFile(..) | Selected::Owned(_))) {
            crate::output::wrote(out);
        }
        match &output {
            Some(Selected::InFile(at, len)) => input.copy_to(*at, *len, out),
            Some(Selected::Owned(bytes)) => std::fs::write(out, bytes),
            Some(Selected::Written) | None => Ok(()),
        }
        .map_err(|e| Failure::file(out, format!("cannot write: {e}")))?;
    }

    for d in &damaged {
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
    } else {
        write_table(&mut out, &records, args.sha256)
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
