//! Properties of the compatibility predicate and the ranking.
//!
//! 1. For every AMDGPU processor and every combination of feature states (image: any / on /
//!    off where selectable; device: on / off / unknown where selectable), and every generic
//!    version, the predicate equals a brute-force reading of `COMPATIBILITY.md` §5.1 that
//!    enumerates the concrete hardware modes a device may be in and asks whether the code
//!    runs in all of them. The ranking class and specificity equal a direct reading of §10.
//!    The same for NVPTX: every architecture × variant × cubin/PTX against every compute
//!    capability, read from the §9.2 table.
//! 2. (proptest) The choice does not change when a bundle's entries are permuted, unless two
//!    candidates tie exactly (then the choice stays within the tie).

use offload_image::arch::{ArchVariant, Feature, FeatureState, NvArch, Processor, TargetId};
use offload_image::select::{check, Class, Verdict};
use offload_image::{identify, Device, Format, Image, OffloadKind, SelectOptions};
use proptest::prelude::*;

/// A 72-byte AMDGPU code object header: V5 (ABI 3) for concrete processors, V6 (ABI 4) with
/// the generic version for generic ones; byte 64 marks the image.
fn amdgpu_elf(t: &TargetId, generic_version: u8, mark: u8) -> Vec<u8> {
    let two = |s: FeatureState| match s {
        FeatureState::Unsupported => 0u32,
        FeatureState::Any => 1,
        FeatureState::Off => 2,
        FeatureState::On => 3,
    };
    let flags = u32::from(t.processor.mach)
        | two(t.xnack) << 8
        | two(t.sramecc) << 10
        | u32::from(generic_version) << 24;
    let mut h = vec![0u8; 72];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[6] = 1;
    h[7] = 64;
    h[8] = if t.processor.is_generic() { 4 } else { 3 };
    h[16..18].copy_from_slice(&3u16.to_le_bytes());
    h[18..20].copy_from_slice(&224u16.to_le_bytes());
    h[48..52].copy_from_slice(&flags.to_le_bytes());
    h[64] = mark;
    h
}

/// A cubin header (CUDA ABI V1 up to sm_90, V2 from sm_100, as ptxas 12.9 writes them).
fn cubin(a: NvArch, mark: u8) -> Vec<u8> {
    let sm = u32::from(a.sm);
    let is_a = a.variant == ArchVariant::ArchSpecific;
    let (abi, osabi, flags) = if a.sm < 100 {
        (
            7u8,
            0x33u8,
            sm | sm << 16 | 0x500 | if is_a { 0x800 } else { 0 },
        )
    } else {
        (8, 0x41, sm << 8 | 0x0600_0002 | if is_a { 0x8 } else { 0 })
    };
    let mut h = vec![0u8; 72];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[6] = 1;
    h[7] = osabi;
    h[8] = abi;
    h[16..18].copy_from_slice(&2u16.to_le_bytes());
    h[18..20].copy_from_slice(&190u16.to_le_bytes());
    h[48..52].copy_from_slice(&flags.to_le_bytes());
    h[64] = mark;
    h
}

/// Image states a target ID may have for `f` on `p`.
fn image_states(p: &Processor, f: Feature) -> Vec<FeatureState> {
    if p.support(f).is_selectable() {
        vec![FeatureState::Any, FeatureState::On, FeatureState::Off]
    } else {
        vec![FeatureState::Unsupported]
    }
}

/// Device states for `f` on `p` (`Any` = unknown).
fn device_states(p: &Processor, f: Feature) -> Vec<FeatureState> {
    if p.support(f).is_selectable() {
        vec![FeatureState::On, FeatureState::Off, FeatureState::Any]
    } else {
        vec![FeatureState::Unsupported]
    }
}

/// The concrete hardware modes a device with state `d` may be in (unknown: either; a
/// feature the processor lacks behaves as off).
fn modes(d: FeatureState) -> &'static [bool] {
    match d {
        FeatureState::On => &[true],
        FeatureState::Off => &[false],
        FeatureState::Any => &[true, false],
        FeatureState::Unsupported => &[false],
    }
}

/// Whether code built with state `i` runs in hardware mode `on`.
fn runs(i: FeatureState, on: bool) -> bool {
    match i {
        FeatureState::On => on,
        FeatureState::Off => !on,
        FeatureState::Any | FeatureState::Unsupported => true,
    }
}

/// §5.1 read by brute force: processor rule, then "runs in every mode the device may be in".
fn brute_force(img: &TargetId, g: u8, dev: &TargetId) -> bool {
    let (pi, pd) = (img.processor, dev.processor);
    let processor_ok = if pi.name == pd.name {
        true
    } else {
        pi.is_generic() && pd.family == Some(pi.name) && g >= 1
    };
    if pi.is_generic() && g == 0 {
        return false; // a generic code object needs version >= 1 (§4)
    }
    processor_ok
        && modes(dev.sramecc).iter().all(|&s| runs(img.sramecc, s))
        && modes(dev.xnack).iter().all(|&x| runs(img.xnack, x))
}

#[test]
fn amdgpu_predicate_equals_brute_force() {
    let options = SelectOptions::default();
    let mut devices = Vec::new();
    for p in Processor::all().iter().filter(|p| !p.is_generic()) {
        for s in device_states(p, Feature::Sramecc) {
            for x in device_states(p, Feature::Xnack) {
                let t = TargetId {
                    processor: p,
                    sramecc: s,
                    xnack: x,
                };
                devices.push(t);
            }
        }
    }
    let (mut checked, mut compatible) = (0u64, 0u64);
    for p in Processor::all() {
        let versions: &[u8] = if p.is_generic() { &[0, 1, 2] } else { &[0] };
        for s in image_states(p, Feature::Sramecc) {
            for x in image_states(p, Feature::Xnack) {
                let img_t = TargetId::new(p, s, x).unwrap();
                let id = format!("hipv4-amdgcn-amd-amdhsa--{img_t}");
                for &g in versions {
                    let bytes = amdgpu_elf(&img_t, g, 0);
                    let image = Image::from_id(3, Format::Bundle, &id, &bytes);
                    let identity = identify(&image);
                    assert_eq!(identity.mismatch, None, "{id}");
                    for dev in &devices {
                        let verdict = check(&identity, 3, &Device::Amdgpu(*dev), &options);
                        let want = brute_force(&img_t, g, dev);
                        assert_eq!(
                            verdict.key().is_some(),
                            want,
                            "{id} (v{g}) on {dev}: {verdict:?}"
                        );
                        checked += 1;
                        if let Verdict::Compatible(k) = verdict {
                            compatible += 1;
                            // §10: class and specificity read directly.
                            let class = if p.name == dev.processor.name {
                                Class::Native
                            } else {
                                Class::Compatible
                            };
                            let any = Feature::ALL
                                .iter()
                                .filter(|&&f| {
                                    dev.processor.support(f).is_selectable()
                                        && img_t.state(f) == FeatureState::Any
                                })
                                .count() as u8;
                            assert_eq!((k.class, k.specificity, k.index), (class, any, 3));
                            assert_eq!(k.generic_version(), p.is_generic().then_some(g));
                        } else if let Verdict::Rejected(r) = verdict {
                            assert!(!r.to_string().is_empty());
                        }
                    }
                }
            }
        }
    }
    eprintln!("{checked} (image, device) pairs, {compatible} compatible");
    assert!(checked > 20_000 && compatible > 500);
}

/// §9.2 as a table: does `arch` (cubin or PTX) run on compute capability `major.minor`?
fn nv_brute_force(a: NvArch, cubin: bool, major: u16, minor: u16) -> bool {
    let (x, y) = (a.major(), a.minor());
    match (cubin, a.variant) {
        (_, ArchVariant::ArchSpecific) => major == x && minor == y,
        (_, ArchVariant::FamilySpecific) => major == x && minor >= y,
        (true, ArchVariant::Plain) => major == x && minor >= y,
        (false, ArchVariant::Plain) => major * 10 + minor >= x * 10 + y,
    }
}

#[test]
fn nvptx_predicate_equals_brute_force() {
    let options = SelectOptions::default();
    let sms = [
        50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121,
    ];
    let mut checked = 0;
    for sm in sms {
        for variant in [
            ArchVariant::Plain,
            ArchVariant::ArchSpecific,
            ArchVariant::FamilySpecific,
        ] {
            let name = format!("sm_{sm}{}", variant.suffix());
            let Ok(arch) = NvArch::parse(&name) else {
                continue; // `a` before sm_90, `f` before sm_100
            };
            for cubin_code in [true, false] {
                let id = format!("openmp-nvptx64-nvidia-cuda--{name}");
                let bytes = if cubin_code {
                    cubin(arch, 0)
                } else {
                    format!(".version 8.0\n.target {name}\n").into_bytes()
                };
                let image = Image::from_id(0, Format::Bundle, &id, &bytes);
                let identity = identify(&image);
                for major in 3..=13u8 {
                    for minor in 0..=9u8 {
                        let dev = Device::cuda(major, minor).unwrap();
                        let got = check(&identity, 0, &dev, &options);
                        let want = nv_brute_force(arch, cubin_code, major.into(), minor.into());
                        assert_eq!(
                            got.key().is_some(),
                            want,
                            "{name} cubin={cubin_code} on {dev}"
                        );
                        if let Some(k) = got.key() {
                            let exact = u16::from(major) * 10 + u16::from(minor) == sm;
                            let class = match (cubin_code, exact) {
                                (true, true) => Class::Native,
                                (true, false) => Class::Compatible,
                                (false, _) => Class::Jit,
                            };
                            assert_eq!(k.class, class, "{name} on {dev}");
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 5_000);
}

/// A pool of entries for random bundles: (kind, target ID, bitcode?).
const POOL: &[(&str, &str, bool)] = &[
    ("hipv4", "gfx906", false),
    ("hipv4", "gfx906:xnack+", false),
    ("hip", "gfx906:sramecc-:xnack-", false),
    ("hipv4", "gfx9-generic", false),
    ("hipv4", "gfx9-generic:xnack-", false),
    ("hipv4", "gfx90a", false),
    ("hipv4", "gfx90a:xnack+", false),
    ("hipv4", "gfx90a:sramecc+:xnack-", false),
    ("hip", "gfx90a:xnack-", true),
    ("openmp", "gfx90a", false),
    ("hipv4", "gfx942:sramecc+:xnack-", false),
    ("hipv4", "gfx9-4-generic", false),
    ("hipv4", "gfx9-4-generic:sramecc+", false),
    ("hipv4", "gfx1030", false),
    ("hipv4", "gfx10-3-generic", false),
    ("hipv4", "gfx1100", false),
    ("hipv4", "gfx11-generic", false),
    ("hipv4", "gfx1201", true),
    ("openmp", "sm_70", true),
    ("openmp", "sm_80", false),
    ("openmp", "sm_86", false),
    ("openmp", "sm_90a", false),
    ("openmp", "sm_90", true),
    ("openmp", "sm_100f", false),
    ("openmp", "sm_80", true),
];

const DEVICES: &[&str] = &[
    "gfx906:sramecc+:xnack-",
    "gfx906:sramecc-:xnack+",
    "gfx906",
    "gfx900:xnack-",
    "gfx90a:sramecc+:xnack+",
    "gfx90a:sramecc-:xnack-",
    "gfx942:sramecc+:xnack-",
    "gfx950:sramecc-:xnack+",
    "gfx1031",
    "gfx1100",
    "gfx1151",
    "gfx1201",
    "sm_75",
    "sm_80",
    "sm_89",
    "sm_90",
    "sm_103",
    "sm_120",
];

struct Bundle {
    ids: Vec<String>,
    bytes: Vec<Vec<u8>>,
}

/// Entries `picks` of the pool, each image marked with its position.
fn bundle(picks: &[usize], generic_versions: &[u8]) -> Bundle {
    let mut ids = Vec::new();
    let mut bytes = Vec::new();
    for (mark, (&i, &g)) in picks.iter().zip(generic_versions).enumerate() {
        let (kind, target, bitcode) = POOL[i];
        let triple = if target.starts_with("sm_") {
            "nvptx64-nvidia-cuda"
        } else {
            "amdgcn-amd-amdhsa"
        };
        ids.push(format!("{kind}-{triple}--{target}"));
        let mark = mark as u8;
        let b = if bitcode {
            vec![0x42, 0x43, 0xC0, 0xDE, mark]
        } else if let Ok(a) = NvArch::parse(target) {
            cubin(a, mark)
        } else {
            amdgpu_elf(&TargetId::parse(target).unwrap(), g, mark)
        };
        bytes.push(b);
    }
    Bundle { ids, bytes }
}

impl Bundle {
    fn images(&self, order: &[usize]) -> Vec<Image<'_>> {
        order
            .iter()
            .enumerate()
            .map(|(pos, &i)| Image::from_id(pos, Format::Bundle, &self.ids[i], &self.bytes[i]))
            .collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn choice_is_independent_of_entry_order(
        picks in prop::collection::vec(0..POOL.len(), 1..8),
        versions in prop::collection::vec(1u8..4, 8),
        dev in 0..DEVICES.len(),
        perm_seed in any::<u64>(),
    ) {
        let b = bundle(&picks, &versions);
        let device = Device::parse(DEVICES[dev]).unwrap();
        let options = SelectOptions::default();
        let identity: Vec<usize> = (0..picks.len()).collect();
        // A permutation from the seed (Fisher-Yates with a simple LCG).
        let mut order = identity.clone();
        let mut state = perm_seed | 1;
        for i in (1..order.len()).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (state >> 33) as usize % (i + 1));
        }
        let a_imgs = b.images(&identity);
        let b_imgs = b.images(&order);
        let sa = offload_image::select(&a_imgs, &device, &options);
        let sb = offload_image::select(&b_imgs, &device, &options);
        prop_assert_eq!(sa.compatible, sb.compatible);
        prop_assert_eq!(sa.chosen().is_some(), sb.chosen().is_some());
        if let (Some(ca), Some(cb)) = (sa.chosen(), sb.chosen()) {
            let (orig_a, orig_b) = (identity[ca], order[cb]);
            if !sa.tie {
                prop_assert_eq!(orig_a, orig_b, "{:?} on {}", b.ids, DEVICES[dev]);
            } else {
                // Within the tie: same key apart from the discovery index.
                let (ka, kb) = (sa.key.unwrap(), sb.key.unwrap());
                prop_assert!(ka.ties_with(&kb, options.policy));
            }
        }
    }
}

/// Entries with kinds the request does not accept never win, whatever the order.
#[test]
fn kinds_and_host_are_never_candidates() {
    let host = Image::from_id(
        0,
        Format::Bundle,
        "host-x86_64-unknown-linux-gnu-",
        b"\x7fELF",
    );
    let id = identify(&host);
    assert_eq!(id.offload_kind, OffloadKind::Host);
    for d in DEVICES {
        assert!(check(
            &id,
            0,
            &Device::parse(d).unwrap(),
            &SelectOptions::default()
        )
        .key()
        .is_none());
    }
}
