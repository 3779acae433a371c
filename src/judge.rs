//! Will a library run on a device, and if not, why: the judgement `loader-sim doctor`
//! prints, here so that every front end (the command line, the C API) gives the same
//! answer.
//!
//! * **Units are what the runtime registers.** In a linked host file with HIP or CUDA
//!   fat-binary wrappers, [`registered_fat_binaries`] gives one unit per wrapper the way
//!   `__hipRegisterFatBinary` / `__cudaRegisterFatBinary` receive them ([`Registry`]'s
//!   model, `REGISTRATION.md` §4): a wrapper the runtime refuses (bad magic, unsupported
//!   version, unreadable) is a unit that does not load ([`Gap::Refused`]), a wrapper whose
//!   fat binary cannot be read (a pointer outside the mapped file, a damaged container) is
//!   registered but gives every device nothing ([`Gap::Unreadable`]), and a fat binary
//!   registered twice (same `binary` pointer) is one unit. Without wrappers (objects,
//!   archives, bare containers), the units are those of the container walk
//!   ([`crate::units`]).
//! * **A unit gives a device nothing for one reason, a [`Gap`]**, which units share, so that
//!   a library's reason can count them: [`gap`] derives it from the unit's [`Choice`] for
//!   the device (its closest rejection, [`Rejection::closeness`], and for NVIDIA devices
//!   every verdict: which cubins and PTX the unit has). A unit with no device image does
//!   not load either ([`Gap::NoImages`]).
//! * **A library's reason summarises its units** ([`Coverage`]): the gap most units share,
//!   with the count ("no cubin for 11.x and no PTX in 107 of 107 units"), not the first
//!   rejection met; every gap with its count is kept ([`Coverage::gaps`]).
//! * **A unit is judged from as little as identifies its images** ([`Judge::unit`]): the
//!   headers of an opened unit, and of a compressed bundle only the start of its
//!   decompressed stream (its entry table, judged by entry ID as comgr's code object lookup
//!   judges it; with [`Judge::deep`], also the first bytes of every image).
//!
//! ```
//! use offload_image::judge::Coverage;
//! use offload_image::{choose, units, Device, ReadOptions, SelectOptions};
//!
//! // A bundle of code for six processors, none of them a gfx1031.
//! let data = include_bytes!("../tests/data/corpus/bundles/hip_6arch.bundle");
//! let device = Device::parse("gfx1031")?;
//! let options = ReadOptions::default();
//! let mut coverage = Coverage::default();
//! for unit in units(data, &options) {
//!     let open = unit?.open(&options)?;
//!     let choice = choose(open.images(), &[device], &SelectOptions::default()).remove(0);
//!     coverage.add_choice(&choice, &device);
//! }
//! assert_eq!((coverage.units, coverage.covered), (1, 0));
//! let reason = coverage.reason().unwrap().to_string();
//! assert_eq!(
//!     reason,
//!     "no code object for gfx1031 in 1 of 1 units; closest: gfx1030 code does not run on gfx1031"
//! );
//! # Ok::<(), offload_image::Error>(())
//! ```
//!
//! [`Registry`]: crate::registration::Registry

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::arch::amdgpu::{Feature, FeatureState, Processor, TargetId};
use crate::arch::{Code, Device, Identity};
use crate::bundle::BundleTable;
use crate::ccob::CompressedBundle;
use crate::container::{units, Unit, UnitContent};
use crate::decompress::Codec;
use crate::driver::{DriverNeed, Refusal};
use crate::error::ErrorKind;
use crate::host::{FileKind, HostFile};
use crate::image::OffloadKind;
use crate::image::{Format, Image};
use crate::registration::FatbinWrapperView;
use crate::select::SelectOptions;
use crate::select::{Choice, Rejection, Verdict};
use crate::stream::IDENTIFY_LEN;
use crate::ReadOptions;

/// One unit as the runtime registers it from a linked host file's fat-binary wrapper.
#[derive(Clone, Debug)]
pub struct Registered<'d> {
    /// Address of the wrapper (in the host file's address space).
    pub wrapper: u64,
    /// The wrapper section (`.hipFatBinSegment`, `.nvFatBinSegment`).
    pub section: &'d [u8],
    /// The fat binary, bounded by its own header, or why the runtime does not load it.
    pub fat_binary: Result<&'d [u8], Gap>,
}

/// The units a runtime registers from the HIP and CUDA fat-binary wrappers of `elf`, in
/// wrapper order, each fat binary once (the runtime keys its registrations on the
/// `binary` pointer: a second wrapper pointing at the same fat binary registers the same
/// unit again). Each wrapper is read and checked as the runtime checks it
/// ([`FatbinWrapperView::read`]) and its fat binary bounded by its header
/// ([`FatbinWrapperView::fat_binary`]), as [`Registry::register_fat_binary`] does.
///
/// Empty for a relocatable object, whose wrappers point at what the link provides, and for
/// a file without wrappers: then the units are those of the container walk.
///
/// [`Registry::register_fat_binary`]: crate::registration::Registry::register_fat_binary
pub fn registered_fat_binaries<'d>(
    elf: &HostFile<'d>,
    options: &ReadOptions,
) -> Vec<Registered<'d>> {
    let mut out = Vec::new();
    if elf.kind() == FileKind::Relocatable {
        return out;
    }
    let mut seen: Vec<u64> = Vec::new();
    for slot in elf.fat_binary_wrappers() {
        let fat_binary = match FatbinWrapperView::read(elf, slot.address) {
            Err(e) => Err(Gap::Refused {
                kind: e.kind(),
                what: e.what(),
            }),
            Ok(w) => {
                // Relocatable device code feeds the device link; the runtime registers
                // the linked fat binary of the version-2 wrapper instead.
                if seen.contains(&w.binary)
                    || w.is_link_input(elf.section_at(w.binary).map(|(s, _)| s.role()))
                {
                    continue;
                }
                seen.push(w.binary);
                w.fat_binary(elf, options).map_err(|e| Gap::Unreadable {
                    kind: e.kind(),
                    what: e.what(),
                })
            }
        };
        out.push(Registered {
            wrapper: slot.address,
            section: slot.section,
            fat_binary,
        });
    }
    out
}

/// The first unit of a registered fat binary, as the runtime opens it: what
/// [`Registry`](crate::registration::Registry) registers. A fat binary with no container
/// in it is [`Gap::Unreadable`].
pub fn registered_unit<'d>(
    fat_binary: &'d [u8],
    options: &ReadOptions,
) -> Result<crate::Unit<'d>, Gap> {
    match units(fat_binary, options).next() {
        Some(Ok(unit)) => Ok(unit),
        Some(Err(e)) => Err(Gap::Unreadable {
            kind: e.kind(),
            what: e.what(),
        }),
        None => Err(Gap::NoImages),
    }
}

/// What an NVIDIA unit has in place of PTX the device could compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ptx {
    /// No PTX at all.
    None,
    /// PTX, none of it for the device (too new, or arch- or family-specific code for
    /// other devices).
    NotFor,
    /// PTX the device could compile, but the JIT is not allowed.
    NoJit,
}

/// Why a unit gives a device nothing, as a key units share (see the module
/// documentation). `Display` is a phrase for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gap {
    /// The runtime refuses the unit's fat-binary wrapper: `__hipRegisterFatBinary` returns
    /// no handle for a bad magic or a version other than 1 (CUDA: versions 1 and 2), and
    /// the unit's kernels never load.
    Refused {
        /// The reader's error kind.
        kind: ErrorKind,
        /// The reader's sentence.
        what: &'static str,
    },
    /// The wrapper is accepted but its fat binary cannot be read (its pointer lies outside
    /// the mapped file, the container is damaged): registered, every launch fails.
    Unreadable {
        /// The reader's error kind.
        kind: ErrorKind,
        /// The reader's sentence.
        what: &'static str,
    },
    /// The unit holds no device image (a bundle with no entries, or only a host entry).
    NoImages,
    /// No AMDGPU code object runs on the device's processor (other processors, other
    /// generic families, generic versions too old).
    NoCode {
        /// The device's processor.
        device: &'static Processor,
    },
    /// No cubin runs on the NVIDIA device and no PTX can be compiled for it.
    NoCubin {
        /// The device's compute capability.
        device: (u8, u8),
        /// True when the unit has cubins of the device's major version (none of which
        /// runs on it: a later minor, or arch-specific code for another minor).
        same_major: bool,
        /// The PTX the unit has instead.
        ptx: Ptx,
    },
    /// The image chosen for an NVIDIA device is stored compressed with a codec the device's
    /// driver cannot decode ([`DriverVersion::gap`]): the module does not load.
    Driver {
        /// The codec of the chosen entry.
        codec: Codec,
        /// The oldest driver that decodes it.
        needs: DriverVersion,
        /// The device's driver.
        has: DriverVersion,
    },
    /// The PTX the NVIDIA driver picks has an ISA version it does not compile, and it does
    /// not fall back to another entry ([`crate::driver::CudaDriver::refusal`]).
    PtxVersion(Refusal),
    /// Any other reason: the sentence of the unit's closest rejection
    /// ([`Rejection`]'s `Display`), for example a feature mode the device lacks.
    Other(String),
}

impl Gap {
    /// True for a gap of architecture alone: the unit holds no code for the device's
    /// processor or compute capability ([`Gap::NoCode`], [`Gap::NoCubin`]). Where the
    /// library holds code for the device in other units, such a unit is code for other GPUs
    /// ([`Coverage::status`]).
    pub const fn is_architectural(&self) -> bool {
        matches!(self, Gap::NoCode { .. } | Gap::NoCubin { .. })
    }
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gap::Refused { what, .. } => {
                write!(f, "the runtime refuses the fat-binary wrapper ({what})")
            }
            Gap::Unreadable { what, .. } => {
                write!(f, "the registered fat binary cannot be read ({what})")
            }
            Gap::NoImages => f.write_str("no device images"),
            Gap::NoCode { device } => write!(f, "no code object for {device}"),
            Gap::NoCubin {
                device: (major, minor),
                same_major,
                ptx,
            } => {
                if *same_major {
                    write!(f, "no cubin for {major}.{minor}")?;
                } else {
                    write!(f, "no cubin for {major}.x")?;
                }
                match ptx {
                    Ptx::None => f.write_str(" and no PTX"),
                    Ptx::NotFor => write!(f, " and no PTX for {major}.{minor}"),
                    Ptx::NoJit => f.write_str(" and PTX JIT compilation is disabled"),
                }
            }
            Gap::Driver { codec, needs, has } => write!(
                f,
                "the chosen entry is {codec}-compressed, which needs NVIDIA driver {needs} or \
                 later (driver {has})",
                codec = codec.name()
            ),
            Gap::PtxVersion(r) => write!(f, "{r}"),
            Gap::Other(s) => f.write_str(s),
        }
    }
}

/// Why `device` gets nothing from a unit, given the unit's [`Choice`] for it (from
/// [`choose`](crate::choose), which keeps every verdict); `None` when it gets an image.
pub fn gap(choice: &Choice<'_>, device: &Device) -> Option<Gap> {
    if choice.key.is_some() {
        return None;
    }
    let Some((_, closest)) = choice.rejection else {
        return Some(Gap::NoImages);
    };
    if matches!(closest, Rejection::Host | Rejection::Empty) {
        return Some(Gap::NoImages);
    }
    Some(match (device, closest) {
        (
            Device::Amdgpu(t),
            Rejection::Processor { .. }
            | Rejection::NotInFamily { .. }
            | Rejection::GenericVersion { .. },
        ) => Gap::NoCode {
            device: t.processor,
        },
        (
            Device::Cuda { major, minor },
            Rejection::Nvptx { .. } | Rejection::JitNotAllowed(Code::Ptx) | Rejection::ForcedJit,
        ) => nvidia_gap(choice, (*major, *minor)),
        (_, Rejection::Driver(refusal)) => Gap::PtxVersion(refusal),
        (_, r) => Gap::Other(r.to_string()),
    })
}

/// What an NVIDIA unit lacks for a device of compute capability `device`: from every
/// verdict, which cubins and PTX it has.
fn nvidia_gap(choice: &Choice<'_>, device: (u8, u8)) -> Gap {
    let mut same_major = false;
    let mut ptx = Ptx::None;
    for (_, verdict) in &choice.verdicts {
        let Verdict::Rejected(r) = verdict else {
            continue;
        };
        match r {
            Rejection::Nvptx {
                image,
                code: Code::Elf,
                ..
            } => same_major |= image.major() == u16::from(device.0),
            // PTX too new, or arch-specific PTX of another capability.
            Rejection::Nvptx {
                code: Code::Ptx, ..
            } if ptx == Ptx::None => ptx = Ptx::NotFor,
            Rejection::JitNotAllowed(Code::Ptx) => ptx = Ptx::NoJit,
            _ => {}
        }
    }
    Gap::NoCubin {
        device,
        same_major,
        ptx,
    }
}

/// Whether device code holds kernels a launch could ask for (`COMPATIBILITY.md` §12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernels {
    /// At least one kernel.
    Some,
    /// None: nothing in it can be launched.
    None,
    /// Not known (bitcode, SPIR-V, bytes that could not be read).
    Unknown,
}

impl Kernels {
    /// The kernels of one image holding `code`: a cubin's entry functions or an AMDGPU
    /// code object's kernel descriptors, local ones too ([`has_kernels`]), a PTX text's
    /// `.entry` directives.
    ///
    /// [`has_kernels`]: crate::registration::elf::has_kernels
    pub fn of_image(code: Code, bytes: &[u8]) -> Kernels {
        match code {
            Code::Elf => match crate::registration::elf::has_kernels(bytes) {
                Ok(false) => Kernels::None,
                Ok(true) => Kernels::Some,
                Err(_) => Kernels::Unknown,
            },
            Code::Ptx => {
                let entry = bytes
                    .split(|&b| b == b'\n')
                    .any(|line| ptx_declares_entry(line.trim_ascii()));
                if entry {
                    Kernels::Some
                } else {
                    Kernels::None
                }
            }
            _ => Kernels::Unknown,
        }
    }

    /// The kernels of a unit's images: [`Kernels::Some`] as soon as one image has some (the
    /// images are decoded one by one, only as far as needed), [`Kernels::None`] when every
    /// device image has none, else [`Kernels::Unknown`].
    pub fn of_unit<'a, I>(images: I, options: &ReadOptions) -> Kernels
    where
        I: IntoIterator<Item = Image<'a>>,
    {
        let mut seen = false;
        let mut unknown = false;
        for image in images {
            if image.offload_kind == OffloadKind::Host || image.size() == 0 {
                continue;
            }
            seen = true;
            let code = crate::identify(&image).code;
            match image.decode(options).map(|b| Kernels::of_image(code, &b)) {
                Ok(Kernels::Some) => return Kernels::Some,
                Ok(Kernels::None) => {}
                Ok(Kernels::Unknown) | Err(_) => unknown = true,
            }
        }
        if seen && !unknown {
            Kernels::None
        } else {
            Kernels::Unknown
        }
    }
}

/// True for a PTX line that declares a kernel: `.entry NAME`, possibly after linkage
/// directives (`.visible .entry`, `.weak .entry`).
fn ptx_declares_entry(line: &[u8]) -> bool {
    let mut words = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    loop {
        match words.next() {
            Some(b".entry") => return true,
            Some(b".visible" | b".weak" | b".extern") => continue,
            _ => return false,
        }
    }
}

/// Why a unit that gives a device nothing is set aside, not counted as a gap
/// ([`Coverage::set_aside`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Aside {
    /// Its images hold no kernels: no launch can fail for want of them.
    NoKernels,
    /// It holds code for other GPUs only (the architectures listed), while the library
    /// holds code for the device in other units: a library built so selects its kernels by
    /// architecture at run time, and never launches these on the device.
    OtherGpus {
        /// The unit's architectures (`sm_80, sm_100f`), as its images name them.
        archs: String,
    },
}

impl fmt::Display for Aside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Aside::NoKernels => f.write_str("its images hold no kernels"),
            Aside::OtherGpus { archs } => write!(
                f,
                "code for other GPUs only ({archs}); the library has code for this device in \
                 other units"
            ),
        }
    }
}

/// One unit set aside ([`Coverage::set_aside`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAside {
    /// The unit, as the caller named it ([`UnitCode::label`]).
    pub unit: String,
    /// Why.
    pub why: Aside,
}

/// One [`Gap`] of a library and how many of its units have it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GapCount {
    /// The gap.
    pub gap: Gap,
    /// Units that have it.
    pub units: usize,
    /// For [`Gap::NoCode`] and [`Gap::NoCubin`]: the closest rejection among those units
    /// ([`Rejection::closeness`], first met among equals), as a sentence ("gfx90a code
    /// does not run on gfx906").
    pub closest: Option<String>,
    closeness: u8,
}

/// A library's verdict for one device ([`Coverage::status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Every unit that could be launched on the device has an image it loads.
    Ok,
    /// Some units load, others that could be launched do not.
    Partial,
    /// No unit loads.
    None,
    /// The units the runtime registers hold no kernels: the library's device code, if it
    /// has any, reaches the GPU another way (cuFFT loads its kernels from data at run
    /// time), which nothing here can judge.
    NoKernels,
    /// The library registers no device code but carries code objects outside any offload
    /// container ([`LooseCode`]): its program loads them itself, which nothing here can
    /// follow.
    Outside,
}

impl Status {
    /// `"ok"`, `"partial"`, `"none"`, `"no-kernels"`, `"outside"`.
    pub const fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Partial => "partial",
            Status::None => "none",
            Status::NoKernels => "no-kernels",
            Status::Outside => "outside",
        }
    }
}

/// What one library holds for one device: its units, how many load, why the others do
/// not, and which of those are set aside (no kernels; code for other GPUs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Units judged.
    pub units: usize,
    /// Units with an image the device loads.
    pub covered: usize,
    /// True when a unit that loads on the device is known to hold kernels: the library
    /// holds code for this device.
    pub has_code: bool,
    gaps: Vec<GapCount>,
    notes: Vec<SetAside>,
}

impl Coverage {
    /// Counts one unit: `None` when it loads, else its gap ([`gap`]).
    pub fn add(&mut self, gap: Option<Gap>) {
        self.add_with(gap, None);
    }

    /// Counts one unit that does not load because of `gap`, whose closest rejection
    /// (when it has images) is `closest`; [`Coverage::add`] for one that loads (`None`).
    pub fn add_with(&mut self, gap: Option<Gap>, closest: Option<&Rejection<'_>>) {
        self.units = self.units.saturating_add(1);
        let Some(gap) = gap else {
            self.covered = self.covered.saturating_add(1);
            return;
        };
        let near = closest.map_or(0, Rejection::closeness);
        let named = matches!(gap, Gap::NoCode { .. } | Gap::NoCubin { .. });
        match self.gaps.iter_mut().find(|g| g.gap == gap) {
            Some(g) => {
                g.units = g.units.saturating_add(1);
                if let (true, Some(r)) = (named && near > g.closeness, closest) {
                    g.closest = Some(r.to_string());
                    g.closeness = near;
                }
            }
            None => self.gaps.push(GapCount {
                gap,
                units: 1,
                closest: closest.filter(|_| named).map(ToString::to_string),
                closeness: near,
            }),
        }
    }

    /// Counts one unit from its [`Choice`] for `device`.
    pub fn add_choice(&mut self, choice: &Choice<'_>, device: &Device) {
        let closest = choice.rejection.map(|(_, r)| r);
        self.add_with(gap(choice, device), closest.as_ref());
    }

    /// Counts one unit that does not load and holds no kernels: set aside.
    pub fn add_without_kernels(&mut self, unit: &str) {
        self.units = self.units.saturating_add(1);
        self.notes.push(SetAside {
            unit: unit.to_string(),
            why: Aside::NoKernels,
        });
    }

    /// Counts one unit that does not load for want of code for the device's architecture
    /// (`gap`, [`Gap::is_architectural`]), built for `archs`: a gap, or code for other
    /// GPUs when the library holds code for the device ([`Coverage::has_code`]), which is
    /// known only once every unit is counted.
    pub fn add_architectural(
        &mut self,
        unit: &str,
        archs: String,
        gap: Gap,
        closest: Option<&Rejection<'_>>,
    ) {
        self.add_with(Some(gap), closest);
        self.notes.push(SetAside {
            unit: unit.to_string(),
            why: Aside::OtherGpus { archs },
        });
    }

    fn counts_as_gap(&self, gap: &Gap) -> bool {
        !(self.has_code && gap.is_architectural())
    }

    /// Every gap that counts against the library, with its count, in the order first met:
    /// architectural gaps ([`Gap::is_architectural`]) only while the library holds no code
    /// for the device.
    pub fn gaps(&self) -> impl Iterator<Item = &GapCount> + '_ {
        self.gaps.iter().filter(|g| self.counts_as_gap(&g.gap))
    }

    /// The units set aside, with why: those without kernels, and, where the library holds
    /// code for the device, those with code for other GPUs only.
    pub fn set_aside(&self) -> impl Iterator<Item = &SetAside> + '_ {
        self.notes
            .iter()
            .filter(|n| self.has_code || n.why == Aside::NoKernels)
    }

    /// How many units are set aside for each reason: (without kernels, for other GPUs).
    pub fn set_aside_counts(&self) -> (usize, usize) {
        self.set_aside().fold((0, 0), |(k, o), n| match n.why {
            Aside::NoKernels => (k.saturating_add(1), o),
            Aside::OtherGpus { .. } => (k, o.saturating_add(1)),
        })
    }

    /// The units that count against the library: those with a gap that counts.
    pub fn failing(&self) -> usize {
        self.gaps().map(|g| g.units).fold(0, usize::saturating_add)
    }

    /// The library's verdict for the device (`COMPATIBILITY.md` §12): [`Status::NoKernels`]
    /// when every unit is set aside for holding no kernels; otherwise by the units that
    /// count: all load ([`Status::Ok`]), none does ([`Status::None`]), some do
    /// ([`Status::Partial`]).
    pub fn status(&self) -> Status {
        let (no_kernels, _) = self.set_aside_counts();
        if self.units > 0 && no_kernels == self.units {
            Status::NoKernels
        } else if self.failing() == 0 {
            Status::Ok
        } else if self.covered == 0 {
            Status::None
        } else {
            Status::Partial
        }
    }

    /// The library's verdict for the device as reported ([`Judgement`]): the status, whether
    /// anything stands in the device's way, and the sentence saying why.
    pub fn judgement(&self) -> Judgement {
        let status = self.status();
        let reason = match status {
            Status::NoKernels => Some(alloc::format!(
                "{}: its device code, if any, reaches the GPU another way, which doctor \
                 cannot judge",
                if self.units == 1 {
                    "its one unit holds no kernels".to_string()
                } else {
                    alloc::format!("none of its {} units holds kernels", self.units)
                }
            )),
            Status::Ok => None,
            _ => self.reason().map(|r| r.to_string()),
        };
        Judgement {
            status,
            loads: matches!(status, Status::Ok | Status::NoKernels),
            reason,
        }
    }

    /// The library's reason: the gap most units share (the first met among equals), with
    /// its count; `None` when every unit that counts loads.
    pub fn reason(&self) -> Option<Reason<'_>> {
        let mut best: Option<&GapCount> = None;
        for g in self.gaps() {
            if best.is_none_or(|b| g.units > b.units) {
                best = Some(g);
            }
        }
        best.map(|gap| Reason {
            gap,
            units: self.units,
        })
    }
}

/// A library's verdict for one device, as reported ([`Coverage::judgement`],
/// [`LooseCode::judgement`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    /// The status.
    pub status: Status,
    /// Nothing stands in the device's way: `ok`, `no-kernels`, or `outside` with code
    /// objects for the device.
    pub loads: bool,
    /// Why, for people; `None` for `ok`.
    pub reason: Option<String>,
}

/// A library's reason ([`Coverage::reason`]). `Display`: "no cubin for 11.x and no PTX in
/// 107 of 107 units", with "; closest: ..." for missing code.
#[derive(Clone, Copy, Debug)]
pub struct Reason<'c> {
    /// The representative gap.
    pub gap: &'c GapCount,
    /// The library's units.
    pub units: usize,
}

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in {} of {} units",
            self.gap.gap, self.gap.units, self.units
        )?;
        if let Some(c) = &self.gap.closest {
            write!(f, "; closest: {c}")?;
        }
        Ok(())
    }
}

pub use crate::driver::DriverVersion;

impl DriverVersion {
    /// Why a fatbinary entry stored with `codec` does not load on this driver
    /// ([`Gap::Driver`]); `None` when it decodes.
    pub fn gap(self, codec: Codec) -> Option<Gap> {
        let needs = DriverVersion::needed_for(codec)?;
        (self < needs).then_some(Gap::Driver {
            codec,
            needs,
            has: self,
        })
    }
}

/// Why a unit gives `device` nothing although it has an entry for it: the entry chosen is
/// stored with `chosen_codec` and the device is an NVIDIA GPU whose `driver` cannot decode
/// it ([`DriverVersion::gap`]). `None` when the driver is unknown, the entry is stored
/// plainly or the device is not NVIDIA's.
pub fn driver_gap(
    device: &Device,
    driver: Option<DriverVersion>,
    chosen_codec: Option<Codec>,
) -> Option<Gap> {
    match (device, driver, chosen_codec) {
        (Device::Cuda { .. }, Some(driver), Some(codec)) => driver.gap(codec),
        _ => None,
    }
}

/// A runtime setting under which a device loads code it otherwise would not: a variant of
/// a real device, judged beside it ([`Probes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The device with `HSA_XNACK=1` (`true`) or `HSA_XNACK=0`.
    Xnack(bool),
    /// The device under `HSA_OVERRIDE_GFX_VERSION` naming this processor.
    Override(&'static Processor),
}

/// The devices a library is judged against: the real ones first, then every variant of
/// them that a runtime setting gives (the other xnack mode where the processor can select
/// it, and every other processor of its family with an ISA version, as
/// `HSA_OVERRIDE_GFX_VERSION` would make it).
///
/// ```
/// use offload_image::judge::{Probes, Variant};
/// use offload_image::Device;
///
/// let probes = Probes::new(&[Device::parse("gfx90a:xnack-")?], None);
/// assert_eq!(probes.real, 1);
/// // Its xnack+ twin is judged too.
/// assert_eq!(probes.variants.first(), Some(&(0, Variant::Xnack(true))));
/// assert_eq!(probes.devices.len(), 1 + probes.variants.len());
/// # Ok::<(), offload_image::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Probes {
    /// Every device judged: the `real` ones, then the variants.
    pub devices: Vec<Device>,
    /// How many of [`Probes::devices`] are real.
    pub real: usize,
    /// For `devices[real + i]`: the index of the real device it is a variant of, and the
    /// variant.
    pub variants: Vec<(usize, Variant)>,
    /// The driver the NVIDIA devices have, when known ([`driver_gap`]).
    pub nvidia_driver: Option<DriverVersion>,
}

impl Probes {
    /// The probes for the devices `real`.
    pub fn new(real: &[Device], nvidia_driver: Option<DriverVersion>) -> Self {
        let mut devices: Vec<Device> = real.to_vec();
        let mut variants = Vec::new();
        for (k, device) in real.iter().enumerate() {
            let Device::Amdgpu(t) = device else { continue };
            if t.processor.xnack.is_selectable() {
                for on in [true, false] {
                    if t.xnack != FeatureState::from_bool(on) {
                        devices.push(device.with_xnack(on));
                        variants.push((k, Variant::Xnack(on)));
                    }
                }
            }
            if let Some(family) = t.processor.family {
                for p in Processor::all() {
                    if !p.is_generic()
                        && p.family == Some(family)
                        && !core::ptr::eq(p, t.processor)
                        && p.isa_version.is_some()
                    {
                        devices.push(Device::Amdgpu(overridden(t, p)));
                        variants.push((k, Variant::Override(p)));
                    }
                }
            }
        }
        Probes {
            devices,
            real: real.len(),
            variants,
            nvidia_driver,
        }
    }
}

/// The device `device` is under `HSA_OVERRIDE_GFX_VERSION` naming `p`: ROCr builds the ISA
/// from the override version and the agent's own feature modes; a mode the device has but
/// `p` cannot select is dropped, one `p` can select but the device cannot is unknown.
pub fn overridden(device: &TargetId, p: &'static Processor) -> TargetId {
    let state = |f: Feature| {
        if !p.support(f).is_selectable() {
            FeatureState::Unsupported
        } else if device.processor.support(f).is_selectable() {
            device.state(f)
        } else {
            FeatureState::Any
        }
    };
    TargetId {
        processor: p,
        sramecc: state(Feature::Sramecc),
        xnack: state(Feature::Xnack),
    }
}

/// Device code objects a host file carries outside any offload container: ELF headers of
/// AMDGPU code objects or cubins inside its data sections (`.rodata`, `.data`, ...), which its
/// program hands to the runtime itself (`hipModuleLoadData`, `cuModuleLoadData`) and no
/// runtime registers. Found only to be reported ([`Status::Outside`]): each is identified from
/// its ELF header alone ([`crate::identify`]); nothing takes a length from this search, and
/// nothing found so is loaded, selected or pruned.
#[derive(Clone, Debug, Default)]
pub struct LooseCode<'d> {
    /// (section name, offset in the file, identity) of each, in file order.
    pub objects: Vec<(&'d str, u64, Identity<'d>)>,
    /// NVIDIA fat binaries in data sections, which no wrapper registers (cuFFT 12.5 keeps
    /// 18,227 in `.data` and `.ldata`, cuSPARSE some in `.rodata`): (section name, offset
    /// in the file, size, the identities of its entries). Each is read whole by
    /// [`Fatbin::parse`](crate::nvfatbin::Fatbin::parse); ELF headers inside one are its
    /// cubins, not loose code objects.
    pub fatbins: Vec<(&'d str, u64, u64, Vec<Identity<'d>>)>,
    /// AMDGPU code objects of version 2 (`EI_ABIVERSION` 0: no processor in `e_flags`):
    /// (section name, offset in the file, the target their `NT_AMD_HSA_ISA_VERSION`
    /// note names, if it names one, [`v2_processor`]). ROCr's loader takes them
    /// (`executable.cpp` `LoadCodeObject` accepts versions 1 to 6; `amd_hsa_code.cpp`
    /// `GetIsa` names a v2 object's ISA from that note, `ConvertOldTargetNameToNew`) and
    /// loads one on an agent of that processor (`IsaSupportedByAgent`; the xnack state the
    /// target names is not compared here); HIP (CLR, through comgr's lookup of v4 and later)
    /// never takes one. [`LooseCode::for_device`] counts those for the device's processor.
    pub v2: Vec<(&'d str, u64, Option<String>)>,
}

/// ROCr's `ConvertOldTargetNameToNew` (`amd_hsa_code.cpp`): the target of code object v2
/// ISA `AMD:AMDGPU:<major>:<minor>:<stepping>` from a compiler (not HSAIL's finalizer):
/// `9:0:1` is `gfx900:xnack+`, `8:0:3` and `8:0:4` `gfx803`, and so on; v2 "only supports
/// asics up to gfx906 plus gfx90c", so any other ISA is `None` (the loader refuses it).
pub fn v2_target(major: u32, minor: u32, stepping: u32) -> Option<&'static str> {
    Some(match (major, minor, stepping) {
        (6, 0, 0) => "gfx600",
        (6, 0, 1) => "gfx601",
        (6, 0, 2) => "gfx602",
        (7, 0, 0) => "gfx700",
        (7, 0, 1) => "gfx701",
        (7, 0, 2) => "gfx702",
        (7, 0, 3) => "gfx703",
        (7, 0, 4) => "gfx704",
        (7, 0, 5) => "gfx705",
        (8, 0, 1) => "gfx801:xnack+",
        (8, 0, 0 | 2) => "gfx802",
        (8, 0, 3 | 4) => "gfx803",
        (8, 0, 5) => "gfx805",
        (8, 1, 0) => "gfx810:xnack+",
        (9, 0, 0) => "gfx900:xnack-",
        (9, 0, 1) => "gfx900:xnack+",
        (9, 0, 2) => "gfx902:xnack-",
        (9, 0, 3) => "gfx902:xnack+",
        (9, 0, 4) => "gfx904:xnack-",
        (9, 0, 5) => "gfx904:xnack+",
        (9, 0, 6) => "gfx906:sramecc-:xnack-",
        (9, 0, 7) => "gfx906:sramecc-:xnack+",
        (9, 0, 12) => "gfx90c:xnack-",
        _ => return None,
    })
}

/// The target an AMDGPU code object of version 2 is for, as ROCr's loader names it: the
/// `NT_AMD_HSA_ISA_VERSION` (3) note of owner `AMD` holds `u16` vendor and architecture
/// name sizes, `u32` major, minor and stepping, then the names (`amd_hsa_code.cpp`
/// `GetNoteIsa`), which [`v2_target`] maps. An object from HSAIL's finalizer (one with an
/// `NT_AMD_HSA_HSAIL` (2) note, as ROCr's own blit kernels in libhsa-runtime64 5.2) takes
/// its xnack state from `e_flags` instead (`ConvertOldTargetNameToNew`: `:xnack+` when
/// `EF_AMDGPU_FEATURE_XNACK_V2` (1) is set, else `:xnack-` on a processor with xnack).
/// `None` when the object has no ISA note, it does not read, or ROCr maps it to no target.
pub fn v2_processor(elf: &[u8]) -> Option<String> {
    const SHT_NOTE: u32 = 7;
    let le = |at: usize, n: usize| -> Option<u64> {
        let b = elf.get(at..at.checked_add(n)?)?;
        Some(b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
    };
    // ELF64 little-endian (every AMDGPU code object): the section headers, bounded by the
    // data, never trusted for more.
    let shoff = usize::try_from(le(0x28, 8)?).ok()?;
    let shentsize = usize::try_from(le(0x3A, 2)?).ok()?;
    let shnum = usize::try_from(le(0x3C, 2)?).ok()?;
    if shentsize < 0x40 {
        return None;
    }
    let mut isa = None;
    let mut finalizer = false;
    for i in 0..shnum {
        let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
        if le(at.checked_add(4)?, 4)? != u64::from(SHT_NOTE) {
            continue;
        }
        let offset = usize::try_from(le(at.checked_add(0x18)?, 8)?).ok()?;
        let size = usize::try_from(le(at.checked_add(0x20)?, 8)?).ok()?;
        let Some(section) = elf.get(offset..offset.checked_add(size)?) else {
            continue;
        };
        let mut notes = section;
        // Notes: u32 name size, u32 desc size, u32 type, name and desc each padded to 4.
        while notes.len() >= 12 {
            let word = |at: usize| {
                notes
                    .get(at..at.checked_add(4)?)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map(u32::from_le_bytes)
            };
            let (namesz, descsz, kind) = (word(0)?, word(4)?, word(8)?);
            let namesz = usize::try_from(namesz).ok()?;
            let descsz = usize::try_from(descsz).ok()?;
            let name_end = 12usize.checked_add(namesz)?;
            let desc_at = name_end.checked_add(3)? & !3;
            let desc_end = desc_at.checked_add(descsz)?;
            let name = notes.get(12..name_end)?;
            let desc = notes.get(desc_at..desc_end)?;
            if kind == 3 && name == b"AMD\0" {
                let half = |at: usize| {
                    desc.get(at..at.checked_add(2)?)
                        .and_then(|b| <[u8; 2]>::try_from(b).ok())
                        .map(|b| usize::from(u16::from_le_bytes(b)))
                };
                let word = |at: usize| {
                    desc.get(at..at.checked_add(4)?)
                        .and_then(|b| <[u8; 4]>::try_from(b).ok())
                        .map(u32::from_le_bytes)
                };
                let (vendor, arch) = (half(0)?, half(2)?);
                let (major, minor, stepping) = (word(4)?, word(8)?, word(12)?);
                // The names as ROCr reads them (`GetNoteString`): `size` bytes less a final
                // NUL, the architecture's after the vendor's string and one byte. ROCr reads
                // them from the mapped note, not bounded by the descriptor: ROCr's own blit
                // kernels (libhsa-runtime64 5.2) declare `AMDGPU` as 7 bytes in a 26-byte
                // descriptor whose seventh is the note's padding. Read here from the note
                // section, as far as it goes.
                let names_at = desc_at.checked_add(16)?;
                let note_string = |at: usize, size: usize| -> Option<&[u8]> {
                    let s = notes.get(at..at.checked_add(size)?)?;
                    Some(match s.split_last() {
                        Some((0, head)) => head,
                        _ => s,
                    })
                };
                let vendor_name = note_string(names_at, vendor)?;
                let arch_at = names_at.checked_add(vendor_name.len())?.checked_add(1)?;
                let arch_name = note_string(arch_at, arch)?;
                if vendor_name != b"AMD" || arch_name != b"AMDGPU" {
                    return None;
                }
                isa = isa.or(Some((major, minor, stepping)));
            } else if kind == 2 && name == b"AMD\0" {
                finalizer = true;
            }
            let next = desc_end.checked_add(3)? & !3;
            notes = notes.get(next..).unwrap_or_default();
        }
    }
    let (major, minor, stepping) = isa?;
    let target = v2_target(major, minor, stepping)?;
    if !finalizer {
        return Some(target.to_string());
    }
    // The finalizer's xnack state is in `e_flags`; the processors with xnack are those the
    // table gives an xnack state.
    let (base, xnack) = match target.rsplit_once(":xnack") {
        Some((base, _)) => (base, true),
        None => (target, false),
    };
    let on = le(0x30, 4)? & 1 != 0;
    Some(match (on, xnack) {
        (true, _) => alloc::format!("{base}:xnack+"),
        (false, true) => alloc::format!("{base}:xnack-"),
        (false, false) => base.to_string(),
    })
}

/// At most this many loose code objects are identified in one file.
pub const MAX_LOOSE_CODE: usize = 1 << 16;

/// Most entries of a fat binary found in a data section ([`LooseCode::find`]); one with
/// more is not counted.
pub const MAX_FATBIN_ENTRIES: u64 = 1024;

/// After this many candidates at the fatbinary magic fail to parse in one file,
/// [`LooseCode::find`] stops looking for fat binaries (it still finds code objects).
pub const MAX_FAILED_FATBINS: usize = 4096;

impl<'d> LooseCode<'d> {
    /// The device code objects in `host`'s data sections (neither offload containers nor
    /// executable code), at most [`MAX_LOOSE_CODE`].
    pub fn find(host: &HostFile<'d>) -> Self {
        const SHF_EXECINSTR: u64 = 0x4;
        const IMAGE_SCN_MEM_EXECUTE: u64 = 0x2000_0000;
        let mut objects = Vec::new();
        let mut fatbins = Vec::new();
        let mut v2 = Vec::new();
        // Real fat binaries hold a few entries; a bound keeps a section full of fake
        // headers from costing (attempts x entries) header reads: a candidate that does
        // not parse costs at most MAX_FATBIN_ENTRIES, and at most MAX_FAILED_FATBINS fail.
        let limits = crate::Limits {
            max_entries: MAX_FATBIN_ENTRIES,
            ..crate::Limits::DEFAULT
        };
        let mut failed = 0usize;
        for section in host.sections() {
            let executable = section.flags & (SHF_EXECINSTR | IMAGE_SCN_MEM_EXECUTE) != 0;
            if executable || !matches!(section.role(), crate::host::SectionRole::Other) {
                continue;
            }
            let name = core::str::from_utf8(section.name).unwrap_or("?");
            let data = section.data;
            let mut at = 0usize;
            while let Some(found) = data
                .get(at..)
                .and_then(|rest| rest.iter().position(|&b| b == 0x7F || b == 0x50))
            {
                let start = at.saturating_add(found);
                at = start.saturating_add(1);
                let Some(rest) = data.get(start..) else { break };
                if crate::nvfatbin::is_fatbin(rest) && failed < MAX_FAILED_FATBINS {
                    let parsed = crate::nvfatbin::Fatbin::parse(rest, &limits);
                    if parsed.is_err() {
                        failed = failed.saturating_add(1);
                    }
                    if let Ok(f) = parsed {
                        let offset = section.offset.saturating_add(crate::bytes::u64_of(start));
                        let base = offset;
                        let ids = f
                            .entries()
                            .map(|e| crate::identify(&fatbin_entry_image(&e, base)))
                            .collect();
                        fatbins.push((name, offset, f.len(), ids));
                        // Its cubins are not loose code objects: go on after it.
                        at = start.saturating_add(usize::try_from(f.len()).unwrap_or(usize::MAX));
                        if fatbins.len() >= MAX_LOOSE_CODE {
                            return LooseCode {
                                objects,
                                fatbins,
                                v2,
                            };
                        }
                    }
                    continue;
                }
                if !rest.starts_with(crate::raw::ELF_MAGIC) {
                    continue;
                }
                let identity = crate::identify(&Image::from_elf(objects.len(), rest));
                let offset = section.offset.saturating_add(crate::bytes::u64_of(start));
                if identity.elf.is_some()
                    && identity.elf_problem
                        == Some(crate::arch::elf::AmdgpuElfProblem::CodeObjectV2)
                {
                    if v2.len() < MAX_LOOSE_CODE {
                        v2.push((name, offset, v2_processor(rest)));
                    }
                    continue;
                }
                if identity.elf.is_none() || matches!(identity.target, crate::Target::None) {
                    continue;
                }
                objects.push((name, offset, identity));
                if objects.len() >= MAX_LOOSE_CODE {
                    return LooseCode {
                        objects,
                        fatbins,
                        v2,
                    };
                }
            }
        }
        LooseCode {
            objects,
            fatbins,
            v2,
        }
    }

    /// The code objects of an AOTriton archive ([`crate::aks2`], `FORMATS.md` §12), which
    /// AOTriton's runtime decompresses and loads itself: each identified from its ELF header,
    /// under the section name `aks2` (a kernel whose compilation failed has no code object
    /// and is left out).
    #[cfg(feature = "std")]
    pub fn from_aks2(archive: &'d crate::aks2::Aks2) -> Self {
        let mut objects = Vec::new();
        for kernel in archive.kernels.iter().take(MAX_LOOSE_CODE) {
            let code = archive.code_object(kernel);
            if code.is_empty() {
                continue;
            }
            let identity = crate::identify(&Image::from_elf(objects.len(), code));
            objects.push(("aks2", u64::from(kernel.offset), identity));
        }
        LooseCode {
            objects,
            fatbins: Vec::new(),
            v2: Vec::new(),
        }
    }

    /// True when none was found.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty() && self.fatbins.is_empty() && self.v2.is_empty()
    }

    /// How many of them `device` could load ([`crate::check`] on each header): code objects,
    /// and fat binaries with an entry the device can load (the driver picks among them).
    pub fn for_device(&self, device: &Device, options: &SelectOptions) -> usize {
        let objects = self
            .objects
            .iter()
            .enumerate()
            .filter(|(i, (_, _, id))| crate::check(id, *i, device, options).key().is_some())
            .count();
        let fatbins = self
            .fatbins
            .iter()
            .filter(|(_, _, _, ids)| {
                ids.iter()
                    .enumerate()
                    .any(|(i, id)| crate::check(id, i, device, options).key().is_some())
            })
            .count();
        // ROCr loads a v2 object on an agent of the processor its note names.
        let v2 = match device {
            Device::Amdgpu(t) => self
                .v2
                .iter()
                .filter(|(_, _, p)| {
                    p.as_deref()
                        .is_some_and(|p| p.split(':').next() == Some(t.processor.name))
                })
                .count(),
            Device::Cuda { .. } => 0,
        };
        objects.saturating_add(fatbins).saturating_add(v2)
    }

    /// The verdict of a library that registers no device code but carries these code
    /// objects ([`Status::Outside`]), for a device that loads `for_device` of them
    /// ([`LooseCode::for_device`]); `found` is [`LooseCode::summary`].
    pub fn judgement(found: &str, for_device: usize) -> Judgement {
        Judgement {
            status: Status::Outside,
            loads: for_device > 0,
            reason: Some(alloc::format!(
                "no device code a runtime registers; {found} outside any offload container, \
                 which its program loads itself: {}",
                match for_device {
                    0 => "none of them is for this device".to_string(),
                    n => alloc::format!("{n} of them for this device"),
                }
            )),
        }
    }

    /// What was found, for people: `300 code objects in .rodata (gfx942: 300)`.
    pub fn summary(&self) -> String {
        let mut sections: Vec<&str> = Vec::new();
        let mut targets: Vec<(String, usize)> = Vec::new();
        for (section, _, id) in &self.objects {
            if !sections.contains(section) {
                sections.push(section);
            }
            let name = match id.target {
                crate::Target::Amdgpu(t) => t.to_string(),
                crate::Target::Nvptx(a) => alloc::format!("sm_{}{}", a.sm, a.variant.suffix()),
                _ => "?".to_string(),
            };
            match targets.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c = c.saturating_add(1),
                None => targets.push((name, 1)),
            }
        }
        let per: Vec<String> = targets
            .iter()
            .map(|(n, c)| alloc::format!("{n}: {c}"))
            .collect();
        let mut parts: Vec<String> = Vec::new();
        if !self.objects.is_empty() {
            parts.push(alloc::format!(
                "{} code object{} in {} ({})",
                self.objects.len(),
                if self.objects.len() == 1 { "" } else { "s" },
                sections.join(", "),
                per.join(", ")
            ));
        }
        if !self.fatbins.is_empty() {
            let mut in_sections: Vec<&str> = Vec::new();
            let mut bytes = 0u64;
            for (section, _, size, _) in &self.fatbins {
                if !in_sections.contains(section) {
                    in_sections.push(section);
                }
                bytes = bytes.saturating_add(*size);
            }
            parts.push(alloc::format!(
                "{} fat binar{} ({} bytes) in {}",
                self.fatbins.len(),
                if self.fatbins.len() == 1 { "y" } else { "ies" },
                bytes,
                in_sections.join(", ")
            ));
        }
        if !self.v2.is_empty() {
            let mut in_sections: Vec<&str> = Vec::new();
            let mut per: Vec<(String, usize)> = Vec::new();
            for (section, _, p) in &self.v2 {
                if !in_sections.contains(section) {
                    in_sections.push(section);
                }
                let name = p.clone().unwrap_or_else(|| "no ISA note".to_string());
                match per.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, c)) => *c = c.saturating_add(1),
                    None => per.push((name, 1)),
                }
            }
            let per: Vec<String> = per
                .iter()
                .map(|(n, c)| alloc::format!("{n}: {c}"))
                .collect();
            parts.push(alloc::format!(
                "{} code object{} of version 2 in {} ({}; ROCr loads them, HIP does not)",
                self.v2.len(),
                if self.v2.len() == 1 { "" } else { "s" },
                in_sections.join(", "),
                per.join(", ")
            ));
        }
        parts.join(" and ")
    }
}

/// The code object of kernel `index` of an AOTriton archive as an image (a bare device ELF
/// of that index), or `None` for a kernel whose compilation failed (no code object) or an
/// index past the directory.
#[cfg(feature = "std")]
pub fn aks2_image(archive: &crate::aks2::Aks2, index: usize) -> Option<Image<'_>> {
    let code = archive.code_object(archive.kernels.get(index)?);
    (!code.is_empty()).then(|| Image::from_elf(index, code))
}

/// What a person should be told when `data` holds no offload container but device code
/// outside any ([`LooseCode::find`]): `list` and `select` find nothing to list or choose
/// in such a file, and `doctor` is what judges it. `None` when `data` is not a host file
/// or carries no such code.
pub fn outside_note(data: &[u8]) -> Option<String> {
    let host = HostFile::parse(data).ok()?;
    let loose = LooseCode::find(&host);
    (!loose.is_empty()).then(|| {
        alloc::format!(
            "no offload container; {} outside any, which its program loads itself \
             (`loader-sim doctor` judges them for a device)",
            loose.summary()
        )
    })
}

/// The image of fatbinary entry `e` for identification, from its header alone: in place
/// when stored, else as an [`crate::image::Encoded`] image not decoded (`base`: the
/// fatbinary's offset, for locating errors).
fn fatbin_entry_image<'d>(e: &crate::nvfatbin::FatbinEntry<'d>, base: u64) -> Image<'d> {
    match e.image() {
        Some(bytes) => Image::from_fatbin_entry(e.index, e, bytes),
        None => {
            let at = base.saturating_add(e.offset);
            Image::from_encoded_fatbin_entry(
                e.index,
                e,
                crate::image::Encoded {
                    codec: e.codec.unwrap_or(Codec::Zstd),
                    stream: e.stream().unwrap_or_default(),
                    size: e.uncompressed_size,
                    stream_at: at.saturating_add(u64::from(e.header_size)),
                    size_field: at.saturating_add(0x38),
                    entry_kind: Some(e.kind),
                },
            )
        }
    }
}

/// One unit as [`Tally::offer`] judges it: its images identified, without their bytes.
#[derive(Clone, Copy, Debug)]
pub struct UnitCode<'u, 'a> {
    /// How the unit is named in reports ("section .nv_fatbin unit 12", "wrapper at 0x1000").
    pub label: &'u str,
    /// Its images, identified ((discovery index, identity), in discovery order).
    pub ids: &'u [(usize, Identity<'a>)],
    /// The codecs of those stored compressed ((discovery index, codec)).
    pub codecs: &'u [(usize, Codec)],
    /// The runtime registers it (a fat-binary wrapper's unit): counted even without device
    /// code.
    pub registered: bool,
}

/// The codec of image `index` among `codecs`.
fn codecs_of(codecs: &[(usize, Codec)], index: usize) -> Option<&Codec> {
    codecs.iter().find(|(i, _)| *i == index).map(|(_, c)| c)
}

/// The architectures a unit's device images name, in discovery order, each once
/// (`sm_80, sm_100f, compute_120`; a processor for AMDGPU).
fn archs_of(ids: &[(usize, Identity<'_>)]) -> String {
    let mut out: Vec<String> = Vec::new();
    for (_, id) in ids {
        if id.offload_kind == OffloadKind::Host || id.size == 0 {
            continue;
        }
        let name = match (id.target, id.code) {
            (crate::Target::Nvptx(a), Code::Ptx) => {
                alloc::format!("compute_{}{}", a.sm, a.variant.suffix())
            }
            (crate::Target::Nvptx(a), _) => alloc::format!("sm_{}{}", a.sm, a.variant.suffix()),
            (crate::Target::Amdgpu(t), _) => t.processor.name.to_string(),
            _ => continue,
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out.join(", ")
}

/// What a library's units give every probe ([`Probes`]): the count of units, per probe
/// the units with an image it loads, and per real device the reasons of the others.
#[derive(Clone, Debug)]
pub struct Tally {
    /// Units counted.
    pub units: usize,
    /// Per probe: the units with an image it loads.
    pub covered: Vec<usize>,
    /// Per real device: its units, and why those that do not load do not.
    pub coverage: Vec<Coverage>,
}

impl Tally {
    /// Nothing counted yet, for `probes`.
    pub fn new(probes: &Probes) -> Self {
        Tally {
            units: 0,
            covered: alloc::vec![0; probes.devices.len()],
            coverage: alloc::vec![Coverage::default(); probes.real],
        }
    }

    /// Counts one unit ([`UnitCode`]): every probe gets the image [`crate::choose`] picks
    /// (with the probes' NVIDIA driver, [`Probes::nvidia_driver`], where `options` names
    /// none), unless its driver cannot decode it ([`driver_gap`]). A unit of the container
    /// walk with no device code (only a host entry, or empty images) is not counted, unless
    /// it has no entries at all; a unit the runtime registered always is.
    ///
    /// For a real device that gets nothing, `kernels` is asked (at most once per unit)
    /// whether the unit's images hold kernels: a unit without any is set aside
    /// ([`Coverage::add_without_kernels`]), and a unit without code for the device's
    /// architecture is counted with its architectures ([`Coverage::add_architectural`]).
    /// For a real device that loads the unit, `kernels` is asked until one such unit holds
    /// kernels ([`Coverage::has_code`]).
    pub fn offer(
        &mut self,
        unit: &UnitCode<'_, '_>,
        kernels: &mut dyn FnMut() -> Kernels,
        probes: &Probes,
        options: &SelectOptions,
    ) {
        let ids = unit.ids;
        let device_code = ids
            .iter()
            .any(|(_, i)| i.offload_kind != OffloadKind::Host && i.size > 0);
        if !device_code && !unit.registered && !ids.is_empty() {
            return;
        }
        self.units = self.units.saturating_add(1);
        let options = SelectOptions {
            cuda: crate::driver::CudaDriver {
                version: options.cuda.version.or(probes.nvidia_driver),
                ..options.cuda
            },
            ..*options
        };
        let mut known: Option<Kernels> = None;
        let mut kernels = || *known.get_or_insert_with(&mut *kernels);
        let choices = crate::choose(ids.iter().copied(), &probes.devices, &options);
        for (p, choice) in choices.iter().enumerate() {
            let chosen_codec = choice
                .key
                .and_then(|key| codecs_of(unit.codecs, key.index))
                .copied();
            let undecodable = probes
                .devices
                .get(p)
                .and_then(|device| driver_gap(device, probes.nvidia_driver, chosen_codec));
            let loads = choice.key.is_some() && undecodable.is_none();
            if let (true, Some(c)) = (loads, self.covered.get_mut(p)) {
                *c = c.saturating_add(1);
            }
            let (Some(c), Some(device)) = (self.coverage.get_mut(p), probes.devices.get(p)) else {
                continue;
            };
            if loads {
                c.add(None);
                if !c.has_code && kernels() != Kernels::None {
                    c.has_code = true;
                }
                continue;
            }
            let closest = choice.rejection.map(|(_, r)| r);
            let gap = match undecodable {
                Some(gap) => gap,
                None => gap(choice, device).unwrap_or(Gap::NoImages),
            };
            if !matches!(gap, Gap::NoImages) && kernels() == Kernels::None {
                c.add_without_kernels(unit.label);
            } else if gap.is_architectural() {
                c.add_architectural(unit.label, archs_of(ids), gap, closest.as_ref());
            } else {
                c.add_with(Some(gap), closest.as_ref());
            }
        }
    }

    /// Counts, for probe `p` only, how one unit went: it loads when `gap` is `None`, else
    /// it does not, for that reason (for a unit judged probe by probe, as a split
    /// library's archives are). The unit itself is counted in [`Tally::units`] by the
    /// caller.
    pub fn count(&mut self, p: usize, gap: Option<Gap>) {
        if let (None, Some(c)) = (&gap, self.covered.get_mut(p)) {
            *c = c.saturating_add(1);
        }
        if let Some(c) = self.coverage.get_mut(p) {
            c.add(gap);
        }
    }

    /// Counts one unit that loads on no probe, because of `gap`.
    pub fn refuse(&mut self, gap: Gap) {
        self.units = self.units.saturating_add(1);
        for c in &mut self.coverage {
            c.add(Some(gap.clone()));
        }
    }

    /// Whether probe `p` loads every unit.
    pub fn covers(&self, p: usize) -> bool {
        self.covered.get(p) == Some(&self.units)
    }
}

/// How [`Judge::unit`] reads and judges a unit: against which probes, with which options.
#[derive(Clone, Debug)]
pub struct Judge<'p> {
    /// The devices judged ([`Probes`]).
    pub probes: &'p Probes,
    /// The selection options (the NVIDIA driver, where the probes name none).
    pub select: SelectOptions,
    /// How units are read.
    pub read: ReadOptions,
    /// Inside compressed bundles, also read the first [`IDENTIFY_LEN`] bytes of every
    /// image, so that the ELF header wins over the entry ID as in [`crate::choose`]
    /// (decodes each compressed bundle up to its last image). Without it their entries
    /// are judged by entry ID, as the HIP runtime's code object lookup (comgr) judges them.
    pub deep: bool,
}

impl Judge<'_> {
    /// Judges one unit into `tally` ([`Tally::offer`]), named `label` in reports;
    /// `registered` when the runtime registers it (a fat-binary wrapper's unit: for an
    /// AMDGPU device the HIP runtime, ROCm CLR, whose own rules are then added,
    /// [`SelectOptions::clr`]). Of a compressed bundle only the start of the decompressed
    /// stream is decoded, up to the end of its entry table (with [`Judge::deep`], up to
    /// the first bytes of its last image); other units are opened, and their images
    /// identified from their headers.
    pub fn unit(
        &self,
        tally: &mut Tally,
        unit: &Unit<'_>,
        label: &str,
        registered: bool,
    ) -> crate::Result<()> {
        self.unit_prepared(tally, unit, label, registered, Prepared(None))
    }

    /// What [`Judge::unit`] decodes of `unit` before it judges it: with [`Judge::deep`],
    /// a compressed bundle's entry table and the first bytes of its images (one window of
    /// its stream, dropped when done). Small and owned, so that the units of a file can be
    /// prepared on several threads and then judged in order
    /// ([`Judge::unit_prepared`]): the same tally as [`Judge::unit`] unit after unit.
    pub fn prepare(&self, unit: &Unit<'_>) -> Prepared {
        match (&unit.content, self.deep) {
            (UnitContent::Compressed(c), true) => Prepared(Some(stream_heads(c, &self.read))),
            _ => Prepared(None),
        }
    }

    /// [`Judge::unit`] with what [`Judge::prepare`] read of the same `unit`.
    pub fn unit_prepared(
        &self,
        tally: &mut Tally,
        unit: &Unit<'_>,
        label: &str,
        registered: bool,
        prepared: Prepared,
    ) -> crate::Result<()> {
        let select = SelectOptions {
            clr: self.select.clr || registered,
            ..self.select
        };
        let code = |ids, codecs| UnitCode {
            label,
            ids,
            codecs,
            registered,
        };
        if let UnitContent::Compressed(c) = &unit.content {
            let at = unit.location.offset;
            let judged = self.compressed(c, prepared, &mut |ids| {
                let unit = UnitCode {
                    label,
                    ids,
                    codecs: &[],
                    registered,
                };
                tally.offer(&unit, &mut || Kernels::Unknown, self.probes, &select);
            });
            if judged.map_err(|e| e.rebase(at))? {
                return Ok(());
            }
        }
        let open = unit.open(&self.read)?;
        let mut ids: Vec<(usize, Identity<'_>)> = Vec::new();
        let mut codecs: Vec<(usize, Codec)> = Vec::new();
        for image in open.images() {
            if let Some(encoded) = image.encoded {
                codecs.push((image.index, encoded.codec));
            }
            ids.push((image.index, crate::identify(&image)));
        }
        let read = &self.read;
        tally.offer(
            &code(&ids, &codecs),
            &mut || Kernels::of_unit(open.images(), read),
            self.probes,
            &select,
        );
        Ok(())
    }

    /// Hands `offer` the entries of a compressed bundle, identified from the start of its
    /// decompressed stream: by entry ID alone ([`identify_by_id`]), or with
    /// [`Judge::deep`] by entry ID and the first bytes of each image. False when the
    /// content is not a binary bundle or (deep) its payloads overlap: then the unit is to
    /// be opened whole.
    fn compressed(
        &self,
        c: &CompressedBundle<'_>,
        prepared: Prepared,
        offer: &mut Offer<'_>,
    ) -> crate::Result<bool> {
        if !self.deep {
            c.check_size(&self.read)?;
            let mut reader = c.reader(&self.read)?;
            let Some(table) = BundleTable::read(&mut reader, &self.read.limits)? else {
                return Ok(false);
            };
            let ids: Vec<(usize, Identity<'_>)> = table
                .entries()
                .map(|e| (e.index, identify_by_id(e.index, e.id, e.size)))
                .collect();
            offer(&ids);
            return Ok(true);
        }
        let heads = match prepared.0 {
            Some(heads) => heads,
            None => stream_heads(c, &self.read),
        };
        let Some((table, heads)) = heads? else {
            return Ok(false);
        };
        let ids: Vec<(usize, Identity<'_>)> = table
            .entries()
            .map(|e| {
                let head = heads.get(e.index).map(Vec::as_slice).unwrap_or_default();
                let mut id = crate::identify(&Image::from_id(e.index, Format::Bundle, e.id, head));
                id.size = e.size;
                (e.index, id)
            })
            .collect();
        offer(&ids);
        Ok(true)
    }
}

/// What [`Judge::prepare`] decoded of a unit, for [`Judge::unit_prepared`].
#[derive(Default)]
pub struct Prepared(Option<crate::Result<Option<Heads>>>);

/// What [`Judge::unit`] does with a compressed bundle's identified entries.
type Offer<'o> = dyn FnMut(&[(usize, Identity<'_>)]) + 'o;

/// A compressed bundle's entry table, and the first bytes of every payload (by entry).
type Heads = (BundleTable, Vec<Vec<u8>>);

/// The entry table of a compressed bundle and the first [`IDENTIFY_LEN`] bytes of every
/// payload (indexed by entry), read from the start of the decompressed stream. `None` when
/// the content is not a binary bundle or payloads overlap (then the unit is opened whole).
fn stream_heads(c: &CompressedBundle<'_>, read: &ReadOptions) -> crate::Result<Option<Heads>> {
    c.check_size(read)?;
    let mut reader = c.reader(read)?;
    let Some(table) = BundleTable::read(&mut reader, &read.limits)? else {
        return Ok(None);
    };
    let mut order: Vec<(u64, usize, u64)> = table
        .entries()
        .map(|e| (e.offset, e.index, e.size))
        .collect();
    order.sort_unstable();
    let mut heads = alloc::vec![Vec::new(); order.len()];
    for (offset, index, size) in order {
        let n = usize::try_from(size)
            .unwrap_or(IDENTIFY_LEN)
            .min(IDENTIFY_LEN);
        if n == 0 {
            continue;
        }
        let Some(gap) = offset.checked_sub(reader.position()) else {
            return Ok(None);
        };
        reader.skip(gap)?;
        let mut head = alloc::vec![0u8; n];
        reader.read_exact(&mut head)?;
        if let Some(slot) = heads.get_mut(index) {
            *slot = head;
        }
    }
    Ok(Some((table, heads)))
}

/// The identity of a compressed bundle's entry from its entry ID alone, as comgr's code
/// object lookup (which the HIP runtime uses) sees it: a code object for the stated target.
pub fn identify_by_id(index: usize, id: &str, size: u64) -> Identity<'_> {
    crate::arch::identify_entry(index, id, &[], size)
}

/// What would make a library load on a device ([`hints`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint {
    /// Run with `HSA_XNACK=1` (`true`) or `=0` (safe).
    Xnack(bool),
    /// A newer NVIDIA driver: one that decodes the chosen entries, or compiles the PTX the
    /// library has for the device (safe). Its version when the release table gives it, else
    /// the CUDA version it must implement, else "newer than this tool knows".
    Driver(DriverNeed),
    /// Rebuild with `--offload-arch=` this target (safe).
    Rebuild(String),
    /// Run with `HSA_OVERRIDE_GFX_VERSION` naming this processor (unsupported: may fail
    /// or miscompute).
    Override(&'static Processor),
}

/// The hints for real device `k` of a library that does not cover it, in the order they
/// are offered: a runtime setting only when its variant loads every unit of the library
/// (`xnack`), a newer driver where the chosen entries need one, the `--offload-arch`
/// values that cover the device (its own name, its generic family), and last the
/// unsupported `HSA_OVERRIDE_GFX_VERSION` values whose variant loads every unit.
pub fn hints(probes: &Probes, k: usize, tally: &Tally) -> Vec<Hint> {
    let works = |i: usize| tally.covers(probes.real.saturating_add(i));
    let mut out = Vec::new();
    for (i, (of, v)) in probes.variants.iter().enumerate() {
        if let (true, Variant::Xnack(on)) = (*of == k, v) {
            if works(i) {
                out.push(Hint::Xnack(*on));
            }
        }
    }
    let driver = tally.coverage.get(k).and_then(|c| {
        c.gaps().find_map(|g| match &g.gap {
            Gap::Driver { needs, .. } => Some((DriverNeed::Version(*needs), false)),
            Gap::PtxVersion(refusal) => refusal.driver_need().map(|n| (n, true)),
            _ => None,
        })
    });
    // PTX for the device that the driver refuses as too new: the library has code for the
    // device, and the fix is a driver, not a rebuild.
    let mut ptx_too_new = false;
    if let Some((needs, ptx)) = driver {
        out.push(Hint::Driver(needs));
        ptx_too_new = ptx;
    }
    match probes.devices.get(k) {
        Some(Device::Amdgpu(t)) => {
            out.push(Hint::Rebuild(t.processor.name.to_string()));
            if let Some(g) = t.processor.generic() {
                out.push(Hint::Rebuild(g.name.to_string()));
            }
        }
        Some(d @ Device::Cuda { .. }) if !ptx_too_new => out.push(Hint::Rebuild(d.to_string())),
        Some(Device::Cuda { .. }) => {}
        None => {}
    }
    for (i, (of, v)) in probes.variants.iter().enumerate() {
        if let (true, Variant::Override(p)) = (*of == k, v) {
            if works(i) && p.isa_version.is_some() {
                out.push(Hint::Override(p));
            }
        }
    }
    out
}

#[cfg(test)]
mod driver_tests {
    use super::*;

    #[test]
    fn zstd_entries_need_the_driver_of_cuda_12_4() {
        // The Windows driver of CUDA 12.4 decodes zstd too.
        assert_eq!(
            DriverVersion::parse("551.61").unwrap().gap(Codec::Zstd),
            None
        );
        let old = DriverVersion::parse("535.183.01").unwrap();
        assert!(old < DriverVersion::ZSTD_FATBIN);
        assert!(DriverVersion::parse("550.54.15").unwrap() > DriverVersion::ZSTD_FATBIN);
        assert_eq!(
            old.gap(Codec::Zstd).unwrap().to_string(),
            "the chosen entry is zstd-compressed, which needs NVIDIA driver 550.54.14 or later \
             (driver 535.183.01)"
        );
        assert_eq!(old.gap(Codec::Lz4), None);
        assert_eq!(DriverVersion::ZSTD_FATBIN.gap(Codec::Zstd), None);
        // Only NVIDIA devices, with a known driver, and a compressed chosen entry.
        let sm86 = Device::parse("sm_86").unwrap();
        let gfx = Device::parse("gfx90a").unwrap();
        assert!(driver_gap(&sm86, Some(old), Some(Codec::Zstd)).is_some());
        assert_eq!(driver_gap(&gfx, Some(old), Some(Codec::Zstd)), None);
        assert_eq!(driver_gap(&sm86, None, Some(Codec::Zstd)), None);
        assert_eq!(driver_gap(&sm86, Some(old), None), None);
    }
}

#[cfg(test)]
mod hint_tests {
    use super::*;
    use crate::{identify, units};

    /// A gfx1031 (Radeon RX 6700 XT) and a bundle with gfx1030 but no gfx1031 code: no
    /// unit loads; the hints are to rebuild for gfx1031 or its generic family, and, last and
    /// unsupported, `HSA_OVERRIDE_GFX_VERSION=10.3.0`, the setting ROCm users give such
    /// cards, checked here by the gfx1030 variant's selection. The xnack twin of a
    /// gfx90a:xnack- is a probe, and a gfx90a:xnack- loads the bundle with no hint.
    #[test]
    fn hints_come_from_the_variants_that_load_every_unit() {
        let data = include_bytes!("../tests/data/corpus/bundles/hip_6arch.bundle");
        let devices = [
            Device::parse("gfx1031").unwrap(),
            Device::parse("gfx90a:xnack-").unwrap(),
        ];
        let probes = Probes::new(&devices, None);
        assert_eq!(probes.real, 2);
        assert!(probes.variants.contains(&(1, Variant::Xnack(true))));
        let options = ReadOptions::default();
        let mut tally = Tally::new(&probes);
        for unit in units(data, &options) {
            let open = unit.unwrap().open(&options).unwrap();
            let ids: Vec<_> = open.images().map(|i| (i.index, identify(&i))).collect();
            let unit = UnitCode {
                label: "unit 0",
                ids: &ids,
                codecs: &[],
                registered: false,
            };
            let mut kernels = || Kernels::of_unit(open.images(), &options);
            tally.offer(&unit, &mut kernels, &probes, &SelectOptions::default());
        }
        assert_eq!(tally.units, 1);
        assert!(!tally.covers(0) && tally.covers(1));
        let gfx1030 = Processor::by_isa_version(10, 3, 0).unwrap();
        assert_eq!(
            hints(&probes, 0, &tally),
            [
                Hint::Rebuild("gfx1031".to_string()),
                Hint::Rebuild("gfx10-3-generic".to_string()),
                Hint::Override(gfx1030),
            ]
        );
        assert_eq!(
            tally.coverage[0].reason().unwrap().to_string(),
            "no code object for gfx1031 in 1 of 1 units; closest: gfx1030 code does not run on gfx1031"
        );
    }
}
