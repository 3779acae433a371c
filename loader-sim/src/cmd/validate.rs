//! `loader-sim validate FILE... [--json] [--deny-warnings] [--no-verify-hash]`: every problem in
//! offload containers, with a severity, a stable code, the container and the byte offset
//! (`offload_image::validate`, `docs/VALIDATE.md`).

use std::io::Write;
use std::path::PathBuf;

use offload_image::validate::{validate, Finding, Severity};
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

/// Runs `validate`.
pub fn run(args: &Args) -> Result<Outcome, Failure> {
    let read =
        crate::decode::read_options(crate::decode::ZstdDecoder::DEFAULT, !args.no_verify_hash);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut worst: Option<Severity> = None;
    for file in &args.files {
        let findings: Vec<Finding> = match Input::open(file) {
            Ok(input) => validate(input.bytes(), &read),
            Err(Failure(msg)) => {
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
            let written = if args.json {
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
                writeln!(
                    out,
                    "{}: {}: {} [{}] {}, at byte {}",
                    file.display(),
                    f.severity().name(),
                    f.message,
                    f.code.name(),
                    f.container,
                    f.offset
                )
            };
            written.map_err(|e| Failure(format!("cannot write output: {e}")))?;
        }
    }
    out.flush()
        .map_err(|e| Failure(format!("cannot write output: {e}")))?;
    Ok(match worst {
        Some(Severity::Error) => Outcome::Invalid,
        Some(Severity::Warning) if args.deny_warnings => Outcome::Invalid,
        _ => Outcome::Ok,
    })
}
