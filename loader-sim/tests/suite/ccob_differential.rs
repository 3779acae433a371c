//! Compressed bundles between loader-sim and LLVM, in both directions.
//!
//! * Every `CCOB` loader-sim writes (v2 and v3, zlib and zstd, several levels, chosen by
//!   option or environment like LLVM 22) has the header LLVM would write for the same
//!   bundle (version, method, uncompressed size, truncated MD5; the total size is ours),
//!   and LLVM 22 — and for v2 LLVM 19 — unbundles it to exactly the input files.
//! * Every `CCOB` LLVM 22 and LLVM 19 write (default and explicit levels, v2 and v3) is
//!   read by loader-sim (library and `-unbundle`/`-list`) with the same results.

use crate::common;

use common::*;
use offload_image::ccob::{truncated_md5, CompressedBundle, CompressionMethod};
use offload_image::ReadOptions;
use std::path::Path;

const TARGETS: &str = "host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx906,hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+,openmp-nvptx64-nvidia-cuda--sm_80,hipv4-amdgcn-amd-amdhsa--gfx1100";
const IDS: [&str; 5] = [
    "host-x86_64-unknown-linux-gnu",
    "hipv4-amdgcn-amd-amdhsa--gfx906",
    "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
    "openmp-nvptx64-nvidia-cuda--sm_80",
    "hipv4-amdgcn-amd-amdhsa--gfx1100",
];

/// Inputs of one bundle: an empty host entry and four device images.
fn inputs(dir: &TempDir, rng: &mut Rng, tag: &str) -> Vec<String> {
    let mut v = vec![parg(&dir.write(&format!("{tag}-host"), b""))];
    for f in [
        "devobj/saxpy.gfx906.co",
        "devobj/saxpy.gfx90a_xnack+.co",
        "devobj/saxpy.sm_80.cubin",
    ] {
        v.push(parg(&corpus(f)));
    }
    let n = rng.range(1, 20000);
    v.push(parg(&dir.write(&format!("{tag}-rand"), &rng.bytes(n))));
    v
}

fn bundle_args(inputs: &[String], out: &str) -> Vec<String> {
    let mut a = vec![arg("-type=o"), format!("-targets={TARGETS}")];
    a.extend(inputs.iter().map(|i| format!("-input={i}")));
    a.push(format!("-output={out}"));
    a
}

/// Unbundles every target of `file` with `bundler` into a vector of outputs.
fn unbundle_all(
    dir: &TempDir,
    bundler: &Path,
    file: &Path,
    tag: &str,
) -> Result<Vec<Vec<u8>>, String> {
    let mut args = vec![
        arg("-unbundle"),
        arg("-type=o"),
        format!("-targets={TARGETS}"),
        format!("-input={}", file.display()),
    ];
    let outs: Vec<_> = (0..IDS.len())
        .map(|i| dir.path(&format!("{tag}-u{i}")))
        .collect();
    args.extend(outs.iter().map(|o| format!("-output={}", o.display())));
    let r = run_in(&dir.0, bundler, &args);
    if !r.status.success() {
        return Err(describe(&r));
    }
    Ok(outs.iter().map(|o| std::fs::read(o).unwrap()).collect())
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22 and clang-offload-bundler-19; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn loader_sim_ccobs_decompress_in_llvm() {
    if !common::external("clang-offload-bundler-22 and clang-offload-bundler-19") {
        return;
    }
    let dir = TempDir::new("ccob-ours");
    let mut rng = Rng::new(0xcc0b_0001);
    let llvm22 = llvm("clang-offload-bundler-22");
    let llvm19 = llvm("clang-offload-bundler-19");
    let mut checked = 0;
    for round in 0..3 {
        let ins = inputs(&dir, &mut rng, &format!("r{round}"));
        let plain = dir.path(&format!("r{round}.bundle"));
        let r = run_in(&dir.0, &llvm22, &bundle_args(&ins, &parg(&plain)));
        assert!(r.status.success(), "{}", describe(&r));
        let plain_bytes = std::fs::read(&plain).unwrap();
        let expected = unbundle_all(&dir, &llvm22, &plain, &format!("r{round}-plain")).unwrap();
        for version in ["2", "3"] {
            for (method, levels) in [
                ("zstd", &["3", "1", "19"][..]),
                ("zlib", &["0", "1", "6", "9", "10"][..]),
            ] {
                for level in levels {
                    let out = dir.path(&format!("r{round}-v{version}-{method}-{level}.ccob"));
                    let mut args = bundle_args(&ins, &parg(&out));
                    args.push(format!("-compression-method={method}"));
                    // Compression requested by option or by environment, as in LLVM.
                    let by_env = rng.chance(50);
                    let mut env = vec![("COMPRESSED_BUNDLE_FORMAT_VERSION", version)];
                    if by_env {
                        env.push(("OFFLOAD_BUNDLER_COMPRESS", "1"));
                        env.push(("OFFLOAD_BUNDLER_COMPRESSION_LEVEL", level));
                    } else {
                        args.push(arg("-compress"));
                        args.push(format!("-compression-level={level}"));
                    }
                    let mut all = vec![arg("offload-bundler")];
                    all.extend(args);
                    let r = run_in_env(&dir.0, &ours(), &all, &env);
                    assert!(r.status.success(), "{}", describe(&r));
                    let blob = std::fs::read(&out).unwrap();
                    let c = CompressedBundle::parse(&blob).unwrap();
                    assert_eq!(c.version().to_string(), version);
                    assert_eq!(
                        c.method(),
                        if method == "zstd" {
                            CompressionMethod::Zstd
                        } else {
                            CompressionMethod::Zlib
                        }
                    );
                    assert_eq!(c.total_size(), Some(blob.len() as u64));
                    assert_eq!(c.uncompressed_size(), plain_bytes.len() as u64);
                    assert_eq!(c.hash(), truncated_md5(&plain_bytes));
                    let tag = format!("r{round}-{version}-{method}-{level}");
                    let got = unbundle_all(&dir, &llvm22, &out, &tag)
                        .unwrap_or_else(|e| panic!("LLVM 22 on {tag}: {e}"));
                    assert!(got == expected, "LLVM 22 unbundled {tag} differently");
                    if version == "2" {
                        let got = unbundle_all(&dir, &llvm19, &out, &format!("{tag}-19"))
                            .unwrap_or_else(|e| panic!("LLVM 19 on {tag}: {e}"));
                        assert!(got == expected, "LLVM 19 unbundled {tag} differently");
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 3 * 2 * 8);
}

/// A compression job: name, tool, environment, extra arguments.
type Case<'a> = (String, &'a Path, Vec<(&'a str, &'a str)>, Vec<String>);

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22 and clang-offload-bundler-19; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn llvm_ccobs_read_back() {
    if !common::external("clang-offload-bundler-22 and clang-offload-bundler-19") {
        return;
    }
    let dir = TempDir::new("ccob-llvm");
    let mut rng = Rng::new(0xcc0b_0002);
    let llvm22 = llvm("clang-offload-bundler-22");
    let llvm19 = llvm("clang-offload-bundler-19");
    let ins = inputs(&dir, &mut rng, "in");
    // Each release's uncompressed bundle (they normalise IDs differently).
    let plain_of = |tool: &Path, tag: &str| -> Vec<u8> {
        let p = dir.path(&format!("{tag}.bundle"));
        assert!(run_in(&dir.0, tool, &bundle_args(&ins, &parg(&p)))
            .status
            .success());
        std::fs::read(&p).unwrap()
    };
    let plain22 = plain_of(&llvm22, "plain22");
    let plain19 = plain_of(&llvm19, "plain19");
    let expected = unbundle_all(&dir, &llvm22, &dir.path("plain22.bundle"), "plain").unwrap();
    let mut cases: Vec<Case<'_>> = Vec::new();
    for version in ["2", "3"] {
        for level in [None, Some("1"), Some("9"), Some("19")] {
            let mut extra = vec![arg("-compress")];
            if let Some(l) = level {
                extra.push(format!("-compression-level={l}"));
            }
            cases.push((
                format!("llvm22-v{version}-{level:?}"),
                &llvm22,
                vec![("COMPRESSED_BUNDLE_FORMAT_VERSION", version)],
                extra,
            ));
        }
    }
    cases.push((
        "llvm22-env".into(),
        &llvm22,
        vec![("OFFLOAD_BUNDLER_COMPRESS", "1")],
        vec![],
    ));
    cases.push(("llvm19".into(), &llvm19, vec![], vec![arg("-compress")]));
    cases.push((
        "llvm19-l19".into(),
        &llvm19,
        vec![],
        vec![arg("-compress"), arg("-compression-level=19")],
    ));
    for (name, tool, env, extra) in &cases {
        let out = dir.path(&format!("{name}.ccob"));
        let mut args = bundle_args(&ins, &parg(&out));
        args.extend(extra.iter().cloned());
        let r = run_in_env(&dir.0, tool, &args, env);
        assert!(r.status.success(), "{name}: {}", describe(&r));
        let blob = std::fs::read(&out).unwrap();
        let plain_bytes = if *tool == llvm19.as_path() {
            &plain19
        } else {
            &plain22
        };
        let c = CompressedBundle::parse(&blob).unwrap();
        assert_eq!(c.hash(), truncated_md5(plain_bytes), "{name}");
        let options = ReadOptions::default();
        assert_eq!(
            &c.decompress(&options).unwrap(),
            plain_bytes,
            "{name}: library decompression"
        );
        // The header loader-sim writes for the same bundle has the same fields.
        let ours_blob = offload_image::write::ccob::compress(
            plain_bytes,
            &offload_image::write::ccob::CcobOptions {
                version: c.version(),
                ..Default::default()
            },
        )
        .unwrap();
        let o = CompressedBundle::parse(&ours_blob).unwrap();
        assert_eq!(
            (o.version(), o.method(), o.uncompressed_size(), o.hash()),
            (c.version(), c.method(), c.uncompressed_size(), c.hash()),
            "{name}"
        );
        assert_eq!(
            &ours_blob[..8],
            &blob[..8],
            "{name}: magic, version, method"
        );
        // Uncompressed size and hash: bytes 12..24 (v2) or 16..32 (v3).
        let fields = if c.version() == 3 { 16..32 } else { 12..24 };
        assert_eq!(
            &ours_blob[fields.clone()],
            &blob[fields],
            "{name}: uncompressed size and hash bytes"
        );
        // CLI: -unbundle and -list.
        let args = vec![
            arg("-unbundle"),
            arg("-type=o"),
            format!("-targets={TARGETS}"),
            format!("-input={}", out.display()),
        ];
        let outs: Vec<_> = (0..IDS.len())
            .map(|i| dir.path(&format!("{name}-o{i}")))
            .collect();
        let mut full = args.clone();
        full.extend(outs.iter().map(|o| format!("-output={}", o.display())));
        let r = run_ours(&dir.0, "offload-bundler", &full);
        assert!(r.status.success(), "{name}: {}", describe(&r));
        let got: Vec<Vec<u8>> = outs.iter().map(|o| std::fs::read(o).unwrap()).collect();
        assert!(got == expected, "{name}: loader-sim unbundled differently");
        let list = vec![
            arg("-list"),
            arg("-type=o"),
            format!("-input={}", out.display()),
        ];
        let l = run_in(&dir.0, &llvm22, &list);
        let m = run_ours(&dir.0, "offload-bundler", &list);
        assert_eq!(l.stdout, m.stdout, "{name}: -list");
    }
}

/// Corpus CCOBs (v1 by hand, v2 zlib by LLVM 19's library, v2/v3 zstd by the tools)
/// decompress to the content the manifest records.
#[test]
fn corpus_ccobs_match_manifest() {
    let manifest = std::fs::read_to_string(corpus("MANIFEST.jsonl")).unwrap();
    let mut n = 0;
    for line in manifest.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        if r["record"] != "file" || r["format"] != "ccob" || r["malformed"] == true {
            continue;
        }
        let file = r["file"].as_str().unwrap();
        let blob = std::fs::read(corpus(file)).unwrap();
        let c = CompressedBundle::parse(&blob).unwrap();
        let out = c.decompress(&ReadOptions::default()).unwrap();
        let sha = {
            use std::fmt::Write;
            let d = <sha2::Sha256 as sha2::Digest>::digest(&out);
            d.iter().fold(String::new(), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            })
        };
        assert_eq!(
            Some(sha.as_str()),
            r["decompressed_sha256"].as_str(),
            "{file}"
        );
        assert_eq!(
            Some(c.version() as u64),
            r["ccob_version"].as_u64(),
            "{file}"
        );
        n += 1;
    }
    assert!(n >= 7, "only {n} compressed corpus files");
}
