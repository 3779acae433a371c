//! Where the loader looks for archives: pure functions over strings, no filesystem
//! (`KPACK.md` §4). Each rule cites the function of rocm-kpack's C runtime
//! (`runtime/src/`, commit e3483286) it follows.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::{Error, ErrorKind, Result};

/// The placeholder the loader replaces with each compatible target
/// (`kGfxArchPlaceholder`, `runtime/src/loader.cpp`).
pub const GFXARCH_PLACEHOLDER: &str = "@GFXARCH@";

/// The prefix stripped from the runtime's ISA names (`kTargetTriplePrefix`,
/// `runtime/src/isa_target_match.cpp`).
pub const TARGET_PREFIX: &str = "amdgcn-amd-amdhsa--";

/// Separator of `ROCM_KPACK_PATH` / `ROCM_KPACK_PATH_PREFIX` on Linux (`split_path_list`).
pub const PATH_LIST_SEPARATOR: char = ':';
/// Separator of the same variables on Windows.
pub const PATH_LIST_SEPARATOR_WINDOWS: char = ';';

/// Most features of one ISA name expanded here. The C loader iterates a 32-bit mask
/// (`1u << n`), undefined from 32 features on and 2^n candidates below that; real target IDs
/// have at most two.
pub const MAX_FEATURES: usize = 8;

/// `isa` without [`TARGET_PREFIX`], when something follows the prefix
/// (`strip_target_prefix`, `runtime/src/isa_target_match.cpp`).
pub fn strip_target_prefix(isa: &str) -> &str {
    match isa.strip_prefix(TARGET_PREFIX) {
        Some(rest) if !rest.is_empty() => rest,
        _ => isa,
    }
}

/// The targets an agent ISA name is compatible with, in the order the loader tries them
/// (`for_each_compatible_target`, `runtime/src/isa_target_match.h`).
///
/// The name loses [`TARGET_PREFIX`], then splits at `:` into the processor and its
/// features (empty ones dropped, `parse_target_id`). Without features the answer is the
/// processor alone. Otherwise a mask counts down from all features to none, feature `i`
/// of `n` kept when bit `n - 1 - i` is set: `gfx942:sramecc+:xnack-` gives
/// `gfx942:sramecc+:xnack-`, `gfx942:sramecc+`, `gfx942:xnack-`, `gfx942`. That drops
/// features from the right first; from three features on it is not largest first:
/// `a:x:y:z` gives `a:x:y:z`, `a:x:y`, `a:x:z`, `a:x`, `a:y:z`, `a:y`, `a:z`, `a` (`a:x`
/// before `a:y:z`; rocm-kpack's oracle case `rocrand_three_features`). The relation is one way: a bare processor never yields
/// featured names. An empty name, or one whose processor is empty, gives nothing.
///
/// More than [`MAX_FEATURES`] features is [`ErrorKind::LimitExceeded`].
///
/// ```
/// use offload_image::kpack::compatible_targets;
///
/// let t = compatible_targets("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-")?;
/// assert_eq!(t, ["gfx90a:sramecc+:xnack-", "gfx90a:sramecc+", "gfx90a:xnack-", "gfx90a"]);
/// assert_eq!(compatible_targets("gfx1030")?, ["gfx1030"]);
/// # Ok::<(), offload_image::Error>(())
/// ```
pub fn compatible_targets(isa: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let stripped = strip_target_prefix(isa);
    if stripped.is_empty() {
        return Ok(out);
    }
    let mut parts = stripped.split(':');
    let processor = parts.next().unwrap_or("");
    if processor.is_empty() {
        return Ok(out);
    }
    let features: Vec<&str> = parts.filter(|f| !f.is_empty()).collect();
    let n = features.len();
    if n > MAX_FEATURES {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            0,
            "ISA name has more features than the kpack expansion limit",
        ));
    }
    let full: u32 = (1u32 << n).wrapping_sub(1);
    for mask in (0..=full).rev() {
        let mut candidate = String::from(processor);
        for (i, feature) in features.iter().enumerate() {
            let bit = n.saturating_sub(1).saturating_sub(i);
            if mask & (1u32 << bit) != 0 {
                candidate.push(':');
                candidate.push_str(feature);
            }
        }
        out.push(candidate);
    }
    Ok(out)
}

/// The paths of a `ROCM_KPACK_PATH`-style list: split at `separator`, empty items dropped
/// (`split_path_list`, `runtime/src/loader.cpp`). The items are used as they are: no
/// placeholder, no resolution against the library (relative ones are relative to the
/// process's working directory).
pub fn split_path_list(value: &str, separator: char) -> Vec<&str> {
    value.split(separator).filter(|p| !p.is_empty()).collect()
}

/// `path` made lexically normal, as `std::filesystem::path::lexically_normal` does for
/// POSIX paths: repeated `/` folded, `.` dropped, `name/..` removed, `..` after the root
/// dropped, a trailing `/` kept only after a name. An empty result is `.`.
pub fn lexically_normal(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let absolute = path.starts_with('/');
    let trailing = path.ends_with('/') || path.ends_with("/.") || path == ".";
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            name => parts.push(name),
        }
    }
    let mut out = String::new();
    if absolute {
        out.push('/');
    }
    out.push_str(&parts.join("/"));
    let ends_in_dotdot = parts.last() == Some(&"..");
    if trailing && !parts.is_empty() && !ends_in_dotdot && !path.ends_with("..") {
        out.push('/');
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// An embedded search path resolved as `resolve_path` (`runtime/src/loader.cpp`) does: an
/// absolute path as it is; a relative one joined to `binary_dir` (the directory of the
/// library's real path) and normalised.
///
/// The C loader normalises with `std::filesystem::weakly_canonical`, which also resolves
/// symbolic links in the part of the path that exists. This function is lexical only: it
/// gives the C loader's string when `binary_dir` is a real path (as `/proc/self/maps`
/// names a mapped library) and no directory the relative part names is a symbolic link.
pub fn resolve_embedded(binary_dir: &str, path: &str) -> String {
    if path.starts_with('/') {
        return String::from(path);
    }
    let mut joined = String::from(binary_dir);
    if !joined.is_empty() && !joined.ends_with('/') {
        joined.push('/');
    }
    joined.push_str(path);
    lexically_normal(&joined)
}

/// The environment the loader reads once, when its cache is created
/// (`kpack_cache_create`, `runtime/src/loader.cpp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoaderEnv<'a> {
    /// `ROCM_KPACK_PATH`: archive paths that replace the embedded ones.
    pub path: Option<&'a str>,
    /// `ROCM_KPACK_PATH_PREFIX`: archive paths tried before the embedded ones.
    pub path_prefix: Option<&'a str>,
    /// `ROCM_KPACK_DISABLE`: turns the loader off unless empty or starting with `0`.
    pub disable: Option<&'a str>,
    /// The list separator: [`PATH_LIST_SEPARATOR`] (Linux) or
    /// [`PATH_LIST_SEPARATOR_WINDOWS`].
    pub separator: char,
}

impl<'a> LoaderEnv<'a> {
    /// The Linux loader's view of these variable values (`None`: unset).
    pub fn linux(
        path: Option<&'a str>,
        path_prefix: Option<&'a str>,
        disable: Option<&'a str>,
    ) -> Self {
        LoaderEnv {
            path,
            path_prefix,
            disable,
            separator: PATH_LIST_SEPARATOR,
        }
    }

    /// Whether `ROCM_KPACK_DISABLE` turns the loader off (it then answers 8, not
    /// implemented): set, not empty, and not starting with `0`.
    pub fn disabled(&self) -> bool {
        self.disable
            .is_some_and(|v| !v.is_empty() && !v.starts_with('0'))
    }
}

/// Where a candidate archive path came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathOrigin {
    /// An item of `ROCM_KPACK_PATH`.
    EnvPath,
    /// An item of `ROCM_KPACK_PATH_PREFIX`.
    EnvPrefix,
    /// The ref record's search path of this index, used as it is (no placeholder).
    Embedded(usize),
    /// The ref record's search path `path` with the placeholder replaced by a target that
    /// the requested architecture of index `arch` is compatible with.
    Expanded {
        /// Index of the search path in the ref record.
        path: usize,
        /// Index of the architecture in the requested list.
        arch: usize,
    },
}

/// One archive path the loader tries, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidatePath {
    /// The path, as the loader builds it.
    pub path: String,
    /// Where it came from.
    pub origin: PathOrigin,
    /// For [`PathOrigin::Expanded`]: the target that replaced the placeholder.
    pub target: Option<String>,
}

/// The archive paths `kpack_load_code_object` (`runtime/src/loader.cpp`) tries for a
/// library, in its order:
///
/// 1. a non-empty `ROCM_KPACK_PATH` list: its items only, as they are;
/// 2. otherwise the `ROCM_KPACK_PATH_PREFIX` items as they are, then each search path of
///    the ref record resolved against `binary_dir` ([`resolve_embedded`]); one that holds
///    [`GFXARCH_PLACEHOLDER`] after resolution gives, for each requested architecture in
///    order, one path per compatible target ([`compatible_targets`]) with the first
///    placeholder replaced; one without it is used as it is.
///
/// `binary_dir` is the directory of the library's real path; `arches` are the ISA names
/// the runtime passes (for CLR: the agent's `amdgcn-amd-amdhsa--…` name, then its generic
/// target). Whether the loader is disabled is the caller's test
/// ([`LoaderEnv::disabled`]), as the loader makes it first.
pub fn candidate_paths(
    binary_dir: &str,
    search_paths: &[&str],
    arches: &[&str],
    env: &LoaderEnv<'_>,
) -> Result<Vec<CandidatePath>> {
    let mut out = Vec::new();
    let direct = |items: Vec<&str>, origin: PathOrigin, out: &mut Vec<CandidatePath>| {
        for p in items {
            out.push(CandidatePath {
                path: String::from(p),
                origin,
                target: None,
            });
        }
    };
    let path_list = env
        .path
        .map(|v| split_path_list(v, env.separator))
        .unwrap_or_default();
    if !path_list.is_empty() {
        direct(path_list, PathOrigin::EnvPath, &mut out);
        return Ok(out);
    }
    let prefix = env
        .path_prefix
        .map(|v| split_path_list(v, env.separator))
        .unwrap_or_default();
    direct(prefix, PathOrigin::EnvPrefix, &mut out);
    for (index, search) in search_paths.iter().enumerate() {
        let resolved = resolve_embedded(binary_dir, search);
        match resolved.find(GFXARCH_PLACEHOLDER) {
            Some(at) => {
                let (head, tail) = resolved.split_at(at);
                let tail = tail.get(GFXARCH_PLACEHOLDER.len()..).unwrap_or("");
                for (arch, isa) in arches.iter().enumerate() {
                    for target in compatible_targets(isa)? {
                        let mut path = String::from(head);
                        path.push_str(&target);
                        path.push_str(tail);
                        out.push(CandidatePath {
                            path,
                            origin: PathOrigin::Expanded { path: index, arch },
                            target: Some(target),
                        });
                    }
                }
            }
            None => out.push(CandidatePath {
                path: resolved,
                origin: PathOrigin::Embedded(index),
                target: None,
            }),
        }
    }
    Ok(out)
}

/// The archives a loader that found none expected, as a person should read them: first the
/// archive to install, as a device package ships it, then the file names of the others the
/// loader tried (`… or one it tries before: rand_lib_gfx90a:xnack+.kpack`), without repeats.
///
/// The loader tries the device's target ID with its features first
/// (`fft_lib_gfx942:sramecc+:xnack-.kpack`) and the bare processor last
/// (`fft_lib_gfx942.kpack`). A device package names an archive after the architecture its
/// code objects were built for (rocm-kpack's splitter: `<prefix>_<arch>.kpack`), and
/// TheRock's per-architecture packages (`rocm-sdk-device-gfx942`) build for the bare
/// processor: they ship `.kpack/blas_lib_gfx942.kpack`. So the archive to install is the
/// path tried for the bare processor of `isa` (an ISA name as the loader takes it,
/// `amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-`, or a target ID): the first path that names
/// the processor and no feature of it. Where no path does (`ROCM_KPACK_PATH` items, a
/// search path without `@GFXARCH@`) the first path tried leads. `None` when `paths` is
/// empty.
///
/// ```
/// use offload_image::kpack::expected_archives;
/// let tried = [
///     "/site/.kpack/fft_lib_gfx942:sramecc+:xnack-.kpack".to_string(),
///     "/site/.kpack/fft_lib_gfx942:sramecc+.kpack".to_string(),
///     "/site/.kpack/fft_lib_gfx942:xnack-.kpack".to_string(),
///     "/site/.kpack/fft_lib_gfx942.kpack".to_string(),
/// ];
/// assert_eq!(
///     expected_archives(&tried, "gfx942:sramecc+:xnack-").unwrap(),
///     "/site/.kpack/fft_lib_gfx942.kpack (as a device package for gfx942 ships it) or one \
///      the loader tries before it: fft_lib_gfx942:sramecc+:xnack-.kpack, \
///      fft_lib_gfx942:sramecc+.kpack, fft_lib_gfx942:xnack-.kpack"
/// );
/// ```
pub fn expected_archives(paths: &[String], isa: &str) -> Option<String> {
    let processor = strip_target_prefix(isa).split(':').next().unwrap_or_default();
    let install = if processor.is_empty() {
        None
    } else {
        paths
            .iter()
            .position(|p| names_bare_processor(p, processor))
    };
    let lead = install.unwrap_or(0);
    let first = paths.get(lead)?;
    let file_name = |p: &str| p.rsplit(['/', '\\']).next().unwrap_or(p).to_string();
    let first_name = file_name(first);
    let mut before: Vec<String> = Vec::new();
    let mut after: Vec<String> = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let n = file_name(p);
        if i == lead || n == first_name || before.contains(&n) || after.contains(&n) {
            continue;
        }
        if i < lead {
            before.push(n);
        } else {
            after.push(n);
        }
    }
    let mut out = first.clone();
    if install.is_some() {
        out.push_str(" (as a device package for ");
        out.push_str(processor);
        out.push_str(" ships it)");
    }
    if !before.is_empty() {
        out.push_str(" or one the loader tries before it: ");
        out.push_str(&before.join(", "));
    }
    if !after.is_empty() {
        out.push_str(if before.is_empty() { " or " } else { "; or after it: " });
        out.push_str(&after.join(", "));
    }
    Some(out)
}

/// Whether `path` names `processor` as a whole word (`gfx942`, not `gfx9420`) and never
/// with a feature after it (`gfx942:`).
fn names_bare_processor(path: &str, processor: &str) -> bool {
    let mut named = false;
    for (at, found) in path.match_indices(processor) {
        let before = path.get(..at).and_then(|h| h.chars().next_back());
        let after = at
            .checked_add(found.len())
            .and_then(|end| path.get(end..))
            .and_then(|t| t.chars().next());
        if before.is_some_and(|c| c.is_ascii_alphanumeric()) {
            continue;
        }
        match after {
            Some(':') => return false,
            Some(c) if c.is_ascii_alphanumeric() => {}
            _ => named = true,
        }
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec;

    #[test]
    fn expected_archives_lead_with_the_archive_a_device_package_ships() {
        let tried = |isa: &str| -> Vec<String> {
            compatible_targets(isa)
                .unwrap()
                .iter()
                .map(|t| format!("/site/.kpack/fft_lib_{t}.kpack"))
                .collect()
        };
        let paths = tried("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-");
        assert_eq!(
            expected_archives(&paths, "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-").unwrap(),
            "/site/.kpack/fft_lib_gfx942.kpack (as a device package for gfx942 ships it) or \
             one the loader tries before it: fft_lib_gfx942:sramecc+:xnack-.kpack, \
             fft_lib_gfx942:sramecc+.kpack, fft_lib_gfx942:xnack-.kpack"
        );
        // A bare target: one path, the one to install.
        let paths = tried("gfx1030");
        assert_eq!(
            expected_archives(&paths, "gfx1030").unwrap(),
            "/site/.kpack/fft_lib_gfx1030.kpack (as a device package for gfx1030 ships it)"
        );
        // ROCM_KPACK_PATH_PREFIX items first, named as they are: the bare archive still leads.
        let mut with_prefix = vec!["/opt/mine.kpack".to_string()];
        with_prefix.extend(tried("gfx90a:xnack+"));
        assert_eq!(
            expected_archives(&with_prefix, "gfx90a:xnack+").unwrap(),
            "/site/.kpack/fft_lib_gfx90a.kpack (as a device package for gfx90a ships it) or \
             one the loader tries before it: mine.kpack, fft_lib_gfx90a:xnack+.kpack"
        );
        // No path names the bare processor (ROCM_KPACK_PATH): the first tried leads.
        let env = ["/a/x.kpack".to_string(), "/b/y.kpack".to_string(), "/c/x.kpack".into()];
        assert_eq!(
            expected_archives(&env, "gfx942").unwrap(),
            "/a/x.kpack or y.kpack"
        );
        // A longer processor name is not the processor; a feature makes it not bare.
        assert!(!names_bare_processor("/s/lib_gfx9420.kpack", "gfx942"));
        assert!(!names_bare_processor("/s/gfx942/lib_gfx942:xnack-.kpack", "gfx942"));
        assert!(names_bare_processor("/s/gfx942/lib.kpack", "gfx942"));
        assert_eq!(expected_archives(&[], "gfx942"), None);
    }

    #[test]
    fn lexical_normalisation() {
        for (input, want) in [
            ("/a/b/../.kpack/x", "/a/.kpack/x"),
            ("/a/./b//c", "/a/b/c"),
            ("/../x", "/x"),
            ("a/../../x", "../x"),
            ("a/..", "."),
            ("/a/b/", "/a/b/"),
            ("/", "/"),
        ] {
            assert_eq!(lexically_normal(input), want, "{input}");
        }
    }

    #[test]
    fn mask_order_for_three_features() {
        let t = compatible_targets("a:x:y:z").unwrap();
        assert_eq!(
            t,
            ["a:x:y:z", "a:x:y", "a:x:z", "a:x", "a:y:z", "a:y", "a:z", "a"]
        );
        assert!(compatible_targets("").unwrap().is_empty());
        assert!(compatible_targets(":xnack+").unwrap().is_empty());
        assert_eq!(
            compatible_targets("amdgcn-amd-amdhsa--").unwrap(),
            ["amdgcn-amd-amdhsa--"]
        );
        assert!(compatible_targets("a:1:2:3:4:5:6:7:8:9").is_err());
    }
}
