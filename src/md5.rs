//! MD5, for the hash a `CCOB` header stores (`FORMATS.md` §5.2): the `md5` crate, or with
//! feature `md5-asm` RustCrypto's `md-5` with its assembly core on x86 and x86-64 (the
//! portable Rust core elsewhere). Hashing the decompressed content is most of what `select`
//! does in a compressed bundle when it verifies the hash; the assembly core is about a
//! quarter faster (`PERFORMANCE.md`, issue 47). Both give the same digest (tested).

/// An MD5 computation fed piece by piece.
pub(crate) struct Md5(Inner);

#[cfg(not(feature = "md5-asm"))]
type Inner = md5::Context;

#[cfg(feature = "md5-asm")]
type Inner = md5_asm::Md5;

impl Md5 {
    /// A new computation.
    pub(crate) fn new() -> Self {
        #[cfg(not(feature = "md5-asm"))]
        return Md5(md5::Context::new());
        #[cfg(feature = "md5-asm")]
        return Md5(<md5_asm::Md5 as md5_asm::Digest>::new());
    }

    /// Feeds `data`.
    pub(crate) fn consume(&mut self, data: &[u8]) {
        #[cfg(not(feature = "md5-asm"))]
        self.0.consume(data);
        #[cfg(feature = "md5-asm")]
        md5_asm::Digest::update(&mut self.0, data);
    }

    /// The digest.
    pub(crate) fn finalize(self) -> [u8; 16] {
        #[cfg(not(feature = "md5-asm"))]
        return self.0.finalize().0;
        #[cfg(feature = "md5-asm")]
        return md5_asm::Digest::finalize(self.0).into();
    }
}

#[cfg(test)]
mod tests {
    use super::Md5;

    /// RFC 1321's test suite, fed in pieces of every size up to 97 bytes.
    #[test]
    fn rfc_1321_digests_in_pieces() {
        let cases: [(&[u8], &str); 4] = [
            (b"", "d41d8cd98f00b204e9800998ecf8427e"),
            (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (data, want) in cases {
            for piece in 1..98 {
                let mut h = Md5::new();
                for p in data.chunks(piece) {
                    h.consume(p);
                }
                let got: alloc::string::String = h
                    .finalize()
                    .iter()
                    .map(|b| alloc::format!("{b:02x}"))
                    .collect();
                assert_eq!(got, want, "{piece}");
            }
        }
    }
}
