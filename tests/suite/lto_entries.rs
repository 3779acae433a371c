//! LTO IR entries (kind 8) and the entry header sizes of real libraries (`NVFATBIN.md`
//! §2.5, §2.9), on whole fatbinaries cut from `libThor.so` (thor-cuda-kernels-sm120
//! 0.0.38) and `libcufft.so.12` (nvidia-cufft 12.5.0.14; `tests/data/nvfatbin/real2026/`).
//! The expected values are cuobjdump 13.5.37's listing and the sha256 of the images it
//! extracts (`CUOBJDUMP.txt`), read from that file.

use crate::common::sha256;
use offload_image::nvfatbin::{EntryKind, Fatbin, FLAG_LTO_IR};
use offload_image::select::{explain, Rejection, Verdict};
use offload_image::validate::{validate, Severity};
use offload_image::SelectOptions;
use offload_image::{choose, units, Device, ErrorKind, ImageKind, Limits, ReadOptions};

const DIR: &str = "tests/data/nvfatbin/real2026";

fn file(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(DIR)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One entry as cuobjdump lists it.
#[derive(Debug, Default, Clone)]
struct Listed {
    /// `ptx`, `elf` or `nvvm` (cuobjdump's "Fatbin ... code").
    kind: String,
    arch: String,
    version: (u32, u32),
    options: Option<String>,
}

/// cuobjdump's listing per file, and (name, sha256) of every extracted image.
type Oracle = (Vec<(String, Vec<Listed>)>, Vec<(String, String)>);

/// cuobjdump's listing per file, and the sha256 of every extracted image by its name.
fn oracle() -> Oracle {
    let text = String::from_utf8(file("CUOBJDUMP.txt")).unwrap();
    let mut files: Vec<(String, Vec<Listed>)> = Vec::new();
    let mut shas = Vec::new();
    let mut in_shas = false;
    for line in text.lines() {
        if line.starts_with("# sha256") {
            in_shas = true;
        } else if in_shas {
            let f: Vec<&str> = line.split_whitespace().collect();
            shas.push((f[2].to_string(), f[0].to_string()));
        } else if let Some(name) = line.strip_prefix("== ") {
            files.push((name.to_string(), Vec::new()));
        } else if let Some(kind) = line
            .strip_prefix("Fatbin ")
            .and_then(|l| l.strip_suffix(" code:"))
        {
            let entries = &mut files.last_mut().unwrap().1;
            entries.push(Listed {
                kind: kind.to_string(),
                ..Listed::default()
            });
        } else if let Some(e) = files.last_mut().and_then(|f| f.1.last_mut()) {
            if let Some(a) = line.strip_prefix("arch = ") {
                e.arch = a.to_string();
            } else if let Some(v) = line.strip_prefix("code version = [") {
                let (a, b) = v.trim_end_matches(']').split_once(',').unwrap();
                e.version = (a.parse().unwrap(), b.parse().unwrap());
            } else if let Some((_, o)) = line.split_once("Options = ") {
                e.options = Some(o.trim_end().to_string());
            }
        }
    }
    (files, shas)
}

#[test]
fn entries_read_as_cuobjdump_lists_them() {
    let (files, shas) = oracle();
    assert_eq!(files.len(), 5);
    let options = ReadOptions::default();
    let mut header_sizes = Vec::new();
    for (name, listed) in &files {
        let data = file(name);
        let fatbin = Fatbin::parse(&data, &Limits::DEFAULT).unwrap();
        let entries: Vec<_> = fatbin.entries().collect();
        assert_eq!(entries.len(), listed.len(), "{name}");
        for (e, l) in entries.iter().zip(listed) {
            let kind = match e.kind {
                EntryKind::Ptx => "ptx",
                EntryKind::Cubin => "elf",
                EntryKind::LtoIr => "nvvm",
                EntryKind::TileIr => "tile ir",
            };
            assert_eq!(kind, l.kind, "{name}");
            assert_eq!(e.arch_name(), Some(l.arch.as_str()), "{name}");
            assert_eq!(
                (e.code_version >> 16, e.code_version & 0xFFFF),
                l.version,
                "{name}"
            );
            assert_eq!(e.options(), l.options.as_deref(), "{name}");
            assert_eq!(e.header.len(), e.header_size as usize);
            // Every flag bit of these entries has a known meaning; 0x10000 exactly on LTO IR.
            assert_eq!(e.unknown_flags(), 0, "{name}");
            assert_eq!(e.flags & FLAG_LTO_IR != 0, e.kind == EntryKind::LtoIr);
            header_sizes.push((kind, e.header_size));
        }
        // The images cuobjdump extracts, by sha256, through the crate's units.
        let unit = units(&data, &options).next().unwrap().unwrap();
        let open = unit.open(&options).unwrap();
        let stem = name.trim_end_matches(".fatbin");
        for image in open.images() {
            if image.image_kind == ImageKind::LtoIr {
                // cuobjdump extracts no LTO IR; the image is the stored stream, in place.
                let e = &entries[image.index];
                assert!(image.encoded.is_none());
                assert_eq!(image.bytes, e.stream().unwrap());
                assert_eq!(image.bytes.len() as u64, e.compressed_size);
                continue;
            }
            let ext = if image.image_kind == ImageKind::Ptx {
                "ptx"
            } else {
                "cubin"
            };
            let want = format!(
                "{stem}.{}.{}.{ext}",
                image.index + 1,
                image.target_id.unwrap()
            );
            let sha = &shas.iter().find(|(n, _)| *n == want).unwrap().1;
            let bytes = image.decode(&options).unwrap();
            assert_eq!(&sha256(&bytes), sha, "{want}");
        }
    }
    header_sizes.sort();
    // The header sizes NVFATBIN.md §2.5 lists from these files.
    assert_eq!(
        header_sizes,
        [
            ("elf", 104),
            ("elf", 112),
            ("nvvm", 120),
            ("nvvm", 128),
            ("ptx", 72),
            ("ptx", 96)
        ]
    );
}

#[test]
fn lto_ir_is_listed_never_chosen_never_decoded_and_no_damage() {
    let options = ReadOptions::default();
    for name in ["libThor.relfatbin14.fatbin", "libcufft.lto128.fatbin"] {
        let data = file(name);
        let unit = units(&data, &options).next().unwrap().unwrap();
        let open = unit.open(&options).unwrap();
        let images: Vec<_> = open.images().collect();
        let lto = images.last().unwrap();
        assert_eq!(lto.image_kind, ImageKind::LtoIr);
        assert_eq!(lto.image_kind.name(), "lto-ir");
        // Its flags name zstd or LZ4, but the stream is not one: it is never decoded.
        let fatbin = Fatbin::parse(&data, &Limits::DEFAULT).unwrap();
        let e = fatbin.entries().last().unwrap();
        assert!(e.codec.is_some());
        assert!(!lto.bytes.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]));
        let err = e.decompress(&options).unwrap_err();
        assert_eq!(
            (err.kind(), err.offset()),
            (ErrorKind::UnsupportedMethod, e.offset + 0x28)
        );
        for device in ["sm_75", "sm_90", "sm_120", "sm_121"] {
            let device = Device::parse(device).unwrap();
            let verdict = explain(lto, &device, &SelectOptions::default());
            assert!(
                matches!(
                    verdict,
                    Verdict::Rejected(Rejection::NotCode | Rejection::Arch { .. })
                ),
                "{name} {verdict:?}"
            );
        }
        let findings = validate(&data, &options);
        assert!(
            findings.iter().all(|f| f.severity() != Severity::Error),
            "{name}: {:?}",
            findings.iter().map(|f| &f.message).collect::<Vec<_>>()
        );
    }
    // libThor's unit: the PTX beside the LTO IR is chosen for sm_120, as the driver would.
    let data = file("libThor.relfatbin14.fatbin");
    let unit = units(&data, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let sm120 = [Device::parse("sm_120").unwrap()];
    let choice = choose(open.images(), &sm120, &SelectOptions::default());
    let chosen = choice[0].image.as_ref().unwrap();
    assert_eq!(
        (chosen.index, chosen.image_kind),
        (0, ImageKind::Ptx),
        "the PTX entry"
    );
    // cuFFT's LTO IR alone gives nothing.
    let data = file("libcufft.lto128.fatbin");
    let unit = units(&data, &options).next().unwrap().unwrap();
    let open = unit.open(&options).unwrap();
    let sm75 = [Device::parse("sm_75").unwrap()];
    assert!(choose(open.images(), &sm75, &SelectOptions::default())[0]
        .image
        .is_none());
}

/// The real library, when it has been fetched (`OFFLOAD_IMAGE_EXTERNAL_TESTS=1` and
/// `target/wheels45/thor/...`): its 65 units list 65 PTX and 65 LTO IR entries.
#[test]
#[ignore = "needs libThor.so of thor-cuda-kernels-sm120 0.0.38 under target/"]
fn libthor_lists_65_ptx_and_65_lto_entries() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/wheels45/thor/thor_cuda_kernels/sm120/libThor.so");
    let data = std::fs::read(path).unwrap();
    let options = ReadOptions::default();
    let (mut ptx, mut lto) = (0, 0);
    for unit in units(&data, &options) {
        let unit = unit.unwrap();
        if unit.location.to_string() != "section __nv_relfatbin" {
            continue;
        }
        for image in unit.open(&options).unwrap().images() {
            match image.image_kind {
                ImageKind::Ptx => ptx += 1,
                ImageKind::LtoIr => lto += 1,
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!((ptx, lto), (65, 65));
    assert!(validate(&data, &options)
        .iter()
        .all(|f| f.severity() != Severity::Error));
}

/// prune judges LTO IR as IR for its architecture (kept with a kept device of the same or a
/// newer compute capability, as its PTX would be; `NVFATBIN.md` §2.9).
#[cfg(feature = "write")]
#[test]
fn prune_keeps_lto_ir_as_ir_for_its_architecture() {
    use offload_image::prune::{plan, PruneOptions};
    let options = PruneOptions::default();
    for (name, keep, kept) in [
        ("libThor.relfatbin14.fatbin", "sm_120", 2),
        ("libThor.relfatbin14.fatbin", "sm_121", 2),
        ("libcufft.lto128.fatbin", "sm_80", 1),
        ("libcufft.lto128.fatbin", "sm_75", 1),
    ] {
        let data = file(name);
        let p = plan(&data, &[Device::parse(keep).unwrap()], &options).unwrap();
        let unit = &p.units()[0];
        assert_eq!(
            (unit.kept.len(), unit.dropped.len()),
            (kept, 0),
            "{name} {keep}"
        );
        assert!(!unit.whole, "{name} {keep}");
    }
    // For an older device nothing in libThor's unit loads: a standalone file is left whole.
    let data = file("libThor.relfatbin14.fatbin");
    let p = plan(&data, &[Device::parse("sm_90").unwrap()], &options).unwrap();
    assert!(p.units()[0].whole);
    assert_eq!(p.units()[0].missing, [0]);
}
