//! The library's modules lie along one road, written once in `docs/ARCHITECTURE.md` ("The
//! road"), which this test reads. It reads the sources too and checks that no module refers to one further
//! down the road: every `crate::…` path in code (comments and doc comments aside), with the
//! crate root's re-exports (`pub use module::{…}`) resolved to the module that defines them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The road, in order, as its one home writes it: the `text` block under "The road" in
/// `docs/ARCHITECTURE.md`, steps separated by `→`, the modules of a step by blanks. A module
/// may use only modules of its own step or earlier ones. `lib` (the crate root: it declares
/// the modules and re-exports the plugin tier) is the last step, so no module may use it.
static ROAD: std::sync::LazyLock<Vec<Vec<String>>> = std::sync::LazyLock::new(|| {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md"))
            .expect("docs/ARCHITECTURE.md");
    let section = doc
        .split("\n## The road\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a section \"The road\"");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("the road's text block");
    let road: Vec<Vec<String>> = block
        .split('→')
        .map(|step| step.split_whitespace().map(str::to_string).collect())
        .collect();
    assert!(
        road.iter().all(|step: &Vec<String>| !step.is_empty()),
        "an empty step: {block}"
    );
    road
});

fn step_of(module: &str) -> usize {
    ROAD.iter()
        .position(|s| s.iter().any(|m| m == module))
        .unwrap_or_else(|| {
            panic!("module `{module}` is not on the road; add it to ARCHITECTURE.md's road")
        })
}

/// The code of a whole source file, its `#[cfg(test)]` modules included, without comments
/// (line comments, doc comments).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Identifiers in `text` after `crate::`, with `crate::{a, b::c}` groups expanded to their
/// first segments.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').expect("closed use group");
            for item in group[..end].split(',') {
                let first = item.trim().split("::").next().unwrap_or("").trim();
                if !first.is_empty() {
                    refs.insert(first.to_string());
                }
            }
        } else {
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            refs.insert(ident);
        }
    }
    refs
}

/// The crate root's re-exports: name → module (`pub use module::{…}`), and the names
/// defined in the root itself.
fn root_names(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let code = code_of(lib);
    let mut rest = code.as_str();
    while let Some(i) = rest.find("pub use ") {
        rest = &rest[i + "pub use ".len()..];
        let end = rest.find(';').expect("use ends");
        let (module, items) = rest[..end].split_once("::").expect("module path");
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            // `Code as FindingCode`: the root name is the alias.
            let name = item.trim().rsplit(" as ").next().unwrap_or("").trim();
            if !name.is_empty() {
                names.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    for kw in [
        "pub struct ",
        "pub enum ",
        "pub const ",
        "pub fn ",
        "pub type ",
    ] {
        for piece in code.split(kw).skip(1) {
            let name: String = piece
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            names.entry(name).or_insert_with(|| "lib".to_string());
        }
    }
    names
}

/// The top-level module a source file belongs to (`src/arch/elf.rs` → `arch`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_module_uses_one_further_down_the_road() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let root = root_names(&lib);
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut edges = BTreeSet::new();
    let mut back = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for r in crate_refs(&code) {
            let used = if step_of_opt(&r).is_some() {
                r.clone()
            } else {
                root.get(&r).cloned().unwrap_or_else(|| {
                    panic!(
                        "{}: crate::{r} is neither a module nor a root name",
                        file.display()
                    )
                })
            };
            if used == module {
                continue;
            }
            edges.insert((module.clone(), used.clone()));
            if step_of(&used) > step_of(&module) {
                back.push(format!(
                    "{} uses crate::{r} (module `{used}`, further down the road than `{module}`)",
                    file.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    assert!(back.is_empty(), "back edges:\n{}", back.join("\n"));
    // The check sees real edges: the road's later steps do use the earlier ones.
    for (from, to) in [
        ("container", "bundle"),
        ("image", "offload_binary"),
        ("select", "arch"),
        ("stream", "select"),
        ("registration", "select"),
        ("write", "ccob"),
    ] {
        assert!(
            edges.contains(&(from.to_string(), to.to_string())),
            "expected {from} -> {to} among {edges:?}"
        );
    }
}

fn step_of_opt(module: &str) -> Option<usize> {
    ROAD.iter().position(|s| s.iter().any(|m| m == module))
}

#[test]
fn the_checker_sees_a_back_edge() {
    let code =
        code_of("use crate::{registration::Registry, Limits};\n// crate::write\nfn f() {}\n");
    let refs = crate_refs(&code);
    assert_eq!(
        refs,
        BTreeSet::from(["registration".to_string(), "Limits".to_string()])
    );
    assert!(step_of("registration") > step_of("container"));
    // Test modules are read too: a `#[cfg(test)]` module of `container` that used the
    // writers would be a back edge.
    let refs = crate_refs(&code_of(
        "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::write::bundle::bundle_to_vec;\n}\n",
    ));
    assert_eq!(refs, BTreeSet::from(["write".to_string()]));
    assert!(step_of("write") > step_of("container"));
    // The crate root is the last step: a module using a name defined in `lib.rs` goes back.
    assert_eq!(step_of("lib"), ROAD.len() - 1);
    assert!(ROAD
        .iter()
        .take(ROAD.len() - 1)
        .all(|s| !s.contains(&"lib".to_string())));
}

/// The workspace is cut by audience, and its crates depend on each other one way: the
/// `no_std` core (`offload-image`) depends on none of them; the C API (`offload-image-capi`),
/// the LLVM drop-in tools (`offload-dropin`) and the runtime shim (`loader-sim-rt`) only on
/// the core; the operating-system code of the command line (`loader-sim-os`: file maps, the
/// fill buffer, loading a library) on none; the simulator and command line (`loader-sim`) on
/// the core, the drop-ins, the shim and the OS crate. `unsafe` is forbidden everywhere but in
/// the two FFI crates (the C API and the shim) and the OS crate.
#[test]
fn workspace_crates_depend_one_way_and_confine_unsafe() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // (manifest, package, allowed workspace dependencies, crate root, may use unsafe)
    let crates: &[(&str, &str, &[&str], &str, bool)] = &[
        ("Cargo.toml", "offload-image", &[], "src/lib.rs", false),
        (
            "capi/Cargo.toml",
            "offload-image-capi",
            &["offload-image"],
            "capi/src/lib.rs",
            true,
        ),
        (
            "dropin/Cargo.toml",
            "offload-dropin",
            &["offload-image"],
            "dropin/src/lib.rs",
            false,
        ),
        (
            "loader-sim/rt/Cargo.toml",
            "loader-sim-rt",
            &["offload-image"],
            "loader-sim/rt/src/lib.rs",
            true,
        ),
        (
            "loader-sim/os/Cargo.toml",
            "loader-sim-os",
            &[],
            "loader-sim/os/src/lib.rs",
            true,
        ),
        (
            "loader-sim/Cargo.toml",
            "loader-sim",
            &[
                "offload-image",
                "offload-dropin",
                "loader-sim-rt",
                "loader-sim-os",
            ],
            "loader-sim/src/lib.rs",
            false,
        ),
        (
            "python/Cargo.toml",
            "offload-image-python",
            &["offload-image", "loader-sim"],
            "python/src/lib.rs",
            true,
        ),
    ];
    let names: Vec<&str> = crates.iter().map(|c| c.1).collect();
    // Every workspace member is listed here.
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = workspace
        .split("members = [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap();
    let member_count = members.split(',').filter(|m| m.contains('"')).count();
    assert_eq!(member_count, crates.len(), "workspace members: {members}");
    let mut seen = 0;
    for (manifest, package, allowed, lib, unsafe_ok) in crates {
        let text = std::fs::read_to_string(root.join(manifest)).unwrap();
        assert!(
            text.contains(&format!("name = \"{package}\"")),
            "{manifest}"
        );
        // Path dependencies (normal, dev and build): only the allowed workspace crates.
        let mut section = String::new();
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with('[') {
                section = t.to_string();
                continue;
            }
            if !section.contains("dependencies") || !t.contains("path =") {
                continue;
            }
            let dep = t.split([' ', '=']).next().unwrap();
            assert!(
                names.contains(&dep),
                "{manifest}: unknown path dependency {dep}"
            );
            let dev_self = section.contains("dev-dependencies") && dep == "offload-image";
            assert!(
                allowed.contains(&dep) || dev_self,
                "{manifest} ({section}) depends on {dep}: not allowed for {package}"
            );
            seen += 1;
        }
        let code = std::fs::read_to_string(root.join(lib)).unwrap();
        assert_eq!(
            code.contains("#![forbid(unsafe_code)]"),
            !unsafe_ok,
            "{lib}: unsafe is forbidden outside the FFI crates"
        );
    }
    assert!(seen >= 6, "the check saw {seen} path dependencies");
}
