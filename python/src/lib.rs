//! `offload_image._native`: the extension module under the `offload_image` Python package.
//!
//! One function, `run`, runs a `loader-sim` command line in this process and returns what
//! the command printed; `offload_image/__init__.py` builds the command lines (always with
//! `--json`) and turns the lines into dicts, so that the module's records are the command's.
//! A failure is raised as `offload_image._native.Failure(message, kind, offset)`.
//!
//! `Reader` is the library itself over a Python buffer (`reader`): the units and images of
//! `offload_image.open`, their bytes, and the choice for devices.
//!
//! (`unsafe` is not forbidden here as in the other crates: PyO3's macros expand to it.)

mod reader;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _native,
    Failure,
    PyException,
    "A command failed: args are (message, kind, offset); kind and offset may be None."
);

create_exception!(
    _native,
    ReadError,
    PyException,
    "The library refused the bytes: args are (kind, offset, message, decompressed_offset)."
);

/// Runs the `loader-sim` command line `argv` (without the program name) and returns the
/// exit status the command would have (0 ok, 1 no compatible image, 2 problems reported in
/// the output) and what it printed.
///
/// Refused, as `usage`: `register --load`, which starts the running executable as the loader
/// process (in here the Python interpreter), and the drop-in tools, which print to the
/// process's standard output; the `loader-sim` command runs both.
///
/// The arguments are `str` (a path that is not UTF-8 arrives as the file-system encoding's
/// surrogate escapes, which PyO3 turns back into its bytes), so every path reaches the
/// command as the caller's bytes. Only the arguments before a `--` are options.
#[pyfunction]
fn run(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> PyResult<(u8, String)> {
    let command = argv.first().and_then(|a| a.to_str());
    // Options: the arguments before `--` (after it, `--load` is a file's name).
    let options = argv.iter().take_while(|a| *a != "--");
    if matches!(command, Some("offload-bundler" | "offload-packager")) {
        return Err(Failure::new_err((
            "the drop-in tools write to standard output as LLVM's do: run the loader-sim \
             command for them"
                .to_string(),
            Some("usage"),
            None::<u64>,
        )));
    }
    if command == Some("__load")
        || (command == Some("register")
            && options
                .filter_map(|a| a.to_str())
                .any(|a| a == "--load" || a.starts_with("--load=")))
    {
        return Err(Failure::new_err((
            "register --load starts its own loader process with the runtime shim: run the \
             loader-sim command for it"
                .to_string(),
            Some("usage"),
            None::<u64>,
        )));
    }
    let result = py.detach(|| {
        let mut out = Vec::new();
        let argv = std::iter::once(std::ffi::OsString::from("loader-sim")).chain(argv);
        loader_sim::run(argv, &mut out).map(|outcome| (outcome, out))
    });
    match result {
        Ok((outcome, out)) => {
            let status = match outcome {
                loader_sim::Outcome::Ok => 0,
                loader_sim::Outcome::NoMatch => 1,
                loader_sim::Outcome::Invalid => 2,
            };
            Ok((status, String::from_utf8_lossy(&out).into_owned()))
        }
        Err(f) => Err(Failure::new_err((f.message, f.kind, f.offset))),
    }
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add("Failure", m.py().get_type::<Failure>())?;
    m.add("ReadError", m.py().get_type::<ReadError>())?;
    m.add_class::<reader::Reader>()?;
    m.add_function(wrap_pyfunction!(reader::parse_device, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
