//! Compressed offload bundles (`CCOB` v1, v2, v3; `FORMATS.md` §5).
//!
//! [`CompressedBundle::parse`] reads and checks the header in place. Decompression
//! ([`CompressedBundle::decompress`]) checks the declared size against the caller's limit
//! and against what the payload could possibly produce *before* allocating, allocates the
//! output once (fallibly), decodes into it, and verifies the truncated MD5 unless the
//! caller opts out.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::bytes::{self, u64_of};
pub use crate::compressed::{CompressedBundle, CompressionMethod};
use crate::decompress::{self, check_declared_size};
pub use crate::decompress::{
    bounded_zstd_header, zstd_window_limit, Decompressor, RawDecoderFn, ZlibStream, ZstdStream,
};
use crate::error::{Error, ErrorKind, Result};
use crate::options::ReadOptions;
pub use crate::options::{Decoders, StreamDecoderFn, WholeDecoderFn};
use crate::raw::{CcobHeaderV2, CcobHeaderV3, CcobPrefix, CCOB_MAGIC};

/// Returns true if `data` starts with `CCOB`.
pub fn is_compressed_bundle(data: &[u8]) -> bool {
    data.starts_with(CCOB_MAGIC)
}

/// The total size the header of the `CCOB` at the start of `data` declares (versions 2
/// and 3), for a walk that resumes after a `CCOB` that does not read. `None` for version 1
/// (which declares none), other versions, and a header that does not read.
pub fn described_len(data: &[u8]) -> Option<u64> {
    let p = bytes::read::<CcobPrefix>(data, 0, "").ok()?;
    match p.version.get() {
        2 => Some(u64::from(
            bytes::read::<CcobHeaderV2>(data, 0, "")
                .ok()?
                .total_size
                .get(),
        )),
        3 => Some(
            bytes::read::<CcobHeaderV3>(data, 0, "")
                .ok()?
                .total_size
                .get(),
        ),
        _ => None,
    }
}

impl<'data> CompressedBundle<'data> {
    tools_pub! {
        /// Size of the blob in its container: `total_size` for v2/v3; for v1 the header plus
        /// the length of the compressed stream, found by decoding it.
        pub fn len(&self, options: &ReadOptions) -> Result<u64> {
            match self.total_size {
                Some(t) => Ok(t),
                None => {
                    let (_, used) = self.decode(options, false)?;
                    Ok(self.header_len.saturating_add(used))
                }
            }
        }
    }

    tools_pub! {
        /// Checks the declared decompressed size against the limit and against what the
        /// payload can possibly produce, as [`ContentReader::new`] and
        /// [`CompressedBundle::decompress`] do before allocating (errors at the size field).
        pub fn check_size(&self, options: &ReadOptions) -> Result<()> {
            check_declared_size(
                self.method.codec(),
                self.payload,
                self.uncompressed_size,
                self.size_field(),
                options,
            )
            .map(|_| ())
        }
    }

    /// The built-in decoder of the payload (miniz_oxide for zlib, ruzstd for zstd), for
    /// [`ContentReader`]. Checks the zstd frame header (window, content size).
    pub fn decoder(&self, options: &ReadOptions) -> Result<BuiltinDecoder<'data>> {
        match self.method {
            CompressionMethod::Zlib => Ok(BuiltinDecoder::Zlib(ZlibStream::new(self.payload))),
            CompressionMethod::Zstd => {
                ZstdStream::new(self.payload, self.uncompressed_size, options)
                    .map(BuiltinDecoder::Zstd)
                    .map_err(|e| e.rebase(self.header_len))
            }
        }
    }

    tools_pub! {
        /// The decoder of the payload [`ReadOptions::decoders`] asks for: the caller's
        /// [`Decoders::stream`] if set, else the built-in one ([`Self::decoder`]).
        pub fn stream_decoder(&self, options: &ReadOptions) -> Result<Decoder<'data>> {
            match options.decoders.stream {
                Some(f) => f(self, options).map(Decoder::Caller),
                None => self.decoder(options).map(Decoder::Builtin),
            }
        }
    }

    /// Reads the decompressed content front to back with the decoder of
    /// [`ReadOptions::decoders`] ([`Self::stream_decoder`]).
    pub fn reader(&self, options: &ReadOptions) -> Result<ContentReader<'data, Decoder<'data>>> {
        ContentReader::new(self, self.stream_decoder(options)?, options)
    }

    tools_pub! {
        /// Decompresses the payload into a new buffer of exactly [`Self::uncompressed_size`]
        /// bytes and verifies the hash if `options.verify_hash` is set, with the decoders of
        /// [`ReadOptions::decoders`]: the caller's [`Decoders::whole`] if set, else its
        /// [`Decoders::stream`] read to the end, else the built-in decoders.
        ///
        /// Errors are located relative to the start of the blob.
        pub fn decompress(&self, options: &ReadOptions) -> Result<Vec<u8>> {
            if let Some(f) = options.decoders.whole {
                return f(self, options);
            }
            if options.decoders.stream.is_some() {
                return self.reader(options)?.read_to_vec();
            }
            self.decode(options, options.verify_hash).map(|(v, _)| v)
        }
    }

    /// Decodes the payload: (output, compressed bytes consumed).
    fn decode(&self, options: &ReadOptions, verify: bool) -> Result<(Vec<u8>, u64)> {
        let size_field = self.size_field();
        let (out, used) = decompress::decode(
            self.method.codec(),
            self.payload,
            self.header_len,
            self.uncompressed_size,
            size_field,
            options,
        )?;
        // zlib: bytes after the stream are not read, as zlib's `uncompress` (LLVM's
        // `compression::zlib::decompress`) does not read them (docs/FORMATS.md §5.4).
        if self.total_size.is_some()
            && used != u64_of(self.payload.len())
            && self.method != CompressionMethod::Zlib
        {
            return Err(Error::new(
                ErrorKind::Malformed,
                self.header_len.saturating_add(used),
                "bytes after the end of the compressed stream",
            ));
        }
        if verify && truncated_md5(&out) != self.hash {
            return Err(Error::new(
                ErrorKind::HashMismatch,
                self.header_len.saturating_sub(8),
                "truncated MD5 of the decompressed bundle does not match the header",
            ));
        }
        Ok((out, used))
    }
}

/// The first 8 bytes of the MD5 digest of `data`: the hash a `CCOB` header stores.
pub fn truncated_md5(data: &[u8]) -> [u8; 8] {
    let mut ctx = crate::md5::Md5::new();
    ctx.consume(data);
    let digest = ctx.finalize();
    let mut h = [0u8; 8];
    h.copy_from_slice(digest.get(..8).unwrap_or(&[0; 8]));
    h
}

/// The decoders this crate brings: [`CompressedBundle::decoder`].
#[derive(Debug)]
pub enum BuiltinDecoder<'data> {
    /// zlib (miniz_oxide).
    Zlib(ZlibStream<'data>),
    /// zstd (ruzstd).
    Zstd(ZstdStream<'data>),
}

impl Decompressor for BuiltinDecoder<'_> {
    fn read(&mut self, out: &mut [u8]) -> Result<usize> {
        match self {
            BuiltinDecoder::Zlib(d) => d.read(out),
            BuiltinDecoder::Zstd(d) => d.read(out),
        }
    }
    fn consumed(&self) -> u64 {
        match self {
            BuiltinDecoder::Zlib(d) => d.consumed(),
            BuiltinDecoder::Zstd(d) => d.consumed(),
        }
    }
}

/// The decoder [`CompressedBundle::reader`] uses: built in, or the caller's.
pub enum Decoder<'data> {
    /// One of the crate's decoders.
    Builtin(BuiltinDecoder<'data>),
    /// The caller's ([`Decoders::stream`]).
    Caller(Box<dyn Decompressor + Send + 'data>),
}

impl core::fmt::Debug for Decoder<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Decoder::Builtin(d) => f.debug_tuple("Builtin").field(d).finish(),
            Decoder::Caller(_) => f.write_str("Caller"),
        }
    }
}

impl Decompressor for Decoder<'_> {
    fn read(&mut self, out: &mut [u8]) -> Result<usize> {
        match self {
            Decoder::Builtin(d) => d.read(out),
            Decoder::Caller(d) => d.read(out),
        }
    }
    fn consumed(&self) -> u64 {
        match self {
            Decoder::Builtin(d) => d.consumed(),
            Decoder::Caller(d) => d.consumed(),
        }
    }
    fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize> {
        match self {
            Decoder::Builtin(d) => d.read_with(max, f),
            Decoder::Caller(d) => d.read_with(max, f),
        }
    }
}

/// The decompressed content of a [`CompressedBundle`], read front to back without holding
/// it: only what the caller reads into its own buffers exists in memory (plus the
/// decoder's window).
///
/// Reads never go past the declared decompressed size. With hash verification on
/// ([`ReadOptions::verify_hash`]) every byte read or skipped is fed to MD5, and
/// [`ContentReader::finish`] decodes the rest and compares the truncated digest; without
/// it the caller may simply stop (drop the reader) once it has what it needs. Errors are
/// located relative to the start of the compressed bundle, like
/// [`CompressedBundle::decompress`].
pub struct ContentReader<'data, D> {
    bundle: CompressedBundle<'data>,
    decoder: D,
    position: u64,
    hash: Option<crate::md5::Md5>,
}

impl<D> core::fmt::Debug for ContentReader<'_, D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ContentReader")
            .field("position", &self.position)
            .field("verify", &self.hash.is_some())
            .finish_non_exhaustive()
    }
}

impl<'data, D: Decompressor> ContentReader<'data, D> {
    tools_pub! {
        /// Reads `bundle`'s content through `decoder` (which must decode `bundle.payload()`).
        /// The declared size is checked against the limit and the payload first.
        pub fn new(
            bundle: &CompressedBundle<'data>,
            decoder: D,
            options: &ReadOptions,
        ) -> Result<Self> {
            check_declared_size(
                bundle.method.codec(),
                bundle.payload,
                bundle.uncompressed_size,
                bundle.size_field(),
                options,
            )?;
            Ok(ContentReader {
                bundle: *bundle,
                decoder,
                position: 0,
                hash: options.verify_hash.then(crate::md5::Md5::new),
            })
        }
    }

    tools_pub! {
        /// The compressed bundle being read.
        pub fn bundle(&self) -> &CompressedBundle<'data> {
            &self.bundle
        }
    }

    tools_pub! {
        /// Decompressed bytes read (or skipped) so far.
        pub fn position(&self) -> u64 {
            self.position
        }
    }

    tools_pub! {
        /// Decompressed bytes left before the declared end.
        pub fn remaining(&self) -> u64 {
            self.bundle.uncompressed_size.saturating_sub(self.position)
        }
    }

    tools_pub! {
        /// True if every byte read is fed to MD5 (and [`ContentReader::finish`] checks it).
        pub fn verifies(&self) -> bool {
            self.hash.is_some()
        }
    }

    fn stream_error(&self, e: Error) -> Error {
        e.rebase(self.bundle.header_len)
    }

    /// Reads the next decompressed bytes into `out` (at most up to the declared end);
    /// `Ok(0)` only at the declared end or for an empty `out`.
    pub fn read(&mut self, out: &mut [u8]) -> Result<usize> {
        let want = usize::try_from(self.remaining())
            .unwrap_or(usize::MAX)
            .min(out.len());
        let Some(dst) = out.get_mut(..want) else {
            return Ok(0);
        };
        if dst.is_empty() {
            return Ok(0);
        }
        let n = self
            .decoder
            .read(dst)
            .map_err(|e| e.rebase(self.bundle.header_len))?;
        if n == 0 {
            return Err(self.stream_error(Error::new(
                ErrorKind::SizeMismatch,
                self.decoder.consumed(),
                "compressed stream is shorter than the declared decompressed size",
            )));
        }
        let got = dst.get(..n).unwrap_or_default();
        if let Some(h) = &mut self.hash {
            h.consume(got);
        }
        self.position = self.position.saturating_add(u64_of(n));
        Ok(n)
    }

    /// Fills `out` completely.
    pub fn read_exact(&mut self, out: &mut [u8]) -> Result<()> {
        let mut done = 0usize;
        while let Some(rest) = out.get_mut(done..).filter(|r| !r.is_empty()) {
            let n = self.read(rest)?;
            if n == 0 {
                return Err(Error::new(
                    ErrorKind::Truncated,
                    self.bundle.size_field(),
                    "read past the declared decompressed size",
                ));
            }
            done = done.saturating_add(n);
        }
        Ok(())
    }

    tools_pub! {
        /// Reads and discards `n` bytes (hashing them when verifying).
        pub fn skip(&mut self, n: u64) -> Result<()> {
            self.copy(n, |_| Ok(()))
        }
    }

    tools_pub! {
        /// Reads the next `n` bytes and hands them to `sink` in pieces, in order (straight
        /// from the decoder's buffer when it has one: [`Decompressor::read_with`]).
        pub fn copy<E: From<Error>>(
            &mut self,
            n: u64,
            mut sink: impl FnMut(&[u8]) -> core::result::Result<(), E>,
        ) -> core::result::Result<(), E> {
            if n > self.remaining() {
                return Err(Error::new(
                    ErrorKind::Truncated,
                    self.bundle.size_field(),
                    "read past the declared decompressed size",
                )
                .into());
            }
            let mut left = n;
            let mut failed: Option<E> = None;
            while left > 0 {
                let max = usize::try_from(left).unwrap_or(usize::MAX);
                let hash = &mut self.hash;
                let got = self
                    .decoder
                    .read_with(max, &mut |bytes| {
                        if let Some(h) = hash.as_mut() {
                            h.consume(bytes);
                        }
                        if failed.is_none() {
                            if let Err(e) = sink(bytes) {
                                failed = Some(e);
                            }
                        }
                    })
                    .map_err(|e| e.rebase(self.bundle.header_len))?;
                if let Some(e) = failed.take() {
                    return Err(e);
                }
                if got == 0 {
                    return Err(self
                        .stream_error(Error::new(
                            ErrorKind::SizeMismatch,
                            self.decoder.consumed(),
                            "compressed stream is shorter than the declared decompressed size",
                        ))
                        .into());
                }
                self.position = self.position.saturating_add(u64_of(got));
                left = left.saturating_sub(u64_of(got));
            }
            Ok(())
        }
    }

    /// Reads the whole content into a new buffer and checks the stream as
    /// [`ContentReader::finish`] does: what [`CompressedBundle::decompress`] returns, with
    /// any [`Decompressor`]. The buffer grows (fallibly) only as the stream produces bytes.
    pub fn read_to_vec(mut self) -> Result<Vec<u8>> {
        let mut out: Vec<u8> = Vec::new();
        let size_field = self.bundle.size_field();
        self.copy(self.remaining(), |chunk| {
            out.try_reserve(chunk.len()).map_err(|_| {
                Error::new(
                    ErrorKind::OutOfMemory,
                    size_field,
                    "cannot reserve memory for the decompressed bundle",
                )
            })?;
            out.extend_from_slice(chunk);
            Ok::<(), Error>(())
        })?;
        self.finish()?;
        Ok(out)
    }

    /// Decodes the rest of the stream and checks it: exactly the declared size, no bytes
    /// after the compressed stream (v2/v3), and the truncated MD5 when verifying.
    /// Returns the compressed length of the stream.
    pub fn finish(mut self) -> Result<u64> {
        self.skip(self.remaining())?;
        let mut probe = [0u8; 1];
        if self
            .decoder
            .read(&mut probe)
            .map_err(|e| e.rebase(self.bundle.header_len))?
            != 0
        {
            return Err(self.stream_error(Error::new(
                ErrorKind::SizeMismatch,
                self.decoder.consumed(),
                "compressed stream is longer than the declared decompressed size",
            )));
        }
        let used = self.decoder.consumed();
        // zlib: bytes after the stream are not read ([`CompressedBundle::decompress`]).
        if self.bundle.total_size.is_some()
            && used != u64_of(self.bundle.payload.len())
            && self.bundle.method != CompressionMethod::Zlib
        {
            return Err(self.stream_error(Error::new(
                ErrorKind::Malformed,
                used,
                "bytes after the end of the compressed stream",
            )));
        }
        if let Some(h) = self.hash.take() {
            let digest = h.finalize();
            if digest.get(..8) != Some(&self.bundle.hash[..]) {
                return Err(Error::new(
                    ErrorKind::HashMismatch,
                    self.bundle.hash_field(),
                    "truncated MD5 of the decompressed bundle does not match the header",
                ));
            }
        }
        Ok(used)
    }
}
