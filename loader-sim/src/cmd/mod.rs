//! One module per subcommand.

pub mod bundler;
pub mod doctor;
pub mod list;
pub mod packager;
pub mod register;
pub mod select;
pub mod wrap;
