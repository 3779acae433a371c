//! Output helpers shared by the commands: JSON Lines, aligned tables, and the records and
//! names more than one command prints.

use std::io::Write;

use offload_image::arch::Code;
use offload_image::{Identity, Image, Target};
use serde::Serialize;
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

/// Writes `args` and a newline to standard error, ignoring a failure: a closed standard
/// error (a pipe whose reader went away) must not panic the command, as `eprintln!` does.
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// Writes `text` to standard error as it is, ignoring a failure ([`stderr_line`]).
pub fn stderr_text(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// The output files the running command has written (`select -o`), which
/// [`crate::run_cli`] removes when the command fails after writing them.
static WRITTEN: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Records that the command wrote its output file `path` (created or truncated it).
pub fn wrote(path: &std::path::Path) {
    if let Ok(mut w) = WRITTEN.lock() {
        if !w.iter().any(|p| p == path) {
            w.push(path.to_path_buf());
        }
    }
}

/// The output files recorded by [`wrote`] since the last call.
pub fn take_written() -> Vec<std::path::PathBuf> {
    WRITTEN
        .lock()
        .map(|mut w| std::mem::take(&mut *w))
        .unwrap_or_default()
}

/// Writes one JSON object per line.
pub fn json_line<T: serde::Serialize>(out: &mut impl Write, value: &T) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

pub use crate::table::table;

/// Bytes skipped between containers (FORMATS.md §2.4): a `list --json` record of its own
/// (`{"note": "skipped", ...}`) and a field of `select --explain` records.
#[derive(Clone, Serialize)]
pub struct Skipped {
    /// Always `"skipped"` (tells these records from image records).
    pub note: &'static str,
    /// Offset of the first skipped byte in FILE.
    pub offset: u64,
    /// How many bytes were skipped.
    pub size: u64,
    /// One sentence.
    pub message: String,
}

impl Skipped {
    /// The note for the file range `r`.
    pub fn new(r: std::ops::Range<u64>) -> Self {
        let size = r.end.saturating_sub(r.start);
        Skipped {
            note: "skipped",
            offset: r.start,
            size,
            message: format!(
                "{size} bytes at byte {} are neither padding nor an offload container: skipped up to the next container (FORMATS.md §2.4)",
                r.start
            ),
        }
    }
}

/// A container that does not read, or an error outside any container: a `list` and
/// `select` record of its own (`{"note": "damaged", ...}`). The walk goes on after it, and
/// the command exits with status 2 once it has reported every readable unit.
#[derive(Clone, Serialize)]
pub struct Damaged {
    /// Always `"damaged"`.
    pub note: &'static str,
    /// Where the damaged unit is (`null` for an error outside any unit).
    pub container: Option<String>,
    /// Its index in its container.
    pub bundle_index: Option<usize>,
    /// Offset in FILE of the byte the error names.
    pub offset: u64,
    /// The error kind (`CLI.md`).
    pub error: &'static str,
    /// One sentence.
    pub message: String,
}

impl Damaged {
    /// The damage of a unit (its container does not read, or opening it failed).
    pub fn unit(unit: &offload_image::Unit<'_>, e: &offload_image::Error) -> Self {
        Damaged {
            note: "damaged",
            container: Some(unit.location.to_string()),
            bundle_index: Some(unit.index),
            offset: e.offset(),
            error: e.kind().name(),
            message: e.to_string(),
        }
    }

    /// An error of the walk outside any unit.
    pub fn outside(e: &offload_image::Error) -> Self {
        Damaged {
            note: "damaged",
            container: None,
            bundle_index: None,
            offset: e.offset(),
            error: e.kind().name(),
            message: e.to_string(),
        }
    }

    /// The line `list` and `select` print on standard error for it.
    pub fn warn(&self, file: &std::path::Path) {
        match (&self.container, self.bundle_index) {
            (Some(c), Some(i)) if !c.is_empty() => stderr_line(format_args!(
                "loader-sim: error: {}: {c} unit {i} is damaged: {}",
                file.display(),
                self.message
            )),
            _ => stderr_line(format_args!(
                "loader-sim: error: {}: {}",
                file.display(),
                self.message
            )),
        }
    }
}

/// How `list` and `select` name an image ([`Image::name`]: `sm_86` for a cubin,
/// `compute_86` for PTX).
pub fn image_name(image: &Image<'_>) -> String {
    image.name().to_string()
}

/// What an image holds, as `select` and `list` name it: `cubin` (an NVIDIA device ELF),
/// `elf` (an AMDGPU code object or other device ELF), `ptx`, `bitcode`, `spirv`,
/// `fatbinary` or `other`.
pub fn code_name(identity: &Identity<'_>) -> &'static str {
    match identity.code {
        Code::Elf if matches!(identity.target, Target::Nvptx(_)) => "cubin",
        Code::Elf => "elf",
        Code::Bitcode => "bitcode",
        Code::Spirv => "spirv",
        Code::Ptx => "ptx",
        Code::Fatbinary => "fatbinary",
        Code::Other => "other",
    }
}

/// The architecture as the toolchain names it ([`Identity::toolchain_target`]): for NVIDIA
/// code, nvcc's (`sm_86` for a cubin, `compute_86`, the virtual architecture, for PTX; with
/// the `a`/`f` suffix); for AMDGPU code, the target ID. `None` when the image names no
/// target.
pub fn arch_name(identity: &Identity<'_>) -> Option<String> {
    identity.toolchain_target().map(|t| t.to_string())
}

/// The writer every command's output goes through (`run_cli`): it stops the output at
/// the first fault of a guarded input map (an input became shorter while read: what would
/// follow was computed from zeros, not from the file), and remembers a broken pipe (the
/// reader of the output went away), which ends the command quietly.
pub struct Guarded<'a> {
    inner: &'a mut dyn Write,
    faults: u64,
    broken_pipe: bool,
}

impl<'a> Guarded<'a> {
    /// Guards `inner` from now on.
    pub fn new(inner: &'a mut dyn Write) -> Self {
        Guarded {
            inner,
            faults: loader_sim_os::mapping::fault_count(),
            broken_pipe: false,
        }
    }

    /// Whether a write found the pipe closed.
    pub fn broken_pipe(&self) -> bool {
        self.broken_pipe
    }

    fn check<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            self.broken_pipe |= e.kind() == std::io::ErrorKind::BrokenPipe;
        }
        r
    }

    fn unchanged(&self) -> std::io::Result<()> {
        if loader_sim_os::mapping::fault_count() != self.faults {
            return Err(std::io::Error::other(
                "an input file became shorter while it was read",
            ));
        }
        Ok(())
    }
}

impl Write for Guarded<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.unchanged()?;
        let r = self.inner.write(buf);
        self.check(r)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.unchanged()?;
        let r = self.inner.write_all(buf);
        self.check(r)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.unchanged()?;
        let r = self.inner.flush();
        self.check(r)
    }
}

/// How `image` of `unit` is compressed, as `list` names it (`zlib`, `zstd`, `lz4`): a
/// `.kpack` archive's per-kernel zstd frames, a fatbinary entry's codec (its flags), or the
/// compressed bundle's method; `None` when stored plain.
pub fn compression_name(unit: &offload_image::Unit<'_>, image: &Image<'_>) -> Option<&'static str> {
    use offload_image::container::UnitContent;
    match &unit.content {
        UnitContent::Kpack(k) => {
            (k.compression() == offload_image::kpack::Compression::ZstdPerKernel).then_some("zstd")
        }
        // Per entry: the codec its flags name.
        UnitContent::NvFatbin(_) => {
            offload_image::nvfatbin::Codec::from_flags(u64::from(image.flags))
                .map(offload_image::nvfatbin::Codec::name)
        }
        _ => unit.compressed().map(|c| c.method().name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell longer than 65,535 characters (an `ar` member's name, a unit of 2,100
    /// entries) is printed whole and padded, without the formatter's width panic.
    #[test]
    fn table_cells_of_any_length() {
        let long = "x".repeat(70_000);
        let rows = vec![
            vec![long.clone(), "1".into(), "last".into()],
            vec!["short".into(), "22".into(), "z".into()],
        ];
        let mut out = Vec::new();
        table(&mut out, &["NAME", "N", "END"], &rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], format!("{long}  1   last"));
        assert_eq!(lines[2], format!("short{}  22  z", " ".repeat(70_000 - 5)));
        assert_eq!(lines[0].find('N'), Some(0));
        assert_eq!(lines[0].find(" N "), Some(70_001));
    }

    /// A write into a closed pipe is remembered (the binary then ends quietly).
    #[test]
    fn guarded_writer_marks_a_broken_pipe() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut closed = Closed;
        let mut g = Guarded::new(&mut closed);
        assert!(!g.broken_pipe());
        let e = g.write_all(b"x").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
        assert!(g.broken_pipe());
    }
}
