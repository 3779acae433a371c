//! The output as pieces: input ranges, new bytes, zero fill and rewritten units.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::ops::Range;

use crate::error::{ErrorKind, Result};
use crate::write::WriteError;

use super::plan::{Body, UnitPlan};
use super::{diff, err, len64};

/// New bytes by output offset (in input offsets before holes are cut): patched words
/// and headers.
pub(super) type Patches = BTreeMap<u64, Vec<u8>>;

/// How the output file is put together.
#[derive(Clone, Debug)]
pub(super) enum Piece {
    /// Bytes of the input.
    Copy(Range<u64>),
    /// The rewritten unit number `n` of the plan.
    Unit(usize),
    /// Zero bytes.
    Zeros(u64),
    /// New bytes (headers, patched words).
    Owned(Vec<u8>),
}

/// Pieces that write each unit where it is; with `pad`, each is zero-filled to its old
/// length.
pub(super) fn standalone(data: &[u8], plans: &[UnitPlan<'_>], pad: bool) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut pos = 0u64;
    for (i, p) in plans.iter().enumerate() {
        if p.range.start < pos {
            // Nested or overlapping units cannot happen in a walk; keep the bytes.
            continue;
        }
        if p.range.start > pos {
            pieces.push(Piece::Copy(pos..p.range.start));
        }
        if p.is_rewritten() {
            pieces.push(Piece::Unit(i));
            if pad && p.len_before > p.len_after {
                pieces.push(Piece::Zeros(diff(p.len_before, p.len_after)));
            }
        } else {
            pieces.push(Piece::Copy(p.range.clone()));
        }
        pos = p.range.end;
    }
    let end = len64(data.len());
    if end > pos {
        pieces.push(Piece::Copy(pos..end));
    }
    pieces
}

/// The length of one piece.
pub(super) fn piece_len(p: &Piece, plans: &[UnitPlan<'_>]) -> u64 {
    match p {
        Piece::Copy(r) => diff(r.end, r.start),
        Piece::Unit(i) => plans.get(*i).map_or(0, |p| p.len_after),
        Piece::Zeros(n) => *n,
        Piece::Owned(v) => len64(v.len()),
    }
}

/// The length of the output.
pub(super) fn total_len(pieces: &[Piece], plans: &[UnitPlan<'_>]) -> Result<u64> {
    pieces.iter().try_fold(0u64, |a, p| {
        a.checked_add(piece_len(p, plans)).ok_or(err(
            ErrorKind::OutOfBounds,
            0,
            "output size overflows",
        ))
    })
}

/// `pieces` with the bytes at each patch's offset (in the output `pieces` make) replaced.
/// A patch lies in copied input or in new bytes, never in a rewritten unit or zero fill.
pub(super) fn apply_patches(
    pieces: Vec<Piece>,
    plans: &[UnitPlan<'_>],
    patches: &Patches,
) -> Result<Vec<Piece>> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    for piece in pieces {
        let end = pos.saturating_add(piece_len(&piece, plans));
        let here: Vec<(u64, &Vec<u8>)> = patches.range(pos..end).map(|(at, b)| (*at, b)).collect();
        let Some(&(first, _)) = here.first() else {
            out.push(piece);
            pos = end;
            continue;
        };
        if here
            .iter()
            .any(|(at, b)| at.saturating_add(len64(b.len())) > end)
        {
            return Err(err(ErrorKind::Malformed, first, "a patch crosses a piece"));
        }
        match piece {
            Piece::Copy(r) => {
                let mut at_in = r.start;
                for (at, bytes) in here {
                    let start = r.start.saturating_add(diff(at, pos));
                    if start > at_in {
                        out.push(Piece::Copy(at_in..start));
                    }
                    out.push(Piece::Owned(bytes.clone()));
                    at_in = start.saturating_add(len64(bytes.len()));
                }
                if at_in < r.end {
                    out.push(Piece::Copy(at_in..r.end));
                }
            }
            Piece::Owned(mut v) => {
                for (at, bytes) in here {
                    let i = usize::try_from(diff(at, pos)).unwrap_or(usize::MAX);
                    let target = i
                        .checked_add(bytes.len())
                        .and_then(|e| v.get_mut(i..e))
                        .ok_or(err(ErrorKind::Malformed, at, "a patch crosses a piece"))?;
                    target.copy_from_slice(bytes);
                }
                out.push(Piece::Owned(v));
            }
            Piece::Zeros(_) | Piece::Unit(_) => {
                return Err(err(
                    ErrorKind::Malformed,
                    first,
                    "a pointer lies in a rewritten container",
                ));
            }
        }
        pos = end;
    }
    Ok(out)
}

/// `pieces` (whose output offsets are those of the input) without the bytes in `holes`
/// and without anything from `end` on.
pub(super) fn cut(
    pieces: Vec<Piece>,
    plans: &[UnitPlan<'_>],
    holes: &[Range<u64>],
    end: u64,
) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    for piece in pieces {
        let len = piece_len(&piece, plans);
        let r = pos..pos.saturating_add(len);
        pos = r.end;
        // Parts of r outside every hole and before `end`.
        let mut keep: Vec<Range<u64>> = core::iter::once(r.start..r.end.min(end)).collect();
        for h in holes {
            keep = keep
                .into_iter()
                .flat_map(|k| {
                    let mut v = Vec::new();
                    if k.start < h.start.min(k.end) {
                        v.push(k.start..h.start.min(k.end));
                    }
                    if h.end.max(k.start) < k.end {
                        v.push(h.end.max(k.start)..k.end);
                    }
                    v
                })
                .collect();
        }
        let whole = keep.len() == 1 && keep.first() == Some(&r);
        match piece {
            p if whole => out.push(p),
            Piece::Copy(c) => {
                for k in keep {
                    let from = c.start.saturating_add(diff(k.start, r.start));
                    out.push(Piece::Copy(from..from.saturating_add(diff(k.end, k.start))));
                }
            }
            Piece::Zeros(_) => {
                for k in keep {
                    out.push(Piece::Zeros(diff(k.end, k.start)));
                }
            }
            // A rewritten unit never reaches into a hole (holes start after its new end).
            p @ (Piece::Unit(_) | Piece::Owned(_)) => {
                if !keep.is_empty() {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// The new file offset of `o` once `holes` (input ranges, in any order) leave the file.
pub(super) fn mapped(holes: &[Range<u64>], o: u64) -> u64 {
    diff(
        o,
        holes
            .iter()
            .filter(|h| h.end <= o)
            .map(|h| diff(h.end, h.start))
            .fold(0u64, u64::saturating_add),
    )
}

/// The bytes `holes` remove from the file.
pub(super) fn hole_bytes(holes: &[Range<u64>]) -> u64 {
    holes
        .iter()
        .map(|h| diff(h.end, h.start))
        .fold(0, u64::saturating_add)
}

/// Pieces of an archive member: input ranges from `base`, plan indices from `first`.
pub(super) fn rebase(pieces: Vec<Piece>, base: u64, first: usize) -> Vec<Piece> {
    pieces
        .into_iter()
        .map(|p| match p {
            Piece::Copy(r) => Piece::Copy(r.start.saturating_add(base)..r.end.saturating_add(base)),
            Piece::Unit(i) => Piece::Unit(i.saturating_add(first)),
            other => other,
        })
        .collect()
}

/// Streams `pieces` (over the input `data` and the unit plans `units`) into `out`.
pub(super) fn write<W: std::io::Write + ?Sized>(
    out: &mut W,
    data: &[u8],
    units: &[UnitPlan<'_>],
    pieces: &[Piece],
) -> core::result::Result<(), WriteError> {
    for piece in pieces {
        match piece {
            Piece::Copy(r) => out.write_all(super::slice(data, r, "range outside the input")?)?,
            Piece::Zeros(n) => crate::write::write_zeros(out, *n)?,
            Piece::Owned(v) => out.write_all(v)?,
            Piece::Unit(i) => {
                let p =
                    units
                        .get(*i)
                        .ok_or(err(ErrorKind::Malformed, 0, "a piece names no unit"))?;
                match &p.body {
                    Body::Same | Body::DropSections(_) => {}
                    Body::Owned(v) => out.write_all(v)?,
                    Body::Spliced(head, parts) => {
                        out.write_all(head)?;
                        for part in parts {
                            out.write_all(part)?;
                        }
                    }
                    Body::Bundle { entries, align } => {
                        crate::write::bundle::write_bundle(out, entries, *align)?;
                    }
                }
            }
        }
    }
    Ok(())
}
