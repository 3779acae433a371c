//! ROCm CLR's generic code-object map, by release (`COMPATIBILITY.md` §7.8).
//!
//! The HIP runtime (CLR) looks a device's ISA up in a bundle natively first, then under the
//! generic processor its own table maps the device's processor to, then as SPIR-V (§7.7).
//! Its table is not LLVM's family list (§3): it came with ROCm 6.4, for uncompressed bundles
//! only, reached compressed bundles in 6.4.1, and lags the compiler (gfx1152 and gfx1153 came
//! later, gfx1154 and the gfx11-7, gfx12-5 (but gfx1250) and gfx13 families are in no table
//! read). The sources, each a commit of ROCm's `clr` (later `rocm-systems/projects/clr`):
//!
//! * 6.4.0: `hipamd/src/hip_code_object.cpp` `genericTargetMap` (commits f1f4f40c, "Support
//!   generic targets", and 3ad8f1b8, "Support gfx9-4-generic target"; release branch
//!   rocm-rel-6.4 at 43cb6ab5), used only where the runtime unbundles an uncompressed bundle
//!   itself;
//! * 6.4.1: `hip_comgr_helper.cpp` `GenericTargetMapping()` (the 6.4.1 merge a187df25; commit
//!   8c1e869a, "Support generic target in compressed fatbin"), gfx940 and gfx941 dropped from
//!   gfx9-4-generic;
//! * later, in no release this crate can date: `hip_fatbin.cpp` `TargetGenericMap()` adds
//!   gfx1152 and gfx1153 (rocm-systems `projects/clr` at 02ba0621) and gfx1250
//!   (ROCm/rocm-systems#9741); gfx1170-gfx1172 are unmapped (ROCm/rocm-systems#11715, open).

use crate::arch::amdgpu::Processor;

/// The first ROCm CLR release that uses a generic code object for a processor
/// ([`clr_generic_since`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClrSince {
    /// From this ROCm release on (`major.minor.patch`).
    Release(u8, u8, u8),
    /// CLR's sources map it after the last release this crate dates (6.4.1); which release
    /// first ships that is not known.
    AfterDated,
    /// No CLR source read from 6.4.1 on maps this processor to this generic processor: CLR
    /// does not use the code object (6.4.0 alone mapped gfx940 and gfx941, for uncompressed
    /// bundles).
    Never,
}

impl core::fmt::Display for ClrSince {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ClrSince::Release(a, b, c) => write!(f, "ROCm {a}.{b}.{c}"),
            ClrSince::AfterDated => f.write_str("a ROCm release after 6.4.1 (which is not known)"),
            ClrSince::Never => f.write_str("no ROCm release"),
        }
    }
}

/// (processor, generic processor, since in an uncompressed bundle, since in a compressed one).
const MAP: &[(&str, &str, ClrSince, ClrSince)] = &[
    ("gfx900", "gfx9-generic", R640, R641),
    ("gfx902", "gfx9-generic", R640, R641),
    ("gfx904", "gfx9-generic", R640, R641),
    ("gfx906", "gfx9-generic", R640, R641),
    ("gfx909", "gfx9-generic", R640, R641),
    ("gfx90c", "gfx9-generic", R640, R641),
    ("gfx942", "gfx9-4-generic", R640, R641),
    ("gfx950", "gfx9-4-generic", R640, R641),
    ("gfx1010", "gfx10-1-generic", R640, R641),
    ("gfx1011", "gfx10-1-generic", R640, R641),
    ("gfx1012", "gfx10-1-generic", R640, R641),
    ("gfx1013", "gfx10-1-generic", R640, R641),
    ("gfx1030", "gfx10-3-generic", R640, R641),
    ("gfx1031", "gfx10-3-generic", R640, R641),
    ("gfx1032", "gfx10-3-generic", R640, R641),
    ("gfx1033", "gfx10-3-generic", R640, R641),
    ("gfx1034", "gfx10-3-generic", R640, R641),
    ("gfx1035", "gfx10-3-generic", R640, R641),
    ("gfx1036", "gfx10-3-generic", R640, R641),
    ("gfx1100", "gfx11-generic", R640, R641),
    ("gfx1101", "gfx11-generic", R640, R641),
    ("gfx1102", "gfx11-generic", R640, R641),
    ("gfx1103", "gfx11-generic", R640, R641),
    ("gfx1150", "gfx11-generic", R640, R641),
    ("gfx1151", "gfx11-generic", R640, R641),
    ("gfx1152", "gfx11-generic", LATER, LATER),
    ("gfx1153", "gfx11-generic", LATER, LATER),
    ("gfx1200", "gfx12-generic", R640, R641),
    ("gfx1201", "gfx12-generic", R640, R641),
    ("gfx1250", "gfx12-5-generic", LATER, LATER),
];

const R640: ClrSince = ClrSince::Release(6, 4, 0);
const R641: ClrSince = ClrSince::Release(6, 4, 1);
const LATER: ClrSince = ClrSince::AfterDated;

/// The first ROCm CLR release that takes a `generic` code object for a device whose
/// processor is `processor`, from an uncompressed or a `compressed` bundle
/// ([`ClrSince::Never`] where no CLR table read maps the pair, whatever LLVM's families say).
///
/// ```
/// use offload_image::arch::{clr_generic_since, ClrSince, Processor};
/// let p = |n| Processor::by_name(n).unwrap();
/// assert_eq!(clr_generic_since(p("gfx1101"), p("gfx11-generic"), false), ClrSince::Release(6, 4, 0));
/// assert_eq!(clr_generic_since(p("gfx1101"), p("gfx11-generic"), true), ClrSince::Release(6, 4, 1));
/// assert_eq!(clr_generic_since(p("gfx1170"), p("gfx11-7-generic"), false), ClrSince::Never);
/// ```
pub fn clr_generic_since(processor: &Processor, generic: &Processor, compressed: bool) -> ClrSince {
    MAP.iter()
        .find(|(p, g, _, _)| *p == processor.name && *g == generic.name)
        .map_or(
            ClrSince::Never,
            |&(_, _, plain, packed)| {
                if compressed {
                    packed
                } else {
                    plain
                }
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_names_a_member_of_its_generic_family() {
        // CLR's map is narrower than LLVM's families, never wider: each pair it maps is a
        // member of that family in the processor table (COMPATIBILITY.md §3).
        for (p, g, plain, packed) in MAP {
            let p = Processor::by_name(p).unwrap();
            let g = Processor::by_name(g).unwrap();
            assert!(g.is_generic(), "{}", g.name);
            assert_eq!(p.generic().map(|x| x.name), Some(g.name), "{}", p.name);
            assert!(*packed != ClrSince::Never && *plain != ClrSince::Never);
        }
    }

    #[test]
    fn the_compiler_is_ahead_of_clr() {
        let p = |n| Processor::by_name(n).unwrap();
        // LLVM puts gfx1154 in gfx11-generic and has gfx11-7, gfx12-5 and gfx13 families;
        // no CLR read maps them (gfx1250 only in sources no release is dated for).
        for (proc_, family) in [
            ("gfx1154", "gfx11-generic"),
            ("gfx1171", "gfx11-7-generic"),
            ("gfx1251", "gfx12-5-generic"),
            ("gfx1310", "gfx13-generic"),
        ] {
            assert_eq!(p(proc_).generic().map(|g| g.name), Some(family));
            assert_eq!(
                clr_generic_since(p(proc_), p(family), false),
                ClrSince::Never
            );
        }
        assert_eq!(
            clr_generic_since(p("gfx1250"), p("gfx12-5-generic"), true),
            ClrSince::AfterDated
        );
        // gfx940 and gfx941: dropped from gfx9-4-generic in 6.4.1.
        assert_eq!(
            clr_generic_since(p("gfx940"), p("gfx9-4-generic"), false),
            ClrSince::Never
        );
    }
}
