//! `ar` archives: reading members (with `object`), and writing GNU archives exactly as
//! `llvm::writeArchive(..., SymtabWritingMode::NormalSymtab, K_GNU, Deterministic = true,
//! Thin = false)` writes them, through `ar_archive_writer`.
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
    if let Some(e) = llvm_archive_error(data) {
        return Err(e);
    }
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

/// The messages of LLVM's `Archive::create` that do not depend on member contents, which
/// LLVM prints without the file name (see [`is_llvm_archive_error`]): a file without an
/// archive magic is "file too small to be an archive" (whatever its size), and a member
/// header cut short is reported at its offset.
fn llvm_archive_error(data: &[u8]) -> Option<String> {
    const HEADER: usize = 60;
    if data.len() < 8
        || !(data.starts_with(b"!<arch>\n")
            || data.starts_with(b"!<thin>\n")
            || data.starts_with(b"<bigaf>\n"))
    {
        return Some("file too small to be an archive".into());
    }
    if !data.starts_with(b"!<arch>\n") {
        return None;
    }
    let mut offset = 8usize;
    while offset < data.len() {
        if data.len() - offset < HEADER {
            return Some(format!(
                "truncated or malformed archive (remaining size of archive too small for next archive member header at offset {offset})"
            ));
        }
        let field = std::str::from_utf8(&data[offset + 48..offset + 58]).ok()?;
        let size: usize = field.trim_end_matches(' ').parse().ok()?;
        offset = offset.checked_add(HEADER)?.checked_add(size)?;
        offset = offset.checked_add(offset & 1)?;
    }
    None
}

/// True if `msg` (from [`read_members`]) is one of LLVM's own archive messages, which
/// LLVM's tools print without the file name.
pub fn is_llvm_archive_error(msg: &str) -> bool {
    msg == "file too small to be an archive" || msg.starts_with("truncated or malformed archive (")
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

/// What `ar_archive_writer` asks of a member: LLVM's archive symbols
/// ([`archive_symbols`]), so that bitcode members get their irsymtab symbols (the crate's
/// default reader only knows native objects). COFF and XCOFF questions never arise for
/// GNU archives.
static OBJECT_READER: ar_archive_writer::ObjectReader = ar_archive_writer::ObjectReader {
    get_symbols: member_symbols,
    is_64_bit_object_file: |data| data.starts_with(b"\x7fELF\x02"),
    is_ec_object_file: |_| false,
    is_any_arm64_coff: |_| false,
    get_xcoff_member_alignment: |_| 2,
};

/// [`ar_archive_writer::GetSymbolsFn`] over [`archive_symbols`].
fn member_symbols(
    data: &[u8],
    f: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<bool> {
    match archive_symbols(data).map_err(std::io::Error::other)? {
        None => Ok(false),
        Some(names) => {
            for n in names {
                f(&n)?;
            }
            Ok(true)
        }
    }
}

/// Writes a GNU archive of `members` as LLVM 22 does for `clang-offload-bundler -type=a`
/// and `clang-offload-packager --archive`: `writeArchive` with `K_GNU`, deterministic
/// headers (time 0, uid/gid 0, mode 644), not thin. The layout is `ar_archive_writer`'s
/// (rust-lang's port of `ArchiveWriter.cpp`); only the symbol lists are ours.
///
/// Past 4 GiB the symbol table switches to the 64-bit `/SYM64/` form, as in LLVM.
pub fn write_gnu(members: &[NewMember]) -> Result<Vec<u8>, String> {
    let new: Vec<ar_archive_writer::NewArchiveMember<'_>> = members
        .iter()
        .map(|m| {
            ar_archive_writer::NewArchiveMember::new(
                m.data.as_slice(),
                &OBJECT_READER,
                m.name.clone(),
            )
        })
        .collect();
    let mut out = std::io::Cursor::new(Vec::new());
    ar_archive_writer::write_archive_to_stream(
        &mut out,
        &new,
        ar_archive_writer::ArchiveKind::Gnu,
        false,
        None,
    )
    .map_err(|e| e.to_string())?;
    let mut out = out.into_inner();
    // ar_archive_writer counts every member as a symbolic file (it ignores the `bool` of
    // `get_symbols`), so an archive of only non-symbolic members (PTX text, cubins that
    // are not ELF, ...) gets an empty symbol table: a `/` member of 8 bytes (count 0 and
    // the `\0\0\0` Solaris padding). LLVM 22 sets `HasObject` only for symbolic files
    // and writes no `/` member then. Remove it; nothing in a GNU archive refers to
    // absolute member offsets once there is no symbol table.
    let symbolic = members
        .iter()
        .map(|m| archive_symbols(&m.data).map(|s| s.is_some()))
        .collect::<Result<Vec<bool>, String>>()?;
    if !symbolic.contains(&true) {
        const EMPTY_SYMTAB: &[u8] =
            b"/               0           0     0     0       8         `\n\0\0\0\0\0\0\0\0";
        if out.get(8..8 + EMPTY_SYMTAB.len()) == Some(EMPTY_SYMTAB) {
            out.drain(8..8 + EMPTY_SYMTAB.len());
        }
    }
    Ok(out)
}
