//! Every section reference in the repository resolves to a heading of a document in `docs/`.
//!
//! Sources, tests, scripts and the documents themselves cite the project's format and rule
//! documents as `NAME.md §N.M` (meaning `docs/NAME.md`, the heading numbered `N.M`). This
//! test reads every text file of the repository (build output, `.git`, test data and fuzz
//! corpora aside) and fails, naming `file:line`, when a reference points at a document that
//! is not in `docs/` or at a section number that no heading of it carries.
//!
//! How a reference is attributed to a document:
//! * `NAME.md §N` (backticks, spaces and a line break with comment markers allowed between
//!   them) names the document; references chained to it (`§1.1, §1.2`, `§2–§4`, `§9.4/§10`,
//!   `§6.1–6.4`) belong to it too.
//! * A bare `§N` in `docs/NAME.md` refers to that document itself.
//! * A bare `§N` anywhere else refers to the document named last before it in the same file;
//!   a bare reference with no document named before it is reported as ambiguous.
//!
//! The section sign is written `\u{a7}` in this file so that its own examples are not read as
//! references; the file is also skipped by the walk.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const SECTION: char = '\u{a7}';

/// Directories (relative to the repository root) that hold no sources.
const SKIP_DIRS: &[&str] = &[
    ".git",
    "target",
    "tests/data",
    "fuzz/target",
    "fuzz/corpus",
    "fuzz/artifacts",
    "fuzz/coverage",
    "loader-sim/target",
    "nostd-smoke/target",
];

/// File name endings of text files worth reading.
const TEXT_EXT: &[&str] = &[
    "rs", "c", "h", "sh", "md", "toml", "map", "py", "txt", "ll", "s", "yml", "yaml",
];

/// Section numbers of one document: the first token of every Markdown heading that is a
/// dotted number (`## 2. Layout` → `2`, `### 2.1 Layout` → `2.1`).
fn headings(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let first = line[hashes..].split_whitespace().next().unwrap_or("");
        let num = first.trim_end_matches('.');
        if is_section_number(num) {
            out.insert(num.to_string());
        }
    }
    out
}

fn is_section_number(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

#[derive(Debug)]
enum Token {
    /// `NAME.md` (the name without `.md`), ending at byte `end`.
    Mention { name: String, end: usize },
    /// `§N[.M]*[–N.M]`: the numbers, the byte range of the reference.
    Ref {
        numbers: Vec<String>,
        start: usize,
        end: usize,
    },
    /// A section sign with no number after it.
    Stray { start: usize },
}

/// A dotted number at the start of `s`, and its length in bytes.
fn number_at(s: &str) -> Option<(String, usize)> {
    let mut len = 0;
    let b = s.as_bytes();
    loop {
        let digits = b[len..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            break;
        }
        len += digits;
        if b.get(len) == Some(&b'.') && b.get(len + 1).is_some_and(|c| c.is_ascii_digit()) {
            len += 1;
        } else {
            break;
        }
    }
    (len > 0).then(|| (s[..len].to_string(), len))
}

fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        if !text.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let rest = &text[i..];
        if rest.starts_with(SECTION) {
            let start = i;
            let after = i + SECTION.len_utf8();
            match number_at(&text[after..]) {
                Some((n, len)) => {
                    let mut numbers = vec![n];
                    let mut end = after + len;
                    // A range whose second end has no sign: `§6.1–6.4`, `§6.1-6.4`.
                    for dash in ["\u{2013}", "-"] {
                        if text[end..].starts_with(dash) {
                            if let Some((n2, len2)) = number_at(&text[end + dash.len()..]) {
                                numbers.push(n2);
                                end += dash.len() + len2;
                            }
                            break;
                        }
                    }
                    out.push(Token::Ref {
                        numbers,
                        start,
                        end,
                    });
                    i = end;
                }
                None => {
                    out.push(Token::Stray { start });
                    i = after;
                }
            }
            continue;
        }
        if rest.starts_with(".md") && i > 0 {
            // Walk back over the name: an upper-case letter, then upper-case letters,
            // digits and underscores.
            let mut s = i;
            while s > 0
                && (b[s - 1].is_ascii_uppercase() || b[s - 1].is_ascii_digit() || b[s - 1] == b'_')
            {
                s -= 1;
            }
            let name = &text[s..i];
            let before_ok = s == 0 || !(b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'-');
            let after_ok = !b
                .get(i + 3)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
            if !name.is_empty() && b[s].is_ascii_uppercase() && before_ok && after_ok {
                out.push(Token::Mention {
                    name: name.to_string(),
                    end: i + 3,
                });
            }
            i += 3;
            continue;
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// Text between a document name and its `§`: closing quotes, white space, and the comment
/// markers of a line break inside a comment.
fn joins_name(gap: &str) -> bool {
    gap.len() < 40
        && gap.chars().all(|c| {
            c.is_whitespace()
                || matches!(
                    c,
                    '`' | '\'' | '"' | '/' | '!' | '*' | '#' | '-' | '>' | ':'
                )
        })
        && gap.matches('\n').count() <= 1
}

/// Text between two references of one chain: `, `, ` and `, `–`, `/`, ...
fn joins_chain(gap: &str) -> bool {
    let g = gap.trim();
    matches!(
        g,
        "," | "and" | ", and" | "or" | "/" | "\u{2013}" | "-" | "to"
    )
}

/// One reference found: where, to which document, which section.
#[derive(Debug, PartialEq, Eq)]
struct Found {
    line: usize,
    doc: Option<String>,
    section: String,
}

/// Problems of one file's text. `own` is the document the file is (`docs/NAME.md`), if any.
fn references(text: &str, own: Option<&str>) -> (Vec<Found>, Vec<(usize, String)>) {
    let line_of = |pos: usize| text[..pos].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let mut last_mention: Option<String> = None;
    // The previous token and, for a reference, the document it was attributed to.
    let mut prev_end = 0usize;
    let mut prev_mention: Option<String> = None;
    let mut prev_ref_doc: Option<Option<String>> = None;
    for t in tokens(text) {
        match t {
            Token::Mention { name, end } => {
                last_mention = Some(name.clone());
                prev_mention = Some(name);
                prev_ref_doc = None;
                prev_end = end;
            }
            Token::Stray { start } => {
                problems.push((
                    line_of(start),
                    format!("`{SECTION}` not followed by a section number"),
                ));
                prev_mention = None;
                prev_ref_doc = None;
                prev_end = start + SECTION.len_utf8();
            }
            Token::Ref {
                numbers,
                start,
                end,
            } => {
                let gap = &text[prev_end..start];
                let doc = if let Some(name) = prev_mention.as_ref().filter(|_| joins_name(gap)) {
                    Some(name.clone())
                } else if let Some(d) = prev_ref_doc.as_ref().filter(|_| joins_chain(gap)) {
                    d.clone()
                } else if let Some(own) = own {
                    Some(own.to_string())
                } else {
                    last_mention.clone()
                };
                for n in numbers {
                    found.push(Found {
                        line: line_of(start),
                        doc: doc.clone(),
                        section: n,
                    });
                }
                prev_mention = None;
                prev_ref_doc = Some(doc);
                prev_end = end;
            }
        }
    }
    (found, problems)
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(read) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = read.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let rel = p
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if p.is_dir() {
            if !SKIP_DIRS.contains(&rel.as_str()) {
                text_files(root, &p, out);
            }
        } else {
            let ext_ok = p
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| TEXT_EXT.contains(&e));
            let ci = rel.starts_with(".ci/");
            if (ext_ok || ci) && rel != "tests/suite/doc_refs.rs" {
                out.push(p);
            }
        }
    }
}

/// Reads `docs/` and checks every file: the failures, and how many references were checked.
fn check_repository(root: &Path) -> (Vec<String>, usize) {
    let mut docs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    if let Ok(read) = fs::read_dir(root.join("docs")) {
        for e in read.flatten() {
            let p = e.path();
            if p.extension().and_then(|e| e.to_str()) == Some("md") {
                let name = p.file_stem().unwrap().to_string_lossy().into_owned();
                let text = fs::read_to_string(&p).unwrap_or_default();
                docs.insert(name, headings(&text));
            }
        }
    }
    let mut files = Vec::new();
    text_files(root, root, &mut files);
    let mut failures = Vec::new();
    let mut checked = 0;
    for path in files {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let own = rel
            .strip_prefix("docs/")
            .and_then(|r| r.strip_suffix(".md"))
            .filter(|r| !r.contains('/'));
        let (found, problems) = references(&text, own);
        for (line, what) in problems {
            failures.push(format!("{rel}:{line}: {what}"));
        }
        for f in found {
            checked += 1;
            let Some(doc) = f.doc else {
                failures.push(format!(
                    "{rel}:{}: `{SECTION}{}` names no document (write `NAME.md {SECTION}{}`)",
                    f.line, f.section, f.section
                ));
                continue;
            };
            match docs.get(&doc) {
                None => failures.push(format!(
                    "{rel}:{}: `{doc}.md {SECTION}{}`: there is no docs/{doc}.md",
                    f.line, f.section
                )),
                Some(h) if !h.contains(&f.section) => failures.push(format!(
                    "{rel}:{}: `{doc}.md {SECTION}{}`: docs/{doc}.md has no heading numbered {}",
                    f.line, f.section, f.section
                )),
                Some(_) => {}
            }
        }
    }
    (failures, checked)
}

#[test]
fn every_section_reference_resolves_to_a_heading_in_docs() {
    let (failures, checked) = check_repository(&repo_root());
    assert!(
        checked > 100,
        "only {checked} references found: is the walk reading the sources?"
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} section references do not resolve:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn attribution_follows_names_chains_and_context() {
    let text = "//! Layout (`FORMATS.md` \u{a7}2.1, \u{a7}2.2\u{2013}\u{a7}2.4).\n\
                /// see COMPATIBILITY.md\n/// \u{a7}7.5 then \u{a7}10 and \u{a7}6.1\u{2013}6.4\n";
    let (found, problems) = references(text, None);
    assert!(problems.is_empty());
    let got: Vec<(usize, &str, &str)> = found
        .iter()
        .map(|f| (f.line, f.doc.as_deref().unwrap(), f.section.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (1, "FORMATS", "2.1"),
            (1, "FORMATS", "2.2"),
            (1, "FORMATS", "2.4"),
            (3, "COMPATIBILITY", "7.5"),
            (3, "COMPATIBILITY", "10"),
            (3, "COMPATIBILITY", "6.1"),
            (3, "COMPATIBILITY", "6.4"),
        ]
    );
    // In docs/NAME.md a bare reference is to NAME itself, a named one to the named document.
    let (found, _) = references(
        "see \u{a7}3 and `REGISTRATION.md` \u{a7}1.9; \u{a7}4",
        Some("FORMATS"),
    );
    let docs: Vec<_> = found.iter().map(|f| f.doc.as_deref().unwrap()).collect();
    assert_eq!(docs, ["FORMATS", "REGISTRATION", "FORMATS"]);
}

#[test]
fn the_check_fails_on_dangling_and_ambiguous_references() {
    let dir = std::env::temp_dir().join(format!("doc-refs-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("docs")).unwrap();
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::write(
        dir.join("docs/FORMATS.md"),
        "# Formats\n\n## 2. Bundles\n\n### 2.1 Layout\n",
    )
    .unwrap();
    fs::write(
        dir.join("src/a.rs"),
        "//! \u{a7}1 first\n//! `FORMATS.md` \u{a7}2.1 fine, \u{a7}2.9 dangling\n\
         //! `STACK.md` \u{a7}2 no such document\n//! \u{a7}\n",
    )
    .unwrap();
    let (failures, checked) = check_repository(&dir);
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(checked, 4);
    assert_eq!(failures.len(), 4, "{failures:#?}");
    assert!(failures[0].starts_with("src/a.rs:4:"), "{failures:#?}");
    assert!(failures[1].starts_with("src/a.rs:1:") && failures[1].contains("names no document"));
    assert!(
        failures[2].starts_with("src/a.rs:2:") && failures[2].contains("no heading numbered 2.9")
    );
    assert!(failures[3].starts_with("src/a.rs:3:") && failures[3].contains("no docs/STACK.md"));
}
