//! `loader-sim list` against the corpus, the malformed files and a real ROCm library.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common;
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
                let mut recs = json_lines(&out.stdout);
                // The entries of a fatbinary an OffloadBinary wraps are checked below
                // (`nvidia-fatbin`) and in nvfatbin_records_match_cuobjdump.
                recs.retain(|r| r["format"] != "nvidia-fatbin");
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
            "nvidia-fatbin" => {
                assert!(out.status.success(), "{name}");
                let recs = json_lines(&out.stdout);
                let file = Path::new(name).file_name().unwrap().to_str().unwrap();
                assert_eq!(fatbin_view(&recs), cuobjdump_manifest(file), "{name}");
                files += 1;
            }
            "ptx" | "llvm-bitcode" | "text" => {
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
#[cfg_attr(
    not(external_tests),
    ignore = "needs librocrand.so.1 (scripts/fetch-rocm-libs.sh), llvm-objcopy-22 and clang-offload-bundler-22/-19; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn rocrand_lists_what_clang_offload_bundler_extracts() {
    if !common::external("librocrand.so.1 (scripts/fetch-rocm-libs.sh), llvm-objcopy-22 and clang-offload-bundler-22/-19") {
        return;
    }
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

/// What tests/data/nvfatbin/MANIFEST records for `file`: sorted (kind, arch, sha256) of
/// what `cuobjdump -xelf all -xptx all` writes.
fn cuobjdump_manifest(file: &str) -> Vec<(String, String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nvfatbin/MANIFEST");
    let mut v: Vec<_> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0] == file).then(|| (f[1].to_string(), f[2].to_string(), f[3].to_string()))
        })
        .collect();
    v.sort();
    v
}

/// `list --json` records of fatbinary entries in the MANIFEST's terms (cuobjdump names a
/// family cubin by its plain SM).
fn fatbin_view(recs: &[Value]) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = recs
        .iter()
        .map(|r| {
            assert_eq!(r["format"], "nvidia-fatbin", "{r}");
            assert_eq!(r["triple"], "nvptx64-nvidia-cuda", "{r}");
            assert_eq!(r["offload_kind"], "cuda", "{r}");
            let kind = match r["image_kind"].as_str().unwrap() {
                "cubin" => "elf",
                "ptx" => "ptx",
                k => panic!("image kind {k}"),
            };
            let arch = r["target_id"].as_str().unwrap();
            let arch = if kind == "elf" {
                arch.trim_end_matches('f')
            } else {
                arch
            };
            let sha = r["sha256"].as_str().unwrap();
            (kind.to_string(), arch.to_string(), sha.to_string())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn nvfatbin_records_match_cuobjdump() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nvfatbin/files");
    let mut images = 0;
    let mut compressed = BTreeSet::new();
    for file in [
        "mixed.default.fatbin",
        "mixed.speed.all.fatbin",
        "variants.fatbin",
        "host.o",
        "libk.a",
        "libk.so",
        "prog",
        "rdc.o",
    ] {
        let out = loader_sim(&["list", dir.join(file).to_str().unwrap(), "--json"]);
        assert!(out.status.success(), "{file}");
        let recs = json_lines(&out.stdout);
        for r in &recs {
            compressed.insert(r["compression"].as_str().map(str::to_string));
            // Stored entries are slices of the file; decompressed ones have no offset.
            assert_eq!(r["offset"].is_null(), !r["compression"].is_null(), "{r}");
        }
        let got = fatbin_view(&recs);
        assert_eq!(got, cuobjdump_manifest(file), "{file}");
        images += got.len();
    }
    assert_eq!(images, 4 + 4 + 6 + 3 + 5 + 6 + 4 + 1);
    let want: BTreeSet<Option<String>> = [None, Some("lz4".into()), Some("zstd".into())]
        .into_iter()
        .collect();
    assert_eq!(compressed, want);
    // Bad input: one line naming the byte offset, exit 2.
    let bad = dir.join("malformed/entry_size_past_end.fatbin");
    let out = loader_sim(&["list", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("at byte 24"), "{err}");
}

/// `--no-sha256`: the same records in the same order, with `sha256` null (JSON) or `-`
/// (table); nothing else depends on the images' bytes beyond their headers.
#[test]
fn no_sha256_lists_the_same_images_without_hashes() {
    let nv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nvfatbin/files");
    for file in [
        nv.join("libk.so"),
        nv.join("mixed.speed.all.fatbin"),
        corpus("bundles/hip_6arch.bundle"),
        corpus("driver/hip_compress.exe"),
    ] {
        let f = file.to_str().unwrap();
        let full = json_lines(&loader_sim(&["list", f, "--json"]).stdout);
        let out = loader_sim(&["list", f, "--json", "--no-sha256"]);
        assert!(out.status.success(), "{f}");
        let bare = json_lines(&out.stdout);
        assert!(!full.is_empty(), "{f}");
        assert_eq!(bare.len(), full.len(), "{f}");
        for (b, mut h) in bare.into_iter().zip(full) {
            assert!(h["sha256"].is_string(), "{h}");
            assert!(b["sha256"].is_null(), "{b}");
            h["sha256"] = Value::Null;
            assert_eq!(b, h, "{f}");
        }
        let table = String::from_utf8(loader_sim(&["list", f, "--no-sha256"]).stdout).unwrap();
        for line in table.lines().skip(1) {
            assert_eq!(line.split_whitespace().last(), Some("-"), "{f}: {line}");
        }
    }
}

/// A damaged bundle costs its unit only: `list` and `select` report every other bundle
/// of the linked library as before, add a `damaged` record, and exit with status 2.
#[test]
fn a_damaged_bundle_is_reported_and_the_others_listed() {
    let lib = common::repo().join("tests/data/damage/libthree.so");
    let original = std::fs::read(&lib).unwrap();
    let listed = |path: &Path| -> (Option<i32>, Vec<serde_json::Value>, String) {
        let out = loader_sim(&["list", "--json", path.to_str().unwrap()]);
        let recs = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (
            out.status.code(),
            recs,
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, sound, _) = listed(&lib);
    assert_eq!(code, Some(0));
    let offsets: Vec<u64> = sound
        .iter()
        .filter(|r| {
            r["entry_id"]
                .as_str()
                .is_some_and(|i| i.starts_with("host-"))
        })
        .map(|r| {
            // The bundle's header: the last bundle magic before its host entry's payload.
            let payload = r["offset"].as_u64().unwrap() as usize;
            original[..payload]
                .windows(24)
                .rposition(|w| w == b"__CLANG_OFFLOAD_BUNDLE__")
                .unwrap() as u64
        })
        .collect();
    assert_eq!(offsets.len(), 3);
    let mut data = original.clone();
    data[offsets[1] as usize + 2] ^= 0xFF;
    let dir = common::TempDir::new("list-damaged");
    let path = dir.0.join("libthree-damaged.so");
    std::fs::write(&path, &data).unwrap();
    let (code, recs, err) = listed(&path);
    assert_eq!(code, Some(2), "{err}");
    let damaged: Vec<_> = recs.iter().filter(|r| r["note"] == "damaged").collect();
    assert_eq!(damaged.len(), 1, "{recs:?}");
    assert_eq!(damaged[0]["bundle_index"], 1);
    assert_eq!(damaged[0]["offset"].as_u64(), Some(offsets[1]));
    assert_eq!(damaged[0]["error"], "malformed");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("section .hip_fatbin unit 1 is damaged"),
        "{err}"
    );
    let images = |recs: &[serde_json::Value], unit: u64| -> Vec<serde_json::Value> {
        recs.iter()
            .filter(|r| r["note"].is_null() && r["bundle_index"] == unit)
            .cloned()
            .collect()
    };
    for unit in [0, 2] {
        assert_eq!(images(&recs, unit), images(&sound, unit), "unit {unit}");
        assert_eq!(images(&recs, unit).len(), 4);
    }
    // select chooses in the sound units as before, reports the damaged one, exits 2.
    let out = loader_sim(&[
        "select",
        "--json",
        "--target",
        "gfx90a:xnack+",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let recs: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let chosen: Vec<_> = recs
        .iter()
        .filter(|r| r["note"].is_null())
        .map(|r| (r["bundle_index"].as_u64().unwrap(), r["selected"].clone()))
        .collect();
    assert_eq!(chosen.len(), 2, "{recs:?}");
    for (unit, selected) in chosen {
        assert_ne!(unit, 1);
        assert_eq!(selected, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+");
    }
    assert_eq!(recs.iter().filter(|r| r["note"] == "damaged").count(), 1);
}
