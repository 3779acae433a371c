//! `loader-sim register`: the corpus's clang-built executables and objects read statically,
//! and real ROCm libraries loaded with the runtime shim in place (`--load`).
//!
//! Expected choices follow the selection rules (`COMPATIBILITY.md` §5, §7.5, §10); the
//! expected bytes are those LLVM's tools extracted (`MANIFEST.jsonl`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::common;
use common::{corpus, external_lib, json_lines, loader_sim, manifest_sha};

/// `register FILE --device D... --json`, with its exit status.
fn register(file: &Path, devices: &[&str], extra: &[&str]) -> (Vec<Value>, i32, String) {
    let mut args = vec!["register", file.to_str().unwrap(), "--json"];
    for d in devices {
        args.push("--device");
        args.push(d);
    }
    args.extend_from_slice(extra);
    let out = loader_sim(&args);
    (
        json_lines(&out.stdout),
        out.status.code().expect("exit status, not a signal"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const FIELDS: [&str; 9] = [
    "device",
    "unit",
    "registration",
    "address",
    "selected",
    "size",
    "sha256",
    "entries",
    "entries_from",
];

/// The acceptance table: for each clang-built executable and device, the image the
/// selection rules require (`None`: the device gets nothing; `register` exits 1).
#[test]
fn corpus_executables_give_each_device_the_required_image() {
    let hip_any = "hipv4-amdgcn-amd-amdhsa--gfx906";
    let hip_xnack = "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+";
    // (file, registration, entries, [(device, expected image)])
    type Row = (
        &'static str,
        &'static str,
        &'static [&'static str],
        Vec<(&'static str, Option<&'static str>)>,
    );
    let hip_devices = |any: &'static str, xnack: &'static str| {
        vec![
            // gfx906 code is built for any xnack mode: every gfx906 takes it.
            ("gfx906", Some(any)),
            ("gfx906:xnack-", Some(any)),
            ("gfx906:xnack+", Some(any)),
            ("gfx90a:xnack+", Some(xnack)),
            ("gfx90a:sramecc+:xnack+", Some(xnack)),
            // Built for xnack+: not for an xnack- device, nor one whose mode is unknown.
            ("gfx90a:xnack-", None),
            ("gfx90a", None),
            ("gfx1030", None),
        ]
    };
    let rows: Vec<Row> = vec![
        (
            "driver/hip_nonrdc.exe",
            "hip",
            &["_Z5scalePff"],
            hip_devices(hip_any, hip_xnack),
        ),
        // --offload-compress: the same choice inside a CCOB v2 (bytes after decompression).
        (
            "driver/hip_compress.exe",
            "hip",
            &["_Z5scalePff"],
            hip_devices(hip_any, hip_xnack),
        ),
        (
            "driver/hip_rdc.exe",
            "hip",
            &["_Z5scalePff"],
            hip_devices(hip_any, hip_xnack),
        ),
        // New offload driver: `hip-` kind IDs, entries from hip_offloading_entries.
        (
            "driver/hip_newdrv_rdc.exe",
            "hip",
            &["_Z5scalePff"],
            hip_devices(
                "hip-amdgcn-amd-amdhsa--gfx906",
                "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
            ),
        ),
        // OpenMP: the descriptor's image is the linked gfx90a code object (xnack and
        // sramecc "any" in its e_flags), registered through __tgt_register_lib.
        (
            "driver/omp_amd.exe",
            "openmp",
            &["__omp_offloading_fe00_5100a5_omp_saxpy_l3"],
            vec![
                ("gfx90a:xnack+", Some("amdgcn-amd-amdhsa--gfx90a")),
                ("gfx90a:sramecc-:xnack-", Some("amdgcn-amd-amdhsa--gfx90a")),
                ("gfx906", None),
                ("gfx942", None),
            ],
        ),
    ];
    for (file, registration, entries, table) in rows {
        let devices: Vec<&str> = table.iter().map(|(d, _)| *d).collect();
        let (records, code, stderr) = register(&corpus(file), &devices, &[]);
        assert_eq!(
            records.len(),
            devices.len(),
            "{file}: one unit, one record per device: {stderr}"
        );
        let any_missing = table.iter().any(|(_, want)| want.is_none());
        assert_eq!(
            code,
            i32::from(any_missing),
            "{file}: exit status ({stderr})"
        );
        for (record, (device, want)) in records.iter().zip(&table) {
            for f in FIELDS {
                assert!(
                    record.get(f).is_some(),
                    "{file}: field {f} missing in {record}"
                );
            }
            assert_eq!(record["device"], *device, "{file}");
            assert_eq!(record["registration"], registration, "{file}");
            let names: Vec<&str> = record["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["name"].as_str().unwrap())
                .collect();
            match want {
                Some(image) => {
                    assert_eq!(record["selected"], *image, "{file} on {device}");
                    let sha = if file.ends_with("omp_amd.exe") {
                        manifest_sha(file, "amdgcn-amd-amdhsa--gfx90a")
                    } else {
                        manifest_sha(file, image)
                    };
                    assert_eq!(
                        record["sha256"], sha,
                        "{file} on {device}: bytes LLVM extracted"
                    );
                    assert_eq!(&names, entries, "{file} on {device}: entries");
                }
                None => {
                    assert!(record["selected"].is_null(), "{file} on {device}: {record}");
                    assert!(record["sha256"].is_null());
                }
            }
        }
    }
}

/// The fat binary a wrapper points at, located through the file's relocations: in an
/// object through `.rela.hipFatBinSegment` (the unit is named by section + offset), in a
/// PIE through `R_X86_64_RELATIVE` (same address as the section's).
#[test]
fn wrappers_are_resolved_through_relocations() {
    for file in [
        "driver/hip_nonrdc.o",
        "driver/hip_compress.o",
        "driver/hip_newdrv.o",
    ] {
        let (records, code, stderr) = register(&corpus(file), &["gfx90a:xnack+"], &[]);
        assert_eq!(code, 0, "{file}: {stderr}");
        assert_eq!(records.len(), 1, "{file}");
        assert_eq!(records[0]["unit"], ".hip_fatbin+0x0", "{file}");
        assert_eq!(
            records[0]["selected"], "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            "{file}"
        );
        // Classic HIP registers kernels from code: the entries are the chosen code
        // object's kernel descriptors.
        assert_eq!(records[0]["entries_from"], "device-image", "{file}");
        assert_eq!(records[0]["entries"][0]["name"], "_Z5scalePff", "{file}");
    }
    let (records, _, _) = register(&corpus("driver/hip_nonrdc.exe"), &["gfx906"], &[]);
    // readelf -S: .hip_fatbin at 0x3000.
    assert_eq!(records[0]["address"], 0x3000);
}

/// Objects whose device code is only registered after a link register nothing, and say why.
#[test]
fn link_time_objects_register_nothing_and_say_why() {
    let (records, code, stderr) = register(&corpus("driver/hip_rdc.o"), &["gfx906"], &[]);
    assert!(records.is_empty());
    assert_eq!(code, 0);
    assert!(
        stderr.contains("__hip_fatbin_") && stderr.contains("does not define"),
        "{stderr}"
    );
    for file in ["driver/omp_amd_nv.o", "driver/hip_newdrv_rdc.o"] {
        let (records, code, stderr) = register(&corpus(file), &["gfx90a"], &[]);
        assert!(records.is_empty(), "{file}");
        assert_eq!(code, 0);
        assert!(
            stderr.contains(".llvm.offloading") && stderr.contains("once linked"),
            "{stderr}"
        );
    }
}

#[test]
fn bad_input_and_usage_exit_2() {
    let (_, code, stderr) = register(&corpus("bundles/hip_6arch.bundle"), &["gfx906"], &[]);
    assert_eq!(code, 2);
    assert!(stderr.starts_with("loader-sim: error: "), "{stderr}");
    let (_, code, stderr) = register(&corpus("driver/hip_nonrdc.exe"), &["gfx9999"], &[]);
    assert_eq!(code, 2, "{stderr}");
    let out = loader_sim(&[
        "register",
        corpus("driver/hip_nonrdc.exe").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "--device is required");
    // --load of something dlopen refuses: one error line, exit 2.
    let exe = corpus("driver/hip_nonrdc.exe");
    let out = loader_sim(&[
        "register",
        "--load",
        exe.to_str().unwrap(),
        "--device",
        "gfx906",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("loader-sim: error: ")
            && stderr.contains("cannot load: cannot dynamically load"),
        "{stderr}"
    );
}

/// `--explain` gives every image not chosen, with a reason.
#[test]
fn explain_lists_the_rejected_images() {
    let (records, _, _) = register(
        &corpus("driver/hip_nonrdc.exe"),
        &["gfx90a:xnack-"],
        &["--explain"],
    );
    let rejected = records[0]["rejected"].as_array().unwrap();
    let images: BTreeSet<&str> = rejected
        .iter()
        .map(|r| r["image"].as_str().unwrap())
        .collect();
    assert_eq!(
        images,
        BTreeSet::from([
            "host-x86_64-unknown-linux--",
            "hipv4-amdgcn-amd-amdhsa--gfx906",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
        ])
    );
    let xnack = rejected
        .iter()
        .find(|r| r["image"] == "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+")
        .unwrap();
    assert!(
        xnack["reason"].as_str().unwrap().contains("xnack"),
        "{xnack}"
    );
}

type Key = (String, u64, String);

/// (device, address, selected) → (sha256, entry names) of a run.
fn by_unit(records: &[Value]) -> BTreeMap<Key, (String, BTreeSet<String>)> {
    records
        .iter()
        .map(|r| {
            (
                (
                    r["device"].as_str().unwrap().to_string(),
                    r["address"].as_u64().unwrap(),
                    r["selected"].as_str().unwrap_or("-").to_string(),
                ),
                (
                    r["sha256"].as_str().unwrap_or("-").to_string(),
                    r["entries"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| e["name"].as_str().unwrap().to_string())
                        .collect(),
                ),
            )
        })
        .collect()
}

/// librocrand1: its constructor registers one fat binary and its kernels with the shim;
/// the images chosen at run time are those found statically (same address, same bytes),
/// and the kernels it registers are exactly the chosen code object's kernels.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs librocrand.so.1 (scripts/fetch-rocm-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn rocrand_registers_into_the_shim_as_found_statically() {
    if !common::external("librocrand.so.1 (scripts/fetch-rocm-libs.sh)") {
        return;
    }
    let lib = external_lib("librocrand.so.1");
    let devices = [
        "gfx90a:xnack-",
        "gfx1030",
        "gfx908:xnack-",
        "gfx803",
        "gfx1100",
    ];
    let (stat, code_s, err_s) = register(&lib, &devices, &[]);
    let mut args = vec!["register", "--load", lib.to_str().unwrap(), "--json"];
    for d in &devices {
        args.extend(["--device", d]);
    }
    let out = loader_sim(&args);
    let dynamic = json_lines(&out.stdout);
    let err_d = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code_s, 1, "gfx1100 has no image in librocrand 1: {err_s}");
    assert_eq!(out.status.code(), Some(1), "{err_d}");
    assert_eq!(stat.len(), devices.len(), "one fat binary: {err_s}");
    assert_eq!(
        dynamic.len(),
        devices.len(),
        "one fat binary registered: {err_d}"
    );
    for r in &dynamic {
        assert_eq!(r["registration"], "hip");
        assert_eq!(r["entries_from"], "registration");
        assert!(
            r["unit"].as_str().unwrap().starts_with("librocrand.so.1"),
            "{r}"
        );
    }
    let (s, d) = (by_unit(&stat), by_unit(&dynamic));
    assert_eq!(
        s.keys().collect::<Vec<_>>(),
        d.keys().collect::<Vec<_>>(),
        "same units and choices"
    );
    for (key, (sha, kernels)) in &d {
        let (sha_s, kernels_s) = &s[key];
        assert_eq!(sha, sha_s, "{key:?}: the same bytes");
        if key.2 != "-" {
            assert_eq!(kernels.len(), 80, "{key:?}: __hipRegisterFunction calls");
            assert_eq!(
                kernels, kernels_s,
                "{key:?}: registered kernels = the code object's kernels"
            );
        }
    }
    let gfx90a = dynamic
        .iter()
        .find(|r| r["device"] == "gfx90a:xnack-")
        .unwrap();
    assert_eq!(gfx90a["selected"], "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");
}

/// librocsparse0 (1.3 GB): 111 fat-binary registrations. Needs `scripts/fetch-rocm-libs.sh
/// librocsparse0`; run with `cargo test -- --ignored` (the README reports its time).
#[test]
#[ignore = "needs librocsparse0 (scripts/fetch-rocm-libs.sh librocsparse0)"]
fn rocsparse_registers_111_fat_binaries() {
    if !common::external("librocsparse.so.0 (scripts/fetch-rocm-libs.sh librocsparse0)") {
        return;
    }
    let lib = external_lib("librocsparse.so.0");
    let out = loader_sim(&[
        "register",
        "--load",
        lib.to_str().unwrap(),
        "--device",
        "gfx90a:xnack-",
        "--json",
    ]);
    let records = json_lines(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let units: BTreeSet<u64> = records
        .iter()
        .map(|r| r["address"].as_u64().unwrap())
        .collect();
    assert_eq!(units.len(), 111);
    let (stat, _, _) = register(&lib, &["gfx90a:xnack-"], &[]);
    assert_eq!(
        by_unit(&stat).keys().collect::<Vec<_>>(),
        by_unit(&records).keys().collect::<Vec<_>>()
    );
}

/// NVIDIA fatbinaries registered statically: one `.nvFatBinSegment` wrapper (magic
/// `0x466243B1`) per translation unit, its fatbinary pointer resolved through the
/// relocations; the entries are the kernels of the chosen cubin (`STO_CUDA_ENTRY`
/// functions), which the sources of tests/data/nvfatbin/regen.sh define.
#[test]
fn nvidia_fat_binaries_register_statically() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nvfatbin/files");
    let manifest = std::fs::read_to_string(dir.join("../MANIFEST")).unwrap();
    let kernels = |r: &Value| -> Vec<String> {
        r["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    // libk.so: k.cu (scale, add) and k2.cu (neg), built for sm_75 and sm_86 (+ PTX).
    let (recs, code, err) = register(&dir.join("libk.so"), &["sm_86", "sm_75"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(recs.len(), 4);
    for r in &recs {
        assert_eq!(r["registration"], "cuda");
        assert_eq!(r["entries_from"], "device-image");
        let d = r["device"].as_str().unwrap();
        assert_eq!(r["selected"], format!("nvptx64-nvidia-cuda--{d}"));
        let sha = r["sha256"].as_str().unwrap();
        assert!(manifest.contains(&format!("libk.so elf {d} {sha}")), "{r}");
    }
    let mut names: Vec<Vec<String>> = recs.iter().map(kernels).collect();
    names.dedup();
    assert_eq!(
        names,
        [vec!["_Z3addPfPKfi", "_Z5scalePffi"], vec!["_Z3negPfi"]]
    );
    // sm_80 has no cubin of its major but the sm_86 PTX needs 8.6: nothing runs.
    let (recs, _, _) = register(&dir.join("libk.so"), &["sm_80"], &[]);
    assert!(recs.iter().all(|r| r["selected"].is_null()), "{recs:?}");
    // prog: three translation units plus the CUDA runtime's, all sm_86.
    let (recs, code, err) = register(&dir.join("prog"), &["sm_86"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(recs.len(), 4);
    let all: Vec<String> = recs.iter().flat_map(kernels).collect();
    for k in ["_Z3addPfPKfi", "_Z5scalePffi", "_Z3negPfi"] {
        assert!(all.iter().any(|n| n == k), "{all:?}");
    }
    // A relocatable object: the wrapper's pointer is resolved through .rela.nvFatBinSegment.
    let (recs, code, err) = register(&dir.join("host.o"), &["sm_89"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["selected"], "nvptx64-nvidia-cuda--sm_86");
    assert_eq!(kernels(&recs[0]), ["_Z3addPfPKfi", "_Z5scalePffi"]);
}

/// A library built with `nvcc -cudart shared` loaded with the shim standing in for
/// libcudart.so.13: its constructors call `__cudaRegisterFatBinary`,
/// `__cudaRegisterFunction` (one per kernel) and `__cudaRegisterFatBinaryEnd`; the chosen
/// cubins are the ones cuobjdump extracts.
#[test]
fn cuda_runtime_shim_registers_what_the_constructors_call() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nvfatbin/files");
    let manifest = std::fs::read_to_string(dir.join("../MANIFEST")).unwrap();
    let lib = dir.join("libk_rt.so");
    let out = loader_sim(&[
        "register",
        "--load",
        lib.to_str().unwrap(),
        "--json",
        "--device",
        "sm_86",
        "--device",
        "sm_89",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = json_lines(&out.stdout);
    assert_eq!(recs.len(), 4, "{recs:?}");
    let mut kernels = BTreeSet::new();
    for r in &recs {
        assert_eq!(r["registration"], "cuda");
        assert_eq!(r["entries_from"], "registration");
        // sm_89 runs the sm_86 cubin (same major, highest minor not above 9).
        assert_eq!(r["selected"], "nvptx64-nvidia-cuda--sm_86");
        let sha = r["sha256"].as_str().unwrap();
        assert!(
            manifest.contains(&format!("libk_rt.so elf sm_86 {sha}")),
            "{r}"
        );
        for e in r["entries"].as_array().unwrap() {
            assert_eq!(e["kind"], "kernel");
            kernels.insert(e["name"].as_str().unwrap().to_string());
        }
    }
    let want: BTreeSet<String> = ["_Z3addPfPKfi", "_Z5scalePffi", "_Z3negPfi"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(kernels, want);
}

/// Relocatable device code (`REGISTRATION.md` §5.3): of the four wrappers of an nvcc
/// `-rdc` library, the two version-1 wrappers into `__nv_relfatbin` feed the device link
/// and are not registered; the version-2 wrapper (nvlink's linked fat binary) and the
/// non-RDC unit's wrapper are. Every kernel is then registered exactly once, as the CUDA
/// runtime resolves launches, and doctor counts the same two units.
#[test]
fn relocatable_device_code_registers_the_linked_fat_binary_only() {
    let lib = common::repo().join("tests/data/nvrdc/librdc.so");
    let out = loader_sim(&[
        "register",
        "--json",
        "--device",
        "sm_80",
        lib.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = json_lines(&out.stdout);
    let units: Vec<&str> = recs.iter().map(|r| r["unit"].as_str().unwrap()).collect();
    assert_eq!(units.len(), 2, "{units:?}");
    assert_eq!(units[0], ".nv_fatbin+0x0");
    assert!(units[1].starts_with(".nv_fatbin+0x"), "{units:?}");
    let mut kernels: Vec<&str> = recs
        .iter()
        .flat_map(|r| r["entries"].as_array().unwrap())
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    kernels.sort();
    assert_eq!(kernels, ["_Z2kaPf", "_Z2kbPf", "_Z2kcPf"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.matches("points at relocatable device code (__nv_relfatbin+")
            .count(),
        2,
        "{err}"
    );
    // `list` still shows all four fat binaries, the link inputs in `__nv_relfatbin`.
    let listed = json_lines(&loader_sim(&["list", "--json", lib.to_str().unwrap()]).stdout);
    let mut containers: Vec<(String, u64)> = listed
        .iter()
        .map(|r| {
            (
                r["container"].as_str().unwrap().to_string(),
                r["bundle_index"].as_u64().unwrap(),
            )
        })
        .collect();
    containers.dedup();
    assert_eq!(containers.len(), 4, "{containers:?}");
    assert_eq!(
        containers
            .iter()
            .filter(|c| c.0 == "section __nv_relfatbin")
            .count(),
        2
    );
    let doctor = json_lines(
        &loader_sim(&[
            "doctor",
            "--json",
            "--target",
            "sm_80",
            lib.to_str().unwrap(),
        ])
        .stdout,
    );
    assert_eq!(doctor[0]["units"], 2);
    assert_eq!(doctor[0]["status"], "ok");
}

/// The records of `register --load FILE --device sm_80 --json`, through the shim with the
/// CUDA runtime of `cuda`.
fn load_for_sm_80(cuda: &Path, file: &Path) -> Vec<Value> {
    let out = std::process::Command::new(common::ours())
        .args(["register", "--json", "--device", "sm_80", "--load"])
        .arg(file)
        .env("LD_LIBRARY_PATH", cuda.join("lib"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out.stdout)
}

/// The sha256 of each record's chosen image.
fn chosen_sha256(records: &[Value]) -> BTreeSet<String> {
    records
        .iter()
        .map(|r| r["sha256"].as_str().unwrap().to_string())
        .collect()
}

/// The images of each link input the shim saw handed over with a version-2 wrapper.
fn link_input_images(records: &[Value]) -> Vec<Value> {
    records
        .iter()
        .filter_map(|r| r["link_inputs"].as_array())
        .flatten()
        .map(|l| {
            assert!(l.get("error").is_none(), "{l}");
            l["images"].clone()
        })
        .collect()
}

/// The model of §5.3 against what the library's own constructors (nvcc's registration code
/// and its link stub) register through the shim: the same two fat binaries, the same bytes.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs libcudart.so.13 (scripts/fetch-nvidia-toolkit.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn relocatable_device_code_registers_through_the_shim_as_found_statically() {
    if !common::external("libcudart.so.13 (scripts/fetch-nvidia-toolkit.sh)") {
        return;
    }
    let cuda = common::cuda_tree();
    let lib = common::repo().join("tests/data/nvrdc/librdc.so");
    let stat = json_lines(
        &loader_sim(&[
            "register",
            "--json",
            "--device",
            "sm_80",
            lib.to_str().unwrap(),
        ])
        .stdout,
    );
    let dynamic = load_for_sm_80(&cuda, &lib);
    assert_eq!(dynamic.len(), 2, "{dynamic:?}");
    assert_eq!(chosen_sha256(&dynamic), chosen_sha256(&stat));
}

/// prune on a library with relocatable device code: the registered fat binaries of
/// `.nv_fatbin` and the link inputs of `__nv_relfatbin` are pruned alike; cuobjdump
/// extracts every kept entry byte for byte as from the original, and the library registers
/// the same images through the shim, handing over a pre-linked list whose two link inputs
/// now hold only the kept device's entries.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs cuobjdump and libcudart.so.13 (scripts/fetch-nvidia-toolkit.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn pruning_a_relocatable_device_code_library() {
    if !common::external("cuobjdump and libcudart.so.13 (scripts/fetch-nvidia-toolkit.sh)") {
        return;
    }
    let cuda = common::cuda_tree();
    let lib = common::repo().join("tests/data/nvrdc/librdc.so");
    let dir = common::TempDir::new("prune-rdc");
    let pruned = dir.path("librdc.so");
    let out = loader_sim(&[
        "prune",
        "--keep",
        "sm_80",
        "--json",
        lib.to_str().unwrap(),
        "-o",
        pruned.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan = json_lines(&out.stdout);
    let relocatable: Vec<&Value> = plan
        .iter()
        .filter(|r| r["unit"] == "section __nv_relfatbin")
        .collect();
    assert_eq!(relocatable.len(), 2, "{plan:?}");
    for r in relocatable {
        assert_eq!(
            r["kept"],
            serde_json::json!(["nvptx64-nvidia-cuda--sm_80"]),
            "{r}"
        );
        assert_eq!(
            r["dropped"],
            serde_json::json!(["nvptx64-nvidia-cuda--sm_90"]),
            "{r}"
        );
        assert_eq!(r["whole"], false, "{r}");
    }
    assert!(std::fs::metadata(&pruned).unwrap().len() < std::fs::metadata(&lib).unwrap().len());
    // cuobjdump -all -xelf all: every cubin of the pruned file is one of the original's.
    let extract = |file: &Path, tag: &str| -> BTreeMap<String, String> {
        let d = dir.path(tag);
        std::fs::create_dir_all(&d).unwrap();
        let out = std::process::Command::new(cuda.join("bin/cuobjdump"))
            .args(["-all", "-xelf", "all"])
            .arg(file)
            .current_dir(&d)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_dir(&d)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_str().unwrap().to_string();
                (name, common::sha256(&std::fs::read(&p).unwrap()))
            })
            .collect()
    };
    let before = extract(&lib, "before");
    let after = extract(&pruned, "after");
    assert_eq!(before.len(), 8);
    assert_eq!(after.len(), 4, "{after:?}");
    let originals: BTreeSet<&String> = before.values().collect();
    for (name, sha) in &after {
        assert!(
            originals.contains(sha),
            "{name} is not byte-identical to an original entry"
        );
    }
    assert_eq!(after.keys().filter(|n| n.contains("sm_90")).count(), 0);
    let original = load_for_sm_80(&cuda, &lib);
    let registered = chosen_sha256(&original);
    assert_eq!(registered.len(), 2);
    let both = serde_json::json!(["nvptx64-nvidia-cuda--sm_80", "nvptx64-nvidia-cuda--sm_90"]);
    assert_eq!(link_input_images(&original), vec![both; 2]);
    let reloaded = load_for_sm_80(&cuda, &pruned);
    assert_eq!(chosen_sha256(&reloaded), registered);
    let one = serde_json::json!(["nvptx64-nvidia-cuda--sm_80"]);
    assert_eq!(link_input_images(&reloaded), vec![one; 2]);
}

/// prune on the objects of a relocatable-device-code build, as nvprune prunes objects:
/// `nvcc -rdc` objects for sm_80 and sm_90 pruned to sm_80 still device-link (nvlink, through
/// nvcc) into a library that registers, through the shim, exactly the images the unpruned
/// objects give when linked for sm_80, its pre-linked list naming the pruned link inputs.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs nvcc, a host gcc and libcudart.so.13 (scripts/fetch-nvidia-toolkit.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn pruned_relocatable_objects_device_link_to_the_same_images() {
    if !common::external("nvcc, a host gcc and libcudart.so.13 (scripts/fetch-nvidia-toolkit.sh)") {
        return;
    }
    let cuda = common::cuda_tree();
    let dir = common::TempDir::new("prune-rdc-objects");
    // nvcc links -lcudart; the wheel ships only the versioned name.
    let lib = dir.path("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let _ = std::fs::remove_file(lib.join("libcudart.so"));
    std::os::unix::fs::symlink(cuda.join("lib/libcudart.so.13"), lib.join("libcudart.so")).unwrap();
    let path = format!(
        "{}:{}",
        cuda.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let nvcc = |args: &[&str]| {
        let out = std::process::Command::new(cuda.join("bin/nvcc"))
            .args(args)
            .current_dir(&dir.0)
            .env("PATH", &path)
            .output()
            .expect("run nvcc");
        assert!(
            out.status.success(),
            "nvcc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let both = [
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90,code=sm_90",
    ];
    for (tu, rdc) in [("a", true), ("b", true), ("c", false)] {
        let src = common::repo().join(format!("tests/data/nvrdc/{tu}.cu"));
        let obj = format!("{tu}.o");
        let mut args: Vec<&str> = Vec::new();
        if rdc {
            args.push("-rdc=true");
        }
        args.extend(both);
        args.extend([
            "-Xcompiler",
            "-fPIC",
            "-c",
            src.to_str().unwrap(),
            "-o",
            &obj,
        ]);
        nvcc(&args);
        let out = loader_sim(&[
            "prune",
            "--keep",
            "sm_80",
            "--json",
            dir.path(&obj).to_str().unwrap(),
            "-o",
            dir.path(&format!("pruned-{tu}.o")).to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan = json_lines(&out.stdout);
        let section = if rdc {
            "section __nv_relfatbin"
        } else {
            "section .nv_fatbin"
        };
        assert_eq!(plan[0]["unit"], section, "{plan:?}");
        assert_eq!(
            plan[0]["dropped"],
            serde_json::json!(["nvptx64-nvidia-cuda--sm_90"])
        );
    }
    let link = |prefix: &str, name: &str| {
        let objs: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|t| format!("{prefix}{t}.o"))
            .collect();
        let mut args = vec!["-shared", "-rdc=true", "-cudart", "shared", "-Llib"];
        args.extend(["-gencode", "arch=compute_80,code=sm_80"]);
        args.extend(objs.iter().map(String::as_str));
        args.extend(["-o", name]);
        nvcc(&args);
        let records = load_for_sm_80(&cuda, &dir.path(name));
        (chosen_sha256(&records), link_input_images(&records))
    };
    let (whole, whole_links) = link("", "libwhole.so");
    let (pruned, pruned_links) = link("pruned-", "libpruned.so");
    assert_eq!(whole.len(), 2);
    assert_eq!(pruned, whole);
    let both = serde_json::json!(["nvptx64-nvidia-cuda--sm_80", "nvptx64-nvidia-cuda--sm_90"]);
    assert_eq!(whole_links, vec![both; 2]);
    let one = serde_json::json!(["nvptx64-nvidia-cuda--sm_80"]);
    assert_eq!(pruned_links, vec![one; 2]);
}
