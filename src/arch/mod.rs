//! Names of targets: bundle entry IDs, triples, target IDs (`COMPATIBILITY.md` §1–§4, §8, §9).
//!
//! * [`EntryId`], [`Triple`]: bundle entry IDs and triples (from [`crate::entry_id`], where
//!   images get them; re-exported here, where they are compared);
//! * [`amdgpu`]: the AMDGPU processor table, feature states and [`TargetId`];
//! * [`clr`]: ROCm CLR's generic code-object map, by release ([`clr_generic_since`]);
//! * [`nvptx`]: NVPTX architectures ([`NvArch`]);
//! * [`elf`]: what a device ELF header (`e_flags`) says;
//! * [`Device`]: the GPU an image is selected for;
//! * [`identify`]: what an [`Image`](crate::Image) is built for ([`Identity`]).
//!
//! Parsing and identification never allocate.

pub mod amdgpu;
pub mod clr;
mod device;
pub mod elf;
mod identity;
pub mod nvptx;

pub use crate::entry_id::{EntryId, Triple};
pub use amdgpu::{Feature, FeatureState, Processor, Subarch, TargetId};
pub use clr::{clr_generic_since, ClrSince};
pub use device::{visible_devices, Device, HSA_CAP_SRAM_EDCSUPPORTED};
pub use identity::{
    identify, identify_entry, image_name, Code, Disagreement, Identity, ImageName, Mismatch, Target,
};
pub use nvptx::{ArchVariant, NvArch};
