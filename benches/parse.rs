//! Library-level costs (issue P4): parsing and iterating uncompressed containers, per entry,
//! as the entry count grows (1 → 10 000) and as the images grow (must not matter).
//!
//! `cargo bench --bench parse` (add `-- --warm-up-time 1 --measurement-time 2` for a quick run).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offload_image::{for_each_unit, ReadOptions};
use std::hint::black_box;

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

fn by_entry_count(c: &mut Criterion) {
    let mut g = c.benchmark_group("bundle_entries");
    for n in [1usize, 10, 100, 1000, 10_000] {
        let data = bundle(n, 64, 1);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &data, |b, d| {
            b.iter(|| walk(black_box(d)))
        });
    }
    g.finish();
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

criterion_group!(benches, by_entry_count, by_image_size, corpus_files);
criterion_main!(benches);
