//! The integration tests of `loader-sim`, one test binary: a module per subject (commands,
//! drop-ins, differential tests against LLVM's tools), the helpers they share in `common`.
//!
//! One subject's tests: `cargo test -p loader-sim --test suite prune::` (a name filter on
//! the module).

mod aks2_list_select;
mod common;

mod bundler_differential;
mod ccob_differential;
mod cli_doc;
mod clr_rules;
mod compressed_bundles_differential;
mod coverage;
mod cuda_driver;
mod cuda_program;
mod cuda_runtime;
mod doctor;
mod doctor_isa;
mod doctor_outside;
mod doctor_packages;
mod doctor_v2;
mod doctor_verdicts;
mod dropin_errors_differential;
mod generative_differential;
mod gpu_names;
mod hostile;
mod hostile2;
mod hostile3;
mod image_names;
mod jobs;
mod kpack;
mod list;
mod nested_offload;
mod packager_compress;
mod packager_differential;
mod packager_llvm23;
mod prune;
mod prune_layouts;
mod prune_pe;
mod readme;
mod register;
mod sarif;
mod sbom;
mod schemas;
mod select;
mod select_zstd;
mod skip_rule;
mod subarch;
mod validate;
mod variants;
mod wrap;
