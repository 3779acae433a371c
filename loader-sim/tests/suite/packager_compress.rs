//! `loader-sim offload-packager --compress` (LLVM 24's `llvm-offload-binary --compress`,
//! llvm/llvm-project#227765): the `RUN:` lines of LLVM's own `compress.test` and
//! `compress-level-zlib.test` (`tests/data/llvm/offload-binary/`, copied unchanged) run
//! against the drop-in as lit runs them, `%s` being the test file and `%t` a temporary
//! path: packaging with zstd (default and level -5) and zlib (level 9), extraction back to
//! the very bytes of the test file (`diff`), a compressed binary followed by an
//! uncompressed one (`cat`), and the refusal of zlib level 12 with LLVM's message.
//! `llvm-objdump --offloading` is answered by the crate's reader (LLVM 22's objdump cannot
//! read version 3), printed in objdump's layout for the `FileCheck` lines. Then every
//! command of loader-sim reads the compressed output, and, with the C libzstd and zlib
//! LLVM uses, the compressed binary inflates to the uncompressed version-3 binary of the
//! same images, whose images and strings are those of the binary LLVM 22's
//! `clang-offload-packager` writes for the same command line.

use crate::common;

use common::*;
use offload_image::offload_binary::{OffloadBinaries, OffloadBinary};
use offload_image::{units, Limits, ReadOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

fn test_file(name: &str) -> PathBuf {
    repo().join("tests/data/llvm/offload-binary").join(name)
}

/// What `llvm-objdump --offloading FILE` prints for the binaries in `data` (every entry of
/// every binary, compressed ones inflated), in its layout.
fn objdump_offloading(data: &[u8]) -> String {
    let options = ReadOptions::default();
    let mut out = String::new();
    let mut index = 0;
    for unit in units(data, &options) {
        for image in unit.unwrap().open(&options).unwrap().images() {
            let kind = match image.image_kind.name() {
                "none" => "<none>",
                "elf" => "o",
                "ptx" => "s",
                "spirv" => "spv",
                other => other,
            };
            let producer = match image.offload_kind.name() {
                "" => "none",
                other => other,
            };
            out.push_str(&format!(
                "OFFLOADING IMAGE [{index}]:\nkind            {kind}\narch            {}\ntriple          {}\nproducer        {producer}\n",
                image.target_id.unwrap_or(""),
                image.triple.unwrap_or("")
            ));
            index += 1;
        }
    }
    out
}

/// FileCheck on `output` with the directives of `check_file` for `prefixes`: `P:` finds
/// its text at or after the current line, `P-NEXT:` on the next line; runs of horizontal
/// whitespace match each other, as FileCheck canonicalises them.
fn file_check(output: &str, check_file: &Path, prefixes: &[&str]) {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let lines: Vec<String> = output.lines().map(squash).collect();
    let text = std::fs::read_to_string(check_file).unwrap();
    let mut at: Option<usize> = None;
    let mut checked = 0;
    for line in text.lines() {
        let body = line.trim_start_matches('#').trim_start();
        for p in prefixes {
            let (next, pattern) = if let Some(r) = body.strip_prefix(&format!("{p}-NEXT:")) {
                (true, r)
            } else if let Some(r) = body.strip_prefix(&format!("{p}:")) {
                (false, r)
            } else {
                continue;
            };
            let pattern = squash(pattern);
            let found = if next {
                let n = at.map_or(0, |a| a + 1);
                lines.get(n).filter(|l| l.contains(&pattern)).map(|_| n)
            } else {
                let from = at.map_or(0, |a| a + 1);
                (from..lines.len()).find(|&i| lines[i].contains(&pattern))
            };
            assert!(
                found.is_some(),
                "{}: {p}: '{pattern}' not found after line {at:?} in:\n{output}",
                check_file.display()
            );
            at = found;
            checked += 1;
        }
    }
    assert!(
        checked > 0,
        "no {prefixes:?} directive in {}",
        check_file.display()
    );
}

/// Runs the `RUN:` lines of `name` in `dir`.
fn run_lit(name: &str, dir: &TempDir) -> usize {
    let source = test_file(name);
    let text = std::fs::read_to_string(&source).unwrap();
    let t = dir.path("t");
    let mut ran = 0;
    for line in text.lines() {
        let Some(cmd) = line.trim_start_matches('#').trim().strip_prefix("RUN:") else {
            continue;
        };
        let cmd = cmd
            .replace("%s", source.to_str().unwrap())
            .replace("%t", t.to_str().unwrap());
        let (cmd, check) = match cmd.split_once(" | FileCheck ") {
            Some((c, f)) => (c.trim().to_string(), Some(f.trim().to_string())),
            None => (cmd.trim().to_string(), None),
        };
        let (expect_failure, cmd) = match cmd.strip_prefix("not ") {
            Some(c) => (true, c.to_string()),
            None => (false, cmd),
        };
        let (cmd, merge_stderr) = match cmd.strip_suffix(" 2>&1") {
            Some(c) => (c.to_string(), true),
            None => (cmd, false),
        };
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let output = match words[0] {
            "llvm-offload-binary" => {
                let out = Command::new(ours())
                    .arg("offload-packager")
                    .args(&words[1..])
                    .current_dir(&dir.0)
                    .output()
                    .unwrap();
                assert_eq!(
                    !out.status.success(),
                    expect_failure,
                    "{cmd}: {}",
                    describe(&out)
                );
                let mut o = String::from_utf8_lossy(&out.stdout).into_owned();
                if merge_stderr {
                    o.push_str(&String::from_utf8_lossy(&out.stderr));
                }
                o
            }
            "llvm-objdump" => {
                assert_eq!(words[1], "--offloading");
                objdump_offloading(&std::fs::read(words[2]).unwrap())
            }
            "diff" => {
                assert_eq!(
                    std::fs::read(words[1]).unwrap(),
                    std::fs::read(words[2]).unwrap(),
                    "{cmd}"
                );
                String::new()
            }
            "cat" => {
                let (inputs, output) = cmd.split_once(" > ").unwrap();
                let mut all = Vec::new();
                for f in inputs.split_whitespace().skip(1) {
                    all.extend(std::fs::read(f).unwrap());
                }
                std::fs::write(output.trim(), all).unwrap();
                String::new()
            }
            other => panic!("{name}: no runner for '{other}'"),
        };
        if let Some(check) = check {
            let mut words = check.split_whitespace();
            let file = PathBuf::from(words.next().unwrap());
            let prefixes: Vec<&str> = match words.next() {
                Some(p) => p
                    .strip_prefix("--check-prefixes=")
                    .unwrap()
                    .split(',')
                    .collect(),
                None => vec!["CHECK"],
            };
            file_check(&output, &file, &prefixes);
        }
        ran += 1;
    }
    ran
}

#[test]
fn llvm_compress_tests_pass_against_the_drop_in() {
    let dir = TempDir::new("pkcompress");
    assert_eq!(run_lit("compress.test", &dir), 10);
    // The binaries lit made: version 3, compressed with zstd (default level and -5).
    for f in ["t", "t.neg"] {
        let data = std::fs::read(dir.path(f)).unwrap();
        let b = OffloadBinary::parse(&data, &Limits::default()).unwrap();
        assert_eq!((b.version(), b.is_compressed()), (3, true), "{f}");
        assert!(data[40..].starts_with(&[0x28, 0xB5, 0x2F, 0xFD]), "{f}");
    }
    let dir = TempDir::new("pkcompresszlib");
    assert_eq!(run_lit("compress-level-zlib.test", &dir), 4);
    let data = std::fs::read(dir.path("t")).unwrap();
    // zlib level 9: the stream's header is 78 DA.
    assert_eq!(&data[40..42], &[0x78, 0xDA]);
    assert!(!dir.path("t.bad").exists());
}

/// Every command reads the compressed binary: list, validate, select.
#[test]
fn every_command_reads_a_compressed_binary() {
    let dir = TempDir::new("pkcompresscmds");
    let co = repo().join("tests/data/corpus/devobj/saxpy.gfx906.co");
    let out = Command::new(ours())
        .args([
            "offload-packager",
            "-o",
            "c.bin",
            "--compress",
            "--compression-format=zlib",
        ])
        .arg(format!(
            "--image=file={},triple=amdgcn-amd-amdhsa,arch=gfx906,kind=hip",
            co.display()
        ))
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let file = dir.path("c.bin");
    let list = Command::new(ours())
        .args(["list", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(list.status.success(), "{}", describe(&list));
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("gfx906"), "{text}");
    assert!(
        text.contains(&sha256(&std::fs::read(&co).unwrap())),
        "{text}"
    );
    let validate = Command::new(ours())
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    assert!(validate.status.success(), "{}", describe(&validate));
}

/// With the C libraries LLVM links (zstd 1.5.7 bundled or the system's with `system-zstd`,
/// zlib): the compressed binary inflates to the uncompressed version-3 binary of the same
/// images, whose entries are those of LLVM 22's output for the same command line.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-packager-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn compressed_output_inflates_to_what_llvm_22_packages() {
    if !external("clang-offload-packager-22") {
        return;
    }
    let dir = TempDir::new("pkcompress22");
    std::fs::write(dir.path("a.o"), vec![0xA5; 5000]).unwrap();
    std::fs::write(dir.path("b.cubin"), b"cubin bytes".repeat(300)).unwrap();
    let images = [
        "--image=file=a.o,triple=amdgcn-amd-amdhsa,arch=gfx942,kind=hip",
        "--image=file=b.cubin,triple=nvptx64-nvidia-cuda,arch=sm_90,kind=cuda,feature=+ptx85",
    ];
    let llvm = Command::new("clang-offload-packager-22")
        .args(["-o", "llvm22.bin"])
        .args(images)
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(llvm.status.success(), "{}", describe(&llvm));
    let v1 = std::fs::read(dir.path("llvm22.bin")).unwrap();
    let llvm_entries: Vec<_> = OffloadBinaries::parse(&v1, &Limits::default())
        .unwrap()
        .iter()
        .flat_map(|(_, b)| b.entries().map(entry_fields).collect::<Vec<_>>())
        .collect();
    for format in ["zstd", "zlib"] {
        let out = Command::new(ours())
            .args(["offload-packager", "-o", "c.bin", "--compress"])
            .arg(format!("--compression-format={format}"))
            .args(images)
            .current_dir(&dir.0)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        let c = std::fs::read(dir.path("c.bin")).unwrap();
        let b = OffloadBinary::parse(&c, &Limits::default()).unwrap();
        let inflated = b.inflate(&ReadOptions::default()).unwrap();
        let inner = OffloadBinary::parse(&inflated, &Limits::default()).unwrap();
        assert_eq!(inner.version(), 3);
        let ours_entries: Vec<_> = inner.entries().map(entry_fields).collect();
        assert_eq!(ours_entries, llvm_entries, "{format}");
    }
}

type Fields = (u16, u16, Vec<(String, String)>, Vec<u8>);

fn entry_fields(e: offload_image::offload_binary::OffloadBinaryEntry<'_>) -> Fields {
    let mut strings: Vec<(String, String)> = e
        .strings
        .iter()
        .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v).into_owned()))
        .collect();
    strings.sort();
    (e.image_kind, e.offload_kind, strings, e.image.to_vec())
}
