//! The ranking on hand-assembled candidate sets where the policies differ
//! (`COMPATIBILITY.md` §9.4, §10): exact before `Any`, native before generic before JIT,
//! newest generic version, NVPTX exact cubin (`a` first), same-major cubin, PTX.

use offload_image::arch::{identify, Mismatch, Target};
use offload_image::select::{check, Class, Rejection, Verdict};
use offload_image::{Device, Format, Image, Policy, SelectOptions};

/// A 72-byte AMDGPU code object header (V5, or V6 with `generic` version).
fn co(mach: u8, xnack: u32, sramecc: u32, generic: u8) -> Vec<u8> {
    let flags = u32::from(mach) | xnack << 8 | sramecc << 10 | u32::from(generic) << 24;
    let mut h = vec![0u8; 72];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[7] = 64;
    h[8] = if generic > 0 { 4 } else { 3 };
    h[18..20].copy_from_slice(&224u16.to_le_bytes());
    h[48..52].copy_from_slice(&flags.to_le_bytes());
    h
}

const ANY: u32 = 1;
const OFF: u32 = 2;
const ON: u32 = 3;

fn pick(entries: &[(&str, Vec<u8>)], device: &str, policy: Policy) -> Option<String> {
    let images: Vec<Image<'_>> = entries
        .iter()
        .enumerate()
        .map(|(i, (id, b))| Image::from_id(i, Format::Bundle, id, b))
        .collect();
    let options = SelectOptions {
        policy,
        ..SelectOptions::default()
    };
    let s = offload_image::select(&images, &Device::parse(device).unwrap(), &options);
    s.chosen().map(|i| entries[i].0.to_string())
}

#[test]
fn exact_features_beat_any_but_not_under_first() {
    // A merged bundle holding gfx90a (any) before gfx90a:xnack+ (clang would refuse to
    // build it, §2.5; merging tools do not check).
    let e = vec![
        ("hipv4-amdgcn-amd-amdhsa--gfx90a", co(0x3F, ANY, ANY, 0)),
        (
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            co(0x3F, ON, ANY, 0),
        ),
        (
            "hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack+",
            co(0x3F, ON, ON, 0),
        ),
    ];
    let d = "gfx90a:sramecc+:xnack+";
    assert_eq!(pick(&e, d, Policy::Best).unwrap(), e[2].0);
    assert_eq!(pick(&e, d, Policy::First).unwrap(), e[0].0);
    assert_eq!(pick(&e, d, Policy::FirstByClass).unwrap(), e[0].0);
    assert_eq!(
        pick(&e, "gfx90a:sramecc-:xnack+", Policy::Best).unwrap(),
        e[1].0
    );
    assert_eq!(
        pick(&e, "gfx90a:sramecc-:xnack-", Policy::Best).unwrap(),
        e[0].0
    );
}

#[test]
fn native_before_generic_before_jit_newest_generic_first() {
    let e = vec![
        (
            "hipv4-spirv64-amd-amdhsa--amdgcnspirv",
            vec![0x03, 0x02, 0x23, 0x07, 0],
        ),
        ("hipv4-amdgcn-amd-amdhsa--gfx9-generic", co(0x51, ANY, 0, 1)),
        (
            "hipv4-amdgcn-amd-amdhsa--gfx9-generic:xnack-",
            co(0x51, OFF, 0, 2),
        ),
        (
            "hip-amdgcn-amd-amdhsa--gfx906",
            vec![0x42, 0x43, 0xC0, 0xDE],
        ),
        (
            "hipv4-amdgcn-amd-amdhsa--gfx906:xnack-",
            co(0x2F, OFF, ANY, 0),
        ),
    ];
    assert_eq!(
        pick(&e, "gfx906:sramecc+:xnack-", Policy::Best).unwrap(),
        e[4].0
    );
    // xnack+: the native object and the xnack- generic drop out; the v1 generic remains.
    assert_eq!(
        pick(&e, "gfx906:sramecc+:xnack+", Policy::Best).unwrap(),
        e[1].0
    );
    // gfx900:xnack-: two generics; version 2 beats version 1 (and is exact).
    assert_eq!(pick(&e, "gfx900:xnack-", Policy::Best).unwrap(), e[2].0);
    // gfx90a: no family; the gfx906 bitcode is for another processor; SPIR-V runs anywhere.
    assert_eq!(
        pick(&e, "gfx90a:sramecc+:xnack-", Policy::Best).unwrap(),
        e[0].0
    );
    // First: SPIR-V comes first in the file.
    assert_eq!(
        pick(&e, "gfx906:sramecc+:xnack-", Policy::First).unwrap(),
        e[0].0
    );
    // CLR-like: native, then generic, then JIT.
    assert_eq!(
        pick(&e, "gfx906:sramecc+:xnack-", Policy::FirstByClass).unwrap(),
        e[4].0
    );
    assert_eq!(
        pick(&e, "gfx906:sramecc+:xnack+", Policy::FirstByClass).unwrap(),
        e[1].0
    );
    // The gfx906 bitcode is the only native-processor candidate for an unknown-xnack
    // gfx906 besides the v1 generic (Any): generic (class compatible) beats JIT.
    assert_eq!(pick(&e, "gfx906", Policy::Best).unwrap(), e[1].0);
    let options = SelectOptions {
        allow_spirv: false,
        allow_generic: false,
        ..SelectOptions::default()
    };
    let img = Image::from_id(0, Format::Bundle, e[1].0, &e[1].1);
    let v = check(
        &identify(&img),
        0,
        &Device::parse("gfx906").unwrap(),
        &options,
    );
    assert!(matches!(
        v,
        Verdict::Rejected(Rejection::GenericNotAllowed(_))
    ));
}

#[test]
fn generic_code_objects_need_a_version() {
    let bad = co(0x51, ANY, 0, 0); // V6 generic with version 0
    let img = Image::from_id(
        0,
        Format::Bundle,
        "hipv4-amdgcn-amd-amdhsa--gfx9-generic",
        &bad,
    );
    let v = check(
        &identify(&img),
        0,
        &Device::parse("gfx906").unwrap(),
        &SelectOptions::default(),
    );
    let Verdict::Rejected(r) = v else {
        panic!("{v:?}")
    };
    assert_eq!(
        r.to_string(),
        "generic code object without a generic version (needs code object V6, version >= 1)"
    );
}

#[test]
fn nvptx_exact_cubin_then_same_major_then_ptx() {
    let cubin = |sm: u32, a: bool| {
        let mut h = vec![0u8; 72];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[7] = 0x33;
        h[8] = 7;
        h[18..20].copy_from_slice(&190u16.to_le_bytes());
        let flags = sm | sm << 16 | 0x500 | if a { 0x800 } else { 0 };
        h[48..52].copy_from_slice(&flags.to_le_bytes());
        h
    };
    let ptx = |sm: &str| format!(".version 8.0\n.target {sm}\n").into_bytes();
    let e = vec![
        ("openmp-nvptx64-nvidia-cuda--sm_70", ptx("sm_70")),
        ("openmp-nvptx64-nvidia-cuda--sm_86", ptx("sm_86")),
        ("openmp-nvptx64-nvidia-cuda--sm_80", cubin(80, false)),
        ("openmp-nvptx64-nvidia-cuda--sm_86", cubin(86, false)),
        ("openmp-nvptx64-nvidia-cuda--sm_90", cubin(90, false)),
        ("openmp-nvptx64-nvidia-cuda--sm_90a", cubin(90, true)),
    ];
    assert_eq!(pick(&e, "sm_90", Policy::Best).unwrap(), e[5].0); // `a` before plain
    assert_eq!(pick(&e, "sm_89", Policy::Best).unwrap(), e[3].0); // highest minor <= 9
    assert_eq!(pick(&e, "sm_86", Policy::Best).unwrap(), e[3].0); // exact cubin
    assert_eq!(pick(&e, "sm_80", Policy::Best).unwrap(), e[2].0);
    assert_eq!(pick(&e, "sm_75", Policy::Best).unwrap(), e[0].0); // PTX
    assert_eq!(pick(&e, "sm_120", Policy::Best).unwrap(), e[1].0); // newest PTX <= 12.0
    assert_eq!(pick(&e, "sm_61", Policy::Best), None);
    assert_eq!(pick(&e, "sm_89", Policy::First).unwrap(), e[0].0);
    let img = Image::from_id(0, Format::Bundle, e[3].0, &e[3].1);
    let Some(k) = check(
        &identify(&img),
        0,
        &Device::parse("sm_89").unwrap(),
        &SelectOptions::default(),
    )
    .key() else {
        panic!()
    };
    assert_eq!((k.class, k.distance), (Class::Compatible, 3));
}

/// Entry-ID spellings real tools write, identified (normalised triple, canonical target).
#[test]
fn spellings() {
    let cu = {
        let mut h = vec![0u8; 72];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[7] = 0x41;
        h[8] = 8;
        h[18..20].copy_from_slice(&190u16.to_le_bytes());
        h[48..52].copy_from_slice(&0x600_5A04u32.to_le_bytes());
        h
    };
    for (id, triple, target) in [
        (
            "openmp-nvptx64-nvidia-cuda--sm_90",
            "nvptx64-nvidia-cuda",
            "sm_90",
        ), // LLVM 19
        (
            "openmp-nvptx64-nvidia-cuda-unknown-sm_90",
            "nvptx64-nvidia-cuda",
            "sm_90",
        ), // LLVM 22
        (
            "hip-nvptx64-nvidia-cuda-sm_90",
            "nvptx64-nvidia-cuda",
            "sm_90",
        ), // legacy 3-field
    ] {
        let img = Image::from_id(0, Format::Bundle, id, &cu);
        let i = identify(&img);
        assert_eq!(i.triple.unwrap().to_string(), triple, "{id}");
        assert_eq!(i.target.to_string(), target, "{id}");
        assert_eq!(i.mismatch, None);
    }
    let g = co(0x3F, ON, ANY, 0);
    for (id, target) in [
        ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", "gfx90a:xnack+"),
        (
            "hip-amdgcn-amd-amdhsa-unknown-gfx90a:xnack+",
            "gfx90a:xnack+",
        ),
        ("hcc-amdgcn-amd-amdhsa--gfx90a:xnack+", "gfx90a:xnack+"),
        ("hip-amdgcn-amd-amdhsa-gfx90a:xnack+", "gfx90a:xnack+"),
        ("hip-amdgcn-amd-amdhsa-", "gfx90a:xnack+"), // no target: from e_flags
    ] {
        let img = Image::from_id(0, Format::Bundle, id, &g);
        let i = identify(&img);
        assert_eq!(i.triple.unwrap().to_string(), "amdgcn-amd-amdhsa", "{id}");
        assert_eq!(i.target.to_string(), target, "{id}");
        assert!(
            check(
                &i,
                0,
                &Device::parse("gfx90a:sramecc-:xnack+").unwrap(),
                &SelectOptions::default()
            )
            .key()
            .is_some(),
            "{id}"
        );
    }
    for (id, triple) in [
        ("host-x86_64-unknown-linux--", "x86_64-unknown-linux"),
        ("host-x86_64-unknown-linux-gnu-", "x86_64-unknown-linux-gnu"),
        ("host-x86_64-unknown-linux", "x86_64-unknown-linux"),
    ] {
        let img = Image::from_id(0, Format::Bundle, id, &[]);
        let i = identify(&img);
        assert_eq!(i.triple.unwrap().to_string(), triple);
        assert_eq!(i.target, Target::None);
    }
    // An unknown processor is carried through and matches nothing.
    let img = Image::from_id(0, Format::Bundle, "hipv4-amdgcn-amd-amdhsa--gfx9999", &[1]);
    let i = identify(&img);
    assert!(matches!(
        i.target,
        Target::Invalid {
            text: "gfx9999",
            ..
        }
    ));
    let v = check(
        &i,
        0,
        &Device::parse("gfx906").unwrap(),
        &SelectOptions::default(),
    );
    let Verdict::Rejected(r) = v else { panic!() };
    assert_eq!(
        r.to_string(),
        "invalid target 'gfx9999': unknown AMDGPU processor"
    );
    // e_flags for another processor than the ID: the ELF header wins.
    let img = Image::from_id(0, Format::Bundle, "hipv4-amdgcn-amd-amdhsa--gfx906", &g);
    assert_eq!(identify(&img).mismatch, Some(Mismatch::Processor));
}
