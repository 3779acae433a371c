//! Child processes under bounds (issue 43): the interpreter probe of `doctor --python` and
//! the loader process of `register --load` run in a process group of their own, with a
//! time limit and a cap on what they print. On either, the group is killed (SIGKILL: the
//! child and what it forked), the child reaped, and the caller gets an error that says
//! which bound it was, never a hang or an allocation of whatever the child printed.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `LOADER_SIM_CHILD_TIMEOUT`: seconds (a decimal number) a child may run, instead of the
/// caller's default.
pub const TIMEOUT_VAR: &str = "LOADER_SIM_CHILD_TIMEOUT";

/// The time limit: `LOADER_SIM_CHILD_TIMEOUT` when set (an error names a value that is
/// not a positive number of seconds), else `default`.
pub fn time_limit(default: Duration) -> Result<Duration, String> {
    match std::env::var_os(TIMEOUT_VAR) {
        None => Ok(default),
        Some(v) => {
            let text = v.to_string_lossy();
            text.trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| format!("{TIMEOUT_VAR}={text}: not a positive number of seconds"))
        }
    }
}

/// What a bounded child did.
pub struct Finished {
    /// Its exit status (a signal that ended it included).
    pub status: ExitStatus,
    /// Its standard output, at most the cap.
    pub stdout: Vec<u8>,
    /// Its standard error, at most the cap.
    pub stderr: Vec<u8>,
}

/// Why a bounded child was stopped.
pub enum Stopped {
    /// It ran past the time limit.
    TimedOut(Duration),
    /// It printed more than the cap on one stream (`"standard output"`, ...).
    Flooded(&'static str, usize),
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::TimedOut(d) => write!(
                f,
                "it did not finish within {} s and was killed (set {TIMEOUT_VAR} to allow more)",
                d.as_secs_f64()
            ),
            Stopped::Flooded(what, cap) => {
                write!(
                    f,
                    "it wrote more than {cap} bytes to its {what} and was killed"
                )
            }
        }
    }
}

/// Runs `cmd` (standard input closed, both outputs piped) in a process group of its own,
/// for at most `limit`, reading at most `cap` bytes of each output. `Ok(Err(_))` when it was
/// stopped; `Err` when it could not start.
pub fn run(
    cmd: &mut Command,
    limit: Duration,
    cap: usize,
) -> std::io::Result<Result<Finished, Stopped>> {
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel::<(usize, Vec<u8>, bool)>();
    let streams: [(usize, Option<Box<dyn Read + Send>>); 2] = [
        (
            0,
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
        (
            1,
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
    ];
    for (which, stream) in streams {
        let Some(mut stream) = stream else { continue };
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 8192];
            let flooded = loop {
                match stream.read(&mut buf) {
                    Ok(0) => break false,
                    Ok(n) => {
                        if got.len() + n > cap {
                            break true;
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break false,
                }
            };
            if flooded {
                loader_sim_os::kill_process_group(pid);
            }
            let _ = tx.send((which, got, flooded));
        });
    }
    drop(tx);
    let start = Instant::now();
    let mut outputs: [Option<Vec<u8>>; 2] = [None, None];
    let mut stopped = None;
    let status = loop {
        while let Ok((which, got, flooded)) = rx.try_recv() {
            if flooded && stopped.is_none() {
                let what = if which == 0 {
                    "standard output"
                } else {
                    "standard error"
                };
                stopped = Some(Stopped::Flooded(what, cap));
            }
            if let Some(slot) = outputs.get_mut(which) {
                *slot = Some(got);
            }
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() >= limit && stopped.is_none() {
            stopped = Some(Stopped::TimedOut(limit));
            loader_sim_os::kill_process_group(pid);
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Whatever the child forked into its group goes with it; the outputs end when the last
    // writer is gone. A grandchild that left the group may hold them open: wait a moment,
    // then leave its reader behind.
    loader_sim_os::kill_process_group(pid);
    let deadline = Instant::now() + Duration::from_secs(2);
    while outputs.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((which, got, flooded)) => {
                if flooded && stopped.is_none() {
                    let what = if which == 0 {
                        "standard output"
                    } else {
                        "standard error"
                    };
                    stopped = Some(Stopped::Flooded(what, cap));
                }
                if let Some(slot) = outputs.get_mut(which) {
                    *slot = Some(got);
                }
            }
            Err(_) => break,
        }
    }
    if let Some(s) = stopped {
        return Ok(Err(s));
    }
    let [stdout, stderr] = outputs;
    Ok(Ok(Finished {
        status,
        stdout: stdout.unwrap_or_default(),
        stderr: stderr.unwrap_or_default(),
    }))
}

/// How a child ended, in words: `exit status N`, or `killed by signal N (SIGSEGV)`.
pub fn describe(status: &ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                1 => " (SIGHUP)",
                2 => " (SIGINT)",
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                13 => " (SIGPIPE)",
                15 => " (SIGTERM)",
                _ => "",
            };
            return format!("killed by signal {sig}{name}");
        }
    }
    match status.code() {
        Some(c) => format!("exit status {c}"),
        None => status.to_string(),
    }
}
