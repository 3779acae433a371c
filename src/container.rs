//! Finding offload containers by content: in files, the sections of host files (ELF, PE
//! images and COFF objects: [`crate::host`]), `ar` members, recursively.
//!
//! The walk ([`for_each_unit`]) hands out [`Unit`]s in discovery order (archive member
//! order, section order, offset within a section) without allocating. A unit is one bundle
//! (compressed or not), one text bundle, the OffloadBinaries laid out back to back in one
//! section or file, the `__CLANG_OFFLOAD_BUNDLE__<id>` sections of one bundled host object,
//! or one bare device ELF. [`Unit::open`] decompresses what needs it (owned once) and
//! [`OpenUnit::images`] lists the images in discovery order.
//!
//! Several blobs in one buffer (a `.hip_fatbin` section holds one bundle per translation
//! unit) are walked by the sizes their headers give; only zero padding may separate them.

use alloc::vec::Vec;
use core::fmt;

use object::read::archive::ArchiveFile;

use crate::bundle::{self, Bundle, BundleEntries};
pub use crate::bytes::elf_machine;
use crate::bytes::{self, u64_of};
use crate::ccob::{self, CompressedBundle};
use crate::decompress::Codec;
use crate::error::{Error, ErrorKind, Result};
use crate::host::elf::ElfSections;
use crate::host::pe::{self, PeSections};
use crate::host::{SectionRole, Sections};
use crate::image::{Encoded, Format, Image, ImageKind};
use crate::kpack::{KpackArchive, KpackEntry, Stored};
use crate::nvfatbin::{self, Fatbin, FatbinEntries};
use crate::offload_binary::{
    self, OffloadBinaries, OffloadBinary, OffloadBinaryEntries, OffloadBinaryIter,
};
use crate::options::ReadOptions;
use crate::raw::{AR_MAGIC, AR_THIN_MAGIC, ELF_MAGIC, KPACK_MAGIC};
use crate::text::{self, TextBundle, TextEntries};

/// Deepest nesting of containers (archive in archive in ELF ...) a path can record.
pub const MAX_DEPTH: usize = crate::options::Limits::MAX_DEPTH;

pub use crate::host::elf::SHT_LLVM_OFFLOADING;
use crate::raw::{EM_AMDGPU, EM_CUDA};

/// One step of the path to a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathElem<'data> {
    /// An `ar` archive member, by name.
    Member(&'data [u8]),
    /// An ELF section, by name.
    Section(&'data [u8]),
}

/// Where a unit was found: the containers leading to it and its offset in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location<'data> {
    path: heapless::Vec<PathElem<'data>, MAX_DEPTH>,
    /// Offset of the unit's first byte in the buffer handed to the walk.
    pub offset: u64,
}

impl<'data> Location<'data> {
    tools_pub! {
        /// The containers leading to the unit, outermost first (empty: the file itself).
        pub fn path(&self) -> &[PathElem<'data>] {
            &self.path
        }
    }

    /// The innermost ELF section name, if the unit is in a section.
    pub fn section(&self) -> Option<&'data [u8]> {
        self.path.iter().rev().find_map(|p| match p {
            PathElem::Section(s) => Some(*s),
            PathElem::Member(_) => None,
        })
    }
}

impl fmt::Display for Location<'_> {
    /// `file`, or the path such as `member libfoo.o / section .llvm.offloading`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            return f.write_str("file");
        }
        for (i, p) in self.path.iter().enumerate() {
            if i > 0 {
                f.write_str(" / ")?;
            }
            let (label, name) = match p {
                PathElem::Member(n) => ("member", n),
                PathElem::Section(n) => ("section", n),
            };
            write!(f, "{label} ")?;
            for chunk in name.utf8_chunks() {
                f.write_str(chunk.valid())?;
                if !chunk.invalid().is_empty() {
                    f.write_str("\u{FFFD}")?;
                }
            }
        }
        Ok(())
    }
}

/// What a unit holds.
#[derive(Clone, Debug)]
pub enum UnitContent<'data> {
    /// An uncompressed binary bundle.
    Bundle(Bundle<'data>),
    /// A compressed bundle (`CCOB`).
    Compressed(CompressedBundle<'data>),
    /// A text bundle.
    Text(TextBundle<'data>),
    /// One or more OffloadBinaries back to back.
    OffloadBinaries(OffloadBinaries<'data>),
    /// The `__CLANG_OFFLOAD_BUNDLE__<id>` sections of one bundled host object.
    ObjectBundle(ObjectBundle<'data>),
    /// A bare device ELF (AMDGPU code object or cubin).
    DeviceElf(&'data [u8]),
    /// One NVIDIA fatbinary (bare, in `.nv_fatbin`, or an OffloadBinary `fatbin` image).
    NvFatbin(Fatbin<'data>),
    /// An AMD `.kpack` archive (a file of its own, or an archive member): one image per
    /// TOC entry (`KPACK.md`).
    Kpack(KpackArchive<'data>),
    /// A container that does not read, among others that do: the walk reports it and goes
    /// on at the next container start (see [`Damage`]). Opening it gives its error.
    Damaged(Damage<'data>),
}

/// A damaged container of a back-to-back walk (a `.hip_fatbin` or `.nv_fatbin` section,
/// a file of containers): what failed, and the bytes the walk passed over.
///
/// The walk resumes where a runtime would find the next container: the next address a
/// registration wrapper of the host file points at (what HIP and CUDA register, one
/// wrapper per container), else the first container start after the extent the damaged
/// container's header still describes (a `CCOB`'s or fatbinary's total size, a bundle's
/// entry table), else the first container start after the damaged one's first byte. It
/// never resumes inside a payload a readable header describes.
#[derive(Clone, Copy, Debug)]
pub struct Damage<'data> {
    /// Why the container does not read (its offset is in the file).
    pub error: Error,
    /// The container format its magic (or its section) names.
    pub format: Format,
    /// From the damaged container's first byte to where the walk resumed.
    pub bytes: &'data [u8],
}

tools_fields! {
    /// A registration/selection unit: see the module documentation.
    #[derive(Clone, Debug)]
    pub struct Unit<'data> {
        /// Where the unit is.
        pub location: Location<'data>,
        /// Index of the unit within its container (bundle index in a `.hip_fatbin` section).
        pub index: usize,
        /// Bytes after this unit that are neither zero padding nor the start of another
        /// container, skipped up to the next container magic at or after the unit's end (or
        /// to the end of the section): file offsets. `FORMATS.md` §2.4; only without
        /// [`ReadOptions::strict`], which refuses them instead.
        pub skipped: Option<core::ops::Range<u64>>,
        file: &'data [u8],
        @tools
        /// The unit itself.
        pub content: UnitContent<'data>,
    }
}

impl<'data> Unit<'data> {
    /// The container format of the unit's images.
    pub fn format(&self) -> Format {
        match self.content {
            UnitContent::Bundle(_) | UnitContent::Compressed(_) | UnitContent::ObjectBundle(_) => {
                Format::Bundle
            }
            UnitContent::Text(_) => Format::TextBundle,
            UnitContent::OffloadBinaries(_) => Format::OffloadBinary,
            UnitContent::DeviceElf(_) => Format::Elf,
            UnitContent::NvFatbin(_) => Format::NvFatbin,
            UnitContent::Kpack(_) => Format::Kpack,
            UnitContent::Damaged(d) => d.format,
        }
    }

    /// The damage, if the unit's container does not read ([`UnitContent::Damaged`]).
    pub fn damage(&self) -> Option<&Damage<'data>> {
        match &self.content {
            UnitContent::Damaged(d) => Some(d),
            _ => None,
        }
    }

    /// The compressed bundle, if this unit is one.
    pub fn compressed(&self) -> Option<&CompressedBundle<'data>> {
        match &self.content {
            UnitContent::Compressed(c) => Some(c),
            _ => None,
        }
    }

    tools_pub! {
        /// The extent of the unit's container in the walked buffer, as its headers give it:
        /// a bundle, fatbinary or OffloadBinary sequence by its stored sizes, a `CCOB` by its
        /// total size (version 1, which has none, by decoding its stream to its end), a bundled
        /// host object or bare device ELF by its own bytes, a text bundle to the end of the
        /// buffer (it is a whole file).
        pub fn extent(&self, options: &ReadOptions) -> Result<core::ops::Range<u64>> {
            let start = self.location.offset;
            let len = match &self.content {
                UnitContent::Bundle(b) => b.len(),
                UnitContent::Compressed(c) => c.len(options).map_err(|e| e.rebase(start))?,
                UnitContent::OffloadBinaries(s) => s.len(),
                UnitContent::DeviceElf(d) => u64_of(d.len()),
                UnitContent::NvFatbin(f) => f.len(),
                UnitContent::Kpack(k) => u64_of(k.data().len()),
                UnitContent::ObjectBundle(o) => u64_of(o.elf().len()),
                UnitContent::Text(_) => u64_of(self.file.len()).saturating_sub(start),
                UnitContent::Damaged(d) => u64_of(d.bytes.len()),
            };
            Ok(start..start.saturating_add(len))
        }
    }

    tools_pub! {
        /// The bytes of the unit's container ([`Unit::extent`]).
        pub fn bytes(&self, options: &ReadOptions) -> Result<&'data [u8]> {
            let r = self.extent(options)?;
            bytes::sub(self.file, r.start, r.end.saturating_sub(r.start), "unit")
        }
    }

    /// Offset of `bytes` in the walked buffer, if they are stored there uncompressed.
    pub fn offset_of(&self, bytes: &[u8]) -> Option<u64> {
        bytes::offset_in(self.file, bytes)
    }

    /// Makes the unit's images available, decompressing compressed content once (with
    /// the decoders of [`ReadOptions::decoders`]).
    ///
    /// Uncompressed units allocate nothing. Errors inside decompressed content carry the
    /// offset of the compressed blob ([`Error::decompressed_offset`] gives the inner one).
    /// Whichever decoder ran, decompressed content must have the declared size and be a
    /// bundle that parses.
    pub fn open(&self, options: &ReadOptions) -> Result<OpenUnit<'data>> {
        let at = self.location.offset;
        let mut owned = Vec::new();
        match &self.content {
            UnitContent::Compressed(c) => {
                let data = c.decompress(options).map_err(|e| e.rebase(at))?;
                if bytes::u64_of(data.len()) != c.uncompressed_size() {
                    return Err(Error::new(
                        ErrorKind::SizeMismatch,
                        at.saturating_add(c.size_field()),
                        "decompressed content differs from the declared size",
                    ));
                }
                check_decompressed(&data, options).map_err(|e| e.in_decompressed(at))?;
                owned.push(data);
            }
            UnitContent::OffloadBinaries(seq) => {
                // The decompressed size limit holds for the whole unit, not per binary: a
                // sequence of small compressed binaries must not add up to a bomb. The
                // claims are summed before anything is inflated (each inflation produces
                // exactly its claim or fails).
                let mut claimed = 0u64;
                for (pos, b) in seq.iter() {
                    claimed = claimed.saturating_add(b.inflated_size());
                    if claimed > options.limits.max_decompressed_size {
                        return Err(Error::new(
                            ErrorKind::LimitExceeded,
                            at.saturating_add(pos).saturating_add(32),
                            "inflated sizes of the unit's OffloadBinaries exceed the limit",
                        ));
                    }
                }
                let mut nested = 0u64;
                let mut seen = alloc::collections::BTreeSet::new();
                for (pos, b) in seq.iter() {
                    let binary_at = at.saturating_add(pos);
                    if b.is_compressed() {
                        let data = b.inflate(options).map_err(|e| e.rebase(binary_at))?;
                        let inflated = OffloadBinary::parse(&data, &options.limits)
                            .map_err(|e| e.in_decompressed(binary_at))?;
                        check_nested(&inflated, &options.limits, &mut nested, &mut seen)
                            .map_err(|e| e.in_decompressed(binary_at))?;
                        owned.push(data);
                    } else {
                        check_nested(&b, &options.limits, &mut nested, &mut seen)
                            .map_err(|e| e.rebase(binary_at))?;
                    }
                }
            }
            UnitContent::Damaged(d) => return Err(d.error),
            UnitContent::Kpack(k) => {
                // Each entry's blob or frame must exist: an entry that would fail in the
                // loader (`kpack_get_kernel`) makes the unit fail, located in the file.
                for e in k.entries() {
                    k.stored(e).map_err(|e| e.rebase(at))?;
                }
            }
            // A fatbinary's compressed entries are decoded on demand (`Image::decode`).
            _ => {}
        }
        Ok(OpenUnit {
            unit: self.clone(),
            owned,
            options: *options,
        })
    }
}

/// Decompressed content must be a bundle (binary or text).
fn check_decompressed(data: &[u8], options: &ReadOptions) -> Result<()> {
    if bundle::is_bundle(data) {
        Bundle::parse(data, &options.limits).map(|_| ())
    } else if text::detect(data).is_some() {
        TextBundle::parse(data, &options.limits).map(|_| ())
    } else {
        Err(Error::new(
            ErrorKind::Malformed,
            0,
            "decompressed content is not an offload bundle",
        ))
    }
}

/// A unit whose images can be listed; holds decompressed content if there was any.
#[derive(Clone, Debug)]
pub struct OpenUnit<'data> {
    unit: Unit<'data>,
    owned: Vec<Vec<u8>>,
    options: ReadOptions,
}

impl<'data> OpenUnit<'data> {
    /// The unit.
    pub fn unit(&self) -> &Unit<'data> {
        &self.unit
    }

    /// The decompressed bundle of a compressed unit.
    pub fn decompressed(&self) -> Option<&[u8]> {
        match self.unit.content {
            UnitContent::Compressed(_) => self.owned.first().map(|v| v.as_slice()),
            _ => None,
        }
    }

    /// Offset of an image's bytes in the walked buffer (`None` if decompressed); the same
    /// as [`Image::offset`] for the images of this unit.
    pub fn offset_of(&self, image: &Image<'_>) -> Option<u64> {
        image.offset.or_else(|| self.unit.offset_of(image.bytes))
    }

    /// The images in discovery order.
    ///
    /// OffloadBinaries nested in an OffloadBinary's images (LLVM 23: an image that is itself
    /// a sequence of OffloadBinaries, `FORMATS.md` §6.8) are opened: after every entry of the
    /// unit's own binaries, which keep their indices `0..n` (the entry holding a nested
    /// binary included, with [`ImageKind::None`]: it is no code of its own), come the images
    /// of the nested binaries, numbered on from `n` in walk order: outer entry by outer
    /// entry, depth first, as LLVM 23's `llvm-offload-binary` extracts them. Only leaves
    /// are listed (a binary nested in a nested binary is opened in its place). So the
    /// indices that prune and registration use for the outer entries do not move; a nested
    /// binary named by several entries is listed once, under the first (`OpenUnit::nested`,
    /// with feature `tools`, gives each nested image's outer entry and path).
    pub fn images(&self) -> Images<'_> {
        let limits = &self.options.limits;
        let state = match &self.unit.content {
            UnitContent::Bundle(b) => State::Bundle(b.entries()),
            UnitContent::Compressed(_) => match self.owned.first() {
                Some(d) if bundle::is_bundle(d) => Bundle::parse(d, limits)
                    .map(|b| State::Bundle(b.entries()))
                    .unwrap_or(State::Done),
                Some(d) => TextBundle::parse(d, limits)
                    .map(|t| State::Text(t.entries()))
                    .unwrap_or(State::Done),
                None => State::Done,
            },
            UnitContent::Text(t) => State::Text(t.entries()),
            UnitContent::OffloadBinaries(seq) => State::Binaries {
                binaries: seq.iter(),
                current: None,
                owned: self.owned.iter(),
                nested: NestedWalk::new(seq, &self.owned, *limits),
            },
            UnitContent::ObjectBundle(o) => State::Object(o.sections()),
            UnitContent::DeviceElf(d) => State::Elf(Some(d)),
            UnitContent::Damaged(_) => State::Done,
            UnitContent::Kpack(k) => State::Kpack {
                archive: k,
                entries: k.entries(),
                base: self.unit.location.offset,
            },
            UnitContent::NvFatbin(f) => State::Fatbin {
                entries: f.entries(),
                base: self
                    .unit
                    .offset_of(f.bytes())
                    .unwrap_or(self.unit.location.offset),
            },
        };
        Images {
            index: 0,
            state,
            file: self.unit.file,
            ids: Default::default(),
        }
    }
}

impl OpenUnit<'_> {
    /// The bytes this unit's opening decompressed, in the order of its containers: a
    /// compressed bundle's content, or each compressed OffloadBinary of a sequence
    /// inflated (header rebuilt), in walk order (for prune, which rewrites with `write`).
    #[cfg(feature = "write")]
    pub(crate) fn inflated(&self) -> &[Vec<u8>] {
        &self.owned
    }

    tools_pub! {
        /// The images of OffloadBinaries nested in this unit's entries, as
        /// [`OpenUnit::images`] numbers them: (image index, index of the outer entry whose
        /// image holds the nested binary, the image's path below that entry: one index per
        /// level, as `llvm-objdump --offloading` prints `[0.1.0]` without its first
        /// number). Empty for every other unit.
        pub fn nested(&self) -> Vec<(usize, usize, crate::offload_binary::NestedPath)> {
            let UnitContent::OffloadBinaries(seq) = &self.unit.content else {
                return Vec::new();
            };
            // The unit's own entries, compressed binaries' from their inflated bytes.
            let mut entries = NestedWalk::new(seq, &self.owned, self.options.limits);
            let mut outer = 0usize;
            while entries.next_outer(true).is_some() {
                outer = outer.saturating_add(1);
            }
            NestedWalk::new(seq, &self.owned, self.options.limits)
                .enumerate()
                .map(|(k, (parent, leaf))| (outer.saturating_add(k), parent, leaf.path))
                .collect()
        }
    }
}

/// Checks the OffloadBinaries nested in `binary`'s images as [`OpenUnit::images`] will
/// list them ([`offload_binary::nested_entries`]): each must read, and the images of all
/// nested binaries of the unit, counted in `count`, stay under [`Limits::max_entries`]. A
/// nested binary already checked (`seen`: the same bytes, named by another entry) is
/// checked and counted once, as it is listed once. Offsets are from the start of `binary`.
fn check_nested(
    binary: &OffloadBinary<'_>,
    limits: &crate::options::Limits,
    count: &mut u64,
    seen: &mut alloc::collections::BTreeSet<(usize, usize)>,
) -> Result<()> {
    if !binary.may_nest() {
        // The sequence's parse saw no image that is an OffloadBinary.
        return Ok(());
    }
    for e in binary.entries() {
        if !offload_binary::is_offload_binary(e.image)
            || !seen.insert((e.image.as_ptr() as usize, e.image.len()))
        {
            continue;
        }
        let leaves = offload_binary::nested_entries(e.image, limits)
            .map_err(|err| err.rebase(e.image_offset))?;
        *count = count.saturating_add(u64_of(leaves.len()));
        if *count > limits.max_entries {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                e.image_offset,
                "number of nested OffloadBinary images exceeds the limit",
            ));
        }
    }
    Ok(())
}

/// The images of the OffloadBinaries nested in the entries of a unit's sequence: (index of
/// the outer entry, the nested image), outer entry by outer entry, depth first. A nested
/// binary that several entries name (the same bytes) is walked once, under the first.
/// [`Unit::open`] checked every nested binary; one that does not read is passed over here.
#[derive(Clone, Debug)]
struct NestedWalk<'a> {
    binaries: OffloadBinaryIter<'a>,
    owned: core::slice::Iter<'a, Vec<u8>>,
    current: Option<OffloadBinaryEntries<'a>>,
    /// Index of the next outer entry.
    outer: usize,
    pending: alloc::vec::IntoIter<offload_binary::NestedEntry<'a>>,
    pending_outer: usize,
    /// (address, length) of the nested binaries walked.
    seen: alloc::collections::BTreeSet<(usize, usize)>,
    limits: crate::options::Limits,
}

impl<'a> NestedWalk<'a> {
    fn new(
        seq: &OffloadBinaries<'a>,
        owned: &'a [Vec<u8>],
        limits: crate::options::Limits,
    ) -> Self {
        NestedWalk {
            binaries: seq.iter(),
            owned: owned.iter(),
            current: None,
            outer: 0,
            pending: Vec::new().into_iter(),
            pending_outer: 0,
            seen: alloc::collections::BTreeSet::new(),
            limits,
        }
    }

    /// The next outer entry: (its index, its image). Unless `all`, the entries of a binary
    /// whose parse saw no image that is an OffloadBinary are counted, not read.
    fn next_outer(&mut self, all: bool) -> Option<(usize, &'a [u8])> {
        loop {
            if let Some(e) = self.current.as_mut().and_then(|c| c.next()) {
                let i = self.outer;
                self.outer = self.outer.saturating_add(1);
                return Some((i, e.image));
            }
            let (_, b) = self.binaries.next()?;
            let b = if b.is_compressed() {
                let inflated = self.owned.next()?;
                OffloadBinary::parse(inflated, &crate::options::Limits::UNLIMITED).ok()
            } else {
                Some(b)
            };
            self.current = match b {
                Some(b) if !all && !b.may_nest() => {
                    let n = usize::try_from(b.entry_count()).unwrap_or(usize::MAX);
                    self.outer = self.outer.saturating_add(n);
                    None
                }
                b => b.map(|b| b.entries()),
            };
        }
    }
}

impl<'a> Iterator for NestedWalk<'a> {
    type Item = (usize, offload_binary::NestedEntry<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(leaf) = self.pending.next() {
                return Some((self.pending_outer, leaf));
            }
            let (i, image) = self.next_outer(false)?;
            if !offload_binary::is_offload_binary(image)
                || !self.seen.insert((image.as_ptr() as usize, image.len()))
            {
                continue;
            }
            if let Ok(leaves) = offload_binary::nested_entries(image, &self.limits) {
                self.pending = leaves.into_iter();
                self.pending_outer = i;
            }
        }
    }
}

/// Iterator over the images of an [`OpenUnit`], in discovery order.
#[derive(Clone, Debug)]
pub struct Images<'a> {
    index: usize,
    state: State<'a>,
    file: &'a [u8],
    /// Splits the entry IDs, reusing the last split for the next ID with the same kind and
    /// triple.
    ids: crate::entry_id::IdSplitter<'a>,
}

#[derive(Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per `Images` iterator, never moved per image; boxing the OffloadBinary \
              walk would allocate in a walk that allocates nothing"
)]
enum State<'a> {
    Bundle(BundleEntries<'a>),
    Text(TextEntries<'a>),
    Binaries {
        binaries: OffloadBinaryIter<'a>,
        current: Option<OffloadBinaryEntries<'a>>,
        owned: core::slice::Iter<'a, Vec<u8>>,
        /// The images of OffloadBinaries nested in the entries' images, listed after every
        /// entry of the sequence (`FORMATS.md` §6.8).
        nested: NestedWalk<'a>,
    },
    Object(ObjectSections<'a>),
    Elf(Option<&'a [u8]>),
    Fatbin {
        entries: FatbinEntries<'a>,
        /// Offset of the fatbinary in the walked buffer.
        base: u64,
    },
    Kpack {
        archive: &'a KpackArchive<'a>,
        entries: core::slice::Iter<'a, KpackEntry<'a>>,
        /// Offset of the archive in the walked buffer.
        base: u64,
    },
    Done,
}

impl<'a> Iterator for Images<'a> {
    type Item = Image<'a>;

    fn next(&mut self) -> Option<Image<'a>> {
        let i = self.index;
        // The common case on its own: an entry of a binary bundle, its image built where it
        // is returned rather than moved there.
        if let State::Bundle(it) = &mut self.state {
            let e = it.next()?;
            self.index = i.saturating_add(1);
            let offset = bytes::offset_in(self.file, e.data);
            return Some(Image::from_split_id(
                i,
                Format::Bundle,
                e.id,
                e.data,
                offset,
                &mut self.ids,
            ));
        }
        // And an entry of the OffloadBinary being walked.
        if let State::Binaries {
            current: Some(entries),
            ..
        } = &mut self.state
        {
            if let Some(e) = entries.next() {
                self.index = i.saturating_add(1);
                let offset = bytes::offset_in(self.file, e.image);
                return Some(Image::from_offload_entry_at(
                    i,
                    &e,
                    listed_kind(&e),
                    offset,
                ));
            }
        }
        let image = match &mut self.state {
            // Above.
            State::Bundle(_) => None,
            State::Text(it) => it.next().map(|e| {
                Image::from_split_id(i, Format::TextBundle, e.id, e.data, None, &mut self.ids)
            }),
            State::Binaries {
                binaries,
                current,
                owned,
                nested,
            } => loop {
                if let Some(e) = current.as_mut().and_then(|c| c.next()) {
                    break Some(Image::from_offload_entry_at(i, &e, listed_kind(&e), None));
                }
                let Some((_, b)) = binaries.next() else {
                    break nested
                        .next()
                        .map(|(_, leaf)| Image::from_offload_entry(i, &leaf.entry));
                };
                *current = if b.is_compressed() {
                    let inflated = owned.next()?;
                    OffloadBinary::parse(inflated, &crate::options::Limits::UNLIMITED)
                        .ok()
                        .map(|b| b.entries())
                } else {
                    Some(b.entries())
                };
            },
            State::Object(it) => it
                .next()
                .map(|(id, data)| {
                    Image::from_split_id(i, Format::Bundle, id, data, None, &mut self.ids)
                }),
            State::Elf(e) => e.take().map(|d| Image::from_elf(i, d)),
            State::Fatbin { entries, base } => entries.next().map(|e| match e.image() {
                Some(bytes) => Image::from_fatbin_entry(i, &e, bytes),
                None => {
                    let entry_at = base.saturating_add(e.offset);
                    let encoded = Encoded {
                        codec: e.codec.unwrap_or(Codec::Zstd),
                        // `Fatbin::parse` checked the compressed size against the payload.
                        stream: e.stream().unwrap_or_default(),
                        size: e.uncompressed_size,
                        stream_at: entry_at.saturating_add(u64::from(e.header_size)),
                        size_field: entry_at.saturating_add(0x38),
                        entry_kind: Some(e.kind),
                    };
                    Image::from_encoded_fatbin_entry(i, &e, encoded)
                }
            }),
            State::Kpack {
                archive,
                entries,
                base,
            } => entries.next().map(|e| match archive.stored(e) {
                Ok(Stored::Zstd { frame, offset }) => {
                    let encoded = Encoded {
                        codec: Codec::Zstd,
                        stream: frame,
                        size: e.original_size,
                        stream_at: base.saturating_add(offset),
                        size_field: base.saturating_add(e.original_size_at),
                        entry_kind: None,
                    };
                    let mut image = Image::from_kpack_entry(i, e, &[], Some(encoded));
                    // The TOC files every entry as a code object: its first block tells.
                    if let Some(head) = crate::kpack::sniff::zstd_entry_head(frame) {
                        image.image_kind = ImageKind::sniff(&head);
                    }
                    image
                }
                Ok(Stored::Plain(bytes)) => Image::from_kpack_entry(i, e, bytes, None),
                // `OpenUnit` checked every entry's storage.
                Err(_) => Image::from_kpack_entry(i, e, &[], None),
            }),
            State::Done => None,
        };
        let mut image = image?;
        self.index = self.index.saturating_add(1);
        if image.encoded.is_none() {
            image.offset = bytes::offset_in(self.file, image.bytes);
        }
        Some(image)
    }
}

/// The image kind [`OpenUnit::images`] lists an OffloadBinary entry with: an image that is
/// itself an OffloadBinary is no code of its own kind (its images are listed after the
/// sequence's entries).
#[inline]
fn listed_kind(e: &offload_binary::OffloadBinaryEntry<'_>) -> ImageKind {
    if offload_binary::is_offload_binary(e.image) {
        ImageKind::None
    } else {
        ImageKind::from_code(e.image_kind)
    }
}

/// The `__CLANG_OFFLOAD_BUNDLE__<id>` sections of a bundled host object (`FORMATS.md` §2.5).
#[derive(Clone, Copy, Debug)]
pub struct ObjectBundle<'data> {
    elf: &'data [u8],
}

impl<'data> ObjectBundle<'data> {
    /// The host file (ELF, or COFF object) holding the sections.
    pub fn elf(&self) -> &'data [u8] {
        self.elf
    }

    /// The bundle sections in section order: (entry ID, section contents).
    pub fn sections(&self) -> ObjectSections<'data> {
        ObjectSections {
            tables: Sections::parse(self.elf).and_then(|s| s.ok()),
            index: 0,
        }
    }
}

/// Iterator over the bundle sections of an [`ObjectBundle`].
#[derive(Clone, Debug)]
pub struct ObjectSections<'data> {
    tables: Option<Sections<'data>>,
    index: usize,
}

impl<'data> Iterator for ObjectSections<'data> {
    type Item = (&'data str, &'data [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let tables = self.tables?;
        while self.index < tables.len() {
            let i = self.index;
            self.index = self.index.saturating_add(1);
            if let Ok(section) = tables.section(i) {
                if let SectionRole::ObjectBundle(id) = section.role() {
                    if let Ok(id) = core::str::from_utf8(id) {
                        return Some((id, section.data));
                    }
                }
            }
        }
        None
    }
}

/// The units of `data` in discovery order, as an allocation-free iterator (see [`Units`]).
///
/// `data` may be any of the formats of `CLI.md`: a bundle, text bundle, `CCOB`, one or
/// more OffloadBinaries, a bare device ELF, a host ELF, PE image (DLL, EXE, PYD) or COFF
/// object with offload sections (`PE.md`), or an `ar` archive of any of these. Unrecognised bytes at the top level are an error
/// ([`ErrorKind::BadMagic`]); inside archives, members that hold no offload container are
/// skipped.
///
/// OffloadBinaries nested in an OffloadBinary's images (LLVM 23) are not units of their
/// own: their images are listed by [`OpenUnit::images`] after the unit's own entries,
/// whose indices stay `0..n` (`FORMATS.md` §6.8).
///
/// One broken container hides no other. A container that does not read among others (a
/// `.hip_fatbin` or `.nv_fatbin` section, a file of containers) is a unit of its own,
/// [`UnitContent::Damaged`], and the walk resumes at the next container ([`Damage`] says
/// where). Errors outside any container (a section table entry, an archive member, a
/// member that does not read) are `Err` items, after which the walk goes on with the next
/// section or member; an error that leaves nowhere to go on (the top level, an archive
/// member table) ends it.
///
/// ```
/// use offload_image::{units, ReadOptions};
///
/// let data = include_bytes!("../tests/data/corpus/bundles/hip_6arch.bundle");
/// let options = ReadOptions::default();
/// for unit in units(data, &options) {
///     let unit = unit?;
///     let open = unit.open(&options)?;
///     assert_eq!(open.images().count(), 7); // a host entry and six code objects
/// }
/// # Ok::<(), offload_image::Error>(())
/// ```
pub fn units<'data>(data: &'data [u8], options: &ReadOptions) -> Units<'data> {
    Units {
        file: data,
        options: *options,
        start: Some(data),
        stack: heapless::Vec::new(),
        path: heapless::Vec::new(),
        done: false,
        wrapper_starts: None,
    }
}

/// Calls `f` with every unit of `data` in discovery order; an error from the walk or from
/// `f` stops it and is returned. A thin wrapper over [`units`].
pub fn for_each_unit<'data, F>(data: &'data [u8], options: &ReadOptions, mut f: F) -> Result<()>
where
    F: FnMut(Unit<'data>) -> Result<()>,
{
    units(data, options).try_for_each(|u| f(u?))
}

type Path<'data> = heapless::Vec<PathElem<'data>, MAX_DEPTH>;

/// True if `data` starts with the magic of a container that is laid out back to back
/// with others (bundle, `CCOB`, OffloadBinary).
fn starts_blob(data: &[u8]) -> bool {
    bundle::is_bundle(data)
        || ccob::is_compressed_bundle(data)
        || offload_binary::is_offload_binary(data)
}

/// True if `data` starts with an NVIDIA fatbinary (the containers of `.nv_fatbin`).
fn starts_fatbin(data: &[u8]) -> bool {
    nvfatbin::is_fatbin(data)
}

/// True if `data` starts with any container that a file may hold back to back with
/// others: a bundle, `CCOB`, OffloadBinary or NVIDIA fatbinary (each ends where its own
/// header says).
fn starts_any(data: &[u8]) -> bool {
    starts_blob(data) || starts_fatbin(data)
}

/// The first offset at or after `from` where `starts` holds.
fn next_start(data: &[u8], from: usize, starts: fn(&[u8]) -> bool) -> Option<usize> {
    let tail = data.get(from..)?;
    (0..tail.len())
        .find(|&i| tail.get(i..).is_some_and(starts))
        .and_then(|i| from.checked_add(i))
}

/// Where the next container of a back-to-back walk starts: the first non-zero byte at or
/// after `pos` — `(offset in data, file offset, the bytes from there)` — or `None` at the
/// end. Refuses more containers than the limit allows.
fn next_in_walk<'data>(
    data: &'data [u8],
    pos: usize,
    index: usize,
    base: u64,
    limits: &crate::options::Limits,
) -> Result<Option<(usize, u64, &'data [u8])>> {
    let Some(start) = bytes::skip_zeros(data, pos) else {
        return Ok(None);
    };
    let at = base.saturating_add(u64_of(start));
    if u64_of(index) >= limits.max_entries {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            at,
            "number of containers in one section exceeds the limit",
        ));
    }
    Ok(Some((start, at, data.get(start..).unwrap_or(&[]))))
}

/// `FORMATS.md` §2.4, after a container that ends at `*pos`: zero padding, then the next
/// container. Other bytes are skipped up to the next container start at or after the end
/// (never searched for inside the payloads the container describes): `*pos` moves there
/// and the skipped file range is returned. In strict mode nothing is skipped (the next
/// step refuses the bytes).
///
/// Where a registration wrapper of the host file points at those bytes, they are a
/// damaged container, not bytes between containers: nothing is skipped, and the next step
/// reports the damage ([`Damage`]).
fn skip_after<'data>(
    data: &'data [u8],
    pos: &mut usize,
    base: u64,
    options: &ReadOptions,
    starts: fn(&[u8]) -> bool,
    resume: &mut Resume<'_, 'data>,
) -> Option<core::ops::Range<u64>> {
    if options.strict {
        return None;
    }
    let next = bytes::skip_zeros(data, *pos)?;
    if starts(data.get(next..).unwrap_or(&[])) {
        return None;
    }
    let at = base.saturating_add(u64_of(next));
    if resume.wrapper_start(at.saturating_sub(1), at.saturating_add(1)) == Some(at) {
        return None;
    }
    let resume = next_start(data, next, starts).unwrap_or(data.len());
    *pos = resume;
    Some(base.saturating_add(u64_of(next))..base.saturating_add(u64_of(resume)))
}

/// What the walk needs to resume after a damaged container: the host file it is in, and
/// the cache of that file's wrapper targets.
struct Resume<'a, 'data> {
    /// The host file and its offset in the walked buffer.
    host: Option<(&'data [u8], u64)>,
    cache: &'a mut Option<(u64, Vec<u64>)>,
}

impl<'data> Resume<'_, 'data> {
    /// Where the walk of `data` (at file offset `base`) resumes after the damaged
    /// container at `start` ([`Damage`]): always after `start`, at most `data.len()`.
    fn after(
        &mut self,
        data: &'data [u8],
        start: usize,
        base: u64,
        starts: fn(&[u8]) -> bool,
    ) -> usize {
        let at = base.saturating_add(u64_of(start));
        let end = base.saturating_add(u64_of(data.len()));
        if let Some(w) = self.wrapper_start(at, end) {
            if let Ok(w) = usize::try_from(w.saturating_sub(base)) {
                return w;
            }
        }
        let from = described_end(data.get(start..).unwrap_or_default())
            .and_then(|len| usize::try_from(len).ok())
            .and_then(|len| start.checked_add(len))
            .filter(|e| *e > start && *e <= data.len())
            .unwrap_or(start.saturating_add(1));
        next_start(data, from, starts).unwrap_or(data.len())
    }

    /// The first offset after `at` and before `end` (offsets in the walked buffer) that a
    /// registration wrapper of the host file points at.
    fn wrapper_start(&mut self, at: u64, end: u64) -> Option<u64> {
        let (host, host_base) = self.host?;
        if self.cache.as_ref().is_none_or(|(k, _)| *k != host_base) {
            let mut starts = Vec::new();
            if let Ok(file) = crate::host::HostFile::parse(host) {
                for w in file.fat_binary_wrappers() {
                    let target = w
                        .address
                        .checked_add(8)
                        .and_then(|p| file.pointer_at(p).ok())
                        .and_then(|p| file.file_offset(p));
                    starts.extend(target.map(|t| t.saturating_add(host_base)));
                }
            }
            starts.sort_unstable();
            starts.dedup();
            *self.cache = Some((host_base, starts));
        }
        let (_, starts) = self.cache.as_ref()?;
        let from = starts.partition_point(|s| *s <= at);
        starts.get(from).copied().filter(|s| *s < end)
    }
}

/// The length a container's header still describes when the container does not read, as
/// each format's reader answers it: a `CCOB`'s total size (versions 2 and 3,
/// [`ccob::described_len`]), an OffloadBinary's size ([`offload_binary::described_len`]), a fatbinary's header plus payload
/// size ([`nvfatbin::described_len`]), a bundle's furthest entry end
/// ([`bundle::described_len`]). `None` when the header says nothing readable.
fn described_end(blob: &[u8]) -> Option<u64> {
    if ccob::is_compressed_bundle(blob) {
        ccob::described_len(blob)
    } else if offload_binary::is_offload_binary(blob) {
        offload_binary::described_len(blob)
    } else if nvfatbin::is_fatbin(blob) {
        nvfatbin::described_len(blob)
    } else if bundle::is_bundle(blob) {
        bundle::described_len(blob)
    } else {
        None
    }
}

/// Most frames of the walk at once: one per path element, plus the innermost walk.
const MAX_FRAMES: usize = MAX_DEPTH + 1;

/// Iterator over the units of a buffer ([`units`]): a depth-first walk of archives, ELF
/// sections and back-to-back containers with an explicit, bounded stack. It allocates
/// nothing (unless a container is damaged: then it reads the host file's wrappers to know
/// where to resume); every unit borrows the buffer.
#[derive(Debug)]
pub struct Units<'data> {
    file: &'data [u8],
    options: ReadOptions,
    start: Option<&'data [u8]>,
    stack: heapless::Vec<Frame<'data>, MAX_FRAMES>,
    path: Path<'data>,
    done: bool,
    /// The offsets (in the walked buffer) the registration wrappers of a host file point
    /// at: `(offset of the host file, sorted starts)`. Read only when a container in it is
    /// damaged.
    wrapper_starts: Option<(u64, Vec<u64>)>,
}

/// One container being walked, and the length of the path at which it was entered.
#[derive(Debug)]
enum Frame<'data> {
    Archive {
        data: &'data [u8],
        members: object::read::archive::ArchiveMemberIterator<'data>,
        path_len: usize,
    },
    Host {
        data: &'data [u8],
        sections: Sections<'data>,
        next: usize,
        walked: usize,
        object_bundle_seen: bool,
        path_len: usize,
    },
    Blobs {
        data: &'data [u8],
        cursor: Cursor,
        /// OffloadBinaries just handed out whose `fatbin` images are still to be walked.
        nested: Option<NestedFatbins<'data>>,
        /// A file or archive member rather than a section: NVIDIA fatbinaries are
        /// containers of this walk too (a bundle after a bare fatbinary is found).
        any: bool,
        path_len: usize,
    },
    Fatbins {
        data: &'data [u8],
        cursor: Cursor,
        path_len: usize,
    },
}

/// What advancing the innermost frame asks of the walk.
enum Step<'data> {
    /// A unit found: its offset in the file, its index in its container, its content, and
    /// the bytes skipped after it.
    Unit(
        u64,
        usize,
        UnitContent<'data>,
        Option<core::ops::Range<u64>>,
    ),
    /// Visit `data` (an archive member) under the path element.
    Visit(&'data [u8], PathElem<'data>, u64),
    /// Walk the blobs of an offload section under the path element.
    Blobs(&'data [u8], PathElem<'data>, u64),
    /// Walk NVIDIA fatbinaries: of a section under the path element, or (no element) of an
    /// OffloadBinary image.
    Fatbins(&'data [u8], Option<PathElem<'data>>, u64),
    /// The frame is exhausted.
    Pop,
}

impl<'data> Iterator for Units<'data> {
    type Item = Result<Unit<'data>>;

    fn next(&mut self) -> Option<Result<Unit<'data>>> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(unit)) => Some(Ok(unit)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                // The frames below the failure keep their place: go on with them.
                if self.stack.is_empty() {
                    self.done = true;
                }
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for Units<'_> {}

impl<'data> Units<'data> {
    fn base(&self, data: &[u8]) -> u64 {
        bytes::offset_in(self.file, data).unwrap_or(0)
    }

    fn unit(&self, at: &'data [u8], index: usize, content: UnitContent<'data>) -> Unit<'data> {
        Unit {
            location: Location {
                path: self.path.clone(),
                offset: self.base(at),
            },
            index,
            content,
            skipped: None,
            file: self.file,
        }
    }

    fn nested_too_deep(at: u64) -> Error {
        Error::new(
            ErrorKind::LimitExceeded,
            at,
            "containers are nested deeper than the limit",
        )
    }

    /// Sets the path to its first `len` elements plus `elem`.
    fn enter(&mut self, len: usize, elem: PathElem<'data>, at: u64) -> Result<()> {
        self.path.truncate(len);
        if self.path.len() >= self.options.limits.max_depth || self.path.push(elem).is_err() {
            return Err(Self::nested_too_deep(at));
        }
        Ok(())
    }

    fn push(&mut self, frame: Frame<'data>, at: u64) -> Result<()> {
        self.stack
            .push(frame)
            .map_err(|_| Self::nested_too_deep(at))
    }

    /// The next unit of the walk: the start buffer's, then the innermost frame's, popping
    /// frames as they end; `None` when the walk is over.
    fn step(&mut self) -> Result<Option<Unit<'data>>> {
        if let Some(data) = self.start.take() {
            if let Some(unit) = self.visit(data, true)? {
                return Ok(Some(unit));
            }
        }
        while let Some(action) = self.advance_innermost()? {
            if let Some(unit) = self.take_step(action)? {
                return Ok(Some(unit));
            }
        }
        Ok(None)
    }

    /// Advances the innermost frame ([`Units::advance`]); `None` when no frame is left. A
    /// frame that fails is dropped, but for a host file's (which has moved on to its next
    /// section already).
    fn advance_innermost(&mut self) -> Result<Option<Step<'data>>> {
        // The host file the innermost walk is in, for its wrappers.
        let host = self.stack.iter().rev().find_map(|f| match f {
            Frame::Host { data, .. } => Some((*data, self.base(data))),
            _ => None,
        });
        let Some(frame) = self.stack.last_mut() else {
            return Ok(None);
        };
        let mut ctx = Resume {
            host,
            cache: &mut self.wrapper_starts,
        };
        match Self::advance(frame, self.file, &self.options, &mut ctx) {
            Ok(step) => Ok(Some(step)),
            Err(e) => {
                // A member table that does not read, too many containers in one section,
                // or (strict) bytes that are not a container leave no place to go on in
                // that frame; a host frame has moved on to its next section already.
                if !matches!(frame, Frame::Host { .. }) {
                    self.stack.pop();
                }
                Err(e)
            }
        }
    }

    /// Does what advancing a frame asked: hands out a unit, enters a member or a section
    /// (a new frame, or a unit found at once), or pops the frame.
    fn take_step(&mut self, action: Step<'data>) -> Result<Option<Unit<'data>>> {
        let len = self.frame_path_len();
        match action {
            Step::Unit(offset, index, content, skipped) => {
                self.path.truncate(len);
                return Ok(Some(Unit {
                    location: Location {
                        path: self.path.clone(),
                        offset,
                    },
                    index,
                    content,
                    skipped,
                    file: self.file,
                }));
            }
            Step::Visit(data, elem, at) => {
                self.enter(len, elem, at)?;
                return self.visit(data, false);
            }
            Step::Blobs(data, elem, at) => {
                self.enter(len, elem, at)?;
                let path_len = self.path.len();
                let frame = Frame::Blobs {
                    data,
                    cursor: Cursor::default(),
                    nested: None,
                    any: false,
                    path_len,
                };
                self.push(frame, at)?;
            }
            Step::Fatbins(data, elem, at) => {
                match elem {
                    Some(elem) => self.enter(len, elem, at)?,
                    None => self.path.truncate(len),
                }
                let path_len = self.path.len();
                let frame = Frame::Fatbins {
                    data,
                    cursor: Cursor::default(),
                    path_len,
                };
                self.push(frame, at)?;
            }
            Step::Pop => {
                self.stack.pop();
            }
        }
        Ok(None)
    }

    fn frame_path_len(&self) -> usize {
        match self.stack.last() {
            Some(
                Frame::Archive { path_len, .. }
                | Frame::Host { path_len, .. }
                | Frame::Blobs { path_len, .. }
                | Frame::Fatbins { path_len, .. },
            ) => *path_len,
            None => 0,
        }
    }

    /// Starts walking `data` at the current path: a unit found at once, or a new frame.
    fn visit(&mut self, data: &'data [u8], top: bool) -> Result<Option<Unit<'data>>> {
        let base = self.base(data);
        let depth = self
            .path
            .iter()
            .filter(|p| matches!(p, PathElem::Member(_)))
            .count();
        if depth > self.options.limits.max_depth {
            return Err(Self::nested_too_deep(base));
        }
        let path_len = self.path.len();
        if data.starts_with(AR_MAGIC) || data.starts_with(AR_THIN_MAGIC) {
            self.visit_archive(data, top, base)
        } else if data.starts_with(ELF_MAGIC) {
            self.visit_elf(data, base)
        } else if pe::is_pe_or_coff(data) {
            // A PE image or COFF object: its sections are walked as an ELF file's are.
            let sections = PeSections::parse(data).map_err(|e| e.rebase(base))?;
            self.push_host(data, Sections::Pe(sections), base)
        } else if starts_any(data) {
            // Containers back to back in a file: bundles, `CCOB`s, OffloadBinaries and
            // NVIDIA fatbinaries alike, each ending where its header says.
            let frame = Frame::Blobs {
                data,
                cursor: Cursor::default(),
                nested: None,
                any: true,
                path_len,
            };
            self.push(frame, base)?;
            Ok(None)
        } else if data.starts_with(KPACK_MAGIC) {
            let k = KpackArchive::parse(data, &self.options.limits).map_err(|e| e.rebase(base))?;
            Ok(Some(self.unit(data, 0, UnitContent::Kpack(k))))
        } else if text::detect(data).is_some() {
            let t = TextBundle::parse(data, &self.options.limits).map_err(|e| e.rebase(base))?;
            Ok(Some(self.unit(data, 0, UnitContent::Text(t))))
        } else if top {
            Err(not_a_container(data, base))
        } else {
            Ok(None)
        }
    }

    /// Starts walking the `ar` archive `data` (at file offset `base`): a new frame. A thin
    /// archive stores no members: an error for the file walked (`top`), else nothing.
    fn visit_archive(
        &mut self,
        data: &'data [u8],
        top: bool,
        base: u64,
    ) -> Result<Option<Unit<'data>>> {
        let archive = ArchiveFile::parse(data).map_err(|_| {
            Error::new(
                ErrorKind::BadContainer,
                base,
                "archive header or member table is malformed",
            )
        })?;
        if archive.is_thin() {
            return if top {
                Err(Error::new(
                    ErrorKind::Unsupported,
                    base,
                    "thin archive: its members are not stored in it",
                ))
            } else {
                Ok(None)
            };
        }
        let frame = Frame::Archive {
            data,
            members: archive.members(),
            path_len: self.path.len(),
        };
        self.push(frame, base)?;
        Ok(None)
    }

    /// Starts walking the ELF file `data` (at file offset `base`): a device ELF is one
    /// unit, a host file (or a bundled object) a new frame over its sections.
    fn visit_elf(&mut self, data: &'data [u8], base: u64) -> Result<Option<Unit<'data>>> {
        let device = matches!(elf_machine(data), Some(EM_AMDGPU | EM_CUDA));
        // A device ELF is one image, unless `clang-offload-bundler -type=o` made it the
        // "host" of a bundled object: then its `__CLANG_OFFLOAD_BUNDLE__` sections are
        // the images, as LLVM reads it (a device ELF whose section table does not read
        // is still one image: the loader reads its program headers, not its sections).
        let sections = match ElfSections::parse(data) {
            Ok(t) if device && !t.has_object_bundle() => {
                return Ok(Some(self.unit(data, 0, UnitContent::DeviceElf(data))));
            }
            Ok(t) => Sections::Elf(t),
            Err(_) if device => {
                return Ok(Some(self.unit(data, 0, UnitContent::DeviceElf(data))));
            }
            Err(e) => return Err(e.rebase(base)),
        };
        self.push_host(data, sections, base)
    }

    /// Pushes the frame that walks the `sections` of the host file `data` (at file offset
    /// `base`).
    fn push_host(
        &mut self,
        data: &'data [u8],
        sections: Sections<'data>,
        base: u64,
    ) -> Result<Option<Unit<'data>>> {
        let frame = Frame::Host {
            data,
            sections,
            next: 0,
            walked: 0,
            object_bundle_seen: false,
            path_len: self.path.len(),
        };
        self.push(frame, base)?;
        Ok(None)
    }

    /// Advances the innermost frame by one step.
    fn advance(
        frame: &mut Frame<'data>,
        file: &'data [u8],
        options: &ReadOptions,
        resume: &mut Resume<'_, 'data>,
    ) -> Result<Step<'data>> {
        match frame {
            Frame::Archive { data, members, .. } => Self::next_member(file, data, members),
            Frame::Host {
                data,
                sections,
                next,
                walked,
                object_bundle_seen,
                ..
            } => {
                let host = HostWalk {
                    data,
                    sections,
                    next,
                    walked,
                    object_bundle_seen,
                };
                Self::next_section(file, host)
            }
            Frame::Blobs {
                data,
                cursor,
                nested,
                any,
                ..
            } => {
                // The fatbinaries inside OffloadBinaries (image kind `fatbin`) are units
                // of their own, after the OffloadBinaries.
                if let Some(step) = next_nested_fatbin(file, nested) {
                    return Ok(step);
                }
                let starts: fn(&[u8]) -> bool = if *any { starts_any } else { starts_blob };
                let walked = Walked::new(file, data, starts);
                Self::next_blob(&walked, cursor, nested, *any, options, resume)
            }
            Frame::Fatbins { data, cursor, .. } => {
                let walked = Walked::new(file, data, starts_fatbin);
                Self::next_fatbin(&walked, cursor, options, resume)
            }
        }
    }

    /// The next member of an archive at `data` (in `file`), to visit; `Pop` after the last.
    fn next_member(
        file: &'data [u8],
        data: &'data [u8],
        members: &mut object::read::archive::ArchiveMemberIterator<'data>,
    ) -> Result<Step<'data>> {
        let base = bytes::offset_in(file, data).unwrap_or(0);
        let Some(member) = members.next() else {
            return Ok(Step::Pop);
        };
        let member = member.map_err(|_| {
            Error::new(
                ErrorKind::BadContainer,
                base,
                "archive header or member table is malformed",
            )
        })?;
        let (offset, _) = member.file_range();
        let at = base.saturating_add(offset);
        let member_data = member.data(data).map_err(|_| {
            Error::new(
                ErrorKind::BadContainer,
                at,
                "archive member data lies outside the archive",
            )
        })?;
        Ok(Step::Visit(
            member_data,
            PathElem::Member(member.name()),
            at,
        ))
    }

    /// The next section of a host file that holds containers, to walk; the file itself as
    /// one unit at its first object-bundle section; `Pop` after the last section.
    fn next_section(file: &'data [u8], host: HostWalk<'_, 'data>) -> Result<Step<'data>> {
        let base_of = |d: &[u8]| bytes::offset_in(file, d).unwrap_or(0);
        let data = host.data;
        let base = base_of(data);
        while *host.next < host.sections.len() {
            let i = *host.next;
            *host.next = host.next.saturating_add(1);
            let section = host.sections.section(i).map_err(|e| e.rebase(base))?;
            let role = section.role();
            if let SectionRole::ObjectBundle(_) = role {
                if !*host.object_bundle_seen {
                    *host.object_bundle_seen = true;
                    return Ok(Step::Unit(
                        base,
                        0,
                        UnitContent::ObjectBundle(ObjectBundle { elf: data }),
                        None,
                    ));
                }
            } else if role.holds_containers() {
                let (name, contents) = (section.name, section.data);
                if contents.is_empty() {
                    continue;
                }
                // Sections that overlap would have their bytes parsed again and again.
                *host.walked = host.walked.saturating_add(contents.len());
                if *host.walked > data.len() {
                    return Err(Error::new(
                        ErrorKind::BadContainer,
                        base,
                        "offload sections overlap (together larger than the file)",
                    ));
                }
                if role.holds_fatbins() {
                    return Ok(Step::Fatbins(
                        contents,
                        Some(PathElem::Section(name)),
                        base_of(contents),
                    ));
                }
                return Ok(Step::Blobs(
                    contents,
                    PathElem::Section(name),
                    base_of(contents),
                ));
            }
        }
        Ok(Step::Pop)
    }

    /// The next container of a back-to-back walk of bundles, `CCOB`s and OffloadBinaries
    /// (and NVIDIA fatbinaries, for a file's walk): a unit, a damaged unit (not strict),
    /// or `Pop` at the end. OffloadBinaries found are kept in `nested`, for the
    /// fatbinaries they hold.
    fn next_blob(
        walked: &Walked<'data>,
        cursor: &mut Cursor,
        nested: &mut Option<NestedFatbins<'data>>,
        any: bool,
        options: &ReadOptions,
        resume: &mut Resume<'_, 'data>,
    ) -> Result<Step<'data>> {
        let limits = &options.limits;
        let Some((start, at, blob)) =
            next_in_walk(walked.data, cursor.pos, cursor.index, walked.base, limits)?
        else {
            return Ok(Step::Pop);
        };
        match parse_blob(blob, at, any, options) {
            Ok((content, len)) => {
                if let UnitContent::OffloadBinaries(s) = content {
                    // Their parse saw whether an entry holds a fatbinary.
                    *nested = s.may_hold_fatbins().then(|| NestedFatbins::new(s));
                }
                Ok(cursor.unit(walked, start, content, len, options, resume))
            }
            Err((error, format)) if !options.strict => {
                Ok(cursor.damaged(walked, start, error, format, resume))
            }
            Err((error, _)) => Err(error),
        }
    }

    /// The next NVIDIA fatbinary of a `.nv_fatbin` section or an OffloadBinary image: a
    /// unit, a damaged unit (not strict), or `Pop` at the end.
    fn next_fatbin(
        walked: &Walked<'data>,
        cursor: &mut Cursor,
        options: &ReadOptions,
        resume: &mut Resume<'_, 'data>,
    ) -> Result<Step<'data>> {
        let limits = &options.limits;
        let Some((start, at, blob)) =
            next_in_walk(walked.data, cursor.pos, cursor.index, walked.base, limits)?
        else {
            return Ok(Step::Pop);
        };
        let parsed = if starts_fatbin(blob) {
            Fatbin::parse(blob, limits).map_err(|e| e.rebase(at))
        } else {
            Err(Error::new(
                ErrorKind::Malformed,
                at,
                "unexpected bytes where the next fatbinary should start",
            ))
        };
        match parsed {
            Ok(f) => {
                let content = UnitContent::NvFatbin(f);
                Ok(cursor.unit(walked, start, content, f.len(), options, resume))
            }
            Err(error) if !options.strict => {
                Ok(cursor.damaged(walked, start, error, Format::NvFatbin, resume))
            }
            Err(error) => Err(error),
        }
    }
}

/// The state of a host file's frame that [`Units::next_section`] moves on.
struct HostWalk<'a, 'data> {
    data: &'data [u8],
    sections: &'a mut Sections<'data>,
    next: &'a mut usize,
    walked: &'a mut usize,
    object_bundle_seen: &'a mut bool,
}

/// The buffer of a back-to-back walk, its offset in the file, and the containers it
/// looks for.
struct Walked<'data> {
    data: &'data [u8],
    base: u64,
    starts: fn(&[u8]) -> bool,
}

impl<'data> Walked<'data> {
    /// The walk of `data`, a part of `file`, for the containers `starts` recognises.
    fn new(file: &'data [u8], data: &'data [u8], starts: fn(&[u8]) -> bool) -> Self {
        Walked {
            data,
            base: bytes::offset_in(file, data).unwrap_or(0),
            starts,
        }
    }

    /// The file offset of `start`, an offset in the walked buffer.
    fn at(&self, start: usize) -> u64 {
        self.base.saturating_add(u64_of(start))
    }
}

/// Where a back-to-back walk stands: the offset of the next container in the walked
/// buffer, and that container's index.
#[derive(Debug, Default)]
struct Cursor {
    pos: usize,
    index: usize,
}

impl Cursor {
    /// The index of the container at the cursor; the cursor moves on to `end`.
    fn take(&mut self, end: usize) -> usize {
        let index = self.index;
        self.index = self.index.saturating_add(1);
        self.pos = end;
        index
    }

    /// The unit of the container at `start` that reads, `len` bytes long; the walk goes
    /// on after it, past the bytes that are skipped there.
    fn unit<'data>(
        &mut self,
        walked: &Walked<'data>,
        start: usize,
        content: UnitContent<'data>,
        len: u64,
        options: &ReadOptions,
        resume: &mut Resume<'_, 'data>,
    ) -> Step<'data> {
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let index = self.take(start.saturating_add(len.max(1)));
        let skipped = skip_after(
            walked.data,
            &mut self.pos,
            walked.base,
            options,
            walked.starts,
            resume,
        );
        Step::Unit(walked.at(start), index, content, skipped)
    }

    /// The unit of the container at `start` that does not read: its bytes up to where
    /// the walk resumes ([`Resume::after`]).
    fn damaged<'data>(
        &mut self,
        walked: &Walked<'data>,
        start: usize,
        error: Error,
        format: Format,
        resume: &mut Resume<'_, 'data>,
    ) -> Step<'data> {
        let end = resume.after(walked.data, start, walked.base, walked.starts);
        let index = self.take(end);
        let damage = Damage {
            error,
            format,
            bytes: walked.data.get(start..end).unwrap_or_default(),
        };
        Step::Unit(walked.at(start), index, UnitContent::Damaged(damage), None)
    }
}

/// The error for a file that holds no container this walk recognises (`data`, at file
/// offset `base`): LLVM bitcode is named as such.
fn not_a_container(data: &[u8], base: u64) -> Error {
    let what = if ImageKind::from_magic(data) == Some(ImageKind::Bitcode) {
        "LLVM bitcode is not an offload container (offloading metadata in bitcode is not read)"
    } else {
        "no offload container recognised (not a bundle, CCOB, OffloadBinary, ELF, PE/COFF, text bundle, kpack or archive)"
    };
    Error::new(ErrorKind::BadMagic, base, what)
}

/// The fatbinaries held by OffloadBinaries just handed out (entries of image kind
/// `fatbin`), still to be walked as units of their own. Each entry is looked at once, and
/// each range walked once: entries may all name one image (issue 43), and a fatbinary
/// whose range overlaps one already walked, or lies between two walked ones, is not walked
/// again (writers lay images out in entry order, so the walked ranges grow at one end; the
/// entries themselves are still listed as the OffloadBinary's images). No allocation: the
/// walked ranges are kept as their hull.
#[derive(Clone, Debug)]
pub(crate) struct NestedFatbins<'data> {
    binaries: OffloadBinaryIter<'data>,
    current: Option<OffloadBinaryEntries<'data>>,
    /// (first address, end address) of the fatbinaries walked so far.
    hull: Option<(usize, usize)>,
}

impl<'data> NestedFatbins<'data> {
    fn new(seq: OffloadBinaries<'data>) -> Self {
        NestedFatbins {
            binaries: seq.iter(),
            current: None,
            hull: None,
        }
    }

    /// The next fatbinary image to walk, if any.
    fn next_image(&mut self) -> Option<&'data [u8]> {
        loop {
            if let Some(entries) = &mut self.current {
                for e in entries.by_ref() {
                    if ImageKind::from_code(e.image_kind) != ImageKind::Fatbinary
                        || !nvfatbin::is_fatbin(e.image)
                    {
                        continue;
                    }
                    let start = e.image.as_ptr() as usize;
                    let end = start.saturating_add(e.image.len());
                    match self.hull {
                        None => self.hull = Some((start, end)),
                        Some((lo, hi)) if end <= lo || start >= hi => {
                            self.hull = Some((lo.min(start), hi.max(end)));
                        }
                        // Walked already, or inside what was walked.
                        Some(_) => continue,
                    }
                    return Some(e.image);
                }
            }
            let (_, binary) = self.binaries.next()?;
            self.current = (!binary.is_compressed()).then(|| binary.entries());
        }
    }
}

/// The next fatbinary held by the OffloadBinaries just handed out (`nested`), to walk;
/// `None` (and `nested` cleared) when they hold no more.
fn next_nested_fatbin<'data>(
    file: &'data [u8],
    nested: &mut Option<NestedFatbins<'data>>,
) -> Option<Step<'data>> {
    match nested.as_mut()?.next_image() {
        Some(image) => {
            let at = bytes::offset_in(file, image).unwrap_or(0);
            Some(Step::Fatbins(image, None, at))
        }
        None => {
            *nested = None;
            None
        }
    }
}

/// Parses the container `blob` at file offset `at` of a back-to-back walk (`any`: NVIDIA
/// fatbinaries too): its content and length, or the error and the format it was read as.
fn parse_blob<'data>(
    blob: &'data [u8],
    at: u64,
    any: bool,
    options: &ReadOptions,
) -> core::result::Result<(UnitContent<'data>, u64), (Error, Format)> {
    let limits = &options.limits;
    if bundle::is_bundle(blob) {
        Bundle::parse(blob, limits)
            .map(|b| (UnitContent::Bundle(b), b.len()))
            .map_err(|e| (e.rebase(at), Format::Bundle))
    } else if ccob::is_compressed_bundle(blob) {
        CompressedBundle::parse(blob)
            .and_then(|c| Ok((UnitContent::Compressed(c), c.len(options)?)))
            .map_err(|e| (e.rebase(at), Format::Bundle))
    } else if offload_binary::is_offload_binary(blob) {
        OffloadBinaries::parse(blob, limits)
            .map(|s| (UnitContent::OffloadBinaries(s), s.len()))
            .map_err(|e| (e.rebase(at), Format::OffloadBinary))
    } else if any && starts_fatbin(blob) {
        Fatbin::parse(blob, limits)
            .map(|f| (UnitContent::NvFatbin(f), f.len()))
            .map_err(|e| (e.rebase(at), Format::NvFatbin))
    } else {
        Err((
            Error::new(
                ErrorKind::Malformed,
                at,
                "unexpected bytes where the next offload container should start",
            ),
            Format::Bundle,
        ))
    }
}
