//! Decoders for compressed bundles on the std side: C libzstd (feature `libzstd`, about
//! four times ruzstd's speed on this project's machine, `STACK.md` §2) and a wrapper that
//! runs any decoder on a thread of its own, so that decoding overlaps the MD5
//! verification the reader does on the calling thread.

#[cfg(feature = "libzstd")]
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
#[cfg(feature = "libzstd")]
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Scope;

#[cfg(feature = "libzstd")]
use loader_sim_os::fill::{FillBuffer, FillWriter};

use offload_image::ccob::Decoders;
use offload_image::ccob::{CompressedBundle, CompressionMethod, ContentReader, Decompressor};
use offload_image::decompress::Codec;
use offload_image::{Error, ErrorKind, ReadOptions};

/// Which zstd decoder to use (`--zstd-decoder`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ZstdDecoder {
    /// C libzstd (built in with the `libzstd` feature, the default).
    Libzstd,
    /// ruzstd, the library's own no_std decoder.
    Ruzstd,
}

impl ZstdDecoder {
    /// The default: libzstd when compiled in.
    pub const DEFAULT: ZstdDecoder = if cfg!(feature = "libzstd") {
        ZstdDecoder::Libzstd
    } else {
        ZstdDecoder::Ruzstd
    };
}

/// A decoder for `bundle`'s payload: libzstd or ruzstd for zstd, miniz_oxide for zlib.
pub fn decoder<'data>(
    bundle: &CompressedBundle<'data>,
    which: ZstdDecoder,
    options: &ReadOptions,
) -> Result<Box<dyn Decompressor + Send + 'data>, Error> {
    #[cfg(feature = "libzstd")]
    if which == ZstdDecoder::Libzstd && bundle.method() == CompressionMethod::Zstd {
        return LibZstd::new(bundle.payload(), bundle.uncompressed_size(), options)
            .map(|d| Box::new(d) as Box<dyn Decompressor + Send>)
            .map_err(|e| e.rebase(bundle.header_len()));
    }
    let _ = (which, CompressionMethod::Zstd);
    bundle
        .decoder(options)
        .map(|d| Box::new(d) as Box<dyn Decompressor + Send>)
}

/// The library's decoder hook (`ReadOptions::decoders`) for the zstd decoder `which`:
/// libzstd streaming and whole-content decoding (on a second thread), or ruzstd on a
/// second thread for whole contents and the built-in streaming decoder.
pub fn decoders(which: ZstdDecoder) -> Decoders {
    match which {
        ZstdDecoder::Libzstd => Decoders {
            stream: Some(stream_libzstd),
            whole: Some(whole_libzstd),
            raw: Some(raw_libzstd),
        },
        ZstdDecoder::Ruzstd => Decoders {
            stream: None,
            whole: Some(whole_ruzstd),
            raw: None,
        },
    }
}

/// [`decoders`], whole contents decoded on a second thread only when `threaded` (a worker
/// of a parallel walk decodes and hashes on its own thread, the hash taken as the bytes
/// come: `--jobs`).
pub fn decoders_for(which: ZstdDecoder, threaded: bool) -> Decoders {
    let mut d = decoders(which);
    if !threaded {
        d.whole = Some(match which {
            ZstdDecoder::Libzstd => whole_libzstd_inline,
            ZstdDecoder::Ruzstd => whole_ruzstd_inline,
        });
    }
    d
}

/// [`ReadOptions`] whose decoders are [`decoders_for`]`(which, jobs <= 1)`: with several
/// workers (`jobs`), each decodes on its own thread.
pub fn read_options_for(which: ZstdDecoder, verify_hash: bool, jobs: usize) -> ReadOptions {
    ReadOptions {
        verify_hash,
        decoders: decoders_for(which, jobs <= 1),
        ..ReadOptions::default()
    }
}

/// [`ReadOptions`] whose decoders are [`decoders`]`(which)`.
pub fn read_options(which: ZstdDecoder, verify_hash: bool) -> ReadOptions {
    ReadOptions {
        verify_hash,
        decoders: decoders(which),
        ..ReadOptions::default()
    }
}

fn stream_libzstd<'a>(
    bundle: &CompressedBundle<'a>,
    options: &ReadOptions,
) -> Result<Box<dyn Decompressor + Send + 'a>, Error> {
    decoder(bundle, ZstdDecoder::Libzstd, options)
}

/// The library's hook for every other compressed payload (fatbinary entries, compressed
/// OffloadBinaries): zstd through libzstd, the other codecs left to the built-in decoders.
fn raw_libzstd(
    codec: Codec,
    stream: &[u8],
    size: u64,
    options: &ReadOptions,
) -> Option<Result<Vec<u8>, Error>> {
    #[cfg(feature = "libzstd")]
    if codec == Codec::Zstd {
        let whole = || {
            let mut d = LibZstd::new(stream, size, options)?;
            let mut out = Vec::new();
            out.try_reserve_exact(usize::try_from(size).unwrap_or(usize::MAX))
                .map_err(|_| {
                    Error::new(
                        ErrorKind::OutOfMemory,
                        0,
                        "cannot reserve memory for the decompressed data",
                    )
                })?;
            // Like the built-in decoder, bytes after the frame (the entry's padding) are
            // not read.
            while d.read_with(1 << 20, &mut |b| out.extend_from_slice(b))? > 0 {}
            Ok(out)
        };
        return Some(whole());
    }
    let _ = (codec, stream, size, options);
    None
}

fn whole_libzstd(bundle: &CompressedBundle<'_>, options: &ReadOptions) -> Result<Vec<u8>, Error> {
    decompress_using(bundle, ZstdDecoder::Libzstd, options)
}

fn whole_ruzstd(bundle: &CompressedBundle<'_>, options: &ReadOptions) -> Result<Vec<u8>, Error> {
    decompress_using(bundle, ZstdDecoder::Ruzstd, options)
}

fn whole_libzstd_inline(
    bundle: &CompressedBundle<'_>,
    options: &ReadOptions,
) -> Result<Vec<u8>, Error> {
    decompress_with(bundle, ZstdDecoder::Libzstd, false, options)
}

fn whole_ruzstd_inline(
    bundle: &CompressedBundle<'_>,
    options: &ReadOptions,
) -> Result<Vec<u8>, Error> {
    decompress_with(bundle, ZstdDecoder::Ruzstd, false, options)
}

/// The whole content of `bundle`, checked like `CompressedBundle::decompress` (declared
/// size, trailing bytes, the truncated MD5 when `options.verify_hash`), decoded with the zstd
/// decoder `which` (`--zstd-decoder`). When the hash is verified on a machine with more than
/// one CPU, decoding runs on a thread of its own and overlaps MD5.
pub fn decompress_using(
    bundle: &CompressedBundle<'_>,
    which: ZstdDecoder,
    options: &ReadOptions,
) -> Result<Vec<u8>, Error> {
    let threaded =
        options.verify_hash && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    decompress_with(bundle, which, threaded, options)
}

/// [`decompress_using`], decoding on a thread of its own (overlapping the MD5 on the
/// calling thread) when `threaded`, else decoding and hashing in turn on the calling thread,
/// each piece hashed as it is decoded.
pub fn decompress_with(
    bundle: &CompressedBundle<'_>,
    which: ZstdDecoder,
    threaded: bool,
    options: &ReadOptions,
) -> Result<Vec<u8>, Error> {
    #[cfg(feature = "libzstd")]
    if which == ZstdDecoder::Libzstd && bundle.method() == CompressionMethod::Zstd {
        return whole_in_place(bundle, threaded, options);
    }
    if threaded {
        std::thread::scope(|scope| {
            let d = threaded_decoder(scope, bundle, which, options)?;
            ContentReader::new(bundle, d, options)?.read_to_vec()
        })
    } else {
        let d = decoder(bundle, which, options)?;
        ContentReader::new(bundle, d, options)?.read_to_vec()
    }
}

/// [`decompress_using`] with libzstd: the content is decoded into one heap buffer of the
/// declared size, hashed in place (on the calling thread while the decoder fills it on
/// another, when `threaded`), and that buffer is returned. Peak memory is the declared
/// size plus libzstd's state: the decoder's buffer is not copied into a second one (it
/// was, 1.77 GB for a 900 MB content, issue 43).
#[cfg(feature = "libzstd")]
fn whole_in_place(
    bundle: &CompressedBundle<'_>,
    threaded: bool,
    options: &ReadOptions,
) -> Result<Vec<u8>, Error> {
    let (core, buf) = ZstdCore::new_in(bundle.payload(), bundle.uncompressed_size(), options, true)
        .map_err(|e| e.rebase(bundle.header_len()))?;
    if threaded {
        std::thread::scope(|scope| {
            let d = LibZstdThreaded::start(scope, core, Arc::clone(&buf));
            ContentReader::new(bundle, Box::new(d), options)?.finish()
        })?;
    } else {
        let d = LibZstd {
            core,
            buf: Arc::clone(&buf),
            served: 0,
        };
        ContentReader::new(bundle, Box::new(d), options)?.finish()?;
    }
    let lost = || {
        Error::new(
            ErrorKind::Decompress,
            0,
            "the decoded content is still shared with the decoder",
        )
    };
    Arc::try_unwrap(buf)
        .map_err(|_| lost())?
        .into_vec()
        .map_err(|_| lost())
}

/// The decoder for `bundle`'s payload running on a thread of `scope`: libzstd writing
/// into a buffer the reader reads in place, or any other decoder handing over chunks
/// ([`Threaded`]).
pub fn threaded_decoder<'scope, 'env, 'data: 'scope>(
    scope: &'scope Scope<'scope, 'env>,
    bundle: &CompressedBundle<'data>,
    which: ZstdDecoder,
    options: &ReadOptions,
) -> Result<Box<dyn Decompressor + 'scope>, Error> {
    #[cfg(feature = "libzstd")]
    if which == ZstdDecoder::Libzstd && bundle.method() == CompressionMethod::Zstd {
        return LibZstdThreaded::spawn(
            scope,
            bundle.payload(),
            bundle.uncompressed_size(),
            options,
        )
        .map(|d| Box::new(d) as Box<dyn Decompressor>)
        .map_err(|e| e.rebase(bundle.header_len()));
    }
    let d = decoder(bundle, which, options)?;
    Ok(Box::new(Threaded::spawn(scope, d)))
}

/// C libzstd's streaming decoder writing into a [`FillBuffer`] of the whole content
/// ("stable output": libzstd keeps no window of its own, matches refer back into the
/// buffer, which is advised for transparent huge pages — first-touch faults on 93 MB of
/// 4 KiB pages cost about 60 ms here, on 2 MiB pages about 15 ms). Compressed input is fed
/// in steps of [`STEP`] bytes so that output is published progressively.
#[cfg(feature = "libzstd")]
pub struct ZstdCore<'data> {
    input: &'data [u8],
    pos: usize,
    dctx: zstd::zstd_safe::DCtx<'static>,
    out: FillWriter,
    done: bool,
}

/// Compressed bytes handed to libzstd per call.
#[cfg(feature = "libzstd")]
const STEP: usize = 64 << 10;

#[cfg(feature = "libzstd")]
impl<'data> ZstdCore<'data> {
    /// Checks the frame header like the library's ruzstd decoder does (a frame content
    /// size must equal `declared`) and
    /// maps the output buffer (`declared` must already be within the limit). Returns the
    /// decoder and the buffer it fills.
    pub fn new(
        input: &'data [u8],
        declared: u64,
        options: &ReadOptions,
    ) -> Result<(Self, Arc<FillBuffer>), Error> {
        Self::new_in(input, declared, options, false)
    }

    /// [`ZstdCore::new`], the buffer on the heap when `heap` ([`FillBuffer::on_heap`]: the
    /// caller keeps it as the content, [`FillBuffer::into_vec`]) or mapped.
    pub fn new_in(
        input: &'data [u8],
        declared: u64,
        options: &ReadOptions,
        heap: bool,
    ) -> Result<(Self, Arc<FillBuffer>), Error> {
        use zstd::zstd_safe::{
            find_frame_compressed_size, get_frame_content_size, DCtx, DParameter,
        };
        // Skippable frames before the first frame, and frames after it, are read as
        // `ZSTD_decompress` (LLVM's `compression::zstd::decompress`) reads them: the
        // content size of the first frame must equal the declared size only when that
        // frame is the whole payload (docs/FORMATS.md §5.4).
        let first = offload_image::decompress::skip_skippable_frames(input)
            .map_err(|at| Error::new(ErrorKind::Truncated, at, "zstd stream is truncated"))?;
        let frame = input.get(first..).unwrap_or_default();
        let alone = find_frame_compressed_size(frame).is_ok_and(|n| n == frame.len());
        match get_frame_content_size(frame) {
            Ok(Some(n)) if n > declared || (alone && n != declared) => {
                return Err(Error::new(
                    ErrorKind::SizeMismatch,
                    0,
                    "zstd frame content size differs from the declared decompressed size",
                ))
            }
            Ok(_) => {}
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Decompress,
                    0,
                    "zstd frame header is invalid",
                ))
            }
        }
        let too_big = || {
            Error::new(
                ErrorKind::LimitExceeded,
                0,
                "declared decompressed size exceeds the limit",
            )
        };
        if declared > options.limits.max_decompressed_size {
            return Err(too_big());
        }
        let len = usize::try_from(declared).map_err(|_| too_big())?;
        // With a stable output buffer (set below) libzstd keeps no window of its own: the
        // output, `declared` bytes, is the window, whatever the frame states. So a frame
        // whose stated window exceeds its content (any frame compressed as a stream) is
        // accepted up to libzstd's largest window log, and costs no more memory.
        let log = 31;
        let mut dctx = DCtx::create();
        let refused = |_| {
            Error::new(
                ErrorKind::Decompress,
                0,
                "libzstd refused a decoder parameter",
            )
        };
        dctx.set_parameter(DParameter::WindowLogMax(log))
            .map_err(refused)?;
        dctx.set_parameter(DParameter::StableOutBuffer(true))
            .map_err(refused)?;
        let buf = if heap {
            FillBuffer::on_heap(len)
        } else {
            FillBuffer::new(len)
        };
        let buf = Arc::new(buf.map_err(|_| {
            Error::new(
                ErrorKind::OutOfMemory,
                0,
                "cannot map memory for the decompressed data",
            )
        })?);
        let out = buf.writer().ok_or_else(|| {
            Error::new(ErrorKind::Decompress, 0, "the output buffer has a writer")
        })?;
        Ok((
            ZstdCore {
                input,
                pos: 0,
                dctx,
                out,
                done: false,
            },
            buf,
        ))
    }

    /// Decodes the next step of input and publishes the output.
    fn step(&mut self) -> Result<(), Error> {
        use zstd::zstd_safe::{get_error_name, InBuffer, OutBuffer};
        let end = self.input.len().min(self.pos.saturating_add(STEP));
        let chunk = self.input.get(self.pos..end).unwrap_or_default();
        let before = self.out.position();
        let mut src = InBuffer::around(chunk);
        let mut out = OutBuffer::around_pos(&mut self.out, before);
        let r = self.dctx.decompress_stream(&mut out, &mut src);
        let read = src.pos();
        self.pos += read;
        self.out.publish();
        let at = self.pos as u64;
        match r {
            Err(code) => {
                let name = get_error_name(code);
                let (kind, what) = if name.contains("memory") || name.contains("indow") {
                    (
                        ErrorKind::LimitExceeded,
                        "zstd window is larger than the decompressed bundle or the limit",
                    )
                } else if name.contains("Destination buffer is too small") {
                    (
                        ErrorKind::SizeMismatch,
                        "compressed stream is longer than the declared decompressed size",
                    )
                } else {
                    (ErrorKind::Decompress, "zstd stream is corrupt")
                };
                Err(Error::new(kind, at, what))
            }
            // The end of a frame: another frame (or a skippable one) may follow, which the
            // next call decodes; other bytes end the stream (the reader refuses them in a
            // v2/v3 payload).
            Ok(0)
                if !offload_image::decompress::starts_zstd_frame(
                    self.input.get(self.pos..).unwrap_or_default(),
                ) =>
            {
                self.done = true;
                Ok(())
            }
            Ok(0) => Ok(()),
            Ok(_) if read == 0 && self.out.position() == before => {
                Err(if self.pos >= self.input.len() {
                    Error::new(ErrorKind::Truncated, at, "zstd stream is truncated")
                } else {
                    Error::new(
                        ErrorKind::SizeMismatch,
                        at,
                        "compressed stream is longer than the declared decompressed size",
                    )
                })
            }
            Ok(_) => Ok(()),
        }
    }
}

/// [`ZstdCore`] on the calling thread.
#[cfg(feature = "libzstd")]
pub struct LibZstd<'data> {
    core: ZstdCore<'data>,
    buf: Arc<FillBuffer>,
    served: usize,
}

#[cfg(feature = "libzstd")]
impl<'data> LibZstd<'data> {
    /// See [`ZstdCore::new`].
    pub fn new(input: &'data [u8], declared: u64, options: &ReadOptions) -> Result<Self, Error> {
        let (core, buf) = ZstdCore::new(input, declared, options)?;
        Ok(LibZstd {
            core,
            buf,
            served: 0,
        })
    }
}

#[cfg(feature = "libzstd")]
impl Decompressor for LibZstd<'_> {
    fn read(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        self.read_with(out.len(), &mut |b| out[..b.len()].copy_from_slice(b))
    }

    fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, Error> {
        if max == 0 {
            return Ok(0);
        }
        while self.served >= self.buf.filled().len() && !self.core.done {
            self.core.step()?;
        }
        let avail = &self.buf.filled()[self.served..];
        let n = avail.len().min(max);
        f(&avail[..n]);
        self.served += n;
        Ok(n)
    }

    fn consumed(&self) -> u64 {
        self.core.pos as u64
    }
}

/// What the decoding thread of [`LibZstdThreaded`] reports.
#[cfg(feature = "libzstd")]
#[derive(Default)]
struct Progress {
    done: bool,
    error: Option<Error>,
    consumed: u64,
    waiting: bool,
}

#[cfg(feature = "libzstd")]
#[derive(Default)]
struct Shared {
    progress: Mutex<Progress>,
    more: Condvar,
    cancel: AtomicBool,
}

/// [`ZstdCore`] on a thread of its own, decoding to the end without waiting for the reader
/// (the output stays in the [`FillBuffer`], which the reader reads in place). Dropping the
/// reader stops the thread at its next step.
#[cfg(feature = "libzstd")]
pub struct LibZstdThreaded {
    buf: Arc<FillBuffer>,
    shared: Arc<Shared>,
    served: usize,
}

#[cfg(feature = "libzstd")]
impl LibZstdThreaded {
    /// Starts decoding on a thread of `scope`.
    pub fn spawn<'scope, 'env, 'data: 'scope>(
        scope: &'scope Scope<'scope, 'env>,
        input: &'data [u8],
        declared: u64,
        options: &ReadOptions,
    ) -> Result<Self, Error> {
        let (core, buf) = ZstdCore::new(input, declared, options)?;
        Ok(Self::start(scope, core, buf))
    }

    /// Starts `core`, which fills `buf`, on a thread of `scope`.
    fn start<'scope, 'env, 'data: 'scope>(
        scope: &'scope Scope<'scope, 'env>,
        mut core: ZstdCore<'data>,
        buf: Arc<FillBuffer>,
    ) -> Self {
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        scope.spawn(move || loop {
            if s.cancel.load(Ordering::Relaxed) {
                return;
            }
            let r = core.step();
            let mut p = s.progress.lock().unwrap_or_else(|e| e.into_inner());
            p.consumed = core.pos as u64;
            match r {
                Err(e) => p.error = Some(e),
                Ok(()) => p.done = core.done,
            }
            let stop = p.done || p.error.is_some();
            if p.waiting || stop {
                s.more.notify_all();
            }
            if stop {
                return;
            }
        });
        LibZstdThreaded {
            buf,
            shared,
            served: 0,
        }
    }
}

#[cfg(feature = "libzstd")]
impl Drop for LibZstdThreaded {
    fn drop(&mut self) {
        self.shared.cancel.store(true, Ordering::Relaxed);
    }
}

#[cfg(feature = "libzstd")]
impl Decompressor for LibZstdThreaded {
    fn read(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        self.read_with(out.len(), &mut |b| out[..b.len()].copy_from_slice(b))
    }

    fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, Error> {
        if max == 0 {
            return Ok(0);
        }
        loop {
            let filled = self.buf.filled();
            if self.served < filled.len() {
                let avail = &filled[self.served..];
                let n = avail.len().min(max);
                f(&avail[..n]);
                self.served += n;
                return Ok(n);
            }
            let mut p = self
                .shared
                .progress
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            // Published under the lock's protection or before: look again.
            if self.buf.filled().len() > self.served {
                continue;
            }
            if let Some(e) = p.error {
                return Err(e);
            }
            if p.done {
                return Ok(0);
            }
            p.waiting = true;
            let mut p = self.shared.more.wait(p).unwrap_or_else(|e| e.into_inner());
            p.waiting = false;
        }
    }

    fn consumed(&self) -> u64 {
        self.shared
            .progress
            .lock()
            .map(|p| p.consumed)
            .unwrap_or_else(|e| e.into_inner().consumed)
    }
}

/// Bytes per hand-over between the decoding thread and the reader.
const CHUNK: usize = 1 << 20;
/// Chunks in flight (decoded ahead of the reader).
const IN_FLIGHT: usize = 4;

/// What the decoding thread sends: a filled chunk and the compressed bytes consumed so
/// far, the end of the stream (an empty chunk), or an error.
type Message = Result<(Vec<u8>, u64), Error>;

/// Runs a decoder on its own (scoped) thread, [`IN_FLIGHT`] chunks of [`CHUNK`] bytes
/// ahead of the reader. Dropping it stops the thread at its next hand-over.
pub struct Threaded {
    chunks: Receiver<Message>,
    spare: SyncSender<Vec<u8>>,
    current: Vec<u8>,
    pos: usize,
    consumed: u64,
    ended: bool,
}

impl Threaded {
    /// Starts `decoder` on a thread of `scope`.
    pub fn spawn<'scope, 'env, D>(scope: &'scope Scope<'scope, 'env>, mut decoder: D) -> Self
    where
        D: Decompressor + Send + 'scope,
    {
        let (tx, chunks) = mpsc::sync_channel::<Message>(IN_FLIGHT);
        let (spare, spares) = mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT + 1);
        scope.spawn(move || {
            let mut made = 0usize;
            loop {
                let mut buf = match spares.try_recv() {
                    Ok(b) => b,
                    Err(_) if made < IN_FLIGHT + 1 => {
                        made += 1;
                        vec![0u8; CHUNK]
                    }
                    Err(_) => match spares.recv() {
                        Ok(b) => b,
                        Err(_) => return,
                    },
                };
                buf.resize(CHUNK, 0);
                let mut filled = 0usize;
                let result = loop {
                    let Some(dst) = buf.get_mut(filled..).filter(|d| !d.is_empty()) else {
                        break Ok(());
                    };
                    match decoder.read(dst) {
                        Ok(0) => break Ok(()),
                        Ok(n) => filled += n,
                        Err(e) => break Err(e),
                    }
                };
                let end = filled < CHUNK;
                buf.truncate(filled);
                let message = result.map(|()| (buf, decoder.consumed()));
                let failed = message.is_err();
                if tx.send(message).is_err() || failed {
                    return;
                }
                if end {
                    // An empty chunk marks the end (unless this one already was empty).
                    if filled > 0 {
                        let _ = tx.send(Ok((Vec::new(), decoder.consumed())));
                    }
                    return;
                }
            }
        });
        Threaded {
            chunks,
            spare,
            current: Vec::new(),
            pos: 0,
            consumed: 0,
            ended: false,
        }
    }
}

impl Decompressor for Threaded {
    fn read(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        self.read_with(out.len(), &mut |b| out[..b.len()].copy_from_slice(b))
    }

    fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, Error> {
        if max == 0 {
            return Ok(0);
        }
        while self.pos >= self.current.len() {
            if self.ended {
                return Ok(0);
            }
            let (chunk, consumed) = self.chunks.recv().map_err(|_| {
                Error::new(
                    ErrorKind::Decompress,
                    self.consumed,
                    "the decoding thread stopped",
                )
            })??;
            self.consumed = consumed;
            self.ended = chunk.is_empty();
            let old = std::mem::replace(&mut self.current, chunk);
            self.pos = 0;
            if old.capacity() > 0 {
                let _ = self.spare.try_send(old);
            }
        }
        let avail = &self.current[self.pos..];
        let n = avail.len().min(max);
        f(&avail[..n]);
        self.pos += n;
        Ok(n)
    }

    fn consumed(&self) -> u64 {
        self.consumed
    }
}

/// Calls `f` with every image of `unit`, in discovery order, its bytes at hand.
///
/// Images that the library identified from their headers (compressed fatbinary entries)
/// are decoded, handed to `f` and dropped. When two or more need decoding, a second thread
/// decodes the next ones while `f` works on the current one (which, in `list`, hashes it):
/// memory holds at most three decoded entries, and what `f` sees, and the first error,
/// are as if the images were decoded one by one. Without `decode`, compressed cubins are
/// passed as they are stored ([`offload_image::Image::encoded`] set, their size from the
/// entry header, which is the decoded ELF file's); compressed PTX is still decoded (its
/// header counts the padding NULs that the decoded text drops).
///
/// `all` first sees every image of the opened unit as stored (none decoded): what a caller
/// that chooses among them (`coverage`) needs, without opening the unit a second time.
pub fn for_each_image_seeing(
    unit: &offload_image::Unit<'_>,
    options: &ReadOptions,
    decode: bool,
    all: impl FnOnce(&[offload_image::Image<'_>]),
    mut f: impl FnMut(&offload_image::Image<'_>),
) -> Result<(), Error> {
    let open = unit.open(options)?;
    let images: Vec<offload_image::Image<'_>> = open.images().collect();
    all(&images);
    let needs = |image: &offload_image::Image<'_>| {
        image.encoded.is_some() && (decode || image.image_kind == offload_image::ImageKind::Ptx)
    };
    if images.iter().filter(|i| needs(i)).nth(1).is_none() {
        for image in &images {
            if !needs(image) {
                f(image);
                continue;
            }
            let bytes = image.decode(options)?;
            f(&image.with_bytes(&bytes));
        }
        return Ok(());
    }
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<Result<Vec<u8>, Error>>(1);
        let images = &images;
        scope.spawn(move || {
            for image in images.iter().filter(|i| needs(i)) {
                let decoded = image.decode(options).map(|b| b.into_owned());
                let failed = decoded.is_err();
                // The receiver is gone once it has stopped at an error.
                if tx.send(decoded).is_err() || failed {
                    break;
                }
            }
        });
        for image in images {
            if !needs(image) {
                f(image);
                continue;
            }
            let bytes = rx.recv().map_err(|_| {
                Error::new(ErrorKind::Decompress, 0, "the decoding thread stopped")
            })??;
            f(&image.with_bytes(&bytes));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_image::nvfatbin::Fatbin;

    /// `for_each_image_seeing` decodes the next entries on a second thread, and what it hands
    /// out is what decoding each image in turn gives: on NVIDIA's `mixed.speed.all.fatbin`
    /// (LZ4 entries) the same images, in the same order, with the same bytes; with the
    /// second compressed entry damaged, the images before it and then the error that
    /// decoding it gives.
    #[test]
    fn images_decoded_ahead_are_the_images_decoded_in_turn() {
        use offload_image::units;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/nvfatbin/files/mixed.speed.all.fatbin"
        );
        let data = std::fs::read(path).unwrap();
        let options = ReadOptions::default();
        let unit = units(&data, &options).next().unwrap().unwrap();
        let open = unit.open(&options).unwrap();
        let in_turn: Vec<(usize, Vec<u8>)> = open
            .images()
            .map(|i| (i.index, i.decode(&options).unwrap().into_owned()))
            .collect();
        let encoded: Vec<_> = open.images().filter_map(|i| i.encoded).collect();
        assert!(encoded.len() >= 3, "{} compressed entries", encoded.len());
        let mut seen = Vec::new();
        for_each_image_seeing(
            &unit,
            &options,
            true,
            |_| {},
            |i| {
                assert!(i.encoded.is_none());
                seen.push((i.index, i.bytes.to_vec()));
            },
        )
        .unwrap();
        assert_eq!(seen, in_turn);
        // Damage the second compressed entry.
        let e = encoded[1];
        let (at, len) = (e.stream_at as usize, e.stream.len());
        let mut bad = data.clone();
        bad[at + len / 2..at + len].fill(0);
        let want = offload_image::Encoded {
            stream: &bad[at..at + len],
            ..e
        }
        .decode(&options)
        .unwrap_err();
        let unit = units(&bad, &options).next().unwrap().unwrap();
        let before = unit
            .open(&options)
            .unwrap()
            .images()
            .position(|i| i.encoded.is_some_and(|x| x.stream_at == e.stream_at))
            .unwrap();
        let mut seen = Vec::new();
        let err = for_each_image_seeing(
            &unit,
            &options,
            true,
            |_| {},
            |i| seen.push((i.index, i.bytes.to_vec())),
        )
        .unwrap_err();
        assert_eq!((err.kind(), err.offset()), (want.kind(), want.offset()));
        assert_eq!(seen, in_turn[..before]);
    }

    /// The hook decodes the zstd entries of a real fatbinary (device_c.fatbin, written by
    /// NVIDIA's fatbinary) with libzstd to the bytes the built-in decoder gives, and leaves
    /// other codecs to the library.
    #[test]
    fn fatbinary_entries_decode_through_libzstd() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/nvfatbin/files/device_c.fatbin"
        );
        let data = std::fs::read(path).unwrap();
        let options = ReadOptions::default();
        let fatbin = Fatbin::parse(&data, &options.limits).unwrap();
        let mut decoded = 0;
        for e in fatbin.entries().filter(|e| e.codec == Some(Codec::Zstd)) {
            let stream = e.stream().unwrap();
            let builtin = e.decompress(&options).unwrap();
            let hooked = raw_libzstd(Codec::Zstd, stream, e.uncompressed_size, &options);
            if cfg!(feature = "libzstd") {
                assert_eq!(hooked.unwrap().unwrap(), builtin);
                decoded += 1;
            } else {
                assert!(hooked.is_none());
            }
        }
        assert_eq!(decoded, if cfg!(feature = "libzstd") { 2 } else { 0 });
        assert!(raw_libzstd(Codec::Lz4, &[], 0, &options).is_none());
        // Through the read options `loader-sim` uses, the library calls the hook.
        let hooked = read_options(ZstdDecoder::Libzstd, true);
        assert!(hooked.decoders.raw.is_some());
    }
}
