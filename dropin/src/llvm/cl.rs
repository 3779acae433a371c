//! The command-line syntax of LLVM's `cl` library, as `clang-offload-bundler` and
//! `clang-offload-packager` accept it.
//!
//! * An option is spelled with one or two dashes: `-type=o`, `--type=o`.
//! * A value is attached with `=` or given as the next argument (`-type o`); flags take no
//!   separate value but accept `=true|false|1|0` (any case of `true`/`false`).
//! * List options may repeat; comma-separated lists (`-targets=a,b`) are split at commas.
//! * A single-valued option or flag may be repeated; the last occurrence wins (LLVM 15
//!   and later).
//! * `--` ends option parsing; `@file` arguments are replaced by the file's contents split
//!   GNU-style (whitespace, quotes, backslash escapes), like `cl::ExpandResponseFiles`.
//! * Anything else that starts with `-` is an unknown option, and so is a positional
//!   argument of a tool that takes none.
//!
//! Errors are reported as LLVM's parser reports them: parsing goes on after an error, so
//! every unknown option is reported, each with the `Did you mean` line of
//! `LookupNearestOption` (the visible option at the least edit distance; of equals, the
//! first in LLVM's option-map order), then every required option that is missing.

use std::collections::HashMap;

/// What an option takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A boolean flag.
    Flag,
    /// One value (`cl::opt<T>`).
    Value,
    /// Any number of values (`cl::list<T>`); `comma` splits each at commas.
    List {
        /// `cl::CommaSeparated`.
        comma: bool,
    },
}

/// One option of a tool.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Name without dashes.
    pub name: &'static str,
    /// What it takes.
    pub kind: Kind,
}

/// The options every LLVM tool has besides its own (`cl`'s generic category); they are
/// suggested in `Did you mean` lines too.
const GENERIC: &[&str] = &[
    "help",
    "help-hidden",
    "help-list",
    "help-list-hidden",
    "print-all-options",
    "print-options",
    "version",
];

/// `PrintArg`: `-o` for a one-letter name, `--name` otherwise.
pub fn dashed(name: &str) -> String {
    if name.chars().count() == 1 {
        format!("-{name}")
    } else {
        format!("--{name}")
    }
}

/// `StringRef::edit_distance` with replacements allowed (Levenshtein distance).
fn edit_distance(a: &str, b: &str) -> usize {
    let a = a.as_bytes();
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == cb {
                prev
            } else {
                1 + prev.min(row[j]).min(cur)
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// `LookupNearestOption`: the suggestion for the unknown option `arg` (dashes stripped),
/// spelled as LLVM prints it (`--type=o`), or `None` for an empty `arg`.
///
/// Of options at the same distance LLVM suggests the first in its option map's order; for
/// the option sets of these tools that is the order of `xxh3_64bits(name) & 31`, found
/// against LLVM 22 (`--help` first, then `--list`, ... for the bundler).
pub fn nearest(specs: &[Spec], arg: &str) -> Option<String> {
    if arg.is_empty() {
        return None;
    }
    let (lhs, rhs) = arg.split_once('=').unwrap_or((arg, ""));
    let mut names: Vec<&str> = specs
        .iter()
        .map(|s| s.name)
        .filter(|n| *n != "h")
        .chain(GENERIC.iter().copied())
        .collect();
    names.sort_by_key(|n| {
        (
            crate::llvm::hashmap::llvm_string_hash(n.as_bytes()) & 31,
            *n,
        )
    });
    names.dedup();
    // Every option of these tools takes a value or is a `bool` (whose value is optional),
    // except the help and version printers (`cl::ValueDisallowed`).
    let disallowed = [
        "help",
        "help-hidden",
        "help-list",
        "help-list-hidden",
        "version",
    ];
    let mut best: Option<(usize, String)> = None;
    for name in names {
        let permits_value = !disallowed.contains(&name);
        let flag = if permits_value { lhs } else { arg };
        let d = edit_distance(name, flag);
        if best.as_ref().is_none_or(|(b, _)| d < *b) {
            let shown = if rhs.is_empty() || !permits_value {
                dashed(name)
            } else {
                format!("{}={rhs}", dashed(name))
            };
            best = Some((d, shown));
        }
    }
    best.map(|(_, s)| s)
}

/// The parsed command line.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    values: HashMap<&'static str, Vec<String>>,
    flags: HashMap<&'static str, bool>,
    /// Positional arguments in order.
    pub positional: Vec<String>,
}

impl Parsed {
    /// True if the flag was given (and not set to false).
    pub fn flag(&self, name: &str) -> bool {
        self.flags.get(name).copied().unwrap_or(false)
    }

    /// True if the flag or option occurred at all.
    pub fn given(&self, name: &str) -> bool {
        self.flags.contains_key(name) || self.values.contains_key(name)
    }

    /// The value of a single-valued option.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(|s| s.as_str())
    }

    /// All values of a list option, in order.
    pub fn list(&self, name: &str) -> &[String] {
        self.values.get(name).map(|v| v.as_slice()).unwrap_or(&[])
    }
}

/// Parses `args` (without the program name) against `specs`. `positional` is how many
/// positional arguments the tool takes, `required` the options that must be given. The
/// errors are LLVM's lines, without the `<program>: ` prefix, in LLVM's order; `prog`
/// names the program in them.
pub fn parse(
    specs: &[Spec],
    args: &[String],
    positional: usize,
    required: &[&str],
    prog: &str,
) -> Result<Parsed, Vec<String>> {
    let args = expand_response_files(args, 0).map_err(|e| vec![e])?;
    let mut parser = Parser {
        specs,
        args: &args,
        next: 0,
        positional,
        prog,
        errors: Vec::new(),
        out: Parsed::default(),
    };
    parser.parse_arguments();
    parser.finish(required)
}

/// `CommandLineParser::ParseCommandLineOptions`' state: the arguments, the next one to
/// read, the errors so far and what was parsed.
struct Parser<'a> {
    specs: &'a [Spec],
    args: &'a [String],
    next: usize,
    /// How many positional arguments the tool takes.
    positional: usize,
    prog: &'a str,
    errors: Vec<String>,
    out: Parsed,
}

impl Parser<'_> {
    /// The loop of `ParseCommandLineOptions` over the arguments, up to the end.
    fn parse_arguments(&mut self) {
        let args = self.args;
        let mut only_positional = false;
        while self.next < args.len() {
            let arg = &args[self.next];
            self.next += 1;
            if only_positional || !arg.starts_with('-') || arg == "-" {
                self.positional_argument(arg);
            } else if arg == "--" {
                only_positional = true;
            } else {
                self.option(arg);
            }
        }
    }

    /// A positional argument: kept, or an unknown argument for a tool that takes none.
    fn positional_argument(&mut self, arg: &str) {
        if self.positional == 0 {
            self.unknown_argument(arg);
        } else {
            self.out.positional.push(arg.to_string());
        }
    }

    /// The `Unknown command line argument` error for `arg`.
    fn unknown_argument(&mut self, arg: &str) {
        let prog = self.prog;
        self.errors.push(format!(
            "Unknown command line argument '{arg}'.  Try: '{prog} --help'"
        ));
    }

    /// An argument that starts with a dash: `LookupOption`, then `ProvideOption`; an
    /// unknown option gets the `Did you mean` line of [`nearest`].
    fn option(&mut self, arg: &str) {
        let body = arg
            .strip_prefix("--")
            .unwrap_or_else(|| arg.strip_prefix('-').unwrap_or(arg));
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        let Some(spec) = self.specs.iter().find(|s| s.name == name) else {
            self.unknown_argument(arg);
            if let Some(n) = nearest(self.specs, body) {
                self.errors.push(format!("Did you mean '{n}'?"));
            }
            return;
        };
        match spec.kind {
            Kind::Flag => self.flag(spec, inline),
            Kind::Value | Kind::List { .. } => self.value(spec, inline),
        }
    }

    /// `parser<bool>::parse`: a flag, with an optional `=true|false|1|0`; the help and
    /// version printers take no value at all.
    fn flag(&mut self, spec: &Spec, inline: Option<&str>) {
        let shown = dashed(spec.name);
        let printer = matches!(
            spec.name,
            "help" | "help-list" | "help-hidden" | "help-list-hidden" | "version"
        );
        let v = match inline {
            Some(v) if printer => {
                self.errors.push(format!(
                    "for the {shown} option: does not allow a value! '{v}' specified."
                ));
                return;
            }
            None => true,
            Some("true" | "TRUE" | "True" | "1") => true,
            Some("false" | "FALSE" | "False" | "0") => false,
            Some(v) => {
                self.errors.push(format!(
                    "for the {shown} option: '{v}' is invalid value for boolean argument! Try 0 or 1"
                ));
                return;
            }
        };
        self.out.flags.insert(spec.name, v);
    }

    /// `ProvideOption` for an option that takes a value (attached, or the next argument),
    /// then `addOccurrence`: a single value replaces the last one, a list grows (split at
    /// commas for `cl::CommaSeparated`).
    fn value(&mut self, spec: &Spec, inline: Option<&str>) {
        let value = match inline {
            Some(v) => v.to_string(),
            None => {
                let Some(v) = self.args.get(self.next) else {
                    let shown = dashed(spec.name);
                    self.errors
                        .push(format!("for the {shown} option: requires a value!"));
                    return;
                };
                self.next += 1;
                v.clone()
            }
        };
        let slot = self.out.values.entry(spec.name).or_default();
        match spec.kind {
            Kind::Value => {
                slot.clear();
                slot.push(value);
            }
            Kind::List { comma: true } => {
                slot.extend(value.split(',').map(str::to_string));
            }
            _ => slot.push(value),
        }
    }

    /// The checks after the arguments: too many positional arguments, then every
    /// `required` option that is missing (unless a help or version printer exits first).
    fn finish(mut self, required: &[&str]) -> Result<Parsed, Vec<String>> {
        let (positional, prog) = (self.positional, self.prog);
        if self.out.positional.len() > positional && positional > 0 {
            self.errors.push(format!(
                "Too many positional arguments specified!\nCan specify at most {positional} positional arguments: See: {prog} --help"
            ));
        }
        // `--help` and `--version` print and exit while the command line is parsed, before
        // the required options are checked.
        let exits = [
            "help",
            "help-list",
            "help-hidden",
            "help-list-hidden",
            "h",
            "version",
        ]
        .iter()
        .any(|f| self.out.flag(f));
        for r in required.iter().filter(|_| !exits) {
            if !self.out.given(r) {
                self.errors.push(format!(
                    "for the {} option: must be specified at least once!",
                    dashed(r)
                ));
            }
        }
        if self.errors.is_empty() {
            Ok(self.out)
        } else {
            Err(self.errors)
        }
    }
}

/// Parses an unsigned value the way `cl::parser<unsigned>` does (`getAsInteger` with radix
/// 0: `0x` hex, `0b` binary, `0o` or a leading `0` octal, else decimal).
pub fn parse_unsigned(s: &str) -> Option<u64> {
    let (digits, radix) = if let Some(r) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (r, 16)
    } else if let Some(r) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        (r, 2)
    } else if let Some(r) = s.strip_prefix("0o") {
        (r, 8)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || digits.starts_with('+') || digits.starts_with('-') {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Parses a signed value like `cl::parser<int>`.
pub fn parse_signed(s: &str) -> Option<i64> {
    match s.strip_prefix('-') {
        Some(rest) => parse_unsigned(rest)
            .and_then(|v| i64::try_from(v).ok())
            .map(|v| -v),
        None => parse_unsigned(s).and_then(|v| i64::try_from(v).ok()),
    }
}

/// Replaces `@file` arguments by the file's arguments (recursively, GNU quoting rules).
fn expand_response_files(args: &[String], depth: usize) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        match a.strip_prefix('@') {
            Some(path) if !path.is_empty() => {
                if depth > 20 {
                    return Err(format!("recursive expansion of response file '{path}'"));
                }
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read response file '{path}': {e}"))?;
                out.extend(expand_response_files(&tokenize_gnu(&text), depth + 1)?);
            }
            _ => out.push(a.clone()),
        }
    }
    Ok(out)
}

/// `cl::TokenizeGNUCommandLine`: whitespace separates arguments; single quotes take
/// everything literally; double quotes allow backslash escapes; a backslash outside quotes
/// escapes the next character.
fn tokenize_gnu(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_token = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_token {
                    out.push(std::mem::take(&mut cur));
                    in_token = false;
                }
            }
            '\\' => {
                in_token = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '\'' | '"' => {
                in_token = true;
                while let Some(n) = chars.next() {
                    if n == c {
                        break;
                    }
                    if c == '"' && n == '\\' {
                        if let Some(e) = chars.next() {
                            cur.push(e);
                        }
                    } else {
                        cur.push(n);
                    }
                }
            }
            c => {
                in_token = true;
                cur.push(c);
            }
        }
    }
    if in_token {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[Spec] = &[
        Spec {
            name: "type",
            kind: Kind::Value,
        },
        Spec {
            name: "targets",
            kind: Kind::List { comma: true },
        },
        Spec {
            name: "input",
            kind: Kind::List { comma: false },
        },
        Spec {
            name: "unbundle",
            kind: Kind::Flag,
        },
    ];

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn llvm_spellings() {
        let parse = |s: &[Spec], a: &[String]| parse(s, a, 1, &[], "tool");
        let p = parse(
            SPECS,
            &args(&[
                "--type=o",
                "-targets=a,b",
                "-input",
                "x,y",
                "--input=z",
                "-unbundle",
            ]),
        )
        .unwrap();
        assert_eq!(p.value("type"), Some("o"));
        assert_eq!(p.list("targets"), ["a", "b"]);
        assert_eq!(p.list("input"), ["x,y", "z"]);
        assert!(p.flag("unbundle"));
        let p = parse(SPECS, &args(&["-unbundle=false", "--", "-x"])).unwrap();
        assert!(!p.flag("unbundle") && p.given("unbundle"));
        assert_eq!(p.positional, ["-x"]);
        let p = parse(SPECS, &args(&["-type=o", "-type=bc"])).unwrap();
        assert_eq!(p.value("type"), Some("bc"));
        assert_eq!(
            parse(SPECS, &args(&["-nope", "-typ=x"])).unwrap_err(),
            [
                "Unknown command line argument '-nope'.  Try: 'tool --help'",
                "Did you mean '--type'?",
                "Unknown command line argument '-typ=x'.  Try: 'tool --help'",
                "Did you mean '--type=x'?",
            ]
        );
        assert!(parse(SPECS, &args(&["-unbundle=maybe"])).is_err());
    }

    #[test]
    fn numbers_like_get_as_integer() {
        assert_eq!(parse_unsigned("4096"), Some(4096));
        assert_eq!(parse_unsigned("0x1000"), Some(4096));
        assert_eq!(parse_unsigned("010"), Some(8));
        assert_eq!(parse_unsigned("0"), Some(0));
        assert_eq!(parse_unsigned("-1"), None);
        assert_eq!(parse_signed("-3"), Some(-3));
        assert_eq!(
            tokenize_gnu("a 'b c' \"d\\\"e\" f\\ g"),
            ["a", "b c", "d\"e", "f g"]
        );
    }
}
