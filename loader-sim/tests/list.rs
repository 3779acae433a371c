//! `loader-sim list` against the corpus, the malformed files and a real ROCm library.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::{corpus, external_lib, json_lines, llvm as tool, loader_sim, manifest, sha256};

const FIELDS: [&str; 13] = [
    "container",
    "bundle_index",
    "format",
    "compression",
    "ccob_version",
    "entry_id",
    "offload_kind",
    "triple",
    "target_id",
    "image_kind",
    "offset",
    "size",
    "sha256",
];

#[test]
fn json_records_match_the_manifest() {
    let all = manifest();
    let mut files = 0;
    for f in all
        .iter()
        .filter(|r| r["record"] == "file" && r["malformed"] != true)
    {
        let name = f["file"].as_str().unwrap();
        let fmt = f["format"].as_str().unwrap();
        let path = corpus(name);
        let out = loader_sim(&["list", path.to_str().unwrap(), "--json"]);
        let expect_images: Vec<&Value> = all
            .iter()
            .filter(|r| r["file"] == name && (r["record"] == "entry" || r["record"] == "image"))
            .collect();
        match fmt {
            "clang-offload-bundle" | "clang-offload-bundle-text" | "ccob" | "offload-binary" => {
                assert!(
                    out.status.success(),
                    "{name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let recs = json_lines(&out.stdout);
                for r in &recs {
                    let keys: Vec<&str> =
                        r.as_object().unwrap().keys().map(|k| k.as_str()).collect();
                    for field in FIELDS {
                        assert!(
                            keys.contains(&field),
                            "{name}: field {field} missing in {r}"
                        );
                    }
                }
                let got: BTreeSet<(u64, String)> = recs
                    .iter()
                    .map(|r| {
                        (
                            r["size"].as_u64().unwrap(),
                            r["sha256"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect();
                let want: BTreeSet<(u64, String)> = expect_images
                    .iter()
                    .map(|r| {
                        (
                            r["size"].as_u64().unwrap(),
                            r["sha256"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect();
                assert_eq!(got, want, "{name}");
                assert_eq!(recs.len(), expect_images.len(), "{name}");
                files += 1;
            }
            "ptx" | "llvm-bitcode" | "text" | "nvidia-fatbin" => {
                // Not offload containers: refused, exit 2, one line.
                assert_eq!(out.status.code(), Some(2), "{name}");
                let err = String::from_utf8(out.stderr).unwrap();
                assert_eq!(err.lines().count(), 1, "{name}: {err}");
                assert!(err.contains("at byte 0"), "{name}: {err}");
            }
            _ => {
                assert!(
                    out.status.success(),
                    "{name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
    assert!(files >= 25, "{files}");
}

#[test]
fn malformed_files_exit_2_with_one_line_naming_problem_and_offset() {
    let mut n = 0;
    for entry in std::fs::read_dir(corpus("malformed")).unwrap() {
        let path = entry.unwrap().path();
        let out = loader_sim(&["list", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", path.display());
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        let line = err.trim_end();
        assert!(
            line.starts_with(&format!("loader-sim: error: {}: ", path.display())),
            "{line}"
        );
        let (_, offset) = line
            .rsplit_once(", at byte ")
            .expect("names the byte offset");
        offset.parse::<u64>().expect("offset is a number");
        assert!(!line.contains("panicked") && !line.contains("RUST_BACKTRACE"));
        n += 1;
    }
    assert_eq!(n, 12);
}

#[test]
fn table_output_is_aligned_and_complete() {
    let path = corpus("bundles/hip_6arch.bundle");
    let out = loader_sim(&["list", path.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "header + 7 entries");
    let col = lines[0].find("SIZE").unwrap();
    for l in &lines[1..] {
        assert!(l.len() > col, "{l}");
    }
    assert!(lines[2].contains("hipv4-amdgcn-amd-amdhsa--gfx906"));
}

/// `librocrand1`: 8 images, identical to what clang-offload-bundler-22 extracts from its
/// `.hip_fatbin` section.
#[test]
fn rocrand_lists_what_clang_offload_bundler_extracts() {
    let lib = external_lib("librocrand.so.1");
    let out = loader_sim(&["list", lib.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = json_lines(&out.stdout);
    assert_eq!(recs.len(), 8);

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rocrand");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fatbin = dir.join("hip_fatbin.bin");
    let st = Command::new(tool("llvm-objcopy-22"))
        .arg(format!("--dump-section=.hip_fatbin={}", fatbin.display()))
        .arg(&lib)
        .arg(dir.join("discard.so"))
        .status()
        .unwrap();
    assert!(st.success());
    let bundler = tool("clang-offload-bundler-22");
    let listed = Command::new(&bundler)
        .args(["-list", "-type=o"])
        .arg(format!("-input={}", fatbin.display()))
        .output()
        .unwrap();
    assert!(listed.status.success());
    let ids: BTreeSet<String> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let ours: BTreeSet<String> = recs
        .iter()
        .map(|r| r["entry_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ours, ids, "same entry IDs as clang-offload-bundler -list");

    // LLVM 22 lists this bundle but cannot unbundle most of it: its host ID
    // `host-x86_64-unknown-linux` (3-field triple, old HIP driver) makes every request that
    // visits the host entry first (hash order) fail with "invalid bundle id read from the
    // bundle". Give LLVM 22 a copy whose host ID has a valid spelling of the same length;
    // the device entries and their offsets are untouched. LLVM 19 reads the original.
    let mut patched = std::fs::read(&fatbin).unwrap();
    let old = b"host-x86_64-unknown-linux";
    let new = b"host-x86_64-pc-linux-gnu-";
    assert_eq!(old.len(), new.len());
    let at = patched
        .windows(old.len())
        .position(|w| w == old)
        .expect("host ID in the header");
    assert!(at < 4096, "the host ID is in the bundle header");
    patched[at..at + old.len()].copy_from_slice(new);
    let patched_path = dir.join("hip_fatbin.llvm22.bin");
    std::fs::write(&patched_path, &patched).unwrap();

    let mut extracted = 0;
    for r in &recs {
        let id = r["entry_id"].as_str().unwrap();
        if id.starts_with("host-") {
            // The old HIP driver's host ID `host-x86_64-unknown-linux` (3-field triple) is
            // listed by LLVM 22 but cannot be requested back ("invalid bundle id"); the host
            // entry of a HIP fat binary is empty.
            assert_eq!(r["size"].as_u64(), Some(0), "{id}");
            continue;
        }
        let target = id;
        let outfile = dir.join(format!("{}.out", sha256(id.as_bytes())));
        let unbundle = |tool: &Path, input: &Path| {
            let st = Command::new(tool)
                .args(["-unbundle", "-type=o"])
                .arg(format!("-targets={target}"))
                .arg(format!("-input={}", input.display()))
                .arg(format!("-output={}", outfile.display()))
                .status()
                .unwrap();
            assert!(st.success(), "{} {id}", tool.display());
            std::fs::read(&outfile).unwrap()
        };
        let bytes = unbundle(&bundler, &patched_path);
        assert_eq!(
            bytes,
            unbundle(&tool("clang-offload-bundler-19"), &fatbin),
            "{id}: LLVM 19 and 22 agree"
        );
        assert_eq!(r["sha256"].as_str().unwrap(), sha256(&bytes), "{id}");
        assert_eq!(r["size"].as_u64().unwrap(), bytes.len() as u64, "{id}");
        // In place: the bytes at the reported file offset are the image.
        let file = std::fs::read(&lib).unwrap();
        let off = r["offset"].as_u64().unwrap() as usize;
        assert_eq!(&file[off..off + bytes.len()], &bytes[..], "{id}: offset");
        extracted += 1;
    }
    assert_eq!(extracted, 7, "7 device images compared byte for byte");
}
