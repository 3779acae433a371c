//! The registration views over a memory model (REGISTRATION.md §8): `__tgt_bin_desc`,
//! `__tgt_device_image`, both offload entry layouts, HIP/CUDA fat-binary wrappers, pointer
//! chasing between two regions; then the simulated runtime registers what it finds.
//!
//! Input: byte 0 selects the mode. Odd: a valid registration (descriptor with two device
//! images — an OffloadBinary-wrapped gfx90a code object and a bare gfx906 one — and a
//! current-layout entry table; a HIP wrapper pointing at a bundle) is built, and the rest
//! of the input is a list of 9-byte patches (u32 position, u8 operation, u32 value) applied
//! to it. Even: bytes 1–2 split the rest into the two regions; bytes 3–4 place the
//! descriptor and the wrapper in region A.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image_fuzz::{registration_views, within, Space, REGION_A, REGION_B};

const CO_90A: &[u8] = include_bytes!("../../tests/data/corpus/devobj/saxpy.gfx90a.co");
const CO_906: &[u8] = include_bytes!("../../tests/data/corpus/devobj/saxpy.gfx906.co");
const OFFBIN: &[u8] =
    include_bytes!("../../tests/data/corpus/packager/amdgcn_gfx90a_xnack+.openmp.offbin");
const BUNDLE: &[u8] = include_bytes!("../../tests/data/corpus/bundles/hip_nohost.bundle");

fn put(v: &mut [u8], at: usize, x: u64) {
    v[at..at + 8].copy_from_slice(&x.to_le_bytes());
}

/// (region A, region B, descriptor address, wrapper address) of the template.
fn template() -> (Vec<u8>, Vec<u8>, u64, u64) {
    let _ = CO_90A;
    // Region B: the images, 8-aligned.
    let mut b = Vec::new();
    let mut place = |bytes: &[u8]| {
        let at = b.len();
        b.extend_from_slice(bytes);
        b.resize(b.len().div_ceil(8) * 8, 0);
        (REGION_B + at as u64, REGION_B + (at + bytes.len()) as u64)
    };
    let (offbin, offbin_end) = place(OFFBIN);
    let (co906, co906_end) = place(CO_906);
    let (bundle, _) = place(BUNDLE);
    // Region A: descriptor @0, device images @32, entries @96, names @208, wrapper @256.
    let mut a = vec![0u8; 320];
    a[0..4].copy_from_slice(&2i32.to_le_bytes());
    put(&mut a, 8, REGION_A + 32);
    put(&mut a, 16, REGION_A + 96);
    put(&mut a, 24, REGION_A + 96 + 2 * 56);
    for (i, (s, e)) in [(offbin, offbin_end), (co906, co906_end)]
        .into_iter()
        .enumerate()
    {
        let r = 32 + 32 * i;
        put(&mut a, r, s);
        put(&mut a, r + 8, e);
        put(&mut a, r + 16, REGION_A + 96);
        put(&mut a, r + 24, REGION_A + 96 + 2 * 56);
    }
    for (i, name_at) in [208u64, 224].into_iter().enumerate() {
        let e = 96 + 56 * i;
        a[e + 8..e + 10].copy_from_slice(&1u16.to_le_bytes()); // version
        a[e + 10..e + 12].copy_from_slice(&1u16.to_le_bytes()); // kind: OpenMP
        put(&mut a, e + 16, 0x4000 + i as u64); // host address
        put(&mut a, e + 24, REGION_A + name_at);
        put(&mut a, e + 32, 8 * i as u64); // size: a kernel, then a variable
    }
    a[208..215].copy_from_slice(b"saxpy\0\0");
    a[224..231].copy_from_slice(b"global\0");
    a[256..260].copy_from_slice(&0x4849_5046u32.to_le_bytes()); // HIPF
    a[260..264].copy_from_slice(&1u32.to_le_bytes());
    put(&mut a, 264, bundle);
    (a, b, REGION_A, REGION_A + 256)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        let (mut a, mut b, desc, wrapper) = template();
        for p in rest.chunks_exact(9) {
            let pos = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize;
            let value = u32::from_le_bytes([p[5], p[6], p[7], p[8]]);
            let total = a.len() + b.len();
            let pos = pos % total;
            let (v, at) = if pos < a.len() {
                (&mut a, pos)
            } else {
                (&mut b, pos - a.len())
            };
            match p[4] % 4 {
                0 => v[at] = value as u8,
                1 => v[at] ^= value as u8,
                2 => {
                    // A 4-byte value (sizes, counts, low halves of pointers).
                    let end = (at + 4).min(v.len());
                    v[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
                }
                _ => {
                    // An 8-byte extreme or region-relative value.
                    let x = match value % 6 {
                        0 => 0,
                        1 => u64::MAX,
                        2 => 1 << 63,
                        3 => REGION_A + u64::from(value >> 3) % 512,
                        4 => REGION_B + u64::from(value >> 3) % 8192,
                        _ => u64::from(value),
                    };
                    let end = (at + 8).min(v.len());
                    v[at..end].copy_from_slice(&x.to_le_bytes()[..end - at]);
                }
            }
        }
        let space = Space::new(&a, &b);
        let inside = |s: &[u8]| within(&a, s) || within(&b, s);
        registration_views(&space, desc, wrapper, &inside);
    } else {
        if rest.len() < 4 {
            return;
        }
        let split = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let desc = REGION_A + u64::from(rest[2]) * 8;
        let wrapper = REGION_A + u64::from(rest[3]) * 8;
        let mem = &rest[4..];
        let (a, b) = mem.split_at(split.min(mem.len()));
        let space = Space::new(a, b);
        let inside = |s: &[u8]| within(mem, s);
        registration_views(&space, desc, wrapper, &inside);
    }
});
