//! Choosing and extracting an image from a compressed bundle in one pass over its
//! decompressed content, without holding that content.
//!
//! [`select_in_stream`] reads the bundle's descriptor table from the first decompressed
//! bytes ([`BundleTable::read`]), then walks the payloads in offset order. Of every
//! payload it reads the first [`IDENTIFY_LEN`] bytes — all that [`identify`] and the
//! image-kind sniffing ever look at — and checks the image against each device exactly
//! as [`select`](crate::select::select) does on the whole bundle (the ELF header wins over
//! the entry ID, `COMPATIBILITY.md` §10.1). An image that beats the best one so far for a
//! device is handed to the caller's sink as it streams past; everything else is skipped.
//! Because the ranking is a total order (its last field is the entry index), the best so
//! far after the last payload is exactly what [`select`](crate::select::select) returns.
//!
//! With hash verification on, the rest of the stream is decoded and hashed
//! ([`ContentReader::finish`]); with it off the decoder stops right after the last
//! payload's first bytes (or the end of the last kept image, whichever is later).
//!
//! Memory: the descriptor table, one [`IDENTIFY_LEN`]-byte buffer, a 16 KiB copy buffer
//! and whatever the decoder needs (a zstd window; zlib 32 KiB). The caller's sink decides
//! whether kept bytes go to memory, a file or a hash.

use alloc::vec::Vec;

use crate::bundle::BundleTable;
use crate::ccob::{ContentReader, Decompressor};
use crate::error::Error;
use crate::image::{Format, Image};
use crate::select::{check, driver_refusal, RankKey, SelectOptions, Verdict};
use crate::target::{identify, Code, Device};
use crate::Limits;

/// How many leading bytes of an image [`identify`] and [`crate::ImageKind::sniff`] read
/// at most (the ELF header is 64 bytes; PTX detection looks at 256).
pub const IDENTIFY_LEN: usize = 256;

/// What [`select_in_stream`] hands the caller's sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept<'a> {
    /// Entry `index` is now the best image for device `device` (position in the device
    /// list); its `size` bytes follow as [`Kept::Bytes`]. Anything kept before for that
    /// device is superseded.
    Start {
        /// Position of the device in the list given to [`select_in_stream`].
        device: usize,
        /// Entry index (header order).
        index: usize,
        /// Payload size.
        size: u64,
    },
    /// The next bytes of the image last started for `device`.
    Bytes {
        /// Position of the device in the list given to [`select_in_stream`].
        device: usize,
        /// The bytes.
        bytes: &'a [u8],
    },
}

/// The result of [`select_in_stream`].
#[derive(Clone, Debug)]
pub struct StreamSelection {
    /// The bundle's descriptor table (entry IDs, offsets, sizes).
    pub table: BundleTable,
    /// Per device (in the order given): the chosen entry's key, `key.index` being its
    /// index in the table; `None` if no entry is compatible.
    pub chosen: Vec<Option<RankKey>>,
    /// Per device: what the chosen entry holds, as [`crate::identify`] saw it from its
    /// first bytes (code object, bitcode, SPIR-V, ...).
    pub codes: Vec<Option<Code>>,
    /// True if the whole stream was decoded and its MD5 checked.
    pub verified: bool,
}

/// Chooses, for every device, the entry of the binary bundle inside `reader` that
/// [`select`](crate::select::select) would choose, streaming the chosen images' bytes to
/// `sink` when `keep` is set (see the module documentation).
///
/// `reader` must be at position 0. `Ok(None)` when the content cannot be read this way —
/// it is not a binary bundle (a text bundle), or two non-empty payloads overlap — and the
/// caller must decompress the whole bundle instead. Errors are located relative to the
/// compressed bundle (table problems with [`Error::decompressed_offset`]).
pub fn select_in_stream<D, E, F>(
    mut reader: ContentReader<'_, D>,
    devices: &[Device],
    options: &SelectOptions,
    limits: &Limits,
    keep: bool,
    mut sink: F,
) -> core::result::Result<Option<StreamSelection>, E>
where
    D: Decompressor,
    E: From<Error>,
    F: FnMut(Kept<'_>) -> core::result::Result<(), E>,
{
    let Some(table) = BundleTable::read(&mut reader, limits)? else {
        return Ok(None);
    };
    let mut entries = Vec::new();
    entries
        .try_reserve_exact(table.entries().len())
        .map_err(|_| oom())?;
    entries.extend(table.entries());
    entries.sort_by_key(|e| (e.offset, e.index));
    let mut best: Vec<Option<RankKey>> = Vec::new();
    best.try_reserve_exact(devices.len()).map_err(|_| oom())?;
    best.resize(devices.len(), None);
    let mut codes: Vec<Option<Code>> = Vec::new();
    codes.try_reserve_exact(devices.len()).map_err(|_| oom())?;
    codes.resize(devices.len(), None);
    // The chosen entry's PTX ISA version, for the driver's judgement once all are seen.
    let mut isas: Vec<Option<crate::driver::PtxIsa>> = Vec::new();
    isas.try_reserve_exact(devices.len()).map_err(|_| oom())?;
    isas.resize(devices.len(), None);
    let mut winners: Vec<usize> = Vec::new();
    winners
        .try_reserve_exact(devices.len())
        .map_err(|_| oom())?;
    let mut head = [0u8; IDENTIFY_LEN];
    for entry in &entries {
        let head_len = usize::try_from(entry.size)
            .unwrap_or(IDENTIFY_LEN)
            .min(IDENTIFY_LEN);
        if head_len > 0 {
            if entry.offset < reader.position() {
                return Ok(None);
            }
            reader.skip(entry.offset.saturating_sub(reader.position()))?;
            reader.read_exact(head.get_mut(..head_len).unwrap_or_default())?;
        }
        let bytes = head.get(..head_len).unwrap_or_default();
        let mut identity = identify(&Image::from_id(
            entry.index,
            Format::Bundle,
            entry.id,
            bytes,
        ));
        identity.size = entry.size;
        winners.clear();
        for (d, device) in devices.iter().enumerate() {
            if let Verdict::Compatible(key) = check(&identity, entry.index, device, options) {
                let slot = best.get_mut(d).ok_or_else(oom)?;
                if slot.is_none_or(|b| key.cmp_under(&b, options.policy).is_lt()) {
                    *slot = Some(key);
                    if let Some(c) = codes.get_mut(d) {
                        *c = Some(identity.code);
                    }
                    if let Some(i) = isas.get_mut(d) {
                        *i = identity.ptx_isa;
                    }
                    winners.push(d);
                }
            }
        }
        if keep && !winners.is_empty() {
            for &device in &winners {
                sink(Kept::Start {
                    device,
                    index: entry.index,
                    size: entry.size,
                })?;
                sink(Kept::Bytes { device, bytes })?;
            }
            let rest = entry.size.saturating_sub(crate::bytes::u64_of(head_len));
            reader.copy(rest, |chunk| {
                for &device in &winners {
                    sink(Kept::Bytes {
                        device,
                        bytes: chunk,
                    })?;
                }
                Ok::<(), E>(())
            })?;
        }
    }
    let verified = reader.verifies();
    if verified {
        reader.finish()?;
    }
    // The CUDA driver refuses PTX it cannot compile and takes nothing else instead
    // (`COMPATIBILITY.md` §9.5), as [`crate::choose`] judges it.
    for (d, device) in devices.iter().enumerate() {
        let ptx = codes.get(d).copied().flatten() == Some(Code::Ptx);
        let chosen_ptx = ptx.then(|| isas.get(d).copied().flatten());
        if driver_refusal(device, chosen_ptx, &options.cuda).is_some() {
            if let Some(slot) = best.get_mut(d) {
                *slot = None;
            }
        }
    }
    Ok(Some(StreamSelection {
        table,
        chosen: best,
        codes,
        verified,
    }))
}

fn oom() -> Error {
    Error::new(
        crate::ErrorKind::OutOfMemory,
        0,
        "cannot reserve memory for the bundle's entry list",
    )
}
