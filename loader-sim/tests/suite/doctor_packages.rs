//! doctor's headline per package (`--python`, docs/CLI.md): a package runs when every
//! library of it with device code loads; a package whose only loading libraries are a few
//! files with stray images is not counted as running.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

use crate::common::{self, json_lines, loader_sim, TempDir};

/// Whether doctor alone on `file` says it loads on `target` (exit status 0).
fn loads_alone(file: &std::path::Path, target: &str) -> bool {
    let out = loader_sim(&[
        "doctor".as_ref(),
        file.as_os_str(),
        "--target".as_ref(),
        target.as_ref(),
    ]);
    match out.status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("{file:?}: exit {other:?}"),
    }
}

#[test]
fn headline_counts_packages() {
    let files = common::repo().join("tests/data/nvfatbin/files");
    let site = TempDir::new("doctor-packages");
    // Three distributions: a "profiler" with libraries that load on sm_75, a "torchlike"
    // whose libraries load nothing there, and one of each.
    let dists: [(&str, &[&str]); 3] = [
        ("profiler", &["libk.so", "libk_rt.so", "host.o"]),
        ("torchlike", &["device_c.fatbin", "saxpy3.fatbin"]),
        ("mixedpkg", &["libk.a", "variants.fatbin"]),
    ];
    let mut expected: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (dist, libs) in dists {
        let info = format!("{dist}-1.0.dist-info");
        std::fs::create_dir_all(site.path(&info)).unwrap();
        std::fs::create_dir_all(site.path(dist)).unwrap();
        site.write(
            &format!("{info}/METADATA"),
            format!("Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n").as_bytes(),
        );
        let mut record = String::new();
        for lib in libs {
            std::fs::copy(files.join(lib), site.path(&format!("{dist}/{lib}"))).unwrap();
            record.push_str(&format!("{dist}/{lib},,\n"));
            let e = expected.entry(format!("{dist} 1.0")).or_default();
            e.0 += 1;
            e.1 += usize::from(loads_alone(&files.join(lib), "sm_75"));
        }
        site.write(&format!("{info}/RECORD"), record.as_bytes());
    }
    let run = |json: bool| {
        let mut args = vec!["doctor", "--python", "python3", "--target", "sm_75"];
        if json {
            args.push("--json");
        }
        Command::new(common::ours())
            .args(args)
            .env("PYTHONPATH", &site.0)
            .output()
            .unwrap()
    };
    let out = run(true);
    let records = json_lines(&out.stdout);
    let summary = records.last().unwrap();
    assert_eq!(summary["summary"], true);
    let packages: BTreeMap<String, (usize, usize, String)> = summary["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| expected.contains_key(p["package"].as_str().unwrap()))
        .map(|p: &Value| {
            (
                p["package"].as_str().unwrap().to_string(),
                (
                    p["libraries"].as_u64().unwrap() as usize,
                    p["libraries_loading"].as_u64().unwrap() as usize,
                    p["status"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect();
    assert_eq!(packages.len(), 3, "{summary}");
    for (name, (n, ok)) in &expected {
        let status = if ok == n {
            "runs"
        } else if *ok == 0 {
            "none"
        } else {
            "partial"
        };
        assert_eq!(packages[name], (*n, *ok, status.to_string()), "{name}");
    }
    // The three kinds are all there: the test is not vacuous.
    let statuses: Vec<&str> = packages.values().map(|p| p.2.as_str()).collect();
    for s in ["runs", "partial", "none"] {
        assert!(statuses.contains(&s), "{statuses:?}");
    }
    // The table's headline counts packages, then libraries.
    let text = String::from_utf8(run(false).stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("sm_75: ")
            && first.contains(
                " packages run (a package runs when every library of it with device code loads)"
            ),
        "{text}"
    );
    assert!(text.contains("\n  none: torchlike 1.0"), "{text}");
    assert!(text.contains("\n  partial: mixedpkg 1.0"), "{text}");
    let libs = format!(
        "\nsm_75: {} of {} libraries load",
        expected.values().map(|e| e.1).sum::<usize>(),
        expected.values().map(|e| e.0).sum::<usize>()
    );
    assert!(text.contains(&libs), "{text}");
}
