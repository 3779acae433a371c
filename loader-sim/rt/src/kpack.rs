//! Split host libraries (`KPACK.md`): what rocm-kpack's loader finds on disk for each
//! `HIPK` wrapper and device. The library reads the wrappers and ref records
//! ([`offload_image::host::kpack::split_wrappers`]) and models the loader's choices
//! ([`candidate_paths`], [`find_entry`]); this module gives them the filesystem: the
//! library's canonical directory, the `ROCM_KPACK_*` variables of the process, and the
//! archive files.

use std::collections::HashMap;
use std::path::Path;

use offload_image::host::kpack::{hipk_slots, is_split, split_wrappers, SplitWrapper};
use offload_image::host::HostFile;
use offload_image::kpack::{
    candidate_paths, find_entry, resolve_embedded, split_path_list, Compression, KpackArchive,
    LoaderEnv, LoaderError, GFXARCH_PLACEHOLDER,
};
use offload_image::registration::device_kernels;
use offload_image::{Device, ReadOptions};

use crate::report::{sha256_hex, EntryRecord, Record};

/// The `ROCM_KPACK_*` variables of this process, as the loader reads them.
pub struct Env {
    path: Option<String>,
    path_prefix: Option<String>,
    disable: Option<String>,
}

impl Env {
    /// Reads the variables.
    pub fn from_process() -> Self {
        let var = |n: &str| std::env::var(n).ok();
        Env {
            path: var("ROCM_KPACK_PATH"),
            path_prefix: var("ROCM_KPACK_PATH_PREFIX"),
            disable: var("ROCM_KPACK_DISABLE"),
        }
    }

    fn loader(&self) -> LoaderEnv<'_> {
        LoaderEnv::linux(
            self.path.as_deref(),
            self.path_prefix.as_deref(),
            self.disable.as_deref(),
        )
    }
}

/// Most bytes of a table of contents read from an archive file (64 MiB): the TOC runs
/// from the header's offset to the end of the file, so an archive whose header points near
/// its start would otherwise be read whole. A real TOC is a few megabytes at most.
pub const MAX_TOC: u64 = 64 << 20;

/// The archive files read so far: `None` where the loader's `kpack_open` would fail (not a
/// regular file, unreadable, or not an archive that parses).
///
/// An archive on disk is read by its table of contents, never whole: its header, the TOC
/// (at most [`MAX_TOC`] bytes), for `zstd-per-kernel` the frame sizes of its index, and
/// then only the code object asked for, with bounded reads
/// ([`KpackArchive::parse_toc`]). The files of a [`FileSource`] (the members of a set of
/// wheels, read as if they were installed) are held whole.
#[derive(Default)]
pub struct Archives<'s> {
    files: HashMap<String, Result<Loaded, String>>,
    source: Option<&'s dyn FileSource>,
}

/// Where archive files come from when they are not on disk (the members of a wheel): the
/// regular file at a path, opened for reading (for a compressed member, a temporary copy),
/// `None` when there is none, an error saying why it could not be had. The archive is then
/// read by its TOC, as one on disk.
pub trait FileSource: Sync {
    /// The file at `path`.
    fn open(&self, path: &str) -> Option<Result<std::fs::File, String>>;
}

/// An archive file that opened, read by its TOC: the open file and what was read of it.
pub enum Loaded {
    /// Read by its TOC.
    Toc(TocFile),
}

/// An archive on disk read by its table of contents.
pub struct TocFile {
    file: std::fs::File,
    len: u64,
    toc_offset: u64,
    toc: Vec<u8>,
    /// The 4-byte words of a `zstd-per-kernel` frame index read so far, by offset: the
    /// index is read once, however often the archive is parsed.
    words: std::cell::RefCell<HashMap<u64, [u8; 4]>>,
}

/// Fills `buf` from `file` at `offset`; false when the file has not that many bytes there.
fn read_at(file: &std::fs::File, offset: u64, buf: &mut [u8]) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(offset)).is_ok() && f.read_exact(buf).is_ok()
}

impl TocFile {
    /// Opens the archive at `path` and reads its header and TOC: an error says why the
    /// loader's `kpack_open` would fail (not a regular file, unreadable, not an archive, a
    /// TOC over [`MAX_TOC`] bytes).
    pub fn open(path: &str, limits: &offload_image::Limits) -> Result<TocFile, String> {
        let file = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
        TocFile::from_file(file, limits)
    }

    /// [`TocFile::open`] on a file already open.
    pub fn from_file(
        file: std::fs::File,
        limits: &offload_image::Limits,
    ) -> Result<TocFile, String> {
        let meta = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
        if !meta.is_file() {
            return Err("not a regular file".into());
        }
        let len = meta.len();
        let mut header = [0u8; 16];
        let got = usize::try_from(len).map_or(16, |l| l.min(16));
        if !read_at(&file, 0, &mut header[..got]) {
            return Err("cannot read the header".into());
        }
        let toc_offset =
            KpackArchive::toc_offset_of(&header[..got], len).map_err(|e| e.to_string())?;
        let toc_len = len - toc_offset;
        if toc_len > MAX_TOC {
            return Err(format!(
                "the TOC at byte {toc_offset} runs {toc_len} bytes to the end of the file, over the {MAX_TOC}-byte bound of this reader"
            ));
        }
        let mut toc = vec![0u8; toc_len as usize];
        if !read_at(&file, toc_offset, &mut toc) {
            return Err(format!(
                "cannot read the TOC at byte {toc_offset} (the file changed while read)"
            ));
        }
        let f = TocFile {
            file,
            len,
            toc_offset,
            toc,
            words: Default::default(),
        };
        f.parse(limits).map_err(|e| e.to_string())?;
        Ok(f)
    }

    /// Parses the TOC read ([`KpackArchive::parse_toc`]).
    pub fn parse(&self, limits: &offload_image::Limits) -> offload_image::Result<KpackArchive<'_>> {
        let mut read = |at: u64, buf: &mut [u8]| -> bool {
            if buf.len() != 4 {
                return read_at(&self.file, at, buf);
            }
            let mut words = self.words.borrow_mut();
            if let Some(w) = words.get(&at) {
                buf.copy_from_slice(w);
                return true;
            }
            let ok = read_at(&self.file, at, buf);
            if ok {
                let mut w = [0u8; 4];
                w.copy_from_slice(buf);
                words.insert(at, w);
            }
            ok
        };
        KpackArchive::parse_toc(&self.toc, self.toc_offset, self.len, &mut read, limits)
    }

    /// The code object of `entry` of `archive` (parsed from this file), read now.
    pub fn code_object(
        &self,
        archive: &KpackArchive<'_>,
        entry: &offload_image::kpack::KpackEntry<'_>,
        options: &ReadOptions,
    ) -> Result<Vec<u8>, (LoaderError, offload_image::Error)> {
        archive.code_object_read(entry, &mut |at, buf| read_at(&self.file, at, buf), options)
    }
}

impl Loaded {
    /// Parses the archive (the whole file, or its TOC).
    fn parse(&self, limits: &offload_image::Limits) -> Option<KpackArchive<'_>> {
        match self {
            Loaded::Toc(f) => f.parse(limits).ok(),
        }
    }
}

impl<'s> Archives<'s> {
    /// Archives read from `source` instead of the filesystem.
    pub fn from_source(source: &'s dyn FileSource) -> Self {
        Archives {
            files: HashMap::new(),
            source: Some(source),
        }
    }

    fn load(&mut self, path: &str, options: &ReadOptions) -> bool {
        let source = self.source;
        self.files
            .entry(path.to_string())
            .or_insert_with(|| match source {
                Some(s) => {
                    let file = s.open(path).ok_or_else(|| "no such file".to_string())??;
                    TocFile::from_file(file, &options.limits).map(Loaded::Toc)
                }
                None => TocFile::open(path, &options.limits).map(Loaded::Toc),
            })
            .is_ok()
    }

    /// Why the archive at `path` did not open, when it was tried and exists.
    fn why_not(&self, path: &str) -> Option<&str> {
        match self.files.get(path)? {
            Err(e) if !e.starts_with("cannot open") && e != "no such file" => Some(e),
            _ => None,
        }
    }
}

impl Archives<'_> {
    /// The code object the loader takes for the TOC key `key` and the ISA names `arches`
    /// from the archives at `paths` (in the loader's order, loaded already), as the
    /// library's model of the loader finds it ([`find_entry`]); else its error code, with
    /// what was expected and what was found.
    fn find(
        &self,
        paths: &[String],
        arches: &[&str],
        key: &str,
        options: &ReadOptions,
    ) -> Result<Picked, Refusal> {
        let loaded: Vec<Option<&Loaded>> = paths
            .iter()
            .map(|p| self.files.get(p).and_then(|l| l.as_ref().ok()))
            .collect();
        let parsed: Vec<Option<KpackArchive<'_>>> = loaded
            .iter()
            .map(|l| l.and_then(|l| l.parse(&options.limits)))
            .collect();
        let found = match find_entry(&parsed, arches, key) {
            Err(e) => return Err(refusal(LoaderError::InvalidArgument, e.to_string())),
            Ok(Err(error)) => return Err(self.miss(error, paths, &parsed, arches, key)),
            Ok(Ok(found)) => found,
        };
        let path = paths.get(found.archive).cloned().unwrap_or_default();
        let archive = parsed.get(found.archive).and_then(Option::as_ref);
        let file = loaded.get(found.archive).copied().flatten();
        let code = archive.zip(file).map(|(a, l)| match l {
            Loaded::Toc(f) => f.code_object(a, found.entry, options),
        });
        match code {
            Some(Ok(code)) => Ok(Picked {
                archive: path,
                target: found.target.clone(),
                code,
            }),
            Some(Err((code, e))) => Err(refusal(code, format!("{path}: {e}"))),
            None => Err(refusal(LoaderError::IoError, String::new())),
        }
    }

    /// The loader's `error` when it finds no entry, with the details: the archive expected
    /// (and why those there did not open), the architectures the archives have, or the
    /// key missing; and for 13 and 14 the device package that carries the archive.
    fn miss(
        &self,
        error: LoaderError,
        paths: &[String],
        parsed: &[Option<KpackArchive<'_>>],
        arches: &[&str],
        key: &str,
    ) -> Refusal {
        let detail = match error {
            LoaderError::ArchiveNotFound => {
                let mut d = format!(
                    "expected {}",
                    offload_image::kpack::expected_archives(
                        paths,
                        arches.first().copied().unwrap_or_default()
                    )
                    .unwrap_or_else(|| "an archive (the ref record names no path)".into())
                );
                // Archives that are there but did not open: why.
                for p in paths {
                    if let Some(why) = self.why_not(p) {
                        d.push_str(&format!("; {p} does not open: {why}"));
                    }
                }
                d
            }
            LoaderError::ArchNotFound => {
                let mut found: Vec<String> = paths
                    .iter()
                    .zip(parsed)
                    .filter_map(|(p, a)| {
                        let a = a.as_ref()?;
                        Some(format!("{p} has gfx_arches {}", a.gfx_arches().join(", ")))
                    })
                    .collect();
                found.dedup();
                found.join("; ")
            }
            LoaderError::KernelNotFound => format!("no TOC entry {key}"),
            _ => String::new(),
        };
        let package = matches!(
            error,
            LoaderError::ArchiveNotFound | LoaderError::ArchNotFound
        )
        .then(|| arches.first().map(|a| device_package(a)))
        .flatten();
        Refusal {
            error,
            detail,
            package,
        }
    }
}

/// A refusal without a device package.
fn refusal(error: LoaderError, detail: String) -> Refusal {
    Refusal {
        error,
        detail,
        package: None,
    }
}

impl Resolution {
    /// Wrapper `wrapper` (TOC key `key`) refused for `why`, nothing tried.
    fn refused(wrapper: usize, key: Option<String>, why: Refusal) -> Self {
        Resolution {
            wrapper,
            key,
            tried: Vec::new(),
            outcome: Err(why),
        }
    }
}

/// What the loader gives one wrapper for one device.
pub struct Resolution {
    /// The wrapper's index among the library's `HIPK` wrappers.
    pub wrapper: usize,
    /// The TOC key (`kernel_name#co_index`); `None` when the ref record does not read.
    pub key: Option<String>,
    /// The candidate archive paths in order, and whether each opened.
    pub tried: Vec<(String, bool)>,
    /// The answer.
    pub outcome: Result<Picked, Refusal>,
}

/// A code object of an installed archive, for one wrapper ([`Library::listing`]).
pub struct Listed {
    /// The wrapper's index.
    pub wrapper: usize,
    /// The TOC key.
    pub key: String,
    /// The archive's path.
    pub archive: String,
    /// The TOC architecture.
    pub arch: String,
    /// Stored as a zstd frame.
    pub zstd: bool,
    /// Offset of a plain blob in the archive.
    pub offset: Option<u64>,
    /// The code object, or why it does not read (an offset in the archive).
    pub code: Result<Vec<u8>, offload_image::Error>,
}

/// The code object the loader takes.
pub struct Picked {
    /// The archive's path.
    pub archive: String,
    /// The architecture of the TOC entry.
    pub target: String,
    /// The code object.
    pub code: Vec<u8>,
}

/// Why the loader gives nothing.
pub struct Refusal {
    /// The loader's code.
    pub error: LoaderError,
    /// A sentence with the details (the archive expected, the architectures found, the
    /// located read error).
    pub detail: String,
    /// The device package that would carry the archive, for 13 and 14.
    pub package: Option<String>,
}

/// A split library: its canonical directory and its `HIPK` wrappers.
pub struct Library<'d> {
    dir: String,
    wrappers: Vec<Result<SplitWrapper<'d>, (LoaderError, offload_image::Error)>>,
    /// The virtual address of each `HIPK` wrapper, in the same order.
    addresses: Vec<u64>,
}

impl<'d> Library<'d> {
    /// The split library in `data` (the file at `path`), or `None` when it has no `HIPK`
    /// wrapper.
    pub fn open(path: &Path, data: &'d [u8]) -> Option<Self> {
        let host = HostFile::parse(data).ok()?;
        if !is_split(&host) {
            return None;
        }
        // The loader resolves the ref's paths against the library's real path.
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = real
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let addresses = hipk_slots(&host).iter().map(|slot| slot.address).collect();
        Some(Library {
            dir,
            wrappers: split_wrappers(&host),
            addresses,
        })
    }

    /// The split library in `data` as if its real directory were `dir` (a library inside a
    /// wheel: `dir` is where it would be installed), or `None` when it has no `HIPK`
    /// wrapper.
    pub fn open_in(dir: String, data: &'d [u8]) -> Option<Self> {
        let mut library = Library::open(Path::new(""), data)?;
        library.dir = dir;
        Some(library)
    }

    /// Number of `HIPK` wrappers.
    pub fn wrappers(&self) -> usize {
        self.wrappers.len()
    }

    /// The archive files installed for the wrappers, whatever the device: each ref search
    /// path resolved against the library's directory, with `@GFXARCH@` matched against the
    /// file names of its directory (every architecture), or the `ROCM_KPACK_PATH` items
    /// (replacing them) and the `ROCM_KPACK_PATH_PREFIX` items (before them), that are
    /// regular files; sorted within each search path, each listed once.
    pub fn installed(&self, search_paths: &[&str], env: &Env) -> Vec<String> {
        let loader = env.loader();
        let items = |v: &Option<String>| -> Vec<String> {
            v.as_deref()
                .map(|v| {
                    split_path_list(v, loader.separator)
                        .into_iter()
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let path_items = items(&env.path);
        let mut out: Vec<String> = Vec::new();
        let mut push = |p: String| {
            if std::fs::metadata(&p).is_ok_and(|m| m.is_file()) && !out.contains(&p) {
                out.push(p);
            }
        };
        if !path_items.is_empty() {
            path_items.into_iter().for_each(&mut push);
            return out;
        }
        items(&env.path_prefix).into_iter().for_each(&mut push);
        for sp in search_paths {
            let resolved = resolve_embedded(&self.dir, sp);
            let Some((before, after)) = resolved.split_once(GFXARCH_PLACEHOLDER) else {
                push(resolved);
                continue;
            };
            let (dir, prefix) = before.rsplit_once('/').unwrap_or((".", before));
            let Ok(entries) = std::fs::read_dir(if dir.is_empty() { "/" } else { dir }) else {
                continue;
            };
            let mut found: Vec<String> = entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| {
                    n.len() > prefix.len() + after.len()
                        && n.starts_with(prefix)
                        && n.ends_with(after)
                })
                .map(|n| format!("{dir}/{n}"))
                .collect();
            found.sort();
            found.into_iter().for_each(&mut push);
        }
        out
    }

    /// Per wrapper whose ref record reads: its index, the file offset of the ref record and
    /// the installed archives ([`Library::installed`]).
    pub fn installed_per_wrapper(&self, env: &Env) -> Vec<(usize, u64, Vec<String>)> {
        self.wrappers
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let w = w.as_ref().ok()?;
                Some((
                    i,
                    w.ref_offset,
                    self.installed(&w.reference.search_paths, env),
                ))
            })
            .collect()
    }

    /// Every code object the installed archives ([`Library::installed`]) hold for the
    /// wrappers: per wrapper, per archive, its TOC entries for the wrapper's key.
    pub fn listing(&self, env: &Env, options: &ReadOptions) -> Vec<Listed> {
        let mut out = Vec::new();
        let mut files: HashMap<String, Option<TocFile>> = HashMap::new();
        for (i, w) in self.wrappers.iter().enumerate() {
            let Ok(w) = w else { continue };
            for path in self.installed(&w.reference.search_paths, env) {
                let file = files
                    .entry(path.clone())
                    .or_insert_with(|| TocFile::open(&path, &options.limits).ok());
                let Some(file) = file.as_ref() else {
                    continue;
                };
                let Ok(archive) = file.parse(&options.limits) else {
                    continue;
                };
                for e in archive.entries().filter(|e| e.binary_key == w.lookup_key) {
                    out.push(Listed {
                        wrapper: i,
                        key: w.lookup_key.clone(),
                        archive: path.clone(),
                        arch: e.arch.to_string(),
                        zstd: archive.compression() == Compression::ZstdPerKernel,
                        // A plain blob's offset in the archive.
                        offset: match archive.stored_range(e) {
                            Ok((offset, _, false)) => Some(offset),
                            _ => None,
                        },
                        code: file.code_object(&archive, e, options).map_err(|(_, e)| e),
                    });
                }
            }
        }
        out
    }

    /// What the loader gives each wrapper for the ISA names `arches` (in the runtime's
    /// order).
    pub fn resolve(
        &self,
        arches: &[&str],
        env: &Env,
        archives: &mut Archives<'_>,
        options: &ReadOptions,
    ) -> Vec<Resolution> {
        (0..self.wrappers.len())
            .map(|i| self.resolve_wrapper(i, arches, env, archives, options))
            .collect()
    }

    /// What the loader gives wrapper `i` ([`Library::wrapper_at`]) for the ISA names
    /// `arches`: the candidate archive paths ([`candidate_paths`]), each opened once
    /// ([`Archives`]), and the entry the loader takes from them (`Archives::find`).
    pub fn resolve_wrapper(
        &self,
        i: usize,
        arches: &[&str],
        env: &Env,
        archives: &mut Archives<'_>,
        options: &ReadOptions,
    ) -> Resolution {
        let loader = env.loader();
        let w = match self.wrappers.get(i) {
            None => {
                return Resolution::refused(
                    i,
                    None,
                    refusal(LoaderError::InvalidArgument, "no such wrapper".into()),
                )
            }
            Some(Err((code, e))) => {
                return Resolution::refused(i, None, refusal(*code, e.to_string()))
            }
            Some(Ok(w)) => w,
        };
        let disabled = refusal(
            LoaderError::NotImplemented,
            "ROCM_KPACK_DISABLE is set".into(),
        );
        let mut r = Resolution::refused(i, Some(w.lookup_key.clone()), disabled);
        if loader.disabled() {
            return r;
        }
        let candidates =
            match candidate_paths(&self.dir, &w.reference.search_paths, arches, &loader) {
                Ok(c) => c,
                Err(e) => {
                    r.outcome = Err(refusal(LoaderError::InvalidArgument, e.to_string()));
                    return r;
                }
            };
        let paths: Vec<String> = candidates.into_iter().map(|c| c.path).collect();
        for path in &paths {
            let opened = archives.load(path, options);
            r.tried.push((path.clone(), opened));
        }
        r.outcome = archives.find(&paths, arches, &w.lookup_key, options);
        r
    }

    /// The address of wrapper `i`'s ref record (what its pointer holds), when it reads.
    pub fn ref_address(&self, i: usize) -> Option<u64> {
        self.wrappers.get(i)?.as_ref().ok().map(|w| w.ref_address)
    }

    /// The index of the `HIPK` wrapper at virtual address `address` of the library.
    pub fn wrapper_at(&self, address: u64) -> Option<usize> {
        self.addresses.iter().position(|a| *a == address)
    }
}

/// The ISA name the HIP runtime passes for a device (`amdgcn-amd-amdhsa--gfx90a:xnack+`),
/// or `None` for a device that is not an AMD GPU.
pub fn isa_name(device: &Device) -> Option<String> {
    match device {
        Device::Amdgpu(t) => Some(format!("amdgcn-amd-amdhsa--{t}")),
        _ => None,
    }
}

/// The TheRock device package that carries the archives of an architecture:
/// `rocm-sdk-device-<processor>`.
pub fn device_package(isa: &str) -> String {
    let target = offload_image::kpack::strip_target_prefix(isa);
    let processor = target.split(':').next().unwrap_or(target);
    format!("rocm-sdk-device-{processor}")
}

/// The refusal as one sentence: `kpack error 13 (...): meaning (detail)`.
pub fn sentence(r: &Refusal) -> String {
    if r.detail.is_empty() {
        r.error.to_string()
    } else {
        format!("{} ({})", r.error, r.detail)
    }
}

/// The `register` record of a `HIPK` wrapper for one device: the code object the loader
/// gives (its kernels as the entries when `device_entries`), or the loader's error.
pub fn record(
    resolution: &Resolution,
    device: &str,
    unit: &str,
    address: u64,
    device_entries: bool,
) -> Record {
    let mut r = Record {
        device: Some(device.to_string()),
        unit: unit.to_string(),
        registration: "hip".to_string(),
        address,
        selected: None,
        size: None,
        sha256: None,
        entries: Vec::new(),
        entries_from: if device_entries {
            "device-image"
        } else {
            "registration"
        }
        .to_string(),
        rejected: None,
        error: None,
        unregistered: None,
        link_inputs: None,
    };
    match &resolution.outcome {
        Ok(p) => {
            r.selected = Some(format!("amdgcn-amd-amdhsa--{}", p.target));
            r.size = Some(p.code.len() as u64);
            r.sha256 = Some(sha256_hex(&p.code));
            if device_entries {
                r.entries = device_kernels(&p.code)
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
        Err(e) => {
            let mut reason = sentence(e);
            if let Some(p) = &e.package {
                reason.push_str(&format!("; install {p}"));
            }
            r.error = Some(reason);
        }
    }
    r
}
