//! A Python environment for `doctor --python`: the directories of its `sys.path` that hold
//! installed packages, and which installed distribution owns each file (the `RECORD` of
//! its `.dist-info`, `PEP 376`/`PEP 627`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Failure;

/// What the interpreter is asked: its `sys.path` directories, less the standard library's
/// and the current directory, one per line.
const SITE_DIRS: &str = r#"
import os, sys, sysconfig
std = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}
seen = set()
for p in sys.path:
    if not p or not os.path.isdir(p):
        continue
    r = os.path.realpath(p)
    if r in seen or r in std or any(r.startswith(s + os.sep) and "site-packages" not in r and "dist-packages" not in r for s in std):
        continue
    seen.add(r)
    print(r)
"#;

/// How long the interpreter may take to answer (`LOADER_SIM_CHILD_TIMEOUT` overrides it).
const PROBE_TIME: std::time::Duration = std::time::Duration::from_secs(60);

/// The most bytes read of each of its outputs (a `sys.path` is a few KB).
const PROBE_OUTPUT: usize = 1 << 20;

/// The package directories of the interpreter `python`'s `sys.path`. The interpreter runs
/// under bounds ([`crate::child`]): one that never ends, or floods its output, is killed
/// and is an error naming the bound (issue 43: `yes x` as the interpreter was an abort on a
/// 4 GiB allocation, `sleep 1000` a hang).
pub fn site_dirs(python: &Path) -> Result<Vec<PathBuf>, Failure> {
    let limit = crate::child::time_limit(PROBE_TIME).map_err(|m| Failure {
        message: m,
        kind: Some("usage"),
        offset: None,
    })?;
    let out = crate::child::run(
        Command::new(python)
            .args(["-c", SITE_DIRS])
            .env_remove("PYTHONHOME"),
        limit,
        PROBE_OUTPUT,
    )
    .map_err(|e| Failure::file(python, format!("cannot run the interpreter: {e}")))?
    .map_err(|stopped| Failure::file(python, format!("the interpreter failed: {stopped}")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        return Err(Failure::file(
            python,
            format!(
                "the interpreter failed ({}){}{}",
                crate::child::describe(&out.status),
                if stderr.is_empty() { "" } else { ": " },
                stderr
            ),
        ));
    }
    let dirs: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        return Err(Failure::file(
            python,
            "its sys.path has no package directory",
        ));
    }
    Ok(dirs)
}

/// Every file the `RECORD` of a distribution in `dirs` lists → `name version` of that
/// distribution (paths as `collect_files` gives them: joined to the directory, `..` kept
/// out).
pub fn owners(dirs: &[PathBuf]) -> HashMap<PathBuf, String> {
    let mut out = HashMap::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".dist-info") else {
                continue;
            };
            let Some((dist, version)) = stem.split_once('-') else {
                continue;
            };
            // The name as the distribution spells it (`METADATA`'s `Name:`, as pip shows
            // it); the directory has the normalised form (`nvidia_curand_cu12`).
            let dist = std::fs::read_to_string(e.path().join("METADATA"))
                .ok()
                .and_then(|m| metadata_name(&m))
                .unwrap_or_else(|| dist.to_string());
            let owner = format!("{dist} {version}");
            let Ok(record) = std::fs::read_to_string(e.path().join("RECORD")) else {
                continue;
            };
            for line in record.lines() {
                let path = record_path(line);
                if path.is_empty() || path.split('/').any(|c| c == "..") {
                    continue;
                }
                out.insert(dir.join(path), owner.clone());
            }
        }
    }
    out
}

/// The `Name:` field of a `METADATA` file (its header ends at the first empty line).
fn metadata_name(metadata: &str) -> Option<String> {
    metadata
        .lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix("Name:"))
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
}

/// The path of a `RECORD` line (CSV: `path,hash,size`; a path with a comma is quoted).
fn record_path(line: &str) -> String {
    if let Some(rest) = line.strip_prefix('"') {
        let mut path = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    path.push('"');
                    chars.next();
                } else {
                    break;
                }
            } else {
                path.push(c);
            }
        }
        path
    } else {
        line.split(',').next().unwrap_or_default().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::record_path;

    #[test]
    fn record_lines_are_csv() {
        assert_eq!(record_path("pkg/lib.so,sha256=abc,123"), "pkg/lib.so");
        assert_eq!(record_path("\"pkg/a,b.so\",sha256=abc,1"), "pkg/a,b.so");
        assert_eq!(record_path("\"pkg/a\"\"b\",,"), "pkg/a\"b");
    }
}
