//! The text table every command prints: columns padded to their widest cell.
//!
//! Standard library only: the fuzz target `table` (`fuzz/fuzz_targets/table.rs`) compiles
//! this file as it is.

use std::io::Write;

/// `s` with every control character (C0, DEL, C1) escaped as Rust's `escape_debug` writes
/// it: `\n`, `\r`, `\t`, `\u{1b}`, `\u{7f}`, `\u{9b}`; once anything is escaped, a
/// backslash is doubled too, so that the text reads back unambiguously. Text printed for a
/// person never carries a control byte from a file (issue 43: an `arch` of
/// `gfx90a\r\n\e]0;pwned\a` set the terminal's title and split a row over three lines).
/// A string with nothing to escape comes back as it is.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().saturating_add(8));
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Prints rows as a table whose columns are padded to their widest cell (in characters),
/// two spaces between columns, no space at the end of a line. Cells of any length are
/// padded by hand (`format!("{cell:<w$}")` panics for widths over 65,535); a row with more
/// cells than the header prints as many as the header has columns. Every cell and header
/// goes through [`escape`]: no control character of a cell reaches the output.
pub fn table(out: &mut impl Write, header: &[&str], rows: &[Vec<String>]) -> std::io::Result<()> {
    let header: Vec<std::borrow::Cow<'_, str>> = header.iter().map(|h| escape(h)).collect();
    let rows: Vec<Vec<std::borrow::Cow<'_, str>>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escape(c)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
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
    line(out, &mut header.iter().map(|s| s.as_ref()))?;
    for row in &rows {
        line(out, &mut row.iter().map(|s| s.as_ref()))?;
    }
    Ok(())
}
