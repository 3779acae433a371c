//! AMDGPU subarch triples (`COMPATIBILITY.md` §1.5): `amdgpu9.42-amd-amdhsa` names gfx942,
//! `amdgpu9.4` gfx9-4-generic, `amdgcn` stays the legacy spelling (llvm/llvm-project#206480,
//! #211866, #219963). An entry ID in either spelling reads to the same device; a bundle
//! whose IDs use subarch triples is listed, selected and validated.
//!
//! The oracles: the spellings clang writes for every `-mcpu`
//! (llvm/llvm-project `clang/test/Driver/amdgpu-mcpu.cl` at
//! 38e548ab806c7d5f28a99d8e30338c21cc9d38ca, copied below as `CLANG_WRITES`), LLVM's own
//! table (`parseSubArch`, `llvm/lib/TargetParser/Triple.cpp` at
//! 4da0108e1c799747a4192337d60b9c2c3720823f: also `9.5` and `10`, the families `6`, `7`,
//! `8`, nothing else), and for the code objects of the bundles the `e_flags` llvm-readelf
//! gives (`tests/data/corpus/MANIFEST.jsonl`). No tool writes such bundles yet (LLVM 22's
//! `clang-offload-bundler`, and so `loader-sim offload-bundler`, refuses the triple as
//! "unknown target triple"): they are written here by `FORMATS.md` §2.1.

use crate::common;

use common::binary_bundle as bundle;
use offload_image::arch::{identify, Processor, Subarch, Target};
use offload_image::select::{explain, Verdict};
use offload_image::validate::{validate, Code};
use offload_image::{choose, units, Device, Format, Image, ReadOptions, SelectOptions};

/// `-mcpu` → the triple clang writes (`amdgpu-mcpu.cl`, its GFX* and *_GENERIC lines).
const CLANG_WRITES: &[(&str, &str)] = &[
    ("gfx600", "amdgpu6.00"),
    ("gfx601", "amdgpu6.01"),
    ("gfx602", "amdgpu6.02"),
    ("gfx700", "amdgpu7.00"),
    ("gfx701", "amdgpu7.01"),
    ("gfx702", "amdgpu7.02"),
    ("gfx703", "amdgpu7.03"),
    ("gfx704", "amdgpu7.04"),
    ("gfx705", "amdgpu7.05"),
    ("gfx801", "amdgpu8.01"),
    ("gfx802", "amdgpu8.02"),
    ("gfx803", "amdgpu8.03"),
    ("gfx805", "amdgpu8.05"),
    ("gfx810", "amdgpu8.10"),
    ("gfx900", "amdgpu9.00"),
    ("gfx902", "amdgpu9.02"),
    ("gfx904", "amdgpu9.04"),
    ("gfx906", "amdgpu9.06"),
    ("gfx908", "amdgpu9.08"),
    ("gfx909", "amdgpu9.09"),
    ("gfx90a", "amdgpu9.0a"),
    ("gfx90c", "amdgpu9.0c"),
    ("gfx942", "amdgpu9.42"),
    ("gfx950", "amdgpu9.50"),
    ("gfx1010", "amdgpu10.10"),
    ("gfx1011", "amdgpu10.11"),
    ("gfx1012", "amdgpu10.12"),
    ("gfx1013", "amdgpu10.13"),
    ("gfx1030", "amdgpu10.30"),
    ("gfx1031", "amdgpu10.31"),
    ("gfx1032", "amdgpu10.32"),
    ("gfx1033", "amdgpu10.33"),
    ("gfx1034", "amdgpu10.34"),
    ("gfx1035", "amdgpu10.35"),
    ("gfx1036", "amdgpu10.36"),
    ("gfx1100", "amdgpu11.00"),
    ("gfx1101", "amdgpu11.01"),
    ("gfx1102", "amdgpu11.02"),
    ("gfx1103", "amdgpu11.03"),
    ("gfx1150", "amdgpu11.50"),
    ("gfx1151", "amdgpu11.51"),
    ("gfx1152", "amdgpu11.52"),
    ("gfx1153", "amdgpu11.53"),
    ("gfx1154", "amdgpu11.54"),
    ("gfx1170", "amdgpu11.70"),
    ("gfx1171", "amdgpu11.71"),
    ("gfx1172", "amdgpu11.72"),
    ("gfx1200", "amdgpu12.00"),
    ("gfx1201", "amdgpu12.01"),
    ("gfx1250", "amdgpu12.50"),
    ("gfx1251", "amdgpu12.51"),
    ("gfx1310", "amdgpu13.10"),
    ("gfx9-generic", "amdgpu9"),
    ("gfx9-4-generic", "amdgpu9.4"),
    ("gfx10-1-generic", "amdgpu10.1"),
    ("gfx10-3-generic", "amdgpu10.3"),
    ("gfx11-generic", "amdgpu11"),
    ("gfx11-7-generic", "amdgpu11.7"),
    ("gfx12-generic", "amdgpu12"),
    ("gfx12-5-generic", "amdgpu12.5"),
    ("gfx13-generic", "amdgpu13"),
];

fn corpus(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/data/corpus/devobj/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn every_triple_clang_writes_names_its_processor() {
    for &(cpu, arch) in CLANG_WRITES {
        let p = Processor::by_name(cpu).unwrap_or_else(|| panic!("{cpu} not in the table"));
        assert_eq!(
            Subarch::of_arch(arch),
            Some(Subarch::Processor(p)),
            "{arch}"
        );
        assert_eq!(
            p.subarch().map(|s| format!("amdgpu{s}")).as_deref(),
            Some(arch),
            "{cpu}"
        );
    }
    // The other spellings of LLVM's table, and what it does not have.
    let named = |a: &str| {
        Subarch::of_arch(a)
            .and_then(Subarch::processor)
            .map(|p| p.name)
    };
    assert_eq!(named("amdgpu9.5"), Some("gfx9-4-generic"));
    assert_eq!(named("amdgpu10"), Some("gfx10-1-generic"));
    for family in ["amdgpu6", "amdgpu7", "amdgpu8"] {
        assert_eq!(Subarch::of_arch(family), Some(Subarch::Family), "{family}");
    }
    for legacy in ["amdgcn", "amdgpu"] {
        assert_eq!(Subarch::of_arch(legacy), Some(Subarch::None), "{legacy}");
    }
    // gfx940 and gfx941 left LLVM before the subarch table was made; gfx1250-strict has no row.
    for unknown in ["amdgpu9.40", "amdgpu9.41", "amdgpu9.2", "amdgpu9.042"] {
        assert_eq!(
            Subarch::of_arch(unknown),
            Some(Subarch::Unknown),
            "{unknown}"
        );
    }
    for p in ["gfx940", "gfx941", "gfx1250-strict"] {
        assert_eq!(
            Processor::by_name(p).and_then(Processor::subarch),
            None,
            "{p}"
        );
    }
    assert_eq!(Subarch::of_arch("x86_64"), None);
    assert_eq!(Subarch::of_arch("nvptx64"), None);
}

/// The code objects of the corpus (file, target ID llvm-readelf gives, subarch clang writes).
const OBJECTS: &[(&str, &str, &str)] = &[
    ("saxpy.gfx90a_xnack+.co", "gfx90a:xnack+", "amdgpu9.0a"),
    (
        "saxpy.gfx942_sramecc+_xnack-.co",
        "gfx942:sramecc+:xnack-",
        "amdgpu9.42",
    ),
    ("saxpy.gfx1030.co", "gfx1030", "amdgpu10.30"),
    ("saxpy.gfx9-generic.co", "gfx9-generic", "amdgpu9"),
];

const DEVICES: &[&str] = &[
    "gfx90a:sramecc+:xnack+",
    "gfx90a:sramecc+:xnack-",
    "gfx942:sramecc+:xnack-",
    "gfx942:sramecc-:xnack+",
    "gfx1030",
    "gfx1031",
    "gfx906:sramecc+:xnack-",
    "gfx900:xnack+",
];

fn verdict(image: &Image<'_>, device: &str) -> Result<String, String> {
    match explain(
        image,
        &Device::parse(device).unwrap(),
        &SelectOptions::default(),
    ) {
        Verdict::Compatible(k) => Ok(format!("{:?}", k.class)),
        Verdict::Rejected(r) => Err(r.to_string()),
    }
}

#[test]
fn both_spellings_read_to_the_same_device() {
    for &(file, target, arch) in OBJECTS {
        let bytes = corpus(file);
        let processor = target.split(':').next().unwrap();
        let features = target.strip_prefix(processor).unwrap();
        let legacy = format!("hipv4-amdgcn-amd-amdhsa--{target}");
        let spellings = [
            format!("hipv4-{arch}-amd-amdhsa--{target}"),
            // The processor from the triple alone (AMDGPU::TargetID::parse: an empty or
            // `generic` processor takes the subarch's).
            format!("hipv4-{arch}-amd-amdhsa--{features}"),
            format!("hipv4-{arch}-amd-amdhsa--generic{features}"),
            format!("hipv4-{arch}-amd-amdhsa-unknown-{target}"),
        ];
        let old = Image::from_id(1, Format::Bundle, &legacy, &bytes);
        let old_id = identify(&old);
        assert_eq!(old_id.target.to_string(), target);
        for id in spellings.iter().filter(|s| !s.ends_with("--")) {
            let new = Image::from_id(1, Format::Bundle, id, &bytes);
            let new_id = identify(&new);
            assert_eq!(new_id.target, old_id.target, "{id}");
            assert_eq!(new_id.mismatch, None, "{id}");
            assert_eq!(new_id.arch(), Some("amdgcn"), "{id}");
            for device in DEVICES {
                assert_eq!(
                    verdict(&new, device),
                    verdict(&old, device),
                    "{id} on {device}"
                );
            }
        }
        // With no target ID at all (`hipv4-amdgpu9.42-amd-amdhsa--`), the ELF header gives the
        // features and the triple the processor.
        let bare = format!("hipv4-{arch}-amd-amdhsa--");
        let image = Image::from_id(1, Format::Bundle, &bare, &bytes);
        let id = identify(&image);
        assert_eq!(id.target.to_string(), target, "{bare}");
        assert_eq!(id.mismatch, None, "{bare}");
        assert_eq!(
            id.stated_target.amdgpu().map(|t| t.processor.name),
            Some(processor)
        );
    }
}

#[test]
fn a_target_id_naming_another_processor_is_refused() {
    // gfx90a code stored under gfx942's subarch: the container contradicts itself.
    let bytes = corpus("saxpy.gfx90a_xnack+.co");
    let image = Image::from_id(
        0,
        Format::Bundle,
        "hipv4-amdgpu9.42-amd-amdhsa--gfx90a:xnack+",
        &bytes,
    );
    let id = identify(&image);
    assert!(
        matches!(id.stated_target, Target::Invalid { .. }),
        "{:?}",
        id.stated_target
    );
    assert!(id.disagreement().is_some());
    // Without an ELF header nothing else names the processor: no device gets it.
    let image = Image::from_id(
        0,
        Format::Bundle,
        "hipv4-amdgpu9.42-amd-amdhsa--gfx90a",
        b"not code",
    );
    assert!(verdict(&image, "gfx90a:xnack+").is_err());
    assert!(verdict(&image, "gfx942:sramecc+:xnack-").is_err());
}

/// host, gfx90a:xnack+ (`amdgpu9.0a`), gfx942 (`amdgpu9.42`, processor from the triple) and
/// gfx9-generic (`amdgpu9`).
fn subarch_bundle() -> (Vec<u8>, [&'static str; 4]) {
    let ids = [
        "host-x86_64-unknown-linux-gnu-",
        "hipv4-amdgpu9.0a-amd-amdhsa--gfx90a:xnack+",
        "hipv4-amdgpu9.42-amd-amdhsa--:sramecc+:xnack-",
        "hipv4-amdgpu9-amd-amdhsa--gfx9-generic",
    ];
    let (a, b, c) = (
        corpus("saxpy.gfx90a_xnack+.co"),
        corpus("saxpy.gfx942_sramecc+_xnack-.co"),
        corpus("saxpy.gfx9-generic.co"),
    );
    let data = bundle(&[(ids[0], b""), (ids[1], &a), (ids[2], &b), (ids[3], &c)]);
    (data, ids)
}

#[test]
fn a_bundle_of_subarch_ids_is_listed_selected_and_validated() {
    let (data, ids) = subarch_bundle();
    let options = ReadOptions::default();
    let unit = units(&data, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let images: Vec<Image<'_>> = open.images().collect();
    // Listed: every entry, its ID as stored, its target from the triple and the header.
    let listed: Vec<(Option<&str>, String)> = images
        .iter()
        .map(|i| {
            let t = identify(i)
                .named_target()
                .map(|t| t.to_string())
                .unwrap_or_default();
            (i.entry_id, t)
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (Some(ids[0]), String::new()),
            (Some(ids[1]), "gfx90a:xnack+".to_string()),
            (Some(ids[2]), "gfx942:sramecc+:xnack-".to_string()),
            (Some(ids[3]), "gfx9-generic".to_string()),
        ]
    );
    // Selected: the native entry for its device; gfx906 and gfx900 get the gfx9-generic code
    // (ROCr's generic rule, COMPATIBILITY.md §4: both are members); gfx1030 gets nothing.
    let devices: Vec<Device> = [
        "gfx90a:sramecc+:xnack+",
        "gfx942:sramecc+:xnack-",
        "gfx906:sramecc+:xnack-",
        "gfx900:xnack+",
        "gfx1030",
        "gfx942:sramecc-:xnack-",
    ]
    .iter()
    .map(|d| Device::parse(d).unwrap())
    .collect();
    let choices = choose(images.iter().copied(), &devices, &SelectOptions::default());
    let chosen: Vec<Option<&str>> = choices
        .iter()
        .map(|c| c.image.and_then(|i| i.entry_id))
        .collect();
    assert_eq!(
        chosen,
        vec![
            Some(ids[1]),
            Some(ids[2]),
            Some(ids[3]),
            Some(ids[3]),
            None,
            None
        ]
    );
    // Validated: sound, but CLR does not look such entries up (one finding per HIP entry).
    let findings = validate(&data, &options);
    let codes: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| (f.code.name(), f.message.split('`').nth(1).unwrap_or("")))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("subarch-triple", ids[1]),
            ("subarch-triple", ids[2]),
            ("subarch-triple", ids[3]),
        ],
        "{findings:#?}"
    );
    assert!(findings
        .iter()
        .all(|f| f.code == Code::SubarchTriple && f.message.contains("hipv4-amdgcn-amd-amdhsa--")));
    // The same entries under the legacy spelling: no finding, the same choices.
    let legacy: Vec<String> = ids
        .iter()
        .map(|id| {
            id.replace("amdgpu9.0a", "amdgcn")
                .replace("amdgpu9.42-amd-amdhsa--", "amdgcn-amd-amdhsa--gfx942")
                .replace("amdgpu9-", "amdgcn-")
        })
        .collect();
    let (a, b, c) = (
        corpus("saxpy.gfx90a_xnack+.co"),
        corpus("saxpy.gfx942_sramecc+_xnack-.co"),
        corpus("saxpy.gfx9-generic.co"),
    );
    let old = bundle(&[
        (&legacy[0], b""),
        (&legacy[1], &a),
        (&legacy[2], &b),
        (&legacy[3], &c),
    ]);
    assert!(
        validate(&old, &options).is_empty(),
        "{:#?}",
        validate(&old, &options)
    );
    let unit = units(&old, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let old_choices = choose(open.images(), &devices, &SelectOptions::default());
    let old_chosen: Vec<Option<usize>> = old_choices
        .iter()
        .map(|c| c.image.map(|i| i.index))
        .collect();
    let new_chosen: Vec<Option<usize>> = choices.iter().map(|c| c.image.map(|i| i.index)).collect();
    assert_eq!(old_chosen, new_chosen);
}
