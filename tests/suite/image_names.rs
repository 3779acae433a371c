//! Images name themselves ([`Image::name`]): a cubin and PTX of one architecture get
//! different names, spelled as NVIDIA's tools spell them (`sm_86`, `compute_86`), and AMD
//! code objects their target IDs; [`Choice::losses`] yields each losing image with its reason.
//! The NVIDIA oracle is `tests/data/nvfatbin/MANIFEST`: what `cuobjdump -xelf all -xptx all`
//! extracted from every file (kind `elf` or `ptx`, the SM it names, the bytes' SHA-256);
//! `loader-sim/tests/suite/image_names.rs` compares with cuobjdump's own `-lelf`/`-lptx`.

use std::collections::BTreeMap;

use offload_image::select::Loss;
use offload_image::Target;
use offload_image::{choose, units, Device, ReadOptions, SelectOptions};

use crate::common;

/// sha256 → (kind, sm) of every image cuobjdump extracted from `file`.
fn cuobjdump_images(file: &str) -> BTreeMap<String, (String, String)> {
    let text =
        std::fs::read_to_string(common::root().join("tests/data/nvfatbin/MANIFEST")).unwrap();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0] == file).then(|| (f[3].to_string(), (f[1].to_string(), f[2].to_string())))
        })
        .collect()
}

/// The digits and suffix of an architecture name (`86`, `90a`, `100f`).
fn number(arch: &str) -> &str {
    arch.trim_start_matches("sm_")
        .trim_start_matches("compute_")
}

#[test]
fn a_cubin_and_a_ptx_of_sm_86_get_sm_86_and_compute_86() {
    let data =
        std::fs::read(common::root().join("tests/data/nvfatbin/files/device_c.fatbin")).unwrap();
    let oracle = cuobjdump_images("device_c.fatbin");
    assert_eq!(oracle.len(), 2, "{oracle:?}");
    let options = ReadOptions::default();
    let mut seen = Vec::new();
    for unit in units(&data, &options) {
        let open = unit.unwrap().open(&options).unwrap();
        for image in open.images() {
            let bytes = image.decode(&options).unwrap();
            let (kind, sm) = &oracle[&common::sha256(&bytes)];
            let target = image
                .name()
                .target()
                .expect("a fatbinary entry names its SM");
            let spelled = if kind == "elf" { "sm_" } else { "compute_" };
            assert_eq!(target.to_string(), format!("{spelled}{}", number(sm)));
            assert_eq!(
                image.name().to_string(),
                format!("nvptx64-nvidia-cuda--{target}")
            );
            seen.push(target.to_string());
        }
    }
    seen.sort();
    assert_eq!(seen, ["compute_86", "sm_86"]);
}

/// Every image of every file of the NVIDIA oracle: a cubin's name says `sm_`, a PTX's
/// `compute_`, with the SM cuobjdump gives it; no two images of a unit that cuobjdump
/// tells apart share a name unless their bytes are the same.
#[test]
fn every_nvidia_image_is_named_as_cuobjdump_tells_it() {
    let dir = common::root().join("tests/data/nvfatbin/files");
    let options = ReadOptions::default();
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let oracle = cuobjdump_images(&file);
        if oracle.is_empty() || !path.is_file() {
            continue;
        }
        let data = std::fs::read(&path).unwrap();
        for unit in units(&data, &options) {
            let open = unit.unwrap().open(&options).unwrap();
            let mut names: BTreeMap<String, String> = BTreeMap::new();
            for image in open.images() {
                let bytes = image.decode(&options).unwrap();
                let sha = common::sha256(&bytes);
                let Some((kind, sm)) = oracle.get(&sha) else {
                    continue; // Tile IR: not in cuobjdump's ELF/PTX lists
                };
                let Some(Target::Nvptx(arch)) = image.name().target() else {
                    panic!("{file}: {sha} names no NVIDIA target");
                };
                // cuobjdump lists a family cubin under its plain SM.
                let ours = arch.to_string();
                assert_eq!(arch.virtual_name, kind == "ptx", "{file}: {ours} is {kind}");
                assert!(
                    number(&ours).starts_with(number(sm)),
                    "{file}: {ours} against cuobjdump's {kind} {sm}"
                );
                let name = image.name().to_string();
                if let Some(other) = names.insert(name.clone(), sha.clone()) {
                    assert_eq!(other, sha, "{file}: two different images named {name}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "only {checked} images checked");
}

/// AMD code objects are named by their entry IDs and their targets are their target IDs;
/// the losers of a choice come with their images.
#[test]
fn losses_come_with_their_images() {
    let data = std::fs::read(common::corpus().join("bundles/hip_6arch.bundle")).unwrap();
    let options = ReadOptions::default();
    let device = Device::parse("gfx90a:xnack-").unwrap();
    let open = units(&data, &options)
        .next()
        .unwrap()
        .unwrap()
        .open(&options)
        .unwrap();
    let choice = choose(
        open.images(),
        std::slice::from_ref(&device),
        &SelectOptions::default(),
    )
    .remove(0);
    let chosen = choice.image.unwrap();
    assert_eq!(
        chosen.name().to_string(),
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"
    );
    assert_eq!(chosen.name().target().unwrap().to_string(), "gfx90a:xnack-");
    let lost: Vec<(String, String)> = choice
        .losses()
        .map(|l| (l.image.unwrap().name().to_string(), l.loss.to_string()))
        .collect();
    assert_eq!(lost.len(), open.images().count() - 1);
    for l in choice.losses() {
        let image = l.image.unwrap();
        // The image is the one of that discovery index, and its reason is explain's.
        assert_eq!(image.index, l.index);
        let again = open.images().nth(l.index).unwrap();
        assert_eq!(image.bytes, again.bytes);
        if let Loss::Rejected(r) = l.loss {
            assert_eq!(
                offload_image::explain(image, &device, &SelectOptions::default()),
                offload_image::select::Verdict::Rejected(r)
            );
        }
    }
    assert!(
        lost.contains(&(
            "hipv4-amdgcn-amd-amdhsa--gfx906".to_string(),
            "gfx906 code does not run on gfx90a".to_string()
        )),
        "{lost:?}"
    );
}

/// Tile IR bytecode is named as cuobjdump's `-ltileir` names it, virtual like PTX
/// (`empty_kernel.compute_80.tileir`, `tests/data/nvfatbin/tileir/CUOBJDUMP.txt`), and PTX
/// beside it by its own SM (`k.sm_100.ptx`: `compute_100`).
#[test]
fn tile_ir_is_named_as_cuobjdump_lists_it() {
    let dir = common::root().join("tests/data/nvfatbin/tileir");
    let listing = std::fs::read_to_string(dir.join("CUOBJDUMP.txt")).unwrap();
    // The architecture of every `TileIR file` line, as cuobjdump spells it.
    let tile_archs: Vec<&str> = listing
        .lines()
        .filter(|l| l.starts_with("TileIR file"))
        .map(|l| l.rsplit('.').nth(1).unwrap())
        .collect();
    assert_eq!(tile_archs, ["compute_80", "compute_80"]);
    let options = ReadOptions::default();
    let mut names = Vec::new();
    for file in ["tile_only.fatbin", "tile_ptx.fatbin"] {
        let data = std::fs::read(dir.join(file)).unwrap();
        for unit in units(&data, &options) {
            let open = unit.unwrap().open(&options).unwrap();
            for image in open.images() {
                let target = image.name().target().unwrap().to_string();
                if image.image_kind == offload_image::ImageKind::TileIr {
                    assert_eq!(target, tile_archs[0], "{file}");
                }
                names.push((file, image.image_kind.name(), image.name().to_string()));
            }
        }
    }
    names.sort();
    assert_eq!(
        names,
        [
            (
                "tile_only.fatbin",
                "tile-ir",
                "nvptx64-nvidia-cuda--compute_80".to_string()
            ),
            (
                "tile_ptx.fatbin",
                "ptx",
                "nvptx64-nvidia-cuda--compute_100".to_string()
            ),
            (
                "tile_ptx.fatbin",
                "tile-ir",
                "nvptx64-nvidia-cuda--compute_80".to_string()
            ),
        ]
    );
}
