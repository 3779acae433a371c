//! `loader-sim wrap`: corpus code objects wrapped into a host object, linked with `cc` into
//! programs and shared libraries together with the runtime shim, run with
//! `LOADER_SIM_DEVICES`, and read back statically with `loader-sim register`.
//!
//! What every device must get is computed with the library's selection on the images of
//! the wrapped object itself, under the rule of the runtime the object registers with
//! (`Registry`'s policy: first compatible image in descriptor order for
//! `__tgt_register_lib`, `COMPATIBILITY.md` §7.5; the ranking of §10 for
//! `__hipRegisterFatBinary`), and the bytes each device got are compared with the input
//! files. The differential test compares the object with what LLVM 22's
//! `llvm-offload-wrapper` + `llc` make of the same images, and the registrations of
//! programs linked from either.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{corpus, llvm, ours, TempDir};
use loader_sim_rt::report::{EntryRecord, Record};
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, Object, ObjectSection, ObjectSymbol};
use offload_image::registration::{RegistrationKind, RegistryOptions, SimulatedDevice};
use offload_image::{for_each_unit, ReadOptions};
use sha2::{Digest, Sha256};

fn sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// OpenMP images, in descriptor order: `gfx90a` ("any") before `gfx90a:xnack+`, the
/// `gfx11-generic` object before the native `gfx1100` one, so that the first-compatible
/// rule and the ranking choose differently.
const OPENMP_IMAGES: [(&str, &str); 8] = [
    ("saxpy.gfx906.co", "gfx906"),
    ("saxpy.gfx90a_xnack-.co", "gfx90a:xnack-"),
    ("saxpy.gfx90a.co", "gfx90a"),
    ("saxpy.gfx90a_xnack+.co", "gfx90a:xnack+"),
    ("saxpy.gfx942_sramecc+_xnack-.co", "gfx942:sramecc+:xnack-"),
    ("saxpy.gfx11-generic.co", "gfx11-generic"),
    ("saxpy.gfx1100.co", "gfx1100"),
    ("saxpy.gfx1030.co", "gfx1030"),
];

/// HIP images: the bundler refuses `gfx90a` next to `gfx90a:xnack±` (conflicting target
/// IDs), so the "any" one is left out.
const HIP_IMAGES: [(&str, &str); 7] = [
    ("saxpy.gfx906.co", "gfx906"),
    ("saxpy.gfx90a_xnack-.co", "gfx90a:xnack-"),
    ("saxpy.gfx90a_xnack+.co", "gfx90a:xnack+"),
    ("saxpy.gfx942_sramecc+_xnack-.co", "gfx942:sramecc+:xnack-"),
    ("saxpy.gfx11-generic.co", "gfx11-generic"),
    ("saxpy.gfx1100.co", "gfx1100"),
    ("saxpy.gfx1030.co", "gfx1030"),
];

/// Simulated devices; `gfx1201` has no compatible image.
const DEVICES: [&str; 8] = [
    "gfx90a:xnack+",
    "gfx90a:xnack-",
    "gfx906:xnack-",
    "gfx942:sramecc+:xnack-",
    "gfx1100",
    "gfx1101",
    "gfx1030",
    "gfx1201",
];

fn devobj(name: &str) -> PathBuf {
    corpus(&format!("devobj/{name}"))
}

fn image_args(images: &[(&str, &str)]) -> Vec<String> {
    images
        .iter()
        .flat_map(|(file, arch)| {
            [
                "--image".to_string(),
                format!(
                    "file={},triple=amdgcn-amd-amdhsa,arch={arch}",
                    devobj(file).display()
                ),
            ]
        })
        .collect()
}

fn loader_sim(args: &[String]) -> Output {
    Command::new(ours())
        .args(args)
        .output()
        .expect("run loader-sim")
}

/// `loader-sim wrap -o OUT ARGS...`, which must succeed.
fn wrap(out: &Path, args: &[String]) {
    let mut all = vec![
        "wrap".to_string(),
        "-o".to_string(),
        out.display().to_string(),
    ];
    all.extend_from_slice(args);
    let o = loader_sim(&all);
    assert!(
        o.status.success(),
        "wrap failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The directory holding this build's `libloader_sim_rt.so` (cargo builds the cdylib of
/// the shim crate, a dependency of `loader-sim`, next to the binary or in `deps/`).
fn shim_dir() -> PathBuf {
    let bin = ours();
    let dir = bin.parent().unwrap();
    [dir.to_path_buf(), dir.join("deps")]
        .into_iter()
        .filter_map(|d| {
            let m = std::fs::metadata(d.join("libloader_sim_rt.so")).ok()?;
            Some((m.modified().ok()?, d))
        })
        .max_by_key(|(t, _)| *t)
        .map(|(_, d)| d)
        .unwrap_or_else(|| panic!("libloader_sim_rt.so not found next to {}", bin.display()))
}

/// The system C compiler: `$CC`, else `cc`.
fn system_cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

/// Runs the system C compiler with `args`, which must succeed.
fn cc(args: &[String]) {
    compile(&system_cc(), args);
}

/// Runs the C compiler `cc` with `args`, which must succeed.
fn compile(cc: &str, args: &[String]) {
    let o = Command::new(cc)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?} (install gcc): {e}"));
    assert!(
        o.status.success(),
        "{cc} {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Flags linking against the shim, found at run time through the rpath.
fn shim_link() -> Vec<String> {
    let d = shim_dir();
    vec![
        format!("-L{}", d.display()),
        "-lloader_sim_rt".to_string(),
        format!("-Wl,-rpath,{}", d.display()),
    ]
}

/// Host-side offload entries (`llvm_offload_entries`, the 56-byte layout of
/// `REGISTRATION.md` §1.2) as a host translation unit of the new offload driver emits
/// them: OpenMP (`Kind` 1) and HIP (`Kind` 4) entries side by side; each runtime binds
/// its own. Retained like LLVM's (`llvm.compiler.used`), so that lld's `--gc-sections`
/// keeps them.
const ENTRIES_C: &str = r#"
#include <stdint.h>
struct entry { uint64_t reserved; uint16_t version, kind; uint32_t flags; void *address;
               const char *name; uint64_t size, data; void *aux_addr; };
_Static_assert(sizeof(struct entry) == 56, "entry layout");
#define ENTRY __attribute__((used, retain, section("llvm_offload_entries"), aligned(8))) static struct entry

char saxpy_handle;                 /* host handle of the kernel */
int table[4], extern_var, managed_init[4];
void *managed_slot;
char surf_ref[8], tex_ref[8];

/* OpenMP: a kernel and a variable. */
ENTRY omp_kernel = { 0, 1, 1, 0x00, &saxpy_handle, "__omp_offloading_saxpy", 0, 0, 0 };
ENTRY omp_var = { 0, 1, 1, 0x00, table, "table", sizeof table, 0, 0 };
/* HIP (OffloadKind 4): kernel, __constant__ variable, extern variable, managed variable
   (Data = alignment, AuxAddr = pointer slot), surface (Data = type), texture (normalized,
   extern). */
ENTRY hip_kernel = { 0, 1, 4, 0x00, &saxpy_handle, "_Z5saxpyfPfS_", 0, 0, 0 };
ENTRY hip_const = { 0, 1, 4, 0x10, table, "const_table", sizeof table, 0, 0 };
ENTRY hip_extern = { 0, 1, 4, 0x08, &extern_var, "extern_var", sizeof extern_var, 0, 0 };
ENTRY hip_managed = { 0, 1, 4, 0x01, managed_init, "managed_var", sizeof managed_init, 16, &managed_slot };
ENTRY hip_surface = { 0, 1, 4, 0x02, surf_ref, "surf", sizeof surf_ref, 5, 0 };
ENTRY hip_texture = { 0, 1, 4, 0x03 | 0x08 | 0x20, tex_ref, "tex", sizeof tex_ref, 6, 0 };
"#;

/// A HIP entry numbered as LLVM 20 numbered HIP (`Kind` 3): the static reader decodes it
/// as HIP, and so does the wrapper's registration loop (LLVM 22's loop only takes 4).
const ENTRIES_LLVM20_C: &str = r#"
#include <stdint.h>
struct entry { uint64_t reserved; uint16_t version, kind; uint32_t flags; void *address;
               const char *name; uint64_t size, data; void *aux_addr; };
static char handle;
__attribute__((used, retain, section("llvm_offload_entries"), aligned(8))) static struct entry hip20 =
  { 0, 1, 3, 0x00, &handle, "llvm20_kernel", 0, 0, 0 };
"#;

const MAIN_C: &str = "int main(void) { return 0; }\n";

/// A program that `dlopen`s the library named by `argv[1]` and closes it again.
const DLOPEN_C: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  if (argc != 2) return 2;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 3; }
  if (dlclose(lib) != 0) { fprintf(stderr, "%s\n", dlerror()); return 4; }
  return 0;
}
"#;

/// The entries each runtime binds from `ENTRIES_C` (and `ENTRIES_LLVM20_C` after it):
/// `(name, kind, size, flags)`.
fn expected_entries(kind: RegistrationKind, llvm20: bool) -> Vec<(String, String, u64, u32)> {
    let e = |n: &str, k: &str, size: u64, flags: u32| (n.to_string(), k.to_string(), size, flags);
    match kind {
        RegistrationKind::OpenMp => vec![
            e("__omp_offloading_saxpy", "kernel", 0, 0),
            e("table", "variable", 16, 0),
        ],
        // As the `__hipRegister*` calls pass them: no size for surfaces and textures.
        _ => {
            let mut v = vec![
                e("_Z5saxpyfPfS_", "kernel", 0, 0),
                e("const_table", "variable", 16, 0x10),
                e("extern_var", "variable", 4, 0x08),
                e("managed_var", "managed", 16, 0x01),
                e("surf", "surface", 0, 0x02),
                e("tex", "texture", 0, 0x03 | 0x08 | 0x20),
            ];
            if llvm20 {
                v.push(e("llvm20_kernel", "kernel", 0, 0));
            }
            v
        }
    }
}

fn entries_of(r: &Record) -> Vec<(String, String, u64, u32)> {
    r.entries
        .iter()
        .map(|e: &EntryRecord| (e.name.clone(), e.kind.clone(), e.size, e.flags))
        .collect()
}

/// Runs `exe args...` with the simulated devices; returns the shim's report.
fn run(exe: &Path, args: &[String], report: &Path) -> Vec<Record> {
    let _ = std::fs::remove_file(report);
    let o = Command::new(exe)
        .args(args)
        .env("LOADER_SIM_DEVICES", DEVICES.join(","))
        .env("LOADER_SIM_REPORT", report)
        .env_remove("LOADER_SIM_POLICY")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{} failed ({}): {}",
        exe.display(),
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(report)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `loader-sim register FILE --device ... --json` (static), or with `--load`.
fn register(file: &Path, load: bool) -> Vec<Record> {
    let mut args = vec!["register".to_string()];
    if load {
        args.push("--load".to_string());
    }
    args.push(file.display().to_string());
    args.push("--json".to_string());
    for d in DEVICES {
        args.push("--device".to_string());
        args.push(d.to_string());
    }
    let o = loader_sim(&args);
    // Exit status 1: gfx1201 gets no image.
    assert_eq!(
        o.status.code(),
        Some(1),
        "register: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Per device, the SHA-256 of the image the runtime's rule picks among the images of the
/// wrapped object (read back with the library), or `None`.
fn expected_choices(object: &Path, kind: RegistrationKind) -> BTreeMap<String, Option<String>> {
    let data = std::fs::read(object).unwrap();
    let options = ReadOptions::default();
    let select = RegistryOptions::default().select_for(kind);
    let mut out = BTreeMap::new();
    let mut units = 0;
    for_each_unit(&data, &options, |unit| {
        units += 1;
        let open = unit.open(&options)?;
        let images: Vec<_> = open.images().collect();
        for d in DEVICES {
            let device = SimulatedDevice::parse(d).unwrap();
            let s = offload_image::select(&images, device.device(), &select);
            out.insert(d.to_string(), s.chosen().map(|i| sha256(images[i].bytes)));
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(units, 1, "the wrapped object holds one unit");
    out
}

/// The input file whose bytes have this SHA-256.
fn input_named(images: &[(&str, &str)], sha: &str) -> String {
    images
        .iter()
        .map(|(f, _)| f.to_string())
        .find(|f| sha256(&std::fs::read(devobj(f)).unwrap()) == sha)
        .unwrap_or_else(|| panic!("{sha} is none of the input files"))
}

/// Checks the run's records: one per device, the expected image (by SHA-256 of an input
/// file), the expected entries, all unregistered by the program. Returns the registered
/// unit's address.
fn check_run(
    records: &[Record],
    expected: &BTreeMap<String, Option<String>>,
    kind: RegistrationKind,
    images: &[(&str, &str)],
    unit_prefix: &str,
) -> u64 {
    assert_eq!(
        records.len(),
        DEVICES.len(),
        "one unit x devices: {records:#?}"
    );
    for r in records {
        let d = r.device.as_deref().unwrap();
        assert_eq!(r.registration, kind.name());
        assert!(
            r.unit.starts_with(unit_prefix),
            "unit labelled by its module: {}",
            r.unit
        );
        assert_eq!(&r.sha256, &expected[d], "{d}: selected {:?}", r.selected);
        if let Some(sha) = &r.sha256 {
            let file = input_named(images, sha);
            let size = std::fs::metadata(devobj(&file)).unwrap().len();
            assert_eq!(r.size, Some(size), "{d}: {file}");
        } else {
            assert_eq!(r.selected, None);
        }
        assert_eq!(entries_of(r), expected_entries(kind, true), "{d}: entries");
        assert_eq!(
            r.unregistered,
            Some(true),
            "{d}: the program unregistered the unit"
        );
        assert_eq!(r.address, records[0].address);
    }
    records[0].address
}

/// The static reading must find the unit the run registered, with the same choices.
fn check_static(statically: &[Record], run: &[Record]) {
    let key = |r: &Record| {
        (
            r.device.clone(),
            r.registration.clone(),
            r.address,
            r.selected.clone(),
            r.size,
            r.sha256.clone(),
            entries_of(r),
        )
    };
    let mut a: Vec<_> = statically.iter().map(key).collect();
    let mut b: Vec<_> = run.iter().map(key).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "static reading and run disagree");
    assert!(statically.iter().all(|r| r.unregistered.is_none()));
}

/// The chosen input file per device, for the rule assertions.
fn chosen_files(
    expected: &BTreeMap<String, Option<String>>,
    images: &[(&str, &str)],
) -> BTreeMap<String, Option<String>> {
    expected
        .iter()
        .map(|(d, sha)| (d.clone(), sha.as_ref().map(|s| input_named(images, s))))
        .collect()
}

fn elf_section<'a>(data: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let f = ElfFile64::<Endianness>::parse(data).unwrap();
    f.section_by_name(name).map(|s| s.data().unwrap())
}

/// The linked file's stack is not executable (`PT_GNU_STACK` without `PF_X`): every
/// input, the wrapper object included, carries `.note.GNU-stack`.
fn assert_stack_not_executable(file: &Path) {
    let data = std::fs::read(file).unwrap();
    let f = ElfFile64::<Endianness>::parse(&*data).unwrap();
    let stack = f
        .elf_program_headers()
        .iter()
        .find(|p| p.p_type(f.endian()) == object::elf::PT_GNU_STACK)
        .expect("PT_GNU_STACK");
    assert_eq!((stack.p_flags(f.endian()) & object::elf::PF_X).0, 0);
}

/// Builds, in `dir`, with the compiler `compiler`, a program linked with `wrapped` and the
/// entries, and a shared library plus a program that `dlopen`s it. `extra` goes to both
/// links (`-no-pie` only to the program's).
fn build(
    dir: &TempDir,
    wrapped: &Path,
    compiler: &str,
    extra: &[&str],
) -> (PathBuf, PathBuf, PathBuf) {
    let entries = dir.write("entries.c", ENTRIES_C.as_bytes());
    let entries20 = dir.write("entries20.c", ENTRIES_LLVM20_C.as_bytes());
    let main = dir.write("main.c", MAIN_C.as_bytes());
    let dl = dir.write("dlopen.c", DLOPEN_C.as_bytes());
    let prog = dir.path("prog");
    let lib = dir.path("libwrapped.so");
    let loader = dir.path("loader");
    let mut args: Vec<String> = vec!["-o".into(), prog.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend([
        main.display().to_string(),
        entries.display().to_string(),
        entries20.display().to_string(),
    ]);
    args.push(wrapped.display().to_string());
    args.extend(shim_link());
    compile(compiler, &args);
    let mut args: Vec<String> = vec![
        "-shared".into(),
        "-fPIC".into(),
        "-Wl,--no-undefined".into(),
        "-o".into(),
        lib.display().to_string(),
        entries.display().to_string(),
        entries20.display().to_string(),
        wrapped.display().to_string(),
    ];
    args.extend(
        extra
            .iter()
            .filter(|a| **a != "-no-pie")
            .map(|s| s.to_string()),
    );
    args.extend(shim_link());
    compile(compiler, &args);
    compile(
        compiler,
        &[
            "-o".into(),
            loader.display().to_string(),
            dl.display().to_string(),
            "-ldl".into(),
        ],
    );
    (prog, lib, loader)
}

/// Wraps `images` for `kind`, links, runs, reads statically; returns the per-device
/// choices (input file names) for the rule assertions.
fn wrap_link_run(
    kind: RegistrationKind,
    images: &[(&str, &str)],
    tag: &str,
) -> BTreeMap<String, Option<String>> {
    let dir = TempDir::new(tag);
    let wrapped = dir.path("wrapped.o");
    let mut args = image_args(images);
    if kind == RegistrationKind::Hip {
        args.extend(["--kind".to_string(), "hip".to_string()]);
    }
    wrap(&wrapped, &args);
    let expected = expected_choices(&wrapped, kind);

    // PIE (the default), a fixed-address executable, links that drop unreferenced
    // sections with GNU ld and with lld (which also drops sections only `__start_` /
    // `__stop_` refer to, unless they are retained).
    let cc = system_cc();
    let clang = llvm("clang-22").display().to_string();
    let variants: [(&str, &[&str]); 4] = [
        (&cc, &[]),
        (&cc, &["-no-pie"]),
        (&cc, &["-Wl,--gc-sections"]),
        (&clang, &["-fuse-ld=lld", "-Wl,--gc-sections"]),
    ];
    for (compiler, extra) in variants {
        let (prog, lib, loader) = build(&dir, &wrapped, compiler, extra);
        assert_stack_not_executable(&prog);
        assert_stack_not_executable(&lib);
        if kind == RegistrationKind::OpenMp {
            let mut list = Vec::new();
            for (_, arch) in images {
                list.extend_from_slice(arch.as_bytes());
                list.push(0);
            }
            let data = std::fs::read(&prog).unwrap();
            assert_eq!(
                elf_section(&data, ".offload_arch_list"),
                Some(&list[..]),
                "{extra:?}"
            );
        }

        // A program: registered by its constructor, unregistered at exit.
        let report = dir.path("prog.jsonl");
        let records = run(&prog, &[], &report);
        let address = check_run(&records, &expected, kind, images, "prog+");
        check_static(&register(&prog, false), &records);

        // A shared library opened with dlopen: registered by dlopen, unregistered by
        // dlclose.
        let report = dir.path("lib.jsonl");
        let records = run(&loader, &[lib.display().to_string()], &report);
        check_run(&records, &expected, kind, images, "libwrapped.so+");
        check_static(&register(&lib, false), &records);
        // The same through `register --load` (which loads the library with the shim).
        let mut loaded = register(&lib, true);
        let mut again = records.clone();
        loaded.sort_by(|a, b| a.device.cmp(&b.device));
        again.sort_by(|a, b| a.device.cmp(&b.device));
        assert_eq!(loaded, again);

        if kind == RegistrationKind::OpenMp {
            // The descriptor's address in the static reading is the run's.
            assert!(register(&prog, false).iter().all(|r| r.address == address));
        }
    }
    chosen_files(&expected, images)
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-22 and ld.lld-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn openmp_wrapped_images_register_in_programs_and_dlopened_libraries() {
    if !common::external("clang-22 and ld.lld-22") {
        return;
    }
    let chosen = wrap_link_run(RegistrationKind::OpenMp, &OPENMP_IMAGES, "wrap-omp");
    let file = |d: &str| chosen[d].as_deref();
    // The LLVM offload runtime gives each device the first compatible image in descriptor
    // order (COMPATIBILITY.md §7.5): the "any" gfx90a object comes before the xnack+
    // one, the gfx11-generic object before the native gfx1100 one.
    assert_eq!(file("gfx90a:xnack+"), Some("saxpy.gfx90a.co"));
    assert_eq!(file("gfx90a:xnack-"), Some("saxpy.gfx90a_xnack-.co"));
    assert_eq!(file("gfx906:xnack-"), Some("saxpy.gfx906.co"));
    assert_eq!(
        file("gfx942:sramecc+:xnack-"),
        Some("saxpy.gfx942_sramecc+_xnack-.co")
    );
    assert_eq!(file("gfx1100"), Some("saxpy.gfx11-generic.co"));
    assert_eq!(file("gfx1101"), Some("saxpy.gfx11-generic.co"));
    assert_eq!(file("gfx1030"), Some("saxpy.gfx1030.co"));
    assert_eq!(file("gfx1201"), None);
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-22 and ld.lld-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn hip_wrapped_fat_binary_registers_in_programs_and_dlopened_libraries() {
    if !common::external("clang-22 and ld.lld-22") {
        return;
    }
    let chosen = wrap_link_run(RegistrationKind::Hip, &HIP_IMAGES, "wrap-hip");
    let file = |d: &str| chosen[d].as_deref();
    // The ranking (COMPATIBILITY.md §10): exact feature match, native before generic.
    assert_eq!(file("gfx90a:xnack+"), Some("saxpy.gfx90a_xnack+.co"));
    assert_eq!(file("gfx90a:xnack-"), Some("saxpy.gfx90a_xnack-.co"));
    assert_eq!(file("gfx906:xnack-"), Some("saxpy.gfx906.co"));
    assert_eq!(file("gfx1100"), Some("saxpy.gfx1100.co"));
    assert_eq!(file("gfx1101"), Some("saxpy.gfx11-generic.co"));
    assert_eq!(file("gfx1201"), None);
}

/// A program without any offload entry: the empty entry section disappears in the link
/// (`__start_` = `__stop_`), and the descriptor is still registered and found statically.
#[test]
fn openmp_program_without_entries() {
    let dir = TempDir::new("wrap-noentries");
    let wrapped = dir.path("wrapped.o");
    wrap(&wrapped, &image_args(&OPENMP_IMAGES[..2]));
    let main = dir.write("main.c", MAIN_C.as_bytes());
    let prog = dir.path("prog");
    let mut args = vec![
        "-o".to_string(),
        prog.display().to_string(),
        main.display().to_string(),
        wrapped.display().to_string(),
    ];
    args.extend(shim_link());
    cc(&args);
    let records = run(&prog, &[], &dir.path("r.jsonl"));
    assert_eq!(records.len(), DEVICES.len());
    let by_device: BTreeMap<_, _> = records
        .iter()
        .map(|r| (r.device.clone().unwrap(), r.sha256.clone()))
        .collect();
    let sha = |f: &str| Some(sha256(&std::fs::read(devobj(f)).unwrap()));
    assert_eq!(by_device["gfx906:xnack-"], sha("saxpy.gfx906.co"));
    assert_eq!(by_device["gfx90a:xnack-"], sha("saxpy.gfx90a_xnack-.co"));
    assert_eq!(by_device["gfx90a:xnack+"], None);
    assert!(records
        .iter()
        .all(|r| r.entries.is_empty() && r.unregistered == Some(true)));
    check_static(&register(&prog, false), &records);
}

/// The object's layout: OffloadBinaries as `clang-offload-packager` writes them, the
/// `.offload_arch_list` strings, the bundle as `clang-offload-bundler` writes it.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-packager-22 and clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn payloads_are_what_llvm_tools_write() {
    if !common::external("clang-offload-packager-22 and clang-offload-bundler-22") {
        return;
    }
    let dir = TempDir::new("wrap-payload");
    // Copies named `.o`, so that the packager's image kind (by extension) is "object".
    let mut specs = Vec::new();
    for (file, arch) in &OPENMP_IMAGES {
        let copy = dir.path(&format!("{arch}.o"));
        std::fs::copy(devobj(file), &copy).unwrap();
        specs.push(format!(
            "file={},triple=amdgcn-amd-amdhsa,arch={arch},kind=openmp",
            copy.display()
        ));
    }
    let wrapped = dir.path("omp.o");
    let args: Vec<String> = specs
        .iter()
        .flat_map(|s| ["--image".to_string(), s.clone()])
        .collect();
    wrap(&wrapped, &args);
    let data = std::fs::read(&wrapped).unwrap();
    let mut want = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let ob = dir.path(&format!("{i}.ob"));
        let o = Command::new(llvm("clang-offload-packager-22"))
            .arg("-o")
            .arg(&ob)
            .arg(format!("--image={s}"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        want.extend(std::fs::read(&ob).unwrap());
        while want.len() % 8 != 0 {
            want.push(0);
        }
    }
    assert_eq!(elf_section(&data, ".llvm.offloading").unwrap(), &want[..]);
    let mut arch_list = Vec::new();
    for (_, arch) in &OPENMP_IMAGES {
        arch_list.extend_from_slice(arch.as_bytes());
        arch_list.push(0);
    }
    assert_eq!(
        elf_section(&data, ".offload_arch_list").unwrap(),
        &arch_list[..]
    );

    // HIP (chosen by the images' kind=, without --kind): the bundle clang-linker-wrapper
    // has clang-offload-bundler write.
    let wrapped = dir.path("hip.o");
    let args: Vec<String> = image_args(&HIP_IMAGES)
        .into_iter()
        .map(|a| {
            if a.starts_with("file=") {
                a + ",kind=hip"
            } else {
                a
            }
        })
        .collect();
    wrap(&wrapped, &args);
    let bundle = dir.path("ref.hipfb");
    let mut targets = vec!["host-x86_64-unknown-linux-gnu".to_string()];
    let mut inputs = vec!["-input=/dev/null".to_string()];
    for (file, arch) in &HIP_IMAGES {
        targets.push(format!("hip-amdgcn-amd-amdhsa--{arch}"));
        inputs.push(format!("-input={}", devobj(file).display()));
    }
    let o = Command::new(llvm("clang-offload-bundler-22"))
        .args(["-type=o", "-bundle-align=4096"])
        .arg(format!("-targets={}", targets.join(",")))
        .args(&inputs)
        .arg(format!("-output={}", bundle.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let data = std::fs::read(&wrapped).unwrap();
    assert_eq!(
        elf_section(&data, ".hip_fatbin").unwrap(),
        &std::fs::read(&bundle).unwrap()[..]
    );
    let f = ElfFile64::<Endianness>::parse(&*data).unwrap();
    assert_eq!(f.section_by_name(".hip_fatbin").unwrap().align(), 4096);
}

/// Section attributes of an object: name → (type, flags, alignment), for the sections
/// both wrappers emit.
fn sections(data: &[u8]) -> BTreeMap<String, (u32, u64, u64)> {
    let f = ElfFile64::<Endianness>::parse(data).unwrap();
    f.sections()
        .filter_map(|s| {
            let name = s.name().ok()?.to_string();
            let object::SectionFlags::Elf { sh_type, sh_flags } = s.flags() else {
                return None;
            };
            Some((name, (sh_type.0, sh_flags.0, s.align())))
        })
        .collect()
}

/// `llvm_offload_entries` as LLVM 22 emits it, plus `SHF_GNU_RETAIN` (as LLVM main emits
/// it: `llvm-offload-wrapper`'s test expects `AR`).
fn assert_retained_entry_section(
    ours: &BTreeMap<String, (u32, u64, u64)>,
    theirs: &BTreeMap<String, (u32, u64, u64)>,
) {
    let retain = object::elf::SHF_GNU_RETAIN.0;
    let (t, f, a) = ours["llvm_offload_entries"];
    assert_eq!(f & retain, retain);
    assert_eq!(
        Some(&(t, f & !retain, a)),
        theirs.get("llvm_offload_entries")
    );
}

/// Every relocation of `section`, resolved to (offset, type, target, addend from the
/// target): `target` is `section name` for defined symbols (addend counted from the
/// section start) or the symbol name for undefined ones.
fn resolved_relocs(data: &[u8], section: &str) -> Vec<(u64, u32, String, i64)> {
    let f = ElfFile64::<Endianness>::parse(data).unwrap();
    let s = f.section_by_name(section).unwrap();
    let mut out: Vec<_> = s
        .relocations()
        .map(|(offset, r)| {
            let object::RelocationFlags::Elf { r_type } = r.flags() else {
                panic!()
            };
            let object::RelocationTarget::Symbol(i) = r.target() else {
                panic!()
            };
            let sym = f.symbol_by_index(i).unwrap();
            match sym.section_index() {
                Some(si) => {
                    let name = f.section_by_index(si).unwrap().name().unwrap().to_string();
                    (offset, r_type.0, name, r.addend() + sym.address() as i64)
                }
                None => (
                    offset,
                    r_type.0,
                    sym.name().unwrap().to_string(),
                    r.addend(),
                ),
            }
        })
        .collect();
    out.sort();
    out
}

/// LLVM 22's wrapper module for the same images, compiled by `llc` (PIC).
fn llvm_wrapper(dir: &TempDir, kind: &str, inputs: &[PathBuf]) -> PathBuf {
    let bc = dir.path(&format!("{kind}.bc"));
    let obj = dir.path(&format!("{kind}.llvm.o"));
    let o = Command::new(llvm("llvm-offload-wrapper-22"))
        .args([
            "--triple=x86_64-unknown-linux-gnu",
            &format!("--kind={kind}"),
            "-o",
        ])
        .arg(&bc)
        .args(inputs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(llvm("llc-22"))
        .args(["-filetype=obj", "-relocation-model=pic", "-o"])
        .arg(&obj)
        .arg(&bc)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    obj
}

/// Programs linked from LLVM's wrapper object and from ours register the same thing: the
/// same images for every device, the same entries (LLVM's `.hip.globals_reg` against our
/// hand-written loop), and both unregister.
fn same_registrations(dir: &TempDir, ours: &Path, theirs: &Path) {
    let entries = dir.write("entries.c", ENTRIES_C.as_bytes());
    let main = dir.write("main.c", MAIN_C.as_bytes());
    let mut reports = Vec::new();
    for (tag, obj) in [("ours", ours), ("llvm", theirs)] {
        let prog = dir.path(&format!("prog-{tag}"));
        let mut args = vec![
            "-o".to_string(),
            prog.display().to_string(),
            main.display().to_string(),
            entries.display().to_string(),
            obj.display().to_string(),
        ];
        args.extend(shim_link());
        cc(&args);
        let records = run(&prog, &[], &dir.path(&format!("{tag}.jsonl")));
        assert_eq!(records.len(), DEVICES.len());
        assert!(records.iter().all(|r| r.unregistered == Some(true)));
        let mut key: Vec<_> = records
            .iter()
            .map(|r| {
                (
                    r.device.clone(),
                    r.registration.clone(),
                    r.selected.clone(),
                    r.sha256.clone(),
                    entries_of(r),
                )
            })
            .collect();
        key.sort();
        reports.push(key);
    }
    assert_eq!(reports[0], reports[1]);
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-packager-22, llvm-offload-wrapper-22 and llc-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn openmp_object_matches_llvm_offload_wrapper() {
    if !common::external("clang-offload-packager-22, llvm-offload-wrapper-22 and llc-22") {
        return;
    }
    let dir = TempDir::new("wrap-diff-omp");
    let mut specs = Vec::new();
    let mut binaries = Vec::new();
    for (i, (file, arch)) in OPENMP_IMAGES.iter().enumerate() {
        let copy = dir.path(&format!("img{i}.o"));
        std::fs::copy(devobj(file), &copy).unwrap();
        let spec = format!(
            "file={},triple=amdgcn-amd-amdhsa,arch={arch},kind=openmp",
            copy.display()
        );
        let ob = dir.path(&format!("img{i}.ob"));
        let o = Command::new(llvm("clang-offload-packager-22"))
            .arg("-o")
            .arg(&ob)
            .arg(format!("--image={spec}"))
            .output()
            .unwrap();
        assert!(o.status.success());
        specs.push(spec);
        binaries.push(ob);
    }
    let ours = dir.path("omp.o");
    let args: Vec<String> = specs
        .iter()
        .flat_map(|s| ["--image".to_string(), s.clone()])
        .collect();
    wrap(&ours, &args);
    let theirs = llvm_wrapper(&dir, "openmp", &binaries);
    let (a, b) = (
        std::fs::read(&ours).unwrap(),
        std::fs::read(&theirs).unwrap(),
    );

    // The same sections with the same attributes (ours adds `.offload_arch_list`; LLVM
    // adds `.eh_frame` and an empty `.text`).
    let (sa, sb) = (sections(&a), sections(&b));
    for name in [
        ".text.startup",
        ".llvm.offloading",
        ".init_array.101",
        ".note.GNU-stack",
    ] {
        assert_eq!(sa.get(name), sb.get(name), "{name}");
    }
    assert_retained_entry_section(&sa, &sb);
    // `.data.rel.ro`: LLVM aligns it to 16, the records need 8.
    assert_eq!(sa[".data.rel.ro"].0, sb[".data.rel.ro"].0);
    assert_eq!(sa[".data.rel.ro"].1, sb[".data.rel.ro"].1);
    // Identical image bytes and descriptor records, pointing at the same places.
    for name in [".llvm.offloading", ".data.rel.ro"] {
        assert_eq!(elf_section(&a, name), elf_section(&b, name), "{name}");
    }
    for name in [".data.rel.ro", ".text.startup", ".init_array.101"] {
        assert_eq!(
            resolved_relocs(&a, name),
            resolved_relocs(&b, name),
            "{name}"
        );
    }
    // The same code, but for the padding between the functions (int3 here, nops there).
    let (ta, tb) = (
        elf_section(&a, ".text.startup").unwrap(),
        elf_section(&b, ".text.startup").unwrap(),
    );
    assert_eq!(ta.len(), tb.len());
    assert_eq!(ta[..0x1b], tb[..0x1b]);
    assert_eq!(ta[0x20..], tb[0x20..]);

    same_registrations(&dir, &ours, &theirs);
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs llvm-offload-wrapper-22 and llc-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn hip_object_matches_llvm_offload_wrapper() {
    if !common::external("llvm-offload-wrapper-22 and llc-22") {
        return;
    }
    let dir = TempDir::new("wrap-diff-hip");
    let ours = dir.path("hip.o");
    let mut args = image_args(&HIP_IMAGES);
    args.extend(["--kind".to_string(), "hip".to_string()]);
    wrap(&ours, &args);
    let a = std::fs::read(&ours).unwrap();
    // LLVM's wrapper of the very bundle ours embeds.
    let bundle = dir.write("fatbin.hipfb", elf_section(&a, ".hip_fatbin").unwrap());
    let theirs = llvm_wrapper(&dir, "hip", &[bundle]);
    let b = std::fs::read(&theirs).unwrap();
    let (sa, sb) = (sections(&a), sections(&b));
    assert_retained_entry_section(&sa, &sb);
    for name in [
        ".text.startup",
        ".hipFatBinSegment",
        ".bss",
        ".init_array.101",
        ".note.GNU-stack",
    ] {
        assert_eq!(
            sa.get(name).map(|s| (s.0, s.1)),
            sb.get(name).map(|s| (s.0, s.1)),
            "{name}"
        );
    }
    assert_eq!(sa[".hip_fatbin"].0, sb[".hip_fatbin"].0);
    assert_eq!(sa[".hip_fatbin"].1, sb[".hip_fatbin"].1);
    for name in [".hip_fatbin", ".hipFatBinSegment"] {
        assert_eq!(elf_section(&a, name), elf_section(&b, name), "{name}");
    }
    for name in [".hipFatBinSegment", ".init_array.101"] {
        assert_eq!(
            resolved_relocs(&a, name),
            resolved_relocs(&b, name),
            "{name}"
        );
    }
    // The functions and the external calls the code makes.
    let names = |data: &[u8]| {
        let f = ElfFile64::<Endianness>::parse(data).unwrap();
        let mut v: Vec<String> = f
            .symbols()
            .filter_map(|s| s.name().ok().map(str::to_string))
            .filter(|n| {
                n.starts_with(".hip.")
                    || n.starts_with("__hip")
                    || n == "atexit"
                    || n.starts_with("__st")
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let mut theirs_names = names(&b);
    // LLVM declares `__cudaRegisterFatBinaryEnd` for HIP too, without calling it.
    theirs_names.retain(|n| n != "__cudaRegisterFatBinaryEnd");
    assert_eq!(names(&a), theirs_names);

    same_registrations(&dir, &ours, &theirs);
}

/// Bad `--image` specs: exit status 2, one line on standard error saying what is wrong,
/// no output file.
#[test]
fn bad_image_specs_exit_2() {
    let dir = TempDir::new("wrap-bad");
    let co = devobj("saxpy.gfx906.co");
    let co = co.display();
    let missing = dir.path("missing.co");
    let empty = dir.write("empty.co", b"");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![format!(
                "file={},triple=amdgcn-amd-amdhsa,arch=gfx906",
                empty.display()
            )],
            "the image is empty",
        ),
        (
            vec![format!("triple=amdgcn-amd-amdhsa,arch=gfx906")],
            "missing file=",
        ),
        (
            vec![format!(
                "file={},triple=amdgcn-amd-amdhsa,arch=gfx906",
                missing.display()
            )],
            "cannot read",
        ),
        (
            vec![format!(
                "file={co},triple=amdgcn-amd-amdhsa,arch=gfx906,kind=foo"
            )],
            "unknown kind 'foo'",
        ),
        (
            vec![format!(
                "file={co},triple=amdgcn-amd-amdhsa,arch=gfx906,kind=cuda"
            )],
            "wrapping cuda images is not supported",
        ),
        (vec![format!("file={co},arch=gfx906")], "missing triple="),
        (
            vec![format!("file={co},triple=amdgcn-amd-amdhsa")],
            "missing arch=",
        ),
        (
            vec![format!("file={co},triple=amdgcn-amd-amdhsa,arch=")],
            "missing arch=",
        ),
        (
            vec![format!("file={co},triple=amdgcn-amd-amdhsa,arch=gfx9999")],
            "arch 'gfx9999'",
        ),
        (
            vec![format!(
                "file={co},triple=amdgcn-amd-amdhsa,arch=gfx906,arch=gfx90a"
            )],
            "key 'arch' is given twice",
        ),
        (
            vec![format!("file={co},triple=amdgcn,arch=gfx906")],
            "triple 'amdgcn'",
        ),
        (
            vec![
                format!("file={co},triple=amdgcn-amd-amdhsa,arch=gfx906,kind=hip"),
                format!("file={co},triple=amdgcn-amd-amdhsa,arch=gfx1030,kind=openmp"),
            ],
            "does not match the wrapper's kind hip",
        ),
        (
            vec![
                format!("file={co},triple=amdgcn-amd-amdhsa,arch=gfx906,kind=hip"),
                format!("file={co},triple=amdgcn-amd-amdhsa,arch=gfx906:xnack+,kind=hip"),
            ],
            "conflicting targets 'gfx906' and 'gfx906:xnack+'",
        ),
        (
            vec![
                format!("file={co},triple=amdgcn-amd-amdhsa,arch=gfx906,kind=hip"),
                format!("file={co},triple=amdgcn-amd-amdhsa-unknown,arch=gfx906,kind=hip"),
            ],
            "bundle entry ID 'hip-amdgcn-amd-amdhsa--gfx906' is given twice",
        ),
        (
            vec![format!(
                "file={co},triple=nvptx64-nvidia-cuda,arch=sm_80,kind=hip"
            )],
            "is not amdgcn",
        ),
    ];
    for (specs, message) in cases {
        let out = dir.path("out.o");
        let _ = std::fs::remove_file(&out);
        let mut args = vec![
            "wrap".to_string(),
            "-o".to_string(),
            out.display().to_string(),
        ];
        for s in &specs {
            args.push("--image".to_string());
            args.push(s.clone());
        }
        let o = loader_sim(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{specs:?}: {stderr}");
        assert!(
            stderr.starts_with("loader-sim: error: ") && stderr.contains(message),
            "{specs:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!out.exists(), "{specs:?}: no output on error");
    }
}

/// An image whose ELF header names another target than its `arch` is wrapped, with a
/// warning (runtimes go by the header).
#[test]
fn arch_that_contradicts_the_elf_header_warns() {
    let dir = TempDir::new("wrap-warn");
    let out = dir.path("out.o");
    let o = loader_sim(&[
        "wrap".to_string(),
        "-o".to_string(),
        out.display().to_string(),
        "--image".to_string(),
        format!(
            "file={},triple=amdgcn-amd-amdhsa,arch=gfx90a:xnack-",
            devobj("saxpy.gfx90a_xnack+.co").display()
        ),
    ]);
    assert!(o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains("gfx90a:xnack+"),
        "{stderr}"
    );
    assert!(out.exists());
}
