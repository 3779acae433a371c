//! Text offload bundles (`FORMATS.md` §3) as LLVM's `TextFileHandler` writes them:
//!
//! ```text
//! "\n" C " __CLANG_OFFLOAD_BUNDLE____START__ " ID "\n" payload "\n" C " __CLANG_OFFLOAD_BUNDLE____END__ " ID "\n"
//! ```
//!
//! per entry, in the order given, where `C` is the comment token of the file type
//! ([`CommentStyle::for_type`]). Payloads are copied verbatim: nothing is escaped, so a
//! payload that itself contains an end-marker line cannot be read back (LLVM has the same
//! limitation).

use std::vec::Vec;

use std::io::Write;

use super::{len64, WriteError};
use crate::raw::{TEXT_END_MARKER, TEXT_START_MARKER};
pub use crate::text::CommentStyle;

/// Writes the text bundle of `entries` (`(id, payload)`) with comment `style`; returns its
/// size.
pub fn write_text_bundle<W: Write + ?Sized>(
    out: &mut W,
    style: CommentStyle,
    entries: &[(&str, &[u8])],
) -> Result<u64, WriteError> {
    let token = style.token().as_bytes();
    let mut n = 0u64;
    for (id, data) in entries {
        for part in [
            b"\n".as_slice(),
            token,
            TEXT_START_MARKER,
            id.as_bytes(),
            b"\n",
            data,
            b"\n",
            token,
            TEXT_END_MARKER,
            id.as_bytes(),
            b"\n",
        ] {
            out.write_all(part)?;
            n = n.saturating_add(len64(part.len()));
        }
    }
    Ok(n)
}

/// The text bundle of `entries` with comment `style`, as a new buffer.
pub fn text_bundle_to_vec(style: CommentStyle, entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = write_text_bundle(&mut out, style, entries);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Limits;
    use crate::text::TextBundle;

    #[test]
    fn writes_markers_and_reads_back() {
        let v = text_bundle_to_vec(
            CommentStyle::Semicolon,
            &[
                ("host-x86_64-unknown-linux-gnu-", b"host ir".as_slice()),
                ("openmp-amdgcn-amd-amdhsa--gfx90a", b"dev"),
            ],
        );
        assert!(v.starts_with(b"\n; __CLANG_OFFLOAD_BUNDLE____START__ host-x86_64-unknown-linux-gnu-\nhost ir\n; __CLANG_OFFLOAD_BUNDLE____END__ host-x86_64-unknown-linux-gnu-\n"));
        let t = TextBundle::parse(&v, &Limits::default()).unwrap();
        let e: Vec<_> = t.entries().collect();
        assert_eq!(e[1].data, b"dev");
    }
}
