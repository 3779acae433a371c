//! What the wrapper object embeds, built from the images given: for OpenMP one version-1
//! OffloadBinary per image (byte for byte what `clang-offload-packager` writes), for HIP
//! one offload bundle of them all (what `clang-offload-bundler -type=o -bundle-align=4096`
//! writes); each code object whose ELF header names another target than its `arch` is
//! wrapped with a warning (runtimes go by the ELF header).

use std::collections::BTreeSet;
use std::path::Path;

use offload_dropin::bundler::target::{conflicting_ids, TargetInfo};
use offload_dropin::llvm::bitcode;
use offload_dropin::packager::{extension, image_kind};
use offload_image::arch::Triple;
use offload_image::offload_binary::OffloadBinary;
use offload_image::write::offload_binary::{v1_to_vec, OffloadImage};
use offload_image::{identify, units, ReadOptions};

use crate::Failure;

/// `OffloadKind` of an OpenMP OffloadBinary entry (LLVM 21+ numbering).
const OFFLOAD_KIND_OPENMP: u16 = 1;

/// One device image to wrap, as `--image` gave it (checked) and as read.
#[derive(Clone, Copy, Debug)]
pub struct Spec<'a> {
    /// The `--image` text, for messages.
    pub text: &'a str,
    /// The file it was read from.
    pub file: &'a Path,
    /// The target triple.
    pub triple: &'a str,
    /// The architecture (a target ID for AMDGPU).
    pub arch: &'a str,
    /// The packager's strings: every key but `file` and `kind`, in its order.
    pub strings: &'a [(Vec<u8>, Vec<u8>)],
    /// The image.
    pub data: &'a [u8],
}

/// The error for the `--image` `spec`.
pub fn bad(spec: &str, what: impl std::fmt::Display) -> Failure {
    Failure::msg(format!("--image '{spec}': {what}"))
}

/// The packager's image kind, or "object" for an ELF file whose extension says nothing.
fn offload_image_kind(file: &Path, data: &[u8]) -> u16 {
    if bitcode::is_bitcode(data) {
        return 2;
    }
    match image_kind(extension(&file.to_string_lossy())) {
        0 if data.starts_with(b"\x7fELF") => 1,
        k => k,
    }
}

/// Warns when the code object's ELF header names another target than the spec's arch.
fn check_elf(spec: &Spec<'_>, image: &offload_image::Image<'_>) {
    let id = identify(image);
    if id.mismatch.is_some() {
        let elf = id.elf_target.map(|t| t.to_string()).unwrap_or_default();
        crate::output::stderr_line(format_args!(
            "loader-sim: warning: {}: arch '{}' differs from the code object's ELF header ({elf}); runtimes go by the ELF header",
            spec.file.display(),
            spec.arch
        ));
    }
}

/// The OpenMP wrapper object of `specs` (`super::openmp`).
pub fn openmp(specs: &[Spec<'_>]) -> Result<Vec<u8>, Failure> {
    let mut binaries = Vec::with_capacity(specs.len());
    for spec in specs {
        let strings: Vec<(&[u8], &[u8])> = spec
            .strings
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let binary = v1_to_vec(&OffloadImage {
            image_kind: offload_image_kind(spec.file, spec.data),
            offload_kind: OFFLOAD_KIND_OPENMP,
            flags: 0,
            strings: &strings,
            image: spec.data,
        })
        .map_err(|e| bad(spec.text, e.what()))?;
        binaries.push(binary);
    }
    let options = ReadOptions::default();
    let mut images = Vec::with_capacity(specs.len());
    for (spec, binary) in specs.iter().zip(&binaries) {
        // Read back what was written: the inner image's place, and its identity.
        let parsed = OffloadBinary::parse(binary, &options.limits)
            .map_err(|e| bad(spec.text, format_args!("internal error: {e}")))?;
        let entry = parsed
            .entries()
            .next()
            .ok_or_else(|| bad(spec.text, "internal error: empty OffloadBinary"))?;
        debug_assert_eq!(entry.image, spec.data);
        let unit = units(binary, &options)
            .next()
            .and_then(|u| u.ok())
            .and_then(|u| u.open(&options).ok());
        if let Some(open) = unit {
            for image in open.images() {
                check_elf(spec, &image);
            }
        }
        images.push(super::OpenMpImage {
            binary,
            image_offset: entry.image_offset,
            image_size: entry.image.len() as u64,
            arch: spec.arch,
        });
    }
    super::openmp(&images).map_err(Failure::msg)
}

/// The bundle entry ID `clang-offload-bundler` stores for `hip-<triple>-<arch>`.
fn hip_entry_id(spec: &Spec<'_>) -> Result<String, Failure> {
    let t = Triple::parse(spec.triple).map_err(|e| bad(spec.text, e.what()))?;
    if t.arch != "amdgcn" {
        return Err(bad(
            spec.text,
            format_args!(
                "HIP fat binaries hold AMDGPU code objects; triple '{}' is not amdgcn",
                spec.triple
            ),
        ));
    }
    let raw = format!(
        "hip-{}-{}-{}-{}-{}",
        t.arch, t.vendor, t.os, t.env, spec.arch
    );
    let info = TargetInfo::new(&raw)
        .filter(|i| !i.target_id.is_empty())
        .ok_or_else(|| bad(spec.text, format_args!("'{raw}' is not a bundle entry ID")))?;
    Ok(info.str())
}

/// The HIP wrapper object of `specs` (`super::hip`).
pub fn hip(specs: &[Spec<'_>]) -> Result<Vec<u8>, Failure> {
    let host = TargetInfo::new("host-x86_64-unknown-linux-gnu")
        .map(|i| i.str())
        .ok_or_else(|| Failure::msg("internal error: host entry ID".into()))?;
    let ids = specs
        .iter()
        .map(hip_entry_id)
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = BTreeSet::new();
    for (spec, id) in specs.iter().zip(&ids) {
        if !seen.insert(id.as_str()) {
            return Err(bad(
                spec.text,
                format_args!("bundle entry ID '{id}' is given twice"),
            ));
        }
    }
    let target_ids: BTreeSet<String> = specs.iter().map(|s| s.arch.to_string()).collect();
    match conflicting_ids(&target_ids) {
        Ok(None) => {}
        Ok(Some((a, b))) => {
            return Err(Failure::msg(format!(
                "--image: conflicting targets '{a}' and '{b}' (clang-offload-bundler refuses to bundle them: a runtime could not tell which one a device wants)"
            )))
        }
        Err(e) => return Err(Failure::msg(format!("--image: {e}"))),
    }
    let mut entries: Vec<(&str, &[u8])> = vec![(host.as_str(), &[])];
    entries.extend(
        ids.iter()
            .map(String::as_str)
            .zip(specs.iter().map(|s| s.data)),
    );
    let bundle = offload_image::write::bundle::bundle_to_vec(&entries, 4096)
        .map_err(|e| Failure::msg(format!("cannot bundle the images: {}", e.what())))?;
    let options = ReadOptions::default();
    if let Some(open) = units(&bundle, &options)
        .next()
        .and_then(|u| u.ok())
        .and_then(|u| u.open(&options).ok())
    {
        for (spec, image) in specs.iter().zip(open.images().skip(1)) {
            check_elf(spec, &image);
        }
    }
    super::hip(&bundle).map_err(Failure::msg)
}
