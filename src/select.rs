//! Choosing the image to load on a device: the compatibility predicate, the
//! deterministic ranking and the reasons for every rejection (`COMPATIBILITY.md` §5, §9, §10).
//!
//! Selection knows nothing about byte formats. It sees [`Identity`] values ([`identify`]
//! makes them from [`Image`]s, reading at most an ELF header) in **discovery order**, and a
//! [`Device`]. For each candidate [`check`] gives a [`Verdict`]: compatible with a
//! [`RankKey`], or rejected with a [`Rejection`] whose `Display` is a sentence a person
//! understands ("built for xnack+, device has xnack-").
//!
//! [`choose`] is the one way to choose: over any iterator of images and for one or many
//! devices in one pass, it returns per device a [`Choice`]: the image with the smallest key
//! under the chosen [`Policy`], its key, the counts, the most telling rejection, and for
//! every other image why it lost ([`Loss`]: rejected, or outranked by the winner). Beneath
//! it, [`check`] is the single-image predicate. Two thin conveniences stay: [`explain`]
//! (identify, then [`check`]: the verdict on one image) and [`select`] (one device over a
//! slice, keeping no verdicts and allocating nothing: what a runtime needs).
//!
//! # Ranking (`Policy::Best`)
//!
//! The key compares, in order (smaller is better):
//!
//! 1. [`Class`]: native code (the device's own processor; for NVPTX a cubin for exactly the
//!    device's compute capability), then compatible code (an AMDGPU generic family object;
//!    an NVPTX cubin for a lower minor of the same major), then an NVIDIA fatbinary (the
//!    driver chooses inside it), then code that needs a JIT (AMD SPIR-V, bitcode, PTX).
//! 2. `distance` (NVPTX only): how far below the device the code's compute capability is
//!    (the closest wins).
//! 3. `specificity`: AMDGPU — number of features the device's processor supports for which
//!    the image is `Any` (an exact match wins over `Any`); NVPTX — `a` before `f` before
//!    plain.
//! 4. `generic_age`: 255 − generic version (the newest generic object wins).
//! 5. `index`: discovery order.
//!
//! For AMDGPU this is exactly the key of `COMPATIBILITY.md` §10 (distance is always 0).
//!
//! # Reproducing the runtimes
//!
//! [`Policy::First`] keeps only the discovery index: the first compatible image wins, as
//! in comgr's `amd_comgr_lookup_code_object` (per query, header order) and the LLVM offload
//! runtime (descriptor order). To reproduce comgr's answer to one native ISA query use
//! [`SelectOptions::comgr`]: HIP kinds only, no generic or SPIR-V entries (comgr matches
//! those only when their own name is queried). Comgr reads only entry IDs: where an ID
//! and its ELF header disagree, or the payload is not code, the two can differ.
//! [`Policy::FirstByClass`] keeps class then index: ROCm CLR's native → generic → SPIR-V
//! order.
//!
//! Decisions where the spec is silent (recorded here, tested in `tests/select_*.rs`):
//! * An empty image (size 0) is never selected (comgr does not count a zero-size match).
//! * An image with no offload kind (bare ELF, OffloadBinary kind 0) passes every
//!   [`KindFilter`]; an unknown bundle kind passes none, not even [`KindFilter::Any`].
//! * Among exact-SM cubins, `a` ranks before `f` before plain (§9.4 orders only `a` and
//!   plain); `f` cubins for a lower minor of the same major count as same-major cubins.
//! * Without `--kind`, every device kind is a candidate (`hip`, `hipv4`, `hcc`, `openmp`,
//!   `cuda`, `sycl`); the host entry never is.
//! * Where the processor of the ELF header differs from the container's, the ELF's wins
//!   too (the code is what it is); for NVPTX the container's `a`/`f` suffix is kept unless
//!   the SM numbers differ (cubins never record `f`, ptxas 13 never records `a`).
//! * Bitcode for a named processor must match that processor and its features and ranks
//!   as JIT code; a generic-family bitcode image has no version to check.
//! * An NVIDIA fatbinary is not opened: it is accepted when its stated architecture passes
//!   the PTX rule (a fatbinary embeds PTX for the architecture it was made for) and ranks
//!   between cubins and JIT code; the driver picks inside it.
//! * A device feature state of "unknown" admits only images that leave the feature `Any`
//!   (so `gfx90a` as a device does not select a `gfx90a:xnack-` image).
//! * When the container and the ELF header disagree, the ELF header wins (AMDGPU) unless
//!   [`SelectOptions::strict`] is set, which rejects the image.
//!
//! Nothing here allocates but [`choose`]'s record of every verdict.
//!
//! # Example
//!
//! ```
//! use offload_image::{choose, units, Device, ReadOptions, SelectOptions};
//! use offload_image::select::{explain, Verdict};
//!
//! // A bundle of a host entry and six code objects (gfx906, gfx90a:xnack±, gfx942, ...).
//! let data = include_bytes!("../tests/data/corpus/bundles/hip_6arch.bundle");
//! let device = Device::parse("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-")?;
//! let options = ReadOptions::default();
//! for unit in units(data, &options) {
//!     let open = unit?.open(&options)?;
//!     let choices = choose(open.images(), &[device], &SelectOptions::default());
//!     let chosen = choices[0].image.expect("a compatible image");
//!     assert_eq!(chosen.entry_id, Some("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"));
//!     // Why the others were not chosen, in words.
//!     for lost in choices[0].losses() {
//!         let image = lost.image.expect("choose was given images");
//!         // "not hipv4-amdgcn-amd-amdhsa--gfx906: gfx906 code does not run on gfx90a"
//!         println!("not {}: {}", image.name(), lost.loss);
//!     }
//!     // One image's verdict on its own.
//!     let first = open.images().next().expect("an image");
//!     assert!(matches!(explain(&first, &device, &SelectOptions::default()), Verdict::Rejected(_)));
//! }
//! # Ok::<(), offload_image::Error>(())
//! ```

use alloc::vec::Vec;
use core::fmt;

use crate::driver::{CudaDriver, PtxIsa, Refusal};
use crate::image::{Image, OffloadKind};
use crate::arch::amdgpu::{Feature, FeatureState, Processor, TargetId};
use crate::arch::clr::{clr_generic_since, ClrSince};
use crate::arch::elf::AmdgpuElfProblem;
use crate::arch::nvptx::{ArchVariant, NvArch};
use crate::arch::{identify, Code, Device, Disagreement, Identity, Target, Triple};

/// Which offload kinds a request accepts (`COMPATIBILITY.md` §1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum KindFilter {
    /// Every device kind (`hip`, `hipv4`, `hcc`, `openmp`, `cuda`, `sycl`, none).
    #[default]
    Any,
    /// HIP: `hip`, `hipv4`, `hcc` (and `openmp` in HIP-OpenMP compatible mode).
    Hip,
    /// OpenMP: `openmp` (and `hip*` in HIP-OpenMP compatible mode).
    OpenMp,
    /// CUDA: `cuda`.
    Cuda,
}

impl KindFilter {
    /// `"any"`, `"hip"`, `"openmp"`, `"cuda"`.
    pub const fn name(self) -> &'static str {
        match self {
            KindFilter::Any => "any",
            KindFilter::Hip => "hip",
            KindFilter::OpenMp => "openmp",
            KindFilter::Cuda => "cuda",
        }
    }

    tools_pub! {
        /// True when an image of `kind` may be loaded for this request. Host and unknown
        /// kinds never pass; images without a kind always do.
        pub const fn accepts(self, kind: OffloadKind, hip_openmp_compatible: bool) -> bool {
            match kind {
                OffloadKind::Host | OffloadKind::Other => false,
                OffloadKind::None => true,
                OffloadKind::Hip | OffloadKind::HipV4 | OffloadKind::Hcc => match self {
                    KindFilter::Any | KindFilter::Hip => true,
                    KindFilter::OpenMp => hip_openmp_compatible,
                    KindFilter::Cuda => false,
                },
                OffloadKind::OpenMp => match self {
                    KindFilter::Any | KindFilter::OpenMp => true,
                    KindFilter::Hip => hip_openmp_compatible,
                    KindFilter::Cuda => false,
                },
                OffloadKind::Cuda => matches!(self, KindFilter::Any | KindFilter::Cuda),
                OffloadKind::Sycl => matches!(self, KindFilter::Any),
            }
        }
    }
}

/// How candidates are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// The full ranking (module documentation).
    #[default]
    Best,
    /// First compatible in discovery order (comgr lookup, LLVM offload runtime).
    First,
    /// Class, then discovery order (ROCm CLR: native, then generic, then SPIR-V).
    FirstByClass,
}

impl Policy {
    /// `"best"`, `"first"`, `"first-by-class"`.
    pub const fn name(self) -> &'static str {
        match self {
            Policy::Best => "best",
            Policy::First => "first",
            Policy::FirstByClass => "first-by-class",
        }
    }
}

/// Options of a selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SelectOptions {
    /// Offload kinds accepted.
    pub kind: KindFilter,
    /// HIP-OpenMP compatible mode (`hip*` and `openmp` interchangeable; comgr's UNBUNDLE).
    pub hip_openmp_compatible: bool,
    /// Ordering policy.
    pub policy: Policy,
    /// Accept code for a named architecture that needs a JIT (bitcode, PTX). Default: yes.
    pub allow_jit: bool,
    /// Accept AMDGPU generic-family code objects (ROCr's second ISA; CLR's generic query).
    /// Default: yes.
    pub allow_generic: bool,
    /// Accept processor-independent AMD SPIR-V (`amdgcnspirv`). Default: yes.
    pub allow_spirv: bool,
    /// Reject images whose container and ELF header disagree. Default: no (the ELF wins).
    pub strict: bool,
    /// The NVIDIA devices' driver: its version (which PTX ISA it compiles) and its
    /// `CUDA_FORCE_PTX_JIT` / `CUDA_DISABLE_PTX_JIT` switches (`COMPATIBILITY.md` §9.5).
    /// Default: version unknown (PTX ISA versions not judged), no switch set.
    pub cuda: CudaDriver,
    /// ROCm CLR's `HIP_FORCE_SPIRV_CODEOBJECT` (`COMPATIBILITY.md` §7.7): an AMDGPU device
    /// takes only AMD SPIR-V (`amdgcnspirv`); native and generic code objects are passed
    /// over, and without a SPIR-V entry it gets nothing. Default: no
    /// ([`hip_force_spirv`] reads the variable as CLR does).
    pub force_spirv: bool,
    /// ROCm CLR's own lookup rules on top of the compatibility predicate, for units a HIP
    /// runtime registers: a generic code object only where CLR's generic map takes the
    /// device's processor to it (`COMPATIBILITY.md` §7.8, [`Rejection::ClrGenericMap`]), and
    /// bundle entries only under the `amdgcn` spelling CLR matches as text (§1.5,
    /// [`Rejection::ClrSpelling`]). Default: no (the rules every AMD loader shares).
    pub clr: bool,
}

/// Whether ROCm CLR takes `HIP_FORCE_SPIRV_CODEOBJECT` as set, given the variable's value
/// (`None`: unset). CLR reads it as a `bool` flag (ROCm/rocm-systems
/// `projects/clr/rocclr/utils/flags.cpp`, `Flag::setValue`, at
/// 02fcd1b98a9441722b1ae35fad94000b170d0cde): set when the value is exactly `true` or when
/// C's `atoi` of it is not zero (`1`, ` 2`, `-1`, `7x`); `TRUE`, `yes`, `on`, `0` and an
/// empty value (stored as `" "`) leave it unset. `atoi` is glibc's, `(int) strtol(v, 0, 10)`:
/// `4294967296` reads as 0.
pub fn hip_force_spirv(value: Option<&str>) -> bool {
    let Some(v) = value else { return false };
    if v == "true" {
        return true;
    }
    let t = v.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, t.get(1..).unwrap_or("")),
        Some(b'+') => (false, t.get(1..).unwrap_or("")),
        _ => (false, t),
    };
    // strtol: saturates at LONG_MIN / LONG_MAX on overflow.
    let mut n: i64 = 0;
    for d in digits.bytes().take_while(u8::is_ascii_digit) {
        let d = i64::from(d.wrapping_sub(b'0'));
        n = if negative {
            n.checked_mul(10)
                .and_then(|n| n.checked_sub(d))
                .unwrap_or(i64::MIN)
        } else {
            n.checked_mul(10)
                .and_then(|n| n.checked_add(d))
                .unwrap_or(i64::MAX)
        };
    }
    // The cast to int keeps the low 32 bits.
    (n as i32) != 0
}

impl Default for SelectOptions {
    fn default() -> Self {
        SelectOptions {
            kind: KindFilter::Any,
            hip_openmp_compatible: false,
            policy: Policy::Best,
            allow_jit: true,
            allow_generic: true,
            allow_spirv: true,
            strict: false,
            cuda: CudaDriver::new(None),
            force_spirv: false,
            clr: false,
        }
    }
}

impl SelectOptions {
    tools_pub! {
        /// What comgr's `amd_comgr_lookup_code_object` does for one native ISA query: HIP kinds
        /// only, the first entry in header order whose ID names the device's processor with
        /// compatible features. Comgr reads IDs, not payloads, so bitcode entries count; a
        /// generic or SPIR-V entry only answers a query for that generic/SPIR-V name, which
        /// CLR makes separately (then ranks native, generic, SPIR-V: [`Policy::FirstByClass`]).
        pub const fn comgr() -> Self {
            SelectOptions {
                kind: KindFilter::Hip,
                hip_openmp_compatible: false,
                policy: Policy::First,
                allow_jit: true,
                allow_generic: false,
                allow_spirv: false,
                strict: false,
                cuda: CudaDriver::new(None),
                force_spirv: false,
                clr: false,
            }
        }
    }
}

/// The coarse rank of a compatible image (smaller is better).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Built for exactly this device's processor / compute capability.
    Native,
    /// AMDGPU generic family code; NVPTX cubin for a lower minor of the same major.
    Compatible,
    /// An NVIDIA fatbinary: the driver picks inside it.
    Container,
    /// Needs a JIT: AMD SPIR-V, bitcode, PTX.
    Jit,
}

impl Class {
    /// `"native"`, `"compatible"`, `"container"`, `"jit"`.
    pub const fn name(self) -> &'static str {
        match self {
            Class::Native => "native",
            Class::Compatible => "compatible",
            Class::Container => "container",
            Class::Jit => "jit",
        }
    }
}

/// The ranking key of a compatible image; compare with [`RankKey::cmp_under`].
///
/// The derived order is the [`Policy::Best`] order (fields in declaration order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RankKey {
    /// Native, compatible, container, JIT.
    pub class: Class,
    /// NVPTX: how many SM steps the code lies below the device (0 for AMDGPU).
    pub distance: u16,
    /// AMDGPU: features left `Any` that the device supports; NVPTX: 0 `a`, 1 `f`, 2 plain.
    pub specificity: u8,
    /// 255 − generic version for AMDGPU generic code, 0 otherwise.
    pub generic_age: u8,
    /// The order among images equal in everything above: the discovery index, except
    /// where the CUDA driver takes the last of equals (plain PTX for exactly the device's
    /// compute capability, §9.5): there `usize::MAX − index`.
    pub order: usize,
    /// Discovery index.
    pub index: usize,
}

impl RankKey {
    /// The key without the index, as the policy sees it (a tie when equal).
    fn policy_part(&self, policy: Policy) -> (Class, u16, u8, u8) {
        match policy {
            Policy::Best => (
                self.class,
                self.distance,
                self.specificity,
                self.generic_age,
            ),
            Policy::First => (Class::Native, 0, 0, 0),
            Policy::FirstByClass => (self.class, 0, 0, 0),
        }
    }

    /// Orders two keys under `policy` (smaller is better): [`Policy::Best`] orders equals
    /// by [`RankKey::order`], the other policies by discovery index.
    pub fn cmp_under(&self, other: &RankKey, policy: Policy) -> core::cmp::Ordering {
        let order = |k: &RankKey| match policy {
            Policy::Best => k.order,
            Policy::First | Policy::FirstByClass => k.index,
        };
        self.policy_part(policy)
            .cmp(&other.policy_part(policy))
            .then(order(self).cmp(&order(other)))
            .then(self.index.cmp(&other.index))
    }

    /// True when the two keys are equal under `policy` apart from the discovery index.
    pub fn ties_with(&self, other: &RankKey, policy: Policy) -> bool {
        self.policy_part(policy) == other.policy_part(policy)
    }

    /// The generic version, for generic code.
    pub const fn generic_version(&self) -> Option<u8> {
        if self.generic_age == 0 {
            None
        } else {
            Some(255u8.saturating_sub(self.generic_age))
        }
    }
}

/// The architecture family of a device, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceArch {
    /// AMDGPU (`amdgcn-amd-amdhsa`).
    Amdgpu,
    /// CUDA (`nvptx64-nvidia-cuda`).
    Cuda,
}

impl DeviceArch {
    fn of(device: &Device) -> Self {
        match device {
            Device::Amdgpu(_) => DeviceArch::Amdgpu,
            Device::Cuda { .. } => DeviceArch::Cuda,
        }
    }
}

/// Which NVIDIA rule (`COMPATIBILITY.md` §9.2) an image fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NvRule {
    /// A cubin runs only on its own major version.
    CubinMajor,
    /// A cubin runs only on its minor version or later ones.
    CubinMinor,
    /// `a` code runs only on exactly its compute capability.
    ArchSpecific,
    /// `f` code runs only on its major version, from its minor on.
    Family,
    /// PTX needs a device of at least its compute capability.
    PtxTooNew,
}

/// Why an image cannot be loaded on a device. `Display` is a sentence for people.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection<'a> {
    /// The host entry of a bundle.
    Host,
    /// The image is empty.
    Empty,
    /// The offload kind is not requested.
    Kind {
        /// The image's kind.
        kind: OffloadKind,
        /// What was requested.
        wanted: KindFilter,
    },
    /// Built for another architecture (or no device architecture at all).
    Arch {
        /// The image's triple, if known.
        triple: Option<Triple<'a>>,
        /// The device's architecture.
        device: DeviceArch,
    },
    /// An AMDGPU image for an OS other than HSA (PAL, Mesa).
    NotHsa {
        /// The image's triple.
        triple: Triple<'a>,
    },
    /// Neither the container nor the ELF header names a target.
    NoTarget,
    /// The stated target does not parse or names an unknown processor.
    InvalidTarget {
        /// The string as stored.
        text: &'a str,
        /// Why.
        why: &'static str,
    },
    /// The AMDGPU ELF header makes the image unloadable.
    Elf(AmdgpuElfProblem),
    /// The container and the ELF header disagree (strict mode).
    Mismatch(Disagreement<'a>),
    /// Not loadable code (source or assembly text, a host object, unrecognised bytes).
    NotCode,
    /// Needs a JIT, which the options forbid.
    JitNotAllowed(Code),
    /// Generic code, which the options forbid.
    GenericNotAllowed(&'static Processor),
    /// AMD SPIR-V, which the options forbid.
    SpirvNotAllowed,
    /// A different AMDGPU processor.
    Processor {
        /// The image's processor.
        image: &'static Processor,
        /// The device's processor.
        device: &'static Processor,
    },
    /// Generic code of the device's family that ROCm CLR's generic map does not take the
    /// device's processor to (`COMPATIBILITY.md` §7.8; [`SelectOptions::clr`]).
    ClrGenericMap {
        /// The generic processor.
        generic: &'static Processor,
        /// The device's processor.
        device: &'static Processor,
    },
    /// A bundle entry under an `amdgpu<subarch>` triple, which ROCm CLR does not find: it
    /// looks entries up as `hipv4-amdgcn-amd-amdhsa--<target id>` text (`COMPATIBILITY.md`
    /// §1.5; [`SelectOptions::clr`]).
    ClrSpelling {
        /// The triple's architecture as stored (`amdgpu9.42`).
        arch: &'a str,
    },
    /// Generic code whose family does not include the device.
    NotInFamily {
        /// The generic processor.
        generic: &'static Processor,
        /// The device's processor.
        device: &'static Processor,
    },
    /// Generic code older than the device requires.
    GenericVersion {
        /// The generic processor.
        generic: &'static Processor,
        /// The code object's generic version.
        have: u8,
        /// The minimum the device's processor requires.
        need: u8,
    },
    /// A feature state the device does not have.
    Feature {
        /// Which feature.
        feature: Feature,
        /// The image's state (`On` or `Off`).
        image: FeatureState,
        /// The device's state (`On`, `Off`, or `Any` = unknown).
        device: FeatureState,
    },
    /// A cubin, which the CUDA driver ignores under `CUDA_FORCE_PTX_JIT`.
    ForcedJit,
    /// A native or generic AMDGPU code object, which ROCm CLR passes over under
    /// `HIP_FORCE_SPIRV_CODEOBJECT` ([`SelectOptions::force_spirv`]).
    ForcedSpirv,
    /// The CUDA driver picks this PTX entry and refuses it: its ISA is newer than the
    /// driver compiles; the driver does not fall back to another entry.
    Driver(Refusal),
    /// An NVIDIA compatibility rule fails.
    Nvptx {
        /// The image's architecture.
        image: NvArch,
        /// What the image holds (cubin = [`Code::Elf`], PTX, bitcode, fatbinary).
        code: Code,
        /// Device compute capability.
        device: (u8, u8),
        /// The rule.
        rule: NvRule,
    },
}

/// `Display` of a feature state inside a sentence (`xnack+`, `xnack-`, `any xnack`).
struct Stated(Feature, FeatureState, bool);

impl fmt::Display for Stated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Stated(feat, state, device) = *self;
        match state {
            FeatureState::On | FeatureState::Off => write!(f, "{feat}{}", state.sign()),
            FeatureState::Any if device => write!(f, "an unknown {feat} mode"),
            FeatureState::Any => write!(f, "any {feat} mode"),
            FeatureState::Unsupported => write!(f, "no {feat}"),
        }
    }
}

impl fmt::Display for Rejection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Host => f.write_str("host code, not a device image"),
            Rejection::Empty => f.write_str("the image is empty"),
            Rejection::Kind { kind, wanted } => fmt_kind(f, *kind, *wanted),
            Rejection::Arch { triple, device } => fmt_arch(f, triple.as_ref(), *device),
            Rejection::NotHsa { triple } => {
                write!(f, "built for {triple}, which an HSA runtime does not load")
            }
            Rejection::NoTarget => f.write_str("names no target processor"),
            Rejection::InvalidTarget { text, why } => {
                write!(f, "invalid target '{text}': {why}")
            }
            Rejection::Elf(problem) => write!(f, "{problem}"),
            Rejection::Mismatch(d) => write!(f, "{d} (strict mode)"),
            Rejection::NotCode => {
                f.write_str("not loadable device code (text, host object or unrecognised bytes)")
            }
            Rejection::JitNotAllowed(code) => {
                let what = match code {
                    Code::Bitcode => "LLVM bitcode",
                    Code::Spirv => "SPIR-V",
                    Code::Ptx => "PTX",
                    _ => "code",
                };
                write!(f, "{what} needs a JIT compiler, which is disabled")
            }
            Rejection::GenericNotAllowed(g) => {
                write!(f, "{g} code is generic, which this request does not accept")
            }
            Rejection::SpirvNotAllowed => {
                f.write_str("SPIR-V (amdgcnspirv) is not accepted by this request")
            }
            Rejection::Processor { image, device } => {
                write!(f, "{image} code does not run on {device}")
            }
            Rejection::ClrGenericMap { .. } | Rejection::ClrSpelling { .. } => fmt_clr(f, self),
            Rejection::NotInFamily { generic, device } => {
                write!(f, "{generic} code does not run on {device}")?;
                match device.family {
                    Some(fam) => write!(f, " (its generic family is {fam})"),
                    None => f.write_str(" (it belongs to no generic family)"),
                }
            }
            Rejection::GenericVersion {
                generic,
                have,
                need,
            } => write!(
                f,
                "{generic} code object has generic version {have}, the device needs at least {need}"
            ),
            Rejection::Feature {
                feature,
                image,
                device,
            } => write!(
                f,
                "built for {}, device has {}",
                Stated(*feature, *image, false),
                Stated(*feature, *device, true)
            ),
            Rejection::ForcedJit => {
                f.write_str("a cubin, which the CUDA driver ignores with CUDA_FORCE_PTX_JIT set")
            }
            Rejection::ForcedSpirv => f.write_str(
                "a code object for the device, which ROCm CLR passes over with HIP_FORCE_SPIRV_CODEOBJECT set (it takes only SPIR-V then)",
            ),
            Rejection::Driver(refusal) => write!(
                f,
                "{refusal}; the driver picks this entry and does not fall back to another"
            ),
            Rejection::Nvptx {
                image,
                code,
                device,
                rule,
            } => fmt_nvptx(f, *image, *code, *device, *rule),
        }
    }
}

/// Why ROCm CLR's own rules refuse an image ([`SelectOptions::clr`]).
fn fmt_clr(f: &mut fmt::Formatter<'_>, rejection: &Rejection<'_>) -> fmt::Result {
    match rejection {
        Rejection::ClrGenericMap { generic, device } => write!(
            f,
            "ROCm CLR does not use {generic} code on {device}: no CLR generic map read \
             (ROCm 6.4 on) takes {device} to {generic}"
        ),
        Rejection::ClrSpelling { arch } => write!(
            f,
            "ROCm CLR does not find an entry under the triple spelling `{arch}`: it looks \
             HIP entries up as `hipv4-amdgcn-amd-amdhsa--<target id>`"
        ),
        _ => Ok(()),
    }
}

/// Why an image of offload kind `kind` is refused for a `wanted` request.
fn fmt_kind(f: &mut fmt::Formatter<'_>, kind: OffloadKind, wanted: KindFilter) -> fmt::Result {
    match (kind, wanted) {
        (OffloadKind::Other, _) => {
            f.write_str("an unknown offload kind, which no GPU runtime loads")
        }
        (_, KindFilter::Any) => write!(
            f,
            "offload kind {} is not one a GPU runtime loads",
            kind.name()
        ),
        _ => write!(
            f,
            "offload kind {} is not accepted for a {} request",
            kind.name(),
            wanted.name()
        ),
    }
}

/// Why an image built for `triple` (none known) does not run on a `device`.
fn fmt_arch(
    f: &mut fmt::Formatter<'_>,
    triple: Option<&Triple<'_>>,
    device: DeviceArch,
) -> fmt::Result {
    let dev = match device {
        DeviceArch::Amdgpu => "an AMDGPU (amdgcn-amd-amdhsa)",
        DeviceArch::Cuda => "a CUDA GPU (nvptx64-nvidia-cuda)",
    };
    match triple {
        Some(t) => write!(f, "built for {t}, the device is {dev}"),
        None => write!(
            f,
            "built for no known device architecture, the device is {dev}"
        ),
    }
}

/// Why NVPTX `code` built for `image` does not run on a device of compute capability
/// `major.minor`, by the `rule` it breaks.
fn fmt_nvptx(
    f: &mut fmt::Formatter<'_>,
    image: NvArch,
    code: Code,
    (major, minor): (u8, u8),
    rule: NvRule,
) -> fmt::Result {
    let real = image.real();
    let (im, imin) = (image.major(), image.minor());
    let what = match code {
        Code::Elf => "cubin",
        Code::Bitcode => "bitcode",
        Code::Fatbinary => "fatbinary",
        _ => "PTX",
    };
    match rule {
        NvRule::CubinMajor => write!(
            f,
            "{real} {what} runs only on compute capability {im}.x, device is {major}.{minor}"
        ),
        NvRule::CubinMinor => write!(
            f,
            "{real} {what} needs compute capability {im}.{imin} or a later {im}.x, device is {major}.{minor}"
        ),
        NvRule::ArchSpecific => write!(
            f,
            "{real} {what} runs only on compute capability {im}.{imin}, device is {major}.{minor}"
        ),
        NvRule::Family => write!(
            f,
            "{real} {what} runs only on compute capability {im}.{imin} to {im}.9, device is {major}.{minor}"
        ),
        NvRule::PtxTooNew => write!(
            f,
            "{real} {what} needs compute capability {im}.{imin} or later, device is {major}.{minor}"
        ),
    }
}

/// The outcome of checking one image against a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Compatible, with its ranking key.
    Compatible(RankKey),
    /// Not loadable on the device.
    Rejected(Rejection<'a>),
}

impl Verdict<'_> {
    /// The key of a compatible image.
    pub fn key(&self) -> Option<RankKey> {
        match self {
            Verdict::Compatible(k) => Some(*k),
            Verdict::Rejected(_) => None,
        }
    }
}

/// Why a compatible image lost to the selected one (for `--explain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outranked {
    /// The loser's key.
    pub loser: RankKey,
    /// The winner's key.
    pub winner: RankKey,
    /// The policy that ordered them.
    pub policy: Policy,
}

impl fmt::Display for Outranked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (l, w) = (&self.loser, &self.winner);
        f.write_str("compatible, but ")?;
        match self.policy {
            Policy::First => {
                return f.write_str("a compatible image comes before it (policy first)")
            }
            Policy::FirstByClass if l.class == w.class => {
                return f.write_str("a compatible image of the same class comes before it")
            }
            _ => {}
        }
        if l.class != w.class {
            write!(
                f,
                "{} code ranks below {} code",
                l.class.name(),
                w.class.name()
            )
        } else if l.distance != w.distance {
            f.write_str("another image is built for a compute capability closer to the device")
        } else if l.specificity != w.specificity {
            f.write_str("another image matches the device's features more exactly")
        } else if l.generic_age != w.generic_age {
            f.write_str("another generic code object has a newer generic version")
        } else {
            f.write_str("an equally good image comes before it")
        }
    }
}

/// A choice without its images ([`Choice::selection`], [`select`]): what a runtime keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// The chosen candidate's key; its `index` is the candidate's position in the input
    /// sequence ([`Selection::chosen`]).
    pub key: Option<RankKey>,
    /// Number of compatible candidates.
    pub compatible: usize,
    /// True when another compatible candidate ties with the chosen one apart from the
    /// discovery index (the choice then depends on order).
    pub tie: bool,
}

impl Selection {
    /// Position of the chosen candidate in the input sequence.
    pub const fn chosen(&self) -> Option<usize> {
        match &self.key {
            Some(k) => Some(k.index),
            None => None,
        }
    }
}

/// AMDGPU predicate and key.
fn check_amdgpu<'a>(
    identity: &Identity<'a>,
    image: &TargetId,
    device: &TargetId,
    options: &SelectOptions,
    index: usize,
) -> Verdict<'a> {
    let jit = identity.code.needs_jit();
    let (p_i, p_d) = (image.processor, device.processor);
    let (class, generic_age) = if core::ptr::eq(p_i, p_d) {
        (Class::Native, 0)
    } else if p_i.is_generic() {
        if !options.allow_generic {
            return Verdict::Rejected(Rejection::GenericNotAllowed(p_i));
        }
        let Some(need) = p_i.min_generic_version(p_d) else {
            return Verdict::Rejected(Rejection::NotInFamily {
                generic: p_i,
                device: p_d,
            });
        };
        if options.clr && clr_generic_since(p_d, p_i, true) == ClrSince::Never {
            return Verdict::Rejected(Rejection::ClrGenericMap {
                generic: p_i,
                device: p_d,
            });
        }
        // Generic bitcode carries no version: nothing to check.
        let have = identity.generic_version.unwrap_or(need);
        if have < need {
            return Verdict::Rejected(Rejection::GenericVersion {
                generic: p_i,
                have,
                need,
            });
        }
        (Class::Compatible, 255u8.saturating_sub(have))
    } else {
        return Verdict::Rejected(Rejection::Processor {
            image: p_i,
            device: p_d,
        });
    };
    let mut specificity = 0u8;
    for feature in Feature::ALL {
        let (i, d) = (image.state(feature), device.state(feature));
        if i.is_explicit() && i != d {
            return Verdict::Rejected(Rejection::Feature {
                feature,
                image: i,
                device: d,
            });
        }
        if i == FeatureState::Any && p_d.support(feature).is_selectable() {
            specificity = specificity.saturating_add(1);
        }
    }
    Verdict::Compatible(RankKey {
        class: if jit { Class::Jit } else { class },
        distance: 0,
        specificity,
        generic_age,
        order: index,
        index,
    })
}

/// NVPTX predicate and key (`COMPATIBILITY.md` §9.2, §9.4).
fn check_nvptx<'a>(
    image: NvArch,
    code: Code,
    (major, minor): (u8, u8),
    index: usize,
    in_fatbinary: bool,
) -> Verdict<'a> {
    let (im, imin) = (image.major(), image.minor());
    let (dm, dmin) = (u16::from(major), u16::from(minor));
    let cubin = code == Code::Elf;
    let reject = |rule| {
        Verdict::Rejected(Rejection::Nvptx {
            image,
            code,
            device: (major, minor),
            rule,
        })
    };
    let specificity = match image.variant {
        ArchVariant::ArchSpecific => 0,
        ArchVariant::FamilySpecific => 1,
        ArchVariant::Plain => 2,
    };
    let exact = im == dm && imin == dmin;
    let same_major_later = im == dm && dmin >= imin;
    match image.variant {
        ArchVariant::ArchSpecific if !exact => return reject(NvRule::ArchSpecific),
        ArchVariant::FamilySpecific if !same_major_later => return reject(NvRule::Family),
        _ => {}
    }
    let device_sm = dm.saturating_mul(10).saturating_add(dmin);
    let (class, distance) = if cubin {
        if im != dm {
            return reject(NvRule::CubinMajor);
        }
        if dmin < imin {
            return reject(NvRule::CubinMinor);
        }
        if exact {
            (Class::Native, 0)
        } else {
            (Class::Compatible, dmin.saturating_sub(imin))
        }
    } else {
        // PTX, bitcode, and fatbinaries (which embed PTX for their architecture).
        if (im, imin) > (dm, dmin) {
            return reject(NvRule::PtxTooNew);
        }
        let distance = device_sm.saturating_sub(image.sm);
        if code == Code::Fatbinary {
            (Class::Container, distance)
        } else {
            (Class::Jit, distance)
        }
    };
    // Inside a fatbinary the CUDA driver takes the last of several plain PTX entries for
    // exactly the device's compute capability, and the first of equals everywhere else
    // (§9.5).
    let last_wins =
        in_fatbinary && code == Code::Ptx && exact && image.variant == ArchVariant::Plain;
    Verdict::Compatible(RankKey {
        class,
        distance,
        specificity,
        generic_age: 0,
        order: if last_wins {
            usize::MAX.saturating_sub(index)
        } else {
            index
        },
        index,
    })
}

/// The compatibility predicate and ranking key for one identified image.
///
/// `index` is the image's discovery index (its position among the candidates).
pub fn check<'a>(
    identity: &Identity<'a>,
    index: usize,
    device: &Device,
    options: &SelectOptions,
) -> Verdict<'a> {
    let refusal = container_refusal(identity, device, options)
        .or_else(|| code_refusal(identity, device, options));
    match refusal {
        Some(rejection) => Verdict::Rejected(rejection),
        None => check_target(identity, index, device, options),
    }
}

/// Why the container says the image is not for `device` at all: host code, another
/// offload kind, an empty image, another architecture, not an HSA target (§5.1 rule 1).
fn container_refusal<'a>(
    identity: &Identity<'a>,
    device: &Device,
    options: &SelectOptions,
) -> Option<Rejection<'a>> {
    let kind = identity.offload_kind;
    if kind == OffloadKind::Host {
        return Some(Rejection::Host);
    }
    if !options.kind.accepts(kind, options.hip_openmp_compatible) {
        return Some(Rejection::Kind {
            kind,
            wanted: options.kind,
        });
    }
    if identity.size == 0 {
        return Some(Rejection::Empty);
    }
    // Architecture (container constraints, §5.1 rule 1).
    let arch = identity.arch();
    let arch_ok = match device {
        Device::Amdgpu(_) => {
            matches!(arch, Some("amdgcn"))
                || (matches!(arch, Some("spirv64")) && identity.target == Target::AmdgcnSpirv)
        }
        Device::Cuda { .. } => matches!(arch, Some("nvptx64" | "nvptx")),
    };
    if !arch_ok {
        return Some(Rejection::Arch {
            triple: identity.triple,
            device: DeviceArch::of(device),
        });
    }
    if let (Device::Amdgpu(_), Some(t)) = (device, &identity.triple) {
        if t.os != "amdhsa" {
            return Some(Rejection::NotHsa { triple: *t });
        }
        if options.clr
            && t.arch.starts_with("amdgpu")
            && matches!(
                identity.format,
                crate::image::Format::Bundle | crate::image::Format::TextBundle
            )
        {
            return Some(Rejection::ClrSpelling { arch: t.arch });
        }
    }
    None
}

/// Why the image is not code `device` can take under `options`: an unloadable ELF, a
/// disagreement (strict), no or an invalid target, not code, or code that needs a JIT
/// compiler when none is allowed.
fn code_refusal<'a>(
    identity: &Identity<'a>,
    device: &Device,
    options: &SelectOptions,
) -> Option<Rejection<'a>> {
    if let Some(problem) = identity.elf_problem {
        return Some(Rejection::Elf(problem));
    }
    if let (true, Some(d)) = (options.strict, identity.disagreement()) {
        return Some(Rejection::Mismatch(d));
    }
    match identity.target {
        Target::None => return Some(Rejection::NoTarget),
        Target::Invalid { text, why } => {
            return Some(Rejection::InvalidTarget {
                text,
                why: why.what(),
            })
        }
        _ => {}
    }
    let code = identity.code;
    if code == Code::Other
        || (matches!(code, Code::Fatbinary | Code::Ptx) && matches!(device, Device::Amdgpu(_)))
    {
        return Some(Rejection::NotCode);
    }
    if code.needs_jit() && !options.allow_jit && identity.target != Target::AmdgcnSpirv {
        return Some(Rejection::JitNotAllowed(code));
    }
    None
}

/// The verdict of the target rules for an image that passed the container and code
/// checks: AMDGPU processors and features, SPIR-V, NVIDIA compute capabilities.
fn check_target<'a>(
    identity: &Identity<'a>,
    index: usize,
    device: &Device,
    options: &SelectOptions,
) -> Verdict<'a> {
    use Verdict::Rejected;
    let code = identity.code;
    match (&identity.target, device) {
        (Target::Amdgpu(t), Device::Amdgpu(d)) => {
            match check_amdgpu(identity, t, d, options, index) {
                Verdict::Compatible(_) if options.force_spirv => Rejected(Rejection::ForcedSpirv),
                verdict => verdict,
            }
        }
        (Target::AmdgcnSpirv, Device::Amdgpu(_)) if !options.allow_spirv => {
            Rejected(Rejection::SpirvNotAllowed)
        }
        (Target::AmdgcnSpirv, Device::Amdgpu(_)) => Verdict::Compatible(RankKey {
            class: Class::Jit,
            distance: 0,
            specificity: 0,
            generic_age: 0,
            order: index,
            index,
        }),
        (Target::Nvptx(a), Device::Cuda { major, minor }) => {
            let in_fatbinary = identity.format == crate::image::Format::NvFatbin;
            match check_nvptx(*a, code, (*major, *minor), index, in_fatbinary) {
                Verdict::Compatible(_)
                    if code == Code::Elf && options.cuda.switches.force_ptx_jit =>
                {
                    Rejected(Rejection::ForcedJit)
                }
                verdict => verdict,
            }
        }
        _ => Rejected(Rejection::Arch {
            triple: identity.triple,
            device: DeviceArch::of(device),
        }),
    }
}

/// Identifies `image` and checks it against `device`; the key's index is `image.index`.
pub fn explain<'a>(image: &Image<'a>, device: &Device, options: &SelectOptions) -> Verdict<'a> {
    check(&identify(image), image.index, device, options)
}

impl Rejection<'_> {
    /// The rejection's short stable name, one per kind (`"processor"`, `"feature"`,
    /// `"not-hsa"`, ...): the C API's `oi_reason_name` of its `OI_REASON_*` code. The text
    /// that says why is its `Display`.
    pub const fn name(&self) -> &'static str {
        match self {
            Rejection::Host => "host",
            Rejection::Empty => "empty",
            Rejection::Kind { .. } => "kind",
            Rejection::Arch { .. } => "arch",
            Rejection::NotHsa { .. } => "not-hsa",
            Rejection::NoTarget => "no-target",
            Rejection::InvalidTarget { .. } => "invalid-target",
            Rejection::Elf(_) => "elf",
            Rejection::Mismatch(_) => "mismatch",
            Rejection::NotCode => "not-code",
            Rejection::JitNotAllowed(_) => "jit-not-allowed",
            Rejection::GenericNotAllowed(_) => "generic-not-allowed",
            Rejection::SpirvNotAllowed => "spirv-not-allowed",
            Rejection::Processor { .. } => "processor",
            Rejection::ClrGenericMap { .. } => "clr-generic-map",
            Rejection::ClrSpelling { .. } => "clr-spelling",
            Rejection::NotInFamily { .. } => "not-in-family",
            Rejection::GenericVersion { .. } => "generic-version",
            Rejection::Feature { .. } => "feature",
            Rejection::ForcedJit => "forced-jit",
            Rejection::ForcedSpirv => "forced-spirv",
            Rejection::Driver(_) => "driver",
            Rejection::Nvptx { .. } => "nvidia-rule",
        }
    }

    tools_pub! {
        /// How much the rejection says about the device: 0 for images that were never meant
        /// for it (host entries, other kinds, other architectures, empty or non-code
        /// payloads), 1 for options that ruled an image out, 2 for the compatibility rules
        /// proper (processor, features, generic version, NVIDIA rules, unloadable ELF).
        pub const fn relevance(&self) -> u8 {
            match self {
                Rejection::Host
                | Rejection::Empty
                | Rejection::Kind { .. }
                | Rejection::Arch { .. }
                | Rejection::NotHsa { .. }
                | Rejection::NotCode => 0,
                Rejection::JitNotAllowed(_)
                | Rejection::GenericNotAllowed(_)
                | Rejection::SpirvNotAllowed
                | Rejection::Mismatch(_) => 1,
                Rejection::NoTarget
                | Rejection::InvalidTarget { .. }
                | Rejection::Elf(_)
                | Rejection::Processor { .. }
                | Rejection::NotInFamily { .. }
                | Rejection::GenericVersion { .. }
                | Rejection::ClrGenericMap { .. }
                | Rejection::ClrSpelling { .. }
                | Rejection::Feature { .. }
                | Rejection::Driver(_)
                | Rejection::Nvptx { .. } => 2,
                Rejection::ForcedJit | Rejection::ForcedSpirv => 1,
            }
        }
    }

    tools_pub! {
        /// How close the image came to loading on the device: a finer order than
        /// [`Rejection::relevance`], which it refines (`closeness() / 16 == relevance()`). It
        /// picks the most telling rejection of a unit ([`Choice::rejection`]), so that the
        /// reason given for a unit names the image nearest to the device, not the first one met.
        ///
        /// Among the images never meant for the device: another architecture, kind or
        /// unloadable payload says more than an empty image, which says more than the host
        /// entry. Among the compatibility rules, from far to near: another processor of
        /// another major ISA version; generic code of another family; another processor of the
        /// same major version, then of the same major and minor version (gfx908 code is nearer
        /// to a gfx906 than gfx1030 code); an unloadable ELF or an unknown target; a generic
        /// version too old, or a cubin of another major version; a feature mode the device
        /// does not have (the right processor), or another NVIDIA rule (code for the device's
        /// major version, or PTX).
        ///
        /// ```
        /// use offload_image::{select::Rejection, arch::amdgpu::Processor};
        ///
        /// let p = |n| Processor::by_name(n).unwrap();
        /// let far = Rejection::Processor { image: p("gfx1030"), device: p("gfx906") };
        /// let near = Rejection::Processor { image: p("gfx908"), device: p("gfx906") };
        /// assert_eq!(far.relevance(), near.relevance());
        /// assert!(near.closeness() > far.closeness());
        /// ```
        pub fn closeness(&self) -> u8 {
            let within = match self {
                Rejection::Host => 0,
                Rejection::Empty => 1,
                Rejection::Kind { .. }
                | Rejection::Arch { .. }
                | Rejection::NotHsa { .. }
                | Rejection::NotCode => 2,
                Rejection::JitNotAllowed(_)
                | Rejection::GenericNotAllowed(_)
                | Rejection::SpirvNotAllowed
                | Rejection::ForcedJit
                | Rejection::ForcedSpirv
                | Rejection::Mismatch(_) => 0,
                Rejection::Driver(_) => 7,
                Rejection::Processor { image, device } => match (image.isa_version, device.isa_version)
                {
                    (Some((a, b, _)), Some((c, d, _))) if a == c && b == d => 3,
                    (Some((a, ..)), Some((c, ..))) if a == c => 2,
                    _ => 0,
                },
                Rejection::NotInFamily { .. } => 1,
                Rejection::NoTarget | Rejection::InvalidTarget { .. } | Rejection::Elf(_) => 4,
                Rejection::GenericVersion { .. }
                | Rejection::ClrGenericMap { .. }
                | Rejection::Nvptx {
                    rule: NvRule::CubinMajor,
                    ..
                } => 5,
                Rejection::Feature { .. } | Rejection::ClrSpelling { .. } | Rejection::Nvptx { .. } => {
                    6
                }
            };
            self.relevance().saturating_mul(16).saturating_add(within)
        }
    }
}

/// Why an image was not chosen for a device ([`Choice::loss`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss<'a> {
    /// It cannot be loaded on the device.
    Rejected(Rejection<'a>),
    /// It is compatible, but the chosen image ranks above it.
    Outranked(Outranked),
}

impl Loss<'_> {
    /// The loss's short stable name: `"outranked"`, or the rejection's ([`Rejection::name`]).
    pub const fn name(&self) -> &'static str {
        match self {
            Loss::Rejected(r) => r.name(),
            Loss::Outranked(_) => "outranked",
        }
    }
}

impl fmt::Display for Loss<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loss::Rejected(r) => r.fmt(f),
            Loss::Outranked(o) => o.fmt(f),
        }
    }
}

/// An image that lost the choice for a device, with why ([`Choice::losses`]).
#[derive(Clone, Copy, Debug)]
pub struct Lost<'c, 'a> {
    /// The image (name it with [`Image::name`]); `None` only when the candidates were
    /// identities without images ([`Candidate`]).
    pub image: Option<&'c Image<'a>>,
    /// Its discovery index.
    pub index: usize,
    /// Why it lost: rejected, or outranked by the chosen image.
    pub loss: Loss<'a>,
}

impl Lost<'_, '_> {
    /// Why it lost, as `loader-sim select --explain` and the C API print it: the loss, and
    /// when the image's container and ELF header disagree and `options.strict` is off (the
    /// ELF header decided), the suffix ` (note: …; the ELF header wins)`.
    pub fn reason(&self, options: &SelectOptions) -> alloc::string::String {
        use alloc::string::ToString;
        let mut text = self.loss.to_string();
        if let (false, Some(d)) = (options.strict, self.image.and_then(|i| identify(i).disagreement())) {
            text.push_str(&alloc::format!(" (note: {d}; the ELF header wins)"));
        }
        text
    }
}

tools_fields! {
    /// What [`choose`] found for one device: the chosen image with its rank key, and for every
    /// other image the reason it lost ([`Choice::loss`]).
    #[derive(Clone, Debug)]
    pub struct Choice<'a> {
        /// The chosen image (its [`Image::index`] is its discovery index); `None` also when the
        /// candidates were identities without images ([`Candidate`]): see [`Choice::chosen`].
        pub image: Option<Image<'a>>,
        /// The chosen image's rank key: its [`RankKey::class`] says why it won (native,
        /// compatible, container, JIT).
        pub key: Option<RankKey>,
        /// Images seen.
        pub candidates: usize,
        /// Images compatible with the device.
        pub compatible: usize,
        /// True when another compatible image ties with the chosen one apart from the
        /// discovery index (the choice then depends on order).
        pub tie: bool,
        /// The most telling rejection (highest [`Rejection::closeness`], which orders by
        /// [`Rejection::relevance`] first; first in discovery order among equals) with the rejected image's discovery index: why nothing was
        /// chosen, when nothing was.
        pub rejection: Option<(usize, Rejection<'a>)>,
        /// The image the runtime picks and then refuses, when it does: the CUDA driver picks a
        /// PTX entry whose ISA it cannot compile and does not fall back to another
        /// ([`Rejection::Driver`], which [`Choice::rejection`] then gives). [`Choice::key`] and
        /// [`Choice::image`] are `None`.
        pub refused: Option<RankKey>,
        /// The chosen image is PTX and `CUDA_DISABLE_PTX_JIT` is set: the driver loads it only
        /// from its JIT cache (a binary it compiled from this PTX before), and fails with
        /// `CUDA_ERROR_JIT_COMPILATION_DISABLED` (223) where there is none.
        pub from_jit_cache: bool,
        /// For the image ranked first so far: `Some(isa)` when it is PTX.
        best_ptx: Option<Option<PtxIsa>>,
        /// The image of each verdict of [`Choice::verdicts`], at the same position (`None` for
        /// a candidate without an image).
        images: Vec<Option<Image<'a>>>,
        @tools
        /// The verdict on every image, in discovery order, with its discovery index (empty
        /// for [`select`], which keeps none).
        pub verdicts: Vec<(usize, Verdict<'a>)>,
        /// The policy that ranked the images.
        pub policy: Policy,
    }
}

impl<'a> Choice<'a> {
    tools_pub! {
        /// Nothing seen yet.
        pub const EMPTY: Choice<'static> = Choice {
            image: None,
            key: None,
            candidates: 0,
            compatible: 0,
            tie: false,
            rejection: None,
            verdicts: Vec::new(),
            policy: Policy::Best,
            refused: None,
            from_jit_cache: false,
            best_ptx: None,
            images: Vec::new(),
        };
    }

    /// Discovery index of the chosen image.
    pub const fn chosen(&self) -> Option<usize> {
        match &self.key {
            Some(k) => Some(k.index),
            None => None,
        }
    }

    tools_pub! {
        /// The choice without the images: what a runtime keeps ([`Selection`]).
        pub const fn selection(&self) -> Selection {
            Selection {
                key: self.key,
                compatible: self.compatible,
                tie: self.tie,
            }
        }
    }

    tools_pub! {
        /// Why the image of discovery index `index` lost: rejected, or outranked by the chosen
        /// one. `None` for the chosen image and for indices without a recorded verdict.
        pub fn loss(&self, index: usize) -> Option<Loss<'a>> {
            let (_, verdict) = self.verdicts.iter().find(|(i, _)| *i == index)?;
            self.loss_of(index, *verdict)
        }
    }

    /// Every image that lost, with the image itself and why, in discovery order (empty for
    /// [`select`], which keeps no verdicts).
    pub fn losses(&self) -> impl Iterator<Item = Lost<'_, 'a>> + '_ {
        self.verdicts.iter().enumerate().filter_map(|(k, (i, v))| {
            self.loss_of(*i, *v).map(|loss| Lost {
                image: self.images.get(k).and_then(Option::as_ref),
                index: *i,
                loss,
            })
        })
    }

    fn loss_of(&self, index: usize, verdict: Verdict<'a>) -> Option<Loss<'a>> {
        if self.chosen() == Some(index) {
            return None;
        }
        if let (Some(refused), Some((_, why))) = (self.refused, self.rejection) {
            if refused.index == index {
                return Some(Loss::Rejected(why));
            }
        }
        match verdict {
            Verdict::Rejected(r) => Some(Loss::Rejected(r)),
            Verdict::Compatible(loser) => Some(Loss::Outranked(Outranked {
                loser,
                winner: self.key.or(self.refused)?,
                policy: self.policy,
            })),
        }
    }

    /// Applies the runtime's judgement on the image ranked first, once every candidate has
    /// been offered: for an NVIDIA device, the driver's on the PTX it picked
    /// ([`CudaDriver::refusal`]).
    fn settle(&mut self, device: &Device, driver: &CudaDriver) {
        let Some(key) = self.key else { return };
        match driver_refusal(device, self.best_ptx, driver) {
            Some(refusal) => {
                self.refused = self.key.take();
                self.image = None;
                self.tie = false;
                self.rejection = Some((key.index, Rejection::Driver(refusal)));
            }
            None => {
                self.from_jit_cache = matches!(device, Device::Cuda { .. })
                    && self.best_ptx.is_some()
                    && driver.switches.disable_ptx_jit;
            }
        }
    }

    /// Takes one more candidate into account: the one ranking loop.
    fn offer(
        &mut self,
        index: usize,
        image: Option<&Image<'a>>,
        verdict: Verdict<'a>,
        policy: Policy,
        ptx: Option<Option<PtxIsa>>,
    ) {
        self.candidates = self.candidates.saturating_add(1);
        self.policy = policy;
        match verdict {
            Verdict::Compatible(key) => {
                self.compatible = self.compatible.saturating_add(1);
                let (better, ties) = match &self.key {
                    None => (true, false),
                    Some(best) => (
                        key.cmp_under(best, policy).is_lt(),
                        key.ties_with(best, policy),
                    ),
                };
                if better {
                    self.key = Some(key);
                    self.image = image.copied();
                    self.best_ptx = ptx;
                }
                // A tie survives a replacement by an equal (the driver's last-of-equals).
                self.tie = if better { ties } else { self.tie || ties };
            }
            Verdict::Rejected(why) => {
                let better = match &self.rejection {
                    None => true,
                    Some((_, r)) => why.closeness() > r.closeness(),
                };
                if better {
                    self.rejection = Some((index, why));
                }
            }
        }
    }
}

/// The CUDA driver's judgement on the image chosen for `device` (§9.5), `chosen_ptx` being
/// `Some(its ISA)` when that image is PTX: why the driver refuses it, `None` when it loads.
/// The one rule [`choose`] and [`crate::stream`] apply after ranking.
pub(crate) fn driver_refusal(
    device: &Device,
    chosen_ptx: Option<Option<PtxIsa>>,
    driver: &CudaDriver,
) -> Option<Refusal> {
    match (device, chosen_ptx) {
        (Device::Cuda { .. }, Some(isa)) => driver.refusal(isa),
        _ => None,
    }
}

/// What [`choose`] chooses among: an [`Image`], or an entry already identified without
/// its bytes, `(discovery index, Identity)` (what a reader of a compressed bundle's entry
/// table knows before it decodes the payloads).
pub trait Candidate<'a> {
    /// The discovery index (the last key of the ranking).
    fn index(&self) -> usize;
    /// What it is built for ([`identify`]; at most an ELF header is read).
    fn identity(&self) -> Identity<'a>;
    /// The image, when the candidate is one ([`Choice::image`]).
    fn image(&self) -> Option<Image<'a>>;
}

impl<'a> Candidate<'a> for Image<'a> {
    fn index(&self) -> usize {
        self.index
    }
    fn identity(&self) -> Identity<'a> {
        identify(self)
    }
    fn image(&self) -> Option<Image<'a>> {
        Some(*self)
    }
}

impl<'a> Candidate<'a> for (usize, Identity<'a>) {
    fn index(&self) -> usize {
        self.0
    }
    fn identity(&self) -> Identity<'a> {
        self.1
    }
    fn image(&self) -> Option<Image<'a>> {
        None
    }
}

/// One pass over `candidates` for every device: each is identified once (at most its ELF
/// header is read) and checked against each device; `out[i]` ranks for `devices[i]`.
/// With `record`, every verdict is kept (allocates).
fn rank<'a, C, I>(
    candidates: I,
    devices: &[Device],
    options: &SelectOptions,
    out: &mut [Choice<'a>],
    record: bool,
) where
    C: Candidate<'a>,
    I: IntoIterator<Item = C>,
{
    for candidate in candidates {
        let (index, identity) = (candidate.index(), candidate.identity());
        let image = candidate.image();
        let ptx = (identity.code == Code::Ptx).then_some(identity.ptx_isa);
        for (device, slot) in devices.iter().zip(out.iter_mut()) {
            let verdict = check(&identity, index, device, options);
            if record {
                slot.verdicts.push((index, verdict));
                slot.images.push(image);
            }
            slot.offer(index, image.as_ref(), verdict, options.policy, ptx);
        }
    }
    for (device, slot) in devices.iter().zip(out.iter_mut()) {
        slot.settle(device, &options.cuda);
    }
}

/// Chooses the image to load on each of `devices` among `images` (one unit, in discovery
/// order; any iterator, for example [`crate::OpenUnit::images`], or of entries identified
/// without their bytes: [`Candidate`]) in one pass: the selection rules of
/// `COMPATIBILITY.md` in one function. The result has one [`Choice`]
/// per device, in the order given: the chosen image with its rank key, and the verdict on
/// every other image ([`Choice::loss`], [`Choice::losses`]).
///
/// Each image is identified once, whatever the number of devices; ranking keys use
/// [`Image::index`]. Images identified from their headers alone (compressed fatbinary
/// entries, [`Image::encoded`]) are not decoded.
///
/// ```
/// use offload_image::{units, select::choose, Device, ReadOptions, SelectOptions};
///
/// let data = include_bytes!("../tests/data/corpus/bundles/hip_6arch.bundle");
/// let devices = [
///     Device::parse("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-")?,
///     Device::parse("gfx1100")?,
/// ];
/// let options = ReadOptions::default();
/// for unit in units(data, &options) {
///     let open = unit?.open(&options)?;
///     let choices = choose(open.images(), &devices, &SelectOptions::default());
///     let image = choices[0].image.expect("a compatible image");
///     assert_eq!(image.entry_id, Some("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"));
///     println!("{} bytes at {:?}, {} code", image.size(), image.offset, choices[0].key.unwrap().class.name());
///     for lost in choices[1].losses() {
///         let name = lost.image.map(|i| i.name().to_string()).unwrap_or_default();
///         println!("not {name} for gfx1100: {}", lost.loss);
///     }
/// }
/// # Ok::<(), offload_image::Error>(())
/// ```
pub fn choose<'a, C, I>(images: I, devices: &[Device], options: &SelectOptions) -> Vec<Choice<'a>>
where
    C: Candidate<'a>,
    I: IntoIterator<Item = C>,
{
    let mut out: Vec<Choice<'a>> = devices.iter().map(|_| Choice::EMPTY).collect();
    rank(images, devices, options, &mut out, true);
    out
}

/// [`choose`] for one device, keeping no verdicts: the position of the chosen image in
/// `images` ([`Selection::chosen`]; a slice or any iterator of images), its key and the
/// counts. Allocation-free; a convenience for callers that need only the winner (a
/// runtime).
pub fn select<'a, I>(images: I, device: &Device, options: &SelectOptions) -> Selection
where
    I: IntoIterator,
    I::Item: core::borrow::Borrow<Image<'a>>,
{
    use core::borrow::Borrow;
    let mut one = [Choice::EMPTY];
    let positioned = images.into_iter().enumerate().map(|(i, image)| Image {
        index: i,
        ..*image.borrow()
    });
    rank(
        positioned,
        core::slice::from_ref(device),
        options,
        &mut one,
        false,
    );
    let [choice] = one;
    choice.selection()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn messages_read_well() {
        let d = |s| match Device::parse(s).unwrap() {
            Device::Amdgpu(t) => t,
            Device::Cuda { .. } => unreachable!(),
        };
        let r = Rejection::Feature {
            feature: Feature::Xnack,
            image: FeatureState::On,
            device: FeatureState::Off,
        };
        assert_eq!(r.to_string(), "built for xnack+, device has xnack-");
        let r = Rejection::Processor {
            image: d("gfx1030").processor,
            device: d("gfx1031").processor,
        };
        assert_eq!(r.to_string(), "gfx1030 code does not run on gfx1031");
        let r = Rejection::Feature {
            feature: Feature::Sramecc,
            image: FeatureState::On,
            device: FeatureState::Any,
        };
        assert_eq!(
            r.to_string(),
            "built for sramecc+, device has an unknown sramecc mode"
        );
    }
}
