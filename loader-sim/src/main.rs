//! The `loader-sim` binary: the drop-in tools by program name, then the commands of the
//! library ([`loader_sim::run`]) writing to standard output.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use loader_sim::{run_tool, tool_of_program_name, Outcome};

fn main() -> ExitCode {
    // `args_os`: a path that is not UTF-8 is an argument like any other (clap decides what
    // each argument may be); `args` would panic on it.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let argv0 = argv
        .first()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_else(|| "loader-sim".to_string());
    // The drop-in tools take LLVM's command lines, which are UTF-8.
    let tool_args = |from: usize| -> Option<Vec<String>> {
        argv.get(from..)
            .unwrap_or(&[])
            .iter()
            .map(|a| a.to_str().map(str::to_string))
            .collect()
    };
    let tool = tool_of_program_name(&argv0).map(|t| (t, 1)).or_else(|| {
        match argv.get(1).and_then(|a| a.to_str()) {
            Some(t @ ("offload-bundler" | "offload-packager")) => Some((
                if t == "offload-bundler" {
                    "offload-bundler"
                } else {
                    "offload-packager"
                },
                2,
            )),
            _ => None,
        }
    });
    if let Some((tool, from)) = tool {
        let prog = if from == 1 {
            argv0.rsplit('/').next().unwrap_or(&argv0).to_string()
        } else {
            "loader-sim".to_string()
        };
        let Some(args) = tool_args(from) else {
            loader_sim::stderr_line(format_args!(
                "{prog}: error: an argument is not valid UTF-8"
            ));
            return ExitCode::from(1);
        };
        return run_tool(tool, &prog, &args);
    }
    let cli = <loader_sim::Cli as clap::Parser>::parse_from(argv);
    let stdout = std::io::stdout();
    match loader_sim::run_cli(cli, &mut stdout.lock()) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::NoMatch) => ExitCode::from(1),
        Ok(Outcome::Invalid) => ExitCode::from(2),
        // The reader of the output went away (`loader-sim list X | head`): nothing to say
        // to anyone, as `cat` or `grep` would.
        Err(f) if f.kind == Some("broken-pipe") => ExitCode::SUCCESS,
        Err(f) => {
            loader_sim::stderr_line(format_args!("loader-sim: error: {}", f.message));
            ExitCode::from(2)
        }
    }
}
