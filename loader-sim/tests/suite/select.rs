//! `loader-sim select` against the contract of `CLI.md`, on corpus files (bytes checked
//! against the SHA-256 that LLVM's tools extracted, `MANIFEST.jsonl`).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::common;
use common::{corpus, loader_sim as run, manifest_sha, sha256};

fn json_lines(out: &Output) -> Vec<Value> {
    common::json_lines(&out.stdout)
}

#[test]
fn one_record_per_unit_and_target() {
    let f = corpus("bundles/hip_6arch.bundle");
    let out = run(&[
        "select",
        f.to_str().unwrap(),
        "--target",
        "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
        "--target",
        "gfx1100",
        "--json",
        "--sha256",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = json_lines(&out);
    assert_eq!(recs.len(), 2);
    let r = &recs[0];
    assert_eq!(r["container"], "file");
    assert_eq!(r["bundle_index"], 0);
    assert_eq!(r["target"], "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-");
    assert_eq!(r["selected"], "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");
    assert_eq!(r["size"], 4048);
    assert_eq!(
        r["sha256"].as_str().unwrap(),
        manifest_sha(
            "bundles/hip_6arch.bundle",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"
        )
    );
    // The offset points at the selected bytes in the file.
    let data = std::fs::read(&f).unwrap();
    let off = r["offset"].as_u64().unwrap() as usize;
    assert_eq!(
        sha256(&data[off..off + 4048]),
        r["sha256"].as_str().unwrap()
    );
    assert!(r.get("rejected").is_none());
    assert_eq!(recs[1]["selected"], "hipv4-amdgcn-amd-amdhsa--gfx1100");
}

#[test]
fn no_compatible_image_exits_1_and_explains() {
    let f = corpus("bundles/hip_6arch.bundle");
    let out = run(&[
        "select",
        f.to_str().unwrap(),
        "--target",
        "gfx1031",
        "--json",
        "--explain",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let recs = json_lines(&out);
    assert_eq!(recs[0]["selected"], Value::Null);
    assert_eq!(recs[0]["offset"], Value::Null);
    let rejected = recs[0]["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 7);
    assert!(rejected
        .iter()
        .any(|r| r["image"] == "hipv4-amdgcn-amd-amdhsa--gfx1030"
            && r["reason"] == "gfx1030 code does not run on gfx1031"));
}

#[test]
fn compressed_units_have_no_offset_and_o_writes_the_image() {
    let f = corpus("compressed/hip_6arch.zstd.ccob");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let o = dir.join("select-gfx942.co");
    let out = run(&[
        "select",
        f.to_str().unwrap(),
        "--target",
        "gfx942:sramecc+:xnack-",
        "--json",
        "-o",
        o.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let recs = json_lines(&out);
    assert_eq!(recs[0]["offset"], Value::Null);
    assert_eq!(
        sha256(&std::fs::read(&o).unwrap()),
        manifest_sha(
            "compressed/hip_6arch.zstd.ccob",
            "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"
        )
    );
}

#[test]
fn many_units_one_record_each() {
    let f = corpus("driver/libfat.a");
    let out = run(&[
        "select",
        f.to_str().unwrap(),
        "--target",
        "gfx906",
        "--target",
        "gfx90a:sramecc-:xnack+",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let recs = json_lines(&out);
    assert_eq!(recs.len(), 4);
    let containers: Vec<&str> = recs
        .iter()
        .map(|r| r["container"].as_str().unwrap())
        .collect();
    assert_eq!(
        containers,
        [
            "member hip_rdc.o",
            "member hip_rdc.o",
            "member k2_rdc.o",
            "member k2_rdc.o"
        ]
    );
    assert_eq!(recs[3]["selected"], "hip-amdgcn-amd-amdhsa--gfx90a:xnack+");
    // -o needs one unit and one target.
    let o = Path::new(env!("CARGO_TARGET_TMPDIR")).join("never.bin");
    let out = run(&[
        "select",
        f.to_str().unwrap(),
        "--target",
        "gfx906",
        "-o",
        o.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .starts_with("loader-sim: error: -o needs exactly one unit"));
    assert!(!o.exists());
}

#[test]
fn kind_policy_and_bad_targets() {
    let f = corpus("packager/multi3.offbin");
    let f = f.to_str().unwrap();
    let pick = |extra: &[&str]| {
        let mut args = vec!["select", f, "--target", "sm_86", "--json"];
        args.extend_from_slice(extra);
        let out = run(&args);
        json_lines(&out)[0]["selected"].clone()
    };
    // The sm_80 PTX (named as nvcc's virtual architecture) for any kind; the sm_80 bitcode
    // for OpenMP.
    assert_eq!(pick(&[]), "nvptx64-nvidia-cuda--compute_80");
    assert_eq!(pick(&["--kind", "openmp"]), "nvptx64-nvidia-cuda--sm_80");
    assert_eq!(pick(&["--kind", "hip"]), Value::Null);
    // Best vs first: cuda_cubins on 8.6 — first takes the sm_70 PTX, best the sm_80 cubin.
    let c = corpus("nvptx/cuda_cubins.offbin");
    let c = c.to_str().unwrap();
    let sel = |policy: &str| {
        json_lines(&run(&[
            "select", c, "--target", "sm_86", "--json", "--policy", policy,
        ]))[0]["selected"]
            .clone()
    };
    assert_eq!(sel("best"), "nvptx64-nvidia-cuda--sm_80");
    assert_eq!(sel("first"), "nvptx64-nvidia-cuda--compute_70");
    assert_eq!(sel("first-by-class"), "nvptx64-nvidia-cuda--sm_80");
    for bad in ["gfx1030:xnack+", "gfx9-generic", "sm_8", "gfx9999"] {
        let out = run(&["select", c, "--target", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("loader-sim: error: invalid --target '{bad}': ")),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1);
    }
}

/// A bundle whose entry ID says `gfx90a:xnack-` around a code object built for
/// `gfx90a:xnack+` (e_flags 0x73F): the ELF header wins, `--strict` rejects it.
#[test]
fn entry_id_and_elf_disagree() {
    let co = std::fs::read(corpus("devobj/saxpy.gfx90a_xnack+.co")).unwrap();
    let ids: [&[u8]; 2] = [
        b"host-x86_64-unknown-linux-gnu-",
        b"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
    ];
    let mut b = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    b.extend_from_slice(&2u64.to_le_bytes());
    let data_at = 32 + ids.iter().map(|i| 24 + i.len() as u64).sum::<u64>();
    for (id, size) in ids.iter().zip([0, co.len() as u64]) {
        b.extend_from_slice(&data_at.to_le_bytes());
        b.extend_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&(id.len() as u64).to_le_bytes());
        b.extend_from_slice(id);
    }
    b.extend_from_slice(&co);
    let f = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mismatch.bundle");
    std::fs::write(&f, &b).unwrap();
    let f = f.to_str().unwrap();
    let list = json_lines(&run(&["list", f, "--json"]));
    assert_eq!(
        list[1]["disagreement"],
        "the container names gfx90a:xnack-, the ELF header says gfx90a:xnack+"
    );
    let lax = json_lines(&run(&[
        "select",
        f,
        "--target",
        "gfx90a:sramecc-:xnack+",
        "--json",
        "--explain",
    ]));
    assert_eq!(lax[0]["selected"], "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");
    assert!(lax[0]["disagreement"]
        .as_str()
        .unwrap()
        .ends_with("the ELF header wins"));
    let off = json_lines(&run(&[
        "select",
        f,
        "--target",
        "gfx90a:sramecc-:xnack-",
        "--json",
        "--explain",
    ]));
    assert_eq!(off[0]["selected"], Value::Null);
    let out = run(&[
        "select",
        f,
        "--target",
        "gfx90a:sramecc-:xnack+",
        "--json",
        "--explain",
        "--strict",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let strict = json_lines(&out);
    assert_eq!(
        strict[0]["rejected"][1]["reason"],
        "the container names gfx90a:xnack-, the ELF header says gfx90a:xnack+ (strict mode)"
    );
}

#[test]
fn list_prints_canonical_targets_for_every_format() {
    for (file, triple, target) in [
        (
            "devobj/saxpy.gfx942_sramecc+_xnack-.co",
            "amdgcn-amd-amdhsa",
            "gfx942:sramecc+:xnack-",
        ),
        (
            "devobj/saxpy.gfx11-generic.co",
            "amdgcn-amd-amdhsa",
            "gfx11-generic",
        ),
        ("devobj/saxpy.sm_90a.cubin", "nvptx64-nvidia-cuda", "sm_90a"),
        (
            "devobj/saxpy.sm_100a.cuda13.cubin",
            "nvptx64-nvidia-cuda",
            "sm_100",
        ),
        (
            "packager/extra_keys.offbin",
            "amdgcn-amd-amdhsa",
            "gfx942:sramecc+:xnack-",
        ),
        ("nvptx/omp_nv_cubins.bundle", "nvptx64-nvidia-cuda", "sm_70"),
    ] {
        let recs = json_lines(&run(&["list", corpus(file).to_str().unwrap(), "--json"]));
        let r = recs.iter().find(|r| r["offload_kind"] != "host").unwrap();
        assert_eq!(
            (
                r["triple"].as_str().unwrap(),
                r["target_id"].as_str().unwrap()
            ),
            (triple, target),
            "{file}"
        );
    }
}

/// Devices from a KFD topology directory (the sysfs layout, written here): a CPU node, a
/// gfx90a with SRAM ECC (capability bit 26) and a gfx1030.
#[test]
fn devices_from_kfd_topology() {
    let topo = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kfd-topology");
    let nodes = [
        (
            "0",
            "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n".to_string(),
        ),
        (
            "1",
            format!(
                "simd_count 416\ncapability {}\ngfx_target_version 90010\n",
                0x0400_0000u32 | 0x0800_0000
            ),
        ),
        (
            "2",
            "simd_count 72\ncapability 0\ngfx_target_version 100300\n".to_string(),
        ),
    ];
    for (n, text) in &nodes {
        let dir = topo.join("nodes").join(n);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("properties"), text).unwrap();
    }
    let f = corpus("bundles/hip_6arch.bundle");
    let t = topo.to_str().unwrap();
    let out = run(&[
        "select",
        f.to_str().unwrap(),
        "--kfd-topology",
        t,
        "--xnack",
        "off",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = json_lines(&out);
    let got: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| {
            (
                r["target"].as_str().unwrap(),
                r["selected"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "gfx90a:sramecc+:xnack-",
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"
            ),
            ("gfx1030", "hipv4-amdgcn-amd-amdhsa--gfx1030"),
        ]
    );
    // Without --xnack the mode is unknown: both gfx90a entries state xnack.
    let out = run(&["select", f.to_str().unwrap(), "--kfd-topology", t, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_lines(&out)[0]["target"], "gfx90a:sramecc+");
}

/// Every way of decoding a compressed bundle (libzstd or ruzstd, with or without a decode
/// thread, with or without the hash check) selects the same image, `-o` writes the bytes
/// LLVM extracts, `--sha256` hashes them, and `--explain` (which decompresses whole)
/// agrees.
#[test]
fn compressed_bundles_stream_the_same_image_every_way() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let cases = [
        ("compressed/hip_6arch.zstd.ccob", "gfx90a:sramecc+:xnack-"),
        ("compressed/hip_6arch.v3-zstd.llvm22.ccob", "gfx1030"),
        (
            "compressed/hip_6arch.v1-zstd.ccob",
            "gfx906:sramecc+:xnack-",
        ),
        (
            "compressed/hip_6arch.zstd-l19.ccob",
            "gfx942:sramecc+:xnack-",
        ),
        ("compressed/hip_6arch.zlib.ccob", "gfx1100"),
    ];
    for (file, target) in cases {
        let f = corpus(file);
        let f = f.to_str().unwrap();
        let explained = run(&["select", f, "--target", target, "--json", "--explain"]);
        assert_eq!(explained.status.code(), Some(0), "{file}");
        let expected = json_lines(&explained)[0]["selected"].clone();
        let name = expected.as_str().expect("an image is selected").to_string();
        let llvm = manifest_sha(file, &name);
        for decoder in ["libzstd", "ruzstd"] {
            for thread in ["always", "never"] {
                for verify in [true, false] {
                    let o = dir.join(format!("stream-{decoder}-{thread}-{verify}.co"));
                    let _ = std::fs::remove_file(&o);
                    let mut args = vec![
                        "select",
                        f,
                        "--target",
                        target,
                        "--json",
                        "--sha256",
                        "--zstd-decoder",
                        decoder,
                        "--decode-thread",
                        thread,
                        "-o",
                        o.to_str().unwrap(),
                    ];
                    if !verify {
                        args.push("--no-verify-hash");
                    }
                    let out = run(&args);
                    assert_eq!(out.status.code(), Some(0), "{file} {args:?}");
                    let r = &json_lines(&out)[0];
                    assert_eq!(r["selected"], expected, "{file} {args:?}");
                    assert_eq!(r["offset"], Value::Null);
                    assert_eq!(r["sha256"], llvm.as_str(), "{file} {args:?}");
                    assert_eq!(sha256(&std::fs::read(&o).unwrap()), llvm, "{file} {args:?}");
                }
            }
        }
    }
}

/// A corrupted hash is reported by the streaming path too, as a note on the record and a
/// warning, and the choice stands: the runtimes load such a bundle (LLVM's bundler checks
/// the hash only with -verbose; COMPATIBILITY.md §13). `--no-verify-hash` does not check
/// it. `-o` leaves no file behind when the selection fails.
#[test]
fn compressed_bundle_hash_mismatch_is_noted_and_the_choice_stands() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut data = std::fs::read(corpus("compressed/hip_6arch.v3-zstd.llvm22.ccob")).unwrap();
    data[31] ^= 0xFF;
    let bad = dir.join("bad-hash.ccob");
    std::fs::write(&bad, &data).unwrap();
    let bad = bad.to_str().unwrap();
    for decoder in ["libzstd", "ruzstd"] {
        let out = run(&[
            "select",
            bad,
            "--target",
            "gfx1030",
            "--zstd-decoder",
            decoder,
        ]);
        // Changed on purpose (issue 47, item 2): was exit 2, the unit damaged.
        assert_eq!(out.status.code(), Some(0), "{decoder}");
        let err = String::from_utf8(out.stderr).unwrap();
        let mismatch =
            "truncated MD5 of the decompressed bundle does not match the header, at byte 24";
        assert!(
            err.contains(&format!("warning: {bad}: file unit 0: {mismatch}")),
            "{err}"
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("hipv4-amdgcn-amd-amdhsa--gfx1030"), "{text}");
        assert!(
            text.contains(&format!("note: file unit 0, target gfx1030: {mismatch}")),
            "{text}"
        );
        // The same choice, the same note, when the unit is opened whole (--explain).
        let out = run(&["select", bad, "--target", "gfx1030", "--explain", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{decoder}");
        let records = json_lines(&out);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0]["selected"], "hipv4-amdgcn-amd-amdhsa--gfx1030");
        assert!(records[0]["runtime_note"]
            .as_str()
            .unwrap()
            .starts_with(mismatch));
        let out = run(&[
            "select",
            bad,
            "--target",
            "gfx1030",
            "--zstd-decoder",
            decoder,
            "--no-verify-hash",
        ]);
        assert_eq!(out.status.code(), Some(0), "{decoder}");
        assert!(!String::from_utf8(out.stderr).unwrap().contains("MD5"));
    }
    // A declared size over the limit is refused before any decoder runs.
    let mut data = std::fs::read(corpus("compressed/hip_6arch.v3-zstd.llvm22.ccob")).unwrap();
    data[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let huge = dir.join("huge.ccob");
    std::fs::write(&huge, &data).unwrap();
    for thread in ["always", "never"] {
        let out = run(&[
            "select",
            huge.to_str().unwrap(),
            "--target",
            "gfx1030",
            "--decode-thread",
            thread,
        ]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("declared decompressed size exceeds the limit, at byte 16"),
            "{err}"
        );
    }
    // -o with two targets is refused, and the file streamed for the first is removed.
    let o = dir.join("two-targets.co");
    let good = corpus("compressed/hip_6arch.zstd.ccob");
    let out = run(&[
        "select",
        good.to_str().unwrap(),
        "--target",
        "gfx1030",
        "--target",
        "gfx1100",
        "-o",
        o.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!o.exists());
}

/// A compressed bundle whose entries share one payload cannot be streamed in one pass;
/// `select` decompresses it whole instead, and `-o` still writes the selected image (the
/// file streamed before the overlap was found is replaced).
#[test]
fn compressed_bundle_with_shared_payloads_falls_back_to_whole_decompression() {
    use offload_image::write::ccob::{compress, CcobOptions, Codec};
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let code = std::fs::read(corpus("compressed/hip_6arch.zstd.ccob")).unwrap();
    let inner = offload_image::ccob::CompressedBundle::parse(&code)
        .unwrap()
        .decompress(&offload_image::ReadOptions::default())
        .unwrap();
    let bundle =
        offload_image::bundle::Bundle::parse(&inner, &offload_image::Limits::DEFAULT).unwrap();
    let gfx1030 = bundle
        .entries()
        .find(|e| e.id == "hipv4-amdgcn-amd-amdhsa--gfx1030")
        .unwrap();
    // Two IDs, one payload (the gfx1030 code object): gfx1030 first, gfx1100 second.
    let ids = [
        "hipv4-amdgcn-amd-amdhsa--gfx1030",
        "hipv4-amdgcn-amd-amdhsa--gfx1100",
    ];
    let table = 32 + ids.iter().map(|i| 24 + i.len()).sum::<usize>();
    let mut b = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    b.extend_from_slice(&2u64.to_le_bytes());
    for id in ids {
        b.extend_from_slice(&(table as u64).to_le_bytes());
        b.extend_from_slice(&(gfx1030.data.len() as u64).to_le_bytes());
        b.extend_from_slice(&(id.len() as u64).to_le_bytes());
        b.extend_from_slice(id.as_bytes());
    }
    b.extend_from_slice(gfx1030.data);
    let ccob = compress(
        &b,
        &CcobOptions {
            version: 3,
            codec: Codec::Zlib { level: 6 },
        },
    )
    .unwrap();
    let f = dir.join("shared-payload.ccob");
    std::fs::write(&f, &ccob).unwrap();
    let o = dir.join("shared-payload.co");
    let out = run(&[
        "select",
        f.to_str().unwrap(),
        "--target",
        "gfx1030",
        "--json",
        "--sha256",
        "-o",
        o.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let r = &json_lines(&out)[0];
    assert_eq!(r["selected"], "hipv4-amdgcn-amd-amdhsa--gfx1030");
    assert_eq!(r["sha256"], sha256(gfx1030.data).as_str());
    assert_eq!(std::fs::read(&o).unwrap(), gfx1030.data);
}

#[test]
fn nvidia_fatbinaries_select_explain_and_write() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nvfatbin/files");
    let file = |f: &str| dir.join(f).to_str().unwrap().to_string();
    // Two fatbinaries in .nv_fatbin: one record each; sm_89 takes the sm_86 cubin (COMPATIBILITY.md §9.4
    // rule 2) over the sm_86 PTX, and --explain says why in the NVPTX words.
    let out = run(&["select", "--target", "sm_89", "--explain", &file("libk.so")]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.matches("selected nvptx64-nvidia-cuda--sm_86").count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("not nvptx64-nvidia-cuda--sm_75: sm_75 cubin runs only on compute capability 7.x, device is 8.9"),
        "{text}"
    );
    assert!(
        text.contains("compatible, but jit code ranks below compatible code"),
        "{text}"
    );
    // --no-jit: a PTX-only fatbinary has nothing to offer (exit 1).
    let out = run(&[
        "select",
        "--target",
        "sm_86",
        "--no-jit",
        "--explain",
        &file("ptx_only.fatbin"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("PTX needs a JIT compiler, which is disabled"),
        "{text}"
    );
    // --policy first: the first compatible entry in stored order (sm_80 before sm_86).
    let out = run(&[
        "select",
        "--target",
        "sm_86",
        "--policy",
        "first",
        "--json",
        &file("cubin_only.fatbin"),
    ]);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["selected"], "nvptx64-nvidia-cuda--sm_80");
    // -o and --sha256 on an LZ4 entry: the bytes cuobjdump extracts (MANIFEST).
    let tmp = std::env::temp_dir().join(format!("loader-sim-nvfatbin-{}", std::process::id()));
    let out = run(&[
        "select",
        "--target",
        "sm_90",
        "--sha256",
        "--json",
        "-o",
        tmp.to_str().unwrap(),
        &file("mixed.speed.all.fatbin"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = "5006a2e3c909f663c41ddf9d599664399d470d07a5e522505a8d869a34153d99";
    assert_eq!(rec["selected"], "nvptx64-nvidia-cuda--sm_90a");
    assert_eq!(rec["sha256"], want);
    let written = std::fs::read(&tmp).unwrap();
    std::fs::remove_file(&tmp).unwrap();
    assert_eq!(sha256(&written), want);
    let manifest = std::fs::read_to_string(dir.join("../MANIFEST")).unwrap();
    assert!(manifest.contains(&format!("mixed.speed.all.fatbin elf sm_90a {want}")));
}

/// `select` says what it chose: the kind of code and its architecture as the toolchain
/// names it (PTX as nvcc's virtual architecture), stored in place, decoded, or streamed
/// from a compressed bundle.
#[test]
fn records_say_what_kind_of_image_was_chosen() {
    let nv = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/nvfatbin/files/mixed.default.fatbin");
    let out = run(&[
        "select".into(),
        nv.to_string_lossy().into_owned(),
        "--target".into(),
        "sm_86".into(),
        "--target".into(),
        "sm_120".into(),
        "--json".into(),
    ]);
    let recs = json_lines(&out);
    let got: Vec<(&str, &str, &str)> = recs
        .iter()
        .map(|r| {
            (
                r["selected"].as_str().unwrap(),
                r["image_kind"].as_str().unwrap(),
                r["arch"].as_str().unwrap(),
            )
        })
        .collect();
    // sm_86 gets its cubin; sm_120 only the sm_86 PTX (no 12.x cubin), named compute_86.
    assert_eq!(
        got,
        [
            ("nvptx64-nvidia-cuda--sm_86", "cubin", "sm_86"),
            ("nvptx64-nvidia-cuda--compute_86", "ptx", "compute_86"),
        ]
    );
    for (file, target, kind, arch) in [
        (
            "compressed/hip_6arch.zstd.ccob",
            "gfx90a:xnack-",
            "elf",
            "gfx90a:xnack-",
        ),
        (
            "bundles/hip_bc.bundle",
            "gfx90a:xnack+",
            "bitcode",
            "gfx90a:xnack+",
        ),
    ] {
        let out = run(&[
            "select".into(),
            corpus(file).to_string_lossy().into_owned(),
            "--target".into(),
            target.into(),
            "--json".into(),
        ]);
        let recs = json_lines(&out);
        assert_eq!(recs[0]["image_kind"], kind, "{file}: {}", recs[0]);
        assert_eq!(recs[0]["arch"], arch, "{file}: {}", recs[0]);
    }
}

/// The entry `select` chooses is checked as the runtime decodes it, without being decoded:
/// in 100 copies of NVIDIA's `mixed.speed.all.fatbin` whose chosen sm_90a cubin (an LZ4
/// entry) has half its stream zeroed in copies 1 and 97, those two choices are `damaged` records with the error the
/// library's decoder (lz4_flex) gives, in the order the walk found them, and every other
/// record is what the intact file gives. `--no-verify-hash` reads only the entry's ELF
/// header, so it selects the damaged entries as if they were whole; `--sha256` decodes them
/// and reports the same errors.
#[test]
fn a_damaged_lz4_entry_is_reported_unless_not_verified() {
    use offload_image::{units, ReadOptions};
    const COPIES: usize = 100;
    const BROKEN: [usize; 2] = [1, 97];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nvfatbin/files");
    let one = std::fs::read(dir.join("mixed.speed.all.fatbin")).unwrap();
    let many = one.repeat(COPIES);
    let read = ReadOptions::default();
    // The sm_90a cubin of a fatbinary: its stream, and what decoding it damaged says.
    let unit = units(&one, &read).next().unwrap().unwrap();
    let open = unit.open(&read).unwrap();
    let image = open
        .images()
        .find(|i| i.target_id == Some("sm_90a") && i.encoded.is_some())
        .unwrap();
    let e = image.encoded.unwrap();
    let (at, len) = (e.stream_at as usize, e.stream.len());
    let mut copy = one.clone();
    copy[at + len / 2..at + len].fill(0);
    let want = offload_image::Encoded {
        stream: &copy[at..at + len],
        ..e
    }
    .decode(&read)
    .unwrap_err();
    let mut damaged = many.clone();
    for b in BROKEN {
        damaged[b * one.len()..(b + 1) * one.len()].copy_from_slice(&copy);
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let (good, bad) = (
        tmp.join("lz4-many.fatbin"),
        tmp.join("lz4-many-damaged.fatbin"),
    );
    std::fs::write(&good, &many).unwrap();
    std::fs::write(&bad, &damaged).unwrap();
    let select = |f: &Path, more: &[&str]| {
        let mut args = vec![
            "select",
            f.to_str().unwrap(),
            "--target",
            "sm_90",
            "--target",
            "sm_75",
            "--json",
        ];
        args.extend_from_slice(more);
        let out = run(&args);
        (out.status.code(), json_lines(&out))
    };
    let (code, intact) = select(&good, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(intact.len(), 2 * COPIES);
    assert_eq!(intact[2]["selected"], "nvptx64-nvidia-cuda--sm_90a");
    assert_eq!(intact[2]["bundle_index"], 1);
    // Records for sm_90 are at 2u, for sm_75 at 2u + 1.
    let kept: Vec<&Value> = intact
        .iter()
        .enumerate()
        .filter(|(i, _)| !BROKEN.iter().any(|b| *i == 2 * b))
        .map(|(_, r)| r)
        .collect();
    for more in [&[][..], &["--sha256"][..]] {
        let (code, records) = select(&bad, more);
        assert_eq!(code, Some(2), "{more:?}");
        assert_eq!(records.len(), 2 * COPIES, "{more:?}");
        let (ok, broken) = records.split_at(2 * COPIES - BROKEN.len());
        if more.is_empty() {
            assert_eq!(ok.iter().collect::<Vec<_>>(), kept);
        }
        for (d, b) in broken.iter().zip(BROKEN) {
            assert_eq!(d["note"], "damaged");
            assert_eq!(d["bundle_index"], b);
            assert_eq!(d["error"], want.kind().name());
            assert_eq!(d["offset"], want.offset() + (b * one.len()) as u64);
        }
    }
    // Not verified: the records of the intact file.
    let (code, records) = select(&bad, &["--no-verify-hash"]);
    assert_eq!(code, Some(0));
    assert_eq!(records, intact);
}
