//! A CUDA program built by clang 22 runs against the runtime shim standing in for
//! libcudart.so.13: its constructors call `__cudaRegisterFatBinary` once per translation
//! unit, `__cudaRegisterFunction` once per kernel and `__cudaRegisterFatBinaryEnd`; main
//! launches kernels through clang's launch stubs (`__cudaPushCallConfiguration`,
//! `__cudaPopCallConfiguration`, `cudaLaunchKernel`), which the shim answers with
//! `cudaErrorNoDevice`. The shim's report must give each simulated device the image
//! NVIDIA's rules choose (`COMPATIBILITY.md`, NVIDIA fatbinaries), with the bytes that
//! `cuobjdump -xelf all -xptx all` extracts from the program, the kernels the program
//! registered, and agree with `loader-sim register` reading the same program statically.
//!
//! Toolchain: clang++-22's CUDA driver (`-x cuda`) over a CUDA 13.5 tree assembled from
//! NVIDIA's wheels by `scripts/fetch-nvidia-toolkit.sh` (which `scripts/setup.sh` runs;
//! this test runs it too, quick when the tree is there). clang 22 knows CUDA up to 12.9:
//! it accepts 13.5 with a warning, silenced by `-Wno-unknown-cuda-version`. The program is
//! linked against the wheel's real libcudart.so.13, so it binds the runtime's symbols with
//! their `libcudart.so.13` version, and is run with the shim first on `LD_LIBRARY_PATH`
//! under that name.
//!
//! Two builds: clang's classic CUDA driver (`--no-offload-new-driver`: one fatbinary per
//! translation unit with a cubin and the PTX of each `--cuda-gpu-arch`, the PTX
//! compressed) and clang 22's default, the new offload driver in non-RDC mode (cubins
//! only).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common;
use common::{cuda_tree, json_lines, loader_sim, sha256};

/// `libloader_sim_rt.so` of this build: next to `loader-sim` or in its `deps/`, the newer.
fn shim() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_loader-sim"));
    let dir = exe.parent().unwrap();
    [
        dir.join("libloader_sim_rt.so"),
        dir.join("deps/libloader_sim_rt.so"),
    ]
    .into_iter()
    .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
    .max_by_key(|(t, _)| *t)
    .map(|(_, p)| p)
    .expect("libloader_sim_rt.so is built with loader-sim (a dependency of it)")
}

const KERNELS_A: &str = r#"
#include <cuda_runtime.h>
__global__ void scale(float *x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
__global__ void add(float *x, const float *y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += y[i]; }
int launch_scale(float *x, int n) { scale<<<1, 32>>>(x, 2.0f, n); return (int)cudaGetLastError(); }
"#;

const MAIN: &str = r#"
#include <cstdio>
#include <cuda_runtime.h>
__global__ void neg(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = -x[i]; }
int launch_scale(float *x, int n);
int main() {
  int a = launch_scale(nullptr, 0);
  neg<<<1, 32>>>(nullptr, 0);
  int s = (int)cudaDeviceSynchronize();
  std::printf("launch_scale %d, synchronize %d\n", a, s);
  return 0;
}
"#;

fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Compiles the two translation units with `driver_flags` and links them against the
/// wheel's libcudart.so.13.
fn build(dir: &Path, cuda: &Path, driver_flags: &[&str]) -> PathBuf {
    build_with(
        dir,
        cuda,
        driver_flags,
        &[("a", KERNELS_A), ("main", MAIN)],
        &[],
    )
}

/// Compiles `sources` (name, text) with `driver_flags` and links them with `link_flags`.
fn build_with(
    dir: &Path,
    cuda: &Path,
    driver_flags: &[&str],
    sources: &[(&str, &str)],
    link_flags: &[&str],
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut objects = Vec::new();
    for &(name, src) in sources {
        let cu = dir.join(format!("{name}.cu"));
        std::fs::write(&cu, src).unwrap();
        let obj = dir.join(format!("{name}.o"));
        run_ok(
            Command::new("clang++-22")
                .args(["-x", "cuda"])
                .arg(format!("--cuda-path={}", cuda.display()))
                .args(driver_flags)
                .args([
                    "-Wno-unknown-cuda-version",
                    "--cuda-gpu-arch=sm_75",
                    "--cuda-gpu-arch=sm_86",
                    "-O2",
                    "-c",
                ])
                .arg(&cu)
                .arg("-o")
                .arg(&obj),
        );
        objects.push(obj);
    }
    let exe = dir.join("prog");
    run_ok(
        Command::new("clang++-22")
            .arg("-o")
            .arg(&exe)
            .args(link_flags)
            .args(&objects)
            .arg(format!("-L{}", cuda.join("lib").display()))
            .arg("-l:libcudart.so.13"),
    );
    exe
}

/// Runs the program with the shim as libcudart.so.13; returns its report and stdout.
fn run_with_shim(exe: &Path, dir: &Path, devices: &[&str]) -> (Vec<Value>, String) {
    let lib = dir.join("shim");
    std::fs::create_dir_all(&lib).unwrap();
    let link = lib.join("libcudart.so.13");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(shim(), &link).unwrap();
    let report = dir.join("report.jsonl");
    let _ = std::fs::remove_file(&report);
    let out = run_ok(
        Command::new(exe)
            .env("LD_LIBRARY_PATH", &lib)
            .env("LOADER_SIM_DEVICES", devices.join(","))
            .env("LOADER_SIM_REPORT", &report)
            .env_remove("LOADER_SIM_POLICY"),
    );
    let text = std::fs::read_to_string(&report).expect("the shim wrote its report");
    (
        json_lines(text.as_bytes()),
        String::from_utf8(out.stdout).unwrap(),
    )
}

/// `cuobjdump -xelf all -xptx all FILE`: (kind, number) → (arch, sha256), numbered as
/// cuobjdump numbers them (ELF and PTX files separately, in fatbinary order).
fn cuobjdump(cuda: &Path, file: &Path, dir: &Path) -> BTreeMap<(String, usize), (String, String)> {
    let x = dir.join("cuobjdump");
    let _ = std::fs::remove_dir_all(&x);
    std::fs::create_dir_all(&x).unwrap();
    run_ok(
        Command::new(cuda.join("bin/cuobjdump"))
            .args(["-xelf", "all", "-xptx", "all"])
            .arg(file)
            .current_dir(&x),
    );
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&x).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        // prog.<n>.<arch>.cubin | prog.<n>.<arch>.ptx
        let parts: Vec<&str> = name.split('.').collect();
        let [_, n, arch, ext] = parts[..] else {
            panic!("unexpected cuobjdump file {name}")
        };
        let kind = if ext == "ptx" { "ptx" } else { "cubin" };
        let bytes = std::fs::read(x.join(&name)).unwrap();
        out.insert(
            (kind.to_string(), n.parse().unwrap()),
            (arch.to_string(), sha256(&bytes)),
        );
    }
    out
}

/// What a device must get: (image kind, arch) or nothing.
type Want = Option<(&'static str, &'static str)>;

fn kernels(r: &Value) -> BTreeSet<String> {
    r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["kind"], "kernel", "{r}");
            e["name"].as_str().unwrap().to_string()
        })
        .collect()
}

fn check_build(tag: &str, driver_flags: &[&str], table: &[(&'static str, Want)], ptx: bool) {
    let cuda = cuda_tree();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("cuda_program")
        .join(tag);
    let _ = std::fs::remove_dir_all(&dir);
    let exe = build(&dir, &cuda, driver_flags);
    let devices: Vec<&str> = table.iter().map(|(d, _)| *d).collect();
    let (records, stdout) = run_with_shim(&exe, &dir, &devices);
    // The launch went through the stubs: no error left behind, and the runtime has no device
    // (cudaErrorNoDevice = 100).
    assert_eq!(stdout, "launch_scale 0, synchronize 100\n", "{tag}");

    // The images, as cuobjdump numbers them, must be those `loader-sim list` finds, in the
    // same order; `list` also says which fatbinary (unit) each one is in.
    let listed = json_lines(&loader_sim(&["list", exe.to_str().unwrap(), "--json"]).stdout);
    let dumped = cuobjdump(&cuda, &exe, &dir);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    // unit index → (kind, arch) → sha256
    let mut units: BTreeMap<u64, BTreeMap<(String, String), String>> = BTreeMap::new();
    for l in &listed {
        assert_eq!(l["format"], "nvidia-fatbin", "{tag}: {l}");
        let kind = l["image_kind"].as_str().unwrap().to_string();
        let n = seen.entry(kind.clone()).or_insert(0);
        *n += 1;
        let (arch, sha) = &dumped[&(kind.clone(), *n)];
        assert_eq!(l["target_id"], arch.as_str(), "{tag}: {kind} {n}");
        assert_eq!(
            l["sha256"],
            sha.as_str(),
            "{tag}: {kind} {n}: cuobjdump's bytes"
        );
        units
            .entry(l["bundle_index"].as_u64().unwrap())
            .or_default()
            .insert((kind, arch.clone()), sha.clone());
    }
    assert_eq!(
        listed.len(),
        dumped.len(),
        "{tag}: every image cuobjdump extracts"
    );
    let per_unit = if ptx { 4 } else { 2 };
    assert_eq!(listed.len(), 2 * per_unit, "{tag}: {listed:#?}");

    // One unit per __cudaRegisterFatBinary (one per translation unit), one record per device.
    let addresses: BTreeSet<u64> = records
        .iter()
        .map(|r| r["address"].as_u64().unwrap())
        .collect();
    assert_eq!(addresses.len(), 2, "{tag}: {records:#?}");
    assert_eq!(records.len(), 2 * devices.len(), "{tag}");
    // Fatbinaries lie in .nv_fatbin in link order (a.o, then main.o): by address.
    let unit_of: BTreeMap<u64, u64> = addresses.iter().copied().zip(0..).collect();
    let source_kernels = [
        BTreeSet::from(["_Z5scalePffi".to_string(), "_Z3addPfPKfi".to_string()]),
        BTreeSet::from(["_Z3negPfi".to_string()]),
    ];
    for r in &records {
        let unit = unit_of[&r["address"].as_u64().unwrap()];
        let device = r["device"].as_str().unwrap();
        assert_eq!(r["registration"], "cuda");
        assert_eq!(r["entries_from"], "registration");
        assert_eq!(r["unregistered"], true, "{tag}: atexit unregisters: {r}");
        assert!(
            r["unit"].as_str().unwrap().starts_with("prog+"),
            "{tag}: {r}"
        );
        // The kernels __cudaRegisterFunction was called with.
        assert_eq!(kernels(r), source_kernels[unit as usize], "{tag}: {r}");
        let want = table.iter().find(|(d, _)| *d == device).unwrap().1;
        match want {
            Some((kind, arch)) => {
                // PTX is named by its virtual architecture, as cuobjdump writes it.
                let spelled = match kind {
                    "ptx" => arch.replacen("sm_", "compute_", 1),
                    _ => arch.to_string(),
                };
                assert_eq!(
                    r["selected"],
                    format!("nvptx64-nvidia-cuda--{spelled}"),
                    "{tag} on {device}"
                );
                let sha = &units[&unit][&(kind.to_string(), arch.to_string())];
                assert_eq!(
                    r["sha256"],
                    sha.as_str(),
                    "{tag} on {device}: the {kind} {arch} of unit {unit} (cuobjdump's bytes)"
                );
            }
            None => {
                assert!(r["selected"].is_null(), "{tag} on {device}: {r}");
                assert!(r["sha256"].is_null(), "{tag} on {device}: {r}");
            }
        }
    }

    // `loader-sim register` of the same program, statically: the same units (addresses), the
    // same choices and bytes; for a chosen cubin, its kernels (STO_CUDA_ENTRY functions) are
    // exactly those the program registered.
    let mut args = vec!["register", exe.to_str().unwrap(), "--json"];
    for d in &devices {
        args.extend(["--device", d]);
    }
    let out = loader_sim(&args);
    let any_none = table.iter().any(|(_, w)| w.is_none());
    assert_eq!(
        out.status.code(),
        Some(i32::from(any_none)),
        "{tag}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stat = json_lines(&out.stdout);
    assert_eq!(stat.len(), records.len(), "{tag}: {stat:#?}");
    let key = |r: &Value| {
        (
            r["address"].as_u64().unwrap(),
            r["device"].as_str().unwrap().to_string(),
        )
    };
    let dynamic: BTreeMap<_, _> = records.iter().map(|r| (key(r), r)).collect();
    for s in &stat {
        let d = dynamic
            .get(&key(s))
            .unwrap_or_else(|| panic!("{tag}: static unit {s} not registered at run time"));
        for f in ["registration", "selected", "size", "sha256"] {
            assert_eq!(s[f], d[f], "{tag}: {f} of {:?}", key(s));
        }
        assert_eq!(s["entries_from"], "device-image");
        let chosen_cubin = table
            .iter()
            .find(|(dev, _)| *dev == s["device"])
            .and_then(|(_, w)| *w)
            .is_some_and(|(kind, _)| kind == "cubin");
        if chosen_cubin {
            assert_eq!(kernels(s), kernels(d), "{tag}: {:?}", key(s));
        }
    }
}

/// clang's classic CUDA driver: sm_75 and sm_86 cubins plus their PTX, so a device with
/// no cubin of its major JIT-compiles the newest PTX it can run.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang++-22 and NVIDIA's CUDA wheels (scripts/fetch-nvidia-toolkit.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn clang_classic_cuda_program_registers_into_the_shim() {
    if !common::external("clang++-22 and NVIDIA's CUDA wheels (scripts/fetch-nvidia-toolkit.sh)") {
        return;
    }
    check_build(
        "classic",
        &["--no-offload-new-driver"],
        &[
            ("sm_86", Some(("cubin", "sm_86"))),
            ("sm_75", Some(("cubin", "sm_75"))),
            // Same major, highest minor not above the device's.
            ("sm_89", Some(("cubin", "sm_86"))),
            // No 8.x cubin runs on 8.0 (sm_86 needs 8.6); compute_75 PTX does.
            ("sm_80", Some(("ptx", "sm_75"))),
            // No 9.x cubin: the newest PTX not above 9.0.
            ("sm_90", Some(("ptx", "sm_86"))),
        ],
        true,
    );
}

/// clang 22's default for CUDA, the new offload driver (non-RDC): cubins only, so devices
/// of another major get nothing.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang++-22 and NVIDIA's CUDA wheels (scripts/fetch-nvidia-toolkit.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn clang_new_driver_cuda_program_registers_into_the_shim() {
    if !common::external("clang++-22 and NVIDIA's CUDA wheels (scripts/fetch-nvidia-toolkit.sh)") {
        return;
    }
    check_build(
        "new-driver",
        &["--offload-new-driver"],
        &[
            ("sm_86", Some(("cubin", "sm_86"))),
            ("sm_75", Some(("cubin", "sm_75"))),
            ("sm_89", Some(("cubin", "sm_86"))),
            ("sm_80", None),
            ("sm_90", None),
        ],
        false,
    );
}

/// Initialised device data (256 KiB in every cubin and PTX of the first translation unit),
/// so that dropping a cubin frees whole pages.
const KERNELS_A_BIG: &str = r#"
#include <cuda_runtime.h>
__device__ float table[65536] = {1.0f, 2.0f, 3.0f};
__global__ void scale(float *x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a * table[i & 65535]; }
__global__ void add(float *x, const float *y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += y[i]; }
int launch_scale(float *x, int n) { scale<<<1, 32>>>(x, 2.0f, n); return (int)cudaGetLastError(); }
"#;

/// `prune` of CUDA programs (position-independent, whose wrapper points at its fatbinary
/// through an `R_X86_64_RELATIVE` relocation, and `-no-pie`, where the pointer is an
/// absolute address in `.nvFatBinSegment`): the sm_75 cubin of the first translation unit
/// goes, its pages leave the file, the second unit's fatbinary moves down and its wrapper
/// follows. The pruned program runs and registers, for sm_86, the same images (cuobjdump's
/// bytes) and kernels as the original, its second unit at its new address; `cuobjdump`
/// lists exactly the kept entries.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang++-22 and NVIDIA's CUDA wheels (scripts/fetch-nvidia-toolkit.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn pruned_cuda_programs_run_and_register_the_same() {
    if !common::external("clang++-22 and NVIDIA's CUDA wheels (scripts/fetch-nvidia-toolkit.sh)") {
        return;
    }
    let cuda = cuda_tree();
    for (tag, link) in [("pie", &[][..]), ("no-pie", &["-no-pie"][..])] {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("cuda_program")
            .join(format!("prune-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        let exe = build_with(
            &dir,
            &cuda,
            &["--no-offload-new-driver"],
            &[("a", KERNELS_A_BIG), ("main", MAIN)],
            link,
        );
        let pruned = dir.join("prog.pruned");
        let out = loader_sim(&[
            "prune",
            exe.to_str().unwrap(),
            "--keep",
            "sm_86",
            "-o",
            pruned.to_str().unwrap(),
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{tag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let records = json_lines(&out.stdout);
        let summary = records.last().unwrap();
        assert!(
            summary["layout"].as_str().unwrap().starts_with(
                "compacted: 2 containers in .nv_fatbin packed from the section start (1 moved,"
            ),
            "{tag}: {summary}"
        );
        let (before, after) = (
            std::fs::metadata(&exe).unwrap().len(),
            std::fs::metadata(&pruned).unwrap().len(),
        );
        assert!(before - after >= 200 << 10, "{tag}: {before} -> {after}");
        let is_dyn = |f: &Path| std::fs::read(f).unwrap()[16] == 3;
        assert_eq!(is_dyn(&exe), tag == "pie");

        let (want, stdout) = run_with_shim(&exe, &dir, &["sm_86"]);
        let (got, stdout_pruned) = run_with_shim(&pruned, &dir, &["sm_86"]);
        assert_eq!(stdout_pruned, stdout, "{tag}");
        assert_eq!(got.len(), 2, "{tag}: {got:#?}");
        let strip = |r: &Value| {
            let mut r = r.clone();
            let o = r.as_object_mut().unwrap();
            o.remove("address");
            o.remove("unit");
            r
        };
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(strip(g), strip(w), "{tag}");
            assert!(!g["sha256"].is_null(), "{tag}: {g}");
        }
        // The first unit stays at the start of .nv_fatbin, the second moved down.
        let addr = |r: &[Value]| -> Vec<u64> {
            let mut a: Vec<u64> = r.iter().map(|x| x["address"].as_u64().unwrap()).collect();
            a.sort();
            a
        };
        let (wa, ga) = (addr(&want), addr(&got));
        assert_eq!(ga[0], wa[0], "{tag}");
        assert!(ga[1] < wa[1], "{tag}: {wa:?} -> {ga:?}");
        // cuobjdump reads every kept entry from the pruned program.
        let listed = cuobjdump(&cuda, &pruned, &dir);
        let kinds: BTreeSet<(String, String)> = listed
            .iter()
            .map(|((kind, _), (arch, _))| (kind.clone(), arch.clone()))
            .collect();
        // Both translation units lose their sm_75 cubin; the sm_75 PTX stays (an sm_86
        // device JIT-compiles it).
        assert_eq!(listed.len(), 6, "{tag}: {listed:?}");
        assert!(
            !kinds.contains(&("cubin".to_string(), "sm_75".to_string())),
            "{tag}"
        );
        assert_eq!(kinds.len(), 3, "{tag}: {kinds:?}");
        // Static registration agrees with the run.
        let stat = json_lines(
            &loader_sim(&[
                "register",
                pruned.to_str().unwrap(),
                "--device",
                "sm_86",
                "--json",
            ])
            .stdout,
        );
        assert_eq!(addr(&stat), ga, "{tag}");
    }
}
