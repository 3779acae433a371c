//! Bundle entry IDs as `clang-offload-bundler` 22 parses, normalises and matches them
//! (`OffloadTargetInfo`, `isCodeObjectCompatible`, `clang::parseTargetID`,
//! `getConflictTargetIDCombination`).
//!
//! This is deliberately local to the bundler: it reproduces LLVM 22's *tool* behaviour —
//! which processor names it knows (`StringToOffloadArch`), which target-ID features it
//! accepts — not the runtime selection rules of `COMPATIBILITY.md` that
//! `offload_image::arch` implements from newer sources. A unit test checks that the two
//! tables agree wherever LLVM 22 does not differ (it does for gfx1250/gfx1251).

use std::collections::{BTreeMap, BTreeSet};

use crate::llvm::hashmap::StringMap;
use crate::llvm::triple::Triple;

/// Processor names `clang::StringToOffloadArch` knows in LLVM 22 (checked against
/// `clang-offload-bundler-22`: an ID whose processor is not listed is stored with an empty
/// target ID).
const OFFLOAD_ARCHS: &[&str] = &[
    "sm_20",
    "sm_21",
    "sm_30",
    "sm_32",
    "sm_35",
    "sm_37",
    "sm_50",
    "sm_52",
    "sm_53",
    "sm_60",
    "sm_61",
    "sm_62",
    "sm_70",
    "sm_72",
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_88",
    "sm_89",
    "sm_90",
    "sm_90a",
    "sm_100",
    "sm_100a",
    "sm_101",
    "sm_101a",
    "sm_103",
    "sm_103a",
    "sm_110",
    "sm_110a",
    "sm_120",
    "sm_120a",
    "sm_121",
    "sm_121a",
    "gfx600",
    "gfx601",
    "gfx602",
    "gfx700",
    "gfx701",
    "gfx702",
    "gfx703",
    "gfx704",
    "gfx705",
    "gfx801",
    "gfx802",
    "gfx803",
    "gfx805",
    "gfx810",
    "gfx9-generic",
    "gfx900",
    "gfx902",
    "gfx904",
    "gfx906",
    "gfx908",
    "gfx909",
    "gfx90a",
    "gfx90c",
    "gfx9-4-generic",
    "gfx942",
    "gfx950",
    "gfx10-1-generic",
    "gfx1010",
    "gfx1011",
    "gfx1012",
    "gfx1013",
    "gfx10-3-generic",
    "gfx1030",
    "gfx1031",
    "gfx1032",
    "gfx1033",
    "gfx1034",
    "gfx1035",
    "gfx1036",
    "gfx11-generic",
    "gfx1100",
    "gfx1101",
    "gfx1102",
    "gfx1103",
    "gfx1150",
    "gfx1151",
    "gfx1152",
    "gfx1153",
    "gfx12-generic",
    "gfx1200",
    "gfx1201",
    "gfx1250",
    "gfx1251",
    "amdgcnspirv",
    "graniterapids",
    "bmg_g21",
    "generic",
];

/// Target-ID features of AMDGPU processors (`getAllPossibleAMDGPUTargetIDFeatures`,
/// checked against `clang-offload-bundler-22`); processors not listed have none.
const AMDGPU_FEATURES: &[(&str, &[&str])] = &[
    ("gfx801", &["xnack"]),
    ("gfx810", &["xnack"]),
    ("gfx900", &["xnack"]),
    ("gfx902", &["xnack"]),
    ("gfx904", &["xnack"]),
    ("gfx906", &["sramecc", "xnack"]),
    ("gfx908", &["sramecc", "xnack"]),
    ("gfx909", &["xnack"]),
    ("gfx90a", &["sramecc", "xnack"]),
    ("gfx90c", &["xnack"]),
    ("gfx942", &["sramecc", "xnack"]),
    ("gfx950", &["sramecc", "xnack"]),
    ("gfx1010", &["xnack"]),
    ("gfx1011", &["xnack"]),
    ("gfx1012", &["xnack"]),
    ("gfx1013", &["xnack"]),
    ("gfx9-generic", &["xnack"]),
    ("gfx9-4-generic", &["sramecc", "xnack"]),
    ("gfx10-1-generic", &["xnack"]),
];

/// True if `name` is a processor LLVM 22 knows (`StringToOffloadArch != UNKNOWN`).
pub fn is_offload_arch(name: &str) -> bool {
    OFFLOAD_ARCHS.contains(&name)
}

/// `clang::checkOffloadBundleID`: 5 or 6 `-`-separated components (at most 5 splits).
pub fn check_bundle_id(id: &str) -> bool {
    matches!(id.splitn(6, '-').count(), 5 | 6)
}

/// `OffloadTargetInfo`: an entry ID split the way the bundler splits it.
#[derive(Clone, Debug)]
pub struct TargetInfo {
    /// Offload kind (`host`, `hip`, `hipv4`, `openmp`, ...).
    pub kind: String,
    /// The triple built from the four components after the kind.
    pub triple: Triple,
    /// Target ID if its processor is a known offload architecture, else empty.
    pub target_id: String,
}

impl TargetInfo {
    /// Splits `id`; `None` if it does not have 5 or 6 components.
    pub fn new(id: &str) -> Option<TargetInfo> {
        let c: Vec<&str> = id.splitn(6, '-').collect();
        if !matches!(c.len(), 5 | 6) {
            return None;
        }
        let with_features = if c.len() == 6 { c[5] } else { "" };
        let processor = with_features.split(':').next().unwrap_or("");
        let target_id = if !processor.is_empty() && is_offload_arch(processor) {
            with_features.to_string()
        } else {
            String::new()
        };
        Some(TargetInfo {
            kind: c[0].to_string(),
            triple: Triple::from_parts(c[1], c[2], c[3], c[4]),
            target_id,
        })
    }

    /// `OffloadTargetInfo::str()`: the ID as the bundler stores it (3-field triple plus a
    /// `-` for AMDHSA, 4-field triple otherwise).
    pub fn str(&self) -> String {
        let triple = if self.triple.os() == Some("amdhsa") {
            format!("{}-", self.triple.normalize(3))
        } else {
            self.triple.normalize(4)
        };
        format!("{}-{}-{}", self.kind, triple, self.target_id)
    }

    /// `hasHostKind`.
    pub fn is_host(&self) -> bool {
        self.kind == "host"
    }

    /// `isOffloadKindValid`.
    pub fn kind_valid(&self) -> bool {
        matches!(self.kind.as_str(), "host" | "openmp" | "hip" | "hipv4")
    }

    /// `isTripleValid`.
    pub fn triple_valid(&self) -> bool {
        self.triple.arch().is_some()
    }

    /// `isOffloadKindCompatible`.
    pub fn kind_compatible(&self, target_kind: &str, hip_openmp: bool) -> bool {
        let k = self.kind.as_str();
        if k == target_kind
            || (k == "hip" && target_kind == "hipv4")
            || (k == "hipv4" && target_kind == "hip")
        {
            return true;
        }
        if hip_openmp {
            let hip_with_openmp =
                k.to_ascii_lowercase().starts_with("hip") && target_kind == "openmp";
            let openmp_with_hip =
                k == "openmp" && target_kind.to_ascii_lowercase().starts_with("hip");
            return hip_with_openmp || openmp_with_hip;
        }
        false
    }

    /// `operator==`.
    fn same(&self, other: &TargetInfo) -> bool {
        self.kind == other.kind
            && self.triple.is_compatible_with(&other.triple)
            && self.target_id == other.target_id
    }
}

/// A parsed target ID: processor and features (feature → on).
pub type FeatureMap = BTreeMap<String, bool>;

/// `parseTargetIDWithFormatCheckingOnly`: `None` for a malformed ID (a feature without
/// `+`/`-`, a repeated feature, an empty processor).
pub fn parse_target_id_format(id: &str) -> Option<(String, FeatureMap)> {
    let mut features = FeatureMap::new();
    if id.is_empty() {
        return Some((String::new(), features));
    }
    let (processor, mut rest) = match id.split_once(':') {
        Some((p, r)) => (p, r),
        None => (id, ""),
    };
    if processor.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let (f, r) = rest.split_once(':').unwrap_or((rest, ""));
        let on = match f.as_bytes().last() {
            Some(b'+') => true,
            Some(b'-') => false,
            _ => return None,
        };
        if features.insert(f[..f.len() - 1].to_string(), on).is_some() {
            return None;
        }
        rest = r;
    }
    Some((processor.to_string(), features))
}

/// `clang::parseTargetID`: the processor if the ID is well formed, the processor is valid
/// for the triple and every feature is one the processor supports.
fn parse_target_id(triple: &Triple, id: &str) -> Option<(String, FeatureMap)> {
    let (processor, features) = parse_target_id_format(id)?;
    let processor = if triple.is_amdgpu() {
        // getCanonicalArchName: only processors of the triple's architecture survive.
        if triple.is_amdgcn() && processor.starts_with("gfx") && is_offload_arch(&processor) {
            processor
        } else {
            String::new()
        }
    } else {
        processor
    };
    if processor.is_empty() {
        return None;
    }
    let allowed: &[&str] = if triple.is_amdgpu() {
        AMDGPU_FEATURES
            .iter()
            .find(|(p, _)| *p == processor)
            .map(|(_, f)| *f)
            .unwrap_or(&[])
    } else {
        &[]
    };
    if features.keys().any(|f| !allowed.contains(&f.as_str())) {
        return None;
    }
    Some((processor, features))
}

/// `isCodeObjectCompatible(CodeObjectInfo, TargetInfo)`.
pub fn is_compatible(code: &TargetInfo, target: &TargetInfo, hip_openmp: bool) -> bool {
    if code.same(target) {
        return true;
    }
    if !code.kind_compatible(&target.kind, hip_openmp)
        || !code.triple.is_compatible_with(&target.triple)
    {
        return false;
    }
    let (Some((cp, cf)), Some((tp, tf))) = (
        parse_target_id(&code.triple, &code.target_id),
        parse_target_id(&target.triple, &target.target_id),
    ) else {
        return false;
    };
    if cp != tp || cf.len() > tf.len() {
        return false;
    }
    cf.iter().all(|(f, on)| tf.get(f) == Some(on))
}

/// `getConflictTargetIDCombination` over the target IDs of one kind and triple, in sorted
/// order. LLVM dereferences the parse result without checking it (undefined behaviour,
/// a crash for some inputs); here a malformed target ID is an error.
pub fn conflicting_ids(ids: &BTreeSet<String>) -> Result<Option<(String, String)>, String> {
    let mut seen: StringMap<(String, FeatureMap)> = StringMap::new();
    for id in ids {
        let Some((processor, features)) = parse_target_id_format(id) else {
            return Err(format!(
                "invalid target ID '{id}': every feature needs a '+' or '-' sign and may appear only once"
            ));
        };
        if !seen.insert_if_absent(processor.as_bytes(), (id.clone(), features.clone())) {
            if let Some((first, existing)) = seen.get(processor.as_bytes()) {
                if features.keys().any(|f| !existing.contains_key(f)) {
                    return Ok(Some((first.clone(), id.clone())));
                }
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str) -> TargetInfo {
        TargetInfo::new(id).unwrap()
    }

    #[test]
    fn ids_are_stored_like_llvm_22() {
        // Every pair was observed with clang-offload-bundler-22 -list.
        for (given, stored) in [
            (
                "hip-amdgcn-amd-amdhsa-unknown-gfx906",
                "hip-amdgcn-amd-amdhsa--gfx906",
            ),
            (
                "hip-amdgcn-amd-amdhsa-gnu-gfx906",
                "hip-amdgcn-amd-amdhsa--gfx906",
            ),
            ("hip-amdgcn-amd-amdhsa--gfx9999", "hip-amdgcn-amd-amdhsa--"),
            (
                "hipv4-amdgcn--amdhsa--gfx906",
                "hipv4-amdgcn-unknown-amdhsa--gfx906",
            ),
            (
                "openmp-nvptx64-nvidia-cuda--sm_80",
                "openmp-nvptx64-nvidia-cuda-unknown-sm_80",
            ),
            (
                "openmp-nvptx64-nvidia-cuda--xyz",
                "openmp-nvptx64-nvidia-cuda-unknown-",
            ),
            ("host-x86_64--linux-gnu", "host-x86_64-unknown-linux-gnu-"),
            (
                "host-x86_64-unknown-linux-gnu-gfx906",
                "host-x86_64-unknown-linux-gnu-gfx906",
            ),
            (
                "openmp-amdgcn-amd-amdpal--gfx906",
                "openmp-amdgcn-amd-amdpal-unknown-gfx906",
            ),
            (
                "hip-amdgcn-amd-amdhsa--gfx906-foo",
                "hip-amdgcn-amd-amdhsa--",
            ),
        ] {
            assert_eq!(info(given).str(), stored, "{given}");
        }
        assert!(!check_bundle_id("host-x86_64-unknown-linux"));
        assert!(!info("hip-foo-amd-amdhsa--gfx906").triple_valid());
        assert!(!info("cuda-nvptx64-nvidia-cuda--sm_80").kind_valid());
    }

    #[test]
    fn matching_follows_is_code_object_compatible() {
        let req = info("hip-amdgcn-amd-amdhsa--gfx906:xnack+");
        assert!(is_compatible(
            &info("hipv4-amdgcn-amd-amdhsa--gfx906"),
            &req,
            false
        ));
        assert!(!is_compatible(
            &info("hipv4-amdgcn-amd-amdhsa--gfx906:xnack-"),
            &req,
            false
        ));
        let plain = info("hip-amdgcn-amd-amdhsa--gfx90a");
        assert!(!is_compatible(
            &info("hip-amdgcn-amd-amdhsa--gfx90a:xnack+"),
            &plain,
            false
        ));
        // openmp and hip only with -hip-openmp-compatible.
        let omp = info("openmp-amdgcn-amd-amdhsa--gfx906");
        assert!(!is_compatible(&omp, &req, false));
        assert!(is_compatible(&omp, &req, true));
        // Features a processor does not have make the request invalid (no match).
        assert!(!is_compatible(
            &info("hip-amdgcn-amd-amdhsa--gfx1030"),
            &info("hip-amdgcn-amd-amdhsa--gfx1030:xnack+"),
            false
        ));
    }

    #[test]
    fn conflicts() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(
            conflicting_ids(&set(&["gfx90a", "gfx90a:xnack+"])).unwrap(),
            Some(("gfx90a".into(), "gfx90a:xnack+".into()))
        );
        assert_eq!(
            conflicting_ids(&set(&["gfx90a:xnack-", "gfx90a:xnack+"])).unwrap(),
            None
        );
        assert!(conflicting_ids(&set(&["gfx906:xnack"])).is_err());
    }
}

#[cfg(test)]
mod agreement {
    use super::*;
    use offload_image::arch::amdgpu::{Feature, Processor};

    /// The LLVM 22 feature table above and the library's processor table
    /// (`COMPATIBILITY.md` §3, from newer LLVM sources) agree on every processor both know,
    /// except gfx1250/gfx1251: the library lists `sramecc` as selectable, LLVM 22's bundler
    /// accepts no target-ID feature for them (checked with `clang-offload-bundler-22`: a
    /// request `gfx1250:sramecc+` matches nothing).
    #[test]
    fn feature_table_matches_the_library() {
        for name in OFFLOAD_ARCHS
            .iter()
            .filter(|n| n.starts_with("gfx") && !matches!(**n, "gfx1250" | "gfx1251"))
        {
            let p =
                Processor::by_name(name).unwrap_or_else(|| panic!("{name} unknown to the library"));
            let ours: &[&str] = AMDGPU_FEATURES
                .iter()
                .find(|(n, _)| n == name)
                .map_or(&[], |(_, f)| f);
            let lib: Vec<&str> = [Feature::Sramecc, Feature::Xnack]
                .into_iter()
                .filter(|f| p.support(*f).is_selectable())
                .map(|f| f.name())
                .collect();
            assert_eq!(ours, lib.as_slice(), "{name}");
        }
    }
}
