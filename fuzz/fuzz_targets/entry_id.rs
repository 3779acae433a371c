//! Bundle entry IDs and triples from any text.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::arch::{EntryId, Triple};
use offload_image_fuzz::within;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(e) = EntryId::parse(s) {
        assert!(!e.kind.is_empty());
        assert!(within(s.as_bytes(), e.triple.as_bytes()));
        if let Some(t) = e.target_id {
            assert!(!t.is_empty() && within(s.as_bytes(), t.as_bytes()));
        }
        let _ = Triple::parse(e.triple);
    }
    if let Ok(t) = Triple::parse(s) {
        let shown = t.to_string();
        // The normalised spelling parses back to the same triple.
        let again = Triple::parse(&shown).expect("a displayed triple parses");
        assert!(t.same_as(&again));
    }
});
