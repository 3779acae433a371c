//! The NVIDIA fatbinary entry table walk (issue 47 item 4): per-entry cost of
//! `Fatbin::parse` (which validates every entry header and payload range) followed by
//! `Fatbin::entries` (the iteration the container walk and `select` do), and the number of
//! heap allocations in it, counted by this bench's global allocator. Goal: at most 50 ns
//! an entry, 0 allocations.
//!
//! `cargo bench --bench fatbin` (add `-- --warm-up-time 1 --measurement-time 2` for a quick
//! run). Before timing, each table size is walked once and its allocation count printed
//! (`fatbin walk: N entries, A allocations`); the bench stops if it is not 0.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offload_image::nvfatbin::Fatbin;
use offload_image::Limits;

/// The system allocator, counting allocations.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A fatbinary of `n` entries as CUDA 13's `fatbinary` lays them out: 64-byte entry headers
/// (kind, version 0x0101, header size, payload size, compressed size, SM, flags,
/// decompressed size), cubins for sm_75 … sm_120 in turn, every one a zstd payload of 64
/// stored bytes (the walk never decodes), and one PTX entry in ten stored plain.
fn fatbin(n: usize) -> Vec<u8> {
    const SMS: [u32; 6] = [75, 80, 86, 89, 90, 120];
    let mut body = Vec::with_capacity(n * 128);
    for i in 0..n {
        let ptx = i % 10 == 9;
        let mut h = [0u8; 64];
        h[0..2].copy_from_slice(&(if ptx { 1u16 } else { 2 }).to_le_bytes());
        h[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        h[4..8].copy_from_slice(&64u32.to_le_bytes());
        h[8..16].copy_from_slice(&64u64.to_le_bytes());
        let sm = SMS[i % SMS.len()];
        h[0x1C..0x20].copy_from_slice(&sm.to_le_bytes());
        let flags: u64 = if ptx { 0x11 } else { 0x8011 };
        h[0x28..0x30].copy_from_slice(&flags.to_le_bytes());
        if !ptx {
            h[0x10..0x14].copy_from_slice(&60u32.to_le_bytes());
            h[0x38..0x40].copy_from_slice(&4096u64.to_le_bytes());
        }
        body.extend_from_slice(&h);
        let mut payload = [0x5au8; 64];
        if ptx {
            payload[..13].copy_from_slice(b".version 9.0\n");
            payload[13] = 0;
        } else {
            payload[..4].copy_from_slice(&[0x28, 0xB5, 0x2F, 0xFD]);
        }
        body.extend_from_slice(&payload);
    }
    let mut out = vec![0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0];
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Parses the fatbinary and walks its entries, touching what a chooser reads of each.
fn walk(data: &[u8], limits: &Limits) -> u64 {
    let fb = Fatbin::parse(data, limits).expect("the bench's fatbinary parses");
    let mut n = 0u64;
    for e in fb.entries() {
        n += u64::from(e.sm) + e.uncompressed_size + e.payload.len() as u64;
        n += u64::from(e.codec.is_some()) + e.arch_name().map_or(0, |a| a.len() as u64);
    }
    n
}

fn entries(c: &mut Criterion) {
    let limits = Limits {
        max_entries: 1 << 20,
        ..Limits::DEFAULT
    };
    let mut g = c.benchmark_group("fatbin_entries");
    for n in [1usize, 1000, 10_000] {
        let data = fatbin(n);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        black_box(walk(black_box(&data), &limits));
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        println!("fatbin walk: {n} entries, {allocations} allocations");
        assert_eq!(allocations, 0, "the entry table walk allocates");
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &data, |b, d| {
            b.iter(|| walk(black_box(d), &limits))
        });
    }
    g.finish();
}

criterion_group!(benches, entries);
criterion_main!(benches);
