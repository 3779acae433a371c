//! `loader-sim sbom` (docs/CLI.md): a CycloneDX 1.6 SBOM of the device code, one component
//! per image `list` prints with its sha256; `--into-wheel` adds it to a copy of a wheel as
//! a PEP 770 SBOM with RECORD updated.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::{self, corpus, json_lines, loader_sim, loader_sim_ok, TempDir};

/// (name, sha256) of every device image `list --json` prints for `file` (host entries,
/// kind `none`, are no device code).
fn listed(file: &Path) -> Vec<(String, String)> {
    json_lines(&loader_sim_ok(&["list".as_ref(), file.as_os_str(), "--json".as_ref()]).stdout)
        .iter()
        .filter(|r| r["image_kind"] != "none")
        .map(|r| {
            (
                format!(
                    "{}--{}",
                    r["triple"].as_str().unwrap_or("-"),
                    r["target_id"].as_str().unwrap_or("-")
                ),
                r["sha256"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The (name, sha256) of the image components of each library component, by library name.
fn components(bom: &Value) -> BTreeMap<String, Vec<(String, String)>> {
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.6");
    bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lib| {
            assert_eq!(lib["type"], "library");
            let images = lib["components"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    assert_eq!(c["type"], "file");
                    (
                        c["name"].as_str().unwrap().to_string(),
                        c["hashes"][0]["content"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            (lib["name"].as_str().unwrap().to_string(), images)
        })
        .collect()
}

#[test]
fn one_component_per_listed_image() {
    let files = [
        corpus("bundles/hip_6arch.bundle"),
        corpus("compressed/hip_6arch.zstd.ccob"),
        corpus("bundles/omp_amd_nv.bundle"),
        common::repo().join("tests/data/nvfatbin/files/libk.so"),
        common::repo().join("tests/data/nvfatbin/files/mixed.size.fatbin"),
    ];
    let mut args: Vec<&std::ffi::OsStr> = vec!["sbom".as_ref()];
    args.extend(files.iter().map(|f| f.as_os_str()));
    let bom: Value = serde_json::from_slice(&loader_sim_ok(&args).stdout).unwrap();
    let got = components(&bom);
    assert_eq!(got.len(), files.len());
    for f in &files {
        let want = listed(f);
        assert!(!want.is_empty());
        assert_eq!(got[&f.display().to_string()], want, "{f:?}");
    }
    // Properties: the kind and the compression of the zstd CCOB's images.
    let ccob = bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"].as_str().unwrap().ends_with(".zstd.ccob"))
        .unwrap();
    let props = |c: &Value| -> BTreeMap<String, String> {
        c["properties"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_string(),
                    p["value"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let first = props(&ccob["components"][0]);
    assert_eq!(first["offload-image:kind"], "code object");
    assert_eq!(first["offload-image:compression"], "zstd");
    // Reproducible: the same SBOM twice.
    assert_eq!(loader_sim_ok(&args).stdout, loader_sim_ok(&args).stdout);
}

/// `--into-wheel`: a new wheel with `.dist-info/sboms/loader-sim.cdx.json`, its RECORD line
/// (hash and size as pip checks them, computed here by Python's hashlib), the original
/// untouched; the SBOM names the wheel's members.
#[test]
fn into_wheel_adds_a_pep770_sbom() {
    let dir = TempDir::new("sbom-wheel");
    let whl = dir.path("pkg-1.0-py3-none-any.whl");
    {
        let mut w = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        let bundle = std::fs::read(corpus("bundles/hip_6arch.bundle")).unwrap();
        w.start_file("pkg/k.bundle", opts).unwrap();
        w.write_all(&bundle).unwrap();
        w.start_file("pkg-1.0.dist-info/METADATA", opts).unwrap();
        w.write_all(b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
            .unwrap();
        w.start_file("pkg-1.0.dist-info/RECORD", opts).unwrap();
        w.write_all(b"pkg/k.bundle,,\npkg-1.0.dist-info/METADATA,,\npkg-1.0.dist-info/RECORD,,\n")
            .unwrap();
        w.finish().unwrap();
    }
    let before = std::fs::read(&whl).unwrap();
    let out = dir.path("pkg-1.0-py3-none-any.sbom.whl");
    loader_sim_ok(&[
        "sbom".as_ref(),
        whl.as_os_str(),
        "--into-wheel".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(
        std::fs::read(&whl).unwrap(),
        before,
        "the original is untouched"
    );
    let check = r#"
import base64, csv, hashlib, io, json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
rows = list(csv.reader(io.StringIO(z.read("pkg-1.0.dist-info/RECORD").decode())))
name = "pkg-1.0.dist-info/sboms/loader-sim.cdx.json"
row = [r for r in rows if r[0] == name][0]
data = z.read(name)
digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
assert row[1] == "sha256=" + digest, (row, digest)
assert row[2] == str(len(data)), row
assert rows[-1][0] == "pkg-1.0.dist-info/RECORD", rows
assert z.read("pkg/k.bundle") == zipfile.ZipFile(sys.argv[2]).read("pkg/k.bundle")
print(json.dumps(json.loads(data)))
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(check)
        .arg(&out)
        .arg(&whl)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::describe(&o));
    let bom: Value = serde_json::from_slice(&o.stdout).unwrap();
    let got = components(&bom);
    assert_eq!(
        got["pkg/k.bundle"],
        listed(&corpus("bundles/hip_6arch.bundle"))
    );
    // Adding it again to the new wheel: refused (already in RECORD).
    let again = dir.path("again.whl");
    let o = loader_sim(&[
        "sbom".as_ref(),
        out.as_os_str(),
        "--into-wheel".as_ref(),
        again.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

/// The SBOM of real packages (NVIDIA's curand wheel, cyllama-rocm's libggml-hip) validates
/// against CycloneDX 1.6's JSON schema (cyclonedx-python-lib's bundled schema, strict
/// validator) and holds one component per image `list` prints.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the curand wheel, cyllama-rocm and cyclonedx-python-lib; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn real_packages_validate_against_cyclonedx_1_6() {
    if !common::external("the curand wheel, cyllama-rocm and cyclonedx-python-lib") {
        return;
    }
    let python = crate::variants::oracle_python();
    let curand = std::fs::read_dir(common::external_dir().join("nvidia-wheels"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.to_string_lossy()
                .contains("nvidia_curand_cu12-10.3.10.19-")
        })
        .expect("the curand wheel");
    let hip = common::external_dir().join("cyllama-rocm/libggml-hip.so");
    let dir = TempDir::new("sbom-real");
    let file = dir.path("bom.json");
    loader_sim_ok(&[
        "sbom".as_ref(),
        curand.as_os_str(),
        hip.as_os_str(),
        "-o".as_ref(),
        file.as_os_str(),
    ]);
    let validate = r#"
import sys
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(open(sys.argv[1]).read())
if errors is not None:
    print(errors)
    sys.exit(1)
"#;
    let o = Command::new(&python)
        .arg("-c")
        .arg(validate)
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::describe(&o));
    let bom: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let got = components(&bom);
    assert_eq!(got[&hip.display().to_string()], listed(&hip));
    let lib = dir.path("libcurand.so.10");
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&curand).unwrap()).unwrap();
    std::io::copy(
        &mut zip.by_name("nvidia/curand/lib/libcurand.so.10").unwrap(),
        &mut std::fs::File::create(&lib).unwrap(),
    )
    .unwrap();
    assert_eq!(got["nvidia/curand/lib/libcurand.so.10"], listed(&lib));
}
