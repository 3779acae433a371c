//! The integration tests of `offload-image`, one test binary: a module per subject, the
//! helpers they share in `common`, and the binary's metered allocator in `common::alloc`.
//!
//! One subject's tests: `cargo test --test suite corpus::` (a name filter on the module).

mod common;

#[cfg(feature = "std")]
mod aks2;
mod aliasing;
mod alloc_free;
mod architecture;
mod choose;
mod clr_rules;
mod comgr_agreement;
mod corpus;
mod damage;
mod doc_links;
mod doc_refs;
mod entry_id_scan;
mod gfx1250_xnack;
mod host;
mod image_names;
mod kpack;
mod kpack_data;
mod kpack_toc;
mod limits;
mod llvm_processor_table;
mod loose_v2;
mod lto_entries;
mod mutation;
mod nested_units;
mod nvfatbin;
mod nvfatbin_tileir;
mod nvfatbin_zstd;
mod nvptx_new_archs;
mod offload_binary;
mod offload_binary_v2;
mod packaging;
mod pe;
mod pe_arm64;
mod peak_memory;
mod props;
mod real_files;
mod registration;
mod regressions;
mod select_corpus;
mod select_props;
mod select_ranking;
mod spirv_entries;
mod stream;
mod subarch_triples;
mod validate_damage;
mod write_roundtrip;
mod zero_alloc;
