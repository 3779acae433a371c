//! The running process as an [`AddressSpace`]: every address is bounded by the mapping
//! that contains it, never by scanning.
//!
//! A registered HIP fat binary comes as a bare pointer. Its bytes are bounded by the
//! loaded segment that holds it (`dl_iterate_phdr`: `PT_LOAD`, readable, `[base + p_vaddr,
//! base + p_vaddr + p_memsz)`), or, for memory that belongs to no loaded object (a
//! descriptor a program built on the heap), by its line of `/proc/self/maps`. The blob's
//! own header then gives its size inside that bound.

use std::ffi::{c_int, c_void, CStr};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use offload_image::registration::AddressSpace;

/// The loaded object (executable or shared library) that contains an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// Path the object was loaded from (the executable's own path for the main program).
    pub path: PathBuf,
    /// Load base (`dlpi_addr`): an address minus the base is the file's virtual address.
    pub base: u64,
    /// The readable loaded segment containing the address: `[start, end)`.
    pub segment: (u64, u64),
}

struct Query {
    addr: u64,
    found: Option<Object>,
}

/// Called by `dl_iterate_phdr` once per loaded object.
extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
    // SAFETY: `data` is the `&mut Query` passed to `dl_iterate_phdr` by `object_of`, alive
    // for the whole iteration; `info` points to a record valid during this callback.
    let (query, info) = unsafe { (&mut *data.cast::<Query>(), &*info) };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: glibc guarantees `dlpi_phdr` points to `dlpi_phnum` program headers.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let base = info.dlpi_addr;
    for p in phdrs {
        if p.p_type != libc::PT_LOAD || p.p_flags & libc::PF_R == 0 {
            continue;
        }
        let start = base.wrapping_add(p.p_vaddr);
        let end = start.saturating_add(p.p_memsz);
        if (start..end).contains(&query.addr) {
            let name = if info.dlpi_name.is_null() {
                Default::default()
            } else {
                // SAFETY: `dlpi_name` is a NUL-terminated string owned by the loader.
                unsafe { CStr::from_ptr(info.dlpi_name) }
                    .to_bytes()
                    .to_vec()
            };
            let path = if name.is_empty() {
                std::env::current_exe().unwrap_or_default()
            } else {
                PathBuf::from(std::ffi::OsString::from_vec(name))
            };
            query.found = Some(Object {
                path,
                base,
                segment: (start, end),
            });
            return 1;
        }
    }
    0
}

/// The loaded object and segment that contain `addr`.
pub fn object_of(addr: u64) -> Option<Object> {
    let mut query = Query { addr, found: None };
    // SAFETY: `visit` only reads the records glibc hands it and writes `query`, which
    // outlives the call.
    unsafe {
        libc::dl_iterate_phdr(Some(visit), (&mut query as *mut Query).cast());
    }
    query.found
}

/// The readable line of `/proc/self/maps` that contains `addr`: `[start, end)`.
pub fn mapping_of(addr: u64) -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (range, perms) = (fields.next()?, fields.next()?);
        let (s, e) = range.split_once('-')?;
        let (s, e) = (
            u64::from_str_radix(s, 16).ok()?,
            u64::from_str_radix(e, 16).ok()?,
        );
        (perms.starts_with('r') && (s..e).contains(&addr)).then_some((s, e))
    })
}

/// This process's memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessSpace;

impl AddressSpace<'static> for ProcessSpace {
    fn bytes_from(&self, addr: u64) -> Option<&'static [u8]> {
        if addr == 0 {
            return None;
        }
        let end = object_of(addr)
            .map(|o| o.segment.1)
            .or_else(|| mapping_of(addr).map(|m| m.1))?;
        let len = usize::try_from(end.checked_sub(addr)?).ok()?;
        // SAFETY: `[addr, end)` lies inside one readable mapping of this process: a
        // readable PT_LOAD segment of a loaded object, or a readable line of
        // /proc/self/maps. The shim only reads it. `'static` is the shim's contract with
        // the programs it serves: a module's registration records stay mapped while the
        // module is registered (modules unregister from their destructors, before they
        // are unmapped), and the shim drops every view of a unit when it is unregistered.
        Some(unsafe { std::slice::from_raw_parts(addr as *const u8, len) })
    }
}
