//! The whole `list` path over any bytes: container discovery (ELF sections, archives,
//! blobs back to back), opening (decompression), images, IDs.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = offload_image_fuzz::list(data, &offload_image_fuzz::options());
});
