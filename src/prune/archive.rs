//! `ar` archives (GNU or System V layout): every member with device code is pruned as a
//! file of its own, the member headers get the new sizes (and the padding byte that keeps
//! members at even offsets), and the offsets of the symbol table (`/`, 32-bit, or
//! `/SYM64/`, 64-bit, big-endian) are moved to where the members now start. The long name
//! table and the symbols themselves are unchanged. BSD archives (`#1/` names,
//! `__.SYMDEF`) with something to drop are refused.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use crate::arch::Device;
use crate::container::{units, PathElem};
use crate::error::{ErrorKind, Result};

use super::layout;
use super::pieces::{self, Piece};
use super::plan::{plan_units, UnitPlan};
use super::{diff, err, len64, slice, PruneOptions};

/// Size of an archive member header.
const HEADER: u64 = 60;

/// One member of an archive.
#[derive(Debug)]
pub(super) struct Member {
    /// File offset of its header.
    header: u64,
    /// File range of its data.
    data: Range<u64>,
    /// Its name as stored (`/`, `//`, `/SYM64/`, `#1/…`, `name/`).
    raw: String,
    /// Its name (long names resolved).
    name: String,
    /// The units planned in it: a range of the plan's units.
    units: Range<usize>,
}

impl Member {
    fn is_special(&self) -> bool {
        self.raw == "/"
            || self.raw == "//"
            || self.raw == "/SYM64/"
            || self.raw.starts_with("__.SYMDEF")
    }
}

/// Plans the units of every member that holds some.
pub(super) fn plan<'a>(
    data: &'a [u8],
    keep: &[Device],
    options: &PruneOptions,
    planned: &mut dyn FnMut(Range<u64>),
) -> Result<(Vec<UnitPlan<'a>>, Vec<Member>)> {
    let with_units = members_with_units(data, options)?;
    let mut members = Vec::new();
    let mut plans: Vec<UnitPlan<'a>> = Vec::new();
    let mut long_names: &[u8] = &[];
    let end = len64(data.len());
    let mut pos = len64(crate::raw::AR_MAGIC.len());
    while pos.saturating_add(HEADER) <= end {
        let (raw, range) = read_header(data, pos)?;
        let start = range.start;
        let body = slice(data, &range, "archive member")?;
        if raw == "//" {
            long_names = body;
        }
        check_bsd_name(&raw, body, &with_units, pos)?;
        let name = member_name(&raw, long_names);
        let stop = range.end;
        let mut m = Member {
            header: pos,
            data: range,
            name,
            raw,
            units: plans.len()..plans.len(),
        };
        if !m.is_special() && with_units.contains(&m.name.as_bytes()) {
            let mut member_plans = plan_units(body, keep, options, &mut |r| {
                planned(r.start.saturating_add(start)..r.end.saturating_add(start));
            })?;
            for p in &mut member_plans {
                p.location = format!("member {} / {}", m.name, p.location);
            }
            plans.append(&mut member_plans);
            m.units.end = plans.len();
        } else if m.is_special() {
            m.name = m.raw.clone();
        }
        members.push(m);
        pos = stop.saturating_add(stop & 1);
    }
    if slice(data, &(pos.min(end)..end), "archive tail")?
        .iter()
        .any(|b| *b != b'\n')
    {
        return Err(err(
            ErrorKind::BadContainer,
            pos,
            "bytes after the last archive member",
        ));
    }
    Ok((plans, members))
}

/// The names of the members holding units, as the walk of the whole archive finds them
/// (members that are not containers, such as bitcode, are copied as they are).
fn members_with_units<'a>(data: &'a [u8], options: &PruneOptions) -> Result<Vec<&'a [u8]>> {
    let mut with_units: Vec<&[u8]> = Vec::new();
    for unit in units(data, &options.read) {
        let unit = unit?;
        if let Some(PathElem::Member(name)) = unit.location.path().first() {
            if !with_units.contains(name) {
                with_units.push(name);
            }
        }
    }
    Ok(with_units)
}

/// The member header at `pos`: the name as stored and the file range of the member's data.
fn read_header(data: &[u8], pos: u64) -> Result<(String, Range<u64>)> {
    let h = slice(
        data,
        &(pos..pos.saturating_add(HEADER)),
        "archive member header",
    )?;
    if h.get(58..60) != Some(b"`\n") {
        return Err(err(
            ErrorKind::BadContainer,
            pos,
            "archive member header is malformed",
        ));
    }
    let size: u64 = h
        .get(48..58)
        .and_then(|s| core::str::from_utf8(s).ok())
        .and_then(|t| t.trim().parse().ok())
        .ok_or(err(
            ErrorKind::BadContainer,
            pos.saturating_add(48),
            "archive member size is malformed",
        ))?;
    let start = pos.saturating_add(HEADER);
    let stop = start
        .checked_add(size)
        .filter(|e| *e <= len64(data.len()))
        .ok_or(err(
            ErrorKind::Truncated,
            pos,
            "archive member runs past the end",
        ))?;
    let raw: String = String::from_utf8_lossy(h.get(..16).unwrap_or_default())
        .trim_end()
        .into();
    Ok((raw, start..stop))
}

/// A BSD name (`#1/LEN`: the name is the first LEN bytes of the data) of a member with
/// device code: refused, as documented (its data would move with the name).
fn check_bsd_name(raw: &str, body: &[u8], with_units: &[&[u8]], pos: u64) -> Result<()> {
    if let Some(len) = raw
        .strip_prefix("#1/")
        .and_then(|n| n.parse::<usize>().ok())
    {
        let bsd = body.get(..len).unwrap_or(body);
        let bsd = bsd.split(|b| *b == 0).next().unwrap_or_default();
        if with_units.contains(&bsd) {
            return Err(err(
                ErrorKind::BadContainer,
                pos,
                "BSD archives are not pruned",
            ));
        }
    }
    Ok(())
}

/// A member's name: a GNU long name (`/OFFSET`) looked up in `long_names`, else the
/// stored name without its trailing `/`.
fn member_name(raw: &str, long_names: &[u8]) -> String {
    match raw.strip_prefix('/').and_then(|n| n.parse::<usize>().ok()) {
        Some(off) => long_names
            .get(off..)
            .and_then(|t| t.split(|b| *b == b'\n').next())
            .map(|t| String::from_utf8_lossy(t).trim_end_matches('/').into())
            .unwrap_or(raw.into()),
        None => raw.trim_end_matches('/').into(),
    }
}

/// Reads a big-endian word of `w` bytes at `at`.
fn read_be(b: &[u8], at: usize, w: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(w)?)?;
    Some(
        s.iter()
            .fold(0u64, |a, x| a.wrapping_shl(8) | u64::from(*x)),
    )
}

/// A pruned member: its pieces (in archive offsets) and its new size.
type PrunedMember = Option<(Vec<Piece>, u64)>;

/// Lays out the archive of `members` with the pruned members.
pub(super) fn assemble(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    members: &[Member],
    shrink: bool,
) -> Result<(Vec<Piece>, String)> {
    let pruned = prune_members(data, plans, members, shrink)?;
    let new_header = new_offsets(members, &pruned);
    let any_pruned = pruned.iter().any(Option::is_some);
    let mut out = vec![Piece::Copy(0..len64(crate::raw::AR_MAGIC.len()))];
    for ((m, p), start) in members.iter().zip(&pruned).zip(&new_header) {
        let size = p
            .as_ref()
            .map_or(diff(m.data.end, m.data.start), |(_, s)| *s);
        out.push(Piece::Owned(member_header(data, m, size)?));
        let body = slice(data, &m.data, "archive member")?;
        if m.raw == "/" || m.raw == "/SYM64/" {
            out.push(Piece::Owned(symbol_table(body, m, members, &new_header)?));
        } else if m.raw.starts_with("__.SYMDEF") && any_pruned {
            return Err(err(
                ErrorKind::BadContainer,
                m.header,
                "BSD archives are not pruned",
            ));
        } else {
            match p {
                Some((pieces, _)) => out.extend(pieces.iter().cloned()),
                None => out.push(Piece::Copy(m.data.clone())),
            }
        }
        if start.saturating_add(HEADER).saturating_add(size) & 1 == 1 {
            out.push(Piece::Owned(b"\n".to_vec()));
        }
    }
    let changed = pruned.iter().filter(|p| p.is_some()).count();
    Ok((
        out,
        format!(
            "archive: {changed} member(s) pruned, member headers and symbol table offsets updated"
        ),
    ))
}

/// Each member pruned as a file of its own (`None` where nothing in it changes).
fn prune_members(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    members: &[Member],
    shrink: bool,
) -> Result<Vec<PrunedMember>> {
    let mut pruned: Vec<PrunedMember> = Vec::with_capacity(members.len());
    for m in members {
        let these = plans.get(m.units.clone()).unwrap_or_default();
        if !these.iter().any(UnitPlan::is_rewritten) {
            pruned.push(None);
            continue;
        }
        if m.raw.starts_with("#1/") {
            return Err(err(
                ErrorKind::BadContainer,
                m.header,
                "BSD archives are not pruned",
            ));
        }
        let body = slice(data, &m.data, "archive member")?;
        let (p, _, _) = layout::assemble(body, these, shrink, false, false)
            .map_err(|e| e.rebase(m.data.start))?;
        let size = pieces::total_len(&p, these)?;
        pruned.push(Some((pieces::rebase(p, m.data.start, m.units.start), size)));
    }
    Ok(pruned)
}

/// The new file offset of every member header.
fn new_offsets(members: &[Member], pruned: &[PrunedMember]) -> Vec<u64> {
    let mut new_header = Vec::with_capacity(members.len());
    let mut at = len64(crate::raw::AR_MAGIC.len());
    for (m, p) in members.iter().zip(pruned) {
        new_header.push(at);
        let size = p
            .as_ref()
            .map_or(diff(m.data.end, m.data.start), |(_, s)| *s);
        at = at.saturating_add(HEADER).saturating_add(size);
        at = at.saturating_add(at & 1);
    }
    new_header
}

/// The header of member `m` with its size field set to `size`.
fn member_header(data: &[u8], m: &Member, size: u64) -> Result<Vec<u8>> {
    let h = slice(
        data,
        &(m.header..m.header.saturating_add(HEADER)),
        "archive member header",
    )?;
    let mut header = h.get(..48).unwrap_or_default().to_vec();
    header.extend_from_slice(format!("{size:<10}").as_bytes());
    header.extend_from_slice(b"`\n");
    Ok(header)
}

/// The symbol table `m` (`/`, 32-bit, or `/SYM64/`, 64-bit; contents `body`) with each
/// member offset moved to that member's new offset (`new_header`, by member).
fn symbol_table(
    body: &[u8],
    m: &Member,
    members: &[Member],
    new_header: &[u64],
) -> Result<Vec<u8>> {
    let moved = |old: u64| -> Option<u64> {
        members
            .iter()
            .position(|m| m.header == old)
            .and_then(|i| new_header.get(i).copied())
    };
    let w: usize = if m.raw == "/" { 4 } else { 8 };
    let truncated = err(
        ErrorKind::Truncated,
        m.data.start,
        "archive symbol table is truncated",
    );
    let mut table = body.to_vec();
    let count = read_be(&table, 0, w).ok_or(truncated)?;
    for k in 0..usize::try_from(count).unwrap_or(usize::MAX) {
        let at = k
            .checked_add(1)
            .and_then(|k| k.checked_mul(w))
            .ok_or(truncated)?;
        let old = read_be(&table, at, w).ok_or(truncated)?;
        let new = moved(old).ok_or(err(
            ErrorKind::BadContainer,
            m.data.start,
            "archive symbol table names no member",
        ))?;
        if w == 4 && new > u64::from(u32::MAX) {
            return Err(err(
                ErrorKind::LimitExceeded,
                m.data.start,
                "archive too large for a 32-bit symbol table",
            ));
        }
        let bytes = new.to_be_bytes();
        let src = bytes.get(diff(8, len64(w)) as usize..).unwrap_or_default();
        table
            .get_mut(at..at.saturating_add(w))
            .ok_or(truncated)?
            .copy_from_slice(src);
    }
    Ok(table)
}
