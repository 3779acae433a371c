//! `loader-sim validate` over any bytes: every finding has a code, a message and an offset
//! inside the input; reader errors end the walk.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::validate::{validate, Severity};

fuzz_target!(|data: &[u8]| {
    let findings = validate(data, &offload_image_fuzz::options());
    for f in &findings {
        assert!(!f.code.name().is_empty() && !f.message.is_empty());
        assert!(
            f.offset <= data.len() as u64,
            "finding past the input: {f:?}"
        );
        assert_eq!(f.severity(), f.code.severity());
    }
    let _ = findings
        .iter()
        .filter(|f| f.severity() == Severity::Error)
        .count();
});
