//! Library-level costs (issue P4): parsing and iterating uncompressed containers, per entry,
//! as the entry count grows (1 → 10 000) and as the images grow (must not matter).
//!
//! `cargo bench --bench parse` (add `-- --warm-up-time 1 --measurement-time 2` for a quick run);
//! `PARSE_MIN_OF=400 cargo bench --bench parse` for the least of 400 rounds per entry count,
//! `PARSE_ONLY=offload_walk` (or `offload_walk/1000`) with it for one walk (for a profiler).
//!
//! Groups: `bundle_entries` walks a binary bundle as every caller does (`units`, `open`,
//! `images`: the entry ID split into kind, triple and target ID, the image's first bytes
//! sniffed); `bundle_walk` is the reader alone (`Bundle::parse` and `entries`);
//! `offload_entries` and `offload_walk` are the same two for a version 2 OffloadBinary of `n`
//! entries (each with a `triple` and an `arch` string, looked up by key).
//!
//! Before the benchmarks, the binary's counting allocator checks that none of these walks
//! allocates (issue 47): it prints the count and fails if it is not 0.

use criterion::{BenchmarkId, Criterion, Throughput};
use offload_image::read::bundle::Bundle;
use offload_image::read::offload_binary::OffloadBinary;
use offload_image::{for_each_unit, Limits, ReadOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

/// The system allocator, counting allocations (and reallocations).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A binary bundle with `n` entries of `size` bytes each (IDs as the HIP driver writes them).
fn bundle(n: usize, size: usize, align: u64) -> Vec<u8> {
    let ids: Vec<String> = (0..n)
        .map(|i| format!("hipv4-amdgcn-amd-amdhsa--gfx{}:xnack-", 900 + i % 100))
        .collect();
    let table = 32 + ids.iter().map(|id| 24 + id.len() as u64).sum::<u64>();
    let mut offsets = Vec::with_capacity(n);
    let mut cursor = table;
    for _ in 0..n {
        cursor = cursor.div_ceil(align) * align;
        offsets.push(cursor);
        cursor += size as u64;
    }
    let mut out = Vec::with_capacity(cursor as usize);
    out.extend_from_slice(b"__CLANG_OFFLOAD_BUNDLE__");
    out.extend_from_slice(&(n as u64).to_le_bytes());
    for (id, off) in ids.iter().zip(&offsets) {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&(size as u64).to_le_bytes());
        out.extend_from_slice(&(id.len() as u64).to_le_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    out.resize(cursor as usize, 0x5a);
    out
}

/// A version 2 OffloadBinary (`FORMATS.md` §6) with `n` HIP entries of `size` bytes, each with
/// the strings `triple` and `arch`, laid out as `clang-offload-packager` does: header, entry
/// table, string records, string table, images (8-aligned).
fn offload_binary(n: usize, size: usize) -> Vec<u8> {
    let mut strtab = Vec::new();
    let string_at = |s: &[u8], strtab: &mut Vec<u8>| -> (u64, u64) {
        let at = strtab.len() as u64;
        strtab.extend_from_slice(s);
        strtab.push(0);
        (at, s.len() as u64)
    };
    let triple_key = string_at(b"triple", &mut strtab);
    let arch_key = string_at(b"arch", &mut strtab);
    let triple = string_at(b"amdgcn-amd-amdhsa", &mut strtab);
    let arches: Vec<(u64, u64)> = (0..n.min(100))
        .map(|i| string_at(format!("gfx{}:xnack-", 900 + i).as_bytes(), &mut strtab))
        .collect();
    let entries_at = 32u64;
    let records_at = entries_at + 40 * n as u64;
    let strtab_at = records_at + 48 * n as u64;
    let images_at = (strtab_at + strtab.len() as u64).div_ceil(8) * 8;
    let total = images_at + (size as u64).div_ceil(8) * 8 * n as u64;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&[0x10, 0xFF, 0x10, 0xAD]);
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(&entries_at.to_le_bytes());
    out.extend_from_slice(&(n as u64).to_le_bytes());
    let stride = (size as u64).div_ceil(8) * 8;
    for i in 0..n as u64 {
        out.extend_from_slice(&1u16.to_le_bytes()); // ImageKind: object
        out.extend_from_slice(&4u16.to_le_bytes()); // OffloadKind: HIP (LLVM 21+)
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(records_at + 48 * i).to_le_bytes());
        out.extend_from_slice(&2u64.to_le_bytes());
        out.extend_from_slice(&(images_at + stride * i).to_le_bytes());
        out.extend_from_slice(&(size as u64).to_le_bytes());
    }
    for i in 0..n {
        let arch = arches[i % arches.len()];
        for (key, (value, len)) in [(triple_key, triple), (arch_key, arch)] {
            out.extend_from_slice(&(strtab_at + key.0).to_le_bytes());
            out.extend_from_slice(&(strtab_at + value).to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
        }
    }
    out.extend_from_slice(&strtab);
    out.resize(total as usize, 0x5a);
    out
}

/// Walks every unit and image, touching only the metadata.
fn walk(data: &[u8]) -> usize {
    let options = ReadOptions::default();
    let mut n = 0;
    for_each_unit(data, &options, |unit| {
        let open = unit.open(&options)?;
        for image in open.images() {
            n += image.bytes.len() & 1;
            n += black_box(image.entry_id).map_or(0, str::len);
        }
        Ok(())
    })
    .unwrap();
    n
}

/// The bundle reader alone: parse, then every entry's ID and payload.
fn walk_bundle(data: &[u8]) -> usize {
    let bundle = Bundle::parse(data, &Limits::default()).unwrap();
    let mut n = 0;
    for e in bundle.entries() {
        n += e.data.len() & 1;
        n += black_box(e.id).len();
    }
    n
}

/// The OffloadBinary reader alone: parse (which checks every string record), then every
/// entry's image and its `triple` and `arch` strings.
fn walk_offload(data: &[u8]) -> usize {
    let binary = OffloadBinary::parse(data, &Limits::default()).unwrap();
    let mut n = 0;
    for e in binary.entries() {
        n += e.image.len() & 1;
        n += black_box(e.strings.get_str("triple")).map_or(0, str::len);
        n += black_box(e.strings.get_str("arch")).map_or(0, str::len);
    }
    n
}

/// Allocations made by `f`.
fn allocations(f: impl FnOnce() -> usize) -> u64 {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    black_box(f());
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// The walks allocate nothing (issue 47): printed, and the bench fails otherwise.
fn no_allocations() {
    // The counter counts: one vector is one allocation.
    assert_eq!(allocations(|| black_box(vec![1u8; 16]).len()), 1);
    let mut counts = Vec::new();
    for n in [1, 1000] {
        let (b, o) = (bundle(n, 64, 1), offload_binary(n, 64));
        counts.push((n, "bundle, units + images", allocations(|| walk(&b))));
        counts.push((n, "bundle, reader", allocations(|| walk_bundle(&b))));
        counts.push((n, "OffloadBinary, units + images", allocations(|| walk(&o))));
        counts.push((n, "OffloadBinary, reader", allocations(|| walk_offload(&o))));
    }
    for (n, what, count) in &counts {
        println!("allocations in the walk ({what}, {n} entries): {count}");
    }
    assert!(
        counts.iter().all(|&(_, _, count)| count == 0),
        "a walk allocated: {counts:?}"
    );
}

/// One group: `f` over containers of 1 to 10 000 entries made by `make`.
fn by_entry_count(
    c: &mut Criterion,
    name: &str,
    make: fn(usize) -> Vec<u8>,
    f: fn(&[u8]) -> usize,
) {
    let mut g = c.benchmark_group(name);
    for n in [1usize, 10, 100, 1000, 10_000] {
        let data = make(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &data, |b, d| {
            b.iter(|| f(black_box(d)))
        });
    }
    g.finish();
}

fn entry_counts(c: &mut Criterion) {
    by_entry_count(c, "bundle_entries", |n| bundle(n, 64, 1), walk);
    by_entry_count(c, "bundle_walk", |n| bundle(n, 64, 1), walk_bundle);
    by_entry_count(c, "offload_entries", |n| offload_binary(n, 64), walk);
    by_entry_count(c, "offload_walk", |n| offload_binary(n, 64), walk_offload);
}

fn by_image_size(c: &mut Criterion) {
    let mut g = c.benchmark_group("bundle_image_size");
    for size in [4usize << 10, 16 << 20] {
        let data = bundle(8, size, 4096);
        g.throughput(Throughput::Elements(8));
        g.bench_with_input(BenchmarkId::from_parameter(size), &data, |b, d| {
            b.iter(|| walk(black_box(d)))
        });
    }
    g.finish();
}

fn corpus_files(c: &mut Criterion) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let mut g = c.benchmark_group("corpus_walk");
    for f in [
        "driver/hip_nonrdc.exe",
        "driver/libfat.a",
        "packager/multi3.offbin",
        "compressed/hip_6arch.zstd.ccob",
        "compressed/hip_6arch.zlib.ccob",
    ] {
        let data = std::fs::read(root.join(f)).unwrap();
        g.bench_with_input(BenchmarkId::from_parameter(f), &data, |b, d| {
            b.iter(|| walk(black_box(d)))
        });
    }
    g.finish();
}

/// `PARSE_MIN_OF=R`: instead of criterion, each walk of `entry_counts` timed as the least
/// of R rounds (each a few microseconds of repeated walks), per entry. The least round is
/// what the code costs when nothing else holds the CPU: on a shared machine it moves much
/// less than criterion's mean. `PARSE_ONLY=NAME` runs only the walks whose name contains
/// `NAME`, `PARSE_ONLY=NAME/N` only that walk at `N` entries (for a profiler).
fn min_of(rounds: u32) {
    let only = std::env::var("PARSE_ONLY").unwrap_or_default();
    type Walk = (&'static str, fn(usize) -> Vec<u8>, fn(&[u8]) -> usize);
    let walks: [Walk; 4] = [
        ("bundle_entries", |n| bundle(n, 64, 1), walk),
        ("bundle_walk", |n| bundle(n, 64, 1), walk_bundle),
        ("offload_entries", |n| offload_binary(n, 64), walk),
        ("offload_walk", |n| offload_binary(n, 64), walk_offload),
    ];
    for (name, make, f) in walks {
        for n in [1usize, 10, 100, 1000, 10_000] {
            let wanted = match only.split_once('/') {
                Some((w, count)) => name == w && count == n.to_string(),
                None => name.contains(only.as_str()),
            };
            if !wanted {
                continue;
            }
            let data = make(n);
            let reps = (2_000 / n).max(2);
            let mut best = f64::INFINITY;
            for _ in 0..rounds {
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    black_box(f(black_box(&data)));
                }
                best = best.min(t.elapsed().as_secs_f64() / (reps * n) as f64);
            }
            println!(
                "{name}/{n}: {:.1} ns per entry (least of {rounds})",
                best * 1e9
            );
        }
    }
}

fn main() {
    no_allocations();
    if let Some(rounds) = std::env::var("PARSE_MIN_OF")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        min_of(rounds);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    entry_counts(&mut c);
    by_image_size(&mut c);
    corpus_files(&mut c);
    c.final_summary();
}
