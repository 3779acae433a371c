//! AOTriton `.aks2` archives in `list` and `select` (`FORMATS.md` §12, issue 45): the
//! library reads the archive ([`offload_image::aks2::Aks2`]); a code object is listed as a
//! bare device ELF of the archive, and `select` chooses, per kernel family
//! ([`offload_image::aks2::Aks2::families`]), the code object each device loads, as
//! `doctor` judges them.

use offload_image::aks2::{is_aks2, kernel_family, Aks2};
use offload_image::{identify, Device, ReadOptions, SelectOptions};

use crate::listing::{identity, Line, Record};
use crate::output::{arch_name, code_name, image_name, sha256_hex, Damaged};
use crate::selection::{Found, Record as Choice, Selected};

/// The archive in `data`, if `data` is one: `None` when it is not an `.aks2` file,
/// `Some(Err)` when it is one that does not read.
fn open(data: &[u8], read: &ReadOptions) -> Option<Result<Aks2, Damaged>> {
    is_aks2(data).then(|| Aks2::parse(data, &read.limits).map_err(|e| Damaged::outside(&e)))
}

/// The lines of `list` for an `.aks2` file (with `hash`, each code object's SHA-256);
/// false when `data` is not one.
pub(crate) fn list_lines(
    hash: bool,
    data: &[u8],
    read: &ReadOptions,
    records: &mut Vec<Line>,
) -> bool {
    let archive = match open(data, read) {
        None => return false,
        Some(Err(d)) => {
            records.push(Line::Damaged(d));
            return true;
        }
        Some(Ok(a)) => a,
    };
    for (i, kernel) in archive.kernels.iter().enumerate() {
        let Some(image) = offload_image::judge::aks2_image(&archive, i) else {
            continue;
        };
        let (triple, target_id) = identity(&image);
        records.push(Line::Image(Box::new(Record {
            container: "aks2".into(),
            bundle_index: i,
            format: "aks2",
            compression: Some("xz"),
            ccob_version: None,
            entry_id: None,
            offload_kind: Some("hip"),
            triple,
            target_id,
            image_kind: image.image_kind.name(),
            disagreement: None,
            offset: None,
            size: image.size(),
            sha256: hash.then(|| sha256_hex(image.bytes)),
            source: None,
            toc_key: None,
            kernel: Some(crate::table::escape(&kernel.name).into_owned()),
        })));
    }
    true
}

/// What `select` finds in an `.aks2` file: per kernel family (`bundle_index`, in the
/// order of its first kernel) and device, the code object chosen; `None` when `data` is
/// not one.
pub(crate) fn select(
    data: &[u8],
    devices: &[(String, Device)],
    options: &SelectOptions,
    read: &ReadOptions,
    sha256: bool,
) -> Option<Found> {
    let mut found = Found::default();
    let archive = match open(data, read)? {
        Err(d) => {
            found.damaged.push(d);
            return Some(found);
        }
        Ok(a) => a,
    };
    let targets: Vec<Device> = devices.iter().map(|(_, d)| *d).collect();
    for (family_index, (family, members)) in archive.families().into_iter().enumerate() {
        let images: Vec<_> = members
            .iter()
            .filter_map(|&i| offload_image::judge::aks2_image(&archive, i))
            .collect();
        let choices = offload_image::choose(images.iter().copied(), &targets, options);
        for ((given, _), choice) in devices.iter().zip(&choices) {
            // `chosen` is the image's own index: the kernel's in the archive.
            let chosen = choice
                .chosen()
                .and_then(|i| images.iter().find(|img| img.index == i));
            if let (Some(img), true) = (chosen, found.records.is_empty()) {
                found.output = Some(Selected::Owned(img.bytes.to_vec()));
            }
            found.records.push(Choice {
                container: format!("aks2 {}", crate::table::escape(kernel_family(family))),
                bundle_index: family_index,
                target: given.clone(),
                selected: chosen.map(image_name),
                image_kind: chosen.map(|img| code_name(&identify(img))),
                arch: chosen.and_then(|img| arch_name(&identify(img))),
                offset: None,
                size: chosen.map(|img| img.size()),
                sha256: chosen.filter(|_| sha256).map(|img| sha256_hex(img.bytes)),
                split: None,
                rejected: None,
                disagreement: None,
                skipped: None,
                runtime_note: None,
            });
        }
    }
    Some(found)
}
