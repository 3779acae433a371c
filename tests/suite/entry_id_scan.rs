//! `EntryId::parse` finds the separators of a bundle entry ID eight bytes at a time (issue 47,
//! P4). Its answers must be those of the plain `str::splitn` reading it replaced, kept here as
//! the oracle, on every ID of up to five pieces drawn from a set that covers the spellings
//! (empty fields, `-` inside the target, both legacy OS fields, processors in the env slot).

use offload_image::arch::EntryId;

/// (kind, triple, target ID), or the error's text.
type Parsed<'a> = Result<(&'a str, &'a str, Option<&'a str>), &'static str>;

const NO_TRIPLE: &str =
    "bundle entry ID has no triple (expected <kind>-<arch>-<vendor>-<os>[-<env>[-<target>]])";

/// The `str::splitn` implementation `EntryId::parse` had before issue 47.
fn parse_by_splitn(id: &str) -> Parsed<'_> {
    let mut pieces = id.splitn(6, '-');
    let kind = pieces.next().unwrap_or("");
    if kind.is_empty() {
        return Err("bundle entry ID has an empty offload kind");
    }
    let rest = id.get(kind.len() + 1..).ok_or(NO_TRIPLE)?;
    let fields: [Option<&str>; 5] = std::array::from_fn(|_| pieces.next());
    let n = fields.iter().filter(|f| f.is_some()).count();
    // Byte length of the first `k` triple fields joined by '-'.
    let span = |k: usize| -> usize {
        fields
            .iter()
            .take(k)
            .flatten()
            .fold(k - 1, |acc, f| acc + f.len())
    };
    let looks_like_processor =
        |s: &str| s.starts_with("gfx") || s.starts_with("sm_") || s == "amdgcnspirv";
    let (triple_len, target) = match n {
        3 => (span(3), None),
        4 => {
            let env = fields[3].unwrap_or("");
            if looks_like_processor(env) && matches!(fields[2], Some("amdhsa" | "cuda")) {
                (span(3), Some(env))
            } else {
                (span(4), None)
            }
        }
        5 => (span(4) + 1, fields[4]),
        _ => return Err(NO_TRIPLE),
    };
    if fields.iter().take(3).flatten().any(|f| f.is_empty()) {
        return Err("bundle entry ID has an empty arch, vendor or OS field");
    }
    let triple = &rest[..triple_len];
    let triple = if n == 5 {
        triple.strip_suffix('-').unwrap_or(triple)
    } else {
        triple
    };
    Ok((kind, triple, target.filter(|t| !t.is_empty())))
}

#[test]
fn byte_scan_agrees_with_splitn() {
    let pieces = [
        "",
        "hipv4",
        "amdgcn",
        "amd",
        "amdhsa",
        "cuda",
        "gfx90a:xnack-",
        "sm_80",
        "gnu",
        "-",
        "x",
    ];
    let mut ids = Vec::new();
    let mut stack = vec![String::new()];
    for _ in 0..5 {
        let mut next = Vec::new();
        for prefix in &stack {
            for p in pieces {
                let id = if prefix.is_empty() {
                    p.to_string()
                } else {
                    format!("{prefix}-{p}")
                };
                ids.push(id.clone());
                if id.len() < 40 {
                    next.push(id);
                }
            }
        }
        stack = next;
    }
    assert!(ids.len() > 100_000, "{}", ids.len());
    let mut accepted = 0;
    for id in &ids {
        let new: Parsed<'_> = EntryId::parse(id)
            .map(|e| (e.kind, e.triple, e.target_id))
            .map_err(|e| {
                assert_eq!(e.kind(), offload_image::ErrorKind::InvalidId, "{id:?}");
                e.what()
            });
        assert_eq!(new, parse_by_splitn(id), "{id:?}");
        accepted += usize::from(new.is_ok());
    }
    // Both outcomes are well represented.
    assert!(
        accepted > 10_000 && ids.len() - accepted > 10_000,
        "{accepted}"
    );
}
