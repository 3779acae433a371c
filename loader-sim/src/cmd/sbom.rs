//! `loader-sim sbom PATH... [-o FILE] [--into-wheel OUT.whl]`: a CycloneDX 1.6 JSON SBOM of
//! the device code under PATH (files, directory trees, wheels).
//!
//! Each library with device code is a component (`type` `library`, its SHA-256, its path
//! and, for a wheel member, the wheel); each device image `list` prints is a component
//! under it (`type` `file`, named by its triple and target, its SHA-256), with properties
//! (`offload-image:*`): the architecture, the kind (`cubin`, `PTX`, `code object`,
//! `SPIR-V`, `LTO IR`, ...), the container, the unit, the offset, the size and the
//! compression. The document is reproducible: no timestamp; its serial number is derived
//! from the libraries' hashes.
//!
//! `--into-wheel OUT.whl` (one wheel as PATH): a copy of the wheel with the SBOM added as a
//! PEP 770 SBOM, `<name>.dist-info/sboms/loader-sim.cdx.json`, and its line added to
//! `RECORD`; the original is not touched.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::images::Library;
use crate::listing::Line;
use crate::scan::collect_files;
use crate::{Failure, Outcome};

/// Arguments of `sbom`.
#[derive(clap::Args)]
pub struct Args {
    /// Files, directories (walked recursively) and wheels.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Write the SBOM to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write a copy of the wheel (the one PATH) with the SBOM in its `.dist-info/sboms/`
    /// (PEP 770) and RECORD updated.
    #[arg(long, value_name = "OUT.whl")]
    into_wheel: Option<PathBuf>,
}

/// The name of an image kind as a person says it.
fn kind_name(kind: &str) -> &str {
    match kind {
        "cubin" => "cubin",
        "ptx" => "PTX",
        "elf" => "code object",
        "spirv" => "SPIR-V",
        "bitcode" => "LTO IR",
        other => other,
    }
}

/// One property.
fn property(name: &str, value: impl ToString) -> Value {
    json!({"name": format!("offload-image:{name}"), "value": value.to_string()})
}

/// The component of one library (`file`, and `member` inside it), its images under it.
fn library_component(index: usize, file: &Path, lib: &Library) -> Value {
    let name = match &lib.member {
        Some(m) => m.clone(),
        None => file.display().to_string(),
    };
    let mut properties = vec![property("file", file.display())];
    if let Some(m) = &lib.member {
        properties.push(property("member", m));
    }
    properties.push(property("size", lib.size));
    let images: Vec<Value> = lib
        .lines
        .iter()
        .filter_map(|l| match l {
            Line::Image(r) => Some(r),
            _ => None,
        })
        .enumerate()
        .filter_map(|(k, r)| {
            let sha = r.sha256.as_ref()?;
            let target = r.target_id.as_deref().unwrap_or("-");
            let triple = r.triple.as_deref().unwrap_or("-");
            let mut p = vec![
                property("arch", target),
                property("triple", triple),
                property("kind", kind_name(r.image_kind)),
                property("format", r.format),
                property("container", &r.container),
                property("unit", r.bundle_index),
                property("size", r.size),
                property("compression", r.compression.unwrap_or("none")),
            ];
            if let Some(o) = r.offset {
                p.push(property("offset", o));
            }
            if let Some(id) = &r.entry_id {
                p.push(property("entry-id", id));
            }
            if let Some(s) = &r.source {
                p.push(property("source", s));
            }
            // A host entry (no code) is no device image.
            (r.image_kind != "none").then(|| {
                json!({
                    "type": "file",
                    "bom-ref": format!("library-{index}/image-{k}"),
                    "name": format!("{triple}--{target}"),
                    "hashes": [{"alg": "SHA-256", "content": sha}],
                    "properties": p,
                })
            })
        })
        .collect();
    json!({
        "type": "library",
        "bom-ref": format!("library-{index}"),
        "name": name,
        "hashes": [{"alg": "SHA-256", "content": lib.sha256.as_deref().unwrap_or_default()}],
        "properties": properties,
        "components": images,
    })
}

/// A `urn:uuid:` from the first 16 bytes of the SHA-256 of `seed` (version 8, RFC 9562's
/// custom layout, variant bits set).
fn serial(seed: &str) -> String {
    let h = crate::output::sha256_hex(seed.as_bytes());
    let mut b: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(h.get(2 * i..2 * i + 2).unwrap_or("00"), 16).unwrap_or(0))
        .collect();
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "urn:uuid:{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The SBOM of the libraries under `paths`.
pub fn bom(paths: &[PathBuf]) -> Result<Value, Failure> {
    let files = collect_files(paths)?;
    let mut components = Vec::new();
    let mut seed = String::new();
    for file in &files {
        for lib in crate::images::libraries(file, true)? {
            // A damaged container: its images are not in the SBOM, and that is said.
            for line in &lib.lines {
                if let Line::Damaged(d) = line {
                    d.warn(file);
                }
            }
            seed.push_str(lib.sha256.as_deref().unwrap_or_default());
            components.push(library_component(components.len(), file, &lib));
        }
    }
    Ok(json!({
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": serial(&seed),
        "version": 1,
        "metadata": {
            "tools": {"components": [{
                "type": "application",
                "name": "loader-sim",
                "version": env!("CARGO_PKG_VERSION"),
            }]},
            "properties": [property("scope", "device code: one component per library, one per device image under it")],
        },
        "components": components,
    }))
}

/// Runs `sbom`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<Outcome, Failure> {
    if args.into_wheel.is_some() && args.paths.len() != 1 {
        return Err(Failure::msg(
            "--into-wheel takes exactly one PATH, a wheel".into(),
        ));
    }
    let bom = bom(&args.paths)?;
    let mut text = serde_json::to_string_pretty(&bom)
        .map_err(|e| Failure::msg(format!("cannot write the SBOM: {e}")))?;
    text.push('\n');
    if let Some(whl) = &args.into_wheel {
        into_wheel(&args.paths[0], whl, text.as_bytes())?;
    }
    match &args.output {
        Some(path) => {
            crate::output::wrote(path);
            std::fs::write(path, &text)
                .map_err(|e| Failure::file(path, format!("cannot write: {e}")))?
        }
        None if args.into_wheel.is_none() => out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?,
        None => {}
    }
    Ok(Outcome::Ok)
}

/// The RECORD hash of `bytes`: `sha256=` and the URL-safe base64 of the digest, unpadded
/// (the wheel spec, PEP 376/427).
fn record_hash(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let hex = crate::output::sha256_hex(bytes);
    let digest: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2).unwrap_or("00"), 16).unwrap_or(0))
        .collect();
    let mut out = String::from("sha256=");
    for chunk in digest.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// Writes `out`: the members of wheel `wheel` (copied as stored), the SBOM `sbom` as
/// `<dist-info>/sboms/loader-sim.cdx.json`, and RECORD with its line added.
fn into_wheel(wheel: &Path, out: &Path, sbom: &[u8]) -> Result<(), Failure> {
    let fail = |e: &dyn std::fmt::Display| Failure::file(wheel, format!("{e}"));
    if std::fs::canonicalize(wheel).ok() == std::fs::canonicalize(out).ok() {
        return Err(Failure::file(
            out,
            "--into-wheel must name a new file, not the wheel read",
        ));
    }
    let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel).map_err(|e| fail(&e))?)
        .map_err(|e| fail(&e))?;
    let record = (0..zip.len())
        .filter_map(|i| {
            zip.name_for_index(i)
                .and_then(|n| n.ok())
                .map(|n| n.to_string())
        })
        .find(|n| {
            let parts: Vec<&str> = n.split('/').collect();
            parts.len() == 2 && parts[0].ends_with(".dist-info") && parts[1] == "RECORD"
        })
        .ok_or_else(|| Failure::file(wheel, "no .dist-info/RECORD: not a wheel"))?;
    let dist_info = record.trim_end_matches("/RECORD").to_string();
    let sbom_name = format!("{dist_info}/sboms/loader-sim.cdx.json");
    let mut record_text = String::new();
    zip.by_name(&record)
        .map_err(|e| fail(&e))?
        .take(64 << 20)
        .read_to_string(&mut record_text)
        .map_err(|e| fail(&e))?;
    if record_text
        .lines()
        .any(|l| l.starts_with(&format!("{sbom_name},")))
    {
        return Err(Failure::file(
            wheel,
            format!("{sbom_name} is already in RECORD"),
        ));
    }
    let mut lines: Vec<String> = record_text.lines().map(str::to_string).collect();
    // RECORD's own line stays last, as wheel tools write it.
    let own = lines
        .iter()
        .position(|l| l.starts_with(&format!("{record},")));
    let new_line = format!("{sbom_name},{},{}", record_hash(sbom), sbom.len());
    match own {
        Some(i) => lines.insert(i, new_line),
        None => lines.push(new_line),
    }
    let mut new_record = lines.join("\n");
    new_record.push('\n');
    crate::output::wrote(out);
    let file =
        std::fs::File::create(out).map_err(|e| Failure::file(out, format!("cannot write: {e}")))?;
    let mut w = zip::ZipWriter::new(file);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let fail_out = |e: &dyn std::fmt::Display| Failure::file(out, format!("cannot write: {e}"));
    for i in 0..zip.len() {
        let m = zip.by_index_raw(i).map_err(|e| fail(&e))?;
        if m.name().ok().as_deref() == Some(record.as_str()) {
            continue;
        }
        w.raw_copy_file(m).map_err(|e| fail_out(&e))?;
    }
    w.start_file(sbom_name.as_str(), opts)
        .map_err(|e| fail_out(&e))?;
    w.write_all(sbom).map_err(|e| fail_out(&e))?;
    w.start_file(record.as_str(), opts)
        .map_err(|e| fail_out(&e))?;
    w.write_all(new_record.as_bytes())
        .map_err(|e| fail_out(&e))?;
    w.finish().map_err(|e| fail_out(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wheel spec's RECORD hash: urlsafe base64 of the SHA-256, no padding.
    #[test]
    fn record_hashes() {
        // sha256("") = e3b0c442...; base64url: 47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU
        assert_eq!(
            record_hash(b""),
            "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
        );
        assert!(serial("x").starts_with("urn:uuid:"));
        assert_eq!(serial("x").len(), 45);
    }
}
