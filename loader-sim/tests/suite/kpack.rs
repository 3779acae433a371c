//! `.kpack` archives and split host libraries through the command line
//! (`tests/data/kpack`, made by rocm-kpack's own splitter; see its PROVENANCE.md):
//!
//! * `list` on each committed archive gives the code objects of `expected.json` (sha256,
//!   size, architecture), which `clang-offload-bundler` unbundled from the unsplit original;
//! * `select` picks the entry of the device's architecture, from an archive file and from
//!   archives that are members of an `ar` archive;
//! * a malformed archive gives a located error.

use crate::common;

use std::path::PathBuf;

use serde_json::Value;

use common::{json_lines, loader_sim, sha256};

fn data_dir() -> PathBuf {
    common::repo().join("tests/data/kpack")
}

fn expected() -> Value {
    serde_json::from_slice(&std::fs::read(data_dir().join("expected.json")).unwrap()).unwrap()
}

fn archives() -> Vec<Value> {
    expected()["archives"].as_array().unwrap().clone()
}

/// A GNU `ar` archive of `(name, bytes)` members (names of at most 15 bytes are stored in
/// the member header).
fn ar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = b"!<arch>\n".to_vec();
    for (name, data) in members {
        assert!(name.len() < 16);
        let header = format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            format!("{name}/"),
            0,
            0,
            0,
            644,
            data.len()
        );
        assert_eq!(header.len(), 60);
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    out
}

#[test]
fn list_gives_the_archives_code_objects() {
    let mut listed = 0;
    for want in archives() {
        let file = want["file"].as_str().unwrap();
        let path = data_dir().join(file);
        let data = std::fs::read(&path).unwrap();
        let out = loader_sim(&["list", "--json", path.to_str().unwrap()]);
        assert!(out.status.success(), "{file}: {}", common::describe(&out));
        let recs = json_lines(&out.stdout);
        let zstd = want["compression_scheme"] == "zstd-per-kernel";
        let mut got: Vec<(String, u64, String)> = Vec::new();
        for r in &recs {
            assert_eq!(r["format"], "kpack", "{file}");
            assert_eq!(r["container"], "file");
            assert_eq!(r["triple"], "amdgcn-amd-amdhsa");
            assert_eq!(r["offload_kind"], "hip");
            assert_eq!(r["image_kind"], "elf");
            if zstd {
                assert_eq!(r["compression"], "zstd", "{file}");
            } else {
                assert!(r["compression"].is_null(), "{file}");
            }
            let sha = r["sha256"].as_str().unwrap().to_string();
            let size = r["size"].as_u64().unwrap();
            // A plain blob is listed in place: its bytes are at the offset given.
            match r["offset"].as_u64() {
                Some(at) => {
                    assert!(!zstd, "{file}: a zstd entry has no offset");
                    let at = at as usize;
                    assert_eq!(sha256(&data[at..at + size as usize]), sha);
                }
                None => assert!(zstd, "{file}: a plain entry is in place"),
            }
            got.push((r["target_id"].as_str().unwrap().to_string(), size, sha));
        }
        let mut wanted: Vec<(String, u64, String)> = want["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["arch"].as_str().unwrap().to_string(),
                    e["original_size"].as_u64().unwrap(),
                    e["original_sha256"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        got.sort();
        wanted.sort();
        assert_eq!(got, wanted, "{file}");
        listed += got.len();
    }
    assert_eq!(listed, 3 + 4 * 4 + 8);
}

#[test]
fn select_picks_the_entry_of_the_device() {
    let all = archives();
    let dir = common::TempDir::new("kpack-select");
    // The three librocrand archives (zstd), as members of one `ar` archive: one unit each.
    let rocrand: Vec<&Value> = all
        .iter()
        .filter(|a| a["file"].as_str().unwrap().starts_with("rocrand/"))
        .collect();
    assert_eq!(rocrand.len(), 3);
    let datas: Vec<(String, Vec<u8>)> = rocrand
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let file = a["file"].as_str().unwrap();
            (
                format!("a{i}.kpack"),
                std::fs::read(data_dir().join(file)).unwrap(),
            )
        })
        .collect();
    let members: Vec<(&str, &[u8])> = datas
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    let lib = dir.write("rand.a", &ar(&members));
    for (device, arch) in [
        ("gfx90a:xnack+", "gfx90a:xnack+"),
        ("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", "gfx90a:xnack-"),
        ("gfx1030", "gfx1030"),
    ] {
        let out = loader_sim(&[
            "select",
            "--json",
            "--sha256",
            "--target",
            device,
            lib.to_str().unwrap(),
        ]);
        // Exit status 1: two of the three units have no image for the device.
        assert_eq!(
            out.status.code(),
            Some(1),
            "{device}: {}",
            common::describe(&out)
        );
        let recs = json_lines(&out.stdout);
        assert_eq!(recs.len(), 3, "{device}");
        let chosen: Vec<&Value> = recs.iter().filter(|r| !r["selected"].is_null()).collect();
        assert_eq!(
            chosen.len(),
            1,
            "{device}: one archive has the architecture"
        );
        let want = rocrand.iter().find(|a| a["gfx_arches"][0] == arch).unwrap();
        let entry = &want["entries"][0];
        let index = rocrand
            .iter()
            .position(|a| a["gfx_arches"][0] == arch)
            .unwrap();
        assert_eq!(chosen[0]["container"], format!("member a{index}.kpack"));
        assert_eq!(chosen[0]["arch"], arch);
        assert_eq!(chosen[0]["size"], entry["original_size"]);
        assert_eq!(chosen[0]["sha256"], entry["original_sha256"], "{device}");
    }
    // The two-architecture archive: the device's entry, not the other architecture's.
    let path = data_dir().join("jax/none/jax_lib_gfx110X.kpack");
    let gfx110x = all
        .iter()
        .find(|a| a["file"] == "jax/none/jax_lib_gfx110X.kpack")
        .unwrap();
    for device in ["gfx1100", "gfx1101"] {
        let out = loader_sim(&[
            "select",
            "--json",
            "--sha256",
            "--target",
            device,
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{device}: {}", common::describe(&out));
        let recs = json_lines(&out.stdout);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0]["arch"], device);
        let of_device: Vec<&Value> = gfx110x["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["arch"] == device)
            .map(|e| &e["original_sha256"])
            .collect();
        assert_eq!(of_device.len(), 4);
        assert!(of_device.contains(&&recs[0]["sha256"]), "{device}");
    }
}

#[test]
fn a_malformed_archive_gives_a_located_error() {
    let good = std::fs::read(data_dir().join("jax/none/jax_lib_gfx110X.kpack")).unwrap();
    let dir = common::TempDir::new("kpack-bad");
    let toc = u64::from_le_bytes(good[8..16].try_into().unwrap()) as usize;
    let mut cases: Vec<(&str, Vec<u8>, u64, &str)> = Vec::new();
    let mut v = good.clone();
    v[4] = 2;
    cases.push(("version", v, 4, "unsupported-version"));
    let mut v = good.clone();
    v[8..16].copy_from_slice(&(good.len() as u64 + 5).to_le_bytes());
    cases.push(("toc-offset", v, 8, "out-of-bounds"));
    cases.push(("short", good[..10].to_vec(), 0, "truncated"));
    // The TOC is a map: make its first byte an integer.
    let mut v = good.clone();
    v[toc] = 0x05;
    cases.push(("toc-not-a-map", v, toc as u64, "malformed"));
    for (name, data, offset, kind) in cases {
        let path = dir.write(&format!("{name}.kpack"), &data);
        let out = loader_sim(&["list", "--json", path.to_str().unwrap()]);
        assert!(!out.status.success(), "{name}");
        let recs = json_lines(&out.stdout);
        assert_eq!(recs.len(), 1, "{name}");
        assert_eq!(recs[0]["note"], "damaged", "{name}");
        assert_eq!(recs[0]["error"], kind, "{name}: {}", recs[0]);
        assert_eq!(recs[0]["offset"], offset, "{name}");
        // In an `ar` archive the error is located in the file.
        let lib = dir.write(&format!("{name}.a"), &ar(&[("x.kpack", &data)]));
        let out = loader_sim(&["list", "--json", lib.to_str().unwrap()]);
        let recs = json_lines(&out.stdout);
        let damaged: Vec<&Value> = recs.iter().filter(|r| r["note"] == "damaged").collect();
        assert_eq!(damaged.len(), 1, "{name}: {recs:?}");
        assert_eq!(damaged[0]["offset"], offset + 68, "{name}");
    }
}

/// The committed minimal split host of `host` (`tests/data/kpack/split`, made by its
/// `make.sh` from the real split libraries' wrapper and ref sections).
fn split_host(host: &str) -> Vec<u8> {
    let name = match host {
        "rocrand" => "librocrand.so.1.1",
        "jax" => "xla_rocm_plugin.so",
        other => panic!("{other}"),
    };
    std::fs::read(data_dir().join("split").join(name)).unwrap()
}

/// Lays out an oracle case's install tree under `root`: its archives (patched as the case
/// says) and the split host at the case's library path. Returns the library's path.
fn build_tree(root: &std::path::Path, case: &Value) -> PathBuf {
    for (rel, f) in case["files"].as_object().unwrap() {
        let mut data = std::fs::read(data_dir().join(f["from"].as_str().unwrap())).unwrap();
        for p in f["patch"].as_array().unwrap() {
            let at = p[0].as_u64().unwrap() as usize;
            let hex = p[1].as_str().unwrap();
            for (i, b) in (0..hex.len()).step_by(2).enumerate() {
                data[at + i] = u8::from_str_radix(&hex[b..b + 2], 16).unwrap();
            }
        }
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    }
    let lib = PathBuf::from(
        case["lib"]
            .as_str()
            .unwrap()
            .replace("$ROOT", root.to_str().unwrap()),
    );
    std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
    std::fs::write(&lib, split_host(case["host"].as_str().unwrap())).unwrap();
    lib
}

fn run_env(cwd: &std::path::Path, args: &[&str], env: &[(String, String)]) -> std::process::Output {
    let mut c = std::process::Command::new(common::ours());
    c.args(args).current_dir(cwd);
    for v in [
        "ROCM_KPACK_PATH",
        "ROCM_KPACK_PATH_PREFIX",
        "ROCM_KPACK_DISABLE",
    ] {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The split host libraries give, per wrapper, the ref record and TOC key the real split
/// libraries' sections hold.
#[test]
fn split_hosts_read_as_the_runtime_reads_them() {
    use offload_image::host::kpack::split_wrappers;
    use offload_image::host::HostFile;
    use offload_image::kpack::KpackRef;
    for (host, wrappers) in [("rocrand", 1), ("jax", 45)] {
        let data = split_host(host);
        let file = HostFile::parse(&data).unwrap();
        let refs = std::fs::read(data_dir().join(host).join("ref.msgpack")).unwrap();
        let want = KpackRef::parse(&refs).unwrap();
        let got = split_wrappers(&file);
        assert_eq!(got.len(), wrappers, "{host}");
        for (i, w) in got.iter().enumerate() {
            let w = w.as_ref().unwrap();
            assert_eq!(w.reference, want);
            assert_eq!(w.lookup_key, format!("{}#{i}", want.kernel_name));
            let at = w.ref_offset as usize;
            assert_eq!(&data[at..at + refs.len()], refs.as_slice());
        }
    }
}

/// Every oracle case with one ISA name that `--target` takes: `loader-sim select` on the
/// split host in the case's tree, with its environment, gives rocm-kpack's C loader's
/// answer: the archive and architecture matched and the code object's sha256, or the error
/// code; and tries the archive paths the loader tried, in its order.
#[test]
fn select_on_split_libraries_answers_as_the_c_loader() {
    let oracle: Value =
        serde_json::from_slice(&std::fs::read(data_dir().join("oracle.json")).unwrap()).unwrap();
    let mut replayed = 0;
    for case in oracle["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let arches = case["arches"].as_array().unwrap();
        let arch = arches[0].as_str().unwrap();
        // `--target` takes one device, named as a target ID.
        if arches.len() != 1 || arch.contains("::") || arch.contains("foo") || arch.ends_with("--")
        {
            continue;
        }
        let dir = common::TempDir::new("kpack-oracle");
        let root = std::fs::canonicalize(&dir.0).unwrap();
        let lib = build_tree(&root, case);
        let sub = |s: &str| s.replace("$ROOT", root.to_str().unwrap());
        let env: Vec<(String, String)> = case["env"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), sub(v.as_str().unwrap())))
            .collect();
        let out = run_env(
            &root,
            &[
                "select",
                "--json",
                "--explain",
                "--target",
                arch,
                lib.to_str().unwrap(),
            ],
            &env,
        );
        let recs = json_lines(&out.stdout);
        let wrapper = case["wrapper"].as_u64().unwrap();
        let rec = recs
            .iter()
            .find(|r| r["bundle_index"] == wrapper)
            .unwrap_or_else(|| panic!("{name}: {}", common::describe(&out)));
        let tried: Vec<String> = rec["tried"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|p| p[0].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default();
        let probed: Vec<String> = case["probed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| sub(p[0].as_str().unwrap()))
            .collect();
        assert_eq!(tried, probed, "{name}");
        match (&case["result"]["ok"], &case["result"]["error"]) {
            (ok, _) if ok.is_object() => {
                assert_eq!(rec["sha256"], ok["sha256"], "{name}: {rec}");
                assert_eq!(rec["size"], ok["size"], "{name}");
                // The C loader names the archive by its absolute path; loader-sim as the
                // candidate path gave it (relative to the working directory for a relative
                // `ROCM_KPACK_PATH` item).
                assert_eq!(
                    root.join(rec["archive"].as_str().unwrap()),
                    PathBuf::from(sub(case["matched"]["archive"].as_str().unwrap())),
                    "{name}"
                );
                assert_eq!(rec["arch"], case["matched"]["arch"], "{name}");
                assert!(rec["kpack_error"].is_null());
            }
            (_, code) => {
                assert_eq!(rec["kpack_error"], *code, "{name}: {rec}");
                assert!(rec["selected"].is_null());
                assert_eq!(out.status.code(), Some(1), "{name}");
            }
        }
        replayed += 1;
    }
    assert_eq!(replayed, 25);
}

/// The librocrand tree of KPACK.md §5 under `root`, with the split host and the archives
/// of `keep` (all three committed ones when `None`). Returns the library's path.
fn rocrand_tree(root: &std::path::Path, keep: &[&str]) -> PathBuf {
    let stage = root.join("math-libs/rocRAND/stage");
    std::fs::create_dir_all(stage.join("lib")).unwrap();
    std::fs::create_dir_all(stage.join(".kpack")).unwrap();
    for arch in keep {
        let name = format!("rand_lib_{arch}.kpack");
        std::fs::copy(
            data_dir().join("rocrand/.kpack").join(&name),
            stage.join(".kpack").join(&name),
        )
        .unwrap();
    }
    let lib = stage.join("lib/librocrand.so.1.1");
    std::fs::write(&lib, split_host("rocrand")).unwrap();
    lib
}

const ROCRAND_ARCHES: [&str; 3] = ["gfx1030", "gfx90a:xnack+", "gfx90a:xnack-"];

/// With every archive installed, `select` on the split library gives, per device, the code
/// object `clang-offload-bundler` unbundles from the unsplit librocrand for that
/// architecture (`expected.json`), and `doctor` finds that every device loads it.
#[test]
fn split_library_with_its_archives_loads_the_originals_code() {
    let dir = common::TempDir::new("kpack-split-ok");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let lib = rocrand_tree(&root, &ROCRAND_ARCHES);
    let all = archives();
    let devices = [
        ("gfx1030", "gfx1030"),
        ("gfx90a:sramecc+:xnack+", "gfx90a:xnack+"),
        ("gfx90a:sramecc-:xnack-", "gfx90a:xnack-"),
    ];
    for (device, arch) in devices {
        let out = run_env(
            &root,
            &[
                "select",
                "--json",
                "--target",
                device,
                lib.to_str().unwrap(),
            ],
            &[],
        );
        assert!(out.status.success(), "{device}: {}", common::describe(&out));
        let recs = json_lines(&out.stdout);
        assert_eq!(recs.len(), 1);
        let want = all.iter().find(|a| a["gfx_arches"][0] == arch).unwrap();
        assert_eq!(recs[0]["sha256"], want["entries"][0]["original_sha256"]);
        assert_eq!(recs[0]["arch"], arch);
        assert_eq!(
            recs[0]["toc_key"],
            "math-libs/rocRAND/stage/lib/librocrand.so.1.1#0"
        );
        assert_eq!(
            PathBuf::from(recs[0]["archive"].as_str().unwrap()),
            root.join(format!(
                "math-libs/rocRAND/stage/.kpack/rand_lib_{arch}.kpack"
            ))
        );
    }
    let mut args = vec!["doctor", "--json"];
    for (device, _) in devices {
        args.extend(["--target", device]);
    }
    let path = root.to_str().unwrap().to_string();
    args.push(&path);
    let out = run_env(&root, &args, &[]);
    let recs = json_lines(&out.stdout);
    // The archives are judged too, each as a unit of its own (an archive of one
    // architecture holds nothing for the others); the split library loads everywhere.
    let libs: Vec<&Value> = recs
        .iter()
        .filter(|r| r["file"].as_str() == lib.to_str())
        .collect();
    assert_eq!(libs.len(), 3, "{}", common::describe(&out));
    for r in libs {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["units"], 1);
    }
}

/// One archive missing: `doctor` gives kpack error 13, names the archive file the loader
/// looked for first and the device package that carries it; `select` gives 13 too. An
/// archive of another architecture named by `ROCM_KPACK_PATH`: 14, with its `gfx_arches`.
#[test]
fn split_library_missing_or_wrong_archive_is_explained() {
    let dir = common::TempDir::new("kpack-split-missing");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let lib = rocrand_tree(&root, &["gfx1030", "gfx90a:xnack-"]);
    let lib_s = lib.to_str().unwrap();
    let out = run_env(
        &root,
        &["doctor", "--json", "--target", "gfx90a:xnack+", lib_s],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    let recs = json_lines(&out.stdout);
    let r = &recs[0];
    assert_eq!(r["status"], "none");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("kpack error 13 (KPACK_ERROR_ARCHIVE_NOT_FOUND)"),
        "{reason}"
    );
    // The reason leads with the archive to install as the device package ships it (the
    // splitter names an archive after its code's architecture; rocm-sdk-device-gfx90a's
    // code is built for the bare processor), then every other file name the loader tried:
    // the C loader's trace (oracle.json) tries the xnack+ name first and the bare one last.
    let install = root.join("math-libs/rocRAND/stage/.kpack/rand_lib_gfx90a.kpack");
    assert!(
        reason.contains(&format!(
            "expected {} (as a device package for gfx90a ships it) or one the loader tries \
             before it: rand_lib_gfx90a:xnack+.kpack",
            install.display()
        )),
        "{reason}"
    );
    assert_eq!(r["hints"][0]["kind"], "install");
    assert_eq!(r["hints"][0]["value"], "rocm-sdk-device-gfx90a");
    let out = run_env(
        &root,
        &["select", "--json", "--target", "gfx90a:xnack+", lib_s],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_lines(&out.stdout)[0]["kpack_error"], 13);
    // The archives that are there still load.
    let out = run_env(
        &root,
        &["doctor", "--json", "--target", "gfx1030", lib_s],
        &[],
    );
    assert!(out.status.success());
    assert_eq!(json_lines(&out.stdout)[0]["status"], "ok");

    // Wrong architecture: ROCM_KPACK_PATH names the gfx1030 archive for a gfx1100 device.
    let other = root.join("math-libs/rocRAND/stage/.kpack/rand_lib_gfx1030.kpack");
    let env = [(
        "ROCM_KPACK_PATH".to_string(),
        other.to_str().unwrap().to_string(),
    )];
    let out = run_env(
        &root,
        &["doctor", "--json", "--target", "gfx1100", lib_s],
        &env,
    );
    assert_eq!(out.status.code(), Some(1));
    let r = &json_lines(&out.stdout)[0];
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("kpack error 14 (KPACK_ERROR_ARCH_NOT_FOUND)"),
        "{reason}"
    );
    assert!(
        reason.contains(&format!("{} has gfx_arches gfx1030", other.display())),
        "{reason}"
    );
    let out = run_env(
        &root,
        &["select", "--json", "--target", "gfx1100", lib_s],
        &env,
    );
    assert_eq!(json_lines(&out.stdout)[0]["kpack_error"], 14);
}

/// `list` on a split library lists, per wrapper, the code objects of its installed
/// archives, each with the archive (`source`) and TOC key: the same code objects as
/// `expected.json` (the unsplit original's).
#[test]
fn list_on_a_split_library_lists_its_archives() {
    let all = archives();
    let dir = common::TempDir::new("kpack-split-list");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let lib = rocrand_tree(&root, &ROCRAND_ARCHES);
    // The JAX plugin beside it, with its two zstd archives (KPACK.md §5's layout).
    let jax = root.join("jax_plugins/xla_rocm7");
    std::fs::create_dir_all(jax.join(".kpack")).unwrap();
    for a in ["gfx90a", "gfx1100"] {
        let name = format!("jax_lib_{a}.kpack");
        std::fs::copy(
            data_dir().join("jax/.kpack").join(&name),
            jax.join(".kpack").join(&name),
        )
        .unwrap();
    }
    let jax_lib = jax.join("xla_rocm_plugin.so");
    std::fs::write(&jax_lib, split_host("jax")).unwrap();
    for (lib, prefix, count) in [(&lib, "rocrand/", 3), (&jax_lib, "jax/.kpack/", 8)] {
        let out = run_env(&root, &["list", "--json", lib.to_str().unwrap()], &[]);
        assert!(out.status.success(), "{}", common::describe(&out));
        let recs = json_lines(&out.stdout);
        assert_eq!(recs.len(), count, "{}", lib.display());
        for r in &recs {
            assert_eq!(r["format"], "kpack");
            let source = PathBuf::from(r["source"].as_str().unwrap());
            let file = source.file_name().unwrap().to_str().unwrap();
            let want = all
                .iter()
                .find(|a| {
                    let f = a["file"].as_str().unwrap();
                    f.starts_with(prefix) && f.ends_with(&format!("/{file}"))
                })
                .unwrap_or_else(|| panic!("{file}"));
            let key = r["toc_key"].as_str().unwrap();
            let (_, index) = key.rsplit_once('#').unwrap();
            assert_eq!(r["container"], format!("wrapper {index}"));
            let entry = want["entries"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["binary_key"] == key && e["arch"] == r["target_id"])
                .unwrap_or_else(|| panic!("{key} in {file}"));
            assert_eq!(r["sha256"], entry["original_sha256"]);
            assert_eq!(r["size"], entry["original_size"]);
        }
    }
}

/// `validate` (`VALIDATE.md` §2.18): a broken ref record is an error at the record, a
/// wrapper with no archive installed and archive names with `:` are warnings, and a TOC
/// architecture the code object's ELF header contradicts is `id-elf-mismatch`.
#[test]
fn validate_checks_split_libraries_and_archives() {
    let dir = common::TempDir::new("kpack-validate");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let host = split_host("rocrand");
    let refs = std::fs::read(data_dir().join("rocrand/ref.msgpack")).unwrap();
    let ref_at = host
        .windows(refs.len())
        .position(|w| w == refs.as_slice())
        .unwrap() as u64;
    let validate = |path: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["validate", "--json"];
        args.extend(extra);
        args.push(path.to_str().unwrap());
        let out = run_env(&root, &args, &[]);
        (out.status.code(), json_lines(&out.stdout))
    };

    // All three archives: two names with `:` (the xnack archives), nothing else.
    let lib = rocrand_tree(&root, &ROCRAND_ARCHES);
    let (code, recs) = validate(&lib, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(recs.len(), 2, "{recs:?}");
    for (r, arch) in recs.iter().zip(["gfx90a:xnack+", "gfx90a:xnack-"]) {
        assert_eq!(r["code"], "kpack-archive-name");
        assert_eq!(r["severity"], "warning");
        assert_eq!(r["offset"], ref_at);
        assert!(r["message"]
            .as_str()
            .unwrap()
            .contains(&format!("rand_lib_{arch}.kpack")));
    }
    assert_eq!(validate(&lib, &["--deny-warnings"]).0, Some(2));

    // No archive installed: each wrapper is `kpack-archive-missing` at its ref record.
    for (host, wrappers) in [("rocrand", 1), ("jax", 45)] {
        let bare = root.join(format!("bare-{host}.so"));
        std::fs::write(&bare, split_host(host)).unwrap();
        let (code, recs) = validate(&bare, &[]);
        assert_eq!(code, Some(0));
        assert_eq!(recs.len(), wrappers);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r["code"], "kpack-archive-missing");
            assert_eq!(r["container"], format!("wrapper {i}"));
        }
    }

    // A ref record that is not a map: the loader's 12, an error at the record.
    let mut broken = host.clone();
    broken[ref_at as usize] = 0x05;
    let bad = root.join("broken.so");
    std::fs::write(&bad, &broken).unwrap();
    let (code, recs) = validate(&bad, &[]);
    assert_eq!(code, Some(2));
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["severity"], "error");
    assert_eq!(recs[0]["container"], "wrapper 0");
    assert_eq!(recs[0]["offset"], ref_at);
    assert!(recs[0]["message"]
        .as_str()
        .unwrap()
        .ends_with("the kpack loader answers 12"));

    // An archive named with a `:` on its own.
    let (_, recs) = validate(
        &data_dir().join("rocrand/.kpack/rand_lib_gfx90a:xnack+.kpack"),
        &[],
    );
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["code"], "kpack-archive-name");

    // The TOC files gfx1100 code under gfx1102: one finding per entry, at its blob.
    let good = std::fs::read(data_dir().join("jax/none/jax_lib_gfx1100.kpack")).unwrap();
    let toc = u64::from_le_bytes(good[8..16].try_into().unwrap()) as usize;
    let mut patched = good[..toc].to_vec();
    let mut rest = good[toc..].to_vec();
    let mut renamed = 0;
    for i in 0..rest.len() - 7 {
        if &rest[i..i + 7] == b"gfx1100" {
            rest[i + 6] = b'2';
            renamed += 1;
        }
    }
    assert_eq!(renamed, 10);
    patched.extend(rest);
    let mis = root.join("mislabelled.kpack");
    std::fs::write(&mis, &patched).unwrap();
    let (code, recs) = validate(&mis, &[]);
    assert_eq!(code, Some(0));
    let offsets: Vec<u64> = recs
        .iter()
        .filter(|r| r["code"] == "id-elf-mismatch")
        .map(|r| r["offset"].as_u64().unwrap())
        .collect();
    let listed = json_lines(
        &loader_sim(&[
            "list",
            "--json",
            data_dir()
                .join("jax/none/jax_lib_gfx1100.kpack")
                .to_str()
                .unwrap(),
        ])
        .stdout,
    );
    let blobs: Vec<u64> = listed
        .iter()
        .map(|r| r["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, blobs);
}

/// With the external tests on: `select` on the split library with its archives chooses, per
/// device, the code object `select` chooses from Debian's unsplit librocrand.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs librocrand.so.1.1 (scripts/fetch-rocm-libs.sh); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn split_library_selects_what_the_unsplit_original_selects() {
    if !common::external("librocrand.so.1.1 (scripts/fetch-rocm-libs.sh)") {
        return;
    }
    let original = common::external_lib("librocrand.so.1.1");
    let dir = common::TempDir::new("kpack-unsplit");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let lib = rocrand_tree(&root, &ROCRAND_ARCHES);
    for device in [
        "gfx1030",
        "gfx90a:sramecc+:xnack+",
        "gfx90a:sramecc+:xnack-",
    ] {
        let pick = |file: &std::path::Path| {
            let out = run_env(
                &root,
                &[
                    "select",
                    "--json",
                    "--sha256",
                    "--target",
                    device,
                    file.to_str().unwrap(),
                ],
                &[],
            );
            assert!(out.status.success(), "{device}: {}", common::describe(&out));
            let recs = json_lines(&out.stdout);
            assert_eq!(recs.len(), 1);
            (recs[0]["sha256"].clone(), recs[0]["arch"].clone())
        };
        assert_eq!(pick(&lib), pick(&original), "{device}");
    }
}

/// A loadable split library: the wrapper and ref record of the real split librocrand (the
/// splitter's `HIPK` wrapper, version 1, pointing at `.rocm_kpack_ref` through an
/// `R_X86_64_RELATIVE` relocation) and the constructor the HIP compiler emits, which hands
/// the wrapper to `__hipRegisterFatBinary` and registers one kernel on the handle.
/// Built by clang-22 against an empty `libamdhip64.so.6` in `dir`.
fn loadable_split_rocrand(dir: &common::TempDir, out: &std::path::Path) {
    let ref_record = data_dir().join("rocrand/ref.msgpack");
    let src = format!(
        r#"
__asm__(".section .rocm_kpack_ref,\"a\",@progbits\nkpack_ref:\n.incbin \"{}\"\n.previous");
extern const char kpack_ref[];
struct hipk {{ unsigned magic, version; const void *ref; unsigned long long reserved1; }};
__attribute__((section(".hipFatBinSegment"), used, aligned(8)))
static const struct hipk wrapper = {{ 0x4B504948, 1, kpack_ref, 0 }};
extern void **__hipRegisterFatBinary(const void *);
extern void __hipRegisterFunction(void **, const void *, char *, const char *, int, void *,
                                  void *, void *, void *, int *);
extern void __hipUnregisterFatBinary(void **);
static void **handle;
static void kernel_stub(void) {{}}
__attribute__((constructor)) static void reg(void) {{
  handle = __hipRegisterFatBinary(&wrapper);
  __hipRegisterFunction(handle, (const void *)kernel_stub, "rocrand_kernel", "rocrand_kernel",
                        -1, 0, 0, 0, 0, 0);
}}
__attribute__((destructor)) static void unreg(void) {{ __hipUnregisterFatBinary(handle); }}
"#,
        ref_record.display()
    );
    let c = dir.write("split.c", src.as_bytes());
    common::hip_runtime_stub(dir);
    let o = std::process::Command::new("clang-22")
        .args(["-shared", "-fPIC", "-fuse-ld=lld", "-o"])
        .arg(out)
        .arg(&c)
        .arg(format!("-L{}", dir.path("").display()))
        .arg("-lamdhip64")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::describe(&o));
}

/// `register`, statically and with the library loaded through the runtime shim, on a
/// split library in the librocrand tree with two of its three archives: for each device
/// whose archive is installed, the code object the unsplit original registers
/// (`expected.json`: its sha256, and its 80 kernels statically); for the third, kpack
/// error 13 naming the archive and the device package, exit status 1. At run time the
/// kernel the constructor registers is bound to the unit.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-22 and ld.lld-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn register_on_a_split_library_takes_the_archives_code_objects() {
    if !common::external("clang-22 and ld.lld-22") {
        return;
    }
    let dir = common::TempDir::new("kpack-register");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let lib = rocrand_tree(&root, &["gfx1030", "gfx90a:xnack-"]);
    loadable_split_rocrand(&dir, &lib);
    let all = archives();
    let sha = |arch: &str| {
        all.iter().find(|a| a["gfx_arches"][0] == arch).unwrap()["entries"][0]["original_sha256"]
            .clone()
    };
    let lib_s = lib.to_str().unwrap();
    for load in [false, true] {
        let mut args = vec!["register", "--json"];
        if load {
            args.push("--load");
        }
        args.push(lib_s);
        for d in ["gfx1030", "gfx90a:sramecc-:xnack-", "gfx90a:xnack+"] {
            args.extend(["--device", d]);
        }
        let out = run_env(&root, &args, &[]);
        assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
        let recs = json_lines(&out.stdout);
        assert_eq!(recs.len(), 3, "{recs:?}");
        for r in &recs {
            assert_eq!(r["registration"], "hip");
            assert!(r["unit"].as_str().unwrap().ends_with("(kpack)"), "{r}");
        }
        let by = |d: &str| recs.iter().find(|r| r["device"] == d).unwrap();
        assert_eq!(by("gfx1030")["sha256"], sha("gfx1030"), "load {load}");
        assert_eq!(by("gfx1030")["selected"], "amdgcn-amd-amdhsa--gfx1030");
        assert_eq!(by("gfx90a:sramecc-:xnack-")["sha256"], sha("gfx90a:xnack-"));
        let missing = by("gfx90a:xnack+");
        assert!(missing["selected"].is_null());
        let error = missing["error"].as_str().unwrap();
        assert!(
            error.starts_with("kpack error 13 (KPACK_ERROR_ARCHIVE_NOT_FOUND)")
                && error.contains("rand_lib_gfx90a:xnack+.kpack")
                && error.ends_with("install rocm-sdk-device-gfx90a"),
            "{error}"
        );
        let entries = by("gfx1030")["entries"].as_array().unwrap().clone();
        if load {
            assert_eq!(by("gfx1030")["entries_from"], "registration");
            assert_eq!(entries.len(), 1);
            assert_eq!(entries[0]["name"], "rocrand_kernel");
            assert_eq!(entries[0]["kind"], "kernel");
            assert_eq!(by("gfx1030")["unregistered"], true);
        } else {
            assert_eq!(by("gfx1030")["entries_from"], "device-image");
            assert_eq!(entries.len(), 80, "the kernels of the gfx1030 code object");
        }
    }
}

/// A zip file (a wheel) at `path` of `(name, bytes)` members, deflated.
fn write_wheel(path: &std::path::Path, members: &[(&str, Vec<u8>)]) {
    use std::io::Write;
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, data) in members {
        z.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(data).unwrap();
    }
    z.finish().unwrap();
}

/// `doctor` on a set of wheels judges them as installed together: the split librocrand of
/// a host wheel finds its archives in the device wheels given beside it (each member at
/// its place under one `site-packages`). With the gfx1030 device wheel, gfx1030 loads;
/// gfx90a:xnack- gets kpack error 13 naming the archive the loader looks for and the
/// device package that carries it, until its device wheel is given too. The host wheel
/// alone loads nowhere.
#[test]
fn doctor_on_a_host_wheel_and_device_wheels() {
    let dir = common::TempDir::new("kpack-wheels");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let lib = "math-libs/rocRAND/stage/lib/librocrand.so.1.1";
    let host = root.join("rocm_sdk_libraries-7.0-py3-none-linux_x86_64.whl");
    write_wheel(&host, &[(lib, split_host("rocrand"))]);
    let device = |arch: &str| {
        let name = format!("rand_lib_{arch}.kpack");
        let whl = root.join(format!(
            "rocm_sdk_device_{}-7.0-py3-none-linux_x86_64.whl",
            arch.replace(':', "_")
        ));
        let data = std::fs::read(data_dir().join("rocrand/.kpack").join(&name)).unwrap();
        write_wheel(
            &whl,
            &[(&format!("math-libs/rocRAND/stage/.kpack/{name}"), data)],
        );
        whl
    };
    let (gfx1030, gfx90a) = (device("gfx1030"), device("gfx90a:xnack-"));
    let doctor = |wheels: &[&PathBuf]| {
        let mut args = vec![
            "doctor",
            "--json",
            "--target",
            "gfx1030",
            "--target",
            "gfx90a:xnack-",
        ];
        let paths: Vec<String> = wheels
            .iter()
            .map(|w| w.to_str().unwrap().to_string())
            .collect();
        args.extend(paths.iter().map(String::as_str));
        let out = run_env(&root, &args, &[]);
        let recs = json_lines(&out.stdout);
        let libs: Vec<Value> = recs.into_iter().filter(|r| r["member"] == lib).collect();
        assert_eq!(libs.len(), 2, "{}", common::describe(&out));
        (out.status.code(), libs)
    };
    let (code, libs) = doctor(&[&host, &gfx1030]);
    assert_eq!(code, Some(1));
    assert_eq!(libs[0]["device"], "gfx1030");
    assert_eq!(libs[0]["status"], "ok", "{}", libs[0]);
    assert_eq!(libs[1]["status"], "none");
    let reason = libs[1]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("kpack error 13 (KPACK_ERROR_ARCHIVE_NOT_FOUND)")
            && reason.contains(
                "expected /site-packages/math-libs/rocRAND/stage/.kpack/rand_lib_gfx90a.kpack \
                 (as a device package for gfx90a ships it) or one the loader tries before it: \
                 rand_lib_gfx90a:xnack-.kpack"
            ),
        "{reason}"
    );
    assert_eq!(libs[1]["hints"][0]["kind"], "install");
    assert_eq!(libs[1]["hints"][0]["value"], "rocm-sdk-device-gfx90a");

    let (code, libs) = doctor(&[&host, &gfx1030, &gfx90a]);
    assert_eq!(code, Some(0));
    assert!(libs.iter().all(|r| r["status"] == "ok"), "{libs:?}");

    let (_, libs) = doctor(&[&host]);
    assert!(libs.iter().all(|r| r["status"] == "none"), "{libs:?}");

    // A wheel's archive is copied to a temporary file and read by its TOC, never held
    // whole; the copy stays under the spill limit, and an archive over it is not read.
    let mut args = vec!["doctor", "--json", "--target", "gfx1030"];
    let paths = [host.to_str().unwrap(), gfx1030.to_str().unwrap()];
    args.extend(paths);
    let limit = [("LOADER_SIM_SPILL_LIMIT".to_string(), "64K".to_string())];
    let out = run_env(&root, &args, &limit);
    let recs = json_lines(&out.stdout);
    let lib_rec = recs.iter().find(|r| r["member"] == lib).unwrap();
    assert_eq!(lib_rec["status"], "none", "{lib_rec}");
    let reason = lib_rec["reason"].as_str().unwrap();
    assert!(reason.contains("LOADER_SIM_SPILL_LIMIT"), "{reason}");
}

/// `list` on a split library whose installed archive holds a damaged code object fails
/// with the library's error kind and the offset in the archive (through `loader_sim::run`,
/// as the Python module sees it): here the first zstd frame of the JAX plugin's gfx90a
/// archive without its magic number.
#[test]
fn a_damaged_archive_of_a_split_library_gives_its_kind_and_offset() {
    let dir = common::TempDir::new("kpack-split-damaged");
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let jax = root.join("jax_plugins/xla_rocm7");
    std::fs::create_dir_all(jax.join(".kpack")).unwrap();
    let mut data = std::fs::read(data_dir().join("jax/.kpack/jax_lib_gfx90a.kpack")).unwrap();
    let frame = data
        .windows(4)
        .position(|w| w == [0x28, 0xb5, 0x2f, 0xfd])
        .expect("a zstd frame");
    data[frame..frame + 4].fill(0);
    std::fs::write(jax.join(".kpack/jax_lib_gfx90a.kpack"), &data).unwrap();
    let lib = jax.join("xla_rocm_plugin.so");
    std::fs::write(&lib, split_host("jax")).unwrap();
    let mut out = Vec::new();
    let failure = match loader_sim::run(
        ["loader-sim", "list", "--json", lib.to_str().unwrap()],
        &mut out,
    ) {
        Err(f) => f,
        Ok(_) => panic!("list succeeded: {}", String::from_utf8_lossy(&out)),
    };
    assert!(
        failure.message.contains("jax_lib_gfx90a.kpack"),
        "{}",
        failure.message
    );
    assert_eq!(failure.kind, Some("decompress"), "{}", failure.message);
    assert_eq!(failure.offset, Some(frame as u64), "{}", failure.message);
}
