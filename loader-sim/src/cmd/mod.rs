//! One module per subcommand.

pub mod doctor;
pub mod list;
pub mod prune;
pub mod register;
pub mod select;
pub mod validate;
pub mod wrap;
