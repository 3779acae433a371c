//! More of a hostile world (issue 38): containers after a bare NVIDIA fatbinary, damaged
//! fatbinary sizes, `.kpack` archives read by their table of contents, wheels with
//! overlapping zip entries and a cap on what they spill, `select -o` that fails after it
//! began writing, a closed standard error. Each test asserts the exit status and the
//! message.

#![cfg(unix)]

mod common;

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
