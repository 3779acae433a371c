//! `loader-sim variants WHEEL [--check] [--json]`: the wheel-variant properties (PEP 817,
//! 825) a wheel's device code backs, and with `--check` its declared ones checked against
//! them.
//!
//! Computed from every image of every library in the wheel (as `list` reads them):
//! * an NVIDIA cubin for `sm_XY` (also `sm_XYa`, `sm_XYf`) gives `nvidia :: sm_arch ::
//!   XY_real`, a PTX for it `nvidia :: sm_arch :: XY_virtual`: the NVIDIA provider's
//!   feature and value spelling (wheelnext nvidia-variant-provider, `NvidiaVariantPlugin`:
//!   `sm_arch`, values `{major}{minor}_real|_virtual` for majors 5 to 12);
//! * an AMD code object for processor `gfxNNN` (any feature states) gives `amd :: gfx_arch
//!   :: gfxNNN`: the AMD provider's (wheelnext amd-variant-provider, `AMDVariantPlugin`:
//!   feature `gfx_arch`, values `gfx[0-9a-f]+`). Generic code objects (`gfx9-generic`) and
//!   LLVM IR name no processor and give none.
//!
//! Declared: the `variant.json` of the wheel's `.dist-info` (PEP 825; as variantlib reads
//! it: `variants` → the one label → namespace → feature → values). With `--check`, a
//! declared `nvidia :: sm_arch` or `amd :: gfx_arch` property no image backs is an error
//! (exit status 1); an architecture the code has but the wheel does not declare is a
//! warning. Properties of other features are not judged.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use crate::listing::Line;
use crate::output::json_line;
use crate::{Failure, Outcome};

/// Arguments of `variants`.
#[derive(clap::Args)]
pub struct Args {
    /// The wheel.
    wheel: PathBuf,
    /// Compare the properties the wheel declares (`*.dist-info/variant.json`) with those
    /// its code backs: exit 1 when a declared one is not backed.
    #[arg(long)]
    check: bool,
    /// Write JSON Lines instead of text.
    #[arg(long)]
    json: bool,
}

/// The features judged: (namespace, feature).
const JUDGED: [(&str, &str); 2] = [("nvidia", "sm_arch"), ("amd", "gfx_arch")];

/// The property an image backs, from its `list` record: triple, target ID and kind.
fn property_of(triple: &str, target: &str, kind: &str) -> Option<String> {
    if triple.starts_with("nvptx") {
        let digits = target
            .strip_prefix("sm_")
            .or_else(|| target.strip_prefix("compute_"))?
            .trim_end_matches(['a', 'f']);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let what = match kind {
            "cubin" => "real",
            "ptx" => "virtual",
            _ => return None,
        };
        return Some(format!("nvidia :: sm_arch :: {digits}_{what}"));
    }
    if triple.starts_with("amdgcn") || triple.starts_with("amdgpu") {
        let processor = target.split(':').next()?;
        let hex = processor.strip_prefix("gfx")?;
        let ok = !hex.is_empty()
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
        // A code object (ELF), not LLVM IR or SPIR-V.
        return (ok && kind == "elf").then(|| format!("amd :: gfx_arch :: {processor}"));
    }
    None
}

/// The properties a wheel's code backs, each with the first library that backs it.
pub fn computed(wheel: &std::path::Path) -> Result<Vec<(String, String)>, Failure> {
    let mut out: Vec<(String, String)> = Vec::new();
    for lib in crate::images::libraries(wheel, false)? {
        for line in &lib.lines {
            let Line::Image(r) = line else { continue };
            let (Some(triple), Some(target)) = (&r.triple, &r.target_id) else {
                continue;
            };
            if let Some(p) = property_of(triple, target, r.image_kind) {
                if !out.iter().any(|(q, _)| *q == p) {
                    out.push((p, lib.member.clone().unwrap_or_default()));
                }
            }
        }
    }
    out.sort_by_key(|a| order(&a.0));
    Ok(out)
}

/// Sort key: namespace, then kind (`real` before `virtual`), then the number.
fn order(p: &str) -> (String, String, u32, String) {
    let parts: Vec<&str> = p.split(" :: ").collect();
    let value = parts.get(2).copied().unwrap_or("");
    let (num, kind) = value.split_once('_').unwrap_or((value, ""));
    let n = num
        .trim_start_matches("gfx")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(0);
    (
        parts.first().copied().unwrap_or("").to_string(),
        kind.to_string(),
        n,
        value.to_string(),
    )
}

/// The properties `variant.json` declares (`namespace :: feature :: value`), or why it
/// cannot be read.
pub fn declared(text: &str) -> Result<Vec<String>, String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let variants = json
        .get("variants")
        .and_then(|v| v.as_object())
        .ok_or("no \"variants\" object")?;
    if variants.len() != 1 {
        return Err(format!(
            "\"variants\" has {} labels, a wheel's variant.json has exactly one",
            variants.len()
        ));
    }
    let mut out = Vec::new();
    for namespaces in variants.values() {
        let namespaces = namespaces.as_object().ok_or("a label is not an object")?;
        for (ns, features) in namespaces {
            let features = features.as_object().ok_or("a namespace is not an object")?;
            for (feature, values) in features {
                let values = values
                    .as_array()
                    .ok_or("a feature's values are not a list")?;
                for v in values {
                    let v = v.as_str().ok_or("a value is not a string")?;
                    out.push(format!("{ns} :: {feature} :: {v}"));
                }
            }
        }
    }
    Ok(out)
}

/// Whether property `p` is of a judged feature.
fn judged(p: &str) -> bool {
    JUDGED
        .iter()
        .any(|(ns, f)| p.starts_with(&format!("{ns} :: {f} :: ")))
}

/// One JSON record.
#[derive(Serialize)]
struct Record<'a> {
    property: &'a str,
    /// `computed` (without --check), `backed` (declared and backed), `unbacked` (declared,
    /// no code: an error), `undeclared` (code the wheel does not declare: a warning),
    /// `not-judged` (a declared property of another feature).
    status: &'static str,
    /// The first library whose code backs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    library: Option<&'a str>,
}

/// Runs `variants`.
pub fn run(args: &Args, mut out: &mut dyn Write) -> Result<Outcome, Failure> {
    let computed = computed(&args.wheel)?;
    let (declared, source) = match args.check {
        true => {
            let (member, text) = crate::images::dist_info_file(&args.wheel, "variant.json")?
                .ok_or_else(|| {
                    Failure::file(
                        &args.wheel,
                        "no .dist-info/variant.json: the wheel declares no variant",
                    )
                })?;
            let declared = declared(&text).map_err(|e| {
                Failure::file(&args.wheel, format!("{}: {e}", member.escape_debug()))
            })?;
            (declared, Some(member))
        }
        false => (Vec::new(), None),
    };
    let mut records: Vec<Record<'_>> = Vec::new();
    if args.check {
        let backed: BTreeSet<&str> = computed.iter().map(|(p, _)| p.as_str()).collect();
        for d in &declared {
            let status = if !judged(d) {
                "not-judged"
            } else if backed.contains(d.as_str()) {
                "backed"
            } else {
                "unbacked"
            };
            let library = computed
                .iter()
                .find(|(p, _)| p == d)
                .map(|(_, l)| l.as_str());
            records.push(Record {
                property: d,
                status,
                library,
            });
        }
        for (p, l) in &computed {
            if !declared.contains(p) {
                records.push(Record {
                    property: p,
                    status: "undeclared",
                    library: Some(l),
                });
            }
        }
    } else {
        records.extend(computed.iter().map(|(p, l)| Record {
            property: p,
            status: "computed",
            library: Some(l),
        }));
    }
    let written = if args.json {
        records.iter().try_for_each(|r| json_line(&mut out, r))
    } else {
        text(&mut out, &records, source.as_deref())
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
    if records.iter().any(|r| r.status == "unbacked") {
        Ok(Outcome::NoMatch)
    } else {
        Ok(Outcome::Ok)
    }
}

fn text(out: &mut dyn Write, records: &[Record<'_>], source: Option<&str>) -> std::io::Result<()> {
    let Some(source) = source else {
        for r in records {
            writeln!(out, "{}", r.property)?;
        }
        return Ok(());
    };
    let source = source.escape_debug();
    for r in records {
        let library = r.library.map(|l| l.escape_debug().to_string());
        match r.status {
            "backed" => writeln!(
                out,
                "ok: {} (declared in {source}; code in {})",
                r.property,
                library.as_deref().unwrap_or("?")
            )?,
            "unbacked" => writeln!(
                out,
                "error: {} is declared in {source} but no image in the wheel backs it",
                r.property
            )?,
            "undeclared" => writeln!(
                out,
                "warning: {} is not declared in {source} but {} has code for it",
                r.property,
                library.as_deref().unwrap_or("?")
            )?,
            _ => writeln!(out, "note: {} is not judged (another feature)", r.property)?,
        }
    }
    let errors = records.iter().filter(|r| r.status == "unbacked").count();
    let warnings = records.iter().filter(|r| r.status == "undeclared").count();
    writeln!(out, "{errors} error(s), {warnings} warning(s)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_of_images() {
        let p = |t, a, k| property_of(t, a, k);
        assert_eq!(
            p("nvptx64-nvidia-cuda", "sm_90a", "cubin").as_deref(),
            Some("nvidia :: sm_arch :: 90_real")
        );
        assert_eq!(
            p("nvptx64-nvidia-cuda", "sm_120", "ptx").as_deref(),
            Some("nvidia :: sm_arch :: 120_virtual")
        );
        assert_eq!(
            p("amdgcn-amd-amdhsa", "gfx90a:xnack-", "elf").as_deref(),
            Some("amd :: gfx_arch :: gfx90a")
        );
        assert_eq!(p("amdgcn-amd-amdhsa", "gfx9-generic", "elf"), None);
        assert_eq!(p("amdgcn-amd-amdhsa", "gfx906", "bitcode"), None);
        assert_eq!(p("x86_64-unknown-linux-gnu", "", "none"), None);
    }

    #[test]
    fn variant_json() {
        let text = r#"{"variants": {"lbl": {"nvidia": {"sm_arch": ["80_real", "90_virtual"]}}}}"#;
        assert_eq!(
            declared(text).unwrap(),
            [
                "nvidia :: sm_arch :: 80_real",
                "nvidia :: sm_arch :: 90_virtual"
            ]
        );
        assert!(declared(r#"{"variants": {}}"#).is_err());
        assert!(declared("[").is_err());
    }
}
