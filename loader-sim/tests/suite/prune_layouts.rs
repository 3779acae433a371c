//! `loader-sim prune` (issue 22): a `.hip_fatbin` in a `PT_LOAD` segment of its own whose
//! `p_vaddr - p_offset` differs from the first segment's (the layout patchelf leaves, as in
//! the cyllama-rocm wheel) is compacted, the freed bytes leave the file and the result
//! registers the same images; units no kept device can load are emptied by default (as
//! `nvprune` does), counted in the summary, and kept whole with `--keep-unloadable-units`.
//!
//! Every test here needs tools or files from outside the repository (clang-22 and ld.lld-22,
//! llvm-readelf-22, NVIDIA's CUDA wheels, the cyllama-rocm wheel): they run when
//! `OFFLOAD_IMAGE_EXTERNAL_TESTS=1`, and then fail when one is missing.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    describe, external, hip_objects, hip_runtime_stub, json_lines, loader_sim, repo, TempDir,
};
use serde_json::Value;

/// Runs `loader-sim prune FILE --keep K... [EXTRA...] -o OUT --json`; returns the records.
fn prune(file: &Path, keep: &[&str], extra: &[&str], out: &Path) -> Vec<Value> {
    let mut args: Vec<String> = vec!["prune".into(), file.to_string_lossy().into()];
    for k in keep {
        args.extend(["--keep".into(), (*k).into()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["-o".into(), out.to_string_lossy().into(), "--json".into()]);
    let o = loader_sim(&args);
    assert!(
        o.status.success(),
        "prune {}: {}",
        file.display(),
        describe(&o)
    );
    json_lines(&o.stdout)
}

/// `loader-sim list --json`: (entry name, size, sha256) of every image in discovery order.
fn images(file: &Path) -> Vec<(String, u64, String)> {
    let o = loader_sim(&["list", &file.to_string_lossy(), "--json"]);
    assert!(
        o.status.success(),
        "list {}: {}",
        file.display(),
        describe(&o)
    );
    json_lines(&o.stdout)
        .into_iter()
        .map(|r| {
            (
                r["entry_id"].as_str().unwrap_or_default().to_string(),
                r["size"].as_u64().unwrap(),
                r["sha256"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `loader-sim register [--load] FILE --device D --json`, without what moves with the
/// units (their address and the offset in their name), sorted.
fn registered(file: &Path, device: &str, load: bool) -> Vec<Value> {
    let (code, records) = registered_with_status(file, device, load);
    assert_eq!(code, Some(0), "register {}", file.display());
    records
}

/// [`registered`] and the exit status (1 when a unit has nothing for the device).
fn registered_with_status(file: &Path, device: &str, load: bool) -> (Option<i32>, Vec<Value>) {
    let f = file.to_string_lossy();
    let mut args = vec!["register"];
    if load {
        args.push("--load");
    }
    args.extend([&*f, "--device", device, "--json"]);
    let o = loader_sim(&args);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "register {args:?}: {}",
        describe(&o)
    );
    let mut records: Vec<Value> = json_lines(&o.stdout)
        .into_iter()
        .map(|mut r| {
            let r2 = r.as_object_mut().unwrap();
            r2.remove("address");
            r2.remove("unit");
            r
        })
        .collect();
    records.sort_by_key(|r| r.to_string());
    (o.status.code(), records)
}

/// `llvm-readelf-22 -a` reads the file without a warning.
fn readelf_clean(file: &Path) {
    let o = Command::new("llvm-readelf-22")
        .args(["-a", "-W"])
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run llvm-readelf-22: {e} (Debian package llvm-22)"));
    assert!(o.status.success(), "{}", describe(&o));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// (`p_offset`, `p_vaddr`) of every `PT_LOAD` segment, from `llvm-readelf-22 -l`.
fn loads(file: &Path) -> Vec<(u64, u64)> {
    let o = Command::new("llvm-readelf-22")
        .args(["-l", "-W"])
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", describe(&o));
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (hex(f[1]), hex(f[2]))
        })
        .collect()
}

/// The device-code bytes a prune dropped: the sizes of the images listed in `before` and
/// not in `after`.
fn dropped_bytes(before: &[(String, u64, String)], after: &[(String, u64, String)]) -> u64 {
    let mut left: Vec<&(String, u64, String)> = after.iter().collect();
    let mut dropped = 0;
    for image in before {
        match left.iter().position(|a| *a == image) {
            Some(i) => {
                left.remove(i);
            }
            None => dropped += image.1,
        }
    }
    assert!(
        left.is_empty(),
        "images that were not in the input: {left:?}"
    );
    dropped
}

fn hip_source(i: usize) -> String {
    format!(
        r#"#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
typedef __SIZE_TYPE__ size_t;
struct dim3 {{ unsigned x, y, z; }};
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *, dim3, dim3, void **, size_t, hipStream_t);
__device__ float big{i}[16384] = {{1.0f, {i}.0f}};
__global__ void kern{i}(float *p, float s) {{
  unsigned i = __builtin_amdgcn_workitem_id_x();
  p[i] = p[i] * s * big{i}[i];
}}
extern "C" int host{i}() {{ return {i}; }}
static char zeros{i}[40000];
extern "C" char *bss{i}() {{ return zeros{i}; }}
"#
    )
}

/// A HIP shared library of two translation units (gfx906, gfx90a, gfx1030) linked by
/// ld.lld-22 with `.hip_fatbin` placed after `.bss` (a linker script), so that it gets a
/// read-only `PT_LOAD` of its own whose `p_vaddr - p_offset` differs from the first
/// segment's, as in the cyllama-rocm wheel.
fn hip_library_with_fatbin_after_bss(dir: &TempDir) -> PathBuf {
    let script = dir.write(
        "after-bss.ld",
        b"SECTIONS { .hip_fatbin : { *(.hip_fatbin) } } INSERT AFTER .bss;\n",
    );
    hip_library(
        dir,
        "libtail.so",
        &[&format!("-Wl,-T,{}", script.display())],
    )
}

/// The library above, pruned to gfx90a: compacted by cutting the tail of `.hip_fatbin`
/// (no program header added, the table stays after the ELF header), every dropped byte
/// leaves the file, the segment addresses stay, readelf is clean, and it registers the
/// same gfx90a images, kernels and variables statically and loaded through the runtime
/// shim.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang++-22, ld.lld-22 and llvm-readelf-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn fatbin_segment_with_its_own_address_offset_is_compacted() {
    if !external("clang++-22, ld.lld-22 and llvm-readelf-22") {
        return;
    }
    let dir = TempDir::new("prune-tail");
    let lib = hip_library_with_fatbin_after_bss(&dir);
    let segments = loads(&lib);
    let first = segments[0].1.wrapping_sub(segments[0].0);
    let last = segments.last().unwrap();
    assert_ne!(last.1.wrapping_sub(last.0), first, "{segments:x?}");

    let out = dir.path("pruned.so");
    let records = prune(&lib, &["gfx90a"], &[], &out);
    let summary = records.last().unwrap();
    let layout = summary["layout"].as_str().unwrap();
    assert!(
        layout.starts_with(
            "compacted: 2 containers in .hip_fatbin packed from the section start (1 moved,"
        ) && layout.contains("bytes of freed section tails removed from the file")
            && !layout.contains("table moved"),
        "{summary}"
    );
    let (before, after) = (
        std::fs::metadata(&lib).unwrap().len(),
        std::fs::metadata(&out).unwrap().len(),
    );
    assert_eq!(summary["size_after"], after);
    let dropped = dropped_bytes(&images(&lib), &images(&out));
    assert!(dropped > 200_000, "{dropped}");
    assert!(
        (before - after) * 10 >= dropped * 8,
        "{before} -> {after}: {} of {dropped} dropped bytes left the file",
        before - after
    );
    // Same segments at the same addresses; the fatbinary's is shorter.
    let pruned_segments = loads(&out);
    assert_eq!(pruned_segments.len(), segments.len());
    for (a, b) in segments.iter().zip(&pruned_segments) {
        assert_eq!(a.1, b.1);
    }
    readelf_clean(&out);
    let want = registered(&lib, "gfx90a", false);
    assert_eq!(want.len(), 2, "{want:?}");
    assert_eq!(registered(&out, "gfx90a", false), want, "static register");
    let loaded = registered(&lib, "gfx90a", true);
    assert_eq!(loaded.len(), 2, "{loaded:?}");
    for r in &loaded {
        assert_eq!(r["selected"], "hipv4-amdgcn-amd-amdhsa--gfx90a", "{r}");
        assert_eq!(
            r["entries"].as_array().unwrap().len(),
            2,
            "kernel and variable: {r}"
        );
    }
    assert_eq!(registered(&out, "gfx90a", true), loaded, "register --load");
}

/// Units no kept device can load: a HIP library pruned to gfx1100 keeps each bundle with
/// its host entry only (counted as emptied, nothing registered for gfx1100 before or
/// after); NVIDIA's `libk.so` pruned to sm_50 keeps empty fatbinaries, in which cuobjdump
/// finds nothing. With `--keep-unloadable-units` both are left whole, byte for byte.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang++-22, ld.lld-22 and NVIDIA's CUDA wheels (cuobjdump); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn unloadable_units_are_emptied_unless_kept_whole() {
    if !external("clang++-22, ld.lld-22 and NVIDIA's CUDA wheels (cuobjdump)") {
        return;
    }
    let dir = TempDir::new("prune-empty");
    let lib = hip_library_with_fatbin_after_bss(&dir);
    let out = dir.path("emptied.so");
    let records = prune(&lib, &["gfx1100"], &[], &out);
    let summary = records.last().unwrap();
    assert_eq!(summary["units_emptied"], 2, "{summary}");
    for r in &records[..2] {
        assert_eq!(r["emptied"], true, "{r}");
        assert_eq!(
            r["kept"],
            serde_json::json!(["host-x86_64-unknown-linux-gnu-"])
        );
        assert_eq!(r["missing"], serde_json::json!(["gfx1100"]));
    }
    let kept: Vec<String> = images(&out).into_iter().map(|i| i.0).collect();
    assert_eq!(kept, ["host-x86_64-unknown-linux-gnu-"; 2]);
    assert!(std::fs::metadata(&out).unwrap().len() < std::fs::metadata(&lib).unwrap().len());
    let (code, want) = registered_with_status(&lib, "gfx1100", false);
    assert_eq!(want.len(), 2);
    assert!(want.iter().all(|r| r["selected"].is_null()), "{want:?}");
    assert_eq!(registered_with_status(&out, "gfx1100", false), (code, want));
    let whole = dir.path("whole.so");
    let records = prune(&lib, &["gfx1100"], &["--keep-unloadable-units"], &whole);
    assert_eq!(records.last().unwrap()["units_emptied"], 0);
    assert!(records[..2].iter().all(|r| r["whole"] == true));
    assert_eq!(std::fs::read(&whole).unwrap(), std::fs::read(&lib).unwrap());

    let cuobjdump = common::cuda_tree().join("bin/cuobjdump");
    let libk = repo().join("tests/data/nvfatbin/files/libk.so");
    let list = |file: &Path| {
        let o = Command::new(&cuobjdump)
            .args(["-lelf", "-lptx"])
            .arg(file)
            .output()
            .unwrap();
        assert!(o.status.success(), "cuobjdump: {}", describe(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    assert!(list(&libk).lines().count() >= 4);
    let out = dir.path("libk.emptied.so");
    let records = prune(&libk, &["sm_50"], &[], &out);
    assert_eq!(records.last().unwrap()["units_emptied"], 2);
    assert_eq!(list(&out), "", "cuobjdump lists nothing");
    assert!(images(&out).is_empty());
    // Both fatbinaries are still registered (empty), as before.
    assert_eq!(registered_with_status(&out, "sm_50", false).1.len(), 2);
    let whole = dir.path("libk.whole.so");
    prune(&libk, &["sm_50"], &["--keep-unloadable-units"], &whole);
    assert_eq!(
        std::fs::read(&whole).unwrap(),
        std::fs::read(&libk).unwrap()
    );
}

/// `libggml-hip` of the cyllama-rocm 0.2.18 wheel (`scripts/fetch-cyllama-rocm.sh`; its
/// `.hip_fatbin` segment has `p_vaddr - p_offset` = 0x8000) pruned to gfx1100: compacted,
/// at least 80 % of the dropped device-code bytes leave the file, readelf is clean, and it
/// registers the same gfx1100 images and kernels statically. (`register --load` needs the
/// library's ROCm dependencies, libhipblas and librocblas, which are not fetched.)
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs the cyllama-rocm 0.2.18 wheel (scripts/fetch-cyllama-rocm.sh) and llvm-readelf-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn cyllama_libggml_hip_keeps_gfx1100() {
    if !external(
        "the cyllama-rocm 0.2.18 wheel (scripts/fetch-cyllama-rocm.sh) and llvm-readelf-22",
    ) {
        return;
    }
    let fetched = Command::new(repo().join("scripts/fetch-cyllama-rocm.sh"))
        .output()
        .unwrap();
    assert!(fetched.status.success(), "{}", describe(&fetched));
    let lib = PathBuf::from(String::from_utf8(fetched.stdout).unwrap().trim());
    let dir = TempDir::new("prune-ggml");
    let out = dir.path("libggml-hip.so");
    let records = prune(&lib, &["gfx1100"], &[], &out);
    let summary = records.last().unwrap();
    assert!(
        summary["layout"].as_str().unwrap().starts_with("compacted"),
        "{summary}"
    );
    let (before, after) = (
        std::fs::metadata(&lib).unwrap().len(),
        std::fs::metadata(&out).unwrap().len(),
    );
    let dropped = dropped_bytes(&images(&lib), &images(&out));
    eprintln!(
        "libggml-hip --keep gfx1100: {before} -> {after} bytes, {} of {dropped} dropped device-code bytes left the file",
        before - after
    );
    assert!(dropped > 100_000_000, "{dropped}");
    assert!(
        (before - after) * 10 >= dropped * 8,
        "{before} -> {after}, dropped {dropped}"
    );
    readelf_clean(&out);
    let want = registered(&lib, "gfx1100", false);
    assert_eq!(want.len(), 130);
    assert!(want
        .iter()
        .all(|r| r["selected"] == "hipv4-amdgcn-amd-amdhsa--gfx1100"));
    assert_eq!(registered(&out, "gfx1100", false), want);
}

/// A HIP library of two translation units linked by ld.lld-22 with its default layout:
/// `.hip_fatbin` in the middle of the first read-only `PT_LOAD`, and the first section right
/// after the program header table, or with `extra` link options.
fn hip_library(dir: &TempDir, name: &str, extra: &[&str]) -> PathBuf {
    let objects = hip_objects(dir, 2, hip_source);
    hip_runtime_stub(dir);
    let lib = dir.path(name);
    let o = Command::new("clang++-22")
        .args(["-shared", "-fuse-ld=lld"])
        .args(extra)
        .args(&objects)
        .arg(format!("-L{}", dir.path("").display()))
        .args(["-lamdhip64", "-o"])
        .arg(&lib)
        .output()
        .unwrap();
    assert!(o.status.success(), "link: {}", describe(&o));
    lib
}

/// Issue 28: a compacted library that splits its segment needs one more program header.
/// The table grows where it is: over free bytes after it, or, where the first sections
/// follow it directly, after moving those sections (the build-id note and the dynamic
/// symbol table here, with `.dynamic` and `PT_NOTE` following them) behind the kept
/// containers. GNU `strip` and `objcopy` (BFD, which always writes the table right after
/// the ELF header) and `llvm-strip-22` then rewrite the file without a warning, and the
/// result loads and registers what the unstripped pruned file registers through the
/// runtime shim.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang++-22, ld.lld-22, binutils' strip and objcopy, llvm-strip-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn compacted_libraries_survive_strip() {
    if !external("clang++-22, ld.lld-22, binutils' strip and objcopy, llvm-strip-22") {
        return;
    }
    let dir = TempDir::new("prune-strip");
    for (name, extra, moved) in [
        ("libmid.so", &[][..], true),
        (
            "libroom.so",
            &["-Wl,--section-start=.dynsym=0x400"][..],
            false,
        ),
    ] {
        let lib = hip_library(&dir, name, extra);
        let out = dir.path(&format!("pruned-{name}"));
        let records = prune(&lib, &["gfx90a"], &[], &out);
        let layout = records.last().unwrap()["layout"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(layout.contains("bytes of freed pages removed"), "{layout}");
        if moved {
            assert!(
                layout.contains("(table grown in place; .note.gnu.build-id, .dynsym moved"),
                "{layout}"
            );
        } else {
            assert!(layout.contains("(table grown in place)"), "{layout}");
        }
        assert_eq!(
            loads(&out).len(),
            loads(&lib).len() + 1,
            "{name}: one more PT_LOAD"
        );
        readelf_clean(&out);
        let want = registered(&out, "gfx90a", true);
        assert_eq!(want.len(), 2, "{want:?}");
        assert_eq!(want, registered(&lib, "gfx90a", true), "{name}");
        for tool in ["strip", "objcopy", "llvm-strip-22"] {
            let stripped = dir.path(&format!("{tool}-{name}"));
            let mut cmd = Command::new(tool);
            if tool == "objcopy" {
                cmd.arg(&out).arg(&stripped);
            } else {
                cmd.arg("-o").arg(&stripped).arg(&out);
            }
            let o = cmd.output().unwrap();
            assert!(
                o.status.success() && o.stderr.is_empty(),
                "{tool} {name}: {}",
                describe(&o)
            );
            readelf_clean(&stripped);
            assert_eq!(
                registered(&stripped, "gfx90a", true),
                want,
                "{name} after {tool}"
            );
        }
    }
}
