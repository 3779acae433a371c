//! The NVIDIA architectures of CUDA 13.x (sm_88, sm_103, sm_107, sm_110, sm_121 and their
//! `a`/`f` variants) in targets, cubin headers and fatbinary entries, on a fatbinary CUDA
//! 13.5's tools made (`tests/data/nvfatbin/archs2026/`): every image is the one cuobjdump
//! extracts (`MANIFEST`), every name the one the entry records, and selection follows
//! NVIDIA's compatibility rules (`COMPATIBILITY.md` §9.2: a cubin runs on its major from its
//! minor on, `a` only on its own compute capability, `f` on later minors of its family, PTX
//! on every later compute capability).

use offload_image::arch::{identify, NvArch, Target};
use offload_image::nvfatbin::Fatbin;
use offload_image::{choose, units, Device, Image, Limits, ReadOptions, SelectOptions};
use sha2::{Digest, Sha256};

fn data(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/nvfatbin/archs2026")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn names_parse_and_print() {
    for name in [
        "sm_88",
        "sm_103",
        "sm_103a",
        "sm_103f",
        "sm_107",
        "sm_107a",
        "sm_107f",
        "sm_110",
        "sm_110a",
        "sm_110f",
        "sm_121",
        "sm_121a",
        "sm_121f",
        "compute_110f",
    ] {
        let arch = NvArch::parse(name).unwrap();
        assert_eq!(arch.to_string(), name);
        assert!(
            Device::parse(name.trim_end_matches(['a', 'f'])).is_ok(),
            "{name}"
        );
    }
    // Compute capability: sm_110 is 11.0 (Jetson Thor, sm_101 before CUDA 13), sm_121 12.1.
    let cc = |n: &str| {
        let a = NvArch::parse(n).unwrap();
        (a.major(), a.minor())
    };
    assert_eq!(
        [
            cc("sm_88"),
            cc("sm_103"),
            cc("sm_107"),
            cc("sm_110"),
            cc("sm_121")
        ],
        [(8, 8), (10, 3), (10, 7), (11, 0), (12, 1)]
    );
}

#[test]
fn entries_are_cuobjdumps_images() {
    let file = data("new_archs.fatbin");
    let manifest = String::from_utf8(data("MANIFEST")).unwrap();
    let mut want: Vec<(String, String)> = manifest
        .lines()
        .map(|l| {
            let (name, sha) = l.split_once(' ').unwrap();
            let kind = if name.ends_with(".ptx") {
                "ptx"
            } else {
                "cubin"
            };
            (kind.to_string(), sha.to_string())
        })
        .collect();
    let options = ReadOptions::default();
    let fatbin = Fatbin::parse(&file, &Limits::DEFAULT).unwrap();
    let names: Vec<_> = fatbin.entries().map(|e| e.arch_name().unwrap()).collect();
    // The names fatbinary was given (make.sh), in order.
    assert_eq!(
        names,
        [
            "sm_88", "sm_103a", "sm_103f", "sm_107", "sm_107a", "sm_107f", "sm_110", "sm_110a",
            "sm_110f", "sm_121", "sm_88", "sm_107a", "sm_110f"
        ]
    );
    let unit = units(&file, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let mut got = Vec::new();
    for image in open.images() {
        let bytes = image.decode(&options).unwrap();
        got.push((image.image_kind.name().to_string(), hex(&bytes)));
        // A cubin's header names the same SM as its entry (never `a` or `f`, §9.1).
        let id = identify(&image);
        if let (Some(Target::Nvptx(elf)), Target::Nvptx(stated)) = (id.elf_target, id.target) {
            assert_eq!(elf.sm, stated.sm);
            assert!(id.mismatch.is_none());
        }
    }
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

fn chosen(images: &[Image<'_>], device: &str) -> Option<String> {
    let devices = [Device::parse(device).unwrap()];
    let choice = choose(images.iter().cloned(), &devices, &SelectOptions::default());
    choice[0]
        .image
        .as_ref()
        .map(|i| format!("{} {}", i.image_kind.name(), i.target_id.unwrap()))
}

#[test]
fn selection_follows_nvidias_rules() {
    let file = data("new_archs.fatbin");
    let options = ReadOptions::default();
    let unit = units(&file, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let images: Vec<_> = open.images().collect();
    // Exact compute capability: the `a` cubin first (§9.4), else the plain one.
    assert_eq!(chosen(&images, "sm_103").as_deref(), Some("cubin sm_103a"));
    assert_eq!(chosen(&images, "sm_107").as_deref(), Some("cubin sm_107a"));
    assert_eq!(chosen(&images, "sm_110").as_deref(), Some("cubin sm_110a"));
    assert_eq!(chosen(&images, "sm_121").as_deref(), Some("cubin sm_121"));
    assert_eq!(chosen(&images, "sm_88").as_deref(), Some("cubin sm_88"));
    // 10.0 and 12.0 are below every cubin's minor of their major; `a` and `f` PTX of
    // another capability or family do not run; compute_88 does (JIT).
    assert_eq!(chosen(&images, "sm_100").as_deref(), Some("ptx sm_88"));
    assert_eq!(chosen(&images, "sm_120").as_deref(), Some("ptx sm_88"));
    // 8.9: the sm_88 cubin (same major, later minor) before any PTX.
    assert_eq!(chosen(&images, "sm_89").as_deref(), Some("cubin sm_88"));
    // Below 8.8 nothing runs.
    assert_eq!(chosen(&images, "sm_87"), None);
}
