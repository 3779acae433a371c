//! The records `loader-sim register` prints and the shim writes to `LOADER_SIM_REPORT`:
//! one JSON object per (device, registered unit), one per line (`CLI.md`, `register`).

use offload_image::registration::{
    device_kernels, fat_binary_at, AddressSpace, FatbinWrapperView, Registration, Registry,
};
use offload_image::{Image, ReadOptions};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One offload entry bound to a unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryRecord {
    /// Device-side symbol name.
    pub name: String,
    /// `kernel`, `variable`, `managed`, `surface`, `texture`, `requires`, `indirect`, `other`.
    pub kind: String,
    /// Byte size (0 for kernels).
    pub size: u64,
    /// Entry flags.
    pub flags: u32,
}

/// A rejected image and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    /// The image, named as in `selected`.
    pub image: String,
    /// Why it was not chosen.
    pub reason: String,
}

/// A fat binary that a CUDA version-2 wrapper's pre-linked list names (`REGISTRATION.md`
/// §5.3): device-link input of relocatable device code, handed to the runtime with the
/// linked fat binary but not registered itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkInput {
    /// Its address in its file (address minus load base).
    pub address: u64,
    /// Its images, named as in `selected`.
    pub images: Vec<String>,
    /// Why it could not be read, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One (device, unit) record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The device's target as given (`null` when the runtime has no device).
    pub device: Option<String>,
    /// Where the unit is: `<section>+<offset>` statically, `<object>+<address>` at run time.
    pub unit: String,
    /// `hip`, `cuda` or `openmp`.
    pub registration: String,
    /// Virtual address of the registered fat binary (descriptors: of the descriptor) in
    /// its file: the same number statically and at run time (address minus load base).
    pub address: u64,
    /// The chosen image: bundle entry ID, `<triple>--<arch>` for OffloadBinaries, or the
    /// image kind of a raw image; `null` when the device gets none.
    pub selected: Option<String>,
    /// Size of the chosen image.
    pub size: Option<u64>,
    /// SHA-256 of the chosen image's bytes (after decompression).
    pub sha256: Option<String>,
    /// The unit's entries.
    pub entries: Vec<EntryRecord>,
    /// Where the entries come from: `registration` (`__hipRegister*` calls, a descriptor's
    /// or a wrapper's entry table) or `device-image` (the kernels of the chosen code object,
    /// for fat binaries whose registration calls are code, read statically).
    pub entries_from: String,
    /// With `--explain`: every other image and why it was not chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Vec<Rejected>>,
    /// Why the unit's images could not be read, if they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Run time only (the shim): `true` when the program unregistered the unit
    /// (`__tgt_unregister_lib`, or `__hipUnregisterFatBinary` as often as it was
    /// registered), `false` when it was still registered as the shim was unloaded. Absent
    /// from static reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unregistered: Option<bool>,
    /// Run time only (the shim), for a CUDA version-2 wrapper: the fat binaries its
    /// pre-linked list names as the program registers it (in a file the list is zero-filled
    /// memory that the device link's stub fills). Absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_inputs: Option<Vec<LinkInput>>,
}

/// How records are built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordOptions {
    /// When the unit has no bound entries, list the chosen code object's kernels.
    pub device_entries: bool,
    /// Include the rejected images.
    pub explain: bool,
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How a record names an image, as `loader-sim select` does (`offload_image::image_name`).
pub fn image_name(image: &Image<'_>) -> String {
    offload_image::arch::image_name(image).to_string()
}

/// The pre-linked list of the wrapper at `wrapper` (`FatbinWrapperView::prelinked`), each
/// fat binary opened and its images named; `None` unless it is a CUDA version-2 wrapper
/// with a list. Addresses are given minus `base`. Where the list itself cannot be read,
/// the one element has the list's address and the error; past the entry limit of image
/// names, the last element says so and the list ends there.
pub fn link_inputs<'d, S: AddressSpace<'d> + ?Sized>(
    space: &S,
    wrapper: u64,
    base: u64,
    options: &ReadOptions,
) -> Option<Vec<LinkInput>> {
    let w = FatbinWrapperView::read(space, wrapper).ok()?;
    if w.version != 2 || w.unused == 0 {
        return None;
    }
    let list = match w.prelinked(space, options.limits.max_entries) {
        Ok(list) => list,
        Err(e) => {
            return Some(vec![LinkInput {
                address: w.unused.wrapping_sub(base),
                images: Vec::new(),
                error: Some(format!("{}, at address {:#x}", e.what(), e.offset())),
            }])
        }
    };
    let open = |addr: u64| -> offload_image::Result<Vec<String>> {
        let blob = fat_binary_at(space, addr, options)?;
        let mut names = Vec::new();
        for unit in offload_image::units(blob, options) {
            let unit = unit
                .and_then(|u| u.open(options))
                .map_err(|e| e.rebase(addr))?;
            names.extend(unit.images().map(|i| image_name(&i)));
        }
        Ok(names)
    };
    // Each fat binary is read once, and the names reported stay within the entry limit
    // however often a hostile list repeats one.
    let mut seen: std::collections::BTreeMap<u64, Result<Vec<String>, String>> =
        std::collections::BTreeMap::new();
    let mut names = 0u64;
    let mut out = Vec::new();
    for addr in list {
        let read = seen
            .entry(addr)
            .or_insert_with(|| {
                open(addr).map_err(|e| format!("{}, at address {:#x}", e.what(), e.offset()))
            })
            .clone();
        let (mut images, mut error) = match read {
            Ok(images) => (images, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        names = names.saturating_add(u64::try_from(images.len()).unwrap_or(u64::MAX));
        let over = names > options.limits.max_entries;
        if over {
            images.clear();
            error = Some("the link inputs name more images than the entry limit".to_string());
        }
        out.push(LinkInput {
            address: addr.wrapping_sub(base),
            images,
            error,
        });
        if over {
            break;
        }
    }
    Some(out)
}

/// The entries bound to `reg`, as records.
pub fn entry_records(reg: &Registration<'_>) -> Vec<EntryRecord> {
    reg.entries()
        .iter()
        .map(|e| EntryRecord {
            name: e.name_lossy().into_owned(),
            kind: e.kind.name().to_string(),
            size: e.size,
            flags: e.flags,
        })
        .collect()
}

/// The records of unit `reg` for every device of `registry` (one record with a `null`
/// device when there is none).
pub fn unit_records(
    registry: &Registry<'_>,
    reg: &Registration<'_>,
    unit: &str,
    address: u64,
    options: RecordOptions,
) -> Vec<Record> {
    let images = reg.images();
    let bound = entry_records(reg);
    let base = Record {
        device: None,
        unit: unit.to_string(),
        registration: reg.kind().name().to_string(),
        address,
        selected: None,
        size: None,
        sha256: None,
        entries: bound.clone(),
        entries_from: "registration".to_string(),
        rejected: None,
        error: reg
            .error()
            .map(|e| format!("{}, at address {:#x}", e.what(), e.offset())),
        unregistered: None,
        link_inputs: None,
    };
    if registry.devices().is_empty() {
        return vec![base];
    }
    let mut out = Vec::new();
    for (d, device) in registry.devices().iter().enumerate() {
        let mut r = base.clone();
        r.device = Some(device.name().to_string());
        if bound.is_empty() && options.device_entries {
            r.entries_from = "device-image".to_string();
        }
        let choice = reg.choice(d);
        let chosen = choice.and_then(|c| c.chosen()).and_then(|i| images.get(i));
        if let Some(image) = chosen {
            r.selected = Some(image_name(image));
            r.size = Some(image.size());
            // The runtime decodes the image it loads; so does the report.
            let bytes = match image.decode(&registry.options().read) {
                Ok(b) => b,
                Err(e) => {
                    r.error = Some(format!("{}, at byte {}", e.what(), e.offset()));
                    out.push(r);
                    continue;
                }
            };
            r.sha256 = Some(sha256_hex(&bytes));
            if bound.is_empty() && options.device_entries {
                r.entries = device_kernels(&bytes)
                    .unwrap_or_default()
                    .iter()
                    .map(|k| EntryRecord {
                        name: String::from_utf8_lossy(k.name).into_owned(),
                        kind: "kernel".to_string(),
                        size: 0,
                        flags: 0,
                    })
                    .collect();
            }
        }
        if options.explain {
            r.rejected = Some(
                registry
                    .explain(reg, d)
                    .into_iter()
                    .map(|(i, reason)| Rejected {
                        image: images.get(i).map(image_name).unwrap_or_default(),
                        reason,
                    })
                    .collect(),
            );
        }
        out.push(r);
    }
    out
}
