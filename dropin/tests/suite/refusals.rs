//! The bundler writes no output when it refuses its input: not for conflicting targets, not
//! for the object bundle of two targets that normalise to one entry ID (where LLVM 22's
//! `llvm-objcopy` fails after the bundler created the output, which LLVM leaves behind
//! empty), not for a binary bundle of such targets. An output file that existed before a
//! refusal keeps its bytes. Runs the library entry point on the corpus's host object, with
//! no tool from outside the repository.

use std::path::{Path, PathBuf};

const HOST: &str = "host-x86_64-unknown-linux-gnu";

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/corpus")
        .join(rel)
}

/// A fresh directory of its own under the target directory.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn bundle(targets: &[&str], inputs: &[&Path], out: &Path) -> Result<(), String> {
    let mut args = vec![
        "-type=o".to_string(),
        format!("-targets={}", targets.join(",")),
        format!("-output={}", out.display()),
    ];
    args.extend(inputs.iter().map(|i| format!("-input={}", i.display())));
    offload_dropin::bundler::run("clang-offload-bundler", &args).map_err(|e| e.msg)
}

#[test]
fn refused_bundles_leave_no_output() {
    let dir = scratch("dropin-refusals");
    let host = corpus("devobj/host.x86_64.o");
    let dev = corpus("devobj/saxpy.gfx90a.co");
    let out = dir.join("out.o");
    let cases: &[(&[&str], &str)] = &[
        // Two spellings of one processor: LLVM's own refusal, before any output.
        (
            &[
                HOST,
                "hipv4-amdgcn-amd-amdhsa--gfx90a",
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            ],
            "Cannot bundle inputs with conflicting targets",
        ),
        // Two targets that normalise to one entry ID, with an ELF host object: LLVM 22's
        // llvm-objcopy fails and LLVM leaves an empty output; the drop-in leaves none.
        (
            &[
                HOST,
                "openmp-amdgcn-amd-amdhsa-gfx906",
                "openmp-amdgcn-amd-amdhsa-gfx906:sramecc+",
            ],
            "'llvm-objcopy' tool failed",
        ),
        (
            &[
                HOST,
                "openmp-nvptx64-nvidia-cuda--sm_120f",
                "openmp-nvptx64-nvidia-cuda--sm_121f",
            ],
            "'llvm-objcopy' tool failed",
        ),
    ];
    for (targets, why) in cases {
        let _ = std::fs::remove_file(&out);
        let err = bundle(targets, &[&host, &dev, &dev], &out).unwrap_err();
        assert!(err.contains(why), "{targets:?}: {err}");
        assert!(!out.exists(), "{targets:?}: an output file was left behind");

        // An output that was there before is left as it was.
        std::fs::write(&out, b"earlier output").unwrap();
        let err = bundle(targets, &[&host, &dev, &dev], &out).unwrap_err();
        assert!(err.contains(why), "{targets:?}: {err}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            b"earlier output",
            "{targets:?}"
        );
    }

    // A binary bundle (the host input is no ELF object) of targets with one entry ID.
    let _ = std::fs::remove_file(&out);
    let blob = dir.join("blob.bin");
    std::fs::write(&blob, (0..999u32).map(|i| i as u8).collect::<Vec<_>>()).unwrap();
    let targets = [
        HOST,
        "openmp-amdgcn-amd-amdhsa-gfx906",
        "openmp-amdgcn-amd-amdhsa-gfx906:sramecc+",
    ];
    let err = bundle(&targets, &[&blob, &blob, &blob], &out).unwrap_err();
    assert!(err.contains("normalises to the bundle entry ID"), "{err}");
    assert!(!out.exists());

    // The same bundler writes the object when the targets are sound.
    bundle(
        &[HOST, "hipv4-amdgcn-amd-amdhsa--gfx90a"],
        &[&host, &dev],
        &out,
    )
    .unwrap();
    assert!(std::fs::metadata(&out).unwrap().len() > std::fs::metadata(&host).unwrap().len());
}
