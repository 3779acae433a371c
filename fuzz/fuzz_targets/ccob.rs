//! Compressed bundles (`CCOB` v1–v3, zlib and zstd) as stored: header, decompression, hash,
//! and the bundle inside.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::ccob::CompressedBundle;
use offload_image_fuzz::{options, within};

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
});
