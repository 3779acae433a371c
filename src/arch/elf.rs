//! What a device ELF header says about its target: AMDGPU code objects V2–V6 and CUDA
//! cubins (`FORMATS.md` §7, `COMPATIBILITY.md` §8, §9.1).
//!
//! Only the 64-byte ELF header is read (`e_ident`, `e_type`, `e_machine`, `e_flags`);
//! selection never touches the rest of an image.

use crate::error::{Error, ErrorKind, Result};
use crate::raw::{ELF_MAGIC, EM_AMDGPU, EM_CUDA};
use crate::arch::amdgpu::{Feature, FeatureState, FeatureSupport, Processor, TargetId};
use crate::arch::nvptx::{ArchVariant, NvArch};

/// `EI_OSABI` of HSA code objects (`ELFOSABI_AMDGPU_HSA`).
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `EI_OSABI` of AMD PAL code objects.
pub const ELFOSABI_AMDGPU_PAL: u8 = 65;
/// `EI_OSABI` of Mesa code objects.
pub const ELFOSABI_AMDGPU_MESA3D: u8 = 66;

/// `EF_AMDGPU_MACH`.
pub const EF_AMDGPU_MACH: u32 = 0xFF;
/// `EF_AMDGPU_FEATURE_XNACK_V3`.
pub const EF_AMDGPU_FEATURE_XNACK_V3: u32 = 0x100;
/// `EF_AMDGPU_FEATURE_SRAMECC_V3`.
pub const EF_AMDGPU_FEATURE_SRAMECC_V3: u32 = 0x200;
/// `EF_AMDGPU_FEATURE_XNACK_V4` (two-bit field).
pub const EF_AMDGPU_FEATURE_XNACK_V4: u32 = 0x300;
/// `EF_AMDGPU_FEATURE_SRAMECC_V4` (two-bit field).
pub const EF_AMDGPU_FEATURE_SRAMECC_V4: u32 = 0xC00;
/// `EF_AMDGPU_FEATURE_XNACK_OFF_V4`: the xnack field's "off" value.
pub const EF_AMDGPU_FEATURE_XNACK_OFF_V4: u32 = 0x200;
/// `EF_AMDGPU_FEATURE_SRAMECC_OFF_V4`: the sramecc field's "off" value.
pub const EF_AMDGPU_FEATURE_SRAMECC_OFF_V4: u32 = 0x800;
/// `EF_AMDGPU_GENERIC_VERSION` (bits 24–31, code object V6).
pub const EF_AMDGPU_GENERIC_VERSION: u32 = 0xFF00_0000;

/// `EF_CUDA_SM` (CUDA ABI V1: SM number in bits 0–7).
pub const EF_CUDA_SM: u32 = 0xFF;
/// `EF_CUDA_ACCELERATORS_V1` (`a` variant, ABI V1).
pub const EF_CUDA_ACCELERATORS_V1: u32 = 0x800;
/// `EF_CUDA_SM_MASK` (CUDA ABI V2: SM number in bits 8–15).
pub const EF_CUDA_SM_MASK: u32 = 0xFF00;
/// The first SM with an architecture-specific (`a`) variant: sm_90a.
pub const FIRST_ARCH_SPECIFIC_SM: u32 = 90;
/// `EF_CUDA_ACCELERATORS` (`a` variant, ABI V2).
pub const EF_CUDA_ACCELERATORS: u32 = 0x8;

/// The fields of an ELF header that identify a device image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ElfHeader {
    /// `EI_CLASS` (1 = 32-bit, 2 = 64-bit).
    pub class: u8,
    /// `EI_DATA` (1 = little-endian, 2 = big-endian).
    pub data: u8,
    /// `EI_OSABI`.
    pub osabi: u8,
    /// `EI_ABIVERSION`.
    pub abi_version: u8,
    /// `e_type`.
    pub e_type: u16,
    /// `e_machine`.
    pub machine: u16,
    /// `e_flags`.
    pub flags: u32,
}

impl ElfHeader {
    /// Reads the identifying fields of a 32- or 64-bit ELF header (either byte order).
    /// `None` when `bytes` does not start with a complete ELF header.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if !bytes.starts_with(ELF_MAGIC) {
            return None;
        }
        let class = *bytes.get(4)?;
        let data = *bytes.get(5)?;
        let be = match data {
            1 => false,
            2 => true,
            _ => return None,
        };
        let u16_at = |o: usize| -> Option<u16> {
            let b: [u8; 2] = bytes.get(o..o.checked_add(2)?)?.try_into().ok()?;
            Some(if be {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            })
        };
        let u32_at = |o: usize| -> Option<u32> {
            let b: [u8; 4] = bytes.get(o..o.checked_add(4)?)?.try_into().ok()?;
            Some(if be {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            })
        };
        let flags_at = match class {
            1 => 36,
            2 => 48,
            _ => return None,
        };
        Some(ElfHeader {
            class,
            data,
            osabi: *bytes.get(7)?,
            abi_version: *bytes.get(8)?,
            e_type: u16_at(16)?,
            machine: crate::bytes::elf_machine(bytes)?,
            flags: u32_at(flags_at)?,
        })
    }
}

/// What the header of an AMDGPU code object says (`COMPATIBILITY.md` §8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AmdgpuElf {
    /// The raw header fields.
    pub header: ElfHeader,
    /// Code object version: 2 … 6 (`EI_ABIVERSION` + 2); 0 for an ABI version this crate
    /// does not know.
    pub code_object_version: u8,
    /// `EF_AMDGPU_MACH`.
    pub mach: u8,
    /// The processor of `mach`, `None` for a reserved/unknown value.
    pub processor: Option<&'static Processor>,
    /// `sramecc` state (V3: single bit; V4+: two-bit field).
    pub sramecc: FeatureState,
    /// `xnack` state.
    pub xnack: FeatureState,
    /// `EF_AMDGPU_GENERIC_VERSION` (V6), 0 otherwise.
    pub generic_version: u8,
}

/// Why an AMDGPU code object cannot be identified or loaded, from its header alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AmdgpuElfProblem {
    /// `EI_OSABI` is not HSA (PAL, Mesa, …): not loadable by an HSA runtime.
    NotHsa(u8),
    /// Code object V2: processor identity lives in notes; rejected.
    CodeObjectV2,
    /// An `EI_ABIVERSION` this crate does not know.
    UnknownAbiVersion(u8),
    /// A reserved or unknown `EF_AMDGPU_MACH` value.
    UnknownMach(u8),
    /// A generic processor in a pre-V6 code object, or with generic version 0.
    BadGenericVersion,
    /// A non-generic processor with a non-zero generic version field.
    StrayGenericVersion,
    /// A feature field holds a state the processor cannot have (e.g. xnack on gfx1030).
    FeatureNotSupported(Feature),
    /// A feature field says "off" (code object V4+: `EF_AMDGPU_FEATURE_XNACK_OFF_V4`,
    /// 0x200) for a feature the processor always has on (xnack on gfx1250, gfx1251 and
    /// gfx12-5-generic): code built for the mode the processor never runs in
    /// (`COMPATIBILITY.md` §8.1).
    AlwaysOnFeatureOff {
        /// The feature.
        feature: Feature,
        /// The processor's primary name.
        processor: &'static str,
    },
}

impl core::fmt::Display for AmdgpuElfProblem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AmdgpuElfProblem::NotHsa(o) => write!(
                f,
                "code object is not for HSA (ELF OS/ABI {o}; HSA is {ELFOSABI_AMDGPU_HSA})"
            ),
            AmdgpuElfProblem::CodeObjectV2 => {
                f.write_str("code object V2 is not supported (its processor is only named in notes)")
            }
            AmdgpuElfProblem::UnknownAbiVersion(v) => {
                write!(f, "unknown AMDGPU code object ABI version {v}")
            }
            AmdgpuElfProblem::UnknownMach(m) => {
                write!(f, "unknown AMDGPU processor (EF_AMDGPU_MACH {m:#05x})")
            }
            AmdgpuElfProblem::BadGenericVersion => f.write_str(
                "generic code object without a generic version (needs code object V6, version >= 1)",
            ),
            AmdgpuElfProblem::StrayGenericVersion => {
                f.write_str("non-generic code object carries a generic version")
            }
            AmdgpuElfProblem::FeatureNotSupported(feat) => write!(
                f,
                "ELF header sets {feat}, which the processor does not support"
            ),
            AmdgpuElfProblem::AlwaysOnFeatureOff { feature, processor } => {
                let (value, name) = match feature {
                    Feature::Xnack => (EF_AMDGPU_FEATURE_XNACK_OFF_V4, "XNACK"),
                    Feature::Sramecc => (EF_AMDGPU_FEATURE_SRAMECC_OFF_V4, "SRAMECC"),
                };
                write!(
                    f,
                    "ELF header sets {feature} off (e_flags {value:#05x}, EF_AMDGPU_FEATURE_{name}_OFF_V4), but {processor} always runs with {feature} on"
                )
            }
        }
    }
}

impl AmdgpuElf {
    /// Decodes an AMDGPU header (`header.machine` must be [`EM_AMDGPU`]).
    pub fn decode(header: ElfHeader) -> Self {
        let flags = header.flags;
        let mach = (flags & EF_AMDGPU_MACH) as u8;
        let processor = Processor::by_mach(mach);
        let code_object_version = match header.abi_version {
            v @ 0..=4 => v.saturating_add(2),
            _ => 0,
        };
        let support = |feat: Feature| processor.map(|p| p.support(feat).is_selectable());
        let (sramecc, xnack) = match code_object_version {
            3 => {
                let bit = |feat: Feature, mask: u32| match support(feat) {
                    Some(true) => FeatureState::from_bool(flags & mask != 0),
                    _ if flags & mask != 0 => FeatureState::On,
                    _ => FeatureState::Unsupported,
                };
                (
                    bit(Feature::Sramecc, EF_AMDGPU_FEATURE_SRAMECC_V3),
                    bit(Feature::Xnack, EF_AMDGPU_FEATURE_XNACK_V3),
                )
            }
            4..=6 => {
                let two = |v: u32| match v {
                    1 => FeatureState::Any,
                    2 => FeatureState::Off,
                    3 => FeatureState::On,
                    _ => FeatureState::Unsupported,
                };
                (
                    two((flags & EF_AMDGPU_FEATURE_SRAMECC_V4) >> 10),
                    two((flags & EF_AMDGPU_FEATURE_XNACK_V4) >> 8),
                )
            }
            _ => (FeatureState::Unsupported, FeatureState::Unsupported),
        };
        let generic_version = if code_object_version == 6 {
            (flags >> 24) as u8
        } else {
            0
        };
        AmdgpuElf {
            header,
            code_object_version,
            mach,
            processor,
            sramecc,
            xnack,
            generic_version,
        }
    }

    /// The target ID the header describes, or why it cannot be used.
    pub fn target(&self) -> core::result::Result<TargetId, AmdgpuElfProblem> {
        if self.header.osabi != ELFOSABI_AMDGPU_HSA {
            return Err(AmdgpuElfProblem::NotHsa(self.header.osabi));
        }
        match self.code_object_version {
            2 => return Err(AmdgpuElfProblem::CodeObjectV2),
            0 => return Err(AmdgpuElfProblem::UnknownAbiVersion(self.header.abi_version)),
            _ => {}
        }
        let processor = self
            .processor
            .ok_or(AmdgpuElfProblem::UnknownMach(self.mach))?;
        if processor.is_generic() {
            if self.code_object_version < 6 || self.generic_version == 0 {
                return Err(AmdgpuElfProblem::BadGenericVersion);
            }
        } else if self.generic_version != 0 {
            return Err(AmdgpuElfProblem::StrayGenericVersion);
        }
        // A feature the processor always has on (xnack on gfx1250, gfx1251,
        // gfx12-5-generic) is not part of its target ID: "unsupported", "any" and "on" all
        // name code that runs with it on (LLVM wrote the first two, LLVM main writes the
        // third); "off" names code built for a mode the processor never runs in
        // (`COMPATIBILITY.md` §8.1).
        let effective = |feat: Feature, state: FeatureState| match processor.support(feat) {
            FeatureSupport::Selectable => Ok(state),
            FeatureSupport::None if state == FeatureState::Unsupported => Ok(state),
            FeatureSupport::None => Err(AmdgpuElfProblem::FeatureNotSupported(feat)),
            FeatureSupport::AlwaysOn if state == FeatureState::Off => {
                Err(AmdgpuElfProblem::AlwaysOnFeatureOff {
                    feature: feat,
                    processor: processor.name,
                })
            }
            FeatureSupport::AlwaysOn => Ok(FeatureState::Unsupported),
        };
        let sramecc = effective(Feature::Sramecc, self.sramecc)?;
        let xnack = effective(Feature::Xnack, self.xnack)?;
        TargetId::new(processor, sramecc, xnack)
            .map_err(|_| AmdgpuElfProblem::FeatureNotSupported(Feature::Xnack))
    }
}

/// Which `e_flags` layout a cubin uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CudaLayout {
    /// CUDA ABI V1 (`EI_ABIVERSION` 7): SM in bits 0–7, `a` = 0x800.
    V1,
    /// CUDA ABI V2 (`EI_ABIVERSION` 8): SM in bits 8–15, `a` = 0x8.
    V2,
}

/// What the header of a CUDA cubin says (`COMPATIBILITY.md` §9.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CudaElf {
    /// The raw header fields.
    pub header: ElfHeader,
    /// The layout, chosen by `EI_ABIVERSION`; `None` for an unknown ABI version.
    pub layout: Option<CudaLayout>,
    /// The architecture: SM number and `a` bit. The `f` variant is never recorded in a
    /// cubin, and ptxas 13 does not set the `a` bit either, so a plain result does not
    /// prove the code is plain.
    pub arch: Option<NvArch>,
}

impl CudaElf {
    /// Decodes a cubin header (`header.machine` must be [`EM_CUDA`]).
    ///
    /// The layout is decided by `EI_ABIVERSION` (7 or 8), never by the value; the OS/ABI
    /// byte is not checked (real files carry 0x33 or 0x41, LLVM's constant for V2 is 41).
    pub fn decode(header: ElfHeader) -> Self {
        let flags = header.flags;
        let layout = match header.abi_version {
            7 => Some(CudaLayout::V1),
            8 => Some(CudaLayout::V2),
            _ => None,
        };
        let arch = layout.and_then(|l| {
            let (sm, a) = match l {
                CudaLayout::V1 => (flags & EF_CUDA_SM, flags & EF_CUDA_ACCELERATORS_V1 != 0),
                CudaLayout::V2 => (
                    (flags & EF_CUDA_SM_MASK) >> 8,
                    flags & EF_CUDA_ACCELERATORS != 0,
                ),
            };
            if sm < 10 {
                return None;
            }
            // Architecture-specific variants begin with sm_90a: on older SMs the V1 bit
            // 0x800 is set by ptxas 12.x on plain cubins (libcublas 12.9's sm_50, sm_60 and
            // sm_61 cubins, which cuobjdump names plainly), so it does not mean `a` there.
            let a = a && sm >= FIRST_ARCH_SPECIFIC_SM;
            Some(NvArch {
                sm: sm as u16,
                variant: if a {
                    ArchVariant::ArchSpecific
                } else {
                    ArchVariant::Plain
                },
                virtual_name: false,
            })
        });
        CudaElf {
            header,
            layout,
            arch,
        }
    }
}

/// A decoded device ELF header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceElf {
    /// An AMDGPU code object.
    Amdgpu(AmdgpuElf),
    /// An NVIDIA cubin.
    Cuda(CudaElf),
}

impl DeviceElf {
    /// Decodes the header of a device ELF; `None` if `bytes` is not a 64-bit little-endian
    /// ELF for `EM_AMDGPU` or `EM_CUDA`.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let header = ElfHeader::parse(bytes)?;
        if header.class != 2 || header.data != 1 {
            return None;
        }
        match header.machine {
            EM_AMDGPU => Some(DeviceElf::Amdgpu(AmdgpuElf::decode(header))),
            EM_CUDA => Some(DeviceElf::Cuda(CudaElf::decode(header))),
            _ => None,
        }
    }

    /// Like [`DeviceElf::parse`], as a [`Result`] for callers that need an error.
    pub fn parse_required(bytes: &[u8]) -> Result<Self> {
        DeviceElf::parse(bytes).ok_or(Error::new(
            ErrorKind::BadMagic,
            0,
            "not a 64-bit little-endian AMDGPU or CUDA ELF",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn header(machine: u16, osabi: u8, abi: u8, flags: u32) -> [u8; 64] {
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(ELF_MAGIC);
        h[4] = 2;
        h[5] = 1;
        h[7] = osabi;
        h[8] = abi;
        h[16..18].copy_from_slice(&3u16.to_le_bytes());
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h[48..52].copy_from_slice(&flags.to_le_bytes());
        h
    }

    fn amd(abi: u8, flags: u32) -> AmdgpuElf {
        match DeviceElf::parse(&header(EM_AMDGPU, 64, abi, flags)).unwrap() {
            DeviceElf::Amdgpu(a) => a,
            DeviceElf::Cuda(_) => unreachable!(),
        }
    }

    /// ABI V1's bit 0x800 is `a` only from sm_90 on: libcublas.so.12 (nvidia-cublas-cu12
    /// 12.9.1.4) holds sm_50, sm_60 and sm_61 cubins with it set, which cuobjdump lists as
    /// plain sm_50, sm_60 and sm_61.
    #[test]
    fn cuda_v1_accelerator_bit_means_a_from_sm_90() {
        let arch = |flags| match DeviceElf::parse(&header(EM_CUDA, 51, 7, flags)).unwrap() {
            DeviceElf::Cuda(c) => c.arch.unwrap().to_string(),
            DeviceElf::Amdgpu(_) => unreachable!(),
        };
        assert_eq!(arch(0x0032_0832), "sm_50");
        assert_eq!(arch(0x003D_0C3D), "sm_61");
        assert_eq!(arch(0x005A_0D5A), "sm_90a");
        assert_eq!(arch(0x005A_055A), "sm_90");
    }

    #[test]
    fn amdgpu_flags() {
        // Values from the corpus manifest (llvm-readelf's decoding alongside).
        assert_eq!(amd(3, 0x52F).target().unwrap().to_string(), "gfx906");
        assert_eq!(amd(3, 0x73F).target().unwrap().to_string(), "gfx90a:xnack+");
        assert_eq!(amd(3, 0x63F).target().unwrap().to_string(), "gfx90a:xnack-");
        assert_eq!(
            amd(3, 0xE4C).target().unwrap().to_string(),
            "gfx942:sramecc+:xnack-"
        );
        // V3 single bits: gfx906 with xnack bit only.
        let v3 = amd(1, 0x12F);
        assert_eq!(
            (v3.xnack, v3.sramecc),
            (FeatureState::On, FeatureState::Off)
        );
        assert_eq!(v3.target().unwrap().to_string(), "gfx906:sramecc-:xnack+");
        // V6 generic with version 1.
        let g = amd(4, 0x0100_0151);
        assert_eq!(g.generic_version, 1);
        assert_eq!(g.target().unwrap().to_string(), "gfx9-generic");
        assert_eq!(
            amd(4, 0x151).target(),
            Err(AmdgpuElfProblem::BadGenericVersion)
        );
        assert_eq!(
            amd(3, 0x151).target(),
            Err(AmdgpuElfProblem::BadGenericVersion)
        );
        assert_eq!(amd(0, 0x2F).target(), Err(AmdgpuElfProblem::CodeObjectV2));
        assert_eq!(
            amd(2, 0x27).target(),
            Err(AmdgpuElfProblem::UnknownMach(0x27))
        );
        assert_eq!(
            amd(2, 0x136).target(),
            Err(AmdgpuElfProblem::FeatureNotSupported(Feature::Xnack))
        );
    }

    /// gfx1250 and gfx1251 run with xnack always on (`COMPATIBILITY.md` §8.1). The flag
    /// words are those of real files (0x549: torch-scatter-rocm 2.1.2.post7, AMD clang
    /// 23.0.0git; 0x449: jax-rocm10-plugin 0.12.0) and of LLVM main (0x300 ON,
    /// llvm/llvm-project#212792); llvm-readelf-22 decodes them as "gfx1250, xnack, sramecc"
    /// (0x549), "gfx1250, sramecc" (0x449), "gfx1250, xnack+, sramecc" (0x749) and
    /// "gfx1250, xnack-, sramecc" (0x649).
    #[test]
    fn always_on_xnack() {
        for (flags, xnack) in [
            (0x449, FeatureState::Unsupported),
            (0x549, FeatureState::Any),
            (0x749, FeatureState::On),
        ] {
            let a = amd(4, flags);
            // The decoded field is kept as the header says it …
            assert_eq!(
                (a.xnack, a.sramecc),
                (xnack, FeatureState::Any),
                "{flags:#x}"
            );
            // … and the target ID, like LLVM's, has no xnack for gfx1250.
            let t = a.target().unwrap();
            assert_eq!(t.to_string(), "gfx1250", "{flags:#x}");
            assert_eq!(t.xnack, FeatureState::Unsupported);
        }
        assert_eq!(amd(2, 0x55A).target().unwrap().to_string(), "gfx1251");
        assert_eq!(
            amd(4, 0xD49).target().unwrap().to_string(),
            "gfx1250:sramecc+"
        );
        let off = amd(4, 0x649).target().unwrap_err();
        assert_eq!(
            off,
            AmdgpuElfProblem::AlwaysOnFeatureOff {
                feature: Feature::Xnack,
                processor: "gfx1250"
            }
        );
        assert_eq!(
            off.to_string(),
            "ELF header sets xnack off (e_flags 0x200, EF_AMDGPU_FEATURE_XNACK_OFF_V4), but gfx1250 always runs with xnack on"
        );
        assert!(matches!(
            amd(3, 0x65A).target(),
            Err(AmdgpuElfProblem::AlwaysOnFeatureOff {
                processor: "gfx1251",
                ..
            })
        ));
        // gfx12-5-generic (MACH 0x5B, code object V6, generic version 1) with xnack ON, as
        // LLVM main writes it.
        assert_eq!(
            amd(4, 0x0100_035B).target().unwrap().to_string(),
            "gfx12-5-generic"
        );
        // A processor without xnack still refuses every xnack value but "unsupported".
        assert_eq!(
            amd(3, 0x136).target(),
            Err(AmdgpuElfProblem::FeatureNotSupported(Feature::Xnack))
        );
    }

    #[test]
    fn cuda_flags() {
        let cu = |abi, flags| match DeviceElf::parse(&header(EM_CUDA, 0x33, abi, flags)).unwrap() {
            DeviceElf::Cuda(c) => c.arch.unwrap().to_string(),
            DeviceElf::Amdgpu(_) => unreachable!(),
        };
        // Values from the corpus cubins (ptxas 12.9 and 13.5).
        assert_eq!(cu(7, 0x500550), "sm_80");
        assert_eq!(cu(7, 0x5A055A), "sm_90");
        assert_eq!(cu(7, 0x5A0D5A), "sm_90a");
        assert_eq!(cu(8, 0x600640A), "sm_100a");
        assert_eq!(cu(8, 0x6007802), "sm_120");
        assert_eq!(cu(8, 0x6005004), "sm_80");
        assert_eq!(cu(8, 0x6005A04), "sm_90");
    }
}
