//! The GPU an image is selected for (`COMPATIBILITY.md` §6).

use core::fmt;

use crate::error::{Error, ErrorKind, Result};
use crate::arch::amdgpu::{Feature, FeatureState, Processor, Subarch, TargetId};
use crate::arch::nvptx::NvArch;

/// `HSA_CAP_SRAM_EDCSUPPORTED` in the KFD topology `capability` word (bit 26).
///
/// Older kernels used bit 19 (0x80000) and then moved it, because old user-mode code
/// required bit 19 to stay 0 (`HSA_CAP_RESERVED_WAS_SRAM_EDCSUPPORTED` in
/// `kfd_topology.h`); ROCr's thunk reads bit 26 (`SRAM_EDCSupport`). Bit 19 is ignored here.
pub const HSA_CAP_SRAM_EDCSUPPORTED: u32 = 0x0400_0000;

/// A device: an AMDGPU agent or a CUDA device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// An AMDGPU agent: a concrete (never generic) processor and its feature states.
    /// A feature state of [`FeatureState::Any`] means "unknown" here.
    Amdgpu(TargetId),
    /// A CUDA device by compute capability.
    Cuda {
        /// Compute capability major version (`9` for sm_90).
        major: u8,
        /// Compute capability minor version.
        minor: u8,
    },
}

/// Prefixes runtimes put before a processor name (`amdgcn-amd-amdhsa--gfx90a`), LLVM's
/// AMDGPU sub-architecture triples among them (`amdgpu9.42-amd-amdhsa--gfx942`).
fn strip_triple(s: &str) -> Result<(Option<&str>, &str)> {
    for arch in ["amdgcn-", "amdgpu", "nvptx64-", "nvptx-"] {
        if s.starts_with(arch) {
            // arch-vendor-os-env-processor: the processor follows the fourth '-'.
            let mut dashes = s.match_indices('-').map(|(i, _)| i);
            let fourth = dashes.nth(3).ok_or(Error::new(
                ErrorKind::InvalidId,
                0,
                "device name with a triple must be <arch>-<vendor>-<os>-<env>-<processor>",
            ))?;
            let triple = s.get(..fourth).unwrap_or("");
            let rest = s.get(fourth.saturating_add(1)..).unwrap_or("");
            return Ok((Some(triple), rest));
        }
    }
    Ok((None, s))
}

/// The sub-architecture of an AMDGPU device name's triple (`amdgcn-amd-amdhsa`,
/// `amdgpu9.42-amd-amdhsa`; `COMPATIBILITY.md` §1.5), refused where it names no processor.
fn device_subarch(triple: &str) -> Result<Subarch> {
    let arch = triple.split('-').next().unwrap_or("");
    let refuse = |why| Err(Error::new(ErrorKind::InvalidId, 0, why));
    match Subarch::of_arch(arch) {
        Some(s @ (Subarch::None | Subarch::Processor(_))) => Ok(s),
        Some(Subarch::Family) => {
            refuse("this AMDGPU sub-architecture names a family, not a device")
        }
        Some(Subarch::Unknown) => refuse("LLVM's table has no such AMDGPU sub-architecture"),
        None => refuse("an AMDGPU target ID needs an amdgcn or amdgpu triple"),
    }
}

impl Device {
    /// Parses what runtimes report or users type: an AMDGPU target ID with or without an
    /// `amdgcn-amd-amdhsa--` prefix (`amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`,
    /// `gfx90a:sramecc+:xnack-`, `gfx1100`), also under a sub-architecture triple, whose
    /// processor an empty one takes (`amdgpu9.42-amd-amdhsa--:sramecc+:xnack-` is gfx942;
    /// `COMPATIBILITY.md` §1.5), or an NVPTX architecture (`sm_90`, `sm_90a`,
    /// `nvptx64-nvidia-cuda--sm_80`).
    ///
    /// An AMDGPU feature left out is *unknown* (not "any"): only images that do not
    /// depend on it will match. Generic processors are not devices and are rejected.
    /// For NVPTX only the compute capability counts: every 9.0 device runs `sm_90a` code,
    /// so `sm_90a` and `sm_90` name the same device. Does not allocate.
    pub fn parse(s: &str) -> Result<Self> {
        let (triple, name) = strip_triple(s)?;
        if name.starts_with("sm_") || name.starts_with("compute_") {
            if triple.is_some_and(|t| !t.starts_with("nvptx")) {
                return Err(Error::new(
                    ErrorKind::InvalidId,
                    0,
                    "an NVPTX architecture needs an nvptx triple",
                ));
            }
            let a = NvArch::parse(name)?;
            return Device::cuda(a.major() as u8, a.minor() as u8);
        }
        let t = match triple {
            None => TargetId::parse(name)?,
            Some(triple) => TargetId::parse_under(name, device_subarch(triple)?)?,
        };
        if t.processor.is_generic() {
            return Err(Error::new(
                ErrorKind::InvalidId,
                0,
                "a generic processor is a code target, not a device",
            ));
        }
        Ok(Device::Amdgpu(t))
    }

    tools_pub! {
        /// A CUDA device with compute capability `major.minor`.
        pub fn cuda(major: u8, minor: u8) -> Result<Self> {
            if major == 0 || major > 99 || minor > 9 {
                return Err(Error::new(
                    ErrorKind::InvalidId,
                    0,
                    "compute capability must be 1.0 to 99.9",
                ));
            }
            Ok(Device::Cuda { major, minor })
        }
    }

    tools_pub! {
        /// The same AMDGPU device with the xnack mode set (ignored when the processor has no
        /// selectable xnack, and for CUDA devices). KFD properties do not record the mode:
        /// ROCr asks the kernel (and honours `HSA_XNACK`), so callers supply it.
        #[must_use]
        pub fn with_xnack(self, on: bool) -> Self {
            self.with_feature(Feature::Xnack, on)
        }
    }

    tools_pub! {
        /// The same AMDGPU device with the sramecc mode set (see [`Device::with_xnack`]).
        #[must_use]
        pub fn with_sramecc(self, on: bool) -> Self {
            self.with_feature(Feature::Sramecc, on)
        }
    }

    fn with_feature(self, feature: Feature, on: bool) -> Self {
        match self {
            Device::Amdgpu(mut t) if t.processor.support(feature).is_selectable() => {
                let s = FeatureState::from_bool(on);
                match feature {
                    Feature::Sramecc => t.sramecc = s,
                    Feature::Xnack => t.xnack = s,
                }
                Device::Amdgpu(t)
            }
            other => other,
        }
    }

    tools_pub! {
        /// Reads one KFD topology node (`/sys/class/kfd/kfd/topology/nodes/N/properties`):
        /// `gfx_target_version` (major·10000 + minor·100 + stepping) gives the processor and
        /// bit 26 of `capability` ([`HSA_CAP_SRAM_EDCSUPPORTED`]) the sramecc mode. The xnack
        /// mode is not in the file and stays unknown (set it with [`Device::with_xnack`]).
        ///
        /// Returns `Ok(None)` for a CPU node (`gfx_target_version 0` or absent). Errors: a
        /// value that is not a number, or a version no processor in the table has.
        pub fn from_kfd_properties(text: &str) -> Result<Option<Self>> {
            let bad = |what| Error::new(ErrorKind::InvalidId, 0, what);
            let mut version: Option<u32> = None;
            let mut capability: u32 = 0;
            for line in text.lines() {
                let mut it = line.split_ascii_whitespace();
                let (Some(key), Some(value)) = (it.next(), it.next()) else {
                    continue;
                };
                match key {
                    "gfx_target_version" => {
                        version = Some(
                            value
                                .parse()
                                .map_err(|_| bad("KFD gfx_target_version is not a number"))?,
                        )
                    }
                    "capability" => {
                        // The kernel prints u32 capabilities in decimal.
                        capability = value
                            .parse::<u64>()
                            .map_err(|_| bad("KFD capability is not a number"))?
                            as u32
                    }
                    _ => {}
                }
            }
            let v = match version {
                None | Some(0) => return Ok(None),
                Some(v) => v,
            };
            let (major, minor, stepping) = (v / 10000, (v / 100) % 100, v % 100);
            let processor = u8::try_from(major)
                .ok()
                .and_then(|major| Processor::by_isa_version(major, minor as u8, stepping as u8))
                .ok_or(bad(
                    "KFD gfx_target_version names no known AMDGPU processor",
                ))?;
            let device = Device::Amdgpu(TargetId::any(processor));
            Ok(Some(
                device.with_sramecc(capability & HSA_CAP_SRAM_EDCSUPPORTED != 0),
            ))
        }
    }

    /// Every GPU node of a KFD topology directory (normally
    /// `/sys/class/kfd/kfd/topology`), in node order, each with `xnack` set when given.
    #[cfg(feature = "std")]
    pub fn from_kfd_topology(
        topology: &std::path::Path,
        xnack: Option<bool>,
    ) -> std::io::Result<std::vec::Vec<Device>> {
        use std::io;
        let mut nodes = std::vec::Vec::new();
        for entry in std::fs::read_dir(topology.join("nodes"))? {
            let entry = entry?;
            if let Some(n) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            {
                nodes.push((n, entry.path()));
            }
        }
        nodes.sort();
        let mut devices = std::vec::Vec::new();
        for (_, path) in nodes {
            let text = std::fs::read_to_string(path.join("properties"))?;
            let d = Device::from_kfd_properties(&text)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.what()))?;
            if let Some(d) = d {
                devices.push(match xnack {
                    Some(x) => d.with_xnack(x),
                    None => d,
                });
            }
        }
        Ok(devices)
    }

    tools_pub! {
        /// The AMDGPU target of the device, if it is one.
        pub fn amdgpu(&self) -> Option<&TargetId> {
            match self {
                Device::Amdgpu(t) => Some(t),
                Device::Cuda { .. } => None,
            }
        }
    }

    tools_pub! {
        /// The ISA name ROCr would report for the native ISA (`amdgcn-amd-amdhsa--gfx90a:…`),
        /// or `nvptx64-nvidia-cuda--sm_XY`.
        pub fn isa_name(&self) -> heapless::String<64> {
            let mut s = heapless::String::new();
            let _ = match self {
                Device::Amdgpu(t) => fmt::write(&mut s, format_args!("amdgcn-amd-amdhsa--{t}")),
                Device::Cuda { .. } => fmt::write(&mut s, format_args!("nvptx64-nvidia-cuda--{self}")),
            };
            s
        }
    }
}

impl fmt::Display for Device {
    /// The canonical target ID (`gfx90a:sramecc+:xnack-`) or `sm_XY`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Amdgpu(t) => write!(f, "{t}"),
            Device::Cuda { major, minor } => write!(f, "sm_{major}{minor}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn subarch_triples_name_the_same_devices() {
        // COMPATIBILITY.md §1.5: amdgpu9.42 is gfx942, amdgpu11.01 gfx1101.
        let plain = Device::parse("gfx942:sramecc+:xnack-").unwrap();
        for s in [
            "amdgpu9.42-amd-amdhsa--gfx942:sramecc+:xnack-",
            "amdgpu9.42-amd-amdhsa--:sramecc+:xnack-",
            "amdgpu9.42-amd-amdhsa--generic:sramecc+:xnack-",
            "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
        ] {
            assert_eq!(Device::parse(s).unwrap(), plain, "{s}");
        }
        assert_eq!(
            Device::parse("amdgpu11.01-amd-amdhsa--").unwrap(),
            Device::parse("gfx1101").unwrap()
        );
        for bad in [
            "amdgpu9.42-amd-amdhsa--gfx90a", // another processor than the triple's
            "amdgpu9.4-amd-amdhsa--:xnack+", // gfx9-4-generic: a code target
            "amdgpu8-amd-amdhsa--gfx803",    // a family without a processor
            "amdgpu99.9-amd-amdhsa--gfx942", // not in LLVM's table
            "amdgpu9.42-amd-amdhsa",         // no target ID field
        ] {
            assert_eq!(
                Device::parse(bad).unwrap_err().kind(),
                ErrorKind::InvalidId,
                "{bad}"
            );
        }
    }

    #[test]
    fn runtime_strings() {
        for (s, want) in [
            (
                "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
                "gfx90a:sramecc+:xnack-",
            ),
            ("gfx90a:xnack-:sramecc+", "gfx90a:sramecc+:xnack-"),
            ("amdgcn-amd-amdhsa-unknown-gfx1100", "gfx1100"),
            ("sm_90", "sm_90"),
            ("sm_90a", "sm_90"),
            ("nvptx64-nvidia-cuda--sm_120", "sm_120"),
        ] {
            assert_eq!(Device::parse(s).unwrap().to_string(), want, "{s}");
        }
        for bad in [
            "gfx9-generic",
            "amdgcn-amd-amdhsa",
            "gfx1030:xnack-",
            "nvptx64-nvidia-cuda--gfx90a",
            "sm_9",
        ] {
            assert!(Device::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Device::parse("gfx942").unwrap().isa_name().as_str(),
            "amdgcn-amd-amdhsa--gfx942"
        );
    }

    #[test]
    fn kfd_properties() {
        // A gfx90a node with SRAM ECC on (bit 26) plus SVM API (bit 27) and the old bit 19,
        // which must be ignored.
        let cap = HSA_CAP_SRAM_EDCSUPPORTED | 0x0800_0000 | 0x0008_4280;
        let text = alloc::format!(
            "cpu_cores_count 0\nsimd_count 416\ncapability {cap}\n\
             gfx_target_version 90010\nvendor_id 4098\n"
        );
        let d = Device::from_kfd_properties(&text).unwrap().unwrap();
        assert_eq!(d.to_string(), "gfx90a:sramecc+");
        assert_eq!(d.with_xnack(false).to_string(), "gfx90a:sramecc+:xnack-");
        let off = Device::from_kfd_properties("capability 541312\ngfx_target_version 90010\n")
            .unwrap()
            .unwrap();
        assert_eq!(off.to_string(), "gfx90a:sramecc-");
        let rdna = Device::from_kfd_properties("capability 0\ngfx_target_version 110000\n")
            .unwrap()
            .unwrap();
        assert_eq!(rdna.with_xnack(true).to_string(), "gfx1100");
        assert_eq!(
            Device::from_kfd_properties("cpu_cores_count 16\ngfx_target_version 0\n").unwrap(),
            None
        );
        assert!(Device::from_kfd_properties("gfx_target_version 99999\n").is_err());
    }
}

/// Which of `count` enumerated devices a `*_VISIBLE_DEVICES` list leaves visible, in the
/// order the list gives them (`CUDA_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`,
/// `HIP_VISIBLE_DEVICES`; `COMPATIBILITY.md` §6).
///
/// `value` is `None` when the variable is not set (every device, in order). Otherwise its
/// comma-separated items are read in order: a decimal index below `count`, or a UUID that
/// `uuids` (the devices' UUIDs, as their runtime prints them; may be empty) starts with.
/// The list ends at the first item that is neither, or that names a device already listed,
/// as the CUDA runtime and CLR read it: the devices before it stay visible. An empty value
/// leaves no device.
pub fn visible_devices(
    value: Option<&str>,
    count: usize,
    uuids: &[&str],
) -> alloc::vec::Vec<usize> {
    let Some(value) = value else {
        return (0..count).collect();
    };
    let mut out = alloc::vec::Vec::new();
    for item in value.split(',') {
        let item = item.trim();
        let index = match item.parse::<usize>() {
            Ok(i) if i < count => Some(i),
            Ok(_) => None,
            Err(_) if !item.is_empty() => uuids
                .iter()
                .position(|u| !u.is_empty() && u.starts_with(item)),
            Err(_) => None,
        };
        match index {
            Some(i) if !out.contains(&i) => out.push(i),
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod visible_tests {
    use super::visible_devices;

    #[test]
    fn lists_end_at_the_first_invalid_item() {
        assert_eq!(visible_devices(None, 3, &[]), [0, 1, 2]);
        assert_eq!(visible_devices(Some(""), 3, &[]), [] as [usize; 0]);
        assert_eq!(visible_devices(Some("2,0"), 3, &[]), [2, 0]);
        assert_eq!(visible_devices(Some("1,7,0"), 3, &[]), [1]);
        assert_eq!(visible_devices(Some("-1"), 3, &[]), [] as [usize; 0]);
        assert_eq!(visible_devices(Some("0,0,1"), 3, &[]), [0]);
        assert_eq!(
            visible_devices(Some("GPU-5e1b,0"), 2, &["GPU-aa", "GPU-5e1b2f"]),
            [1, 0]
        );
    }
}
