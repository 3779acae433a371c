//! Bad command lines given to the drop-in tools and to LLVM 22's: the same exit status
//! (1) and the same standard error, line for line, over a table of cases — unknown options
//! with LLVM's `Did you mean` lines, option values, missing and contradictory options,
//! missing files, invalid targets, and the object bundle of two targets that normalise to
//! one entry ID (where LLVM's `llvm-objcopy` fails). The one deliberate difference, the
//! binary bundle of such targets (LLVM writes a corrupt file, the drop-in refuses), is
//! checked for what each tool does.
//!
//! The drop-ins run through links named as LLVM's tools, so that both print the same
//! program name; LLVM's `Try: '<argv[0]> --help'` shows the path it was started with,
//! which is replaced by the name before comparing.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

const HOST: &str = "host-x86_64-unknown-linux-gnu";
const GFX906: &str = "openmp-amdgcn-amd-amdhsa-gfx906";
const GFX906_SRAMECC: &str = "openmp-amdgcn-amd-amdhsa-gfx906:sramecc+";

/// Runs `prog` (LLVM's or the drop-in's link) and returns (status, stderr) with the path
/// `prog` replaced by its file name.
fn outcome(dir: &Path, prog: &Path, args: &[String]) -> (Option<i32>, String) {
    let r = run_in(dir, prog, args);
    let name = prog.file_name().unwrap().to_string_lossy().into_owned();
    let stderr = String::from_utf8_lossy(&r.stderr).replace(&parg(prog), &name);
    (r.status.code(), stderr)
}

/// A link named `name` to `loader-sim` in `dir` (the drop-in picked by program name).
fn link(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    std::os::unix::fs::symlink(ours(), &p).unwrap();
    p
}

fn compare(dir: &Path, llvm: &Path, ours: &Path, cases: &[Vec<String>]) {
    for args in cases {
        let want = outcome(dir, llvm, args);
        let got = outcome(dir, ours, args);
        assert_eq!(
            want.0,
            Some(1),
            "{args:?}: LLVM 22 did not fail: {}",
            want.1
        );
        assert!(!want.1.is_empty());
        assert_eq!(got, want, "{args:?}");
    }
}

fn line(s: &str) -> Vec<String> {
    s.split_whitespace().map(arg).collect()
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn bundler_errors_match_llvm_22() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    let dir = TempDir::new("dropin-errors");
    let llvm = llvm("clang-offload-bundler-22");
    let ours = link(&dir.0, llvm.file_name().unwrap().to_str().unwrap());
    std::fs::copy(corpus("devobj/host.x86_64.o"), dir.0.join("host.o")).unwrap();
    std::fs::write(
        dir.0.join("dev"),
        (0..999u32).map(|i| i as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    std::fs::write(dir.0.join("empty"), b"").unwrap();
    std::fs::write(
        dir.0.join("text"),
        b"not an archive, and longer than its magic\n",
    )
    .unwrap();
    std::fs::write(dir.0.join("cut.a"), b"!<arch>\nxx").unwrap();
    let bundle = format!("-type=bc -targets={HOST},{GFX906} -input=dev -input=dev -output=b.bc");
    let cases: Vec<Vec<String>> = [
        "-foo -bar -typ=o".to_string(),
        "-type=o -foo=1".into(),
        "-x".into(),
        "-t".into(),
        "-i=a".into(),
        "-qq".into(),
        "-abcd".into(),
        "-xyzw=1 -type=o".into(),
        "-compres -verbos -outpt=x -inpt=y -targts=z".into(),
        "--inptu=x -type=o".into(),
        "-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz".into(),
        "pos1 pos2 -type=o".into(),
        "-list=2 -type=o".into(),
        "-bundle-align=x -type=o".into(),
        "-type".into(),
        "-help=3".into(),
        "-help-hidden=1 -version=0 -help-list=x".into(),
        "-print-optionz=1 -help-hiden -versin=2 -lis=1".into(),
        "-type=o".into(),
        format!("-type=o -targets={HOST} -input=host.o -output=b -compression-level=abc"),
        format!("-type=x -targets={HOST} -input=host.o -output=b"),
        format!("-type=o -targets={HOST} -input=missing -output=b"),
        format!("-type=o -targets={HOST},{HOST} -input=host.o -input=host.o -output=b"),
        "-type=o -targets=foo-bar -input=host.o -output=b".into(),
        "-type=o -targets=hip-foo-bar-baz-qux -input=host.o -output=b".into(),
        format!("-type=o -targets={HOST} -input=host.o -output=b -unbundle -output=c"),
        format!("-type=o -targets={HOST} -input=host.o -input=host.o -output=b"),
        format!("-type=o -targets={HOST} -input=host.o -output=b -output=c"),
        format!("-type=o -targets={GFX906} -input=host.o -output=b"),
        format!("-type=o -targets={HOST},{HOST}x -input=host.o -input=dev -output=b"),
        format!("-type=o -targets={GFX906},{GFX906_SRAMECC} -input=dev -input=dev -output=b"),
        format!("-type=a -targets={HOST} -input=host.o -output=b"),
        format!("-type=o -targets={HOST} -input=host.o -inputs=host.o -output=b"),
        format!("-type=o -targets={HOST} -input=host.o -output=b -outputs=c"),
        format!("-type=o -targets={HOST} -input=host.o -output=b -check-input-archive"),
        format!("-type=o -targets={HOST} -input=host.o -output=b -check-input-archive -unbundle"),
        "-type=o -list -input=host.o -unbundle".into(),
        "-type=o -list -input=host.o -input=host.o".into(),
        "-type=o -list -input=host.o -output=x".into(),
        format!("-type=o -list -input=host.o -targets={HOST}"),
        "-type=o -list -input=missing".into(),
        "-type=o -input=host.o".into(),
        format!("-type=o -input=host.o -output=b -targets={HOST} -type=zz"),
        format!("-type=bc -unbundle -targets={HOST},{GFX906} -input=missing -output=x -output=y"),
        // Inputs of -type=a that are no archives, or cut short.
        format!("-type=a -unbundle -targets={GFX906} -input=empty -output=x.a"),
        format!("-type=a -unbundle -targets={GFX906} -input=text -output=x.a"),
        format!("-type=a -unbundle -targets={GFX906} -input=host.o -output=x.a"),
        format!("-type=a -unbundle -check-input-archive -targets={GFX906} -input=text -output=x.a"),
        format!("-type=a -unbundle -targets={GFX906} -input=cut.a -output=x.a"),
    ]
    .iter()
    .map(|s| line(s))
    .collect();
    compare(&dir.0, &llvm, &ours, &cases);
    // Unbundling a bundle that lacks a requested target.
    let b = run_in(&dir.0, &llvm, &line(&bundle));
    assert!(b.status.success(), "{}", describe(&b));
    let missing = line(&format!(
        "-type=bc -unbundle -targets=openmp-amdgcn-amd-amdhsa--gfx90a,{GFX906} -input=b.bc -output=y -output=z"
    ));
    compare(&dir.0, &llvm, &ours, &[missing]);

    // An object bundle of two targets with one entry ID: LLVM's llvm-objcopy fails, after
    // the bundler created the output file, which LLVM leaves behind empty; the drop-in
    // prints the same and writes no output.
    let conflict = line(&format!(
        "-type=o -targets={HOST},{GFX906},{GFX906_SRAMECC} -input=host.o -input=dev -input=dev -output=out.o"
    ));
    for (who, prog) in [("llvm", &llvm), ("ours", &ours)] {
        let _ = std::fs::remove_file(dir.0.join("out.o"));
        let got = outcome(&dir.0, prog, &conflict);
        let want = format!(
            "llvm-objcopy: error: --set-section-flags set multiple times for section \
             '__CLANG_OFFLOAD_BUNDLE__openmp-amdgcn-amd-amdhsa--'\n{}: error: 'llvm-objcopy' tool failed\n",
            prog.file_name().unwrap().to_string_lossy()
        );
        assert_eq!(got, (Some(1), want), "{who}");
        let left = std::fs::read(dir.0.join("out.o")).ok();
        let expected: Option<&[u8]> = if who == "llvm" { Some(b"") } else { None };
        assert_eq!(left.as_deref(), expected, "{who}");
    }

    // The binary bundle of the same targets: LLVM 22 writes a bundle whose two entries
    // share one ID (LLVM reads back only one of them); the drop-in refuses, exit 1.
    let binary = line(&format!(
        "-type=bc -targets={HOST},{GFX906},{GFX906_SRAMECC} -input=dev -input=host.o -input=dev -output=out.bc"
    ));
    let r = run_in(&dir.0, &llvm, &binary);
    assert!(r.status.success(), "{}", describe(&r));
    let written = std::fs::read(dir.0.join("out.bc")).unwrap();
    let id = b"openmp-amdgcn-amd-amdhsa--";
    let n = written.windows(id.len()).filter(|w| w == id).count();
    assert_eq!(n, 2, "LLVM 22 writes the one ID twice");
    let _ = std::fs::remove_file(dir.0.join("out.bc"));
    let (status, stderr) = outcome(&dir.0, &ours, &binary);
    assert_eq!(status, Some(1), "{stderr}");
    assert!(
        stderr.contains("normalises to the bundle entry ID 'openmp-amdgcn-amd-amdhsa--'"),
        "{stderr}"
    );
    assert!(!dir.0.join("out.bc").exists());
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs llvm-offload-binary-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn packager_errors_match_llvm_22() {
    if !common::external("llvm-offload-binary-22") {
        return;
    }
    let dir = TempDir::new("dropin-errors-packager");
    let llvm = llvm("llvm-offload-binary-22");
    let ours = link(&dir.0, llvm.file_name().unwrap().to_str().unwrap());
    std::fs::copy(corpus("devobj/host.x86_64.o"), dir.0.join("host.o")).unwrap();
    // An OffloadBinary cut short after its magic and version.
    std::fs::write(dir.0.join("cut.bin"), b"\x10\xff\x10\xad\x01\x00\x00\x00").unwrap();
    let cases: Vec<Vec<String>> = [
        "cut.bin --image=triple=x",
        "--foo --imag=x",
        "-x",
        "-abcd",
        "-archiv",
        "-zzzzzzzzzzzzzzzzzzzzzzzzzzz",
        "missing --image=file=a,triple=b",
        "a b c",
        "-o",
        "--archive=x",
        "-o x y",
        "-o x --image=file=missing,triple=x",
        "-o x --image=triple=x",
        "host.o --image=triple=x -o y",
    ]
    .iter()
    .map(|s| line(s))
    .collect();
    compare(&dir.0, &llvm, &ours, &cases);
}
