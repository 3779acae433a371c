//! What an image is built for, from its container's words and its ELF header
//! (`COMPATIBILITY.md` §1.4, §8, §9.1, §10 step 1).

use core::fmt;

use crate::error::Error;
use crate::image::{Image, ImageKind, OffloadKind};
use crate::arch::amdgpu::{Feature, Subarch, TargetId};
use crate::arch::elf::{
    AmdgpuElf, AmdgpuElfProblem, CudaElf, DeviceElf, ELFOSABI_AMDGPU_HSA, ELFOSABI_AMDGPU_MESA3D,
    ELFOSABI_AMDGPU_PAL,
};
use crate::arch::nvptx::{ArchVariant, NvArch};
use crate::arch::Triple;

/// A target as named by a container or an ELF header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target<'a> {
    /// A valid AMDGPU target ID with a known processor.
    Amdgpu(TargetId),
    /// `amdgcnspirv`: AMD's SPIR-V, compiled for the device at load time.
    AmdgcnSpirv,
    /// An NVPTX architecture.
    Nvptx(NvArch),
    /// A target string that does not parse or names an unknown processor; kept as stored.
    Invalid {
        /// The string as stored.
        text: &'a str,
        /// Why it is not valid.
        why: Error,
    },
    /// No target named and none derivable.
    None,
}

impl<'a> Target<'a> {
    tools_pub! {
        /// Parses a target string the way the triple's architecture reads it.
        ///
        /// `arch` is the triple's first field when known: `amdgcn` targets are AMDGPU target
        /// IDs, `nvptx64`/`nvptx` targets NVPTX architectures, `spirv64` allows
        /// `amdgcnspirv`. With no triple the shape of the name decides.
        pub fn parse(text: &'a str, arch: Option<&str>) -> Self {
            if text.is_empty() {
                return Target::None;
            }
            let invalid = |why| Target::Invalid { text, why };
            let nv = text.starts_with("sm_") || text.starts_with("compute_");
            match arch {
                _ if text == "amdgcnspirv" => Target::AmdgcnSpirv,
                Some("nvptx64" | "nvptx") => NvArch::parse(text).map_or_else(invalid, Target::Nvptx),
                None if nv => NvArch::parse(text).map_or_else(invalid, Target::Nvptx),
                _ => TargetId::parse(text).map_or_else(invalid, Target::Amdgpu),
            }
        }
    }

    tools_pub! {
        /// The AMDGPU target ID, if this is one.
        pub fn amdgpu(&self) -> Option<&TargetId> {
            match self {
                Target::Amdgpu(t) => Some(t),
                _ => None,
            }
        }
    }
}

impl fmt::Display for Target<'_> {
    /// The canonical spelling (`gfx90a:sramecc+:xnack-`, `sm_90a`, `amdgcnspirv`), the
    /// stored text for invalid targets, nothing for `None`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Amdgpu(t) => write!(f, "{t}"),
            Target::AmdgcnSpirv => f.write_str("amdgcnspirv"),
            Target::Nvptx(a) => write!(f, "{a}"),
            Target::Invalid { text, .. } => f.write_str(text),
            Target::None => Ok(()),
        }
    }
}

/// What kind of code an image holds, as far as loading it is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// A device ELF (AMDGPU code object or cubin): loaded as is.
    Elf,
    /// LLVM bitcode: needs a JIT.
    Bitcode,
    /// SPIR-V: needs a JIT.
    Spirv,
    /// PTX text: the CUDA driver JIT-compiles it.
    Ptx,
    /// An NVIDIA fatbinary: handed to the CUDA driver, which picks what is inside.
    Fatbinary,
    /// Anything else (source text, a host object, unrecognised bytes): not loadable.
    Other,
}

impl Code {
    /// True for code that must be compiled at load time.
    pub const fn needs_jit(self) -> bool {
        matches!(self, Code::Bitcode | Code::Spirv | Code::Ptx)
    }
}

/// Where the container's target and the ELF header disagree (`COMPATIBILITY.md` §10.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mismatch {
    /// Different processors (or SM numbers).
    Processor,
    /// The same processor, a different state of an explicit feature.
    Feature(Feature),
    /// The cubin has the `a` bit but the container names a plain or `f` architecture.
    ArchSpecific,
}

/// Everything selection needs to know about one image; made by [`identify`].
///
/// `target` is the effective target: the ELF header's when the image is a decodable
/// device ELF (for AMDGPU the `e_flags` win, `COMPATIBILITY.md` §10.1; for NVPTX the
/// container's name wins unless the SM numbers differ, because cubins never record `f`
/// and ptxas 13 does not record `a`, §9.1), else the container's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity<'a> {
    /// The offload kind (from the entry ID or the OffloadBinary header).
    pub offload_kind: OffloadKind,
    /// The triple: the container's, or for a bare ELF the one its `e_machine` implies.
    pub triple: Option<Triple<'a>>,
    /// The target as the container states it (entry ID target, OffloadBinary `arch`).
    pub stated: Option<&'a str>,
    /// The container's target, parsed.
    pub stated_target: Target<'a>,
    /// The target the ELF header names, if the image is a device ELF that names one.
    pub elf_target: Option<Target<'static>>,
    /// The effective target (see the type's documentation).
    pub target: Target<'a>,
    /// The decoded ELF header, if the image is a device ELF.
    pub elf: Option<DeviceElf>,
    /// An AMDGPU ELF header that makes the image unloadable (V2, generic without version, …).
    pub elf_problem: Option<AmdgpuElfProblem>,
    /// Where the container and the ELF header disagree, if they do.
    pub mismatch: Option<Mismatch>,
    /// Generic version of an AMDGPU generic code object (`None` when not an ELF).
    pub generic_version: Option<u8>,
    /// What kind of code the image holds.
    pub code: Code,
    /// The image kind the container records (OffloadBinary) or the reader sniffed.
    pub image_kind: ImageKind,
    /// Image size in bytes.
    pub size: u64,
    /// For PTX: its ISA version, from the text's `.version` directive when the bytes are at
    /// hand, else as the container records it ([`Image::ptx_isa`]).
    pub ptx_isa: Option<crate::driver::PtxIsa>,
    /// The container format the image came from (the CUDA driver's order among entries
    /// applies inside an NVIDIA fatbinary only).
    pub format: crate::image::Format,
}

impl<'a> Identity<'a> {
    /// The target as a listing names it: the container's when it names one, else the ELF
    /// header's; `None` when neither does.
    pub fn named_target(&self) -> Option<Target<'a>> {
        match (self.stated_target, self.elf_target) {
            (Target::None, Some(elf)) => Some(elf),
            (Target::None, None) => None,
            (stated, _) => Some(stated),
        }
    }

    tools_pub! {
        /// The effective target ([`Identity::target`]) as the toolchain that made the code
        /// names it: for NVIDIA code, `sm_86` for a cubin and `compute_86`, the virtual
        /// architecture, for PTX and Tile IR bytecode (with the `a`/`f` suffix), as nvcc's
        /// `-gencode` and cuobjdump's `-lelf`/`-lptx`/`-ltileir` file names tell them apart; an
        /// AMDGPU target ID as is. `None` when
        /// the image names no target (or an invalid one).
        pub fn toolchain_target(&self) -> Option<Target<'a>> {
            match self.target {
                Target::None | Target::Invalid { .. } => None,
                t => Some(spelled(t, self)),
            }
        }
    }
}

/// `target` as the toolchain spells it for the code `id` identifies: an NVIDIA
/// architecture is virtual (`compute_86`) for PTX and Tile IR bytecode (cuobjdump's
/// `-ltileir` lists it as `NAME.compute_80.tileir`), real (`sm_86`) for anything else.
fn spelled<'a>(target: Target<'a>, id: &Identity<'_>) -> Target<'a> {
    match target {
        Target::Nvptx(arch) => Target::Nvptx(NvArch {
            virtual_name: id.code == Code::Ptx || id.image_kind == ImageKind::TileIr,
            ..arch
        }),
        t => t,
    }
}

/// How runtimes' reports and `loader-sim` name an image ([`Image::name`]): the bundle entry
/// ID as stored, else `<triple>--<target>`: an OffloadBinary's or an NVIDIA fatbinary's
/// triple and architecture, a bare ELF's normalised triple and its target from the header,
/// an NVIDIA architecture spelled as NVIDIA's tools spell it (`sm_86` for a cubin,
/// `compute_86` for PTX: [`ImageName::target`]). Allocation-free.
#[derive(Clone, Copy, Debug)]
pub struct ImageName<'i, 'a> {
    image: &'i Image<'a>,
}

/// The name of `image` (see [`ImageName`]); the same as [`Image::name`].
pub fn image_name<'i, 'a>(image: &'i Image<'a>) -> ImageName<'i, 'a> {
    ImageName { image }
}

impl<'a> Image<'a> {
    /// How runtimes' reports and `loader-sim` name this image: its bundle entry ID, else
    /// `<triple>--<target>` with an NVIDIA architecture spelled as NVIDIA's tools spell it
    /// (`sm_86` for a cubin, `compute_86` for PTX), an AMDGPU code object by its target ID
    /// ([`ImageName`]; its `Display` writes the name, [`ImageName::target`] gives the
    /// target part). Reads at most the image's ELF header.
    pub fn name(&self) -> ImageName<'_, 'a> {
        ImageName { image: self }
    }
}

impl<'a> ImageName<'_, 'a> {
    /// The image's target as the name spells it: the container's (else the ELF header's),
    /// an NVIDIA architecture as `sm_86` for a cubin and `compute_86` for PTX, an AMDGPU
    /// target ID (`gfx90a:xnack-`); `None` when the image names none (a host entry).
    pub fn target(&self) -> Option<Target<'a>> {
        let id = identify(self.image);
        id.named_target()
            .filter(|t| !matches!(t, Target::None))
            .map(|t| spelled(t, &id))
    }
}

impl core::fmt::Display for ImageName<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let image = self.image;
        if let Some(id) = image.entry_id {
            return f.write_str(id);
        }
        let id = identify(image);
        let nvidia = matches!(id.named_target(), Some(Target::Nvptx(_)));
        if let (Some(t), Some(a), false) = (image.triple, image.target_id, nvidia) {
            return write!(f, "{t}--{a}");
        }
        match (id.triple, image.triple) {
            (_, Some(t)) if image.target_id.is_some() => f.write_str(t)?,
            (Some(t), _) => write!(f, "{t}")?,
            (None, Some(t)) => f.write_str(t)?,
            (None, None) => f.write_str("unknown")?,
        }
        f.write_str("--")?;
        match id.named_target() {
            Some(t) => write!(f, "{}", spelled(t, &id)),
            None => Ok(()),
        }
    }
}

impl Identity<'_> {
    /// The normalised triple (`amdgcn-amd-amdhsa`, `nvptx64-nvidia-cuda`,
    /// `x86_64-unknown-linux-gnu`): `Display` of [`Triple`].
    pub fn triple(&self) -> Option<&Triple<'_>> {
        self.triple.as_ref()
    }

    tools_pub! {
        /// The triple's architecture field, or the one the target implies; `amdgcn` for every
        /// AMDGPU spelling (`amdgpu`, `amdgpu9.42`: `COMPATIBILITY.md` §1.5).
        pub fn arch(&self) -> Option<&str> {
            match (&self.triple, &self.target) {
                (Some(t), _) if t.is_amdgpu() => Some("amdgcn"),
                (Some(t), _) => Some(t.arch),
                (None, Target::Amdgpu(_)) => Some("amdgcn"),
                (None, Target::AmdgcnSpirv) => Some("spirv64"),
                (None, Target::Nvptx(_)) => Some("nvptx64"),
                _ => None,
            }
        }
    }
}

/// The triple implied by a device ELF header.
fn elf_triple(elf: &DeviceElf) -> Triple<'static> {
    let (arch, vendor, os) = match elf {
        DeviceElf::Amdgpu(a) => (
            "amdgcn",
            "amd",
            match a.header.osabi {
                ELFOSABI_AMDGPU_HSA => "amdhsa",
                ELFOSABI_AMDGPU_PAL => "amdpal",
                ELFOSABI_AMDGPU_MESA3D => "mesa3d",
                _ => "unknown",
            },
        ),
        DeviceElf::Cuda(_) => ("nvptx64", "nvidia", "cuda"),
    };
    Triple {
        arch,
        vendor,
        os,
        env: "",
    }
}

/// Magic-number sniffing of image bytes: 4 bytes, never more ([`ImageKind::from_magic`]).
fn code_from_magic(bytes: &[u8]) -> Code {
    match ImageKind::from_magic(bytes) {
        Some(ImageKind::Bitcode) => Code::Bitcode,
        Some(ImageKind::Spirv) => Code::Spirv,
        Some(ImageKind::Fatbinary) => Code::Fatbinary,
        _ => Code::Other,
    }
}

/// AMDGPU: where the stated target and the one from `e_flags` disagree.
///
/// For code objects V4+ every feature state is recorded, so any difference counts. V3 has
/// no `Any` (one bit per feature), so only an explicit stated state that differs counts.
fn amdgpu_mismatch(stated: &TargetId, elf: &TargetId, code_object: u8) -> Option<Mismatch> {
    if !core::ptr::eq(stated.processor, elf.processor) {
        return Some(Mismatch::Processor);
    }
    Feature::ALL.into_iter().find_map(|f| {
        let (s, e) = (stated.state(f), elf.state(f));
        let differs = if code_object >= 4 {
            s != e
        } else {
            s.is_explicit() && s != e
        };
        differs.then_some(Mismatch::Feature(f))
    })
}

/// What a bundle entry is built for when only its entry ID and its first bytes `head` are
/// known (a compressed bundle read as a stream, or only its entry table read), its payload
/// being `size` bytes: [`identify`] of those bytes, except that an entry none of whose bytes
/// were read is taken for the code object its ID names, as comgr's lookup (which the HIP
/// runtime uses) takes it.
pub fn identify_entry<'a>(index: usize, id: &'a str, head: &'a [u8], size: u64) -> Identity<'a> {
    let mut identity = identify(&Image::from_id(
        index,
        crate::image::Format::Bundle,
        id,
        head,
    ));
    identity.size = size;
    if head.is_empty() && identity.code == Code::Other {
        identity.code = Code::Elf;
    }
    identity
}

/// Identifies an image: normalised triple, effective target, what the ELF header says,
/// and whether the two disagree. Reads only the first 64 bytes of the image (the ELF
/// header or a magic number). Allocation-free.
pub fn identify<'a>(image: &Image<'a>) -> Identity<'a> {
    let elf = DeviceElf::parse(image.bytes);
    let triple = image
        .triple
        .and_then(|t| Triple::parse(t).ok())
        .or(elf.as_ref().map(elf_triple));
    let stated = image.target_id.filter(|s| !s.is_empty());
    // An `amdgpu<subarch>` triple names a processor itself (`COMPATIBILITY.md` §1.5).
    let subarch = triple
        .as_ref()
        .and_then(|t| Subarch::of_arch(t.arch))
        .unwrap_or(Subarch::None);
    let stated_target = stated_target(stated, subarch, triple.as_ref());
    // Only the processor is stated when the triple alone names it.
    let processor_only = stated.is_none() && subarch.processor().is_some();
    let code = code_of(image, elf.is_some());
    let mut identity = Identity {
        offload_kind: image.offload_kind,
        triple,
        stated,
        stated_target,
        elf_target: None,
        target: stated_target,
        elf,
        elf_problem: None,
        mismatch: None,
        generic_version: None,
        code,
        image_kind: image.image_kind,
        size: image.size(),
        ptx_isa: None,
        format: image.format,
    };
    if code == Code::Ptx {
        identity.ptx_isa = crate::driver::PtxIsa::of_text(image.bytes).or(image.ptx_isa);
    }
    match elf {
        Some(DeviceElf::Amdgpu(a)) => identity.take_amdgpu_elf(&a, processor_only),
        Some(DeviceElf::Cuda(c)) => identity.take_cuda_elf(&c),
        None => {}
    }
    identity
}

/// The target the container states (`stated`, under the triple's `subarch` and
/// architecture): a processor the triple names alone, or none.
fn stated_target<'a>(
    stated: Option<&'a str>,
    subarch: Subarch,
    triple: Option<&Triple<'a>>,
) -> Target<'a> {
    match (stated, subarch) {
        (Some(s), Subarch::Processor(_)) if s != "amdgcnspirv" => TargetId::parse_under(s, subarch)
            .map_or_else(|why| Target::Invalid { text: s, why }, Target::Amdgpu),
        (Some(s), _) => Target::parse(s, triple.map(|t| t.arch)),
        (None, Subarch::Processor(p)) => Target::Amdgpu(TargetId::any(p)),
        (None, _) => Target::None,
    }
}

/// What kind of code `image` holds: ELF when its bytes are a device ELF (`is_elf`), else
/// what its container says, else what its magic number says.
fn code_of(image: &Image<'_>, is_elf: bool) -> Code {
    if is_elf {
        return Code::Elf;
    }
    match image.image_kind {
        ImageKind::Bitcode => Code::Bitcode,
        ImageKind::Spirv => Code::Spirv,
        ImageKind::Ptx => Code::Ptx,
        // A compressed fatbinary cubin not decoded yet: its entry header says ELF.
        ImageKind::Cubin if image.encoded.is_some() => Code::Elf,
        // A zstd `.kpack` entry not decoded yet: its TOC files it as a code object.
        ImageKind::Object if image.encoded.is_some() => Code::Elf,
        ImageKind::Fatbinary => Code::Fatbinary,
        ImageKind::None => code_from_magic(image.bytes),
        _ => Code::Other,
    }
}

impl Identity<'_> {
    /// Takes what an AMDGPU code object's header says: its target (the effective one) and
    /// how it disagrees with the stated target (`processor_only`: only the processor is
    /// stated), its generic version, or why the header does not load.
    fn take_amdgpu_elf(&mut self, a: &AmdgpuElf, processor_only: bool) {
        match a.target() {
            Ok(t) => {
                self.elf_target = Some(Target::Amdgpu(t));
                self.mismatch = match self.stated_target {
                    Target::Amdgpu(s) if processor_only => {
                        (!core::ptr::eq(s.processor, t.processor)).then_some(Mismatch::Processor)
                    }
                    Target::Amdgpu(s) => amdgpu_mismatch(&s, &t, a.code_object_version),
                    Target::None => None,
                    _ => Some(Mismatch::Processor),
                };
                self.target = Target::Amdgpu(t);
                if t.processor.is_generic() {
                    self.generic_version = Some(a.generic_version);
                }
            }
            Err(problem) => {
                self.elf_problem = Some(problem);
                self.generic_version = Some(a.generic_version);
            }
        }
    }

    /// Takes what a cubin's header says: its architecture (the effective target, but for
    /// a stated PTX-compatible one it agrees with) and how it disagrees with the stated
    /// target.
    fn take_cuda_elf(&mut self, c: &CudaElf) {
        let Some(e) = c.arch else {
            return;
        };
        self.elf_target = Some(Target::Nvptx(e));
        match self.stated_target {
            Target::Nvptx(s) if s.sm != e.sm => {
                self.mismatch = Some(Mismatch::Processor);
                self.target = Target::Nvptx(e);
            }
            Target::Nvptx(s)
                if e.variant == ArchVariant::ArchSpecific
                    && s.variant != ArchVariant::ArchSpecific =>
            {
                self.mismatch = Some(Mismatch::ArchSpecific);
                self.target = Target::Nvptx(e);
            }
            Target::Nvptx(s) => self.target = Target::Nvptx(s.real()),
            Target::None => self.target = Target::Nvptx(e),
            _ => {
                self.mismatch = Some(Mismatch::Processor);
                self.target = Target::Nvptx(e);
            }
        }
    }
}

/// A disagreement between a container's target and the ELF header, for messages:
/// `the container names gfx90a:xnack-, the ELF header says gfx90a:xnack+`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disagreement<'a> {
    /// What the container names.
    pub stated: Target<'a>,
    /// What the ELF header says.
    pub elf: Target<'static>,
    /// Where they differ.
    pub what: Mismatch,
}

impl fmt::Display for Disagreement<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stated = match self.stated {
            Target::None => "no target",
            _ => "",
        };
        write!(
            f,
            "the container names {}{stated}, the ELF header says {}",
            self.stated, self.elf
        )
    }
}

impl<'a> Identity<'a> {
    tools_pub! {
        /// The disagreement between container and ELF header, if any.
        pub fn disagreement(&self) -> Option<Disagreement<'a>> {
            Some(Disagreement {
                stated: self.stated_target,
                elf: self.elf_target?,
                what: self.mismatch?,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Format;
    use alloc::string::ToString;

    fn elf(machine: u16, osabi: u8, abi: u8, flags: u32) -> [u8; 64] {
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[7] = osabi;
        h[8] = abi;
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h[48..52].copy_from_slice(&flags.to_le_bytes());
        h
    }

    #[test]
    fn entry_and_elf_agree_or_not() {
        let co = elf(224, 64, 3, 0x73F); // gfx90a:xnack+
        let img = Image::from_id(
            0,
            Format::Bundle,
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            &co,
        );
        let id = identify(&img);
        assert_eq!(id.target.to_string(), "gfx90a:xnack+");
        assert_eq!(id.mismatch, None);
        assert_eq!(id.triple.unwrap().to_string(), "amdgcn-amd-amdhsa");
        let img = Image::from_id(
            0,
            Format::Bundle,
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
            &co,
        );
        let id = identify(&img);
        assert_eq!(id.mismatch, Some(Mismatch::Feature(Feature::Xnack)));
        assert_eq!(id.target.to_string(), "gfx90a:xnack+");
        let img = Image::from_id(0, Format::Bundle, "hipv4-amdgcn-amd-amdhsa--gfx906", &co);
        assert_eq!(identify(&img).mismatch, Some(Mismatch::Processor));
        // Legacy 3-field ID, target from the ID, agreeing with the ELF.
        let img = Image::from_id(
            0,
            Format::Bundle,
            "hip-amdgcn-amd-amdhsa-gfx90a:xnack+",
            &co,
        );
        assert_eq!(identify(&img).mismatch, None);
        // Bare ELF: everything from the header.
        let id = identify(&Image::from_elf(0, &co));
        assert_eq!(id.target.to_string(), "gfx90a:xnack+");
        assert_eq!(id.triple.unwrap().to_string(), "amdgcn-amd-amdhsa");
    }

    #[test]
    fn cubins_keep_the_container_suffix() {
        // ptxas 13.5 sm_90a cubin: plain sm_90 in e_flags.
        let cu = elf(190, 0x41, 8, 0x6005A04);
        let img = Image::from_id(0, Format::Bundle, "openmp-nvptx64-nvidia-cuda--sm_90a", &cu);
        let id = identify(&img);
        assert_eq!(id.target.to_string(), "sm_90a");
        assert_eq!(id.mismatch, None);
        let img = Image::from_id(0, Format::Bundle, "openmp-nvptx64-nvidia-cuda--sm_80", &cu);
        let id = identify(&img);
        assert_eq!(
            (id.target.to_string(), id.mismatch),
            ("sm_90".to_string(), Some(Mismatch::Processor))
        );
    }
}
