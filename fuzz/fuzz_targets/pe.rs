//! PE images (DLL, EXE, PYD) and COFF objects: the section table, base relocations and
//! COFF relocations, the container walk and the registration address space over them.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    offload_image_fuzz::pe(data);
});
