//! `loader-sim offload-packager` against LLVM 22's `clang-offload-packager`, byte for byte:
//! a seeded matrix of packaging jobs (1–5 images, extra and repeated keys, several files
//! per image, every image-kind extension, bitcode detected by magic, every offload kind)
//! and extraction (`file=`, generated names, `--archive`) from those outputs and from the
//! corpus (OffloadBinaries, ELF objects with `.llvm.offloading`, an OpenMP executable).

use crate::common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;

const TRIPLES: &[&str] = &[
    "amdgcn-amd-amdhsa",
    "nvptx64-nvidia-cuda",
    "spirv64-intel",
    "x86_64-unknown-linux-gnu",
];
const ARCHS: &[&str] = &[
    "gfx906",
    "gfx90a:xnack+",
    "gfx942:sramecc+:xnack-",
    "sm_80",
    "sm_90a",
    "generic",
    "",
];
const KINDS: &[&str] = &["openmp", "cuda", "hip", "sycl", "hipv4", "none"];
const EXTS: &[&str] = &["o", "bc", "cubin", "fatbin", "s", "spv", "co", "bin", ""];
const KEYS: &[&str] = &[
    "feature", "zzz", "aaa", "producer", "k1", "k2", "version", "opt", "x",
];

/// All files in `dir`, by name.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Runs the packager with `args` in two fresh directories (LLVM 22 and loader-sim) and
/// compares exit status and every file each produced.
fn compare(base: &TempDir, tag: &str, args: &[String]) -> (bool, usize) {
    let l = base.path(&format!("{tag}-llvm"));
    let o = base.path(&format!("{tag}-ours"));
    std::fs::create_dir_all(&l).unwrap();
    std::fs::create_dir_all(&o).unwrap();
    let rl = run_in(&l, &llvm("clang-offload-packager-22"), args);
    let ro = run_ours(&o, "offload-packager", args);
    assert!(
        rl.status.code().is_some() && ro.status.code().is_some(),
        "{tag}: killed by a signal"
    );
    assert_eq!(
        rl.status.success(),
        ro.status.success(),
        "{tag}: {args:?}\nLLVM {}\nours {}",
        describe(&rl),
        describe(&ro)
    );
    let (fl, fo) = (files(&l), files(&o));
    assert_eq!(
        fl.keys().collect::<Vec<_>>(),
        fo.keys().collect::<Vec<_>>(),
        "{tag}: {args:?}"
    );
    for (name, data) in &fl {
        assert!(data == &fo[name], "{tag}: {name} differs; {args:?}");
    }
    (rl.status.success(), fl.len())
}

/// One `--image=` argument and the files it names.
fn image_arg(rng: &mut Rng, dir: &TempDir, tag: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let nfiles = if rng.chance(20) { 2 } else { 1 };
    for f in 0..nfiles {
        let ext = rng.pick(EXTS);
        let name = if ext.is_empty() {
            format!("{tag}-f{f}")
        } else {
            format!("{tag}-f{f}.{ext}")
        };
        let data = match rng.below(6) {
            0 => std::fs::read(corpus("devobj/saxpy.gfx906.bc")).unwrap(),
            1 => std::fs::read(corpus("devobj/saxpy.gfx90a.co")).unwrap(),
            2 => Vec::new(),
            _ => {
                let n = rng.range(1, 5000);
                rng.bytes(n)
            }
        };
        let p = dir.write(&name, &data);
        parts.push(format!("file={}", p.display()));
    }
    if rng.chance(90) {
        parts.push(format!("triple={}", rng.pick(TRIPLES)));
    }
    if rng.chance(80) {
        parts.push(format!("arch={}", rng.pick(ARCHS)));
    }
    if rng.chance(70) {
        parts.push(format!("kind={}", rng.pick(KINDS)));
    }
    for _ in 0..rng.below(5) {
        let v: String = (0..rng.range(0, 12))
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect();
        parts.push(format!("{}={v}", rng.pick(KEYS)));
    }
    if rng.chance(15) {
        parts.push(format!("arch={}", rng.pick(ARCHS)));
    }
    rng.shuffle(&mut parts);
    format!("--image={}", parts.join(","))
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-packager-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn packaging_matrix() {
    if !common::external("clang-offload-packager-22") {
        return;
    }
    let dir = TempDir::new("pack");
    let mut rng = Rng::new(0x9ac4_0001);
    let mut packaged = 0;
    for job in 0..60 {
        let n = rng.range(1, 5);
        let mut args = vec![arg("-o"), parg(&dir.path(&format!("out{job}.bin")))];
        if rng.chance(50) {
            args[0] = arg("--o");
        }
        for i in 0..n {
            args.push(image_arg(&mut rng, &dir, &format!("j{job}-i{i}")));
        }
        rng.shuffle(&mut args[2..]);
        // Package to a relative name inside each run's own directory.
        args[1] = format!("out{job}.bin");
        if compare(&dir, &format!("job{job}"), &args).0 {
            packaged += 1;
        }
    }
    assert!(packaged >= 55, "only {packaged} of 60 jobs were packaged");
}

/// Extraction from packaged files and corpus inputs, with random filters.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-packager-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn extraction_matrix() {
    if !common::external("clang-offload-packager-22") {
        return;
    }
    let dir = TempDir::new("extract");
    let mut rng = Rng::new(0x9ac4_0002);
    // A few packaged inputs made by LLVM itself.
    let mut inputs = Vec::new();
    for k in 0..6 {
        let mut args = vec![arg("-o"), parg(&dir.path(&format!("in{k}.bin")))];
        for i in 0..rng.range(1, 5) {
            args.push(image_arg(&mut rng, &dir, &format!("in{k}-{i}")));
        }
        let r = run_in(&dir.0, &llvm("clang-offload-packager-22"), &args);
        assert!(r.status.success(), "{}", describe(&r));
        inputs.push(dir.path(&format!("in{k}.bin")));
    }
    for f in [
        "packager/amdgcn_gfx90a_xnack+.openmp.offbin",
        "packager/multi3.offbin",
        "packager/extra_keys.offbin",
        "packager/hip_bc.offbin",
        "packager/concat.offbin",
        "nvptx/cuda_cubins.offbin",
        "nvptx/omp_cubins.offbin",
        "nvptx/cuda_fatbin.offbin",
        "driver/hip_newdrv_rdc.o",
        "driver/omp_amd_nv.o",
        "driver/omp_amd.exe",
    ] {
        inputs.push(corpus(f));
    }
    let mut n = 0;
    let mut extracted = 0;
    for input in &inputs {
        for round in 0..4 {
            let mut filter: Vec<String> = Vec::new();
            match rng.below(4) {
                0 => filter.push(format!("triple={}", rng.pick(TRIPLES))),
                1 => filter.push(format!("kind={}", rng.pick(KINDS))),
                2 => filter.push(format!("arch={}", rng.pick(ARCHS))),
                _ => {}
            }
            let archive = rng.chance(30);
            if archive || rng.chance(40) {
                filter.push(format!(
                    "file=sel{round}{}",
                    if archive { ".a" } else { "" }
                ));
            }
            if filter.is_empty() {
                filter.push(arg("triple=amdgcn-amd-amdhsa"));
            }
            let mut args = vec![parg(input), format!("--image={}", filter.join(","))];
            if archive {
                args.push(arg("--archive"));
            }
            if rng.chance(30) {
                args.push(format!("--image={}", filter[0]));
            }
            extracted += compare(&dir, &format!("x{n}"), &args).1;
            n += 1;
        }
    }
    assert!(
        extracted >= 40,
        "only {extracted} files were extracted in {n} runs"
    );
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-packager-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn packager_errors_and_dispatch() {
    if !common::external("clang-offload-packager-22") {
        return;
    }
    let dir = TempDir::new("pack-errors");
    let f = dir.write("a.o", b"abc");
    for args in [
        vec![arg("-o"), arg("x"), arg("--image=triple=x")],
        vec![arg("-o"), arg("x"), parg(&f)],
        vec![arg("-o"), arg("x"), arg("--image=file=missing.o")],
        vec![arg("--bogus")],
    ] {
        let l = run_in(&dir.0, &llvm("clang-offload-packager-22"), &args);
        let o = run_ours(&dir.0, "offload-packager", &args);
        assert!(!l.status.success(), "{args:?}: LLVM succeeded");
        assert_eq!(l.status.code(), Some(1), "{args:?}: {}", describe(&l));
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", describe(&o));
    }
    let link = dir.path("clang-offload-packager");
    std::os::unix::fs::symlink(ours(), &link).unwrap();
    let args = vec![
        arg("-o"),
        arg("p.bin"),
        format!("--image=file={},triple=t,arch=a", f.display()),
    ];
    assert!(run_in(&dir.0, &link, &args).status.success());
    let via_link = std::fs::read(dir.path("p.bin")).unwrap();
    assert!(run_in(&dir.0, &llvm("clang-offload-packager-22"), &args)
        .status
        .success());
    assert_eq!(via_link, std::fs::read(dir.path("p.bin")).unwrap());
}
