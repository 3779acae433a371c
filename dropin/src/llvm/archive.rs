//! `ar` archives: reading members, and writing GNU archives exactly as
//! `llvm::writeArchive(..., SymtabWritingMode::NormalSymtab, K_GNU, Deterministic = true,
//! Thin = false)` writes them (`llvm/lib/Object/ArchiveWriter.cpp`).
//!
//! Layout: `!<arch>\n`; the symbol table member `/` (big-endian `u32` count, one `u32`
//! member offset per symbol, NUL-terminated names, padded to even with NULs) when any
//! member is a symbolic file; the long-name member `//` (`name/\n` per name of 16 or more
//! bytes or containing `/`, padded to even with `\n`); then every member with a 60-byte
//! header (timestamp 0, uid/gid 0, mode `644`) and data padded to even with `\n`.
//!
//! Symbols are listed like `isArchiveSymbol`: global, defined, not format-specific ones,
//! from ELF `.symtab` sections and from bitcode irsymtabs ([`super::bitcode`]), in file
//! order. Other member kinds (PTX text, ...) have no symbols.

use object::read::archive::ArchiveFile;
use object::read::elf::{FileHeader, Sym};
use object::Endianness;

use super::bitcode;

/// A member to write: its name and contents.
#[derive(Clone, Debug)]
pub struct NewMember {
    /// Member name (as `NewArchiveMember::MemberName`).
    pub name: String,
    /// Contents.
    pub data: Vec<u8>,
}

/// The members of an archive, with LLVM's view of their names (GNU long names resolved,
/// the trailing `/` removed). Thin archives are not supported.
pub fn read_members(data: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let a = ArchiveFile::parse(data).map_err(|e| format!("not a valid archive: {e}"))?;
    if a.is_thin() {
        return Err("thin archives are not supported".into());
    }
    let mut out = Vec::new();
    for m in a.members() {
        let m = m.map_err(|e| format!("malformed archive member: {e}"))?;
        let name = String::from_utf8_lossy(m.name()).into_owned();
        let bytes = m
            .data(data)
            .map_err(|e| format!("malformed archive member '{name}': {e}"))?;
        out.push((name, bytes.to_vec()));
    }
    Ok(out)
}

/// `getSymbols` + `isArchiveSymbol`: `None` for a file that is not a symbolic file,
/// else its archive symbols in order.
pub fn archive_symbols(data: &[u8]) -> Result<Option<Vec<Vec<u8>>>, String> {
    if bitcode::is_bitcode(data) {
        let syms = bitcode::irsymtab_symbols(data)?;
        return Ok(Some(
            syms.into_iter()
                .filter(|s| {
                    s.flags & bitcode::FB_GLOBAL != 0
                        && s.flags & (bitcode::FB_UNDEFINED | bitcode::FB_FORMAT_SPECIFIC) == 0
                })
                .map(|s| s.name)
                .collect(),
        ));
    }
    if !data.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    match data.get(4) {
        Some(1) => elf_symbols::<object::elf::FileHeader32<Endianness>>(data).map(Some),
        Some(2) => elf_symbols::<object::elf::FileHeader64<Endianness>>(data).map(Some),
        _ => Err("invalid ELF class".into()),
    }
}

fn elf_symbols<H: FileHeader<Endian = Endianness>>(data: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let header = H::parse(data).map_err(|e| format!("invalid ELF file: {e}"))?;
    let endian = header
        .endian()
        .map_err(|e| format!("invalid ELF file: {e}"))?;
    let sections = header
        .sections(endian, data)
        .map_err(|e| format!("invalid ELF section table: {e}"))?;
    let symtab = sections
        .symbols(endian, data, object::elf::SHT_SYMTAB)
        .map_err(|e| format!("invalid ELF symbol table: {e}"))?;
    let mut out = Vec::new();
    for (i, sym) in symtab.symbols().iter().enumerate() {
        let bind = sym.st_bind();
        let typ = sym.st_type();
        let shndx = sym.st_shndx(endian);
        let format_specific =
            i == 0 || typ == object::elf::STT_FILE || typ == object::elf::STT_SECTION;
        let global = bind != object::elf::STB_LOCAL;
        let undefined = shndx == object::elf::SHN_UNDEF;
        if format_specific || !global || undefined {
            continue;
        }
        let name = symtab
            .symbol_name(endian, sym)
            .map_err(|e| format!("invalid ELF symbol name: {e}"))?;
        out.push(name.to_vec());
    }
    Ok(out)
}

/// `printWithSpacePadding`.
fn pad(out: &mut Vec<u8>, s: &str, width: usize) {
    out.extend_from_slice(s.as_bytes());
    for _ in s.len()..width {
        out.push(b' ');
    }
}

/// `printRestOfMemberHeader` with deterministic values (time 0, uid/gid 0).
fn rest_of_header(out: &mut Vec<u8>, perms: &str, size: u64) {
    pad(out, "0", 12);
    pad(out, "0", 6);
    pad(out, "0", 6);
    pad(out, perms, 8);
    pad(out, &size.to_string(), 10);
    out.extend_from_slice(b"`\n");
}

/// Writes a GNU archive of `members` as LLVM 22 does for `clang-offload-bundler -type=a`
/// and `clang-offload-packager --archive`.
pub fn write_gnu(members: &[NewMember]) -> Result<Vec<u8>, String> {
    let mut string_table: Vec<u8> = Vec::new();
    let mut name_pos: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut sym_names: Vec<u8> = Vec::new();
    let mut has_object = false;
    // (header, symbol name offsets) per member.
    let mut headers: Vec<(Vec<u8>, Vec<usize>)> = Vec::with_capacity(members.len());
    for m in members {
        let mut h = Vec::with_capacity(60);
        if m.name.len() >= 16 || m.name.contains('/') {
            let at = *name_pos.entry(m.name.as_str()).or_insert_with(|| {
                let at = string_table.len();
                string_table.extend_from_slice(m.name.as_bytes());
                string_table.extend_from_slice(b"/\n");
                at
            });
            h.push(b'/');
            pad(&mut h, &at.to_string(), 15);
        } else {
            pad(&mut h, &format!("{}/", m.name), 16);
        }
        rest_of_header(&mut h, "644", m.data.len() as u64);
        let mut syms = Vec::new();
        if let Some(names) = archive_symbols(&m.data).map_err(|e| format!("{}: {e}", m.name))? {
            has_object = true;
            for n in names {
                syms.push(sym_names.len());
                sym_names.extend_from_slice(&n);
                sym_names.push(0);
            }
        }
        headers.push((h, syms));
    }
    if has_object && sym_names.is_empty() {
        sym_names.extend_from_slice(b"\0\0\0");
    }
    let num_syms: usize = headers.iter().map(|(_, s)| s.len()).sum();

    let mut out = b"!<arch>\n".to_vec();
    let string_member = if string_table.is_empty() {
        Vec::new()
    } else {
        let padding = string_table.len() % 2;
        let mut s = Vec::new();
        pad(&mut s, "//", 48);
        pad(&mut s, &(string_table.len() + padding).to_string(), 10);
        s.extend_from_slice(b"`\n");
        s.extend_from_slice(&string_table);
        if padding == 1 {
            s.push(b'\n');
        }
        s
    };
    if !sym_names.is_empty() {
        let raw = 4 + 4 * num_syms + sym_names.len();
        let padding = raw % 2;
        let size = raw + padding;
        let headers_size = 8 + 60 + size + string_member.len();
        if (headers_size as u64)
            + members
                .iter()
                .map(|m| 60 + m.data.len() as u64 + (m.data.len() as u64 % 2))
                .sum::<u64>()
            >= 1 << 32
        {
            return Err("archive too large for a 32-bit symbol table".into());
        }
        pad(&mut out, "/", 16);
        rest_of_header(&mut out, "0", size as u64);
        out.extend_from_slice(&(num_syms as u32).to_be_bytes());
        let mut pos = headers_size;
        for ((h, syms), m) in headers.iter().zip(members) {
            for _ in syms {
                out.extend_from_slice(&(pos as u32).to_be_bytes());
            }
            pos += h.len() + m.data.len() + m.data.len() % 2;
        }
        out.extend_from_slice(&sym_names);
        if padding == 1 {
            out.push(0);
        }
    }
    out.extend_from_slice(&string_member);
    for ((h, _), m) in headers.iter().zip(members) {
        out.extend_from_slice(h);
        out.extend_from_slice(&m.data);
        if m.data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    Ok(out)
}
