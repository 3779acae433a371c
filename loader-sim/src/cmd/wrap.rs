//! `loader-sim wrap -o OUT.o --image file=F,triple=T,arch=A[,kind=K][,<key>=<value>...]...
//! [--kind openmp|hip]`: the wrapping step of `clang-linker-wrapper` (`llvm-offload-wrapper`
//! followed by `llc`), without LLVM.
//!
//! It writes an x86-64 ELF relocatable object that embeds the device images and registers
//! them when the program or shared library it is linked into starts, and unregisters them
//! at exit (`REGISTRATION.md` §1, §3, §4; the object is written by `crate::wrapper`):
//!
//! * **OpenMP** (the default): every image becomes a version-1 OffloadBinary, byte for
//!   byte what `clang-offload-packager -o - --image=<the same spec>` writes (the keys other
//!   than `file` and `kind` become its strings, in the packager's order), stored in
//!   `.llvm.offloading`; a `__tgt_device_image` per image (pointing at the inner image,
//!   as LLVM 19 and 22 do), the `__tgt_bin_desc`, the `llvm_offload_entries` bounds,
//!   AMD's `.offload_arch_list`, and a priority-101 constructor calling
//!   `__tgt_register_lib(&desc)` and `atexit(unregister)`.
//! * **HIP**: the images become one offload bundle, byte for byte what
//!   `clang-offload-bundler -type=o -bundle-align=4096
//!   -targets=host-x86_64-unknown-linux-gnu,hip-<triple>--<arch>... -input=/dev/null
//!   -input=F...` writes (the command LLVM 22's `clang-linker-wrapper` runs), stored in
//!   `.hip_fatbin` with its wrapper record in `.hipFatBinSegment`; the constructor calls
//!   `__hipRegisterFatBinary`, registers the HIP entries of `llvm_offload_entries`
//!   (`__hipRegisterFunction`, `__hipRegisterVar`, ...) and has `atexit` call
//!   `__hipUnregisterFatBinary`.
//!
//! Image specs: `file`, `triple` and `arch` are required; `kind` (`openmp` or `hip`)
//! defaults to `--kind`, and `--kind` defaults to the images' common `kind`, else
//! `openmp`. An `amdgcn` arch must be a valid AMDGPU target ID, an `nvptx` arch an NVPTX
//! architecture; HIP images must be `amdgcn` code, and their target IDs must not conflict
//! (`gfx90a` with `gfx90a:xnack+`), as `clang-offload-bundler` requires. Bad specs exit
//! with status 2. An image whose ELF header names another target than `arch` is wrapped
//! with a warning: runtimes go by the ELF header.
//!
//! Image kinds of the OffloadBinaries follow `clang-offload-packager` (bitcode by magic,
//! else by extension: `o`, `bc`, `cubin`, `fatbin`, `s`), except that a file the extension
//! says nothing about (`.co`, `.hsaco`) but that is an ELF file is stored as an object
//! (`clang-offload-packager` would store "none").

use std::collections::BTreeSet;
use std::path::PathBuf;

use offload_dropin::packager::image_arguments;
use offload_image::arch::{NvArch, Triple};
use offload_image::TargetId;

use crate::wrapper::contents::{self, bad};
use crate::{Failure, Outcome};

/// What the wrapper registers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WrapKind {
    /// Register with __tgt_register_lib (LLVM offload runtime, libomptarget).
    Openmp,
    /// Register with __hipRegisterFatBinary (HIP runtime).
    Hip,
}

impl WrapKind {
    fn name(self) -> &'static str {
        match self {
            WrapKind::Openmp => "openmp",
            WrapKind::Hip => "hip",
        }
    }
}

/// Arguments of `wrap`.
#[derive(clap::Args)]
pub struct Args {
    /// The relocatable object to write.
    #[arg(short = 'o', value_name = "OUT.o")]
    output: PathBuf,
    /// A device image: file=F,triple=T,arch=A, optionally kind=openmp|hip and further
    /// key=value strings (clang-offload-packager's --image keys). Repeat for several
    /// images; OpenMP runtimes take the first compatible image in this order.
    #[arg(long = "image", value_name = "SPEC", required = true)]
    images: Vec<String>,
    /// Register with __tgt_register_lib (openmp) or __hipRegisterFatBinary (hip). Default:
    /// the images' kind=, else openmp.
    #[arg(long, value_enum)]
    kind: Option<WrapKind>,
}

/// One `--image`, checked.
struct Spec {
    text: String,
    file: PathBuf,
    triple: String,
    arch: String,
    kind: Option<WrapKind>,
    /// The packager's strings: every key but `file` and `kind`, in its order.
    strings: Vec<(Vec<u8>, Vec<u8>)>,
}

fn parse_spec(text: &str) -> Result<Spec, Failure> {
    let mut keys = BTreeSet::new();
    for arg in text.split(',') {
        let (key, _) = arg.split_once('=').unwrap_or((arg, ""));
        if key.is_empty() {
            return Err(bad(text, "expected <key>=<value> pairs separated by ','"));
        }
        if !keys.insert(key) {
            return Err(bad(text, format_args!("key '{key}' is given twice")));
        }
    }
    let args = image_arguments(text);
    let value = |key: &str| {
        args.get(key.as_bytes())
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let file = value("file").ok_or_else(|| bad(text, "missing file=<path>"))?;
    let triple = value("triple").ok_or_else(|| bad(text, "missing triple=<target triple>"))?;
    let arch = value("arch").ok_or_else(|| bad(text, "missing arch=<target>"))?;
    let kind = match args.get(b"kind").map(String::as_str) {
        None => None,
        Some("openmp") => Some(WrapKind::Openmp),
        Some("hip") => Some(WrapKind::Hip),
        Some(k @ ("cuda" | "sycl")) => {
            return Err(bad(
                text,
                format_args!("wrapping {k} images is not supported (kind=openmp or kind=hip)"),
            ))
        }
        Some(k) => {
            return Err(bad(
                text,
                format_args!("unknown kind '{k}' (kind=openmp or kind=hip)"),
            ))
        }
    };
    let parsed = Triple::parse(triple)
        .map_err(|e| bad(text, format_args!("triple '{triple}': {}", e.what())))?;
    match parsed.arch {
        "amdgcn" => {
            TargetId::parse(arch)
                .map_err(|e| bad(text, format_args!("arch '{arch}': {}", e.what())))?;
        }
        "nvptx64" | "nvptx" => {
            NvArch::parse(arch)
                .map_err(|e| bad(text, format_args!("arch '{arch}': {}", e.what())))?;
        }
        _ => {}
    }
    let strings = args
        .iter()
        .filter(|(k, _)| *k != b"file" && *k != b"kind")
        .map(|(k, v)| (k.to_vec(), v.as_bytes().to_vec()))
        .collect();
    Ok(Spec {
        text: text.to_string(),
        file: PathBuf::from(file),
        triple: triple.to_string(),
        arch: arch.to_string(),
        kind,
        strings,
    })
}

/// The wrapper kind: `--kind`, else the images' common `kind=`, else OpenMP; every image's
/// `kind=` must agree with it.
fn wrap_kind(given: Option<WrapKind>, specs: &[Spec]) -> Result<WrapKind, Failure> {
    let kind = given
        .or_else(|| specs.iter().find_map(|s| s.kind))
        .unwrap_or(WrapKind::Openmp);
    for s in specs {
        if let Some(k) = s.kind.filter(|&k| k != kind) {
            return Err(bad(
                &s.text,
                format_args!(
                    "kind={} does not match the wrapper's kind {} (give --kind, or the same kind= for every image)",
                    k.name(),
                    kind.name()
                ),
            ));
        }
    }
    Ok(kind)
}

fn read(spec: &Spec) -> Result<Vec<u8>, Failure> {
    let data = std::fs::read(&spec.file)
        .map_err(|e| Failure::file(&spec.file, format!("cannot read: {e}")))?;
    if data.is_empty() {
        return Err(Failure::file(&spec.file, "the image is empty"));
    }
    Ok(data)
}

/// Runs `wrap`.
pub fn run(args: &Args) -> Result<Outcome, Failure> {
    let specs = args
        .images
        .iter()
        .map(|s| parse_spec(s))
        .collect::<Result<Vec<_>, _>>()?;
    let kind = wrap_kind(args.kind, &specs)?;
    let data = specs.iter().map(read).collect::<Result<Vec<_>, _>>()?;
    let images: Vec<contents::Spec<'_>> = specs
        .iter()
        .zip(&data)
        .map(|(s, data)| contents::Spec {
            text: &s.text,
            file: &s.file,
            triple: &s.triple,
            arch: &s.arch,
            strings: &s.strings,
            data,
        })
        .collect();
    let object = match kind {
        WrapKind::Openmp => contents::openmp(&images)?,
        WrapKind::Hip => contents::hip(&images)?,
    };
    std::fs::write(&args.output, object)
        .map_err(|e| Failure::file(&args.output, format!("cannot write: {e}")))?;
    Ok(Outcome::Ok)
}
