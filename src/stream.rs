//! Choosing and extracting an image from a compressed bundle in one pass over its
//! decompressed content, without holding that content.
//!
//! [`select_in_stream`] reads the bundle's descriptor table from the first decompressed
//! bytes ([`BundleTable::read`]), then walks the payloads in offset order. Of every
//! payload it reads the first [`IDENTIFY_LEN`] bytes — all that [`crate::identify`] and the
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
use crate::ccob::{CompressedBundle, ContentReader, Decompressor};
use crate::container::Unit;
use crate::error::Error;
use crate::options::{Limits, ReadOptions};
use crate::select::{check, driver_refusal, RankKey, SelectOptions, Verdict};
use crate::arch::{identify_entry, Code, Device};

/// How many leading bytes of an image [`crate::identify`] and [`crate::ImageKind::sniff`] read
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
    /// The stream read whole and well, but its truncated MD5 differs from the header's
    /// ([`crate::ErrorKind::HashMismatch`], located relative to the compressed bundle): the
    /// choice stands, as the runtimes load such a bundle (`COMPATIBILITY.md` §13).
    pub mismatch: Option<Error>,
}

/// How a caller chooses the image of a unit: the one rule for streaming a unit or opening
/// it, which `loader-sim select` and the C API share.
#[derive(Clone, Copy, Debug)]
pub enum Plan<'u, 'data> {
    /// Choose in one pass over this compressed bundle's decompressed stream
    /// ([`select_in_bundle`]), holding only the chosen images; open the unit instead when
    /// that answers `Ok(None)` (a text bundle, overlapping payloads).
    Stream(&'u CompressedBundle<'data>),
    /// Open the unit ([`Unit::open`]) and choose among all its images
    /// ([`crate::choose`]).
    Open,
}

/// Whether to choose in `unit` by streaming it or by opening it ([`Plan`]).
///
/// A compressed bundle is streamed: its content is never held whole. It is opened instead
/// when the caller needs the whole unit anyway (`whole`): the verdict on every image (the
/// stream keeps only the winners'), or the caller holds the unit open already. Every
/// other unit is opened (its images are in the caller's bytes, or decoded one at a time).
pub fn plan<'u, 'data>(unit: &'u Unit<'data>, whole: bool) -> Plan<'u, 'data> {
    match unit.compressed() {
        Some(bundle) if !whole => Plan::Stream(bundle),
        _ => Plan::Open,
    }
}

/// [`select_in_stream`] on a compressed bundle: the declared size is checked against the
/// limits first ([`CompressedBundle::check_size`]), since decoders allocate as soon as
/// they are made, then `reader` makes the content reader (the caller chooses the decoder:
/// [`CompressedBundle::reader`], or a faster one on a thread of its own) and the stream
/// is read.
///
/// `Ok(None)` as for [`select_in_stream`]: the caller opens the unit instead
/// ([`Plan::Stream`]). Errors are located relative to the compressed bundle.
pub fn select_in_bundle<'b, D, E, F, R>(
    bundle: &CompressedBundle<'_>,
    read: &ReadOptions,
    reader: R,
    devices: &[Device],
    options: &SelectOptions,
    keep: bool,
    sink: F,
) -> core::result::Result<Option<StreamSelection>, E>
where
    D: Decompressor,
    E: From<Error>,
    F: FnMut(Kept<'_>) -> core::result::Result<(), E>,
    R: FnOnce() -> core::result::Result<ContentReader<'b, D>, E>,
{
    bundle.check_size(read)?;
    let reader = reader()?;
    select_in_stream(reader, devices, options, &read.limits, keep, sink)
}

/// The best entry so far for every device, as the stream goes past the entries.
struct Leaders {
    /// Per device: the best entry's rank key.
    best: Vec<Option<RankKey>>,
    /// Per device: what the best entry holds.
    codes: Vec<Option<Code>>,
    /// Per device: the best entry's PTX ISA version, for the driver's judgement once all
    /// are seen.
    isas: Vec<Option<crate::driver::PtxIsa>>,
    /// The devices whose best entry the last [`Leaders::offer`] replaced.
    winners: Vec<usize>,
}

impl Leaders {
    /// No entry yet for any of `devices` devices.
    fn new(devices: usize) -> Result<Self, Error> {
        fn slots<T: Clone>(n: usize, value: T) -> Result<Vec<T>, Error> {
            let mut v = Vec::new();
            v.try_reserve_exact(n).map_err(|_| oom())?;
            v.resize(n, value);
            Ok(v)
        }
        let mut winners = Vec::new();
        winners.try_reserve_exact(devices).map_err(|_| oom())?;
        Ok(Leaders {
            best: slots(devices, None)?,
            codes: slots(devices, None)?,
            isas: slots(devices, None)?,
            winners,
        })
    }

    /// Checks entry `index` (identified as `identity`) against every device; the devices
    /// for which it beats the best so far are left in `winners`.
    fn offer(
        &mut self,
        identity: &crate::arch::Identity<'_>,
        index: usize,
        devices: &[Device],
        options: &SelectOptions,
    ) -> Result<(), Error> {
        self.winners.clear();
        for (d, device) in devices.iter().enumerate() {
            if let Verdict::Compatible(key) = check(identity, index, device, options) {
                let slot = self.best.get_mut(d).ok_or_else(oom)?;
                if slot.is_none_or(|b| key.cmp_under(&b, options.policy).is_lt()) {
                    *slot = Some(key);
                    if let Some(c) = self.codes.get_mut(d) {
                        *c = Some(identity.code);
                    }
                    if let Some(i) = self.isas.get_mut(d) {
                        *i = identity.ptx_isa;
                    }
                    self.winners.push(d);
                }
            }
        }
        Ok(())
    }

    /// The CUDA driver refuses PTX it cannot compile and takes nothing else instead
    /// (`COMPATIBILITY.md` §9.5), as [`crate::choose`] judges it: such a device gets no
    /// entry.
    fn judge_driver(&mut self, devices: &[Device], options: &SelectOptions) {
        for (d, device) in devices.iter().enumerate() {
            let ptx = self.codes.get(d).copied().flatten() == Some(Code::Ptx);
            let chosen_ptx = ptx.then(|| self.isas.get(d).copied().flatten());
            if driver_refusal(device, chosen_ptx, &options.cuda).is_some() {
                if let Some(slot) = self.best.get_mut(d) {
                    *slot = None;
                }
            }
        }
    }
}

/// Hands entry `index`'s bytes (`head`, then the rest of its `size` bytes from `reader`)
/// to `sink` for every device in `winners`.
fn keep_entry<D, E, F>(
    reader: &mut ContentReader<'_, D>,
    winners: &[usize],
    (index, size): (usize, u64),
    head: &[u8],
    sink: &mut F,
) -> core::result::Result<(), E>
where
    D: Decompressor,
    E: From<Error>,
    F: FnMut(Kept<'_>) -> core::result::Result<(), E>,
{
    for &device in winners {
        sink(Kept::Start {
            device,
            index,
            size,
        })?;
        sink(Kept::Bytes {
            device,
            bytes: head,
        })?;
    }
    let rest = size.saturating_sub(crate::bytes::u64_of(head.len()));
    reader.copy(rest, |chunk| {
        for &device in winners {
            sink(Kept::Bytes {
                device,
                bytes: chunk,
            })?;
        }
        Ok::<(), E>(())
    })?;
    Ok(())
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
    let mut leaders = Leaders::new(devices.len())?;
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
        let identity = identify_entry(entry.index, entry.id, bytes, entry.size);
        leaders.offer(&identity, entry.index, devices, options)?;
        if keep && !leaders.winners.is_empty() {
            let place = (entry.index, entry.size);
            keep_entry(&mut reader, &leaders.winners, place, bytes, &mut sink)?;
        }
    }
    let verified = reader.verifies();
    let mut mismatch = None;
    if verified {
        // A hash that differs is reported beside the choice, not instead of it: every
        // other check of the stream (its size, its end) has passed by then.
        match reader.finish() {
            Ok(_) => {}
            Err(e) if e.kind() == crate::ErrorKind::HashMismatch => mismatch = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    leaders.judge_driver(devices, options);
    Ok(Some(StreamSelection {
        table,
        chosen: leaders.best,
        codes: leaders.codes,
        verified,
        mismatch,
    }))
}

fn oom() -> Error {
    Error::new(
        crate::ErrorKind::OutOfMemory,
        0,
        "cannot reserve memory for the bundle's entry list",
    )
}

/// The bytes of one image a streaming choice kept ([`StreamChoice::kept`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptImage {
    /// Entry index (header order) in the bundle's table.
    pub index: usize,
    /// The image's bytes, decompressed and owned.
    pub bytes: Vec<u8>,
}

/// What [`choose_streaming`] found in one pass over a compressed bundle: per device the
/// chosen entry, and the chosen images' bytes.
#[derive(Clone, Debug)]
pub struct StreamChoice {
    /// The bundle's descriptor table (entry IDs, offsets and sizes, in header order).
    pub table: BundleTable,
    /// Per device (in the order given): the chosen entry's index in [`StreamChoice::table`],
    /// `None` if no entry is compatible. The same entry as [`crate::choose`] chooses on the
    /// opened unit.
    pub chosen: Vec<Option<usize>>,
    /// The bytes of every chosen image that was to be kept, once per image, in the order
    /// they were streamed.
    pub kept: Vec<KeptImage>,
    /// True if the whole stream was decoded and its MD5 checked
    /// ([`ReadOptions::verify_hash`]).
    pub verified: bool,
}

impl StreamChoice {
    /// The kept bytes of the image chosen for device `device` (its position in the list),
    /// if one was chosen and kept.
    pub fn bytes(&self, device: usize) -> Option<&[u8]> {
        let index = self.chosen.get(device).copied().flatten()?;
        self.kept
            .iter()
            .find(|k| k.index == index)
            .map(|k| k.bytes.as_slice())
    }
}

/// Chooses for every device in a compressed bundle without holding its decompressed
/// content: one pass over the stream, which reads of every entry its first
/// [`IDENTIFY_LEN`] bytes and keeps only the bytes of the images chosen (the path that
/// saves the memory; `PERFORMANCE.md`). The choice is the one [`crate::choose`] makes on
/// the opened unit.
///
/// `Ok(None)` when the unit is not chosen in this way: it is not a compressed bundle, or
/// its content cannot be read as a stream (a text bundle, overlapping payloads). The
/// caller then opens the unit ([`Unit::open`]) and uses [`crate::choose`], which also
/// gives the reasons for every image. Errors are located in the walked buffer, as
/// [`Unit::open`] locates them.
///
/// ```
/// use offload_image::{choose_streaming, units, Device, ReadOptions, SelectOptions};
///
/// # fn main() -> offload_image::Result<()> {
/// let data = include_bytes!("../tests/data/corpus/bundles/hip_6arch.bundle");
/// let (read, options) = (ReadOptions::default(), SelectOptions::default());
/// let devices = [Device::parse("gfx90a:xnack-")?];
/// for unit in units(data, &read) {
///     let unit = unit?;
///     let bytes: Vec<u8> = match choose_streaming(&unit, &devices, &options, &read)? {
///         Some(found) => found.bytes(0).unwrap_or_default().to_vec(),
///         None => {
///             // Not a compressed bundle (this one is stored uncompressed): open and choose.
///             let open = unit.open(&read)?;
///             let choice = &offload_image::choose(open.images(), &devices, &options)[0];
///             choice.image.map(|i| i.bytes.to_vec()).unwrap_or_default()
///         }
///     };
///     assert!(bytes.starts_with(b"\x7fELF"));
/// }
/// # Ok(())
/// # }
/// ```
pub fn choose_streaming(
    unit: &Unit<'_>,
    devices: &[Device],
    options: &SelectOptions,
    read: &ReadOptions,
) -> Result<Option<StreamChoice>, Error> {
    choose_streaming_keeping(unit, devices, options, read, |_| true)
}

/// [`choose_streaming`], keeping the bytes of a chosen entry only when `keep(index)` says
/// so (for example, not those of entries the caller holds already); a chosen entry not
/// kept is still in [`StreamChoice::chosen`].
pub fn choose_streaming_keeping(
    unit: &Unit<'_>,
    devices: &[Device],
    options: &SelectOptions,
    read: &ReadOptions,
    mut keep: impl FnMut(usize) -> bool,
) -> Result<Option<StreamChoice>, Error> {
    let Plan::Stream(bundle) = plan(unit, false) else {
        return Ok(None);
    };
    let at = unit.location.offset;
    let mut keeper = Keeper::new(devices.len())?;
    let found = select_in_bundle(
        bundle,
        read,
        || bundle.reader(read),
        devices,
        options,
        true,
        |k| keeper.take(k, &mut keep),
    )
    .map_err(|e| e.rebase(at))?;
    // The plugin tier refuses a bundle whose hash differs (its callers ask for the check).
    if let Some(e) = found.as_ref().and_then(|f| f.mismatch) {
        return Err(e.rebase(at));
    }
    Ok(found.map(|found| StreamChoice {
        table: found.table,
        chosen: found.chosen.iter().map(|k| k.map(|k| k.index)).collect(),
        kept: keeper.kept,
        verified: found.verified,
    }))
}

/// The sink of [`choose_streaming`]: the entry each device holds now, and the bytes of
/// those to keep. All of an entry's bytes follow its starts ([`keep_entry`]), and every
/// entry is offered once.
struct Keeper {
    /// Per device: the entry it holds now.
    held: Vec<Option<usize>>,
    /// The entry being streamed and the device whose bytes fill it (every winner of an
    /// entry gets the same bytes), if it is kept.
    filling: Option<(usize, usize)>,
    kept: Vec<KeptImage>,
}

impl Keeper {
    fn new(devices: usize) -> Result<Self, Error> {
        let mut held = Vec::new();
        held.try_reserve_exact(devices).map_err(|_| oom())?;
        held.resize(devices, None);
        Ok(Keeper {
            held,
            filling: None,
            kept: Vec::new(),
        })
    }

    fn take(&mut self, k: Kept<'_>, keep: &mut impl FnMut(usize) -> bool) -> Result<(), Error> {
        match k {
            Kept::Start {
                device,
                index,
                size,
            } => {
                if let Some(h) = self.held.get_mut(device) {
                    *h = Some(index);
                }
                // A new entry: the bytes that follow are its own.
                if self.filling.map(|(i, _)| i) != Some(index) {
                    self.filling = None;
                }
                let known = self.kept.iter().any(|k| k.index == index);
                if !known && keep(index) {
                    let n = usize::try_from(size).map_err(|_| oom())?;
                    let mut bytes = Vec::new();
                    bytes.try_reserve_exact(n).map_err(|_| oom())?;
                    self.kept.try_reserve(1).map_err(|_| oom())?;
                    self.kept.push(KeptImage { index, bytes });
                    self.filling = Some((index, device));
                }
                // Images no device holds any more are dropped at once.
                let held = &self.held;
                self.kept.retain(|k| held.contains(&Some(k.index)));
            }
            Kept::Bytes { device, bytes } => {
                if let Some((index, owner)) = self.filling {
                    if owner == device {
                        if let Some(k) = self.kept.iter_mut().find(|k| k.index == index) {
                            k.bytes.try_reserve(bytes.len()).map_err(|_| oom())?;
                            k.bytes.extend_from_slice(bytes);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
