//! Which layout a file is rewritten in: standalone containers, a PE image or COFF
//! object ([`super::pe`]), a host ELF file ([`super::linked`], which hands relocatable
//! objects to [`super::relocatable`]).

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use crate::error::{ErrorKind, Result};

use super::error::PruneError;
use super::pieces::{standalone, Piece};
use super::plan::UnitPlan;
use super::{err, len64};

/// A laid-out output: its pieces, the layout line ([`super::Pruned::layout`]) and, for a
/// linked file rewritten in place, why it was not compacted (`None` for `--no-shrink` and
/// every other layout).
pub(super) type Laid = (Vec<Piece>, String, Option<PruneError>);

/// Why a linked file is rewritten in place, as its layout line says it: the obstacle to
/// compacting it, or `--no-shrink` when compaction was not asked for.
pub(super) fn in_place_reason(why: Option<&PruneError>) -> String {
    why.map_or_else(|| "--no-shrink".into(), ToString::to_string)
}

/// Decides how the output is made of input bytes and rewritten units.
pub(super) fn assemble(
    data: &[u8],
    plans: &[UnitPlan<'_>],
    shrink: bool,
    move_table: bool,
    refuse_signed: bool,
) -> Result<Laid> {
    if plans.iter().all(|p| !p.is_rewritten()) {
        return Ok((
            vec![Piece::Copy(0..len64(data.len()))],
            "unchanged (nothing to drop)".into(),
            None,
        ));
    }
    if data.starts_with(crate::raw::AR_THIN_MAGIC) {
        return Err(err(
            ErrorKind::BadContainer,
            0,
            "thin archives are not pruned (their members are other files)",
        ));
    }
    if crate::host::pe::is_pe_or_coff(data) {
        if let Some(p) = plans.iter().find(|p| p.drops_sections()) {
            return Err(err(
                ErrorKind::BadContainer,
                p.range.start,
                "a bundled COFF object (__CLANG_OFFLOAD_BUNDLE__ sections) is not pruned: its sections cannot be removed",
            ));
        }
        return super::pe::host_pe(data, plans, shrink, refuse_signed);
    }
    let is_host_elf = data.starts_with(crate::raw::ELF_MAGIC)
        && !plans
            .iter()
            .any(|p| p.format == "elf" && p.range.start == 0);
    if !is_host_elf {
        if let Some(p) = plans.iter().find(|p| p.drops_sections()) {
            return Err(err(
                ErrorKind::BadContainer,
                p.range.start,
                "the entry sections of a bundled object are removed only from an ELF relocatable object",
            ));
        }
        return Ok((standalone(data, plans, false), "standalone".into(), None));
    }
    super::linked::host_elf(data, plans, shrink, move_table)
}
