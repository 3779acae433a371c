//! The line between the drop-in tools and the command-line harness: `loader-sim` reaches
//! this crate only through the paths listed here (Rust checks that they are public), the
//! drop-in code exists once (no module of it and no run of its lines is repeated in
//! `loader-sim/src`), and this crate does not depend on the simulator crates.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

/// The parts of `offload_dropin` that `loader-sim` uses: the two tools' entry points, the
/// input-mapping hook, and what `loader-sim wrap` shares with them (target IDs as the
/// bundler reads them, the packager's `--image` syntax and image kinds, bitcode sniffing).
const USED_BY_LOADER_SIM: &[&str] = &[
    "offload_dropin::bundler::run_with",
    "offload_dropin::bundler::target::{conflicting_ids, TargetInfo}",
    "offload_dropin::input::MappedInput",
    "offload_dropin::input::file_type_name",
    "offload_dropin::input::open_regular",
    "offload_dropin::llvm::bitcode",
    "offload_dropin::packager::image_arguments",
    "offload_dropin::packager::run",
    "offload_dropin::packager::{extension, image_kind}",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Source lines without comments, trimmed.
fn code_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .map(|l| l.trim().to_string())
        .collect()
}

/// Every `offload_dropin::…` path (with a `{…}` group kept whole) in `text`.
fn dropin_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("offload_dropin::") {
        rest = &rest[i..];
        let end = rest
            .char_indices()
            .find(|&(_, c)| !(c.is_alphanumeric() || "_:{}, ".contains(c)))
            .map_or(rest.len(), |(i, _)| i);
        let path = rest[..end].trim_end_matches([',', ' ']);
        // `a::b::c(args)` and `a::b::c;` both name `a::b::c`; a group ends at its `}`.
        let path = match path.find('}') {
            Some(j) => &path[..=j],
            None => path.split([' ', ',']).next().unwrap_or(path),
        };
        out.insert(path.to_string());
        rest = &rest["offload_dropin::".len()..];
    }
    out
}

#[test]
fn loader_sim_uses_only_the_listed_public_paths() {
    let mut files = Vec::new();
    rust_files(&repo().join("loader-sim/src"), &mut files);
    let mut used = BTreeSet::new();
    for f in &files {
        let code = code_lines(&std::fs::read_to_string(f).unwrap()).join(" ");
        used.extend(dropin_paths(&code));
    }
    let listed: BTreeSet<String> = USED_BY_LOADER_SIM.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        used, listed,
        "loader-sim's uses of offload_dropin changed: update USED_BY_LOADER_SIM (and the crate docs) on purpose"
    );
}

#[test]
fn the_drop_in_code_lives_once() {
    let mut ours = Vec::new();
    rust_files(&repo().join("dropin/src"), &mut ours);
    let mut theirs = Vec::new();
    rust_files(&repo().join("loader-sim/src"), &mut theirs);
    // No module of this crate is compiled into loader-sim again.
    for f in &theirs {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(
            !text.contains("#[path") && !text.contains("include!("),
            "{}: includes source from elsewhere",
            f.display()
        );
        let name = f.file_stem().unwrap().to_string_lossy();
        assert!(
            !["bundler", "packager", "llvm", "objcopy", "archive", "hashmap", "cl", "triple"]
                .contains(&name.as_ref()),
            "{}: a drop-in module in loader-sim",
            f.display()
        );
    }
    // No run of 6 substantial lines of this crate appears in loader-sim.
    const RUN: usize = 6;
    let substantial = |l: &String| l.len() >= 12;
    let windows = |files: &[PathBuf]| -> Vec<(PathBuf, usize, String)> {
        let mut out = Vec::new();
        for f in files {
            let lines = code_lines(&std::fs::read_to_string(f).unwrap());
            let kept: Vec<(usize, &String)> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| substantial(l))
                .collect();
            for w in kept.windows(RUN) {
                let key = w
                    .iter()
                    .map(|(_, l)| l.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push((f.clone(), w[0].0 + 1, key));
            }
        }
        out
    };
    let ours: HashSet<String> = windows(&ours).into_iter().map(|(_, _, k)| k).collect();
    assert!(ours.len() > 1000, "the drop-in sources were read");
    for (f, line, key) in windows(&theirs) {
        assert!(
            !ours.contains(&key),
            "{}:{line}: repeats drop-in code:\n{key}",
            f.display()
        );
    }
}

#[test]
fn the_drop_in_crate_does_not_depend_on_the_simulator() {
    let manifest = std::fs::read_to_string(repo().join("dropin/Cargo.toml")).unwrap();
    for sim in ["loader-sim", "loader-sim-rt", "loader-sim-capi"] {
        assert!(
            !manifest
                .lines()
                .any(|l| l.split('=').next().is_some_and(|k| k.trim() == sim)),
            "offload-dropin depends on {sim}"
        );
    }
}
