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
//!
//! What a hostile zip file cannot make it do:
//! * decode one member many times: central directory entries whose members overlap (two
//!   entries pointing at one local header, or a member inside another's data) or that
//!   name one path twice are refused when the zip file is opened, as pip's `zipfile`
//!   refuses overlapping entries, with the entry's name and the offset of its local
//!   header ([`Zip::open`]); so is a central directory of more than [`MAX_MEMBERS`]
//!   entries, before it is read;
//! * fill the temporary folder: the members of one zip file spilled there total at most
//!   [`spill_limit`] bytes (4 GiB unless `LOADER_SIM_SPILL_LIMIT` says otherwise); a
//!   member that would pass it is not read, with a message that names the limit.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::input::Input;

/// Bytes decoded per read while spilling a member.
const CHUNK: usize = 1 << 20;

/// How many first bytes of a member [`Zip::member`] shows the caller's test.
pub const HEAD_LEN: usize = 32;

/// Most central directory entries a zip file may have (262,144; the largest wheels have
/// tens of thousands): each costs the zip reader a few hundred bytes before any is used.
pub const MAX_MEMBERS: u64 = 1 << 18;

/// The variable that sets the most bytes of one zip file's members spilled to the
/// temporary folder ([`spill_limit`]).
pub const SPILL_LIMIT_VAR: &str = "LOADER_SIM_SPILL_LIMIT";

/// The default of [`spill_limit`]: 4 GiB.
pub const DEFAULT_SPILL_LIMIT: u64 = 4 << 30;

/// Whether `head` (a file's first bytes) starts a zip file: a local file header, or the
/// end-of-central-directory record of an empty archive.
pub fn is_zip(head: &[u8]) -> bool {
    head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06")
}

/// The most bytes the deflated members of one zip file may take in the temporary folder,
/// all together: `LOADER_SIM_SPILL_LIMIT` (bytes, or a number followed by `K`, `M`, `G`
/// or `T`, powers of 1024), else [`DEFAULT_SPILL_LIMIT`]. An error names a value that is
/// not a size.
pub fn spill_limit() -> Result<u64, String> {
    match std::env::var_os(SPILL_LIMIT_VAR) {
        None => Ok(DEFAULT_SPILL_LIMIT),
        Some(v) => {
            let text = v.to_string_lossy();
            parse_size(text.trim()).ok_or_else(|| {
                format!(
                    "{SPILL_LIMIT_VAR}={text}: not a size (a number of bytes, or a number followed by K, M, G or T)"
                )
            })
        }
    }
}

/// `123`, `512K`, `4G`, `1T` (powers of 1024; an optional `B`/`iB` after the unit).
fn parse_size(s: &str) -> Option<u64> {
    let s = s
        .strip_suffix("iB")
        .or_else(|| s.strip_suffix('B'))
        .unwrap_or(s);
    let (digits, shift) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 10),
        'm' | 'M' => (&s[..s.len() - 1], 20),
        'g' | 'G' => (&s[..s.len() - 1], 30),
        't' | 'T' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift)
}

/// The number of entries the end of central directory record of `data` (a zip file)
/// declares (the zip64 record's when the plain one says 0xFFFF), if it can be found.
fn declared_entries(data: &[u8]) -> Option<u64> {
    const EOCD: &[u8] = b"PK\x05\x06";
    const LOCATOR: &[u8] = b"PK\x06\x07";
    const EOCD64: &[u8] = b"PK\x06\x06";
    let from = data.len().saturating_sub(22 + 0xFFFF);
    let tail = data.get(from..)?;
    let at = from + tail.windows(4).rposition(|w| w == EOCD)?;
    let le16 = |at: usize| -> Option<u64> {
        Some(u64::from(u16::from_le_bytes(
            data.get(at..at + 2)?.try_into().ok()?,
        )))
    };
    let le64 = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?))
    };
    let count = le16(at + 10)?;
    if count != 0xFFFF {
        return Some(count);
    }
    let locator = at.checked_sub(20)?;
    if data.get(locator..locator + 4)? != LOCATOR {
        return Some(count);
    }
    let eocd64 = usize::try_from(le64(locator + 8)?).ok()?;
    if data.get(eocd64..eocd64.checked_add(4)?)? != EOCD64 {
        return Some(count);
    }
    le64(eocd64 + 32)
}

/// The first path the central directory of `data` names twice, and the offset of its
/// second central directory record: the records are walked from `start` (the first
/// record), `count` of them, as far as they read.
fn first_duplicate(data: &[u8], start: u64, count: usize) -> Option<(String, u64)> {
    let mut seen = std::collections::HashSet::new();
    let mut at = usize::try_from(start).ok()?;
    for _ in 0..count {
        let rec = data.get(at..at.checked_add(46)?)?;
        if rec.get(..4)? != b"PK\x01\x02" {
            return None;
        }
        let le16 = |o: usize| usize::from(u16::from_le_bytes([rec[o], rec[o + 1]]));
        let (name_len, extra, comment) = (le16(28), le16(30), le16(32));
        let name = data.get(at + 46..at + 46 + name_len)?;
        if !seen.insert(name) {
            return Some((String::from_utf8_lossy(name).into_owned(), at as u64));
        }
        at = at.checked_add(46 + name_len + extra + comment)?;
    }
    None
}

/// An open zip file: the map of its bytes (stored members are read in place) and a reader
/// over the file itself for decoding (reads through the page cache, so the compressed
/// bytes never become part of the process's resident set).
pub struct Zip {
    input: Input,
    archive: zip::ZipArchive<BufReader<File>>,
    /// Bytes of members spilled to the temporary folder so far, and the most allowed.
    spilled: u64,
    spill_limit: u64,
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
    /// directory. Refused: more than [`MAX_MEMBERS`] entries, two entries that name one
    /// path, members that overlap (the error names the entry and its local header's
    /// offset), an unreadable [`SPILL_LIMIT_VAR`].
    pub fn open(path: &Path) -> Result<Zip, String> {
        let spill_limit = spill_limit()?;
        let input = Input::open(path).map_err(|e| e.message)?;
        if let Some(n) = declared_entries(input.bytes()).filter(|n| *n > MAX_MEMBERS) {
            return Err(format!(
                "the central directory declares {n} entries, more than {MAX_MEMBERS}: not read"
            ));
        }
        let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
        let archive = zip::ZipArchive::new(BufReader::with_capacity(CHUNK, file))
            .map_err(|e| format!("not a readable zip file: {e}"))?;
        let mut zip = Zip {
            input,
            archive,
            spilled: 0,
            spill_limit,
        };
        zip.check_entries()?;
        Ok(zip)
    }

    /// Refuses duplicate names and overlapping members, as pip does: otherwise one
    /// member's bytes could be decoded once per entry that points at them.
    fn check_entries(&mut self) -> Result<(), String> {
        let n = self.archive.len();
        // (local header offset, end of its data, name)
        let mut spans: Vec<(u64, u64, String)> = Vec::with_capacity(n);
        let mut first_record = u64::MAX;
        for i in 0..n {
            let f = self
                .archive
                .by_index_raw(i)
                .map_err(|e| format!("central directory entry #{i}: {e}"))?;
            first_record = first_record.min(f.central_header_start());
            let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
            let start = f.header_start();
            let end = f
                .data_start()
                .and_then(|d| d.checked_add(f.compressed_size()))
                .ok_or_else(|| {
                    format!("member {name:?} at byte {start}: its data lies outside the zip file")
                })?;
            spans.push((start, end, name));
        }
        if self.archive.has_duplicate_names() {
            let start = self.archive.central_directory_start().min(first_record);
            let raw = first_duplicate(self.input.bytes(), start, usize::MAX);
            return Err(match raw {
                Some((name, at)) => format!(
                    "member {name:?}: a second central directory entry for it at byte {at}: duplicate zip entries are refused (as pip does)"
                ),
                None => "the central directory names one member twice: duplicate zip entries are refused (as pip does)".to_string(),
            });
        }
        spans.sort();
        for pair in spans.windows(2) {
            let [(a_start, a_end, a), (b_start, _, b)] = pair else {
                continue;
            };
            if b_start < a_end {
                return Err(format!(
                    "member {b:?} at byte {b_start} overlaps member {a:?} (bytes {a_start} to {a_end}): overlapping zip entries are refused (as pip does)"
                ));
            }
        }
        Ok(())
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

    /// Member `i` (stored or compressed) copied whole into an unlinked temporary file, within
    /// what is left of the spill limit, for a reader that reads it by offset (a `.kpack`
    /// archive read by its TOC). Reading to the end checks the member's CRC-32.
    pub fn member_file(&mut self, i: usize) -> Result<File, String> {
        use std::io::Seek;
        let left = self.spill_limit.saturating_sub(self.spilled);
        let limit = self.spill_limit;
        let mut f = self.archive.by_index(i).map_err(|e| e.to_string())?;
        if f.size() > left {
            return Err(format!(
                "it declares {} bytes, more than is left ({left} bytes) of the {limit} bytes the members of one zip file may take in the temporary folder (set {SPILL_LIMIT_VAR} to allow more)",
                f.size()
            ));
        }
        let mut written = 0;
        let spilled = spill_file(&[], &mut f, left, &mut written);
        self.spilled = self.spilled.saturating_add(written);
        let mut file = spilled
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("it decodes to more than its declared {} bytes", f.size()))?;
        file.rewind().map_err(|e| e.to_string())?;
        Ok(file)
    }

    /// Decodes compressed member `i`: its first bytes, then, if they pass `wanted`, the
    /// rest into a temporary file, within what is left of the spill limit.
    fn decode(&mut self, i: usize, wanted: impl Fn(&[u8]) -> bool) -> std::io::Result<Content> {
        let left = self.spill_limit.saturating_sub(self.spilled);
        let mut f = self.archive.by_index(i)?;
        let mut head = Vec::with_capacity(HEAD_LEN);
        (&mut f).take(HEAD_LEN as u64).read_to_end(&mut head)?;
        if !wanted(&head) {
            return Ok(Content::Skipped);
        }
        let limit = self.spill_limit;
        let over = |what: String| {
            std::io::Error::other(format!(
                "{what}, more than is left ({left} bytes) of the {limit} bytes the deflated members of one zip file may take in the temporary folder (set {SPILL_LIMIT_VAR} to allow more)"
            ))
        };
        // The declared size first: nothing is written for a member that says it is too big.
        if f.size() > left {
            return Err(over(format!("it declares {} bytes", f.size())));
        }
        let mut written = 0;
        let spilled = spill(&head, &mut f, left, &mut written);
        self.spilled = self.spilled.saturating_add(written);
        match spilled {
            Ok(Some(input)) => Ok(Content::Spilled(input)),
            Ok(None) => Err(over(format!(
                "it decodes to more than its declared {} bytes",
                f.size()
            ))),
            Err(e) => Err(e),
        }
    }
}

/// Writes `head` and the rest of `reader` to a new unlinked temporary file and maps it;
/// `None` (the file removed) once more than `limit` bytes would be written. `written` is
/// what was written. Reading to the end makes the zip reader check the member's CRC-32.
fn spill(
    head: &[u8],
    reader: &mut impl Read,
    limit: u64,
    written: &mut u64,
) -> std::io::Result<Option<Input>> {
    match spill_file(head, reader, limit, written)? {
        Some(file) => Input::from_spilled(&file).map(Some),
        None => Ok(None),
    }
}

/// [`spill`]'s temporary file, unlinked, not mapped.
fn spill_file(
    head: &[u8],
    reader: &mut impl Read,
    limit: u64,
    written: &mut u64,
) -> std::io::Result<Option<File>> {
    let (mut file, path) = temp_file()?;
    // Unlinked at once: nothing is left behind, whatever happens next.
    let _ = std::fs::remove_file(&path);
    let mut put = |file: &mut File, bytes: &[u8]| -> std::io::Result<bool> {
        let n = bytes.len() as u64;
        if written.saturating_add(n) > limit {
            return Ok(false);
        }
        file.write_all(bytes)?;
        *written += n;
        Ok(true)
    };
    if !put(&mut file, head)? {
        return Ok(None);
    }
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if !put(&mut file, buf.get(..n).unwrap_or_default())? {
            return Ok(None);
        }
    }
    Ok(Some(file))
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
