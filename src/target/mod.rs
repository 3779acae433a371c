//! Names of targets: bundle entry IDs, triples, target IDs (`COMPATIBILITY.md` §1–§4, §8, §9).

mod entry_id;

pub use entry_id::{EntryId, Triple};
