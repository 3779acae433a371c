//! The published JSON Schemas of the `--json` records (docs/schemas/, docs/CLI.md): every
//! record each command prints on the corpus validates against its command's schema
//! (jsonschema, draft 2020-12), and a record with a field missing or mistyped does not.

use std::process::Command;

use crate::common::{self, corpus, loader_sim, TempDir};

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs jsonschema (scripts/fetch-publish-oracles.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn json_records_validate_against_the_published_schemas() {
    if !common::external("jsonschema") {
        return;
    }
    let python = crate::variants::oracle_python();
    let dir = TempDir::new("schemas");
    let c = |p: &str| corpus(p).display().to_string();
    let small = dir.path("small.exe").display().to_string();
    let malformed: Vec<String> = std::fs::read_dir(corpus("malformed"))
        .unwrap()
        .flatten()
        .map(|e| e.path().display().to_string())
        .collect();
    let mut runs: Vec<(&str, Vec<String>)> = vec![
        (
            "list",
            vec!["list".into(), c("driver/hip_nonrdc.exe"), "--json".into()],
        ),
        (
            "list",
            vec![
                "list".into(),
                c("compressed/hip_6arch.zstd.ccob"),
                "--json".into(),
            ],
        ),
        (
            "select",
            vec![
                "select".into(),
                c("bundles/hip_6arch.bundle"),
                "--target".into(),
                "gfx90a:xnack+".into(),
                "--target".into(),
                "sm_80".into(),
                "--json".into(),
                "--explain".into(),
            ],
        ),
        (
            "register",
            vec![
                "register".into(),
                c("driver/hip_nonrdc.exe"),
                "--device".into(),
                "gfx90a:xnack+".into(),
                "--json".into(),
            ],
        ),
        (
            "prune",
            vec![
                "prune".into(),
                c("driver/hip_nonrdc.exe"),
                "--keep".into(),
                "gfx90a:xnack+".into(),
                "-o".into(),
                small,
                "--dry-run".into(),
                "--json".into(),
            ],
        ),
        (
            "doctor",
            vec![
                "doctor".into(),
                c(""),
                "--target".into(),
                "gfx1031".into(),
                "--target".into(),
                "sm_89".into(),
                "--json".into(),
            ],
        ),
        (
            "coverage",
            vec![
                "coverage".into(),
                c("bundles"),
                "--format".into(),
                "json".into(),
            ],
        ),
    ];
    // A wheel for variants: a corpus bundle and a variant.json with one true claim, one
    // false one.
    let whl = dir.path("pkg-1.0-py3-none-any-lbl.whl");
    {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        w.start_file("pkg/k.bundle", opts).unwrap();
        w.write_all(&std::fs::read(corpus("bundles/hip_6arch.bundle")).unwrap())
            .unwrap();
        w.start_file("pkg-1.0.dist-info/variant.json", opts)
            .unwrap();
        w.write_all(br#"{"variants": {"lbl": {"amd": {"gfx_arch": ["gfx90a", "gfx1201"]}}}}"#)
            .unwrap();
        w.finish().unwrap();
    }
    let whl = whl.display().to_string();
    runs.push((
        "variants",
        vec!["variants".into(), whl.clone(), "--json".into()],
    ));
    runs.push((
        "variants",
        vec!["variants".into(), whl, "--check".into(), "--json".into()],
    ));
    let mut validate = vec!["validate".to_string(), "--json".into()];
    validate.extend(malformed.iter().cloned());
    runs.push(("validate", validate));
    for m in &malformed {
        runs.push(("list", vec!["list".into(), m.clone(), "--json".into()]));
    }
    let mut pairs = Vec::new();
    for (i, (schema, args)) in runs.iter().enumerate() {
        let out = loader_sim(args);
        assert!(
            !out.stdout.is_empty() || schema == &"list",
            "{args:?}: {out:?}"
        );
        let file = dir.path(&format!("{i}.jsonl"));
        std::fs::write(&file, &out.stdout).unwrap();
        pairs.push(format!(
            "{}={}",
            common::repo()
                .join(format!("docs/schemas/{schema}.schema.json"))
                .display(),
            file.display()
        ));
    }
    let check = r#"
import json, sys, jsonschema
count = 0
for pair in sys.argv[1:]:
    schema_path, records = pair.split("=", 1)
    schema = json.load(open(schema_path))
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    for line in open(records):
        v.validate(json.loads(line))
        count += 1
# Not vacuous: a validate record without its file is refused.
schema = json.load(open(sys.argv[1].split("=")[0].replace("list.schema", "validate.schema")))
bad = {"container": "file", "offset": 0, "severity": "error", "code": "x", "message": "m"}
assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
print(count)
"#;
    let o = Command::new(&python)
        .arg("-c")
        .arg(check)
        .args(&pairs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::describe(&o));
    let count: usize = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert!(count > 100, "{count} records checked");
}
