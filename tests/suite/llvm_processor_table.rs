//! The processor table (`COMPATIBILITY.md` §3, `src/arch/amdgpu.rs`) against LLVM's own
//! tables, stored in `tests/data/llvm/` with their revisions (`tests/data/llvm/README.md`):
//!
//! * `elf-header-flags-mach.ll` (LLVM's CodeGen test of every `EF_AMDGPU_MACH` value):
//!   every AMDGCN MACH value it checks is this crate's processor of that name, and a
//!   processor of this crate that LLVM does not list is one of the documented exceptions;
//! * `AMDGPUTargetParser.def` (LLVM's target parser table): every processor's ISA version,
//!   its aliases, and whether xnack and sramecc are selectable, always on or absent.
//!
//! So when LLVM's table grows (a new processor, a new generic family), refreshing the files
//! makes this test fail until the table learns it, rather than the new MACH value being
//! read as an unknown processor.

use std::collections::BTreeMap;

use offload_image::arch::amdgpu::FeatureSupport;
use offload_image::arch::Processor;

fn data(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/llvm")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The processor name of an `EF_AMDGPU_MACH_AMDGCN_*` constant's suffix, as LLVM spells
/// it: `GFX90A` is `gfx90a`, `GFX9_4_GENERIC` is `gfx9-4-generic`, `GFX1250_STRICT` is
/// `gfx1250-strict` (LLVM's `ELF.h` lists the constants with these names).
fn processor_name(suffix: &str) -> String {
    suffix.to_ascii_lowercase().replace('_', "-")
}

/// `(name, MACH)` of every AMDGCN check line of `elf-header-flags-mach.ll`:
/// `; GFX90A:        EF_AMDGPU_MACH_AMDGCN_GFX90A (0x3F)`.
fn llvm_machs() -> Vec<(String, u8)> {
    let text = data("elf-header-flags-mach.ll");
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("; ") else {
            continue;
        };
        let Some((_, check)) = rest.split_once(':') else {
            continue;
        };
        let Some(check) = check.trim().strip_prefix("EF_AMDGPU_MACH_AMDGCN_") else {
            continue;
        };
        let (suffix, value) = check.split_once(" (").expect("a value in parentheses");
        let value = value.strip_suffix(')').unwrap().strip_prefix("0x").unwrap();
        out.push((
            processor_name(suffix),
            u8::from_str_radix(value, 16).unwrap(),
        ));
    }
    out
}

/// One `AMDGCN_GPU` row of `AMDGPUTargetParser.def`.
#[derive(Debug)]
struct DefGpu {
    name: String,
    isa: (u8, u8, u8),
    features: Vec<String>,
}

/// The `AMDGCN_GPU` rows, and the `AMDGCN_GPU_ALIAS` rows as (alias, primary name).
fn llvm_def() -> (Vec<DefGpu>, Vec<(String, String)>) {
    let text = data("AMDGPUTargetParser.def");
    let quoted = |s: &str| s.split('"').nth(1).unwrap().to_string();
    let mut gpus = Vec::new();
    let mut by_enum = BTreeMap::new();
    let mut aliases = Vec::new();
    for line in text.lines() {
        if let Some(args) = line.strip_prefix("AMDGCN_GPU_ALIAS") {
            let args = args.trim().trim_start_matches('(').trim_end_matches(')');
            let (alias, kind) = args.split_once(',').unwrap();
            aliases.push((quoted(alias), kind.trim().to_string()));
        } else if let Some(args) = line.strip_prefix("AMDGCN_GPU") {
            let args = args.trim();
            if !args.starts_with('(') || args.starts_with("(NAME") {
                continue;
            }
            let (name, rest) = args.split_once(',').unwrap();
            let (kind, rest) = rest.split_once(',').unwrap();
            let (isa, features) = rest.split_once(')').unwrap();
            let isa: Vec<u8> = isa
                .trim()
                .trim_start_matches('(')
                .split(',')
                .map(|n| n.trim().parse().unwrap())
                .collect();
            let features = features
                .trim()
                .trim_start_matches(',')
                .trim()
                .trim_end_matches(')')
                .split('|')
                .map(|f| f.trim().to_string())
                .collect();
            let name = quoted(name);
            by_enum.insert(kind.trim().to_string(), name.clone());
            gpus.push(DefGpu {
                name,
                isa: (isa[0], isa[1], isa[2]),
                features,
            });
        }
    }
    let aliases = aliases
        .into_iter()
        .map(|(alias, kind)| (alias, by_enum[&kind].clone()))
        .collect();
    (gpus, aliases)
}

/// Processors this crate knows that the stored LLVM revision does not list, each with why
/// (`COMPATIBILITY.md` §3, `tests/data/llvm/README.md`).
const NOT_IN_LLVM: &[(&str, &str)] = &[
    (
        "gfx940",
        "removed from LLVM in 2025; code objects for it exist",
    ),
    (
        "gfx941",
        "removed from LLVM in 2025; code objects for it exist",
    ),
    (
        "gfx1250-strict",
        "added by llvm/llvm-project#218543 (MACH 0xEB), after the stored revision",
    ),
];

#[test]
fn every_llvm_mach_value_is_the_same_processor_here() {
    let machs = llvm_machs();
    assert!(machs.len() >= 60, "{} MACH values read", machs.len());
    for (name, mach) in &machs {
        let p = Processor::by_mach(*mach).unwrap_or_else(|| {
            panic!("LLVM's {name} (EF_AMDGPU_MACH {mach:#04x}) is not in the processor table")
        });
        assert_eq!(p.name, name, "EF_AMDGPU_MACH {mach:#04x}");
        assert_eq!(Processor::by_name(name).map(|p| p.mach), Some(*mach));
        // LLVM names exactly its generic processors `*-generic` (`getArchFamilyNameAMDGCN`).
        assert_eq!(p.is_generic(), name.ends_with("-generic"), "{name}");
    }
    for p in Processor::all() {
        if machs.iter().any(|(n, _)| n == p.name) {
            continue;
        }
        assert!(
            NOT_IN_LLVM.iter().any(|(n, _)| *n == p.name),
            "{} (MACH {:#04x}) is not in LLVM's table and not a documented exception",
            p.name,
            p.mach
        );
        // An exception stays one only while LLVM does not use its MACH value.
        assert!(
            !machs.iter().any(|(_, m)| *m == p.mach),
            "{}: LLVM now uses its MACH value {:#04x}",
            p.name,
            p.mach
        );
    }
}

#[test]
fn features_isa_versions_and_aliases_are_llvms() {
    let (gpus, aliases) = llvm_def();
    assert!(gpus.len() >= 55, "{} processors read", gpus.len());
    // The .def marks selectable xnack with FEATURE_XNACK_ON_OFF_MODES since 2026
    // (llvm/llvm-project#204523); before that FEATURE_XNACK meant selectable and
    // FEATURE_XNACK_ALWAYS always on.
    let on_off_modes = gpus
        .iter()
        .any(|g| g.features.iter().any(|f| f == "FEATURE_XNACK_ON_OFF_MODES"));
    for g in &gpus {
        let has = |f: &str| g.features.iter().any(|x| x == f);
        let p = Processor::by_name(&g.name)
            .unwrap_or_else(|| panic!("LLVM's {} is not in the processor table", g.name));
        assert_eq!(p.name, g.name);
        if !p.is_generic() || p.isa_version.is_some() {
            assert_eq!(p.isa_version, Some(g.isa), "{}", g.name);
        }
        let xnack = if has("FEATURE_XNACK_ALWAYS")
            || (on_off_modes && has("FEATURE_XNACK") && !has("FEATURE_XNACK_ON_OFF_MODES"))
        {
            FeatureSupport::AlwaysOn
        } else if has("FEATURE_XNACK") {
            FeatureSupport::Selectable
        } else {
            FeatureSupport::None
        };
        assert_eq!(p.xnack, xnack, "{} xnack", g.name);
        let sramecc = if has("FEATURE_SRAMECC") {
            FeatureSupport::Selectable
        } else {
            FeatureSupport::None
        };
        assert_eq!(p.sramecc, sramecc, "{} sramecc", g.name);
    }
    for (alias, primary) in &aliases {
        assert_eq!(
            Processor::by_name(alias).map(|p| p.name),
            Some(primary.as_str()),
            "alias {alias}"
        );
    }
    for p in Processor::all() {
        for a in p.aliases {
            assert!(
                aliases.iter().any(|(alias, _)| alias == a),
                "{a} is no alias in LLVM"
            );
        }
    }
}

#[test]
fn generic_families_are_llvms_generic_processors() {
    let machs = llvm_machs();
    let llvm_generic = |name: &str| {
        machs
            .iter()
            .any(|(n, _)| n == name && n.ends_with("-generic"))
    };
    for p in Processor::all() {
        if let Some(family) = p.family {
            assert!(llvm_generic(family), "{}: {family} is not LLVM's", p.name);
            let g = Processor::by_name(family).unwrap();
            assert_eq!(g.min_generic_version(p), Some(1), "{}", p.name);
        }
    }
    // Every generic processor LLVM lists has members here.
    for (name, _) in machs.iter().filter(|(n, _)| n.ends_with("-generic")) {
        let g = Processor::by_name(name).unwrap();
        assert!(!g.members.is_empty(), "{name} has no members");
    }
}
