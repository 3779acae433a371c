//! Mutation suite: seeded, bounded damage to every container type of the corpus, run
//! through the library paths `loader-sim list` and `loader-sim select` use (walk → open →
//! images → entry IDs and triples; then identify → check → select for AMDGPU and CUDA
//! devices under every policy; for compressed bundles also `select_in_stream`, checked
//! against the in-memory choice). Every mutant must either read or fail with an
//! [`ErrorKind`]; nothing may unwind, every image handed out must lie inside the input (or
//! inside content the library decompressed), and the image selection chooses must be
//! compatible and ranked best.
//!
//! Mutations: bit flips, truncations, inserted and deleted bytes, duplicated chunks, extreme
//! values (0, 1, 2^31, 2^32 − 1, 2^32, 2^63, 2^64 − 1, the input length ± 1) written into
//! the header fields of every container found in the input (bundle, `CCOB`, OffloadBinary,
//! ELF and section headers, `ar` member sizes), and (offset, size) pairs whose sum wraps
//! around 2^64. The generator is a fixed-seed xorshift: every run makes the same mutants,
//! and a failure prints the subject, the mutant number and the mutation to reproduce it.

use crate::common;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::craft::*;
use common::read_corpus;
use offload_image::arch::{EntryId, Triple};
use offload_image::container::UnitContent;
use offload_image::registration::{
    descriptors, EntryTable, HostFile, Registry, RegistryOptions, SimulatedDevice,
};
use offload_image::select::{check, Verdict};
use offload_image::{
    for_each_unit, identify, select, Device, Error, Image, Policy, ReadOptions, SelectOptions,
};

/// Mutants per subject; with the subjects below this makes more than 20 000.
const MUTANTS_PER_SUBJECT: usize = 500;
const SEED: u64 = 0x6F66_666C_6F61_6421;

/// Rounds of mutants (each with its own seeds): 1 in CI; `MUTATION_ROUNDS=50 cargo test
/// --release --test suite mutation::` for a longer hunt.
fn rounds() -> u64 {
    std::env::var("MUTATION_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Short column labels of the classification table.
fn label(outcome: &str) -> &str {
    match outcome {
        "truncated" => "trunc",
        "out-of-bounds" => "oob",
        "bad-magic" => "magic",
        "unsupported-version" => "version",
        "unsupported-method" => "method",
        "size-mismatch" => "size",
        "hash-mismatch" => "hash",
        "limit-exceeded" => "limit",
        "decompress" => "decomp",
        "invalid-id" => "id",
        "bad-container" => "container",
        "out-of-memory" => "oom",
        "unsupported" => "unsup",
        other => other,
    }
}

/// One input to mutate: a name, its container class and its bytes.
struct Subject {
    name: String,
    class: &'static str,
    data: Vec<u8>,
}

/// Rewrites a v2 `CCOB` header as v1 or v3 around the same stream and hash.
fn ccob_as(v2: &[u8], version: u16) -> Vec<u8> {
    assert_eq!(u16::from_le_bytes([v2[4], v2[5]]), 2);
    let method = u16::from_le_bytes([v2[6], v2[7]]);
    let size = u32::from_le_bytes(v2[12..16].try_into().unwrap());
    let hash: [u8; 8] = v2[16..24].try_into().unwrap();
    ccob_raw(version, method, u64::from(size), hash, &v2[24..])
}

fn subjects() -> Vec<Subject> {
    let corpus = |class: &'static str, files: &[&str]| -> Vec<Subject> {
        files
            .iter()
            .map(|f| Subject {
                name: (*f).to_string(),
                class,
                data: read_corpus(f),
            })
            .collect()
    };
    let mut s = Vec::new();
    s.extend(corpus(
        "bundle",
        &[
            "bundles/hip_3field.bundle",
            "bundles/hip_6arch.bundle",
            "bundles/hip_align4096.bundle",
            "bundles/hip_bc.bundle",
            "bundles/hip_generic.bundle",
            "bundles/hip_nohost.bundle",
            "bundles/hip_unsorted.bundle",
            "bundles/omp_amd_nv.bundle",
            "nvptx/omp_nv_cubins.bundle",
        ],
    ));
    s.extend(corpus(
        "bundled host object",
        &["bundles/host_elf.bundle.o"],
    ));
    s.extend(corpus(
        "text bundle",
        &[
            "text/hip.s.bundle",
            "text/omp.i.bundle",
            "text/omp.ll.bundle",
        ],
    ));
    s.extend(corpus(
        "CCOB zstd",
        &[
            "compressed/hip_6arch.v1-zstd.ccob",
            "compressed/hip_6arch.v3-zstd.llvm22.ccob",
            "compressed/hip_6arch.zstd-l19.ccob",
            "compressed/hip_6arch.zstd.ccob",
            "compressed/omp_amd_nv.zstd.ccob",
            "nvptx/omp_nv_cubins.v3-zstd.llvm22.ccob",
        ],
    ));
    s.extend(corpus("CCOB zlib", &["compressed/hip_6arch.zlib.ccob"]));
    // The corpus has zlib only as v2: the same stream behind v1 and v3 headers.
    let zlib_v2 = read_corpus("compressed/hip_6arch.zlib.ccob");
    for v in [1u16, 3] {
        s.push(Subject {
            name: format!("compressed/hip_6arch.zlib.ccob as v{v}"),
            class: "CCOB zlib",
            data: ccob_as(&zlib_v2, v),
        });
    }
    s.extend(corpus(
        "OffloadBinary",
        &[
            "packager/amdgcn_gfx90a_xnack+.openmp.offbin",
            "packager/concat.offbin",
            "packager/extra_keys.offbin",
            "packager/hip_bc.offbin",
            "packager/multi3.offbin",
            "nvptx/cuda_cubins.offbin",
            "nvptx/cuda_fatbin.offbin",
            "nvptx/omp_cubins.offbin",
        ],
    ));
    // The corpus OffloadBinaries are all version 1: v2 and v3 (plain and compressed) of
    // the images of a corpus file, laid out as FORMATS.md §6.4 describes.
    let co906 = read_corpus("devobj/saxpy.gfx906.co");
    let co90a = read_corpus("devobj/saxpy.gfx90a_xnack+.co");
    let entries = || {
        vec![
            ObEntry {
                image_kind: 1,
                offload_kind: 4,
                strings: vec![
                    ("triple", b"amdgcn-amd-amdhsa".as_slice()),
                    ("arch", b"gfx906".as_slice()),
                ],
                image: &co906,
            },
            ObEntry {
                image_kind: 1,
                offload_kind: 4,
                strings: vec![
                    ("triple", b"amdgcn-amd-amdhsa".as_slice()),
                    ("arch", b"gfx90a:xnack+".as_slice()),
                ],
                image: &co90a,
            },
        ]
    };
    let v2 = offload_binary(2, &entries());
    let v3 = offload_binary(3, &entries());
    s.push(Subject {
        name: "generated OffloadBinary v2 (2 entries)".into(),
        class: "OffloadBinary",
        data: v2,
    });
    for (method, class) in [
        (0u16, "OffloadBinary v3 zlib"),
        (1, "OffloadBinary v3 zstd"),
    ] {
        s.push(Subject {
            name: format!("generated compressed OffloadBinary v3 ({class})"),
            class,
            data: compress_offload_binary(&v3, method),
        });
    }
    s.push(Subject {
        name: "generated OffloadBinary v3 (2 entries)".into(),
        class: "OffloadBinary",
        data: v3,
    });
    s.extend(corpus(
        "host ELF",
        &[
            "driver/hip_compress.exe",
            "driver/hip_compress.o",
            "driver/hip_newdrv.o",
            "driver/hip_newdrv_rdc.exe",
            "driver/hip_newdrv_rdc.o",
            "driver/hip_nonrdc.exe",
            "driver/hip_nonrdc.o",
            "driver/hip_rdc.exe",
            "driver/hip_rdc.o",
            "driver/omp_amd.exe",
            "driver/omp_amd_nv.o",
            "devobj/host.x86_64.o",
        ],
    ));
    s.extend(corpus(
        "archive",
        &[
            "driver/libfat.a",
            "driver/libfat.gfx906.a",
            "driver/libfat.gfx90a_xnack+.a",
        ],
    ));
    // NVIDIA fatbinaries (tests/data/nvfatbin, made by nvcc/fatbinary 13.5): zstd, LZ4 and
    // stored entries, a/f variants, several in one `.nv_fatbin`, an archive.
    for f in [
        "mixed.default.fatbin",
        "mixed.speed.all.fatbin",
        "mixed.size.all.fatbin",
        "variants.fatbin",
        "device_c.fatbin",
        "libk.so",
        "libk.a",
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/nvfatbin/files")
            .join(f);
        s.push(Subject {
            name: format!("nvfatbin/{f}"),
            class: "NVIDIA fatbinary",
            data: std::fs::read(path).unwrap(),
        });
    }
    // PE images and COFF objects (tests/data/pe, made by clang-22 and lld-link-22).
    for (f, class) in [
        ("k3.dll", "PE image"),
        ("knr.dll", "PE image"),
        ("kc.dll", "PE image"),
        ("k.obj", "COFF object"),
        ("k3z.obj", "COFF object"),
        ("knr.obj", "COFF object"),
        ("kc.obj", "COFF object"),
        ("fat.obj", "COFF object"),
        ("fat.lib", "archive"),
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/pe")
            .join(f);
        s.push(Subject {
            name: format!("pe/{f}"),
            class,
            data: std::fs::read(path).unwrap(),
        });
    }
    // `.kpack` archives (rocm-kpack's writer, tests/data/kpack) and the minimal split hosts
    // that point at them (`HIPK` wrappers, ref records: also through `validate`).
    let kpack = |class: &'static str, files: &[&str]| -> Vec<Subject> {
        files
            .iter()
            .map(|f| Subject {
                name: format!("kpack/{f}"),
                class,
                data: std::fs::read(common::root().join("tests/data/kpack").join(f))
                    .unwrap_or_else(|e| panic!("{f}: {e}")),
            })
            .collect()
    };
    s.extend(kpack(
        "kpack none",
        &[
            "jax/none/jax_lib_gfx1100.kpack",
            "jax/none/jax_lib_gfx110X.kpack",
        ],
    ));
    s.extend(kpack(
        "kpack zstd",
        &[
            "jax/.kpack/jax_lib_gfx1100.kpack",
            "jax/.kpack/jax_lib_gfx90a.kpack",
        ],
    ));
    s.extend(kpack(
        "split host",
        &["split/librocrand.so.1.1", "split/xla_rocm_plugin.so"],
    ));
    s.extend(corpus(
        "device ELF",
        &[
            "devobj/saxpy.gfx906.co",
            "devobj/saxpy.gfx90a_xnack+.co",
            "devobj/saxpy.gfx942_sramecc+_xnack-.co",
            "devobj/saxpy.gfx11-generic.co",
            "devobj/saxpy.sm_80.cubin",
            "devobj/saxpy.sm_90a.cuda13.cubin",
        ],
    ));
    s
}

/// A header field a mutation can overwrite.
#[derive(Clone, Copy, Debug)]
enum Width {
    U16,
    U32,
    U64,
    /// An `ar` member size: 10 ASCII decimal digits, space padded.
    Dec10,
}

#[derive(Clone, Copy, Debug)]
struct Field {
    at: usize,
    width: Width,
}

fn f(at: usize, width: Width) -> Field {
    Field { at, width }
}

fn u64_at(d: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(d.get(at..at + 8)?.try_into().ok()?))
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

fn positions(d: &[u8], magic: &[u8]) -> Vec<usize> {
    d.windows(magic.len())
        .enumerate()
        .filter(|(_, w)| *w == magic)
        .map(|(i, _)| i)
        .collect()
}

/// The header fields of every container found in `d` (by magic), and (offset, size) pairs.
fn fields(d: &[u8]) -> (Vec<Field>, Vec<(Field, Field)>) {
    use Width::*;
    let mut out = Vec::new();
    let mut pairs = Vec::new();
    for p in positions(d, b"__CLANG_OFFLOAD_BUNDLE__") {
        let Some(n) = u64_at(d, p + 24) else { continue };
        out.push(f(p + 24, U64));
        let mut pos = p + 32;
        for _ in 0..n.min(64) {
            let Some(id_len) = u64_at(d, pos + 16) else {
                break;
            };
            out.extend([f(pos, U64), f(pos + 8, U64), f(pos + 16, U64)]);
            pairs.push((f(pos, U64), f(pos + 8, U64)));
            pos = match usize::try_from(id_len)
                .ok()
                .and_then(|l| pos.checked_add(24 + l))
            {
                Some(next) => next,
                None => break,
            };
        }
    }
    // A `.kpack` header: version, TOC offset.
    if d.starts_with(b"KPAK") {
        out.extend([f(4, U32), f(8, U64)]);
    }
    for p in positions(d, b"CCOB") {
        out.extend([f(p + 4, U16), f(p + 6, U16)]);
        match u16_at(d, p + 4) {
            Some(1) => out.push(f(p + 8, U32)),
            Some(2) => out.extend([f(p + 8, U32), f(p + 12, U32)]),
            Some(3) => out.extend([f(p + 8, U64), f(p + 16, U64)]),
            _ => {}
        }
    }
    for p in positions(d, &[0x10, 0xFF, 0x10, 0xAD]) {
        let Some(version) = u32_at(d, p + 4) else {
            continue;
        };
        out.extend([f(p + 4, U32), f(p + 8, U64), f(p + 16, U64), f(p + 24, U64)]);
        if version >= 3 {
            out.push(f(p + 32, U64));
        }
        let Some(entries) = u64_at(d, p + 16) else {
            continue;
        };
        let count = if version == 1 {
            1
        } else {
            u64_at(d, p + 24).unwrap_or(0)
        };
        for i in 0..count.min(16) as usize {
            let Some(e) = (entries as usize).checked_add(p + 40 * i) else {
                break;
            };
            if e + 40 > d.len() {
                break;
            }
            out.extend([
                f(e, U16),
                f(e + 2, U16),
                f(e + 4, U32),
                f(e + 8, U64),
                f(e + 16, U64),
                f(e + 24, U64),
                f(e + 32, U64),
            ]);
            pairs.push((f(e + 24, U64), f(e + 32, U64)));
            pairs.push((f(e + 8, U64), f(e + 16, U64)));
            let strings = u64_at(d, e + 8).unwrap_or(0) as usize;
            let n = u64_at(d, e + 16).unwrap_or(0).min(8) as usize;
            let stride = if version == 1 { 16 } else { 24 };
            for s in 0..n {
                let Some(r) = p
                    .checked_add(strings)
                    .and_then(|x| x.checked_add(stride * s))
                else {
                    break;
                };
                if r + stride > d.len() {
                    break;
                }
                out.extend([f(r, U64), f(r + 8, U64)]);
                if stride == 24 {
                    out.push(f(r + 16, U64));
                    pairs.push((f(r + 8, U64), f(r + 16, U64)));
                }
            }
        }
    }
    for p in positions(d, &[0x50, 0xED, 0x55, 0xBA]) {
        out.extend([f(p + 4, U16), f(p + 6, U16), f(p + 8, U64)]);
        let (Some(hs), Some(size)) = (u16_at(d, p + 6), u64_at(d, p + 8)) else {
            continue;
        };
        let end = (p + hs as usize).saturating_add(size.min(1 << 32) as usize);
        let mut e = p + hs as usize;
        for _ in 0..32 {
            if e + 64 > d.len().min(end) {
                break;
            }
            out.extend([
                f(e, U16),
                f(e + 4, U32),
                f(e + 8, U64),
                f(e + 16, U32),
                f(e + 0x1C, U32),
                f(e + 0x28, U64),
                f(e + 0x38, U64),
            ]);
            let (Some(ehs), Some(len)) = (u32_at(d, e + 4), u64_at(d, e + 8)) else {
                break;
            };
            match e
                .checked_add(ehs as usize)
                .and_then(|x| x.checked_add(usize::try_from(len).ok()?))
            {
                Some(next) if next > e => e = next,
                _ => break,
            }
        }
    }
    for p in positions(d, b"\x7fELF") {
        // 64-bit little-endian only (every ELF of the corpus).
        if d.get(p + 4) != Some(&2) || d.get(p + 5) != Some(&1) {
            continue;
        }
        out.extend([
            f(p + 18, U16),
            f(p + 40, U64),
            f(p + 48, U32),
            f(p + 58, U16),
            f(p + 60, U16),
            f(p + 62, U16),
        ]);
        let (Some(shoff), Some(shnum)) = (u64_at(d, p + 40), u16_at(d, p + 60)) else {
            continue;
        };
        for i in 0..usize::from(shnum).min(64) {
            let Some(sh) = (shoff as usize).checked_add(p + 64 * i) else {
                break;
            };
            if sh + 64 > d.len() {
                break;
            }
            out.extend([f(sh, U32), f(sh + 4, U32), f(sh + 24, U64), f(sh + 32, U64)]);
            pairs.push((f(sh + 24, U64), f(sh + 32, U64)));
        }
    }
    pe_fields(d, &mut out, &mut pairs);
    if d.starts_with(b"!<arch>\n") {
        let mut pos = 8usize;
        while pos + 60 <= d.len() {
            out.push(f(pos + 48, Dec10));
            let size: usize = std::str::from_utf8(&d[pos + 48..pos + 58])
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(usize::MAX);
            match pos.checked_add(60).and_then(|x| x.checked_add(size)) {
                Some(next) => pos = next + (next & 1),
                None => break,
            }
        }
    }
    (out, pairs)
}

/// The header fields of a PE image (`MZ`) or x86-64 COFF object at the start of `d`
/// (`PE.md` §1, §2): the DOS header's `e_lfanew`, the COFF header's counts and pointers,
/// the optional header's directory count and base relocation directory, every section
/// header's sizes, addresses and pointers, and the size of every base relocation block.
fn pe_fields(d: &[u8], out: &mut Vec<Field>, pairs: &mut Vec<(Field, Field)>) {
    use Width::*;
    let (coff, image) = if d.starts_with(b"MZ") {
        out.push(f(0x3C, U32));
        match u32_at(d, 0x3C) {
            Some(nt) if (nt as usize) + 24 <= d.len() => (nt as usize + 4, true),
            _ => return,
        }
    } else if u16_at(d, 0) == Some(0x8664) && u16_at(d, 16) == Some(0) {
        (0, false)
    } else {
        return;
    };
    out.extend([
        f(coff + 2, U16),
        f(coff + 8, U32),
        f(coff + 12, U32),
        f(coff + 16, U16),
    ]);
    let (Some(count), Some(opt_size)) = (u16_at(d, coff + 2), u16_at(d, coff + 16)) else {
        return;
    };
    let opt = coff + 20;
    if image {
        out.extend([f(opt + 108, U32), f(opt + 152, U32), f(opt + 156, U32)]);
    }
    let table = opt + usize::from(opt_size);
    for i in 0..usize::from(count).min(64) {
        let h = table + 40 * i;
        if h + 40 > d.len() {
            break;
        }
        out.extend([
            f(h + 8, U32),
            f(h + 12, U32),
            f(h + 16, U32),
            f(h + 20, U32),
            f(h + 24, U32),
            f(h + 32, U16),
        ]);
        pairs.push((f(h + 20, U32), f(h + 16, U32)));
        // The base relocation blocks of `.reloc`.
        if image && &d[h..h + 8] == b".reloc\0\0" {
            let (Some(at), Some(size)) = (u32_at(d, h + 20), u32_at(d, h + 8)) else {
                continue;
            };
            let (mut pos, end) = (at as usize, (at as usize).saturating_add(size as usize));
            while pos + 8 <= end.min(d.len()) {
                out.push(f(pos + 4, U32));
                match u32_at(d, pos + 4) {
                    Some(n) if n >= 8 => pos += n as usize,
                    _ => break,
                }
            }
        }
    }
}

/// Writes `value` into field `fd` (truncated to its width).
fn put(d: &mut [u8], fd: Field, value: u64) {
    let bytes: Vec<u8> = match fd.width {
        Width::U16 => (value as u16).to_le_bytes().to_vec(),
        Width::U32 => (value as u32).to_le_bytes().to_vec(),
        Width::U64 => value.to_le_bytes().to_vec(),
        Width::Dec10 => {
            let s = format!("{:<10}", value.min(9_999_999_999));
            s.into_bytes()
        }
    };
    if let Some(dst) = d.get_mut(fd.at..fd.at + bytes.len()) {
        dst.copy_from_slice(&bytes);
    }
}

fn extremes(len: usize) -> [u64; 10] {
    let len = len as u64;
    [
        0,
        1,
        1 << 31,
        u64::from(u32::MAX),
        1 << 32,
        1 << 63,
        u64::MAX,
        len.saturating_sub(1),
        len,
        len + 1,
    ]
}

/// Applies one random mutation; returns the mutant and what was done.
fn mutate(
    rng: &mut Rng,
    orig: &[u8],
    fields: &[Field],
    pairs: &[(Field, Field)],
) -> (Vec<u8>, String) {
    let mut d = orig.to_vec();
    let len = d.len().max(1);
    // Mutations near the start hit headers more often: half of the positions in 4 KiB.
    let pos = |rng: &mut Rng| {
        if rng.below(2) == 0 {
            rng.below(len.min(4096))
        } else {
            rng.below(len)
        }
    };
    let op = rng.below(100);
    let what = if op < 22 && !fields.is_empty() {
        let fd = fields[rng.below(fields.len())];
        let v = extremes(orig.len())[rng.below(10)];
        put(&mut d, fd, v);
        format!("field {:?}@{} = {v:#x}", fd.width, fd.at)
    } else if op < 32 && !pairs.is_empty() {
        // offset + size wraps: size = 2^64 - offset + k.
        let (o, s) = pairs[rng.below(pairs.len())];
        let offset = match rng.below(3) {
            0 => u64_at(&d, o.at).unwrap_or(0),
            1 => 1 << 63,
            _ => u64::MAX - rng.below(64) as u64,
        };
        let k = rng.below(4096) as u64;
        let size = 0u64.wrapping_sub(offset).wrapping_add(k);
        put(&mut d, o, offset);
        put(&mut d, s, size);
        format!("pair @{}/@{} = {offset:#x} + {size:#x}", o.at, s.at)
    } else if op < 32 && !fields.is_empty() {
        let fd = fields[rng.below(fields.len())];
        let v = rng.next_u64() >> rng.below(64);
        put(&mut d, fd, v);
        format!("field {:?}@{} = {v:#x} (random)", fd.width, fd.at)
    } else if op < 57 {
        let flips = 1 + rng.below(4);
        let mut at = Vec::new();
        for _ in 0..flips {
            let p = pos(rng);
            let bit = rng.below(8);
            if let Some(b) = d.get_mut(p) {
                *b ^= 1 << bit;
            }
            at.push(format!("{p}.{bit}"));
        }
        format!("bit flips {}", at.join(","))
    } else if op < 69 {
        let cut = pos(rng);
        d.truncate(cut);
        format!("truncate to {cut}")
    } else if op < 81 {
        let p = pos(rng).min(d.len());
        let n = 1 + rng.below(16);
        let bytes: Vec<u8> = (0..n)
            .map(|_| match rng.below(4) {
                0 => 0,
                1 => 0xFF,
                _ => rng.next_u64() as u8,
            })
            .collect();
        d.splice(p..p, bytes);
        format!("insert {n} bytes at {p}")
    } else if op < 91 {
        let p = pos(rng).min(d.len());
        let n = (1 + rng.below(64)).min(d.len() - p);
        d.drain(p..p + n);
        format!("delete {n} bytes at {p}")
    } else {
        // Copy a chunk over another place (plausible-looking garbage).
        let from = pos(rng).min(d.len());
        let to = pos(rng).min(d.len());
        let n = (1 + rng.below(256)).min(d.len() - from).min(d.len() - to);
        let chunk = d[from..from + n].to_vec();
        d[to..to + n].copy_from_slice(&chunk);
        format!("copy {n} bytes from {from} to {to}")
    };
    (d, what)
}

fn within(outer: &[u8], inner: &[u8]) -> bool {
    let o = outer.as_ptr() as usize;
    let i = inner.as_ptr() as usize;
    i >= o && i + inner.len() <= o + outer.len()
}

/// The `loader-sim list` path with the library's promises asserted.
fn list(data: &[u8], options: &ReadOptions) -> Result<usize, Error> {
    let mut images = 0usize;
    for_each_unit(data, options, |unit| {
        assert!(unit.location.offset <= data.len() as u64);
        let _ = unit.location.to_string();
        let open = unit.open(options)?;
        for image in open.images() {
            // `loader-sim list` decodes every image to hash it.
            let decoded = image.decode(options)?;
            let image = image.with_bytes(&decoded);
            let inside = within(data, image.bytes);
            match &unit.content {
                UnitContent::Compressed(_) => {
                    assert!(within(open.decompressed().unwrap(), image.bytes));
                }
                UnitContent::OffloadBinaries(seq) => {
                    assert!(inside || seq.iter().any(|(_, b)| b.is_compressed()));
                }
                UnitContent::NvFatbin(fb) => {
                    assert!(inside || fb.entries().any(|e| e.codec.is_some()));
                }
                UnitContent::Kpack(k) => {
                    assert!(
                        inside
                            || k.compression() == offload_image::kpack::Compression::ZstdPerKernel
                    );
                }
                _ => assert!(inside, "image outside the input"),
            }
            if inside {
                let off = open.offset_of(&image).unwrap();
                assert!(off + image.size() <= data.len() as u64);
            }
            if let Some(id) = image.entry_id {
                if let Ok(e) = EntryId::parse(id) {
                    assert!(within(id.as_bytes(), e.triple.as_bytes()));
                }
            }
            if let Some(t) = image.triple {
                let _ = Triple::parse(t).map(|t| t.to_string());
            }
            if let Some(s) = image.strings {
                for (k, v) in s.iter() {
                    assert!(!k.contains('\0') || v.len() < usize::MAX);
                }
            }
            let _ = (image.image_kind.name(), image.offload_kind.name());
            images += 1;
        }
        Ok(())
    })?;
    Ok(images)
}

/// Devices the `select` path chooses for.
fn devices() -> &'static [Device] {
    static DEVICES: OnceLock<Vec<Device>> = OnceLock::new();
    DEVICES.get_or_init(|| {
        [
            "gfx906",
            "gfx90a:sramecc+:xnack+",
            "gfx90a",
            "gfx942:sramecc+:xnack-",
            "gfx1100",
            "sm_80",
            "sm_90a",
        ]
        .iter()
        .map(|d| Device::parse(d).unwrap())
        .collect()
    })
}

/// The `loader-sim select` path over the images of one unit.
fn select_all(images: &[Image<'_>]) {
    let identities: Vec<_> = images.iter().map(identify).collect();
    for id in &identities {
        let _ = id.disagreement().map(|d| d.to_string());
        let _ = id.target.to_string();
    }
    for device in devices() {
        for policy in [Policy::Best, Policy::First, Policy::FirstByClass] {
            let options = SelectOptions {
                policy,
                ..SelectOptions::default()
            };
            let s = select(images, device, &options);
            let mut compatible = 0;
            for (i, id) in identities.iter().enumerate() {
                match check(id, i, device, &options) {
                    Verdict::Compatible(key) => {
                        compatible += 1;
                        assert!(!key.cmp_under(&s.key.unwrap(), policy).is_lt());
                    }
                    Verdict::Rejected(r) => {
                        let _ = r.to_string();
                    }
                }
            }
            assert_eq!(compatible, s.compatible);
            if let Some(c) = s.chosen() {
                assert_eq!(check(&identities[c], c, device, &options).key(), s.key);
            }
        }
    }
}

/// `loader-sim select` on a compressed bundle: one pass over the content
/// (`select_in_stream`), which must choose what the in-memory path chooses and stream
/// exactly the chosen image's bytes, with and without hash verification.
fn stream_select(data: &[u8]) {
    use offload_image::bundle::Bundle;
    use offload_image::ccob::CompressedBundle;
    use offload_image::stream::{select_in_stream, Kept};
    let Ok(c) = CompressedBundle::parse(data) else {
        return;
    };
    for verify_hash in [true, false] {
        let options = ReadOptions {
            verify_hash,
            ..ReadOptions::default()
        };
        let Ok(reader) = c.reader(&options) else {
            continue;
        };
        let select_options = SelectOptions::default();
        let mut kept: Vec<(Option<usize>, Vec<u8>)> = vec![(None, Vec::new()); devices().len()];
        let streamed = select_in_stream::<_, Error, _>(
            reader,
            devices(),
            &select_options,
            &options.limits,
            true,
            |k| {
                match k {
                    Kept::Start { device, index, .. } => kept[device] = (Some(index), Vec::new()),
                    Kept::Bytes { device, bytes } => kept[device].1.extend_from_slice(bytes),
                }
                Ok(())
            },
        );
        let (Ok(Some(s)), Ok(content)) = (streamed, c.decompress(&options)) else {
            continue;
        };
        let Ok(bundle) = Bundle::parse(&content, &options.limits) else {
            continue;
        };
        let images: Vec<Image<'_>> = bundle
            .entries()
            .map(|e| Image::from_bundle_entry(e.index, &e))
            .collect();
        for (d, device) in devices().iter().enumerate() {
            let in_memory = select(&images, device, &select_options).chosen();
            assert_eq!(s.chosen[d].map(|k| k.index), in_memory);
            assert_eq!(kept[d].0, in_memory);
            if let Some(i) = in_memory {
                assert!(kept[d].1 == images[i].bytes);
            }
        }
    }
}

/// What one mutant did: the `list` path, then the `select` path on every unit (for a
/// compressed bundle also the streaming one).
fn exercise(data: &[u8]) -> Result<usize, Error> {
    stream_select(data);
    // A split host: every `HIPK` wrapper's ref record, or its located error.
    if let Ok(host) = HostFile::parse(data) {
        for w in offload_image::host::kpack::split_wrappers(&host) {
            match w {
                Ok(w) => assert!(w.lookup_key.starts_with(w.reference.kernel_name)),
                Err((_, e)) => assert!(e.offset() <= data.len() as u64, "{e}"),
            }
        }
    }
    let options = ReadOptions::default();
    let listed = list_then_select(data, &options);
    // `loader-sim validate`: every finding has a code and lies inside the input, and what
    // the list path refuses is an error finding there too.
    let findings = offload_image::validate::validate(data, &options);
    for f in &findings {
        assert!(!f.code.name().is_empty() && !f.message.is_empty());
        assert!(
            f.offset <= data.len() as u64,
            "finding past the input: {f:?}"
        );
    }
    if listed.is_err() {
        assert!(
            findings
                .iter()
                .any(|f| f.severity() == offload_image::validate::Severity::Error),
            "list fails but validate finds no error"
        );
    }
    match listed {
        // A damaged stream that still decodes: read past the hash check too, as
        // `loader-sim list --no-verify-hash` does.
        Err(e) if e.kind() == offload_image::ErrorKind::HashMismatch => {
            let no_hash = ReadOptions {
                verify_hash: false,
                ..options
            };
            list_then_select(data, &no_hash)
        }
        r => r,
    }
}

/// The static `loader-sim register` path: a host ELF as an address space, its fat-binary
/// wrappers, entry tables and descriptors registered with the simulated runtime, a choice
/// and an explanation per device. Its errors are not the walk's: they are counted apart.
fn register(data: &[u8]) -> Option<Result<usize, Error>> {
    let pe = data.starts_with(b"MZ") || data.starts_with(&[0x64, 0x86]);
    if !data.starts_with(b"\x7fELF") && !pe {
        return None;
    }
    let elf = match HostFile::parse(data) {
        Ok(elf) => elf,
        Err(e) => return Some(Err(e)),
    };
    let options = ReadOptions::default();
    let devices = ["gfx90a:sramecc+:xnack+", "gfx906", "sm_80"]
        .iter()
        .map(|d| SimulatedDevice::parse(d).unwrap())
        .collect();
    let mut registry = Registry::new(
        devices,
        RegistryOptions {
            read: options,
            ..RegistryOptions::default()
        },
    );
    let mut ids = Vec::new();
    let mut first_error = None;
    for w in elf.fat_binary_wrappers() {
        match registry.register_fat_binary(&elf, w.address) {
            Ok(id) => ids.push(id),
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    for t in elf.entry_sections() {
        if let (Some(id), Ok(table)) =
            (ids.first(), EntryTable::read(&elf, t.begin, t.end, 1 << 16))
        {
            if let Err(e) = registry.add_entries(*id, &elf, &table, t.legacy_kind) {
                first_error = first_error.or(Some(e));
            }
        }
    }
    for d in descriptors(&elf, &options) {
        match registry.register_lib(&elf, d) {
            Ok(id) => ids.push(id),
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    let mut images = 0;
    for id in ids {
        let reg = registry.get(id).unwrap();
        let n = reg.images().len();
        images += n;
        for dev in 0..registry.devices().len() {
            if let Some(i) = reg.choice(dev).and_then(|c| c.chosen()) {
                assert!(i < n);
            }
            let _ = registry.explain(reg, dev);
        }
        for e in reg.entries() {
            let _ = e.name_lossy();
        }
    }
    Some(first_error.map_or(Ok(images), Err))
}

fn list_then_select(data: &[u8], options: &ReadOptions) -> Result<usize, Error> {
    let n = list(data, options)?;
    for_each_unit(data, options, |unit| {
        let open = unit.open(options)?;
        let images: Vec<Image<'_>> = open.images().collect();
        select_all(&images);
        Ok(())
    })?;
    Ok(n)
}

#[derive(Default)]
struct Tally {
    /// (class, outcome) → count.
    outcomes: BTreeMap<(&'static str, &'static str), usize>,
    mutants: usize,
    failures: Vec<String>,
    slowest: (Duration, String),
}

#[test]
fn mutants_never_panic_and_every_error_has_a_kind() {
    let subjects = subjects();
    let tally = Mutex::new(Tally::default());
    let start = Instant::now();
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let subjects = &subjects;
            let tally = &tally;
            scope.spawn(move || {
                let jobs = (0..rounds()).flat_map(|r| (0..subjects.len()).map(move |s| (r, s)));
                for (round, si) in jobs.skip(t).step_by(threads) {
                    let subject = &subjects[si];
                    let (fields, pairs) = fields(&subject.data);
                    let mut rng = Rng::new(
                        SEED ^ (si as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ round.wrapping_mul(0xD6E8_FEB8_6659_FD93),
                    );
                    let mut local: Vec<((&'static str, &'static str), String, Duration)> =
                        Vec::new();
                    let mut failures = Vec::new();
                    // Mutant 0 is the subject itself.
                    for m in 0..=MUTANTS_PER_SUBJECT {
                        let (data, what) = if m == 0 {
                            (subject.data.clone(), "unmodified".to_string())
                        } else {
                            mutate(&mut rng, &subject.data, &fields, &pairs)
                        };
                        let t0 = Instant::now();
                        let r = catch_unwind(AssertUnwindSafe(|| exercise(&data)));
                        let took = t0.elapsed();
                        let outcome = match r {
                            Ok(Ok(_)) => "ok",
                            Ok(Err(e)) => {
                                if e.offset() > data.len() as u64 {
                                    failures.push(format!(
                                        "{} round {round} mutant {m} ({what}): error offset {} past the input ({} bytes): {e}",
                                        subject.name,
                                        e.offset(),
                                        data.len()
                                    ));
                                }
                                e.kind().name()
                            }
                            Err(_) => {
                                failures.push(format!(
                                    "{} round {round} mutant {m} ({what}): panicked",
                                    subject.name
                                ));
                                "PANIC"
                            }
                        };
                        if m == 0 && outcome != "ok" {
                            failures.push(format!("{}: unmodified input fails: {outcome}", subject.name));
                        }
                        local.push(((subject.class, outcome), format!("{} round {round} mutant {m} ({what})", subject.name), took));
                        // Host ELF files also go through the static registration path.
                        if matches!(
                            subject.class,
                            "host ELF"
                                | "bundled host object"
                                | "PE image"
                                | "COFF object"
                                | "split host"
                        ) {
                            let t0 = Instant::now();
                            let r = catch_unwind(AssertUnwindSafe(|| register(&data)));
                            let took = t0.elapsed();
                            let outcome = match r {
                                Ok(None) => "not-host",
                                Ok(Some(Ok(_))) => "ok",
                                Ok(Some(Err(e))) => e.kind().name(),
                                Err(_) => {
                                    failures.push(format!(
                                        "{} round {round} mutant {m} ({what}): register panicked",
                                        subject.name
                                    ));
                                    "PANIC"
                                }
                            };
                            let class = match subject.class {
                                "host ELF" => "register: host ELF",
                                "PE image" => "register: PE image",
                                "COFF object" => "register: COFF object",
                                "split host" => "register: split host",
                                _ => "register: bundled obj",
                            };
                            local.push(((class, outcome), format!("{} round {round} mutant {m} ({what}), register", subject.name), took));
                        }
                    }
                    let mut t = tally.lock().unwrap();
                    for (key, name, took) in local {
                        *t.outcomes.entry(key).or_default() += 1;
                        t.mutants += 1;
                        if took > t.slowest.0 {
                            t.slowest = (took, name);
                        }
                    }
                    t.failures.extend(failures);
                }
            });
        }
    });
    let t = tally.into_inner().unwrap();
    let registered: usize = t
        .outcomes
        .iter()
        .filter(|((c, _), _)| c.starts_with("register"))
        .map(|(_, n)| n)
        .sum();
    // The classification table: outcome per container class.
    let classes: Vec<&str> = {
        let mut c: Vec<&str> = t.outcomes.keys().map(|(c, _)| *c).collect();
        c.dedup();
        c
    };
    let mut kinds: Vec<&str> = t.outcomes.keys().map(|(_, k)| *k).collect();
    kinds.sort();
    kinds.dedup();
    print!("{:<24}", "class");
    for k in &kinds {
        print!(" {:>9}", label(k));
    }
    println!(" {:>7}", "total");
    for c in &classes {
        print!("{c:<24}");
        let mut total = 0;
        for k in &kinds {
            let n = t.outcomes.get(&(*c, *k)).copied().unwrap_or(0);
            total += n;
            print!(" {n:>9}");
        }
        println!(" {total:>7}");
    }
    print!("{:<24}", "all (list + select)");
    for k in &kinds {
        let n: usize = classes
            .iter()
            .filter(|c| !c.starts_with("register"))
            .map(|c| t.outcomes.get(&(*c, *k)).copied().unwrap_or(0))
            .sum();
        print!(" {n:>9}");
    }
    println!(" {:>7}", t.mutants - registered);
    println!(
        "{} mutants of {} subjects ({} of them also through the register path) in {:.1} s; slowest {:.1} ms: {}",
        t.mutants - registered,
        subjects.len(),
        registered,
        start.elapsed().as_secs_f64(),
        t.slowest.0.as_secs_f64() * 1e3,
        t.slowest.1
    );
    for f in &t.failures {
        eprintln!("FAILED: {f}");
    }
    assert!(t.failures.is_empty(), "{} failures", t.failures.len());
    assert!(
        t.mutants - registered >= 20_000,
        "only {} mutants",
        t.mutants - registered
    );
    assert!(t.outcomes.keys().all(|(_, k)| *k != "PANIC"));
    // Every class produced both readable mutants and refusals: the mutations reach the
    // readers and are not all rejected at the door.
    for c in &classes {
        let ok = t.outcomes.get(&(*c, "ok")).copied().unwrap_or(0);
        let refused: usize = kinds
            .iter()
            .filter(|k| **k != "ok")
            .filter_map(|k| t.outcomes.get(&(*c, *k)))
            .sum();
        assert!(ok > 0 && refused > 0, "{c}: {ok} read, {refused} refused");
    }
}
