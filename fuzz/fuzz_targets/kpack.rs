//! kpack archives (header, MessagePack TOC, plain blobs and zstd frames), ref records, HIPK
//! wrappers, and the loader model's path expansion over what they hold.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::kpack::{
    candidate_paths, find_entry, HipkWrapper, KpackArchive, KpackRef, LoaderEnv, REF_READ_LIMIT,
};
use offload_image_fuzz::{options, within};

fuzz_target!(|data: &[u8]| {
    let options = options();
    if let Ok(archive) = KpackArchive::parse(data, &options.limits) {
        assert!(archive.toc_offset() < data.len() as u64);
        let mut n = 0u64;
        for entry in archive.entries() {
            n += 1;
            assert!(entry.offset >= archive.toc_offset());
            assert!(archive.entry(entry.binary_key, entry.arch).is_some());
            if let Ok(code) = archive.code_object(entry, &options) {
                match code {
                    std::borrow::Cow::Borrowed(b) => assert!(within(data, b)),
                    std::borrow::Cow::Owned(v) => assert_eq!(v.len() as u64, entry.original_size),
                }
            }
        }
        assert!(n <= options.limits.max_entries);
        // The loader's choice among one archive, for each architecture it lists.
        let archives = [Some(archive.clone())];
        for arch in archive.gfx_arches() {
            let _ = find_entry(&archives, &[arch], "k#0");
        }
    }
    if let Ok(r) = KpackRef::parse(data) {
        assert!(r.size <= data.len().min(REF_READ_LIMIT));
        assert!(!r.search_paths.is_empty());
        let arches = ["amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", r.kernel_name];
        let env = LoaderEnv::linux(None, Some(r.kernel_name), None);
        if let Ok(paths) = candidate_paths("/lib", &r.search_paths, &arches, &env) {
            assert!(!paths.is_empty());
        }
    }
    if let Ok(w) = HipkWrapper::read(data, 0) {
        assert_eq!(w.version, 1);
    }
});
