//! Builders of containers for the reliability tests, written from `FORMATS.md` (byte layouts)
//! and checked against the corpus: the tests that use them also read real LLVM output with
//! the same code paths. Hostile variants (bombs, huge counts, deep nesting) start from these.
#![allow(dead_code)]

use offload_image::ccob::truncated_md5;

/// A binary offload bundle (`FORMATS.md` §2) with payloads aligned to `align`.
pub fn bundle(entries: &[(&str, &[u8])], align: u64) -> Vec<u8> {
    let table: u64 = 32
        + entries
            .iter()
            .map(|(id, _)| 24 + id.len() as u64)
            .sum::<u64>();
    let mut out = Vec::new();
    out.extend_from_slice(b"__CLANG_OFFLOAD_BUNDLE__");
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let mut cursor = table;
    let mut offsets = Vec::new();
    for (_, data) in entries {
        cursor = cursor.div_ceil(align) * align;
        offsets.push(cursor);
        cursor += data.len() as u64;
    }
    for ((id, data), off) in entries.iter().zip(&offsets) {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(&(id.len() as u64).to_le_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    for ((_, data), off) in entries.iter().zip(&offsets) {
        out.resize(*off as usize, 0);
        out.extend_from_slice(data);
    }
    out
}

/// A small HIP bundle: host entry plus two device entries holding fake code objects.
pub fn hip_bundle() -> Vec<u8> {
    bundle(
        &[
            ("host-x86_64-unknown-linux-gnu-", b""),
            (
                "hipv4-amdgcn-amd-amdhsa--gfx906",
                b"\x7fELF gfx906 code object",
            ),
            (
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
                b"\x7fELF gfx90a code object",
            ),
        ],
        8,
    )
}

/// A zlib stream of `data` (miniz_oxide, level 6 like LLVM's default).
pub fn zlib(data: &[u8]) -> Vec<u8> {
    miniz_oxide::deflate::compress_to_vec_zlib(data, 6)
}

/// A zstd frame of `data` (ruzstd's encoder).
pub fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

/// A `CCOB` header (`FORMATS.md` §5.1) for `payload`, declaring `size` decompressed bytes
/// and storing `hash`.
pub fn ccob_raw(version: u16, method: u16, size: u64, hash: [u8; 8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"CCOB");
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&method.to_le_bytes());
    match version {
        1 => out.extend_from_slice(&(size as u32).to_le_bytes()),
        2 => {
            out.extend_from_slice(&((payload.len() + 24) as u32).to_le_bytes());
            out.extend_from_slice(&(size as u32).to_le_bytes());
        }
        _ => {
            out.extend_from_slice(&((payload.len() + 32) as u64).to_le_bytes());
            out.extend_from_slice(&size.to_le_bytes());
        }
    }
    out.extend_from_slice(&hash);
    out.extend_from_slice(payload);
    out
}

/// A valid `CCOB` of `content` (method 0 zlib, 1 zstd).
pub fn ccob(version: u16, method: u16, content: &[u8]) -> Vec<u8> {
    let payload = if method == 0 {
        zlib(content)
    } else {
        zstd(content)
    };
    ccob_raw(
        version,
        method,
        content.len() as u64,
        truncated_md5(content),
        &payload,
    )
}

/// A zstd frame (RFC 8878) without a content size whose blocks are all RLE blocks of
/// `block` bytes of `byte` (`blocks` of them), with a 1 MiB window: 4 input bytes per block.
pub fn zstd_rle_bomb(blocks: usize, block: u32, byte: u8) -> Vec<u8> {
    assert!(block <= 128 << 10);
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD];
    out.push(0x00); // descriptor: no content size, not single segment, no checksum, no dict
    out.push(10 << 3); // window descriptor: 2^(10 + 10) = 1 MiB
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = last | (1 << 1) | (block << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(byte);
    }
    out
}

/// A zstd frame (1 MiB window, no content size): `prefix` in one raw block, then `extra`
/// raw blocks of one byte each, then `rle_blocks` RLE blocks of 128 KiB of zeros.
pub fn zstd_prefix_then(prefix: &[u8], extra: usize, rle_blocks: usize) -> Vec<u8> {
    assert!(prefix.len() <= 128 << 10);
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 10 << 3];
    let total = 1 + extra + rle_blocks;
    let block = |out: &mut Vec<u8>, i: usize, ty: u32, size: u32| {
        let last = u32::from(i + 1 == total);
        out.extend_from_slice(&(last | (ty << 1) | (size << 3)).to_le_bytes()[..3]);
    };
    block(&mut out, 0, 0, prefix.len() as u32);
    out.extend_from_slice(prefix);
    for i in 0..extra {
        block(&mut out, 1 + i, 0, 1);
        out.push(b'x');
    }
    for i in 0..rle_blocks {
        block(&mut out, 1 + extra + i, 1, 128 << 10);
        out.push(0);
    }
    out
}

/// A zlib stream (one fixed-Huffman block): `prefix` as literals, then `repeats` 258-byte
/// matches at distance 1 (copies of the last byte of `prefix`). The Adler-32 is not that
/// of the output: the streams are for refusals.
pub fn zlib_prefix_then_bomb(prefix: &[u8], repeats: usize) -> Vec<u8> {
    let mut b = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        n: 0,
    };
    b.put(1, 1);
    b.put(1, 2);
    for &byte in prefix {
        if byte < 144 {
            b.code(0x30 + u32::from(byte), 8);
        } else {
            b.code(0x190 + u32::from(byte) - 144, 9);
        }
    }
    for _ in 0..repeats {
        b.code(0xC0 + (285 - 280), 8);
        b.code(0, 5);
    }
    b.code(0, 7);
    if b.n > 0 {
        b.put(0, 8 - b.n);
    }
    b.out.extend_from_slice(&[0, 0, 0, 0]);
    b.out
}

/// A zstd frame of `blocks` raw blocks of one byte each (4 input bytes per output byte).
pub fn zstd_raw_blocks(blocks: usize) -> Vec<u8> {
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 10 << 3];
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = last | (1 << 3); // raw block, size 1
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(b'x');
    }
    out
}

/// LSB-first bit writer for deflate.
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u32, bits: u32) {
        self.acc |= u64::from(value) << self.n;
        self.n += bits;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }
    /// A Huffman code: stored most significant bit first.
    fn code(&mut self, code: u32, bits: u32) {
        let rev = code.reverse_bits() >> (32 - bits);
        self.put(rev, bits);
    }
}

/// A zlib stream (RFC 1950/1951, one fixed-Huffman block) that inflates to one zero byte
/// followed by `repeats` copies of a 258-byte match at distance 1: `1 + 258 * repeats`
/// zero bytes from about `13 * repeats / 8` input bytes. The Adler-32 trailer is correct.
pub fn zlib_match_bomb(repeats: usize) -> Vec<u8> {
    let mut b = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        n: 0,
    };
    b.put(1, 1); // BFINAL
    b.put(1, 2); // BTYPE = 01, fixed Huffman
    b.code(0x30, 8); // literal 0: codes 0..143 are 0x30.. (8 bits)
    for _ in 0..repeats {
        b.code(0xC0 + (285 - 280), 8); // length 258: symbol 285 (8-bit codes 280..287)
        b.code(0, 5); // distance code 0: distance 1
    }
    b.code(0, 7); // end of block: symbol 256 (7 bits, 0000000)
    if b.n > 0 {
        b.put(0, 8 - b.n);
    }
    let total = 1 + 258 * repeats as u64;
    // Adler-32 of `total` zero bytes: a = 1, b = total mod 65521.
    let adler = ((total % 65521) << 16) | 1;
    b.out.extend_from_slice(&(adler as u32).to_be_bytes());
    b.out
}

/// One OffloadBinary entry for [`offload_binary`].
pub struct ObEntry<'a> {
    pub image_kind: u16,
    pub offload_kind: u16,
    pub strings: Vec<(&'a str, &'a [u8])>,
    pub image: &'a [u8],
}

/// An uncompressed OffloadBinary of `version` 1, 2 or 3 (`FORMATS.md` §6.1–6.4, the
/// writer layout of §6.4).
pub fn offload_binary(version: u32, entries: &[ObEntry<'_>]) -> Vec<u8> {
    assert!(version != 1 || entries.len() == 1);
    let header = if version >= 3 { 40 } else { 32 };
    let stride = if version == 1 { 16 } else { 24 };
    let n_strings: usize = entries.iter().map(|e| e.strings.len()).sum();
    let records_at = header + 40 * entries.len();
    let table_at = records_at + stride * n_strings;
    // String table: NUL first, then every key and value NUL-terminated (not deduplicated).
    let mut table = vec![0u8];
    let mut string_offsets = Vec::new();
    for e in entries {
        for (k, v) in &e.strings {
            let k_at = table_at + table.len();
            table.extend_from_slice(k.as_bytes());
            table.push(0);
            let v_at = table_at + table.len();
            table.extend_from_slice(v);
            table.push(0);
            string_offsets.push((k_at, v_at, v.len()));
        }
    }
    let images_at = (table_at + table.len()).div_ceil(8) * 8;
    let mut image_offsets = Vec::new();
    let mut cursor = images_at;
    for e in entries {
        image_offsets.push(cursor);
        cursor += e.image.len();
    }
    let size = cursor.div_ceil(8) * 8;
    let mut out = Vec::new();
    out.extend_from_slice(&[0x10, 0xFF, 0x10, 0xAD]);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(size as u64).to_le_bytes());
    out.extend_from_slice(&(header as u64).to_le_bytes());
    let word3 = if version == 1 {
        40
    } else {
        entries.len() as u64
    };
    out.extend_from_slice(&word3.to_le_bytes());
    if version >= 3 {
        out.extend_from_slice(&0u64.to_le_bytes());
    }
    let mut rec = 0usize;
    for (e, img_at) in entries.iter().zip(&image_offsets) {
        out.extend_from_slice(&e.image_kind.to_le_bytes());
        out.extend_from_slice(&e.offload_kind.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&((records_at + stride * rec) as u64).to_le_bytes());
        out.extend_from_slice(&(e.strings.len() as u64).to_le_bytes());
        out.extend_from_slice(&(*img_at as u64).to_le_bytes());
        out.extend_from_slice(&(e.image.len() as u64).to_le_bytes());
        rec += e.strings.len();
    }
    for (k_at, v_at, v_len) in &string_offsets {
        out.extend_from_slice(&(*k_at as u64).to_le_bytes());
        out.extend_from_slice(&(*v_at as u64).to_le_bytes());
        if version >= 2 {
            out.extend_from_slice(&(*v_len as u64).to_le_bytes());
        }
    }
    out.extend_from_slice(&table);
    out.resize(images_at, 0);
    for e in entries {
        out.extend_from_slice(e.image);
    }
    out.resize(size, 0);
    out
}

/// A one-entry OffloadBinary for `arch` of the given version.
pub fn offload_binary_for(version: u32, arch: &str, image: &[u8]) -> Vec<u8> {
    offload_binary(
        version,
        &[ObEntry {
            image_kind: 1,
            offload_kind: 4,
            strings: vec![
                ("triple", b"amdgcn-amd-amdhsa".as_slice()),
                ("arch", arch.as_bytes()),
            ],
            image,
        }],
    )
}

/// Compresses a version 3 OffloadBinary (`FORMATS.md` §6.6): the 40-byte header raw, the
/// rest one zlib (0) or zstd (1) stream, `size` the compressed size, `inflated_size` the
/// original size. Padded to 8 after `size`.
pub fn compress_offload_binary(uncompressed: &[u8], method: u16) -> Vec<u8> {
    let body = &uncompressed[40..];
    let stream = if method == 0 { zlib(body) } else { zstd(body) };
    let mut out = uncompressed[..40].to_vec();
    out.extend_from_slice(&stream);
    let size = out.len() as u64;
    out[8..16].copy_from_slice(&size.to_le_bytes());
    out[32..40].copy_from_slice(&(uncompressed.len() as u64).to_le_bytes());
    out.resize(out.len().div_ceil(8) * 8, 0);
    out
}

/// A compressed v3 OffloadBinary header in front of `stream`, claiming `inflated_size`.
pub fn compressed_offload_binary_raw(stream: &[u8], inflated_size: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&[0x10, 0xFF, 0x10, 0xAD]);
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&((40 + stream.len()) as u64).to_le_bytes());
    out.extend_from_slice(&40u64.to_le_bytes());
    out.extend_from_slice(&1u64.to_le_bytes());
    out.extend_from_slice(&inflated_size.to_le_bytes());
    out.extend_from_slice(stream);
    out.resize(out.len().div_ceil(8) * 8, 0);
    out
}

/// A GNU `ar` archive of `members` (`name/` names, 2-byte alignment).
pub fn ar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = b"!<arch>\n".to_vec();
    for (name, data) in members {
        let header = format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            format!("{name}/"),
            0,
            0,
            0,
            644,
            data.len()
        );
        assert_eq!(header.len(), 60);
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        if out.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    out
}

/// A section of [`elf64`]: name, type, and the range of the file it covers (`None`: placed
/// after the headers, with `data`).
pub struct Section<'a> {
    pub name: &'a str,
    pub sh_type: u32,
    pub data: &'a [u8],
    /// Explicit (offset, size) instead of placing `data`.
    pub range: Option<(u64, u64)>,
}

/// A little-endian ELF64 relocatable file for x86-64 with the given sections (plus the null
/// section and `.shstrtab`).
pub fn elf64(sections: &[Section<'_>]) -> Vec<u8> {
    let mut shstrtab = vec![0u8];
    let mut name_offsets = Vec::new();
    for s in sections {
        name_offsets.push(shstrtab.len() as u32);
        shstrtab.extend_from_slice(s.name.as_bytes());
        shstrtab.push(0);
    }
    let shstrtab_name = shstrtab.len() as u32;
    shstrtab.extend_from_slice(b".shstrtab\0");
    let mut out = vec![0u8; 64];
    let mut placed = Vec::new();
    for s in sections {
        let at = out.len().div_ceil(8) * 8;
        out.resize(at, 0);
        out.extend_from_slice(s.data);
        placed.push(s.range.unwrap_or((at as u64, s.data.len() as u64)));
    }
    let strtab_at = out.len() as u64;
    out.extend_from_slice(&shstrtab);
    let shoff = out.len().div_ceil(8) * 8;
    out.resize(shoff, 0);
    let shnum = sections.len() + 2;
    // Header.
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2; // ELFCLASS64
    out[5] = 1; // little-endian
    out[6] = 1; // EV_CURRENT
    out[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
    out[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    out[20..24].copy_from_slice(&1u32.to_le_bytes());
    out[40..48].copy_from_slice(&(shoff as u64).to_le_bytes());
    out[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    out[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
    out[60..62].copy_from_slice(&(shnum as u16).to_le_bytes());
    out[62..64].copy_from_slice(&((shnum - 1) as u16).to_le_bytes()); // e_shstrndx
    let mut sh = |name: u32, ty: u32, offset: u64, size: u64| {
        out.extend_from_slice(&name.to_le_bytes());
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes()); // flags
        out.extend_from_slice(&0u64.to_le_bytes()); // addr
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // link
        out.extend_from_slice(&0u32.to_le_bytes()); // info
        out.extend_from_slice(&1u64.to_le_bytes()); // addralign
        out.extend_from_slice(&0u64.to_le_bytes()); // entsize
    };
    sh(0, 0, 0, 0);
    for ((s, name), (offset, size)) in sections.iter().zip(&name_offsets).zip(&placed) {
        sh(*name, s.sh_type, *offset, *size);
    }
    sh(shstrtab_name, 3, strtab_at, shstrtab.len() as u64);
    out
}

/// `SHT_PROGBITS`.
pub const PROGBITS: u32 = 1;
/// `SHT_LLVM_OFFLOADING`.
pub const LLVM_OFFLOADING: u32 = 0x6FFF_4C0B;

/// A host object with one `.hip_fatbin` section holding `contents`.
pub fn host_with_fatbin(contents: &[u8]) -> Vec<u8> {
    elf64(&[Section {
        name: ".hip_fatbin",
        sh_type: PROGBITS,
        data: contents,
        range: None,
    }])
}

/// Deterministic xorshift64* generator for the seeded tests.
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
