//! kpack archives (header, MessagePack TOC, plain blobs and zstd frames), ref records, HIPK
//! wrappers, and the loader model's path expansion over what they hold.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::kpack::{
    candidate_paths, find_entry, HipkWrapper, KpackArchive, KpackRef, LoaderEnv, REF_READ_LIMIT,
};
use offload_image_fuzz::{options, within};

/// Fills `buf` from `data` at `at`, as a file read would.
fn read_from(data: &[u8], at: u64, buf: &mut [u8]) -> bool {
    let Ok(at) = usize::try_from(at) else {
        return false;
    };
    match at.checked_add(buf.len()).and_then(|end| data.get(at..end)) {
        Some(b) => {
            buf.copy_from_slice(b);
            true
        }
        None => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let options = options();
    // Read by its TOC, the archive is what it is read whole: the same error, or the same
    // entries and the same code objects.
    let whole = KpackArchive::parse(data, &options.limits);
    let len = data.len() as u64;
    let by_toc = KpackArchive::toc_offset_of(data, len).and_then(|toc_at| {
        let toc = &data[toc_at as usize..];
        KpackArchive::parse_toc(
            toc,
            toc_at,
            len,
            &mut |at, buf| read_from(data, at, buf),
            &options.limits,
        )
    });
    match (&whole, &by_toc) {
        (Err(a), Err(b)) => assert_eq!((a.kind(), a.offset()), (b.kind(), b.offset())),
        (Ok(a), Ok(b)) => {
            assert!(a.entries().eq(b.entries()));
            assert_eq!(a.compression(), b.compression());
            for e in a.entries() {
                let plain = a.code_object_coded(e, &options).map(|c| c.into_owned());
                let read = b.code_object_read(e, &mut |at, buf| read_from(data, at, buf), &options);
                match (plain, read) {
                    (Ok(x), Ok(y)) => assert_eq!(x, y),
                    (Err((c1, e1)), Err((c2, e2))) => {
                        // A blob larger than the limit is refused before it is read.
                        if e2.kind() != offload_image::ErrorKind::LimitExceeded {
                            assert_eq!(c1, c2);
                            assert_eq!((e1.kind(), e1.offset()), (e2.kind(), e2.offset()));
                        }
                    }
                    (Ok(_), Err((_, e2))) => {
                        // Only a blob or frame larger than the limit, refused unread.
                        assert_eq!(e2.kind(), offload_image::ErrorKind::LimitExceeded)
                    }
                    (Err((_, e1)), Ok(_)) => {
                        panic!("read whole: {e1}; read by the TOC: a code object")
                    }
                }
            }
        }
        (a, b) => panic!("read whole: {a:?}; by the TOC: {b:?}"),
    }
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
