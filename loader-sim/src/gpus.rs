//! The GPUs of this machine as the runtimes see them (`doctor` without `--target`):
//! AMD GPUs from the KFD topology, NVIDIA GPUs from NVML, each list narrowed by the
//! variables the runtimes read (`COMPATIBILITY.md` §6.1).
//!
//! * AMD: every GPU node of the KFD topology in node order, then `ROCR_VISIBLE_DEVICES`
//!   (ROCr's enumeration), then `HIP_VISIBLE_DEVICES` (indices into what ROCr left), and
//!   `HSA_OVERRIDE_GFX_VERSION` replaces the processor as ROCr does (the device's own
//!   feature modes kept where the new processor has them).
//! * NVIDIA: NVML (`libnvidia-ml.so.1`, loaded at run time by the `nvml-wrapper` crate) gives
//!   each device's compute capability, UUID and name, and the driver version;
//!   `CUDA_VISIBLE_DEVICES` is applied to NVML's order, which is the CUDA runtime's under
//!   `CUDA_DEVICE_ORDER=PCI_BUS_ID` (the default order, fastest first, is not modelled).

use std::path::Path;

use offload_image::driver::DriverVersion;

use offload_image::arch::amdgpu::Processor;
use offload_image::arch::visible_devices;
use offload_image::Device;

use crate::Failure;

/// The machine's KFD topology, used when neither --target nor --kfd-topology is given.
const SYSTEM_KFD: &str = "/sys/class/kfd/kfd/topology";

/// A GPU found, with where it was found.
pub struct Found {
    /// The device as the runtime would match code against it.
    pub device: Device,
    /// Where it came from, for the report (`KFD node 1`, `NVML 0: NVIDIA A100 ...`).
    pub source: String,
}

/// What detection found, and what it looked at.
#[derive(Default)]
pub struct Detection {
    /// The visible GPUs, AMD first.
    pub devices: Vec<Found>,
    /// One line per source looked at: what it gave, or why nothing.
    pub looked: Vec<String>,
    /// The NVIDIA driver version NVML reports (`550.54.14`).
    pub nvidia_driver: Option<String>,
}

/// The environment the runtimes read, as a lookup (the process's, or a test's).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Detects the GPUs: AMD from the KFD topology `kfd` (when it is a directory), NVIDIA
/// from NVML when `nvml` is set. `xnack` is the mode given for KFD devices.
pub fn detect(kfd: Option<&Path>, nvml: bool, xnack: Option<bool>, env: Env<'_>) -> Detection {
    let mut d = Detection::default();
    match kfd {
        Some(dir) if dir.is_dir() => amd(dir, xnack, env, &mut d),
        Some(dir) => d
            .looked
            .push(format!("KFD topology at {}: not present", dir.display())),
        None => {}
    }
    if nvml {
        nvidia(env, &mut d);
    }
    d
}

fn amd(dir: &Path, xnack: Option<bool>, env: Env<'_>, d: &mut Detection) {
    let gpus = match Device::from_kfd_topology(dir, xnack) {
        Ok(g) => g,
        Err(e) => {
            d.looked.push(format!(
                "KFD topology at {}: cannot read it: {e}",
                dir.display()
            ));
            return;
        }
    };
    let rocr = visible_devices(env("ROCR_VISIBLE_DEVICES").as_deref(), gpus.len(), &[]);
    let hip = visible_devices(env("HIP_VISIBLE_DEVICES").as_deref(), rocr.len(), &[]);
    let over = env("HSA_OVERRIDE_GFX_VERSION");
    let processor = over.as_deref().and_then(override_processor);
    let mut line = format!(
        "KFD topology at {}: {} GPU node(s), {} visible",
        dir.display(),
        gpus.len(),
        hip.len()
    );
    if let (Some(v), None) = (&over, processor) {
        line.push_str(&format!(
            "; HSA_OVERRIDE_GFX_VERSION={v} names no processor, ignored"
        ));
    }
    d.looked.push(line);
    for &h in &hip {
        let Some(&node) = rocr.get(h) else { continue };
        let Some(device) = gpus.get(node) else {
            continue;
        };
        let device = match (device, processor) {
            (Device::Amdgpu(t), Some(p)) => Device::Amdgpu(offload_image::judge::overridden(t, p)),
            _ => *device,
        };
        d.devices.push(Found {
            device,
            source: format!("KFD GPU {node}"),
        });
    }
}

/// The processor `HSA_OVERRIDE_GFX_VERSION=major.minor.stepping` names.
fn override_processor(value: &str) -> Option<&'static Processor> {
    let mut parts = value.trim().split('.').map(|p| p.parse::<u8>().ok());
    let (Some(Some(a)), Some(Some(b)), Some(Some(c)), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    Processor::by_isa_version(a, b, c)
}

fn nvidia(env: Env<'_>, d: &mut Detection) {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            d.looked.push(format!("NVML (libnvidia-ml.so.1): {e}"));
            return;
        }
    };
    d.nvidia_driver = nvml.sys_driver_version().ok();
    let count = nvml.device_count().unwrap_or(0) as usize;
    let mut gpus: Vec<(Option<Device>, String, String)> = Vec::new();
    for i in 0..count {
        let Ok(dev) = nvml.device_by_index(i as u32) else {
            gpus.push((None, String::new(), format!("NVML {i}: does not answer")));
            continue;
        };
        let uuid = dev.uuid().unwrap_or_default();
        let name = dev.name().unwrap_or_default();
        let device = dev.cuda_compute_capability().ok().and_then(|c| {
            Device::cuda(u8::try_from(c.major).ok()?, u8::try_from(c.minor).ok()?).ok()
        });
        gpus.push((device, uuid, format!("NVML {i}: {name}")));
    }
    let uuids: Vec<&str> = gpus.iter().map(|g| g.1.as_str()).collect();
    let visible = visible_devices(env("CUDA_VISIBLE_DEVICES").as_deref(), count, &uuids);
    d.looked.push(format!(
        "NVML: {count} GPU(s), {} visible, driver {}",
        visible.len(),
        d.nvidia_driver.as_deref().unwrap_or("unknown")
    ));
    for i in visible {
        if let Some((Some(device), _, source)) = gpus.get(i) {
            d.devices.push(Found {
                device: *device,
                source: source.clone(),
            });
        }
    }
}

/// The devices to judge (name as given, device) and the NVIDIA driver they have.
pub type Judged = (Vec<(String, Device)>, Option<DriverVersion>);

/// The devices `doctor` judges: every `targets` (as given), then every GPU of the KFD
/// topology `kfd_topology`; with neither, the GPUs of this machine as the runtimes see them
/// ([`detect`]: KFD and NVML, narrowed by the `*_VISIBLE_DEVICES` variables,
/// `HSA_OVERRIDE_GFX_VERSION` applied); without duplicates (each one noted on standard
/// error). And the NVIDIA driver they have: `nvidia_driver`, else NVML's.
pub fn judged(
    targets: Vec<(String, Device)>,
    kfd_topology: Option<&Path>,
    xnack: Option<bool>,
    nvidia_driver: Option<DriverVersion>,
) -> Result<Judged, Failure> {
    let mut driver = nvidia_driver;
    let detect = targets.is_empty() && kfd_topology.is_none();
    let mut devices = targets;
    let mut looked = Vec::new();
    if let Some(dir) = kfd_topology {
        // Given explicitly: a topology that does not read is an error.
        Device::from_kfd_topology(dir, xnack)
            .map_err(|e| Failure::file(dir, format!("cannot read the KFD topology: {e}")))?;
    }
    if detect || kfd_topology.is_some() {
        let env = |k: &str| std::env::var(k).ok();
        let kfd = kfd_topology.unwrap_or(Path::new(SYSTEM_KFD));
        let found = self::detect(Some(kfd), detect, xnack, &env);
        for f in &found.devices {
            crate::output::stderr_line(format_args!(
                "loader-sim: doctor: detected {} ({})",
                f.device, f.source
            ));
        }
        looked = found.looked;
        driver = driver.or(found
            .nvidia_driver
            .as_deref()
            .and_then(DriverVersion::parse));
        devices.extend(
            found
                .devices
                .into_iter()
                .map(|f| (f.device.to_string(), f.device)),
        );
    }
    let mut unique: Vec<(String, Device)> = Vec::new();
    for (name, d) in devices {
        match unique.iter().find(|(_, u)| *u == d) {
            // Two names for one device (`sm_90` and `sm_90a`: a GPU is a compute capability;
            // `a` and `f` name code, not devices): judged once, and said so.
            Some((first, _)) => crate::output::stderr_line(format_args!(
                "loader-sim: doctor: --target {name} is the same device as {first} ({d}): judged once"
            )),
            None => unique.push((name, d)),
        }
    }
    if unique.is_empty() {
        return Err(Failure::msg(match kfd_topology {
            Some(dir) => format!(
                "{}: the KFD topology has no visible GPU node ({})",
                dir.display(),
                looked.join("; ")
            ),
            None => format!(
                "no device to check: give --target TARGET or --kfd-topology DIR (looked for this machine's GPUs: {})",
                looked.join("; ")
            ),
        }));
    }
    Ok((unique, driver))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HSA_OVERRIDE_GFX_VERSION names a processor by ISA version, as ROCr reads it.
    #[test]
    fn override_versions_name_processors() {
        assert_eq!(
            override_processor("10.3.0").map(|p| p.name),
            Some("gfx1030")
        );
        assert_eq!(override_processor("9.0.10").map(|p| p.name), Some("gfx90a"));
        assert_eq!(
            override_processor("11.0.0").map(|p| p.name),
            Some("gfx1100")
        );
        assert!(override_processor("10.3").is_none());
        assert!(override_processor("1.2.3").is_none());
    }
}
