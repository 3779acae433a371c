//! NVIDIA fatbinaries: header and entries, LZ4 and zstd payloads, sequences in one
//! section, image trimming.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::nvfatbin::{self, Fatbin};
use offload_image_fuzz::{options, within};

fuzz_target!(|data: &[u8]| {
    let options = options();
    for r in nvfatbin::sequence(data, &options.limits) {
        let Ok((at, f)) = r else { break };
        assert!(within(data, f.bytes()));
        assert!(at + f.len() <= data.len() as u64);
        let mut n = 0u64;
        let mut claimed = 0u64;
        for e in f.entries() {
            n += 1;
            assert!(within(f.bytes(), e.payload));
            assert!(e.offset < f.len());
            match e.image() {
                Some(image) => {
                    assert!(e.codec.is_none());
                    assert!(within(e.payload, image));
                }
                None => {
                    claimed += e.uncompressed_size;
                    assert!(e.compressed_size <= e.payload.len() as u64);
                    if let Ok(d) = e.decompress(&options) {
                        assert_eq!(d.len() as u64, e.uncompressed_size);
                        let image = nvfatbin::trim_image(e.kind, &d);
                        assert!(image.len() <= d.len());
                    }
                }
            }
            let _ = (e.arch_name(), e.unknown_flags(), e.kind.name());
        }
        assert_eq!(n, f.entry_count(), "every validated entry is iterated");
        assert_eq!(claimed, f.decompressed_claim());
        assert!(claimed <= options.limits.max_decompressed_size);
        // The same bytes parse the same way on their own.
        assert!(Fatbin::parse(f.bytes(), &options.limits).is_ok());
    }
});
