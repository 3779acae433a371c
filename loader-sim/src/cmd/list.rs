//! `loader-sim list FILE [--json]`: every image, in discovery order.

use std::path::PathBuf;

use offload_image::units;

use crate::input::Input;
use crate::listing::{split_lines, unit_lines, Line};
use crate::output::{json_line, table, Damaged};
use crate::{Failure, Outcome};

/// Arguments of `list`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to read (bundle, CCOB, OffloadBinary, ELF, archive, ...).
    file: PathBuf,
    /// Write JSON Lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Do not verify the truncated MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
    /// Refuse bytes between containers that are neither zero padding nor a container
    /// (default: skip them up to the next container and note it, FORMATS.md §2.4).
    #[arg(long)]
    strict: bool,
    /// Do not hash the images (`sha256` is null): only the containers' headers and each
    /// image's ELF header are read, not the bytes of uncompressed images.
    #[arg(long)]
    no_sha256: bool,
    /// Units read at once, each decoded and hashed on a thread of its own (default: the
    /// number of CPUs; 1: one unit after another). Output is the same for every N.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

/// Runs `list`.
pub fn run(args: &Args, mut out: &mut dyn std::io::Write) -> Result<Outcome, Failure> {
    let input = Input::open(&args.file)?;
    let jobs = crate::jobs(args.jobs);
    let options = offload_image::ReadOptions {
        strict: args.strict,
        ..crate::decode::read_options_for(
            crate::decode::ZstdDecoder::DEFAULT,
            !args.no_verify_hash,
            jobs,
        )
    };
    let mut records = Vec::new();
    if let Some(library) = crate::kpack::Library::open(&args.file, input.bytes()) {
        split_lines(!args.no_sha256, &library, &options, &mut records)?;
    }
    // An AOTriton archive is no offload container: its code objects are read here.
    let aks2 = crate::aks2::list_lines(!args.no_sha256, input.bytes(), &options, &mut records);
    // The units are found first (headers only), then read on `jobs` threads, their lines
    // put back in the units' order.
    let found: Vec<_> = units(input.bytes(), &options).filter(|_| !aks2).collect();
    // One worker (one unit, or --jobs 1): it may decode on a second thread.
    let jobs = jobs.min(found.len());
    let options = offload_image::ReadOptions {
        decoders: crate::decode::decoders_for(crate::decode::ZstdDecoder::DEFAULT, jobs <= 1),
        ..options
    };
    let parts = offload_image::parallel::map_ordered(&found, jobs, |_, unit| {
        let mut lines = Vec::new();
        // A damaged container costs its unit only: report it and go on.
        match unit {
            Ok(unit) => unit_lines(!args.no_sha256, &input, unit, &options, &mut lines),
            Err(e) => lines.push(Line::Damaged(Damaged::outside(e))),
        }
        lines
    });
    records.extend(parts.into_iter().flatten());
    if records.is_empty() {
        // Code outside any container is all the file has: say so (issue 45).
        if let Some(note) = offload_image::judge::outside_note(input.bytes()) {
            eprintln!("{}: {note}", args.file.display());
        }
    }
    let written = if args.json {
        for line in &records {
            if let Line::Damaged(d) = line {
                d.warn(&args.file);
            }
        }
        records.iter().try_for_each(|r| json_line(&mut out, r))
    } else {
        notes(args, &records);
        let rows = rows(&records);
        // Nothing read at all: the error lines say it all.
        let all_damaged = rows.is_empty() && records.iter().any(|r| matches!(r, Line::Damaged(_)));
        if all_damaged {
            return Ok(Outcome::Invalid);
        }
        table(
            &mut out,
            &[
                "CONTAINER",
                "UNIT",
                "FORMAT",
                "IMAGE",
                "KIND",
                "OFFSET",
                "SIZE",
                "SHA256",
            ],
            &rows,
        )
    };
    written
        .and_then(|_| out.flush())
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
    // Every readable unit is listed; the status still says that something was damaged.
    if records.iter().any(|r| matches!(r, Line::Damaged(_))) {
        return Ok(Outcome::Invalid);
    }
    Ok(Outcome::Ok)
}

/// The notes of the table form on standard error: bytes skipped, damaged containers.
fn notes(args: &Args, records: &[Line]) {
    for line in records {
        if let Line::Skipped {
            container,
            bundle_index,
            skipped,
        } = line
        {
            crate::output::stderr_line(format_args!(
                "loader-sim: note: {}: {container} after unit {bundle_index}: {}",
                args.file.display(),
                skipped.message
            ));
        }
        if let Line::Damaged(d) = line {
            d.warn(&args.file);
        }
    }
}

/// The table rows of the images.
fn rows(records: &[Line]) -> Vec<Vec<String>> {
    records
        .iter()
        .filter_map(|line| match line {
            Line::Image(r) => Some(r),
            Line::Skipped { .. } | Line::Damaged(_) => None,
        })
        .map(|r| {
            vec![
                r.container.clone(),
                r.bundle_index.to_string(),
                match r.compression {
                    Some(c) => format!("{}+{c}", r.format),
                    None => r.format.to_string(),
                },
                match (&r.entry_id, &r.target_id) {
                    // A subarch triple names the processor in its own spelling
                    // (`amdgpu9.42`): the stored ID, then the processor.
                    (Some(id), Some(t))
                        if r.triple.as_deref().is_some_and(|t| t.starts_with("amdgpu")) =>
                    {
                        format!("{id} ({t})")
                    }
                    (Some(id), _) => id.clone(),
                    (None, _) => format!(
                        "{}--{}",
                        r.triple.as_deref().unwrap_or("?"),
                        r.target_id.as_deref().unwrap_or("?")
                    ),
                },
                r.image_kind.to_string(),
                r.offset.map_or_else(|| "-".to_string(), |o| o.to_string()),
                r.size.to_string(),
                r.sha256.clone().unwrap_or_else(|| "-".to_string()),
            ]
        })
        .collect()
}
