//! One module per subcommand.

pub mod coverage;
pub mod doctor;
pub mod list;
pub mod prune;
pub mod register;
pub mod sbom;
pub mod select;
pub mod validate;
pub mod variants;
pub mod wrap;

use offload_image::{Device, Policy};

use crate::Failure;

/// Parses the TARGET values of `option` (`--target`, `--keep`): each with the text it was
/// given, for reports. Product names and compute capabilities are taken too
/// ([`crate::gpu_names::resolve`]).
pub fn parse_devices(option: &str, values: &[String]) -> Result<Vec<(String, Device)>, Failure> {
    values
        .iter()
        .map(|t| crate::gpu_names::device_arg(option, t).map(|d| (t.clone(), d)))
        .collect()
}

/// `--xnack` (of `select` and `doctor`): the xnack mode of devices read from KFD.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// `--policy` of `select`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum PolicyArg {
    /// The ranking of COMPATIBILITY.md §10 (native, exact, newest generic, then order).
    Best,
    /// First compatible image in discovery order (comgr lookup, LLVM offload runtime).
    First,
    /// Native, then generic, then JIT code, each in discovery order (ROCm CLR).
    FirstByClass,
}

impl PolicyArg {
    /// The library's policy.
    pub fn policy(self) -> Policy {
        match self {
            PolicyArg::Best => Policy::Best,
            PolicyArg::First => Policy::First,
            PolicyArg::FirstByClass => Policy::FirstByClass,
        }
    }
}

/// `--nvidia-driver`'s parser.
pub fn parse_driver(text: &str) -> Result<offload_image::driver::DriverVersion, String> {
    offload_image::driver::DriverVersion::parse(text)
        .ok_or_else(|| format!("'{text}' is not a driver version (550.54.14)"))
}

/// The NVIDIA devices' driver as selection models it: `version` (when known) and the
/// `CUDA_FORCE_PTX_JIT` / `CUDA_DISABLE_PTX_JIT` switches of this process's environment,
/// read as the driver reads them (`offload_image::driver::JitSwitches`).
pub fn cuda_driver(
    version: Option<offload_image::driver::DriverVersion>,
) -> offload_image::driver::CudaDriver {
    use offload_image::driver::{CudaDriver, JitSwitches};
    CudaDriver {
        version,
        switches: JitSwitches::from_env(env_var),
    }
}

/// A variable of this process's environment, a non-UTF-8 value read lossily.
fn env_var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// ROCm CLR's `HIP_FORCE_SPIRV_CODEOBJECT` in this process's environment, read as CLR reads
/// it (`offload_image::select::hip_force_spirv`).
pub fn hip_force_spirv() -> bool {
    offload_image::select::hip_force_spirv(env_var("HIP_FORCE_SPIRV_CODEOBJECT").as_deref())
}
