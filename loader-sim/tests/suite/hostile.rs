//! A hostile world around the bytes (issue 38): inputs truncated while they are read,
//! FIFOs and devices given as files, output into a closed pipe, interrupted and redirected
//! `prune` outputs. Each test asserts the exit status and the message.

#![cfg(unix)]

use crate::common;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use common::{big_bundle, corpus, ours, TempDir};

/// Waits for `child` at most `limit`; kills it and fails the test if it is still running.
fn wait_for(child: &mut std::process::Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = child.wait().unwrap();
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_end(&mut stdout).unwrap();
    }
    if let Some(mut e) = child.stderr.take() {
        e.read_to_end(&mut stderr).unwrap();
    }
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Runs `args` on a fresh copy of `data` at `path` and truncates the copy to its first
/// page `delay` after the start. Returns the output.
fn race(path: &Path, data: &[u8], args: &[&str], delay: Duration) -> Output {
    std::fs::write(path, data).unwrap();
    // The outputs are a few lines: the pipes do not fill.
    let mut child = Command::new(ours())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(4096)
        .unwrap();
    wait_for(&mut child, Duration::from_secs(120), &args.join(" "))
}

/// The status was not a signal, and an error names the file.
fn assert_no_signal(o: &Output, file: &Path, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.signal(),
        None,
        "{what}: killed by a signal ({:?}); stderr: {err}",
        o.status
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
    let code = o.status.code().unwrap();
    assert!(matches!(code, 0..=2), "{what}: status {code}: {err}");
    if code == 2 {
        // `validate` reports on standard output.
        let all = err.clone() + String::from_utf8_lossy(&o.stdout);
        assert!(
            all.contains(&file.display().to_string()),
            "{what}: the error does not name the file: {err}"
        );
    }
}

/// Whether the output says the input shrank or changed while it was read.
fn says_changed(o: &Output) -> bool {
    let err = String::from_utf8_lossy(&o.stderr);
    err.contains("became shorter while it was read") || err.contains("changed while it was read")
}

/// `list` on a 48 MiB bundle truncated 0–115 ms into the run, 24 times: never a signal
/// (before: SIGBUS, exit 135, in every run that truncated while hashing); where the
/// truncation came while the images were read, exit 2 and an error that names the file
/// and says it became shorter while read.
#[test]
fn list_of_a_file_truncated_while_read_is_an_error_never_a_signal() {
    let dir = TempDir::new("hostile-trunc");
    let data = big_bundle(&["gfx90a", "gfx906", "gfx1100"], 16 << 20, 1);
    let file = dir.path("lib.bundle");
    let name = file.to_str().unwrap();
    let mut changed = 0;
    for run in 0..24u64 {
        let o = race(
            &file,
            &data,
            &["list", name],
            Duration::from_millis(run * 5),
        );
        assert_no_signal(&o, &file, &format!("list, run {run}"));
        if says_changed(&o) {
            assert_eq!(o.status.code(), Some(2));
            changed += 1;
        }
    }
    eprintln!("list: {changed} of 24 runs saw the truncation while reading");
    assert!(changed > 0, "no run truncated the file while it was read");
}

/// The same race for `select`, `validate`, `doctor` and `prune`: never a signal, and an
/// error that names the file when the status is 2.
#[test]
fn other_commands_on_a_file_truncated_while_read_never_die_of_a_signal() {
    let dir = TempDir::new("hostile-trunc-cmds");
    let data = big_bundle(&["gfx90a", "gfx906"], 24 << 20, 2);
    let file = dir.path("lib.bundle");
    let out = dir.path("pruned.bundle");
    let (name, out) = (file.to_str().unwrap(), out.to_str().unwrap());
    let commands: [&[&str]; 4] = [
        &["select", name, "--target", "gfx90a", "-o", out],
        &["validate", name],
        &["doctor", name, "--target", "gfx90a"],
        &["prune", name, "--keep", "gfx90a", "-o", out],
    ];
    for args in commands {
        for run in 0..6u64 {
            let o = race(&file, &data, args, Duration::from_millis(run * 8));
            assert_no_signal(&o, &file, &format!("{}, run {run}", args[0]));
        }
    }
}

/// A FIFO or a device named as FILE is refused at once (before: `list`, `select`,
/// `validate` and `prune` hung on a FIFO): exit 2, "FILE: not a regular file (a FIFO)"
/// (`validate`: an error finding of FILE).
#[test]
fn fifos_and_devices_are_refused_at_once() {
    let dir = TempDir::new("hostile-fifo");
    let fifo = dir.path("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let out = dir.path("out");
    for (file, says) in [
        (fifo.clone(), "not a regular file (a FIFO)"),
        (
            PathBuf::from("/dev/zero"),
            "not a regular file (a character device)",
        ),
    ] {
        let name = file.to_str().unwrap();
        let commands: [&[&str]; 4] = [
            &["list", name],
            &["select", name, "--target", "gfx90a"],
            &["validate", name],
            &[
                "prune",
                name,
                "--keep",
                "gfx90a",
                "-o",
                out.to_str().unwrap(),
            ],
        ];
        for args in commands {
            let mut child = Command::new(ours())
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let o = wait_for(&mut child, Duration::from_secs(20), &args.join(" "));
            // `validate` reports it as a finding of the file, on standard output.
            let text = String::from_utf8_lossy(&o.stderr) + String::from_utf8_lossy(&o.stdout);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {text}");
            assert!(
                text.contains(name) && text.contains(says),
                "{args:?}: {text}"
            );
        }
    }
    assert!(!out.exists());
}

/// Runs `args` with standard output a pipe whose reading end is already closed.
fn into_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = Command::new(ours())
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&mut child, Duration::from_secs(60), &args.join(" "))
}

/// Output into a closed pipe (`loader-sim completions bash | head -c 10`, `list X | head`)
/// ends quietly: exit 0, nothing on standard error (before: a panic).
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let exe = corpus("driver/hip_nonrdc.exe");
    let exe = exe.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["completions", "bash"],
        &["list", exe],
        &["list", exe, "--json"],
        &["select", exe, "--target", "gfx90a:xnack+", "--explain"],
        &["validate", exe],
    ];
    for args in commands {
        let o = into_closed_pipe(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {:?} {err}", o.status);
        assert_eq!(err, "", "{args:?}");
    }
}

fn prune_to(out: &Path) -> Output {
    let exe = corpus("driver/hip_nonrdc.exe");
    Command::new(ours())
        .arg("prune")
        .arg(exe)
        .args(["--keep", "gfx90a:xnack+", "-o"])
        .arg(out)
        .output()
        .unwrap()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `prune -o OUT` where OUT is not a regular file: a symbolic link to a device, a symbolic
/// link to a regular file, a FIFO. Each is written through and stays what it was (before:
/// `-o /dev/stdout` as root replaced the link with a regular file); no temporary file is
/// left.
#[test]
fn prune_writes_through_an_output_that_is_not_a_regular_file() {
    let dir = TempDir::new("hostile-prune-out");
    let root = dir.path("");
    // A link to /dev/null.
    let null = dir.path("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    let o = prune_to(&null);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read_link(&null).unwrap(), Path::new("/dev/null"));
    // A link to a regular file: the file gets the result, the link stays a link.
    let victim = dir.write("victim", b"old contents");
    let link = dir.path("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let o = prune_to(&link);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let written = std::fs::read(&victim).unwrap();
    assert_eq!(
        &written[..4],
        b"\x7fELF",
        "the link's target holds the result"
    );
    // A FIFO, with a reader.
    let fifo = dir.path("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let o = prune_to(&fifo);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let through = reader.join().unwrap();
    assert_eq!(through, written, "the FIFO got the same bytes");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(names(&root), ["fifo", "link", "null", "victim"]);
}

/// The temporary file is created exclusively under an unpredictable name: links planted
/// at the names the old scheme used (`.OUT.prune-PID.tmp`, for every PID up to the next
/// few thousand) are not followed, their target keeps its bytes, and the planted links
/// are still there afterwards.
#[test]
fn prune_does_not_follow_a_planted_link_at_a_temporary_name() {
    let dir = TempDir::new("hostile-prune-tmp");
    let victim = dir.write("victim", b"keep me");
    let out = dir.path("out.exe");
    // The PIDs the next child is likely to get.
    let next = std::process::id();
    let planted: Vec<PathBuf> = (next..next + 2000)
        .map(|pid| dir.path(&format!(".out.exe.prune-{pid}.tmp")))
        .collect();
    for p in &planted {
        std::os::unix::fs::symlink(&victim, p).unwrap();
    }
    let o = prune_to(&out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    assert!(planted.iter().all(|p| std::fs::read_link(p).is_ok()));
    assert_eq!(&std::fs::read(&out).unwrap()[..4], b"\x7fELF");
    assert_eq!(names(&dir.path("")).len(), 2002, "nothing but OUT added");
}

/// `prune` killed with SIGTERM or SIGINT while it writes a 64 MiB result leaves no
/// temporary file behind (before: up to the output's size was left), and dies of the
/// signal as before.
#[test]
fn prune_interrupted_leaves_no_temporary_file() {
    let dir = TempDir::new("hostile-prune-kill");
    let data = big_bundle(&["gfx90a", "gfx906"], 64 << 20, 3);
    let file = dir.write("in.bundle", &data);
    let out = dir.path("out.bundle");
    let mut killed = 0;
    for run in 0..10u64 {
        let _ = std::fs::remove_file(&out);
        let mut child = Command::new(ours())
            .arg("prune")
            .arg(&file)
            .args(["--keep", "gfx90a", "-o"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // 0 to 162 ms: some kills land while prune writes, however fast it runs here.
        std::thread::sleep(Duration::from_millis(run * run * 2));
        let sig = if run % 2 == 0 { "-TERM" } else { "-INT" };
        let _ = Command::new("kill")
            .arg(sig)
            .arg(child.id().to_string())
            .status();
        let o = wait_for(&mut child, Duration::from_secs(120), "prune");
        let status: ExitStatus = o.status;
        if let Some(s) = status.signal() {
            assert!(s == 15 || s == 2, "{status:?}");
            killed += 1;
        } else {
            assert_eq!(
                status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let left: Vec<String> = names(&dir.path(""))
            .into_iter()
            .filter(|n| n.contains("prune"))
            .collect();
        assert!(left.is_empty(), "run {run}: left behind: {left:?}");
    }
    eprintln!("prune: {killed} of 10 runs killed while running");
    assert!(killed > 0);
}

/// `dir/d/d/.../d` (`n` levels) under `root/name`; its deepest directory.
fn chain(root: &Path, name: &str, n: usize) -> PathBuf {
    let mut p = root.join(name);
    for _ in 0..n {
        p.push("d");
    }
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// `doctor` on what gives nothing to read: a FIFO, a device, a tree 3,000 levels deep whose
/// only library lies deeper than a path can name (before: "0 files scanned", exit 0). Each
/// is an error naming what could not be read, exit 2; an unreadable part of a tree that
/// has readable files is a warning, and the files are judged.
#[test]
fn doctor_says_what_it_could_not_read() {
    let dir = TempDir::new("hostile-doctor");
    let fifo = dir.path("pipe");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (path, says) in [
        (
            fifo.clone(),
            "not a regular file or a directory (a FIFO): nothing to read",
        ),
        (
            PathBuf::from("/dev/null"),
            "not a regular file or a directory (a character device): nothing to read",
        ),
    ] {
        let mut child = Command::new(ours())
            .arg("doctor")
            .arg(&path)
            .args(["--target", "gfx90a"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = wait_for(&mut child, Duration::from_secs(20), "doctor");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(
            err.trim_end(),
            format!("loader-sim: error: {}: {says}", path.display())
        );
    }
    // 3,000 levels, built by moving chains of 1,000 into each other (no path over
    // PATH_MAX is ever named).
    let root = dir.path("");
    let bottom = chain(&root, "c1", 1000);
    std::fs::copy(corpus("bundles/hip_6arch.bundle"), bottom.join("x.bundle")).unwrap();
    let b2 = chain(&root, "c2", 1000);
    std::fs::rename(root.join("c1"), b2.join("c1")).unwrap();
    let b3 = chain(&root, "c3", 1000);
    std::fs::rename(root.join("c2"), b3.join("c2")).unwrap();
    let deep = root.join("c3");
    let o = Command::new(ours())
        .arg("doctor")
        .arg(&deep)
        .args(["--target", "gfx90a"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let last = err.lines().last().unwrap();
    assert!(
        last.starts_with(&format!(
            "loader-sim: error: {}: nothing under it could be read (1 directory not read; first: ",
            deep.display()
        )),
        "{last}"
    );
    assert!(last.contains("cannot read the directory"), "{last}");
    // With a library it can read, the rest is a warning and the library is judged.
    std::fs::copy(corpus("bundles/hip_6arch.bundle"), deep.join("y.bundle")).unwrap();
    let o = Command::new(ours())
        .arg("doctor")
        .arg(&deep)
        .args(["--target", "gfx90a:xnack-", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.starts_with("loader-sim: warning: ") && err.contains("cannot read the directory"));
    let summary = common::json_lines(&o.stdout).pop().unwrap();
    assert_eq!(summary["files_scanned"], 1);
}

/// An `ar` archive in BSD layout: one member whose name (`#1/LEN`) is the first LEN bytes
/// of its data.
fn bsd_archive(name: &str, body: &[u8]) -> Vec<u8> {
    let padded = name.len().next_multiple_of(8);
    let mut out = b"!<arch>\n".to_vec();
    let header = format!(
        "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
        format!("#1/{padded}"),
        0,
        0,
        0,
        "100644",
        padded + body.len()
    );
    assert_eq!(header.len(), 60);
    out.extend(header.as_bytes());
    out.extend(name.as_bytes());
    out.resize(out.len() + padded - name.len(), 0);
    out.extend(body);
    if out.len() % 2 == 1 {
        out.push(b'\n');
    }
    out
}

/// `prune` of a BSD archive with device code is refused, as docs/CLI.md says (before: an
/// identical copy and exit 0, its members' code not seen): exit 2, the member's header
/// offset, OUT not written. `list` reads the same archive.
#[test]
fn prune_refuses_a_bsd_archive() {
    let dir = TempDir::new("hostile-bsd");
    let object = std::fs::read(corpus("driver/hip_nonrdc.o")).unwrap();
    let a = dir.write("libb.a", &bsd_archive("hip_nonrdc.o", &object));
    let list = Command::new(ours()).arg("list").arg(&a).output().unwrap();
    assert_eq!(list.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("member hip_nonrdc.o / section .hip_fatbin")
    );
    let out = dir.path("out.a");
    let o = Command::new(ours())
        .arg("prune")
        .arg(&a)
        .args(["--keep", "gfx90a:xnack+", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "loader-sim: error: {}: BSD archives are not pruned, at byte 8",
            a.display()
        )
    );
    assert!(!out.exists());
}

/// ELF section-table errors name the field at fault (before: "at byte 0"): `e_shoff` of a
/// table past the end, `e_shentsize` of the wrong size, `e_shstrndx` out of range, the
/// string table's `sh_offset`, a section's `sh_offset` and `sh_name`.
#[test]
fn elf_section_table_errors_give_the_fields_offset() {
    let dir = TempDir::new("hostile-elf");
    let good = std::fs::read(corpus("driver/hip_nonrdc.o")).unwrap();
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
    let shoff = u64::from_le_bytes(good[0x28..0x30].try_into().unwrap()) as usize;
    let strndx = u16_at(&good, 0x3E);
    let put = |at: usize, bytes: &[u8]| {
        let mut b = good.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    };
    let far = (1u64 << 40).to_le_bytes();
    let cases = [
        (
            put(0x28, &(good.len() as u64).to_le_bytes()),
            "ELF section header table is malformed",
            0x28,
        ),
        (
            put(0x3A, &63u16.to_le_bytes()),
            "ELF section header table is malformed",
            0x3A,
        ),
        (
            put(0x3E, &999u16.to_le_bytes()),
            "ELF section header table is malformed",
            0x3E,
        ),
        (
            put(shoff + strndx * 64 + 0x18, &far),
            "ELF section name is outside the string table",
            shoff + strndx * 64 + 0x18,
        ),
        (
            put(shoff + 3 * 64 + 0x18, &far),
            "ELF section contents lie outside the file",
            shoff + 3 * 64 + 0x18,
        ),
        (
            put(shoff + 3 * 64, &(1u32 << 30).to_le_bytes()),
            "ELF section name is outside the string table",
            shoff + 3 * 64,
        ),
    ];
    for (i, (bytes, what, at)) in cases.iter().enumerate() {
        let f = dir.write(&format!("case{i}.o"), bytes);
        let o = Command::new(ours()).arg("list").arg(&f).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "case {i}: {err}");
        let want = format!("{what}, at byte {at}");
        assert!(
            err.lines().next().is_some_and(|l| l.ends_with(&want)),
            "case {i}: want {want}: {err}"
        );
    }
}
