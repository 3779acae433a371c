//! Binary offload bundles: `Bundle::parse` and its entries.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::bundle::Bundle;
use offload_image_fuzz::{options, within};

fuzz_target!(|data: &[u8]| {
    let limits = options().limits;
    if let Ok(b) = Bundle::parse(data, &limits) {
        assert!(b.len() <= data.len() as u64);
        assert!(b.header_len() <= b.len());
        assert!(within(data, b.data()));
        let mut n = 0u64;
        for e in b.entries() {
            assert!(within(data, e.data));
            assert!(e.offset + e.data.len() as u64 <= b.len());
            assert!(e.id.len() as u64 <= limits.max_id_len);
            let _ = offload_image::arch::EntryId::parse(e.id);
            n += 1;
        }
        assert_eq!(n, b.entry_count(), "every validated entry is iterated");
    }
});
