//! Table-driven selection over every bundle, CCOB and OffloadBinary of the corpus
//! (`tests/data/corpus`) × 25 devices.
//!
//! Every expected choice below was derived by hand from `COMPATIBILITY.md` (§5.1 predicate,
//! §9.2 NVIDIA rules, §9.4/§10 ranking), not from this crate's output; a device not listed
//! for a file expects *no* compatible image. The bytes of every selected image are also
//! compared with the SHA-256 that LLVM's own tools extracted for that entry
//! (`MANIFEST.jsonl`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use offload_image::container::UnitContent;
use offload_image::select::{check, Rejection, Verdict};
use offload_image::{
    for_each_unit, identify, Device, Image, KindFilter, Policy, ReadOptions, SelectOptions,
};

use crate::common;
use common::sha256;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/corpus");

/// The devices: Any/On/Off/unknown feature states, unsupported features, generic family
/// members, processors with no family, and CUDA compute capabilities from 7.0 to 12.0.
const DEVICES: &[&str] = &[
    "gfx906:sramecc+:xnack-",
    "gfx906:sramecc-:xnack+",
    "gfx906",
    "gfx90a:sramecc+:xnack+",
    "gfx90a:sramecc+:xnack-",
    "gfx90a",
    "gfx942:sramecc+:xnack-",
    "gfx942:sramecc-:xnack-",
    "gfx1030",
    "gfx1031",
    "gfx1100",
    "gfx1101",
    "gfx900:xnack-",
    "gfx1201",
    "gfx908:sramecc+:xnack-",
    "gfx950:sramecc+:xnack+",
    "sm_70",
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_89",
    "sm_90",
    "sm_100",
    "sm_103",
    "sm_120",
];

type Expect = &'static [(&'static str, &'static str)];

const V4: &str = "hipv4-amdgcn-amd-amdhsa--";

macro_rules! hipv4 {
    ($t:literal) => {
        concat!("hipv4-amdgcn-amd-amdhsa--", $t)
    };
}
macro_rules! hip {
    ($t:literal) => {
        concat!("hip-amdgcn-amd-amdhsa--", $t)
    };
}

/// `bundles/hip_6arch.bundle` and its five compressed copies: gfx906 (any), gfx90a:xnack+,
/// gfx90a:xnack-, gfx942:sramecc+:xnack-, gfx1030, gfx1100.
const HIP6: Expect = &[
    ("gfx906:sramecc+:xnack-", hipv4!("gfx906")),
    ("gfx906:sramecc-:xnack+", hipv4!("gfx906")),
    ("gfx906", hipv4!("gfx906")),
    ("gfx90a:sramecc+:xnack+", hipv4!("gfx90a:xnack+")),
    ("gfx90a:sramecc+:xnack-", hipv4!("gfx90a:xnack-")),
    // gfx90a with unknown xnack: both gfx90a entries state xnack -> none.
    ("gfx942:sramecc+:xnack-", hipv4!("gfx942:sramecc+:xnack-")),
    // gfx942 with sramecc-: the only gfx942 entry is sramecc+ -> none.
    ("gfx1030", hipv4!("gfx1030")),
    // gfx1031: gfx1030 code does not run on it, no generic entry -> none.
    ("gfx1100", hipv4!("gfx1100")),
];

/// Two entries: gfx906 (any) and gfx90a:xnack+, kind `hipv4`.
const HIPV4_906_90AXP: Expect = &[
    ("gfx906:sramecc+:xnack-", hipv4!("gfx906")),
    ("gfx906:sramecc-:xnack+", hipv4!("gfx906")),
    ("gfx906", hipv4!("gfx906")),
    ("gfx90a:sramecc+:xnack+", hipv4!("gfx90a:xnack+")),
];

/// The same with kind `hip`.
const HIP_906_90AXP: Expect = &[
    ("gfx906:sramecc+:xnack-", hip!("gfx906")),
    ("gfx906:sramecc-:xnack+", hip!("gfx906")),
    ("gfx906", hip!("gfx906")),
    ("gfx90a:sramecc+:xnack+", hip!("gfx90a:xnack+")),
];

/// OffloadBinaries gfx906 and gfx90a:xnack+ (kind hip, bitcode).
const OB_906_90AXP: Expect = &[
    ("gfx906:sramecc+:xnack-", "amdgcn-amd-amdhsa--gfx906"),
    ("gfx906:sramecc-:xnack+", "amdgcn-amd-amdhsa--gfx906"),
    ("gfx906", "amdgcn-amd-amdhsa--gfx906"),
    ("gfx90a:sramecc+:xnack+", "amdgcn-amd-amdhsa--gfx90a:xnack+"),
];

/// `bundles/hip_generic.bundle`: gfx9-generic, gfx10-3-generic, gfx11-generic (V6, generic
/// version 1) and gfx90a (any).
const GENERIC: Expect = &[
    ("gfx906:sramecc+:xnack-", hipv4!("gfx9-generic")),
    ("gfx906:sramecc-:xnack+", hipv4!("gfx9-generic")),
    ("gfx906", hipv4!("gfx9-generic")),
    ("gfx90a:sramecc+:xnack+", hipv4!("gfx90a")),
    ("gfx90a:sramecc+:xnack-", hipv4!("gfx90a")),
    ("gfx90a", hipv4!("gfx90a")),
    // gfx942: no gfx9-4-generic entry; gfx9-generic does not cover it -> none.
    ("gfx1030", hipv4!("gfx10-3-generic")),
    ("gfx1031", hipv4!("gfx10-3-generic")),
    ("gfx1100", hipv4!("gfx11-generic")),
    ("gfx1101", hipv4!("gfx11-generic")),
    ("gfx900:xnack-", hipv4!("gfx9-generic")),
    // gfx1201 (gfx12-generic), gfx908 (no family), gfx950 (gfx9-4-generic) -> none.
];

/// openmp gfx90a (any) + openmp sm_80 PTX (or bitcode).
const OMP_AMD_NV: Expect = &[
    ("gfx90a:sramecc+:xnack+", "openmp-amdgcn-amd-amdhsa--gfx90a"),
    ("gfx90a:sramecc+:xnack-", "openmp-amdgcn-amd-amdhsa--gfx90a"),
    ("gfx90a", "openmp-amdgcn-amd-amdhsa--gfx90a"),
    // PTX sm_80: compute capability >= 8.0 (sm_70, sm_75 -> none).
    ("sm_80", "openmp-nvptx64-nvidia-cuda--sm_80"),
    ("sm_86", "openmp-nvptx64-nvidia-cuda--sm_80"),
    ("sm_89", "openmp-nvptx64-nvidia-cuda--sm_80"),
    ("sm_90", "openmp-nvptx64-nvidia-cuda--sm_80"),
    ("sm_100", "openmp-nvptx64-nvidia-cuda--sm_80"),
    ("sm_103", "openmp-nvptx64-nvidia-cuda--sm_80"),
    ("sm_120", "openmp-nvptx64-nvidia-cuda--sm_80"),
];

/// `driver/omp_amd_nv.o`: OffloadBinaries, openmp bitcode gfx90a and sm_80 (JIT).
const OMP_AMD_NV_OB: Expect = &[
    ("gfx90a:sramecc+:xnack+", "amdgcn-amd-amdhsa--gfx90a"),
    ("gfx90a:sramecc+:xnack-", "amdgcn-amd-amdhsa--gfx90a"),
    ("gfx90a", "amdgcn-amd-amdhsa--gfx90a"),
    ("sm_80", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_86", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_89", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_90", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_100", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_103", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_120", "nvptx64-nvidia-cuda--sm_80"),
];

const GFX90A_ANY_OB: Expect = &[
    ("gfx90a:sramecc+:xnack+", "amdgcn-amd-amdhsa--gfx90a"),
    ("gfx90a:sramecc+:xnack-", "amdgcn-amd-amdhsa--gfx90a"),
    ("gfx90a", "amdgcn-amd-amdhsa--gfx90a"),
];

/// `nvptx/cuda_cubins.offbin`: PTX sm_70, cubins sm_80, sm_90a, sm_100f (kind cuda).
const CUDA_CUBINS: Expect = &[
    ("sm_70", "nvptx64-nvidia-cuda--sm_70"),    // PTX, exact
    ("sm_75", "nvptx64-nvidia-cuda--sm_70"),    // PTX (the sm_80 cubin is another major)
    ("sm_80", "nvptx64-nvidia-cuda--sm_80"),    // exact cubin
    ("sm_86", "nvptx64-nvidia-cuda--sm_80"),    // same-major cubin beats PTX
    ("sm_89", "nvptx64-nvidia-cuda--sm_80"),    // same-major cubin
    ("sm_90", "nvptx64-nvidia-cuda--sm_90a"),   // exact `a` cubin
    ("sm_100", "nvptx64-nvidia-cuda--sm_100f"), // exact `f` cubin
    ("sm_103", "nvptx64-nvidia-cuda--sm_100f"), // `f`: same major, later minor
    ("sm_120", "nvptx64-nvidia-cuda--sm_70"),   // only the PTX runs on 12.0
];

/// `nvptx/cuda_fatbin.offbin`: one fatbinary, arch sm_80 (passed to the driver whole).
const CUDA_FATBIN: Expect = &[
    ("sm_80", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_86", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_89", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_90", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_100", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_103", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_120", "nvptx64-nvidia-cuda--sm_80"),
];

/// `nvptx/omp_cubins.offbin`: CUDA 13 cubins sm_80 and sm_100a (the `a` is not in e_flags),
/// PTX sm_90a.
const OMP_CUBINS: Expect = &[
    ("sm_80", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_86", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_89", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_90", "nvptx64-nvidia-cuda--sm_90a"), // `a` PTX: exactly 9.0
    ("sm_100", "nvptx64-nvidia-cuda--sm_100a"),
    // sm_103, sm_120: `a` code needs an exact match, sm_80 is another major -> none.
];

/// `nvptx/omp_nv_cubins.bundle` (and its CCOB): PTX sm_70, cubins sm_80, sm_90, sm_100a.
const OMP_NV_CUBINS: Expect = &[
    ("sm_70", "openmp-nvptx64-nvidia-cuda-unknown-sm_70"),
    ("sm_75", "openmp-nvptx64-nvidia-cuda-unknown-sm_70"),
    ("sm_80", "openmp-nvptx64-nvidia-cuda-unknown-sm_80"),
    ("sm_86", "openmp-nvptx64-nvidia-cuda-unknown-sm_80"),
    ("sm_89", "openmp-nvptx64-nvidia-cuda-unknown-sm_80"),
    ("sm_90", "openmp-nvptx64-nvidia-cuda-unknown-sm_90"),
    ("sm_100", "openmp-nvptx64-nvidia-cuda-unknown-sm_100a"),
    ("sm_103", "openmp-nvptx64-nvidia-cuda-unknown-sm_70"), // sm_100a is exact-only
    ("sm_120", "openmp-nvptx64-nvidia-cuda-unknown-sm_70"),
];

const GFX90A_XNACKP_OB: Expect = &[("gfx90a:sramecc+:xnack+", "amdgcn-amd-amdhsa--gfx90a:xnack+")];

const CONCAT: Expect = &[
    ("gfx90a:sramecc+:xnack+", "amdgcn-amd-amdhsa--gfx90a:xnack+"),
    (
        "gfx942:sramecc+:xnack-",
        "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
    ),
];

const EXTRA_KEYS: Expect = &[(
    "gfx942:sramecc+:xnack-",
    "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
)];

/// `packager/multi3.offbin`: gfx90a:xnack+ ELF (openmp), sm_80 PTX (cuda), sm_80 bitcode
/// (openmp). The PTX and the bitcode tie exactly (both JIT, same architecture): discovery
/// order picks the PTX.
const MULTI3: Expect = &[
    ("gfx90a:sramecc+:xnack+", "amdgcn-amd-amdhsa--gfx90a:xnack+"),
    ("sm_80", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_86", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_89", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_90", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_100", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_103", "nvptx64-nvidia-cuda--sm_80"),
    ("sm_120", "nvptx64-nvidia-cuda--sm_80"),
];

/// Text bundles hold source, IR or assembly text: nothing is loadable.
const NOTHING: Expect = &[];

/// (file, number of units, expectations for every unit).
const FILES: &[(&str, usize, Expect)] = &[
    ("bundles/hip_6arch.bundle", 1, HIP6),
    ("compressed/hip_6arch.v1-zstd.ccob", 1, HIP6),
    ("compressed/hip_6arch.v3-zstd.llvm22.ccob", 1, HIP6),
    ("compressed/hip_6arch.zlib.ccob", 1, HIP6),
    ("compressed/hip_6arch.zstd-l19.ccob", 1, HIP6),
    ("compressed/hip_6arch.zstd.ccob", 1, HIP6),
    ("bundles/hip_3field.bundle", 1, HIP_906_90AXP),
    (
        "bundles/hip_align4096.bundle",
        1,
        &[
            ("gfx906:sramecc+:xnack-", hipv4!("gfx906")),
            ("gfx906:sramecc-:xnack+", hipv4!("gfx906")),
            ("gfx906", hipv4!("gfx906")),
            ("gfx90a:sramecc+:xnack+", hipv4!("gfx90a:xnack+")),
            ("gfx1100", hipv4!("gfx1100")),
        ],
    ),
    ("bundles/hip_bc.bundle", 1, HIPV4_906_90AXP),
    ("bundles/hip_generic.bundle", 1, GENERIC),
    ("bundles/hip_nohost.bundle", 1, HIP_906_90AXP),
    (
        "bundles/hip_unsorted.bundle",
        1,
        &[
            ("gfx906:sramecc+:xnack-", hipv4!("gfx906")),
            ("gfx906:sramecc-:xnack+", hipv4!("gfx906")),
            ("gfx906", hipv4!("gfx906")),
            ("gfx90a:sramecc+:xnack-", hipv4!("gfx90a:xnack-")),
            ("gfx1100", hipv4!("gfx1100")),
        ],
    ),
    ("bundles/host_elf.bundle.o", 1, HIPV4_906_90AXP),
    ("bundles/omp_amd_nv.bundle", 1, OMP_AMD_NV),
    ("compressed/omp_amd_nv.zstd.ccob", 1, OMP_AMD_NV),
    ("driver/hip_compress.exe", 1, HIPV4_906_90AXP),
    ("driver/hip_compress.o", 1, HIPV4_906_90AXP),
    ("driver/hip_newdrv.o", 1, HIPV4_906_90AXP),
    ("driver/hip_newdrv_rdc.exe", 1, HIP_906_90AXP),
    ("driver/hip_newdrv_rdc.o", 1, OB_906_90AXP),
    ("driver/hip_nonrdc.exe", 1, HIPV4_906_90AXP),
    ("driver/hip_nonrdc.o", 1, HIPV4_906_90AXP),
    ("driver/hip_rdc.exe", 1, HIPV4_906_90AXP),
    ("driver/hip_rdc.o", 1, HIP_906_90AXP),
    ("driver/libfat.a", 2, HIP_906_90AXP),
    ("driver/omp_amd.exe", 1, GFX90A_ANY_OB),
    ("driver/omp_amd_nv.o", 1, OMP_AMD_NV_OB),
    ("nvptx/cuda_cubins.offbin", 1, CUDA_CUBINS),
    ("nvptx/cuda_fatbin.offbin", 1, CUDA_FATBIN),
    ("nvptx/omp_cubins.offbin", 1, OMP_CUBINS),
    ("nvptx/omp_nv_cubins.bundle", 1, OMP_NV_CUBINS),
    ("nvptx/omp_nv_cubins.v3-zstd.llvm22.ccob", 1, OMP_NV_CUBINS),
    (
        "packager/amdgcn_gfx90a_xnack+.openmp.offbin",
        1,
        GFX90A_XNACKP_OB,
    ),
    ("packager/concat.offbin", 1, CONCAT),
    ("packager/extra_keys.offbin", 1, EXTRA_KEYS),
    ("packager/hip_bc.offbin", 1, OB_906_90AXP),
    ("packager/multi3.offbin", 1, MULTI3),
    ("text/hip.s.bundle", 1, NOTHING),
    ("text/omp.i.bundle", 1, NOTHING),
    ("text/omp.ll.bundle", 1, NOTHING),
];

/// How `loader-sim select` names an image (`CLI.md`).
fn name(image: &Image<'_>) -> String {
    match (image.entry_id, image.triple, image.target_id) {
        (Some(id), _, _) => id.to_string(),
        (None, Some(t), Some(a)) => format!("{t}--{a}"),
        _ => format!("{:?}", identify(image).target),
    }
}

/// SHA-256 of every image LLVM's tools extracted, by (file, name).
fn manifest() -> BTreeMap<(String, String), BTreeSet<String>> {
    let text = std::fs::read_to_string(Path::new(CORPUS).join("MANIFEST.jsonl")).unwrap();
    let mut m: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let file = r["file"].as_str().unwrap_or("").to_string();
        let key = match r["record"].as_str() {
            Some("entry") => r["entry_id"].as_str().map(str::to_string),
            Some("image") => Some(format!(
                "{}--{}",
                r["triple"].as_str().unwrap_or(""),
                r["arch"].as_str().unwrap_or("")
            )),
            _ => None,
        };
        if let (Some(key), Some(sha)) = (key, r["sha256"].as_str()) {
            m.entry((file, key)).or_default().insert(sha.to_string());
        }
    }
    m
}

/// Runs `f` with the images of every unit of `file`.
fn with_units(file: &str, mut f: impl FnMut(&[Image<'_>])) -> usize {
    let data = std::fs::read(Path::new(CORPUS).join(file)).unwrap();
    let options = ReadOptions::default();
    let mut units = 0;
    for_each_unit(&data, &options, |unit| {
        if matches!(unit.content, UnitContent::NvFatbin(_)) {
            // The fatbinary an OffloadBinary wraps is a unit of its own, checked against
            // cuobjdump by tests/suite/nvfatbin.rs (selection_table).
            return Ok(());
        }
        let open = unit.open(&options)?;
        let images: Vec<Image<'_>> = open.images().collect();
        f(&images);
        units += 1;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{file}: {e}"));
    units
}

#[test]
fn corpus_times_devices() {
    let manifest = manifest();
    let devices: Vec<Device> = DEVICES.iter().map(|d| Device::parse(d).unwrap()).collect();
    let options = SelectOptions::default();
    let (mut cells, mut hashed, mut selected) = (0, 0, 0);
    for (file, want_units, expect) in FILES {
        for (d, _) in *expect {
            assert!(DEVICES.contains(d), "{file}: unknown device {d}");
        }
        let units = with_units(file, |images| {
            for (dname, device) in DEVICES.iter().zip(&devices) {
                let want = expect.iter().find(|(d, _)| d == dname).map(|(_, i)| *i);
                let s = offload_image::select(images, device, &options);
                let got = s.chosen().map(|i| &images[i]);
                assert_eq!(
                    got.map(name).as_deref(),
                    want,
                    "{file} on {dname}: {:?}",
                    images
                        .iter()
                        .map(|im| (name(im), check(&identify(im), im.index, device, &options)))
                        .collect::<Vec<_>>()
                );
                cells += 1;
                if let Some(img) = got {
                    selected += 1;
                    if let Some(hashes) = manifest.get(&(file.to_string(), name(img))) {
                        let bytes = img.decode(&ReadOptions::default()).unwrap();
                        assert!(hashes.contains(&sha256(&bytes)), "{file}: {}", name(img));
                        hashed += 1;
                    } else {
                        // Only the second archive member of libfat.a is not in the manifest.
                        assert_eq!(
                            *file,
                            "driver/libfat.a",
                            "{file}: {} not in manifest",
                            name(img)
                        );
                    }
                }
            }
        });
        assert_eq!(units, *want_units, "{file}: units");
    }
    let corpus_files = ["bundles", "compressed", "packager", "nvptx", "text"]
        .iter()
        .flat_map(|d| std::fs::read_dir(Path::new(CORPUS).join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| {
            !p.extension()
                .is_some_and(|x| x == "fatbin" || x == "cubin" || x == "s")
        })
        .count();
    let listed = FILES
        .iter()
        .filter(|(f, _, _)| !f.starts_with("driver/"))
        .count();
    assert_eq!(
        listed, corpus_files,
        "every container file of the corpus is in the table"
    );
    assert!(DEVICES.len() >= 20);
    eprintln!("{cells} (unit, device) cells, {selected} selections, {hashed} checked against LLVM's bytes");
    assert!(hashed >= selected - 8);
}

/// Offload kinds (`COMPATIBILITY.md` §1.3): hip/hipv4 are interchangeable, openmp only in
/// HIP-OpenMP compatible mode, cuda only for cuda.
#[test]
fn kinds_filter() {
    let cases: &[(&str, &str, KindFilter, bool, Option<&str>)] = &[
        (
            "bundles/hip_6arch.bundle",
            "gfx906",
            KindFilter::Hip,
            false,
            Some(hipv4!("gfx906")),
        ),
        (
            "bundles/hip_3field.bundle",
            "gfx906",
            KindFilter::Hip,
            false,
            Some(hip!("gfx906")),
        ),
        (
            "bundles/hip_6arch.bundle",
            "gfx906",
            KindFilter::OpenMp,
            false,
            None,
        ),
        (
            "bundles/hip_6arch.bundle",
            "gfx906",
            KindFilter::OpenMp,
            true,
            Some(hipv4!("gfx906")),
        ),
        (
            "bundles/omp_amd_nv.bundle",
            "gfx90a",
            KindFilter::Hip,
            false,
            None,
        ),
        (
            "bundles/omp_amd_nv.bundle",
            "gfx90a",
            KindFilter::Hip,
            true,
            Some("openmp-amdgcn-amd-amdhsa--gfx90a"),
        ),
        (
            "bundles/omp_amd_nv.bundle",
            "sm_80",
            KindFilter::Cuda,
            false,
            None,
        ),
        (
            "packager/multi3.offbin",
            "sm_80",
            KindFilter::Cuda,
            false,
            Some("nvptx64-nvidia-cuda--sm_80"),
        ),
        (
            "packager/concat.offbin",
            "gfx90a:sramecc+:xnack+",
            KindFilter::Hip,
            false,
            None,
        ),
        (
            "packager/concat.offbin",
            "gfx942:sramecc+:xnack-",
            KindFilter::Hip,
            false,
            Some("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"),
        ),
        (
            "driver/hip_newdrv_rdc.exe",
            "gfx906",
            KindFilter::Hip,
            false,
            Some(hip!("gfx906")),
        ),
    ];
    for (file, dev, kind, compat, want) in cases {
        let device = Device::parse(dev).unwrap();
        let options = SelectOptions {
            kind: *kind,
            hip_openmp_compatible: *compat,
            ..SelectOptions::default()
        };
        with_units(file, |images| {
            let s = offload_image::select(images, &device, &options);
            assert_eq!(
                s.chosen().map(|i| name(&images[i])).as_deref(),
                *want,
                "{file} {dev} {kind:?}"
            );
        });
    }
    // The `openmp` bitcode of multi3 for OpenMP, the PTX for CUDA.
    let device = Device::parse("sm_80").unwrap();
    let options = SelectOptions {
        kind: KindFilter::OpenMp,
        ..SelectOptions::default()
    };
    with_units("packager/multi3.offbin", |images| {
        let s = offload_image::select(images, &device, &options);
        let img = &images[s.chosen().unwrap()];
        assert_eq!(img.image_kind, offload_image::ImageKind::Bitcode);
    });
}

/// Without a JIT, bitcode-only units have nothing; the PTX-only fallbacks disappear.
#[test]
fn no_jit() {
    let options = SelectOptions {
        allow_jit: false,
        ..SelectOptions::default()
    };
    for (file, dev, want) in [
        ("bundles/hip_bc.bundle", "gfx906", None),
        ("driver/hip_rdc.o", "gfx906", None),
        ("nvptx/cuda_cubins.offbin", "sm_120", None),
        (
            "nvptx/cuda_cubins.offbin",
            "sm_86",
            Some("nvptx64-nvidia-cuda--sm_80"),
        ),
        ("bundles/hip_6arch.bundle", "gfx906", Some(hipv4!("gfx906"))),
    ] {
        let device = Device::parse(dev).unwrap();
        with_units(file, |images| {
            let s = offload_image::select(images, &device, &options);
            assert_eq!(
                s.chosen().map(|i| name(&images[i])).as_deref(),
                want,
                "{file} {dev}"
            );
            if want.is_none() {
                assert!(images.iter().any(|im| matches!(
                    check(&identify(im), im.index, &device, &options),
                    Verdict::Rejected(Rejection::JitNotAllowed(_))
                )));
            }
        });
    }
}

/// Policies agree on compiler-produced containers (`COMPATIBILITY.md` §10: the combination
/// rule leaves at most one native candidate per device state).
#[test]
fn policies_agree_on_compiler_output() {
    let devices: Vec<Device> = DEVICES.iter().map(|d| Device::parse(d).unwrap()).collect();
    for (file, _, _) in FILES {
        with_units(file, |images| {
            for device in &devices {
                let pick = |policy| {
                    let o = SelectOptions {
                        policy,
                        ..SelectOptions::default()
                    };
                    offload_image::select(images, device, &o).chosen()
                };
                let best = pick(Policy::Best);
                if *file != "nvptx/cuda_cubins.offbin"
                    && *file != "nvptx/omp_nv_cubins.bundle"
                    && *file != "nvptx/omp_nv_cubins.v3-zstd.llvm22.ccob"
                {
                    assert_eq!(pick(Policy::First), best, "{file} {device}");
                }
                assert_eq!(pick(Policy::FirstByClass), best, "{file} {device}");
            }
        });
    }
}

/// Every rejection on the corpus has a reason a person reads; spot-check the wording.
#[test]
fn reasons_on_the_corpus() {
    let mut seen = BTreeSet::new();
    for (dev, file) in [
        ("gfx90a:sramecc+:xnack-", "bundles/hip_6arch.bundle"),
        ("gfx1031", "bundles/hip_6arch.bundle"),
        ("gfx942:sramecc-:xnack-", "bundles/hip_6arch.bundle"),
        ("gfx90a", "bundles/hip_6arch.bundle"),
        ("gfx942:sramecc+:xnack-", "bundles/hip_generic.bundle"),
        ("sm_103", "nvptx/omp_cubins.offbin"),
        ("sm_75", "nvptx/cuda_cubins.offbin"),
        ("gfx906", "text/hip.s.bundle"),
    ] {
        let device = Device::parse(dev).unwrap();
        with_units(file, |images| {
            for im in images {
                if let Verdict::Rejected(r) =
                    check(&identify(im), im.index, &device, &SelectOptions::default())
                {
                    seen.insert(format!("{dev}: {}: {r}", name(im)));
                }
            }
        });
    }
    for want in [
        format!("gfx90a:sramecc+:xnack-: {V4}gfx90a:xnack+: built for xnack+, device has xnack-"),
        format!("gfx1031: {V4}gfx1030: gfx1030 code does not run on gfx1031"),
        format!("gfx942:sramecc-:xnack-: {V4}gfx942:sramecc+:xnack-: built for sramecc+, device has sramecc-"),
        format!("gfx90a: {V4}gfx90a:xnack+: built for xnack+, device has an unknown xnack mode"),
        format!("gfx942:sramecc+:xnack-: {V4}gfx9-generic: gfx9-generic code does not run on gfx942 (its generic family is gfx9-4-generic)"),
        "sm_103: nvptx64-nvidia-cuda--sm_100a: sm_100a cubin runs only on compute capability 10.0, device is 10.3".to_string(),
        "sm_103: nvptx64-nvidia-cuda--sm_80: sm_80 cubin runs only on compute capability 8.x, device is 10.3".to_string(),
        "sm_75: nvptx64-nvidia-cuda--sm_80: sm_80 cubin runs only on compute capability 8.x, device is 7.5".to_string(),
        "sm_103: nvptx64-nvidia-cuda--sm_90a: sm_90a PTX runs only on compute capability 9.0, device is 10.3".to_string(),
        "gfx906: host-x86_64-unknown-linux-gnu-: host code, not a device image".to_string(),
        format!("gfx906: {V4}gfx906: not loadable device code (text, host object or unrecognised bytes)"),
    ] {
        assert!(seen.contains(&want), "missing: {want}\nhave: {seen:#?}");
    }
}
