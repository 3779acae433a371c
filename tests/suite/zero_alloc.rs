//! Parsing an uncompressed container and iterating its images performs no heap allocation,
//! and every image slice lies inside the input buffer.
//!
//! The binary's metered allocator (`common::alloc`) counts only the allocations of the thread
//! that walks (the other tests and the harness allocate when they please).

use crate::common;

use offload_image::{for_each_unit, ReadOptions};

/// Walks `data`, opens every unit and touches every image; returns (images, allocations).
fn walk_counting(data: &[u8]) -> (usize, usize) {
    let options = ReadOptions::default();
    let start = data.as_ptr() as usize;
    let end = start + data.len();
    let mut images = 0usize;
    let (result, allocations) = common::alloc::allocations(|| {
        for_each_unit(data, &options, |unit| {
            let open = unit.open(&options)?;
            for image in open.images() {
                let p = image.bytes.as_ptr() as usize;
                // Checked without allocating; reported after counting stops.
                if unit.compressed().is_none()
                    && image.is_decoded()
                    && (p < start || p + image.bytes.len() > end)
                {
                    return Err(offload_image::Error::new(
                        offload_image::ErrorKind::OutOfBounds,
                        0,
                        "image slice outside the input",
                    ));
                }
                images += 1;
            }
            Ok(())
        })
    });
    result.expect("walk");
    (images, allocations as usize)
}

#[test]
fn uncompressed_containers_allocate_nothing() {
    let files = [
        "bundles/hip_6arch.bundle",
        "bundles/hip_align4096.bundle",
        "bundles/hip_3field.bundle",
        "bundles/host_elf.bundle.o",
        "nvptx/omp_nv_cubins.bundle",
        "text/omp.ll.bundle",
        "packager/multi3.offbin",
        "packager/concat.offbin",
        "nvptx/cuda_cubins.offbin",
        "driver/hip_nonrdc.exe",
        "driver/hip_newdrv_rdc.exe",
        "driver/omp_amd.exe",
        "driver/omp_amd_nv.o",
        "driver/hip_rdc.o",
        "driver/libfat.a",
        "devobj/saxpy.gfx90a.co",
        "devobj/saxpy.sm_90a.cubin",
    ];
    let mut total = 0;
    for f in files {
        let data = common::read_corpus(f);
        let (images, allocations) = walk_counting(&data);
        assert!(images > 0, "{f}: no images");
        assert_eq!(allocations, 0, "{f}: {allocations} allocations");
        total += images;
    }
    assert!(total >= 40, "{total}");
    // Control: a compressed bundle does allocate (its decompressed content), so the counter works.
    let data = common::read_corpus("compressed/hip_6arch.zstd.ccob");
    let (images, allocations) = walk_counting(&data);
    assert_eq!(images, 7);
    assert!(allocations > 0);
}
