//! The lines of `list` (`CLI.md`): every image of a file in discovery order, as a record
//! with its container, format, compression, identity and hash; the damaged containers and
//! the bytes skipped between containers; for a split library, what its installed archives
//! hold (`KPACK.md`). `cmd::list` parses the arguments and prints them.

use offload_image::container::UnitContent;
use offload_image::{identify, Image, Unit};
use serde::Serialize;

use crate::input::Input;
use crate::output::{compression_name, sha256_hex, Damaged, Skipped};
use crate::Failure;

/// A line of `list` output: an image, or a note.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum Line {
    Image(Box<Record>),
    Skipped {
        container: String,
        bundle_index: usize,
        #[serde(flatten)]
        skipped: Skipped,
    },
    Damaged(Damaged),
}

/// One `list` record (field names are part of the CLI contract).
#[derive(Serialize)]
pub(crate) struct Record {
    pub(crate) container: String,
    pub(crate) bundle_index: usize,
    pub(crate) format: &'static str,
    pub(crate) compression: Option<&'static str>,
    pub(crate) ccob_version: Option<u16>,
    pub(crate) entry_id: Option<String>,
    pub(crate) offload_kind: Option<&'static str>,
    pub(crate) triple: Option<String>,
    pub(crate) target_id: Option<String>,
    pub(crate) image_kind: &'static str,
    /// The entry ID / arch and the ELF header name different targets (omitted otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) disagreement: Option<String>,
    pub(crate) offset: Option<u64>,
    pub(crate) size: u64,
    pub(crate) sha256: Option<String>,
    /// For a split library: the archive the code object is in (`offset` is in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<String>,
    /// For a split library: the TOC key of the wrapper's code object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) toc_key: Option<String>,
    /// For an AOTriton `.aks2` archive: the kernel's name (control characters escaped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kernel: Option<String>,
}

/// Where an image was found, as `CLI.md` spells it.
pub(crate) fn container_of(unit: &Unit<'_>, image: &Image<'_>) -> String {
    let base = unit.location.to_string();
    match (&unit.content, image.entry_id) {
        (UnitContent::ObjectBundle(_), Some(id)) => {
            let prefix = String::from_utf8_lossy(offload_image::raw::OBJECT_BUNDLE_PREFIX);
            let section = format!("section {prefix}{id}");
            if unit.location.path().is_empty() {
                section
            } else {
                format!("{base} / {section}")
            }
        }
        _ => base,
    }
}

/// The normalised triple and canonical target ID of an image (`offload_image::identify`):
/// the container's target in canonical form, or for a bare ELF (or an entry that names no
/// target) the one its ELF header gives. Invalid targets are printed as stored.
pub(crate) fn identity(image: &Image<'_>) -> (Option<String>, Option<String>) {
    let id = identify(image);
    let triple = id
        .triple
        .map(|t| t.to_string())
        .or_else(|| image.triple.map(str::to_string));
    let target = id.named_target().map(|t| t.to_string());
    (triple, target)
}

/// The lines of a split library: what its installed archives hold for its wrappers (with
/// `hash`, each code object's SHA-256).
pub(crate) fn split_lines(
    hash: bool,
    library: &crate::kpack::Library<'_>,
    options: &offload_image::ReadOptions,
    records: &mut Vec<Line>,
) -> Result<(), Failure> {
    let env = crate::kpack::Env::from_process();
    for l in library.listing(&env, options) {
        let code = l
            .code
            .map_err(|e| Failure::file(std::path::Path::new(&l.archive), e))?;
        records.push(Line::Image(Box::new(Record {
            container: format!("wrapper {}", l.wrapper),
            bundle_index: l.wrapper,
            format: offload_image::Format::Kpack.name(),
            compression: l.zstd.then_some("zstd"),
            ccob_version: None,
            entry_id: None,
            offload_kind: Some("hip"),
            triple: Some("amdgcn-amd-amdhsa".into()),
            target_id: Some(l.arch),
            image_kind: offload_image::ImageKind::sniff(&code).name(),
            disagreement: None,
            offset: l.offset,
            size: code.len() as u64,
            sha256: hash.then(|| sha256_hex(&code)),
            source: Some(l.archive),
            toc_key: Some(l.key),
            kernel: None,
        })));
    }
    Ok(())
}

/// The lines of one unit: its images (with `hash`, their SHA-256), or why it does not
/// read, and the bytes skipped after it.
pub(crate) fn unit_lines(
    hash: bool,
    input: &Input,
    unit: &Unit<'_>,
    options: &offload_image::ReadOptions,
    records: &mut Vec<Line>,
) {
    unit_lines_seeing(hash, input, unit, options, records, &mut Seeing::default());
}

/// What a caller of [`unit_lines_seeing`] sees besides the lines, in the same pass over
/// the unit (one decoding): every image as stored, once per opened unit (`all`), and each
/// image as listed (`each`, compressed PTX decoded).
#[derive(Default)]
pub(crate) struct Seeing<'f> {
    /// The opened unit's images, none decoded.
    pub(crate) all: Option<SeeAll<'f>>,
    /// Each image as listed.
    pub(crate) each: Option<&'f mut dyn FnMut(&Image<'_>)>,
}

/// [`Seeing::all`].
pub(crate) type SeeAll<'f> = &'f mut dyn FnMut(&[Image<'_>]);

/// [`unit_lines`], `seeing` shown the images on the way.
pub(crate) fn unit_lines_seeing(
    hash: bool,
    input: &Input,
    unit: &Unit<'_>,
    options: &offload_image::ReadOptions,
    records: &mut Vec<Line>,
    seeing: &mut Seeing<'_>,
) {
    if let Some(d) = unit.damage() {
        records.push(Line::Damaged(Damaged::unit(unit, &d.error)));
        return;
    }
    // Entries may all name one range (issue 43): each distinct range of the file or of the
    // unit's decompressed content is hashed once. Decoded images (`encoded`) live in
    // buffers of their own, which may reuse an address: they are never looked up.
    let mut hashed = HashCache::default();
    // An NVIDIA fatbinary's compressed entries are decoded one at a time into buffers that
    // may reuse an address (and come with `encoded` cleared): only its entries stored in
    // the file are looked up. Other units' images lie in the file or in the content the
    // unit decompressed once, which stays put while the unit is listed.
    let fatbin = matches!(unit.content, UnitContent::NvFatbin(_));
    let file = input.bytes();
    let in_file = |bytes: &[u8]| {
        let (start, end) = (file.as_ptr() as usize, file.as_ptr() as usize + file.len());
        let at = bytes.as_ptr() as usize;
        start <= at && at + bytes.len() <= end
    };
    // Without hashes, compressed entries are not decoded: what their headers say.
    let Seeing { all, each } = seeing;
    let see_all = |images: &[Image<'_>]| {
        if let Some(all) = all.as_mut() {
            all(images);
        }
    };
    let listed = crate::decode::for_each_image_seeing(unit, options, hash, see_all, |image| {
        if let Some(each) = each.as_mut() {
            each(image);
        }
        // Hashing reads the whole image: read ahead, and drop its pages afterwards so
        // that listing a 1.3 GB library does not keep it all mapped.
        let sha256 = hash.then(|| {
            let stable = image.encoded.is_none() && (!fatbin || in_file(image.bytes));
            hashed.get(stable, image.bytes, |bytes| {
                input.will_read(bytes);
                let sha256 = sha256_hex(bytes);
                input.release(bytes);
                sha256
            })
        });
        records.push(Line::Image(Box::new(image_record(unit, image, sha256))));
    });
    if let Err(e) = listed {
        records.push(Line::Damaged(Damaged::unit(unit, &e)));
    }
    if let UnitContent::NvFatbin(f) = &unit.content {
        // Decoding read the compressed entries: drop their pages too.
        input.release(f.bytes());
    }
    if let Some(r) = unit.skipped.clone() {
        records.push(Line::Skipped {
            container: unit.location.to_string(),
            bundle_index: unit.index,
            skipped: Skipped::new(r),
        });
    }
}

/// The SHA-256 of the ranges of one unit already hashed, by (address, length): entries
/// that name one range (a bundle or OffloadBinary whose entries alias one image) cost one
/// hash, so `list` is linear in the input (docs/RELIABILITY.md, issue 43).
#[derive(Default)]
pub(crate) struct HashCache {
    seen: std::collections::HashMap<(usize, usize), String>,
}

impl HashCache {
    /// The hash of `bytes`: `hash(bytes)` the first time a range is seen, the recorded
    /// value afterwards. `stable`: `bytes` stay where they are for the whole unit (a slice
    /// of the file or of the unit's content); other ranges are always hashed.
    pub(crate) fn get(
        &mut self,
        stable: bool,
        bytes: &[u8],
        hash: impl FnOnce(&[u8]) -> String,
    ) -> String {
        if !stable {
            return hash(bytes);
        }
        self.seen
            .entry((bytes.as_ptr() as usize, bytes.len()))
            .or_insert_with(|| hash(bytes))
            .clone()
    }
}

/// The record of `image` of `unit`.
fn image_record(unit: &Unit<'_>, image: &Image<'_>, sha256: Option<String>) -> Record {
    let stored = image.encoded.is_some();
    let (triple, target_id) = identity(image);
    let fatbin = matches!(unit.content, UnitContent::NvFatbin(_));
    Record {
        container: container_of(unit, image),
        bundle_index: unit.index,
        format: image.format.name(),
        compression: compression_name(unit, image),
        ccob_version: unit.compressed().map(|c| c.version()),
        entry_id: image.entry_id.map(str::to_string),
        offload_kind: match image.format {
            offload_image::Format::Elf if !fatbin => None,
            _ => Some(image.offload_kind.name()),
        },
        triple,
        target_id,
        image_kind: image.image_kind.name(),
        disagreement: (!stored)
            .then(|| identify(image).disagreement().map(|d| d.to_string()))
            .flatten(),
        offset: image
            .offset
            .or_else(|| (!stored).then(|| unit.offset_of(image.bytes)).flatten()),
        size: image.size(),
        sha256,
        source: None,
        toc_key: None,
        kernel: None,
    }
}
