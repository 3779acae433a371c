//! ROCm CLR's own lookup rules on top of the shared predicate (`SelectOptions::clr`): its
//! generic map by release (`COMPATIBILITY.md` §7.8) and its textual match of
//! `hipv4-amdgcn-amd-amdhsa--` (§1.5). The expected answers are CLR's tables as the
//! document cites them: gfx1101 → gfx11-generic from ROCm 6.4.0, gfx1152 → gfx11-generic
//! in later sources, gfx1154 in no table; an `amdgpu9.0a` entry is no
//! `hipv4-amdgcn-amd-amdhsa--gfx90a` text.
#![cfg(feature = "write")]

use offload_image::select::Rejection;
use offload_image::write::bundle::bundle_to_vec;
use offload_image::{choose, units, Device, ReadOptions, SelectOptions};

fn corpus(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/corpus")
            .join(name),
    )
    .unwrap()
}

/// The chosen entry's ID, or the unit's reason, for `device` under `options`.
fn pick(data: &[u8], device: &str, options: &SelectOptions) -> Result<String, String> {
    let read = ReadOptions::default();
    let unit = units(data, &read).next().unwrap().unwrap();
    let open = unit.open(&read).unwrap();
    let device = Device::parse(device).unwrap();
    let choice = choose(open.images(), &[device], options).remove(0);
    match (choice.image, choice.rejection) {
        (Some(image), _) => Ok(image.entry_id.unwrap().to_string()),
        (None, Some((_, why))) => Err(why.to_string()),
        (None, None) => Err("no images".into()),
    }
}

fn clr() -> SelectOptions {
    SelectOptions {
        clr: true,
        ..SelectOptions::default()
    }
}

#[test]
fn clr_takes_a_generic_object_only_where_its_map_does() {
    let bundle = corpus("bundles/hip_generic.bundle");
    let generic = "hipv4-amdgcn-amd-amdhsa--gfx11-generic";
    // In CLR's map since 6.4.0 and in later sources: the shared rules and CLR agree.
    for device in ["gfx1101", "gfx1151", "gfx1152"] {
        assert_eq!(
            pick(&bundle, device, &SelectOptions::default()).as_deref(),
            Ok(generic)
        );
        assert_eq!(
            pick(&bundle, device, &clr()).as_deref(),
            Ok(generic),
            "{device}"
        );
    }
    // gfx1154 is in LLVM's gfx11-generic, in no CLR map.
    assert_eq!(
        pick(&bundle, "gfx1154", &SelectOptions::default()).as_deref(),
        Ok(generic)
    );
    let why = pick(&bundle, "gfx1154", &clr()).unwrap_err();
    assert_eq!(
        why,
        "ROCm CLR does not use gfx11-generic code on gfx1154: no CLR generic map read \
         (ROCm 6.4 on) takes gfx1154 to gfx11-generic"
    );
}

#[test]
fn clr_does_not_find_entries_under_a_subarch_triple() {
    let co = corpus("devobj/saxpy.gfx90a.co");
    for (id, clr_finds) in [
        ("hipv4-amdgpu9.0a-amd-amdhsa--gfx90a", false),
        ("hipv4-amdgpu9.0a-amd-amdhsa--", false),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a", true),
    ] {
        let bundle =
            bundle_to_vec(&[("host-x86_64-unknown-linux-gnu-", &[]), (id, &co)], 4096).unwrap();
        // Every spelling names gfx90a for the shared rules (§1.5).
        assert_eq!(
            pick(&bundle, "gfx90a", &SelectOptions::default()).as_deref(),
            Ok(id)
        );
        match pick(&bundle, "gfx90a", &clr()) {
            Ok(chosen) => assert!(clr_finds && chosen == id, "{id}"),
            Err(why) => {
                assert!(!clr_finds, "{id}: {why}");
                assert!(
                    why.starts_with(
                        "ROCm CLR does not find an entry under the triple spelling `amdgpu9.0a`"
                    ),
                    "{why}"
                );
            }
        }
    }
    // The rejection is a matchable kind.
    let bundle = bundle_to_vec(&[("hipv4-amdgpu9.0a-amd-amdhsa--gfx90a", &co)], 4096).unwrap();
    let read = ReadOptions::default();
    let unit = units(&bundle, &read).next().unwrap().unwrap();
    let open = unit.open(&read).unwrap();
    let choice = choose(open.images(), &[Device::parse("gfx90a").unwrap()], &clr()).remove(0);
    assert!(matches!(
        choice.rejection,
        Some((_, Rejection::ClrSpelling { arch: "amdgpu9.0a" }))
    ));
}
