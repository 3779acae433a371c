//! Zip files (Python wheels) read member by member without unpacking them.
//!
//! A stored member is a range of the mapped zip file and is read in place. A deflated
//! member is decoded as a stream into an unlinked temporary file (under `TMPDIR`), which
//! is then mapped like any input file ([`Input`]): the readers need random access (an ELF
//! file's section table is at its end; the registration wrappers and the relocations that
//! fill their pointers are in other sections than the containers they point at), so the
//! member is spilled to disk rather than held in memory. What stays resident is the
//! decoder's window and buffers plus the pages the reader touches, which it drops as it
//! goes ([`Input::release`]); the written pages are the kernel's page cache, not the
//! process's memory. Decoding twice to keep only the needed ranges (first the ELF header
//! and section table, then the sections) would cost two inflations of every member whose
//! sections are read, which is the whole time of the job: one inflation plus one write is
//! what `unzip` itself does.
//!
//! Only members whose first bytes pass the caller's test are decoded past those bytes.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::input::Input;

/// Bytes decoded per read while spilling a member.
const CHUNK: usize = 1 << 20;

/// How many first bytes of a member [`Zip::member`] shows the caller's test.
pub const HEAD_LEN: usize = 32;

/// An open zip file: the map of its bytes (stored members are read in place) and a reader
/// over the file itself for decoding (reads through the page cache, so the compressed
/// bytes never become part of the process's resident set).
pub struct Zip {
    input: Input,
    archive: zip::ZipArchive<BufReader<File>>,
}

/// What a member holds, as far as the caller wants it.
pub enum Content {
    /// A stored member: its range in [`Zip::input`]'s bytes.
    Stored(Range<usize>),
    /// A deflated (or otherwise compressed) member, decoded into a temporary file and
    /// mapped; the file is already unlinked and disappears with the map.
    Spilled(Input),
    /// The member's first bytes did not pass the test; nothing more was decoded.
    Skipped,
    /// The member cannot be read (its data outside the zip file, a decoding error, a
    /// CRC-32 that does not match, no room for the temporary file): why.
    Unreadable(String),
}

/// One file member of a zip file.
pub struct Member {
    /// Its path inside the zip file.
    pub name: String,
    /// Its content.
    pub content: Content,
}

impl Zip {
    /// Opens `path` (mapped, and opened again for decoding) and reads its central
    /// directory.
    pub fn open(path: &Path) -> Result<Zip, String> {
        let input = Input::open(path).map_err(|e| e.message)?;
        let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
        let archive = zip::ZipArchive::new(BufReader::with_capacity(CHUNK, file))
            .map_err(|e| format!("not a readable zip file: {e}"))?;
        Ok(Zip { input, archive })
    }

    /// The mapped zip file (stored members are ranges of its bytes).
    pub fn input(&self) -> &Input {
        &self.input
    }

    /// Number of members (directories included).
    pub fn len(&self) -> usize {
        self.archive.len()
    }

    /// The names of the file members, with their indices.
    pub fn file_names(&mut self) -> Vec<(usize, String)> {
        (0..self.archive.len())
            .filter_map(|i| {
                let f = self.archive.by_index_raw(i).ok()?;
                f.is_file()
                    .then(|| (i, f.name().map(|n| n.into_owned()).unwrap_or_default()))
            })
            .collect()
    }

    /// The bytes of member `i`, decoded (a whole member in memory: for `.kpack` archives
    /// read as installed files).
    pub fn read(&mut self, i: usize) -> std::io::Result<Vec<u8>> {
        let mut f = self.archive.by_index(i)?;
        let mut out = Vec::new();
        f.read_to_end(&mut out)?;
        Ok(out)
    }

    /// Member `i`: `None` for a directory; otherwise its name and, when its first
    /// [`HEAD_LEN`] bytes (fewer if it is shorter) pass `wanted`, its content. An error
    /// when even its central directory record cannot be read.
    pub fn member(
        &mut self,
        i: usize,
        wanted: impl Fn(&[u8]) -> bool,
    ) -> Result<Option<Member>, String> {
        let (name, stored, range) = {
            let f = self.archive.by_index_raw(i).map_err(|e| e.to_string())?;
            if !f.is_file() {
                return Ok(None);
            }
            let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
            let stored = f.compression() == zip::CompressionMethod::Stored;
            let range = f.data_start().and_then(|s| {
                let s = usize::try_from(s).ok()?;
                let len = usize::try_from(f.compressed_size()).ok()?;
                Some(s..s.checked_add(len)?)
            });
            (name, stored, range)
        };
        let content = if stored {
            match range.clone().and_then(|r| self.input.bytes().get(r)) {
                Some(data) if wanted(data.get(..HEAD_LEN).unwrap_or(data)) => {
                    Content::Stored(range.unwrap_or_default())
                }
                Some(_) => Content::Skipped,
                None => Content::Unreadable("member data lies outside the zip file".into()),
            }
        } else {
            self.decode(i, wanted)
                .unwrap_or_else(|e| Content::Unreadable(e.to_string()))
        };
        Ok(Some(Member { name, content }))
    }

    /// Decodes compressed member `i`: its first bytes, then, if they pass `wanted`, the
    /// rest into a temporary file.
    fn decode(&mut self, i: usize, wanted: impl Fn(&[u8]) -> bool) -> std::io::Result<Content> {
        let mut f = self.archive.by_index(i)?;
        let mut head = Vec::with_capacity(HEAD_LEN);
        (&mut f).take(HEAD_LEN as u64).read_to_end(&mut head)?;
        if !wanted(&head) {
            return Ok(Content::Skipped);
        }
        Ok(Content::Spilled(spill(&head, &mut f)?))
    }
}

/// Writes `head` and the rest of `reader` to a new unlinked temporary file and maps it.
/// Reading to the end makes the zip reader check the member's CRC-32.
fn spill(head: &[u8], reader: &mut impl Read) -> std::io::Result<Input> {
    let (mut file, path) = temp_file()?;
    // Unlinked at once: nothing is left behind, whatever happens next.
    let _ = std::fs::remove_file(&path);
    file.write_all(head)?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        file.write_all(buf.get(..n).unwrap_or_default())?;
    }
    Input::from_spilled(&file)
}

/// A new file under the temporary directory, opened for reading and writing: created
/// exclusively (a name someone planted, file or link, is never opened) under a name nobody
/// can predict, with a bounded number of tries.
fn temp_file() -> std::io::Result<(File, PathBuf)> {
    use std::hash::{BuildHasher, Hasher};
    let dir = std::env::temp_dir();
    let mut tries = 0;
    loop {
        tries += 1;
        // The standard library's randomly keyed hasher: 64 bits from the OS's random source.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let path = dir.join(format!("loader-sim-member-{:016x}.tmp", h.finish()));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((f, path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 64 => continue,
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("cannot create a temporary file in {}: {e}", dir.display()),
                ))
            }
        }
    }
}
