//! C API of offload-image (header `include/offload_image.h`).
//!
//! Thin FFI over the safe library: pointer/length pairs become slices, results go to
//! caller-provided storage, errors become status codes plus an `oi_error` with the byte
//! offset and a message. The library never hands out memory the caller must free.
//!
//! Unsafe code is confined to the small helpers at the top of this file, each with its
//! safety contract; the functions below only use them.

#![warn(missing_docs)]

use core::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use offload_image::select::{KindFilter, Policy, SelectOptions};
use offload_image::{
    for_each_unit, identify, select_identities, Device, Error, ErrorKind, Format, Image,
    ReadOptions, Target,
};

/// Status codes (see the header).
pub mod status {
    /// Success.
    pub const OK: i32 = 0;
    /// Some unit has no compatible image.
    pub const NO_MATCH: i32 = 1;
    /// Null pointer, bad target string, bad index.
    pub const INVALID_ARGUMENT: i32 = 15;
    /// The caller's buffer cannot hold the result.
    pub const BUFFER_TOO_SMALL: i32 = 16;
    /// A bug (a panic caught at the boundary).
    pub const INTERNAL: i32 = 17;
}

/// `oi_error`.
#[repr(C)]
pub struct OiError {
    /// Status code.
    pub code: i32,
    /// Byte offset of the problem.
    pub offset: u64,
    /// NUL-terminated message.
    pub message: [c_char; 256],
}

/// `oi_image`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OiImage {
    /// Unit index in discovery order.
    pub unit: u32,
    /// Image index within the unit.
    pub index: u32,
    /// `OI_FORMAT_*`.
    pub format: u32,
    /// 1 if inside a compressed bundle.
    pub compressed: u32,
    /// Offset in the caller's buffer or `OI_NO_OFFSET`.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// Entry ID or `<triple>--<arch>`.
    pub id: [c_char; 256],
    /// Canonical target ID.
    pub target: [c_char; 96],
}

/// `oi_select_options`.
#[repr(C)]
pub struct OiSelectOptions {
    /// `OI_POLICY_*`.
    pub policy: u32,
    /// `OI_KIND_*`.
    pub kind: u32,
    /// 1: skip MD5 verification of compressed bundles.
    pub skip_hash_check: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// `oi_selection`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OiSelection {
    /// 1 if an image was selected.
    pub found: u32,
    /// 1 if another compatible image ranked equal.
    pub tie: u32,
    /// The selected image.
    pub image: OiImage,
}

/// A failure on its way to the caller.
struct Fail {
    code: i32,
    offset: u64,
    message: String,
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail {
            code: code_of(e.kind()),
            offset: e.offset(),
            message: e.to_string(),
        }
    }
}

fn invalid(message: &str) -> Fail {
    Fail {
        code: status::INVALID_ARGUMENT,
        offset: 0,
        message: message.to_string(),
    }
}

/// The status code of an error kind (values of the header's `OI_ERR_*`).
fn code_of(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::Truncated => 2,
        ErrorKind::OutOfBounds => 3,
        ErrorKind::BadMagic => 4,
        ErrorKind::UnsupportedVersion => 5,
        ErrorKind::UnsupportedMethod => 6,
        ErrorKind::SizeMismatch => 7,
        ErrorKind::HashMismatch => 8,
        ErrorKind::LimitExceeded => 9,
        ErrorKind::Decompress => 10,
        ErrorKind::Malformed => 11,
        ErrorKind::InvalidId => 12,
        ErrorKind::BadContainer => 13,
        ErrorKind::OutOfMemory => 14,
        _ => status::INTERNAL,
    }
}

// ---- the unsafe boundary ---------------------------------------------------------------

/// The caller's buffer as a slice.
///
/// # Safety
/// `data` must be null (then `len` must be 0) or point to `len` readable bytes that stay
/// valid and unmodified for the call.
unsafe fn input<'a>(data: *const u8, len: usize) -> Result<&'a [u8], Fail> {
    if data.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(invalid("data is null"))
        };
    }
    // SAFETY: guaranteed by the caller (header contract).
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// The caller's output array as a mutable slice.
///
/// # Safety
/// `out` must be null (then `capacity` is treated as 0) or point to `capacity` writable `T`.
unsafe fn output<'a, T>(out: *mut T, capacity: usize) -> &'a mut [T] {
    if out.is_null() || capacity == 0 {
        return &mut [];
    }
    // SAFETY: guaranteed by the caller (header contract).
    unsafe { std::slice::from_raw_parts_mut(out, capacity) }
}

/// Stores `value` through an optional out pointer.
///
/// # Safety
/// `p` must be null or valid for a write of `T`.
unsafe fn store<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: guaranteed by the caller (header contract).
        unsafe { p.write(value) }
    }
}

/// The target string.
///
/// # Safety
/// `target` must be null or a NUL-terminated string.
unsafe fn target_arg<'a>(target: *const c_char) -> Result<&'a str, Fail> {
    if target.is_null() {
        return Err(invalid("target is null"));
    }
    // SAFETY: guaranteed by the caller (header contract).
    let s = unsafe { CStr::from_ptr(target) };
    s.to_str().map_err(|_| invalid("target is not UTF-8"))
}

/// The options, defaults for null.
///
/// # Safety
/// `options` must be null or point to an `oi_select_options`.
unsafe fn options_arg<'a>(options: *const OiSelectOptions) -> Option<&'a OiSelectOptions> {
    // SAFETY: guaranteed by the caller (header contract).
    unsafe { options.as_ref() }
}

/// Runs `f`, turning a panic (a bug) into `OI_ERR_INTERNAL`, and reports the outcome.
///
/// # Safety
/// `error` must be null or valid for a write of `oi_error`.
unsafe fn boundary(error: *mut OiError, f: impl FnOnce() -> Result<i32, Fail>) -> i32 {
    let result = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(Fail {
            code: status::INTERNAL,
            offset: 0,
            message: "internal error".to_string(),
        })
    });
    let (code, offset, message) = match result {
        Ok(code) => (code, 0, String::new()),
        Err(f) => (f.code, f.offset, f.message),
    };
    let mut e = OiError {
        code,
        offset,
        message: [0; 256],
    };
    copy_str(&mut e.message, &message);
    // SAFETY: forwarded contract.
    unsafe { store(error, e) };
    code
}

// ---- safe helpers ----------------------------------------------------------------------

/// Copies `s` into a C char array, truncated, NUL-terminated.
fn copy_str(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}

fn read_options(o: Option<&OiSelectOptions>) -> Result<(ReadOptions, SelectOptions), Fail> {
    let mut read = ReadOptions::default();
    let mut select = SelectOptions::default();
    if let Some(o) = o {
        if o.reserved != 0 {
            return Err(invalid("reserved option field is not 0"));
        }
        read.verify_hash = o.skip_hash_check == 0;
        select.policy = match o.policy {
            0 => Policy::Best,
            1 => Policy::First,
            2 => Policy::FirstByClass,
            _ => return Err(invalid("unknown policy")),
        };
        select.kind = match o.kind {
            0 => KindFilter::Any,
            1 => KindFilter::Hip,
            2 => KindFilter::OpenMp,
            3 => KindFilter::Cuda,
            _ => return Err(invalid("unknown kind")),
        };
    }
    Ok((read, select))
}

fn describe(unit: u32, image: &Image<'_>, offset: Option<u64>, compressed: bool) -> OiImage {
    let id = identify(image);
    let target = match (id.stated_target, id.elf_target) {
        (Target::None, Some(elf)) => elf.to_string(),
        (Target::None, None) => String::new(),
        (stated, _) => stated.to_string(),
    };
    let name = match image.entry_id {
        Some(e) => e.to_string(),
        None => format!(
            "{}--{}",
            id.triple().map(|t| t.to_string()).unwrap_or_default(),
            image
                .target_id
                .map(str::to_string)
                .unwrap_or_else(|| target.clone())
        ),
    };
    let mut out = OiImage {
        unit,
        index: u32::try_from(image.index).unwrap_or(u32::MAX),
        format: match image.format {
            Format::Bundle => 0,
            Format::TextBundle => 1,
            Format::OffloadBinary => 2,
            Format::Elf => 3,
        },
        compressed: u32::from(compressed),
        offset: offset.unwrap_or(u64::MAX),
        size: image.size(),
        id: [0; 256],
        target: [0; 96],
    };
    copy_str(&mut out.id, &name);
    copy_str(&mut out.target, &target);
    out
}

// ---- the API ---------------------------------------------------------------------------

/// `oi_list`: see the header.
///
/// # Safety
/// The pointer arguments must satisfy the header's contract.
#[no_mangle]
pub unsafe extern "C" fn oi_list(
    data: *const u8,
    len: usize,
    images: *mut OiImage,
    capacity: usize,
    count: *mut usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let data = input(data, len)?;
            let out = output(images, capacity);
            let options = ReadOptions::default();
            let mut n = 0usize;
            let mut unit_index = 0u32;
            for_each_unit(data, &options, |unit| {
                let open = unit.open(&options)?;
                for image in open.images() {
                    if let Some(slot) = out.get_mut(n) {
                        *slot = describe(
                            unit_index,
                            &image,
                            open.offset_of(&image),
                            unit.compressed().is_some(),
                        );
                    }
                    n = n.saturating_add(1);
                }
                unit_index = unit_index.saturating_add(1);
                Ok(())
            })?;
            store(count, n);
            Ok(if n > capacity {
                status::BUFFER_TOO_SMALL
            } else {
                status::OK
            })
        })
    }
}

/// `oi_select`: see the header.
///
/// # Safety
/// The pointer arguments must satisfy the header's contract.
#[no_mangle]
pub unsafe extern "C" fn oi_select(
    data: *const u8,
    len: usize,
    target: *const c_char,
    options: *const OiSelectOptions,
    results: *mut OiSelection,
    capacity: usize,
    units: *mut usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let data = input(data, len)?;
            let target = target_arg(target)?;
            let device = Device::parse(target)
                .map_err(|e| invalid(&format!("target {target:?}: {}", e.what())))?;
            let (read, select) = read_options(options_arg(options))?;
            let out = output(results, capacity);
            let mut n = 0usize;
            let mut missing = false;
            for_each_unit(data, &read, |unit| {
                let open = unit.open(&read)?;
                let sel = select_identities(open.images().map(|i| identify(&i)), &device, &select);
                let unit_index = u32::try_from(n).unwrap_or(u32::MAX);
                let chosen = sel.chosen.and_then(|c| open.images().nth(c));
                missing |= chosen.is_none();
                if let Some(slot) = out.get_mut(n) {
                    *slot = OiSelection {
                        found: u32::from(chosen.is_some()),
                        tie: u32::from(sel.tie),
                        image: match &chosen {
                            Some(img) => describe(
                                unit_index,
                                img,
                                open.offset_of(img),
                                unit.compressed().is_some(),
                            ),
                            None => OiImage {
                                unit: unit_index,
                                index: 0,
                                format: 0,
                                compressed: 0,
                                offset: u64::MAX,
                                size: 0,
                                id: [0; 256],
                                target: [0; 96],
                            },
                        },
                    };
                }
                n = n.saturating_add(1);
                Ok(())
            })?;
            store(units, n);
            Ok(if n > capacity {
                status::BUFFER_TOO_SMALL
            } else if missing {
                status::NO_MATCH
            } else {
                status::OK
            })
        })
    }
}

/// `oi_extract`: see the header.
///
/// # Safety
/// The pointer arguments must satisfy the header's contract.
#[no_mangle]
pub unsafe extern "C" fn oi_extract(
    data: *const u8,
    len: usize,
    unit: u32,
    index: u32,
    options: *const OiSelectOptions,
    out: *mut u8,
    capacity: usize,
    size: *mut usize,
    error: *mut OiError,
) -> i32 {
    // SAFETY: the contract is forwarded to the helpers.
    unsafe {
        boundary(error, || {
            let data = input(data, len)?;
            let (read, _) = read_options(options_arg(options))?;
            let dst = output(out, capacity);
            let mut seen = 0u32;
            let mut result: Option<Result<i32, Fail>> = None;
            for_each_unit(data, &read, |u| {
                if seen == unit && result.is_none() {
                    let open = u.open(&read)?;
                    result = Some(match open.images().nth(index as usize) {
                        None => Err(invalid("no image with that index in the unit")),
                        Some(image) => {
                            store(size, image.bytes.len());
                            match dst.get_mut(..image.bytes.len()) {
                                Some(d) => {
                                    d.copy_from_slice(image.bytes);
                                    Ok(status::OK)
                                }
                                None => Ok(status::BUFFER_TOO_SMALL),
                            }
                        }
                    });
                }
                seen = seen.saturating_add(1);
                Ok(())
            })?;
            result.unwrap_or_else(|| Err(invalid("no unit with that index")))
        })
    }
}

/// `oi_status_name`: see the header.
#[no_mangle]
pub extern "C" fn oi_status_name(code: i32) -> *const c_char {
    let name: &'static CStr = match code {
        0 => c"ok",
        1 => c"no-match",
        2 => c"truncated",
        3 => c"out-of-bounds",
        4 => c"bad-magic",
        5 => c"unsupported-version",
        6 => c"unsupported-method",
        7 => c"size-mismatch",
        8 => c"hash-mismatch",
        9 => c"limit-exceeded",
        10 => c"decompress",
        11 => c"malformed",
        12 => c"invalid-id",
        13 => c"bad-container",
        14 => c"out-of-memory",
        15 => c"invalid-argument",
        16 => c"buffer-too-small",
        _ => c"internal",
    };
    name.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_match_error_kind_names() {
        for kind in [
            ErrorKind::Truncated,
            ErrorKind::OutOfBounds,
            ErrorKind::BadMagic,
            ErrorKind::UnsupportedVersion,
            ErrorKind::UnsupportedMethod,
            ErrorKind::SizeMismatch,
            ErrorKind::HashMismatch,
            ErrorKind::LimitExceeded,
            ErrorKind::Decompress,
            ErrorKind::Malformed,
            ErrorKind::InvalidId,
            ErrorKind::BadContainer,
            ErrorKind::OutOfMemory,
        ] {
            // SAFETY: oi_status_name returns a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(oi_status_name(code_of(kind))) };
            assert_eq!(name.to_str().unwrap(), kind.name());
        }
    }
}
