//! LLVM 23's packaging: `llvm-offload-binary -o FILE --image=...` writes every image of
//! every `--image` into one version-2 OffloadBinary (llvm/llvm-project PR #197456), where
//! LLVM 22 writes one version-1 binary per image, back to back.
//!
//! Read in LLVM's sources (no LLVM 23 can be installed here, so nothing below was compared
//! with the tool's output; `docs/FINDINGS.md` lists the files and commits):
//! `llvm/tools/llvm-offload-binary/llvm-offload-binary.cpp` after that PR collects one
//! `OffloadingImage` per file of every `--image` (the same `getImageArguments`, image
//! kinds, offload kinds and string order as LLVM 22) and calls
//! `OffloadBinary::write(AllImages)` once; `llvm/lib/Object/OffloadBinary.cpp`'s version-2
//! `write` is [`offload_image::write::offload_binary::write_v2`].
//!
//! Extracting, LLVM 23 (the same file) writes every image when no `--image` is given, and
//! opens an image that is itself an OffloadBinary in place wherever it makes names
//! ([`unbundle_images`]); into an archive or a `file=` it extracts as LLVM 22.

use std::io::Write as _;

use offload_image::offload_binary::is_offload_binary;
use offload_image::write::offload_binary::{v2_empty, v2_to_vec, OffloadImage};

use super::{
    extract_binaries, extract_offload_files, fail, image_arguments, image_kind_name, read,
    read_entries, read_images, stem, write, write_extracted, Entry, Packaged,
};
use crate::bundler::ToolError;

/// Deepest nesting [`extract_binary`] opens (LLVM 23 sets none; its recursion would run out
/// of stack on a deep enough file).
const MAX_NESTED: usize = 64;

/// The LLVM release whose output the packager writes: `--llvm N` (22 or 23) when given,
/// else 23 when the program name is a packager's with a version suffix of 23 or more
/// (`llvm-offload-binary-23`, `clang-offload-packager-23`), else 22.
pub(super) fn llvm_version(prog: &str, option: Option<&str>) -> Result<u32, ToolError> {
    if let Some(v) = option {
        return match v {
            "22" => Ok(22),
            "23" => Ok(23),
            _ => Err(fail(format!(
                "--llvm={v}: the LLVM release must be 22 or 23"
            ))),
        };
    }
    Ok(match name_version(prog) {
        Some(v) if v >= 23 => 23,
        _ => 22,
    })
}

/// The version suffix of a packager's program name (`llvm-offload-binary-23` → 23).
fn name_version(prog: &str) -> Option<u32> {
    let base = prog.rsplit(['/', '\\']).next().unwrap_or(prog);
    let base = base.strip_suffix(".exe").unwrap_or(base);
    let rest = base
        .strip_prefix("llvm-offload-binary-")
        .or_else(|| base.strip_prefix("clang-offload-packager-"))?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

/// LLVM 23's `bundleImages`: every file of every `--image`, in order, as the entries of one
/// version-2 binary. Without any image, the 40-byte binary of no entries
/// ([`v2_empty`]: what a build without assertions writes).
pub(super) fn bundle_images(output: &str, images: &[String]) -> Result<(), ToolError> {
    let all = read_images(images)?;
    if all.is_empty() {
        return write(output, &v2_empty());
    }
    let strings: Vec<Vec<(&[u8], &[u8])>> = all.iter().map(Packaged::strings).collect();
    let images: Vec<OffloadImage<'_>> = all.iter().zip(&strings).map(|(p, s)| p.image(s)).collect();
    let bytes = v2_to_vec(&images).map_err(|e| fail(e.what()))?;
    write(output, &bytes)
}

/// LLVM 23's `unbundleImages`. Without `--image`: every image of every binary of
/// `input`, in order, through [`extract_binary`], numbered on across binaries. With
/// `--image` filters: as LLVM 22 into an archive or a `file=`, else every match through
/// [`extract_binary`], numbered from 0 per `--image`.
pub(super) fn unbundle_images(
    prog: &str,
    input: &str,
    images: &[String],
    create_archive: bool,
) -> Result<(), ToolError> {
    let data = read(input).map_err(|e| fail(format!("'{input}': {}", e.msg)))?;
    let mut binaries = Vec::new();
    extract_binaries(&data, input, &mut binaries, 0)?;
    let entries = read_entries(&binaries)?;
    if images.is_empty() {
        let mut idx = 0u64;
        for e in &entries {
            extract_binary(e, input, &mut idx, 0)?;
        }
        return Ok(());
    }
    for image in images {
        let args = image_arguments(image);
        let extracted: Vec<&Entry<'_>> = entries.iter().filter(|e| e.matches(&args)).collect();
        if extracted.is_empty() {
            continue;
        }
        if create_archive || args.get(b"file").is_some() {
            write_extracted(prog, input, &args, &extracted, create_archive)?;
        } else {
            let mut idx = 0u64;
            for e in extracted {
                extract_binary(e, input, &mut idx, 0)?;
            }
        }
    }
    Ok(())
}

/// `extractBinary`: an image that is itself an OffloadBinary is opened (its binaries back
/// to back, each entry in turn, recursively); any other image is written to
/// `<input stem>-<triple>[-<arch>].<n>.<kind>` (no `-<arch>` when it is empty) and
/// announced on standard output as `Extracted: <name>`. A malformed nested binary fails as
/// an outer one does.
fn extract_binary(
    e: &Entry<'_>,
    input: &str,
    idx: &mut u64,
    depth: usize,
) -> Result<(), ToolError> {
    if is_offload_binary(e.image) {
        if depth >= MAX_NESTED {
            return Err(fail("OffloadBinaries nested too deeply"));
        }
        let mut inner = Vec::new();
        extract_offload_files(e.image, "nested-offload-binary", &mut inner)?;
        for inner_entry in &read_entries(&inner)? {
            extract_binary(inner_entry, input, idx, depth + 1)?;
        }
        return Ok(());
    }
    let mut name = format!(
        "{}-{}",
        stem(input),
        String::from_utf8_lossy(&e.string("triple"))
    );
    let arch = e.string("arch");
    if !arch.is_empty() {
        name.push('-');
        name.push_str(&String::from_utf8_lossy(&arch));
    }
    name.push_str(&format!(".{idx}.{}", image_kind_name(e.image_kind)));
    *idx += 1;
    write(&name, e.image)?;
    // `outs()`: a closed standard output does not stop the extraction.
    let _ = writeln!(std::io::stdout().lock(), "Extracted: {name}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_comes_from_the_option_then_the_name() {
        assert_eq!(llvm_version("loader-sim", None).unwrap(), 22);
        assert_eq!(llvm_version("loader-sim", Some("23")).unwrap(), 23);
        assert_eq!(llvm_version("llvm-offload-binary-23", None).unwrap(), 23);
        assert_eq!(llvm_version("clang-offload-packager-24", None).unwrap(), 23);
        assert_eq!(llvm_version("llvm-offload-binary-22", None).unwrap(), 22);
        assert_eq!(llvm_version("clang-offload-packager", None).unwrap(), 22);
        assert_eq!(
            llvm_version("llvm-offload-binary-23", Some("22")).unwrap(),
            22
        );
        assert!(llvm_version("loader-sim", Some("21")).is_err());
    }
}
