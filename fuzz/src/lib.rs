//! Shared checks of the fuzz targets: the `loader-sim list` path over untrusted bytes, with
//! the invariants the library promises asserted (a failed assertion is a fuzzing crash).

use offload_image::container::UnitContent;
use offload_image::target::{EntryId, Triple};
use offload_image::{for_each_unit, Error, Image, Limits, ReadOptions};

/// The options the targets read with: the library's defaults except a 64 MiB decompressed
/// size limit, so that a legitimate 1 GiB expansion does not dominate a fuzzing run.
pub fn options() -> ReadOptions {
    ReadOptions {
        limits: Limits {
            max_decompressed_size: 64 << 20,
            ..Limits::DEFAULT
        },
        verify_hash: true,
    }
}

/// True if `inner` lies inside `outer` (by address).
pub fn within(outer: &[u8], inner: &[u8]) -> bool {
    let o = outer.as_ptr() as usize;
    let i = inner.as_ptr() as usize;
    i >= o && i + inner.len() <= o + outer.len()
}

/// Reads every field of an image the way `list` and selection do.
pub fn touch(image: &Image<'_>) -> usize {
    let mut n = image.bytes.len();
    if let Some(id) = image.entry_id {
        if let Ok(e) = EntryId::parse(id) {
            n += e.kind.len() + e.triple.len();
            assert!(within(id.as_bytes(), e.kind.as_bytes()));
            assert!(within(id.as_bytes(), e.triple.as_bytes()));
            if let Some(t) = e.target_id {
                assert!(within(id.as_bytes(), t.as_bytes()));
            }
        }
    }
    if let Some(t) = image.triple {
        if let Ok(t) = Triple::parse(t) {
            n += t.to_string().len();
        }
    }
    if let Some(s) = image.strings {
        for (k, v) in s.iter() {
            n += k.len() + v.len();
        }
    }
    n += image.image_kind.name().len() + image.offload_kind.name().len();
    n
}

/// The `loader-sim list` path: walk, open every unit, list every image. Asserts that every
/// image lies in the input, or in content the library decompressed.
pub fn list(data: &[u8], options: &ReadOptions) -> Result<usize, Error> {
    let mut images = 0usize;
    for_each_unit(data, options, |unit| {
        assert!(unit.location.offset <= data.len() as u64);
        let _ = unit.location.to_string();
        let open = unit.open(options)?;
        for image in open.images() {
            let inside = within(data, image.bytes);
            match &unit.content {
                UnitContent::Compressed(_) => {
                    let d = open.decompressed().expect("compressed unit has content");
                    assert!(within(d, image.bytes), "image outside decompressed content");
                }
                UnitContent::OffloadBinaries(seq) => {
                    assert!(inside || seq.iter().any(|(_, b)| b.is_compressed()));
                }
                _ => assert!(inside, "image outside the input"),
            }
            if inside {
                let off = open
                    .offset_of(&image)
                    .expect("offset of an image in the input");
                assert!(off + image.size() <= data.len() as u64);
            }
            touch(&image);
            images += 1;
        }
        Ok(())
    })?;
    Ok(images)
}

/// The devices the selection targets choose for: AMDGPU processors with every feature
/// state (on, off, unknown), generic-family members, and CUDA capabilities.
pub fn devices() -> Vec<offload_image::Device> {
    [
        "gfx906",
        "gfx906:xnack-",
        "gfx90a:sramecc+:xnack+",
        "gfx90a:xnack-",
        "gfx90a",
        "gfx942:sramecc+:xnack-",
        "gfx1030",
        "gfx1100",
        "gfx1201",
        "sm_70",
        "sm_80",
        "sm_90a",
        "sm_100",
        "sm_120",
    ]
    .iter()
    .map(|d| offload_image::Device::parse(d).expect("a device from the tables"))
    .collect()
}

/// The `loader-sim select` path over the images of one unit: identify every image, select
/// for every device under every policy, explain every verdict. Asserts that the chosen
/// image is compatible and that its key is the best.
pub fn select_all(images: &[Image<'_>], devices: &[offload_image::Device]) {
    use offload_image::select::{check, Verdict};
    use offload_image::{identify, select, Policy, SelectOptions};
    let identities: Vec<_> = images.iter().map(identify).collect();
    for id in &identities {
        let _ = id.disagreement().map(|d| d.to_string());
        let _ = id.target.to_string();
        let _ = id.triple().map(|t| t.to_string());
    }
    for device in devices {
        for policy in [Policy::Best, Policy::First, Policy::FirstByClass] {
            for base in [SelectOptions::default(), SelectOptions::comgr()] {
                let options = SelectOptions { policy, ..base };
                let s = select(images, device, &options);
                let mut compatible = 0usize;
                for (i, id) in identities.iter().enumerate() {
                    match check(id, i, device, &options) {
                        Verdict::Compatible(key) => {
                            compatible += 1;
                            let best = s.key.expect("a compatible image means a choice");
                            assert!(
                                !key.cmp_under(&best, policy).is_lt(),
                                "chosen is not the best"
                            );
                        }
                        Verdict::Rejected(r) => {
                            let _ = r.to_string();
                        }
                    }
                }
                assert_eq!(compatible, s.compatible);
                if let Some(c) = s.chosen {
                    assert!(c < images.len());
                    let v = check(&identities[c], c, device, &options);
                    assert_eq!(v.key(), s.key);
                }
            }
        }
    }
}

/// [`list`] followed by [`select_all`] on every unit.
pub fn list_and_select(
    data: &[u8],
    options: &ReadOptions,
    devices: &[offload_image::Device],
) -> Result<usize, Error> {
    let n = list(data, options)?;
    for_each_unit(data, options, |unit| {
        let open = unit.open(options)?;
        let images: Vec<Image<'_>> = open.images().collect();
        select_all(&images, devices);
        Ok(())
    })?;
    Ok(n)
}
