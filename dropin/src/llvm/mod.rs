//! Replicas of the LLVM internals whose behaviour shows in the drop-in tools' output:
//! hash-table iteration order, triple normalisation, the `cl` command-line syntax, archive
//! writing (with bitcode and ELF symbol tables) and `llvm-objcopy`'s ELF rewriting.

pub mod archive;
pub mod bitcode;
pub mod cl;
pub mod hashmap;
pub mod objcopy;
pub mod triple;
