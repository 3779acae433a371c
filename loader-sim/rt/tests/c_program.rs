//! A C program linked against the runtime shim registers hand-made descriptors of corpus
//! images through `__tgt_register_lib` (legacy 32-byte and current 56-byte entry tables,
//! a descriptor built on the heap) and a HIP fat binary through `__hipRegisterFatBinary`;
//! the shim's report must give every device the image the selection rules require
//! (`COMPATIBILITY.md` §7.5 for descriptors: first compatible image in descriptor order;
//! §10 for fat binaries) and list the entries the runtime binds (`REGISTRATION.md` §1.3,
//! §3.3).
//!
//! The program is generated here, compiled with `cc` (or `$CC`), and linked against
//! `libloader_sim_rt.so` from the build directory (cargo builds the cdylib alongside the
//! rlib this test depends on).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use loader_sim_rt::report::Record;
use sha2::{Digest, Sha256};

fn corpus(rel: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpus")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// The directory holding `libloader_sim_rt.so` for this build.
fn shim_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory").to_path_buf();
    for d in [deps.clone(), deps.parent().unwrap_or(&deps).to_path_buf()] {
        if d.join("libloader_sim_rt.so").is_file() {
            return d;
        }
    }
    panic!(
        "libloader_sim_rt.so not found next to {} (cargo builds it with this package's tests)",
        exe.display()
    );
}

fn c_array(out: &mut String, name: &str, bytes: &[u8]) {
    let _ = write!(
        out,
        "static const unsigned char {name}[{}] __attribute__((aligned(8))) = {{",
        bytes.len()
    );
    for (i, b) in bytes.iter().enumerate() {
        if i % 24 == 0 {
            out.push('\n');
        }
        let _ = write!(out, "{b},");
    }
    out.push_str("\n};\n");
}

const PROGRAM: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* REGISTRATION.md §1.1, §1.2, §1.6, §1.7, §4.1 (LP64). */
struct legacy_entry { void *addr; char *name; size_t size; int32_t flags; int32_t data; };
struct entry { uint64_t reserved; uint16_t version; uint16_t kind; uint32_t flags; void *address;
               char *symbol_name; uint64_t size; uint64_t data; void *aux_addr; };
struct device_image { const void *start; const void *end; void *entries_begin; void *entries_end; };
struct bin_desc { int32_t n; struct device_image *images; void *entries_begin; void *entries_end; };
struct fatbin_wrapper { uint32_t magic; uint32_t version; const void *binary; void *unused; };

void __tgt_register_lib(struct bin_desc *);
void __tgt_unregister_lib(struct bin_desc *);
void **__hipRegisterFatBinary(const void *);
void __hipRegisterFunction(void **, const void *, char *, const char *, unsigned, void *, void *,
                           void *, void *, int *);
void __hipRegisterVar(void **, void *, char *, char *, int, size_t, int, int);
void __hipUnregisterFatBinary(void **);

_Static_assert(sizeof(struct legacy_entry) == 32, "legacy entry");
_Static_assert(sizeof(struct entry) == 56, "entry");
_Static_assert(sizeof(struct bin_desc) == 32, "descriptor");
_Static_assert(sizeof(struct fatbin_wrapper) == 24, "wrapper");

static char kernel_a, kernel_b, hip_kernel;
static int var_a[4], link_var[2];

/* Descriptor 1: legacy 32-byte entries (LLVM <= 20). */
static struct legacy_entry legacy[] = {
  { &kernel_a, "kernel_a", 0, 0, 0 },
  { var_a, "var_a", sizeof var_a, 0, -1 },
  { link_var, "link_var", sizeof link_var, 0x01, 0 },
};
static struct device_image images_1[] = {
  { IMG(gfx90a), END(gfx90a), legacy, legacy + 3 },
  { IMG(gfx90a_xnack_on_offbin), END(gfx90a_xnack_on_offbin), legacy, legacy + 3 },
  { IMG(gfx906), END(gfx906), legacy, legacy + 3 },
};
static struct bin_desc desc_1 = { 3, images_1, legacy, legacy + 3 };

/* Descriptor 2: current 56-byte entries (LLVM 21+): one table for every language. */
static struct entry current[] = {
  { 0, 1, 1, 0x00, &kernel_b, "kernel_b", 0, 0, 0 },
  { 0, 1, 4, 0x00, &hip_kernel, "hip_kernel", 0, 0, 0 },       /* HIP: not OpenMP's */
  { 0, 1, 1, 0x10, 0, 0, 0, 0x008, 0 },                         /* requires USM */
  { 0, 0, 0, 0, 0, 0, 0, 0, 0 },                                /* all-zero: skipped */
  { 0, 0, 1, 0x08, &kernel_b, "indirect_fn", 0, 0, 0 },        /* Version 0 is accepted */
};
static struct device_image images_2[] = {
  { IMG(gfx1030), END(gfx1030), current, current + 5 },
  { IMG(gfx11_generic), END(gfx11_generic), current, current + 5 },
  { IMG(gfx942), END(gfx942), current, current + 5 },
};
static struct bin_desc desc_2 = { 3, images_2, current, current + 5 };

/* Descriptor 3: everything on the heap (bounded by /proc/self/maps, not by an ELF). */
static struct bin_desc *desc_3;

/* A HIP fat binary: the wrapper record and the bundle it points at. */
static struct fatbin_wrapper wrapper = { 0x48495046, 1, hip_bundle, 0 };
static struct fatbin_wrapper hipk = { 0x4B504948, 1, hip_bundle, 0 };
static void **handle;

static void unregister_all(void) {
  __hipUnregisterFatBinary(handle);
  __hipUnregisterFatBinary(handle);
  __tgt_unregister_lib(&desc_1);
  __tgt_unregister_lib(&desc_2);
  /* desc_3 stays registered: the shim reports it when it is unloaded at exit. */
}

__attribute__((constructor)) static void register_all(void) {
  __tgt_register_lib(&desc_1);
  __tgt_register_lib(&desc_2);

  struct legacy_entry *e = malloc(sizeof *e);
  struct device_image *im = malloc(sizeof *im);
  unsigned char *copy = malloc(sizeof gfx90a_xnack_off);
  desc_3 = malloc(sizeof *desc_3);
  memcpy(copy, gfx90a_xnack_off, sizeof gfx90a_xnack_off);
  *e = (struct legacy_entry){ &kernel_a, "heap_kernel", 0, 0, 0 };
  *im = (struct device_image){ copy, copy + sizeof gfx90a_xnack_off, e, e + 1 };
  *desc_3 = (struct bin_desc){ 1, im, e, e + 1 };
  __tgt_register_lib(desc_3);

  handle = __hipRegisterFatBinary(&wrapper);
  if (!handle) exit(3);
  if (__hipRegisterFatBinary(&wrapper) != handle) exit(4);  /* same blob, same handle */
  if (__hipRegisterFatBinary(&hipk) != NULL) exit(5);      /* HIPK is refused */
  __hipRegisterFunction(handle, &hip_kernel, "_Z5saxpyfPfS_", "_Z5saxpyfPfS_", -1, 0, 0, 0, 0, 0);
  __hipRegisterVar(handle, var_a, "dev_var", "dev_var", 0, sizeof var_a, 1, 0);
  atexit(unregister_all);
}

int main(void) { return 0; }
"#;

/// Builds the program into `dir`.
fn build(dir: &Path) -> PathBuf {
    let mut src =
        String::from("#include <stddef.h>\n#define IMG(n) n\n#define END(n) (n + sizeof n)\n");
    let arrays: [(&str, &str); 8] = [
        ("gfx90a", "devobj/saxpy.gfx90a.co"),
        (
            "gfx90a_xnack_on_offbin",
            "packager/amdgcn_gfx90a_xnack+.openmp.offbin",
        ),
        ("gfx906", "devobj/saxpy.gfx906.co"),
        ("gfx1030", "devobj/saxpy.gfx1030.co"),
        ("gfx11_generic", "devobj/saxpy.gfx11-generic.co"),
        ("gfx942", "devobj/saxpy.gfx942_sramecc+_xnack-.co"),
        ("gfx90a_xnack_off", "devobj/saxpy.gfx90a_xnack-.co"),
        ("hip_bundle", "bundles/hip_6arch.bundle"),
    ];
    for (name, rel) in arrays {
        c_array(&mut src, name, &corpus(rel));
    }
    src.push_str(PROGRAM);
    let c = dir.join("register.c");
    std::fs::write(&c, src).unwrap();
    let exe = dir.join("register");
    let shim = shim_dir();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .arg("-std=c11")
        .arg("-Wall")
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .arg(format!("-L{}", shim.display()))
        .arg("-lloader_sim_rt")
        .arg(format!("-Wl,-rpath,{}", shim.display()))
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?} (install gcc): {e}"));
    assert!(
        out.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn run(exe: &Path, dir: &Path, policy: &str) -> Vec<Record> {
    let report = dir.join(format!("report-{policy}.jsonl"));
    let _ = std::fs::remove_file(&report);
    let out = Command::new(exe)
        .env(
            "LOADER_SIM_DEVICES",
            "gfx90a:xnack+,gfx906:xnack-,gfx1100,gfx1030,gfx90a:xnack-",
        )
        .env("LOADER_SIM_REPORT", &report)
        .env("LOADER_SIM_POLICY", policy)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "program failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("__hipRegisterFatBinary") && stderr.contains("refused"),
        "the HIPK wrapper is refused with a diagnostic: {stderr}"
    );
    std::fs::read_to_string(&report)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The inner image of an OffloadBinary v1 with one entry: image offset/size at 0x38/0x40.
fn offbin_image(b: &[u8]) -> &[u8] {
    let off = u64::from_le_bytes(b[0x38..0x40].try_into().unwrap()) as usize;
    let size = u64::from_le_bytes(b[0x40..0x48].try_into().unwrap()) as usize;
    &b[off..off + size]
}

/// A bundle entry's payload, by entry ID.
fn bundle_entry<'a>(b: &'a [u8], id: &str) -> &'a [u8] {
    let n = u64::from_le_bytes(b[24..32].try_into().unwrap());
    let mut pos = 32;
    for _ in 0..n {
        let r = |p: usize| u64::from_le_bytes(b[p..p + 8].try_into().unwrap()) as usize;
        let (off, size, len) = (r(pos), r(pos + 8), r(pos + 16));
        if &b[pos + 24..pos + 24 + len] == id.as_bytes() {
            return &b[off..off + size];
        }
        pos += 24 + len;
    }
    panic!("{id} not in bundle");
}

/// (unit label prefix, device) → sha256 of the expected image, or None.
type Expected = BTreeMap<(&'static str, &'static str), Option<String>>;

fn check(records: &[Record], expected: &Expected) {
    for ((unit, device), want) in expected {
        let r = records
            .iter()
            .find(|r| r.unit.starts_with(unit) && r.device.as_deref() == Some(device))
            .unwrap_or_else(|| panic!("no record for {unit} / {device}: {records:#?}"));
        assert_eq!(
            &r.sha256, want,
            "{unit} on {device}: selected {:?}",
            r.selected
        );
        if let (Some(size), Some(_)) = (r.size, want) {
            assert!(size > 0);
        }
    }
}

#[test]
fn c_program_registers_descriptors_and_fat_binary_into_the_shim() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c_program");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = build(&dir);
    let records = run(&exe, &dir, "runtime");

    // Units are labelled <object>+<address>; find each descriptor by its entries.
    let unit_of = |entry: &str| -> String {
        records
            .iter()
            .find(|r| r.entries.iter().any(|e| e.name == entry))
            .map(|r| r.unit.clone())
            .unwrap_or_else(|| panic!("no unit binds {entry}: {records:#?}"))
    };
    let (u1, u2, u3) = (
        unit_of("kernel_a"),
        unit_of("kernel_b"),
        unit_of("heap_kernel"),
    );
    let hip = unit_of("_Z5saxpyfPfS_");
    assert!(
        u1.starts_with("register+"),
        "static data is labelled by its object: {u1}"
    );
    assert!(
        !u3.starts_with("register+"),
        "heap data belongs to no object: {u3}"
    );
    assert_eq!(records.len(), 4 * 5, "4 units x 5 devices: {records:#?}");

    let sha = |rel: &str| Some(sha256(&corpus(rel)));
    let offbin = corpus("packager/amdgcn_gfx90a_xnack+.openmp.offbin");
    let bundle = corpus("bundles/hip_6arch.bundle");
    let entry = |id: &str| Some(sha256(bundle_entry(&bundle, id)));

    // Descriptor 1, LLVM offload rule (first compatible in descriptor order): the gfx90a
    // "any" image comes first, so both xnack modes get it although image 2 is exactly
    // gfx90a:xnack+ (REGISTRATION.md §3.2 step 5, COMPATIBILITY.md §7.5).
    let mut want = Expected::new();
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let (u1s, u2s, u3s, hips) = (
        leak(u1.clone()),
        leak(u2.clone()),
        leak(u3.clone()),
        leak(hip.clone()),
    );
    want.insert((u1s, "gfx90a:xnack+"), sha("devobj/saxpy.gfx90a.co"));
    want.insert((u1s, "gfx90a:xnack-"), sha("devobj/saxpy.gfx90a.co"));
    want.insert((u1s, "gfx906:xnack-"), sha("devobj/saxpy.gfx906.co"));
    want.insert((u1s, "gfx1100"), None);
    want.insert((u1s, "gfx1030"), None);
    // Descriptor 2: native gfx1030; gfx1100 runs the gfx11-generic object (§4); the
    // gfx942 image needs a gfx942.
    want.insert((u2s, "gfx1030"), sha("devobj/saxpy.gfx1030.co"));
    want.insert((u2s, "gfx1100"), sha("devobj/saxpy.gfx11-generic.co"));
    want.insert((u2s, "gfx90a:xnack+"), None);
    want.insert((u2s, "gfx906:xnack-"), None);
    // Descriptor 3 (heap): built for xnack-.
    want.insert((u3s, "gfx90a:xnack-"), sha("devobj/saxpy.gfx90a_xnack-.co"));
    want.insert((u3s, "gfx90a:xnack+"), None);
    // The HIP fat binary: the ranking (§10).
    want.insert(
        (hips, "gfx90a:xnack+"),
        entry("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"),
    );
    want.insert(
        (hips, "gfx90a:xnack-"),
        entry("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"),
    );
    want.insert(
        (hips, "gfx906:xnack-"),
        entry("hipv4-amdgcn-amd-amdhsa--gfx906"),
    );
    want.insert((hips, "gfx1030"), entry("hipv4-amdgcn-amd-amdhsa--gfx1030"));
    want.insert((hips, "gfx1100"), entry("hipv4-amdgcn-amd-amdhsa--gfx1100"));
    check(&records, &want);

    // Entries: legacy entries upgraded to OpenMP; the current table keeps only OpenMP
    // entries (the HIP one is another runtime's), skips the all-zero record, reads the
    // requires record, and accepts Version 0.
    let entries = |u: &str| -> Vec<(String, String, u64, u32)> {
        let r = records.iter().find(|r| r.unit == u).unwrap();
        assert_eq!(r.entries_from, "registration");
        r.entries
            .iter()
            .map(|e| (e.name.clone(), e.kind.clone(), e.size, e.flags))
            .collect()
    };
    let s = |x: &str| x.to_string();
    assert_eq!(
        entries(&u1),
        vec![
            (s("kernel_a"), s("kernel"), 0, 0),
            (s("var_a"), s("variable"), 16, 0),
            (s("link_var"), s("variable"), 8, 1),
        ]
    );
    assert_eq!(
        entries(&u2),
        vec![
            (s("kernel_b"), s("kernel"), 0, 0),
            (s(""), s("requires"), 0, 0x10),
            (s("indirect_fn"), s("indirect"), 0, 0x08),
        ]
    );
    assert_eq!(entries(&u3), vec![(s("heap_kernel"), s("kernel"), 0, 0)]);
    assert_eq!(
        entries(&hip),
        vec![
            (s("_Z5saxpyfPfS_"), s("kernel"), 0, 0),
            (s("dev_var"), s("variable"), 16, 0x10),
        ]
    );
    for r in &records {
        assert_eq!(r.registration, if r.unit == hip { "hip" } else { "openmp" });
    }

    // The same program under the ranking: descriptor 1 now gives gfx90a:xnack+ the exact
    // xnack+ image (the OffloadBinary's inner image) instead of the "any" one.
    let best = run(&exe, &dir, "best");
    let r = best
        .iter()
        .find(|r| r.unit == u1 && r.device.as_deref() == Some("gfx90a:xnack+"))
        .unwrap();
    assert_eq!(r.sha256, Some(sha256(offbin_image(&offbin))));
    assert_eq!(
        r.selected.as_deref(),
        Some("amdgcn-amd-amdhsa--gfx90a:xnack+")
    );
}
