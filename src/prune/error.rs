//! Why a linked file is not compacted ([`PruneError`]): the obstacles the compaction of a
//! host ELF file or PE image finds, each with its kind and, where it has one, the byte
//! offset in the file. The rewrite then writes every unit at its own address instead, and
//! [`super::Pruned::layout`] says why (`in place, zero-filled, ... (<the error>)`);
//! [`super::Pruned::in_place_because`] gives the error itself.

use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use core::fmt;

use crate::error::Error;

/// What kind of obstacle keeps a linked file from being compacted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PruneErrorKind {
    /// A file or layout the compaction does not handle: COFF objects, PE32 images, an
    /// unusual `FileAlignment`, extended section numbering, relocations of an unknown
    /// machine, an unexpected program header size.
    Unsupported,
    /// No container in the fatbinary sections, or device code to rewrite outside them.
    NoContainer,
    /// A fatbinary section lies where it cannot be compacted: not an allocated
    /// `PROGBITS` section, past the end of the file, outside one `PT_LOAD` segment, with
    /// an address that disagrees with its segment, an alignment that is not a power of two,
    /// overlapping another, with relocations or line numbers (PE).
    Section,
    /// Bytes other than zero padding between or after the containers of a fatbinary
    /// section ([`PruneError::offset`]: where they start).
    BytesOutsideContainers,
    /// A pointer (a relocation, a symbol, a wrapper, a PE base relocation) into a
    /// fatbinary section that is not at the start of a container, or a relocation against
    /// one ([`PruneError::offset`]: the pointer's field, when known).
    Pointer,
    /// Compaction would free nothing (no whole page or `FileAlignment` unit), or move a
    /// container up.
    NothingFreed,
    /// The program header table cannot grow, or move, as the new layout needs: no room,
    /// a segment in the way, a change in the segment count.
    ProgramHeaders,
    /// Other sections, segments, symbols or directories are in the way of the new layout.
    Layout,
    /// A part of the file the compaction reads does not read
    /// ([`core::error::Error::source`]: the reader's error, when there is one).
    Read,
    /// An offset, an address or a size does not fit its field.
    TooLarge,
}

/// An obstacle to compacting a linked file: its kind, where it lies when known, and the
/// text `loader-sim prune` prints in the layout line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PruneError {
    kind: PruneErrorKind,
    offset: Option<u64>,
    message: Cow<'static, str>,
    source: Option<Error>,
}

impl PruneError {
    /// An error of `kind` described by `message`, at no known offset.
    pub(crate) fn new(kind: PruneErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        PruneError {
            kind,
            offset: None,
            message: message.into(),
            source: None,
        }
    }

    /// The same error at byte `offset` of the file.
    #[must_use]
    pub(crate) fn at(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    /// A reader's error ([`PruneErrorKind::Read`], at the reader's offset).
    pub(crate) fn read(e: Error) -> Self {
        PruneError {
            kind: PruneErrorKind::Read,
            offset: Some(e.offset()),
            message: Cow::Owned(e.to_string()),
            source: Some(e),
        }
    }

    /// The same error with `more` written after its message, kind and offset kept.
    #[must_use]
    pub(crate) fn then(mut self, more: &str) -> Self {
        let mut m = String::from(self.message);
        m.push_str(more);
        self.message = Cow::Owned(m);
        self
    }

    /// The kind of obstacle.
    pub fn kind(&self) -> PruneErrorKind {
        self.kind
    }

    /// Byte offset of the obstacle in the file, when it has one.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The description, as the layout line prints it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for PruneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl core::error::Error for PruneError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn core::error::Error + 'static))
    }
}

/// The result of a step of the compaction.
pub(crate) type Compact<T> = core::result::Result<T, PruneError>;
