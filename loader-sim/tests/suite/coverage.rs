//! `loader-sim coverage` (docs/CLI.md): the GPUs each library serves are the ones `select`
//! finds an image for in every unit; a package serves what every library of it serves.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::{self, corpus, json_lines, loader_sim, loader_sim_ok};

/// For each file: the set of GPUs `coverage --format json` says it serves equals the set
/// of GPUs among the catalogue for which `select --json` selects an image in every unit.
#[test]
fn serves_what_select_selects() {
    let files = [
        "bundles/hip_6arch.bundle",
        "bundles/hip_generic.bundle",
        "bundles/hip_unsorted.bundle",
        "bundles/omp_amd_nv.bundle",
        "compressed/hip_6arch.zstd.ccob",
        "compressed/omp_amd_nv.zstd.ccob",
    ];
    let nvfatbins = [
        "variants.fatbin",
        "mixed.size.fatbin",
        "mixed.none.fatbin",
        "cubin_only.fatbin",
        "ptx_only.fatbin",
    ];
    let mut paths: Vec<std::path::PathBuf> = files.iter().map(|f| corpus(f)).collect();
    paths.extend(
        nvfatbins
            .iter()
            .map(|f| common::repo().join("tests/data/nvfatbin/files").join(f)),
    );
    for path in &paths {
        let out = loader_sim_ok(&["coverage", path.to_str().unwrap(), "--format", "json"]);
        let records = json_lines(&out.stdout);
        let lib = records
            .iter()
            .find(|r| r["record"] == "library")
            .unwrap_or_else(|| panic!("{path:?}: {records:?}"));
        let served: BTreeSet<String> = lib["serves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        let partly: BTreeSet<String> = lib["partial"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[0].as_str().unwrap().to_string())
            .collect();
        // select, for every GPU coverage knows (the union of both lists and a spread of
        // GPUs it does not list, which must get nothing in some unit).
        let mut targets: BTreeSet<String> = served.union(&partly).cloned().collect();
        for t in [
            "sm_50",
            "sm_61",
            "sm_70",
            "sm_75",
            "sm_80",
            "sm_86",
            "sm_89",
            "sm_90",
            "sm_100",
            "sm_120",
            "gfx900",
            "gfx906:sramecc+:xnack-",
            "gfx908:sramecc+:xnack-",
            "gfx90a:sramecc+:xnack-",
            "gfx90a:sramecc+:xnack+",
            "gfx942:sramecc+:xnack-",
            "gfx1030",
            "gfx1100",
            "gfx1201",
        ] {
            targets.insert(t.to_string());
        }
        let mut args = vec![
            "select".to_string(),
            path.to_str().unwrap().to_string(),
            "--json".into(),
        ];
        for t in &targets {
            args.push("--target".into());
            args.push(t.clone());
        }
        let out = loader_sim(&args);
        assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
        let picks = json_lines(&out.stdout);
        for t in &targets {
            let mine: Vec<&Value> = picks.iter().filter(|p| p["target"] == t.as_str()).collect();
            assert!(!mine.is_empty(), "{path:?} {t}");
            let every = mine.iter().all(|p| !p["selected"].is_null());
            assert_eq!(served.contains(t), every, "{path:?} {t}: select {mine:?}");
        }
        assert!(!served.is_empty(), "{path:?}: serves nothing");
        // How: the targets of the images by kind, as list names them.
        let mut code: BTreeSet<(String, String)> = BTreeSet::new();
        for (kind, targets) in lib["code"].as_object().unwrap() {
            for t in targets.as_array().unwrap() {
                code.insert((kind.clone(), t.as_str().unwrap().to_string()));
            }
        }
        let listed: BTreeSet<(String, String)> =
            json_lines(&loader_sim_ok(&["list", path.to_str().unwrap(), "--json"]).stdout)
                .iter()
                .filter_map(|r| {
                    let kind = match r["image_kind"].as_str()? {
                        "cubin" => "cubin",
                        "ptx" => "PTX",
                        "elf" => "code object",
                        "bitcode" => "LTO IR",
                        "spirv" => "SPIR-V",
                        _ => return None,
                    };
                    Some((kind.to_string(), r["target_id"].as_str()?.to_string()))
                })
                .collect();
        assert_eq!(code, listed, "{path:?}");
        // Each PTX target once in `ptx`, with the ISA its text states.
        let ptx: BTreeSet<(String, String)> = lib["ptx"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| ("PTX".to_string(), p["target"].as_str().unwrap().to_string()))
            .collect();
        let listed_ptx: BTreeSet<(String, String)> =
            listed.iter().filter(|(k, _)| k == "PTX").cloned().collect();
        assert_eq!(ptx, listed_ptx, "{path:?}");
        for p in lib["ptx"].as_array().unwrap() {
            let isa = p["isa"].as_str().expect("every PTX here states its ISA");
            assert!(isa.split('.').all(|d| d.parse::<u8>().is_ok()), "{p}");
        }
    }
}

/// A wheel is a package: it serves what every library of it serves; the union record
/// lists what any library serves; the Markdown names each GPU column once.
#[test]
fn packages_and_formats() {
    let dir = common::TempDir::new("coverage-wheel");
    // A wheel of two libraries: one for gfx90a and gfx942, one with every gfx90a image.
    let whl = dir.path("pkg-1.0-py3-none-linux_x86_64.whl");
    let zip = std::fs::File::create(&whl).unwrap();
    let mut w = zip::ZipWriter::new(zip);
    let opts = zip::write::SimpleFileOptions::default();
    use std::io::Write;
    for (name, file) in [
        ("pkg/a.bundle", "bundles/hip_6arch.bundle"),
        ("pkg/b.bundle", "bundles/hip_unsorted.bundle"),
    ] {
        w.start_file(name, opts).unwrap();
        w.write_all(&std::fs::read(corpus(file)).unwrap()).unwrap();
    }
    w.finish().unwrap();
    let out = loader_sim_ok(&["coverage", whl.to_str().unwrap(), "--format", "json"]);
    let records = json_lines(&out.stdout);
    let libs: Vec<&Value> = records
        .iter()
        .filter(|r| r["record"] == "library")
        .collect();
    assert_eq!(libs.len(), 2);
    let set = |v: &Value| -> BTreeSet<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let a = set(&libs[0]["serves"]);
    let b = set(&libs[1]["serves"]);
    let pkg = records.iter().find(|r| r["record"] == "package").unwrap();
    assert_eq!(pkg["package"], "pkg 1.0");
    assert_eq!(set(&pkg["serves"]), a.intersection(&b).cloned().collect());
    assert_eq!(set(&pkg["any"]), a.union(&b).cloned().collect());
    assert_ne!(
        a, b,
        "the two libraries differ: the intersection is not vacuous"
    );
    let union = records.last().unwrap();
    assert_eq!(union["record"], "union");
    assert_eq!(set(&union["serves"]), a.union(&b).cloned().collect());
    // Markdown: a header row with each GPU some library serves, the package row first.
    let md = String::from_utf8(
        loader_sim_ok(&["coverage", whl.to_str().unwrap(), "--format", "markdown"]).stdout,
    )
    .unwrap();
    let header = md.lines().next().unwrap();
    for t in a.union(&b) {
        assert_eq!(header.matches(&format!(" {t} |")).count(), 1, "{header}");
    }
    assert!(
        md.lines()
            .nth(2)
            .unwrap()
            .starts_with("| **pkg 1.0** (2 libraries) |"),
        "{md}"
    );
    // Text: one line per library and the package table.
    let text =
        String::from_utf8(loader_sim_ok(&["coverage", whl.to_str().unwrap()]).stdout).unwrap();
    assert!(text.starts_with("LIBRARY "), "{text}");
    assert!(text.contains("\nPACKAGE "), "{text}");
}

/// The GPUs `coverage --format json` says the library of `records` serves.
fn served(records: &[Value]) -> BTreeSet<String> {
    records.iter().find(|r| r["record"] == "library").unwrap()["serves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The GPUs of `targets` for which `select` chooses an image in every unit of `file`.
fn select_serves(file: &std::path::Path, targets: &[&str]) -> BTreeSet<String> {
    let mut args = vec![file.as_os_str().to_owned(), "--json".into()];
    args.insert(0, "select".into());
    for t in targets {
        args.extend(["--target".into(), (*t).into()]);
    }
    let picks = json_lines(&loader_sim(&args).stdout);
    targets
        .iter()
        .filter(|t| {
            let mine: Vec<&Value> = picks.iter().filter(|p| p["target"] == **t).collect();
            !mine.is_empty() && mine.iter().all(|p| !p["selected"].is_null())
        })
        .map(|t| t.to_string())
        .collect()
}

/// Real packages: NVIDIA's curand wheel (CUDA 12, read inside the wheel; select on the
/// library unpacked) and cyllama-rocm's libggml-hip (130 HIP units): what coverage says
/// each serves is what select chooses an image for in every unit, GPU by GPU.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the curand wheel (scripts/fetch-nvidia-libs.sh) and cyllama-rocm (scripts/fetch-cyllama-rocm.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn real_packages_serve_what_select_selects() {
    if !common::external("the curand wheel and cyllama-rocm's libggml-hip") {
        return;
    }
    let targets: Vec<&str> = [
        "sm_50",
        "sm_60",
        "sm_61",
        "sm_70",
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
        "sm_100",
        "sm_110",
        "sm_120",
        "gfx906:sramecc+:xnack-",
        "gfx90a:sramecc+:xnack-",
        "gfx90a:sramecc+:xnack+",
        "gfx942:sramecc+:xnack-",
        "gfx942:sramecc+:xnack+",
        "gfx1030",
        "gfx1100",
        "gfx1201",
    ]
    .to_vec();
    // NVIDIA: the wheel, and its library unpacked for select.
    let wheels = common::external_dir().join("nvidia-wheels");
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.to_string_lossy()
                .contains("nvidia_curand_cu12-10.3.10.19-")
        })
        .expect("the curand wheel");
    let dir = common::TempDir::new("coverage-curand");
    let lib = dir.path("libcurand.so.10");
    {
        let mut zip = zip::ZipArchive::new(std::fs::File::open(&wheel).unwrap()).unwrap();
        let mut member = zip.by_name("nvidia/curand/lib/libcurand.so.10").unwrap();
        std::io::copy(&mut member, &mut std::fs::File::create(&lib).unwrap()).unwrap();
    }
    let records = json_lines(
        &loader_sim_ok(&["coverage", wheel.to_str().unwrap(), "--format", "json"]).stdout,
    );
    let want: BTreeSet<String> = served(&records)
        .into_iter()
        .filter(|t| targets.contains(&t.as_str()))
        .collect();
    assert_eq!(want, select_serves(&lib, &targets));
    assert!(
        want.contains("sm_80") && !want.contains("gfx1100"),
        "{want:?}"
    );
    assert_how_is_selects(&records, &lib, &targets);
    let pkg = records.iter().find(|r| r["record"] == "package").unwrap();
    assert_eq!(pkg["package"], "nvidia-curand-cu12 10.3.10.19");
    // AMD: the library of the cyllama-rocm wheel.
    let hip = common::external_dir().join("cyllama-rocm/libggml-hip.so");
    let records =
        json_lines(&loader_sim_ok(&["coverage", hip.to_str().unwrap(), "--format", "json"]).stdout);
    let want: BTreeSet<String> = served(&records)
        .into_iter()
        .filter(|t| targets.contains(&t.as_str()))
        .collect();
    assert_eq!(want, select_serves(&hip, &targets));
    assert!(
        want.contains("gfx1100") && !want.contains("sm_80"),
        "{want:?}"
    );
    assert_how_is_selects(&records, &hip, &targets);
}

/// How coverage says each GPU is served (`how` of the library record of `records`) equals,
/// GPU by GPU, what `select --json` chooses on `file`: per GPU, the count of units whose
/// chosen image has each kind and architecture (`image_kind`, `arch`); a GPU coverage
/// gives no `how` gets nothing from select in any unit, or is not served at all. PTX ways
/// carry the ISA the library's `ptx` list gives for that PTX.
fn assert_how_is_selects(records: &[Value], file: &std::path::Path, targets: &[&str]) {
    use std::collections::BTreeMap;
    let lib = records.iter().find(|r| r["record"] == "library").unwrap();
    let mut args = vec![file.as_os_str().to_owned(), "--json".into()];
    args.insert(0, "select".into());
    for t in targets {
        args.extend(["--target".into(), (*t).into()]);
    }
    let picks = json_lines(&loader_sim(&args).stdout);
    let isas: BTreeSet<String> = lib["ptx"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["isa"].as_str().map(str::to_string))
        .collect();
    let served_or_partly: BTreeSet<String> = lib["serves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .chain(
            lib["partial"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p[0].as_str().unwrap().to_string()),
        )
        .collect();
    for t in targets {
        let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
        for p in picks
            .iter()
            .filter(|p| p["target"] == *t && !p["selected"].is_null())
        {
            let key = (
                p["image_kind"].as_str().unwrap().to_string(),
                p["arch"].as_str().unwrap_or("").to_string(),
            );
            *want.entry(key).or_default() += 1;
        }
        let mut got: BTreeMap<(String, String), u64> = BTreeMap::new();
        let how = lib["how"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["gpu"] == *t);
        for w in how
            .map(|h| h["by"].as_array().unwrap().clone())
            .unwrap_or_default()
        {
            let key = (
                w["image_kind"].as_str().unwrap().to_string(),
                w["arch"].as_str().unwrap_or("").to_string(),
            );
            got.insert(key, w["units"].as_u64().unwrap());
            let variant = w["arch"]
                .as_str()
                .filter(|a| a.starts_with("sm_") || a.starts_with("compute_"))
                .and_then(|a| a.chars().last())
                .filter(|c| *c == 'a' || *c == 'f')
                .map(|c| c.to_string());
            assert_eq!(w["variant"].as_str().map(str::to_string), variant, "{w}");
            match w["image_kind"].as_str().unwrap() {
                "ptx" => {
                    assert_eq!(w["served_as"], "PTX (JIT)", "{w}");
                    if let Some(isa) = w["isa"].as_str() {
                        assert!(isas.contains(isa), "{file:?} {t}: {w} not in {isas:?}");
                    }
                }
                "cubin" => assert_eq!(w["served_as"], "cubin (SASS)", "{w}"),
                "elf" => {
                    let generic = w["arch"].as_str().unwrap().contains("-generic");
                    assert_eq!(
                        w["served_as"],
                        if generic {
                            "code object (generic family)"
                        } else {
                            "code object (exact target)"
                        },
                        "{w}"
                    );
                }
                _ => {}
            }
        }
        if served_or_partly.contains(*t) {
            assert_eq!(got, want, "{file:?} {t}");
            assert!(!got.is_empty(), "{file:?} {t}");
        } else {
            assert!(how.is_none(), "{file:?} {t}: {how:?}");
        }
    }
}

/// On the corpus: how each GPU is served (cubin or PTX JIT, `a`/`f` variants, AMD generic
/// family or exact target) is, unit by unit, the image kind and architecture `select`
/// chooses; the text and Markdown outputs say it too.
#[test]
fn how_is_what_select_chooses() {
    let targets = [
        "sm_50",
        "sm_61",
        "sm_70",
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
        "sm_100",
        "sm_103",
        "sm_120",
        "gfx900",
        "gfx906:sramecc+:xnack-",
        "gfx90a:sramecc+:xnack-",
        "gfx90a:sramecc+:xnack+",
        "gfx942:sramecc+:xnack-",
        "gfx1030",
        "gfx1100",
        "gfx1151",
        "gfx1201",
    ];
    let mut paths: Vec<std::path::PathBuf> = [
        "bundles/hip_6arch.bundle",
        "bundles/hip_generic.bundle",
        "bundles/omp_amd_nv.bundle",
        "compressed/hip_6arch.zstd.ccob",
    ]
    .iter()
    .map(|f| corpus(f))
    .collect();
    paths.extend(
        ["variants.fatbin", "mixed.size.fatbin", "ptx_only.fatbin"]
            .iter()
            .map(|f| common::repo().join("tests/data/nvfatbin/files").join(f)),
    );
    let mut kinds: BTreeSet<String> = BTreeSet::new();
    for path in &paths {
        let records = json_lines(
            &loader_sim_ok(&["coverage", path.to_str().unwrap(), "--format", "json"]).stdout,
        );
        assert_how_is_selects(&records, path, &targets);
        for h in records[0]["how"].as_array().unwrap() {
            for w in h["by"].as_array().unwrap() {
                kinds.insert(w["served_as"].as_str().unwrap().to_string());
                if let Some(v) = w["variant"].as_str() {
                    kinds.insert(format!("variant {v}"));
                }
            }
        }
    }
    // The corpus exercises every way.
    for k in [
        "cubin (SASS)",
        "PTX (JIT)",
        "code object (exact target)",
        "code object (generic family)",
        "variant a",
        "variant f",
    ] {
        assert!(kinds.contains(k), "{k} not seen: {kinds:?}");
    }
    // Text and Markdown: the variants fatbin's sm_103 is served by the sm_100f cubin.
    let fatbin = common::repo().join("tests/data/nvfatbin/files/variants.fatbin");
    let text =
        String::from_utf8(loader_sim_ok(&["coverage", fatbin.to_str().unwrap()]).stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains(" sm_103 ") && l.contains("cubin"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.trim_end().ends_with("cubin sm_100f [f variant]"),
        "{text}"
    );
    let md = String::from_utf8(
        loader_sim_ok(&["coverage", fatbin.to_str().unwrap(), "--format", "markdown"]).stdout,
    )
    .unwrap();
    assert!(md.contains("| library | GPUs | served by |"), "{md}");
    assert!(
        md.contains("| sm_103 | cubin sm_100f [f variant] |"),
        "{md}"
    );
}
