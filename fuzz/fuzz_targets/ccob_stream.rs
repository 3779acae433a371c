//! The decompressors behind `CCOB`, fed directly: the input's first byte picks zlib or zstd
//! and the header version, the next four the declared size, the rest is the compressed
//! stream. A valid header is built around it so that every input reaches a decoder.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::ccob::CompressedBundle;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Some((size, payload)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let method = u16::from(sel & 1);
    let version = 1 + u16::from((sel >> 1) % 3);
    let size = u32::from_le_bytes(*size) & 0x00FF_FFFF; // up to 16 MiB
    let mut blob = Vec::with_capacity(payload.len() + 32);
    blob.extend_from_slice(b"CCOB");
    blob.extend_from_slice(&version.to_le_bytes());
    blob.extend_from_slice(&method.to_le_bytes());
    match version {
        1 => {
            blob.extend_from_slice(&size.to_le_bytes());
        }
        2 => {
            blob.extend_from_slice(&(payload.len() as u32 + 24).to_le_bytes());
            blob.extend_from_slice(&size.to_le_bytes());
        }
        _ => {
            blob.extend_from_slice(&(payload.len() as u64 + 32).to_le_bytes());
            blob.extend_from_slice(&u64::from(size).to_le_bytes());
        }
    }
    blob.extend_from_slice(&[0; 8]); // hash: not checked below
    blob.extend_from_slice(payload);
    let options = offload_image::ReadOptions {
        verify_hash: false,
        ..offload_image_fuzz::options()
    };
    let c = CompressedBundle::parse(&blob).expect("a well-formed header");
    if let Ok(out) = c.decompress(&options) {
        assert_eq!(out.len() as u64, u64::from(size));
        // What decoded is a bundle candidate: hand it to the container path too.
        let _ = offload_image_fuzz::list(&out, &options);
    }
});
