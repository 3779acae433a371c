//! A generative differential test of the readers against LLVM 22 (and LLVM 19 where it
//! applies), issue 13 item 2.
//!
//! Deterministic seeded jobs, each reproducible on its own: random but legal
//! `clang-offload-bundler` jobs (every `-type`, duplicate IDs, IDs LLVM does not know, empty
//! target IDs, 3- and 4-field triples, hip/hipv4/openmp kinds, host-less jobs, zero-size
//! images, `-bundle-align` 1/8/4096/65536, `-compress` as CCOB v2/v3 zstd by LLVM 22 and 19
//! and v2/v3 zlib/zstd by loader-sim at several levels), `clang-offload-packager` jobs
//! (duplicate and empty `arch=`), `llvm-ar` archives of such files, and real files of the
//! corpus. The inputs are random bytes of random sizes (0 included), text, and real code
//! objects from `tests/data/corpus/devobj/`.
//!
//! Property, for every file an LLVM tool made:
//! * whatever `clang-offload-bundler -list` lists, `loader-sim list --json` lists with the
//!   same set of entry IDs, and every image `-unbundle` writes for a listed ID has the bytes
//!   (sha256) of the image `loader-sim list` reports for that ID;
//! * `loader-sim offload-bundler -list` / `-unbundle` print and write exactly what LLVM 22
//!   does (same stdout, same files);
//! * for OffloadBinaries, LLVM's extraction (`--image=triple=T`, generated names) yields per
//!   triple the same sequence of (arch, bytes) as `loader-sim list`;
//! * for an archive, the records of each member are those of the member on its own.
//!
//! Which image an ID names, when LLVM's own answer is not "the entry with that ID":
//! * Duplicate IDs (LLVM 22 turns an architecture it does not know, `sm_120f` or `gfx9999`,
//!   into an empty target ID, so two inputs can get the same ID). In a *binary* bundle LLVM
//!   reads the header into a `StringMap`, so the **last** header entry of an ID overwrites
//!   the earlier ones and `-list` prints the ID once; `-unbundle` writes that last entry.
//!   `loader-sim list` reports every header entry; the test takes its **last** record of the
//!   ID. (LLVM's writer is inconsistent too: it writes every input at the offset recorded
//!   for the last entry of its ID, so the header's earlier entry describes zero padding, the
//!   last one the first input followed by part of the second, and the rest of the second
//!   input lies after the end the header describes — the bytes of issue 13. Neither side
//!   then returns an input file; both return what the header describes.)
//! * In an ELF object (`-type=o` with an ELF host) and in text bundles LLVM walks sections
//!   or markers in file order and takes the **first** one of an ID; so does the test.
//! * `-unbundle` gives a requested ID the first entry in `-list` order that is *compatible*
//!   with it (hip and hipv4 are; so are feature-less and featured spellings), which need not
//!   be the entry with that very ID. The test accepts such an image only when it is the image
//!   of an ID listed before it with the same triple and processor and a compatible kind.
//!
//! Every disagreement is reported with the seed, the job, the command lines run and the entry
//! that differs. `OFFLOAD_IMAGE_DIFF_JOBS=N` runs N jobs (default 250),
//! `OFFLOAD_IMAGE_DIFF_SEED=S` another seed, `OFFLOAD_IMAGE_DIFF_ONLY=J` job J alone (printing its report), and
//! `OFFLOAD_IMAGE_DIFF_KEEP=DIR` keeps the jobs' files in DIR.

use crate::common;

use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const DEFAULT_JOBS: usize = 250;
const DEFAULT_SEED: u64 = 0x0131_d1ff_0000_0002;
/// What LLVM 19 wrote for an ID it lists: nothing, so either an empty image or none found.
const EMPTY_OR_MISSING: &str = "empty-or-missing";

/// Device processors: the spelling, and the key under which LLVM sees conflicts (`None`:
/// LLVM 22 does not know it, or it is empty, so the ID gets an empty target ID).
const AMD_PROCS: &[(&str, Option<&str>)] = &[
    ("gfx906", Some("gfx906")),
    ("gfx906:xnack+", Some("gfx906")),
    ("gfx90a:sramecc-:xnack+", Some("gfx90a")),
    ("gfx942:xnack-", Some("gfx942")),
    ("gfx1030", Some("gfx1030")),
    ("gfx1100", Some("gfx1100")),
    ("gfx9-generic", Some("gfx9-generic")),
    ("gfx9999", None),
    ("gfx9998", None),
    ("", None),
];
const NV_PROCS: &[(&str, Option<&str>)] = &[
    ("sm_70", Some("sm_70")),
    ("sm_80", Some("sm_80")),
    ("sm_90a", Some("sm_90a")),
    ("sm_120f", None),
    ("sm_103f", None),
    ("", None),
];
/// Triples as spelled in front of the processor: 4-field with an empty environment,
/// 4-field, and 3-field.
const AMD_TRIPLES: &[&str] = &[
    "amdgcn-amd-amdhsa--",
    "amdgcn-amd-amdhsa-unknown-",
    "amdgcn-amd-amdhsa-",
];
const NV_TRIPLES: &[&str] = &[
    "nvptx64-nvidia-cuda--",
    "nvptx64-nvidia-cuda-unknown-",
    "nvptx64-nvidia-cuda-",
];
const KINDS: &[&str] = &["hip", "hipv4", "openmp"];
const HOSTS: &[&str] = &[
    "host-x86_64-unknown-linux-gnu",
    "host-x86_64-unknown-linux-gnu-",
    "host-x86_64--linux-gnu",
    "host-aarch64-unknown-linux-gnu",
];
/// Every file type of the bundler: binary (`o`, `bc`, `gch`, `ast`) and text (comment
/// markers `;`, `#` or `//`).
const TYPES: &[&str] = &[
    "o", "o", "o", "bc", "bc", "gch", "ast", "ll", "s", "i", "ii", "cui", "hipi", "d",
];
const DEVICE_FILES: &[&str] = &[
    "devobj/saxpy.gfx906.co",
    "devobj/saxpy.gfx90a_xnack+.co",
    "devobj/saxpy.gfx1030.co",
    "devobj/saxpy.gfx9-generic.co",
    "devobj/saxpy.gfx906.bc",
    "devobj/saxpy.sm_80.cubin",
    "devobj/saxpy.sm_120.cubin",
    "devobj/saxpy.sm_100f.cubin",
];
const TEXT_FILES: &[&str] = &[
    "devobj/tiny.x86_64.ll",
    "devobj/tiny.gfx90a.ll",
    "devobj/tiny.gfx906.s",
    "devobj/tiny.sm_80.ll",
    "devobj/saxpy.sm_70.s",
    "devobj/tiny.amdgcn.i",
];
/// Real files of the corpus read as they are, with the `-type` to list them with.
const CORPUS_FILES: &[(&str, &str)] = &[
    ("bundles/hip_3field.bundle", "o"),
    ("bundles/hip_6arch.bundle", "o"),
    ("bundles/hip_align4096.bundle", "o"),
    ("bundles/hip_bc.bundle", "bc"),
    ("bundles/hip_generic.bundle", "o"),
    ("bundles/hip_nohost.bundle", "o"),
    ("bundles/hip_unsorted.bundle", "o"),
    ("bundles/host_elf.bundle.o", "o"),
    ("bundles/omp_amd_nv.bundle", "o"),
    ("compressed/hip_6arch.zlib.ccob", "o"),
    ("compressed/hip_6arch.zstd.ccob", "o"),
    ("compressed/hip_6arch.zstd-l19.ccob", "o"),
    ("compressed/hip_6arch.v3-zstd.llvm22.ccob", "o"),
    ("compressed/omp_amd_nv.zstd.ccob", "o"),
    ("nvptx/omp_nv_cubins.bundle", "o"),
    ("nvptx/omp_nv_cubins.v3-zstd.llvm22.ccob", "o"),
    ("text/hip.s.bundle", "s"),
    ("text/omp.i.bundle", "i"),
    ("text/omp.ll.bundle", "ll"),
    ("packager/amdgcn_gfx90a_xnack+.openmp.offbin", "offbin"),
    ("packager/multi3.offbin", "offbin"),
    ("packager/extra_keys.offbin", "offbin"),
    ("packager/hip_bc.offbin", "offbin"),
    ("nvptx/cuda_cubins.offbin", "offbin"),
    ("nvptx/omp_cubins.offbin", "offbin"),
];
const PACK_TRIPLES: &[&str] = &["amdgcn-amd-amdhsa", "nvptx64-nvidia-cuda", "spirv64-intel"];
const PACK_ARCHS: &[&str] = &[
    "gfx906",
    "gfx90a:xnack+",
    "gfx942:sramecc+:xnack-",
    "gfx9999",
    "sm_80",
    "sm_120f",
    "generic",
    "",
];
const PACK_KINDS: &[&str] = &["openmp", "cuda", "hip", "sycl", "hipv4"];
const PACK_EXTS: &[&str] = &["o", "bc", "cubin", "s", "co", "bin", ""];

/// One job's context: its directory, its log of command lines, its findings.
struct Ctx {
    seed: u64,
    job: usize,
    dir: PathBuf,
    log: Vec<String>,
    problems: Vec<String>,
    notes: Vec<String>,
    /// LLVM refused the generated job (not a legal job after all).
    refused: bool,
    /// What the job covered, for the summary (`bundle o`, `ccob v3 zlib by loader-sim`, ...).
    tags: Vec<String>,
}

impl Ctx {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Runs `prog` and records the command line (with its environment).
    fn run(&mut self, prog: &Path, args: &[String], env: &[(&str, &str)]) -> std::process::Output {
        let envs: String = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        // LLVM tools by their full path, which names the release (llvm-22, llvm-19).
        let name = if prog == ours() {
            "loader-sim".to_string()
        } else {
            prog.display().to_string()
        };
        self.log.push(format!("{envs}{name} {}", args.join(" ")));
        run_in_env(&self.dir, prog, args, env)
    }

    fn ours(&mut self, sub: &str, args: &[String]) -> std::process::Output {
        let mut all = vec![arg(sub)];
        all.extend(args.iter().cloned());
        self.run(&ours(), &all, &[])
    }

    fn problem(&mut self, what: String) {
        self.problems.push(what);
    }
}

/// Which LLVM release reads or writes.
#[derive(Clone, Copy, PartialEq)]
enum Llvm {
    V22,
    V19,
}

impl Llvm {
    fn bundler(self) -> PathBuf {
        llvm(match self {
            Llvm::V22 => "clang-offload-bundler-22",
            Llvm::V19 => "clang-offload-bundler-19",
        })
    }
    fn name(self) -> &'static str {
        match self {
            Llvm::V22 => "LLVM 22",
            Llvm::V19 => "LLVM 19",
        }
    }
}

/// What LLVM makes of a file.
enum View {
    /// A bundle: the IDs `-list` prints (in its order) and the sha256 of what `-unbundle`
    /// wrote for each of them (`None`: LLVM could not unbundle it).
    Bundle {
        ids: Vec<String>,
        shas: BTreeMap<String, Option<String>>,
        /// What to run `-unbundle` of one ID alone with: the tool, the file, its `-type`.
        tool: Llvm,
        file: PathBuf,
        ty: String,
    },
    /// OffloadBinaries: the files LLVM's extraction wrote (`<stem>-<triple>-<arch>.<index>.<ext>`,
    /// which names the image's own triple and arch strings) and their sha256.
    Packager { files: BTreeMap<String, String> },
}

/// A random device-like payload for file type `ty`.
fn payload(rng: &mut Rng, ty: &str) -> Vec<u8> {
    let text = !matches!(ty, "o" | "bc" | "gch" | "ast" | "offbin");
    match rng.below(10) {
        0 | 1 => Vec::new(),
        2..=4 => {
            let f = if text {
                rng.pick(TEXT_FILES)
            } else {
                rng.pick(DEVICE_FILES)
            };
            std::fs::read(corpus(f)).unwrap()
        }
        _ if text => rng.text(3000),
        _ => {
            let n = match rng.below(4) {
                0 => rng.range(1, 16),
                1 | 2 => rng.range(1, 5000),
                _ => rng.range(5000, 70000),
            };
            rng.opaque(n)
        }
    }
}

/// The target IDs of a bundling job: some drawn to collide (unknown or empty processors of
/// one kind and triple), none conflicting in LLVM's sense.
/// Without a host entry LLVM accepts only HIP kinds (`hip_only`).
fn device_ids(rng: &mut Rng, n: usize, hip_only: bool) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let mut keys: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut tries = 0;
    while ids.len() < n && tries < 200 {
        tries += 1;
        let kind = *rng.pick(if hip_only { &KINDS[..2] } else { KINDS });
        let amd = rng.chance(60);
        let (proc_, key) = if amd {
            *rng.pick(AMD_PROCS)
        } else {
            *rng.pick(NV_PROCS)
        };
        let triple = if amd {
            rng.pick(AMD_TRIPLES)
        } else {
            rng.pick(NV_TRIPLES)
        };
        let id = format!("{kind}-{triple}{proc_}");
        if ids.contains(&id) {
            continue;
        }
        if let Some(key) = key {
            // One spelling of a processor per kind, or LLVM reports conflicting targets.
            let k = (kind.to_string(), key.to_string());
            match keys.get(&k) {
                Some(p) if p != proc_ => continue,
                _ => {
                    keys.insert(k, proc_.to_string());
                }
            }
        }
        ids.push(id);
    }
    ids
}

/// The parts of a bundle ID that decide compatibility: (kind, triple arch, processor).
fn id_parts(id: &str) -> (String, String, String) {
    let mut it = id.split('-');
    let kind = it.next().unwrap_or("").to_string();
    let arch = it.next().unwrap_or("").to_string();
    let last = id.rsplit('-').next().unwrap_or("");
    let processor = last.split(':').next().unwrap_or("").to_string();
    (kind, arch, processor)
}

/// `a` may be handed out for a request of `b` by LLVM's compatibility rule.
fn compatible(a: &str, b: &str) -> bool {
    let (ka, aa, pa) = id_parts(a);
    let (kb, ab, pb) = id_parts(b);
    let hip = |k: &str| k == "hip" || k == "hipv4";
    aa == ab && pa == pb && (ka == kb || (hip(&ka) && hip(&kb)))
}

/// `-list` and `-unbundle` of every listed ID by `tool`.
fn llvm_bundle_view(ctx: &mut Ctx, tool: Llvm, file: &Path, ty: &str, tag: &str) -> Option<View> {
    let bundler = tool.bundler();
    let list = vec![
        arg("-list"),
        format!("-type={ty}"),
        format!("-input={}", file.display()),
    ];
    let l = ctx.run(&bundler, &list, &[]);
    if !l.status.success() {
        ctx.notes.push(format!(
            "{} cannot -list {}: {}",
            tool.name(),
            file.display(),
            describe(&l)
        ));
        return None;
    }
    let ids: Vec<String> = String::from_utf8_lossy(&l.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let mut shas = BTreeMap::new();
    let view = |ids, shas| View::Bundle {
        ids,
        shas,
        tool,
        file: file.to_path_buf(),
        ty: ty.to_string(),
    };
    if ids.is_empty() {
        return Some(view(ids, shas));
    }
    let outs: Vec<String> = (0..ids.len()).map(|i| format!("{tag}-u{i}")).collect();
    let mut args = vec![
        arg("-unbundle"),
        format!("-type={ty}"),
        format!("-targets={}", ids.join(",")),
        format!("-input={}", file.display()),
    ];
    args.extend(outs.iter().map(|o| format!("-output={o}")));
    if tool == Llvm::V19 {
        // LLVM 19 lists IDs it cannot find again when asked for them (IDs LLVM 22 wrote
        // with an empty environment or target ID, 3-field spellings): it writes an empty
        // file for those (for a host ID, a copy of the input) instead of failing the whole
        // call. Such an output means "not found (or empty)" and is not compared.
        args.push(arg("-allow-missing-bundles"));
    }
    let all = ctx.run(&bundler, &args, &[]);
    for (id, o) in ids.iter().zip(&outs) {
        let got = if all.status.success() {
            let got = read_opt(&ctx.path(o));
            // For a host ID it cannot find, LLVM copies the whole (decompressed) input.
            let missing =
                |g: &Vec<u8>| g.is_empty() || (id.starts_with("host-") && &whole_input(file) == g);
            if tool == Llvm::V19 && got.as_ref().is_some_and(missing) {
                ctx.notes.push(format!(
                    "LLVM 19 lists but cannot unbundle {id} (or it is empty)"
                ));
                shas.insert(id.clone(), Some(EMPTY_OR_MISSING.to_string()));
                continue;
            }
            got
        } else if tool == Llvm::V19 {
            // Even with -allow-missing-bundles; nothing to compare, and no time to lose
            // per ID.
            ctx.notes.push(format!(
                "LLVM 19 lists but cannot unbundle {id} among all listed IDs: {}",
                describe(&all)
            ));
            None
        } else {
            // One at a time, so that one ID LLVM cannot unbundle does not hide the others.
            let args = vec![
                arg("-unbundle"),
                format!("-type={ty}"),
                format!("-targets={id}"),
                format!("-input={}", file.display()),
                format!("-output={o}"),
            ];
            let r = ctx.run(&bundler, &args, &[]);
            if r.status.success() {
                read_opt(&ctx.path(o))
            } else {
                ctx.notes.push(format!(
                    "{} lists but cannot unbundle {id}: {}",
                    tool.name(),
                    describe(&r)
                ));
                None
            }
        };
        shas.insert(id.clone(), got.as_deref().map(sha256));
    }
    if tool == Llvm::V22 {
        compare_our_bundler(ctx, &list, &l.stdout, &args, &outs, all.status.success());
    }
    Some(view(ids, shas))
}

/// The bundle in `file`, decompressed when it is a CCOB.
fn whole_input(file: &Path) -> Vec<u8> {
    let data = std::fs::read(file).unwrap();
    match offload_image::ccob::CompressedBundle::parse(&data) {
        Ok(c) => c
            .decompress(&offload_image::ReadOptions::default())
            .map(|d| d.to_vec())
            .unwrap_or(data),
        Err(_) => data,
    }
}

/// `-unbundle` of `id` alone by `tool`: the sha256 of what it writes.
fn llvm_unbundle_one(ctx: &mut Ctx, tool: Llvm, file: &Path, ty: &str, id: &str) -> Option<String> {
    let n = ctx.log.len();
    let out = format!("one-{n}");
    let args = vec![
        arg("-unbundle"),
        format!("-type={ty}"),
        format!("-targets={id}"),
        format!("-input={}", file.display()),
        format!("-output={out}"),
    ];
    let r = ctx.run(&tool.bundler(), &args, &[]);
    if !r.status.success() {
        return None;
    }
    read_opt(&ctx.path(&out)).as_deref().map(sha256)
}

/// `loader-sim offload-bundler` with LLVM 22's `-list` and `-unbundle` command lines: the
/// same standard output and the same files.
fn compare_our_bundler(
    ctx: &mut Ctx,
    list: &[String],
    llvm_stdout: &[u8],
    unbundle: &[String],
    outs: &[String],
    llvm_ok: bool,
) {
    let o = ctx.ours("offload-bundler", list);
    if !o.status.success() {
        ctx.problem(format!(
            "`loader-sim offload-bundler {}` fails where LLVM 22 lists: {}",
            list.join(" "),
            describe(&o)
        ));
        return;
    }
    if o.stdout != llvm_stdout {
        ctx.problem(format!(
            "`loader-sim offload-bundler -list` prints {:?}, LLVM 22 {:?}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(llvm_stdout)
        ));
    }
    if !llvm_ok {
        return;
    }
    let llvm_files: Vec<Option<Vec<u8>>> = outs.iter().map(|o| read_opt(&ctx.path(o))).collect();
    for o in outs {
        let _ = std::fs::remove_file(ctx.path(o));
    }
    let r = ctx.ours("offload-bundler", unbundle);
    if !r.status.success() {
        ctx.problem(format!(
            "`loader-sim offload-bundler -unbundle` fails where LLVM 22 succeeds: {}",
            describe(&r)
        ));
        return;
    }
    for (o, l) in outs.iter().zip(llvm_files) {
        let mine = read_opt(&ctx.path(o));
        if mine != l {
            ctx.problem(format!(
                "`loader-sim offload-bundler -unbundle` writes {o} with sha256 {:?}, LLVM 22 {:?}",
                mine.as_deref().map(sha256),
                l.as_deref().map(sha256)
            ));
        }
    }
}

/// The files in `dir`, by name, as sha256.
fn extracted(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                sha256(&std::fs::read(e.path()).unwrap()),
            )
        })
        .collect()
}

/// OffloadBinaries extracted by LLVM 22 with one `--image=triple=T` filter per triple
/// (generated names `<stem>-<triple>-<arch>.<index>.<ext>` keep every match, duplicates
/// included); `loader-sim offload-packager` must extract the same files.
fn llvm_packager_view(ctx: &mut Ctx, file: &Path, triples: &BTreeSet<String>) -> View {
    let mut files = BTreeMap::new();
    let stem = file.file_name().unwrap().to_string_lossy().into_owned();
    let input = std::fs::canonicalize(file).unwrap();
    for (n, t) in triples.iter().enumerate() {
        let args = vec![parg(&input), format!("--image=triple={t}")];
        let mut got = Vec::new();
        for who in ["llvm", "ours"] {
            let dir = ctx.path(&format!("x-{stem}-{n}-{who}"));
            std::fs::create_dir_all(&dir).unwrap();
            let (prog, all) = if who == "llvm" {
                (llvm("clang-offload-packager-22"), args.clone())
            } else {
                let mut all = vec![arg("offload-packager")];
                all.extend(args.iter().cloned());
                (ours(), all)
            };
            ctx.log.push(format!(
                "(in {}) {} {}",
                dir.display(),
                prog.file_name().unwrap().to_string_lossy(),
                all.join(" ")
            ));
            let r = run_in(&dir, &prog, &all);
            got.push((r.status.success(), describe(&r), extracted(&dir)));
        }
        let (ours_ok, ours_err, ours_files) = got.pop().unwrap();
        let (llvm_ok, llvm_err, llvm_files) = got.pop().unwrap();
        if !llvm_ok {
            ctx.notes
                .push(format!("LLVM 22 cannot extract triple {t}: {llvm_err}"));
        }
        if ours_ok != llvm_ok || ours_files != llvm_files {
            ctx.problem(format!(
                "`loader-sim offload-packager {}` (status ok={ours_ok}, {ours_err}) extracts {ours_files:?}; LLVM 22 (ok={llvm_ok}) {llvm_files:?}",
                args.join(" ")
            ));
        }
        files.extend(llvm_files);
    }
    View::Packager { files }
}

/// `loader-sim list --json FILE`, or the reason it failed.
fn our_list(ctx: &mut Ctx, file: &Path) -> Result<Vec<Value>, String> {
    let r = ctx.ours("list", &[parg(file), arg("--json")]);
    if r.status.success() {
        Ok(json_lines(&r.stdout))
    } else {
        Err(describe(&r))
    }
}

/// The property: what `view` (by `who`) lists and extracts, `recs` (ours) has.
fn compare_view(ctx: &mut Ctx, who: &str, view: &View, recs: &[&Value], what: &str) {
    match view {
        View::Bundle {
            ids,
            shas,
            tool,
            file,
            ty,
        } => {
            let llvm_set: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
            let our_set: BTreeSet<&str> =
                recs.iter().filter_map(|r| r["entry_id"].as_str()).collect();
            if llvm_set != our_set {
                ctx.problem(format!(
                    "{what}: {who} lists IDs {:?}, loader-sim list {:?}",
                    llvm_set, our_set
                ));
            }
            for (pos, id) in ids.iter().enumerate() {
                let Some(Some(multi_sha)) = shas.get(id) else {
                    continue;
                };
                let same: Vec<&&Value> = recs
                    .iter()
                    .filter(|r| r["entry_id"] == id.as_str())
                    .collect();
                if same.is_empty() {
                    continue; // Reported with the sets above.
                }
                // The first of an ID in ELF sections and text bundles, the last in a
                // binary bundle's header (LLVM's StringMap keeps the last).
                let in_elf = same[0]["container"]
                    .as_str()
                    .is_some_and(|c| c.contains("section __CLANG_OFFLOAD_BUNDLE__"));
                let first_wins = in_elf || same[0]["format"] == "clang-offload-bundle-text";
                let taken = if first_wins {
                    same[0]
                } else {
                    same[same.len() - 1]
                };
                if in_elf && id.starts_with("host-") {
                    // The host entry of an ELF object is a one-byte placeholder section;
                    // LLVM unbundles the host as the object without its bundle sections
                    // (llvm-objcopy), which `loader-sim offload-bundler` reproduces (compared
                    // above). `loader-sim list` reports the section itself.
                    ctx.notes.push(format!(
                        "{what}: {id} is the ELF host: LLVM writes the object, list reports the {}-byte section",
                        taken["size"]
                    ));
                    continue;
                }
                if multi_sha == EMPTY_OR_MISSING {
                    // LLVM 19 wrote nothing: an ID it cannot find again, or an empty image;
                    // counted, not compared.
                    continue;
                }
                let mut sha = multi_sha.clone();
                if taken["sha256"] != sha.as_str() {
                    // With several targets in one call LLVM hands each entry to the first
                    // compatible *requested* target in its own (hash) order, so two mutually
                    // compatible IDs can swap outputs; the ID alone says what LLVM takes.
                    match llvm_unbundle_one(ctx, *tool, file, ty, id) {
                        Some(one) if one != sha => {
                            ctx.notes.push(format!(
                                "{what}: {who} unbundles {id} differently alone than among all listed IDs"
                            ));
                            sha = one;
                        }
                        _ => {}
                    }
                }
                if taken["sha256"] == sha.as_str() {
                    if *tool == Llvm::V19 {
                        ctx.notes
                            .push(format!("{what}: LLVM 19 image of {id} agrees"));
                    }
                    if same.len() > 1 {
                        ctx.notes.push(format!(
                            "{what}: duplicate ID {id} ({} entries): {who} and loader-sim take the {}",
                            same.len(),
                            if first_wins { "first" } else { "last" }
                        ));
                    }
                    continue;
                }
                // An entry of a compatible ID listed earlier is what LLVM hands out first.
                let earlier = ids[..pos].iter().find(|e| {
                    compatible(e, id)
                        && recs
                            .iter()
                            .any(|r| r["entry_id"] == e.as_str() && r["sha256"] == sha.as_str())
                });
                if let Some(e) = earlier {
                    ctx.notes.push(format!(
                        "{what}: {who} unbundles {id} as the compatible {e}"
                    ));
                    continue;
                }
                let other: Vec<String> = same
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r["sha256"] == sha.as_str())
                    .map(|(i, _)| format!("#{i}"))
                    .collect();
                ctx.problem(format!(
                    "{what}: {who} unbundles {id} with sha256 {sha}; loader-sim list has {} record(s) of that ID, the {} one with sha256 {} (offset {}, size {}){}",
                    same.len(),
                    if first_wins { "first" } else { "last" },
                    taken["sha256"],
                    taken["offset"],
                    taken["size"],
                    if other.is_empty() {
                        String::new()
                    } else {
                        format!("; LLVM's bytes are those of record {}", other.join(", "))
                    }
                ));
            }
        }
        View::Packager { files } => {
            // `loader-sim list` normalises triple and arch (from the image's ELF header
            // where the strings say less), so the images are compared by their bytes: the
            // same multiset of images, each listed as often as LLVM extracts it. The raw
            // strings are compared through `loader-sim offload-packager` above.
            let mut llvm_shas: Vec<&str> = files.values().map(String::as_str).collect();
            let mut our_shas: Vec<&str> = recs
                .iter()
                .filter(|r| r["format"] == "offload-binary")
                .filter_map(|r| r["sha256"].as_str())
                .collect();
            llvm_shas.sort_unstable();
            our_shas.sort_unstable();
            if llvm_shas != our_shas {
                let missing: Vec<&String> = files
                    .iter()
                    .filter(|(_, s)| !our_shas.contains(&s.as_str()))
                    .map(|(n, _)| n)
                    .collect();
                ctx.problem(format!(
                    "{what}: {who} extracts {} images {files:?}, loader-sim list has {} with sha256 {our_shas:?}; not in ours: {missing:?}",
                    llvm_shas.len(),
                    our_shas.len()
                ));
            }
        }
    }
}

/// The records of archive member `name`.
fn member<'a>(recs: &'a [Value], name: &str) -> Vec<&'a Value> {
    let head = format!("member {name}");
    recs.iter()
        .filter(|r| {
            r["container"]
                .as_str()
                .is_some_and(|c| c == head || c.starts_with(&format!("{head} /")))
        })
        .collect()
}

/// A file made by LLVM (or loader-sim) and what LLVM makes of it.
struct Made {
    file: PathBuf,
    views: Vec<(Llvm, View)>,
}

/// Checks `file` against the views and returns it for archives.
fn check_file(ctx: &mut Ctx, made: Made, what: &str) -> Option<Made> {
    match our_list(ctx, &made.file) {
        Err(e) => {
            if !made.views.is_empty() {
                ctx.problem(format!(
                    "{what}: {} reads {}, loader-sim list refuses it: {e}",
                    made.views[0].0.name(),
                    made.file.display()
                ));
            }
        }
        Ok(recs) => {
            let refs: Vec<&Value> = recs.iter().collect();
            for (tool, v) in &made.views {
                compare_view(ctx, tool.name(), v, &refs, what);
            }
            check_skipped(ctx, &made.file, &recs, what);
        }
    }
    Some(made)
}

/// The skip rule (FORMATS.md §2.4) as LLVM's files exercise it: `loader-sim list` reports
/// skipped bytes only where LLVM wrote images past the end its header describes, which it
/// does only for duplicate IDs; the skipped bytes are not zero padding; `--strict` refuses
/// the file.
fn check_skipped(ctx: &mut Ctx, file: &Path, recs: &[Value], what: &str) {
    let skipped: Vec<&Value> = recs.iter().filter(|r| r["note"] == "skipped").collect();
    if skipped.is_empty() {
        return;
    }
    let ids: Vec<&str> = recs.iter().filter_map(|r| r["entry_id"].as_str()).collect();
    let distinct: BTreeSet<&str> = ids.iter().copied().collect();
    if distinct.len() == ids.len() {
        ctx.problem(format!(
            "{what}: loader-sim list skips bytes in a file without duplicate entry IDs: {skipped:?}"
        ));
        return;
    }
    ctx.tags
        .push("skipped bytes after duplicate IDs".to_string());
    let data = std::fs::read(file).unwrap();
    for n in &skipped {
        let (Some(off), Some(size)) = (n["offset"].as_u64(), n["size"].as_u64()) else {
            ctx.problem(format!("{what}: skipped note without offset and size: {n}"));
            continue;
        };
        let range = data.get(off as usize..(off + size) as usize);
        if n["container"] == "file" && range.is_none_or(|b| b.iter().all(|&x| x == 0)) {
            ctx.problem(format!(
                "{what}: the skipped bytes {off}..{} are outside the file or zero padding",
                off + size
            ));
        }
    }
    let r = ctx.ours("list", &[parg(file), arg("--json"), arg("--strict")]);
    if r.status.code() != Some(2) {
        ctx.problem(format!(
            "{what}: loader-sim list --strict accepts a file with skipped bytes: {}",
            describe(&r)
        ));
    }
}

/// A bundling job: LLVM 22 (or 19, or loader-sim for zlib) bundles, then LLVM reads.
fn bundle_job(rng: &mut Rng, ctx: &mut Ctx, tag: &str) -> Option<Made> {
    let ty = *rng.pick(TYPES);
    let text = !matches!(ty, "o" | "bc" | "gch" | "ast");
    let n = rng.range(1, 8);
    let host_less = rng.chance(30);
    let mut entries: Vec<(String, Vec<u8>)> = device_ids(rng, n, host_less)
        .into_iter()
        .map(|id| (id, payload(rng, ty)))
        .collect();
    if !host_less {
        let host = rng.pick(HOSTS).to_string();
        let mut data = if ty == "o" && rng.chance(25) {
            std::fs::read(corpus("devobj/host.x86_64.o")).unwrap()
        } else if rng.chance(50) {
            Vec::new()
        } else {
            payload(rng, ty)
        };
        if ty == "o" && data.starts_with(b"\x7fELF") && data.get(18) != Some(&0x3e) {
            // A *device* ELF as the host object makes a device ELF with bundle sections
            // (checked on its own by `device_elf_as_host_object`); the random jobs use
            // x86-64 host objects.
            data = std::fs::read(corpus("devobj/host.x86_64.o")).unwrap();
        }
        let at = rng.below(entries.len() + 1);
        entries.insert(at, (host, data));
    } else if ty == "o" && entries[0].1.starts_with(b"\x7fELF") {
        // An ELF first input without a host crashes LLVM (bundler_differential checks that).
        entries[0].1 = b"not an object".to_vec();
    }
    let out = format!("{tag}.{ty}");
    let mut args = bundling_args(&ctx.dir, ty, &entries, tag, &out);
    if !text || rng.chance(20) {
        let align = *rng.pick(&[1u64, 1, 8, 4096, 65536]);
        if align != 1 || rng.chance(30) {
            args.push(format!("-bundle-align={align}"));
        }
    }
    // Compression: none, LLVM 22 (v2/v3 zstd), LLVM 19 (v2 zstd), loader-sim (v2/v3 zlib/zstd).
    let mut producer = Llvm::V22;
    let mut by_ours = false;
    let mut env: Vec<(&str, &str)> = Vec::new();
    let mut v3 = false;
    match rng.below(10) {
        0..=5 => {
            if rng.chance(15) {
                producer = Llvm::V19;
            }
        }
        6 | 7 => {
            let version = *rng.pick(&["2", "3"]);
            v3 = version == "3";
            env.push(("COMPRESSED_BUNDLE_FORMAT_VERSION", version));
            let level = *rng.pick(&["", "1", "3", "9", "19"]);
            if rng.chance(30) {
                env.push(("OFFLOAD_BUNDLER_COMPRESS", "1"));
                if !level.is_empty() {
                    env.push(("OFFLOAD_BUNDLER_COMPRESSION_LEVEL", level));
                }
            } else {
                args.push(arg("-compress"));
                if !level.is_empty() {
                    args.push(format!("-compression-level={level}"));
                }
            }
        }
        8 => {
            producer = Llvm::V19;
            args.push(arg("-compress"));
            if rng.chance(50) {
                args.push(format!(
                    "-compression-level={}",
                    rng.pick(&["1", "9", "19"])
                ));
            }
        }
        _ => {
            by_ours = true;
            let version = *rng.pick(&["2", "3"]);
            v3 = version == "3";
            env.push(("COMPRESSED_BUNDLE_FORMAT_VERSION", version));
            let (method, levels) = if rng.chance(60) {
                ("zlib", &["0", "1", "6", "9"][..])
            } else {
                ("zstd", &["1", "3", "19"][..])
            };
            args.push(arg("-compress"));
            args.push(format!("-compression-method={method}"));
            args.push(format!("-compression-level={}", rng.pick(levels)));
        }
    }
    let r = if by_ours {
        let mut all = vec![arg("offload-bundler")];
        all.extend(args.iter().cloned());
        let r = ctx.run(&ours(), &all, &env);
        if !r.status.success() {
            // loader-sim refuses what it cannot write consistently (duplicate IDs): LLVM
            // compresses instead.
            ctx.notes
                .push(format!("loader-sim refuses to bundle: {}", describe(&r)));
            args.retain(|a| !a.starts_with("-compression-method="));
            by_ours = false;
            ctx.run(&Llvm::V22.bundler(), &args, &env)
        } else {
            r
        }
    } else {
        ctx.run(&producer.bundler(), &args, &env)
    };
    if !r.status.success() {
        ctx.refused = true;
        let why = String::from_utf8_lossy(&r.stderr);
        let why = why.split("error: ").nth(1).unwrap_or("").trim().to_string();
        ctx.tags.push(format!("refused: {why}"));
        ctx.notes
            .push(format!("the bundler refuses the job: {}", describe(&r)));
        return None;
    }
    ctx.tags.push(format!("bundle -type={ty}"));
    ctx.tags
        .push(if host_less { "host-less" } else { "with host" }.to_string());
    let version: String = env
        .iter()
        .filter(|(k, _)| *k == "COMPRESSED_BUNDLE_FORMAT_VERSION")
        .map(|(_, v)| format!(" v{v}"))
        .collect();
    ctx.tags.push(if by_ours {
        let method: Vec<&str> = args
            .iter()
            .filter_map(|a| a.strip_prefix("-compression-method="))
            .collect();
        format!(
            "made by loader-sim: compressed{version} {}",
            method.join("")
        )
    } else if args.iter().any(|a| a == "-compress") || !env.is_empty() {
        format!("made by {}: compressed{version}", producer.name())
    } else {
        format!("made by {}: uncompressed", producer.name())
    });
    let file = ctx.path(&out);
    let mut views = Vec::new();
    if let Some(v) = llvm_bundle_view(ctx, Llvm::V22, &file, ty, &format!("{tag}-22")) {
        views.push((Llvm::V22, v));
    }
    let ids: BTreeSet<&str> = entries.iter().map(|(t, _)| t.as_str()).collect();
    if ids.len() == entries.len()
        && views.first().is_some_and(
            |(_, v)| matches!(v, View::Bundle { ids, .. } if ids.len() < entries.len()),
        )
    {
        ctx.tags.push("IDs collide in LLVM".to_string());
    }
    // LLVM 19 reads uncompressed bundles and CCOB v2 (not v3).
    if !v3 && (producer == Llvm::V19 || rng.chance(35)) {
        if let Some(v) = llvm_bundle_view(ctx, Llvm::V19, &file, ty, &format!("{tag}-19")) {
            ctx.tags.push("read by LLVM 19".to_string());
            views.push((Llvm::V19, v));
        }
    }
    Some(Made { file, views })
}

/// A packaging job with `clang-offload-packager-22`.
fn packager_job(rng: &mut Rng, ctx: &mut Ctx, tag: &str) -> Option<Made> {
    let n = rng.range(1, 6);
    let mut args = vec![arg("-o"), format!("{tag}.offbin")];
    let mut triples = BTreeSet::new();
    let mut last: Option<(String, String)> = None;
    for i in 0..n {
        let ext = rng.pick(PACK_EXTS);
        let name = if ext.is_empty() {
            format!("{tag}-p{i}")
        } else {
            format!("{tag}-p{i}.{ext}")
        };
        std::fs::write(ctx.path(&name), payload(rng, "offbin")).unwrap();
        // Duplicates: the previous image's triple and arch again.
        let (t, a) = match &last {
            Some(prev) if rng.chance(30) => prev.clone(),
            _ => (
                rng.pick(PACK_TRIPLES).to_string(),
                rng.pick(PACK_ARCHS).to_string(),
            ),
        };
        let mut parts = vec![format!("file={name}"), format!("triple={t}")];
        if !a.is_empty() || rng.chance(50) {
            parts.push(format!("arch={a}"));
        }
        if rng.chance(80) {
            parts.push(format!("kind={}", rng.pick(PACK_KINDS)));
        }
        rng.shuffle(&mut parts[1..]);
        args.push(format!("--image={}", parts.join(",")));
        triples.insert(t.clone());
        last = Some((t, a));
    }
    let r = ctx.run(&llvm("clang-offload-packager-22"), &args, &[]);
    if !r.status.success() {
        ctx.refused = true;
        ctx.tags.push("refused: packager".to_string());
        ctx.notes
            .push(format!("the packager refuses the job: {}", describe(&r)));
        return None;
    }
    ctx.tags.push("packager".to_string());
    let file = ctx.path(&format!("{tag}.offbin"));
    let view = llvm_packager_view(ctx, &file, &triples);
    Some(Made {
        file,
        views: vec![(Llvm::V22, view)],
    })
}

/// A real file of the corpus.
fn corpus_job(rng: &mut Rng, ctx: &mut Ctx, tag: &str) -> Option<Made> {
    let (f, ty) = *rng.pick(CORPUS_FILES);
    ctx.tags.push("corpus file".to_string());
    // A copy, so that archives can take it as a member.
    let file = ctx.path(&format!("{tag}-{}", f.replace('/', "_")));
    std::fs::copy(corpus(f), &file).unwrap();
    let mut views = Vec::new();
    if ty == "offbin" {
        let triples: BTreeSet<String> = PACK_TRIPLES
            .iter()
            .map(|t| t.to_string())
            .chain(["x86_64-unknown-linux-gnu".to_string()])
            .collect();
        views.push((Llvm::V22, llvm_packager_view(ctx, &file, &triples)));
    } else {
        if let Some(v) = llvm_bundle_view(ctx, Llvm::V22, &file, ty, &format!("{tag}-22")) {
            views.push((Llvm::V22, v));
        }
        if !f.contains("v3") {
            if let Some(v) = llvm_bundle_view(ctx, Llvm::V19, &file, ty, &format!("{tag}-19")) {
                views.push((Llvm::V19, v));
            }
        }
    }
    Some(Made { file, views })
}

/// An `llvm-ar-22` archive of 2–4 files made by sub-jobs; each member's records must be
/// the member's own.
fn archive_job(rng: &mut Rng, ctx: &mut Ctx, tag: &str) {
    let mut members = Vec::new();
    for m in 0..rng.range(2, 4) {
        let sub = format!("{tag}m{m}");
        let made = match rng.below(4) {
            0 => packager_job(rng, ctx, &sub),
            1 => corpus_job(rng, ctx, &sub),
            _ => bundle_job(rng, ctx, &sub),
        };
        if let Some(made) = made.and_then(|m| check_file(ctx, m, &format!("member {sub}"))) {
            members.push(made);
        }
    }
    ctx.refused = false;
    if members.is_empty() {
        return;
    }
    ctx.tags.push("archive".to_string());
    let ar = ctx.path(&format!("{tag}.a"));
    let mut args = vec![arg(if rng.chance(50) { "rcs" } else { "rc" }), parg(&ar)];
    args.extend(members.iter().map(|m| parg(&m.file)));
    let r = ctx.run(&llvm("llvm-ar-22"), &args, &[]);
    assert!(r.status.success(), "llvm-ar-22: {}", describe(&r));
    let recs = match our_list(ctx, &ar) {
        Ok(r) => r,
        Err(e) => {
            ctx.problem(format!(
                "archive {}: loader-sim list refuses it: {e}",
                ar.display()
            ));
            return;
        }
    };
    for m in &members {
        let name = m.file.file_name().unwrap().to_string_lossy().into_owned();
        let mine = member(&recs, &name);
        for (tool, v) in &m.views {
            compare_view(
                ctx,
                tool.name(),
                v,
                &mine,
                &format!("archive member {name}"),
            );
        }
    }
}

/// Runs job `job` of `seed` and returns its context.
fn run_job(seed: u64, job: usize, base: &Path) -> Ctx {
    let dir = base.join(format!("j{job}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ctx = Ctx {
        seed,
        job,
        dir,
        log: Vec::new(),
        problems: Vec::new(),
        notes: Vec::new(),
        refused: false,
        tags: Vec::new(),
    };
    let mut rng = Rng::new(seed ^ (job as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let tag = format!("j{job}");
    match rng.below(20) {
        0..=11 => {
            if let Some(m) = bundle_job(&mut rng, &mut ctx, &tag) {
                check_file(&mut ctx, m, "bundle");
            }
        }
        12..=14 => {
            if let Some(m) = packager_job(&mut rng, &mut ctx, &tag) {
                check_file(&mut ctx, m, "packaged file");
            }
        }
        15..=17 => archive_job(&mut rng, &mut ctx, &tag),
        _ => {
            if let Some(m) = corpus_job(&mut rng, &mut ctx, &tag) {
                check_file(&mut ctx, m, "corpus file");
            }
        }
    }
    if std::env::var_os("OFFLOAD_IMAGE_DIFF_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&ctx.dir);
    }
    ctx
}

fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        let v = v.trim();
        v.strip_prefix("0x")
            .map(|h| u64::from_str_radix(h, 16))
            .unwrap_or_else(|| v.parse())
            .unwrap_or_else(|e| panic!("{name}={v}: {e}"))
    })
}

/// Runs the jobs on a few threads and returns their contexts in job order.
fn run_all(seed: u64, jobs: &[usize]) -> Vec<Ctx> {
    let base = TempDir::new("generative");
    if let Some(keep) = std::env::var_os("OFFLOAD_IMAGE_DIFF_KEEP") {
        // Keep the jobs' directories for inspection.
        return run_jobs(seed, jobs, Path::new(&keep));
    }
    run_jobs(seed, jobs, &base.0)
}

fn run_jobs(seed: u64, jobs: &[usize], base: &Path) -> Vec<Ctx> {
    // The jobs mostly wait for the processes they start: twice as many threads as cores.
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| 2 * n.get())
        .clamp(2, 8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Ctx> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some(&job) = jobs.get(i) else { break };
                        done.push(run_job(seed, job, base));
                    }
                    done
                })
            })
            .flat_map(|h| h.join().unwrap())
            .collect();
        handles
    });
    out.sort_by_key(|c| c.job);
    out
}

fn report(ctx: &Ctx) -> String {
    let mut s = format!(
        "seed {:#x} job {} (rerun alone: OFFLOAD_IMAGE_DIFF_SEED={:#x} OFFLOAD_IMAGE_DIFF_ONLY={}):\n",
        ctx.seed, ctx.job, ctx.seed, ctx.job
    );
    for p in &ctx.problems {
        s += &format!("  DISAGREEMENT: {p}\n");
    }
    for n in &ctx.notes {
        s += &format!("  note: {n}\n");
    }
    s += "  commands:\n";
    for l in &ctx.log {
        s += &format!("    {l}\n");
    }
    s
}

#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs LLVM 22 and 19 (clang-offload-bundler-22/-19, clang-offload-packager-22, llvm-ar-22); set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn generative_differential_against_llvm() {
    if !common::external(
        "LLVM 22 and 19 (clang-offload-bundler-22/-19, clang-offload-packager-22, llvm-ar-22)",
    ) {
        return;
    }
    let seed = env_num("OFFLOAD_IMAGE_DIFF_SEED").unwrap_or(DEFAULT_SEED);
    let jobs: Vec<usize> = match env_num("OFFLOAD_IMAGE_DIFF_ONLY") {
        Some(j) => vec![j as usize],
        None => {
            (0..env_num("OFFLOAD_IMAGE_DIFF_JOBS").map_or(DEFAULT_JOBS, |n| n as usize)).collect()
        }
    };
    println!(
        "generative differential: seed {seed:#x}, {} jobs",
        jobs.len()
    );
    let results = run_all(seed, &jobs);
    let refused = results.iter().filter(|c| c.refused).count();
    let failing: Vec<&Ctx> = results.iter().filter(|c| !c.problems.is_empty()).collect();
    let count = |what: &str| -> usize {
        results
            .iter()
            .flat_map(|c| &c.notes)
            .filter(|n| n.contains(what))
            .count()
    };
    let dup = count("duplicate ID");
    println!(
        "{} jobs, {} refused by LLVM, {} agreed, {} disagreed; {dup} duplicate-ID images compared, \
         {} compatible-ID hand-outs, {} ELF host entries skipped; LLVM 19: {} images agree, \
         {} listed IDs it cannot unbundle",
        results.len(),
        refused,
        results.len() - refused - failing.len(),
        failing.len(),
        count("as the compatible"),
        count("is the ELF host"),
        count("LLVM 19 image of"),
        count("LLVM 19 lists but cannot unbundle"),
    );
    let mut tags: BTreeMap<&str, usize> = BTreeMap::new();
    for t in results.iter().flat_map(|c| &c.tags) {
        *tags.entry(t.as_str()).or_default() += 1;
    }
    for (t, n) in &tags {
        println!("  {n:5}  {t}");
    }
    if jobs.len() >= DEFAULT_JOBS {
        // The mix must keep covering what the test is for.
        for must in [
            "archive",
            "packager",
            "corpus file",
            "read by LLVM 19",
            "host-less",
            "IDs collide in LLVM",
            "skipped bytes after duplicate IDs",
            "made by LLVM 19: compressed",
            "made by LLVM 22: compressed v2",
            "made by LLVM 22: compressed v3",
        ] {
            assert!(
                tags.iter().any(|(t, _)| t.starts_with(must)),
                "no job covered {must:?}"
            );
        }
        assert!(tags.keys().any(|t| t.contains("zlib")), "no zlib CCOB");
        assert!(dup > 0, "no duplicate-ID image was compared");
        assert!(
            count("LLVM 19 image of") > 0,
            "no LLVM 19 image was compared"
        );
    }
    if jobs.len() == 1 {
        println!("{}", report(&results[0]));
    }
    assert!(
        refused * 4 <= results.len(),
        "LLVM refused {refused} of {} generated jobs: the generator makes illegal jobs",
        results.len()
    );
    if !failing.is_empty() {
        let text: String = failing.iter().map(|c| report(c)).collect();
        panic!(
            "{} of {} jobs disagree with LLVM:\n{text}",
            failing.len(),
            results.len()
        );
    }
}

/// The one disagreement the generated mix leaves out (bundle jobs replace a device-ELF host
/// input by an x86-64 object): `-type=o` with an AMDGPU code object as the *host* input.
/// LLVM 22 adds the `__CLANG_OFFLOAD_BUNDLE__*` sections to that code object and `-list`s
/// and `-unbundle`s them; `loader-sim list` reads them too: a device ELF with bundle sections
/// is a bundled object, as LLVM reads it (`FORMATS.md` §2.5).
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs clang-offload-bundler-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn device_elf_as_host_object() {
    if !common::external("clang-offload-bundler-22") {
        return;
    }
    let dir = TempDir::new("generative-device-host");
    let mut ctx = Ctx {
        seed: 0,
        job: 0,
        dir: dir.0.clone(),
        log: Vec::new(),
        problems: Vec::new(),
        notes: Vec::new(),
        refused: false,
        tags: Vec::new(),
    };
    let args = vec![
        arg("-type=o"),
        arg("-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx906"),
        format!("-input={}", corpus("devobj/saxpy.gfx90a.co").display()),
        format!("-input={}", corpus("devobj/saxpy.gfx906.co").display()),
        arg("-output=dev-host.o"),
    ];
    let r = ctx.run(&Llvm::V22.bundler(), &args, &[]);
    assert!(r.status.success(), "{}", describe(&r));
    let file = ctx.path("dev-host.o");
    let view = llvm_bundle_view(&mut ctx, Llvm::V22, &file, "o", "u").expect("LLVM 22 lists it");
    check_file(
        &mut ctx,
        Made {
            file,
            views: vec![(Llvm::V22, view)],
        },
        "device ELF as host",
    );
    assert!(ctx.problems.is_empty(), "{}", report(&ctx));
}
