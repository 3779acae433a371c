//! `offload_dropin::llvm::archive::write_gnu` against `llvm-ar-22 rcD --format=gnu` (the
//! same `writeArchive(K_GNU, Deterministic)` that `clang-offload-bundler` and
//! `clang-offload-packager` call), byte for byte, on member mixes that decide the symbol
//! table: none symbolic (PTX text), ELF objects with and without global symbols, LLVM
//! bitcode, short and long (string-table) names.

use crate::common::{self, run, tool};

use offload_dropin::llvm::archive::{write_gnu, NewMember};

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-22 and llvm-ar-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn gnu_archives_match_llvm_ar() {
    if !common::external("clang-22 and llvm-ar-22") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("offload-dropin-ar-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let clang = tool("clang-22");
    let ar = tool("llvm-ar-22");
    std::fs::write(
        dir.join("k.c"),
        "int counter = 1;\nint kernel_entry(int x) { return x + counter; }\n\
         static int hidden(void) { return 2; }\nint use_hidden(void) { return hidden(); }\n",
    )
    .unwrap();
    std::fs::write(dir.join("empty.c"), "static int only_local = 4;\n").unwrap();
    run(&clang, &["-c", "-O1", "k.c", "-o", "k.o"], &dir);
    run(
        &clang,
        &["--target=i386-linux-gnu", "-c", "-O1", "k.c", "-o", "k32.o"],
        &dir,
    );
    run(&clang, &["-c", "empty.c", "-o", "nosyms.o"], &dir);
    run(&clang, &["-c", "-flto", "-O1", "k.c", "-o", "k.bc"], &dir);
    std::fs::write(
        dir.join("kernel.ptx"),
        "//\n.version 7.0\n.target sm_70\n.address_size 64\n",
    )
    .unwrap();
    std::fs::copy(
        dir.join("k.o"),
        dir.join("a-member-name-longer-than-sixteen.o"),
    )
    .unwrap();
    std::fs::write(dir.join("odd"), b"odd-sized\n!").unwrap();
    let cases: &[&[&str]] = &[
        &["kernel.ptx"],
        &["kernel.ptx", "odd"],
        &["nosyms.o"],
        &["k.o"],
        &["k.o", "k32.o", "kernel.ptx"],
        &["k.bc", "odd", "a-member-name-longer-than-sixteen.o"],
        &[
            "a-member-name-longer-than-sixteen.o",
            "k.bc",
            "nosyms.o",
            "kernel.ptx",
        ],
    ];
    for (n, members) in cases.iter().enumerate() {
        let out = format!("case{n}.a");
        let mut args = vec!["rcD", "--format=gnu", out.as_str()];
        args.extend_from_slice(members);
        run(&ar, &args, &dir);
        let want = std::fs::read(dir.join(&out)).unwrap();
        let new: Vec<NewMember> = members
            .iter()
            .map(|m| NewMember {
                name: m.to_string(),
                data: std::fs::read(dir.join(m)).unwrap(),
            })
            .collect();
        let ours = write_gnu(&new).unwrap_or_else(|e| panic!("{members:?}: {e}"));
        assert!(ours == want, "{members:?}: archive differs from llvm-ar's");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
