//! `loader-sim variants WHEEL [--check]` (docs/CLI.md): the wheel-variant properties a
//! wheel's code backs, and its declared ones (`variant.json`) checked against them.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{self, corpus, json_lines, loader_sim, loader_sim_ok, TempDir};

/// A wheel at `path` holding `files` (member name, bytes).
fn wheel(path: &Path, files: &[(&str, Vec<u8>)]) {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, bytes) in files {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap();
}

/// A variant.json declaring `properties` (`ns :: feature :: value`) under label `lbl`.
fn variant_json(properties: &[&str]) -> Vec<u8> {
    let mut tree: serde_json::Map<String, Value> = serde_json::Map::new();
    for p in properties {
        let parts: Vec<&str> = p.split(" :: ").collect();
        let ns = tree
            .entry(parts[0])
            .or_insert_with(|| Value::Object(Default::default()));
        let values = ns
            .as_object_mut()
            .unwrap()
            .entry(parts[1])
            .or_insert_with(|| Value::Array(Vec::new()));
        values.as_array_mut().unwrap().push(parts[2].into());
    }
    let json = serde_json::json!({
        "$schema": "https://variants-schema.wheelnext.dev/v0.2.0.json",
        "default-priorities": {"namespace": ["amd", "nvidia"]},
        "providers": {},
        "variants": {"lbl": tree},
    });
    serde_json::to_vec_pretty(&json).unwrap()
}

/// The properties `list --json` of `file` gives (the images' triples, targets, kinds).
fn from_list(file: &Path) -> BTreeSet<String> {
    json_lines(&loader_sim_ok(&["list".as_ref(), file.as_os_str(), "--json".as_ref()]).stdout)
        .iter()
        .filter_map(|r| {
            let (triple, target, kind) = (
                r["triple"].as_str()?,
                r["target_id"].as_str()?,
                r["image_kind"].as_str()?,
            );
            if triple.starts_with("nvptx") {
                let n = target
                    .trim_start_matches("sm_")
                    .trim_end_matches(['a', 'f']);
                let what = match kind {
                    "cubin" => "real",
                    "ptx" => "virtual",
                    _ => return None,
                };
                Some(format!("nvidia :: sm_arch :: {n}_{what}"))
            } else if triple.starts_with("amdgcn") && kind == "elf" {
                let p = target.split(':').next()?;
                (!p.contains("generic")).then(|| format!("amd :: gfx_arch :: {p}"))
            } else {
                None
            }
        })
        .collect()
}

/// Computed properties of a wheel of corpus bundles equal what `list` says its images are;
/// a variant.json with a claim no image backs fails `--check` naming it; one that declares
/// a subset passes with warnings for the rest.
#[test]
fn check_against_the_code() {
    let dir = TempDir::new("variants");
    let libs = ["bundles/hip_6arch.bundle", "bundles/omp_amd_nv.bundle"];
    let want: BTreeSet<String> = libs.iter().flat_map(|l| from_list(&corpus(l))).collect();
    assert!(want.contains("amd :: gfx_arch :: gfx942"), "{want:?}");
    assert!(want.contains("nvidia :: sm_arch :: 80_virtual"), "{want:?}");
    let files = |claims: &[&str]| -> Vec<(&'static str, Vec<u8>)> {
        vec![
            ("pkg/a.bundle", std::fs::read(corpus(libs[0])).unwrap()),
            ("pkg/b.bundle", std::fs::read(corpus(libs[1])).unwrap()),
            ("pkg-1.0.dist-info/variant.json", variant_json(claims)),
        ]
    };
    let whl = dir.path("pkg-1.0-py3-none-any-lbl.whl");
    wheel(&whl, &files(&["amd :: gfx_arch :: gfx942"]));
    let out = loader_sim_ok(&["variants", whl.to_str().unwrap()]);
    let got: BTreeSet<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, want);
    // A true subset: exit 0, a warning per undeclared property.
    let out = loader_sim(&["variants", whl.to_str().unwrap(), "--check", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let recs = json_lines(&out.stdout);
    let status = |p: &str| {
        recs.iter()
            .find(|r| r["property"] == p)
            .map(|r| r["status"].as_str().unwrap().to_string())
    };
    assert_eq!(
        status("amd :: gfx_arch :: gfx942").as_deref(),
        Some("backed")
    );
    assert_eq!(
        recs.iter().filter(|r| r["status"] == "undeclared").count(),
        want.len() - 1
    );
    // A false claim: exit 1, named.
    wheel(
        &whl,
        &files(&[
            "amd :: gfx_arch :: gfx942",
            "amd :: gfx_arch :: gfx1201",
            "nvidia :: sm_arch :: 90_real",
        ]),
    );
    let out = loader_sim(&["variants", whl.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("error: amd :: gfx_arch :: gfx1201 is declared in pkg-1.0.dist-info/variant.json but no image in the wheel backs it"),
        "{text}"
    );
    assert!(
        text.contains("error: nvidia :: sm_arch :: 90_real"),
        "{text}"
    );
    assert!(text.contains("ok: amd :: gfx_arch :: gfx942"), "{text}");
    assert!(text.contains("2 error(s)"), "{text}");
    // No variant.json: --check is a usage error.
    wheel(&whl, &files(&[])[..2]);
    assert_eq!(
        loader_sim(&["variants", whl.to_str().unwrap(), "--check"])
            .status
            .code(),
        Some(2)
    );
}

/// The python of the publisher oracles' venv (scripts/fetch-publish-oracles.sh).
pub fn oracle_python() -> PathBuf {
    let out = Command::new(common::repo().join("scripts/fetch-publish-oracles.sh"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// NVIDIA's curand wheel: the computed properties are exactly the cubin and PTX
/// architectures `cuobjdump --list-elf --list-ptx` lists; a variant.json written and read
/// back by variantlib 0.2.2 (the reference implementation) with one false claim fails
/// `--check` naming it, and with the true ones passes.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the curand wheel, cuobjdump and variantlib; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn curand_wheel_against_cuobjdump_and_variantlib() {
    if !common::external("the curand wheel, cuobjdump and variantlib") {
        return;
    }
    let cuda = common::cuda_tree();
    let wheels = common::external_dir().join("nvidia-wheels");
    let original = std::fs::read_dir(&wheels)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.to_string_lossy()
                .contains("nvidia_curand_cu12-10.3.10.19-")
        })
        .expect("the curand wheel");
    let dir = TempDir::new("variants-curand");
    let lib = dir.path("libcurand.so.10");
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&original).unwrap()).unwrap();
    {
        let mut member = zip.by_name("nvidia/curand/lib/libcurand.so.10").unwrap();
        std::io::copy(&mut member, &mut std::fs::File::create(&lib).unwrap()).unwrap();
    }
    let listing = |flag: &str| -> BTreeSet<String> {
        let out = Command::new(cuda.join("bin/cuobjdump"))
            .arg(flag)
            .arg(&lib)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::describe(&out));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| {
                let arch = l.rsplit('.').nth(1)?.strip_prefix("sm_")?;
                Some(arch.trim_end_matches(['a', 'f']).to_string())
            })
            .collect()
    };
    let mut want: BTreeSet<String> = listing("--list-elf")
        .into_iter()
        .map(|a| format!("nvidia :: sm_arch :: {a}_real"))
        .collect();
    want.extend(
        listing("--list-ptx")
            .into_iter()
            .map(|a| format!("nvidia :: sm_arch :: {a}_virtual")),
    );
    let out = loader_sim_ok(&["variants", original.to_str().unwrap()]);
    let got: BTreeSet<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, want);
    // variant.json by variantlib: the true properties plus one false claim (sm_72).
    let python = oracle_python();
    let mut claims: Vec<String> = want.iter().cloned().collect();
    claims.push("nvidia :: sm_arch :: 72_real".into());
    let script = r#"
import json, sys
from variantlib.variant_dist_info import VariantDistInfo
values = {}
for p in sys.argv[2:]:
    ns, feature, value = [x.strip() for x in p.split("::")]
    values.setdefault(ns, {}).setdefault(feature, []).append(value)
d = {"$schema": "https://variants-schema.wheelnext.dev/v0.2.0.json",
     "default-priorities": {"namespace": ["nvidia"]},
     "providers": {"nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
                              "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin"}},
     "variants": {"cu12": values}}
open(sys.argv[1], "w").write(VariantDistInfo(json.dumps(d), "cu12").to_str())
"#;
    let write = |claims: &[String], path: &Path| {
        let out = Command::new(&python)
            .arg("-c")
            .arg(script)
            .arg(path)
            .args(claims)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::describe(&out));
    };
    let json = dir.path("variant.json");
    let rewrite = |claims: &[String]| -> PathBuf {
        write(claims, &json);
        let whl = dir.path("nvidia_curand_cu12-10.3.10.19-py3-none-manylinux_2_27_x86_64-cu12.whl");
        let mut w = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
        let mut zip = zip::ZipArchive::new(std::fs::File::open(&original).unwrap()).unwrap();
        for i in 0..zip.len() {
            let m = zip.by_index_raw(i).unwrap();
            w.raw_copy_file(m).unwrap();
        }
        w.start_file(
            "nvidia_curand_cu12-10.3.10.19.dist-info/variant.json",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        w.write_all(&std::fs::read(&json).unwrap()).unwrap();
        w.finish().unwrap();
        whl
    };
    let whl = rewrite(&claims);
    let out = loader_sim(&["variants", whl.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("error: nvidia :: sm_arch :: 72_real is declared"),
        "{text}"
    );
    assert!(text.contains("1 error(s), 0 warning(s)"), "{text}");
    claims.pop();
    let whl = rewrite(&claims);
    let out = loader_sim(&["variants", whl.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// The oracle's reading of a METADATA (variantlib 0.2.2 and the `packaging` it depends on,
/// with the PEP 817 marker variables added to packaging's marker grammar as variant-aware
/// installers do): the properties its `Requires-Dist` markers test with `in
/// variant_properties` (each validated and spelled by variantlib's `VariantProperty`), and
/// those of them a wheel whose variant has the properties `backed` does not have (the
/// marker `'<p>' in variant_properties` evaluated on variantlib's
/// `get_variant_environment_dict`).
const MARKER_ORACLE: &str = r#"
import json, re, sys
import packaging._tokenizer as tok
rule = tok.DEFAULT_RULES["VARIABLE"]
tok.DEFAULT_RULES["VARIABLE"] = re.compile(rule.pattern.replace(
    "dependency_groups",
    "dependency_groups|variant_namespaces|variant_features|variant_properties|variant_label"),
    rule.flags)
from email.parser import HeaderParser
from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from variantlib.api import get_variant_environment_dict
from variantlib.models.variant import VariantDescription, VariantProperty
meta = HeaderParser().parse(open(sys.argv[1], encoding="utf-8"))
backed = VariantDescription([VariantProperty.from_str(p) for p in json.loads(sys.argv[2])])
env = default_environment()
env.update(get_variant_environment_dict(backed))
referenced = []
def walk(node):
    if isinstance(node, list):
        for n in node:
            walk(n)
    elif isinstance(node, tuple) and len(node) == 3:
        lhs, op, rhs = node
        if (op.value == "in" and type(rhs).__name__ == "Variable"
                and rhs.value == "variant_properties" and type(lhs).__name__ == "Value"):
            try:
                p = VariantProperty.from_str(lhs.value).to_str()
            except Exception:
                return
            if p not in referenced:
                referenced.append(p)
for line in meta.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker is not None:
        walk(req.marker._markers)
unbacked = [p for p in referenced
            if not Marker(f"'{p}' in variant_properties").evaluate(env)]
print(json.dumps({"referenced": referenced, "unbacked": unbacked}))
"#;

/// A wheel whose METADATA declares variant properties in `Requires-Dist` markers (PEP
/// 817/825): the properties `variants --check` reads from it are exactly those the oracle
/// (variantlib and packaging, [`MARKER_ORACLE`]) finds; one marker's property no image
/// backs fails the check naming it and METADATA, as the oracle judges it against the
/// code's properties; with only true markers (and no variant.json) the check passes.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs variantlib; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn metadata_markers_against_variantlib() {
    if !common::external("variantlib") {
        return;
    }
    let python = oracle_python();
    let dir = TempDir::new("variants-metadata");
    let libs = ["bundles/hip_6arch.bundle", "bundles/omp_amd_nv.bundle"];
    let backed: BTreeSet<String> = libs.iter().flat_map(|l| from_list(&corpus(l))).collect();
    assert!(backed.contains("amd :: gfx_arch :: gfx942"), "{backed:?}");
    let metadata = |requires: &[&str]| -> String {
        let mut m = String::from("Metadata-Version: 2.4\nName: pkg\nVersion: 1.0\n");
        for r in requires {
            m.push_str(&format!("Requires-Dist: {r}\n"));
        }
        m.push_str(
            "\nA description; Requires-Dist: x; 'amd :: gfx_arch :: gfx1' in variant_properties\n",
        );
        m
    };
    let oracle = |text: &str| -> Value {
        let path = dir.path("METADATA");
        std::fs::write(&path, text).unwrap();
        let backed: Vec<&String> = backed.iter().collect();
        let out = Command::new(&python)
            .arg("-c")
            .arg(MARKER_ORACLE)
            .arg(&path)
            .arg(serde_json::to_string(&backed).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::describe(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let build = |text: &str, with_json: bool| -> PathBuf {
        let whl = dir.path("pkg-1.0-py3-none-any-lbl.whl");
        let mut files = vec![
            ("pkg/a.bundle", std::fs::read(corpus(libs[0])).unwrap()),
            ("pkg/b.bundle", std::fs::read(corpus(libs[1])).unwrap()),
            ("pkg-1.0.dist-info/METADATA", text.as_bytes().to_vec()),
        ];
        if with_json {
            files.push((
                "pkg-1.0.dist-info/variant.json",
                variant_json(&["amd :: gfx_arch :: gfx942"]),
            ));
        }
        wheel(&whl, &files);
        whl
    };
    let strings = |v: &Value| -> BTreeSet<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    // One false claim among true ones, a `not in` test, a namespace test, another feature.
    let text = metadata(&[
        "rocblas; 'amd :: gfx_arch :: gfx942' in variant_properties",
        "hipblaslt; python_version >= '3.9' and ('amd :: gfx_arch :: gfx1201' in variant_properties)",
        "nvshmem; \"nvidia :: sm_arch :: 80_virtual\" in variant_properties",
        "cupti; 'nvidia :: sm_arch :: 75_real' not in variant_properties",
        "roctx; 'amd' in variant_namespaces",
        "avx; 'x86_64 :: level :: v3' in variant_properties",
    ]);
    let want = oracle(&text);
    let referenced = strings(&want["referenced"]);
    let unbacked = strings(&want["unbacked"]);
    // The oracle sees the claims, and judges gfx1201 (and the other feature) unbacked.
    assert!(referenced.contains("amd :: gfx_arch :: gfx1201"), "{want}");
    assert!(unbacked.contains("amd :: gfx_arch :: gfx1201"), "{want}");
    let whl = build(&text, true);
    let out = loader_sim(&["variants", whl.to_str().unwrap(), "--check", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let recs = json_lines(&out.stdout);
    let from_metadata: BTreeSet<String> = recs
        .iter()
        .filter(|r| {
            r["declared_in"]
                .as_array()
                .is_some_and(|a| a.iter().any(|m| m == "pkg-1.0.dist-info/METADATA"))
        })
        .map(|r| r["property"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(from_metadata, referenced);
    // The errors: the oracle's unbacked properties of the judged features.
    let errors: BTreeSet<String> = recs
        .iter()
        .filter(|r| r["status"] == "unbacked")
        .map(|r| r["property"].as_str().unwrap().to_string())
        .collect();
    let judged: BTreeSet<String> = unbacked
        .iter()
        .filter(|p| p.starts_with("amd :: gfx_arch :: ") || p.starts_with("nvidia :: sm_arch :: "))
        .cloned()
        .collect();
    assert_eq!(errors, judged);
    let out = loader_sim(&["variants", whl.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text_out = String::from_utf8(out.stdout).unwrap();
    assert!(
        text_out.contains(
            "error: amd :: gfx_arch :: gfx1201 is declared in pkg-1.0.dist-info/METADATA but no image in the wheel backs it"
        ),
        "{text_out}"
    );
    assert!(
        text_out.contains(
            "ok: amd :: gfx_arch :: gfx942 (declared in pkg-1.0.dist-info/variant.json and pkg-1.0.dist-info/METADATA"
        ),
        "{text_out}"
    );
    // Only true claims, METADATA alone: the oracle finds none unbacked, the check passes.
    let text = metadata(&[
        "rocblas; 'amd :: gfx_arch :: gfx942' in variant_properties",
        "nvshmem; 'nvidia :: sm_arch :: 80_virtual' in variant_properties",
    ]);
    let want = oracle(&text);
    assert!(strings(&want["unbacked"]).is_empty(), "{want}");
    let whl = build(&text, false);
    let out = loader_sim(&["variants", whl.to_str().unwrap(), "--check", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let recs = json_lines(&out.stdout);
    let backed_claims: BTreeSet<String> = recs
        .iter()
        .filter(|r| r["status"] == "backed")
        .map(|r| r["property"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(backed_claims, strings(&want["referenced"]));
}
