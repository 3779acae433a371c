//! The integration tests of the drop-ins, one test binary: a module per subject, the helpers
//! they share in `common`.

mod common;

mod archive_differential;
mod boundary;
mod objcopy_differential;
mod refusals;
mod zlib_compress2;
