//! Reading input files: memory-mapped, so that only the pages a command touches are read.
//!
//! Two things keep the resident set small on big libraries (a 1.3 GB `.hip_fatbin`):
//! * the map is advised `MADV_RANDOM`, so a page fault reads only that page from disk
//!   instead of a read-around window (the walk jumps from header to header);
//! * [`Input::release`] drops the pages of a part the command has finished with from the
//!   process's page tables. Linux maps up to 16 neighbouring page-cache pages on every read
//!   fault ("fault-around"), so touching one page of each image of 111 bundles would
//!   otherwise keep about 55 MB mapped (and counted in the peak RSS) until exit.

use std::fs::File;
use std::path::Path;

#[cfg(unix)]
use memmap2::Advice;

use crate::Failure;

/// The bytes of an input file.
pub struct Input {
    map: Option<loader_sim_os::mapping::Mmap>,
    /// The file opened by [`Input::open`], for copying parts of it kernel-side.
    file: Option<File>,
}

impl Input {
    /// Maps `path` read-only (an empty file is not mapped).
    pub fn open(path: &Path) -> Result<Self, Failure> {
        let file =
            File::open(path).map_err(|e| Failure::file(path, format!("cannot open: {e}")))?;
        let len = file
            .metadata()
            .map_err(|e| Failure::file(path, format!("cannot stat: {e}")))?
            .len();
        if len == 0 {
            return Ok(Input {
                map: None,
                file: None,
            });
        }
        let map = loader_sim_os::mapping::map_file(&file)
            .map_err(|e| Failure::file(path, format!("cannot map: {e}")))?;
        // Advice only; failure changes nothing but speed.
        #[cfg(unix)]
        let _ = map.advise(Advice::Random);
        Ok(Input {
            map: Some(map),
            file: Some(file),
        })
    }

    /// Maps an open file read-only, for reading it front to back (an empty file is not
    /// mapped).
    pub fn from_file(file: &File) -> std::io::Result<Self> {
        if file.metadata()?.len() == 0 {
            return Ok(Input {
                map: None,
                file: None,
            });
        }
        let map = loader_sim_os::mapping::map_file(file)?;
        #[cfg(unix)]
        let _ = map.advise(Advice::Sequential);
        Ok(Input {
            map: Some(map),
            file: None,
        })
    }

    /// Maps a file this process has just written (a zip member decoded to a temporary
    /// file), for reading it as [`Input::open`] reads a file: page by page, where the
    /// reader goes.
    pub fn from_spilled(file: &File) -> std::io::Result<Self> {
        let input = Input::from_file(file)?;
        #[cfg(unix)]
        if let Some(map) = &input.map {
            let _ = map.advise(Advice::Random);
        }
        Ok(input)
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
        self.map.as_deref().unwrap_or(&[])
    }

    /// Offset of `part` in the file, when it is a slice of [`Input::bytes`].
    pub fn offset_of(&self, part: &[u8]) -> Option<usize> {
        let map = self.map.as_deref()?;
        let off = (part.as_ptr() as usize).checked_sub(map.as_ptr() as usize)?;
        (off.checked_add(part.len())? <= map.len()).then_some(off)
    }

    /// Announces that `part` (a slice of [`Input::bytes`]) will be read front to back:
    /// read-ahead for it, in place of the `MADV_RANDOM` of the whole map (a compressed
    /// payload is read sequentially; page by page it would take one disk read per 4 KiB).
    pub fn will_read(&self, part: &[u8]) {
        let (Some(map), Some(off)) = (&self.map, self.offset_of(part)) else {
            return;
        };
        #[cfg(not(unix))]
        let _ = (map, off);
        #[cfg(unix)]
        let _ = map.advise_range(Advice::Sequential, off, part.len());
        #[cfg(unix)]
        let _ = map.advise_range(Advice::WillNeed, off, part.len());
    }

    /// Drops the pages holding `part` (a slice of [`Input::bytes`]; anything else is
    /// ignored) from this process's page tables. The bytes stay readable: touching them
    /// again faults them back in from the page cache. Pages only partly covered by `part`
    /// are dropped too.
    pub fn release(&self, part: &[u8]) {
        let (Some(map), Some(off)) = (&self.map, self.offset_of(part)) else {
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
    Ok(Box::new(Input::from_file(file)?))
}
