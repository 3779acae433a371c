//! What a split host library keeps of its device code: `HIPK` wrappers and the ref record
//! they point at (`KPACK.md` §3).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use crate::bytes::read;
use crate::error::{Error, ErrorKind, Result};
use crate::raw::{FatbinWrapper, HIPK_MAGIC};

use super::msgpack::{Head, Reader};

/// Name of the ELF section that holds the ref records (`.rocm_kpack_ref`).
pub const REF_SECTION_ELF: &str = ".rocm_kpack_ref";
/// Name of the PE/COFF section that holds the ref records (`.kpackrf`, eight characters).
pub const REF_SECTION_PE: &str = ".kpackrf";
/// Most bytes of a ref record the loader parses: the record has no length, and
/// `kpack_load_code_object` unpacks one MessagePack value from the 64 KiB at the pointer
/// (`MAX_METADATA_SIZE`, `runtime/src/loader.cpp`).
pub const REF_READ_LIMIT: usize = 64 * 1024;
/// The only wrapper version the HIP runtime takes.
pub const HIPK_VERSION: u32 = 1;

/// A `HIPK` wrapper record, as stored in `.hipFatBinSegment`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HipkWrapper {
    /// The wrapper's version (1).
    pub version: u32,
    /// The pointer field as stored in the file: the ref record's address in PE files; zero
    /// in ELF files, where the `R_X86_64_RELATIVE` relocation's addend holds the address.
    pub ptr: u64,
    /// The `reserved1` field: the wrapper's index among the library's wrappers.
    pub reserved1: u64,
}

impl HipkWrapper {
    /// Reads the 24-byte wrapper at `offset` of `data`.
    ///
    /// Another magic (a `HIPF` wrapper, say) is [`ErrorKind::BadMagic`], a version other
    /// than 1 [`ErrorKind::UnsupportedVersion`] (at the field).
    pub fn read(data: &[u8], offset: u64) -> Result<Self> {
        let w: &FatbinWrapper = read(data, offset, "HIPK wrapper")?;
        if w.magic.get() != HIPK_MAGIC {
            return Err(Error::new(
                ErrorKind::BadMagic,
                offset,
                "not a HIPK wrapper",
            ));
        }
        if w.version.get() != HIPK_VERSION {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                offset.saturating_add(4),
                "HIPK wrapper version is not 1",
            ));
        }
        Ok(HipkWrapper {
            version: w.version.get(),
            ptr: w.binary.get(),
            reserved1: w.data.get(),
        })
    }

    /// The `co_index` the runtime passes to the loader: `reserved1` as a 32-bit value.
    pub fn co_index(&self) -> u32 {
        // The low half, as a C cast to uint32_t gives.
        (self.reserved1 & u64::from(u32::MAX)) as u32
    }
}

/// A ref record: the MessagePack map `{kpack_search_paths: [str], kernel_name: str}`.
///
/// ```
/// use offload_image::kpack::KpackRef;
///
/// // {"kpack_search_paths": ["../.kpack/lib_@GFXARCH@.kpack"], "kernel_name": "lib/x.so"}
/// let mut m = vec![0x82, 0xb2];
/// m.extend_from_slice(b"kpack_search_paths\x91\xbd../.kpack/lib_@GFXARCH@.kpack");
/// m.extend_from_slice(b"\xabkernel_name\xa8lib/x.so");
/// m.extend_from_slice(&[0; 16]); // whatever follows the record
/// let r = KpackRef::parse(&m)?;
/// assert_eq!(r.kernel_name, "lib/x.so");
/// assert_eq!(r.search_paths, ["../.kpack/lib_@GFXARCH@.kpack"]);
/// assert_eq!(r.lookup_key(3), "lib/x.so#3");
/// # Ok::<(), offload_image::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KpackRef<'data> {
    /// The kernel name, the part of the TOC key before `#`.
    pub kernel_name: &'data str,
    /// The string items of `kpack_search_paths`, in order (the loader passes over items of
    /// other types).
    pub search_paths: Vec<&'data str>,
    /// Bytes the record takes.
    pub size: usize,
}

/// The value of `kernel_name`: an error now for a string that is not UTF-8; the string,
/// or an error for the record (a value that is not a string).
fn read_kernel_name<'a>(r: &mut Reader<'a>) -> Result<Result<&'a str>> {
    let (vat, v) = r.head()?;
    Ok(match v {
        Head::Str(s) => Ok(core::str::from_utf8(s).map_err(|_| {
            Error::new(ErrorKind::Malformed, vat, "kpack kernel_name is not UTF-8")
        })?),
        other => {
            r.skip_rest(other)?;
            Err(Error::new(
                ErrorKind::Malformed,
                vat,
                "kpack kernel_name is not a string",
            ))
        }
    })
}

/// The value of `kpack_search_paths`: an error now for a path that is not UTF-8; its
/// strings (items that are not strings are passed over), or an error for the record (not
/// an array, or one without a string).
fn read_search_paths<'a>(r: &mut Reader<'a>) -> Result<Result<Vec<&'a str>>> {
    let (vat, v) = r.head()?;
    let Head::Array(n) = v else {
        r.skip_rest(v)?;
        return Ok(Err(Error::new(
            ErrorKind::Malformed,
            vat,
            "kpack_search_paths is not an array",
        )));
    };
    let mut list = Vec::new();
    for _ in 0..n {
        let (iat, item) = r.head()?;
        match item {
            Head::Str(s) => list.push(core::str::from_utf8(s).map_err(|_| {
                Error::new(ErrorKind::Malformed, iat, "kpack search path is not UTF-8")
            })?),
            other => r.skip_rest(other)?,
        }
    }
    Ok(if list.is_empty() {
        Err(Error::new(
            ErrorKind::Malformed,
            vat,
            "kpack_search_paths has no string",
        ))
    } else {
        Ok(list)
    })
}

impl<'data> KpackRef<'data> {
    /// Parses the record at the start of `data`, reading at most [`REF_READ_LIMIT`] bytes
    /// and ignoring what follows the record, as `parse_hipk_metadata`
    /// (`runtime/src/loader.cpp`) does.
    ///
    /// Everything the loader refuses with 12 (invalid metadata) is an error here: data
    /// that is not one MessagePack map ([`ErrorKind::Truncated`] or
    /// [`ErrorKind::Malformed`]), a missing or non-string `kernel_name`, a missing or
    /// non-array `kpack_search_paths`, or one without a string. The first of repeated
    /// keys counts. Strings must be UTF-8 (the C loader takes bytes).
    pub fn parse(data: &'data [u8]) -> Result<Self> {
        let data = data.get(..REF_READ_LIMIT).unwrap_or(data);
        let mut r = Reader::new(data, 0);
        let (at, head) = r.head()?;
        let Head::Map(len) = head else {
            return Err(Error::new(
                ErrorKind::Malformed,
                at,
                "kpack ref record is not a map",
            ));
        };
        let mut kernel_name = None;
        let mut paths = None;
        for _ in 0..len {
            let (_, key) = r.head()?;
            match key {
                Head::Str(b"kernel_name") if kernel_name.is_none() => {
                    kernel_name = Some(read_kernel_name(&mut r)?);
                }
                Head::Str(b"kpack_search_paths") if paths.is_none() => {
                    paths = Some(read_search_paths(&mut r)?);
                }
                other => {
                    r.skip_rest(other)?;
                    r.skip()?;
                }
            }
        }
        let kernel_name = kernel_name.unwrap_or(Err(Error::new(
            ErrorKind::Malformed,
            at,
            "kpack ref record has no kernel_name",
        )))?;
        let search_paths = paths.unwrap_or(Err(Error::new(
            ErrorKind::Malformed,
            at,
            "kpack ref record has no kpack_search_paths",
        )))?;
        Ok(KpackRef {
            kernel_name,
            search_paths,
            size: r.consumed(),
        })
    }

    /// The TOC key of the wrapper with `co_index`: `"<kernel_name>#<co_index>"` (the loader
    /// writes `#0` for a single wrapper too).
    pub fn lookup_key(&self, co_index: u32) -> String {
        let mut key = String::from(self.kernel_name);
        let _ = write!(key, "#{co_index}");
        key
    }
}
