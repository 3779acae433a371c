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
//! it: `variants` → the one label → namespace → feature → values), and the properties its
//! `METADATA` names ([`metadata_declared`]: `Requires-Dist` markers testing `in
//! variant_properties`, PEP 825 "Environment markers"; `Variant-Property:` headers). With
//! `--check`, a
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
    /// Compare the properties the wheel declares (`*.dist-info/variant.json`, and the
    /// `variant_properties` markers and `Variant-Property` headers of its METADATA) with
    /// those its code backs: exit 1 when a declared one is not backed.
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

/// The properties a wheel's `METADATA` (core metadata, RFC 822 headers up to the first
/// blank line, folded lines joined) declares, as variantlib's model spells them
/// (`namespace :: feature :: value`, the spaces around `::` normalised):
/// * each `'<property>' in variant_properties` test in a `Requires-Dist` environment marker
///   (PEP 817 and PEP 825, "Environment markers": `variant_properties` is the set of the
///   installed variant's properties, variantlib's `get_variant_environment_dict`); a `not
///   in` test claims nothing;
/// * each `Variant-Property:` header (the distribution-metadata field of variantlib's
///   earlier metadata format, still the spelling its `VariantProperty.to_str` documents).
///
/// In first-seen order, without repeats. A string that is not three non-empty `::`-separated
/// parts is not a property and is skipped.
pub fn metadata_declared(text: &str) -> Vec<String> {
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, v)) = headers.last_mut() {
                v.push(' ');
                v.push_str(line.trim());
            }
            continue;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut add = |p: Option<String>| {
        if let Some(p) = p {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    };
    for (name, value) in &headers {
        match name.as_str() {
            "variant-property" => add(normalise(value)),
            "requires-dist" => {
                if let Some((_, marker)) = value.split_once(';') {
                    for p in marker_properties(marker) {
                        add(Some(p));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// `namespace :: feature :: value` with single spaces, or `None` when `s` is not three
/// non-empty parts.
fn normalise(s: &str) -> Option<String> {
    let parts: Vec<&str> = s.split("::").map(str::trim).collect();
    (parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && !p.contains(char::is_whitespace)))
    .then(|| parts.join(" :: "))
}

/// The properties a PEP 508 marker tests with `'<property>' in variant_properties`.
fn marker_properties(marker: &str) -> Vec<String> {
    // Tokens: quoted strings and bare words (parentheses and operators split words).
    enum Tok<'a> {
        Str(&'a str),
        Word(&'a str),
    }
    let mut toks = Vec::new();
    let b = marker.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\'' || c == b'"' {
            let Some(len) = marker[i + 1..].find(c as char) else {
                break;
            };
            toks.push(Tok::Str(&marker[i + 1..i + 1 + len]));
            i += len + 2;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            toks.push(Tok::Word(&marker[start..i]));
        } else {
            // Whitespace, parentheses, comparison operators: separators here.
            toks.push(Tok::Word(""));
            i += 1;
        }
    }
    let toks: Vec<Tok<'_>> = toks
        .into_iter()
        .filter(|t| !matches!(t, Tok::Word("")))
        .collect();
    let mut out = Vec::new();
    for (k, t) in toks.iter().enumerate() {
        let Tok::Str(s) = t else { continue };
        // `'p' in variant_properties`, not `'p' not in variant_properties`.
        if let (Some(Tok::Word("in")), Some(Tok::Word("variant_properties"))) =
            (toks.get(k + 1), toks.get(k + 2))
        {
            if let Some(p) = normalise(s) {
                out.push(p);
            }
        }
    }
    out
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
    /// With `--check`, the wheel's members that declare it (`variant.json`, `METADATA`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    declared_in: Vec<&'a str>,
}

/// The properties the wheel declares, each with the members declaring it: its
/// `variant.json`, then its `METADATA` ([`metadata_declared`]).
fn declarations(wheel: &std::path::Path) -> Result<Vec<(String, Vec<String>)>, Failure> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |p: String, member: &str| match out.iter_mut().find(|(q, _)| *q == p) {
        Some((_, from)) => from.push(member.to_string()),
        None => out.push((p, vec![member.to_string()])),
    };
    let json = crate::images::dist_info_file(wheel, "variant.json")?;
    if let Some((member, text)) = &json {
        let declared = declared(text)
            .map_err(|e| Failure::file(wheel, format!("{}: {e}", member.escape_debug())))?;
        for p in declared {
            add(p, member);
        }
    }
    let metadata = crate::images::dist_info_file(wheel, "METADATA")?;
    if let Some((member, text)) = &metadata {
        for p in metadata_declared(text) {
            add(p, member);
        }
    }
    if json.is_none() && out.is_empty() {
        return Err(Failure::file(
            wheel,
            "no .dist-info/variant.json and no variant property in METADATA: the wheel \
             declares no variant",
        ));
    }
    Ok(out)
}

/// Runs `variants`.
pub fn run(args: &Args, mut out: &mut dyn Write) -> Result<Outcome, Failure> {
    let computed = computed(&args.wheel)?;
    let declared = match args.check {
        true => declarations(&args.wheel)?,
        false => Vec::new(),
    };
    let mut records: Vec<Record<'_>> = Vec::new();
    if args.check {
        let backed: BTreeSet<&str> = computed.iter().map(|(p, _)| p.as_str()).collect();
        for (d, from) in &declared {
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
                declared_in: from.iter().map(String::as_str).collect(),
            });
        }
        for (p, l) in &computed {
            if !declared.iter().any(|(d, _)| d == p) {
                records.push(Record {
                    property: p,
                    status: "undeclared",
                    library: Some(l),
                    declared_in: Vec::new(),
                });
            }
        }
    } else {
        records.extend(computed.iter().map(|(p, l)| Record {
            property: p,
            status: "computed",
            library: Some(l),
            declared_in: Vec::new(),
        }));
    }
    let written = if args.json {
        records.iter().try_for_each(|r| json_line(&mut out, r))
    } else {
        text(&mut out, &records, args.check)
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

fn text(out: &mut dyn Write, records: &[Record<'_>], check: bool) -> std::io::Result<()> {
    if !check {
        for r in records {
            writeln!(out, "{}", r.property)?;
        }
        return Ok(());
    }
    for r in records {
        // Declared properties come from the wheel's files.
        let property = r.property.escape_debug().to_string();
        let library = r.library.map(|l| l.escape_debug().to_string());
        let source = r
            .declared_in
            .iter()
            .map(|m| m.escape_debug().to_string())
            .collect::<Vec<_>>()
            .join(" and ");
        match r.status {
            "backed" => writeln!(
                out,
                "ok: {} (declared in {source}; code in {})",
                property,
                library.as_deref().unwrap_or("?")
            )?,
            "unbacked" => writeln!(
                out,
                "error: {} is declared in {source} but no image in the wheel backs it",
                property
            )?,
            "undeclared" => writeln!(
                out,
                "warning: {} is not declared in the wheel's variant.json or METADATA but {} has \
                 code for it",
                property,
                library.as_deref().unwrap_or("?")
            )?,
            _ => writeln!(
                out,
                "note: {} (declared in {source}) is not judged (another feature)",
                property
            )?,
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

    #[test]
    fn metadata_markers() {
        let text = "Metadata-Version: 2.4\nName: pkg\nVariant-Property: amd::gfx_arch::gfx942\n\
            Requires-Dist: a; \"nvidia :: sm_arch :: 90_real\" in variant_properties\n\
            Requires-Dist: b; python_version >= '3.9' and\n  ('nvidia :: sm_arch :: 80_virtual' \
            in variant_properties)\n\
            Requires-Dist: c; 'nvidia :: sm_arch :: 75_real' not in variant_properties\n\
            Requires-Dist: d; 'nvidia' in variant_namespaces\n\
            Requires-Dist: e; 'not a property' in variant_properties\n\
            \nRequires-Dist: f; 'nvidia :: sm_arch :: 70_real' in variant_properties\n";
        assert_eq!(
            metadata_declared(text),
            [
                "amd :: gfx_arch :: gfx942",
                "nvidia :: sm_arch :: 90_real",
                "nvidia :: sm_arch :: 80_virtual"
            ]
        );
        assert!(metadata_declared("Requires-Dist: x; 'a :: b :: c' in").is_empty());
        assert!(metadata_declared("Requires-Dist: x; 'a :: b :: c").is_empty());
    }
}
