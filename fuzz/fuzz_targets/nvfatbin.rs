//! NVIDIA fatbinaries: header and entries, LZ4 and zstd payloads, sequences in one
//! section, image trimming; checking a payload without decoding it (`check_head`, `peek`)
//! against decoding it, on every compressed entry and on the input as a bare LZ4 block.
#![no_main]
use libfuzzer_sys::fuzz_target;
use offload_image::decompress::{self, Codec};
use offload_image::nvfatbin::{self, Fatbin};
use offload_image::ReadOptions;
use offload_image_fuzz::{options, within};

/// `check_head` and `peek` agree with `decode`: the same head, or the same error kind and
/// offset (`peek` only while decoding succeeds).
fn same_as_decoding(codec: Codec, stream: &[u8], size: u64, options: &ReadOptions) {
    const HEAD: usize = 64;
    let whole = decompress::decode(codec, stream, 7, size, 3, options).map(|(v, _)| v);
    let head = decompress::check_head(codec, stream, 7, size, 3, HEAD, options);
    match (&whole, &head) {
        (Ok(w), Ok(h)) => assert_eq!(&w[..w.len().min(HEAD)], &h[..]),
        (Err(a), Err(b)) => assert_eq!((a.kind(), a.offset()), (b.kind(), b.offset())),
        _ => panic!("decode {whole:?}, check_head {head:?}"),
    }
    if let (Ok(h), Ok(Some(p))) = (
        &head,
        decompress::peek(codec, stream, 7, size, 3, HEAD, options),
    ) {
        assert_eq!(h, &p);
    }
}

fuzz_target!(|data: &[u8]| {
    let options = options();
    if let [a, b, block @ ..] = data {
        same_as_decoding(
            Codec::Lz4,
            block,
            u64::from(u16::from_le_bytes([*a, *b])),
            &options,
        );
    }
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
                    if let (Some(codec), Ok(stream)) = (e.codec, e.stream()) {
                        same_as_decoding(codec, stream, e.uncompressed_size, &options);
                    }
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
