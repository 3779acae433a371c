//! A drop-in replacement for LLVM 22's `clang-offload-bundler` (run by
//! `loader-sim offload-bundler ARGS...`, or by the binary invoked as `clang-offload-bundler`).
//!
//! It accepts LLVM's command line (single- or double-dash options, `-opt=value` or
//! `-opt value`, repeated `-input`/`-output`, the deprecated comma lists `-inputs=`/
//! `-outputs=`, `@response` files), reads the same environment variables
//! (`OFFLOAD_BUNDLER_COMPRESS`, `OFFLOAD_BUNDLER_COMPRESSION_LEVEL`,
//! `OFFLOAD_BUNDLER_VERBOSE`, `COMPRESSED_BUNDLE_FORMAT_VERSION`,
//! `OFFLOAD_BUNDLER_IGNORE_ENV_VAR`), and follows LLVM's algorithms step by step — target
//! normalisation, `StringMap` visiting order, matching rules, archive member naming,
//! `llvm-objcopy`'s ELF layout — so that its output files are byte-identical. Compressed
//! bundles call the C libzstd and zlib with LLVM's parameters
//! (`offload_image::write::ccob::llvm_codec`), so they are byte-identical too when the
//! libraries are the versions LLVM links. Every error exits with status 1, as in LLVM.
//!
//! Differences, by design:
//!
//! * where LLVM 22 crashes, reads out of bounds or writes a corrupt file (a feature
//!   without a sign, a bundle alignment of 0, malformed bundle headers, object bundling
//!   without a host, two targets that normalise to the same entry ID in a binary bundle),
//!   this tool prints an error and exits with status 1;
//! * compressed inputs are bounded by the total size of their v2/v3 header (LLVM 22 feeds
//!   every byte after the header to the decompressor, so trailing data makes it fail);
//! * ELF inputs are handled in-process (32- and 64-bit, either byte order: relocatable
//!   objects, executables, shared objects); LLVM runs `llvm-objcopy` for them (see
//!   [`crate::llvm::objcopy`]). Other object formats are treated as non-object input;
//! * `-compression-method=zlib|zstd` is an extension (LLVM always picks zstd when it has
//!   it).

mod handler;
pub mod target;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use offload_image::ccob::CompressedBundle;
use offload_image::write::ccob::{self as ccob_writer, CcobOptions};
use offload_image::ReadOptions;

use crate::input::{MapFile, MappedInput};
use crate::llvm::archive::{self, NewMember};
use crate::llvm::cl::{self, Kind, Spec};
use crate::llvm::hashmap::StringMap;
use crate::llvm::objcopy;
use handler::{Handler, MAGIC};
use target::{check_bundle_id, conflicting_ids, is_compatible, TargetInfo};

/// A failed run: message and exit status.
#[derive(Debug)]
pub struct ToolError {
    /// Exit status: 1, as LLVM's tools exit on every error.
    pub code: u8,
    /// The message (LLVM's wording where LLVM reports the same problem): one line, or for
    /// command-line errors one line per problem.
    pub msg: String,
    /// True for errors of the command line, which LLVM's option parser prints as
    /// `<program>: <line>` for each line, without `error: `.
    pub command_line: bool,
}

impl ToolError {
    /// A command-line error of the lines `lines` (see [`ToolError::command_line`]).
    pub fn command_line(lines: Vec<String>) -> Self {
        ToolError {
            code: 1,
            msg: lines.join("\n"),
            command_line: true,
        }
    }

    /// What the tool prints on standard error for this failure, as LLVM's tools print it
    /// (`prog` is the program name): `<prog>: error: <message>`, or for command-line errors
    /// `<prog>: <line>` for each line. Ends with a newline.
    pub fn report(&self, prog: &str) -> String {
        if !self.command_line {
            return format!("{prog}: error: {}\n", self.msg);
        }
        let mut out = String::new();
        let mut lines = self.msg.lines();
        while let Some(line) = lines.next() {
            out.push_str(prog);
            out.push_str(": ");
            out.push_str(line);
            out.push('\n');
            // "Too many positional arguments" goes on over a second, unprefixed line.
            if line.starts_with("Too many positional arguments") {
                if let Some(next) = lines.next() {
                    out.push_str(next);
                    out.push('\n');
                }
            }
        }
        out
    }
}

fn fail(msg: impl Into<String>) -> ToolError {
    ToolError {
        code: 1,
        msg: msg.into(),
        command_line: false,
    }
}

/// A command-line error of one line.
fn usage(msg: impl Into<String>) -> ToolError {
    ToolError::command_line(vec![msg.into()])
}

const SPECS: &[Spec] = &[
    Spec {
        name: "input",
        kind: Kind::List { comma: false },
    },
    Spec {
        name: "inputs",
        kind: Kind::List { comma: true },
    },
    Spec {
        name: "output",
        kind: Kind::List { comma: false },
    },
    Spec {
        name: "outputs",
        kind: Kind::List { comma: true },
    },
    Spec {
        name: "targets",
        kind: Kind::List { comma: true },
    },
    Spec {
        name: "type",
        kind: Kind::Value,
    },
    Spec {
        name: "unbundle",
        kind: Kind::Flag,
    },
    Spec {
        name: "list",
        kind: Kind::Flag,
    },
    Spec {
        name: "###",
        kind: Kind::Flag,
    },
    Spec {
        name: "allow-missing-bundles",
        kind: Kind::Flag,
    },
    Spec {
        name: "bundle-align",
        kind: Kind::Value,
    },
    Spec {
        name: "check-input-archive",
        kind: Kind::Flag,
    },
    Spec {
        name: "hip-openmp-compatible",
        kind: Kind::Flag,
    },
    Spec {
        name: "compress",
        kind: Kind::Flag,
    },
    Spec {
        name: "verbose",
        kind: Kind::Flag,
    },
    Spec {
        name: "compression-level",
        kind: Kind::Value,
    },
    Spec {
        name: "compression-method",
        kind: Kind::Value,
    },
    Spec {
        name: "help",
        kind: Kind::Flag,
    },
    Spec {
        name: "help-list",
        kind: Kind::Flag,
    },
    Spec {
        name: "help-hidden",
        kind: Kind::Flag,
    },
    Spec {
        name: "help-list-hidden",
        kind: Kind::Flag,
    },
    Spec {
        name: "h",
        kind: Kind::Flag,
    },
    Spec {
        name: "version",
        kind: Kind::Flag,
    },
];

const HELP: &str = "OVERVIEW: A tool to bundle several input files of the specified type <type>
referring to the same source file but different targets into a single
one. The resulting file can also be unbundled into different files by
this tool if -unbundle is provided.

(loader-sim's drop-in replacement for LLVM 22's clang-offload-bundler)

USAGE: clang-offload-bundler [options]

OPTIONS:
  --###                   - Print any external commands that are to be executed instead of actually executing them - for testing purposes.
  --allow-missing-bundles - Create empty files if bundles are missing when unbundling.
  --bundle-align=<uint>   - Alignment of bundle for binary files
  --check-input-archive   - Check if input heterogeneous archive is valid in terms of TargetID rules.
  --compress              - Compress output file when bundling.
  --compression-level=<n> - Specify the compression level (integer)
  --compression-method=<zstd|zlib> - Codec of compressed bundles (loader-sim extension; default zstd)
  --hip-openmp-compatible - Treat hip and hipv4 offload kinds as compatible with openmp kind, and vice versa.
  --input=<string>        - Input file. Can be specified multiple times for multiple input files.
  --inputs=<string>       - [<input file>,...] (deprecated)
  --list                  - List bundle IDs in the bundled file.
  --output=<string>       - Output file. Can be specified multiple times for multiple output files.
  --outputs=<string>      - [<output file>,...] (deprecated)
  --targets=<string>      - [<offload kind>-<target triple>,...]
  --type=<string>         - Type of the files to be bundled/unbundled.
                            Current supported types are:
                              i    - cpp-output
                              ii   - c++-cpp-output
                              cui  - cuda-cpp-output
                              hipi - hip-cpp-output
                              d    - dependency
                              ll   - llvm
                              bc   - llvm-bc
                              s    - assembler
                              o    - object
                              a    - archive of objects
                              gch  - precompiled-header
                              ast  - clang AST file
  --unbundle              - Unbundle bundled file into several output files.
  --verbose               - Print debug information.

Environment: OFFLOAD_BUNDLER_COMPRESS, OFFLOAD_BUNDLER_COMPRESSION_LEVEL,
OFFLOAD_BUNDLER_VERBOSE, COMPRESSED_BUNDLE_FORMAT_VERSION (2 or 3, default 3),
OFFLOAD_BUNDLER_IGNORE_ENV_VAR.
Exit status: 0 success, 1 any error.
";

/// The settings LLVM keeps in `OffloadBundlerConfig`.
struct Config {
    files_type: String,
    /// Standardised targets (`OffloadTargetInfo::str()`), as LLVM stores them.
    targets: Vec<String>,
    /// Targets as given.
    raw_targets: Vec<String>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    host_input_index: Option<usize>,
    allow_no_host: bool,
    allow_missing: bool,
    hip_openmp: bool,
    check_input_archive: bool,
    print_commands: bool,
    bundle_align: u64,
    compress: bool,
    verbose: bool,
    /// Compression level (zstd's default 3 unless set).
    level: i64,
    /// True when the level came from the command line or the environment.
    level_set: bool,
    ccob_version: u16,
    method: Method,
    /// How `-input` files are opened for bundling.
    map_file: MapFile,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Zstd,
    Zlib,
}

/// Runs the tool on `args` (without the program name); `prog` names it in warnings.
/// Input files are read into memory ([`crate::input::read_file`]).
pub fn run(prog: &str, args: &[String]) -> Result<(), ToolError> {
    run_with(prog, args, crate::input::read_file)
}

/// [`run`], with `map_file` opening the `-input` files of a bundling run (a memory map
/// keeps big payloads out of the resident set).
pub fn run_with(prog: &str, args: &[String], map_file: MapFile) -> Result<(), ToolError> {
    let p = cl::parse(SPECS, args, 0, &["type"], prog).map_err(ToolError::command_line)?;
    if ["help", "help-list", "help-hidden", "help-list-hidden", "h"]
        .iter()
        .any(|f| p.flag(f))
    {
        print!("{HELP}");
        return Ok(());
    }
    if p.flag("version") {
        println!(
            "loader-sim {} (clang-offload-bundler replacement, LLVM 22 compatible)",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(());
    }
    let Some(files_type) = p.value("type") else {
        return Err(usage(
            "for the --type option: must be specified at least once!",
        ));
    };
    let mut cfg = config_from_env(files_type);
    cfg.map_file = map_file;
    apply_options(&mut cfg, &p)?;
    let unbundle = p.flag("unbundle");
    let list = p.flag("list");
    cfg.inputs = file_list(&p, prog, "input", "inputs")?;
    cfg.outputs = file_list(&p, prog, "output", "outputs")?;
    let targets: Vec<String> = p.list("targets").to_vec();

    if list {
        check_list_mode(&cfg, unbundle, &targets)?;
        return list_bundle_ids(&cfg);
    }
    check_mode(&cfg, unbundle, &targets, p.given("targets"))?;
    standardize_targets(&mut cfg, targets, unbundle)?;

    if unbundle {
        if cfg.files_type == "a" {
            unbundle_archive(&cfg)
        } else {
            unbundle_files(&cfg)
        }
    } else {
        bundle_files(&cfg)
    }
}

/// The command line's settings over the environment's: compression, verbosity, level,
/// method, bundle alignment and the plain flags.
fn apply_options(cfg: &mut Config, p: &cl::Parsed) -> Result<(), ToolError> {
    if p.given("compress") {
        cfg.compress = p.flag("compress");
    }
    if p.given("verbose") {
        cfg.verbose = p.flag("verbose");
    }
    if let Some(l) = p.value("compression-level") {
        cfg.level_set = true;
        cfg.level = cl::parse_signed(l)
            .filter(|v| i32::try_from(*v).is_ok())
            .ok_or_else(|| {
                usage(format!(
                    "for the --compression-level option: '{l}' value invalid for integer argument!"
                ))
            })?;
    }
    if let Some(m) = p.value("compression-method") {
        cfg.method = match m {
            "zstd" => Method::Zstd,
            "zlib" => Method::Zlib,
            _ => {
                return Err(usage(format!(
                    "for the --compression-method option: '{m}' is neither zstd nor zlib"
                )))
            }
        };
    }
    if let Some(a) = p.value("bundle-align") {
        cfg.bundle_align = cl::parse_unsigned(a)
            .filter(|v| u32::try_from(*v).is_ok())
            .ok_or_else(|| {
                usage(format!(
                    "for the --bundle-align option: '{a}' value invalid for uint argument!"
                ))
            })?;
    }
    cfg.allow_missing = p.flag("allow-missing-bundles");
    cfg.hip_openmp = p.flag("hip-openmp-compatible");
    cfg.check_input_archive = p.flag("check-input-archive");
    cfg.print_commands = p.flag("###");
    Ok(())
}

/// The files of `-<single>` (repeatable) and of the deprecated comma list `-<plural>`,
/// which cannot be used together (a warning for the deprecated one).
fn file_list(
    p: &cl::Parsed,
    prog: &str,
    single: &str,
    plural: &str,
) -> Result<Vec<String>, ToolError> {
    let mut files: Vec<String> = p.list(single).to_vec();
    if p.given(single) && p.given(plural) {
        return Err(fail(format!(
            "-{plural} and -{single} cannot be used together, use only -{single} instead"
        )));
    }
    if !p.list(plural).is_empty() {
        eprintln!("{prog}: warning: -{plural} is deprecated, use -{single} instead");
        files.extend(p.list(plural).iter().cloned());
    }
    Ok(files)
}

/// The checks of LLVM's `main` for `-list`: one input, no outputs, no targets.
fn check_list_mode(cfg: &Config, unbundle: bool, targets: &[String]) -> Result<(), ToolError> {
    if unbundle {
        return Err(fail("-unbundle and -list cannot be used together"));
    }
    if cfg.inputs.len() != 1 {
        return Err(fail("only one input file supported for -list"));
    }
    if !cfg.outputs.is_empty() {
        return Err(fail("-outputs option is invalid for -list"));
    }
    if !targets.is_empty() {
        return Err(fail("-targets option is invalid for -list"));
    }
    Ok(())
}

/// The checks of LLVM's `main` for bundling and unbundling: `-check-input-archive`, the
/// outputs, the targets, and how many files go with how many targets.
fn check_mode(
    cfg: &Config,
    unbundle: bool,
    targets: &[String],
    targets_given: bool,
) -> Result<(), ToolError> {
    if cfg.check_input_archive {
        if !unbundle {
            return Err(fail("-check-input-archive cannot be used while bundling"));
        }
        if cfg.files_type != "a" {
            return Err(fail(
                "-check-input-archive can only be used for unbundling archives (-type=a)",
            ));
        }
    }
    if cfg.outputs.is_empty() {
        return Err(fail("no output file specified!"));
    }
    if !targets_given {
        return Err(fail(
            "for the --targets option: must be specified at least once!",
        ));
    }
    if unbundle {
        if cfg.inputs.len() != 1 {
            return Err(fail("only one input file supported in unbundling mode"));
        }
        if cfg.outputs.len() != targets.len() {
            return Err(fail(
                "number of output files and targets should match in unbundling mode",
            ));
        }
    } else {
        if cfg.files_type == "a" {
            return Err(fail("Archive files are only supported for unbundling"));
        }
        if cfg.outputs.len() != 1 {
            return Err(fail("only one output file supported in bundling mode"));
        }
        if cfg.inputs.len() != targets.len() {
            return Err(fail(
                "number of input files and targets should match in bundling mode",
            ));
        }
    }
    Ok(())
}

/// Validates and standardises the targets, as LLVM's `main` does: no duplicates, each
/// well-formed with a known kind and triple, no conflicting target IDs, the right number
/// of host targets. Sets `cfg.targets`, `raw_targets`, `host_input_index` and
/// `allow_no_host`.
fn standardize_targets(
    cfg: &mut Config,
    targets: Vec<String>,
    unbundle: bool,
) -> Result<(), ToolError> {
    let mut seen = BTreeSet::new();
    let mut host_count = 0usize;
    let mut hip_only = true;
    let mut ids_by_kind_triple: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut standardized = Vec::with_capacity(targets.len());
    for (index, t) in targets.iter().enumerate() {
        if !seen.insert(t.as_str()) {
            return Err(fail("Duplicate targets are not allowed"));
        }
        let info = valid_target(t)?;
        standardized.push(info.str());
        ids_by_kind_triple
            .entry(format!("{}-{}", info.kind, info.triple.str()))
            .or_default()
            .insert(info.target_id.clone());
        if info.is_host() {
            host_count += 1;
            cfg.host_input_index = Some(index);
        }
        if info.kind != "hip" && info.kind != "hipv4" {
            hip_only = false;
        }
    }
    for (key, ids) in &ids_by_kind_triple {
        if let Some((a, b)) = conflicting_ids(ids).map_err(fail)? {
            return Err(fail(format!(
                "Cannot bundle inputs with conflicting targets: '{key}-{a}' and '{key}-{b}'"
            )));
        }
    }
    cfg.allow_no_host = hip_only;
    if (unbundle && host_count > 1) || (!unbundle && host_count != 1 && !cfg.allow_no_host) {
        return Err(fail(format!(
            "expecting exactly one host target but got {host_count}"
        )));
    }
    cfg.targets = standardized;
    cfg.raw_targets = targets;
    Ok(())
}

/// One target of `-targets`, parsed: well-formed (`checkBundleID`), with a known
/// offloading kind and target triple.
fn valid_target(t: &str) -> Result<TargetInfo, ToolError> {
    if !check_bundle_id(t) {
        return Err(fail(
            "Targets need to follow the format '<offload kind>-<target triple>', where '<target triple>' \
             follows the format '<kind>-<arch>-<vendor>-<os>-<env>[-<target id>[:target features]]'.",
        ));
    }
    let info = TargetInfo::new(t).ok_or_else(|| fail(format!("invalid target '{t}'")))?;
    if !info.kind_valid() || !info.triple_valid() {
        let mut msg = format!("invalid target '{t}'");
        if !info.kind_valid() {
            msg.push_str(&format!(", unknown offloading kind '{}'", info.kind));
        }
        if !info.triple_valid() {
            msg.push_str(&format!(", unknown target triple '{}'", info.triple.str()));
        }
        return Err(fail(msg));
    }
    Ok(info)
}

/// `OffloadBundlerConfig`'s constructor: defaults, then the environment.
fn config_from_env(files_type: &str) -> Config {
    let mut cfg = Config {
        files_type: files_type.to_string(),
        targets: Vec::new(),
        raw_targets: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        host_input_index: None,
        allow_no_host: false,
        allow_missing: false,
        hip_openmp: false,
        check_input_archive: false,
        print_commands: false,
        bundle_align: 1,
        compress: false,
        verbose: false,
        level: 3,
        level_set: false,
        ccob_version: 3,
        method: Method::Zstd,
        map_file: crate::input::read_file,
    };
    let var = |n: &str| std::env::var(n).ok();
    if var("OFFLOAD_BUNDLER_IGNORE_ENV_VAR").as_deref() == Some("1") {
        return cfg;
    }
    if let Some(v) = var("OFFLOAD_BUNDLER_VERBOSE") {
        cfg.verbose = v == "1";
    }
    if let Some(v) = var("OFFLOAD_BUNDLER_COMPRESS") {
        cfg.compress = v == "1";
    }
    if let Some(v) = var("OFFLOAD_BUNDLER_COMPRESSION_LEVEL") {
        match v.parse::<i32>() {
            Ok(l) if !v.starts_with('+') => {
                cfg.level = i64::from(l);
                cfg.level_set = true;
            }
            _ => eprintln!(
                "Warning: Invalid value for OFFLOAD_BUNDLER_COMPRESSION_LEVEL: {v}. Ignoring it."
            ),
        }
    }
    if let Some(v) = var("COMPRESSED_BUNDLE_FORMAT_VERSION") {
        match v.parse::<u16>() {
            Ok(n @ 2..=3) if !v.starts_with('+') => cfg.ccob_version = n,
            Ok(_) if !v.starts_with('+') => eprintln!(
                "Warning: Invalid value for COMPRESSED_BUNDLE_FORMAT_VERSION: {v}. Valid values are 2 or 3. Using default version {}.",
                cfg.ccob_version
            ),
            _ => eprintln!(
                "Warning: Invalid value for COMPRESSED_BUNDLE_FORMAT_VERSION: {v}. Using default version {}.",
                cfg.ccob_version
            ),
        }
    }
    cfg
}

/// Reads a file (`-` is standard input).
fn read_input(name: &str) -> Result<Vec<u8>, ToolError> {
    if name == "-" {
        return crate::input::read_stdin().map_err(|e| fail(format!("'{name}': {e}")));
    }
    crate::input::read_regular(std::path::Path::new(name))
        .map_err(|e| fail(format!("'{name}': {}", io_msg(&e))))
}

/// Writes a file (`-` is standard output).
fn write_output(name: &str, data: &[u8]) -> Result<(), ToolError> {
    if name == "-" {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(data)
            .and_then(|_| out.flush())
            .map_err(|e| fail(format!("'{name}': {e}")));
    }
    std::fs::write(name, data).map_err(|e| fail(format!("'{name}': {}", io_msg(&e))))
}

fn io_msg(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => e.to_string(),
    }
}

/// `CompressedOffloadBundle::decompress`: the bundle inside a `CCOB`, or `data` itself.
fn decompress(data: &[u8], verbose: bool, what: &str) -> Result<Vec<u8>, ToolError> {
    if data.len() < 8 || !data.starts_with(b"CCOB") {
        if verbose && data.len() >= 8 {
            eprintln!("Uncompressed bundle.");
        }
        return Ok(data.to_vec());
    }
    let err = |e: offload_image::Error| fail(format!("{what}: {}", e));
    let c = CompressedBundle::parse(data).map_err(err)?;
    let options = ReadOptions {
        verify_hash: false,
        limits: offload_image::Limits::UNLIMITED,
        ..ReadOptions::default()
    };
    let start = std::time::Instant::now();
    let out = c.decompress(&options).map_err(err)?;
    let seconds = start.elapsed().as_secs_f64();
    let recalculated = offload_image::ccob::truncated_md5(&out);
    let ok = recalculated == c.hash();
    if verbose {
        let version = c.version();
        let header = match version {
            1 => 20,
            2 => 24,
            _ => 32,
        };
        // LLVM takes `total size - header size` bytes after the header (all of them for
        // version 1, whose header has no total size).
        let payload = match c.total_size() {
            Some(t) => len64(data.len() - header).min(t.saturating_sub(len64(header))),
            None => len64(data.len() - header),
        };
        let size = c.uncompressed_size();
        let rate = size as f64 / payload as f64;
        let speed = (size as f64 / (1024.0 * 1024.0)) / seconds;
        eprintln!("Compressed bundle format version: {version}");
        if version >= 2 {
            eprintln!(
                "Total file size (from header): {} bytes",
                with_commas(c.total_size().unwrap_or(0))
            );
        }
        eprint!(
            "Decompression method: {}\n\
             Size before decompression: {} bytes\n\
             Size after decompression: {} bytes\n\
             Compression rate: {rate:.2}\n\
             Compression ratio: {:.2}%\n\
             Decompression speed: {speed:.2} MB/s\n\
             Stored hash: {}\n\
             Recalculated hash: {}\n\
             Hashes match: {}\n",
            c.method().name(),
            with_commas(payload),
            with_commas(size),
            100.0 / rate,
            format_hex(u64::from_le_bytes(c.hash()), 16),
            format_hex(u64::from_le_bytes(recalculated), 16),
            if ok { "Yes" } else { "No" }
        );
    } else if !ok {
        eprintln!(
            "warning: the truncated MD5 in the compressed bundle header does not match its content"
        );
    }
    Ok(out)
}

/// An input of `-bundle`: a file mapped in place, or standard input read into memory.
enum Source {
    Mapped(Box<dyn MappedInput>),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Source {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Source::Mapped(m) => m.bytes(),
            Source::Owned(v) => v,
        }
    }
}

/// Maps a file for bundling (`-` is standard input, read into memory).
fn map_input(name: &str, map_file: MapFile) -> Result<Source, ToolError> {
    if name == "-" {
        return read_input(name).map(Source::Owned);
    }
    // A FIFO or a device is refused at once (`open_regular` does not block on a FIFO).
    let file = crate::input::open_regular(std::path::Path::new(name))
        .map_err(|e| fail(format!("'{name}': {}", io_msg(&e))))?;
    map_file(&file)
        .map(Source::Mapped)
        .map_err(|e| fail(format!("'{name}': {}", io_msg(&e))))
}

/// True if `output` names the same file as one of `inputs` (then the inputs must be read
/// before the output is truncated, not mapped).
#[cfg(not(unix))]
fn output_is_an_input(output: &str, inputs: &[String]) -> bool {
    let Ok(o) = std::fs::canonicalize(output) else {
        return false;
    };
    inputs
        .iter()
        .any(|i| std::fs::canonicalize(i).is_ok_and(|i| i == o))
}

/// True if `output` names the same file as one of `inputs` (then the inputs must be read
/// before the output is truncated, not mapped).
#[cfg(unix)]
fn output_is_an_input(output: &str, inputs: &[String]) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(o) = std::fs::metadata(output) else {
        return false;
    };
    inputs
        .iter()
        .any(|i| std::fs::metadata(i).is_ok_and(|m| m.dev() == o.dev() && m.ino() == o.ino()))
}

/// Writes to `out`, handing big writes over in [`RELEASE_CHUNK`] pieces and dropping the
/// pages of every piece that came from a mapped input once it is written
/// ([`MappedInput::release`]), so that bundling 100 MB of inputs does not keep them resident.
struct ReleasingWriter<'a, W> {
    out: W,
    inputs: &'a [Source],
}

/// Bytes written between two releases of mapped input pages.
const RELEASE_CHUNK: usize = 4 << 20;

impl<W: Write> Write for ReleasingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() <= RELEASE_CHUNK {
            let n = self.out.write(buf)?;
            self.release(&buf[..n]);
            return Ok(n);
        }
        for chunk in buf.chunks(RELEASE_CHUNK) {
            self.out.write_all(chunk)?;
            self.release(chunk);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl<W> ReleasingWriter<'_, W> {
    fn release(&self, part: &[u8]) {
        if part.len() < 64 << 10 {
            return;
        }
        for input in self.inputs {
            if let Source::Mapped(m) = input {
                if crate::input::contains(m.bytes(), part) {
                    m.release(part);
                    return;
                }
            }
        }
    }
}

/// `OffloadBundler::BundleFiles`.
fn bundle_files(cfg: &Config) -> Result<(), ToolError> {
    let inputs: Vec<Source> = if output_is_an_input(&cfg.outputs[0], &cfg.inputs) {
        cfg.inputs
            .iter()
            .map(|i| read_input(i).map(Source::Owned))
            .collect::<Result<_, _>>()?
    } else {
        cfg.inputs
            .iter()
            .map(|i| map_input(i, cfg.map_file))
            .collect::<Result<_, _>>()?
    };
    let first = if cfg.allow_no_host {
        0
    } else {
        cfg.host_input_index.unwrap_or(0)
    };
    let handler = Handler::create(&cfg.files_type, &inputs[first]).map_err(fail)?;
    let entries: Vec<(&str, &[u8])> = cfg
        .targets
        .iter()
        .map(String::as_str)
        .zip(inputs.iter().map(|s| &**s))
        .collect();
    let bundle = match &handler {
        Handler::Object(_) => {
            let Some(host) = cfg.host_input_index else {
                return Err(fail(
                    "cannot bundle ELF objects without a host target: the object-file bundler needs the host \
                     object to add sections to (LLVM 22 crashes here)",
                ));
            };
            return bundle_object(cfg, &inputs, host);
        }
        Handler::Binary(_) => {
            let mut ids = BTreeSet::new();
            for (raw, id) in cfg.raw_targets.iter().zip(&cfg.targets) {
                if !ids.insert(id.as_str()) {
                    return Err(fail(format!(
                        "target '{raw}' normalises to the bundle entry ID '{id}' of another target \
                         (LLVM 22 writes a corrupt bundle: both entries share one offset)"
                    )));
                }
            }
            if cfg.bundle_align == 0 {
                return Err(fail(
                    "-bundle-align=0 is not a valid alignment (LLVM 22 divides by zero here)",
                ));
            }
            if !cfg.compress && cfg.outputs[0] != "-" {
                // Straight from the mapped inputs to the file: no copy of the payloads in
                // memory (LLVM builds the bundle in a buffer first).
                return write_bundle_file(&cfg.outputs[0], &entries, cfg.bundle_align, &inputs);
            }
            offload_image::write::bundle::bundle_to_vec(&entries, cfg.bundle_align)
                .map_err(|e| fail(e.what()))?
        }
        Handler::Text(_) => {
            let comment = handler::text_comment(&cfg.files_type).unwrap_or("#");
            let style = match comment {
                ";" => offload_image::text::CommentStyle::Semicolon,
                "#" => offload_image::text::CommentStyle::Hash,
                _ => offload_image::text::CommentStyle::DoubleSlash,
            };
            offload_image::write::text::text_bundle_to_vec(style, &entries)
        }
    };
    let out = if cfg.compress {
        compress(cfg, &bundle)?
    } else {
        bundle
    };
    write_output(&cfg.outputs[0], &out)
}

/// Writes the binary bundle of `entries` to the file `name`.
fn write_bundle_file(
    name: &str,
    entries: &[(&str, &[u8])],
    align: u64,
    inputs: &[Source],
) -> Result<(), ToolError> {
    use offload_image::write::WriteError;
    let io = |e: std::io::Error| fail(format!("'{name}': {}", io_msg(&e)));
    // Checked before the output is created, as LLVM does.
    offload_image::write::bundle::layout(entries, align).map_err(|e| fail(e.what()))?;
    let file = std::fs::File::create(name).map_err(io)?;
    let mut out = ReleasingWriter {
        out: std::io::BufWriter::with_capacity(64 << 10, file),
        inputs,
    };
    let written = offload_image::write::bundle::write_bundle(&mut out, entries, align)
        .map_err(|e| match e {
            WriteError::Invalid(e) => fail(e.what()),
            WriteError::Io(e) => io(e),
        })
        .and_then(|_| out.flush().map_err(io));
    if written.is_err() {
        // No part of a bundle stays behind when writing it failed.
        drop(out);
        let _ = std::fs::remove_file(name);
    }
    written
}

/// `CompressedOffloadBundle::compress` with the configured version, codec and level: the
/// C libzstd (long-distance matching on) or zlib, called as LLVM calls them.
fn compress(cfg: &Config, bundle: &[u8]) -> Result<Vec<u8>, ToolError> {
    use offload_image::ccob::CompressionMethod;
    let (method, level) = match cfg.method {
        Method::Zstd => (CompressionMethod::Zstd, cfg.level),
        // LLVM's default level for zlib is zlib's default, 6.
        Method::Zlib => (
            CompressionMethod::Zlib,
            if cfg.level_set { cfg.level } else { 6 },
        ),
    };
    // The level was checked to fit an `int` when it was read.
    let level = i32::try_from(level).unwrap_or(3);
    let options = CcobOptions {
        version: cfg.ccob_version,
        codec: ccob_writer::llvm_codec(method, level),
    };
    let start = std::time::Instant::now();
    let out = ccob_writer::compress(bundle, &options).map_err(|e| fail(e.what()))?;
    let seconds = start.elapsed().as_secs_f64();
    if cfg.verbose {
        let header = if cfg.ccob_version == 2 { 24 } else { 32 };
        let payload = out.len() - header;
        let rate = bundle.len() as f64 / payload as f64;
        let speed = (bundle.len() as f64 / (1024.0 * 1024.0)) / seconds;
        let hash = offload_image::ccob::truncated_md5(bundle);
        eprint!(
            "Compressed bundle format version: {}\n\
             Total file size (including headers): {} bytes\n\
             Compression method used: {}\n\
             Compression level: {level}\n\
             Binary size before compression: {} bytes\n\
             Binary size after compression: {} bytes\n\
             Compression rate: {rate:.2}\n\
             Compression ratio: {:.2}%\n\
             Compression speed: {speed:.2} MB/s\n\
             Truncated MD5 hash: {}\n",
            cfg.ccob_version,
            with_commas(len64(out.len())),
            if cfg.method == Method::Zstd {
                "zstd"
            } else {
                "zlib"
            },
            with_commas(len64(bundle.len())),
            with_commas(len64(payload)),
            100.0 / rate,
            format_hex(u64::from_le_bytes(hash), 16),
        );
    }
    Ok(out)
}

/// `usize` to `u64` (lossless on every supported target).
fn len64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// LLVM's `formatWithCommas`: `1234567` is `1,234,567`.
pub fn with_commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i != 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `llvm::format_hex(n, width)`: `0x` and lower-case digits, zero-padded to `width`
/// characters in all (the prefix included).
pub fn format_hex(n: u64, width: usize) -> String {
    format!("{n:#0width$x}")
}

/// `ObjectFileHandler::finalizeOutputFile`: the host object plus one section per target,
/// as `llvm-objcopy --add-section=... --set-section-flags=...=readonly,exclude` writes it.
fn bundle_object(cfg: &Config, inputs: &[Source], host: usize) -> Result<(), ToolError> {
    let sections: Vec<(Vec<u8>, Vec<u8>)> = cfg
        .targets
        .iter()
        .zip(inputs)
        .enumerate()
        .map(|(i, (t, data))| {
            let mut name = MAGIC.to_vec();
            name.extend_from_slice(t.as_bytes());
            (name, if i == host { vec![0u8] } else { data.to_vec() })
        })
        .collect();
    if cfg.print_commands {
        let mut line = String::from("\"llvm-objcopy\"");
        for (i, t) in cfg.targets.iter().enumerate() {
            let file = if i == host {
                "<temporary file>"
            } else {
                &cfg.inputs[i]
            };
            line.push_str(&format!(
                " \"--add-section=__CLANG_OFFLOAD_BUNDLE__{t}={file}\" \"--set-section-flags=__CLANG_OFFLOAD_BUNDLE__{t}=readonly,exclude\""
            ));
        }
        line.push_str(&format!(
            " \"--\" \"{}\" \"{}\"",
            cfg.inputs[host], cfg.outputs[0]
        ));
        eprintln!("{line}");
        return Ok(());
    }
    // Two targets that normalise to one entry ID give `llvm-objcopy` the same
    // `--set-section-flags` twice: it refuses, with these messages. LLVM 22's bundler has
    // created the output file by then and leaves it behind, empty; the drop-in writes no
    // output on any refusal (an empty object newer than its inputs would look up to date
    // to a build system).
    let mut names = BTreeSet::new();
    if let Some(t) = cfg.targets.iter().find(|t| !names.insert(t.as_str())) {
        eprintln!(
            "llvm-objcopy: error: --set-section-flags set multiple times for section '__CLANG_OFFLOAD_BUNDLE__{t}'"
        );
        return Err(fail("'llvm-objcopy' tool failed"));
    }
    let out = objcopy::add_sections(&inputs[host], &sections)
        .map_err(|e| fail(format!("'llvm-objcopy' tool failed: {e}")))?;
    write_output(&cfg.outputs[0], &out)
}

/// `OffloadBundler::UnbundleFiles`.
fn unbundle_files(cfg: &Config) -> Result<(), ToolError> {
    let original = read_input(&cfg.inputs[0])?;
    let input = decompress(&original, cfg.verbose, "Failed to decompress input")?;
    let mut h = Handler::create(&cfg.files_type, &input).map_err(fail)?;
    h.read_header(&input).map_err(fail)?;
    let mut worklist: StringMap<String> = StringMap::new();
    for (t, o) in cfg.targets.iter().zip(&cfg.outputs) {
        if !check_bundle_id(t) {
            return Err(fail("invalid bundle id from bundle config"));
        }
        worklist.set(t.as_bytes(), o.clone());
    }
    let mut found_host = false;
    while !worklist.is_empty() {
        let Some(cur) = h.read_bundle_start(&input) else {
            break;
        };
        let cur_str = String::from_utf8_lossy(&cur).into_owned();
        if !check_bundle_id(&cur_str) {
            return Err(fail("invalid bundle id read from the bundle"));
        }
        let code = TargetInfo::new(&cur_str)
            .ok_or_else(|| fail("invalid bundle id read from the bundle"))?;
        let matched = worklist
            .iter()
            .find(|(k, _)| {
                TargetInfo::new(&String::from_utf8_lossy(k))
                    .is_some_and(|t| is_compatible(&code, &t, cfg.hip_openmp))
            })
            .map(|(k, o)| (k.to_vec(), o.clone()));
        let Some((key, output)) = matched else {
            continue;
        };
        let data = h.read_bundle(&input, &original, &cur).map_err(fail)?;
        write_output(&output, &data)?;
        h.read_bundle_end(&input);
        worklist.remove(&key);
        if code.is_host() {
            found_host = true;
        }
    }
    if !cfg.allow_missing && !worklist.is_empty() {
        let sorted: BTreeSet<String> = worklist
            .iter()
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .collect();
        let mut msg = String::from("Can't find bundles for");
        let last = sorted.len() - 1;
        for (i, e) in sorted.iter().enumerate() {
            if i != 0 && last > 1 {
                msg.push(',');
            }
            msg.push(' ');
            if i == last && i != 0 {
                msg.push_str("and ");
            }
            msg.push_str(e);
        }
        return Err(fail(msg));
    }
    if worklist.len() == cfg.targets.len() {
        for (k, out) in worklist.iter() {
            let is_host = TargetInfo::new(&String::from_utf8_lossy(k)).is_some_and(|t| t.is_host());
            write_output(out, if is_host { &input } else { &[] })?;
        }
        return Ok(());
    }
    if !(found_host || cfg.host_input_index.is_none() || cfg.allow_missing) {
        return Err(fail("Can't find bundle for the host target"));
    }
    for (_, out) in worklist.iter() {
        write_output(out, &[])?;
    }
    Ok(())
}

/// `OffloadBundler::ListBundleIDsInFile` as LLVM 22 implements it: the (decompressed)
/// input holds one bundle, whose IDs are printed in the handler's order (hash order for
/// binary bundles). Bytes after the first bundle are ignored; LLVM main's scan for further
/// bundles is not in LLVM 22.
fn list_bundle_ids(cfg: &Config) -> Result<(), ToolError> {
    let contents = read_input(&cfg.inputs[0])?;
    let input = decompress(&contents, cfg.verbose, "Failed to decompress input")?;
    let mut h = Handler::create(&cfg.files_type, &input).map_err(fail)?;
    h.read_header(&input).map_err(fail)?;
    let mut out = std::io::stdout().lock();
    while let Some(id) = h.read_bundle_start(&input) {
        out.write_all(&id)
            .and_then(|_| out.write_all(b"\n"))
            .map_err(|e| fail(e.to_string()))?;
        h.skip_bundle(&input);
    }
    out.flush().map_err(|e| fail(e.to_string()))
}

/// `sys::path::filename`.
fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// `sys::path::stem`.
fn stem(name: &str) -> &str {
    let f = file_name(name);
    if f == "." || f == ".." {
        return f;
    }
    match f.rfind('.') {
        Some(pos) => &f[..pos],
        None => f,
    }
}

/// `sys::path::extension`.
fn extension(name: &str) -> &str {
    let f = file_name(name);
    if f == "." || f == ".." {
        return "";
    }
    match f.rfind('.') {
        Some(pos) => &f[pos..],
        None => "",
    }
}

/// The members of an `ar` archive: (name, data).
fn archive_members(data: &[u8], name: &str) -> Result<Vec<(String, Vec<u8>)>, ToolError> {
    archive::read_members(data).map_err(|e| {
        if archive::is_llvm_archive_error(&e) {
            fail(e)
        } else {
            fail(format!("'{name}': {e}"))
        }
    })
}

/// `CheckHeterogeneousArchive`.
fn check_archive(
    cfg: &Config,
    members: &[(String, Vec<u8>)],
    archive_name: &str,
) -> Result<(), ToolError> {
    for (name, data) in members {
        let mut h = Handler::create(&cfg.files_type, data).map_err(fail)?;
        h.read_header(data).map_err(fail)?;
        let mut ids = BTreeSet::new();
        while let Some(id) = h.read_bundle_start(data) {
            ids.insert(String::from_utf8_lossy(&id).into_owned());
            h.skip_bundle(data);
        }
        if let Some((a, b)) = conflicting_ids(&ids).map_err(fail)? {
            return Err(fail(format!(
                "conflicting TargetIDs [{a}, {b}] found in {name} of {archive_name}"
            )));
        }
    }
    Ok(())
}

/// `OffloadBundler::UnbundleArchive`.
fn unbundle_archive(cfg: &Config) -> Result<(), ToolError> {
    let archive_name = &cfg.inputs[0];
    let data = read_input(archive_name)?;
    let members = archive_members(&data, archive_name)?;
    if cfg.check_input_archive {
        check_archive(cfg, &members, archive_name)?;
    }
    let mut output_of: StringMap<String> = StringMap::new();
    for (t, o) in cfg.targets.iter().zip(&cfg.outputs) {
        output_of.set(t.as_bytes(), o.clone());
    }
    let mut per_target: BTreeMap<String, Vec<NewMember>> = BTreeMap::new();
    for (member_name, raw) in &members {
        let object_file = file_name(member_name);
        let code_buffer = decompress(raw, cfg.verbose, "Failed to decompress code object")?;
        let mut h = Handler::create(&cfg.files_type, &code_buffer).map_err(fail)?;
        h.read_header(&code_buffer).map_err(fail)?;
        let Some(mut code_object) = h.read_bundle_start(&code_buffer) else {
            continue;
        };
        while !code_object.is_empty() {
            let code_str = String::from_utf8_lossy(&code_object).into_owned();
            if !check_bundle_id(&code_str) {
                return Err(fail("Invalid bundle id read from code object"));
            }
            let info = TargetInfo::new(&code_str)
                .ok_or_else(|| fail("Invalid bundle id read from code object"))?;
            let compatible: Vec<&String> = cfg
                .targets
                .iter()
                .filter(|t| {
                    TargetInfo::new(t).is_some_and(|ti| is_compatible(&info, &ti, cfg.hip_openmp))
                })
                .collect();
            if !compatible.is_empty() {
                let payload = h
                    .read_bundle(&code_buffer, raw, &code_object)
                    .map_err(fail)?;
                let ext = if info.target_id.contains("gfx") {
                    ".bc"
                } else if info.target_id.contains("sm_") {
                    ".cubin"
                } else {
                    extension(object_file)
                };
                let member = format!(
                    "{}-{}{}{}",
                    stem(object_file),
                    code_str,
                    stem(object_file),
                    ext
                )
                .replace(':', "_");
                for t in compatible {
                    per_target.entry(t.clone()).or_default().push(NewMember {
                        name: member.clone(),
                        data: payload.clone(),
                    });
                }
            }
            h.read_bundle_end(&code_buffer);
            code_object = h.read_bundle_start(&code_buffer).unwrap_or_default();
        }
    }
    for t in &cfg.targets {
        let file = output_of.get(t.as_bytes()).cloned().unwrap_or_default();
        let members: &[NewMember] = match per_target.get(t) {
            Some(m) => m,
            None if !cfg.allow_missing => {
                return Err(fail(format!(
                    "no compatible code object found for the target '{t}' in heterogeneous archive library: {archive_name}"
                )))
            }
            None => &[],
        };
        let bytes = archive::write_gnu(members).map_err(|e| fail(format!("'{file}': {e}")))?;
        write_output(&file, &bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::handler::is_elf_object;
    use super::*;

    #[test]
    fn path_helpers_follow_llvm() {
        assert_eq!(stem("dir/hip_rdc.o"), "hip_rdc");
        assert_eq!(extension("dir/hip_rdc.o"), ".o");
        assert_eq!(stem(".bashrc"), "");
        assert_eq!(extension("noext"), "");
        assert_eq!(file_name("a/b/c.o"), "c.o");
    }

    #[test]
    fn object_detection_needs_a_parsable_elf() {
        assert!(!is_elf_object(b"\x7fELF garbage"));
        assert!(!is_elf_object(b""));
    }
}
