//! One module per subcommand.

pub mod doctor;
pub mod list;
pub mod prune;
pub mod register;
pub mod select;
pub mod validate;
pub mod wrap;

use offload_image::Device;

use crate::Failure;

/// Parses the TARGET values of `option` (`--target`, `--keep`): each with the text it was
/// given, for reports.
pub fn parse_devices(option: &str, values: &[String]) -> Result<Vec<(String, Device)>, Failure> {
    values
        .iter()
        .map(|t| {
            Device::parse(t)
                .map(|d| (t.clone(), d))
                .map_err(|e| Failure(format!("invalid {option} '{t}': {}", e.what())))
        })
        .collect()
}
