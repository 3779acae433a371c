//! `loader-sim`: the command-line harness over `offload-image` (contract: `CLI.md`).
//!
//! Exit status: 0 success; 1 no compatible image for a requested target; 2 bad input or
//! usage. Errors are one line on standard error:
//! `loader-sim: error: <file>: <what>, at byte <n>`.
//!
//! `wrap` writes the host object that registers device images at start-up (the wrapping
//! step of `clang-linker-wrapper`).
//!
//! `offload-bundler` and `offload-packager` take LLVM's own command lines (they are
//! dispatched before clap sees the arguments). Invoked through a link whose name is
//! `clang-offload-bundler` or `clang-offload-packager` (or `llvm-offload-binary`), in any
//! directory and optionally with a version suffix (`clang-offload-bundler-22`), the binary
//! behaves as the corresponding subcommand.
//!
//! No `unsafe` here: mapping files and loading libraries live in `loader-sim-os`.

#![forbid(unsafe_code)]

mod cmd;
mod decode;
mod gpus;
mod input;
mod kpack;
mod output;
mod python;
mod wheel;

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
    /// Simulate a runtime registering the device code of a host file or library.
    Register(cmd::register::Args),
    /// (internal) Load a library with the runtime shim in place; used by `register --load`.
    #[command(name = "__load", hide = true)]
    Load {
        /// The library.
        lib: std::path::PathBuf,
    },
    /// Choose the image a runtime would load for each target, per unit.
    Select(cmd::select::Args),
    /// For every library with device code under PATH and every device: which units load,
    /// why the others do not, and what would make them run.
    Doctor(cmd::doctor::Args),
    /// Drop the device images no kept device can load (bundles, CCOB, OffloadBinaries, .hip_fatbin of linked files).
    Prune(cmd::prune::Args),
    /// Check offload containers: every problem, with severity, code and byte offset.
    Validate(cmd::validate::Args),
    /// Write a host object that embeds device images and registers them at start-up.
    Wrap(cmd::wrap::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages: `loader-sim.1` and one per command (`loader-sim-list.1`, ...).
    Man {
        /// The directory to write them to.
        #[arg(default_value = ".")]
        dir: std::path::PathBuf,
    },
    /// Drop-in clang-offload-bundler (LLVM 22 command line; see `offload-bundler --help`).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    OffloadBundler {
        /// clang-offload-bundler arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Drop-in clang-offload-packager (LLVM 22 command line; see `offload-packager --help`).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    OffloadPackager {
        /// clang-offload-packager arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Which drop-in tool the program name selects, if any.
fn tool_of_program_name(argv0: &str) -> Option<&'static str> {
    let base = argv0.rsplit(['/', '\\']).next().unwrap_or(argv0);
    let base = base.strip_suffix(".exe").unwrap_or(base);
    let matches = |name: &str| {
        base == name
            || base
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix('-'))
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
    };
    if matches("clang-offload-bundler") {
        Some("offload-bundler")
    } else if matches("clang-offload-packager") || matches("llvm-offload-binary") {
        Some("offload-packager")
    } else {
        None
    }
}

/// Runs a drop-in tool; errors are printed as LLVM's tools print them
/// ([`offload_dropin::ToolError::report`]).
fn run_tool(tool: &str, prog: &str, args: &[String]) -> ExitCode {
    let result = match tool {
        "offload-bundler" => offload_dropin::bundler::run_with(prog, args, input::map_for_tool),
        _ => offload_dropin::packager::run(prog, args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{}", e.report(prog));
            ExitCode::from(e.code)
        }
    }
}

/// What a command ends with.
pub enum Outcome {
    /// Everything worked (exit 0).
    Ok,
    /// A well-formed input had no compatible image for a requested target (exit 1).
    NoMatch,
    /// The command reported what is wrong itself (`validate` found errors): exit 2.
    Invalid,
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

/// Writes `loader-sim.1` and one page per visible subcommand into `dir`.
fn man_pages(dir: &std::path::Path) -> Result<Outcome, Failure> {
    use clap::CommandFactory;
    let write = |name: &str, cmd: clap::Command| -> Result<(), Failure> {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .map_err(|e| Failure(format!("cannot render the man page {name}: {e}")))?;
        let path = dir.join(name);
        std::fs::write(&path, page).map_err(|e| Failure::file(&path, format!("cannot write: {e}")))
    };
    std::fs::create_dir_all(dir).map_err(|e| Failure::file(dir, format!("cannot create: {e}")))?;
    let cli = Cli::command();
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        // clap names are 'static: a handful of short strings, once per run.
        let name: &'static str = format!("loader-sim-{}", sub.get_name()).leak();
        write(&format!("{name}.1"), sub.clone().name(name))?;
    }
    write("loader-sim.1", cli)?;
    Ok(Outcome::Ok)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let argv0 = argv.first().map(String::as_str).unwrap_or("loader-sim");
    if let Some(tool) = tool_of_program_name(argv0) {
        let prog = argv0.rsplit('/').next().unwrap_or(argv0);
        return run_tool(tool, prog, argv.get(1..).unwrap_or(&[]));
    }
    if let Some(tool @ ("offload-bundler" | "offload-packager")) = argv.get(1).map(String::as_str) {
        return run_tool(tool, "loader-sim", argv.get(2..).unwrap_or(&[]));
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List(a) => cmd::list::run(&a),
        Command::OffloadBundler { args } => {
            return run_tool("offload-bundler", "loader-sim", &args)
        }
        Command::OffloadPackager { args } => {
            return run_tool("offload-packager", "loader-sim", &args)
        }
        Command::Prune(a) => cmd::prune::run(&a),
        Command::Register(a) => cmd::register::run(&a),
        Command::Load { lib } => cmd::register::load_child(&lib),
        Command::Select(a) => cmd::select::run(&a),
        Command::Doctor(a) => cmd::doctor::run(&a),
        Command::Validate(a) => cmd::validate::run(&a),
        Command::Wrap(a) => cmd::wrap::run(&a),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "loader-sim", &mut std::io::stdout());
            Ok(Outcome::Ok)
        }
        Command::Man { dir } => man_pages(&dir),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::NoMatch) => ExitCode::from(1),
        Ok(Outcome::Invalid) => ExitCode::from(2),
        Err(Failure(msg)) => {
            eprintln!("loader-sim: error: {msg}");
            ExitCode::from(2)
        }
    }
}
