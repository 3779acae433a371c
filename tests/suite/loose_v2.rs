//! AMDGPU code objects of version 2 outside any container (issue 45): `LooseCode::find`
//! counts them apart, with the target ROCr's loader gives their `NT_AMD_HSA_ISA_VERSION`
//! note (`judge::v2_target`, ROCr `amd_hsa_code.cpp` `ConvertOldTargetNameToNew`). The host
//! object (`tests/data/loose_v2/make.sh`) holds, in `.rodata.kernels` at 0, 512 and 1024,
//! LLVM 14's v2 objects with notes `AMD:AMDGPU:8:0:3` and `AMD:AMDGPU:9:0:1`
//! (`llvm-readelf -n`) and a v4 gfx90a object.

use offload_image::host::HostFile;
use offload_image::judge::{v2_processor, v2_target, LooseCode};

#[test]
fn v2_objects_are_found_with_the_target_rocr_gives_them() {
    let data = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/loose_v2/host_v2.o"),
    )
    .unwrap();
    let host = HostFile::parse(&data).unwrap();
    let loose = LooseCode::find(&host);
    let section = host
        .sections()
        .iter()
        .find(|s| s.name == b".rodata.kernels")
        .unwrap();
    let v2: Vec<(&str, u64, Option<&str>)> = loose
        .v2
        .iter()
        .map(|(s, o, t)| (*s, *o, t.as_deref()))
        .collect();
    assert_eq!(
        v2,
        [
            (".rodata.kernels", section.offset, Some("gfx803")),
            (
                ".rodata.kernels",
                section.offset + 512,
                Some("gfx900:xnack+")
            ),
        ]
    );
    // The v4 object is an ordinary loose code object.
    assert_eq!(loose.objects.len(), 1);
    assert_eq!(loose.objects[0].1, section.offset + 1024);
    // Each v2 object read alone gives the same target.
    assert_eq!(
        v2_processor(&section.data[..512]).as_deref(),
        Some("gfx803")
    );
    assert_eq!(
        v2_processor(&section.data[1024..]),
        None,
        "v4 has no ISA note"
    );
}

/// ROCr's table: the ISAs up to gfx906 and gfx90c, the xnack steppings, nothing newer.
#[test]
fn v2_targets_follow_rocr() {
    assert_eq!(v2_target(8, 0, 4), Some("gfx803"));
    assert_eq!(v2_target(8, 0, 0), Some("gfx802"));
    assert_eq!(v2_target(9, 0, 7), Some("gfx906:sramecc-:xnack+"));
    assert_eq!(v2_target(9, 0, 12), Some("gfx90c:xnack-"));
    assert_eq!(v2_target(9, 0, 8), None);
    assert_eq!(v2_target(10, 1, 0), None);
}
