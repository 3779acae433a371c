//! `offload-dropin`: drop-in replacements for LLVM 22's `clang-offload-bundler` and
//! `clang-offload-packager`, written so that their output files are byte-identical to
//! LLVM's.
//!
//! * [`bundler`] and [`packager`] take LLVM's command lines and do what the tools do;
//! * [`llvm`] holds what their output depends on: LLVM's hash-table iteration orders, triple
//!   normalisation, the `cl` option syntax, the bitcode symbol table, and the ELF and
//!   archive writers (built on the `object` and `ar_archive_writer` crates, with LLVM's
//!   layout choices where those crates make others).
//!
//! The command-line program is `loader-sim` (its `offload-bundler` and `offload-packager`
//! subcommands call [`bundler::run_with`] and [`packager::run`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bundler;
pub mod input;
pub mod llvm;
pub mod packager;

pub use bundler::ToolError;
