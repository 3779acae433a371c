//! Compressed bundles (`CCOB` v1–v3, zlib and zstd) as stored: header, decompression, hash,
//! the bundle inside, and streaming selection (`select_in_stream`) against the in-memory
//! path.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::ccob::CompressedBundle;
use offload_image_fuzz::{options, within};
use std::sync::OnceLock;

static DEVICES: OnceLock<Vec<offload_image::Device>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let mut options = options();
    let Ok(c) = CompressedBundle::parse(data) else {
        return;
    };
    assert!(within(data, c.payload()));
    assert_eq!(
        c.header_len() + c.payload().len() as u64,
        c.total_size().unwrap_or(data.len() as u64)
    );
    if let Ok(len) = c.len(&options) {
        assert!(len <= data.len() as u64);
    }
    // Both with and without the hash check: the decoders see the same stream.
    for verify in [true, false] {
        options.verify_hash = verify;
        if let Ok(out) = c.decompress(&options) {
            assert_eq!(out.len() as u64, c.uncompressed_size());
            if verify {
                assert_eq!(offload_image::ccob::truncated_md5(&out), c.hash());
            }
        }
    }
    // The container path (walk + open + images) over the same bytes.
    let _ = offload_image_fuzz::list(data, &options);
    let devices = DEVICES.get_or_init(offload_image_fuzz::devices);
    offload_image_fuzz::stream_vs_memory(data, devices);
});
