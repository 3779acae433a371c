//! The text table printer of `loader-sim` (`loader-sim/src/table.rs`, compiled here as it
//! is): any header and cells, one cell widened past 65,535 characters on demand. Never a
//! panic; one line per row; no control character of the input in the output (cells are
//! escaped, `table::escape`); no line ends in a space; a cell without spaces starts, escaped,
//! at its column (the widths of the columns before it, two spaces after each).
#![no_main]
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[path = "../../loader-sim/src/table.rs"]
mod table;

#[derive(Arbitrary, Debug)]
struct Input {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// (row, column, characters): that cell becomes that many characters (up to 200,000).
    wide: Option<(u8, u8, u32)>,
}

fuzz_target!(|input: Input| {
    let Input {
        header,
        mut rows,
        wide,
    } = input;
    if let Some((r, c, n)) = wide {
        let n = (n % 200_000) as usize;
        let r = usize::from(r) % rows.len().max(1);
        if let Some(cell) = rows.get_mut(r).and_then(|row| {
            let len = row.len().max(1);
            row.get_mut(usize::from(c) % len)
        }) {
            *cell = "w".repeat(n);
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    table::table(&mut out, &header, &rows).expect("writing to a Vec does not fail");
    let text = String::from_utf8(out).expect("the table is UTF-8");
    // No control character from the input reaches the output: the only one is the end of
    // each line.
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "a control character in {text:?}"
    );
    assert_eq!(text.matches('\n').count(), rows.len() + 1);
    let escaped = |s: &str| table::escape(s).into_owned();
    let header: Vec<String> = header.iter().map(|h| escaped(h)).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escaped(c)).collect())
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let plain = |s: &str| !s.chars().any(char::is_whitespace);
    let all_plain = header.iter().all(|h| plain(h)) && rows.iter().flatten().all(|c| plain(c));
    if !all_plain {
        return;
    }
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), rows.len() + 1);
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let cells = std::iter::once(header.clone())
        .chain(rows.iter().map(|r| r.iter().map(String::as_str).collect()));
    for (line, cells) in lines.iter().zip(cells) {
        assert!(!line.ends_with(' '), "{line:?}");
        let chars: Vec<char> = line.chars().collect();
        let mut at = 0;
        for (cell, w) in cells.iter().zip(&widths) {
            let got: String = chars.iter().skip(at).take(cell.chars().count()).collect();
            assert_eq!(&got, cell);
            at += w + 2;
        }
    }
});
