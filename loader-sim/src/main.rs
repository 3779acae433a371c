//! The `loader-sim` binary: the drop-in tools by program name, then the commands of the
//! library ([`loader_sim::run`]) writing to standard output.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use loader_sim::{run_tool, tool_of_program_name, Outcome};

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
    let cli = <loader_sim::Cli as clap::Parser>::parse();
    let stdout = std::io::stdout();
    match loader_sim::run_cli(cli, &mut stdout.lock()) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::NoMatch) => ExitCode::from(1),
        Ok(Outcome::Invalid) => ExitCode::from(2),
        Err(f) => {
            eprintln!("loader-sim: error: {}", f.message);
            ExitCode::from(2)
        }
    }
}
