//! The records of `select` (`CLI.md`): the choice in every unit of a file, each compressed
//! bundle streamed or opened by the library's rule ([`offload_image::stream::plan`]), or
//! in every `HIPK` wrapper of a split library (`KPACK.md`). `cmd::select` parses the
//! arguments, writes `-o` and prints them.

use std::path::Path;

use offload_image::select::Choice;
use offload_image::stream::{self as streaming, Plan, IDENTIFY_LEN};
use offload_image::{
    identify, units, Checked, Device, ErrorKind, Image, ReadOptions, SelectOptions, Unit,
};
use serde::Serialize;

use crate::decode::ZstdDecoder;
use crate::input::Input;
use crate::kpack::{isa_name, sentence, Library};
use crate::output::{arch_name, code_name, image_name, sha256_hex, Damaged, Skipped};
use crate::stream::{SinkError, Streamer, When};
use crate::Failure;

/// What `select` wants beyond the choice (its options other than the devices and the
/// selection options).
pub(crate) struct Wanted<'a> {
    /// Every image's verdict (`--explain`): units are opened, never streamed.
    pub(crate) explain: bool,
    /// The chosen images' SHA-256 (`--sha256`).
    pub(crate) sha256: bool,
    /// Where the one chosen image goes (`-o`).
    pub(crate) output: Option<&'a Path>,
    /// The zstd decoder.
    pub(crate) zstd: ZstdDecoder,
    /// Whether compressed bundles are decoded on a thread of their own.
    pub(crate) decode_thread: When,
    /// Units chosen in at once (`--jobs`, resolved: at least 1).
    pub(crate) jobs: usize,
}

/// One rejected (or outranked) image.
#[derive(Serialize)]
pub(crate) struct Rejected {
    pub(crate) image: String,
    pub(crate) reason: String,
}

/// One `select` record (field names are part of the CLI contract).
#[derive(Serialize)]
pub(crate) struct Record {
    pub(crate) container: String,
    pub(crate) bundle_index: usize,
    pub(crate) target: String,
    pub(crate) selected: Option<String>,
    /// What the selected image holds: `elf`, `cubin`, `ptx`, `bitcode`, `spirv`,
    /// `fatbinary` ([`crate::output::code_name`]).
    pub(crate) image_kind: Option<&'static str>,
    /// The selected image's architecture as the toolchain names it: `sm_86` for a cubin,
    /// `compute_86` for PTX (nvcc's virtual architecture), the target ID for AMDGPU code.
    pub(crate) arch: Option<String>,
    pub(crate) offset: Option<u64>,
    pub(crate) size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sha256: Option<String>,
    /// For a split library: where its code object came from, or why the loader gives
    /// none.
    #[serde(flatten)]
    pub(crate) split: Option<Split>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rejected: Option<Vec<Rejected>>,
    /// With `--explain`: the selected image's entry ID / arch and ELF header disagree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) disagreement: Option<String>,
    /// With `--explain`: bytes after this unit that were skipped (FORMATS.md §2.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) skipped: Option<Skipped>,
    /// What the runtime does beyond the choice: the CUDA driver refuses the PTX it picks
    /// (no fallback), or loads the chosen PTX only from its JIT cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) runtime_note: Option<String>,
}

/// The fields of a split library's record (`KPACK.md`): where the code object came from.
#[derive(Serialize)]
pub(crate) struct Split {
    /// The archive the code object was read from.
    pub(crate) archive: Option<String>,
    /// Its TOC key (`kernel_name#co_index`).
    pub(crate) toc_key: Option<String>,
    /// The loader's error code when it gives nothing.
    pub(crate) kpack_error: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// The archive paths the loader tried, in order, with whether each opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tried: Option<Vec<(String, bool)>>,
}

/// The image `-o` writes.
pub(crate) enum Selected {
    /// Stored uncompressed in the input: (offset, size).
    InFile(usize, usize),
    /// Decompressed.
    Owned(Vec<u8>),
    /// Already written while streaming a compressed bundle.
    Written,
}

/// What `select` found: a record per unit (or split-library wrapper) and target, the image
/// `-o` writes, and the damaged containers.
#[derive(Default)]
pub(crate) struct Found {
    pub(crate) records: Vec<Record>,
    pub(crate) output: Option<Selected>,
    pub(crate) damaged: Vec<Damaged>,
    /// The records are a split library's (`KPACK.md`): printed with their archives.
    pub(crate) split: bool,
    /// Warnings for standard error: units chosen in whose hash differs.
    pub(crate) warnings: Vec<String>,
}

impl Found {
    /// Appends the records, damaged containers and `-o` image of the next unit.
    fn merge(&mut self, part: Found) {
        self.records.extend(part.records);
        self.damaged.extend(part.damaged);
        self.warnings.extend(part.warnings);
        if part.output.is_some() {
            self.output = part.output;
        }
    }
}

/// Why each image other than the chosen one was not chosen.
fn reasons(choice: &Choice<'_>, options: &SelectOptions) -> Vec<Rejected> {
    choice
        .losses()
        .filter_map(|lost| {
            Some(Rejected {
                image: image_name(lost.image?),
                reason: lost.reason(options),
            })
        })
        .collect()
}

/// `select` on a split library: one record per `HIPK` wrapper and device, the code object
/// the loader takes from the archives on disk (with `explain`, the archive paths it
/// tried).
pub(crate) fn split(
    explain: bool,
    library: &Library<'_>,
    devices: &[(String, Device)],
    read: &ReadOptions,
) -> Found {
    let env = crate::kpack::Env::from_process();
    let mut archives = crate::kpack::Archives::default();
    let mut found = Found {
        split: true,
        ..Found::default()
    };
    for (name, device) in devices {
        let isa = isa_name(device);
        let arches: Vec<&str> = isa.as_deref().into_iter().collect();
        for r in library.resolve(&arches, &env, &mut archives, read) {
            let picked = r.outcome.as_ref().ok();
            let refused = r.outcome.as_ref().err();
            if let (Some(p), true) = (picked, found.records.is_empty()) {
                found.output = Some(Selected::Owned(p.code.clone()));
            }
            found.records.push(Record {
                container: format!("wrapper {}", r.wrapper),
                bundle_index: r.wrapper,
                target: name.clone(),
                selected: picked.map(|p| format!("amdgcn-amd-amdhsa--{}", p.target)),
                image_kind: picked.map(|_| "elf"),
                arch: picked.map(|p| p.target.clone()),
                offset: None,
                size: picked.map(|p| p.code.len() as u64),
                sha256: picked.map(|p| sha256_hex(&p.code)),
                split: Some(Split {
                    archive: picked.map(|p| p.archive.clone()),
                    toc_key: r.key.clone(),
                    kpack_error: refused.map(|e| e.error.code()),
                    reason: refused.map(|e| match &e.package {
                        Some(p) => format!("{}; install {p}", sentence(e)),
                        None => sentence(e),
                    }),
                    tried: explain.then(|| r.tried.clone()),
                }),
                rejected: None,
                disagreement: None,
                skipped: None,
                runtime_note: None,
            });
        }
    }
    found
}

/// The walk over the units of a file, choosing in each.
pub(crate) struct Walk<'a> {
    /// What is wanted beyond the choice.
    pub(crate) wanted: Wanted<'a>,
    /// The file.
    pub(crate) input: &'a Input,
    /// The devices, each with the text it was given.
    pub(crate) devices: &'a [(String, Device)],
    /// The devices alone, in the same order.
    pub(crate) targets: Vec<Device>,
    /// How to choose.
    pub(crate) options: SelectOptions,
    /// How to read.
    pub(crate) read: ReadOptions,
}

impl Walk<'_> {
    /// Chooses in every unit: a damaged container costs its unit only (reported, and the
    /// walk goes on). The units are found first (the walk reads headers only), then chosen
    /// in on [`Wanted::jobs`] threads ([`offload_image::parallel::map_ordered`]): each
    /// worker streams one compressed unit at a time, decoding and hashing it through one
    /// window, and the records come back in the units' order, as the serial walk gives
    /// them. `-o` (one unit) is chosen on the calling thread.
    pub(crate) fn run(&self) -> Result<Found, Failure> {
        let found: Vec<_> = units(self.input.bytes(), &self.read).collect();
        let mut all = Found::default();
        // One worker (`--jobs 1`, `-o`, or one unit): the units in turn on this thread,
        // each free to decode on a second thread.
        let jobs = self.wanted.jobs.min(found.len());
        if self.wanted.output.is_some() || jobs <= 1 {
            for unit in &found {
                let first = all.records.is_empty();
                all.merge(self.one(unit, first, true)?);
            }
            return Ok(all);
        }
        let parts =
            offload_image::parallel::map_ordered(&found, jobs, |_, u| self.one(u, false, false));
        for part in parts {
            all.merge(part?);
        }
        Ok(all)
    }

    /// Whether a compressed unit is decoded on a thread of its own: only when the units
    /// are chosen in one at a time (`serial`); with several workers each decodes and
    /// hashes its own unit on its own thread, the hash taken as the bytes come.
    fn decode_thread(&self, serial: bool) -> bool {
        serial && self.wanted.decode_thread.threaded(self.read.verify_hash)
    }

    /// The records of one unit (`-o` written for it when `first`), its bytes released from
    /// the map once done.
    fn one(
        &self,
        unit: &Result<Unit<'_>, offload_image::Error>,
        first: bool,
        serial: bool,
    ) -> Result<Found, Failure> {
        let mut found = Found::default();
        let unit = match unit {
            Ok(unit) => unit,
            Err(e) => {
                found.damaged.push(Damaged::outside(e));
                return Ok(found);
            }
        };
        if let Some(d) = unit.damage() {
            found.damaged.push(Damaged::unit(unit, &d.error));
            return Ok(found);
        }
        // The library's rule: a compressed bundle is streamed unless every verdict is
        // wanted.
        if let Plan::Stream(c) = streaming::plan(unit, self.wanted.explain) {
            match self.streamed(unit, c, first, serial, &mut found)? {
                Some(true) => {
                    if let Ok(done) = unit.bytes(&self.read) {
                        self.input.release(done);
                    }
                    return Ok(found);
                }
                Some(false) => return Ok(found),
                None => {}
            }
        }
        let read = ReadOptions {
            decoders: crate::decode::decoders_for(self.wanted.zstd, self.decode_thread(serial)),
            ..self.read
        };
        match unit.open(&read) {
            Ok(open) => self.opened(unit, &open, &read, first, None, &mut found),
            // The runtimes load a bundle whose hash differs (COMPATIBILITY.md §13): choose
            // in it as they do, and say so.
            Err(e) if e.kind() == ErrorKind::HashMismatch => {
                let read = ReadOptions {
                    verify_hash: false,
                    ..read
                };
                match unit.open(&read) {
                    Ok(open) => {
                        let note = self.mismatch(unit, &e, &mut found);
                        self.opened(unit, &open, &read, first, Some(note), &mut found);
                    }
                    Err(e) => found.damaged.push(Damaged::unit(unit, &e)),
                }
            }
            Err(e) => {
                found.damaged.push(Damaged::unit(unit, &e));
                return Ok(found);
            }
        }
        if let Ok(done) = unit.bytes(&read) {
            self.input.release(done);
        }
        Ok(found)
    }

    /// Chooses in compressed bundle `c` in one pass over its stream: `Some(true)` when
    /// recorded, `Some(false)` when damaged (recorded as such), `None` when the unit must
    /// be opened instead.
    fn streamed(
        &self,
        unit: &Unit<'_>,
        c: &offload_image::ccob::CompressedBundle<'_>,
        first: bool,
        serial: bool,
        found: &mut Found,
    ) -> Result<Option<bool>, Failure> {
        let args = &self.wanted;
        // The -o image of this unit, if -o applies to it (the first record).
        let out_path = args.output.filter(|_| first);
        self.input.will_read(c.payload());
        let streamed = Streamer {
            targets: &self.targets,
            options: &self.options,
            read: &self.read,
            zstd: args.zstd,
            threaded: self.decode_thread(serial),
            sha256: args.sha256,
            out_path,
        }
        .run(c);
        let (picks, mismatch) = match streamed {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(None),
            Err(SinkError::Read(e)) => {
                let e = e.rebase(unit.location.offset);
                found.damaged.push(Damaged::unit(unit, &e));
                return Ok(Some(false));
            }
            Err(SinkError::Io(e)) => {
                return Err(Failure::file(
                    args.output.unwrap_or(Path::new("-")),
                    format!("cannot write: {e}"),
                ))
            }
        };
        let note = mismatch.map(|e| self.mismatch(unit, &e.rebase(unit.location.offset), found));
        for ((given, _), pick) in self.devices.iter().zip(picks) {
            let identity = pick.as_ref().and_then(|p| p.identity());
            found.records.push(Record {
                container: unit.location.to_string(),
                bundle_index: unit.index,
                target: given.clone(),
                selected: pick.as_ref().map(|p| p.id.clone()),
                image_kind: identity.as_ref().map(code_name),
                arch: identity.as_ref().and_then(arch_name),
                offset: None,
                size: pick.as_ref().map(|p| p.size),
                sha256: pick.and_then(|p| p.sha256),
                split: None,
                rejected: None,
                disagreement: None,
                skipped: None,
                runtime_note: note.clone(),
            });
        }
        if out_path.is_some() {
            found.output = Some(Selected::Written);
        }
        Ok(Some(true))
    }

    /// The note of a compressed unit whose truncated MD5 differs from its header's
    /// (`e`, located in the file), which the runtimes load all the same
    /// (`COMPATIBILITY.md` §13), and its warning line on standard error.
    fn mismatch(&self, unit: &Unit<'_>, e: &offload_image::Error, found: &mut Found) -> String {
        let note = format!(
            "{e}: the runtimes load this bundle all the same (the choice stands; LLVM's \
             bundler checks the hash only with -verbose)"
        );
        found
            .warnings
            .push(format!("{} unit {}: {note}", unit.location, unit.index));
        note
    }

    /// Chooses among the images of an opened unit, in one pass for every device (images
    /// are identified from their headers).
    fn opened(
        &self,
        unit: &Unit<'_>,
        open: &offload_image::OpenUnit<'_>,
        read: &ReadOptions,
        first: bool,
        mismatch: Option<String>,
        found: &mut Found,
    ) {
        let args = &self.wanted;
        let images: Vec<Image<'_>> = open.images().collect();
        let choices = offload_image::choose(images.iter().copied(), &self.targets, &self.options);
        for ((given, _), choice) in self.devices.iter().zip(&choices) {
            let chosen = choice.chosen().and_then(|i| images.get(i));
            let made = match chosen.map(|img| self.make(img, read)).transpose() {
                Ok(b) => b,
                Err(e) => {
                    found.damaged.push(Damaged::unit(unit, &e));
                    continue;
                }
            };
            let chosen = chosen
                .zip(made.as_ref())
                .map(|(img, made)| img.with_checked(made));
            let chosen = chosen.as_ref();
            let explain = args.explain;
            found.records.push(Record {
                container: unit.location.to_string(),
                bundle_index: unit.index,
                target: given.clone(),
                selected: chosen.map(image_name),
                image_kind: chosen.map(|img| code_name(&identify(img))),
                arch: chosen.and_then(|img| arch_name(&identify(img))),
                offset: chosen.and_then(|img| open.offset_of(img)),
                size: chosen.map(|img| img.size()),
                sha256: chosen
                    .filter(|_| args.sha256)
                    .map(|img| sha256_hex(img.bytes)),
                split: None,
                rejected: explain.then(|| reasons(choice, &self.options)),
                disagreement: chosen
                    .filter(|_| explain)
                    .and_then(|img| identify(img).disagreement())
                    .map(|d| format!("{d}; the ELF header wins")),
                skipped: unit.skipped.clone().filter(|_| explain).map(Skipped::new),
                // With --explain the refused image's own line says it.
                runtime_note: mismatch.clone().or_else(|| {
                    runtime_note(choice).filter(|_| !(explain && choice.refused.is_some()))
                }),
            });
            if args.output.is_some() && first && found.records.len() == 1 {
                found.output = chosen.map(|img| match self.input.offset_of(img.bytes) {
                    Some(at) => Selected::InFile(at, img.bytes.len()),
                    None => Selected::Owned(img.bytes.to_vec()),
                });
            }
        }
    }

    /// The chosen image, checked as the runtime decodes the one it loads, so that a
    /// damaged entry is reported. Only `--sha256` and `-o` need its bytes; otherwise only
    /// its ELF header is made: an LZ4 stream is walked, not decoded (`Image::check`), and
    /// with `--no-verify-hash` read only as far as the header (`Image::peek`).
    fn make<'i>(
        &self,
        img: &Image<'i>,
        read: &ReadOptions,
    ) -> Result<Checked<'i>, offload_image::Error> {
        let whole = self.wanted.sha256 || self.wanted.output.is_some();
        match (whole, read.verify_hash) {
            (true, _) => img.decode(read).map(Checked::Whole),
            (false, true) => img.check(IDENTIFY_LEN, read),
            (false, false) => img.peek(IDENTIFY_LEN, read),
        }
    }
}

/// What the runtime does beyond the ranking, for the record's note.
fn runtime_note(choice: &Choice<'_>) -> Option<String> {
    match choice.rejection {
        Some((_, why @ offload_image::Rejection::Driver(_))) if choice.refused.is_some() => {
            Some(format!("nothing loads: {why}"))
        }
        _ => choice.from_jit_cache.then(|| {
            "CUDA_DISABLE_PTX_JIT is set: the driver loads this PTX only from its JIT cache \
             (compiled on an earlier run), else fails with CUDA_ERROR_JIT_COMPILATION_DISABLED"
                .to_string()
        }),
    }
}
