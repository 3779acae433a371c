//! More of a hostile world (issue 38): containers after a bare NVIDIA fatbinary, damaged
//! fatbinary sizes, `.kpack` archives read by their table of contents, wheels with
//! overlapping zip entries and a cap on what they spill, `select -o` that fails after it
//! began writing, a closed standard error. Each test asserts the exit status and the
//! message.

#![cfg(unix)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{corpus, loader_sim, TempDir};

fn nvfatbin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/nvfatbin/files")
        .join(name)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The rows of `list`'s table: (container, unit, format, offset).
fn table_rows(stdout: &str) -> Vec<(String, String, String, String)> {
    stdout
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                f[1].to_string(),
                f[2].to_string(),
                f[5].to_string(),
            )
        })
        .collect()
}

/// A bare fatbinary (1,696 bytes, two entries) and then a bundle, in one file.
fn fatbin_then_bundle() -> (Vec<u8>, usize) {
    let mut data = std::fs::read(nvfatbin("device_c.fatbin")).unwrap();
    let at = data.len();
    data.extend(std::fs::read(corpus("bundles/hip_3field.bundle")).unwrap());
    (data, at)
}

#[test]
fn a_bundle_after_a_bare_fatbinary_is_found() {
    let dir = TempDir::new("fatbin-then-bundle");
    let (data, at) = fatbin_then_bundle();
    let file = dir.write("fb_bundle.bin", &data);
    let o = loader_sim(&["list".as_ref(), file.as_os_str()]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stderr.contains("neither padding"), "{stderr}");
    let rows = table_rows(&stdout);
    let fatbin: Vec<_> = rows.iter().filter(|r| r.1 == "0").collect();
    let bundle: Vec<_> = rows.iter().filter(|r| r.1 == "1").collect();
    assert_eq!(fatbin.len(), 2, "{stdout}");
    assert!(
        fatbin.iter().all(|r| r.2.starts_with("nvidia-fatbin")),
        "{stdout}"
    );
    assert!(!bundle.is_empty(), "{stdout}");
    for r in &bundle {
        assert_eq!(r.2, "clang-offload-bundle", "{stdout}");
        assert!(r.3.parse::<usize>().unwrap() > at, "{stdout}");
    }
    // And the other way round: a fatbinary after a bundle.
    let mut rev = std::fs::read(corpus("bundles/hip_3field.bundle")).unwrap();
    rev.extend(std::fs::read(nvfatbin("device_c.fatbin")).unwrap());
    let file = dir.write("bundle_fb.bin", &rev);
    let o = loader_sim(&["list".as_ref(), file.as_os_str()]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stderr.contains("neither padding"), "{stderr}");
    let rows = table_rows(&stdout);
    assert_eq!(
        rows.iter()
            .filter(|r| r.1 == "1" && r.2.starts_with("nvidia-fatbin"))
            .count(),
        2,
        "{stdout}"
    );
}

#[test]
fn a_fatbinary_with_a_broken_size_hides_no_container_after_it() {
    let dir = TempDir::new("fatbin-broken-size");
    let (good, at) = fatbin_then_bundle();
    let declared = u64::from_le_bytes(good[8..16].try_into().unwrap());
    let cases: &[(&str, u64, &str)] = &[
        (
            "past the end of the file",
            u64::MAX - 8,
            "fatbinary size overflows, at byte 8",
        ),
        (
            "past the end of the data",
            10_000_000,
            "fatbinary size runs past the end of the data, at byte 8",
        ),
        (
            "into the bundle",
            declared + 64,
            "fatbinary size runs past its entries into the container after it, at byte 8",
        ),
        (
            "inside the first entry",
            100,
            "fatbinary size ends inside an entry (the entry reads in the data after it), at byte 8",
        ),
    ];
    for (what, size, message) in cases {
        let mut data = good.clone();
        data[8..16].copy_from_slice(&size.to_le_bytes());
        let file = dir.write("broken.bin", &data);
        let o = loader_sim(&["list".as_ref(), file.as_os_str()]);
        let (stdout, stderr) = text(&o);
        // The damaged fatbinary makes the status 2; the bundle after it is listed.
        assert_eq!(o.status.code(), Some(2), "{what}: {stdout}\n{stderr}");
        assert!(stderr.contains(message), "{what}: {stderr}");
        let rows = table_rows(&stdout);
        assert!(
            rows.iter().any(|r| r.2 == "clang-offload-bundle"),
            "{what}: the bundle is hidden: {stdout}\n{stderr}"
        );
        for r in rows.iter().filter(|r| r.2 == "clang-offload-bundle") {
            assert!(r.3.parse::<usize>().unwrap() > at, "{what}: {stdout}");
        }
    }
}

/// Peak resident set size of a running child, polled from `/proc/PID/status` (`VmHWM`,
/// KiB) until it exits; returns its output and the largest value seen.
pub(crate) fn run_polling_peak(cmd: &mut std::process::Command) -> (Output, u64) {
    use std::io::Read;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    let start = std::time::Instant::now();
    // Read the pipes on threads, so that a full pipe cannot stall the child.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).unwrap();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        err.read_to_end(&mut v).unwrap();
        v
    });
    let exit = loop {
        if let Ok(s) = std::fs::read_to_string(&status) {
            if let Some(kib) = s
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
            {
                peak = peak.max(kib);
            }
        }
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "still running after 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    let output = Output {
        status: exit,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    };
    (output, peak)
}

/// The committed rocRAND archive of `arch` rewritten with a 3 GiB hole before its TOC (a
/// sparse file: nothing of it is on disk), at `path`. Returns the archive's size.
fn sparse_archive(arch: &str, path: &Path) -> u64 {
    use std::io::{Seek, SeekFrom, Write};
    let data_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/kpack");
    let orig =
        std::fs::read(data_dir.join(format!("rocrand/.kpack/rand_lib_{arch}.kpack"))).unwrap();
    let toc_offset = u64::from_le_bytes(orig[8..16].try_into().unwrap()) as usize;
    let new_toc: u64 = 3 << 30;
    let mut head = orig[..toc_offset].to_vec();
    head[8..16].copy_from_slice(&new_toc.to_le_bytes());
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&head).unwrap();
    f.set_len(new_toc).unwrap();
    f.seek(SeekFrom::Start(new_toc)).unwrap();
    f.write_all(&orig[toc_offset..]).unwrap();
    new_toc + (orig.len() - toc_offset) as u64
}

/// `select` on a split library beside a sparse 3 GiB archive reads the archive by its
/// table of contents: the code object chosen is the archive's, and the command's peak
/// resident set stays small (was: the archive read whole, 3.1 GB). It runs under a 2 GiB
/// address-space limit too, where reading the archive whole could not even be tried.
#[test]
fn select_reads_a_sparse_3_gib_archive_by_its_toc() {
    let dir = TempDir::new("kpack-sparse");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let stage = root.join("math-libs/rocRAND/stage");
    std::fs::create_dir_all(stage.join("lib")).unwrap();
    std::fs::create_dir_all(stage.join(".kpack")).unwrap();
    let archive = stage.join(".kpack/rand_lib_gfx1030.kpack");
    let size = sparse_archive("gfx1030", &archive);
    assert!(size > 3 << 30);
    let lib = stage.join("lib/librocrand.so.1.1");
    let data_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/kpack");
    std::fs::copy(data_dir.join("split/librocrand.so.1.1"), &lib).unwrap();
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data_dir.join("expected.json")).unwrap()).unwrap();
    let want = expected["archives"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["gfx_arches"][0] == "gfx1030")
        .unwrap()["entries"][0]["original_sha256"]
        .clone();
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 2097152 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_loader-sim"))
        .args(["select", "--json", "--target", "gfx1030"])
        .arg(&lib)
        .current_dir(&root);
    for v in [
        "ROCM_KPACK_PATH",
        "ROCM_KPACK_PATH_PREFIX",
        "ROCM_KPACK_DISABLE",
    ] {
        cmd.env_remove(v);
    }
    let (o, peak_kib) = run_polling_peak(&mut cmd);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let rec: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(rec["sha256"], want, "{stdout}");
    assert_eq!(
        PathBuf::from(rec["archive"].as_str().unwrap()),
        archive,
        "{stdout}"
    );
    eprintln!("select beside a sparse {size}-byte archive: peak RSS {peak_kib} KiB");
    assert!(peak_kib < 64 * 1024, "peak RSS {peak_kib} KiB");
}

/// An archive whose header puts its TOC at byte 16 of a sparse 3 GiB file (a TOC of 3
/// GiB): not read, the loader's archive does not open, and `select` says why.
#[test]
fn an_archive_with_a_toc_of_3_gib_is_not_read() {
    use std::io::Write;
    let dir = TempDir::new("kpack-huge-toc");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let stage = root.join("math-libs/rocRAND/stage");
    std::fs::create_dir_all(stage.join("lib")).unwrap();
    std::fs::create_dir_all(stage.join(".kpack")).unwrap();
    let archive = stage.join(".kpack/rand_lib_gfx1030.kpack");
    let mut f = std::fs::File::create(&archive).unwrap();
    f.write_all(b"KPAK\x01\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x80")
        .unwrap();
    f.set_len(3 << 30).unwrap();
    drop(f);
    let lib = stage.join("lib/librocrand.so.1.1");
    let data_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/kpack");
    std::fs::copy(data_dir.join("split/librocrand.so.1.1"), &lib).unwrap();
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 2097152 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_loader-sim"))
        .args(["select", "--target", "gfx1030"])
        .arg(&lib)
        .current_dir(&root);
    for v in [
        "ROCM_KPACK_PATH",
        "ROCM_KPACK_PATH_PREFIX",
        "ROCM_KPACK_DISABLE",
    ] {
        cmd.env_remove(v);
    }
    let (o, peak_kib) = run_polling_peak(&mut cmd);
    let (stdout, stderr) = text(&o);
    // No code object: exit status 1, the reason names the archive and the bound.
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("rand_lib_gfx1030.kpack does not open: the TOC at byte 16 runs"),
        "{stdout}"
    );
    assert!(stdout.contains("over the 67108864-byte bound"), "{stdout}");
    assert!(peak_kib < 64 * 1024, "peak RSS {peak_kib} KiB");
}

/// A zip file of `members` (deflated).
fn zip_of(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    use std::io::Write;
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in members {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        z.start_file(*name, options).unwrap();
        z.write_all(data).unwrap();
    }
    z.finish().unwrap().into_inner()
}

/// The central directory records of `zip` (from its end of central directory record), and
/// the bytes before the central directory.
fn central_records(zip: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
    let eocd = zip.len() - 22;
    assert_eq!(&zip[eocd..eocd + 4], b"PK\x05\x06");
    let count = u16::from_le_bytes([zip[eocd + 10], zip[eocd + 11]]) as usize;
    let cd = u32::from_le_bytes(zip[eocd + 16..eocd + 20].try_into().unwrap()) as usize;
    let mut at = cd;
    let mut records = Vec::new();
    for _ in 0..count {
        let le16 = |o: usize| u16::from_le_bytes([zip[at + o], zip[at + o + 1]]) as usize;
        let len = 46 + le16(28) + le16(30) + le16(32);
        records.push(zip[at..at + len].to_vec());
        at += len;
    }
    (records, zip[..cd].to_vec())
}

/// `before` followed by the central directory `records` and its end record.
fn with_central_directory(before: &[u8], records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = before.to_vec();
    let cd = out.len();
    for r in records {
        out.extend(r);
    }
    let size = out.len() - cd;
    out.extend(b"PK\x05\x06\0\0\0\0");
    out.extend((records.len() as u16).to_le_bytes());
    out.extend((records.len() as u16).to_le_bytes());
    out.extend((size as u32).to_le_bytes());
    out.extend((cd as u32).to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

/// A central directory record renamed to `name` (of the same length).
fn renamed(record: &[u8], name: &str) -> Vec<u8> {
    let len = u16::from_le_bytes([record[28], record[29]]) as usize;
    assert_eq!(len, name.len());
    let mut r = record.to_vec();
    r[46..46 + len].copy_from_slice(name.as_bytes());
    r
}

fn device_code() -> Vec<u8> {
    std::fs::read(corpus("devobj/saxpy.gfx90a.co")).unwrap()
}

/// 100 central directory entries that point at one deflated member: `doctor` refuses the
/// wheel at once, naming the second entry and the offset of the local header (was: the
/// member decoded 100 times).
#[test]
fn overlapping_zip_entries_are_refused_with_the_entry_and_offset() {
    let dir = TempDir::new("zip-overlap");
    let zip = zip_of(&[("m000.so", device_code())]);
    let (records, before) = central_records(&zip);
    let copies: Vec<Vec<u8>> = (0..100)
        .map(|i| renamed(&records[0], &format!("m{i:03}.so")))
        .collect();
    let wheel = dir.write(
        "overlap-1.0-py3-none-any.whl",
        &with_central_directory(&before, &copies),
    );
    let o = loader_sim(&[
        "doctor".as_ref(),
        "--target".as_ref(),
        "gfx90a".as_ref(),
        wheel.as_os_str(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(
        all.contains("member \"m001.so\" at byte 0 overlaps member \"m000.so\" (bytes 0 to ")
            && all.contains("overlapping zip entries are refused (as pip does)"),
        "{all}"
    );
    // A member whose local header lies inside another's data (a stored member that
    // holds a whole zip member) is refused the same way.
    let inner = zip_of(&[("b.so", device_code())]);
    let (inner_records, inner_local) = central_records(&inner);
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    z.start_file("a.so", stored).unwrap();
    std::io::Write::write_all(&mut z, &inner_local).unwrap();
    let outer = z.finish().unwrap().into_inner();
    let (mut records, before) = central_records(&outer);
    let b_at = 30 + "a.so".len();
    assert_eq!(&before[b_at..b_at + 4], b"PK\x03\x04");
    let mut b = inner_records[0].clone();
    b[42..46].copy_from_slice(&(b_at as u32).to_le_bytes());
    records.push(b);
    let wheel = dir.write(
        "inside-1.0-py3-none-any.whl",
        &with_central_directory(&before, &records),
    );
    let o = loader_sim(&[
        "doctor".as_ref(),
        "--target".as_ref(),
        "gfx90a".as_ref(),
        wheel.as_os_str(),
    ]);
    let (stdout, stderr) = text(&o);
    let all = format!("{stdout}{stderr}");
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&format!(
            "member \"b.so\" at byte {b_at} overlaps member \"a.so\" (bytes 0 to "
        )) && all.contains("overlapping zip entries are refused"),
        "{all}"
    );
}

/// Two central directory entries that name one path: refused, naming the path and the
/// offset of the second entry.
#[test]
fn duplicate_zip_entries_are_refused() {
    let dir = TempDir::new("zip-duplicate");
    let zip = zip_of(&[("a.so", device_code()), ("b.so", device_code())]);
    let (mut records, before) = central_records(&zip);
    records[1] = renamed(&records[1], "a.so");
    let second = before.len() + records[0].len();
    let wheel = dir.write(
        "dup-1.0-py3-none-any.whl",
        &with_central_directory(&before, &records),
    );
    let o = loader_sim(&[
        "doctor".as_ref(),
        "--target".as_ref(),
        "gfx90a".as_ref(),
        wheel.as_os_str(),
    ]);
    let (stdout, stderr) = text(&o);
    let all = format!("{stdout}{stderr}");
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&format!(
            "member \"a.so\": a second central directory entry for it at byte {second}: duplicate zip entries are refused (as pip does)"
        )),
        "{all}"
    );
}

/// Deflated members spilled to the temporary folder stay under `LOADER_SIM_SPILL_LIMIT`:
/// past it a member is not read and the message names the limit and the variable; a
/// value that is not a size is an error; under it the wheel is judged.
#[test]
fn spilled_members_stay_under_the_limit() {
    let dir = TempDir::new("zip-spill");
    let mut big = device_code();
    big.resize(8 << 20, 0);
    let wheel = dir.write(
        "big-1.0-py3-none-any.whl",
        &zip_of(&[("lib/big.so", big), ("lib/small.co", device_code())]),
    );
    let run = |limit: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_loader-sim"))
            .args(["doctor", "--target", "gfx90a"])
            .arg(&wheel)
            .env("LOADER_SIM_SPILL_LIMIT", limit)
            .env("TMPDIR", &dir.0)
            .output()
            .unwrap()
    };
    let o = run("1M");
    let (stdout, stderr) = text(&o);
    let all = format!("{stdout}{stderr}");
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(
        all.contains(
            "it declares 8388608 bytes, more than is left (1048576 bytes) of the 1048576 bytes the deflated members of one zip file may take in the temporary folder (set LOADER_SIM_SPILL_LIMIT to allow more)"
        ),
        "{all}"
    );
    // Nothing left behind in the temporary folder.
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("loader-sim-member-")
        })
        .collect();
    assert!(left.is_empty());
    let o = run("lots");
    let all = format!("{}{}", text(&o).0, text(&o).1);
    // A usage error since issue 43 (was exit 1: the wheel reported damaged).
    assert_eq!(o.status.code(), Some(2), "{all}");
    assert!(
        all.contains("LOADER_SIM_SPILL_LIMIT=lots: not a size"),
        "{all}"
    );
    let o = run("16M");
    let all = format!("{}{}", text(&o).0, text(&o).1);
    assert!(!all.contains("LOADER_SIM_SPILL_LIMIT"), "{all}");
    assert!(!all.contains("cannot read member"), "{all}");
}

/// `select -o OUT` that fails after it wrote OUT leaves no OUT behind: standard output
/// that cannot be written (`/dev/full`), and an input truncated while read (24 races);
/// a run that succeeds keeps it.
#[test]
fn select_o_leaves_no_output_when_the_command_fails_afterwards() {
    let dir = TempDir::new("select-o-fails");
    let out = dir.path("chosen.co");
    let bundle = corpus("bundles/hip_6arch.bundle");
    let args = |out: &Path| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_loader-sim"));
        c.arg("select")
            .arg(&bundle)
            .args(["--target", "gfx90a:xnack-", "-o"])
            .arg(out);
        c
    };
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = args(&out).stdout(full).output().unwrap();
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot write output"), "{stderr}");
    assert!(!out.exists(), "select -o left {} behind", out.display());
    let o = args(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    assert!(out.exists());

    // The race: truncated 0-115 ms into the run.
    let data = common::big_bundle(&["gfx90a", "gfx906"], 24 << 20, 4);
    let file = dir.path("lib.bundle");
    let (mut failed, mut kept) = (0, 0);
    for run in 0..24u64 {
        let _ = std::fs::remove_file(&out);
        std::fs::write(&file, &data).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_loader-sim"))
            .arg("select")
            .arg(&file)
            .args(["--target", "gfx90a", "-o"])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(run * 5));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        match o.status.code() {
            Some(0) => {
                assert!(out.exists(), "run {run}: exit 0 without the output");
                kept += 1;
            }
            Some(1 | 2) => {
                assert!(
                    !out.exists(),
                    "run {run}: failed ({stderr}) and left {} behind",
                    out.display()
                );
                failed += 1;
            }
            other => panic!("run {run}: status {other:?}: {stderr}"),
        }
    }
    eprintln!("select -o: {failed} of 24 runs failed (no output left), {kept} succeeded");
    assert!(failed > 0);
}

/// Standard error closed (a pipe whose reader went away): the warnings of a damaged unit
/// and the final error are dropped, never a panic (exit 101); the status is the command's.
#[test]
fn a_closed_standard_error_is_no_panic() {
    let dir = TempDir::new("closed-stderr");
    let (mut data, _) = fatbin_then_bundle();
    data[8..16].copy_from_slice(&10_000_000u64.to_le_bytes());
    let damaged = dir.write("damaged.bin", &data);
    let missing = dir.path("missing.bin");
    let cases: [(&[&std::ffi::OsStr], i32); 3] = [
        (&["list".as_ref(), damaged.as_os_str()], 2),
        (
            &[
                "select".as_ref(),
                damaged.as_os_str(),
                "--target".as_ref(),
                "gfx906".as_ref(),
            ],
            2,
        ),
        (
            &[
                "select".as_ref(),
                missing.as_os_str(),
                "--target".as_ref(),
                "gfx906".as_ref(),
            ],
            2,
        ),
    ];
    for (args, want) in cases {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_loader-sim"))
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader of standard error goes away before the command writes to it.
        drop(child.stderr.take());
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(want), "{args:?}: {status:?}");
    }
}

/// A zip file whose (zip64) end of central directory record declares 300,000 entries:
/// refused before the central directory is read.
#[test]
fn a_zip_declaring_too_many_entries_is_refused_before_reading_them() {
    let dir = TempDir::new("zip-many");
    let zip = zip_of(&[("a.so", device_code())]);
    let (records, before) = central_records(&zip);
    let mut out = before.clone();
    let cd = out.len();
    for r in &records {
        out.extend(r);
    }
    let cd_size = out.len() - cd;
    let eocd64 = out.len();
    out.extend(b"PK\x06\x06");
    out.extend(44u64.to_le_bytes());
    out.extend([45, 0, 45, 0]);
    out.extend([0u8; 8]);
    out.extend(300_000u64.to_le_bytes());
    out.extend(300_000u64.to_le_bytes());
    out.extend((cd_size as u64).to_le_bytes());
    out.extend((cd as u64).to_le_bytes());
    out.extend(b"PK\x06\x07");
    out.extend(0u32.to_le_bytes());
    out.extend((eocd64 as u64).to_le_bytes());
    out.extend(1u32.to_le_bytes());
    out.extend(b"PK\x05\x06\0\0\0\0");
    out.extend([0xff; 4]);
    out.extend([0xff; 8]);
    out.extend(0u16.to_le_bytes());
    let wheel = dir.write("many-1.0-py3-none-any.whl", &out);
    let o = loader_sim(&[
        "doctor".as_ref(),
        "--target".as_ref(),
        "gfx90a".as_ref(),
        wheel.as_os_str(),
    ]);
    let (stdout, stderr) = text(&o);
    let all = format!("{stdout}{stderr}");
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(
        all.contains("the central directory declares 300000 entries, more than 262144: not read"),
        "{all}"
    );
}
