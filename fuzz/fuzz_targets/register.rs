//! `loader-sim register FILE`: a host ELF file (executable, shared library, object) as an
//! address space with its relocations; fat-binary wrappers, offload entry tables and
//! `__tgt_bin_desc` descriptors read through the registration views and registered with
//! the simulated runtime.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    offload_image_fuzz::register_elf(data);
});
