//! docs/CLI.md is the command line's reference: every command `loader-sim --help` lists has
//! its section, and every option of its `--help` is named there. Shell completions and
//! man pages are generated for every command.

use std::process::Command;

fn loader_sim(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_loader-sim"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The commands of `loader-sim --help`.
fn commands() -> Vec<String> {
    let help = loader_sim(&["--help"]);
    help.split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// The section of docs/CLI.md whose `## ` heading names `` `command` ``.
fn section<'a>(doc: &'a str, command: &str) -> Option<&'a str> {
    let tag = format!("`{command}`");
    doc.split("\n## ")
        .find(|s| s.lines().next().is_some_and(|h| h.contains(&tag)))
}

#[test]
fn cli_md_names_every_command_and_option_of_the_help() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/CLI.md"),
    )
    .unwrap();
    let commands = commands();
    assert!(commands.len() >= 10, "{commands:?}");
    let mut missing = Vec::new();
    for c in &commands {
        let Some(text) = section(&doc, c) else {
            missing.push(format!("no `## ` section for `{c}`"));
            continue;
        };
        // The drop-in tools take LLVM's own command line (their --help is LLVM's).
        if c.starts_with("offload-") {
            continue;
        }
        let help = loader_sim(&[c, "--help"]);
        for word in help.split_whitespace() {
            let opt = word.trim_end_matches([',', ')', '.', ';']);
            if opt.starts_with("--") && opt.len() > 2 && !matches!(opt, "--help" | "--version") {
                let opt = opt.split(['=', '<', '[']).next().unwrap();
                if !text.contains(opt) {
                    missing.push(format!("`{c} {opt}` is not in its section"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/CLI.md lags the --help:\n{}",
        missing.join("\n")
    );
}

#[test]
fn completions_and_man_pages_cover_every_command() {
    let commands = commands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = loader_sim(&["completions", shell]);
        for c in &commands {
            assert!(script.contains(c.as_str()), "{shell} completion lacks {c}");
        }
    }
    let dir = std::env::temp_dir().join(format!("loader-sim-man-{}", std::process::id()));
    loader_sim(&["man", dir.to_str().unwrap()]);
    for c in &commands {
        let page = std::fs::read_to_string(dir.join(format!("loader-sim-{c}.1"))).unwrap();
        assert!(
            page.starts_with(".ie") || page.contains(".TH"),
            "{c}: not a man page"
        );
    }
    let main = std::fs::read_to_string(dir.join("loader-sim.1")).unwrap();
    assert!(main.contains("validate") && main.contains("doctor"));
    let _ = std::fs::remove_dir_all(&dir);
}
