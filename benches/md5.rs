//! The MD5 floor of a verified `select` in compressed bundles (issue 47): how fast one
//! stream hashes on one CPU, and what hashing several streams at once in one CPU's vector
//! lanes ("multi-buffer" MD5) would give, since that is the only way past the one-stream
//! floor, and every stream is one unit's whole decompressed content held in memory.
//!
//! `cargo bench --bench md5` (add `--features md5-asm` for RustCrypto's assembly core, the
//! one `loader-sim` and the C API use). In test mode (`cargo test --benches`) it hashes
//! 64 KiB once and checks every digest. The lane kernel below is portable safe Rust over
//! `[u32; N]` arrays, which the compiler turns into the target's baseline vector code
//! (SSE2 on x86-64); it is a measurement, not used by the library. Every digest it gives
//! is checked against the `md5` crate's.

use std::hint::black_box;
use std::time::Instant;

/// Per-step left rotations (RFC 1321).
const S: [u32; 64] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9,
    14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15,
    21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];

/// Per-step constants (RFC 1321).
const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// One 32-bit word of each of `N` streams.
#[derive(Clone, Copy)]
struct Lanes<const N: usize>([u32; N]);

// Indexed loops over the lanes: the form the compiler turns into vector code.
#[allow(clippy::needless_range_loop)]
impl<const N: usize> Lanes<N> {
    #[inline(always)]
    fn splat(x: u32) -> Self {
        Lanes([x; N])
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        let mut r = self.0;
        for i in 0..N {
            r[i] = r[i].wrapping_add(o.0[i]);
        }
        Lanes(r)
    }
    #[inline(always)]
    fn and(self, o: Self) -> Self {
        let mut r = self.0;
        for i in 0..N {
            r[i] &= o.0[i];
        }
        Lanes(r)
    }
    #[inline(always)]
    fn or_not(self, o: Self) -> Self {
        let mut r = self.0;
        for i in 0..N {
            r[i] |= !o.0[i];
        }
        Lanes(r)
    }
    #[inline(always)]
    fn xor(self, o: Self) -> Self {
        let mut r = self.0;
        for i in 0..N {
            r[i] ^= o.0[i];
        }
        Lanes(r)
    }
    #[inline(always)]
    // Two shifts and an or: written so, the compiler vectorizes the 4-lane kernel (2.1x
    // faster here than with `rotate_left`, which it leaves scalar at 4 lanes).
    #[allow(clippy::manual_rotate)]
    fn rotl(self, s: u32) -> Self {
        let mut r = self.0;
        for x in &mut r {
            *x = (*x << s) | (*x >> (32 - s));
        }
        Lanes(r)
    }
}

/// One 64-byte block of each of `N` streams.
#[inline(always)]
fn compress<const N: usize>(state: &mut [Lanes<N>; 4], blocks: [&[u8]; N]) {
    let mut m = [Lanes::<N>([0; N]); 16];
    for (j, m) in m.iter_mut().enumerate() {
        for (w, b) in m.0.iter_mut().zip(blocks) {
            let mut word = [0u8; 4];
            word.copy_from_slice(&b[4 * j..4 * j + 4]);
            *w = u32::from_le_bytes(word);
        }
    }
    let [mut a, mut b, mut c, mut d] = *state;
    // Each step written out, so that its rotation and message word are constants.
    macro_rules! steps {
        ($f:ident; $($i:literal $g:literal),*) => {$({
            let f = $f(b, c, d);
            let t = a.add(f).add(m[$g].add(Lanes::splat(K[$i])));
            let nb = b.add(t.rotl(S[$i]));
            (a, d, c, b) = (d, c, b, nb);
        })*};
    }
    #[inline(always)]
    fn f1<const N: usize>(b: Lanes<N>, c: Lanes<N>, d: Lanes<N>) -> Lanes<N> {
        d.xor(b.and(c.xor(d)))
    }
    #[inline(always)]
    fn f2<const N: usize>(b: Lanes<N>, c: Lanes<N>, d: Lanes<N>) -> Lanes<N> {
        c.xor(d.and(b.xor(c)))
    }
    #[inline(always)]
    fn f3<const N: usize>(b: Lanes<N>, c: Lanes<N>, d: Lanes<N>) -> Lanes<N> {
        b.xor(c).xor(d)
    }
    #[inline(always)]
    fn f4<const N: usize>(b: Lanes<N>, c: Lanes<N>, d: Lanes<N>) -> Lanes<N> {
        c.xor(b.or_not(d))
    }
    steps!(f1; 0 0, 1 1, 2 2, 3 3, 4 4, 5 5, 6 6, 7 7, 8 8, 9 9, 10 10, 11 11, 12 12, 13 13, 14 14, 15 15);
    steps!(f2; 16 1, 17 6, 18 11, 19 0, 20 5, 21 10, 22 15, 23 4, 24 9, 25 14, 26 3, 27 8, 28 13, 29 2, 30 7, 31 12);
    steps!(f3; 32 5, 33 8, 34 11, 35 14, 36 1, 37 4, 38 7, 39 10, 40 13, 41 0, 42 3, 43 6, 44 9, 45 12, 46 15, 47 2);
    steps!(f4; 48 0, 49 7, 50 14, 51 5, 52 12, 53 3, 54 10, 55 1, 56 8, 57 15, 58 6, 59 13, 60 4, 61 11, 62 2, 63 9);
    for (s, v) in state.iter_mut().zip([a, b, c, d]) {
        *s = s.add(v);
    }
}

/// The MD5 digests of `N` streams of one length, hashed together in lanes.
fn md5_lanes<const N: usize>(streams: [&[u8]; N]) -> [[u8; 16]; N] {
    let len = streams[0].len();
    assert!(streams.iter().all(|s| s.len() == len));
    let mut state = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476].map(Lanes::<N>::splat);
    let whole = len / 64 * 64;
    for at in (0..whole).step_by(64) {
        compress(&mut state, streams.map(|s| &s[at..at + 64]));
    }
    // The padding: the rest, 0x80, zeros, the length in bits; one or two blocks.
    let tails = streams.map(|s| {
        let mut t = [0u8; 128];
        let rest = &s[whole..];
        t[..rest.len()].copy_from_slice(rest);
        t[rest.len()] = 0x80;
        t
    });
    let blocks = if len - whole < 56 { 1 } else { 2 };
    let bits = (len as u64).wrapping_mul(8).to_le_bytes();
    let tails = tails.map(|mut t| {
        t[blocks * 64 - 8..blocks * 64].copy_from_slice(&bits);
        t
    });
    for k in 0..blocks {
        compress(
            &mut state,
            core::array::from_fn(|l| &tails[l][k * 64..k * 64 + 64]),
        );
    }
    core::array::from_fn(|l| {
        let mut out = [0u8; 16];
        for (w, s) in out.chunks_exact_mut(4).zip(&state) {
            w.copy_from_slice(&s.0[l].to_le_bytes());
        }
        out
    })
}

/// `N` streams of `len` bytes cut from `data` hashed in lanes: aggregate MB/s, best of
/// `rounds`, every digest checked against the `md5` crate.
fn lanes<const N: usize>(data: &[u8], len: usize, rounds: u32) -> f64 {
    let streams: [&[u8]; N] = core::array::from_fn(|l| &data[l * len..(l + 1) * len]);
    let mut best = f64::INFINITY;
    let mut got = [[0u8; 16]; N];
    for _ in 0..rounds {
        let t = Instant::now();
        got = md5_lanes(black_box(streams));
        best = best.min(t.elapsed().as_secs_f64());
    }
    for (g, s) in got.iter().zip(streams) {
        assert_eq!(*g, md5::compute(s).0, "{N} lanes");
    }
    (N * len) as f64 / best / 1e6
}

/// One stream hashed by `f`: MB/s, best of `rounds`.
fn single(data: &[u8], rounds: u32, f: impl Fn(&[u8]) -> [u8; 16]) -> f64 {
    let want = md5::compute(data).0;
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let t = Instant::now();
        let got = f(black_box(data));
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(got, want);
    }
    data.len() as f64 / best / 1e6
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: 64 KiB, once.
    let bench = std::env::args().any(|a| a == "--bench");
    let (len, rounds) = if bench { (64 << 20, 3) } else { (64 << 10, 1) };
    // Every length class of the padding, in test mode.
    for extra in [0usize, 1, 55, 56, 63] {
        let d: Vec<u8> = (0..64 * 3 + extra).map(|i| (i * 7 + 3) as u8).collect();
        let [a, b] = md5_lanes([&d[..], &d[..]]);
        assert_eq!((a, b), (md5::compute(&d).0, md5::compute(&d).0), "{extra}");
    }
    let data: Vec<u8> = (0..8 * len as u32 + 100)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let one = &data[..len];
    let crate_md5 = single(one, rounds, |d| md5::compute(d).0);
    println!("one stream, md5 crate: {crate_md5:.0} MB/s");
    // The fastest one-stream MD5 built in: the lanes are compared with it.
    #[cfg(not(feature = "md5-asm"))]
    let base = (crate_md5, "the md5 crate");
    #[cfg(feature = "md5-asm")]
    let base = {
        use md5_asm::Digest;
        let asm = single(one, rounds, |d| md5_asm::Md5::digest(d).into());
        println!("one stream, md-5 with its assembly core (feature md5-asm): {asm:.0} MB/s");
        (asm, "the assembly core")
    };
    let l1 = lanes::<1>(&data, len, rounds);
    println!("lanes: 1 stream: {l1:.0} MB/s");
    for (n, mbs) in [
        (2, lanes::<2>(&data, len, rounds)),
        (4, lanes::<4>(&data, len, rounds)),
        (8, lanes::<8>(&data, len, rounds)),
    ] {
        println!(
            "lanes: {n} streams at once: {mbs:.0} MB/s in all, {:.0} MB/s each ({:.2}x one stream of {})",
            mbs / n as f64,
            mbs / base.0,
            base.1
        );
    }
}
