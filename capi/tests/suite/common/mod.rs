//! Helpers shared by the C API tests.

#![allow(dead_code)]

/// The outside-tools switch and its helpers, shared by every crate's tests.
#[path = "../../../../tests/suite/common/external.rs"]
mod external;
pub use external::{external, external_part};
