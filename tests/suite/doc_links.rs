//! The README stays a front door, and the documentation's links lead somewhere.
//!
//! * `README.md` is at most 12 KiB and 175 lines: measurement tables, fuzz statistics and
//!   findings belong in `docs/` (see `docs/README.md`).
//! * Every relative link in `README.md`, `docs/*.md`, `benches/README.md` and
//!   `fuzz/README.md` points at a file or directory of the repository, and a `#fragment` into
//!   a Markdown file names one of its headings (GitHub's anchor spelling).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const README_MAX_BYTES: usize = 12 * 1024;
const README_MAX_LINES: usize = 175;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files whose links are checked, relative to the repository root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![
        PathBuf::from("README.md"),
        PathBuf::from("benches/README.md"),
        PathBuf::from("fuzz/README.md"),
    ];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("md"))
        .map(|p| p.strip_prefix(root).unwrap().to_path_buf())
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings (outside code fences).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !fence && (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            out.insert(slug(&line[hashes..]));
        }
    }
    out
}

/// Inline link targets `](target)` outside code fences and code spans, with their lines.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        // Drop code spans, whose brackets are not links.
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((n + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    out
}

fn check_links(root: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for doc in documents(root) {
        let Ok(text) = fs::read_to_string(root.join(&doc)) else {
            failures.push(format!("{}: missing", doc.display()));
            continue;
        };
        let dir = doc.parent().unwrap_or(Path::new(""));
        for (line, target) in links(&text) {
            let at = format!("{}:{line}: `{target}`", doc.display());
            if target.is_empty() {
                failures.push(format!("{at}: empty link"));
                continue;
            }
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                root.join(&doc)
            } else {
                root.join(dir).join(path)
            };
            if !file.exists() {
                failures.push(format!("{at}: no such file"));
                continue;
            }
            if let Some(f) = fragment {
                if file.extension().and_then(|e| e.to_str()) == Some("md") {
                    let target_text = fs::read_to_string(&file).unwrap_or_default();
                    if !anchors(&target_text).contains(f) {
                        failures.push(format!("{at}: no heading with anchor #{f}"));
                    }
                }
            }
        }
    }
    failures
}

#[test]
fn readme_is_a_front_door() {
    let text = fs::read_to_string(root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        text.len() <= README_MAX_BYTES && lines <= README_MAX_LINES,
        "README.md is {} bytes and {lines} lines (at most {README_MAX_BYTES} bytes, \
         {README_MAX_LINES} lines): move records to docs/",
        text.len()
    );
}

#[test]
fn relative_links_point_at_files_and_headings() {
    let failures = check_links(&root());
    assert!(
        failures.is_empty(),
        "broken links:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_link_check_finds_broken_links() {
    assert_eq!(
        slug(" 2. Decoder and hash baselines"),
        "2-decoder-and-hash-baselines"
    );
    assert_eq!(
        slug(" Wrapping device images (`loader-sim wrap`)"),
        "wrapping-device-images-loader-sim-wrap"
    );
    let text = "See [a](docs/A.md#b), `[not](a link)`, [web](https://example.org).\n\
                ```\n[fenced](x)\n```\n[c](#top)\n";
    assert_eq!(
        links(text),
        [
            (1, "docs/A.md#b".to_string()),
            (1, "https://example.org".to_string()),
            (5, "#top".to_string()),
        ]
    );
    let dir = std::env::temp_dir().join(format!("doc-links-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("docs")).unwrap();
    fs::create_dir_all(dir.join("benches")).unwrap();
    fs::create_dir_all(dir.join("fuzz")).unwrap();
    fs::write(
        dir.join("README.md"),
        "[ok](docs/A.md#real-heading) [gone](docs/B.md) [bad](docs/A.md#nope)\n",
    )
    .unwrap();
    fs::write(
        dir.join("docs/A.md"),
        "# A\n\n## Real heading\n[up](../README.md)\n",
    )
    .unwrap();
    fs::write(dir.join("benches/README.md"), "").unwrap();
    fs::write(dir.join("fuzz/README.md"), "").unwrap();
    let failures = check_links(&dir);
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(failures.len(), 2, "{failures:#?}");
    assert!(failures[0].contains("docs/B.md") && failures[0].contains("no such file"));
    assert!(failures[1].contains("#nope"));
}
