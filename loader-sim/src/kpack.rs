//! `select` on split host libraries (`KPACK.md`); what rocm-kpack's loader finds on disk
//! is modelled in [`loader_sim_rt::kpack`], which the runtime shim shares.

use std::io::Write;
use std::path::Path;

use offload_image::{Device, ReadOptions};
use serde::Serialize;

pub use loader_sim_rt::kpack::*;

use crate::output::{json_line, sha256_hex, table};
use crate::{Failure, Outcome};

/// One `select` record of a split library (the fields of `select`, plus where the code
/// object came from).
#[derive(Serialize)]
struct Record {
    container: String,
    bundle_index: usize,
    target: String,
    selected: Option<String>,
    image_kind: Option<&'static str>,
    arch: Option<String>,
    offset: Option<u64>,
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
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

/// `select` on a split library: one record per `HIPK` wrapper and device, the code object
/// the loader takes from the archives on disk. `None` when `data` is not a split library.
pub fn select(
    file: &Path,
    data: &[u8],
    devices: &[(String, Device)],
    options: &ReadOptions,
    args: &crate::cmd::select::Args,
    out: &mut dyn Write,
) -> Option<Result<Outcome, Failure>> {
    let (json, explain, output) = (args.json, args.explain, args.output.as_deref());
    let library = Library::open(file, data)?;
    let env = Env::from_process();
    let mut archives = Archives::default();
    let mut records = Vec::new();
    let mut chosen: Vec<Vec<u8>> = Vec::new();
    for (name, device) in devices {
        let isa = isa_name(device);
        let arches: Vec<&str> = isa.as_deref().into_iter().collect();
        for r in library.resolve(&arches, &env, &mut archives, options) {
            let mut rec = Record {
                container: format!("wrapper {}", r.wrapper),
                bundle_index: r.wrapper,
                target: name.clone(),
                selected: None,
                image_kind: None,
                arch: None,
                offset: None,
                size: None,
                sha256: None,
                archive: None,
                toc_key: r.key.clone(),
                kpack_error: None,
                reason: None,
                tried: explain.then(|| r.tried.clone()),
            };
            match &r.outcome {
                Ok(p) => {
                    rec.selected = Some(format!("amdgcn-amd-amdhsa--{}", p.target));
                    rec.image_kind = Some("elf");
                    rec.arch = Some(p.target.clone());
                    rec.size = Some(p.code.len() as u64);
                    rec.sha256 = Some(sha256_hex(&p.code));
                    rec.archive = Some(p.archive.clone());
                    chosen.push(p.code.clone());
                }
                Err(e) => {
                    rec.kpack_error = Some(e.error.code());
                    let mut reason = sentence(e);
                    if let Some(p) = &e.package {
                        reason.push_str(&format!("; install {p}"));
                    }
                    rec.reason = Some(reason);
                }
            }
            records.push(rec);
        }
    }
    Some(write(file, &records, &chosen, json, output, out))
}

fn write(
    file: &Path,
    records: &[Record],
    chosen: &[Vec<u8>],
    json: bool,
    output: Option<&Path>,
    mut out: &mut dyn Write,
) -> Result<Outcome, Failure> {
    if let Some(path) = output {
        if records.len() != 1 || chosen.len() != 1 {
            return Err(Failure::msg(format!(
                "-o needs exactly one unit and one target with a code object, {} gives {} record(s)",
                file.display(),
                records.len()
            )));
        }
        crate::output::wrote(path);
        std::fs::write(path, &chosen[0])
            .map_err(|e| Failure::file(path, format!("cannot write: {e}")))?;
    }
    let written = if json {
        records.iter().try_for_each(|r| json_line(&mut out, r))
    } else {
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|r| {
                vec![
                    r.container.clone(),
                    r.target.clone(),
                    r.selected.clone().unwrap_or_else(|| "-".into()),
                    r.archive.clone().unwrap_or_else(|| "-".into()),
                    r.toc_key.clone().unwrap_or_else(|| "-".into()),
                    r.reason.clone().unwrap_or_default(),
                ]
            })
            .collect();
        table(
            &mut out,
            &[
                "CONTAINER",
                "TARGET",
                "SELECTED",
                "ARCHIVE",
                "TOC KEY",
                "REASON",
            ],
            &rows,
        )
    };
    written
        .and_then(|_| out.flush())
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
    Ok(
        if records.is_empty() || records.iter().any(|r| r.selected.is_none()) {
            Outcome::NoMatch
        } else {
            Outcome::Ok
        },
    )
}
