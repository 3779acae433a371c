//! `prune`: planning and rewriting any file (linked ELF compaction with moved sections and
//! grown program header tables, PE compaction, relocatable objects, archives, standalone
//! containers) for one AMD and one NVIDIA device.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    offload_image_fuzz::prune(data);
});
