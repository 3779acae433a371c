//! Target names from any text: AMDGPU target IDs, NVPTX architectures, devices as users
//! and runtimes spell them, container targets, KFD topology properties.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::arch::{NvArch, Target, TargetId};
use offload_image::Device;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(t) = TargetId::parse(s) {
        // The canonical spelling parses back to the same target.
        let canon = t.canonical();
        let again = TargetId::parse(&canon).expect("a canonical target ID parses");
        assert!(t.same_as(&again));
    }
    if let Ok(a) = NvArch::parse(s) {
        let again = NvArch::parse(&a.to_string()).expect("a displayed NVPTX arch parses");
        assert_eq!(a, again);
    }
    if let Ok(d) = Device::parse(s) {
        let _ = d.to_string();
        let _ = d.isa_name();
        let _ = d.with_xnack(true).with_sramecc(false);
    }
    for arch in [
        None,
        Some("amdgcn"),
        Some("nvptx64"),
        Some("spirv64"),
        Some("x86_64"),
    ] {
        let _ = Target::parse(s, arch).to_string();
    }
    let _ = Device::from_kfd_properties(s);
});
