//! `offload_dropin::llvm::objcopy` against `llvm-objcopy-22`, byte for byte, on ELF files of
//! every class and byte order: relocatable objects, shared objects and executables that
//! clang-22 and lld-22 make for little- and big-endian, 32- and 64-bit targets.
//!
//! For each file: `--add-section=__CLANG_OFFLOAD_BUNDLE__<id>=<file>
//! --set-section-flags=...=readonly,exclude` (what `clang-offload-bundler` runs to bundle),
//! then `--regex --remove-section=__CLANG_OFFLOAD_BUNDLE__.*` on LLVM's result (what it
//! runs to unbundle the host).

use crate::common::{self, run, tool};

use std::path::{Path, PathBuf};

use offload_dropin::llvm::objcopy;

const SOURCE: &str = "int g = 3;\nstatic int s;\n__thread int t;\n\
    int f(int x) { s += x; return g + s + t; }\n\
    __attribute__((weak)) int w(void) { return 1; }\n\
    inline int in(void) { return 2; }\nint u(void);\n\
    #ifdef EXE\nint u(void) { return 5; }\n#endif\n\
    int call(void) { return u() + in(); }\nint _start(void) { return f(1) + w(); }\n";

/// (target triple, is big-endian, is 64-bit).
const TARGETS: &[(&str, bool, bool)] = &[
    ("x86_64-linux-gnu", false, true),
    ("i386-linux-gnu", false, false),
    ("aarch64-linux-gnu", false, true),
    ("armv7-linux-gnueabihf", false, false),
    ("powerpc64-linux-gnu", true, true),
    ("s390x-linux-gnu", true, true),
    ("mips-linux-gnu", true, false),
    ("armebv7-linux-gnueabihf", true, false),
];

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-22, lld-22 and llvm-objcopy-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn objcopy_matches_llvm_objcopy_on_every_class_and_byte_order() {
    if !common::external("clang-22, lld-22 and llvm-objcopy-22") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("offload-dropin-objcopy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.c"), SOURCE).unwrap();
    // Two payloads: odd sizes, so that alignment padding after them shows.
    let payloads: Vec<(String, Vec<u8>)> = vec![
        (
            "__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx90a".into(),
            (0..3001u32).map(|i| (i * 7 + 3) as u8).collect(),
        ),
        (
            "__CLANG_OFFLOAD_BUNDLE__host-x86_64-unknown-linux-gnu".into(),
            Vec::new(),
        ),
    ];
    for (i, (_, data)) in payloads.iter().enumerate() {
        std::fs::write(dir.join(format!("p{i}")), data).unwrap();
    }
    let clang = tool("clang-22");
    let llvm_objcopy = tool("llvm-objcopy-22");
    let mut checked = 0;
    for &(triple, big, wide) in TARGETS {
        let kinds: [(&str, &[&str]); 4] = [
            ("o", &["-c", "-O1"]),
            (
                "g.o",
                &["-c", "-O0", "-g", "-ffunction-sections", "-fdata-sections"],
            ),
            ("so", &["-shared", "-fPIC", "-O1"]),
            ("exe", &["-static", "-O1", "-DEXE"]),
        ];
        for (kind, flags) in kinds {
            let input = format!("{triple}.{kind}");
            let target = format!("--target={triple}");
            let mut args = vec![target.as_str(), "-nostdlib", "-fuse-ld=lld", "t.c", "-o"];
            args.push(&input);
            args.extend_from_slice(flags);
            run(&clang, &args, &dir);
            let host = std::fs::read(dir.join(&input)).unwrap();
            assert_eq!(host[5] == 2, big, "{input}: byte order");
            assert_eq!(host[4] == 2, wide, "{input}: class");

            // Bundling: add the sections.
            let mut args = Vec::new();
            for (i, (name, _)) in payloads.iter().enumerate() {
                args.push(format!("--add-section={name}=p{i}"));
            }
            for (name, _) in &payloads {
                args.push(format!("--set-section-flags={name}=readonly,exclude"));
            }
            let added = format!("{input}.added");
            args.extend(["--".to_string(), input.clone(), added.clone()]);
            run(
                &llvm_objcopy,
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
                &dir,
            );
            let want = std::fs::read(dir.join(&added)).unwrap();
            let sections: Vec<(Vec<u8>, Vec<u8>)> = payloads
                .iter()
                .map(|(n, d)| (n.as_bytes().to_vec(), d.clone()))
                .collect();
            let ours = objcopy::add_sections(&host, &sections)
                .unwrap_or_else(|e| panic!("{input}: add_sections failed: {e}"));
            assert_eq!(ours.len(), want.len(), "{input}: --add-section output size");
            assert!(ours == want, "{input}: --add-section output differs");

            // Unbundling the host: remove them again.
            let removed = format!("{input}.removed");
            run(
                &llvm_objcopy,
                &[
                    "--regex",
                    "--remove-section=__CLANG_OFFLOAD_BUNDLE__.*",
                    "--",
                    &added,
                    &removed,
                ],
                &dir,
            );
            let want = std::fs::read(dir.join(&removed)).unwrap();
            let ours = objcopy::remove_offload_sections(&want_input(&dir, &added))
                .unwrap_or_else(|e| panic!("{input}: remove_offload_sections failed: {e}"));
            assert!(ours == want, "{input}: --remove-section output differs");
            corrupt_inputs_give_errors(&host, &sections, &input);
            checked += 1;
        }
    }
    assert_eq!(checked, TARGETS.len() * 4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Damaged copies of `host` (1 to 4 bytes changed, half of the time in the headers) give
/// an output or an error, never a panic (overflow included: tests build with overflow
/// checks).
fn corrupt_inputs_give_errors(host: &[u8], sections: &[(Vec<u8>, Vec<u8>)], what: &str) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ host.len() as u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..50 {
        let mut d = host.to_vec();
        let span = if round % 2 == 0 {
            d.len().min(128)
        } else {
            d.len()
        };
        for _ in 0..=(next() % 4) {
            let i = (next() % span as u64) as usize;
            d[i] = next() as u8;
        }
        let r = std::panic::catch_unwind(|| {
            let _ = objcopy::add_sections(&d, sections);
            let _ = objcopy::remove_offload_sections(&d);
            let _ = objcopy::sections(&d);
        });
        assert!(r.is_ok(), "{what}: damaged copy {round} panicked");
    }
}

fn want_input(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap()
}

/// `clang-offload-bundler-22` with its links resolved, so that it runs LLVM 22's
/// `llvm-objcopy` (the one next to it).
fn llvm_bundler() -> PathBuf {
    let p = tool("clang-offload-bundler-22");
    std::fs::canonicalize(&p).unwrap_or(p)
}

/// Bundling and unbundling with a big-endian or 32-bit host object, through the library's
/// `bundler::run`, gives LLVM 22's bytes (the tool before this crate read only
/// little-endian ELF, and bundled a big-endian host as an opaque binary).
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-22 and clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn bundler_with_big_endian_and_32_bit_hosts_matches_llvm() {
    if !common::external("clang-22 and clang-offload-bundler-22") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("offload-dropin-be-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.c"), SOURCE).unwrap();
    std::fs::write(
        dir.join("dev"),
        (0..777u32).map(|i| i as u8).collect::<Vec<u8>>(),
    )
    .unwrap();
    let clang = tool("clang-22");
    let bundler = llvm_bundler();
    let p = |n: &str| dir.join(n).display().to_string();
    for triple in [
        "powerpc64-unknown-linux-gnu",
        "mips-unknown-linux-gnu",
        "s390x-unknown-linux-gnu",
        "i386-unknown-linux-gnu",
    ] {
        let host = format!("{triple}.o");
        run(
            &clang,
            &[
                &format!("--target={triple}"),
                "-c",
                "-O1",
                "t.c",
                "-o",
                &host,
            ],
            &dir,
        );
        let targets = format!("-targets=host-{triple},hip-amdgcn-amd-amdhsa--gfx90a");
        let bundle = |out: &str| {
            vec![
                "-type=o".to_string(),
                targets.clone(),
                format!("-input={}", p(&host)),
                format!("-input={}", p("dev")),
                format!("-output={}", p(out)),
            ]
        };
        let args = bundle("llvm.o");
        run(
            &bundler,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            &dir,
        );
        offload_dropin::bundler::run("clang-offload-bundler", &bundle("ours.o"))
            .unwrap_or_else(|e| panic!("{triple}: bundling failed: {}", e.msg));
        let want = std::fs::read(dir.join("llvm.o")).unwrap();
        assert!(
            want.starts_with(b"\x7fELF"),
            "{triple}: LLVM wrote an ELF object"
        );
        assert!(
            std::fs::read(dir.join("ours.o")).unwrap() == want,
            "{triple}: bundled object differs"
        );
        let unbundle = |h: &str, d: &str| {
            vec![
                "-unbundle".to_string(),
                "-type=o".to_string(),
                targets.clone(),
                format!("-input={}", p("llvm.o")),
                format!("-output={}", p(h)),
                format!("-output={}", p(d)),
            ]
        };
        let args = unbundle("lh", "ld");
        run(
            &bundler,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            &dir,
        );
        offload_dropin::bundler::run("clang-offload-bundler", &unbundle("oh", "od"))
            .unwrap_or_else(|e| panic!("{triple}: unbundling failed: {}", e.msg));
        for (l, o) in [("lh", "oh"), ("ld", "od")] {
            assert!(
                std::fs::read(dir.join(l)).unwrap() == std::fs::read(dir.join(o)).unwrap(),
                "{triple}: unbundled {o} differs"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
