//! Peak memory while refusing decompression bombs, huge counts and deep nesting.
//!
//! Two measurements per case:
//!
//! * in process, the binary's metered allocator (`common::alloc::peak`) records the peak of
//!   the live heap bytes of the test's thread above the level at the start of the case (the
//!   library's own allocations, exactly, while the other tests run on their own threads);
//! * in a child process (this binary re-run on this test alone, with `PEAK_MEMORY_CASE` set
//!   to the case's name), the kernel's peak resident set size (`VmHWM`), which also counts
//!   the program, the runtime and the input.
//!
//! Both must stay under 16 MiB for every refusal. A control case that decompresses a real
//! 8 MiB bomb shows that the meter does see large allocations.

use crate::common;

use std::process::Command;

use common::craft::*;
use offload_image::ccob::truncated_md5;
use offload_image::{for_each_unit, Error, ErrorKind, Limits, ReadOptions};

/// The case a child process runs (the parent runs them all).
const CHILD_CASE: &str = "PEAK_MEMORY_CASE";

const MIB: u64 = 1 << 20;
const BUDGET: u64 = 16 * MIB;

/// The `list` path over `data`.
fn list(data: &[u8], options: &ReadOptions) -> Result<usize, Error> {
    let mut n = 0;
    for_each_unit(data, options, |unit| {
        let open = unit.open(options)?;
        n += open.images().map(|i| i.bytes.len().min(1)).sum::<usize>();
        Ok(())
    })?;
    Ok(n)
}

fn limited(max_decompressed_size: u64) -> ReadOptions {
    ReadOptions {
        limits: Limits {
            max_decompressed_size,
            ..Limits::DEFAULT
        },
        ..ReadOptions::default()
    }
}

/// `loader-sim select` on a compressed bundle: one pass with `select_in_stream`, the chosen
/// image streamed to a sink that only counts bytes.
fn stream_select(data: &[u8], options: &ReadOptions) -> Result<usize, Error> {
    use offload_image::ccob::CompressedBundle;
    use offload_image::stream::{select_in_stream, Kept};
    let c = CompressedBundle::parse(data)?;
    let devices = [offload_image::Device::parse("gfx90a:xnack+")?];
    let mut kept = 0usize;
    let r = select_in_stream::<_, Error, _>(
        c.reader(options)?,
        &devices,
        &offload_image::SelectOptions::default(),
        &options.limits,
        true,
        |k| {
            if let Kept::Bytes { bytes, .. } = k {
                kept += bytes.len();
            }
            Ok(())
        },
    )?;
    Ok(r.map_or(0, |_| kept))
}

/// A case: its name, the input, the options, the path it takes (`list`, or the streaming
/// `select`), and the expected outcome (`None`: success).
struct Case {
    name: &'static str,
    input: fn() -> Vec<u8>,
    options: fn() -> ReadOptions,
    expect: Option<ErrorKind>,
}

/// The path a case runs: names starting with "stream:" go through [`stream_select`].
fn path(case: &Case) -> fn(&[u8], &ReadOptions) -> Result<usize, Error> {
    if case.name.starts_with("stream:") {
        stream_select
    } else {
        list
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "CCOB v3, 1 KB, claims 1 TB",
            input: || ccob_raw(3, 1, 1 << 40, [0; 8], &zstd_raw_blocks(250)),
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "CCOB v3, 1 KB, claims 1 TB, no limits",
            input: || ccob_raw(3, 1, 1 << 40, [0; 8], &zstd_raw_blocks(250)),
            options: || ReadOptions {
                limits: Limits::UNLIMITED,
                ..ReadOptions::default()
            },
            expect: Some(ErrorKind::SizeMismatch),
        },
        Case {
            name: "CCOB v2, 16 KB zstd claims 300 MiB, stream ends at 4 KB",
            input: || ccob_raw(2, 1, 300 * MIB, [0; 8], &zstd_raw_blocks(4000)),
            options: ReadOptions::default,
            expect: Some(ErrorKind::SizeMismatch),
        },
        Case {
            name: "CCOB v2, 36 KB zstd bomb (1.1 GiB), declares 1 KiB",
            input: || ccob_raw(2, 1, 1024, [0; 8], &zstd_rle_bomb(9000, 128 << 10, 7)),
            options: ReadOptions::default,
            expect: Some(ErrorKind::SizeMismatch),
        },
        Case {
            name: "CCOB v3, 36 KB zstd bomb (1.1 GiB), declares it",
            input: || {
                ccob_raw(
                    3,
                    1,
                    9000 * (128 << 10),
                    [0; 8],
                    &zstd_rle_bomb(9000, 128 << 10, 7),
                )
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "CCOB v1, 4 KB zstd bomb (125 MiB), declares it, limit 16 MiB",
            input: || {
                ccob_raw(
                    1,
                    1,
                    1000 * (128 << 10),
                    [0; 8],
                    &zstd_rle_bomb(1000, 128 << 10, 7),
                )
            },
            options: || limited(16 * MIB),
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "CCOB v3, 160 KB zlib bomb (25 MiB), declares 1 KiB",
            input: || ccob_raw(3, 0, 1024, [0; 8], &zlib_match_bomb(100_000)),
            options: ReadOptions::default,
            expect: Some(ErrorKind::SizeMismatch),
        },
        Case {
            name: "CCOB v2, 160 KB zlib bomb (25 MiB), declares it, limit 16 MiB",
            input: || ccob_raw(2, 0, 1 + 258 * 100_000, [0; 8], &zlib_match_bomb(100_000)),
            options: || limited(16 * MIB),
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "stream: CCOB v3, 1 KB, claims 1 TB",
            input: || ccob_raw(3, 1, 1 << 40, [0; 8], &zstd_raw_blocks(250)),
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "stream: CCOB v2, bundle + 16 KB of zstd, claims 300 MiB, ends at 4 KB",
            input: || {
                let content = hip_bundle();
                ccob_raw(
                    2,
                    1,
                    300 * MIB,
                    truncated_md5(&content),
                    &zstd_prefix_then(&content, 4000, 0),
                )
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::SizeMismatch),
        },
        Case {
            name: "stream: CCOB v2, bundle + 36 KB zstd bomb (1.1 GiB), declares the bundle",
            input: || {
                let content = hip_bundle();
                let stream = zstd_prefix_then(&content, 0, 9000);
                ccob_raw(2, 1, content.len() as u64, truncated_md5(&content), &stream)
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::SizeMismatch),
        },
        Case {
            name: "stream: CCOB v3, bundle + 160 KB zlib bomb (25 MiB), declares the bundle",
            input: || {
                let content = hip_bundle();
                let stream = zlib_prefix_then_bomb(&content, 100_000);
                ccob_raw(3, 0, content.len() as u64, truncated_md5(&content), &stream)
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::SizeMismatch),
        },
        Case {
            name: "compressed OffloadBinary, 1 KB, claims 1 TB",
            input: || compressed_offload_binary_raw(&zstd_raw_blocks(250), 1 << 40),
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "64 compressed OffloadBinaries of 20 MiB each (1.25 GiB)",
            input: || {
                let one = compressed_offload_binary_raw(
                    &zstd_rle_bomb(160, 128 << 10, 0),
                    40 + 160 * (128 << 10),
                );
                one.repeat(64)
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "OffloadBinary claims 2^63 entries",
            input: || {
                let mut b = offload_binary_for(2, "gfx90a", b"\x7fELF");
                b[24..32].copy_from_slice(&(1u64 << 63).to_le_bytes());
                b
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "OffloadBinary entry claims 2^63 strings",
            input: || {
                let mut b = offload_binary_for(2, "gfx90a", b"\x7fELF");
                b[48..56].copy_from_slice(&(1u64 << 63).to_le_bytes());
                b
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "bundle claims 2^64-1 entries",
            input: || {
                let mut b = hip_bundle();
                b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "bundle entry ID claims 2^64-1 bytes",
            input: || {
                let mut b = hip_bundle();
                b[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "archives nested 64 deep",
            input: || {
                let mut data = host_with_fatbin(&hip_bundle());
                for _ in 0..64 {
                    data = ar(&[("nested.a", &data)]);
                }
                data
            },
            options: ReadOptions::default,
            expect: Some(ErrorKind::LimitExceeded),
        },
        Case {
            name: "control: 8 MiB zstd bomb, declared, decompressed",
            input: || {
                let bomb = zstd_rle_bomb(64, 128 << 10, 0);
                let content_md5 = offload_image::ccob::truncated_md5(&vec![0; 8 << 20]);
                ccob_raw(3, 1, 8 * MIB, content_md5, &bomb)
            },
            // Not a bundle inside: the open fails after decompressing, as "malformed".
            options: ReadOptions::default,
            expect: Some(ErrorKind::Malformed),
        },
    ]
}

/// Runs one case: (outcome, peak live heap bytes above the start level).
fn run(case: &Case) -> (Result<usize, Error>, u64) {
    let input = (case.input)();
    let options = (case.options)();
    common::alloc::peak(|| path(case)(&input, &options))
}

/// The kernel's peak resident set size of this process, in bytes (Linux `VmHWM`).
fn vm_hwm() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// This test's name for the harness (`peak_memory::refusals_stay_under_16_mib`).
fn own_name() -> String {
    let module = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_, m)| m);
    format!("{module}::refusals_stay_under_16_mib")
}

#[test]
fn refusals_stay_under_16_mib() {
    if let Ok(name) = std::env::var(CHILD_CASE) {
        let case = cases().into_iter().find(|c| c.name == name).expect("case");
        let (r, _) = run(&case);
        println!("kind={:?}", r.err().map(|e| e.kind()));
        println!("vmhwm={}", vm_hwm().unwrap_or(0));
        return;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let mut failures = Vec::new();
    println!(
        "{:<64} {:>16} {:>12} {:>12}",
        "case", "outcome", "heap peak", "child RSS"
    );
    for case in cases() {
        let (r, peak) = run(&case);
        let kind = r.as_ref().err().map(|e| e.kind());
        let child = Command::new(&exe)
            .args([&own_name(), "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_CASE, case.name)
            .output()
            .expect("re-run the test binary");
        let out = String::from_utf8_lossy(&child.stdout);
        let rss: Option<u64> = out
            .lines()
            .find_map(|l| l.split_once("vmhwm=").map(|(_, v)| v))
            .and_then(|v| v.parse().ok())
            .filter(|&v| v > 0);
        let child_kind = out
            .lines()
            // The harness prints `test NAME ... ` before the test's output, on the same line.
            .find_map(|l| l.split_once("kind=").map(|(_, k)| k))
            .unwrap_or("?");
        println!(
            "{:<64} {:>16} {:>9} KiB {:>9} KiB",
            case.name,
            kind.map(|k| k.name()).unwrap_or("ok"),
            peak / 1024,
            rss.map(|r| (r / 1024).to_string())
                .unwrap_or_else(|| "n/a".into()),
        );
        if kind != case.expect {
            failures.push(format!(
                "{}: expected {:?}, got {r:?}",
                case.name, case.expect
            ));
        }
        if child_kind != format!("{:?}", case.expect) {
            failures.push(format!("{}: child saw {child_kind}", case.name));
        }
        let control = case.name.starts_with("control");
        if control {
            // The meter sees the 8 MiB output (plus the doubling of its buffer).
            if peak < 8 * MIB {
                failures.push(format!("{}: meter saw only {peak} bytes", case.name));
            }
        } else {
            if peak >= BUDGET {
                failures.push(format!("{}: heap peak {peak} bytes", case.name));
            }
            if let Some(rss) = rss {
                if rss >= BUDGET {
                    failures.push(format!("{}: child peak RSS {rss} bytes", case.name));
                }
            } else if cfg!(target_os = "linux") {
                failures.push(format!("{}: no VmHWM from the child", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("peak_memory: all refusals under {} MiB", BUDGET / MIB);
}
