//! Choosing in a compressed bundle in one pass over its decompressed stream
//! ([`offload_image::stream::select_in_bundle`]), for `select`: the chosen image is
//! written to `-o` and hashed for `--sha256` as it streams past, and the decoder may run
//! on a thread of its own.

use std::fs::File;
use std::io::{Seek, Write};
use std::path::Path;

use offload_image::arch::Code;
use offload_image::ccob::{CompressedBundle, ContentReader};
use offload_image::stream::{select_in_bundle, Kept};
use offload_image::{identify, Device, Format, Image, ReadOptions, SelectOptions};
use sha2::{Digest, Sha256};

use crate::decode::{decoder, threaded_decoder, ZstdDecoder};
use crate::output::hex;

/// `--decode-thread`: whether the decoder of a compressed bundle runs on a thread of its
/// own.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum When {
    // (Plain comments: a doc comment would change `--help`.)
    // When verifying the hash (the thread overlaps the MD5 check) and more than one CPU is
    // available.
    Auto,
    Always,
    Never,
}

impl When {
    /// Whether the decoder runs on a thread of its own, when `verify_hash` says whether
    /// the whole stream is decoded and hashed.
    pub fn threaded(self, verify_hash: bool) -> bool {
        match self {
            When::Always => true,
            When::Never => false,
            When::Auto => {
                verify_hash && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
            }
        }
    }
}

/// A failure while streaming a compressed unit: reading it, or writing `-o`.
pub enum SinkError {
    /// The bundle does not read (located relative to the compressed bundle).
    Read(offload_image::Error),
    /// `-o` could not be written.
    Io(std::io::Error),
}

impl From<offload_image::Error> for SinkError {
    fn from(e: offload_image::Error) -> Self {
        SinkError::Read(e)
    }
}

/// What the streaming path found for one device.
pub struct Pick {
    /// The chosen entry's ID.
    pub id: String,
    /// What it holds, as the stream's identification saw it.
    code: Option<Code>,
    /// Its size.
    pub size: u64,
    /// Its SHA-256, with `--sha256`.
    pub sha256: Option<String>,
}

impl Pick {
    /// The chosen entry's identity: its entry ID, and what the stream saw it hold.
    pub fn identity(&self) -> Option<offload_image::Identity<'_>> {
        let mut identity = identify(&Image::from_id(0, Format::Bundle, &self.id, &[]));
        identity.code = self.code?;
        Some(identity)
    }
}

/// What [`Streamer::run`] found: per device the pick, and the hash mismatch if any.
pub type Streamed = (Vec<Option<Pick>>, Option<offload_image::Error>);

/// Selection in a compressed bundle in one pass over its decompressed stream.
pub struct Streamer<'a> {
    /// The devices.
    pub targets: &'a [Device],
    /// How to choose.
    pub options: &'a SelectOptions,
    /// How to read.
    pub read: &'a ReadOptions,
    /// The zstd decoder.
    pub zstd: ZstdDecoder,
    /// Decode on a thread of its own ([`When::threaded`]).
    pub threaded: bool,
    /// Hash the chosen images.
    pub sha256: bool,
    /// Write the image chosen for the first device here.
    pub out_path: Option<&'a Path>,
}

/// Where the chosen images' bytes go as they stream past: the hashes, and the `-o` file
/// (the image of the first device).
struct Sink<'a> {
    sha256: bool,
    out_path: Option<&'a Path>,
    hashes: Vec<Option<Sha256>>,
    file: Option<File>,
}

impl Sink<'_> {
    /// Takes what the stream hands over: a new image for a device starts its hash afresh
    /// and truncates `-o`.
    fn take(&mut self, k: Kept<'_>) -> Result<(), SinkError> {
        match k {
            Kept::Start { device, .. } => {
                if self.sha256 {
                    self.hashes[device] = Some(Sha256::new());
                }
                if let (0, Some(path)) = (device, self.out_path) {
                    match &mut self.file {
                        Some(f) => {
                            f.set_len(0).map_err(SinkError::Io)?;
                            f.rewind().map_err(SinkError::Io)?;
                        }
                        None => {
                            self.file = Some(File::create(path).map_err(SinkError::Io)?);
                            crate::output::wrote(path);
                        }
                    }
                }
            }
            Kept::Bytes { device, bytes } => {
                if let Some(h) = &mut self.hashes[device] {
                    h.update(bytes);
                }
                if let (0, Some(f)) = (device, &mut self.file) {
                    f.write_all(bytes).map_err(SinkError::Io)?;
                }
            }
        }
        Ok(())
    }

    /// Removes the `-o` file written, if any.
    fn discard(&mut self) -> Result<(), SinkError> {
        if let (Some(_), Some(path)) = (self.file.take(), self.out_path) {
            std::fs::remove_file(path).map_err(SinkError::Io)?;
        }
        Ok(())
    }
}

impl Streamer<'_> {
    /// The choice for every device (in the order of `targets`), and the hash mismatch if
    /// the content's MD5 differs from the header's (the choice stands, as the runtimes
    /// load it: `COMPATIBILITY.md` §13). `Ok(None)`: the content cannot be streamed (a
    /// text bundle, overlapping payloads); the caller opens the unit and writes `-o`
    /// itself.
    pub fn run(&self, c: &CompressedBundle<'_>) -> Result<Option<Streamed>, SinkError> {
        let keep = self.sha256 || self.out_path.is_some();
        let mut sink = Sink {
            sha256: self.sha256,
            out_path: self.out_path,
            hashes: vec![None; self.targets.len()],
            file: None,
        };
        let found = std::thread::scope(|scope| {
            let reader = || -> Result<_, SinkError> {
                let decoder = if self.threaded {
                    threaded_decoder(scope, c, self.zstd, self.read)?
                } else {
                    decoder(c, self.zstd, self.read)?
                };
                Ok(ContentReader::new(c, decoder, self.read)?)
            };
            let (targets, options) = (self.targets, self.options);
            select_in_bundle(c, self.read, reader, targets, options, keep, |k| {
                sink.take(k)
            })
        })?;
        let Some(found) = found else {
            // Overlapping payloads found after an image was already streamed out.
            sink.discard()?;
            return Ok(None);
        };
        if let Some(f) = &mut sink.file {
            f.flush().map_err(SinkError::Io)?;
        }
        // The image streamed out for -o was refused afterwards (the CUDA driver's PTX
        // judgement): no output.
        if let Some(None) = found.chosen.first() {
            sink.discard()?;
        }
        let ids: Vec<_> = found.table.entries().collect();
        let picks = found
            .chosen
            .iter()
            .zip(&found.codes)
            .zip(sink.hashes)
            .map(|((key, code), hash)| {
                let e = key.and_then(|k| ids.get(k.index))?;
                Some(Pick {
                    id: e.id.to_string(),
                    code: *code,
                    size: e.size,
                    sha256: hash.map(|h| hex(&h.finalize())),
                })
            })
            .collect();
        Ok(Some((picks, found.mismatch)))
    }
}
