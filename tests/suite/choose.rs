//! `choose` (any iterator of images, any number of devices, one pass) against `select` (a slice)
//! on every corpus container and a set of AMDGPU and NVPTX devices.

use crate::common;

use offload_image::select::{choose, select, Choice, Loss, Verdict};
use offload_image::{explain, units, Device, Image, ReadOptions, SelectOptions};

const DEVICES: &[&str] = &[
    "gfx906:sramecc-:xnack-",
    "gfx90a:sramecc+:xnack+",
    "gfx90a:sramecc+:xnack-",
    "gfx942:sramecc+:xnack-",
    "gfx1030",
    "gfx1100",
    "gfx1201",
    "gfx803",
    "sm_70",
    "sm_80",
    "sm_86",
    "sm_90",
    "sm_90a",
    "sm_100",
    "sm_120",
];

fn corpus_files() -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for dir in std::fs::read_dir(common::corpus()).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() || dir.ends_with("malformed") {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            v.push(f.unwrap().path());
        }
    }
    v.sort();
    v
}

#[test]
fn choose_agrees_with_select_for_one_device_and_many() {
    let devices: Vec<Device> = DEVICES.iter().map(|d| Device::parse(d).unwrap()).collect();
    let read = ReadOptions::default();
    let (mut cells, mut chosen_cells, mut explained) = (0, 0, 0);
    for path in corpus_files() {
        let data = std::fs::read(&path).unwrap();
        for unit in units(&data, &read) {
            let Ok(unit) = unit else { break };
            let open = unit.open(&read).unwrap();
            let images: Vec<Image<'_>> = open.images().collect();
            for options in [
                SelectOptions::default(),
                SelectOptions {
                    policy: offload_image::Policy::First,
                    allow_jit: false,
                    ..SelectOptions::default()
                },
            ] {
                let many = choose(open.images(), &devices, &options);
                for (device, from_many) in devices.iter().zip(&many) {
                    cells += 1;
                    let s = select(&images, device, &options);
                    let c: Choice<'_> =
                        choose(open.images(), std::slice::from_ref(device), &options).remove(0);
                    let name = path.display();
                    assert_eq!(c.key, s.key, "{name} {device}");
                    assert_eq!(c.image.map(|i| i.index), s.chosen(), "{name} {device}");
                    assert_eq!((c.compatible, c.tie), (s.compatible, s.tie), "{name}");
                    assert_eq!(c.candidates, images.len());
                    assert_eq!(from_many.key, c.key, "{name} {device}");
                    assert_eq!(from_many.rejection, c.rejection, "{name} {device}");
                    assert_eq!(from_many.verdicts, c.verdicts, "{name} {device}");
                    // Every other image lost, with the verdict `explain` gives on its own,
                    // or outranked by the winner.
                    assert_eq!(
                        c.losses().count() + usize::from(c.image.is_some()),
                        images.len()
                    );
                    for lost in c.losses() {
                        let (index, loss) = (lost.index, lost.loss);
                        // The loser comes with its image: the very image of the slice.
                        let image = lost.image.expect("choose was given images");
                        assert_eq!(image.index, index);
                        assert_eq!(image.bytes, images[index].bytes);
                        assert_eq!(image.name().to_string(), images[index].name().to_string());
                        match (loss, explain(&images[index], device, &options)) {
                            (Loss::Rejected(r), Verdict::Rejected(v)) => assert_eq!(r, v),
                            (Loss::Outranked(o), Verdict::Compatible(k)) => {
                                assert_eq!((o.loser, Some(o.winner)), (k, c.key));
                                assert!(!k.cmp_under(&o.winner, options.policy).is_lt());
                            }
                            (l, v) => panic!("{name} {device}: {l:?} against {v:?}"),
                        }
                    }
                    if let Some(i) = c.image {
                        chosen_cells += 1;
                        // The chosen image is the very image of the slice, with its place.
                        assert_eq!(i.bytes, images[i.index].bytes);
                        assert_eq!(i.offset, open.offset_of(&images[i.index]));
                    } else if let Some((at, why)) = c.rejection {
                        explained += 1;
                        // The reason is the verdict of that image, and nothing outranks it.
                        assert_eq!(
                            explain(&images[at], device, &options),
                            Verdict::Rejected(why)
                        );
                        for image in &images {
                            if let Verdict::Rejected(r) = explain(image, device, &options) {
                                assert!(r.closeness() <= why.closeness());
                            }
                        }
                    } else {
                        assert!(images.is_empty(), "{name}: no choice and no reason");
                    }
                }
            }
        }
    }
    assert!(cells > 1000, "{cells}");
    assert!(
        chosen_cells > 100 && explained > 100,
        "{chosen_cells} {explained}"
    );
}

#[test]
fn file_range_is_the_manifest_offset() {
    // Every image stored in place knows its range in the file: the manifest's offset
    // (what LLVM's tools extract from where) for the first uncompressed container.
    let read = ReadOptions::default();
    let data = std::fs::read(common::corpus().join("bundles/hip_6arch.bundle")).unwrap();
    let unit = units(&data, &read).next().unwrap().unwrap();
    let open = unit.open(&read).unwrap();
    for image in open.images() {
        let r = image.file_range().unwrap();
        assert_eq!(&data[r.start as usize..r.end as usize], image.bytes);
    }
    let ccob = std::fs::read(common::corpus().join("compressed/hip_6arch.zstd.ccob")).unwrap();
    let unit = units(&ccob, &read).next().unwrap().unwrap();
    let open = unit.open(&read).unwrap();
    assert!(open
        .images()
        .all(|i| i.offset.is_none() && i.file_range().is_none()));
}
