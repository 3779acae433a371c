//! Hostile conditions, round 2 (issue 43): entries that alias one image (work counted,
//! not timed), control bytes from files, valid multi-frame compressed bundles, the
//! same-file check by device and inode, prune's temporary file on more signals, a bad
//! spill limit, bounded child processes. Each test asserts the exit status and the message;
//! the hostile files are built here by small generators (nothing large is committed).

#![cfg(unix)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{loader_sim, ours, TempDir};

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// An AMDGPU code object header (`e_machine` 224, gfx906 in `e_flags`) padded to `size`.
pub(crate) fn elf_image(size: usize) -> Vec<u8> {
    let mut v = b"\x7fELF\x02\x01\x01\x40\x02".to_vec();
    v.resize(16, 0);
    v.extend(3u16.to_le_bytes()); // e_type
    v.extend(224u16.to_le_bytes()); // e_machine
    v.extend(1u32.to_le_bytes()); // e_version
    v.extend([0u8; 24]); // e_entry, e_phoff, e_shoff
    v.extend(0x2Fu32.to_le_bytes()); // e_flags: gfx906
    v.extend(64u16.to_le_bytes());
    v.extend(56u16.to_le_bytes());
    v.extend(0u16.to_le_bytes());
    v.extend(64u16.to_le_bytes());
    v.extend([0u8; 4]);
    v.resize(size.max(v.len()), 0);
    v
}

/// A v2 OffloadBinary of `n` entries, all naming one `image` (`triple`, `arch` strings).
pub(crate) fn offload_binary_aliasing(n: usize, image: &[u8], arch: &[u8]) -> Vec<u8> {
    let mut strtab = b"\0triple\0amdgcn-amd-amdhsa\0arch\0".to_vec();
    let k_arch = strtab.len() - 5;
    let v_arch = strtab.len();
    strtab.extend(arch);
    strtab.push(0);
    let records_at = 32 + 40 * n;
    let strtab_at = records_at + 48 * n;
    let image_at = (strtab_at + strtab.len()).next_multiple_of(8);
    let size = (image_at + image.len()).next_multiple_of(8);
    let mut out = b"\x10\xff\x10\xad".to_vec();
    out.extend(2u32.to_le_bytes());
    for w in [size as u64, 32, n as u64] {
        out.extend(w.to_le_bytes());
    }
    for i in 0..n {
        out.extend(1u16.to_le_bytes());
        out.extend(4u16.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        for w in [
            (records_at + 48 * i) as u64,
            2,
            image_at as u64,
            image.len() as u64,
        ] {
            out.extend(w.to_le_bytes());
        }
    }
    for _ in 0..n {
        for w in [
            strtab_at + 1,
            strtab_at + 8,
            17,
            strtab_at + k_arch,
            strtab_at + v_arch,
            arch.len(),
        ] {
            out.extend((w as u64).to_le_bytes());
        }
    }
    out.extend(&strtab);
    out.resize(image_at, 0);
    out.extend(image);
    out.resize(size, 0);
    out
}

/// The header of a bundle of a host entry and `n` device entries that all name one image
/// of `image_len` bytes at the returned header's end (append the image).
pub(crate) fn bundle_header_aliasing(n: usize, image_len: usize) -> Vec<u8> {
    let mut ids = vec!["host-x86_64-unknown-linux-gnu-".to_string()];
    ids.extend((0..n).map(|_| "hipv4-amdgcn-amd-amdhsa--gfx906".to_string()));
    let header: usize = 32 + ids.iter().map(|id| 24 + id.len()).sum::<usize>();
    let at = header.next_multiple_of(4096);
    let mut out = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    out.extend((ids.len() as u64).to_le_bytes());
    for (i, id) in ids.iter().enumerate() {
        let len = if i == 0 { 0 } else { image_len };
        for w in [at, len, id.len()] {
            out.extend((w as u64).to_le_bytes());
        }
        out.extend(id.as_bytes());
    }
    out.resize(at, 0);
    out
}

/// A zstd frame of `data` made by hand (RFC 8878): single segment, the content size
/// stated, raw blocks for the bytes and RLE blocks for runs of one byte (so that a 128 MiB
/// run of zeros is a few KB), no checksum.
pub(crate) fn zstd_frame(data: &[u8]) -> Vec<u8> {
    let mut out = 0xFD2F_B528u32.to_le_bytes().to_vec();
    out.push(0xE0); // 8-byte content size, single segment
    out.extend((data.len() as u64).to_le_bytes());
    const MAX: usize = 128 << 10;
    let mut at = 0;
    if data.is_empty() {
        out.extend([1u8, 0, 0]); // an empty last raw block
    }
    while at < data.len() {
        let chunk = &data[at..data.len().min(at + MAX)];
        let rle = chunk.iter().all(|&b| b == chunk[0]);
        let last = at + chunk.len() == data.len();
        let header = (chunk.len() << 3) as u32 | (u32::from(rle) << 1) | u32::from(last);
        out.extend(&header.to_le_bytes()[..3]);
        if rle {
            out.push(chunk[0]);
        } else {
            out.extend(chunk);
        }
        at += chunk.len();
    }
    out
}

/// A zstd skippable frame of `n` bytes.
pub(crate) fn skippable_frame(n: usize) -> Vec<u8> {
    let mut out = 0x184D_2A50u32.to_le_bytes().to_vec();
    out.extend((n as u32).to_le_bytes());
    out.extend(std::iter::repeat_n(0xA5u8, n));
    out
}

/// A v3 `CCOB` of `content` whose payload is `payload` (method 1 zstd, 0 zlib).
pub(crate) fn ccob_v3(content: &[u8], method: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = b"CCOB".to_vec();
    out.extend(3u16.to_le_bytes());
    out.extend(method.to_le_bytes());
    out.extend((32 + payload.len() as u64).to_le_bytes());
    out.extend((content.len() as u64).to_le_bytes());
    out.extend(&md5(content)[..8]);
    out.extend(payload);
    out
}

/// MD5 (RFC 1321), for the `CCOB` hash.
fn md5(data: &[u8]) -> [u8; 16] {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5,
        9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10,
        15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    let k: Vec<u32> = (0..64)
        .map(|i| ((i as f64 + 1.0).sin().abs() * 4294967296.0) as u32)
        .collect();
    let mut h = [0x67452301u32, 0xefcdab89, 0x98badcfe, 0x10325476];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend(((data.len() as u64).wrapping_mul(8)).to_le_bytes());
    for chunk in msg.chunks(64) {
        let m: Vec<u32> = chunk
            .chunks(4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
            .collect();
        let [mut a, mut b, mut c, mut d] = h;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 16];
    for (i, w) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// Runs loader-sim with `LOADER_SIM_WORK` set; (output, bytes hashed, bytes validated).
fn with_work(args: &[&std::ffi::OsStr]) -> (Output, u64, u64) {
    let o = Command::new(ours())
        .args(args)
        .env("LOADER_SIM_WORK", "1")
        .output()
        .unwrap();
    let (_, stderr) = text(&o);
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("loader-sim: work: "))
        .unwrap_or_else(|| panic!("no work line in {stderr}"));
    let n: Vec<u64> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
    (o, n[0], n[1])
}

/// Issue 43, "Why" 1: entries that all name one image cost one hash and one scan. 4,096
/// entries of an OffloadBinary, and 4,096 of a bundle (plain and as a zlib `CCOB`), naming
/// one 256 KiB image: `list` hashes 256 KiB (before: 4,096 × 256 KiB = 1 GiB, 10-16 s for
/// 1,024 × 16 MB), `validate` scans 256 KiB, and every entry is still listed with the hash
/// of the image.
#[test]
fn aliasing_entries_are_hashed_and_scanned_once() {
    let dir = TempDir::new("hostile3-alias");
    let image = elf_image(256 << 10);
    let expected = common::sha256(&image);
    let ob = dir.write(
        "alias.ob",
        &offload_binary_aliasing(4096, &image, b"gfx906"),
    );
    let mut bundle = bundle_header_aliasing(4096, image.len());
    bundle.extend(&image);
    let bundle_file = dir.write("alias.bundle", &bundle);
    let ccob = dir.write("alias.ccob", &ccob_v3(&bundle, 0, &miniz_zlib(&bundle)));
    for (file, in_file) in [(&ob, true), (&bundle_file, true), (&ccob, false)] {
        let (o, hashed, _) = with_work(&["list".as_ref(), "--json".as_ref(), file.as_os_str()]);
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{}: {stderr}", file.display());
        let lines = common::json_lines(&o.stdout);
        let device: Vec<_> = lines.iter().filter(|l| l["size"] == 256 << 10).collect();
        assert_eq!(device.len(), 4096, "{}", file.display());
        assert!(
            device.iter().all(|l| l["sha256"] == expected.as_str()),
            "{stdout}"
        );
        // The image once (and the host entry's empty range).
        assert_eq!(hashed, 256 << 10, "{}: {stderr}", file.display());
        let (o, _, scanned) = with_work(&["validate".as_ref(), file.as_os_str()]);
        let (stdout, stderr) = text(&o);
        assert!(o.status.code().is_some(), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        // In-file images are scanned for container magic once; decompressed ones are not.
        assert_eq!(
            scanned,
            if in_file { 256 << 10 } else { 0 },
            "{}: {stdout}{stderr}",
            file.display()
        );
    }
}

/// A zlib stream of `data` (stored blocks: no compressor needed).
fn miniz_zlib(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut chunks = data.chunks(65535).peekable();
    if data.is_empty() {
        out.extend([1, 0, 0, 0xFF, 0xFF]);
    }
    while let Some(c) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        out.extend((c.len() as u16).to_le_bytes());
        out.extend((!(c.len() as u16)).to_le_bytes());
        out.extend(c);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    out.extend(((b << 16) | a).to_be_bytes());
    out
}

/// Issue 43, "Why" 1 (nested): an OffloadBinary whose 2,000 entries all name one NVIDIA
/// fatbinary: the fatbinary is walked as a unit once, not 2,000 times.
#[test]
fn a_fatbinary_named_by_many_entries_is_walked_once() {
    let dir = TempDir::new("hostile3-nested");
    let fatbin = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nvfatbin/files/device_c.fatbin"),
    )
    .unwrap();
    let mut ob = offload_binary_aliasing(2000, &fatbin, b"sm_86");
    // Image kind 4 (fatbin), offload kind 2 (CUDA) and the triple of every entry.
    for i in 0..2000 {
        let e = 32 + 40 * i;
        ob[e..e + 2].copy_from_slice(&4u16.to_le_bytes());
        ob[e + 2..e + 4].copy_from_slice(&2u16.to_le_bytes());
    }
    let file = dir.write("nested.ob", &ob);
    let (o, hashed, _) = with_work(&["list".as_ref(), "--json".as_ref(), file.as_os_str()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let lines = common::json_lines(&o.stdout);
    let outer = lines
        .iter()
        .filter(|l| l["format"] == "offload-binary")
        .count();
    let inner = lines
        .iter()
        .filter(|l| {
            l["format"]
                .as_str()
                .is_some_and(|f| f.starts_with("nvidia-fatbin"))
        })
        .count();
    assert_eq!(outer, 2000);
    // `device_c.fatbin` holds two entries: listed once, as one unit.
    assert_eq!(inner, 2, "{lines:?}");
    // The fatbinary once for the 2,000 entries, and its two entries once.
    let inner_bytes: u64 = lines
        .iter()
        .filter(|l| {
            l["format"]
                .as_str()
                .is_some_and(|f| f.starts_with("nvidia-fatbin"))
        })
        .map(|l| l["size"].as_u64().unwrap())
        .sum();
    assert_eq!(hashed, fatbin.len() as u64 + inner_bytes);
}

/// Issue 43, "Why" 1 (memory): a zstd `CCOB` whose 4,096 entries name one 96 MiB image is
/// decoded into one buffer of its size: peak RSS under 1.25 times the content (before: the
/// decoder's buffer and a copy, 2 times; 1.77 GB for the 900 MB case).
#[test]
fn a_decoded_payload_is_held_once() {
    let dir = TempDir::new("hostile3-ccob-peak");
    let size = 96 << 20;
    let mut content = bundle_header_aliasing(4096, size);
    content.extend(elf_image(size));
    let file = dir.write("big.ccob", &ccob_v3(&content, 1, &zstd_frame(&content)));
    assert!(std::fs::metadata(&file).unwrap().len() < 1 << 20);
    for verify in [true, false] {
        let mut cmd = Command::new(ours());
        cmd.args(["list", "--no-sha256"]);
        if !verify {
            cmd.arg("--no-verify-hash");
        }
        let (o, peak_kib) = crate::hostile2::run_polling_peak(cmd.arg(&file));
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{stderr}");
        assert_eq!(stdout.lines().count(), 4098, "{stderr}");
        let limit = content.len() as u64 * 5 / 4 / 1024;
        eprintln!(
            "verify {verify}: peak {peak_kib} KiB for {} KiB of content",
            content.len() >> 10
        );
        assert!(peak_kib < limit, "peak {peak_kib} KiB, over {limit} KiB");
    }
}

/// Issue 43, "Why" 3: an `arch` of `gfx90a\r\n\e]0;pwned\a` reaches no terminal: `list`,
/// `select --explain` and `validate` print it escaped (`\r\n\u{1b}]0;pwned\u{7}`), one row
/// per image, no control byte but the line ends.
#[test]
fn control_bytes_from_a_file_are_escaped() {
    let dir = TempDir::new("hostile3-ctl");
    let arch = b"gfx90a\r\n\x1b]0;pwned\x07";
    let file = dir.write(
        "ctl.ob",
        &offload_binary_aliasing(1, &elf_image(4096), arch),
    );
    let runs: [&[&str]; 3] = [
        &["list"],
        &["select", "--target", "gfx906", "--explain"],
        &["validate"],
    ];
    for args in runs {
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        a.push(file.as_os_str());
        let o = loader_sim(&a);
        let (stdout, stderr) = text(&o);
        for (what, t) in [("stdout", &stdout), ("stderr", &stderr)] {
            assert!(
                !t.chars().any(|c| c.is_control() && c != '\n'),
                "{args:?} {what}: {t:?}"
            );
        }
        assert!(
            stdout.contains("gfx90a\\r\\n\\u{1b}]0;pwned\\u{7}")
                || stderr.contains("gfx90a\\r\\n\\u{1b}]0;pwned\\u{7}"),
            "{args:?}: {stdout}{stderr}"
        );
        if args[0] == "list" {
            assert_eq!(o.status.code(), Some(0), "{stderr}");
            assert_eq!(stdout.lines().count(), 2, "{stdout}");
        }
    }
}

/// Issue 43, "Why" 5: `prune -o OUT` where OUT is the input under another name — a hard
/// link, a symbolic link, a bind mount (as root, where `mount --bind` works) — is refused
/// before anything is written, and the input keeps its bytes.
#[test]
fn prune_refuses_the_input_under_another_name() {
    let dir = TempDir::new("hostile3-same");
    let data = std::fs::read(common::corpus("bundles/hip_6arch.bundle")).unwrap();
    let input = dir.write("in.bundle", &data);
    let hard = dir.path("hard.bundle");
    std::fs::hard_link(&input, &hard).unwrap();
    let soft = dir.path("soft.bundle");
    std::os::unix::fs::symlink(&input, &soft).unwrap();
    let mut outs = vec![hard, soft];
    let sub = dir.path("sub");
    std::fs::create_dir(&sub).unwrap();
    let bound = Command::new("mount")
        .arg("--bind")
        .arg(dir.path(""))
        .arg(&sub)
        .output()
        .is_ok_and(|o| o.status.success());
    if bound {
        outs.push(sub.join("in.bundle"));
    } else {
        eprintln!("mount --bind not permitted here: the bind mount case is not run");
    }
    for out in &outs {
        let o = loader_sim(&[
            "prune".as_ref(),
            "--keep".as_ref(),
            "gfx906".as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
            input.as_os_str(),
        ]);
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{}: {stderr}", out.display());
        assert!(
            stderr.contains("OUT must not be the input file"),
            "{stderr}"
        );
        assert_eq!(std::fs::read(&input).unwrap(), data, "{}", out.display());
    }
    if bound {
        let _ = Command::new("umount").arg(&sub).status();
    }
}

/// Issue 43, "Why" 8: prune's temporary file is removed on SIGQUIT, SIGUSR1 and SIGXFSZ
/// (a file size limit under the output's size), as on SIGINT, SIGTERM and SIGHUP; its name
/// says whose it is (`.OUT.loader-sim-prune.PID.RANDOM.tmp`), for the SIGKILL no process
/// can catch.
#[test]
fn prune_leaves_no_temporary_file_on_more_signals() {
    use std::os::unix::process::ExitStatusExt;
    let dir = TempDir::new("hostile3-prune-sig");
    let data = common::big_bundle(&["gfx90a", "gfx906"], 48 << 20, 5);
    let file = dir.write("in.bundle", &data);
    let out = dir.path("out.bundle");
    let left = || -> Vec<String> {
        std::fs::read_dir(dir.path(""))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("prune"))
            .collect()
    };
    // SIGXFSZ: a file size limit of 1 MiB, under the 48 MiB output.
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 2048; exec \"$0\" prune --keep gfx90a -o \"$1\" \"$2\"")
        .arg(ours())
        .arg(&out)
        .arg(&file)
        .output()
        .unwrap();
    // SIGXFSZ is 25 on Linux.
    assert_eq!(o.status.signal(), Some(25), "{o:?}");
    assert!(left().is_empty(), "SIGXFSZ: {:?}", left());
    let mut killed = 0;
    for (run, sig) in ["QUIT", "USR1", "QUIT", "USR1", "KILL"].iter().enumerate() {
        let _ = std::fs::remove_file(&out);
        let mut child = Command::new(ours())
            .args(["prune", "--keep", "gfx90a", "-o"])
            .arg(&out)
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Until the temporary file exists (or the prune is over).
        let start = std::time::Instant::now();
        while left().is_empty() && child.try_wait().unwrap().is_none() {
            assert!(start.elapsed().as_secs() < 60);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .status();
        let status = child.wait().unwrap();
        if status.signal().is_some() {
            killed += 1;
        }
        let names = left();
        if *sig == "KILL" {
            if status.signal().is_some() {
                // Not caught: the file stays, named for the process.
                let pid = child.id().to_string();
                assert!(
                    names
                        .iter()
                        .all(|n| n.starts_with(".out.bundle.loader-sim-prune.")
                            && n.split('.').nth(4) == Some(pid.as_str())
                            && n.ends_with(".tmp")),
                    "{names:?}"
                );
                for n in names {
                    std::fs::remove_file(dir.path(&n)).unwrap();
                }
            }
        } else {
            assert!(
                names.is_empty(),
                "run {run} (SIG{sig}): left behind: {names:?}"
            );
        }
    }
    assert!(killed > 0);
}

/// Issue 43, "Why" 8: a `LOADER_SIM_SPILL_LIMIT` that is not a size is a usage error
/// naming it (exit 2), not a wheel reported damaged.
#[test]
fn a_bad_spill_limit_is_a_usage_error() {
    let dir = TempDir::new("hostile3-spill");
    let wheel = dir.write("w-1.0-py3-none-any.whl", &empty_zip());
    let o = Command::new(ours())
        .args(["doctor"])
        .arg(&wheel)
        .env("LOADER_SIM_SPILL_LIMIT", "lots")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("LOADER_SIM_SPILL_LIMIT"), "{stderr}");
    assert!(stderr.contains("lots"), "{stderr}");
    assert!(!stdout.contains("damaged"), "{stdout}");
}

/// An empty zip file (the end of central directory record alone).
fn empty_zip() -> Vec<u8> {
    let mut v = 0x0605_4b50u32.to_le_bytes().to_vec();
    v.extend([0u8; 18]);
    v
}

/// Issue 43, "Why" 4: a `CCOB` whose zstd payload is two frames, or has a skippable frame
/// before or after its frame, or whose zlib stream has bytes after it, is read as LLVM
/// reads it (`ZSTD_decompress` decodes every frame and skips skippable ones; zlib's
/// `uncompress` stops at the end of the stream): `list` exits 0 with the bundle's entries
/// and `select` writes the gfx906 code object of the bundle, with libzstd and with ruzstd.
/// (clang-offload-bundler-22 lists and unbundles the same files to the same code object:
/// docs/RELIABILITY.md.) Bytes after the frames that are no frame stay an error, as in LLVM.
#[test]
fn multi_frame_and_trailing_bytes_read_as_llvm_reads_them() {
    let dir = TempDir::new("hostile3-frames");
    let bundle = std::fs::read(common::corpus("bundles/hip_3field.bundle")).unwrap();
    let plain = dir.write("plain.bundle", &bundle);
    let want = dir.path("want.co");
    let o = loader_sim(&[
        "select".as_ref(),
        "--target".as_ref(),
        "gfx906".as_ref(),
        "-o".as_ref(),
        want.as_os_str(),
        plain.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let want = std::fs::read(&want).unwrap();
    let half = bundle.len() / 2;
    let two = [zstd_frame(&bundle[..half]), zstd_frame(&bundle[half..])].concat();
    let before = [skippable_frame(8), zstd_frame(&bundle)].concat();
    let after = [zstd_frame(&bundle), skippable_frame(8)].concat();
    let mut trailing = miniz_zlib(&bundle);
    trailing.extend(b"JUNKJUNK");
    let shapes: [(&str, u16, Vec<u8>); 4] = [
        ("two-frames", 1, two),
        ("skippable-before", 1, before),
        ("skippable-after", 1, after),
        ("zlib-trailing", 0, trailing),
    ];
    for (name, method, payload) in shapes {
        let file = dir.write(&format!("{name}.ccob"), &ccob_v3(&bundle, method, &payload));
        let o = loader_sim(&["list".as_ref(), "--json".as_ref(), file.as_os_str()]);
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{name}: {stderr}");
        assert_eq!(common::json_lines(&o.stdout).len(), 3, "{name}: {stdout}");
        for decoder in ["libzstd", "ruzstd"] {
            let out = dir.path(&format!("{name}.{decoder}.co"));
            let o = loader_sim(&[
                "select".as_ref(),
                "--zstd-decoder".as_ref(),
                decoder.as_ref(),
                "--target".as_ref(),
                "gfx906".as_ref(),
                "-o".as_ref(),
                out.as_os_str(),
                file.as_os_str(),
            ]);
            assert_eq!(o.status.code(), Some(0), "{name} {decoder}: {}", text(&o).1);
            assert_eq!(std::fs::read(&out).unwrap(), want, "{name} {decoder}");
        }
    }
    // Bytes after the frames that are not a frame: an error, as clang-offload-bundler-22's
    // "Src size is incorrect".
    let mut junk = zstd_frame(&bundle);
    junk.extend(b"JUNKJUNKJUNK");
    let file = dir.write("junk.ccob", &ccob_v3(&bundle, 1, &junk));
    let o = loader_sim(&["list".as_ref(), file.as_os_str()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is damaged: bytes after the end of the compressed stream"),
        "{stderr}"
    );
}

/// Runs `cmd` to its end, failing the test if it takes more than `limit` (a hang).
fn run_bounded(cmd: &mut Command, limit: std::time::Duration) -> Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// True while process `pid` exists and is not a zombie.
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Issue 43, "Why" 2: `doctor --python=` an interpreter that floods its output (`yes x`)
/// or never ends (`sleep 1000`): killed at the output cap (1 MiB) or the time limit
/// (`LOADER_SIM_CHILD_TIMEOUT`, here 1 s), exit 2 with a message naming the bound, and the
/// child gone (before: SIGABRT on a 4 GiB allocation, and a hang).
#[test]
fn the_interpreter_probe_is_bounded() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("hostile3-python");
    for (name, body) in [
        ("flood.sh", "echo $$ > \"$0.pid\"; exec yes x".to_string()),
        (
            "hang.sh",
            "echo $$ > \"$0.pid\"; exec sleep 1000".to_string(),
        ),
    ] {
        let script = dir.write(name, format!("#!/bin/sh\n{body}\n").as_bytes());
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let o = run_bounded(
            Command::new(ours())
                .args(["doctor", "--target", "gfx906"])
                .arg(format!("--python={}", script.display()))
                .arg(dir.path(""))
                .env("LOADER_SIM_CHILD_TIMEOUT", "1"),
            std::time::Duration::from_secs(60),
        );
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {stderr}");
        let want = if name == "flood.sh" {
            "the interpreter failed: it wrote more than 1048576 bytes to its standard output and was killed"
        } else {
            "the interpreter failed: it did not finish within 1 s and was killed"
        };
        assert!(stderr.contains(want), "{name}: {stderr}");
        let pid = std::fs::read_to_string(format!("{}.pid", script.display())).unwrap();
        assert!(!alive(pid.trim()), "{name}: pid {pid} still runs");
    }
    // A value of the variable that is not a number of seconds is a usage error.
    let o = Command::new(ours())
        .args(["doctor", "--target", "gfx906", "--python=python3"])
        .arg(dir.path(""))
        .env("LOADER_SIM_CHILD_TIMEOUT", "soon")
        .output()
        .unwrap();
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("LOADER_SIM_CHILD_TIMEOUT=soon: not a positive number of seconds"),
        "{stderr}"
    );
}

/// Issue 43, "Why" 7: `register --load` of a library whose constructor never returns,
/// forks a child that lives on, raises SIGSEGV, calls `exit(0)` or `_exit(3)`: the load is
/// killed at the time limit, the forked child killed with its group, and each ending named
/// as what it was, exit 2 (before: hangs, and "nothing was registered", exit 0). A library
/// whose forked child lives on loads: exit 0, and the child is gone afterwards.
#[test]
fn register_load_bounds_the_constructors() {
    let dir = TempDir::new("hostile3-load");
    let cases = [
        ("hang", "for (;;) pause();", Some(2), "did not finish within 2 s and was killed"),
        (
            "fork",
            "pid_t p = fork(); if (p == 0) { for (;;) pause(); } else { FILE *f = fopen(getenv(\"PIDFILE\"), \"w\"); fprintf(f, \"%d\", (int)p); fclose(f); }",
            Some(0),
            "nothing was registered",
        ),
        ("segv", "raise(SIGSEGV);", Some(2), "ended before the load finished (killed by signal 11 (SIGSEGV))"),
        ("exit0", "exit(0);", Some(2), "ended before the load finished (exit status 0): the library's constructors ended the process"),
        ("exit3", "_exit(3);", Some(2), "ended before the load finished (exit status 3)"),
    ];
    for (name, body, code, want) in cases {
        let src = dir.write(
            &format!("{name}.c"),
            format!(
                "#include <signal.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n\
                 __attribute__((constructor)) static void ctor(void) {{ {body} }}\nint f(void) {{ return 1; }}\n"
            )
            .as_bytes(),
        );
        let lib = dir.path(&format!("lib{name}.so"));
        let o = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&src)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::describe(&o));
        let pidfile = dir.path(&format!("{name}.pid"));
        let o = run_bounded(
            Command::new(ours())
                .args(["register", "--device", "gfx906", "--load"])
                .arg(&lib)
                .env("LOADER_SIM_CHILD_TIMEOUT", "2")
                .env("PIDFILE", &pidfile),
            std::time::Duration::from_secs(60),
        );
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), code, "{name}: {stderr}");
        assert!(stderr.contains(want), "{name}: {stderr}");
        if let Ok(pid) = std::fs::read_to_string(&pidfile) {
            assert!(
                !alive(pid.trim()),
                "{name}: the forked child {pid} still runs"
            );
        }
    }
}

/// Issue 43, "Why" 6: the drop-in tools read their inputs as the main commands do. A FIFO
/// (`offload-packager --image=file=FIFO`, `offload-bundler -input=FIFO`, with `-list` too)
/// and a device (`--image=file=/dev/zero`) are refused at once, exit 1, `not a regular file
/// (a FIFO)` (before: hangs, and a read until memory ran out); a 3 GiB sparse file under a
/// 4 GB address-space limit is an error saying what could not be held, never SIGABRT.
#[test]
fn the_drop_ins_refuse_fifos_and_devices_and_bound_their_reads() {
    let dir = TempDir::new("hostile3-dropin");
    let fifo = dir.path("fifo");
    let o = Command::new("mkfifo").arg(&fifo).output().unwrap();
    assert!(o.status.success());
    let image = |file: &Path| {
        format!(
            "--image=file={},triple=amdgcn-amd-amdhsa,arch=gfx906,kind=hip",
            file.display()
        )
    };
    let out = dir.path("out.bin");
    let fifo_input = format!("-input={}", fifo.display());
    let runs: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "offload-packager".into(),
                "-o".into(),
                out.display().to_string(),
                image(&fifo),
            ],
            "not a regular file (a FIFO)",
        ),
        (
            vec![
                "offload-packager".into(),
                "-o".into(),
                out.display().to_string(),
                image(Path::new("/dev/zero")),
            ],
            "not a regular file (a character device)",
        ),
        (
            vec![
                "offload-bundler".into(),
                "-type=o".into(),
                fifo_input.clone(),
                "-list".into(),
            ],
            "not a regular file (a FIFO)",
        ),
        (
            vec![
                "offload-bundler".into(),
                "-type=o".into(),
                fifo_input,
                format!("-output={}", out.display()),
                "-targets=hip-amdgcn-amd-amdhsa--gfx906".into(),
                "-unbundle".into(),
            ],
            "not a regular file (a FIFO)",
        ),
    ];
    for (args, want) in runs {
        let o = run_bounded(
            Command::new(ours()).args(&args),
            std::time::Duration::from_secs(60),
        );
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    let big = dir.path("big.bin");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let o = run_bounded(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 4000000; exec \"$0\" offload-packager -o \"$1\" \"$2\"")
            .arg(ours())
            .arg(&out)
            .arg(image(&big)),
        std::time::Duration::from_secs(120),
    );
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot hold") && stderr.contains("in memory"),
        "{stderr}"
    );
}
