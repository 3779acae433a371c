//! The whole `loader-sim select` path over any bytes: walk, open, images, identify (entry
//! IDs, OffloadBinary strings, ELF headers), select for many devices under every policy.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

static DEVICES: OnceLock<Vec<offload_image::Device>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let devices = DEVICES.get_or_init(offload_image_fuzz::devices);
    let _ = offload_image_fuzz::list_and_select(data, &offload_image_fuzz::options(), devices);
});
