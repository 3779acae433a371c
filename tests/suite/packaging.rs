//! The crates package small: `cargo package --list` of the library holds its sources, docs,
//! license and the one corpus file its documentation examples read — not the test corpus —
//! and the other crates hold their sources only.

use std::path::Path;
use std::process::Command;

fn listing(package: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "package",
            "--list",
            "--allow-dirty",
            "--offline",
            "-p",
            package,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Total size of the listed files that exist in `dir` (generated files aside).
fn size(dir: &Path, files: &[String]) -> u64 {
    files
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

#[test]
fn library_package_is_sources_docs_and_license() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = listing("offload-image");
    for needed in [
        "src/lib.rs",
        "src/nvfatbin.rs",
        "README.md",
        "LICENSE.txt",
        "docs/FORMATS.md",
    ] {
        assert!(
            files.iter().any(|f| f == needed),
            "{needed} missing: {files:?}"
        );
    }
    let tests: Vec<_> = files.iter().filter(|f| f.starts_with("tests/")).collect();
    assert_eq!(tests, ["tests/data/corpus/bundles/hip_6arch.bundle"]);
    let total = size(root, &files);
    println!("offload-image: {} files, {total} bytes", files.len());
    // Sources and docs only: 1.17 MB with the PE/COFF and kpack readers (2026-11); 1.57 MB
    // with LTO IR, .aks2 and the compressed OffloadBinary writer; about 1.62 MB with nested
    // OffloadBinaries in units(), the kpack entry sniffing, the parallel driver and the hash
    // decision (issue 45, 47; 2026-12).
    assert!(total < 7 << 18, "library package is {total} bytes");
}

#[test]
fn tool_packages_hold_their_sources_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (package, dir) in [
        ("loader-sim", "loader-sim"),
        ("loader-sim-rt", "loader-sim/rt"),
        ("loader-sim-os", "loader-sim/os"),
        ("offload-dropin", "dropin"),
        ("offload-image-capi", "capi"),
    ] {
        let files = listing(package);
        let stray: Vec<_> = files
            .iter()
            .filter(|f| f.starts_with("tests/") || f.contains("data/"))
            .collect();
        assert!(stray.is_empty(), "{package}: {stray:?}");
        assert!(files.iter().any(|f| f == "Cargo.toml"));
        let total = size(&root.join(dir), &files);
        println!("{package}: {} files, {total} bytes", files.len());
        assert!(total < 2 << 20, "{package} package is {total} bytes");
    }
}
