//! Compressed bundles written by the drop-in `clang-offload-bundler` against LLVM 22's,
//! byte for byte: zstd at levels 1, 3, 9, 19 and 22 and at the default, the level and the
//! compression chosen by option (`-compress -compression-level=N`) or by environment
//! (`OFFLOAD_BUNDLER_COMPRESS`, `OFFLOAD_BUNDLER_COMPRESSION_LEVEL`), `CCOB` versions 2
//! and 3 (`COMPRESSED_BUNDLE_FORMAT_VERSION`) and the default, binary bundles (`-type=bc`,
//! `-type=o` with a non-ELF host), text bundles (`ll`, `s`, `i`) and object bundles
//! (`-type=o` with an ELF host, where LLVM compresses nothing). Also the `-verbose`
//! reports of compressing and of reading back, line by line (the speed lines are timings
//! and only their shape is compared).
//!
//! zlib is not here: LLVM 22 built with zstd (as Debian's is) never writes zlib; the
//! drop-in's zlib payloads are compared with zlib's `compress2` in
//! `dropin/tests/suite/zlib_compress2.rs`.

use crate::common;

use common::*;

const DEVICE: [&str; 3] = [
    "hipv4-amdgcn-amd-amdhsa--gfx906",
    "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
    "openmp-nvptx64-nvidia-cuda--sm_80",
];

/// A bundle's entries for `ty`: the host first, then three device entries (real code
/// objects for binary bundles, generated text for text bundles).
fn entries(rng: &mut Rng, ty: &str, elf_host: bool) -> Vec<(String, Vec<u8>)> {
    let host = if elf_host {
        std::fs::read(corpus("devobj/host.x86_64.o")).unwrap()
    } else if matches!(ty, "bc" | "o") {
        let n = rng.range(100, 3000);
        rng.opaque(n)
    } else {
        rng.text(4000)
    };
    let mut v = vec![("host-x86_64-unknown-linux-gnu".to_string(), host)];
    for (t, f) in DEVICE.iter().zip([
        "devobj/saxpy.gfx906.co",
        "devobj/saxpy.gfx90a_xnack+.bc",
        "devobj/saxpy.sm_80.cubin",
    ]) {
        let data = if matches!(ty, "bc" | "o") {
            std::fs::read(corpus(f)).unwrap()
        } else {
            // Repetitive text, so that the levels and long-distance matching matter.
            let mut text = rng.text(6000);
            let copy = text.clone();
            text.extend_from_slice(&copy);
            text
        };
        v.push((t.to_string(), data));
    }
    v
}

/// One way of asking for compression: extra arguments and environment.
struct Ask {
    what: String,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
}

fn asks() -> Vec<Ask> {
    let mut v = Vec::new();
    for version in [None, Some("2"), Some("3")] {
        let venv: Vec<(&'static str, String)> = version
            .map(|n| ("COMPRESSED_BUNDLE_FORMAT_VERSION", n.to_string()))
            .into_iter()
            .collect();
        for level in [
            None,
            Some("1"),
            Some("3"),
            Some("9"),
            Some("19"),
            Some("22"),
        ] {
            // By option.
            let mut args = vec![arg("-compress")];
            args.extend(level.map(|l| format!("-compression-level={l}")));
            v.push(Ask {
                what: format!("option level {level:?} version {version:?}"),
                args,
                env: venv.clone(),
            });
            // By environment.
            let mut env = venv.clone();
            env.push(("OFFLOAD_BUNDLER_COMPRESS", "1".into()));
            env.extend(level.map(|l| ("OFFLOAD_BUNDLER_COMPRESSION_LEVEL", l.to_string())));
            v.push(Ask {
                what: format!("environment level {level:?} version {version:?}"),
                args: Vec::new(),
                env,
            });
        }
    }
    // The option's level wins over the environment's.
    v.push(Ask {
        what: "option level 19 over environment level 1".into(),
        args: vec![arg("-compression-level=19")],
        env: vec![
            ("OFFLOAD_BUNDLER_COMPRESS", "1".into()),
            ("OFFLOAD_BUNDLER_COMPRESSION_LEVEL", "1".into()),
        ],
    });
    v
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn compressed_bundles_are_llvm_22s_bytes() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    let llvm22 = llvm("clang-offload-bundler-22");
    let dir = TempDir::new("ccob-bytes");
    let mut rng = Rng::new(0x0ccb_2027);
    let asks = asks();
    let mut compared = 0;
    let mut compressed = 0;
    for (ty, elf_host) in [
        ("bc", false),
        ("o", false),
        ("o", true),
        ("ll", false),
        ("s", false),
        ("i", false),
    ] {
        let entries = entries(&mut rng, ty, elf_host);
        let tag = format!("{ty}{}", if elf_host { "-elf" } else { "" });
        for (n, ask) in asks.iter().enumerate() {
            let mut outs = Vec::new();
            for (who, prog, sub) in [
                ("llvm", &llvm22, None),
                ("ours", &ours(), Some("offload-bundler")),
            ] {
                let out = format!("{tag}-{n}.{who}");
                let mut args: Vec<String> = sub.map(arg).into_iter().collect();
                args.extend(bundling_args(&dir.0, ty, &entries, &tag, &out));
                args.extend(ask.args.iter().cloned());
                let env: Vec<(&str, &str)> =
                    ask.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let r = run_in_env(&dir.0, prog, &args, &env);
                assert!(
                    r.status.success(),
                    "{who} {tag} {}: {}",
                    ask.what,
                    describe(&r)
                );
                outs.push(std::fs::read(dir.0.join(&out)).unwrap());
            }
            assert!(
                outs[0] == outs[1],
                "{tag}, {}: LLVM 22 wrote {} bytes, the drop-in {}",
                ask.what,
                outs[0].len(),
                outs[1].len()
            );
            if outs[0].starts_with(b"CCOB") {
                compressed += 1;
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 6 * asks.len());
    // Every case but the ELF-host object bundles is compressed.
    assert_eq!(compressed, 5 * asks.len());
}

/// A `-verbose` report with the timings (the speed lines) replaced by `<speed>`.
fn report_shape(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(|l| match l.split_once("speed: ") {
            Some((head, tail)) if tail.ends_with(" MB/s") => {
                let number = &tail[..tail.len() - 5];
                let (int, frac) = number.split_once('.').unwrap_or((number, ""));
                assert!(
                    !int.is_empty()
                        && int.bytes().all(|b| b.is_ascii_digit())
                        && frac.len() == 2
                        && frac.bytes().all(|b| b.is_ascii_digit())
                        || number == "inf",
                    "speed line {l:?}"
                );
                format!("{head}speed: <speed> MB/s")
            }
            _ => l.to_string(),
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn verbose_reports_are_worded_as_llvm_22() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    let llvm22 = llvm("clang-offload-bundler-22");
    let dir = TempDir::new("ccob-verbose");
    let mut rng = Rng::new(0x0ccb_2028);
    // Big enough for thousands separators in every size.
    let mut entries = entries(&mut rng, "bc", false);
    entries[0].1 = rng.opaque(40_000);
    for (version, level, by_env) in [("3", "9", false), ("2", "19", true), ("3", "1", true)] {
        let mut reports = Vec::new();
        for (who, prog, sub) in [
            ("llvm", &llvm22, None),
            ("ours", &ours(), Some("offload-bundler")),
        ] {
            let out = format!("v{version}-{level}.{who}");
            let mut args: Vec<String> = sub.map(arg).into_iter().collect();
            args.extend(bundling_args(&dir.0, "bc", &entries, "in", &out));
            let mut env = vec![("COMPRESSED_BUNDLE_FORMAT_VERSION", version)];
            if by_env {
                env.extend([
                    ("OFFLOAD_BUNDLER_VERBOSE", "1"),
                    ("OFFLOAD_BUNDLER_COMPRESS", "1"),
                    ("OFFLOAD_BUNDLER_COMPRESSION_LEVEL", level),
                ]);
            } else {
                args.extend([
                    arg("-verbose"),
                    arg("-compress"),
                    format!("-compression-level={level}"),
                ]);
            }
            let r = run_in_env(&dir.0, prog, &args, &env);
            assert!(r.status.success(), "{who}: {}", describe(&r));
            let mut report = report_shape(&r.stderr);
            // Reading it back: -list and -unbundle print the decompression report.
            let mut list: Vec<String> = sub.map(arg).into_iter().collect();
            list.extend([
                arg("-list"),
                arg("-verbose"),
                arg("-type=bc"),
                format!("-input={out}"),
            ]);
            let r = run_in(&dir.0, prog, &list);
            assert!(r.status.success(), "{who} -list: {}", describe(&r));
            report.extend(report_shape(&r.stderr));
            reports.push(report);
        }
        assert_eq!(reports[0], reports[1], "version {version}, level {level}");
        assert!(
            reports[0].iter().any(|l| l.contains(',')) && reports[0].len() >= 20,
            "the report has sizes with separators: {:?}",
            reports[0]
        );
    }
}
