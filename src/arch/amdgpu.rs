//! AMDGPU processors, feature states and target IDs (`COMPATIBILITY.md` §2–§4).
//!
//! The processor table is the one of `COMPATIBILITY.md` §3: every GCN/RDNA/CDNA processor
//! from gfx600 on with its aliases, ISA version, `EF_AMDGPU_MACH` value, which of the
//! target-ID features (`xnack`, `sramecc`) it lets a compiler choose, and the generic
//! family it belongs to. Generic processors (`gfx9-generic`, …) list their members
//! explicitly; membership is never derived from digits (gfx1170 is not in gfx11-generic,
//! gfx908 and gfx90a are in no family).
//!
//! Decisions where the spec is silent:
//! * gfx940 and gfx941 were removed from LLVM in 2025; they stay here (MACH 0x040, 0x04B,
//!   members of gfx9-4-generic as in older LLVM and CLR) because code objects built for them
//!   exist. A newer table may reassign those MACH values; this one does not.
//! * R600-era processors are left out: they are never offload targets, so their names are
//!   "unknown processors" here and never match a device.
//! * Every family member requires generic version 1 (ROCr's `GetSupportedGenericVersions`).
//! * gfx1250-strict shares gfx1250's ISA version; [`Processor::by_isa_version`] returns
//!   gfx1250 for it.
//!
//! Nothing here allocates; canonical names are written into fixed-size
//! [`heapless::String`]s.

use core::fmt;

use crate::error::{Error, ErrorKind, Result};

/// The state of one target-ID feature (`xnack` or `sramecc`), for an image or a device.
///
/// For an image: `On` (`+`), `Off` (`-`), `Any` (not written: the code runs either way) or
/// `Unsupported` (the processor has no such selectable feature).
///
/// For a device: `On`/`Off` as the runtime reports it, `Unsupported` when the processor
/// has no such feature, and `Any` meaning **unknown** (the loader could not find out). An
/// unknown device state admits only images that are `Any` or `Unsupported` for that feature
/// (`COMPATIBILITY.md` §5.1 rule 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FeatureState {
    /// The processor has no selectable feature of this name.
    Unsupported,
    /// Not specified: for an image, runs with the feature on or off; for a device, unknown.
    Any,
    /// Explicitly off (`-`).
    Off,
    /// Explicitly on (`+`).
    On,
}

impl FeatureState {
    /// True for `On` and `Off`.
    pub const fn is_explicit(self) -> bool {
        matches!(self, FeatureState::On | FeatureState::Off)
    }

    /// `"+"`, `"-"` or `""`.
    pub const fn sign(self) -> &'static str {
        match self {
            FeatureState::On => "+",
            FeatureState::Off => "-",
            _ => "",
        }
    }

    /// `On` for `true`, `Off` for `false`.
    pub const fn from_bool(on: bool) -> Self {
        if on {
            FeatureState::On
        } else {
            FeatureState::Off
        }
    }
}

/// One of the two target-ID features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// `sramecc`: SRAM ECC enabled.
    Sramecc,
    /// `xnack`: XNACK replay (page-fault retry) enabled.
    Xnack,
}

impl Feature {
    /// Both features, in canonical (alphabetical) order.
    pub const ALL: [Feature; 2] = [Feature::Sramecc, Feature::Xnack];

    /// `"sramecc"` or `"xnack"`.
    pub const fn name(self) -> &'static str {
        match self {
            Feature::Sramecc => "sramecc",
            Feature::Xnack => "xnack",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a processor supports a target-ID feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FeatureSupport {
    /// No such feature: a target ID may not name it; its state is `Unsupported`.
    None,
    /// The compiler can build for on, off or any (`FEATURE_XNACK_ON_OFF_MODES`, `FEATURE_SRAMECC`).
    Selectable,
    /// Always on in hardware and not selectable (xnack on gfx1250/gfx1251): a target ID may
    /// not name it; its state is `Unsupported`.
    AlwaysOn,
}

impl FeatureSupport {
    /// True when a target ID may set the feature.
    pub const fn is_selectable(self) -> bool {
        matches!(self, FeatureSupport::Selectable)
    }
}

/// One AMDGPU processor (a row of `COMPATIBILITY.md` §3).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Processor {
    /// Primary (canonical) name, e.g. `gfx90a`, `gfx9-4-generic`.
    pub name: &'static str,
    /// Alternative names the parsers accept (`tahiti`, `fiji`, …).
    pub aliases: &'static [&'static str],
    /// ISA version (major, minor, stepping); for generic processors what LLVM reports, if known.
    pub isa_version: Option<(u8, u8, u8)>,
    /// `EF_AMDGPU_MACH` value (`e_flags & 0xFF`).
    pub mach: u8,
    /// How the processor supports `xnack`.
    pub xnack: FeatureSupport,
    /// How the processor supports `sramecc`.
    pub sramecc: FeatureSupport,
    /// For a concrete processor: its generic family (`gfx9-generic`, …), if any.
    pub family: Option<&'static str>,
    /// For a generic processor: its members with the minimum generic version each requires.
    /// Empty for concrete processors.
    pub members: &'static [(&'static str, u8)],
}

impl Processor {
    /// True for the generic processors (`gfx9-generic`, …).
    pub fn is_generic(&self) -> bool {
        !self.members.is_empty()
    }

    /// How the processor supports `feature`.
    pub const fn support(&self, feature: Feature) -> FeatureSupport {
        match feature {
            Feature::Sramecc => self.sramecc,
            Feature::Xnack => self.xnack,
        }
    }

    /// Looks a processor up by primary name or alias (exact, case-sensitive, as LLVM).
    pub fn by_name(name: &str) -> Option<&'static Processor> {
        // Every entry ID and device names one: the names share their `gfx` prefix and
        // differ at the end, so they are compared inline from the last byte (a `memcmp`
        // call per candidate of the same length was most of the lookup).
        let same = |a: &str| {
            a.len() == name.len() && a.bytes().rev().zip(name.bytes().rev()).all(|(x, y)| x == y)
        };
        PROCESSORS
            .iter()
            .find(|p| same(p.name) || p.aliases.iter().any(|a| same(a)))
    }

    /// Looks a processor up by its `EF_AMDGPU_MACH` value.
    pub fn by_mach(mach: u8) -> Option<&'static Processor> {
        PROCESSORS.iter().find(|p| p.mach == mach)
    }

    /// Looks a concrete processor up by ISA version (KFD `gfx_target_version`, ROCr ISA).
    pub fn by_isa_version(major: u8, minor: u8, stepping: u8) -> Option<&'static Processor> {
        PROCESSORS
            .iter()
            .find(|p| !p.is_generic() && p.isa_version == Some((major, minor, stepping)))
    }

    /// The generic processor of this processor's family, if it has one.
    pub fn generic(&self) -> Option<&'static Processor> {
        self.family.and_then(Processor::by_name)
    }

    /// For a generic processor: the minimum generic version `member` requires, or `None`
    /// when `member` is not in the family.
    pub fn min_generic_version(&self, member: &Processor) -> Option<u8> {
        self.members
            .iter()
            .find(|(name, _)| *name == member.name)
            .map(|(_, v)| *v)
    }

    /// Every processor in the table, concrete ones first, in ISA order.
    pub fn all() -> &'static [Processor] {
        PROCESSORS
    }
}

impl fmt::Display for Processor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

use FeatureSupport::{AlwaysOn as ON, None as NO, Selectable as SEL};

const fn p(
    name: &'static str,
    aliases: &'static [&'static str],
    isa: (u8, u8, u8),
    mach: u8,
    xnack: FeatureSupport,
    sramecc: FeatureSupport,
    family: Option<&'static str>,
) -> Processor {
    Processor {
        name,
        aliases,
        isa_version: Some(isa),
        mach,
        xnack,
        sramecc,
        family,
        members: &[],
    }
}

const fn g(
    name: &'static str,
    isa: Option<(u8, u8, u8)>,
    mach: u8,
    xnack: FeatureSupport,
    sramecc: FeatureSupport,
    members: &'static [(&'static str, u8)],
) -> Processor {
    Processor {
        name,
        aliases: &[],
        isa_version: isa,
        mach,
        xnack,
        sramecc,
        family: None,
        members,
    }
}

const G9: Option<&str> = Some("gfx9-generic");
const G94: Option<&str> = Some("gfx9-4-generic");
const G101: Option<&str> = Some("gfx10-1-generic");
const G103: Option<&str> = Some("gfx10-3-generic");
const G11: Option<&str> = Some("gfx11-generic");
const G117: Option<&str> = Some("gfx11-7-generic");
const G12: Option<&str> = Some("gfx12-generic");
const G125: Option<&str> = Some("gfx12-5-generic");
const G13: Option<&str> = Some("gfx13-generic");

/// The processor table (`COMPATIBILITY.md` §3).
static PROCESSORS: &[Processor] = &[
    p("gfx600", &["tahiti"], (6, 0, 0), 0x20, NO, NO, None),
    p(
        "gfx601",
        &["pitcairn", "verde"],
        (6, 0, 1),
        0x21,
        NO,
        NO,
        None,
    ),
    p(
        "gfx602",
        &["hainan", "oland"],
        (6, 0, 2),
        0x3A,
        NO,
        NO,
        None,
    ),
    p("gfx700", &["kaveri"], (7, 0, 0), 0x22, NO, NO, None),
    p("gfx701", &["hawaii"], (7, 0, 1), 0x23, NO, NO, None),
    p("gfx702", &[], (7, 0, 2), 0x24, NO, NO, None),
    p(
        "gfx703",
        &["kabini", "mullins"],
        (7, 0, 3),
        0x25,
        NO,
        NO,
        None,
    ),
    p("gfx704", &["bonaire"], (7, 0, 4), 0x26, NO, NO, None),
    p("gfx705", &[], (7, 0, 5), 0x3B, NO, NO, None),
    p("gfx801", &["carrizo"], (8, 0, 1), 0x28, SEL, NO, None),
    p(
        "gfx802",
        &["iceland", "tonga"],
        (8, 0, 2),
        0x29,
        NO,
        NO,
        None,
    ),
    p(
        "gfx803",
        &["fiji", "polaris10", "polaris11"],
        (8, 0, 3),
        0x2A,
        NO,
        NO,
        None,
    ),
    p("gfx805", &["tongapro"], (8, 0, 5), 0x3C, NO, NO, None),
    p("gfx810", &["stoney"], (8, 1, 0), 0x2B, SEL, NO, None),
    p("gfx900", &[], (9, 0, 0), 0x2C, SEL, NO, G9),
    p("gfx902", &[], (9, 0, 2), 0x2D, SEL, NO, G9),
    p("gfx904", &[], (9, 0, 4), 0x2E, SEL, NO, G9),
    p("gfx906", &[], (9, 0, 6), 0x2F, SEL, SEL, G9),
    p("gfx908", &[], (9, 0, 8), 0x30, SEL, SEL, None),
    p("gfx909", &[], (9, 0, 9), 0x31, SEL, NO, G9),
    p("gfx90a", &[], (9, 0, 10), 0x3F, SEL, SEL, None),
    p("gfx90c", &[], (9, 0, 12), 0x32, SEL, NO, G9),
    p("gfx940", &[], (9, 4, 0), 0x40, SEL, SEL, G94),
    p("gfx941", &[], (9, 4, 1), 0x4B, SEL, SEL, G94),
    p("gfx942", &[], (9, 4, 2), 0x4C, SEL, SEL, G94),
    p("gfx950", &[], (9, 5, 0), 0x4F, SEL, SEL, G94),
    p("gfx1010", &[], (10, 1, 0), 0x33, SEL, NO, G101),
    p("gfx1011", &[], (10, 1, 1), 0x34, SEL, NO, G101),
    p("gfx1012", &[], (10, 1, 2), 0x35, SEL, NO, G101),
    p("gfx1013", &[], (10, 1, 3), 0x42, SEL, NO, G101),
    p("gfx1030", &[], (10, 3, 0), 0x36, NO, NO, G103),
    p("gfx1031", &[], (10, 3, 1), 0x37, NO, NO, G103),
    p("gfx1032", &[], (10, 3, 2), 0x38, NO, NO, G103),
    p("gfx1033", &[], (10, 3, 3), 0x39, NO, NO, G103),
    p("gfx1034", &[], (10, 3, 4), 0x3E, NO, NO, G103),
    p("gfx1035", &[], (10, 3, 5), 0x3D, NO, NO, G103),
    p("gfx1036", &[], (10, 3, 6), 0x45, NO, NO, G103),
    p("gfx1100", &[], (11, 0, 0), 0x41, NO, NO, G11),
    p("gfx1101", &[], (11, 0, 1), 0x46, NO, NO, G11),
    p("gfx1102", &[], (11, 0, 2), 0x47, NO, NO, G11),
    p("gfx1103", &[], (11, 0, 3), 0x44, NO, NO, G11),
    p("gfx1150", &[], (11, 5, 0), 0x43, NO, NO, G11),
    p("gfx1151", &[], (11, 5, 1), 0x4A, NO, NO, G11),
    p("gfx1152", &[], (11, 5, 2), 0x55, NO, NO, G11),
    p("gfx1153", &[], (11, 5, 3), 0x58, NO, NO, G11),
    p("gfx1154", &[], (11, 5, 4), 0x57, NO, NO, G11),
    p("gfx1170", &[], (11, 7, 0), 0x5D, NO, NO, G117),
    p("gfx1171", &[], (11, 7, 1), 0x5E, NO, NO, G117),
    p("gfx1172", &[], (11, 7, 2), 0x5C, NO, NO, G117),
    p("gfx1200", &[], (12, 0, 0), 0x48, NO, NO, G12),
    p("gfx1201", &[], (12, 0, 1), 0x4E, NO, NO, G12),
    p("gfx1250", &[], (12, 5, 0), 0x49, ON, SEL, G125),
    p("gfx1251", &[], (12, 5, 1), 0x5A, ON, SEL, G125),
    // llvm/llvm-project#218543 (MACH 0xEB); ROCm/llvm-project#4121: ISA 12.5.0, gfx1250's
    // features plus two instruction sets less. Listed after gfx1250 so that ISA 12.5.0 (KFD)
    // is gfx1250, as ROCr and offload-arch report it unless asked for the strict target. No
    // generic family: the sources read name none.
    p("gfx1250-strict", &[], (12, 5, 0), 0xEB, ON, SEL, None),
    p("gfx1310", &[], (13, 1, 0), 0x50, NO, NO, G13),
    g(
        "gfx9-generic",
        Some((9, 0, 0)),
        0x51,
        SEL,
        NO,
        &[
            ("gfx900", 1),
            ("gfx902", 1),
            ("gfx904", 1),
            ("gfx906", 1),
            ("gfx909", 1),
            ("gfx90c", 1),
        ],
    ),
    g(
        "gfx9-4-generic",
        Some((9, 4, 0)),
        0x5F,
        SEL,
        SEL,
        &[("gfx940", 1), ("gfx941", 1), ("gfx942", 1), ("gfx950", 1)],
    ),
    g(
        "gfx10-1-generic",
        Some((10, 1, 0)),
        0x52,
        SEL,
        NO,
        &[
            ("gfx1010", 1),
            ("gfx1011", 1),
            ("gfx1012", 1),
            ("gfx1013", 1),
        ],
    ),
    g(
        "gfx10-3-generic",
        Some((10, 3, 0)),
        0x53,
        NO,
        NO,
        &[
            ("gfx1030", 1),
            ("gfx1031", 1),
            ("gfx1032", 1),
            ("gfx1033", 1),
            ("gfx1034", 1),
            ("gfx1035", 1),
            ("gfx1036", 1),
        ],
    ),
    g(
        "gfx11-generic",
        Some((11, 0, 3)),
        0x54,
        NO,
        NO,
        &[
            ("gfx1100", 1),
            ("gfx1101", 1),
            ("gfx1102", 1),
            ("gfx1103", 1),
            ("gfx1150", 1),
            ("gfx1151", 1),
            ("gfx1152", 1),
            ("gfx1153", 1),
            ("gfx1154", 1),
        ],
    ),
    g(
        "gfx11-7-generic",
        None,
        0x62,
        NO,
        NO,
        &[("gfx1170", 1), ("gfx1171", 1), ("gfx1172", 1)],
    ),
    g(
        "gfx12-generic",
        Some((12, 0, 0)),
        0x59,
        NO,
        NO,
        &[("gfx1200", 1), ("gfx1201", 1)],
    ),
    g(
        "gfx12-5-generic",
        Some((12, 5, 0)),
        0x5B,
        ON,
        NO,
        &[("gfx1250", 1), ("gfx1251", 1)],
    ),
    g("gfx13-generic", None, 0x63, NO, NO, &[("gfx1310", 1)]),
];

/// A canonical target-ID string (longest: `gfx10-1-generic:sramecc+:xnack+`, 31 bytes).
pub type CanonicalName = heapless::String<32>;

/// An AMDGPU target ID: a known processor and the state of each feature
/// (`COMPATIBILITY.md` §2).
///
/// A valid `TargetId` only has `On`/`Off`/`Any` for features its processor lets a target
/// ID select, and `Unsupported` for the others. Its [`Display`](fmt::Display) is the
/// canonical form: primary processor name, then the explicit features in alphabetical
/// order (`gfx90a:sramecc+:xnack-`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TargetId {
    /// The processor (primary entry of the table, also when an alias was parsed).
    pub processor: &'static Processor,
    /// `sramecc` state.
    pub sramecc: FeatureState,
    /// `xnack` state.
    pub xnack: FeatureState,
}

const INVALID_FEATURE_SYNTAX: &str =
    "target ID feature must be 'xnack' or 'sramecc' followed by '+' or '-'";

impl TargetId {
    /// A target ID for `processor` with every selectable feature `Any` and the others
    /// `Unsupported`.
    pub fn any(processor: &'static Processor) -> Self {
        let state = |s: FeatureSupport| {
            if s.is_selectable() {
                FeatureState::Any
            } else {
                FeatureState::Unsupported
            }
        };
        TargetId {
            processor,
            sramecc: state(processor.sramecc),
            xnack: state(processor.xnack),
        }
    }

    /// Builds a target ID, checking that only selectable features are `On`/`Off`/`Any`.
    ///
    /// `Unsupported` for a selectable feature is taken as `Any`; `On`/`Off`/`Any` for a
    /// feature the processor does not support is an error.
    pub fn new(
        processor: &'static Processor,
        sramecc: FeatureState,
        xnack: FeatureState,
    ) -> Result<Self> {
        let mut t = TargetId::any(processor);
        t.set(Feature::Sramecc, sramecc)?;
        t.set(Feature::Xnack, xnack)?;
        Ok(t)
    }

    /// The state of `feature`.
    pub const fn state(&self, feature: Feature) -> FeatureState {
        match feature {
            Feature::Sramecc => self.sramecc,
            Feature::Xnack => self.xnack,
        }
    }

    fn set(&mut self, feature: Feature, state: FeatureState) -> Result<()> {
        let support = self.processor.support(feature);
        let value = match (support.is_selectable(), state) {
            (true, FeatureState::Unsupported) => FeatureState::Any,
            (true, s) => s,
            (false, FeatureState::Unsupported) => FeatureState::Unsupported,
            (false, _) => {
                return Err(Error::new(
                    ErrorKind::InvalidId,
                    0,
                    match (feature, support) {
                        (Feature::Xnack, FeatureSupport::AlwaysOn) => {
                            "target ID sets xnack, which is always on and not selectable on this processor"
                        }
                        (Feature::Xnack, _) => {
                            "target ID sets xnack, which this processor does not support"
                        }
                        (Feature::Sramecc, _) => {
                            "target ID sets sramecc, which this processor does not support"
                        }
                    },
                ))
            }
        };
        match feature {
            Feature::Sramecc => self.sramecc = value,
            Feature::Xnack => self.xnack = value,
        }
        Ok(())
    }

    /// Parses and validates a target ID (`processor(:feature(+|-))*`).
    ///
    /// The processor may be a primary name or an alias; features may come in any order.
    /// Errors ([`ErrorKind::InvalidId`]): empty or unknown processor, a feature token that
    /// is not `xnack±`/`sramecc±`, a feature given twice, or a feature the processor does
    /// not support (`gfx1030:xnack+`, `gfx1250:xnack+`). Does not allocate.
    pub fn parse(s: &str) -> Result<Self> {
        let (name, features) = split_target_id(s)?;
        let processor = Processor::by_name(name).ok_or(Error::new(
            ErrorKind::InvalidId,
            0,
            "unknown AMDGPU processor",
        ))?;
        TargetId::with_features(processor, features)
    }

    /// `processor` with the feature tokens `features` (`xnack+`, `sramecc-`), each at most
    /// once and supported by the processor.
    fn with_features<'s>(
        processor: &'static Processor,
        features: impl IntoIterator<Item = &'s str>,
    ) -> Result<Self> {
        let mut t = TargetId::any(processor);
        let mut seen = [false; 2];
        for token in features {
            let (feature, state) = parse_feature(token)?;
            let i = feature as usize;
            if seen.get(i).copied().unwrap_or(true) {
                return Err(Error::new(
                    ErrorKind::InvalidId,
                    0,
                    "target ID names the same feature twice",
                ));
            }
            if let Some(s) = seen.get_mut(i) {
                *s = true;
            }
            t.set(feature, state)?;
        }
        Ok(t)
    }

    /// The canonical form as a fixed-capacity string.
    pub fn canonical(&self) -> CanonicalName {
        let mut s = CanonicalName::new();
        // Cannot fail: the longest canonical name fits (checked by a test over the table).
        let _ = fmt::write(&mut s, format_args!("{self}"));
        s
    }

    /// True when the image target `self` and `other` name the same processor and features.
    pub fn same_as(&self, other: &TargetId) -> bool {
        core::ptr::eq(self.processor, other.processor)
            && self.sramecc == other.sramecc
            && self.xnack == other.xnack
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.processor.name)?;
        for feature in Feature::ALL {
            let state = self.state(feature);
            if state.is_explicit() {
                write!(f, ":{}{}", feature.name(), state.sign())?;
            }
        }
        Ok(())
    }
}

/// Splits `processor:feat:feat` into the processor and the feature tokens.
fn split_target_id(s: &str) -> Result<(&str, core::str::Split<'_, char>)> {
    let mut it = s.split(':');
    let name = it.next().unwrap_or("");
    if name.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidId,
            0,
            "target ID has an empty processor name",
        ));
    }
    Ok((name, it))
}

/// Parses `xnack+`, `sramecc-`, ….
fn parse_feature(token: &str) -> Result<(Feature, FeatureState)> {
    let bad = Error::new(ErrorKind::InvalidId, 0, INVALID_FEATURE_SYNTAX);
    let (name, state) = if let Some(n) = token.strip_suffix('+') {
        (n, FeatureState::On)
    } else if let Some(n) = token.strip_suffix('-') {
        (n, FeatureState::Off)
    } else {
        return Err(bad);
    };
    let feature = match name {
        "xnack" => Feature::Xnack,
        "sramecc" => Feature::Sramecc,
        _ => return Err(bad),
    };
    Ok((feature, state))
}

/// LLVM's AMDGPU triple sub-architectures (`amdgpu<subarch>-amd-amdhsa`, `COMPATIBILITY.md`
/// §1.5): the text after `amdgpu` and the processor it names, as `parseSubArch` in
/// llvm/llvm-project `llvm/lib/TargetParser/Triple.cpp` (4da0108e1c799747a4192337d60b9c2c3720823f)
/// lists them. `None`: a family with no generic processor (`6`, `7`, `8`). A processor's
/// first row is the spelling clang writes for it (`clang/test/Driver/amdgpu-mcpu.cl`);
/// `9.5` and `10` are LLVM's other spellings of `9.4` and `10.1`.
const SUBARCHES: &[(&str, Option<&str>)] = &[
    ("6", None),
    ("6.00", Some("gfx600")),
    ("6.01", Some("gfx601")),
    ("6.02", Some("gfx602")),
    ("7", None),
    ("7.00", Some("gfx700")),
    ("7.01", Some("gfx701")),
    ("7.02", Some("gfx702")),
    ("7.03", Some("gfx703")),
    ("7.04", Some("gfx704")),
    ("7.05", Some("gfx705")),
    ("8", None),
    ("8.01", Some("gfx801")),
    ("8.02", Some("gfx802")),
    ("8.03", Some("gfx803")),
    ("8.05", Some("gfx805")),
    ("8.10", Some("gfx810")),
    ("9", Some("gfx9-generic")),
    ("9.00", Some("gfx900")),
    ("9.02", Some("gfx902")),
    ("9.04", Some("gfx904")),
    ("9.06", Some("gfx906")),
    ("9.08", Some("gfx908")),
    ("9.09", Some("gfx909")),
    ("9.0a", Some("gfx90a")),
    ("9.0c", Some("gfx90c")),
    ("9.4", Some("gfx9-4-generic")),
    ("9.5", Some("gfx9-4-generic")),
    ("9.42", Some("gfx942")),
    ("9.50", Some("gfx950")),
    ("10.1", Some("gfx10-1-generic")),
    ("10", Some("gfx10-1-generic")),
    ("10.10", Some("gfx1010")),
    ("10.11", Some("gfx1011")),
    ("10.12", Some("gfx1012")),
    ("10.13", Some("gfx1013")),
    ("10.3", Some("gfx10-3-generic")),
    ("10.30", Some("gfx1030")),
    ("10.31", Some("gfx1031")),
    ("10.32", Some("gfx1032")),
    ("10.33", Some("gfx1033")),
    ("10.34", Some("gfx1034")),
    ("10.35", Some("gfx1035")),
    ("10.36", Some("gfx1036")),
    ("11", Some("gfx11-generic")),
    ("11.00", Some("gfx1100")),
    ("11.01", Some("gfx1101")),
    ("11.02", Some("gfx1102")),
    ("11.03", Some("gfx1103")),
    ("11.50", Some("gfx1150")),
    ("11.51", Some("gfx1151")),
    ("11.52", Some("gfx1152")),
    ("11.53", Some("gfx1153")),
    ("11.54", Some("gfx1154")),
    ("11.7", Some("gfx11-7-generic")),
    ("11.70", Some("gfx1170")),
    ("11.71", Some("gfx1171")),
    ("11.72", Some("gfx1172")),
    ("12", Some("gfx12-generic")),
    ("12.00", Some("gfx1200")),
    ("12.01", Some("gfx1201")),
    ("12.5", Some("gfx12-5-generic")),
    ("12.50", Some("gfx1250")),
    ("12.51", Some("gfx1251")),
    ("13", Some("gfx13-generic")),
    ("13.10", Some("gfx1310")),
];

/// What an AMDGPU triple's sub-architecture names (`COMPATIBILITY.md` §1.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subarch {
    /// No sub-architecture: `amdgcn` or a bare `amdgpu` (the legacy spelling).
    None,
    /// A sub-architecture LLVM knows that names this processor (`amdgpu9.42`: gfx942,
    /// `amdgpu9.4`: gfx9-4-generic).
    Processor(&'static Processor),
    /// A sub-architecture LLVM knows that names no processor (`amdgpu6`, `amdgpu7`,
    /// `amdgpu8`: families without a generic processor).
    Family,
    /// `amdgpu` followed by text LLVM's table does not have.
    Unknown,
}

impl Subarch {
    /// Reads a triple's architecture field: `amdgcn` and `amdgpu` are [`Subarch::None`],
    /// `amdgpu<subarch>` is looked up in LLVM's table; `None` for other architectures.
    pub fn of_arch(arch: &str) -> Option<Subarch> {
        if arch == "amdgcn" {
            return Some(Subarch::None);
        }
        let rest = arch.strip_prefix("amdgpu")?;
        if rest.is_empty() {
            return Some(Subarch::None);
        }
        Some(match SUBARCHES.iter().find(|(s, _)| *s == rest) {
            Some((_, Some(name))) => {
                Processor::by_name(name).map_or(Subarch::Unknown, Subarch::Processor)
            }
            Some((_, None)) => Subarch::Family,
            None => Subarch::Unknown,
        })
    }

    /// The processor, for [`Subarch::Processor`].
    pub fn processor(self) -> Option<&'static Processor> {
        match self {
            Subarch::Processor(p) => Some(p),
            _ => None,
        }
    }
}

impl Processor {
    /// The sub-architecture clang writes for this processor (`9.42` for gfx942, `9.4` for
    /// gfx9-4-generic), `None` for a processor LLVM's triple table lacks (gfx940, gfx941,
    /// gfx1250-strict).
    pub fn subarch(&self) -> Option<&'static str> {
        SUBARCHES
            .iter()
            .find(|(_, p)| *p == Some(self.name))
            .map(|(s, _)| *s)
    }
}

impl TargetId {
    /// Parses a target ID stored under a triple whose sub-architecture is `subarch`
    /// (`COMPATIBILITY.md` §1.5): with a processor named by the sub-architecture, an empty
    /// processor or `generic` takes it (`:sramecc+:xnack-`), and a named processor must be
    /// the same one; otherwise as [`TargetId::parse`]. Does not allocate.
    pub fn parse_under(s: &str, subarch: Subarch) -> Result<Self> {
        let Subarch::Processor(from_triple) = subarch else {
            return TargetId::parse(s);
        };
        let name = s.split(':').next().unwrap_or("");
        if !name.is_empty() && name != "generic" {
            let t = TargetId::parse(s)?;
            if !core::ptr::eq(t.processor, from_triple) {
                return Err(Error::new(
                    ErrorKind::InvalidId,
                    0,
                    "target ID names another processor than the triple's sub-architecture",
                ));
            }
            return Ok(t);
        }
        TargetId::with_features(from_triple, s.split(':').skip(1))
    }
}

/// True when `name` has the shape of an AMDGPU processor name (`gfx…`), known or not.
pub fn looks_like_amdgpu_processor(name: &str) -> bool {
    name.starts_with("gfx")
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn table_is_consistent() {
        for (i, a) in PROCESSORS.iter().enumerate() {
            for b in PROCESSORS.iter().skip(i + 1) {
                assert_ne!(a.name, b.name);
                assert_ne!(a.mach, b.mach, "{} / {}", a.name, b.name);
                for alias in a.aliases {
                    assert!(!b.aliases.contains(alias) && b.name != *alias);
                }
            }
            if let Some(fam) = a.family {
                let g = Processor::by_name(fam).unwrap();
                assert_eq!(g.min_generic_version(a), Some(1), "{}", a.name);
            }
            for (m, v) in a.members {
                let member = Processor::by_name(m).unwrap();
                assert_eq!(member.family, Some(a.name));
                assert!(*v >= 1);
            }
            // Every canonical name with every feature fits the fixed-capacity string.
            let t = TargetId {
                processor: a,
                sramecc: FeatureState::On,
                xnack: FeatureState::On,
            };
            assert_eq!(t.canonical().as_str(), t.to_string());
        }
    }

    #[test]
    fn parse_and_canonicalise() {
        let t = TargetId::parse("gfx90a:xnack-:sramecc+").unwrap();
        assert_eq!(t.to_string(), "gfx90a:sramecc+:xnack-");
        assert_eq!(TargetId::parse("fiji").unwrap().to_string(), "gfx803");
        assert_eq!(TargetId::parse("gfx906").unwrap().xnack, FeatureState::Any);
        assert_eq!(
            TargetId::parse("gfx1030").unwrap().xnack,
            FeatureState::Unsupported
        );
        assert_eq!(
            TargetId::parse("gfx9-4-generic:sramecc+")
                .unwrap()
                .to_string(),
            "gfx9-4-generic:sramecc+"
        );
        for bad in [
            "",
            ":xnack+",
            "gfx1030:xnack+",
            "gfx9-generic:sramecc+",
            "gfx1250:xnack+",
            "gfx90a:xnack",
            "gfx90a:xnack+:xnack-",
            "gfx90a:xnack+:",
            "gfx90a:foo+",
            "gfx9999",
        ] {
            assert_eq!(
                TargetId::parse(bad).unwrap_err().kind(),
                ErrorKind::InvalidId,
                "{bad}"
            );
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(Processor::by_mach(0x3F).unwrap().name, "gfx90a");
        assert_eq!(Processor::by_mach(0x51).unwrap().name, "gfx9-generic");
        assert!(Processor::by_mach(0x27).is_none());
        assert_eq!(Processor::by_isa_version(9, 0, 10).unwrap().name, "gfx90a");
        assert_eq!(
            Processor::by_name("gfx1103")
                .unwrap()
                .generic()
                .unwrap()
                .name,
            "gfx11-generic"
        );
        assert!(Processor::by_name("gfx90a").unwrap().generic().is_none());
        // gfx1250-strict: MACH 0xEB (llvm/llvm-project#218543's ELF.h), ISA 12.5.0 like
        // gfx1250 (ROCm/llvm-project#4121), which ISA 12.5.0 names.
        let strict = Processor::by_mach(0xEB).unwrap();
        assert_eq!(
            (strict.name, strict.isa_version),
            ("gfx1250-strict", Some((12, 5, 0)))
        );
        assert_eq!(Processor::by_isa_version(12, 5, 0).unwrap().name, "gfx1250");
        let g11 = Processor::by_name("gfx11-generic").unwrap();
        assert!(g11
            .min_generic_version(Processor::by_name("gfx1170").unwrap())
            .is_none());
    }
}
