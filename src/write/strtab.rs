//! ELF-style string tables laid out exactly as LLVM's `StringTableBuilder` (kind `ELF`,
//! optimised) lays them out.
//!
//! The table starts with a NUL byte; every distinct string is stored once, NUL-terminated;
//! a string that is a suffix of another shares the other's bytes (tail merging). The order
//! is that of LLVM's three-way radix sort on the *reversed* strings, largest character
//! first, a string before its own suffixes — so `"arch"`, `"triple"`, `"amdgcn-amd-amdhsa"`,
//! `"gfx906"` are stored in that order (`h` > `e` > `a` > `6`). Because all keys are
//! distinct, that order does not depend on the order strings were added, which makes the
//! layout reproducible without LLVM's hash tables.
//!
//! The empty string always has offset 0.

use std::{vec, vec::Vec};

use std::collections::HashMap;
use std::io::Write;

/// A string table being built; [`StringTable::finalize`] fixes the layout.
#[derive(Clone, Debug, Default)]
pub struct StringTable<'a> {
    strings: Vec<&'a [u8]>,
    seen: HashMap<&'a [u8], ()>,
}

/// A laid-out string table: offsets of every string and the table's bytes.
#[derive(Clone, Debug)]
pub struct FinalStringTable<'a> {
    /// Distinct strings in layout order, with their offsets.
    placed: Vec<(&'a [u8], u64)>,
    offsets: HashMap<&'a [u8], u64>,
    size: u64,
}

impl<'a> StringTable<'a> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `s` (a second add of the same string is a no-op). `s` should not contain NUL.
    pub fn add(&mut self, s: &'a [u8]) {
        if self.seen.insert(s, ()).is_none() {
            self.strings.push(s);
        }
    }

    /// Lays the table out.
    pub fn finalize(mut self) -> FinalStringTable<'a> {
        // LLVM's multikeySort orders by the reversed string, larger bytes first, and puts a
        // string whose reversed form is a prefix of another's (i.e. a suffix) after it.
        self.strings
            .sort_unstable_by(|a, b| b.iter().rev().cmp(a.iter().rev()));
        let mut size: u64 = 1; // the leading NUL
        let mut previous: &[u8] = b"";
        let mut placed = Vec::with_capacity(self.strings.len());
        let mut offsets = HashMap::with_capacity(self.strings.len().saturating_add(1));
        for s in self.strings {
            let len = super::len64(s.len());
            // `previous` ends with `s`, so `s` and its NUL lie inside the table.
            let offset = if previous.ends_with(s) {
                size.saturating_sub(len).saturating_sub(1)
            } else {
                let at = size;
                size = size.saturating_add(len).saturating_add(1);
                previous = s;
                at
            };
            placed.push((s, offset));
            offsets.insert(s, offset);
        }
        // LLVM records the empty string at offset 0 after laying out the others.
        offsets.insert(b"".as_slice(), 0);
        FinalStringTable {
            placed,
            offsets,
            size,
        }
    }
}

impl<'a> FinalStringTable<'a> {
    /// Size of the table in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Offset of `s`, if it was added (the empty string is always at 0).
    pub fn offset(&self, s: &[u8]) -> Option<u64> {
        self.offsets.get(s).copied()
    }

    /// The table's bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; usize::try_from(self.size).unwrap_or(0)];
        for (s, at) in &self.placed {
            let at = usize::try_from(*at).unwrap_or(usize::MAX);
            if let Some(dst) = at.checked_add(s.len()).and_then(|end| out.get_mut(at..end)) {
                dst.copy_from_slice(s);
            }
        }
        out
    }

    /// Writes the table's bytes.
    pub fn write_to<W: Write + ?Sized>(&self, out: &mut W) -> std::io::Result<()> {
        out.write_all(&self.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packager_order_and_offsets() {
        // Observed in `clang-offload-packager-22 --image=...,triple=amdgcn-amd-amdhsa,arch=gfx906`:
        // table "\0arch\0triple\0amdgcn-amd-amdhsa\0gfx906\0".
        let mut t = StringTable::new();
        for s in ["arch", "gfx906", "triple", "amdgcn-amd-amdhsa"] {
            t.add(s.as_bytes());
        }
        let f = t.finalize();
        assert_eq!(f.to_vec(), b"\0arch\0triple\0amdgcn-amd-amdhsa\0gfx906\0");
        assert_eq!(f.offset(b"arch"), Some(1));
        assert_eq!(f.offset(b"triple"), Some(6));
        assert_eq!(f.offset(b"gfx906"), Some(31));
        assert_eq!(f.offset(b""), Some(0));
    }

    #[test]
    fn suffixes_share_bytes() {
        let mut t = StringTable::new();
        for s in ["text", ".rela.text", ".text", "a"] {
            t.add(s.as_bytes());
        }
        let f = t.finalize();
        // ".rela.text" first (longest with the same tail), then its suffixes reuse it.
        assert_eq!(f.to_vec(), b"\0.rela.text\0a\0");
        assert_eq!(f.offset(b".text"), Some(6));
        assert_eq!(f.offset(b"text"), Some(7));
        assert_eq!(f.offset(b"a"), Some(12));
    }
}
