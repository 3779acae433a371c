//! `loader-sim offload-packager --llvm 23` (and the drop-in run as `llvm-offload-binary-23`):
//! LLVM 23's `llvm-offload-binary` writes every image of every `--image` into one version-2
//! OffloadBinary (llvm/llvm-project PR #197456). No LLVM 23 can be installed here, so:
//!
//! * the layout is checked against bytes built by hand in this file after LLVM 23's
//!   `OffloadBinary::write` (`llvm/lib/Object/OffloadBinary.cpp`, version 2: header 32
//!   bytes, entries, string records per entry, one `StringTableBuilder::ELF` table, padding
//!   to 8, images back to back, padding to 8) and `bundleImages` in
//!   `llvm/tools/llvm-offload-binary/llvm-offload-binary.cpp` at commit
//!   06390ab61433e066c876df6ef69229c2ba484d01 (one `OffloadBinary::write(AllImages)`);
//! * what LLVM 23 shares with LLVM 22 (the `--image` parsing, the `DenseMap` order of the
//!   string records, image and offload kinds) is taken from LLVM 22's own output: the
//!   version-1 binaries `clang-offload-packager-22` writes for the same command line give
//!   each entry's fields and strings in stored order, and the expected version-2 binary is
//!   assembled from them by this file's own string-table builder;
//! * our reader gives every entry back; LLVM 22 refuses the version-2 output (it reads
//!   version 1 only).

use crate::common;

use common::*;
use offload_image::offload_binary::{OffloadBinaries, OffloadBinary};
use offload_image::Limits;
use std::path::Path;

/// One entry as LLVM writes it: kinds, flags, strings in stored order, image.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    image_kind: u16,
    offload_kind: u16,
    flags: u32,
    strings: Vec<(Vec<u8>, Vec<u8>)>,
    image: Vec<u8>,
}

/// `StringTableBuilder(ELF)` after `finalize` (`llvm/lib/MC/StringTableBuilder.cpp`): a
/// leading NUL, the distinct strings sorted by their reversed bytes, largest first (a
/// string that ends another sorts after it), each merged into the tail of the one before
/// when it ends it; the empty string is offset 0 (`finalizeStringTable` maps it there for
/// ELF). Returns the table and offsets.
fn elf_string_table(strings: &[&[u8]]) -> (Vec<u8>, Vec<(Vec<u8>, usize)>) {
    let mut distinct: Vec<Vec<u8>> = strings.iter().map(|s| s.to_vec()).collect();
    distinct.sort();
    distinct.dedup();
    distinct.sort_by(|a, b| {
        let (ra, rb): (Vec<u8>, Vec<u8>) = (
            a.iter().rev().copied().collect(),
            b.iter().rev().copied().collect(),
        );
        rb.cmp(&ra)
    });
    let mut table = vec![0u8];
    let mut offsets = Vec::new();
    let mut previous: Vec<u8> = Vec::new();
    for s in distinct {
        if s.is_empty() {
            offsets.push((s, 0));
            continue;
        }
        if previous.ends_with(&s) {
            let at = table.len() - s.len() - 1;
            offsets.push((s, at));
            continue;
        }
        offsets.push((s.clone(), table.len()));
        table.extend_from_slice(&s);
        table.push(0);
        previous = s;
    }
    (table, offsets)
}

/// LLVM 23's `OffloadBinary::write(AllImages)`, written out from its source.
fn llvm23_write(entries: &[Entry]) -> Vec<u8> {
    let all: Vec<&[u8]> = entries
        .iter()
        .flat_map(|e| e.strings.iter().flat_map(|(k, v)| [&k[..], &v[..]]))
        .collect();
    let (table, offsets) = elf_string_table(&all);
    let offset = |s: &[u8]| offsets.iter().find(|(t, _)| t == s).unwrap().1 as u64;
    let n = entries.len() as u64;
    let records: u64 = entries.iter().map(|e| e.strings.len() as u64).sum();
    let strtab_at = 32 + 40 * n + 24 * records;
    let data_at = (strtab_at + table.len() as u64).div_ceil(8) * 8;
    let images: u64 = entries.iter().map(|e| e.image.len() as u64).sum();
    let size = (data_at + images).div_ceil(8) * 8;
    let mut out = vec![0x10, 0xFF, 0x10, 0xAD];
    out.extend_from_slice(&2u32.to_le_bytes());
    for v in [size, 32, n] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let (mut string_at, mut image_at) = (32 + 40 * n, data_at);
    for e in entries {
        out.extend_from_slice(&e.image_kind.to_le_bytes());
        out.extend_from_slice(&e.offload_kind.to_le_bytes());
        out.extend_from_slice(&e.flags.to_le_bytes());
        for v in [
            string_at,
            e.strings.len() as u64,
            image_at,
            e.image.len() as u64,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        string_at += 24 * e.strings.len() as u64;
        image_at += e.image.len() as u64;
    }
    for e in entries {
        for (k, v) in &e.strings {
            for x in [strtab_at + offset(k), strtab_at + offset(v), v.len() as u64] {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
    }
    out.extend_from_slice(&table);
    out.resize(data_at as usize, 0);
    for e in entries {
        out.extend_from_slice(&e.image);
    }
    out.resize(size as usize, 0);
    out
}

/// Every entry of the OffloadBinaries in `data`, in order.
fn entries_of(data: &[u8]) -> Vec<Entry> {
    let seq = OffloadBinaries::parse(data, &Limits::default()).unwrap();
    let mut out = Vec::new();
    for (_, b) in seq.iter() {
        for e in b.entries() {
            out.push(Entry {
                image_kind: e.image_kind,
                offload_kind: e.offload_kind,
                flags: e.flags,
                strings: e
                    .strings
                    .iter()
                    .map(|(k, v)| (k.as_bytes().to_vec(), v.to_vec()))
                    .collect(),
                image: e.image.to_vec(),
            });
        }
    }
    out
}

fn run_packager(dir: &Path, prog: &Path, args: &[String]) -> Vec<u8> {
    let r = run_in(dir, prog, args);
    assert!(r.status.success(), "{args:?}: {}", describe(&r));
    std::fs::read(dir.join("out.bin")).unwrap()
}

#[test]
fn two_images_in_one_version_2_binary() {
    let dir = TempDir::new("pk23");
    dir.write("x.o", b"AAAAA");
    dir.write("y.o", b"BBB");
    let args: Vec<String> = [
        "--llvm",
        "23",
        "-o",
        "out.bin",
        "--image=file=x.o,triple=amdgcn-amd-amdhsa,arch=gfx906,kind=hip",
        "--image=file=y.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip",
    ]
    .map(String::from)
    .to_vec();
    let mut all = vec!["offload-packager".to_string()];
    all.extend(args.iter().cloned());
    let written = run_packager(&dir.0, &ours(), &all);

    // Worked out by hand: header, entries at 32 and 72, records from 112 (each image's
    // `DenseMap` order for these keys is arch, triple, as LLVM 22 stores it), the string
    // table at 208 (`\0arch\0triple\0amdgcn-amd-amdhsa\0gfx90a\0gfx906\0`, 45 bytes),
    // padding to 256, the images at 256 and 261, size 264.
    let mut b = vec![0x10, 0xFF, 0x10, 0xAD, 2, 0, 0, 0];
    let mut put = |vals: &[u64]| {
        for v in vals {
            b.extend_from_slice(&v.to_le_bytes());
        }
    };
    put(&[264, 32, 2]);
    let kinds = 1u64 | (4 << 16); // IMG_Object, OFK_HIP, no flags
    put(&[kinds, 112, 2, 256, 5]);
    put(&[kinds, 160, 2, 261, 3]);
    put(&[209, 246, 6, 214, 221, 17]); // arch = gfx906, triple = amdgcn-amd-amdhsa
    put(&[209, 239, 6, 214, 221, 17]); // arch = gfx90a, triple
    b.extend_from_slice(b"\0arch\0triple\0amdgcn-amd-amdhsa\0gfx90a\0gfx906\0\0\0\0");
    b.extend_from_slice(b"AAAAABBB");
    assert_eq!(written, b);

    // The same from the program name; the option wins over the name.
    let link = dir.path("llvm-offload-binary-23");
    std::os::unix::fs::symlink(ours(), &link).unwrap();
    std::fs::remove_file(dir.path("out.bin")).unwrap();
    assert_eq!(run_packager(&dir.0, &link, &args[2..]), b);
    let mut as22 = vec!["--llvm=22".to_string()];
    as22.extend(args[2..].iter().cloned());
    let v1 = run_packager(&dir.0, &link, &as22);
    let seq = OffloadBinaries::parse(&v1, &Limits::default()).unwrap();
    assert_eq!(seq.count(), 2);
    assert!(seq.iter().all(|(_, b)| b.version() == 1));
    // Without the option and under another name: LLVM 22's layout, as before.
    let plain = run_packager(&dir.0, &ours(), &{
        let mut a = vec!["offload-packager".to_string()];
        a.extend(args[2..].iter().cloned());
        a
    });
    assert_eq!(plain, v1);
    assert_eq!(entries_of(&plain), entries_of(&written));
}

#[test]
fn no_images_and_bad_releases() {
    let dir = TempDir::new("pk23e");
    let args: Vec<String> = ["offload-packager", "--llvm", "23", "-o", "out.bin"]
        .map(String::from)
        .to_vec();
    let out = run_packager(&dir.0, &ours(), &args);
    assert_eq!(out.len(), 40);
    let b = OffloadBinary::parse(&out, &Limits::default()).unwrap();
    assert_eq!((b.version(), b.entry_count(), b.len()), (2, 0, 40));
    let r = run_in(
        &dir.0,
        &ours(),
        &["offload-packager", "--llvm=21", "-o", "o2.bin"].map(String::from),
    );
    assert_eq!(r.status.code(), Some(1), "{}", describe(&r));
    assert!(String::from_utf8_lossy(&r.stderr).contains("22 or 23"));
    assert!(!dir.path("o2.bin").exists());
}

/// One random `--image=` argument and its files (a subset of what
/// `packager_differential` generates: extra and repeated keys, two files, every kind).
fn image_arg(rng: &mut Rng, dir: &TempDir, tag: &str) -> String {
    const EXTS: &[&str] = &["o", "bc", "cubin", "fatbin", "s", "co", ""];
    const KEYS: &[&str] = &["feature", "zzz", "aaa", "producer", "k1", "arch"];
    let mut parts = Vec::new();
    for f in 0..rng.range(1, 2) {
        let ext = rng.pick(EXTS);
        let name = format!("{tag}-f{f}.{ext}");
        let n = rng.range(0, 300);
        dir.write(&name, &rng.bytes(n));
        parts.push(format!("file={name}"));
    }
    parts.push(format!(
        "triple={}",
        rng.pick(&["amdgcn-amd-amdhsa", "nvptx64-nvidia-cuda"])
    ));
    parts.push(format!(
        "arch={}",
        rng.pick(&["gfx906", "gfx90a:xnack+", "sm_80", "generic", ""])
    ));
    parts.push(format!(
        "kind={}",
        rng.pick(&["openmp", "cuda", "hip", "sycl", "none"])
    ));
    for _ in 0..rng.below(4) {
        let v: String = (0..rng.range(0, 8))
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect();
        parts.push(format!("{}={v}", rng.pick(KEYS)));
    }
    rng.shuffle(&mut parts);
    format!("--image={}", parts.join(","))
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-packager-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn matrix_against_llvm_22s_fields() {
    if !external("clang-offload-packager-22") {
        return;
    }
    let llvm22 = llvm("clang-offload-packager-22");
    let mut rng = Rng::new(0x0002_30ff_10ad);
    for case in 0..40 {
        let dir = TempDir::new(&format!("pk23m{case}"));
        let images: Vec<String> = (0..rng.range(1, 5))
            .map(|i| image_arg(&mut rng, &dir, &format!("i{i}")))
            .collect();
        let mut args = vec!["-o".to_string(), "out.bin".to_string()];
        args.extend(images.iter().cloned());
        let v1 = run_packager(&dir.0, &llvm22, &args);
        let fields = entries_of(&v1);
        std::fs::remove_file(dir.path("out.bin")).unwrap();
        let mut ours_args = vec![
            "offload-packager".to_string(),
            "--llvm".to_string(),
            "23".to_string(),
        ];
        ours_args.extend(args.iter().cloned());
        let v2 = run_packager(&dir.0, &ours(), &ours_args);
        assert_eq!(v2, llvm23_write(&fields), "case {case}: {images:?}");
        assert_eq!(entries_of(&v2), fields, "case {case}");
        // LLVM 22 (22.1.8) does not read version 2 (its `OffloadBinary::Version` is 1):
        // LLVM 23's output is refused as malformed.
        if case < 3 {
            let r = run_in(
                &dir.0,
                &llvm22,
                &["out.bin".to_string(), "--image=arch=x".to_string()],
            );
            assert!(!r.status.success(), "case {case}: LLVM 22 read version 2");
            assert!(
                String::from_utf8_lossy(&r.stderr).contains("Invalid data was encountered"),
                "{}",
                describe(&r)
            );
        }
    }
}

/// The extraction checks of `llvm-offload-binary.ll` (commit 033952c2…) and LLVM 23's
/// `unbundleImages` (commit 06390ab6…): without `--image`, every image is extracted,
/// nested binaries opened in place, numbering on across levels, each announced as
/// `Extracted: <name>`; a filter without `file=` does the same for its matches; a
/// malformed outer or inner binary fails.
#[test]
fn extracting_everything_opens_nested_binaries() {
    let dir = TempDir::new("pk23x");
    let tool = dir.path("llvm-offload-binary-23");
    std::os::unix::fs::symlink(ours(), &tool).unwrap();
    dir.write("src.ll", b"; the test's own source\n");
    dir.write("bad-offload.input", &[0x10, 0xFF, 0x10, 0xAD, 0x0A]);
    let pack = |out: &str, images: &[&str]| {
        let mut args = vec!["-o".to_string(), out.to_string()];
        args.extend(images.iter().map(|i| format!("--image={i}")));
        let r = run_in(&dir.0, &tool, &args);
        assert!(r.status.success(), "{args:?}: {}", describe(&r));
    };
    let extract = |input: &str| run_in(&dir.0, &tool, &[input.to_string()]);
    let extracted = |input: &str| {
        let r = extract(input);
        assert!(r.status.success(), "{input}: {}", describe(&r));
        String::from_utf8(r.stdout).unwrap()
    };
    pack("t.bin", &["file=src.ll,arch=abc,triple=x-y-z"]);
    assert_eq!(extracted("t.bin"), "Extracted: t-x-y-z-abc.0.\n");
    assert_eq!(
        std::fs::read(dir.path("t-x-y-z-abc.0.")).unwrap(),
        std::fs::read(dir.path("src.ll")).unwrap()
    );
    pack(
        "t5.bin",
        &[
            "file=src.ll,arch=abc,triple=x-y-z",
            "file=src.ll,arch=def,triple=x-y-z",
        ],
    );
    pack("t6.bin", &["file=t5.bin,arch=nested,triple=x-y-z"]);
    assert_eq!(
        extracted("t6.bin"),
        "Extracted: t6-x-y-z-abc.0.\nExtracted: t6-x-y-z-def.1.\n"
    );
    pack(
        "t7.bin",
        &[
            "file=t5.bin,arch=nested,triple=x-y-z",
            "file=src.ll,arch=ghi,triple=x-y-z",
        ],
    );
    assert_eq!(
        extracted("t7.bin"),
        "Extracted: t7-x-y-z-abc.0.\nExtracted: t7-x-y-z-def.1.\nExtracted: t7-x-y-z-ghi.2.\n"
    );
    // An empty arch leaves `-<arch>` out of the name.
    pack("e.bin", &["file=src.ll,triple=x-y-z"]);
    assert_eq!(extracted("e.bin"), "Extracted: e-x-y-z.0.\n");
    // A filter without `file=` opens the nesting image it matches, numbering from 0 per
    // `--image`.
    let r = run_in(
        &dir.0,
        &tool,
        &["t7.bin", "--image=arch=nested", "--image=arch=ghi"].map(String::from),
    );
    assert!(r.status.success(), "{}", describe(&r));
    assert_eq!(
        String::from_utf8(r.stdout).unwrap(),
        "Extracted: t7-x-y-z-abc.0.\nExtracted: t7-x-y-z-def.1.\nExtracted: t7-x-y-z-ghi.0.\n"
    );
    // With a filter naming `file=`, the nesting image itself is written (as in LLVM 22).
    let r = run_in(
        &dir.0,
        &tool,
        &["t7.bin", "--image=file=t8.bin,arch=nested,triple=x-y-z"].map(String::from),
    );
    assert!(r.status.success(), "{}", describe(&r));
    assert_eq!(
        std::fs::read(dir.path("t8.bin")).unwrap(),
        std::fs::read(dir.path("t5.bin")).unwrap()
    );
    // Malformed outer and inner binaries.
    for input in ["bad-offload.input", "t9.bin"] {
        if input == "t9.bin" {
            pack(
                "t9.bin",
                &["file=bad-offload.input,arch=nested,triple=x-y-z"],
            );
        }
        let r = extract(input);
        assert_eq!(r.status.code(), Some(1), "{input}: {}", describe(&r));
        assert!(
            String::from_utf8_lossy(&r.stderr)
                .contains("error: Invalid data was encountered while parsing the file"),
            "{input}: {}",
            describe(&r)
        );
    }
    // LLVM 22's extraction (the default) writes nothing without `--image`.
    let before = std::fs::read_dir(&dir.0).unwrap().count();
    let r = run_ours(&dir.0, "offload-packager", &["t7.bin".to_string()]);
    assert!(
        r.status.success() && r.stdout.is_empty(),
        "{}",
        describe(&r)
    );
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), before);
}
