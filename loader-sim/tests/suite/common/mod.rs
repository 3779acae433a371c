//! Helpers shared by the command-line tests: locating LLVM's tools and this crate's binary,
//! the corpus and its manifest, real ROCm libraries, temporary directories, a seeded RNG,
//! running commands.

#![allow(dead_code)]

/// comgr's lookup program, shared with the library's tests.
#[path = "../../../../tests/suite/common/comgr.rs"]
mod comgr;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The CUDA tree of `scripts/fetch-nvidia-toolkit.sh` (nvcc, cuobjdump, the CUDA 13 runtime).
pub fn cuda_tree() -> PathBuf {
    let script = repo().join("scripts/fetch-nvidia-toolkit.sh");
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "scripts/fetch-nvidia-toolkit.sh could not install NVIDIA's CUDA wheels (scripts/setup.sh \
         installs them; the package index must be reachable): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `loader-sim` built by cargo for this test run.
pub fn ours() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loader-sim"))
}

use external::assert_switched_on;
/// The outside-tools switch and its helpers, shared by every crate's tests.
#[path = "../../../../tests/suite/common/external.rs"]
mod external;
pub use external::{external, external_part};

/// An LLVM tool from `PATH` (`clang-offload-bundler-22`, ...), with symbolic links
/// resolved. Panics with an explanation when it is missing: these tests compare against
/// the real tools, which `.ci/run` installs.
///
/// The links must be resolved: `clang-offload-bundler` runs the `llvm-objcopy` found next
/// to its `argv[0]` before searching `PATH`, so started as `/usr/bin/clang-offload-bundler-22`
/// it would use whatever `/usr/bin/llvm-objcopy` is (another LLVM release on Debian, with
/// different output), while `/usr/lib/llvm-22/bin/clang-offload-bundler` uses LLVM 22's.
pub fn llvm(tool: &str) -> PathBuf {
    assert_switched_on(tool);
    // The drop-in's compressed bundles are LLVM's bytes only with the libzstd LLVM links.
    assert!(
        tool != "clang-offload-bundler-22" || cfg!(feature = "system-zstd"),
        "the tests against {tool} need the libzstd it links: run them with --features \
         loader-sim/system-zstd (scripts/test.sh does; pkg-config and libzstd-dev)"
    );
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(tool);
        if p.is_file() {
            return std::fs::canonicalize(&p).unwrap_or(p);
        }
    }
    panic!(
        "`{tool}` not found in PATH: the differential tests need LLVM's tools \
         (Debian packages clang-22, clang-tools-22, llvm-22 and clang-19/clang-tools-19 for the LLVM 19 checks; .ci/run installs them)"
    );
}

/// A file of the corpus committed in `tests/data/corpus`.
pub fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/corpus")
        .join(rel)
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

static COUNTER: AtomicUsize = AtomicUsize::new(0);

impl TempDir {
    /// A fresh directory under the system temporary directory.
    pub fn new(tag: &str) -> TempDir {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("loader-sim-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    /// A path inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes a file inside the directory and returns its path.
    pub fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, data).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// SplitMix64: a small deterministic RNG for the test matrices.
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// Next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p` percent.
    pub fn chance(&mut self, p: usize) -> bool {
        self.below(100) < p
    }

    /// A random element.
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// 1 to `max` bytes of text-like content (code-ish characters and newlines, never a
    /// bundle marker), with a final newline half of the time.
    pub fn text(&mut self, max: usize) -> Vec<u8> {
        let n = self.range(1, max);
        let mut v: Vec<u8> = (0..n)
            .map(|_| b" abcdefgh;#/\n{}()xyz0123"[self.below(24)])
            .collect();
        if self.chance(50) {
            v.push(b'\n');
        }
        v
    }

    /// `n` random bytes that do not start like an ELF object, a bundle, a CCOB or an
    /// OffloadBinary (the first byte is `R`).
    pub fn opaque(&mut self, n: usize) -> Vec<u8> {
        let mut v = self.bytes(n);
        if let Some(b) = v.first_mut() {
            *b = b'R';
        }
        v
    }

    /// Shuffles `v` in place.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// The environment variables `clang-offload-bundler` reads.
pub const BUNDLER_ENV: [&str; 5] = [
    "OFFLOAD_BUNDLER_COMPRESS",
    "OFFLOAD_BUNDLER_VERBOSE",
    "OFFLOAD_BUNDLER_COMPRESSION_LEVEL",
    "COMPRESSED_BUNDLE_FORMAT_VERSION",
    "OFFLOAD_BUNDLER_IGNORE_ENV_VAR",
];

/// Runs a program this test process has just written (copied): `exec` fails with
/// `ETXTBSY` while a child that another test thread forked during the write still holds
/// the file open, until that child execs, so that is waited out.
pub fn output_of_written(cmd: &mut Command) -> Output {
    for _ in 0..200 {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            r => return r.unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}")),
        }
    }
    panic!("{cmd:?}: the file stayed busy for 2 s")
}

/// Runs `prog args...` in `dir` with none of the bundler's environment variables set.
pub fn run_in(dir: &Path, prog: &Path, args: &[String]) -> Output {
    run_in_env(dir, prog, args, &[])
}

/// Runs `prog args...` in `dir` with only the bundler environment variables in `env` set.
pub fn run_in_env(dir: &Path, prog: &Path, args: &[String], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(prog);
    c.args(args).current_dir(dir);
    for v in BUNDLER_ENV {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()))
}

/// A bundling command line for `clang-offload-bundler`: writes each entry's contents to
/// `dir/{prefix}-in{i}` and returns `-type=TY -targets=... -input=... -output=OUT`.
pub fn bundling_args(
    dir: &Path,
    ty: &str,
    entries: &[(String, Vec<u8>)],
    prefix: &str,
    out: &str,
) -> Vec<String> {
    let targets: Vec<&str> = entries.iter().map(|(t, _)| t.as_str()).collect();
    let mut args = vec![
        format!("-type={ty}"),
        format!("-targets={}", targets.join(",")),
    ];
    for (i, (_, data)) in entries.iter().enumerate() {
        let name = format!("{prefix}-in{i}");
        std::fs::write(dir.join(&name), data).unwrap();
        args.push(format!("-input={name}"));
    }
    args.push(format!("-output={out}"));
    args
}

/// Runs `loader-sim <sub> args...` in `dir`.
pub fn run_ours(dir: &Path, sub: &str, args: &[String]) -> Output {
    let mut all = vec![sub.to_string()];
    all.extend(args.iter().cloned());
    run_in(dir, &ours(), &all)
}

/// Reads a file, `None` if it does not exist.
pub fn read_opt(p: &Path) -> Option<Vec<u8>> {
    std::fs::read(p).ok()
}

/// A short description of a process result for assertion messages.
pub fn describe(o: &Output) -> String {
    format!(
        "status {:?}, stderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).trim()
    )
}

/// `s` as an owned argument.
pub fn arg(s: impl AsRef<str>) -> String {
    s.as_ref().to_string()
}

/// `path` as an argument.
pub fn parg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs `cmd`; panics with the command line, its exit status and its standard error unless
/// it succeeded. Returns its output.
pub fn run_ok(cmd: &mut Command) -> Output {
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}", describe(&o));
    o
}

/// Runs `loader-sim ARGS`; panics as [`run_ok`] does unless it succeeded.
pub fn loader_sim_ok<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    run_ok(Command::new(env!("CARGO_BIN_EXE_loader-sim")).args(args))
}

/// Runs `loader-sim ARGS`.
pub fn loader_sim<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loader-sim"))
        .args(args)
        .output()
        .expect("run loader-sim")
}

/// Lowercase hex SHA-256.
pub fn sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Every record of the corpus manifest.
pub fn manifest() -> Vec<Value> {
    std::fs::read_to_string(corpus("MANIFEST.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Standard output as JSON Lines (one object per line).
pub fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// The sha256 of the bytes LLVM's tools extracted for `name` in `file`: a bundle entry ID,
/// or `<triple>--<arch>` for an OffloadBinary image.
pub fn manifest_sha(file: &str, name: &str) -> String {
    manifest()
        .into_iter()
        .find(|r| {
            r["file"] == file
                && match r["record"].as_str() {
                    Some("entry") => r["entry_id"] == name,
                    Some("image") => {
                        format!(
                            "{}--{}",
                            r["triple"].as_str().unwrap_or(""),
                            r["arch"].as_str().unwrap_or("")
                        ) == name
                    }
                    _ => false,
                }
        })
        .and_then(|r| r["sha256"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{file}: {name} not in the manifest"))
}

pub use external::external_dir;

/// A real ROCm library fetched by `scripts/fetch-rocm-libs.sh`, or a panic that says how.
pub fn external_lib(name: &str) -> PathBuf {
    assert_switched_on(name);
    let p = external_dir()
        .join("unpacked/usr/lib/x86_64-linux-gnu")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-rocm-libs.sh (.ci/run does) or set OFFLOAD_IMAGE_EXTERNAL",
        p.display()
    );
    p
}

/// HIP objects `k1.o` … `kN.o` in `dir` for gfx906, gfx90a and gfx1030, compiled by
/// clang++-22 from `source(i)`.
pub fn hip_objects(dir: &TempDir, n: usize, source: fn(usize) -> String) -> Vec<PathBuf> {
    (1..=n)
        .map(|i| {
            let src = dir.write(&format!("k{i}.hip"), source(i).as_bytes());
            let obj = dir.path(&format!("k{i}.o"));
            let o = Command::new("clang++-22")
                .args(["-x", "hip", "-nogpulib", "-nogpuinc", "-fPIC", "-O2"])
                .args([
                    "--offload-arch=gfx906",
                    "--offload-arch=gfx90a",
                    "--offload-arch=gfx1030",
                ])
                .arg("-c")
                .arg(&src)
                .arg("-o")
                .arg(&obj)
                .output()
                .unwrap();
            assert!(o.status.success(), "clang++-22 -x hip: {}", describe(&o));
            obj
        })
        .collect()
}

/// The runtime HIP libraries link against, in `dir`: an empty `libamdhip64.so` with ROCm 6's
/// soname (`libamdhip64.so.6`).
pub fn hip_runtime_stub(dir: &TempDir) -> PathBuf {
    let stub = dir.write("stub.c", b"int loader_sim_stub;\n");
    let lib = dir.path("libamdhip64.so");
    let o = Command::new("clang-22")
        .args(["-shared", "-fPIC", "-Wl,-soname,libamdhip64.so.6", "-o"])
        .arg(&lib)
        .arg(&stub)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", describe(&o));
    lib
}

/// An uncompressed offload bundle with a host entry and one device entry per `arch`, each
/// of `size` pseudo-random bytes.
pub fn big_bundle(archs: &[&str], size: usize, seed: u64) -> Vec<u8> {
    let mut ids = vec!["host-x86_64-unknown-linux-gnu-".to_string()];
    ids.extend(
        archs
            .iter()
            .map(|a| format!("hipv4-amdgcn-amd-amdhsa--{a}")),
    );
    let header: usize = 24 + 8 + ids.iter().map(|id| 24 + id.len()).sum::<usize>();
    let mut out = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    out.extend((ids.len() as u64).to_le_bytes());
    let mut at = header.next_multiple_of(4096);
    let mut sizes = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let len = if i == 0 { 0 } else { size };
        out.extend((at as u64).to_le_bytes());
        out.extend((len as u64).to_le_bytes());
        out.extend((id.len() as u64).to_le_bytes());
        out.extend(id.as_bytes());
        sizes.push((at, len));
        at = (at + len).next_multiple_of(4096);
    }
    let mut rng = Rng::new(seed);
    out.resize(header.next_multiple_of(4096), 0);
    for (at, len) in sizes {
        out.resize(at, 0);
        out.extend(rng.bytes(len));
    }
    out
}

/// `tests/comgr/lookup.c` (comgr's `amd_comgr_lookup_code_object` for a bundle), built
/// once per test binary.
pub fn comgr_lookup() -> &'static Path {
    comgr::lookup(&repo())
}
