//! LLVM OffloadBinaries v1–v3 (also compressed v3): sequences, entries, string maps,
//! inflation.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::offload_binary::{OffloadBinaries, OffloadBinary};
use offload_image_fuzz::{options, within};

fn check(b: &OffloadBinary<'_>) -> u64 {
    let mut n = 0u64;
    for e in b.entries() {
        assert!(within(b.data(), e.image));
        for (k, v) in e.strings.iter() {
            assert!(within(b.data(), k.as_bytes()));
            assert!(within(b.data(), v));
        }
        let _ = e.strings.get_str("triple");
        let _ = e.strings.get_str("arch");
        n += 1;
    }
    n
}

fuzz_target!(|data: &[u8]| {
    let options = options();
    let Ok(seq) = OffloadBinaries::parse(data, &options.limits) else {
        return;
    };
    assert!(seq.len() <= data.len() as u64);
    let mut count = 0u64;
    for (pos, b) in seq.iter() {
        count += 1;
        assert!(pos + b.len() <= seq.len());
        assert!(within(data, b.data()));
        if b.is_compressed() {
            if let Ok(inflated) = b.inflate(&options) {
                if let Ok(inner) = OffloadBinary::parse(&inflated, &options.limits) {
                    assert_eq!(check(&inner), inner.entry_count());
                }
            }
        } else {
            assert_eq!(
                check(&b),
                b.entry_count(),
                "every validated entry is iterated"
            );
        }
    }
    assert_eq!(count, seq.count());
});
