//! NVPTX architectures: `sm_XY`, `sm_XYa`, `sm_XYf`, `compute_XY…` (`COMPATIBILITY.md` §9).

use core::fmt;

use crate::error::{Error, ErrorKind, Result};

/// The suffix of an NVPTX architecture name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArchVariant {
    /// `a`: architecture-specific features; runs only on exactly this compute capability.
    ArchSpecific,
    /// `f`: family-specific features; runs on this and later minors of the same major.
    FamilySpecific,
    /// No suffix.
    Plain,
}

impl ArchVariant {
    /// `"a"`, `"f"` or `""`.
    pub const fn suffix(self) -> &'static str {
        match self {
            ArchVariant::ArchSpecific => "a",
            ArchVariant::FamilySpecific => "f",
            ArchVariant::Plain => "",
        }
    }
}

/// An NVPTX architecture: SM number (`90` for `sm_90`, `100` for `sm_100`) and variant.
///
/// Compute capability = `(sm / 10).(sm % 10)`. Whether the code is a cubin or PTX is not
/// part of the name here (`sm_80` is also what OffloadBinaries write for PTX); that comes
/// from the image kind. A `compute_XY` spelling parses to the same value with
/// [`NvArch::virtual_name`] set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NvArch {
    /// SM number (major * 10 + minor).
    pub sm: u16,
    /// Suffix.
    pub variant: ArchVariant,
    /// Spelled `compute_…` (a virtual architecture: PTX).
    pub virtual_name: bool,
}

impl NvArch {
    /// Parses `sm_XY`, `sm_XYa`, `sm_XYf`, `compute_XY[a|f]`.
    ///
    /// The SM number must be 10–999 (NVIDIA adds numbers with every CUDA release, so
    /// unknown ones are accepted). `a` needs SM ≥ 90 and `f` SM ≥ 100, as in CUDA.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |what| Error::new(ErrorKind::InvalidId, 0, what);
        let (rest, virtual_name) = if let Some(r) = s.strip_prefix("sm_") {
            (r, false)
        } else if let Some(r) = s.strip_prefix("compute_") {
            (r, true)
        } else {
            return Err(bad(
                "NVPTX architecture must start with 'sm_' or 'compute_'",
            ));
        };
        let (digits, variant) = if let Some(d) = rest.strip_suffix('a') {
            (d, ArchVariant::ArchSpecific)
        } else if let Some(d) = rest.strip_suffix('f') {
            (d, ArchVariant::FamilySpecific)
        } else {
            (rest, ArchVariant::Plain)
        };
        if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(
                "NVPTX architecture number must be 2 or 3 decimal digits",
            ));
        }
        let sm: u16 = digits
            .parse()
            .map_err(|_| bad("NVPTX architecture number must be 2 or 3 decimal digits"))?;
        if sm < 10 {
            return Err(bad(
                "NVPTX architecture number must be 2 or 3 decimal digits",
            ));
        }
        match variant {
            ArchVariant::ArchSpecific if sm < 90 => {
                return Err(bad("the 'a' suffix exists from sm_90 on"))
            }
            ArchVariant::FamilySpecific if sm < 100 => {
                return Err(bad("the 'f' suffix exists from sm_100 on"))
            }
            _ => {}
        }
        Ok(NvArch {
            sm,
            variant,
            virtual_name,
        })
    }

    /// A plain `sm_XY` for compute capability `major.minor` (minor ≤ 9).
    pub fn from_capability(major: u8, minor: u8) -> Option<Self> {
        if minor > 9 || major == 0 {
            return None;
        }
        Some(NvArch {
            sm: u16::from(major)
                .saturating_mul(10)
                .saturating_add(u16::from(minor)),
            variant: ArchVariant::Plain,
            virtual_name: false,
        })
    }

    /// Compute capability major version.
    pub const fn major(&self) -> u16 {
        self.sm / 10
    }

    /// Compute capability minor version.
    pub const fn minor(&self) -> u16 {
        self.sm % 10
    }

    /// The same architecture as a real (`sm_`) name.
    pub const fn real(self) -> Self {
        NvArch {
            virtual_name: false,
            ..self
        }
    }
}

impl fmt::Display for NvArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = if self.virtual_name { "compute_" } else { "sm_" };
        write!(f, "{prefix}{}{}", self.sm, self.variant.suffix())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn names() {
        let a = NvArch::parse("sm_90a").unwrap();
        assert_eq!(
            (a.sm, a.variant, a.major(), a.minor()),
            (90, ArchVariant::ArchSpecific, 9, 0)
        );
        let f = NvArch::parse("sm_100f").unwrap();
        assert_eq!(
            (f.major(), f.minor(), f.variant),
            (10, 0, ArchVariant::FamilySpecific)
        );
        assert_eq!(NvArch::parse("sm_103").unwrap().minor(), 3);
        assert_eq!(
            NvArch::parse("compute_80").unwrap().to_string(),
            "compute_80"
        );
        assert_eq!(
            NvArch::from_capability(12, 1).unwrap().to_string(),
            "sm_121"
        );
        for bad in [
            "sm_", "sm_8", "sm_80a", "sm_90f", "gfx90a", "sm_1000", "sm_9x",
        ] {
            assert!(NvArch::parse(bad).is_err(), "{bad}");
        }
    }
}
