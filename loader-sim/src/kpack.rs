//! Split host libraries (`KPACK.md`): what rocm-kpack's loader finds on disk is modelled in
//! [`loader_sim_rt::kpack`], which the runtime shim shares; `select`, `list`, `register`,
//! `validate` and `doctor` read split libraries through it.

pub use loader_sim_rt::kpack::*;
