//! Text offload bundles (`FORMATS.md` §3): `.ll`, `.s`, `.i` and friends.
//!
//! ```text
//! "\n" C " __CLANG_OFFLOAD_BUNDLE____START__ " ID "\n" payload "\n" C " __CLANG_OFFLOAD_BUNDLE____END__ " ID "\n"
//! ```
//! per entry, where `C` is the comment token of the file type.

use crate::bytes::{self, u64_of};
use crate::error::{Error, ErrorKind, Result};
use crate::options::Limits;
use crate::raw::{TEXT_END_MARKER, TEXT_START_MARKER};

/// The comment token a text bundle uses, which depends on its file type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommentStyle {
    /// `;` — LLVM IR (`-type=ll`).
    Semicolon,
    /// `#` — assembly and dependency files (`-type=s`, `-type=d`).
    Hash,
    /// `//` — preprocessed sources (`-type=i`, `ii`, `cui`, `hipi`).
    DoubleSlash,
}

impl CommentStyle {
    /// The comment token.
    pub const fn token(self) -> &'static str {
        match self {
            CommentStyle::Semicolon => ";",
            CommentStyle::Hash => "#",
            CommentStyle::DoubleSlash => "//",
        }
    }

    /// The comment style clang uses for a `-type=` value, if it is a text type.
    pub fn for_type(file_type: &str) -> Option<Self> {
        match file_type {
            "ll" => Some(CommentStyle::Semicolon),
            "s" | "d" => Some(CommentStyle::Hash),
            "i" | "ii" | "cui" | "hipi" => Some(CommentStyle::DoubleSlash),
            _ => None,
        }
    }

    const ALL: [CommentStyle; 3] = [
        CommentStyle::DoubleSlash,
        CommentStyle::Semicolon,
        CommentStyle::Hash,
    ];
}

/// A text bundle borrowing the caller's bytes.
#[derive(Clone, Copy, Debug)]
pub struct TextBundle<'data> {
    data: &'data [u8],
    style: CommentStyle,
    count: u64,
}

/// One entry of a [`TextBundle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextEntry<'data> {
    /// Position in the file (0-based).
    pub index: usize,
    /// The bundle entry ID.
    pub id: &'data str,
    /// Offset of the payload from the start of the text bundle.
    pub offset: u64,
    /// The payload, exactly as `clang-offload-bundler -unbundle` returns it.
    pub data: &'data [u8],
}

/// The comment style of a text bundle, if `data` starts with a start marker line.
pub fn detect(data: &[u8]) -> Option<CommentStyle> {
    let rest = data.strip_prefix(b"\n")?;
    CommentStyle::ALL.into_iter().find(|s| {
        rest.strip_prefix(s.token().as_bytes())
            .is_some_and(|r| r.starts_with(TEXT_START_MARKER))
    })
}

/// Matches `"\n" C marker` at `pos`, returning the offset just after it.
fn marker_at(data: &[u8], pos: usize, style: CommentStyle, marker: &[u8]) -> Option<usize> {
    let tail = data.get(pos..)?;
    let tail = tail.strip_prefix(b"\n")?;
    let tail = tail.strip_prefix(style.token().as_bytes())?;
    tail.starts_with(marker).then(|| {
        pos.saturating_add(1)
            .saturating_add(style.token().len())
            .saturating_add(marker.len())
    })
}

/// Decodes the entry at `pos` (a start marker): (entry, offset after its end line).
fn entry_at<'data>(
    data: &'data [u8],
    pos: usize,
    style: CommentStyle,
    index: usize,
    limits: &Limits,
) -> Result<(TextEntry<'data>, usize)> {
    let at = u64_of(pos);
    let id_start = marker_at(data, pos, style, TEXT_START_MARKER).ok_or(Error::new(
        ErrorKind::Malformed,
        at,
        "text bundle: expected a __CLANG_OFFLOAD_BUNDLE____START__ line",
    ))?;
    let id_end = bytes::find(data, b"\n", id_start).ok_or(Error::new(
        ErrorKind::Truncated,
        u64_of(id_start),
        "text bundle: entry ID line is not terminated",
    ))?;
    if u64_of(id_end.saturating_sub(id_start)) > limits.max_id_len {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            u64_of(id_start),
            "text bundle: entry ID length exceeds the limit",
        ));
    }
    let id = data
        .get(id_start..id_end)
        .and_then(|b| core::str::from_utf8(b).ok())
        .ok_or(Error::new(
            ErrorKind::InvalidId,
            u64_of(id_start),
            "text bundle: entry ID is not valid UTF-8",
        ))?;
    let payload_start = id_end.saturating_add(1);
    // The payload runs up to the next end marker (which begins with "\n").
    let mut search = payload_start;
    let end_marker_pos = loop {
        let p = bytes::find(data, TEXT_END_MARKER, search).ok_or(Error::new(
            ErrorKind::Truncated,
            at,
            "text bundle: entry has no __CLANG_OFFLOAD_BUNDLE____END__ line",
        ))?;
        let tok = style.token().len();
        if let Some(start) = p.checked_sub(tok.saturating_add(1)) {
            if start >= payload_start && marker_at(data, start, style, TEXT_END_MARKER).is_some() {
                break start;
            }
        }
        search = p.saturating_add(1);
    };
    let end_id_start =
        marker_at(data, end_marker_pos, style, TEXT_END_MARKER).unwrap_or(end_marker_pos);
    let end_line_end = bytes::find(data, b"\n", end_id_start).unwrap_or(data.len());
    let end_id = data.get(end_id_start..end_line_end).unwrap_or(&[]);
    if end_line_end == data.len() && end_id.len() < id.len() && id.as_bytes().starts_with(end_id) {
        return Err(Error::new(
            ErrorKind::Truncated,
            u64_of(end_id_start),
            "text bundle: data ends inside an end marker line",
        ));
    }
    if end_id != id.as_bytes() {
        return Err(Error::new(
            ErrorKind::Malformed,
            u64_of(end_marker_pos),
            "text bundle: end marker names a different entry than its start marker",
        ));
    }
    let payload = data.get(payload_start..end_marker_pos).unwrap_or(&[]);
    let next = end_line_end.saturating_add(1).min(data.len());
    Ok((
        TextEntry {
            index,
            id,
            offset: u64_of(payload_start),
            data: payload,
        },
        next,
    ))
}

impl<'data> TextBundle<'data> {
    /// Parses a whole text bundle; `data` must start with a start marker line and contain
    /// only entries (nothing but the entries and their marker lines).
    pub fn parse(data: &'data [u8], limits: &Limits) -> Result<Self> {
        let style = detect(data).ok_or(Error::new(
            ErrorKind::BadMagic,
            0,
            "not a text offload bundle (no __CLANG_OFFLOAD_BUNDLE____START__ line)",
        ))?;
        let mut pos = 0usize;
        let mut count = 0u64;
        while pos < data.len() {
            if count >= limits.max_entries {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    u64_of(pos),
                    "text bundle entry count exceeds the limit",
                ));
            }
            let (_, next) = entry_at(data, pos, style, 0, limits)?;
            pos = next;
            count = count.saturating_add(1);
        }
        Ok(TextBundle { data, style, count })
    }

    tools_pub! {
        /// The comment style.
        pub fn style(&self) -> CommentStyle {
            self.style
        }
    }

    tools_pub! {
        /// Number of entries.
        pub fn entry_count(&self) -> u64 {
            self.count
        }
    }

    /// The entries in file order.
    pub fn entries(&self) -> TextEntries<'data> {
        TextEntries {
            data: self.data,
            style: self.style,
            pos: 0,
            index: 0,
        }
    }
}

/// Iterator over the entries of a [`TextBundle`].
#[derive(Clone, Debug)]
pub struct TextEntries<'data> {
    data: &'data [u8],
    style: CommentStyle,
    pos: usize,
    index: usize,
}

impl<'data> Iterator for TextEntries<'data> {
    type Item = TextEntry<'data>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.data.len() {
            return None;
        }
        let (entry, next) = entry_at(
            self.data,
            self.pos,
            self.style,
            self.index,
            &Limits::UNLIMITED,
        )
        .ok()?;
        self.pos = next;
        self.index = self.index.saturating_add(1);
        Some(entry)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn reads_entries_and_payloads() {
        let text = b"\n; __CLANG_OFFLOAD_BUNDLE____START__ host-x86_64-unknown-linux-gnu-\nhost ir\n; __CLANG_OFFLOAD_BUNDLE____END__ host-x86_64-unknown-linux-gnu-\n\n; __CLANG_OFFLOAD_BUNDLE____START__ openmp-amdgcn-amd-amdhsa--gfx90a\ndev\n; __CLANG_OFFLOAD_BUNDLE____END__ openmp-amdgcn-amd-amdhsa--gfx90a\n";
        let b = TextBundle::parse(text, &Limits::default()).unwrap();
        assert_eq!(b.style(), CommentStyle::Semicolon);
        let e: Vec<_> = b.entries().collect();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].data, b"host ir");
        assert_eq!(e[1].id, "openmp-amdgcn-amd-amdhsa--gfx90a");
        assert_eq!(e[1].data, b"dev");
        // A missing end marker is an error, not a panic.
        let err = TextBundle::parse(&text[..100], &Limits::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Truncated);
    }
}
