//! The one error type of the crate.

use core::fmt;

/// What went wrong, in a form callers can match on.
///
/// The set may grow; match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The data ends before a structure that must be there (a header, a table, a payload).
    Truncated,
    /// An offset or offset + size points outside the data, or the arithmetic overflows.
    OutOfBounds,
    /// The bytes are not the container the caller or the context requires.
    BadMagic,
    /// A version field holds a value this crate does not read.
    UnsupportedVersion,
    /// A compression method (or other enumerated field) holds an unknown value.
    UnsupportedMethod,
    /// Two sizes that must agree do not (declared vs. actual, decompressed vs. header).
    SizeMismatch,
    /// The stored truncated MD5 of a compressed bundle does not match its content.
    HashMismatch,
    /// A caller-set or default resource limit (size, count, length, depth) would be exceeded.
    LimitExceeded,
    /// The compressed stream is corrupt.
    Decompress,
    /// A structure is internally inconsistent (overlapping tables, bad string, stray bytes).
    Malformed,
    /// A bundle entry ID, target ID or triple does not follow its grammar.
    InvalidId,
    /// An ELF file or `ar` archive could not be read.
    BadContainer,
    /// The memory for a decompressed buffer could not be reserved.
    OutOfMemory,
    /// The bytes are a valid file or container of a kind this crate does not read: a
    /// big-endian or 32-bit host ELF file, an ELF file that is neither an object, an
    /// executable nor a shared library, a PE file for another machine, a thin archive (its
    /// members are other files). [`ErrorKind::BadContainer`] is for files that are broken.
    Unsupported,
}

impl ErrorKind {
    /// A short lowercase name of the kind, stable for scripts (`"truncated"`, `"out-of-bounds"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::Truncated => "truncated",
            ErrorKind::OutOfBounds => "out-of-bounds",
            ErrorKind::BadMagic => "bad-magic",
            ErrorKind::UnsupportedVersion => "unsupported-version",
            ErrorKind::UnsupportedMethod => "unsupported-method",
            ErrorKind::SizeMismatch => "size-mismatch",
            ErrorKind::HashMismatch => "hash-mismatch",
            ErrorKind::LimitExceeded => "limit-exceeded",
            ErrorKind::Decompress => "decompress",
            ErrorKind::Malformed => "malformed",
            ErrorKind::InvalidId => "invalid-id",
            ErrorKind::BadContainer => "bad-container",
            ErrorKind::OutOfMemory => "out-of-memory",
            ErrorKind::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error with its kind, a description of the problem and the byte offset where it was found.
///
/// `offset` is relative to the buffer handed to the outermost parsing call (for the
/// container walk: the file). When the problem lies inside the decompressed content of a
/// compressed bundle, `offset` is the start of that compressed bundle and
/// [`Error::decompressed_offset`] gives the position inside its decompressed content.
///
/// `Error` is `Copy` and never allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Error {
    kind: ErrorKind,
    offset: u64,
    what: &'static str,
    decompressed_offset: Option<u64>,
}

/// The crate's result type.
pub type Result<T, E = Error> = core::result::Result<T, E>;

impl Error {
    tools_pub! {
        /// Makes an error of `kind` at byte `offset`, described by `what`.
        pub const fn new(kind: ErrorKind, offset: u64, what: &'static str) -> Self {
            Error {
                kind,
                offset,
                what,
                decompressed_offset: None,
            }
        }
    }

    /// The kind of problem.
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Byte offset of the problem in the caller's buffer (see the type's documentation).
    pub const fn offset(&self) -> u64 {
        self.offset
    }

    /// Human-readable description of the problem (no offset).
    pub const fn what(&self) -> &'static str {
        self.what
    }

    /// For problems inside decompressed content: the offset within that content.
    pub const fn decompressed_offset(&self) -> Option<u64> {
        self.decompressed_offset
    }

    /// Moves the error from a sub-buffer starting at `base` into the enclosing buffer.
    #[must_use]
    pub fn rebase(mut self, base: u64) -> Self {
        self.offset = self.offset.saturating_add(base);
        self
    }

    tools_pub! {
        /// Marks an error found in decompressed content that was stored compressed at `blob_offset`.
        #[must_use]
        pub fn in_decompressed(mut self, blob_offset: u64) -> Self {
            if self.decompressed_offset.is_none() {
                self.decompressed_offset = Some(self.offset);
                self.offset = blob_offset;
            } else {
                self.offset = self.offset.saturating_add(blob_offset);
            }
            self
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.decompressed_offset {
            None => write!(f, "{}, at byte {}", self.what, self.offset),
            Some(inner) => write!(
                f,
                "{}, at byte {} of the content decompressed from the compressed bundle at byte {}",
                self.what, inner, self.offset
            ),
        }
    }
}

/// With or without `std`: `core::error::Error` is `std::error::Error`, so a program's
/// `Box<dyn std::error::Error>` takes an [`Error`] with `?`.
impl core::error::Error for Error {}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    #[test]
    fn display_names_problem_and_offset() {
        let e = Error::new(ErrorKind::Truncated, 100, "bundle entry table truncated");
        assert_eq!(e.to_string(), "bundle entry table truncated, at byte 100");
        let e = e.in_decompressed(4096);
        assert_eq!(e.offset(), 4096);
        assert_eq!(e.decompressed_offset(), Some(100));
        assert!(e
            .to_string()
            .contains("at byte 100 of the content decompressed"));
        assert_eq!(
            Error::new(ErrorKind::Malformed, 1, "x").rebase(10).offset(),
            11
        );
    }

    /// `Error` is a `core::error::Error` without any feature: `?` turns it into the boxed
    /// error a program's `main` returns.
    #[test]
    fn converts_to_a_boxed_core_error() {
        fn fails() -> core::result::Result<(), alloc::boxed::Box<dyn core::error::Error>> {
            Err(Error::new(ErrorKind::Unsupported, 7, "thin archive"))?;
            Ok(())
        }
        let e = fails().unwrap_err();
        assert_eq!(e.to_string(), "thin archive, at byte 7");
        assert_eq!(
            e.downcast_ref::<Error>().map(Error::kind),
            Some(ErrorKind::Unsupported)
        );
        assert_eq!(ErrorKind::Unsupported.name(), "unsupported");
    }
}
