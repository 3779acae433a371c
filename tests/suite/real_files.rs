//! Shapes of real files the reader once got wrong, each on a file made by a real tool, and
//! the lazy images that let selection read headers only:
//!
//! * a zstd frame compressed as a stream (the `zstd` command reading standard input), whose
//!   window is larger than its content, inside a `CCOB` (tests/data/real/, regen.sh);
//! * a cubin whose section header table comes before its section data, as nvlink writes
//!   the relocatable sm_75/sm_80 cubins of `libcublasLt.so.13` (made here from a real
//!   ptxas cubin by moving its table to the front);
//! * compressed fatbinary entries, identified from their headers and decoded on demand.
//!
//! The oracles, LLVM 22's bundler and NVIDIA's cuobjdump, run when the external tests are
//! switched on (`OFFLOAD_IMAGE_EXTERNAL_TESTS=1`, as `scripts/test.sh` does).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use offload_image::ccob::{bounded_zstd_header, CompressedBundle};
use offload_image::decompress::Codec;
use offload_image::nvfatbin::trim_image;
use offload_image::{units, ErrorKind, Image, Limits, ReadOptions};

fn real(name: &str) -> PathBuf {
    common::root().join("tests/data/real").join(name)
}

/// The images of the first unit of `data`, with their bytes decoded.
fn images_of(data: &[u8], options: &ReadOptions) -> Vec<(String, Vec<u8>)> {
    let unit = units(data, options).next().unwrap().unwrap();
    let open = unit.open(options).unwrap();
    open.images()
        .map(|i| {
            (
                i.entry_id.unwrap_or_default().to_string(),
                i.decode(options).unwrap().into_owned(),
            )
        })
        .collect()
}

#[test]
fn zstd_frame_with_a_window_larger_than_its_content_decodes() {
    let ccob = std::fs::read(real("ccob_v3_zstd_stream.ccob")).unwrap();
    let bundle = common::read_corpus("bundles/hip_6arch.bundle");
    let c = CompressedBundle::parse(&ccob).unwrap();
    // The frame states an 8 MiB window for 22 KB of content.
    let payload = c.payload();
    assert_eq!(payload[4] & 0x20, 0, "not a single-segment frame");
    let stated = {
        let b = payload[5];
        let base = 1u64 << (10 + (b >> 3));
        base + base / 8 * u64::from(b & 7)
    };
    assert_eq!(stated, 8 << 20);
    assert!(stated > c.uncompressed_size());
    let (header, len) = bounded_zstd_header(payload, c.uncompressed_size()).unwrap();
    let narrowed = {
        let b = header[5];
        let base = 1u64 << (10 + (b >> 3));
        base + base / 8 * u64::from(b & 7)
    };
    // Narrowed to the content, but no lower than 1 MiB (so that content larger than declared
    // is reported as such).
    assert_eq!(narrowed, 1 << 20);
    assert_eq!(&header[..len][..5], &payload[..5]);

    // Decoded whole, streamed, and through the unit walk: the bundle it was made from.
    let options = ReadOptions::default();
    assert_eq!(c.decompress(&options).unwrap(), bundle);
    assert_eq!(c.reader(&options).unwrap().read_to_vec().unwrap(), bundle);
    assert_eq!(images_of(&ccob, &options), images_of(&bundle, &options));

    // Memory is bounded by the declared content, not the frame's claim: a limit of the
    // content's size still decodes it.
    let tight = ReadOptions {
        limits: Limits {
            max_decompressed_size: c.uncompressed_size(),
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    assert_eq!(c.decompress(&tight).unwrap(), bundle);

    if !common::external_part("clang-offload-bundler-22") {
        return;
    }
    // LLVM 22 lists and unbundles it too.
    let bundler = common::tool("clang-offload-bundler-22");
    let o = Command::new(&bundler)
        .args(["-list", "-type=o"])
        .arg(format!(
            "-input={}",
            real("ccob_v3_zstd_stream.ccob").display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed: Vec<String> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let mut listed = listed;
    let mut ours: Vec<String> = images_of(&ccob, &options)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    // The bundler lists in an order of its own.
    listed.sort();
    ours.sort();
    assert_eq!(listed, ours);
    let dir = common::scratch("zstd_stream_window");
    let target = "hipv4-amdgcn-amd-amdhsa--gfx906";
    let out = dir.join("gfx906.co");
    let o = Command::new(&bundler)
        .args(["-unbundle", "-type=o", &format!("-targets={target}")])
        .arg(format!(
            "-input={}",
            real("ccob_v3_zstd_stream.ccob").display()
        ))
        .arg(format!("-output={}", out.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let theirs = std::fs::read(&out).unwrap();
    let mine = images_of(&ccob, &options)
        .into_iter()
        .find(|(id, _)| id == target)
        .unwrap()
        .1;
    assert_eq!(theirs, mine);
}

fn u16_at(b: &[u8], o: usize) -> usize {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn put_u64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

/// The same ELF64 with its header tables moved to just after the ELF header, section
/// header table first, and every section and segment after them: the layout of nvlink's
/// relocatable cubins, whose data all lies past the tables.
fn table_first(c: &[u8]) -> Vec<u8> {
    let shoff = u64_at(c, 0x28) as usize;
    let (shentsize, shnum) = (u16_at(c, 0x3A), u16_at(c, 0x3C));
    let (phoff, phentsize, phnum) = (u64_at(c, 0x20) as usize, u16_at(c, 0x36), u16_at(c, 0x38));
    let (tlen, plen) = (shentsize * shnum, phentsize * phnum);
    // ptxas writes the section data, then the section header table, then the program
    // header table.
    assert_eq!(
        shoff + tlen,
        phoff,
        "the program header table follows the section table"
    );
    assert_eq!(phoff + plen, c.len(), "and ends the file");
    // Where a byte of the original is in the result (PHDR segments point at their table).
    let moved = |o: u64| -> u64 {
        let o = o as usize;
        (if o >= phoff {
            o - phoff + 64 + tlen
        } else if o >= shoff {
            o - shoff + 64
        } else if o >= 64 {
            o + tlen + plen
        } else {
            o
        }) as u64
    };
    let mut out = c[..64].to_vec();
    out.extend_from_slice(&c[shoff..shoff + tlen]);
    out.extend_from_slice(&c[phoff..phoff + plen]);
    out.extend_from_slice(&c[64..shoff]);
    put_u64(&mut out, 0x28, 64);
    put_u64(&mut out, 0x20, (64 + tlen) as u64);
    for i in 0..shnum {
        let e = 64 + i * shentsize;
        if u32_at(&out, e + 4) != 0 {
            let off = moved(u64_at(&out, e + 0x18));
            put_u64(&mut out, e + 0x18, off);
        }
    }
    for i in 0..phnum {
        let p = 64 + tlen + i * phentsize;
        let (off, filesz) = (u64_at(&out, p + 8), u64_at(&out, p + 0x20));
        assert!(
            off >= 64 || filesz == 0,
            "a segment that covers the ELF header"
        );
        if filesz > 0 {
            put_u64(&mut out, p + 8, moved(off));
        }
    }
    out
}

/// A fatbinary of one entry: the first 64 bytes of `entry_header` (from a real fatbinary)
/// with `payload` padded by `pad` zero bytes.
fn one_entry_fatbin(entry_header: &[u8], payload: &[u8], pad: usize) -> Vec<u8> {
    let mut e = entry_header[..64].to_vec();
    e[4..8].copy_from_slice(&64u32.to_le_bytes());
    put_u64(&mut e, 8, (payload.len() + pad) as u64);
    e[0x14..0x18].copy_from_slice(&0u32.to_le_bytes());
    let body = 64 + payload.len() + pad;
    let mut out = vec![0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0];
    out.extend_from_slice(&(body as u64).to_le_bytes());
    out.extend_from_slice(&e);
    out.extend_from_slice(payload);
    out.resize(out.len() + pad, 0);
    out
}

#[test]
fn cubin_with_its_section_table_first_is_not_cut() {
    // The sm_75 cubin of a fatbinary written by NVIDIA's fatbinary (stored uncompressed).
    let real =
        std::fs::read(common::root().join("tests/data/nvfatbin/files/mixed.none.fatbin")).unwrap();
    let at = 16usize;
    assert_eq!((u16_at(&real, at), u32_at(&real, at + 0x1C)), (2, 75));
    let header_size = u32_at(&real, at + 4) as usize;
    let payload = &real[at + header_size..at + header_size + u64_at(&real, at + 8) as usize];
    let cubin = trim_image(offload_image::nvfatbin::EntryKind::Cubin, payload);
    let moved = table_first(cubin);
    assert_eq!(moved.len(), cubin.len());
    // Both tables now end before the data: the end of the tables (where the reader used to
    // cut) is not the end of the cubin.
    let tables_end =
        64 + u16_at(cubin, 0x3A) * u16_at(cubin, 0x3C) + u16_at(cubin, 0x36) * u16_at(cubin, 0x38);
    assert!(tables_end < moved.len());

    let fatbin = one_entry_fatbin(&real[at..], &moved, 40);
    let options = ReadOptions::default();
    let unit = units(&fatbin, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let images: Vec<Image<'_>> = open.images().collect();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].bytes, &moved[..], "the whole cubin, no padding");
    assert_eq!(images[0].file_range(), Some(80..80 + moved.len() as u64));

    if !common::external_part("cuobjdump (NVIDIA's wheel, scripts/fetch-nvidia-toolkit.sh)") {
        return;
    }
    let dir = common::scratch("cubin_table_first");
    let file = dir.join("table_first.fatbin");
    std::fs::write(&file, &fatbin).unwrap();
    let o = Command::new(cuda_root().join("bin/cuobjdump"))
        .args(["-xelf", "all"])
        .arg(&file)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let extracted: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cubin"))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(extracted, vec![moved]);
}

/// The CUDA tree of NVIDIA's wheels that the test set-up fetches.
fn cuda_root() -> PathBuf {
    let o = Command::new(common::root().join("scripts/fetch-nvidia-toolkit.sh"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    PathBuf::from(
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .trim(),
    )
}

static HOOK_CALLS: AtomicUsize = AtomicUsize::new(0);

fn counting_hook(
    codec: Codec,
    stream: &[u8],
    size: u64,
    options: &ReadOptions,
) -> Option<offload_image::Result<Vec<u8>>> {
    HOOK_CALLS.fetch_add(1, Ordering::SeqCst);
    Some(offload_image::decompress::decode(codec, stream, 0, size, 0, options).map(|(v, _)| v))
}

fn nvfatbin_file(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/nvfatbin/files")
            .join(name),
    )
    .unwrap()
}

#[test]
fn compressed_fatbin_entries_are_identified_from_headers_and_decoded_on_demand() {
    // Every entry of mixed.default.fatbin is compressed (fatbinary's default mode).
    let data = nvfatbin_file("mixed.default.fatbin");
    let manifest = common_manifest("mixed.default.fatbin");
    let options = ReadOptions::default();
    let unit = units(&data, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let images: Vec<Image<'_>> = open.images().collect();
    assert!(!images.is_empty());
    let encoded: Vec<&Image<'_>> = images.iter().filter(|i| !i.is_decoded()).collect();
    assert!(!encoded.is_empty());
    assert!(encoded
        .iter()
        .all(|i| i.bytes.is_empty() && i.offset.is_none()));
    // Identified from the headers: every image has its architecture and kind.
    let device = offload_image::Device::parse("sm_86").unwrap();
    let chosen = offload_image::select(&images, &device, &Default::default())
        .chosen()
        .map(|i| &images[i])
        .unwrap();
    assert_eq!(chosen.target_id, Some("sm_86"));
    assert_eq!(chosen.image_kind, offload_image::ImageKind::Cubin);
    // Decoded on demand, with the caller's decoder: cuobjdump's bytes.
    let hooked = ReadOptions {
        decoders: offload_image::ccob::Decoders {
            raw: Some(counting_hook),
            ..Default::default()
        },
        ..ReadOptions::default()
    };
    let before = HOOK_CALLS.load(Ordering::SeqCst);
    for image in &images {
        let bytes = image.decode(&hooked).unwrap();
        assert!(bytes.len() as u64 <= image.size());
        assert!(
            manifest.contains(&common::sha256(&bytes)),
            "{}",
            image.index
        );
    }
    assert_eq!(HOOK_CALLS.load(Ordering::SeqCst) - before, encoded.len());
    // A damaged stream is an error located in the file, found when decoded.
    let entry = encoded[0];
    let e = entry.encoded.unwrap();
    let mut bad = data.clone();
    let at = e.stream_at as usize + e.stream.len() / 2;
    for b in &mut bad[at..at + 8] {
        *b ^= 0x5A;
    }
    let unit = units(&bad, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let first = open.images().nth(entry.index).unwrap();
    match first.decode(&options) {
        Ok(bytes) => assert_ne!(
            common::sha256(&bytes),
            common::sha256(&entry.decode(&options).unwrap())
        ),
        Err(err) => {
            assert!(matches!(
                err.kind(),
                ErrorKind::Decompress | ErrorKind::SizeMismatch | ErrorKind::Truncated
            ));
            assert!(
                err.offset() >= e.stream_at && err.offset() <= e.stream_at + e.stream.len() as u64
            );
        }
    }
}

/// The sha256 of every image cuobjdump extracted from `file` (tests/data/nvfatbin/MANIFEST).
fn common_manifest(file: &str) -> Vec<String> {
    std::fs::read_to_string(common::root().join("tests/data/nvfatbin/MANIFEST"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[0] == file).then(|| f[3].to_string())
        })
        .collect()
}

static HOOK_CALLS_2: AtomicUsize = AtomicUsize::new(0);

/// [`counting_hook`] with a counter of its own (tests run in parallel).
fn counting_hook_2(
    codec: Codec,
    stream: &[u8],
    size: u64,
    options: &ReadOptions,
) -> Option<offload_image::Result<Vec<u8>>> {
    HOOK_CALLS_2.fetch_add(1, Ordering::SeqCst);
    Some(offload_image::decompress::decode(codec, stream, 0, size, 0, options).map(|(v, _)| v))
}

#[test]
fn the_callers_decoder_inflates_compressed_offload_binaries_too() {
    // A version 3 OffloadBinary of a real code object, compressed with zlib and with zstd.
    let code_object = images_of(
        &common::read_corpus("bundles/hip_6arch.bundle"),
        &ReadOptions::default(),
    )
    .into_iter()
    .find(|(id, _)| id.ends_with("gfx906"))
    .unwrap()
    .1;
    let plain = common::craft::offload_binary_for(3, "gfx906", &code_object);
    let hooked = ReadOptions {
        decoders: offload_image::ccob::Decoders {
            raw: Some(counting_hook_2),
            ..Default::default()
        },
        ..ReadOptions::default()
    };
    for method in [0u16, 1] {
        let packed = common::craft::compress_offload_binary(&plain, method);
        let before = HOOK_CALLS_2.load(Ordering::SeqCst);
        let unit = units(&packed, &hooked).next().unwrap().unwrap();
        let open = unit.open(&hooked).unwrap();
        let images: Vec<Vec<u8>> = open.images().map(|i| i.bytes.to_vec()).collect();
        assert!(
            HOOK_CALLS_2.load(Ordering::SeqCst) > before,
            "method {method}"
        );
        assert_eq!(images, vec![code_object.clone()]);
    }
}
