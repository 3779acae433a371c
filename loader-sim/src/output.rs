//! Output helpers shared by the commands: JSON Lines and aligned tables.

use std::io::Write;

use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Writes one JSON object per line.
pub fn json_line<T: serde::Serialize>(out: &mut impl Write, value: &T) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

/// Prints rows as a table whose columns are padded to their widest cell.
pub fn table(out: &mut impl Write, header: &[&str], rows: &[Vec<String>]) -> std::io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line =
        |out: &mut dyn Write, cells: &mut dyn Iterator<Item = &str>| -> std::io::Result<()> {
            let mut s = String::new();
            for (i, (cell, w)) in cells.zip(&widths).enumerate() {
                if i + 1 == widths.len() {
                    s.push_str(cell);
                } else {
                    s.push_str(&format!("{cell:<w$}  "));
                }
            }
            writeln!(out, "{}", s.trim_end())
        };
    line(out, &mut header.iter().copied())?;
    for row in rows {
        line(out, &mut row.iter().map(|s| s.as_str()))?;
    }
    Ok(())
}
