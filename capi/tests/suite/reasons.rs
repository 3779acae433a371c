//! Reasons, damage and errors from C (`tests/c/explain_demo.c`): the reasons `oi_reader_explain`
//! gives are `loader-sim select --explain`'s (texts) and the library's `Choice::losses`
//! (kinds) for every file of the corpus; a damaged unit costs only itself from the first
//! call on; a missing file reports its errno and the system's text; a split library says
//! why it has no units; and the demo leaves no heap block behind under valgrind.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;

use offload_image::{choose, units, Device, Loss, ReadOptions, SelectOptions};

use crate::c_api::{compile_c_demo, json_lines, loader_sim, repo};
use crate::common;

/// The devices every corpus file is explained for: AMD processors with and without
/// features, generic families, and NVIDIA compute capabilities old and new.
const TARGETS: [&str; 11] = [
    "gfx906",
    "gfx90a:sramecc+:xnack+",
    "gfx90a:sramecc-:xnack-",
    "gfx942:sramecc+:xnack-",
    "gfx1030",
    "gfx1100",
    "gfx1201",
    "sm_70",
    "sm_80",
    "sm_90",
    "sm_100",
];

fn demo() -> PathBuf {
    static DEMO: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DEMO.get_or_init(|| compile_c_demo("tests/c/explain_demo.c", "explain_demo"))
        .clone()
}

/// A string as the demo prints one from the file: bytes below 0x20, 0x7f and `\` as `\xNN`.
fn escaped(s: &str) -> String {
    let mut out = Vec::new();
    for b in s.bytes() {
        if b < 0x20 || b == 0x7f || b == b'\\' {
            out.extend(format!("\\x{b:02x}").bytes());
        } else {
            out.push(b);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One (unit, target) pair as the demo printed it.
#[derive(Debug, Default)]
struct Pair {
    unit: usize,
    chosen: String,
    summary: Vec<String>,
    /// (image name, reason name, text).
    losses: Vec<(String, String, String)>,
}

/// What the demo printed for a file.
#[derive(Debug, Default)]
struct Demo {
    status: Option<i32>,
    lines: Vec<Vec<String>>,
    /// Per unit: (location, index in container).
    units: Vec<(String, u64)>,
    /// Per unit: its status name.
    statuses: Vec<String>,
    pairs: Vec<((usize, String), Pair)>,
}

fn run_demo(args: &[&str], file: &Path) -> Demo {
    let mut cmd = Command::new(demo());
    let (flags, targets): (Vec<&str>, Vec<&str>) = args.iter().partition(|a| a.starts_with("--"));
    let out = cmd.args(flags).arg(file).args(targets).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 2)),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut demo = Demo {
        status: out.status.code(),
        ..Demo::default()
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut index: HashMap<(usize, String), usize> = HashMap::new();
    for line in text.lines() {
        let f: Vec<String> = line.split('\t').map(str::to_string).collect();
        match f[0].as_str() {
            "unit" => demo.units.push((f[2].clone(), f[3].parse().unwrap())),
            "status" => demo.statuses.push(f[2].clone()),
            "choice" => {
                let key = (f[1].parse().unwrap(), f[2].clone());
                index.insert(key.clone(), demo.pairs.len());
                let pair = Pair {
                    unit: key.0,
                    chosen: f[4].clone(),
                    ..Pair::default()
                };
                demo.pairs.push((key, pair));
            }
            "summary" => {
                let at = index[&(f[1].parse().unwrap(), f[2].clone())];
                demo.pairs[at].1.summary = f[3..].to_vec();
            }
            "loss" => {
                let at = index[&(f[1].parse().unwrap(), f[2].clone())];
                demo.pairs[at]
                    .1
                    .losses
                    .push((f[3].clone(), f[4].clone(), f[5].clone()));
            }
            "version" | "select" | "open" => {}
            other => panic!("unexpected line {other:?}"),
        }
        demo.lines.push(f);
    }
    demo
}

/// The line of `demo` that starts with `tag`.
fn line<'a>(demo: &'a Demo, tag: &str) -> &'a [String] {
    demo.lines
        .iter()
        .find(|l| l[0] == tag)
        .unwrap_or_else(|| panic!("no {tag} line in {:?}", demo.lines))
}

/// `oi_reason_name` of a loss, from the library's own value (its variant's name).
fn kind_name(loss: &Loss<'_>) -> String {
    let debug = format!("{loss:?}");
    let Some(rejected) = debug.strip_prefix("Rejected(") else {
        assert!(debug.starts_with("Outranked("), "{debug}");
        return "outranked".into();
    };
    let variant: String = rejected
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    if variant == "Nvptx" {
        return "nvidia-rule".into();
    }
    let mut name = String::new();
    for (i, c) in variant.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('-');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

/// Per unit (the walk's units in order) and target: the kinds of the losses as the
/// library's `Choice::losses` gives them (`None` for a unit that does not open).
fn library_kinds(data: &[u8]) -> Vec<Option<Vec<Vec<String>>>> {
    let read = ReadOptions::default();
    let devices: Vec<Device> = TARGETS.iter().map(|t| Device::parse(t).unwrap()).collect();
    let options = SelectOptions::default();
    units(data, &read)
        .filter_map(Result::ok)
        .map(|unit| {
            let open = unit.open(&read).ok()?;
            Some(
                choose(open.images(), &devices, &options)
                    .iter()
                    .map(|c| c.losses().map(|l| kind_name(&l.loss)).collect())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn c_reasons_equal_select_explain_for_every_corpus_file() {
    let cli = loader_sim();
    let corpus = repo().join("tests/data/corpus");
    let mut files = Vec::new();
    let mut dirs = vec![corpus.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 90, "{}", files.len());
    let (mut pairs, mut losses, mut summaries, mut opened) = (0, 0, 0, 0);
    let mut kinds_seen = std::collections::BTreeSet::new();
    for file in &files {
        let name = file.strip_prefix(&corpus).unwrap().display().to_string();
        let got = run_demo(&TARGETS, file);
        let mut args = vec!["select".to_string(), file.display().to_string()];
        for t in TARGETS {
            args.extend(["--target".to_string(), t.to_string()]);
        }
        args.extend(["--explain".to_string(), "--json".to_string()]);
        let out = Command::new(&cli).args(&args).output().unwrap();
        // A bundle whose hash differs: loader-sim chooses in it as the runtimes load it, with
        // the mismatch in the record's note; the C API, verifying, reports the unit damaged
        // (`hash-mismatch`): COMPATIBILITY.md §13 (issue 47).
        let (mismatched, records): (Vec<serde_json::Value>, Vec<serde_json::Value>) =
            json_lines(&out.stdout)
                .into_iter()
                .filter(|r| r.get("target").is_some())
                .partition(|r| {
                    r["runtime_note"].as_str().is_some_and(|n| {
                        n.starts_with(
                            "truncated MD5 of the decompressed bundle does not match the header",
                        )
                    })
                });
        if got.status == Some(2) {
            // Nothing reads: loader-sim chooses nothing either, but in a bundle whose hash
            // differs.
            assert!(records.is_empty(), "{name}: {records:?}");
            if mismatched.is_empty() {
                assert_ne!(out.status.code(), Some(0), "{name}");
            }
            continue;
        }
        for r in &mismatched {
            let key = (
                r["container"].as_str().unwrap().to_string(),
                r["bundle_index"].as_u64().unwrap(),
            );
            let u = got.units.iter().position(|k| *k == key).unwrap();
            assert_eq!(got.statuses[u], "hash-mismatch", "{name}: {key:?}");
        }
        opened += 1;
        let kinds = library_kinds(&std::fs::read(file).unwrap());
        assert_eq!(kinds.len(), got.units.len(), "{name}: the walk's units");
        // The demo's pairs by (location, index in container, target), in order.
        let mut by_key: HashMap<(String, u64, String), VecDeque<&Pair>> = HashMap::new();
        for ((u, target), pair) in &got.pairs {
            if got.statuses[*u] != "ok" {
                assert_eq!(pair.summary[1], "damaged", "{name} unit {u}");
                assert!(pair.losses.is_empty());
                continue;
            }
            let (location, index) = got.units[*u].clone();
            by_key
                .entry((location, index, target.clone()))
                .or_default()
                .push_back(pair);
        }
        let matched = records.len();
        for r in &records {
            let key = (
                r["container"].as_str().unwrap().to_string(),
                r["bundle_index"].as_u64().unwrap(),
                r["target"].as_str().unwrap().to_string(),
            );
            let pair = by_key
                .get_mut(&key)
                .and_then(VecDeque::pop_front)
                .unwrap_or_else(|| panic!("{name}: no C pair for {key:?}"));
            let want: Vec<(String, String)> = r["rejected"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    (
                        escaped(x["image"].as_str().unwrap()),
                        escaped(x["reason"].as_str().unwrap()),
                    )
                })
                .collect();
            let have: Vec<(String, String)> = pair
                .losses
                .iter()
                .map(|(i, _, t)| (i.clone(), t.clone()))
                .collect();
            assert_eq!(have, want, "{name} {key:?}");
            let selected = r["selected"].as_str().map_or("-".to_string(), escaped);
            assert_eq!(pair.chosen, selected, "{name} {key:?}");
            // The kinds are the library's.
            let t = TARGETS.iter().position(|t| *t == key.2).unwrap();
            let lib = kinds[pair.unit]
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: unit {} opens in C", pair.unit));
            let have_kinds: Vec<String> = pair.losses.iter().map(|l| l.1.clone()).collect();
            assert_eq!(have_kinds, lib[t], "{name} {key:?}");
            kinds_seen.extend(have_kinds);
            // The summary: the chosen image, or one of the losses (the most telling).
            let s = &pair.summary;
            match s[0].as_str() {
                "ok" => assert_eq!((s[1].as_str(), &s[2]), ("chosen", &selected)),
                "no-match" if s[1] == "no-images" => assert!(want.is_empty(), "{name}"),
                "no-match" => {
                    assert!(
                        want.contains(&(s[2].clone(), s[3].clone())),
                        "{name} {key:?}: summary {s:?} among {want:?}"
                    );
                    summaries += 1;
                }
                other => panic!("{name} {key:?}: {other}"),
            }
            pairs += 1;
            losses += want.len();
        }
        let left: usize = by_key.values().map(VecDeque::len).sum();
        assert_eq!(left, 0, "{name}: C pairs loader-sim has no record of");
        assert!(matched > 0 || got.units.is_empty() || got.statuses.iter().all(|s| s != "ok"));
    }
    eprintln!(
        "{} files, {opened} opened, {pairs} pairs, {losses} losses, {summaries} no-match summaries, kinds {kinds_seen:?}",
        files.len()
    );
    assert!(opened >= 60, "{opened}");
    assert!(pairs >= 500, "{pairs}");
    assert!(losses >= 1600, "{losses}");
    assert!(summaries >= 100, "{summaries}");
    for k in [
        "outranked",
        "host",
        "processor",
        "feature",
        "arch",
        "nvidia-rule",
    ] {
        assert!(kinds_seen.contains(k), "{k} never seen: {kinds_seen:?}");
    }
}

/// A good compressed bundle followed by one whose hash is wrong: unit 1's damage is known
/// before any other call, and the first selection returns unit 0's choices (loader-sim's)
/// with `OI_PARTIAL` and unit 1's damage in the error.
#[test]
fn a_damaged_unit_costs_only_itself_from_the_first_call() {
    let corpus = repo().join("tests/data/corpus");
    let mut bytes = std::fs::read(corpus.join("compressed/hip_6arch.zstd.ccob")).unwrap();
    let good = bytes.len();
    bytes.extend(std::fs::read(corpus.join("malformed/ccob_bad_hash.ccob")).unwrap());
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("good_then_bad_hash.ccob");
    std::fs::write(&path, &bytes).unwrap();
    let targets = ["gfx906", "gfx1100", "gfx90a:xnack+"];
    // The hash field of a v2 header is at byte 16 of the bundle (VALIDATE.md: hash-mismatch
    // at 16 for ccob_bad_hash.ccob alone).
    let at = (good + 16).to_string();
    for flag in [None, Some("--file")] {
        let mut args: Vec<&str> = flag.into_iter().collect();
        args.extend(targets);
        let got = run_demo(&args, &path);
        assert_eq!(got.status, Some(0));
        assert_eq!(got.statuses, ["ok", "hash-mismatch"]);
        let status1: Vec<&str> = got
            .lines
            .iter()
            .find(|l| l[0] == "status" && l[1] == "1")
            .unwrap()
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(status1, ["status", "1", "hash-mismatch", &at, "1"]);
        assert_eq!(
            line(&got, "select"),
            ["select", "partial", "hash-mismatch", &at, "1"]
        );
        // Unit 0's choices are loader-sim's on the same file.
        let out = Command::new(loader_sim())
            .arg("select")
            .arg(&path)
            .args(targets.iter().flat_map(|t| ["--target", t]))
            .arg("--json")
            .output()
            .unwrap();
        // Changed on purpose (issue 47, COMPATIBILITY.md §13): loader-sim chooses in the
        // bundle whose hash differs, as the runtimes load it, and notes the mismatch (was:
        // exit 2 and a `damaged` record); the C API, verifying, still reports it damaged.
        assert_eq!(out.status.code(), Some(0), "loader-sim: the choice stands");
        let records = json_lines(&out.stdout);
        let noted: Vec<&serde_json::Value> =
            records.iter().filter(|r| r["bundle_index"] == 1).collect();
        assert_eq!(noted.len(), targets.len());
        for r in &noted {
            let note = r["runtime_note"].as_str().unwrap();
            assert!(
                note.starts_with(&format!(
                    "truncated MD5 of the decompressed bundle does not match the header, at byte {at}:"
                )),
                "{note}"
            );
        }
        let chosen: Vec<(String, String)> = records
            .iter()
            .filter(|r| r.get("target").is_some() && r["bundle_index"] == 0)
            .map(|r| {
                assert_eq!(r["bundle_index"], 0);
                (
                    r["target"].as_str().unwrap().to_string(),
                    r["selected"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(chosen.len(), targets.len());
        assert!(records.iter().all(|r| r.get("target").is_some()));
        for ((key, pair), (target, selected)) in got.pairs.iter().zip(&chosen) {
            assert_eq!((key.0, &key.1), (0, target));
            assert_eq!(&pair.chosen, selected);
        }
        for ((key, pair), _) in got.pairs.iter().skip(targets.len()).zip(targets) {
            assert_eq!(key.0, 1);
            assert_eq!(pair.chosen, "-");
            assert_eq!(pair.summary[..2], ["hash-mismatch", "damaged"]);
        }
        // The images of unit 0 are 0..7, unit 1 has none.
        let units: Vec<&Vec<String>> = got.lines.iter().filter(|l| l[0] == "unit").collect();
        assert_eq!(units[0][4..], ["0", "7"]);
        assert_eq!(units[1][4..], ["7", "0"]);
    }
}

/// `oi_reader_open_file` on a missing file: `OI_ERR_IO` with `ENOENT` and the system's
/// text (the demo checks it against its own `strerror`), no byte offset.
#[test]
fn a_missing_file_reports_its_errno_and_strerror_text() {
    let missing = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi/no-such-file.bundle");
    let _ = std::fs::remove_file(&missing);
    let got = run_demo(&["--file", "gfx906"], &missing);
    assert_eq!(got.status, Some(2));
    let open = line(&got, "open");
    assert_eq!(open[1..4], ["io", "18", &libc::ENOENT.to_string()]);
    assert_eq!(open[4], "No such file or directory");
    assert_eq!(open[5], "-", "no byte offset");
    assert_eq!(open[6], "cannot open or read the file");
    let v = line(&got, "version");
    assert_eq!(v[1], env!("CARGO_PKG_VERSION"));
    assert_eq!(v[2], env!("CARGO_PKG_VERSION"), "the OI_VERSION_* macros");
}

/// A split (kpack) library has no units in the file: the open says why, at its first
/// `HIPK` wrapper (the offset loader-sim's split table reads wrapper 0 from).
#[test]
fn a_split_library_says_why_it_has_no_units() {
    let lib = repo().join("tests/data/kpack/split/librocrand.so.1.1");
    let got = run_demo(&["gfx906"], &lib);
    assert_eq!(got.status, Some(2));
    let open = line(&got, "open");
    assert_eq!(open[1..4], ["kpack-split", "20", "0"]);
    assert!(open[6].contains("split (kpack) library"), "{open:?}");
    let data = std::fs::read(&lib).unwrap();
    let at: usize = open[5].parse().unwrap();
    assert_eq!(&data[at..at + 4], b"HIPK", "the offset is the wrapper's");
    // loader-sim reads it as a split library too.
    let out = Command::new(loader_sim())
        .args([
            "select",
            lib.to_str().unwrap(),
            "--target",
            "gfx906",
            "--json",
        ])
        .output()
        .unwrap();
    let records = json_lines(&out.stdout);
    assert!(
        records.iter().any(|r| r["container"] == "wrapper 0"),
        "{records:?}"
    );
}

/// The demo under valgrind: on a file with a good and a damaged unit, explaining every pair
/// (compressed content decoded, texts stored, errors reported), on a missing file and on
/// a split library: no heap block lost, definitely or possibly (the messages are in static
/// storage, everything else is freed by `oi_reader_close`).
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs valgrind (scripts/setup.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn c_demo_under_valgrind_loses_nothing() {
    if !common::external("valgrind (scripts/setup.sh)") {
        return;
    }
    let corpus = repo().join("tests/data/corpus");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi");
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = std::fs::read(corpus.join("compressed/hip_6arch.zstd.ccob")).unwrap();
    bytes.extend(std::fs::read(corpus.join("malformed/ccob_bad_hash.ccob")).unwrap());
    let mixed = dir.join("valgrind_mixed.ccob");
    std::fs::write(&mixed, &bytes).unwrap();
    let runs: Vec<(Vec<String>, i32)> = vec![
        (
            vec![
                "--file".into(),
                mixed.display().to_string(),
                "gfx906".into(),
                "sm_80".into(),
            ],
            0,
        ),
        (vec![mixed.display().to_string(), "gfx1100".into()], 0),
        (
            vec![
                corpus.join("driver/hip_compress.exe").display().to_string(),
                "gfx90a:xnack+".into(),
                "gfx1030".into(),
            ],
            0,
        ),
        (
            vec![
                corpus.join("nvptx/saxpy3.fatbin").display().to_string(),
                "sm_80".into(),
                "sm_70".into(),
            ],
            0,
        ),
        (
            vec![
                "--file".into(),
                dir.join("no-such-file").display().to_string(),
            ],
            2,
        ),
        (
            vec![
                repo()
                    .join("tests/data/kpack/split/librocrand.so.1.1")
                    .display()
                    .to_string(),
                "gfx906".into(),
            ],
            2,
        ),
    ];
    for (args, status) in runs {
        let out = Command::new("valgrind")
            .args([
                "--leak-check=full",
                "--show-leak-kinds=all",
                "--errors-for-leak-kinds=all",
                "--error-exitcode=99",
            ])
            .arg(demo())
            .args(&args)
            .output()
            .expect("valgrind (scripts/setup.sh installs it)");
        let report = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{args:?}:\n{report}");
        let clean = report.contains("All heap blocks were freed -- no leaks are possible")
            || (report.contains("definitely lost: 0 bytes in 0 blocks")
                && report.contains("indirectly lost: 0 bytes in 0 blocks")
                && report.contains("possibly lost: 0 bytes in 0 blocks"));
        assert!(clean, "{args:?}:\n{report}");
        assert!(
            report.contains("ERROR SUMMARY: 0 errors"),
            "{args:?}:\n{report}"
        );
    }
}
