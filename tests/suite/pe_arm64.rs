//! ARM64 PE images (machine `0xAA64`, CUDA 13.4's Windows on ARM) are read like x86-64 ones
//! (`docs/PE.md`): `tests/data/pe/arm64/make.sh` links the same `k.s` (two fatbinaries cut
//! from libcufft.so.12 in `.nv_fatb`, their wrappers in `.nvFatBi`) with lld-link 22 for
//! both machines. Both list the images cuobjdump extracts from the cut fatbinaries (sha256
//! in `tests/data/nvfatbin/real2026/CUOBJDUMP.txt`), and the wrappers resolve, through
//! ImageBase and DIR64 base relocations, to the starts of the units.

use crate::common;

use offload_image::host::pe::{MACHINE_AMD64, MACHINE_ARM64};
use offload_image::host::HostFile;
use offload_image::{choose, units, Device, ReadOptions, SelectOptions};

fn read(path: &str) -> Vec<u8> {
    std::fs::read(common::root().join(path)).unwrap()
}

/// The sha256 cuobjdump's extraction gave for `name`.
fn oracle_sha(name: &str) -> String {
    let text = String::from_utf8(read("tests/data/nvfatbin/real2026/CUOBJDUMP.txt")).unwrap();
    let line = text
        .lines()
        .find(|l| l.ends_with(name) && l.split_whitespace().next().is_some_and(|w| w.len() == 64))
        .unwrap();
    line.split_whitespace().next().unwrap().to_string()
}

#[test]
fn arm64_dll_reads_like_the_x86_64_one() {
    let options = ReadOptions::default();
    let want = [
        ("sm_75", oracle_sha("libcufft.ptx72.1.sm_75.ptx")),
        ("sm_100", oracle_sha("libcufft.cubin112.1.sm_100.cubin")),
    ];
    for (file, machine) in [("k_arm64.dll", MACHINE_ARM64), ("k_x64.dll", MACHINE_AMD64)] {
        let data = read(&format!("tests/data/pe/arm64/{file}"));
        let host = HostFile::parse(&data).unwrap();
        let HostFile::Pe(pe) = &host else {
            panic!("{file}: not read as PE")
        };
        assert_eq!(pe.machine(), machine, "{file}");
        let mut seen = Vec::new();
        let mut starts = Vec::new();
        for unit in units(&data, &options) {
            let unit = unit.unwrap();
            assert_eq!(unit.location.to_string(), "section .nv_fatb", "{file}");
            starts.push(unit.extent(&options).unwrap().start);
            for image in unit.open(&options).unwrap().images() {
                let bytes = image.decode(&options).unwrap();
                seen.push((image.target_id.unwrap().to_string(), common::sha256(&bytes)));
            }
        }
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, s)| (a.to_string(), s.clone()))
            .collect();
        assert_eq!(seen, want, "{file}");
        // The two wrappers point at the two units, through a DIR64 relocation each.
        let wrappers = host.fat_binary_wrappers();
        assert_eq!(wrappers.len(), 2, "{file}");
        for (w, start) in wrappers.iter().zip(&starts) {
            let p = host.pointer_at(w.address + 8).unwrap();
            assert_eq!(host.file_offset(p), Some(*start), "{file}");
            assert!(pe.is_relocated(w.address + 8), "{file}");
        }
        // select per unit: sm_100 gets the sm_75 PTX of unit 0 and the sm_100 cubin of
        // unit 1; sm_90 the PTX only (an sm_100 cubin does not run there).
        let mut chosen = Vec::new();
        for device in ["sm_100", "sm_90"] {
            let devices = [Device::parse(device).unwrap()];
            for unit in units(&data, &options) {
                let open = unit.unwrap().open(&options).unwrap();
                let choice = choose(open.images(), &devices, &SelectOptions::default());
                if let Some(image) = &choice[0].image {
                    chosen.push((device, image.image_kind.name()));
                }
            }
        }
        assert_eq!(
            chosen,
            [("sm_100", "ptx"), ("sm_100", "cubin"), ("sm_90", "ptx")],
            "{file}"
        );
    }
}

/// prune rewrites the ARM64 DLL as it does the x86-64 one: keeping sm_90 drops the sm_100
/// cubin's unit; the machine stays 0xAA64 and the PTX is listed unchanged.
#[cfg(feature = "write")]
#[test]
fn arm64_dll_prunes_like_the_x86_64_one() {
    use offload_image::prune::{prune, PruneOptions};
    let options = ReadOptions::default();
    let mut out = Vec::new();
    for file in ["k_arm64.dll", "k_x64.dll"] {
        let data = read(&format!("tests/data/pe/arm64/{file}"));
        let pruned = prune(
            &data,
            &[Device::parse("sm_90").unwrap()],
            &PruneOptions::default(),
        )
        .unwrap();
        assert!(pruned.len() < data.len(), "{file}");
        let HostFile::Pe(pe) = HostFile::parse(&pruned).unwrap() else {
            panic!("{file}")
        };
        let images: Vec<String> = units(&pruned, &options)
            .flat_map(|u| {
                let open = u.unwrap().open(&options).unwrap();
                open.images()
                    .map(|i| common::sha256(&i.decode(&options).unwrap()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(images, [oracle_sha("libcufft.ptx72.1.sm_75.ptx")], "{file}");
        out.push((pe.machine(), pruned.len()));
    }
    assert_eq!(out[0].0, MACHINE_ARM64);
    assert_eq!(out[1].0, MACHINE_AMD64);
}
