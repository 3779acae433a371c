//! Reading input files: memory-mapped, so that only the pages a command touches are read.
//!
//! Two things keep the resident set small on big libraries (a 1.3 GB `.hip_fatbin`):
//! * the map is advised `MADV_RANDOM`, so a page fault reads only that page from disk
//!   instead of a read-around window (the walk jumps from header to header);
//! * [`Input::release`] drops the pages of a part the command has finished with from the
//!   process's page tables. Linux maps up to 16 neighbouring page-cache pages on every read
//!   fault ("fault-around"), so touching one page of each image of 111 bundles would
//!   otherwise keep about 55 MB mapped (and counted in the peak RSS) until exit.
//!
//! A file that another process truncates while it is mapped does not kill the command: the
//! map is guarded (`loader_sim_os::mapping`), the bytes past the new end read as zeros, and
//! the input remembers that it changed ([`Input::check`]). When an input is dropped, a
//! change is recorded for [`take_changed`], which `run_cli` turns into the command's error
//! (naming the file) instead of its result; output already stops at the first fault
//! (`run_cli`'s writer). A file whose length or modification time differs when it is
//! dropped from when it was opened is reported the same way. Docs: `RELIABILITY.md`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[cfg(unix)]
use memmap2::Advice;

use crate::Failure;

/// The bytes of an input file.
pub struct Input {
    bytes: Bytes,
    /// The file opened by [`Input::open`], for copying parts of it kernel-side.
    file: Option<File>,
    /// What the file was when opened, to tell whether it changed while read.
    watch: Watch,
}

/// Where an input's bytes are.
enum Bytes {
    /// An empty file.
    Empty,
    /// A guarded map.
    Mapped(loader_sim_os::mapping::Map),
    /// Read into memory (the map could not be guarded).
    Read(Vec<u8>),
}

/// The name, length and modification time of an input when it was opened.
struct Watch {
    name: PathBuf,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

/// Messages of inputs that changed while read, for [`take_changed`].
static CHANGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The inputs that changed while read since the last call (each a one-line message that
/// names the file), emptying the list.
pub fn take_changed() -> Vec<String> {
    CHANGED
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default()
}

impl Drop for Input {
    fn drop(&mut self) {
        if let Err(f) = self.check() {
            if let Ok(mut changed) = CHANGED.lock() {
                changed.push(f.message);
            }
        }
    }
}

/// Reads or maps `file` (of `len` bytes, not empty).
fn load(file: &File, len: u64, advice: Option<Advice>) -> std::io::Result<Bytes> {
    if let Some(map) = loader_sim_os::mapping::map_file(file)? {
        // Advice only; failure changes nothing but speed.
        #[cfg(unix)]
        if let Some(advice) = advice {
            let _ = map.mmap().advise(advice);
        }
        #[cfg(not(unix))]
        let _ = advice;
        return Ok(Bytes::Mapped(map));
    }
    // The map cannot be guarded: read the file (as it is now; a later change is seen by
    // `check`).
    use std::io::Read;
    let mut data = Vec::new();
    data.try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
    let reader = file;
    reader.take(len).read_to_end(&mut data)?;
    Ok(Bytes::Read(data))
}

#[cfg(not(unix))]
#[derive(Clone, Copy)]
/// Stands for `memmap2::Advice` where there is none.
enum Advice {
    Random,
    Sequential,
}

impl Input {
    /// Maps `path` read-only (an empty file is not mapped). Only a regular file is read:
    /// a FIFO, a device or a directory is an error at once (no read, no hang).
    pub fn open(path: &Path) -> Result<Self, Failure> {
        let file = offload_dropin::input::open_regular(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidInput => Failure::file(path, e),
            _ => Failure::file(path, format!("cannot open: {e}")),
        })?;
        let meta = file
            .metadata()
            .map_err(|e| Failure::file(path, format!("cannot stat: {e}")))?;
        let watch = Watch {
            name: path.to_path_buf(),
            len: meta.len(),
            modified: meta.modified().ok(),
        };
        if meta.len() == 0 {
            return Ok(Input {
                bytes: Bytes::Empty,
                file: None,
                watch,
            });
        }
        let bytes = load(&file, meta.len(), Some(Advice::Random))
            .map_err(|e| Failure::file(path, format!("cannot map: {e}")))?;
        Ok(Input {
            bytes,
            file: Some(file),
            watch,
        })
    }

    /// Maps an open file read-only, for reading it front to back (an empty file is not
    /// mapped); `name` names it in errors.
    pub fn from_file(file: &File, name: &str) -> std::io::Result<Self> {
        Self::from_open(file, name, Advice::Sequential)
    }

    fn from_open(file: &File, name: &str, advice: Advice) -> std::io::Result<Self> {
        let meta = file.metadata()?;
        let watch = Watch {
            name: PathBuf::from(name),
            len: meta.len(),
            modified: meta.modified().ok(),
        };
        let bytes = match meta.len() {
            0 => Bytes::Empty,
            len => load(file, len, Some(advice))?,
        };
        Ok(Input {
            bytes,
            file: None,
            watch,
        })
    }

    /// Maps a file this process has just written (a zip member decoded to a temporary
    /// file), for reading it as [`Input::open`] reads a file: page by page, where the
    /// reader goes.
    pub fn from_spilled(file: &File) -> std::io::Result<Self> {
        Self::from_open(
            file,
            "a decoded zip member (temporary file)",
            Advice::Random,
        )
    }

    /// Whether the file is still what it was when opened: `Err` naming it when it became
    /// shorter while mapped (the bytes read past its new end were zeros) or when its
    /// length or modification time changed since.
    pub fn check(&self) -> Result<(), Failure> {
        let name = &self.watch.name;
        if let Bytes::Mapped(map) = &self.bytes {
            if map.faulted() {
                return Err(Failure::file(
                    name,
                    "the file became shorter while it was read (another process truncated or \
                     rewrote it); nothing read from it is reported",
                ));
            }
        }
        let Some(file) = &self.file else {
            return Ok(());
        };
        match file.metadata() {
            Ok(m) if m.len() == self.watch.len && m.modified().ok() == self.watch.modified => {
                Ok(())
            }
            Ok(m) => Err(Failure::file(
                name,
                format!(
                    "the file changed while it was read ({} bytes when opened, {} now; \
                     another process rewrote it); nothing read from it is reported",
                    self.watch.len,
                    m.len()
                ),
            )),
            Err(e) => Err(Failure::file(name, format!("cannot stat: {e}"))),
        }
    }

    /// Copies `part`, a slice of [`Input::bytes`], from the file to `out` without reading
    /// it through the map (`copy_file_range` where the kernel offers it). `Ok(false)` when
    /// `part` is not a slice of the file.
    pub fn copy_part(&self, part: &[u8], out: &mut File) -> std::io::Result<bool> {
        use std::io::{Read, Seek, SeekFrom};
        let (Some(mut file), Some(off)) = (self.file.as_ref(), self.offset_of(part)) else {
            return Ok(false);
        };
        file.seek(SeekFrom::Start(off as u64))?;
        let len = part.len() as u64;
        let copied = std::io::copy(&mut file.take(len), out)?;
        if copied != len {
            return Err(std::io::Error::other("the input file became shorter"));
        }
        Ok(true)
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Empty => &[],
            Bytes::Mapped(map) => map,
            Bytes::Read(data) => data,
        }
    }

    /// The guarded map, when the bytes are mapped.
    fn map(&self) -> Option<&loader_sim_os::mapping::Map> {
        match &self.bytes {
            Bytes::Mapped(map) => Some(map),
            _ => None,
        }
    }

    /// Offset of `part` in the file, when it is a slice of [`Input::bytes`].
    pub fn offset_of(&self, part: &[u8]) -> Option<usize> {
        let all = self.bytes();
        let off = (part.as_ptr() as usize).checked_sub(all.as_ptr() as usize)?;
        (off.checked_add(part.len())? <= all.len()).then_some(off)
    }

    /// Announces that `part` (a slice of [`Input::bytes`]) will be read front to back:
    /// read-ahead for it, in place of the `MADV_RANDOM` of the whole map (a compressed
    /// payload is read sequentially; page by page it would take one disk read per 4 KiB).
    pub fn will_read(&self, part: &[u8]) {
        let (Some(map), Some(off)) = (self.map(), self.offset_of(part)) else {
            return;
        };
        #[cfg(not(unix))]
        let _ = (map, off);
        #[cfg(unix)]
        let _ = map.mmap().advise_range(Advice::Sequential, off, part.len());
        #[cfg(unix)]
        let _ = map.mmap().advise_range(Advice::WillNeed, off, part.len());
    }

    /// Drops the pages holding `part` (a slice of [`Input::bytes`]; anything else is
    /// ignored) from this process's page tables. The bytes stay readable: touching them
    /// again faults them back in from the page cache. Pages only partly covered by `part`
    /// are dropped too.
    pub fn release(&self, part: &[u8]) {
        let (Some(map), Some(off)) = (self.map(), self.offset_of(part)) else {
            return;
        };
        if part.is_empty() {
            return;
        }
        // Advice only: if it fails the pages just stay mapped.
        let _ = loader_sim_os::mapping::release(map, off, part.len());
    }

    /// Writes `len` bytes of the input from offset `at` to a new file at `path`.
    pub fn copy_to(&self, at: usize, len: usize, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let mut out = File::create(path)?;
        let part = self
            .bytes()
            .get(at..at.saturating_add(len))
            .ok_or_else(|| std::io::Error::other("range outside the input"))?;
        if part.len() >= 1 << 20 && self.copy_part(part, &mut out)? {
            return Ok(());
        }
        self.will_read(part);
        for chunk in part.chunks(CHUNK) {
            out.write_all(chunk)?;
            self.release(chunk);
        }
        Ok(())
    }
}

/// Bytes written per `write` call when copying out of the map.
const CHUNK: usize = 4 << 20;

impl offload_dropin::input::MappedInput for Input {
    fn bytes(&self) -> &[u8] {
        Input::bytes(self)
    }

    fn release(&self, part: &[u8]) {
        Input::release(self, part);
    }
}

/// The drop-in bundler's way of opening its inputs: mapped, read front to back.
pub fn map_for_tool(file: &File) -> std::io::Result<Box<dyn offload_dropin::input::MappedInput>> {
    Ok(Box::new(Input::from_file(file, "an -input file")?))
}
