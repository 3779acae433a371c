//! Bundle entry IDs (`<kind>-<arch>-<vendor>-<os>-<env>-<target id>`) and triples, split
//! into their fields as stored (the comparison rules live in [`crate::arch`]).

use crate::error::{Error, ErrorKind, Result};

/// A bundle entry ID split into its parts, borrowing the stored ID (`COMPATIBILITY.md` §1).
///
/// Every spelling real tools write is accepted: 4-field triples with an empty or named
/// environment (`hipv4-amdgcn-amd-amdhsa--gfx90a`, `openmp-nvptx64-nvidia-cuda-unknown-sm_80`),
/// host IDs with a trailing `-` (`host-x86_64-unknown-linux-gnu-`), the legacy 3-field
/// form where the processor takes the environment's place (`hip-amdgcn-amd-amdhsa-gfx906`),
/// and old host IDs with a 3-field triple and nothing after it (`host-x86_64-unknown-linux`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntryId<'a> {
    /// The offload kind field (`host`, `openmp`, `hip`, `hipv4`, `hcc`, ...).
    pub kind: &'a str,
    /// The triple as stored (3 or 4 fields; the environment may be empty).
    pub triple: &'a str,
    /// The target ID (processor and features), `None` when absent or empty.
    pub target_id: Option<&'a str>,
}

/// Looks like a processor name in the environment slot of a legacy 3-field ID.
fn looks_like_processor(s: &str) -> bool {
    s.starts_with("gfx") || s.starts_with("sm_") || s == "amdgcnspirv"
}

/// Positions of the first five `-` of `id` and how many there are (at most 5): eight bytes
/// at a time, each word's `-` bytes found with exact bit arithmetic (no carries between
/// bytes), then the rest byte by byte.
fn first_dashes(id: &[u8]) -> ([usize; 5], usize) {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const DASHES: u64 = 0x2d2d_2d2d_2d2d_2d2d;
    let mut dash = [0usize; 5];
    let mut n = 0usize;
    let mut push = |i: usize| {
        if let Some(slot) = dash.get_mut(n) {
            *slot = i;
        }
        n = n.saturating_add(1);
        n == 5
    };
    let mut chunks = id.chunks_exact(8);
    let mut base = 0usize;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(<[u8; 8]>::try_from(chunk).unwrap_or_default()) ^ DASHES;
        // The high bit of each byte that is 0 in `word` (a '-' in the ID), and no other.
        let mut zeros = !(((word & LOW7).wrapping_add(LOW7)) | word | LOW7);
        while zeros != 0 {
            let at = usize::try_from(zeros.trailing_zeros() / 8).unwrap_or(0);
            if push(base.saturating_add(at)) {
                return (dash, n);
            }
            zeros &= zeros.wrapping_sub(1);
        }
        base = base.saturating_add(8);
    }
    for (i, &b) in chunks.remainder().iter().enumerate() {
        if b == b'-' && push(base.saturating_add(i)) {
            break;
        }
    }
    (dash, n)
}

impl<'a> EntryId<'a> {
    /// Splits a bundle entry ID.
    pub fn parse(id: &'a str) -> Result<Self> {
        Self::split(id).map(|(e, _)| e)
    }

    /// [`EntryId::parse`], and the positions of the first and fifth `-` when the ID has five
    /// (a 4-field triple and a target: the split of every ID with the same bytes up to the
    /// fifth `-` is the same).
    fn split(id: &'a str) -> Result<(Self, Option<(usize, usize)>)> {
        let invalid = |what| Error::new(ErrorKind::InvalidId, 0, what);
        const NO_TRIPLE: &str =
            "bundle entry ID has no triple (expected <kind>-<arch>-<vendor>-<os>[-<env>[-<target>]])";
        // The first five '-' (the kind, then up to four fields; the rest is the target ID,
        // which may hold '-' itself: `gfx9-generic`).
        let (dash, n) = first_dashes(id.as_bytes());
        let [d0, d1, d2, d3, d4] = dash;
        if n == 0 || d0 == 0 {
            return Err(invalid(if d0 == 0 && n > 0 || id.is_empty() {
                "bundle entry ID has an empty offload kind"
            } else {
                NO_TRIPLE
            }));
        }
        let kind = id.get(..d0).unwrap_or("");
        // `n` fields follow the kind: field k ends at dash k + 1 (the last at the end).
        if n < 3 {
            return Err(invalid(NO_TRIPLE));
        }
        let ends = [d1, d2, if n > 3 { d3 } else { id.len() }];
        let starts = [d0, d1, d2];
        if starts.iter().zip(ends).any(|(&s, e)| e == s.saturating_add(1)) {
            return Err(invalid(
                "bundle entry ID has an empty arch, vendor or OS field",
            ));
        }
        let from = d0.saturating_add(1);
        let field = |start: usize, end: usize| id.get(start..end).unwrap_or("");
        let dashes = (n == 5).then_some((d0, d4));
        let (triple, target) = match n {
            3 => (field(from, id.len()), None),
            4 => {
                let env = field(d3.saturating_add(1), id.len());
                let os = field(d2.saturating_add(1), d3);
                if looks_like_processor(env) && matches!(os, "amdhsa" | "cuda") {
                    (field(from, d3), Some(env))
                } else {
                    (field(from, id.len()), None)
                }
            }
            // A 4-field triple is stored with its separator to the target ("...-amdhsa-" + "-gfx").
            _ => (field(from, d4), Some(field(d4.saturating_add(1), id.len()))),
        };
        Ok((
            EntryId {
                kind,
                triple,
                target_id: target.filter(|t| !t.is_empty()),
            },
            dashes,
        ))
    }
}

/// Splits the IDs of one bundle's entries ([`EntryId::parse`]), reusing the split of the
/// last ID that had five `-` when the next starts with the same bytes up to its fifth `-`
/// (`hipv4-amdgcn-amd-amdhsa--`): the same first five `-`, so the same kind and triple,
/// the target the rest. Real bundles name every entry with one kind and triple.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdSplitter<'a> {
    /// The last ID's bytes up to and with its fifth `-`; empty when there is none.
    prefix: &'a [u8],
    /// The position of its first `-`.
    kind_end: usize,
}

impl<'a> IdSplitter<'a> {
    /// Splits `id` as [`EntryId::parse`] does.
    #[inline]
    pub(crate) fn split(&mut self, id: &'a str) -> Result<EntryId<'a>> {
        let prefix = self.prefix;
        if !prefix.is_empty() && id.as_bytes().starts_with(prefix) {
            let d4 = prefix.len().saturating_sub(1);
            let field = |start: usize, end: usize| id.get(start..end).unwrap_or("");
            let target = field(prefix.len(), id.len());
            return Ok(EntryId {
                kind: field(0, self.kind_end),
                triple: field(self.kind_end.saturating_add(1), d4),
                target_id: (!target.is_empty()).then_some(target),
            });
        }
        let (e, dashes) = EntryId::split(id)?;
        if let Some((d0, d4)) = dashes {
            self.prefix = id.as_bytes().get(..=d4).unwrap_or_default();
            self.kind_end = d0;
        }
        Ok(e)
    }
}

/// A target triple split into its four fields (`arch-vendor-os[-env]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Triple<'a> {
    /// Architecture (`amdgcn`, `nvptx64`, `x86_64`, `spirv64`).
    pub arch: &'a str,
    /// Vendor (`amd`, `nvidia`, `unknown`, `pc`).
    pub vendor: &'a str,
    /// Operating system (`amdhsa`, `cuda`, `linux`).
    pub os: &'a str,
    /// Environment; empty when absent. `unknown` and empty mean the same (`COMPATIBILITY.md` §1.2).
    pub env: &'a str,
}

impl<'a> Triple<'a> {
    /// Splits a triple; fewer than three non-empty fields is an error.
    pub fn parse(triple: &'a str) -> Result<Self> {
        let mut it = triple.splitn(4, '-');
        let arch = it.next().unwrap_or("");
        let vendor = it.next().unwrap_or("");
        let os = it.next().unwrap_or("");
        let env = it.next().unwrap_or("");
        if arch.is_empty() || vendor.is_empty() || os.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidId,
                0,
                "triple needs at least <arch>-<vendor>-<os>",
            ));
        }
        Ok(Triple {
            arch,
            vendor,
            os,
            env,
        })
    }

    /// The environment with `unknown` folded into empty.
    pub fn env_normalized(&self) -> &'a str {
        if self.env == "unknown" {
            ""
        } else {
            self.env
        }
    }

    /// True for every AMDGPU spelling of the architecture: the legacy `amdgcn`, and `amdgpu`
    /// with or without a sub-architecture (`amdgpu9.42`, `amdgpu9.4`; `COMPATIBILITY.md`
    /// §1.5).
    pub fn is_amdgpu(&self) -> bool {
        self.arch == "amdgcn" || self.arch.starts_with("amdgpu")
    }

    /// The AMDGPU sub-architecture as stored (`9.42` of `amdgpu9.42`), `None` for `amdgcn`,
    /// a bare `amdgpu` and other architectures.
    pub fn amdgpu_subarch(&self) -> Option<&'a str> {
        self.arch.strip_prefix("amdgpu").filter(|s| !s.is_empty())
    }

    /// Equality the way `llvm::Triple::isCompatibleWith` sees it for offload triples:
    /// the same fields, an empty environment equal to `unknown`.
    pub fn same_as(&self, other: &Triple<'_>) -> bool {
        self.arch == other.arch
            && self.vendor == other.vendor
            && self.os == other.os
            && self.env_normalized() == other.env_normalized()
    }
}

impl core::fmt::Display for Triple<'_> {
    /// The normalised spelling: three fields when the environment is empty or `unknown`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}-{}-{}", self.arch, self.vendor, self.os)?;
        match self.env_normalized() {
            "" => Ok(()),
            env => write!(f, "-{env}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str) -> (&str, &str, Option<&str>) {
        let e = EntryId::parse(id).unwrap();
        (e.kind, e.triple, e.target_id)
    }

    #[test]
    fn every_spelling_tools_write() {
        assert_eq!(
            p("hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"),
            (
                "hipv4",
                "amdgcn-amd-amdhsa-",
                Some("gfx90a:sramecc+:xnack-")
            )
        );
        assert_eq!(
            p("hipv4-amdgcn-amd-amdhsa--gfx9-generic"),
            ("hipv4", "amdgcn-amd-amdhsa-", Some("gfx9-generic"))
        );
        assert_eq!(
            p("openmp-nvptx64-nvidia-cuda-unknown-sm_80"),
            ("openmp", "nvptx64-nvidia-cuda-unknown", Some("sm_80"))
        );
        assert_eq!(
            p("openmp-nvptx64-nvidia-cuda--sm_90"),
            ("openmp", "nvptx64-nvidia-cuda-", Some("sm_90"))
        );
        assert_eq!(
            p("host-x86_64-unknown-linux-gnu-"),
            ("host", "x86_64-unknown-linux-gnu", None)
        );
        assert_eq!(
            p("host-x86_64-unknown-linux--"),
            ("host", "x86_64-unknown-linux-", None)
        );
        assert_eq!(
            p("host-x86_64-unknown-linux"),
            ("host", "x86_64-unknown-linux", None)
        );
        assert_eq!(
            p("host-x86_64-unknown-linux-gnu"),
            ("host", "x86_64-unknown-linux-gnu", None)
        );
        assert_eq!(
            p("hip-amdgcn-amd-amdhsa-gfx906"),
            ("hip", "amdgcn-amd-amdhsa", Some("gfx906"))
        );
        assert!(EntryId::parse("hip").is_err());
        assert!(EntryId::parse("hip-amdgcn").is_err());
        assert!(EntryId::parse("-amdgcn-amd-amdhsa--gfx906").is_err());
    }

    #[test]
    fn the_reused_split_is_the_split() {
        // IDs one after the other as a bundle lists them: the same kind and triple with
        // other targets (empty, with '-', with features), then other prefixes, and back.
        let ids = [
            "hipv4-amdgcn-amd-amdhsa--gfx900",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
            "hipv4-amdgcn-amd-amdhsa--",
            "hipv4-amdgcn-amd-amdhsa--gfx9-generic",
            "hipv4-amdgcn-amd-amdhsa-",
            "hipv4-amdgcn-amd-amdhsa",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
            "hipv4-amdgcn-amd-amdhsa-gnu-gfx1100",
            "host-x86_64-unknown-linux-gnu-",
            "host-x86_64-unknown-linux--",
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx942",
            "hip-amdgcn-amd-amdhsa-gfx906",
            "hip-amdgcn-amd-amdhsa-gfx906-x",
            "-amdgcn-amd-amdhsa--gfx906",
            "openmp-nvptx64-nvidia-cuda--sm_90",
            "openmp-nvptx64-nvidia-cuda--",
            "hipv4-amdgcn-amd-amdhsa--gfx900",
        ];
        let mut splitter = IdSplitter::default();
        for id in ids {
            let reused = splitter.split(id);
            match EntryId::parse(id) {
                Ok(e) => assert_eq!(reused.unwrap(), e, "{id}"),
                Err(e) => assert_eq!(reused.unwrap_err(), e, "{id}"),
            }
        }
        // The reuse happened: the prefix of the last ID with five '-' is kept.
        assert_eq!(splitter.prefix, b"hipv4-amdgcn-amd-amdhsa--");
    }

    #[test]
    fn triples_normalise() {
        let t = Triple::parse("amdgcn-amd-amdhsa-").unwrap();
        assert_eq!(alloc::format!("{t}"), "amdgcn-amd-amdhsa");
        let u = Triple::parse("amdgcn-amd-amdhsa-unknown").unwrap();
        assert!(t.same_as(&u));
        let g = Triple::parse("x86_64-unknown-linux-gnu").unwrap();
        assert_eq!(alloc::format!("{g}"), "x86_64-unknown-linux-gnu");
    }

    #[test]
    fn amdgpu_subarch_triples_split_as_stored() {
        // COMPATIBILITY.md §1.5: the subarch is part of the architecture field.
        assert_eq!(
            p("hipv4-amdgpu9.42-amd-amdhsa--gfx942"),
            ("hipv4", "amdgpu9.42-amd-amdhsa-", Some("gfx942"))
        );
        assert_eq!(
            p("hipv4-amdgpu9.42-amd-amdhsa--"),
            ("hipv4", "amdgpu9.42-amd-amdhsa-", None)
        );
        let t = Triple::parse("amdgpu9.42-amd-amdhsa-").unwrap();
        assert!(t.is_amdgpu());
        assert_eq!(t.amdgpu_subarch(), Some("9.42"));
        assert_eq!(alloc::format!("{t}"), "amdgpu9.42-amd-amdhsa");
        for (arch, amd) in [("amdgcn", true), ("amdgpu", true), ("nvptx64", false)] {
            let t = Triple {
                arch,
                vendor: "amd",
                os: "amdhsa",
                env: "",
            };
            assert_eq!((t.is_amdgpu(), t.amdgpu_subarch()), (amd, None), "{arch}");
        }
    }
}
