//! Parsing, validating, identifying and ranking allocate nothing.
//!
//! The binary's metered allocator (`common::alloc`) counts the allocations made on this test's thread while
//! it walks uncompressed containers of the corpus (bundles, OffloadBinaries, bare ELFs, host
//! objects, archives), identifies every image, parses and validates devices and target IDs,
//! selects for every device, and formats every rejection reason into a fixed buffer.

use std::fmt::Write as _;

use offload_image::arch::{EntryId, TargetId};
use offload_image::select::{check, Verdict};
use offload_image::{
    for_each_unit, identify, select, Device, KindFilter, Policy, ReadOptions, SelectOptions,
};

/// Allocations made by `f` on this thread (the binary's metered allocator).
fn allocations(f: impl FnOnce()) -> u64 {
    crate::common::alloc::allocations(f).1
}

/// A `fmt::Write` into a fixed buffer (counts bytes, keeps none).
struct Sink(usize);

impl std::fmt::Write for Sink {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

const FILES: &[&str] = &[
    "bundles/hip_6arch.bundle",
    "bundles/hip_generic.bundle",
    "bundles/hip_3field.bundle",
    "bundles/hip_bc.bundle",
    "bundles/host_elf.bundle.o",
    "bundles/omp_amd_nv.bundle",
    "nvptx/cuda_cubins.offbin",
    "nvptx/omp_cubins.offbin",
    "nvptx/omp_nv_cubins.bundle",
    "packager/concat.offbin",
    "packager/multi3.offbin",
    "driver/hip_nonrdc.exe",
    "driver/omp_amd_nv.o",
    "driver/libfat.a",
    "devobj/saxpy.gfx9-generic.co",
    "devobj/saxpy.sm_90a.cuda13.cubin",
    "text/omp.ll.bundle",
];

const DEVICES: &[&str] = &[
    "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
    "gfx906:sramecc-:xnack+",
    "gfx906",
    "gfx1031",
    "gfx942:sramecc+:xnack-",
    "gfx1101",
    "sm_80",
    "sm_90a",
    "nvptx64-nvidia-cuda--sm_103",
];

#[test]
fn parse_validate_rank_allocate_nothing() {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let files: Vec<Vec<u8>> = FILES
        .iter()
        .map(|f| std::fs::read(corpus.join(f)).unwrap())
        .collect();
    let read = ReadOptions::default();
    let policies = [
        SelectOptions::default(),
        SelectOptions {
            policy: Policy::First,
            ..SelectOptions::default()
        },
        SelectOptions {
            policy: Policy::FirstByClass,
            kind: KindFilter::Hip,
            ..SelectOptions::default()
        },
        SelectOptions::comgr(),
    ];
    let mut selected = 0u32;
    let mut sink = Sink(0);
    let n = allocations(|| {
        for d in DEVICES {
            let device = Device::parse(d).unwrap();
            let _ = device.isa_name();
            for data in &files {
                for_each_unit(data, &read, |unit| {
                    let open = unit.open(&read)?;
                    for options in &policies {
                        let s = select(open.images(), &device, options);
                        selected += u32::from(s.chosen().is_some());
                    }
                    for image in open.images() {
                        if let Some(id) = image.entry_id {
                            let _ = EntryId::parse(id);
                        }
                        let identity = identify(&image);
                        let _ = write!(
                            sink,
                            "{} {}",
                            identity.target,
                            identity.triple.map_or("", |t| t.arch)
                        );
                        if let Some(t) = identity.target.amdgpu() {
                            let _ = t.canonical();
                        }
                        if let Verdict::Rejected(r) =
                            check(&identity, image.index, &device, &policies[0])
                        {
                            let _ = write!(sink, "{r}");
                        }
                    }
                    Ok(())
                })
                .unwrap();
            }
        }
        for t in [
            "gfx90a:xnack-:sramecc+",
            "gfx1030:xnack+",
            "fiji",
            "gfx9-4-generic:sramecc+",
        ] {
            let _ = TargetId::parse(t);
        }
        let _ = Device::from_kfd_properties("capability 67108864\ngfx_target_version 90010\n");
    });
    assert_eq!(n, 0, "allocations during parse/identify/select");
    // The work was real: selections were made and reasons written.
    assert!(selected > 50, "{selected}");
    assert!(sink.0 > 5_000);
    // And the counter works.
    assert!(allocations(|| drop(std::hint::black_box(vec![1u8; 10]))) >= 1);
}
