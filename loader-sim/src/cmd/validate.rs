//! `loader-sim validate FILE... [--json] [--deny-warnings] [--no-verify-hash]`: every problem in
//! offload containers, with a severity, a stable code, the container and the byte offset
//! (`offload_image::validate`, `docs/VALIDATE.md`).

use std::path::PathBuf;

use offload_image::validate::{validate_jobs, Code, Finding, Severity};
use serde::Serialize;

use crate::input::Input;
use crate::output::json_line;
use crate::{Failure, Outcome};

/// Arguments of `validate`.
#[derive(clap::Args)]
pub struct Args {
    /// The files to check (bundle, CCOB, OffloadBinary, ELF, archive, ...).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Write JSON Lines instead of text.
    #[arg(long)]
    json: bool,
    /// Exit with status 2 on warnings too.
    #[arg(long)]
    deny_warnings: bool,
    /// Do not verify the truncated MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
    /// The NVIDIA driver version (`580.159.04`): PTX entries whose ISA version it does not
    /// compile are reported (`ptx-too-new-for-driver`).
    #[arg(long, value_name = "VERSION", value_parser = crate::cmd::parse_driver)]
    nvidia_driver: Option<offload_image::driver::DriverVersion>,
    /// Output format: text, json (as --json), or sarif (a SARIF 2.1.0 log).
    #[arg(long, value_enum)]
    format: Option<crate::sarif::ReportFormat>,
    /// Units checked at once, each decoded and hashed on a thread of its own (default: the
    /// number of CPUs; 1: one unit after another). Output is the same for every N.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

/// One finding (field names are part of the CLI contract).
#[derive(Serialize)]
struct Record<'a> {
    file: String,
    container: &'a str,
    offset: u64,
    severity: &'static str,
    code: &'static str,
    message: &'a str,
}

/// What needs the filesystem (`VALIDATE.md` §2.18): a split library's wrappers with no
/// archive installed, and `.kpack` archive names with a `:` (the file itself, or the
/// archives a split library finds).
fn kpack_findings(file: &std::path::Path, data: &[u8]) -> Vec<Finding> {
    let mut out = Vec::new();
    let colon = |path: &str, container: &str, offset: u64| {
        Finding {
        code: Code::KpackArchiveName,
        container: container.to_string(),
        offset,
        message: format!(
            "the kpack archive {path} has a ':' in its file name: Windows cannot store it, and ROCM_KPACK_PATH cannot name it (its items are split at ':')"
        ),
    }
    };
    if data.starts_with(offload_image::kpack::KPACK_MAGIC) {
        if let Some(name) = file.file_name().and_then(|n| n.to_str()) {
            if name.contains(':') {
                out.push(colon(name, "file", 0));
            }
        }
        return out;
    }
    let Some(library) = crate::kpack::Library::open(file, data) else {
        return out;
    };
    let env = crate::kpack::Env::from_process();
    let mut named: Vec<String> = Vec::new();
    for (i, offset, archives) in library.installed_per_wrapper(&env) {
        let container = format!("wrapper {i}");
        if archives.is_empty() {
            out.push(Finding {
                code: Code::KpackArchiveMissing,
                container: container.clone(),
                offset,
                message: "no .kpack archive for this wrapper is installed where the kpack loader looks: it loads on no device (kpack error 13)".to_string(),
            });
        }
        for a in archives {
            let name = a.rsplit('/').next().unwrap_or(&a);
            if name.contains(':') && !named.contains(&a) {
                out.push(colon(&a, &container, offset));
                named.push(a);
            }
        }
    }
    out
}

/// Runs `validate`.
pub fn run(args: &Args, mut out: &mut dyn std::io::Write) -> Result<Outcome, Failure> {
    let jobs = crate::jobs(args.jobs);
    let read = crate::decode::read_options_for(
        crate::decode::ZstdDecoder::DEFAULT,
        !args.no_verify_hash,
        jobs,
    );
    let mut worst: Option<Severity> = None;
    let sarif = args.format == Some(crate::sarif::ReportFormat::Sarif);
    let json = args.json || args.format == Some(crate::sarif::ReportFormat::Json);
    let mut collected: Vec<crate::sarif::Finding> = Vec::new();
    for file in &args.files {
        let findings: Vec<Finding> = match Input::open(file) {
            Ok(input) => {
                let driver = crate::cmd::cuda_driver(args.nvidia_driver);
                let mut work = offload_image::validate::Work::default();
                // One worker (one unit, or --jobs 1): it may decode on a second thread.
                let one = jobs <= 1 || offload_image::units(input.bytes(), &read).nth(1).is_none();
                let read = offload_image::ReadOptions {
                    decoders: crate::decode::decoders_for(crate::decode::ZstdDecoder::DEFAULT, one),
                    ..read
                };
                let mut findings = validate_jobs(input.bytes(), &read, &driver, &mut work, jobs);
                crate::output::work::validated(work.bytes_scanned);
                findings.extend(kpack_findings(file, input.bytes()));
                findings
            }
            Err(Failure { message: msg, .. }) => {
                // An unreadable file is an error finding of its own; the others are checked.
                vec![Finding {
                    code: offload_image::validate::Code::Reader(
                        offload_image::ErrorKind::BadContainer,
                    ),
                    container: "file".to_string(),
                    offset: 0,
                    message: msg
                        .strip_prefix(&format!("{}: ", file.display()))
                        .unwrap_or(&msg)
                        .to_string(),
                }]
            }
        };
        for f in &findings {
            worst = worst.max(Some(f.severity()));
            if sarif {
                collected.push(crate::sarif::Finding {
                    rule: f.code.name().to_string(),
                    level: crate::sarif::level(f.severity().name()),
                    message: f.message.clone(),
                    file: file.display().to_string(),
                    offset: Some(f.offset),
                    inside: Some(f.container.clone()),
                });
                continue;
            }
            let written = if json {
                json_line(
                    &mut out,
                    &Record {
                        file: file.display().to_string(),
                        container: &f.container,
                        offset: f.offset,
                        severity: f.severity().name(),
                        code: f.code.name(),
                        message: &f.message,
                    },
                )
            } else {
                crate::output::text_line(
                    &mut out,
                    format_args!(
                        "{}: {}: {} [{}] {}, at byte {}",
                        file.display(),
                        f.severity().name(),
                        f.message,
                        f.code.name(),
                        f.container,
                        f.offset
                    ),
                )
            };
            written.map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
        }
    }
    if sarif {
        crate::sarif::write(out, &collected, &|code| {
            format!("validate: {code} (docs/VALIDATE.md)")
        })
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
    }
    out.flush()
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
    Ok(match worst {
        Some(Severity::Error) => Outcome::Invalid,
        Some(Severity::Warning) if args.deny_warnings => Outcome::Invalid,
        _ => Outcome::Ok,
    })
}
