//! The CUDA runtime an install uses, and the driver it needs (`doctor`): a CUDA runtime
//! refuses to start (`cudaErrorInsufficientDriver`, 35) on a driver older than its floor,
//! whatever the fat binaries hold.
//!
//! Found by name among the files scanned (and the members of the wheels among them):
//! * `libcudart.so.N[.M[.P]]` (Linux) and `cudart64_N.dll` / `cudart64_NM.dll` (Windows:
//!   `cudart64_13.dll`, `cudart64_110.dll` is 11.0): the runtime's major version;
//! * the distribution `nvidia-cuda-runtime[-cuNN]` (its `.dist-info` directory or its
//!   wheel file, `nvidia_cuda_runtime-13.5.37.dist-info`): the version `13.5`;
//! * `torch/version.py`: the CUDA version PyTorch was built with (`cuda = '13.2'`), which
//!   is the runtime it loads.
//!
//! The floor is the library's rule (`offload_image::driver::runtime_floor`, with its
//! sources): from CUDA 11 on the driver of the major release's `.0` toolkit (13.x:
//! 580.65.06; 12.x: 525.60.13; 11.x: 450.80.02), before CUDA 11 the driver of the
//! runtime's own release. The thresholds are the Linux drivers'.

use std::io::Read;
use std::path::{Path, PathBuf};

use offload_image::driver::{runtime_floor, DriverVersion};
use serde::Serialize;

/// A CUDA runtime version as found: the major version, and the minor one where known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuntimeVersion {
    /// `13`.
    pub major: u8,
    /// `5`, when the evidence says it.
    pub minor: Option<u8>,
}

impl std::fmt::Display for RuntimeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.minor {
            Some(m) => write!(f, "{}.{m}", self.major),
            None => write!(f, "{}", self.major),
        }
    }
}

/// One piece of evidence: a runtime version and where it was seen.
#[derive(Clone, Debug)]
pub struct Evidence {
    /// The version it gives.
    pub version: RuntimeVersion,
    /// What was seen (`libcudart.so.13`, `nvidia-cuda-runtime 13.5.37`, `torch/version.py`)
    /// and where: the file, or `wheel!member`.
    pub seen: String,
}

/// The version a file name gives: `libcudart.so.13[.0.96]`, `cudart64_13.dll`,
/// `cudart64_110.dll`.
fn of_library_name(name: &str) -> Option<RuntimeVersion> {
    if let Some(rest) = name.strip_prefix("libcudart.so.") {
        let mut fields = rest.split('.');
        let major = small_number(fields.next()?)?;
        let minor = fields.next().and_then(small_number);
        return (major >= 1).then_some(RuntimeVersion { major, minor });
    }
    let digits = name
        .to_ascii_lowercase()
        .strip_prefix("cudart64_")?
        .strip_suffix(".dll")?
        .to_string();
    match digits.len() {
        1 | 2 => Some(RuntimeVersion {
            major: small_number(&digits)?,
            minor: None,
        }),
        // `cudart64_110.dll` (11.0), `cudart64_101.dll` (10.1): major and minor digit.
        3 => Some(RuntimeVersion {
            major: small_number(digits.get(..2)?)?,
            minor: small_number(digits.get(2..)?),
        }),
        _ => None,
    }
}

/// A decimal number of at most three digits that fits a `u8`.
fn small_number(text: &str) -> Option<u8> {
    (!text.is_empty() && text.len() <= 3 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// The version of a distribution directory or wheel named `nvidia_cuda_runtime[_cuNN]-X.Y...`
/// (`.dist-info` or `-py3-none-....whl` after the version), with the distribution's name
/// and version as seen.
fn of_distribution(name: &str) -> Option<(RuntimeVersion, String)> {
    let lower = name.to_ascii_lowercase().replace('-', "_");
    let rest = lower.strip_prefix("nvidia_cuda_runtime")?;
    // Suffix `_cu12`, `_cu13` or none, then `_VERSION`.
    let (suffix, version) = match rest.strip_prefix("_cu") {
        Some(r) => {
            let (cu, v) = r.split_once('_')?;
            (format!("-cu{cu}"), v)
        }
        None => (String::new(), rest.strip_prefix('_')?),
    };
    let version = version
        .split(['_', '/'])
        .next()?
        .trim_end_matches(".dist")
        .trim_end_matches(".dist_info");
    let mut fields = version.split('.');
    let major = small_number(fields.next()?)?;
    let minor = small_number(fields.next()?)?;
    let shown = format!(
        "nvidia-cuda-runtime{suffix} {}",
        version
            .chars()
            .filter(|c| c.is_ascii_digit() || *c == '.')
            .collect::<String>()
    );
    Some((
        RuntimeVersion {
            major,
            minor: Some(minor),
        },
        shown,
    ))
}

/// The CUDA version `torch/version.py` states (`cuda = '13.2'`,
/// `cuda: Optional[str] = '12.8'`); `None` for a CPU build (`cuda = None`).
fn of_torch_version_py(text: &str) -> Option<RuntimeVersion> {
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("cuda") else {
            continue;
        };
        if !rest.starts_with([' ', ':', '=']) {
            continue;
        }
        let value = rest.split_once('=')?.1.trim();
        let quoted = value
            .strip_prefix(['\'', '"'])
            .and_then(|v| v.strip_suffix(['\'', '"']))?;
        let mut fields = quoted.split('.');
        let major = small_number(fields.next()?)?;
        let minor = small_number(fields.next()?)?;
        return Some(RuntimeVersion {
            major,
            minor: Some(minor),
        });
    }
    None
}

/// The most of `torch/version.py` read: it is a few hundred bytes.
const VERSION_PY_LIMIT: u64 = 64 * 1024;

/// Every piece of evidence of a CUDA runtime among `files` (paths as `collect_files`
/// gives them) and the members of the wheels among them.
pub fn find(files: &[PathBuf]) -> Vec<Evidence> {
    let mut out = Vec::new();
    for path in files {
        let text = path.to_string_lossy();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.as_deref().unwrap_or("");
        look_at(&text, name, &mut || read_small(path), &text, &mut out);
        if name.ends_with(".whl") {
            if let Some((v, shown)) = of_distribution(name) {
                out.push(Evidence {
                    version: v,
                    seen: format!("{shown} ({text})"),
                });
            }
            members(path, &mut out);
        }
    }
    out.dedup_by(|a, b| a.version == b.version && a.seen == b.seen);
    out
}

/// The evidence of one file: `full` is its path (or `wheel!member`), `name` its last
/// component, `read` its content on demand, `shown` how to name it.
fn look_at(
    full: &str,
    name: &str,
    read: &mut dyn FnMut() -> Option<String>,
    shown: &str,
    out: &mut Vec<Evidence>,
) {
    if let Some(v) = of_library_name(name) {
        out.push(Evidence {
            version: v,
            seen: shown.to_string(),
        });
    }
    let parent_dir = |full: &str| -> Option<String> {
        let mut parts = full.rsplit(['/', '\\']);
        parts.next()?;
        parts.next().map(str::to_string)
    };
    if name == "METADATA" {
        if let Some(dir) = parent_dir(full).filter(|d| d.ends_with(".dist-info")) {
            if let Some((v, dist)) = of_distribution(&dir) {
                out.push(Evidence {
                    version: v,
                    seen: format!("{dist} ({shown})"),
                });
            }
        }
    }
    if name == "version.py" && parent_dir(full).as_deref() == Some("torch") {
        if let Some(v) = read().as_deref().and_then(of_torch_version_py) {
            out.push(Evidence {
                version: v,
                seen: format!("PyTorch built for CUDA {v} ({shown})"),
            });
        }
    }
}

/// The first [`VERSION_PY_LIMIT`] bytes of `path` as text.
fn read_small(path: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(VERSION_PY_LIMIT)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The evidence among the members of wheel `path` (its central directory; the content of
/// `torch/version.py` only).
fn members(path: &Path, out: &mut Vec<Evidence>) {
    let Ok(mut zip) = crate::wheel::Zip::open(path) else {
        return;
    };
    for (i, member) in zip.file_names() {
        let name = member.rsplit('/').next().unwrap_or(&member).to_string();
        let shown = format!("{}!{member}", path.display());
        let mut read = || -> Option<String> {
            let file = zip.member_file(i).ok()?;
            let mut text = String::new();
            file.take(VERSION_PY_LIMIT).read_to_string(&mut text).ok()?;
            Some(text)
        };
        look_at(&member, &name, &mut read, &shown, out);
    }
}

/// The oldest Linux driver a CUDA runtime of `version` starts on
/// ([`offload_image::driver::runtime_floor`]), and the rule that says so; `None` for a
/// version the table does not know.
pub fn driver_floor(version: RuntimeVersion) -> Option<(DriverVersion, String)> {
    let floor = runtime_floor(version.major, version.minor)?;
    let driver = floor.driver;
    let rule = if floor.minor_compatible {
        format!(
            "CUDA {}.x minor-version compatibility: driver {driver} (CUDA {}.0's) or later",
            version.major, version.major
        )
    } else {
        format!(
            "CUDA {version} (before CUDA 11, no minor-version compatibility): driver {driver} or later"
        )
    };
    Some((driver, rule))
}

/// The judgement of the runtimes found against a driver (JSON field names are part of
/// `doctor --json`'s contract: docs/CLI.md).
#[derive(Serialize, Clone, Debug)]
pub struct Finding {
    /// Always `"cuda-runtime-driver"`: what this record is.
    pub finding: &'static str,
    /// The runtime version (`13.5`, or `13` when only the major version is known).
    pub cuda_runtime: String,
    /// Where it was seen, one entry per piece of evidence.
    pub seen: Vec<String>,
    /// The oldest driver it starts on.
    pub needs_driver: String,
    /// The driver judged.
    pub driver: String,
    /// Why, with the rule.
    pub reason: String,
}

/// The runtimes of `evidence` that `driver` is too old for, one finding per major
/// version (the most precise version seen for it), the highest floor first.
pub fn judge(evidence: &[Evidence], driver: DriverVersion) -> Vec<(DriverVersion, Finding)> {
    let mut majors: Vec<u8> = evidence.iter().map(|e| e.version.major).collect();
    majors.sort_unstable();
    majors.dedup();
    let mut out = Vec::new();
    for major in majors {
        let mine: Vec<&Evidence> = evidence
            .iter()
            .filter(|e| e.version.major == major)
            .collect();
        let version = mine
            .iter()
            .map(|e| e.version)
            .max()
            .unwrap_or(RuntimeVersion { major, minor: None });
        let Some((floor, rule)) = driver_floor(version) else {
            continue;
        };
        if driver >= floor {
            continue;
        }
        out.push((
            floor,
            Finding {
                finding: "cuda-runtime-driver",
                cuda_runtime: version.to_string(),
                seen: mine.iter().map(|e| e.seen.clone()).collect(),
                needs_driver: floor.to_string(),
                driver: driver.to_string(),
                reason: format!(
                    "the CUDA {version} runtime does not start on driver {driver} \
                     (cudaErrorInsufficientDriver): {rule}"
                ),
            },
        ));
    }
    out.sort_by_key(|b| std::cmp::Reverse(b.0));
    out
}

/// doctor's findings for the install made of `files`: none unless a driver is known and a
/// CUDA device is judged ([`judge`] of what [`find`] finds).
pub fn findings(
    files: &[PathBuf],
    driver: Option<DriverVersion>,
    cuda_devices: bool,
) -> Vec<(DriverVersion, Finding)> {
    match driver {
        Some(d) if cuda_devices => judge(&find(files), d),
        _ => Vec::new(),
    }
}

/// A driver hint's version raised to `floor` when it is older (the driver that makes the
/// whole install run, not only its fat binaries).
pub fn raise(value: &mut Option<String>, floor: DriverVersion) {
    let older = value
        .as_deref()
        .and_then(DriverVersion::parse)
        .is_none_or(|v| v < floor);
    if older {
        *value = Some(floor.to_string());
    }
}

/// The text lines of `findings` (doctor's table output), the hint last.
pub fn text(findings: &[(DriverVersion, Finding)]) -> Vec<String> {
    let mut lines = Vec::new();
    for (_, f) in findings {
        lines.push(format!("CUDA runtime: {}", f.reason));
        for s in &f.seen {
            lines.push(format!("  found: {s}"));
        }
    }
    if let Some((floor, _)) = findings.first() {
        lines.push(format!(
            "  hint: NVIDIA driver {floor} or later (for the runtime; the fat binaries' own needs are in the tables)"
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: u8, minor: Option<u8>) -> RuntimeVersion {
        RuntimeVersion { major, minor }
    }

    #[test]
    fn names_give_versions() {
        assert_eq!(of_library_name("libcudart.so.13"), Some(v(13, None)));
        assert_eq!(
            of_library_name("libcudart.so.12.4.127"),
            Some(v(12, Some(4)))
        );
        assert_eq!(of_library_name("cudart64_13.dll"), Some(v(13, None)));
        assert_eq!(of_library_name("cudart64_110.dll"), Some(v(11, Some(0))));
        assert_eq!(of_library_name("libcudart.so"), None);
        assert_eq!(of_library_name("libcudart_static.a"), None);
        assert_eq!(
            of_distribution("nvidia_cuda_runtime-13.5.37.dist-info").map(|d| d.0),
            Some(v(13, Some(5)))
        );
        assert_eq!(
            of_distribution("nvidia_cuda_runtime_cu12-12.4.127.dist-info").map(|d| d.1),
            Some("nvidia-cuda-runtime-cu12 12.4.127".to_string())
        );
        assert_eq!(
            of_distribution("nvidia_cuda_runtime-13.0.96-py3-none-manylinux_2_27_x86_64.whl")
                .map(|d| d.0),
            Some(v(13, Some(0)))
        );
        assert_eq!(of_distribution("nvidia_cuda_runtime_foo"), None);
        assert_eq!(
            of_torch_version_py("__version__ = '2.15.0+cu132'\ncuda: Optional[str] = '13.2'\n"),
            Some(v(13, Some(2)))
        );
        assert_eq!(of_torch_version_py("cuda = None\n"), None);
    }

    /// The floors of NVIDIA's minor-version compatibility table.
    #[test]
    fn floors() {
        let floor = |major, minor| driver_floor(v(major, minor)).map(|f| f.0.to_string());
        assert_eq!(floor(13, Some(5)).as_deref(), Some("580.65.06"));
        assert_eq!(floor(13, None).as_deref(), Some("580.65.06"));
        assert_eq!(floor(12, Some(8)).as_deref(), Some("525.60.13"));
        assert_eq!(floor(11, Some(8)).as_deref(), Some("450.80.02"));
        assert_eq!(floor(10, Some(2)).as_deref(), Some("440.33.01"));
        assert_eq!(floor(10, None), None);
        let d = |s| DriverVersion::parse(s).unwrap();
        let seen = [Evidence {
            version: v(13, Some(2)),
            seen: "x".into(),
        }];
        assert_eq!(judge(&seen, d("535.183.01")).len(), 1);
        assert!(judge(&seen, d("580.159.04")).is_empty());
        assert!(judge(&seen, d("580.65.06")).is_empty());
        let mut hint = Some("550.54.14".to_string());
        raise(&mut hint, d("580.65.06"));
        assert_eq!(hint.as_deref(), Some("580.65.06"));
        raise(&mut hint, d("525.60.13"));
        assert_eq!(hint.as_deref(), Some("580.65.06"));
    }
}
