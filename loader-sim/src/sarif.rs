//! SARIF 2.1.0 logs (OASIS "Static Analysis Results Interchange Format") of `validate` and
//! `doctor` (`--format sarif`), for code-scanning services and CI annotations.
//!
//! One run, tool `loader-sim`; one rule per code (`validate`'s codes, `docs/VALIDATE.md`;
//! doctor's `doctor/<status>` and `doctor/cuda-runtime-driver`); one result per finding
//! with its level (`error`, `warning`, `note`), its message, and its location: the file as
//! a relative URI reference (percent-encoded), the byte offset as `region.byteOffset`
//! where known, and the container (or the zip member and the device) as a logical
//! location.

use std::io::Write;

use serde_json::{json, Value};

/// `--format` of `validate` and `doctor`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Text (the default).
    Text,
    /// JSON Lines (as `--json`).
    Json,
    /// A SARIF 2.1.0 log.
    Sarif,
}

/// One result.
pub struct Finding {
    /// The rule (`truncated`, `doctor/none`).
    pub rule: String,
    /// `error`, `warning` or `note`.
    pub level: &'static str,
    /// One sentence.
    pub message: String,
    /// The file.
    pub file: String,
    /// The byte offset in the file, where known.
    pub offset: Option<u64>,
    /// Where inside the file (`section .hip_fatbin`, a zip member), where known.
    pub inside: Option<String>,
}

/// A SARIF level of a severity name (`error`, `warning`; anything else is a `note`).
pub fn level(severity: &str) -> &'static str {
    match severity {
        "error" => "error",
        "warning" => "warning",
        _ => "note",
    }
}

/// `path` as a URI reference: unreserved characters and `/` as they are, every other byte
/// percent-encoded (RFC 3986); a Windows `\` becomes `/`.
pub fn uri(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(char::from(b))
            }
            b'\\' => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The SARIF log of `findings`; `rules` gives each rule's one-line description.
pub fn log(findings: &[Finding], describe: &dyn Fn(&str) -> String) -> Value {
    let mut rules: Vec<&str> = Vec::new();
    for f in findings {
        if !rules.contains(&f.rule.as_str()) {
            rules.push(&f.rule);
        }
    }
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let mut physical = json!({"artifactLocation": {"uri": uri(&f.file)}});
            if let Some(o) = f.offset {
                physical["region"] = json!({"byteOffset": o});
            }
            let mut location = json!({"physicalLocation": physical});
            if let Some(inside) = &f.inside {
                location["logicalLocations"] = json!([{"name": inside}]);
            }
            json!({
                "ruleId": f.rule,
                "ruleIndex": rules.iter().position(|r| *r == f.rule).unwrap_or(0),
                "level": f.level,
                "message": {"text": f.message},
                "locations": [location],
            })
        })
        .collect();
    json!({
        "$schema": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "loader-sim",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules.iter().map(|r| json!({
                    "id": r,
                    "shortDescription": {"text": describe(r)},
                })).collect::<Vec<_>>(),
            }},
            "results": results,
        }],
    })
}

/// Writes the log of `findings` to `out`.
pub fn write(
    out: &mut dyn Write,
    findings: &[Finding],
    describe: &dyn Fn(&str) -> String,
) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(&log(findings, describe))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    writeln!(out, "{text}")
}

/// doctor's findings: a result per (library, device) record that does not load (`none`,
/// `partial`, `damaged`; `outside` as a note) and one per CUDA runtime finding, from their
/// JSON records (the fields of `doctor --json`).
pub fn doctor_findings(records: &[Value]) -> Vec<Finding> {
    let mut out = Vec::new();
    for r in records {
        if r["finding"] == "cuda-runtime-driver" {
            out.push(Finding {
                rule: "doctor/cuda-runtime-driver".into(),
                level: "error",
                message: format!(
                    "{}; hint: NVIDIA driver {} or later",
                    r["reason"].as_str().unwrap_or(""),
                    r["needs_driver"].as_str().unwrap_or("?")
                ),
                file: r["seen"][0]
                    .as_str()
                    .unwrap_or("")
                    .rsplit_once(" (")
                    .map_or_else(
                        || r["seen"][0].as_str().unwrap_or("").to_string(),
                        |(_, f)| f.trim_end_matches(')').to_string(),
                    ),
                offset: None,
                inside: None,
            });
            continue;
        }
        let status = r["status"].as_str().unwrap_or("");
        let level = match status {
            "none" | "damaged" => "error",
            "partial" => "warning",
            "outside" => "note",
            _ => continue,
        };
        let device = r["device"].as_str().unwrap_or("?");
        let mut message = format!(
            "{device}: {} of {} units load: {}",
            r["units_covered"],
            r["units"],
            r["reason"].as_str().unwrap_or(status)
        );
        if let Some(h) = r["hints"].as_array().and_then(|h| h.first()) {
            let what = h["offload_arch"]
                .as_str()
                .map(|a| format!("rebuild with --offload-arch={a}"))
                .or_else(|| {
                    let v = h["value"].as_str()?;
                    Some(match h["env"].as_str() {
                        Some(env) => format!("{env}={v}"),
                        None => format!("{} {v}", h["kind"].as_str().unwrap_or("")),
                    })
                })
                .unwrap_or_default();
            message.push_str(&format!("; hint: {what}"));
        }
        let member = r["member"].as_str().map(str::to_string);
        out.push(Finding {
            rule: format!("doctor/{status}"),
            level,
            message,
            file: r["file"].as_str().unwrap_or("").to_string(),
            offset: None,
            inside: Some(match member {
                Some(m) => format!("{m} ({device})"),
                None => device.to_string(),
            }),
        });
    }
    out
}

/// doctor's rules, described.
pub fn doctor_rule(rule: &str) -> String {
    match rule {
        "doctor/none" => "No unit of the library loads on the device".into(),
        "doctor/partial" => "Some units of the library do not load on the device".into(),
        "doctor/damaged" => "The library cannot be read".into(),
        "doctor/outside" => {
            "Code objects outside any offload container: the program loads them itself".into()
        }
        "doctor/cuda-runtime-driver" => {
            "The NVIDIA driver is older than the CUDA runtime's floor".into()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_encoded() {
        assert_eq!(uri("a b/c%d.so"), "a%20b/c%25d.so");
        assert_eq!(uri("lib/x.so"), "lib/x.so");
        assert_eq!(uri("é"), "%C3%A9");
    }
}
