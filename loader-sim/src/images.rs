//! Every device image of a file or of the members of a zip file (a wheel), as `list`
//! prints them (`crate::listing`): what `variants` and `sbom` read.

use std::path::Path;

use offload_image::units;

use crate::input::Input;
use crate::listing::{split_lines, unit_lines_seeing, Line, Seeing};
use crate::wheel::{Content, Zip};
use crate::Failure;

/// One library: the zip member it is (`None` for the file itself), its size in bytes, and
/// its lines (images, skipped bytes, damage).
pub struct Library {
    /// The member's path inside the zip file.
    pub member: Option<String>,
    /// The library's size in bytes.
    pub size: u64,
    /// The SHA-256 of the library's bytes (with `hash`: [`libraries`]).
    pub sha256: Option<String>,
    /// What `list` prints for it.
    pub lines: Vec<Line>,
    /// Its PTX images: the target (`sm_90`) and the PTX ISA version the driver must compile
    /// (the text's `.version`, else the fatbinary entry header's), where known.
    pub ptx: Vec<PtxOf>,
}

/// Adds `image` to `out` (target and ISA version) if it is PTX (compressed PTX comes
/// decoded: `crate::decode::for_each_image_seeing`).
fn add_ptx(image: &offload_image::Image<'_>, out: &mut Vec<PtxOf>) {
    if image.image_kind != offload_image::ImageKind::Ptx {
        return;
    }
    let (_, target) = crate::listing::identity(image);
    let isa = offload_image::driver::PtxIsa::of_text(image.bytes).or(image.ptx_isa);
    let entry = (target.unwrap_or_else(|| "?".to_string()), isa);
    if !out.contains(&entry) {
        out.push(entry);
    }
}

/// A PTX image: its target (`sm_90`) and PTX ISA version, where known.
type PtxOf = (String, Option<offload_image::driver::PtxIsa>);

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
type Listed = (Vec<Line>, Vec<PtxOf>);

/// What a caller sees of each opened unit's images (as stored, none decoded), in the pass
/// that lists them: [`libraries_seeing`].
pub type SeeUnit<'f> = &'f mut dyn FnMut(Option<&str>, &[offload_image::Image<'_>]);

/// [`Listed`] of `data`, each unit opened once: its lines, its PTX images, and what `see`
/// is shown (`member`: the zip member listed, if any). `None` when the first unit does not
/// read (not an offload file: nothing listed, nothing shown).
fn lines_of(
    path: &Path,
    data: &[u8],
    input: &Input,
    hash: bool,
    member: Option<&str>,
    see: &mut Option<SeeUnit<'_>>,
) -> Result<Listed, Failure> {
    let options = crate::decode::read_options(crate::decode::ZstdDecoder::DEFAULT, hash);
    let (mut lines, mut ptx) = (Vec::new(), Vec::new());
    if let Some(library) = crate::kpack::Library::open(path, data) {
        split_lines(hash, &library, &options, &mut lines)?;
        return Ok((lines, ptx));
    }
    for (i, unit) in units(data, &options).enumerate() {
        match unit {
            Ok(unit) => {
                let mut all = |images: &[offload_image::Image<'_>]| {
                    if let Some(see) = see.as_mut() {
                        see(member, images);
                    }
                };
                let mut each = |image: &offload_image::Image<'_>| add_ptx(image, &mut ptx);
                let mut seeing = Seeing {
                    all: Some(&mut all),
                    each: Some(&mut each),
                };
                unit_lines_seeing(hash, input, &unit, &options, &mut lines, &mut seeing);
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
/// code. `hash`: the SHA-256 of the images and of each library too.
pub fn libraries(path: &Path, hash: bool) -> Result<Vec<Library>, Failure> {
    libraries_seeing(path, hash, None)
}

/// [`libraries`], `see` shown the images of every unit it opens (as stored), in the same
/// pass: each unit is decoded once for both.
pub fn libraries_seeing(
    path: &Path,
    hash: bool,
    mut see: Option<SeeUnit<'_>>,
) -> Result<Vec<Library>, Failure> {
    let input = Input::open(path)?;
    if crate::wheel::is_zip(input.bytes()) {
        return members(path, hash, &mut see);
    }
    let (lines, ptx) = lines_of(path, input.bytes(), &input, hash, None, &mut see)?;
    Ok(if has_images(&lines) {
        vec![Library {
            member: None,
            size: input.bytes().len() as u64,
            sha256: hash.then(|| crate::output::sha256_hex(input.bytes())),
            lines,
            ptx,
        }]
    } else {
        Vec::new()
    })
}

/// The members of zip file `path` with device code.
fn members(
    path: &Path,
    hash: bool,
    see: &mut Option<SeeUnit<'_>>,
) -> Result<Vec<Library>, Failure> {
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
                    lines_of(inner, data, input, hash, Some(&member.name), see)?,
                    data.len() as u64,
                    hash.then(|| crate::output::sha256_hex(data)),
                )
            }
            Content::Spilled(input) => (
                lines_of(inner, input.bytes(), input, hash, Some(&member.name), see)?,
                input.bytes().len() as u64,
                hash.then(|| crate::output::sha256_hex(input.bytes())),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `libraries_seeing` shows each opened unit's images once, as stored, in the pass that
    /// lists them: on three compressed bundles in a row (two zstd, one zlib), the images
    /// shown per unit are those `Unit::open` gives (entry IDs, sizes), and the lines those
    /// of `libraries`.
    #[test]
    fn a_unit_is_opened_once_for_its_lines_and_what_is_seen() {
        let corpus = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/corpus/compressed"
        );
        let mut data = Vec::new();
        for name in [
            "hip_6arch.zstd.ccob",
            "hip_6arch.zlib.ccob",
            "omp_amd_nv.zstd.ccob",
        ] {
            data.extend(std::fs::read(format!("{corpus}/{name}")).unwrap());
        }
        let dir = std::env::temp_dir().join(format!("images-seeing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("three.ccob");
        std::fs::write(&path, &data).unwrap();

        let options = crate::decode::read_options(crate::decode::ZstdDecoder::DEFAULT, false);
        let want: Vec<Vec<_>> = units(&data, &options)
            .map(|u| {
                let u = u.unwrap();
                let open = u.open(&options).unwrap();
                open.images()
                    .map(|i| (i.entry_id.map(str::to_string), i.bytes.len()))
                    .collect()
            })
            .collect();
        assert_eq!(want.len(), 3);

        type Ids = Vec<(Option<String>, usize)>;
        let mut seen: Vec<(Option<String>, Ids)> = Vec::new();
        let mut see = |member: Option<&str>, images: &[offload_image::Image<'_>]| {
            let ids = images
                .iter()
                .map(|i| (i.entry_id.map(str::to_string), i.bytes.len()))
                .collect();
            seen.push((member.map(str::to_string), ids));
        };
        let libs = libraries_seeing(&path, false, Some(&mut see)).unwrap();
        let plain = libraries(&path, false).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();

        assert_eq!(seen.len(), 3, "each unit shown once");
        assert!(seen.iter().all(|(m, _)| m.is_none()));
        let shown: Vec<_> = seen.into_iter().map(|(_, ids)| ids).collect();
        assert_eq!(shown, want);
        let (a, b) = (&libs[0], &plain[0]);
        assert_eq!((a.lines.len(), a.ptx.len()), (b.lines.len(), b.ptx.len()));
        let images = |l: &Library| -> Vec<(Option<String>, u64)> {
            l.lines
                .iter()
                .filter_map(|line| match line {
                    Line::Image(r) => Some((r.entry_id.clone(), r.size)),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(images(a), images(b));
        assert_eq!(images(a).len(), want.iter().map(Vec::len).sum::<usize>());
        // Without `hash`, no library SHA-256.
        assert!(a.sha256.is_none());
    }
}
