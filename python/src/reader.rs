//! `offload_image._native.Reader`: the library over a Python buffer, in place.
//!
//! A `Reader` holds the caller's buffer (an `mmap` of the file, `bytes`, a `memoryview`,
//! anything with the buffer protocol) through the buffer protocol for as long as it is open,
//! walks it once into the library's units ([`offload_image::units`]) and opens each
//! ([`offload_image::Unit::open`]: a compressed bundle is decompressed once, here). The
//! images' descriptions go to Python as dicts; the images stored in place are sliced there
//! from the caller's own buffer (a `memoryview`, no copy), the decoded ones come from here as
//! `bytes`. Choosing ([`offload_image::choose`]) and decoding ([`offload_image::Image::decode`])
//! run on the open units, without the GIL.
//!
//! A writable buffer (a `bytearray`, a writable `mmap`) is copied once when opened: the
//! reader's bytes must not change under it.

use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex};

use offload_image::{
    hip_force_spirv, identify, image_name, units, CudaDriver, Device, DriverVersion, Error, Image,
    JitSwitches, KindFilter, Loss, OpenUnit, Policy, ReadOptions, SelectOptions, Target, Unit,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

/// CPython's `Py_buffer` (stable since 3.0; part of the limited API from 3.11).
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut pyo3::ffi::PyObject,
    len: pyo3::ffi::Py_ssize_t,
    itemsize: pyo3::ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut pyo3::ffi::Py_ssize_t,
    strides: *mut pyo3::ffi::Py_ssize_t,
    suboffsets: *mut pyo3::ffi::Py_ssize_t,
    internal: *mut c_void,
}

// The buffer protocol's two functions, in every CPython 3 (the stable ABI of 3.9 leaves them
// out of its headers; PyO3 declares them only from 3.11).
extern "C" {
    fn PyObject_GetBuffer(
        obj: *mut pyo3::ffi::PyObject,
        view: *mut RawBuffer,
        flags: c_int,
    ) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// The bytes a reader reads: a held read-only buffer, or a copy of a writable one.
enum Data {
    Held(Box<RawBuffer>),
    Copied(Box<[u8]>),
}

// SAFETY: a held buffer is read-only (a writable one is copied) and stays valid, unchanged
// by Python, until `PyBuffer_Release`; the pointer is only read.
unsafe impl Send for Data {}
unsafe impl Sync for Data {}

impl Data {
    /// Takes the bytes of `source` through the buffer protocol.
    fn take(source: &Bound<'_, PyAny>) -> PyResult<Data> {
        let mut view = Box::new(RawBuffer {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        // SAFETY: `source` is a live object (we hold the GIL); PyBUF_SIMPLE (0) asks for one
        // contiguous run of bytes, which the exporter fills in `view` or refuses with an
        // exception.
        let rc = unsafe { PyObject_GetBuffer(source.as_ptr(), &mut *view, 0) };
        if rc != 0 {
            let cause = PyErr::fetch(source.py());
            let e = PyTypeError::new_err(format!(
                "source must be a path or an object with the buffer protocol (one contiguous \
                 run of bytes), not {}",
                source
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ));
            e.set_cause(source.py(), Some(cause));
            return Err(e);
        }
        let len = usize::try_from(view.len).unwrap_or(0);
        if view.readonly != 0 {
            return Ok(Data::Held(view));
        }
        // SAFETY: the exporter gave `len` readable bytes at `buf` (checked non-null when
        // `len` > 0), valid until the release below.
        let copy: Box<[u8]> = if len == 0 || view.buf.is_null() {
            Box::new([])
        } else {
            unsafe { std::slice::from_raw_parts(view.buf as *const u8, len) }.into()
        };
        // SAFETY: `view` was filled by a successful PyObject_GetBuffer, released once.
        unsafe { PyBuffer_Release(&mut *view) };
        Ok(Data::Copied(copy))
    }

    /// The bytes, for as long as the reader lives.
    fn bytes(&self) -> &'static [u8] {
        match self {
            Data::Held(view) => {
                let len = usize::try_from(view.len).unwrap_or(0);
                if len == 0 || view.buf.is_null() {
                    return &[];
                }
                // SAFETY: read-only bytes the exporter keeps valid until the release in
                // `Drop`; `Inner` drops every borrow of them (the units) before its `Data`.
                unsafe { std::slice::from_raw_parts(view.buf as *const u8, len) }
            }
            // SAFETY: the box lives as long as `Inner`, whose units drop first; the static
            // lifetime never leaves `Inner`.
            Data::Copied(b) => unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) },
        }
    }
}

impl Drop for Data {
    fn drop(&mut self) {
        if let Data::Held(view) = self {
            // SAFETY: filled by a successful PyObject_GetBuffer and released only here, with
            // the GIL.
            Python::attach(|_| unsafe { PyBuffer_Release(&mut **view) });
        }
    }
}

/// One unit: opened, or why it does not open.
enum Slot {
    Open(Box<OpenUnit<'static>>),
    Damaged(Error),
}

/// What an open reader holds. Field order is drop order: the units borrow `data`.
struct Inner {
    slots: Vec<Slot>,
    options: ReadOptions,
    #[allow(dead_code)] // held for the borrows in `slots`
    data: Data,
}

/// The library's view of one buffer (see the module documentation).
///
/// The lock is held only to take or clone the `Arc`, never while the GIL is released (a
/// thread waiting for it with the GIL would otherwise block the one that holds it); a call
/// in flight keeps what it reads alive through its clone, past a `close` meanwhile.
#[pyclass(module = "offload_image._native", frozen)]
pub struct Reader {
    inner: Mutex<Option<Arc<Inner>>>,
}

impl Reader {
    /// What the reader holds, or `ValueError` once closed.
    fn inner(&self) -> PyResult<Arc<Inner>> {
        let guard = self.inner.lock().map_err(|_| closed())?;
        guard.as_ref().map(Arc::clone).ok_or_else(closed)
    }
}

/// An error of the library as `(kind, offset, message, decompressed_offset)`.
pub fn error_tuple(e: &Error) -> (&'static str, u64, String, Option<u64>) {
    (
        e.kind().name(),
        e.offset(),
        e.to_string(),
        e.decompressed_offset(),
    )
}

/// How the toolchain names the image's architecture: `sm_86` for a cubin, `compute_86` (the
/// virtual architecture) for PTX, the target ID for AMDGPU code.
fn arch_name(image: &Image<'_>, code: &str) -> Option<String> {
    match identify(image).target {
        Target::Nvptx(mut arch) => {
            arch.virtual_name = code != "cubin";
            Some(arch.to_string())
        }
        Target::None | Target::Invalid { .. } => None,
        t => Some(t.to_string()),
    }
}

/// What the image holds: `elf` (an AMDGPU or other device ELF), `cubin` (an NVIDIA one),
/// `ptx`, `bitcode`, `spirv`, `fatbinary`, `other`: the library's identity code by its
/// variant's name (the Python tests pin each).
fn code_name(image: &Image<'_>) -> String {
    let identity = identify(image);
    let code = format!("{:?}", identity.code).to_ascii_lowercase();
    if code == "elf" && matches!(identity.target, Target::Nvptx(_)) {
        return "cubin".to_string();
    }
    code
}

/// A short stable name of why an image cannot be loaded on a device.
fn loss_kind(loss: &Loss<'_>) -> &'static str {
    // The library's names ([`Loss::name`]), but for the NVIDIA rule: `nvptx` here.
    match loss.name() {
        "nvidia-rule" => "nvptx",
        name => name,
    }
}

/// The description of one image, for Python; `data` holds the bytes of an image that is
/// neither in the buffer nor decoded on demand (content decompressed when the unit opened).
fn image_dict<'py>(py: Python<'py>, image: &Image<'_>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("index", image.index)?;
    d.set_item("entry_id", image.entry_id)?;
    d.set_item("format", image.format.name())?;
    d.set_item("kind", image.offload_kind.name())?;
    d.set_item("triple", image.triple)?;
    d.set_item("target_id", image.target_id)?;
    d.set_item("image_kind", image.image_kind.name())?;
    let code = code_name(image);
    d.set_item("arch", arch_name(image, &code))?;
    d.set_item("code", code)?;
    d.set_item("name", image_name(image).to_string())?;
    d.set_item("offset", image.offset)?;
    d.set_item("size", image.size())?;
    d.set_item("encoded", image.encoded.is_some())?;
    let owned =
        (image.offset.is_none() && image.encoded.is_none()).then(|| PyBytes::new(py, image.bytes));
    d.set_item("data", owned)?;
    Ok(d)
}

fn closed() -> PyErr {
    PyValueError::new_err("I/O operation on a closed offload_image file")
}

/// The selection options of the keyword arguments; `ValueError` naming a bad one.
#[allow(clippy::too_many_arguments)]
fn select_options(
    policy: &str,
    kind: Option<&str>,
    jit: bool,
    generic: bool,
    spirv: bool,
    strict: bool,
    clr: bool,
    hip_openmp_compatible: bool,
    nvidia_driver: Option<&str>,
) -> PyResult<SelectOptions> {
    let policy = match policy {
        "best" => Policy::Best,
        "first" => Policy::First,
        "first-by-class" => Policy::FirstByClass,
        other => {
            return Err(PyValueError::new_err(format!(
                "policy must be 'best', 'first' or 'first-by-class', not {other:?}"
            )))
        }
    };
    let kind = match kind {
        None => KindFilter::Any,
        Some("hip") => KindFilter::Hip,
        Some("openmp") => KindFilter::OpenMp,
        Some("cuda") => KindFilter::Cuda,
        Some(other) => {
            return Err(PyValueError::new_err(format!(
                "kind must be 'hip', 'openmp', 'cuda' or None, not {other:?}"
            )))
        }
    };
    let version = match nvidia_driver {
        None => None,
        Some(text) => Some(DriverVersion::parse(text).ok_or_else(|| {
            PyValueError::new_err(format!(
                "nvidia_driver must be a driver version such as '550.54.14', not {text:?}"
            ))
        })?),
    };
    let env = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    Ok(SelectOptions {
        kind,
        hip_openmp_compatible,
        policy,
        allow_jit: jit,
        allow_generic: generic,
        allow_spirv: spirv,
        strict,
        cuda: CudaDriver {
            version,
            switches: JitSwitches::from_env(env),
        },
        // CLR's reading of the variable.
        force_spirv: hip_force_spirv(env("HIP_FORCE_SPIRV_CODEOBJECT").as_deref()),
        clr,
    })
}

/// Parses a device: `(canonical text, "amdgpu" or "cuda")`, or `ValueError`.
#[pyfunction]
pub fn parse_device(text: &str) -> PyResult<(String, &'static str)> {
    let device = Device::parse(text).map_err(|e| {
        PyValueError::new_err(format!(
            "invalid device {text:?}: {} ({})",
            e.what(),
            e.kind().name()
        ))
    })?;
    let vendor = match device {
        Device::Amdgpu(_) => "amdgpu",
        Device::Cuda { .. } => "cuda",
    };
    Ok((device.to_string(), vendor))
}

#[pymethods]
impl Reader {
    /// Reads `source` (an object with the buffer protocol). A unit that does not read is
    /// kept, with its error; an error of the walk itself (strict mode's stray bytes, a
    /// container nested too deep) is raised as `ReadError(kind, offset, message,
    /// decompressed_offset)`.
    #[new]
    #[pyo3(signature = (source, *, strict = false, verify_hash = true))]
    fn new(source: &Bound<'_, PyAny>, strict: bool, verify_hash: bool) -> PyResult<Self> {
        let data = Data::take(source)?;
        let bytes = data.bytes();
        let options = ReadOptions {
            strict,
            verify_hash,
            ..ReadOptions::default()
        };
        let walked: Result<Vec<Slot>, Error> = source.py().detach(|| {
            let mut slots = Vec::new();
            for unit in units(bytes, &options) {
                let unit: Unit<'static> = unit?;
                slots.push(match unit.open(&options) {
                    Ok(open) => Slot::Open(Box::new(open)),
                    Err(e) => Slot::Damaged(e),
                });
                // The unit itself is kept inside the open one; a damaged one is walked to
                // again by `units`.
            }
            Ok(slots)
        });
        let slots = walked.map_err(|e| crate::ReadError::new_err(error_tuple(&e)))?;
        Ok(Reader {
            inner: Mutex::new(Some(Arc::new(Inner {
                slots,
                options,
                data,
            }))),
        })
    }

    /// The units, in discovery order: one dict each (`index`, `location`, `section`,
    /// `offset`, `format`, `skipped`, `error`, `images`).
    fn units<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let inner = self.inner()?;
        let out = PyList::empty(py);
        // The walk again for the units that did not open (allocation-free, no decoding).
        let walked: Vec<Unit<'static>> = units(inner.data.bytes(), &inner.options)
            .take(inner.slots.len())
            .filter_map(Result::ok)
            .collect();
        for (slot, unit) in inner.slots.iter().zip(walked.iter()) {
            let d = PyDict::new(py);
            let unit = match slot {
                Slot::Open(open) => open.unit(),
                Slot::Damaged(_) => unit,
            };
            d.set_item("index", unit.index)?;
            d.set_item("location", unit.location.to_string())?;
            d.set_item(
                "section",
                unit.location
                    .section()
                    .map(|s| String::from_utf8_lossy(s).into_owned()),
            )?;
            d.set_item("offset", unit.location.offset)?;
            d.set_item("format", unit.format().name())?;
            d.set_item("compressed", unit.compressed().is_some())?;
            d.set_item("skipped", unit.skipped.as_ref().map(|r| (r.start, r.end)))?;
            let images = PyList::empty(py);
            match slot {
                Slot::Open(open) => {
                    d.set_item("error", None::<(String,)>)?;
                    for image in open.images() {
                        images.append(image_dict(py, &image)?)?;
                    }
                }
                Slot::Damaged(error) => d.set_item("error", error_tuple(error))?,
            }
            d.set_item("images", images)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// The decoded bytes of image `image` of unit `unit` (a compressed fatbinary entry, a
    /// `.kpack` zstd frame); `ReadError` where they do not decode.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        unit: usize,
        image: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let inner = self.inner()?;
        let Some(Slot::Open(open)) = inner.slots.get(unit) else {
            return Err(PyValueError::new_err(format!("no open unit {unit}")));
        };
        let options = inner.options;
        let decoded = py.detach(|| {
            let found = open.images().find(|i| i.index == image);
            found.map(|i| i.decode(&options).map(|c| c.into_owned()))
        });
        match decoded {
            None => Err(PyValueError::new_err(format!(
                "no image {image} in unit {unit}"
            ))),
            Some(Err(e)) => Err(crate::ReadError::new_err(error_tuple(&e))),
            Some(Ok(bytes)) => Ok(PyBytes::new(py, &bytes)),
        }
    }

    /// The choice in unit `unit` for each of `devices`: per device a dict (`device`,
    /// `chosen`, `rank`, `tie`, `compatible`, `candidates`, `losses` as `(index, reason,
    /// kind)`, `rejection`, `refused`, `from_jit_cache`).
    #[pyo3(signature = (unit, devices, *, policy, kind, jit, generic, spirv, strict, clr, hip_openmp_compatible, nvidia_driver))]
    #[allow(clippy::too_many_arguments)]
    fn choose<'py>(
        &self,
        py: Python<'py>,
        unit: usize,
        devices: Vec<String>,
        policy: &str,
        kind: Option<&str>,
        jit: bool,
        generic: bool,
        spirv: bool,
        strict: bool,
        clr: bool,
        hip_openmp_compatible: bool,
        nvidia_driver: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let options = select_options(
            policy,
            kind,
            jit,
            generic,
            spirv,
            strict,
            clr,
            hip_openmp_compatible,
            nvidia_driver,
        )?;
        let devices = devices
            .iter()
            .map(|d| {
                Device::parse(d).map_err(|e| {
                    PyValueError::new_err(format!("invalid device {d:?}: {}", e.what()))
                })
            })
            .collect::<PyResult<Vec<Device>>>()?;
        let inner = self.inner()?;
        let Some(Slot::Open(open)) = inner.slots.get(unit) else {
            return Err(PyValueError::new_err(format!("no open unit {unit}")));
        };
        let choices = py.detach(|| offload_image::choose(open.images(), &devices, &options));
        let out = PyList::empty(py);
        for (device, choice) in devices.iter().zip(choices.iter()) {
            let d = PyDict::new(py);
            d.set_item("device", device.to_string())?;
            d.set_item("chosen", choice.chosen())?;
            d.set_item("rank", choice.key.map(|k| k.class.name()))?;
            d.set_item("tie", choice.tie)?;
            d.set_item("compatible", choice.compatible)?;
            d.set_item("candidates", choice.candidates)?;
            let losses = PyList::empty(py);
            // Every image with a verdict that is not the chosen one, in discovery order.
            for lost in choice.losses() {
                let kind = loss_kind(&lost.loss);
                losses.append((lost.index, lost.loss.to_string(), kind))?;
            }
            d.set_item("losses", losses)?;
            d.set_item(
                "rejection",
                choice
                    .rejection
                    .map(|(i, r)| (i, r.to_string(), loss_kind(&Loss::Rejected(r)))),
            )?;
            d.set_item("refused", choice.refused.map(|k| k.index))?;
            d.set_item("from_jit_cache", choice.from_jit_cache)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Releases the buffer and everything read from it; later calls raise `ValueError`.
    fn close(&self) {
        let taken = self.inner.lock().ok().and_then(|mut g| g.take());
        // The buffer is released here, or when a call in flight ends.
        drop(taken);
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().map(|g| g.is_none()).unwrap_or(true)
    }
}
