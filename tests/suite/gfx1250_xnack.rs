//! gfx1250 and gfx1251 run with xnack always on (`COMPATIBILITY.md` §8.1): a code object
//! whose `e_flags` xnack field says "unsupported" (0x000), "any" (0x100) or "on" (0x300) is
//! chosen for them, one that says "off" (0x200) is refused, and the reason names the
//! encoding.
//!
//! The flag words are those of shipped files: 0x549 (torch-scatter-rocm 2.1.2.post7 and
//! pyg-lib-rocm 0.8.0.post2, AMD clang 23.0.0git; llvm-readelf-22: "gfx1250, xnack,
//! sramecc"), 0x449 (jax-rocm10-plugin 0.12.0: "gfx1250, sramecc") and what LLVM main writes
//! since llvm/llvm-project#212792 (xnack 0x300: "gfx1250, xnack+, sramecc").
//!
//! `real_torch_scatter` checks the real library when `OFFLOAD_IMAGE_GFX1250_LIB` names
//! torch-scatter-rocm 2.1.2.post7's `_scatter_cuda.so` (`pip download --no-deps
//! torch-scatter-rocm==2.1.2.post7`, then unzip): the entry chosen is the one comgr's lookup
//! returns by `COMPATIBILITY.md` §7.1 (the first entry in header order whose ISA name is the
//! query's; the entry ID `hipv4-amdgcn-amd-amdhsa--gfx1250` gives
//! `amdgcn-amd-amdhsa--gfx1250`, and so does its ELF header, read by llvm-readelf-22).

use offload_image::arch::elf::AmdgpuElfProblem;
use offload_image::arch::Feature;
use offload_image::select::{explain, Rejection, Verdict};
use offload_image::{choose, units, Device, Format, Image, Policy, ReadOptions, SelectOptions};

/// A 72-byte AMDGPU code object header (HSA, code object V5) with these `e_flags`.
fn co(flags: u32) -> Vec<u8> {
    let mut h = vec![0u8; 72];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[7] = 64;
    h[8] = 3;
    h[18..20].copy_from_slice(&224u16.to_le_bytes());
    h[48..52].copy_from_slice(&flags.to_le_bytes());
    h
}

const UNSUPPORTED: u32 = 0x000;
const ANY: u32 = 0x100;
const OFF: u32 = 0x200;
const ON: u32 = 0x300;

fn verdict(id: &str, flags: u32, device: &str, policy: Policy) -> Result<(), String> {
    let bytes = co(flags);
    let image = Image::from_id(0, Format::Bundle, id, &bytes);
    let options = SelectOptions {
        policy,
        ..SelectOptions::default()
    };
    match explain(&image, &Device::parse(device).unwrap(), &options) {
        Verdict::Compatible(_) => Ok(()),
        Verdict::Rejected(r) => Err(r.to_string()),
    }
}

#[test]
fn xnack_any_unsupported_and_on_load_off_does_not() {
    for (mach, name) in [(0x49, "gfx1250"), (0x5A, "gfx1251")] {
        let id = format!("hipv4-amdgcn-amd-amdhsa--{name}");
        for device in [
            name,
            &format!("{name}:sramecc+"),
            &format!("{name}:sramecc-"),
        ] {
            for policy in [Policy::Best, Policy::First, Policy::FirstByClass] {
                for xnack in [UNSUPPORTED, ANY, ON] {
                    // sramecc "any" (0x400), as in the real files.
                    let flags = mach | xnack | 0x400;
                    assert_eq!(
                        verdict(&id, flags, device, policy),
                        Ok(()),
                        "{flags:#x} on {device}"
                    );
                }
                let why = verdict(&id, mach | OFF | 0x400, device, policy).unwrap_err();
                assert_eq!(
                    why,
                    format!("ELF header sets xnack off (e_flags 0x200, EF_AMDGPU_FEATURE_XNACK_OFF_V4), but {name} always runs with xnack on")
                );
            }
        }
        // The explicit sramecc of the real files' neighbours still counts (§5.1 rule 3).
        assert!(verdict(
            &id,
            mach | ANY | 0xC00,
            &format!("{name}:sramecc-"),
            Policy::Best
        )
        .is_err());
        assert!(verdict(
            &id,
            mach | ANY | 0xC00,
            &format!("{name}:sramecc+"),
            Policy::Best
        )
        .is_ok());
    }
}

#[test]
fn off_is_refused_as_an_elf_problem_and_others_are_chosen() {
    let entries: Vec<(&str, Vec<u8>)> = vec![
        ("hipv4-amdgcn-amd-amdhsa--gfx1250", co(0x49 | OFF | 0x400)),
        ("hipv4-amdgcn-amd-amdhsa--gfx1250", co(0x49 | ANY | 0x400)),
    ];
    let images: Vec<Image<'_>> = entries
        .iter()
        .enumerate()
        .map(|(i, (id, b))| Image::from_id(i, Format::Bundle, id, b))
        .collect();
    let device = Device::parse("gfx1250").unwrap();
    let choices = choose(images.iter().cloned(), &[device], &SelectOptions::default());
    assert_eq!(choices[0].image.as_ref().map(|i| i.index), Some(1));
    let verdict = explain(&images[0], &device, &SelectOptions::default());
    assert!(matches!(
        verdict,
        Verdict::Rejected(Rejection::Elf(AmdgpuElfProblem::AlwaysOnFeatureOff {
            feature: Feature::Xnack,
            processor: "gfx1250"
        }))
    ));
    // Alone, the "off" object leaves the device without code, with the reason.
    let only_off = choose(
        images[..1].iter().cloned(),
        &[device],
        &SelectOptions::default(),
    );
    assert!(only_off[0].image.is_none());
    let (_, why) = only_off[0].rejection.unwrap();
    assert!(why.to_string().contains("EF_AMDGPU_FEATURE_XNACK_OFF_V4"));
}

#[test]
#[ignore = "needs torch-scatter-rocm 2.1.2.post7's _scatter_cuda.so in OFFLOAD_IMAGE_GFX1250_LIB"]
fn real_torch_scatter() {
    let path = std::env::var_os("OFFLOAD_IMAGE_GFX1250_LIB").expect(
        "set OFFLOAD_IMAGE_GFX1250_LIB to torch-scatter-rocm 2.1.2.post7's _scatter_cuda.so",
    );
    let data = std::fs::read(path).unwrap();
    let options = ReadOptions::default();
    let mut checked = 0;
    for unit in units(&data, &options) {
        let unit = unit.unwrap();
        let open = unit.open(&options).unwrap();
        let images: Vec<Image<'_>> = open.images().collect();
        for name in ["gfx1250", "gfx1251"] {
            // comgr's rule (§7.1): the first entry, in header order, whose ID names the
            // query's ISA. Its e_flags are 0x549 / 0x55a (llvm-readelf-22: "gfx1250, xnack,
            // sramecc").
            let want = format!("hipv4-amdgcn-amd-amdhsa--{name}");
            let expected = images
                .iter()
                .find(|i| i.entry_id == Some(want.as_str()))
                .map(|i| i.index);
            assert!(expected.is_some(), "{name} entry");
            for policy in [Policy::Best, Policy::First, Policy::FirstByClass] {
                let options = SelectOptions {
                    policy,
                    ..SelectOptions::default()
                };
                let devices = [Device::parse(name).unwrap()];
                let choice = choose(images.iter().cloned(), &devices, &options);
                assert_eq!(choice[0].image.as_ref().map(|i| i.index), expected);
            }
            checked += 1;
        }
    }
    assert!(checked >= 2);
}
