//! doctor's verdict per installed distribution (`--python`): a package runs on a device
//! when every library of it with device code loads there. A count of files says little:
//! a profiling library with stray images for an old GPU made "14 of 39 libraries load"
//! of an install whose PyTorch, cuBLAS and cuDNN load nothing (issue 46). The headline
//! counts packages and says what the count means; doctor's per-library line follows it.

use serde::Serialize;

/// One library's verdict on one device, as the headline needs it.
pub struct LibraryVerdict<'a> {
    /// The distribution that owns it (`name version`), if one does.
    pub package: Option<&'a str>,
    /// Nothing stands in the device's way.
    pub loads: bool,
}

/// One package on one device (`doctor --json`'s summary record, `packages`).
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct PackageVerdict {
    /// `name version`.
    pub package: String,
    /// The device as given.
    pub device: String,
    /// Its libraries with device code.
    pub libraries: usize,
    /// How many of them load.
    pub libraries_loading: usize,
    /// `runs` (every one loads), `partial` (some), `none`.
    pub status: &'static str,
}

/// The verdict of every package among `libraries` for `device`, in first-seen order;
/// libraries no distribution owns are not counted.
pub fn verdicts(device: &str, libraries: &[LibraryVerdict<'_>]) -> Vec<PackageVerdict> {
    let mut out: Vec<PackageVerdict> = Vec::new();
    for lib in libraries {
        let Some(package) = lib.package else { continue };
        let i = match out.iter().position(|p| p.package == package) {
            Some(i) => i,
            None => {
                out.push(PackageVerdict {
                    package: package.to_string(),
                    device: device.to_string(),
                    libraries: 0,
                    libraries_loading: 0,
                    status: "none",
                });
                out.len() - 1
            }
        };
        out[i].libraries += 1;
        out[i].libraries_loading += usize::from(lib.loads);
    }
    for p in &mut out {
        p.status = if p.libraries_loading == p.libraries {
            "runs"
        } else if p.libraries_loading == 0 {
            "none"
        } else {
            "partial"
        };
    }
    out
}

/// The headline of one device's table when packages are known: `None` otherwise (the
/// per-library line stands alone). `label` is the device as shown (`sm_61`,
/// `RTX 4090 (sm_89)`).
pub fn headline(label: &str, packages: &[PackageVerdict]) -> Option<String> {
    if packages.is_empty() {
        return None;
    }
    let runs: Vec<&str> = names(packages, "runs");
    let mut text = format!(
        "{label}: {} of {} packages run (a package runs when every library of it with device code loads)",
        runs.len(),
        packages.len()
    );
    for status in ["runs", "partial", "none"] {
        let these = names(packages, status);
        if !these.is_empty() {
            text.push_str(&format!("\n  {status}: {}", these.join(", ")));
        }
    }
    Some(text)
}

/// The packages of `status`.
fn names<'a>(packages: &'a [PackageVerdict], status: &str) -> Vec<&'a str> {
    packages
        .iter()
        .filter(|p| p.status == status)
        .map(|p| p.package.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The install of issue 46 in small: a CUPTI package whose libraries load (stray old
    /// images), torch and cuBLAS loading nothing, a package with one of two libraries.
    #[test]
    fn packages_count_not_files() {
        let lib = |package, loads| LibraryVerdict {
            package: Some(package),
            loads,
        };
        let libs = [
            lib("nvidia-cuda-cupti 13.0.85", true),
            lib("nvidia-cuda-cupti 13.0.85", true),
            lib("nvidia-cuda-cupti 13.0.85", true),
            lib("torch 2.15.0", false),
            lib("nvidia-cublas 13.1.0.3", false),
            lib("mixed 1.0", true),
            lib("mixed 1.0", false),
            LibraryVerdict {
                package: None,
                loads: true,
            },
        ];
        let v = verdicts("sm_61", &libs);
        let status: Vec<(&str, &str)> = v.iter().map(|p| (p.package.as_str(), p.status)).collect();
        assert_eq!(
            status,
            [
                ("nvidia-cuda-cupti 13.0.85", "runs"),
                ("torch 2.15.0", "none"),
                ("nvidia-cublas 13.1.0.3", "none"),
                ("mixed 1.0", "partial"),
            ]
        );
        let h = headline("sm_61", &v).unwrap();
        assert!(h.starts_with("sm_61: 1 of 4 packages run ("), "{h}");
        assert!(
            h.contains("\n  none: torch 2.15.0, nvidia-cublas 13.1.0.3"),
            "{h}"
        );
        assert!(h.contains("\n  partial: mixed 1.0\n"), "{h}");
        assert!(h.starts_with("sm_61: 1 of 4 packages run ("), "{h}");
        assert_eq!(headline("sm_61", &[]), None);
    }
}
