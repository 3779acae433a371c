//! Every device image of a file or of the members of a zip file (a wheel), as `list`
//! prints them (`crate::listing`): what `variants` and `sbom` read.

use std::path::Path;

use offload_image::units;

use crate::input::Input;
use crate::listing::{split_lines, unit_lines, Line};
use crate::wheel::{Content, Zip};
use crate::Failure;

/// One library: the zip member it is (`None` for the file itself), its size in bytes, and
/// its lines (images, skipped bytes, damage).
pub struct Library {
    /// The member's path inside the zip file.
    pub member: Option<String>,
    /// The library's size in bytes.
    pub size: u64,
    /// The SHA-256 of the library's bytes.
    pub sha256: String,
    /// What `list` prints for it.
    pub lines: Vec<Line>,
    /// Its PTX images: the target (`sm_90`) and the PTX ISA version the driver must compile
    /// (the text's `.version`, else the fatbinary entry header's), where known.
    pub ptx: Vec<(String, Option<offload_image::driver::PtxIsa>)>,
}

/// The PTX images of `unit`: target and ISA version.
fn ptx_of(
    unit: &offload_image::Unit<'_>,
    options: &offload_image::ReadOptions,
    out: &mut Vec<(String, Option<offload_image::driver::PtxIsa>)>,
) {
    let _ = crate::decode::for_each_image_with(unit, options, false, |image| {
        if image.image_kind != offload_image::ImageKind::Ptx {
            return;
        }
        let (_, target) = crate::listing::identity(image);
        let isa = offload_image::driver::PtxIsa::of_text(image.bytes).or(image.ptx_isa);
        let entry = (target.unwrap_or_else(|| "?".to_string()), isa);
        if !out.contains(&entry) {
            out.push(entry);
        }
    });
}

/// True when `head` (a member's first bytes) may start a file with device code: the
/// magic numbers `doctor`'s scan probes (ELF, PE/COFF, `ar`, CCOB, OffloadBinary, bundles,
/// NVIDIA fatbinaries).
fn candidate(head: &[u8]) -> bool {
    const PREFIXES: [&[u8]; 9] = [
        b"\x7fELF",
        b"MZ",
        b"\x64\x86",
        b"\x64\xaa",
        b"\x50\xed\x55\xba",
        b"!<arch>\n",
        b"CCOB",
        b"\x10\xff\x10\xad",
        b"__CLANG_OFFLOAD_BUNDLE__",
    ];
    !head.is_empty() && PREFIXES.iter().any(|p| head.starts_with(p))
}

/// The lines of `data` (a file or a member, read through `input`), and its PTX images;
/// none when it holds no device code (its first unit does not read, or there is none).
type Listed = (
    Vec<Line>,
    Vec<(String, Option<offload_image::driver::PtxIsa>)>,
);

fn lines_of(path: &Path, data: &[u8], input: &Input, hash: bool) -> Result<Listed, Failure> {
    let options = crate::decode::read_options(crate::decode::ZstdDecoder::DEFAULT, hash);
    let (mut lines, mut ptx) = (Vec::new(), Vec::new());
    if let Some(library) = crate::kpack::Library::open(path, data) {
        split_lines(hash, &library, &options, &mut lines)?;
        return Ok((lines, ptx));
    }
    for (i, unit) in units(data, &options).enumerate() {
        match unit {
            Ok(unit) => {
                unit_lines(hash, input, &unit, &options, &mut lines);
                ptx_of(&unit, &options, &mut ptx);
            }
            // Not an offload file at all: nothing to list.
            Err(_) if i == 0 => return Ok((Vec::new(), Vec::new())),
            Err(e) => lines.push(Line::Damaged(crate::output::Damaged::outside(&e))),
        }
    }
    Ok((lines, ptx))
}

/// Whether `lines` hold an image.
fn has_images(lines: &[Line]) -> bool {
    lines.iter().any(|l| matches!(l, Line::Image(_)))
}

/// The libraries of `path`: the file itself, or every member of a zip file with device
/// code. `hash`: the images' SHA-256 too.
pub fn libraries(path: &Path, hash: bool) -> Result<Vec<Library>, Failure> {
    let input = Input::open(path)?;
    if crate::wheel::is_zip(input.bytes()) {
        return members(path, hash);
    }
    let (lines, ptx) = lines_of(path, input.bytes(), &input, hash)?;
    Ok(if has_images(&lines) {
        vec![Library {
            member: None,
            size: input.bytes().len() as u64,
            sha256: crate::output::sha256_hex(input.bytes()),
            lines,
            ptx,
        }]
    } else {
        Vec::new()
    })
}

/// The members of zip file `path` with device code.
fn members(path: &Path, hash: bool) -> Result<Vec<Library>, Failure> {
    let mut zip = Zip::open(path).map_err(|e| Failure::file(path, e))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let member = match zip.member(i, candidate) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => return Err(Failure::file(path, format!("member #{i}: {e}"))),
        };
        let inner = Path::new(&member.name);
        let ((lines, ptx), size, sha256) = match &member.content {
            Content::Stored(range) => {
                let input = zip.input();
                let data = input.bytes().get(range.clone()).unwrap_or_default();
                (
                    lines_of(inner, data, input, hash)?,
                    data.len() as u64,
                    crate::output::sha256_hex(data),
                )
            }
            Content::Spilled(input) => (
                lines_of(inner, input.bytes(), input, hash)?,
                input.bytes().len() as u64,
                crate::output::sha256_hex(input.bytes()),
            ),
            Content::Skipped => continue,
            Content::Unreadable(e) => {
                return Err(Failure::file(
                    path,
                    format!("{}: cannot read member: {e}", member.name.escape_debug()),
                ))
            }
        };
        if has_images(&lines) {
            out.push(Library {
                member: Some(member.name),
                size,
                sha256,
                lines,
                ptx,
            });
        }
    }
    Ok(out)
}

/// The text file `name` (`*.dist-info/variant.json`: the first member whose path, split at
/// `/`, is a `.dist-info` directory and `name`) of zip file `path`, at most 1 MiB.
pub fn dist_info_file(path: &Path, name: &str) -> Result<Option<(String, String)>, Failure> {
    use std::io::Read;
    let mut zip = Zip::open(path).map_err(|e| Failure::file(path, e))?;
    for (i, member) in zip.file_names() {
        let parts: Vec<&str> = member.split('/').collect();
        if parts.len() == 2 && parts[0].ends_with(".dist-info") && parts[1] == name {
            let file = zip.member_file(i).map_err(|e| Failure::file(path, e))?;
            let mut text = String::new();
            file.take(1 << 20)
                .read_to_string(&mut text)
                .map_err(|e| Failure::file(path, format!("{member}: {e}")))?;
            return Ok(Some((member, text)));
        }
    }
    Ok(None)
}
