//! Just enough of the LLVM bitcode container to read a module's *irsymtab* — the symbol
//! table clang stores next to the IR (`SYMTAB_BLOCK` + `STRTAB_BLOCK`,
//! `llvm/Object/IRSymtab.h`).
//!
//! `llvm::writeArchive` lists a bitcode member's symbols through `IRObjectFile`, i.e.
//! `ModuleSymbolTable` over the parsed module; the irsymtab is built from the very same
//! `ModuleSymbolTable` (same symbols, same order, same flags) when the bitcode is written,
//! so reading it gives the archive symbol table without an IR parser. A bitcode file
//! without an irsymtab (or with another irsymtab version) is reported as unsupported.

/// One irsymtab symbol: name and `storage::Symbol::Flags`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrSymbol {
    /// Mangled name.
    pub name: Vec<u8>,
    /// Flag bits (`FB_*`).
    pub flags: u32,
}

/// `storage::Symbol::FB_undefined`.
pub const FB_UNDEFINED: u32 = 1 << 3;
/// `storage::Symbol::FB_global`.
pub const FB_GLOBAL: u32 = 1 << 10;
/// `storage::Symbol::FB_format_specific`.
pub const FB_FORMAT_SPECIFIC: u32 = 1 << 11;

const STRTAB_BLOCK_ID: u64 = 23;
const SYMTAB_BLOCK_ID: u64 = 25;

/// True if `data` starts with a bitcode magic (raw or wrapped), like `identify_magic`.
pub fn is_bitcode(data: &[u8]) -> bool {
    data.starts_with(b"BC\xC0\xDE") || data.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
}

struct Bits<'a> {
    data: &'a [u8],
    pos: usize, // in bits
}

impl<'a> Bits<'a> {
    fn read(&mut self, n: u32) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..n {
            let byte = self
                .data
                .get(self.pos / 8)
                .ok_or("bitcode stream ends unexpectedly")?;
            let bit = (byte >> (self.pos % 8)) & 1;
            v |= u64::from(bit) << i;
            self.pos += 1;
        }
        Ok(v)
    }

    fn vbr(&mut self, n: u32) -> Result<u64, String> {
        let hi = 1u64 << (n - 1);
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let piece = self.read(n)?;
            v |= (piece & (hi - 1))
                .checked_shl(shift)
                .ok_or("bitcode VBR too long")?;
            if piece & hi == 0 {
                return Ok(v);
            }
            shift += n - 1;
            if shift > 64 {
                return Err("bitcode VBR too long".into());
            }
        }
    }

    fn align32(&mut self) {
        self.pos = self.pos.div_ceil(32) * 32;
    }

    fn at_end(&self) -> bool {
        self.pos + 32 > self.data.len() * 8
    }
}

#[derive(Clone, Debug)]
enum Op {
    Literal,
    Fixed(u32),
    Vbr(u32),
    Array,
    Char6,
    Blob,
}

/// Reads the blob of the single `*_BLOB` record of the block whose header was just read
/// (the loop of `BitstreamCursor::advance` over the block's entries).
fn block_blob(b: &mut Bits<'_>, width: u32) -> Result<Option<Vec<u8>>, String> {
    let mut abbrevs: Vec<Vec<Op>> = Vec::new();
    let mut blob = None;
    loop {
        let id = b.read(width)?;
        match id {
            // END_BLOCK.
            0 => {
                b.align32();
                return Ok(blob);
            }
            // ENTER_SUBBLOCK.
            1 => skip_block(b)?,
            // DEFINE_ABBREV.
            2 => abbrevs.push(read_abbrev(b)?),
            // UNABBREV_RECORD.
            3 => skip_unabbreviated_record(b)?,
            n => {
                let ops = abbrevs
                    .get((n - 4) as usize)
                    .ok_or("undefined bitcode abbreviation")?;
                if let Some(bytes) = read_abbreviated_record(b, ops)? {
                    blob = Some(bytes);
                }
            }
        }
    }
}

/// `BitstreamCursor::SkipBlock`: a nested block, whose header (`ENTER_SUBBLOCK`) was just
/// read, is skipped by its length word.
fn skip_block(b: &mut Bits<'_>) -> Result<(), String> {
    b.vbr(8)?;
    b.vbr(4)?;
    b.align32();
    let words = b.read(32)?;
    b.pos += usize::try_from(words * 32).map_err(|_| "bitcode block too large")?;
    Ok(())
}

/// `BitstreamCursor::ReadAbbrevRecord`: the operands of a `DEFINE_ABBREV`.
fn read_abbrev(b: &mut Bits<'_>) -> Result<Vec<Op>, String> {
    let n = b.vbr(5)?;
    let mut ops = Vec::new();
    for _ in 0..n {
        if b.read(1)? == 1 {
            b.vbr(8)?;
            ops.push(Op::Literal);
        } else {
            ops.push(match b.read(3)? {
                1 => Op::Fixed(b.vbr(5)? as u32),
                2 => Op::Vbr(b.vbr(5)? as u32),
                3 => Op::Array,
                4 => Op::Char6,
                5 => Op::Blob,
                e => return Err(format!("unknown bitcode abbreviation encoding {e}")),
            });
        }
    }
    Ok(ops)
}

/// `BitstreamCursor::skipRecord` for an `UNABBREV_RECORD`: code, operand count, operands.
fn skip_unabbreviated_record(b: &mut Bits<'_>) -> Result<(), String> {
    b.vbr(6)?;
    let n = b.vbr(6)?;
    for _ in 0..n {
        b.vbr(6)?;
    }
    Ok(())
}

/// `BitstreamCursor::readRecord` for a record of the abbreviation `ops`: every operand is
/// read past; the record's blob, if it has one, is returned.
fn read_abbreviated_record(b: &mut Bits<'_>, ops: &[Op]) -> Result<Option<Vec<u8>>, String> {
    let mut blob = None;
    let mut i = 0;
    while i < ops.len() {
        match &ops[i] {
            Op::Literal => {}
            Op::Fixed(w) => {
                b.read(*w)?;
            }
            Op::Vbr(w) => {
                b.vbr(*w)?;
            }
            Op::Char6 => {
                b.read(6)?;
            }
            Op::Array => {
                skip_array(b, ops.get(i + 1).ok_or("bad bitcode array")?)?;
                i += 1;
            }
            Op::Blob => blob = Some(read_blob(b)?),
        }
        i += 1;
    }
    Ok(blob)
}

/// An array operand: its length, then that many elements of the encoding `elt`.
fn skip_array(b: &mut Bits<'_>, elt: &Op) -> Result<(), String> {
    let len = b.vbr(6)?;
    for _ in 0..len {
        match *elt {
            Op::Fixed(w) => {
                b.read(w)?;
            }
            Op::Vbr(w) => {
                b.vbr(w)?;
            }
            Op::Char6 => {
                b.read(6)?;
            }
            _ => return Err("bad bitcode array element".into()),
        }
    }
    Ok(())
}

/// A blob operand: its length, then its bytes between 32-bit alignments.
fn read_blob(b: &mut Bits<'_>) -> Result<Vec<u8>, String> {
    let len = usize::try_from(b.vbr(6)?).map_err(|_| "blob too large")?;
    b.align32();
    let start = b.pos / 8;
    let bytes = b
        .data
        .get(start..start.checked_add(len).ok_or("blob too large")?)
        .ok_or("bitcode blob runs past the end")?;
    let blob = bytes.to_vec();
    b.pos += len * 8;
    b.align32();
    Ok(blob)
}

fn word(b: &[u8], at: usize) -> Result<u32, String> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| "irsymtab truncated".to_string())
}

/// The irsymtab symbols of a bitcode file, in `ModuleSymbolTable` order.
pub fn irsymtab_symbols(data: &[u8]) -> Result<Vec<IrSymbol>, String> {
    let code = if data.starts_with(&[0xDE, 0xC0, 0x17, 0x0B]) {
        let off = word(data, 8)? as usize;
        let size = word(data, 12)? as usize;
        data.get(off..off.checked_add(size).ok_or("bad bitcode wrapper")?)
            .ok_or("bitcode wrapper points outside the file")?
    } else {
        data
    };
    if !code.starts_with(b"BC\xC0\xDE") {
        return Err("not LLVM bitcode".into());
    }
    let mut b = Bits {
        data: code,
        pos: 32,
    };
    let (mut symtab, mut strtab) = (None, None);
    while !b.at_end() {
        match b.read(2)? {
            0 => break,
            1 => {
                let id = b.vbr(8)?;
                let width = b.vbr(4)? as u32;
                b.align32();
                let words = b.read(32)?;
                let end =
                    b.pos + usize::try_from(words * 32).map_err(|_| "bitcode block too large")?;
                if id == SYMTAB_BLOCK_ID {
                    symtab = block_blob(&mut b, width)?;
                } else if id == STRTAB_BLOCK_ID {
                    strtab = block_blob(&mut b, width)?;
                }
                b.pos = end;
            }
            _ => return Err("unexpected record at the top level of the bitcode".into()),
        }
    }
    let (Some(symtab), Some(strtab)) = (symtab, strtab) else {
        return Err("the bitcode has no irsymtab (SYMTAB_BLOCK/STRTAB_BLOCK); its archive symbols cannot be computed without an IR reader".into());
    };
    let version = word(&symtab, 0)?;
    if version != 3 {
        return Err(format!("unsupported irsymtab version {version}"));
    }
    // Header: Version, Producer(Str), Modules, Comdats, Symbols (Range), ...
    let sym_off = word(&symtab, 4 + 8 + 8 + 8)? as usize;
    let sym_count = word(&symtab, 4 + 8 + 8 + 8 + 4)? as usize;
    let mut out = Vec::with_capacity(sym_count.min(1 << 16));
    for i in 0..sym_count {
        let at = sym_off + i * 24;
        let name_off = word(&symtab, at)? as usize;
        let name_len = word(&symtab, at + 4)? as usize;
        let flags = word(&symtab, at + 20)?;
        let name = strtab
            .get(name_off..name_off + name_len)
            .ok_or("irsymtab name outside the string table")?
            .to_vec();
        out.push(IrSymbol { name, flags });
    }
    Ok(out)
}
