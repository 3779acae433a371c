//! GPUs by the names people use (`--target "RTX 4090"`, `H100`, `8.9`, `MI300X`,
//! `"RX 7900 XTX"`): a table of product names with the device each one is, and the nearest
//! spelling for a name nobody knows (`sm86`: did you mean `sm_86`?).
//!
//! [`resolve`] tries, in order: the library's own device syntax (`Device::parse`: target
//! IDs, `sm_89`, triples; it stays strict), a compute capability (`8.9`), then the product
//! table. Product names are compared without case, blanks, `-` and `_`, and without the
//! brand words `NVIDIA`, `GeForce`, `Tesla`, `AMD`, `Radeon` and `Instinct`
//! (`NVIDIA GeForce RTX 4090` and `rtx4090` are the same name).
//!
//! Sources (docs/CLI.md, "GPU names"):
//! * NVIDIA: the compute capability of each product, from NVIDIA's "CUDA GPU Compute
//!   Capability" list (developer.nvidia.com/cuda-gpus) and the CUDA C++ Programming Guide's
//!   table of compute capabilities (Jetson AGX Thor: 11.0 from CUDA 13.0 on, 10.1 before).
//! * AMD: the LLVM target name of each product, from ROCm's "AMD GPU specifications"
//!   (rocm.docs.amd.com, reference/gpu-specs) and LLVM's AMDGPUUsage processor table. The
//!   Instinct GPUs (gfx906 to gfx950) carry their feature states as `rocminfo` names the
//!   agent in ROCm's default set-up: ECC on (`sramecc+`) and `HSA_XNACK` unset
//!   (`xnack-`), e.g. `gfx942:sramecc+:xnack-` for MI300X. Radeon GPUs of gfx10 to gfx12
//!   have neither feature.

use offload_image::Device;

/// One product: its name as its maker writes it and the device (in `Device::parse`'s
/// syntax).
pub struct Product {
    /// The product name (`RTX 4090`).
    pub name: &'static str,
    /// The device, as a target (`sm_89`, `gfx942:sramecc+:xnack-`).
    pub target: &'static str,
}

const fn p(name: &'static str, target: &'static str) -> Product {
    Product { name, target }
}

/// NVIDIA products by compute capability (NVIDIA's CUDA GPUs list).
pub const NVIDIA: &[Product] = &[
    // Blackwell (consumer and workstation: 12.0; DGX Spark: 12.1).
    p("RTX 5090", "sm_120"),
    p("RTX 5080", "sm_120"),
    p("RTX 5070 Ti", "sm_120"),
    p("RTX 5070", "sm_120"),
    p("RTX 5060 Ti", "sm_120"),
    p("RTX 5060", "sm_120"),
    p("RTX PRO 6000 Blackwell", "sm_120"),
    p("RTX PRO 6000", "sm_120"),
    p("GB10", "sm_121"),
    p("DGX Spark", "sm_121"),
    // Blackwell (data centre).
    p("B200", "sm_100"),
    p("GB200", "sm_100"),
    p("B300", "sm_103"),
    p("GB300", "sm_103"),
    p("Jetson AGX Thor", "sm_110"),
    p("Jetson Thor", "sm_110"),
    // Hopper.
    p("H100", "sm_90"),
    p("H200", "sm_90"),
    p("H800", "sm_90"),
    p("H20", "sm_90"),
    p("GH200", "sm_90"),
    // Ada Lovelace.
    p("RTX 4090", "sm_89"),
    p("RTX 4080 Super", "sm_89"),
    p("RTX 4080", "sm_89"),
    p("RTX 4070 Ti Super", "sm_89"),
    p("RTX 4070 Ti", "sm_89"),
    p("RTX 4070 Super", "sm_89"),
    p("RTX 4070", "sm_89"),
    p("RTX 4060 Ti", "sm_89"),
    p("RTX 4060", "sm_89"),
    p("RTX 6000 Ada", "sm_89"),
    p("L4", "sm_89"),
    p("L40", "sm_89"),
    p("L40S", "sm_89"),
    // Ampere.
    p("A100", "sm_80"),
    p("A800", "sm_80"),
    p("A30", "sm_80"),
    p("A10", "sm_86"),
    p("A10G", "sm_86"),
    p("A16", "sm_86"),
    p("A40", "sm_86"),
    p("RTX A6000", "sm_86"),
    p("RTX A5000", "sm_86"),
    p("RTX A4000", "sm_86"),
    p("RTX 3090 Ti", "sm_86"),
    p("RTX 3090", "sm_86"),
    p("RTX 3080 Ti", "sm_86"),
    p("RTX 3080", "sm_86"),
    p("RTX 3070 Ti", "sm_86"),
    p("RTX 3070", "sm_86"),
    p("RTX 3060 Ti", "sm_86"),
    p("RTX 3060", "sm_86"),
    p("RTX 3050", "sm_86"),
    p("Jetson AGX Orin", "sm_87"),
    p("Jetson Orin Nano", "sm_87"),
    p("Jetson Orin", "sm_87"),
    // Turing.
    p("T4", "sm_75"),
    p("RTX 2080 Ti", "sm_75"),
    p("RTX 2080", "sm_75"),
    p("RTX 2070", "sm_75"),
    p("RTX 2060", "sm_75"),
    p("GTX 1660 Ti", "sm_75"),
    p("GTX 1660", "sm_75"),
    p("GTX 1650", "sm_75"),
    p("TITAN RTX", "sm_75"),
    p("Quadro RTX 8000", "sm_75"),
    p("Quadro RTX 6000", "sm_75"),
    // Volta.
    p("V100", "sm_70"),
    p("TITAN V", "sm_70"),
    p("Jetson AGX Xavier", "sm_72"),
    // Pascal.
    p("P100", "sm_60"),
    p("P40", "sm_61"),
    p("P4", "sm_61"),
    p("GTX 1080 Ti", "sm_61"),
    p("GTX 1080", "sm_61"),
    p("GTX 1070", "sm_61"),
    p("GTX 1060", "sm_61"),
    p("GTX 1050", "sm_61"),
    p("TITAN Xp", "sm_61"),
];

/// AMD products by LLVM target name (ROCm's GPU specifications), Instinct with the
/// feature states `rocminfo` shows by default.
pub const AMD: &[Product] = &[
    // Instinct (CDNA).
    p("MI355X", "gfx950:sramecc+:xnack-"),
    p("MI350X", "gfx950:sramecc+:xnack-"),
    p("MI325X", "gfx942:sramecc+:xnack-"),
    p("MI300X", "gfx942:sramecc+:xnack-"),
    p("MI300A", "gfx942:sramecc+:xnack-"),
    p("MI250X", "gfx90a:sramecc+:xnack-"),
    p("MI250", "gfx90a:sramecc+:xnack-"),
    p("MI210", "gfx90a:sramecc+:xnack-"),
    p("MI100", "gfx908:sramecc+:xnack-"),
    p("MI60", "gfx906:sramecc+:xnack-"),
    p("MI50", "gfx906:sramecc+:xnack-"),
    // Radeon and Radeon PRO (RDNA 4).
    p("RX 9070 XT", "gfx1201"),
    p("RX 9070", "gfx1201"),
    p("AI PRO R9700", "gfx1201"),
    p("RX 9060 XT", "gfx1200"),
    // RDNA 3.
    p("RX 7900 XTX", "gfx1100"),
    p("RX 7900 XT", "gfx1100"),
    p("RX 7900 GRE", "gfx1100"),
    p("PRO W7900", "gfx1100"),
    p("PRO W7800", "gfx1100"),
    p("RX 7800 XT", "gfx1101"),
    p("RX 7700 XT", "gfx1101"),
    p("PRO W7700", "gfx1101"),
    p("RX 7600 XT", "gfx1102"),
    p("RX 7600", "gfx1102"),
    p("PRO W7600", "gfx1102"),
    p("Radeon 780M", "gfx1103"),
    p("Radeon 890M", "gfx1150"),
    p("Radeon 8060S", "gfx1151"),
    // RDNA 2.
    p("RX 6950 XT", "gfx1030"),
    p("RX 6900 XT", "gfx1030"),
    p("RX 6800 XT", "gfx1030"),
    p("RX 6800", "gfx1030"),
    p("PRO W6800", "gfx1030"),
    p("PRO V620", "gfx1030"),
    p("RX 6750 XT", "gfx1031"),
    p("RX 6700 XT", "gfx1031"),
    p("RX 6600 XT", "gfx1032"),
    p("RX 6600", "gfx1032"),
    // GCN 5.
    p("Radeon VII", "gfx906"),
];

/// The words of a brand that a product name may carry or leave out.
const BRAND_WORDS: &[&str] = &["nvidia", "geforce", "tesla", "amd", "radeon", "instinct"];

/// A product name as compared: lower case, without blanks, `-`, `_` and brand words.
fn key(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|w| !w.is_empty())
        .collect();
    // A name that is only a brand word (`Radeon`) keeps it: `Radeon VII`, `Radeon 780M`.
    let kept: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| !BRAND_WORDS.contains(w))
        .collect();
    if kept.is_empty() {
        words.concat()
    } else {
        kept.concat()
    }
}

/// The product `name` names, if the table has it.
pub fn product(name: &str) -> Option<&'static Product> {
    let k = key(name);
    if k.is_empty() {
        return None;
    }
    NVIDIA.iter().chain(AMD).find(|p| key(p.name) == k)
}

/// A compute capability typed as `8.9` (`major.minor`, one minor digit).
fn capability(text: &str) -> Option<Device> {
    let (major, minor) = text.trim().split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) || minor.len() != 1 {
        return None;
    }
    Device::cuda(major.parse().ok()?, minor.parse().ok()?).ok()
}

/// What [`resolve`] could not read: the library's reason and the nearest known spelling.
pub struct Unknown {
    /// The library's error for the text as a device name.
    pub error: offload_image::Error,
    /// The nearest spelling that [`resolve`] takes, if one is near enough.
    pub suggestion: Option<String>,
}

/// The device `text` names: a device in the library's syntax (`sm_89`,
/// `gfx942:sramecc+:xnack-`), a compute capability (`8.9`), or a product of the table
/// (`RTX 4090`, `MI300X`). Otherwise the library's error, with the nearest known spelling.
pub fn resolve(text: &str) -> Result<Device, Unknown> {
    let error = match Device::parse(text) {
        Ok(d) => return Ok(d),
        Err(e) => e,
    };
    if let Some(d) = capability(text) {
        return Ok(d);
    }
    if let Some(p) = product(text) {
        // Every target of the table parses (tested).
        if let Ok(d) = Device::parse(p.target) {
            return Ok(d);
        }
    }
    Err(Unknown {
        error,
        suggestion: suggest(text),
    })
}

/// [`resolve`] for the value `text` of command-line option `option` (`--target`), as a
/// [`Failure`](crate::Failure) of the library error's kind that names the nearest spelling:
/// `invalid --target 'sm86': ... (did you mean 'sm_86'?)`; without a near spelling, the
/// library's message alone.
pub fn device_arg(option: &str, text: &str) -> Result<Device, crate::Failure> {
    resolve(text).map_err(|u| {
        let hint = match &u.suggestion {
            Some(s) => format!(" (did you mean '{s}'?)"),
            None => String::new(),
        };
        crate::Failure {
            kind: Some(u.error.kind().name()),
            ..crate::Failure::msg(format!(
                "invalid {option} '{text}': {}{hint}",
                u.error.what()
            ))
        }
    })
}

/// The spellings [`suggest`] chooses among: every product name, every target of the
/// table, and the `sm_NN` of every compute capability from 5.0 to 12.1.
fn candidates() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in NVIDIA.iter().chain(AMD) {
        out.push(p.name.to_string());
        let bare = p.target.split(':').next().unwrap_or(p.target).to_string();
        if !out.contains(&bare) {
            out.push(bare);
        }
    }
    for major in 5..=12u8 {
        for minor in 0..=9u8 {
            let sm = format!("sm_{major}{minor}");
            if Device::parse(&sm).is_ok() && !out.contains(&sm) {
                out.push(sm);
            }
        }
    }
    out
}

/// Edit distance (insertions, deletions, substitutions) between `a` and `b`.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The known spelling nearest `text` (compared in lower case), when it is at most a third
/// of its length away (at least 1, at most 3 edits); the first of equals in table order.
pub fn suggest(text: &str) -> Option<String> {
    let t = text.trim().to_ascii_lowercase();
    if t.is_empty() || t.len() > 64 {
        return None;
    }
    let limit = (t.chars().count() / 3).clamp(1, 3);
    candidates()
        .into_iter()
        .map(|c| (distance(&t, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every target of the table is a device the library parses.
    #[test]
    fn every_target_parses() {
        for p in NVIDIA.iter().chain(AMD) {
            assert!(Device::parse(p.target).is_ok(), "{}: {}", p.name, p.target);
            assert!(!key(p.name).is_empty(), "{}", p.name);
        }
    }

    /// No two products share a compared name.
    #[test]
    fn names_are_distinct() {
        let all: Vec<String> = NVIDIA.iter().chain(AMD).map(|p| key(p.name)).collect();
        for (i, k) in all.iter().enumerate() {
            assert!(!all[..i].contains(k), "{k}");
        }
    }

    #[test]
    fn names_resolve() {
        let d = |s: &str| Device::parse(s).unwrap();
        assert_eq!(resolve("RTX 4090").ok(), Some(d("sm_89")));
        assert_eq!(resolve("NVIDIA GeForce RTX 4090").ok(), Some(d("sm_89")));
        assert_eq!(resolve("h100").ok(), Some(d("sm_90")));
        assert_eq!(resolve("8.9").ok(), Some(d("sm_89")));
        assert_eq!(resolve("12.0").ok(), Some(d("sm_120")));
        assert_eq!(resolve("MI300X").ok(), Some(d("gfx942:sramecc+:xnack-")));
        assert_eq!(
            resolve("AMD Instinct MI300X").ok(),
            Some(d("gfx942:sramecc+:xnack-"))
        );
        assert_eq!(resolve("RX 7900 XTX").ok(), Some(d("gfx1100")));
        assert_eq!(resolve("Radeon VII").ok(), Some(d("gfx906")));
        // The library's own syntax first.
        assert_eq!(resolve("gfx90a:xnack+").ok(), Some(d("gfx90a:xnack+")));
    }

    #[test]
    fn unknown_names_get_the_nearest_spelling() {
        let s = |t: &str| resolve(t).err().and_then(|u| u.suggestion);
        assert_eq!(s("sm86").as_deref(), Some("sm_86"));
        assert_eq!(s("gxf942").as_deref(), Some("gfx942"));
        assert_eq!(s("RTX 4909").as_deref(), Some("RTX 4090"));
        assert_eq!(s("MI300XX").as_deref(), Some("MI300X"));
        assert_eq!(s("completely unknown"), None);
        assert!(resolve("8.10").is_err());
        assert!(resolve("").is_err());
    }
}
