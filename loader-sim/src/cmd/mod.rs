//! One module per subcommand.

pub mod list;
