//! The text table every command prints: columns padded to their widest cell.
//!
//! Standard library only: the fuzz target `table` (`fuzz/fuzz_targets/table.rs`) compiles
//! this file as it is.

use std::io::Write;

/// Prints rows as a table whose columns are padded to their widest cell (in characters),
/// two spaces between columns, no space at the end of a line. Cells of any length are
/// padded by hand (`format!("{cell:<w$}")` panics for widths over 65,535); a row with more
/// cells than the header prints as many as the header has columns.
pub fn table(out: &mut impl Write, header: &[&str], rows: &[Vec<String>]) -> std::io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line =
        |out: &mut dyn Write, cells: &mut dyn Iterator<Item = &str>| -> std::io::Result<()> {
            let mut s = String::new();
            for (i, (cell, w)) in cells.zip(&widths).enumerate() {
                s.push_str(cell);
                if i + 1 < widths.len() {
                    let pad = w.saturating_sub(cell.chars().count()).saturating_add(2);
                    s.extend(std::iter::repeat_n(' ', pad));
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
