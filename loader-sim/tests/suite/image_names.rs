//! Images name themselves in `select`'s records: a cubin and PTX of one architecture as
//! NVIDIA's tools spell them (`sm_86`, `compute_86`), checked against `cuobjdump -lelf
//! -lptx`, which lists a cubin as `NAME.N.sm_86.cubin` and PTX as `NAME.N.sm_86.ptx`.

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_image::Target;
use offload_image::{units, ImageKind, ReadOptions};
use serde_json::Value;

use crate::common::{self, json_lines, loader_sim};

fn nvfatbin(file: &str) -> PathBuf {
    common::repo().join("tests/data/nvfatbin/files").join(file)
}

/// `select --explain --json` of `file` for `target`: (selected, every rejected image's name).
fn select(file: &Path, target: &str) -> (Value, Vec<String>) {
    let file = file.to_str().unwrap();
    let out = loader_sim(&["select", file, "--target", target, "--explain", "--json"]);
    let recs = json_lines(&out.stdout);
    assert_eq!(recs.len(), 1, "{recs:?}");
    let rejected = recs[0]["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["image"].as_str().unwrap().to_string())
        .collect();
    (recs[0]["selected"].clone(), rejected)
}

/// device_c.fatbin holds one cubin and one PTX, both of SM 8.6 (tests/data/nvfatbin/MANIFEST,
/// cuobjdump's extraction): sm_86 gets the cubin, the PTX is named apart; sm_120 gets the PTX
/// (no 12.x cubin) and the cubin is named apart.
#[test]
fn select_names_the_cubin_and_the_ptx_apart() {
    let file = nvfatbin("device_c.fatbin");
    let (selected, rejected) = select(&file, "sm_86");
    assert_eq!(selected, "nvptx64-nvidia-cuda--sm_86");
    assert_eq!(rejected, ["nvptx64-nvidia-cuda--compute_86"]);
    let (selected, rejected) = select(&file, "sm_120");
    assert_eq!(selected, "nvptx64-nvidia-cuda--compute_86");
    assert_eq!(rejected, ["nvptx64-nvidia-cuda--sm_86"]);
}

/// `cuobjdump -lelf -lptx FILE`: sorted (kind, SM without the family suffix) of every listed
/// entry.
fn cuobjdump_list(cuda: &Path, file: &Path) -> Vec<(String, String)> {
    let o = Command::new(cuda.join("bin/cuobjdump"))
        .args(["-lelf", "-lptx"])
        .arg(file)
        .output()
        .unwrap();
    let mut v: Vec<(String, String)> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("ELF file") || l.starts_with("PTX file"))
        .map(|l| {
            // ELF file    1: libk.1.sm_86.cubin | PTX file    1: libk.1.sm_86.ptx
            let kind = if l.starts_with("PTX") { "ptx" } else { "elf" };
            let name = l.rsplit(": ").next().unwrap();
            let sm = name.rsplit('.').nth(1).unwrap();
            let sm = sm.strip_prefix("sm_").unwrap().trim_end_matches('f');
            (kind.to_string(), sm.to_string())
        })
        .collect();
    v.sort();
    v
}

/// Our images of `file` as cuobjdump's list would have them, from their names alone:
/// `compute_XY` is PTX, `sm_XY` a cubin (Tile IR, which cuobjdump does not list, left out).
fn our_list(file: &Path) -> Vec<(String, String)> {
    let data = std::fs::read(file).unwrap();
    let options = ReadOptions::default();
    let mut v = Vec::new();
    for unit in units(&data, &options) {
        let open = unit.unwrap().open(&options).unwrap();
        for image in open.images() {
            if image.image_kind == ImageKind::TileIr {
                continue;
            }
            let Some(Target::Nvptx(_)) = image.name().target() else {
                continue;
            };
            let name = image.name().to_string();
            let arch = name.rsplit("--").next().unwrap();
            let (kind, sm) = match arch.strip_prefix("compute_") {
                Some(sm) => ("ptx", sm),
                None => ("elf", arch.strip_prefix("sm_").unwrap()),
            };
            v.push((kind.to_string(), sm.trim_end_matches('f').to_string()));
        }
    }
    v.sort();
    v
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs NVIDIA's CUDA wheels (scripts/fetch-nvidia-toolkit.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn names_match_cuobjdump_listing() {
    if !common::external("cuobjdump (scripts/fetch-nvidia-toolkit.sh)") {
        return;
    }
    let cuda = common::cuda_tree();
    let mut files = 0;
    for entry in std::fs::read_dir(nvfatbin("")).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        let theirs = cuobjdump_list(&cuda, &path);
        if theirs.is_empty() {
            continue;
        }
        assert_eq!(our_list(&path), theirs, "{}", path.display());
        files += 1;
    }
    assert!(files >= 15, "only {files} files compared");
    // The file with one cubin and one PTX of SM 8.6, explicitly.
    assert_eq!(
        cuobjdump_list(&cuda, &nvfatbin("device_c.fatbin")),
        [("elf".into(), "86".into()), ("ptx".into(), "86".into())]
    );
}
