//! The integration tests of the C API, one test binary: the C and C++ programs built against
//! the library (`c_api`) and the committed header (`header`); shared helpers in `common`.

mod common;

mod c_api;
mod header;
mod reasons;
