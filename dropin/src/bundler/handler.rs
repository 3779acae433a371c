//! The bundler's file handlers (`BinaryFileHandler`, `TextFileHandler`,
//! `ObjectFileHandler` in LLVM's `OffloadBundler.cpp`), reading entries in the same order
//! and with the same leniency as LLVM 22 — except that where LLVM reads out of bounds or
//! walks an uninitialised iterator (and crashes or prints garbage), these return an error.

use crate::llvm::hashmap::StringMap;
use crate::llvm::objcopy;

/// The 24-byte bundle magic.
pub const MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

/// Position of `needle` in `hay` at or after `from`.
pub fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() {
        return None;
    }
    if needle.is_empty() {
        return Some(from);
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// The comment token of a text `-type`, if the type is a text type.
pub fn text_comment(file_type: &str) -> Option<&'static str> {
    match file_type {
        "i" | "ii" | "cui" | "hipi" => Some("//"),
        "d" | "s" => Some("#"),
        "ll" => Some(";"),
        _ => None,
    }
}

/// An error while reading a bundled file.
pub type HandlerError = String;

/// What `BinaryFileHandler::ReadHeader` did with one bundle header.
enum HeaderRead {
    /// Every declared entry was read.
    Complete,
    /// Parsing stopped early (LLVM's silent `return Error::success()`); `inserted` says
    /// whether entries had been added to the map before it stopped.
    Stopped { inserted: bool },
}

/// `BinaryFileHandler`: entries live in a `StringMap` keyed by ID, so they are visited in
/// hash order, and a repeated ID keeps the last descriptor.
pub struct BinaryHandler {
    map: StringMap<(u64, u64)>,
    /// IDs in visiting order, refreshed by `read_header`.
    order: Vec<Vec<u8>>,
    next: usize,
    current: Option<Vec<u8>>,
}

impl BinaryHandler {
    /// A handler with an empty map.
    pub fn new() -> Self {
        BinaryHandler {
            map: StringMap::new(),
            order: Vec::new(),
            next: 0,
            current: None,
        }
    }

    fn parse(&mut self, fc: &[u8]) -> Result<HeaderRead, HandlerError> {
        let before = self.map.len();
        let stopped = |map: &StringMap<(u64, u64)>| HeaderRead::Stopped {
            inserted: map.len() != before,
        };
        if fc.len() < MAGIC.len() || !fc.starts_with(MAGIC) {
            return Ok(stopped(&self.map));
        }
        let mut pos = MAGIC.len();
        let rd = |at: usize| -> Option<u64> {
            fc.get(at..at.checked_add(8)?)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        };
        let Some(count) = rd(pos) else {
            return Ok(stopped(&self.map));
        };
        pos += 8;
        let len = fc.len() as u64;
        for _ in 0..count {
            let (Some(offset), Some(size), Some(id_len)) = (rd(pos), rd(pos + 8), rd(pos + 16))
            else {
                return Ok(stopped(&self.map));
            };
            pos += 24;
            let Some(id_end) = (pos as u64).checked_add(id_len) else {
                return Err(format!(
                    "malformed bundle: entry ID length at byte {} overflows (LLVM reads out of bounds here)",
                    pos - 8
                ));
            };
            if id_end > len {
                return Ok(stopped(&self.map));
            }
            let id = fc[pos..id_end as usize].to_vec();
            pos = id_end as usize;
            if offset == 0 || offset.wrapping_add(size) > len {
                return Ok(stopped(&self.map));
            }
            self.map.set(&id, (offset, size));
        }
        Ok(HeaderRead::Complete)
    }

    /// `ReadHeader`: adds the entries of the bundle at the start of `fc` to the map and
    /// restarts iteration over it. Input without the magic, or whose entry table stops before
    /// its first complete entry, yields no entries (as in LLVM); a table that stops after
    /// some entries were read is an error (LLVM then walks an uninitialised iterator).
    pub fn read_header(&mut self, fc: &[u8]) -> Result<(), HandlerError> {
        self.current = None;
        match self.parse(fc)? {
            HeaderRead::Complete => {
                self.order = self.map.iter().map(|(k, _)| k.to_vec()).collect();
                self.next = 0;
                Ok(())
            }
            HeaderRead::Stopped { inserted: false } => Ok(()),
            HeaderRead::Stopped { inserted: true } => Err(
                "malformed bundle header: the entry table is truncated or an entry points outside the file \
                 (LLVM 22 continues with an uninitialised iterator and crashes)"
                    .to_string(),
            ),
        }
    }

    /// `ReadBundleStart`: the next entry ID in map order.
    pub fn read_bundle_start(&mut self) -> Option<Vec<u8>> {
        let id = self.order.get(self.next)?.clone();
        self.next += 1;
        self.current = Some(id.clone());
        Some(id)
    }

    /// `ReadBundle`: the payload of the current entry.
    pub fn read_bundle<'a>(&self, fc: &'a [u8]) -> Result<&'a [u8], HandlerError> {
        let id = self.current.as_ref().ok_or("no current bundle entry")?;
        let (offset, size) = *self.map.get(id).ok_or("no current bundle entry")?;
        offset
            .checked_add(size)
            .and_then(|end| fc.get(offset as usize..usize::try_from(end).ok()?))
            .ok_or_else(|| {
                format!(
                    "malformed bundle: entry '{}' has offset {offset} + size {size} beyond the end of the file \
                     (the sum overflows; LLVM reads out of bounds)",
                    String::from_utf8_lossy(id)
                )
            })
    }
}

/// `TextFileHandler`: markers found by plain substring search, as in LLVM.
pub struct TextHandler {
    start: Vec<u8>,
    end: Vec<u8>,
    read: Option<usize>,
}

impl TextHandler {
    /// A handler for comment token `comment`.
    pub fn new(comment: &str) -> Self {
        TextHandler {
            start: format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____START__ ").into_bytes(),
            end: format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____END__ ").into_bytes(),
            read: Some(0),
        }
    }

    /// `ReadBundleStart`.
    pub fn read_bundle_start(&mut self, fc: &[u8]) -> Option<Vec<u8>> {
        let at = find(fc, &self.start, self.read?);
        let Some(at) = at else {
            self.read = None;
            return None;
        };
        let id_start = at + self.start.len();
        let Some(id_end) = find(fc, b"\n", id_start) else {
            self.read = None;
            return None;
        };
        self.read = Some(id_end + 1);
        Some(fc[id_start..id_end].to_vec())
    }

    /// `ReadBundle`: everything up to the next end marker.
    pub fn read_bundle<'a>(&mut self, fc: &'a [u8], id: &[u8]) -> Result<&'a [u8], HandlerError> {
        let start = self.read.ok_or("no current text bundle entry")?;
        let end = find(fc, &self.end, start).ok_or_else(|| {
            format!(
                "malformed text bundle: entry '{}' has no __CLANG_OFFLOAD_BUNDLE____END__ line \
                 (LLVM reads past the end of the file here)",
                String::from_utf8_lossy(id)
            )
        })?;
        self.read = Some(end);
        Ok(&fc[start..end])
    }

    /// `ReadBundleEnd`: skips the end-marker line.
    pub fn read_bundle_end(&mut self, fc: &[u8]) {
        self.read = self
            .read
            .and_then(|r| find(fc, b"\n", r + 1))
            .map(|p| p + 1);
    }

    /// `listBundleIDsCallback`: moves to the end marker of the current entry and past it.
    pub fn skip_bundle(&mut self, fc: &[u8]) {
        self.read = self.read.and_then(|r| find(fc, &self.end, r));
        self.read_bundle_end(fc);
    }
}

/// One offload section of an ELF object.
pub struct ObjectEntry {
    /// The entry ID (section name after the magic).
    pub id: Vec<u8>,
    /// Section contents.
    pub data: Vec<u8>,
}

/// `ObjectFileHandler`: one entry per section named `__CLANG_OFFLOAD_BUNDLE__<id>`, in
/// section order.
pub struct ObjectHandler {
    entries: Vec<ObjectEntry>,
    next: usize,
}

impl ObjectHandler {
    /// Reads the offload sections of the ELF object `elf`.
    pub fn new(elf: &[u8]) -> Result<Self, HandlerError> {
        let sections =
            objcopy::sections(elf).map_err(|e| format!("cannot read the ELF object: {e}"))?;
        let entries = sections
            .into_iter()
            .filter(|(name, _)| name.starts_with(MAGIC))
            .map(|(name, data)| ObjectEntry {
                id: name[MAGIC.len()..].to_vec(),
                data,
            })
            .collect();
        Ok(ObjectHandler { entries, next: 0 })
    }

    /// `ReadBundleStart`.
    pub fn read_bundle_start(&mut self) -> Option<Vec<u8>> {
        let e = self.entries.get(self.next)?;
        self.next += 1;
        Some(e.id.clone())
    }

    /// `ReadBundle`: the section contents; a section holding one zero byte stands for the
    /// host object itself, which is `input` without its offload sections.
    pub fn read_bundle(&self, input: &[u8]) -> Result<Vec<u8>, HandlerError> {
        let e = self
            .entries
            .get(self.next.wrapping_sub(1))
            .ok_or("no current bundle section")?;
        if e.data == [0] {
            objcopy::remove_offload_sections(input)
                .map_err(|e| format!("cannot extract the host object: {e}"))
        } else {
            Ok(e.data.clone())
        }
    }
}

/// The handler LLVM's `CreateFileHandler` picks for a file type and the (decompressed)
/// input.
pub enum Handler {
    /// Binary bundle.
    Binary(BinaryHandler),
    /// Text bundle.
    Text(TextHandler),
    /// ELF object with offload sections.
    Object(ObjectHandler),
}

/// True if LLVM's `createBinary` would open `data` as an object file this tool can handle
/// (an ELF file the `object` crate parses).
pub fn is_elf_object(data: &[u8]) -> bool {
    data.starts_with(b"\x7fELF") && objcopy::sections(data).is_ok()
}

impl Handler {
    /// `CreateFileHandler(FirstInput, Config)`.
    pub fn create(file_type: &str, first_input: &[u8]) -> Result<Handler, HandlerError> {
        if let Some(c) = text_comment(file_type) {
            return Ok(Handler::Text(TextHandler::new(c)));
        }
        match file_type {
            "bc" | "gch" | "ast" => Ok(Handler::Binary(BinaryHandler::new())),
            "o" | "a" => {
                if is_elf_object(first_input) {
                    Ok(Handler::Object(ObjectHandler::new(first_input)?))
                } else {
                    Ok(Handler::Binary(BinaryHandler::new()))
                }
            }
            _ => Err(format!("'{file_type}': invalid file type specified")),
        }
    }

    /// `ReadHeader`.
    pub fn read_header(&mut self, fc: &[u8]) -> Result<(), HandlerError> {
        match self {
            Handler::Binary(b) => b.read_header(fc),
            _ => Ok(()),
        }
    }

    /// `ReadBundleStart`.
    pub fn read_bundle_start(&mut self, fc: &[u8]) -> Option<Vec<u8>> {
        match self {
            Handler::Binary(b) => b.read_bundle_start(),
            Handler::Text(t) => t.read_bundle_start(fc),
            Handler::Object(o) => o.read_bundle_start(),
        }
    }

    /// `ReadBundle` (+ `ReadBundleEnd` for text): the payload of the current entry.
    /// `original` is the input file as stored (the host object for ELF host entries).
    pub fn read_bundle(
        &mut self,
        fc: &[u8],
        original: &[u8],
        id: &[u8],
    ) -> Result<Vec<u8>, HandlerError> {
        match self {
            Handler::Binary(b) => b.read_bundle(fc).map(<[u8]>::to_vec),
            Handler::Text(t) => t.read_bundle(fc, id).map(<[u8]>::to_vec),
            Handler::Object(o) => o.read_bundle(original),
        }
    }

    /// `ReadBundleEnd`.
    pub fn read_bundle_end(&mut self, fc: &[u8]) {
        if let Handler::Text(t) = self {
            t.read_bundle_end(fc);
        }
    }

    /// `listBundleIDsCallback` for an entry that was not read.
    pub fn skip_bundle(&mut self, fc: &[u8]) {
        if let Handler::Text(t) = self {
            t.skip_bundle(fc);
        }
    }
}
