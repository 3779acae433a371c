//! The README's first command and the output it shows: the command (the first
//! `cargo run --release -p loader-sim -- ...` line) prints, line for line, what the first
//! `text` block after "The first command prints:" shows, up to the `...` that ends it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The arguments of the README's first `cargo run ... loader-sim -- ARGS` command.
fn first_command(readme: &str) -> Vec<String> {
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo run ") && l.contains("-p loader-sim"))
        .expect("README.md has a `cargo run ... -p loader-sim -- ...` command");
    let (_, args) = line.split_once(" -- ").expect("`--` before the arguments");
    args.split_whitespace().map(str::to_string).collect()
}

/// The lines of the first ```text block after "The first command prints:", up to `...`.
fn shown_output(readme: &str) -> Vec<String> {
    let (_, after) = readme
        .split_once("The first command prints:")
        .expect("README.md says \"The first command prints:\"");
    let (_, block) = after.split_once("```text\n").expect("a ```text block");
    let (block, _) = block.split_once("```").expect("the block ends");
    block
        .lines()
        .take_while(|l| *l != "...")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readmes_first_command_prints_what_the_readme_shows() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let args = first_command(&readme);
    assert_eq!(args[0], "select", "{args:?}");
    let shown = shown_output(&readme);
    assert!(shown.len() >= 3, "{shown:?}");
    let out = Command::new(env!("CARGO_BIN_EXE_loader-sim"))
        .args(&args)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<&str> = printed.lines().collect();
    assert!(printed.len() >= shown.len(), "{printed:#?}");
    for (i, line) in shown.iter().enumerate() {
        assert_eq!(
            printed[i],
            line,
            "line {} of the README's sample output differs from the command's output:\n{}",
            i + 1,
            printed.join("\n")
        );
    }
}
