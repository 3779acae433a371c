//! Tile IR entries of NVIDIA fatbinaries (`NVFATBIN.md` §2.8), on the files libnvfatbin
//! 13.4.92's `nvFatbinAddTileIR` wrote (`tests/data/nvfatbin/tileir/`, `make.py`): they
//! are read as entries of their own kind, not as damage, and `select` never chooses one.
//! The expected values are cuobjdump 13.4.92's (`CUOBJDUMP.txt`) and the bytecode
//! cuTile wrote (`empty_kernel.tileirbc`).

use offload_image::nvfatbin::{EntryKind, Fatbin};
use offload_image::select::{explain, Rejection, Verdict};
use offload_image::validate::{validate, Severity};
use offload_image::{choose, units, Device, ImageKind, Limits, ReadOptions, SelectOptions};

fn file(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/nvfatbin/tileir")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn entries_read_as_cuobjdump_lists_them() {
    let bytecode = file("empty_kernel.tileirbc");
    assert!(bytecode.starts_with(b"\x7fTileIR\0"));
    // cuobjdump: tile_only.fatbin holds one "tile ir" entry, tile_ptx.fatbin a "ptx" one
    // (arch sm_100, code version [8,7]) and then the "tile ir" one (arch sm_80, code
    // version [3329,0]).
    for (name, kinds) in [
        ("tile_only.fatbin", &[EntryKind::TileIr][..]),
        ("tile_ptx.fatbin", &[EntryKind::Ptx, EntryKind::TileIr][..]),
    ] {
        let data = file(name);
        let fatbin = Fatbin::parse(&data, &Limits::DEFAULT).unwrap();
        let entries: Vec<_> = fatbin.entries().collect();
        assert_eq!(
            entries.iter().map(|e| e.kind).collect::<Vec<_>>(),
            kinds,
            "{name}"
        );
        for e in &entries {
            let (arch, version) = match e.kind {
                EntryKind::TileIr => ("sm_80", (3329, 0)),
                _ => ("sm_100", (8, 7)),
            };
            assert_eq!(e.arch_name(), Some(arch));
            assert_eq!((e.code_version >> 16, e.code_version & 0xFFFF), version);
            assert_eq!(e.unknown_flags(), 0);
            if e.kind == EntryKind::TileIr {
                assert_eq!(e.kind.name(), "tile-ir");
                let decoded = e.decompress(&ReadOptions::default()).unwrap();
                assert_eq!(
                    offload_image::nvfatbin::trim_image(e.kind, &decoded),
                    &bytecode[..]
                );
            }
        }
    }
}

#[test]
fn tile_ir_is_listed_never_chosen_and_no_damage() {
    let options = ReadOptions::default();
    let data = file("tile_ptx.fatbin");
    let unit = units(&data, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let images: Vec<_> = open.images().collect();
    assert_eq!(
        images.iter().map(|i| i.image_kind).collect::<Vec<_>>(),
        [ImageKind::Ptx, ImageKind::TileIr]
    );
    assert_eq!(images[1].image_kind.name(), "tile-ir");
    assert_eq!(images[1].target_id, Some("sm_80"));
    let tile = images[1].decode(&options).unwrap();
    assert_eq!(&tile[..], &file("empty_kernel.tileirbc")[..]);
    for device in ["sm_80", "sm_90", "sm_100", "sm_120", "gfx90a"] {
        let device = Device::parse(device).unwrap();
        let verdict = explain(&images[1], &device, &SelectOptions::default());
        assert!(
            matches!(
                verdict,
                Verdict::Rejected(Rejection::NotCode | Rejection::Arch { .. })
            ),
            "{verdict:?}"
        );
    }
    // On sm_100 the PTX beside it is chosen; the Tile IR alone gives nothing.
    let sm100 = [Device::parse("sm_100").unwrap()];
    let choice = choose(images.iter().cloned(), &sm100, &SelectOptions::default());
    assert_eq!(choice[0].image.as_ref().map(|i| i.index), Some(0));
    let only = file("tile_only.fatbin");
    let unit = units(&only, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let choice = choose(open.images(), &sm100, &SelectOptions::default());
    assert!(choice[0].image.is_none());
    // validate: not damage.
    for name in ["tile_only.fatbin", "tile_ptx.fatbin"] {
        let findings = validate(&file(name), &options);
        assert!(
            findings.iter().all(|f| f.severity() != Severity::Error),
            "{name}: {:?}",
            findings.iter().map(|f| &f.message).collect::<Vec<_>>()
        );
    }
}
