//! `loader-sim list FILE [--json]`: every image, in discovery order.

use std::path::PathBuf;

use offload_image::container::UnitContent;
use offload_image::{identify, units, Image, Unit};
use serde::Serialize;

use crate::input::Input;
use crate::output::{compression_name, json_line, sha256_hex, table, Damaged, Skipped};
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
}

/// A line of `list` output: an image, or a note.
#[derive(Serialize)]
#[serde(untagged)]
enum Line {
    Image(Record),
    Skipped {
        container: String,
        bundle_index: usize,
        #[serde(flatten)]
        skipped: Skipped,
    },
    Damaged(Damaged),
}

/// One `list` record (field names are part of the CLI contract).
#[derive(Serialize)]
pub struct Record {
    container: String,
    bundle_index: usize,
    format: &'static str,
    compression: Option<&'static str>,
    ccob_version: Option<u16>,
    entry_id: Option<String>,
    offload_kind: Option<&'static str>,
    triple: Option<String>,
    target_id: Option<String>,
    image_kind: &'static str,
    /// The entry ID / arch and the ELF header name different targets (omitted otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    disagreement: Option<String>,
    offset: Option<u64>,
    size: u64,
    sha256: Option<String>,
    /// For a split library: the archive the code object is in (`offset` is in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    /// For a split library: the TOC key of the wrapper's code object.
    #[serde(skip_serializing_if = "Option::is_none")]
    toc_key: Option<String>,
}

/// Where an image was found, as `CLI.md` spells it.
pub fn container_of(unit: &Unit<'_>, image: &Image<'_>) -> String {
    let base = unit.location.to_string();
    match (&unit.content, image.entry_id) {
        (UnitContent::ObjectBundle(_), Some(id)) => {
            let section = format!("section __CLANG_OFFLOAD_BUNDLE__{id}");
            if unit.location.path().is_empty() {
                section
            } else {
                format!("{base} / {section}")
            }
        }
        _ => base,
    }
}

/// The normalised triple and canonical target ID of an image (`offload_image::identify`):
/// the container's target in canonical form, or for a bare ELF (or an entry that names no
/// target) the one its ELF header gives. Invalid targets are printed as stored.
pub fn identity(image: &Image<'_>) -> (Option<String>, Option<String>) {
    let id = identify(image);
    let triple = id
        .triple
        .map(|t| t.to_string())
        .or_else(|| image.triple.map(str::to_string));
    let target = id.named_target().map(|t| t.to_string());
    (triple, target)
}

/// Runs `list`.
pub fn run(args: &Args, mut out: &mut dyn std::io::Write) -> Result<Outcome, Failure> {
    let input = Input::open(&args.file)?;
    let options = offload_image::ReadOptions {
        strict: args.strict,
        ..crate::decode::read_options(crate::decode::ZstdDecoder::DEFAULT, !args.no_verify_hash)
    };
    let mut records = Vec::new();
    if let Some(library) = crate::kpack::Library::open(&args.file, input.bytes()) {
        split_lines(args, &library, &options, &mut records)?;
    }
    for unit in units(input.bytes(), &options) {
        // A damaged container costs its unit only: report it and go on.
        match unit {
            Ok(unit) => unit_lines(args, &input, &unit, &options, &mut records),
            Err(e) => records.push(Line::Damaged(Damaged::outside(&e))),
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

/// The lines of a split library: what its installed archives hold for its wrappers.
fn split_lines(
    args: &Args,
    library: &crate::kpack::Library<'_>,
    options: &offload_image::ReadOptions,
    records: &mut Vec<Line>,
) -> Result<(), Failure> {
    let env = crate::kpack::Env::from_process();
    for l in library.listing(&env, options) {
        let code = l
            .code
            .map_err(|e| Failure::file(std::path::Path::new(&l.archive), e))?;
        records.push(Line::Image(Record {
            container: format!("wrapper {}", l.wrapper),
            bundle_index: l.wrapper,
            format: offload_image::Format::Kpack.name(),
            compression: l.zstd.then_some("zstd"),
            ccob_version: None,
            entry_id: None,
            offload_kind: Some("hip"),
            triple: Some("amdgcn-amd-amdhsa".into()),
            target_id: Some(l.arch),
            image_kind: offload_image::ImageKind::sniff(&code).name(),
            disagreement: None,
            offset: l.offset,
            size: code.len() as u64,
            sha256: (!args.no_sha256).then(|| sha256_hex(&code)),
            source: Some(l.archive),
            toc_key: Some(l.key),
        }));
    }
    Ok(())
}

/// The lines of one unit: its images, or why it does not read, and the bytes skipped after
/// it.
fn unit_lines(
    args: &Args,
    input: &Input,
    unit: &Unit<'_>,
    options: &offload_image::ReadOptions,
    records: &mut Vec<Line>,
) {
    if let Some(d) = unit.damage() {
        records.push(Line::Damaged(Damaged::unit(unit, &d.error)));
        return;
    }
    // Without hashes, compressed entries are not decoded: what their headers say.
    let listed = crate::decode::for_each_image_with(unit, options, !args.no_sha256, |image| {
        // Hashing reads the whole image: read ahead, and drop its pages afterwards so
        // that listing a 1.3 GB library does not keep it all mapped.
        let sha256 = (!args.no_sha256).then(|| {
            input.will_read(image.bytes);
            let sha256 = sha256_hex(image.bytes);
            input.release(image.bytes);
            sha256
        });
        records.push(Line::Image(image_record(unit, image, sha256)));
    });
    if let Err(e) = listed {
        records.push(Line::Damaged(Damaged::unit(unit, &e)));
    }
    if let UnitContent::NvFatbin(f) = &unit.content {
        // Decoding read the compressed entries: drop their pages too.
        input.release(f.bytes());
    }
    if let Some(r) = unit.skipped.clone() {
        records.push(Line::Skipped {
            container: unit.location.to_string(),
            bundle_index: unit.index,
            skipped: Skipped::new(r),
        });
    }
}

/// The record of `image` of `unit`.
fn image_record(unit: &Unit<'_>, image: &Image<'_>, sha256: Option<String>) -> Record {
    let stored = image.encoded.is_some();
    let (triple, target_id) = identity(image);
    let fatbin = matches!(unit.content, UnitContent::NvFatbin(_));
    Record {
        container: container_of(unit, image),
        bundle_index: unit.index,
        format: image.format.name(),
        compression: compression_name(unit, image),
        ccob_version: unit.compressed().map(|c| c.version()),
        entry_id: image.entry_id.map(str::to_string),
        offload_kind: match image.format {
            offload_image::Format::Elf if !fatbin => None,
            _ => Some(image.offload_kind.name()),
        },
        triple,
        target_id,
        image_kind: image.image_kind.name(),
        disagreement: (!stored)
            .then(|| identify(image).disagreement().map(|d| d.to_string()))
            .flatten(),
        offset: image
            .offset
            .or_else(|| (!stored).then(|| unit.offset_of(image.bytes)).flatten()),
        size: image.size(),
        sha256,
        source: None,
        toc_key: None,
    }
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
