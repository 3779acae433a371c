//! Text offload bundles: `TextBundle::parse` and its entries.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::text::TextBundle;
use offload_image_fuzz::{options, within};

fuzz_target!(|data: &[u8]| {
    let limits = options().limits;
    if let Ok(t) = TextBundle::parse(data, &limits) {
        let mut n = 0u64;
        for e in t.entries() {
            assert!(within(data, e.data));
            assert!(within(data, e.id.as_bytes()));
            let _ = offload_image::arch::EntryId::parse(e.id);
            n += 1;
        }
        assert_eq!(n, t.entry_count(), "every validated entry is iterated");
    }
});
