//! `loader-sim offload-packager ARGS...` (also run when the binary is invoked as
//! `clang-offload-packager`): a drop-in replacement for LLVM 22's
//! `clang-offload-packager` (which is `llvm-offload-binary`).
//!
//! * Packaging: `-o FILE --image=file=F,triple=T,arch=A,kind=K,<key>=<value>...` writes one
//!   version-1 OffloadBinary per image file, back to back, byte-identical to LLVM 22. The
//!   `--image` keys go through an LLVM `DenseMap` (repeated keys are joined with `,`), so
//!   the string records are stored in that map's iteration order, which is reproduced;
//!   `file=a,file=b` packages two images with the same strings; the image kind comes from
//!   the bitcode magic or the extension (`o`, `bc`, `cubin`, `fatbin`, `s`), the offload
//!   kind from `kind=` (`openmp` 1, `cuda` 2, `hip` 4, `sycl` 8, anything else 0).
//! * Extraction: `INPUT --image=<key>=<value>,...` writes every image whose strings match
//!   all given keys to `file=` (the last match if several), or to
//!   `<input stem>-<triple>-<arch>.<n>.<kind>`; `--archive` collects the matches in a GNU
//!   archive. INPUT may be OffloadBinaries, an ELF object (`.llvm.offloading` sections) or
//!   an archive of those. Without `--image` nothing is extracted (as in LLVM 22).
//!
//! * LLVM 23 (`--llvm 23`, or a program name such as `llvm-offload-binary-23`): all images
//!   packaged in one version-2 OffloadBinary, and extraction of every image without
//!   `--image`, nested OffloadBinaries opened, as LLVM 23's tool does (`llvm23`).
//!
//! * LLVM 24 (`--compress`, `--compression-format=zstd|zlib`, `--compression-level=N`): all
//!   images in one compressed version-3 OffloadBinary (`compress`).
//!
//! Differences: version-2/3 OffloadBinaries are read too (LLVM 22 rejects them); bitcode
//! inputs (OffloadBinaries embedded as IR globals) are refused with an error. Errors exit
//! with status 1, as in LLVM.

use offload_image::offload_binary::OffloadBinary;
use offload_image::write::offload_binary::{v1_to_vec, OffloadImage};
use offload_image::{Limits, ReadOptions};

use crate::bundler::ToolError;
use crate::llvm::archive::{self, NewMember};
use crate::llvm::bitcode;
use crate::llvm::cl::{self, Kind, Spec};
use crate::llvm::hashmap::DenseStringMap;

mod compress;
mod llvm23;

fn fail(msg: impl Into<String>) -> ToolError {
    ToolError {
        code: 1,
        msg: msg.into(),
        command_line: false,
    }
}

const SPECS: &[Spec] = &[
    Spec {
        name: "o",
        kind: Kind::Value,
    },
    Spec {
        name: "image",
        kind: Kind::List { comma: false },
    },
    Spec {
        name: "archive",
        kind: Kind::Flag,
    },
    // LLVM 24's: one compressed version-3 binary of all images (`compress`).
    Spec {
        name: "compress",
        kind: Kind::Flag,
    },
    Spec {
        name: "compression-format",
        kind: Kind::Value,
    },
    Spec {
        name: "compression-level",
        kind: Kind::Value,
    },
    // loader-sim's own: which LLVM's output to write (`llvm23::llvm_version`).
    Spec {
        name: "llvm",
        kind: Kind::Value,
    },
    Spec {
        name: "help",
        kind: Kind::Flag,
    },
    Spec {
        name: "help-list",
        kind: Kind::Flag,
    },
    Spec {
        name: "help-hidden",
        kind: Kind::Flag,
    },
    Spec {
        name: "help-list-hidden",
        kind: Kind::Flag,
    },
    Spec {
        name: "h",
        kind: Kind::Flag,
    },
    Spec {
        name: "version",
        kind: Kind::Flag,
    },
];

const HELP: &str = "OVERVIEW: A utility for bundling several object files into a single binary.
The output binary can then be embedded into the host section table
to create a fatbinary containing offloading code.

(loader-sim's drop-in replacement for LLVM 22's clang-offload-packager)

USAGE: clang-offload-packager [options] Extract from <file>.

OPTIONS:
  --archive                   - Write extracted files to a static archive
  --compress                  - Write one compressed (version 3) binary of all images, as LLVM 24 does
  --compression-format=<zstd|zlib> - Codec of --compress (default zstd)
  --compression-level=<n>     - Level of --compress (zlib 0-9, default 6; zstd default 5)
  --image=<<key>=<value>,...> - List of key and value arguments. Required keywords are 'file' and 'triple'.
  --llvm=<22|23>              - Write LLVM 22's layout (one binary per image, the default) or LLVM 23's (one binary of all images); a program name ending in -23 selects 23
  -o <file>                   - Write output to <file>.
";

/// `getImageArguments`: the `--image` keys in `DenseMap` order, repeated keys joined.
pub fn image_arguments(image: &str) -> DenseStringMap<String> {
    let mut args: DenseStringMap<String> = DenseStringMap::new();
    for arg in image.split(',') {
        let (key, value) = arg.split_once('=').unwrap_or((arg, ""));
        if !args.insert_if_absent(key.as_bytes(), value.to_string()) {
            if let Some(v) = args.get_mut(key.as_bytes()) {
                v.push(',');
                v.push_str(value);
            }
        }
    }
    args
}

/// `getOffloadKind` (LLVM 21+ numbering).
fn offload_kind(name: &str) -> u16 {
    match name {
        "openmp" => 1,
        "cuda" => 2,
        "hip" => 4,
        "sycl" => 8,
        _ => 0,
    }
}

/// `getImageKind` in LLVM 22.
pub fn image_kind(ext: &str) -> u16 {
    match ext {
        "o" => 1,
        "bc" => 2,
        "cubin" => 3,
        "fatbin" => 4,
        "s" => 5,
        _ => 0,
    }
}

/// `getImageKindName`.
fn image_kind_name(kind: u16) -> &'static str {
    match kind {
        1 => "o",
        2 => "bc",
        3 => "cubin",
        4 => "fatbin",
        5 => "s",
        6 => "spv",
        _ => "",
    }
}

/// Extension of `path` without the dot (`sys::path::extension`).
pub fn extension(path: &str) -> &str {
    let f = path.rsplit('/').next().unwrap_or(path);
    if f == "." || f == ".." {
        return "";
    }
    f.rfind('.').map_or("", |p| &f[p + 1..])
}

fn stem(path: &str) -> &str {
    let f = path.rsplit('/').next().unwrap_or(path);
    if f == "." || f == ".." {
        return f;
    }
    f.rfind('.').map_or(f, |p| &f[..p])
}

fn read(name: &str) -> Result<Vec<u8>, ToolError> {
    if name == "-" {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut v)
            .map_err(|e| fail(e.to_string()))?;
        return Ok(v);
    }
    std::fs::read(name).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => fail("No such file or directory"),
        _ => fail(e.to_string()),
    })
}

fn write(name: &str, data: &[u8]) -> Result<(), ToolError> {
    std::fs::write(name, data).map_err(|e| fail(format!("'{name}': {e}")))
}

/// Runs the tool on `args` (without the program name).
pub fn run(prog: &str, args: &[String]) -> Result<(), ToolError> {
    let p = cl::parse(SPECS, args, 1, &[], prog).map_err(ToolError::command_line)?;
    if p.flag("version") {
        println!(
            "loader-sim {} (clang-offload-packager replacement, LLVM 22 compatible)",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(());
    }
    let output = p.value("o").unwrap_or("");
    let input = p.positional.first().map(String::as_str).unwrap_or("");
    if ["help", "help-list", "help-hidden", "help-list-hidden", "h"]
        .iter()
        .any(|f| p.flag(f))
        || (output.is_empty() && input.is_empty())
    {
        print!("{HELP}");
        return Ok(());
    }
    if !input.is_empty() && !output.is_empty() {
        return Err(fail(
            "Packaging to an output file and extracting from an input file are mutually exclusive.",
        ));
    }
    if !output.is_empty() && p.flag("compress") {
        let codec = compress::codec(p.value("compression-format"), p.value("compression-level"))?;
        compress::bundle_images(output, p.list("image"), codec)
    } else if !output.is_empty() {
        match llvm23::llvm_version(prog, p.value("llvm"))? {
            23 => llvm23::bundle_images(output, p.list("image")),
            _ => bundle_images(output, p.list("image")),
        }
    } else if llvm23::llvm_version(prog, p.value("llvm"))? == 23 {
        llvm23::unbundle_images(prog, input, p.list("image"), p.flag("archive"))
    } else {
        unbundle_images(prog, input, p.list("image"), p.flag("archive"))
    }
}

/// One image to package: what LLVM's `bundleImages` puts in an `OffloadingImage` for one
/// file of an `--image` (LLVM 22 writes each as a binary of its own, LLVM 23 all of them as
/// the entries of one).
struct Packaged {
    image_kind: u16,
    offload_kind: u16,
    strings: Vec<(Vec<u8>, Vec<u8>)>,
    data: Vec<u8>,
}

impl Packaged {
    /// The image, its strings being `strings` (this image's, borrowed).
    fn image<'a>(&'a self, strings: &'a [(&'a [u8], &'a [u8])]) -> OffloadImage<'a> {
        OffloadImage {
            image_kind: self.image_kind,
            offload_kind: self.offload_kind,
            flags: 0,
            strings,
            image: &self.data,
        }
    }

    /// The strings as the writer takes them.
    fn strings(&self) -> Vec<(&[u8], &[u8])> {
        self.strings
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect()
    }
}

/// `bundleImages`' reading: every file of every `--image`, in order, with its image kind
/// (bitcode by content, else by extension), offload kind and the other key-value strings.
fn read_images(images: &[String]) -> Result<Vec<Packaged>, ToolError> {
    let mut all = Vec::new();
    for image in images {
        let args = image_arguments(image);
        let Some(files) = args.get(b"file") else {
            return Err(fail("'file' is a required image arguments"));
        };
        for file in files.split(',') {
            let data = read(file)?;
            let image_kind = if bitcode::is_bitcode(&data) {
                2
            } else {
                image_kind(extension(file))
            };
            let mut offload_kind_ = 0u16;
            let mut strings = Vec::new();
            for (k, v) in args.iter() {
                if k == b"kind" {
                    offload_kind_ = offload_kind(v);
                } else if k != b"file" {
                    strings.push((k.to_vec(), v.as_bytes().to_vec()));
                }
            }
            all.push(Packaged {
                image_kind,
                offload_kind: offload_kind_,
                strings,
                data,
            });
        }
    }
    Ok(all)
}

/// LLVM 22's `bundleImages`: one version-1 binary per file of every `--image`, back to back.
fn bundle_images(output: &str, images: &[String]) -> Result<(), ToolError> {
    let mut out = Vec::new();
    for packaged in read_images(images)? {
        let strings = packaged.strings();
        out.extend_from_slice(&v1_to_vec(&packaged.image(&strings)).map_err(|e| fail(e.what()))?);
    }
    write(output, &out)
}

/// One binary found in the input: its (uncompressed) bytes and the identifier LLVM gives
/// its buffer (the input file name, or the archive member name).
struct Found {
    binary: Vec<u8>,
    identifier: String,
}

/// `extractOffloadBinaries`.
fn extract_binaries(
    data: &[u8],
    identifier: &str,
    out: &mut Vec<Found>,
    depth: usize,
) -> Result<(), ToolError> {
    if depth > 8 {
        return Err(fail("archives nested too deeply"));
    }
    if bitcode::is_bitcode(data) {
        return Err(fail(format!(
            "'{identifier}': extracting OffloadBinaries embedded in LLVM bitcode is not supported"
        )));
    }
    if data.starts_with(b"!<arch>\n") || data.starts_with(b"!<thin>\n") {
        for (name, member) in archive::read_members(data).map_err(fail)? {
            extract_binaries(&member, &name, out, depth + 1)?;
        }
        return Ok(());
    }
    if data.starts_with(b"\x7fELF") {
        for (typ, bytes) in crate::llvm::objcopy::typed_sections(data).map_err(fail)? {
            if typ == 0x6fff_4c0b {
                extract_offload_files(&bytes, identifier, out)?;
            }
        }
        return Ok(());
    }
    if offload_image::offload_binary::is_offload_binary(data) {
        extract_offload_files(data, identifier, out)?;
    }
    Ok(())
}

/// `extractOffloadFiles`: binaries back to back, each at the next multiple of 8.
fn extract_offload_files(
    data: &[u8],
    identifier: &str,
    out: &mut Vec<Found>,
) -> Result<(), ToolError> {
    let mut offset = 0usize;
    while offset < data.len() {
        // LLVM's `OffloadBinary::create` reports every malformed binary as
        // `object_error::parse_failed`, without the file name or a position (`loader-sim
        // validate` gives them).
        let b = OffloadBinary::parse(&data[offset..], &Limits::default())
            .map_err(|_| fail("Invalid data was encountered while parsing the file"))?;
        let len = b.len() as usize;
        let bytes = if b.is_compressed() {
            b.inflate(&ReadOptions::default())
                .map_err(|e| fail(format!("'{identifier}': {e}")))?
        } else {
            b.data().to_vec()
        };
        out.push(Found {
            binary: bytes,
            identifier: identifier.to_string(),
        });
        offset = offset.saturating_add(len).div_ceil(8) * 8;
    }
    Ok(())
}

/// `unbundleImages`: every `--image` extracts the entries of the input that match it.
fn unbundle_images(
    prog: &str,
    input: &str,
    images: &[String],
    create_archive: bool,
) -> Result<(), ToolError> {
    let data = read(input).map_err(|e| fail(format!("'{input}': {}", e.msg)))?;
    let mut binaries = Vec::new();
    extract_binaries(&data, input, &mut binaries, 0)?;
    let entries = read_entries(&binaries)?;
    for image in images {
        let args = image_arguments(image);
        let extracted: Vec<&Entry<'_>> = entries.iter().filter(|e| e.matches(&args)).collect();
        if extracted.is_empty() {
            continue;
        }
        write_extracted(prog, input, &args, &extracted, create_archive)?;
    }
    Ok(())
}

/// One entry of a binary found in the input, with its strings in `MapVector` order.
struct Entry<'a> {
    image: &'a [u8],
    image_kind: u16,
    offload_kind: u16,
    strings: Vec<(String, Vec<u8>)>,
    identifier: &'a str,
}

impl Entry<'_> {
    /// `OffloadBinary::getString`: the value of `key`, empty if the entry has none.
    fn string(&self, key: &str) -> Vec<u8> {
        self.strings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// Whether the entry matches every `--image` argument (`file` matches anything, `kind`
    /// compares the offload kind, the other keys the entry's strings).
    fn matches(&self, args: &DenseStringMap<String>) -> bool {
        args.iter().all(|(k, v)| match k {
            b"file" => true,
            b"kind" => self.offload_kind == offload_kind(v),
            _ => self.string(&String::from_utf8_lossy(k)) == v.as_bytes(),
        })
    }
}

/// Every entry of every binary, in order.
fn read_entries(binaries: &[Found]) -> Result<Vec<Entry<'_>>, ToolError> {
    let mut entries = Vec::new();
    for f in binaries {
        let b =
            OffloadBinary::parse(&f.binary, &Limits::default()).map_err(|e| fail(e.to_string()))?;
        for e in b.entries() {
            let mut strings: Vec<(String, Vec<u8>)> = Vec::new();
            for (k, v) in e.strings.iter() {
                // MapVector semantics: a repeated key keeps its first position, last value.
                match strings.iter_mut().find(|(key, _)| key == k) {
                    Some(slot) => slot.1 = v.to_vec(),
                    None => strings.push((k.to_string(), v.to_vec())),
                }
            }
            entries.push(Entry {
                image: e.image,
                image_kind: e.image_kind,
                offload_kind: e.offload_kind,
                strings,
                identifier: &f.identifier,
            });
        }
    }
    Ok(entries)
}

/// Writes the entries one `--image` extracted: into a GNU archive (`--archive`), to its
/// `file=` (the last match), or each to `<input stem>-<triple>-<arch>.<n>.<kind>`.
fn write_extracted(
    prog: &str,
    input: &str,
    args: &DenseStringMap<String>,
    extracted: &[&Entry<'_>],
    create_archive: bool,
) -> Result<(), ToolError> {
    if create_archive {
        let Some(file) = args.get(b"file") else {
            return Err(fail("Image must have a 'file' argument."));
        };
        let members: Vec<NewMember> = extracted
            .iter()
            .map(|e| NewMember {
                name: e.identifier.to_string(),
                data: e.image.to_vec(),
            })
            .collect();
        let bytes = archive::write_gnu(&members).map_err(fail)?;
        write(file, &bytes)
    } else if let Some(file) = args.get(b"file") {
        if extracted.len() > 1 {
            eprintln!("{prog}: warning: Multiple inputs match to a single file, '{file}'");
        }
        let last = extracted.last().map(|e| e.image).unwrap_or(&[]);
        write(file, last)
    } else {
        for (idx, e) in extracted.iter().enumerate() {
            let name = format!(
                "{}-{}-{}.{}.{}",
                stem(input),
                String::from_utf8_lossy(&e.string("triple")),
                String::from_utf8_lossy(&e.string("arch")),
                idx,
                image_kind_name(e.image_kind)
            );
            write(&name, e.image)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_arguments_follow_llvm_22() {
        // Order observed from clang-offload-packager-22 for this --image.
        let args = image_arguments(
            "file=x.co,triple=amdgcn-amd-amdhsa,arch=gfx906,kind=hip,zz=1,aa=2,mm=3,feature=+x,k1=a,k2=b,k3=c,k4=d,k5=e",
        );
        let keys: Vec<String> = args
            .iter()
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .filter(|k| k != "file" && k != "kind")
            .collect();
        assert_eq!(
            keys,
            ["feature", "k3", "arch", "k4", "k1", "k5", "zz", "triple", "k2", "mm", "aa"]
        );
        let joined = image_arguments("file=a,arch=x,arch=y");
        assert_eq!(joined.get(b"arch").map(String::as_str), Some("x,y"));
        assert_eq!(extension("dir/a.b.cubin"), "cubin");
        assert_eq!(stem("dir/in.bin"), "in");
    }
}
