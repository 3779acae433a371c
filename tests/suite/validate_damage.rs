//! Four kinds of damage `validate` used to pass in silence (issue 23), each made from a real
//! bundle by one precise edit, and what LLVM 22's `clang-offload-bundler` and comgr do with
//! it (`VALIDATE.md` §2.10–§2.13):
//!
//! * `not-code-object`: the ELF magic of the `gfx906` code object zeroed;
//! * `unknown-offload-kind`: the `-` after `hipv4` of the `gfx906` entry ID made an `X`;
//! * `overlapping-entries`: the size of the `gfx906` entry grown by 1024 bytes, into the
//!   next payload;
//! * `empty-entry-id`: the entry count raised by one, so that the zeros between the table
//!   and the first payload read as a descriptor (offset 0, size 0, ID length 0); and the ID
//!   length of the last entry set to 0.
//!
//! The bundles are the corpus's `hip_6arch.bundle` and `hip_align4096.bundle` (made by
//! `clang-offload-bundler`) and, with the external tests, the bundle in `librocrand.so.1`.
//! The tests that run the bundler and comgr are behind `common::external`; they assert
//! what was observed (exit status or signal, message, the entry comgr picks), so a change in
//! either tool fails them.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use offload_image::validate::{validate, Code, Finding, Severity};
use offload_image::ReadOptions;

/// One entry descriptor of a binary bundle: where it is and what it says.
#[derive(Clone, Debug)]
struct Descriptor {
    at: usize,
    offset: u64,
    size: u64,
    id: String,
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

fn put_u64(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The descriptor table of the bundle at `start` of `d`.
fn table(d: &[u8], start: usize) -> Vec<Descriptor> {
    assert_eq!(&d[start..start + 24], b"__CLANG_OFFLOAD_BUNDLE__");
    let mut pos = start + 32;
    (0..u64_at(d, start + 24))
        .map(|_| {
            let id_len = u64_at(d, pos + 16) as usize;
            let e = Descriptor {
                at: pos,
                offset: u64_at(d, pos),
                size: u64_at(d, pos + 8),
                id: String::from_utf8(d[pos + 24..pos + 24 + id_len].to_vec()).unwrap(),
            };
            pos += 24 + id_len;
            e
        })
        .collect()
}

fn entry(t: &[Descriptor], id: &str) -> Descriptor {
    t.iter()
        .find(|e| e.id == id)
        .unwrap_or_else(|| panic!("no entry {id}"))
        .clone()
}

const GFX906: &str = "hipv4-amdgcn-amd-amdhsa--gfx906";

/// The four damages, each applied to the bundle at `start` of a copy of `d`: (code, the
/// damaged bytes, the offset the finding must have). `device` is the ID of a code object
/// entry to damage; `last` an entry whose descriptor is the last of the table.
fn damage(d: &[u8], start: usize, device: &str) -> Vec<(Code, Vec<u8>, u64)> {
    let t = table(d, start);
    let e = entry(&t, device);
    let payload = start + e.offset as usize;
    let mut out = Vec::new();

    let mut not_elf = d.to_vec();
    assert_eq!(&not_elf[payload..payload + 4], b"\x7fELF");
    not_elf[payload..payload + 4].fill(0);
    out.push((Code::NotCodeObject, not_elf, payload as u64));

    let mut kind = d.to_vec();
    let dash = e.at + 24 + "hipv4".len();
    assert_eq!(kind[dash], b'-');
    kind[dash] = b'X';
    out.push((Code::UnknownOffloadKind, kind, e.at as u64));

    // The entry's size grows into the payload that follows it.
    let next = t
        .iter()
        .filter(|n| n.offset > e.offset && n.size > 0)
        .min_by_key(|n| n.offset)
        .unwrap();
    let mut overlap = d.to_vec();
    put_u64(&mut overlap, e.at + 8, next.offset - e.offset + 1024);
    out.push((
        Code::OverlappingEntries,
        overlap,
        (start as u64) + next.offset,
    ));

    // One more entry than the table holds: the zeros after it read as a descriptor. A
    // bundle whose first payload follows its table directly gets the last ID's length set
    // to 0 instead (the old ID's bytes stay, unused).
    let last = t.last().unwrap();
    let end = last.at + 24 + last.id.len();
    let mut empty = d.to_vec();
    if d[end..end + 24].iter().all(|&b| b == 0) {
        put_u64(&mut empty, start + 24, t.len() as u64 + 1);
        out.push((Code::EmptyEntryId, empty, end as u64));
    } else {
        put_u64(&mut empty, last.at + 16, 0);
        out.push((Code::EmptyEntryId, empty, last.at as u64));
    }
    out
}

fn findings(data: &[u8]) -> Vec<Finding> {
    let f = validate(data, &ReadOptions::default());
    for x in &f {
        assert!(x.offset <= data.len() as u64 && !x.message.is_empty());
    }
    f
}

fn new_codes(f: &[Finding]) -> Vec<Code> {
    f.iter()
        .map(|x| x.code)
        .filter(|c| {
            matches!(
                c,
                Code::NotCodeObject
                    | Code::UnknownOffloadKind
                    | Code::OverlappingEntries
                    | Code::EmptyEntryId
            )
        })
        .collect()
}

/// Each damage gives exactly its finding, with its code, severity and offset; the real file
/// gives none of them.
fn check_damages(name: &str, d: &[u8], start: usize, device: &str) {
    assert!(
        new_codes(&findings(d)).is_empty(),
        "{name}: {:?}",
        findings(d)
    );
    for (code, damaged, at) in damage(d, start, device) {
        let f = findings(&damaged);
        let ours: Vec<&Finding> = f
            .iter()
            .filter(|x| !new_codes(std::slice::from_ref(x)).is_empty())
            .collect();
        assert_eq!(ours.len(), 1, "{name}, {}: {f:?}", code.name());
        assert_eq!((ours[0].code, ours[0].offset), (code, at), "{name}: {f:?}");
        let severity = if code == Code::NotCodeObject {
            Severity::Error
        } else {
            Severity::Warning
        };
        assert_eq!(ours[0].severity(), severity);
        // Nothing else turns into an error: the reader still reads the file.
        assert!(
            f.iter()
                .all(|x| x.code == Code::NotCodeObject || x.severity() < Severity::Error),
            "{name}: {f:?}"
        );
    }
}

#[test]
fn each_damage_of_a_corpus_bundle_has_its_finding() {
    for (file, device) in [
        ("bundles/hip_6arch.bundle", GFX906),
        ("bundles/hip_align4096.bundle", GFX906),
        (
            "bundles/hip_generic.bundle",
            "hipv4-amdgcn-amd-amdhsa--gfx9-generic",
        ),
    ] {
        let d = common::read_corpus(file);
        check_damages(file, &d, 0, device);
    }
    let d = common::read_corpus("bundles/hip_6arch.bundle");
    let t = table(&d, 0);
    // Two entries that share one payload exactly are not an overlap (the ID that does not
    // fit the code object is `id-elf-mismatch`).
    let xp = entry(&t, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+");
    let xm = entry(&t, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");
    let mut shared = d.clone();
    put_u64(&mut shared, xm.at, xp.offset);
    put_u64(&mut shared, xm.at + 8, xp.size);
    let f = findings(&shared);
    assert_eq!(
        f.iter().map(|x| x.code).collect::<Vec<_>>(),
        vec![Code::IdElfMismatch],
        "{f:?}"
    );
}

/// In a compressed bundle the four are found in the decompressed content: the finding is at
/// the unit's offset, and the message of the table findings names the place in the content.
#[cfg(feature = "write")]
#[test]
fn each_damage_inside_a_compressed_bundle_has_its_finding() {
    use offload_image::write::ccob::{compress, CcobOptions};
    let d = common::read_corpus("bundles/hip_6arch.bundle");
    for (code, damaged, inner) in damage(&d, 0, GFX906) {
        // After the undamaged bundle, so that the unit's offset is not 0.
        let mut file = d.clone();
        file.extend(compress(&damaged, &CcobOptions::default()).unwrap());
        let f = findings(&file);
        let ours: Vec<&Finding> = f.iter().filter(|x| x.code == code).collect();
        assert_eq!(ours.len(), 1, "{}: {f:?}", code.name());
        assert_eq!(ours[0].offset, d.len() as u64, "{f:?}");
        if code != Code::NotCodeObject {
            assert!(
                ours[0].message.contains(&inner.to_string()),
                "{}",
                ours[0].message
            );
            assert!(ours[0].message.contains("decompressed content"));
        }
    }
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs librocrand.so.1 (scripts/fetch-rocm-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn each_damage_of_librocrand_has_its_finding() {
    if !common::external("librocrand.so.1 (scripts/fetch-rocm-libs.sh)") {
        return;
    }
    let lib = std::fs::read(common::external_lib("librocrand.so.1")).unwrap();
    let start = offload_image::units(&lib, &ReadOptions::default())
        .map(|u| u.unwrap())
        .find(|u| matches!(u.content, offload_image::UnitContent::Bundle(_)))
        .unwrap()
        .location
        .offset as usize;
    check_damages(
        "librocrand.so.1",
        &lib,
        start,
        "hipv4-amdgcn-amd-amdhsa--gfx906:xnack-",
    );
}

// ---- What LLVM 22's bundler and comgr do with the damaged bundles -------------------------

fn bundler(args: &[String]) -> Output {
    let exe = common::tool("clang-offload-bundler-22");
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    Command::new(exe).args(args).output().unwrap()
}

fn list(file: &Path) -> Output {
    bundler(&[
        "-list".into(),
        "-type=o".into(),
        format!("-input={}", file.display()),
    ])
}

/// `-unbundle` of one target into `out`.
fn unbundle(file: &Path, target: &str, out: &Path) -> Output {
    let _ = std::fs::remove_file(out);
    bundler(&[
        "-unbundle".into(),
        "-type=o".into(),
        format!("-input={}", file.display()),
        format!("-targets={target}"),
        format!("-output={}", out.display()),
    ])
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn listed(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Killed by SIGSEGV.
fn segfault(o: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    o.status.signal() == Some(11)
}

/// What comgr picks for `isa` in the bundle at the start of `file`, given the first 4096
/// bytes as ROCm CLR gives them: (offset, size), (0, 0) for none.
fn comgr(file: &Path, isa: &str) -> (u64, u64) {
    use std::io::Write;
    let mut child = Command::new(common::comgr_lookup())
        .arg(file)
        .arg("4096")
        .arg(format!("amdgcn-amd-amdhsa--{isa}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "0").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let f: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(f.len(), 4, "comgr harness: {text}");
    assert_ne!(f[2], "error", "comgr failed: {text}");
    (f[2].parse().unwrap(), f[3].parse().unwrap())
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22 and comgr (libamd-comgr-dev); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn llvm_22_and_comgr_on_each_damage() {
    if !common::external("clang-offload-bundler-22 and comgr (libamd-comgr-dev)") {
        return;
    }
    let dir = common::scratch("validate-damage");
    let out = dir.join("unbundled");
    let d = common::read_corpus("bundles/hip_6arch.bundle");
    let t = table(&d, 0);
    let gfx906 = entry(&t, GFX906);
    let xnack = entry(&t, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+");
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    // The undamaged bundle, for reference.
    let real = write("real.bundle", &d);
    assert!(list(&real).status.success());
    assert_eq!(comgr(&real, "gfx906"), (gfx906.offset, gfx906.size));

    // not-code-object: listed, unbundled as is (the zeroed magic included), and comgr
    // picks it for gfx906.
    let mut bytes = d.clone();
    bytes[gfx906.offset as usize..][..4].fill(0);
    let file = write("not_elf.bundle", &bytes);
    let l = list(&file);
    assert!(l.status.success() && listed(&l).contains(&GFX906.to_string()));
    assert!(unbundle(&file, GFX906, &out).status.success());
    assert_eq!(
        std::fs::read(&out).unwrap(),
        &bytes[gfx906.offset as usize..][..gfx906.size as usize]
    );
    assert_eq!(comgr(&file, "gfx906"), (gfx906.offset, gfx906.size));

    // unknown-offload-kind: listed as stored; the bundler refuses to name it, and finds no
    // gfx906 entry; comgr skips it (no code object for gfx906), the others are found.
    let mut bytes = d.clone();
    bytes[gfx906.at + 24 + 5] = b'X';
    let bad = "hipv4Xamdgcn-amd-amdhsa--gfx906";
    let file = write("kind.bundle", &bytes);
    let l = list(&file);
    assert!(l.status.success() && listed(&l).contains(&bad.to_string()));
    let u = unbundle(&file, bad, &out);
    assert_eq!(u.status.code(), Some(1));
    assert!(
        stderr(&u).contains("unknown offloading kind 'hipv4Xamdgcn'"),
        "{}",
        stderr(&u)
    );
    let u = unbundle(&file, GFX906, &out);
    assert_eq!(u.status.code(), Some(1));
    assert!(
        stderr(&u).contains("Can't find bundles for"),
        "{}",
        stderr(&u)
    );
    assert_eq!(comgr(&file, "gfx906"), (0, 0));
    assert_eq!(comgr(&file, "gfx90a:xnack+"), (xnack.offset, xnack.size));

    // overlapping-entries: both entries are unbundled and picked with their stored ranges,
    // the gfx906 one with the first 1024 bytes of the gfx90a:xnack+ code object.
    let mut bytes = d.clone();
    let grown = xnack.offset - gfx906.offset + 1024;
    put_u64(&mut bytes, gfx906.at + 8, grown);
    let file = write("overlap.bundle", &bytes);
    assert!(list(&file).status.success());
    assert!(unbundle(&file, GFX906, &out).status.success());
    assert_eq!(
        std::fs::read(&out).unwrap(),
        &bytes[gfx906.offset as usize..][..grown as usize]
    );
    assert_eq!(comgr(&file, "gfx906"), (gfx906.offset, grown));
    assert_eq!(comgr(&file, "gfx90a:xnack+"), (xnack.offset, xnack.size));

    // empty-entry-id, as damage makes it: one entry more than the table holds, the zeros
    // after it read as (offset 0, size 0, ID length 0). LLVM 22's bundler crashes with
    // SIGSEGV on -list and -unbundle; comgr ignores the entry.
    let a = common::read_corpus("bundles/hip_align4096.bundle");
    let at = table(&a, 0);
    let mut bytes = a.clone();
    put_u64(&mut bytes, 24, at.len() as u64 + 1);
    let file = write("zero_descriptor.bundle", &bytes);
    let l = list(&file);
    assert!(segfault(&l), "{:?}: {}", l.status, stderr(&l));
    let u = unbundle(&file, GFX906, &out);
    assert!(segfault(&u), "{:?}: {}", u.status, stderr(&u));
    let e = entry(&at, GFX906);
    assert_eq!(comgr(&file, "gfx906"), (e.offset, e.size));

    // empty-entry-id in a table that is otherwise sound (the last ID's length set to 0):
    // -list prints an empty line; -unbundle stops at it for the targets it has not found
    // by then (gfx1100, whose ID it was, and the host entry), not for gfx906; comgr finds
    // no gfx1100 code object.
    let last = t.last().unwrap();
    assert_eq!(last.id, "hipv4-amdgcn-amd-amdhsa--gfx1100");
    let mut bytes = d.clone();
    put_u64(&mut bytes, last.at + 16, 0);
    let file = write("empty_id.bundle", &bytes);
    let l = list(&file);
    assert!(l.status.success() && listed(&l).contains(&String::new()));
    for target in [last.id.as_str(), "host-x86_64-unknown-linux-gnu-"] {
        let u = unbundle(&file, target, &out);
        assert_eq!(u.status.code(), Some(1), "{target}");
        assert!(
            stderr(&u).contains("invalid bundle id read from the bundle"),
            "{}",
            stderr(&u)
        );
    }
    assert!(unbundle(&file, GFX906, &out).status.success());
    assert_eq!(comgr(&file, "gfx1100"), (0, 0));
    assert_eq!(comgr(&file, "gfx906"), (gfx906.offset, gfx906.size));
}
