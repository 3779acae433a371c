//! The NVIDIA driver as a loader: which CUDA version a driver implements, which PTX ISA
//! versions it compiles, the environment switches that change what it loads, and why it
//! refuses the entry it picks (`COMPATIBILITY.md` §9.5, `NVFATBIN.md` §4).
//!
//! Everything version-related lives here, in one table ([`RELEASES`]) with its sources.
//! The order in which the driver picks among a fatbinary's entries is part of the ranking
//! ([`mod@crate::select`]); this module gives the judgement on the entry picked
//! ([`CudaDriver::refusal`]): the driver does not fall back to another entry when it
//! cannot compile the PTX it picked.
//!
//! ```
//! use offload_image::driver::{CudaDriver, DriverVersion, PtxIsa};
//!
//! let driver = CudaDriver::new(DriverVersion::parse("580.159.04"));
//! assert_eq!(driver.max_ptx_isa(), Some(PtxIsa::new(9, 0)));
//! let why = driver.refusal(Some(PtxIsa::new(9, 1))).unwrap();
//! assert_eq!(
//!     why.to_string(),
//!     "PTX ISA 9.1 needs a driver for CUDA 13.1 or later; this driver (580.159.04) \
//!      compiles up to 9.0 (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)"
//! );
//! assert_eq!(driver.refusal(Some(PtxIsa::new(8, 8))), None);
//! ```

use core::fmt;

use crate::decompress::Codec;

/// An NVIDIA driver version as NVML and `nvidia-smi` print it: `550.54.14`, `535.183.01`
/// (Linux), `551.61` (Windows). Ordered field by field; a version without a patch sorts just
/// before the same version with patch 0. Displayed as NVIDIA prints it: the minor version
/// and the patch with at least two digits.
///
/// Linux and Windows drivers of one release have different numbers (CUDA 12.4: 550.54.14
/// and 551.61); the thresholds here are the Linux ones, which the Windows numbers of the
/// same release exceed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriverVersion {
    /// The branch (`550`).
    pub major: u32,
    /// The minor version (`54`).
    pub minor: u32,
    /// The patch (`14`; `None` when not printed, as on Windows).
    pub patch: Option<u32>,
}

impl DriverVersion {
    tools_pub! {
        /// The oldest Linux driver that loads zstd-compressed fatbinary entries (flag `0x8000`,
        /// `nvcc --compress-mode=size|balance` on CUDA 12; CUDA 13's default): 550.54.14, the
        /// driver of CUDA 12.4. LZ4 entries (`0x2000`, `-Xfatbin=-compress-all`) load with every
        /// CUDA 12 driver (525.60.13 on), so they add no requirement of their own. Source:
        /// RAPIDS' `rapids_cuda_enable_fatbin_compression` documentation (NVIDIA's own pages
        /// state no number); not measured here (docs/NVFATBIN.md).
        pub const ZSTD_FATBIN: DriverVersion = DriverVersion {
            major: 550,
            minor: 54,
            patch: Some(14),
        };
    }

    /// Parses `major.minor[.patch]` (decimal fields); `None` for anything else.
    pub fn parse(text: &str) -> Option<DriverVersion> {
        // Digits only (`parse` alone would take a leading `+`); overflow is `None`.
        let number = |f: &str| -> Option<u32> {
            f.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| f.parse().ok())?
        };
        let mut fields = text.trim().split('.');
        let major = number(fields.next()?)?;
        let minor = number(fields.next()?)?;
        let patch = match fields.next() {
            None => None,
            Some(f) => Some(number(f)?),
        };
        fields.next().is_none().then_some(DriverVersion {
            major,
            minor,
            patch,
        })
    }

    tools_pub! {
        /// The oldest driver that decodes fatbinary entries stored with `codec` (`None`: no
        /// requirement beyond the toolkit's own).
        pub const fn needed_for(codec: Codec) -> Option<DriverVersion> {
            match codec {
                Codec::Zstd => Some(DriverVersion::ZSTD_FATBIN),
                Codec::Lz4 | Codec::Zlib => None,
            }
        }
    }

    tools_pub! {
        /// The CUDA version this driver implements (what `cuDriverGetVersion` reports), from
        /// its branch ([`RELEASES`]); `None` for a branch the table does not know (older than
        /// CUDA 9.0's, or newer than the newest listed).
        pub fn cuda(self) -> Option<CudaVersion> {
            release_of_branch(self.major).map(|r| r.cuda)
        }
    }
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.major, self.minor)?;
        match self.patch {
            Some(p) => write!(f, ".{p:02}"),
            None => Ok(()),
        }
    }
}

/// A CUDA version (`13.0`): what a driver implements and a toolkit targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CudaVersion {
    /// `13`.
    pub major: u8,
    /// `0`.
    pub minor: u8,
}

impl CudaVersion {
    /// `major.minor`.
    pub const fn new(major: u8, minor: u8) -> Self {
        CudaVersion { major, minor }
    }

    /// The highest PTX ISA version this CUDA version's driver compiles ([`RELEASES`]);
    /// `None` for a version the table does not list.
    pub fn max_ptx_isa(self) -> Option<PtxIsa> {
        RELEASES.iter().find(|r| r.cuda == self).map(|r| r.ptx_isa)
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A PTX ISA version, as a PTX text's `.version` directive states it (`9.0`), or a
/// fatbinary entry header records it for a PTX entry (`NVFATBIN.md` §2.2, `+0x18`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PtxIsa {
    /// `9`.
    pub major: u8,
    /// `0`.
    pub minor: u8,
}

impl PtxIsa {
    /// `major.minor`.
    pub const fn new(major: u8, minor: u8) -> Self {
        PtxIsa { major, minor }
    }

    /// The version a PTX text states: its first directive, after blank lines and `//`
    /// comments, must be `.version MAJOR.MINOR` (the PTX ISA requires it first). Reads at
    /// most the first 4 KiB; `None` when no such directive is found there.
    ///
    /// ```
    /// use offload_image::driver::PtxIsa;
    /// let text = b"//\n// Generated by NVIDIA NVVM Compiler\n//\n\n.version 9.1\n.target sm_90\n";
    /// assert_eq!(PtxIsa::of_text(text), Some(PtxIsa::new(9, 1)));
    /// assert_eq!(PtxIsa::of_text(b".target sm_90\n.version 9.1\n"), None);
    /// ```
    pub fn of_text(text: &[u8]) -> Option<PtxIsa> {
        let head = text.get(..text.len().min(4096)).unwrap_or_default();
        for line in head.split(|&b| b == b'\n') {
            let line = line.trim_ascii();
            if line.is_empty() || line.starts_with(b"//") {
                continue;
            }
            let rest = line.strip_prefix(b".version")?;
            let rest = core::str::from_utf8(rest).ok()?.trim();
            let (major, minor) = rest.split_once('.')?;
            let minor = minor.split(|c: char| !c.is_ascii_digit()).next()?;
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            if !digits(major) || !digits(minor) {
                return None;
            }
            return Some(PtxIsa::new(major.parse().ok()?, minor.parse().ok()?));
        }
        None
    }

    /// The version a fatbinary entry header records in its `+0x18` field: the major
    /// version in the high half, the minor in the low half (`0x90001`: 9.1). Read for PTX
    /// entries only, where it equals the text's `.version` in every file seen.
    pub fn of_code_version(field: u32) -> Option<PtxIsa> {
        let major = u8::try_from(field >> 16).ok()?;
        let minor = u8::try_from(field & 0xFFFF).ok()?;
        Some(PtxIsa::new(major, minor))
    }

    /// The oldest CUDA version whose driver compiles this ISA ([`RELEASES`]); `None`
    /// when no listed release does (newer than the table).
    pub fn needs_cuda(self) -> Option<CudaVersion> {
        RELEASES
            .iter()
            .filter(|r| r.ptx_isa >= self)
            .map(|r| r.cuda)
            .min()
    }
}

impl fmt::Display for PtxIsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// One CUDA release as the driver sees it: the Linux driver branches that implement it
/// and the PTX ISA it compiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// The CUDA version (`cuDriverGetVersion`).
    pub cuda: CudaVersion,
    /// The first driver branch of this CUDA version (`580` for 13.0); every branch up to
    /// the next release's first branch implements it (Windows numbers of a release lie in
    /// the same range: 551.61 is CUDA 12.4's). `None` where no source this tool cites gives
    /// it (CUDA 13.4 on).
    pub first_branch: Option<u32>,
    /// The minimum Linux driver of the toolkit's GA release (NVIDIA's CUDA Toolkit release
    /// notes, "CUDA Toolkit and Corresponding Driver Versions"); `None` where no source
    /// this tool cites gives it (CUDA 13.4 on).
    pub min_driver: Option<DriverVersion>,
    /// The highest PTX ISA version its driver compiles (the PTX ISA documentation's
    /// "PTX ISA Version" release table).
    pub ptx_isa: PtxIsa,
}

const fn release(cuda: (u8, u8), branch: u32, driver: (u32, u32, u32), isa: (u8, u8)) -> Release {
    Release {
        cuda: CudaVersion::new(cuda.0, cuda.1),
        first_branch: Some(branch),
        min_driver: Some(DriverVersion {
            major: driver.0,
            minor: driver.1,
            patch: Some(driver.2),
        }),
        ptx_isa: PtxIsa::new(isa.0, isa.1),
    }
}

/// A release whose PTX ISA is measured but whose driver branch and minimum driver no
/// source this tool cites gives.
const fn release_isa_only(cuda: (u8, u8), isa: (u8, u8)) -> Release {
    Release {
        cuda: CudaVersion::new(cuda.0, cuda.1),
        first_branch: None,
        min_driver: None,
        ptx_isa: PtxIsa::new(isa.0, isa.1),
    }
}

/// The CUDA releases the driver model knows, oldest first: the one table of driver
/// branches, CUDA versions and PTX ISA versions.
///
/// Sources: the CUDA Toolkit release notes (driver minimums of each GA release), the PTX
/// ISA documentation's release history (ISA per CUDA version: 12.5 and 12.6 both 8.5),
/// `cuDriverGetVersion` as the records in `shared/oracle/cuda-driver` report it (driver
/// 580.159.04: 13000) and those records themselves: driver 580 compiles ISA 8.8 and 9.0
/// and refuses 9.1 and 9.5 with `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` (222).
///
/// CUDA 13.2 to 13.5: the PTX ISA each compiles is measured on its `ptxas` (the
/// `nvidia-cuda-nvcc` wheels 13.2.51, 13.3.33, 13.4.59 and 13.5.37 refuse `.version 9.9`
/// with "current version is '9.2'", '9.3', '9.4', '9.5'). The minimum drivers of 13.2 and
/// 13.3 are the "CUDA 13.2 GA" (595.45.04) and "CUDA 13.3 GA" (610.43.02) rows of Table 3,
/// "CUDA Toolkit and Corresponding Driver Versions", in section 2.2 "CUDA Driver" of the
/// CUDA Toolkit 13.2 and 13.3 Release Notes (the Windows column reads "N/A" from CUDA 13.0
/// on: the Windows toolkit no longer bundles a driver). From CUDA 13.4 the Linux toolkit
/// does not bundle one either and no GA row of that table could be read, so 13.4 and 13.5
/// have no branch and no minimum driver (`None`): no driver number is invented. Branches
/// from [`UNKNOWN_FROM_BRANCH`] on are newer than the rows with a branch: their CUDA version
/// is `None` and PTX ISA versions are not judged for them.
pub const RELEASES: &[Release] = &[
    release((9, 0), 384, (384, 81, 0), (6, 0)),
    release((9, 1), 387, (387, 26, 0), (6, 1)),
    release((9, 2), 396, (396, 26, 0), (6, 2)),
    release((10, 0), 410, (410, 48, 0), (6, 3)),
    release((10, 1), 418, (418, 39, 0), (6, 4)),
    release((10, 2), 440, (440, 33, 1), (6, 5)),
    release((11, 0), 450, (450, 36, 6), (7, 0)),
    release((11, 1), 455, (455, 23, 0), (7, 1)),
    release((11, 2), 460, (460, 27, 3), (7, 2)),
    release((11, 3), 465, (465, 19, 1), (7, 3)),
    release((11, 4), 470, (470, 42, 1), (7, 4)),
    release((11, 5), 495, (495, 29, 5), (7, 5)),
    release((11, 6), 510, (510, 39, 1), (7, 6)),
    release((11, 7), 515, (515, 43, 4), (7, 7)),
    release((11, 8), 520, (520, 61, 5), (7, 8)),
    release((12, 0), 525, (525, 60, 13), (8, 0)),
    release((12, 1), 530, (530, 30, 2), (8, 1)),
    release((12, 2), 535, (535, 54, 3), (8, 2)),
    release((12, 3), 545, (545, 23, 6), (8, 3)),
    release((12, 4), 550, (550, 54, 14), (8, 4)),
    release((12, 5), 555, (555, 42, 2), (8, 5)),
    release((12, 6), 560, (560, 28, 3), (8, 5)),
    release((12, 7), 565, (565, 57, 1), (8, 6)),
    release((12, 8), 570, (570, 26, 0), (8, 7)),
    release((12, 9), 575, (575, 51, 3), (8, 8)),
    release((13, 0), 580, (580, 65, 6), (9, 0)),
    release((13, 1), 590, (590, 44, 1), (9, 1)),
    release((13, 2), 595, (595, 45, 4), (9, 2)),
    release((13, 3), 610, (610, 43, 2), (9, 3)),
    release_isa_only((13, 4), (9, 4)),
    release_isa_only((13, 5), (9, 5)),
];

/// The first branch after CUDA 13.3's (610, the last release with a known branch) that is
/// not known to implement it: branches from here on are newer than the table knows.
pub const UNKNOWN_FROM_BRANCH: u32 = 611;

/// The oldest driver a CUDA *runtime* (`libcudart`) of a version starts on: older, it
/// refuses to start (`cudaErrorInsufficientDriver`, 35) whatever the fat binaries hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeFloor {
    /// The oldest Linux driver (Windows numbers of a release are higher).
    pub driver: DriverVersion,
    /// True from CUDA 11 on: the floor is the major release's, not the minor's (minor
    /// version compatibility).
    pub minor_compatible: bool,
}

/// The floor of a CUDA runtime of version `major.minor` (`minor` `None` when only the
/// major version is known), per NVIDIA's "CUDA Compatibility" guide ("Minor Version
/// Compatibility", table "CUDA Toolkit 11.x, 12.x, and 13.x Driver Version Ranges") and
/// the release notes: from CUDA 11 on a runtime runs on every driver of its major release,
/// the oldest being the driver of the major release's `.0` toolkit ([`RELEASES`]: 13.x
/// needs 580.65.06, 12.x 525.60.13), except 11.x, which needs 450.80.02 (the guide's note:
/// 11.0 shipped with an older driver). Before CUDA 11 a runtime needs its own release's
/// driver, so its minor version must be known. `None` for a version the table does not
/// know.
///
/// ```
/// use offload_image::driver::runtime_floor;
///
/// let f = runtime_floor(13, Some(5)).unwrap();
/// assert_eq!((f.driver.to_string(), f.minor_compatible), ("580.65.06".into(), true));
/// assert_eq!(runtime_floor(10, Some(2)).unwrap().driver.to_string(), "440.33.01");
/// assert_eq!(runtime_floor(10, None), None);
/// ```
pub fn runtime_floor(major: u8, minor: Option<u8>) -> Option<RuntimeFloor> {
    let min_of = |cuda: CudaVersion| {
        RELEASES
            .iter()
            .find(|r| r.cuda == cuda)
            .and_then(|r| r.min_driver)
    };
    if major >= 11 {
        let driver = if major == 11 {
            DriverVersion::parse("450.80.02")?
        } else {
            min_of(CudaVersion::new(major, 0))?
        };
        return Some(RuntimeFloor {
            driver,
            minor_compatible: true,
        });
    }
    Some(RuntimeFloor {
        driver: min_of(CudaVersion::new(major, minor?))?,
        minor_compatible: false,
    })
}

fn release_of_branch(branch: u32) -> Option<&'static Release> {
    if branch >= UNKNOWN_FROM_BRANCH {
        return None;
    }
    RELEASES
        .iter()
        .rev()
        .find(|r| r.first_branch.is_some_and(|b| b <= branch))
}

/// The driver's environment switches (NVIDIA's CUDA Environment Variables documentation):
/// `CUDA_FORCE_PTX_JIT=1` makes the driver ignore cubins and compile PTX;
/// `CUDA_DISABLE_PTX_JIT=1` stops it compiling PTX; `CUDA_CACHE_DISABLE=1` stops it reading
/// (and filling) its JIT cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct JitSwitches {
    /// `CUDA_FORCE_PTX_JIT` is on.
    pub force_ptx_jit: bool,
    /// `CUDA_DISABLE_PTX_JIT` is on.
    pub disable_ptx_jit: bool,
    /// `CUDA_CACHE_DISABLE` is on: with `CUDA_DISABLE_PTX_JIT`, no PTX loads at all
    /// (`COMPATIBILITY.md` §9.5, rule 6).
    pub cache_disabled: bool,
}

impl JitSwitches {
    tools_pub! {
        /// Whether a switch's value turns it on, read as the driver reads an integer
        /// variable: leading blanks and a decimal number (C's `atoi`), on when not zero. An
        /// unset variable (`None`), `"0"`, `""` and text without a number are off.
        ///
        /// ```
        /// use offload_image::driver::JitSwitches;
        /// assert!(JitSwitches::is_on(Some("1")) && JitSwitches::is_on(Some(" 2")));
        /// assert!(!JitSwitches::is_on(Some("0")) && !JitSwitches::is_on(Some("yes")));
        /// assert!(!JitSwitches::is_on(None));
        /// ```
        pub fn is_on(value: Option<&str>) -> bool {
            let Some(v) = value else { return false };
            let v = v.trim_start();
            let v = v.strip_prefix(['+', '-']).unwrap_or(v);
            v.bytes()
                .take_while(u8::is_ascii_digit)
                .any(|digit| digit != b'0')
        }
    }

    tools_pub! {
        /// The variable that forces the JIT.
        pub const FORCE_PTX_JIT_VAR: &'static str = "CUDA_FORCE_PTX_JIT";
    }
    tools_pub! {
        /// The variable that disables the JIT.
        pub const DISABLE_PTX_JIT_VAR: &'static str = "CUDA_DISABLE_PTX_JIT";
    }
    tools_pub! {
        /// The variable that disables the JIT cache.
        pub const CACHE_DISABLE_VAR: &'static str = "CUDA_CACHE_DISABLE";
    }

    /// The switches of an environment, `var` giving a variable's value (`None` when unset):
    /// [`JitSwitches::FORCE_PTX_JIT_VAR`], [`JitSwitches::DISABLE_PTX_JIT_VAR`] and
    /// [`JitSwitches::CACHE_DISABLE_VAR`], read by [`JitSwitches::is_on`].
    ///
    /// ```
    /// use offload_image::driver::JitSwitches;
    /// let env = |name: &str| (name == "CUDA_FORCE_PTX_JIT").then_some("1");
    /// assert!(JitSwitches::from_env(env).force_ptx_jit);
    /// assert!(!JitSwitches::from_env(env).disable_ptx_jit);
    /// ```
    pub fn from_env<S: AsRef<str>>(var: impl Fn(&str) -> Option<S>) -> Self {
        let on = |name| Self::is_on(var(name).as_ref().map(AsRef::as_ref));
        JitSwitches {
            force_ptx_jit: on(Self::FORCE_PTX_JIT_VAR),
            disable_ptx_jit: on(Self::DISABLE_PTX_JIT_VAR),
            cache_disabled: on(Self::CACHE_DISABLE_VAR),
        }
    }

    tools_pub! {
        /// No switch set.
        pub const NONE: JitSwitches = JitSwitches {
            force_ptx_jit: false,
            disable_ptx_jit: false,
            cache_disabled: false,
        };
    }
}

/// What the NVIDIA devices' driver is, for selection: its version when known, and its
/// environment switches ([`crate::SelectOptions::cuda`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CudaDriver {
    /// The driver version (`--nvidia-driver`, or NVML's); `None`: PTX ISA versions are not
    /// judged.
    pub version: Option<DriverVersion>,
    /// `CUDA_FORCE_PTX_JIT` and `CUDA_DISABLE_PTX_JIT`.
    pub switches: JitSwitches,
}

impl CudaDriver {
    tools_pub! {
        /// A driver of `version` (when known), with no switch set.
        pub const fn new(version: Option<DriverVersion>) -> Self {
            CudaDriver {
                version,
                switches: JitSwitches::NONE,
            }
        }
    }

    tools_pub! {
        /// The highest PTX ISA the driver compiles; `None` when its version, or its branch, is
        /// not known.
        pub fn max_ptx_isa(&self) -> Option<PtxIsa> {
            self.version?.cuda()?.max_ptx_isa()
        }
    }

    tools_pub! {
        /// Why the driver refuses the PTX entry it picked, whose ISA version is `isa`; `None`
        /// when it loads it. The driver does not fall back to another entry after such a
        /// refusal (`COMPATIBILITY.md` §9.5).
        ///
        /// * With `CUDA_DISABLE_PTX_JIT`, the driver compiles nothing: it loads the PTX only
        ///   from its JIT cache (a binary it compiled from this same PTX earlier, which the
        ///   recorded loads show it doing), and fails with
        ///   `CUDA_ERROR_JIT_COMPILATION_DISABLED` (223) where no cached binary can exist: an
        ///   ISA newer than the driver compiles.
        ///   With `CUDA_CACHE_DISABLE` beside it there is no cache to load from: every PTX fails
        ///   with 223, whatever the driver's version ([`Refusal::NoJitNoCache`]; measured on an
        ///   H200, `tests/data/cuda-driver-random/`).
        /// * Otherwise, an ISA newer than the driver compiles fails with
        ///   `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` (222).
        pub fn refusal(&self, isa: Option<PtxIsa>) -> Option<Refusal> {
            if self.switches.disable_ptx_jit && self.switches.cache_disabled {
                return Some(Refusal::NoJitNoCache);
            }
            let (isa, max, driver) = (isa?, self.max_ptx_isa()?, self.version?);
            if isa <= max {
                return None;
            }
            Some(Refusal::TooNew(PtxTooNew {
                isa,
                max,
                driver,
                needs: isa.needs_cuda(),
                jit_disabled: self.switches.disable_ptx_jit,
            }))
        }
    }
}

/// Why the driver refuses the PTX entry it picked ([`CudaDriver::refusal`]). `Display`
/// names the cause and the CUDA error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Its ISA is newer than the driver compiles.
    TooNew(PtxTooNew),
    /// `CUDA_DISABLE_PTX_JIT` and `CUDA_CACHE_DISABLE` are both set: the driver neither
    /// compiles PTX nor loads a binary it compiled before (223).
    NoJitNoCache,
}

impl Refusal {
    /// The CUDA error the driver returns: 222 (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`) or 223
    /// (`CUDA_ERROR_JIT_COMPILATION_DISABLED`).
    pub const fn cuda_error(&self) -> (u32, &'static str) {
        match self {
            Refusal::TooNew(t) => t.cuda_error(),
            Refusal::NoJitNoCache => (223, "CUDA_ERROR_JIT_COMPILATION_DISABLED"),
        }
    }

    /// The oldest Linux driver that compiles the entry, when the table knows one and a newer
    /// driver is the fix.
    pub fn needs_driver(&self) -> Option<DriverVersion> {
        match self {
            Refusal::TooNew(t) => t.needs_driver(),
            Refusal::NoJitNoCache => None,
        }
    }

    /// The driver that fixes the refusal, as far as the table knows it, when a newer
    /// driver is the fix ([`PtxTooNew::driver_need`]); `None` for [`Refusal::NoJitNoCache`].
    pub fn driver_need(&self) -> Option<DriverNeed> {
        match self {
            Refusal::TooNew(t) => Some(t.driver_need()),
            Refusal::NoJitNoCache => None,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooNew(t) => t.fmt(f),
            Refusal::NoJitNoCache => f.write_str(
                "CUDA_DISABLE_PTX_JIT and CUDA_CACHE_DISABLE are set: the driver neither \
                 compiles PTX nor loads it from its JIT cache (CUDA_ERROR_JIT_COMPILATION_DISABLED)",
            ),
        }
    }
}

/// A PTX entry whose ISA version is newer than the driver compiles ([`Refusal::TooNew`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PtxTooNew {
    /// The entry's PTX ISA version.
    pub isa: PtxIsa,
    /// The highest the driver compiles.
    pub max: PtxIsa,
    /// The driver.
    pub driver: DriverVersion,
    /// The oldest CUDA version whose driver compiles `isa`, when the table knows one.
    pub needs: Option<CudaVersion>,
    /// `CUDA_DISABLE_PTX_JIT` is set: the error is 223, not 222.
    pub jit_disabled: bool,
}

impl PtxTooNew {
    /// The CUDA error the driver returns: 222 (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`) or,
    /// with `CUDA_DISABLE_PTX_JIT`, 223 (`CUDA_ERROR_JIT_COMPILATION_DISABLED`).
    pub const fn cuda_error(&self) -> (u32, &'static str) {
        if self.jit_disabled {
            (223, "CUDA_ERROR_JIT_COMPILATION_DISABLED")
        } else {
            (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
        }
    }

    /// The oldest Linux driver that compiles the entry, when the table knows its number.
    pub fn needs_driver(&self) -> Option<DriverVersion> {
        let needs = self.needs?;
        RELEASES
            .iter()
            .find(|r| r.cuda == needs)
            .and_then(|r| r.min_driver)
    }

    /// The driver that fixes the refusal, as far as the table knows it
    /// ([`DriverNeed`]).
    pub fn driver_need(&self) -> DriverNeed {
        match (self.needs_driver(), self.needs) {
            (Some(d), _) => DriverNeed::Version(d),
            (None, Some(cuda)) => DriverNeed::ForCuda(cuda),
            (None, None) => DriverNeed::Newer,
        }
    }
}

/// The NVIDIA driver that compiles a PTX entry the present driver refuses as too new
/// ([`PtxTooNew::driver_need`]): the fix is a driver, since the library has the PTX.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DriverNeed {
    /// This Linux driver or later (the release table gives its number).
    Version(DriverVersion),
    /// A driver for this CUDA version or later: the table knows the PTX ISA it compiles
    /// but not its driver number.
    ForCuda(CudaVersion),
    /// A driver newer than this tool knows: the ISA is newer than every release the table
    /// lists.
    Newer,
}

impl fmt::Display for DriverNeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverNeed::Version(v) => write!(f, "NVIDIA driver {v} or later"),
            DriverNeed::ForCuda(c) => write!(f, "an NVIDIA driver for CUDA {c} or later"),
            DriverNeed::Newer => f.write_str("an NVIDIA driver newer than this tool knows"),
        }
    }
}

impl fmt::Display for PtxTooNew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (_, error) = self.cuda_error();
        write!(f, "PTX ISA {} needs ", self.isa)?;
        match self.needs {
            Some(cuda) => write!(f, "a driver for CUDA {cuda} or later")?,
            None => f.write_str("a newer driver than this tool knows")?,
        }
        write!(
            f,
            "; this driver ({}) compiles up to {}",
            self.driver, self.max
        )?;
        if self.jit_disabled {
            f.write_str(
                ", and with CUDA_DISABLE_PTX_JIT set it loads only PTX it has compiled before",
            )?;
        }
        write!(f, " ({error})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn versions_parse_and_order_as_nvml_prints_them() {
        let v = DriverVersion::parse("550.54.14").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (550, 54, Some(14)));
        for text in ["550.54.14", "535.183.01", "580.65.06", "551.61", "546.01"] {
            assert_eq!(DriverVersion::parse(text).unwrap().to_string(), text);
        }
        for bad in [
            "",
            "550",
            "550.",
            "550.54.14.1",
            "r550.54",
            "550.-1",
            "99999999999.1",
        ] {
            assert_eq!(DriverVersion::parse(bad), None, "{bad}");
        }
        assert!(DriverVersion::parse("550.100").unwrap() > DriverVersion::ZSTD_FATBIN);
        assert_eq!(DriverVersion::parse("580.65").unwrap().patch, None);
    }

    /// The table is ordered and self-consistent: branches, CUDA versions, minimum drivers
    /// and ISA versions all grow; each minimum driver lies in its own branch range.
    #[test]
    fn the_release_table_is_consistent() {
        for pair in RELEASES.windows(2) {
            let [a, b] = pair else { unreachable!() };
            assert!(a.cuda < b.cuda && a.ptx_isa <= b.ptx_isa);
            if let (Some(x), Some(y)) = (a.first_branch, b.first_branch) {
                assert!(x < y);
            }
            if let (Some(x), Some(y)) = (a.min_driver, b.min_driver) {
                assert!(x < y);
            }
        }
        for r in RELEASES {
            if let Some(min) = r.min_driver {
                assert_eq!(min.cuda(), Some(r.cuda), "{}", r.cuda);
            }
            assert_eq!(r.first_branch.is_some(), r.min_driver.is_some());
            assert_eq!(r.cuda.max_ptx_isa(), Some(r.ptx_isa));
        }
    }

    /// The recorded driver (580.159.04, `cuDriverGetVersion` 13000) and its neighbours,
    /// Windows numbering included.
    #[test]
    fn branches_map_to_cuda_versions() {
        let cuda = |s| DriverVersion::parse(s).unwrap().cuda();
        assert_eq!(cuda("580.159.04"), Some(CudaVersion::new(13, 0)));
        assert_eq!(cuda("581.42"), Some(CudaVersion::new(13, 0)));
        assert_eq!(cuda("551.61"), Some(CudaVersion::new(12, 4)));
        assert_eq!(cuda("535.183.01"), Some(CudaVersion::new(12, 2)));
        assert_eq!(cuda("590.44.01"), Some(CudaVersion::new(13, 1)));
        // CUDA 13.2 and 13.3 by the release notes' Table 3; 13.4 on has no known branch.
        assert_eq!(cuda("595.45.04"), Some(CudaVersion::new(13, 2)));
        assert_eq!(cuda("600.10"), Some(CudaVersion::new(13, 2)));
        assert_eq!(cuda("610.43.02"), Some(CudaVersion::new(13, 3)));
        assert_eq!(cuda("616.00"), None);
        assert_eq!(cuda("340.108"), None);
        assert_eq!(
            PtxIsa::new(9, 1).needs_cuda(),
            Some(CudaVersion::new(13, 1))
        );
        assert_eq!(
            PtxIsa::new(8, 5).needs_cuda(),
            Some(CudaVersion::new(12, 5))
        );
        // CUDA 13.2-13.5 by their ptxas; nothing newer is known.
        for minor in 2..=5 {
            assert_eq!(
                PtxIsa::new(9, minor).needs_cuda(),
                Some(CudaVersion::new(13, minor))
            );
        }
        assert_eq!(PtxIsa::new(9, 6).needs_cuda(), None);
    }

    #[test]
    fn ptx_versions_come_from_the_text_or_the_entry_header() {
        let nvcc = b"//\n// Generated by NVIDIA NVVM Compiler\n//\n// Cuda compilation tools, release 13.5, V13.5.37\n//\n\n.version 9.5\n.target sm_86\n.address_size 64\n";
        assert_eq!(PtxIsa::of_text(nvcc), Some(PtxIsa::new(9, 5)));
        assert_eq!(
            PtxIsa::of_text(b"\r\n  .version 7.8 // note\r\n"),
            Some(PtxIsa::new(7, 8))
        );
        for bad in [
            &b""[..],
            b".version",
            b".version 9",
            b".version x.1",
            b"\0\0\0",
        ] {
            assert_eq!(PtxIsa::of_text(bad), None);
        }
        assert_eq!(
            PtxIsa::of_code_version(0x0009_0005),
            Some(PtxIsa::new(9, 5))
        );
        assert_eq!(
            PtxIsa::of_code_version(0x0008_0008),
            Some(PtxIsa::new(8, 8))
        );
        assert_eq!(PtxIsa::of_code_version(0x0100_0000), None);
    }

    #[test]
    fn refusals_name_the_cause_and_the_error() {
        let mut d = CudaDriver::new(DriverVersion::parse("580.159.04"));
        // ISA 9.2 (cupy-cuda13x 14.2.0): CUDA 13.2's minimum driver, 595.45.04 (Table 3 of
        // its release notes); 9.4: CUDA 13.4, whose driver number no cited source gives; 9.6:
        // newer than the table.
        let r = d.refusal(Some(PtxIsa::new(9, 2))).unwrap();
        assert_eq!(r.cuda_error().0, 222);
        assert_eq!(r.needs_driver(), DriverVersion::parse("595.45.04"));
        assert_eq!(
            r.to_string(),
            "PTX ISA 9.2 needs a driver for CUDA 13.2 or later; this driver (580.159.04) \
             compiles up to 9.0 (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)"
        );
        let Refusal::TooNew(t) = r else { panic!() };
        assert_eq!(
            t.driver_need().to_string(),
            "NVIDIA driver 595.45.04 or later"
        );
        let r = d.refusal(Some(PtxIsa::new(9, 3))).unwrap();
        assert_eq!(r.needs_driver(), DriverVersion::parse("610.43.02"));
        let r = d.refusal(Some(PtxIsa::new(9, 4))).unwrap();
        assert_eq!(r.needs_driver(), None);
        let Refusal::TooNew(t) = r else { panic!() };
        assert_eq!(
            t.driver_need(),
            DriverNeed::ForCuda(CudaVersion::new(13, 4))
        );
        assert_eq!(
            t.driver_need().to_string(),
            "an NVIDIA driver for CUDA 13.4 or later"
        );
        let r = d.refusal(Some(PtxIsa::new(9, 6))).unwrap();
        assert_eq!(r.needs_driver(), None);
        assert!(r
            .to_string()
            .starts_with("PTX ISA 9.6 needs a newer driver than this tool knows;"));
        let Refusal::TooNew(t) = r else { panic!() };
        assert_eq!(t.driver_need(), DriverNeed::Newer);
        let r = d.refusal(Some(PtxIsa::new(9, 1))).unwrap();
        assert_eq!(r.needs_driver(), DriverVersion::parse("590.44.01"));
        let Refusal::TooNew(t) = r else { panic!() };
        assert_eq!(
            t.driver_need(),
            DriverNeed::Version(DriverVersion::parse("590.44.01").unwrap())
        );
        d.switches.disable_ptx_jit = true;
        assert_eq!(
            d.refusal(Some(PtxIsa::new(9, 1))).unwrap().cuda_error().0,
            223
        );
        assert_eq!(d.refusal(Some(PtxIsa::new(9, 0))), None);
        assert_eq!(d.refusal(None), None);
        assert_eq!(CudaDriver::new(None).refusal(Some(PtxIsa::new(9, 9))), None);
        // A branch newer than the table: not judged.
        let new = CudaDriver::new(DriverVersion::parse("616.1"));
        assert_eq!(new.refusal(Some(PtxIsa::new(9, 9))), None);
    }

    #[test]
    fn no_jit_and_no_cache_refuses_every_ptx() {
        // tests/data/cuda-driver-random: with CUDA_DISABLE_PTX_JIT=1 and CUDA_CACHE_DISABLE=1
        // every pick of PTX failed with 223, whatever its ISA, and nothing else changed.
        let env = |name: &str| {
            matches!(name, "CUDA_DISABLE_PTX_JIT" | "CUDA_CACHE_DISABLE").then_some("1")
        };
        for version in [None, DriverVersion::parse("580.159.04")] {
            let d = CudaDriver {
                version,
                switches: JitSwitches::from_env(env),
            };
            for isa in [None, Some(PtxIsa::new(7, 8)), Some(PtxIsa::new(9, 1))] {
                let r = d.refusal(isa).unwrap();
                assert_eq!(r, Refusal::NoJitNoCache);
                assert_eq!(r.cuda_error().0, 223);
                assert_eq!(r.needs_driver(), None);
            }
        }
        // The cache alone disabled changes nothing: the driver compiles.
        let d = CudaDriver {
            version: DriverVersion::parse("580.159.04"),
            switches: JitSwitches::from_env(|n: &str| (n == "CUDA_CACHE_DISABLE").then_some("1")),
        };
        assert_eq!(d.refusal(Some(PtxIsa::new(8, 8))), None);
    }
}
