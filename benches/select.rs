//! Library-level selection costs (issue 8, P4): parse + identify + select on uncompressed
//! bundles, per entry, as the entry count grows (1 → 10 000) and as the images grow
//! (4 KiB → 16 MiB: must not matter, selection reads only each image's ELF header); and
//! compressed bundles, streamed (`offload_image::stream`) against decompressing them whole.
//!
//! `cargo bench --bench select` (add `-- --warm-up-time 1 --measurement-time 2` for a
//! quick run). Parsing and selecting allocate nothing: `tests/suite/alloc_free.rs` and
//! `tests/suite/zero_alloc.rs` count the allocations of the same calls.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offload_image::stream::select_in_stream;
use offload_image::{
    for_each_unit, identify, select, Device, Error, Image, ReadOptions, SelectOptions,
};
use std::hint::black_box;

/// (processor, EF_AMDGPU_MACH) of the entries, cycled.
const PROCESSORS: &[(&str, u32)] = &[
    ("gfx900", 0x2c),
    ("gfx906", 0x2f),
    ("gfx908", 0x30),
    ("gfx90a", 0x3f),
    ("gfx942", 0x4c),
    ("gfx1030", 0x36),
    ("gfx1100", 0x41),
];

/// A 64-byte AMDGPU code object V5 header for `mach` with xnack- (sramecc any).
fn elf_header(mach: u32) -> [u8; 64] {
    let mut h = [0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2; // ELFCLASS64
    h[5] = 1; // little-endian
    h[6] = 1; // EV_CURRENT
    h[7] = 64; // ELFOSABI_AMDGPU_HSA
    h[8] = 3; // ABI version 3 = code object V5
    h[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    h[18..20].copy_from_slice(&224u16.to_le_bytes()); // EM_AMDGPU
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    let flags = mach | 0x200 | 0x400; // xnack off, sramecc any
    h[48..52].copy_from_slice(&flags.to_le_bytes());
    h[52..54].copy_from_slice(&64u16.to_le_bytes());
    h
}

/// A binary bundle of `n` device entries of `size` bytes (each starting with a code
/// object header that agrees with its ID), aligned to `align`.
fn bundle(n: usize, size: usize, align: u64) -> Vec<u8> {
    let ids: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "hipv4-amdgcn-amd-amdhsa--{}:xnack-",
                PROCESSORS[i % PROCESSORS.len()].0
            )
        })
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
    for (i, off) in offsets.iter().enumerate() {
        let h = elf_header(PROCESSORS[i % PROCESSORS.len()].1);
        let at = *off as usize;
        let len = size.min(64);
        out[at..at + len].copy_from_slice(&h[..len]);
    }
    out
}

/// Parses every unit, identifies every image and selects for `device`: the work of
/// `loader-sim select` per unit, without allocating.
fn parse_and_select(data: &[u8], device: &Device) -> usize {
    let read = ReadOptions::default();
    let options = SelectOptions::default();
    let mut chosen = 0;
    for_each_unit(data, &read, |unit| {
        let open = unit.open(&read)?;
        let s = select(open.images(), device, &options);
        chosen += s.chosen().unwrap_or(usize::MAX) & 0xFFFF;
        Ok(())
    })
    .unwrap();
    chosen
}

fn by_entry_count(c: &mut Criterion) {
    let device = Device::parse("gfx90a:sramecc+:xnack-").unwrap();
    let mut g = c.benchmark_group("select_entries");
    for n in [1usize, 10, 100, 1000, 10_000] {
        let data = bundle(n, 4096, 4096);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &data, |b, d| {
            b.iter(|| parse_and_select(black_box(d), &device))
        });
    }
    g.finish();
}

fn by_image_size(c: &mut Criterion) {
    let device = Device::parse("gfx90a:sramecc+:xnack-").unwrap();
    let mut g = c.benchmark_group("select_image_size");
    for size in [4usize << 10, 1 << 20, 16 << 20] {
        let data = bundle(8, size, 4096);
        g.throughput(Throughput::Elements(8));
        g.bench_with_input(BenchmarkId::from_parameter(size), &data, |b, d| {
            b.iter(|| parse_and_select(black_box(d), &device))
        });
    }
    g.finish();
}

/// Identification alone (reads the 64-byte ELF header and the entry ID).
fn identify_one(c: &mut Criterion) {
    let data = bundle(1, 4096, 4096);
    let read = ReadOptions::default();
    let units = offload_image::units(&data, &read)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let open = units[0].open(&read).unwrap();
    let image: Image<'_> = open.images().next().unwrap();
    c.bench_function("identify", |b| b.iter(|| identify(black_box(&image))));
}

/// A compressed bundle of the corpus: streaming selection (decoder + table + heads, hash
/// checked) against decompressing it whole, verifying and selecting.
fn compressed(c: &mut Criterion) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let devices = [Device::parse("gfx90a:sramecc+:xnack-").unwrap()];
    let options = SelectOptions::default();
    let mut g = c.benchmark_group("compressed_select");
    for f in [
        "compressed/hip_6arch.zstd.ccob",
        "compressed/hip_6arch.zlib.ccob",
    ] {
        let data = std::fs::read(root.join(f)).unwrap();
        for verify in [true, false] {
            let read = ReadOptions {
                verify_hash: verify,
                ..ReadOptions::default()
            };
            let tag = if verify { "verify" } else { "no-verify" };
            g.bench_with_input(
                BenchmarkId::new(format!("stream/{tag}"), f),
                &data,
                |b, d| {
                    b.iter(|| {
                        let ccob = offload_image::ccob::CompressedBundle::parse(d).unwrap();
                        let reader = ccob.reader(&read).unwrap();
                        select_in_stream(reader, &devices, &options, &read.limits, false, |_| {
                            Ok::<(), Error>(())
                        })
                        .unwrap()
                        .unwrap()
                        .chosen[0]
                    })
                },
            );
            g.bench_with_input(
                BenchmarkId::new(format!("whole/{tag}"), f),
                &data,
                |b, d| {
                    b.iter(|| {
                        let units = offload_image::units(d, &read)
                            .collect::<Result<Vec<_>, _>>()
                            .unwrap();
                        let open = units[0].open(&read).unwrap();
                        let images: Vec<Image<'_>> = open.images().collect();
                        select(&images, &devices[0], &options).chosen()
                    })
                },
            );
        }
    }
    g.finish();
}

criterion_group!(
    benches,
    by_entry_count,
    by_image_size,
    identify_one,
    compressed
);
criterion_main!(benches);
