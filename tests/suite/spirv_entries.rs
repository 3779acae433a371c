//! AMD SPIR-V entries (`hip-spirv64-amd-amdhsa--amdgcnspirv`, the `-unknown-` spelling;
//! payload magic 0x07230203) in bundles that also hold code objects, and ROCm CLR's
//! `HIP_FORCE_SPIRV_CODEOBJECT` (`COMPATIBILITY.md` §7.3, §7.7).
//!
//! The oracle is CLR's source, ROCm/rocm-systems at 02ba0621a09f166b63e37f7273bdedef1b3337a9,
//! `projects/clr/hipamd/src/hip_fatbin.cpp` (`FatBinaryInfo::ExtractFatBinaryUsingCOMGR`):
//! per device, the native code object if found and the variable is not set, else the generic
//! one if found and the variable is not set, else the SPIR-V entry if the bundle has one
//! under `spirv64-amd-amdhsa--amdgcnspirv` or `spirv64-amd-amdhsa-unknown-amdgcnspirv`, else
//! "No compatible code objects found". The variable is a CLR `bool` flag
//! (`projects/clr/rocclr/utils/flags.cpp` at 02fcd1b98a9441722b1ae35fad94000b170d0cde,
//! `Flag::setValue`: `strcmp(value, "true") == 0 || atoi(value) != 0`; an empty value is
//! stored as `" "`). The code objects are the corpus's (`e_flags` as llvm-readelf gives them
//! in `tests/data/corpus/MANIFEST.jsonl`).

use crate::common;

use common::binary_bundle as bundle;
use offload_image::select::{hip_force_spirv, Rejection, Verdict};
use offload_image::{choose, units, Device, Image, Policy, ReadOptions, SelectOptions};

/// A SPIR-V module header (SPIR-V spec §2.3: magic, version 1.6, generator, bound, schema).
const SPIRV: [u8; 20] = [
    0x03, 0x02, 0x23, 0x07, 0x00, 0x06, 0x01, 0x00, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
];

fn corpus(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/data/corpus/devobj/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// The chosen entry IDs per device, and the rejections of the images that were not chosen.
fn chosen(data: &[u8], devices: &[&str], options: &SelectOptions) -> Vec<Option<String>> {
    let read = ReadOptions::default();
    let unit = units(data, &read).next().unwrap().unwrap();
    let open = unit.open(&read).unwrap();
    let devices: Vec<Device> = devices.iter().map(|d| Device::parse(d).unwrap()).collect();
    choose(open.images(), &devices, options)
        .iter()
        .map(|c| c.image.and_then(|i| i.entry_id).map(str::to_string))
        .collect()
}

const DEVICES: [&str; 4] = [
    "gfx90a:sramecc+:xnack+",
    "gfx906:sramecc+:xnack-",
    "gfx1030",
    "gfx942:sramecc+:xnack-",
];

#[test]
fn clr_takes_native_then_generic_then_spirv_in_a_mixed_bundle() {
    let (native, generic) = (
        corpus("saxpy.gfx90a_xnack+.co"),
        corpus("saxpy.gfx9-generic.co"),
    );
    for spirv_id in [
        "hip-spirv64-amd-amdhsa--amdgcnspirv",
        "hip-spirv64-amd-amdhsa-unknown-amdgcnspirv",
        "hipv4-spirv64-amd-amdhsa--amdgcnspirv",
    ] {
        // SPIR-V first in header order, as clang's default HIP path writes it beside ELF.
        let data = bundle(&[
            ("host-x86_64-unknown-linux-gnu-", b""),
            (spirv_id, &SPIRV),
            ("hipv4-amdgcn-amd-amdhsa--gfx9-generic", &generic),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", &native),
        ]);
        let clr = SelectOptions {
            policy: Policy::FirstByClass,
            ..SelectOptions::default()
        };
        let spirv = Some(spirv_id.to_string());
        let want = vec![
            Some("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+".to_string()),
            Some("hipv4-amdgcn-amd-amdhsa--gfx9-generic".to_string()),
            spirv.clone(),
            spirv.clone(),
        ];
        assert_eq!(chosen(&data, &DEVICES, &clr), want, "{spirv_id}");
        // The ranking agrees with CLR here; comgr's and LLVM offload's first compatible
        // entry is the SPIR-V one, first in the file.
        assert_eq!(chosen(&data, &DEVICES, &SelectOptions::default()), want);
        let first = SelectOptions {
            policy: Policy::First,
            ..SelectOptions::default()
        };
        assert_eq!(chosen(&data, &DEVICES, &first), vec![spirv.clone(); 4]);
        // HIP_FORCE_SPIRV_CODEOBJECT: every device takes the SPIR-V entry, whatever the policy.
        for policy in [Policy::FirstByClass, Policy::Best, Policy::First] {
            let forced = SelectOptions {
                policy,
                force_spirv: true,
                ..SelectOptions::default()
            };
            assert_eq!(chosen(&data, &DEVICES, &forced), vec![spirv.clone(); 4]);
        }
    }
}

#[test]
fn forced_spirv_without_a_spirv_entry_gives_nothing() {
    // CLR's last branch: "No compatible code objects found for: …, value of
    // HIP_FORCE_SPIRV_CODEOBJECT: 1"; it does not fall back to the native object.
    let native = corpus("saxpy.gfx90a_xnack+.co");
    let data = bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", &native)]);
    let forced = SelectOptions {
        policy: Policy::FirstByClass,
        force_spirv: true,
        ..SelectOptions::default()
    };
    assert_eq!(chosen(&data, &DEVICES[..1], &forced), vec![None]);
    let image = Image::from_id(
        0,
        offload_image::Format::Bundle,
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
        &native,
    );
    let device = Device::parse(DEVICES[0]).unwrap();
    match offload_image::select::explain(&image, &device, &forced) {
        Verdict::Rejected(r) => {
            assert_eq!(r, Rejection::ForcedSpirv);
            assert!(r.to_string().contains("HIP_FORCE_SPIRV_CODEOBJECT"), "{r}");
        }
        v => panic!("{v:?}"),
    }
    // Code for another processor keeps its own reason.
    let other = Device::parse("gfx1030").unwrap();
    match offload_image::select::explain(&image, &other, &forced) {
        Verdict::Rejected(Rejection::Processor { .. }) => {}
        v => panic!("{v:?}"),
    }
    // Unset, it is chosen.
    assert_eq!(
        chosen(&data, &DEVICES[..1], &SelectOptions::default()),
        vec![Some("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+".to_string())]
    );
}

#[test]
fn the_variable_is_read_as_clr_reads_a_bool_flag() {
    // Set: exactly "true", or atoi() not zero.
    for v in [
        "true",
        "1",
        "2",
        "-1",
        " 1",
        "\t3",
        "+1",
        "7x",
        "01",
        "2147483648",
        "99999999999999999999",
    ] {
        assert!(hip_force_spirv(Some(v)), "{v:?}");
    }
    // Unset: anything else, an empty value (CLR stores " "), a number whose int is 0.
    for v in [
        "",
        " ",
        "0",
        "false",
        "TRUE",
        "True",
        "yes",
        "on",
        "x1",
        "-0",
        "4294967296",
        "-99999999999999999999",
    ] {
        assert!(!hip_force_spirv(Some(v)), "{v:?}");
    }
    assert!(!hip_force_spirv(None));
    // SelectOptions::default() leaves it unset.
    assert!(!SelectOptions::default().force_spirv);
}
