//! `loader-sim`: the command-line harness over `offload-image` (contract: `CLI.md`).
//!
//! Exit status: 0 success; 1 no compatible image for a requested target; 2 bad input or
//! usage. Errors are one line on standard error:
//! `loader-sim: error: <file>: <what>, at byte <n>`.

mod cmd;
mod decode;
mod input;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Simulates how GPU offload runtimes find, select and register device images.
#[derive(Parser)]
#[command(name = "loader-sim", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every device image in FILE, in discovery order.
    List(cmd::list::Args),
    /// Choose the image a runtime would load for each target, per unit.
    Select(cmd::select::Args),
}

/// What a command ends with.
pub enum Outcome {
    /// Everything worked (exit 0).
    Ok,
    /// A well-formed input had no compatible image for a requested target (exit 1).
    NoMatch,
}

/// A failure reported as one line on standard error, exit status 2.
#[derive(Debug)]
pub struct Failure(pub String);

impl Failure {
    /// A problem with `file`.
    pub fn file(file: &std::path::Path, what: impl std::fmt::Display) -> Self {
        Failure(format!("{}: {what}", file.display()))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List(a) => cmd::list::run(&a),
        Command::Select(a) => cmd::select::run(&a),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::NoMatch) => ExitCode::from(1),
        Err(Failure(msg)) => {
            eprintln!("loader-sim: error: {msg}");
            ExitCode::from(2)
        }
    }
}
