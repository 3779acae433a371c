//! `tests/comgr/lookup.c`, comgr's `amd_comgr_lookup_code_object` for a bundle, built once
//! per test binary. Shared by the test binaries of `offload-image` and `loader-sim` (the
//! latter includes this file by its path).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The built lookup program; `root` is the repository root. Built into the target's
/// temporary directory under the package's name, so that two test binaries never write
/// the same file.
pub fn lookup(root: &Path) -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let exe = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(concat!(env!("CARGO_PKG_NAME"), "-comgr-lookup"));
        let src = root.join("tests/comgr/lookup.c");
        // $CC, else the first C compiler found (a fresh Debian with only LLVM has no `cc`).
        let compilers: Vec<String> = std::env::var("CC")
            .into_iter()
            .chain(["cc", "clang-22", "clang-19", "clang", "gcc"].map(String::from))
            .collect();
        let status = compilers
            .iter()
            .find_map(|cc| {
                Command::new(cc)
                    .arg("-O1")
                    .arg("-o")
                    .arg(&exe)
                    .arg(&src)
                    .arg("-lamd_comgr")
                    .status()
                    .ok()
            })
            .expect("no C compiler found (tried $CC, cc, clang-22, clang-19, clang, gcc)");
        assert!(
            status.success(),
            "building tests/comgr/lookup.c failed: install Debian's libamd-comgr-dev (amd_comgr.h, libamd_comgr.so)"
        );
        exe
    })
}
