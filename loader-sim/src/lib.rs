//! `loader-sim`: the command-line harness over `offload-image` (contract: `CLI.md`), as a
//! library: [`run`] runs one command line and writes its output to a writer of the caller's
//! (the `loader-sim` binary passes standard output; the Python module a buffer).
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

mod aks2;
mod child;
mod cmd;
mod cuda_runtime;
mod decode;
mod gpu_names;
mod gpus;
mod images;
mod input;
mod kpack;
mod listing;
mod output;
mod packages;
mod python;
mod registration;
mod sarif;
mod scan;
mod selection;
mod stream;
mod table;
mod wheel;
mod wrapper;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Simulates how GPU offload runtimes find, select and register device images.
#[derive(Parser)]
#[command(name = "loader-sim", version, about, propagate_version = true)]
pub struct Cli {
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
    /// Which GPUs the libraries and packages under PATH serve, and how many units of each.
    Coverage(cmd::coverage::Args),
    /// The wheel-variant properties a wheel's device code backs; --check compares the
    /// wheel's declared ones (variant.json) with them.
    Variants(cmd::variants::Args),
    /// A CycloneDX 1.6 SBOM of the device code under PATH: a component per library, one per
    /// device image under it; --into-wheel adds it to a copy of a wheel (PEP 770).
    Sbom(cmd::sbom::Args),
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
pub fn tool_of_program_name(argv0: &str) -> Option<&'static str> {
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
pub fn run_tool(tool: &str, prog: &str, args: &[String]) -> ExitCode {
    ExitCode::from(tool_status(tool, prog, args))
}

/// [`run_tool`]'s exit status.
fn tool_status(tool: &str, prog: &str, args: &[String]) -> u8 {
    let result = match tool {
        "offload-bundler" => offload_dropin::bundler::run_with(prog, args, input::map_for_tool),
        _ => offload_dropin::packager::run(prog, args),
    };
    // An -input file that became shorter while read: the output holds zeros for its tail.
    if let Some(changed) = input::take_changed().into_iter().next() {
        output::stderr_line(format_args!("{prog}: error: {changed}"));
        return 1;
    }
    match result {
        Ok(()) => 0,
        Err(e) => {
            output::stderr_text(&e.report(prog));
            e.code
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
pub struct Failure {
    /// One line: what went wrong, with the file and, where known, the byte offset.
    pub message: String,
    /// What kind of failure: an [`offload_image::ErrorKind`] name (`"truncated"`,
    /// `"bad-magic"`, ...) where the library located the problem, `"usage"` for a command
    /// line that cannot be parsed, or `None`.
    pub kind: Option<&'static str>,
    /// The byte offset of the problem in the file, where the library located it.
    pub offset: Option<u64>,
}

impl Failure {
    /// A failure described by `message` alone.
    pub fn msg(message: String) -> Self {
        Failure {
            message,
            kind: None,
            offset: None,
        }
    }

    /// The kind and offset of the library error `e` (for a message that quotes it).
    #[must_use]
    pub fn at(mut self, e: &offload_image::Error) -> Self {
        self.kind = Some(e.kind().name());
        self.offset = Some(e.offset());
        self
    }

    /// A problem with `file`. When `what` is an [`offload_image::Error`], its kind and
    /// offset are kept.
    pub fn file<W: std::fmt::Display + 'static>(file: &std::path::Path, what: W) -> Self {
        let located = (&what as &dyn std::any::Any).downcast_ref::<offload_image::Error>();
        Failure {
            message: format!("{}: {what}", file.display()),
            kind: located.map(|e| e.kind().name()),
            offset: located.map(|e| e.offset()),
        }
    }
}

/// Writes `loader-sim.1` and one page per visible subcommand into `dir`.
fn man_pages(dir: &std::path::Path) -> Result<Outcome, Failure> {
    use clap::CommandFactory;
    let write = |name: &str, cmd: clap::Command| -> Result<(), Failure> {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .map_err(|e| Failure::msg(format!("cannot render the man page {name}: {e}")))?;
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

/// Runs the command line `argv` (`argv[0]` is the program name), writing what the command
/// prints to `out`. A command line that cannot be parsed is a [`Failure`] of kind
/// `"usage"` whose message is clap's (help and version requests included). Warnings and
/// progress go to the process's standard error. The drop-in tools (`offload-bundler`,
/// `offload-packager`) write to the process's standard output as LLVM's do; the program
/// names that select them are [`tool_of_program_name`]'s ([`run_tool`]).
pub fn run<I, T>(argv: I, out: &mut dyn Write) -> Result<Outcome, Failure>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(argv).map_err(|e| Failure {
        message: e.render().to_string().trim_end().to_string(),
        kind: Some("usage"),
        offset: None,
    })?;
    run_cli(cli, out)
}

/// Runs a parsed command line, writing what the command prints to `out`. An input that
/// changed while read makes the command fail naming it (whatever it found), and its output
/// stops at the change (`input`); a write into a closed pipe is a failure of kind
/// `"broken-pipe"`, which the binary ends quietly on.
pub fn run_cli(cli: Cli, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let _ = input::take_changed();
    let _ = output::take_written();
    let mut guarded = output::Guarded::new(out);
    let result = run_command(cli, &mut guarded);
    let result = match input::take_changed().into_iter().next() {
        Some(first) => Err(Failure::msg(first)),
        None => match result {
            Err(f) if guarded.broken_pipe() => Err(Failure {
                kind: Some("broken-pipe"),
                ..f
            }),
            r => r,
        },
    };
    // A command that fails after writing its output file (`select -o`; an input truncated
    // meanwhile, an error after the write) leaves no output behind. A broken pipe is no
    // failure of the output file; an output that is not a regular file (a device, a
    // link) was written through and stays.
    let written = output::take_written();
    if matches!(&result, Err(f) if f.kind != Some("broken-pipe")) {
        for path in written {
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    output::work::report();
    result
}

/// The number of threads `--jobs` gives: the number itself (at least 1), or with `None`
/// (or 0) the available parallelism of the machine (1 when it cannot be told).
pub fn jobs(requested: Option<usize>) -> usize {
    match requested {
        Some(n) if n > 0 => n,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// Writes `args` and a newline to standard error, ignoring a failure: a closed standard
/// error must not panic the program, as `eprintln!` does.
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    output::stderr_line(args);
}

/// [`run_cli`]'s command.
fn run_command(cli: Cli, out: &mut dyn Write) -> Result<Outcome, Failure> {
    match cli.command {
        Command::List(a) => cmd::list::run(&a, out),
        Command::OffloadBundler { args } => tool_outcome("offload-bundler", &args),
        Command::OffloadPackager { args } => tool_outcome("offload-packager", &args),
        Command::Prune(a) => cmd::prune::run(&a, out),
        Command::Register(a) => cmd::register::run(&a, out),
        Command::Load { lib } => cmd::register::load_child(&lib),
        Command::Select(a) => cmd::select::run(&a, out),
        Command::Doctor(a) => {
            check_spill_limit()?;
            cmd::doctor::run(&a, out)
        }
        Command::Coverage(a) => {
            check_spill_limit()?;
            cmd::coverage::run(&a, out)
        }
        Command::Variants(a) => {
            check_spill_limit()?;
            cmd::variants::run(&a, out)
        }
        Command::Sbom(a) => {
            check_spill_limit()?;
            cmd::sbom::run(&a, out)
        }
        Command::Validate(a) => cmd::validate::run(&a, out),
        Command::Wrap(a) => cmd::wrap::run(&a),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            // Into a buffer: `generate` panics when its writer fails (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, "loader-sim", &mut script);
            out.write_all(&script)
                .and_then(|()| out.flush())
                .map_err(|e| Failure::msg(format!("cannot write output: {e}")))?;
            Ok(Outcome::Ok)
        }
        Command::Man { dir } => man_pages(&dir),
    }
}

/// A drop-in tool reached through the subcommand: its own error report on standard error.
fn tool_outcome(tool: &str, args: &[String]) -> Result<Outcome, Failure> {
    match tool_status(tool, "loader-sim", args) {
        0 => Ok(Outcome::Ok),
        _ => Ok(Outcome::Invalid),
    }
}

/// Wheels spill to the temporary folder under `LOADER_SIM_SPILL_LIMIT`: a value that is not
/// a size is the caller's mistake, said once as a usage error, not a wheel reported damaged.
fn check_spill_limit() -> Result<(), Failure> {
    wheel::spill_limit().map(|_| ()).map_err(|m| Failure {
        message: m,
        kind: Some("usage"),
        offset: None,
    })
}
