//! The x86-64 machine code of the wrapper's registration functions (`.text.startup`).
//!
//! Each function is a fixed listing: the bytes of every instruction next to the assembly
//! they encode (Intel syntax as `llvm-mc` reads it, labels included) and, where the
//! instruction refers to another symbol, the relocation of its last four bytes (a RIP-
//! relative displacement or a call target; in every instruction here nothing follows the
//! 32-bit field, so the addend is -4). The unit test below assembles the listings with
//! `llvm-mc-22` and checks that the assembler produces exactly these bytes and
//! relocations, so the text is the readable source and the bytes cannot drift from it.
//!
//! The code follows the System V AMD64 ABI: arguments in `rdi, rsi, rdx, rcx, r8, r9`, then
//! on the stack; `rsp` 16-byte aligned at every call; `rbx, r12, r14` preserved. Symbols
//! this code refers to are either defined in the same object (the descriptor, the wrapper,
//! the handle, the entry-table bounds, which are hidden) and reached RIP-relatively
//! (`R_X86_64_PC32`), or runtime functions called through the PLT (`R_X86_64_PLT32`), so
//! the object links into position-independent executables and shared libraries.

/// How a line's last four bytes are relocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixup {
    /// `R_X86_64_PC32` against the symbol, addend -4 (a RIP-relative operand).
    Pc32(&'static str),
    /// `R_X86_64_PLT32` against the symbol, addend -4 (a call to a runtime function).
    Plt32(&'static str),
}

impl Fixup {
    /// The symbol the relocation refers to.
    pub fn symbol(self) -> &'static str {
        match self {
            Fixup::Pc32(s) | Fixup::Plt32(s) => s,
        }
    }
}

/// One line of a listing: the bytes, the assembly they encode, the relocation (if any).
/// A label is a line without bytes whose text ends with `:`.
#[derive(Clone, Copy, Debug)]
pub struct Line {
    /// Machine code (relocated fields zero).
    pub bytes: &'static [u8],
    /// The assembly text.
    pub asm: &'static str,
    /// Relocation of the last four bytes.
    pub fixup: Option<Fixup>,
}

const fn op(bytes: &'static [u8], asm: &'static str) -> Line {
    Line {
        bytes,
        asm,
        fixup: None,
    }
}

const fn pc32(bytes: &'static [u8], asm: &'static str, symbol: &'static str) -> Line {
    Line {
        bytes,
        asm,
        fixup: Some(Fixup::Pc32(symbol)),
    }
}

const fn plt32(bytes: &'static [u8], asm: &'static str, symbol: &'static str) -> Line {
    Line {
        bytes,
        asm,
        fixup: Some(Fixup::Plt32(symbol)),
    }
}

const fn label(asm: &'static str) -> Line {
    Line {
        bytes: &[],
        asm,
        fixup: None,
    }
}

/// `int3` padding up to the next 16-byte boundary (functions are 16-byte aligned).
const fn pad(bytes: &'static [u8]) -> Line {
    Line {
        bytes,
        asm: ".p2align 4, 0xcc",
        fixup: None,
    }
}

/// A function defined by a listing, as the symbol table describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    /// Symbol name.
    pub name: &'static str,
    /// Offset in the listing's bytes.
    pub offset: u64,
    /// Size without trailing padding.
    pub size: u64,
}

/// A relocation of the assembled listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reloc {
    /// Offset of the 32-bit field.
    pub offset: u64,
    /// The field's relocation.
    pub fixup: Fixup,
}

/// The assembled form of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assembled {
    /// The code.
    pub bytes: Vec<u8>,
    /// The functions, in order.
    pub functions: Vec<Function>,
    /// The relocations, in offset order.
    pub relocs: Vec<Reloc>,
}

/// Lays out `listing`: concatenated bytes, function symbols (labels not starting with
/// `.L`), relocations.
pub fn assemble(listing: &[Line]) -> Assembled {
    let mut bytes = Vec::new();
    let mut functions: Vec<Function> = Vec::new();
    let mut relocs = Vec::new();
    for line in listing {
        let at = bytes.len() as u64;
        if line.bytes.is_empty() {
            if let Some(name) = line.asm.strip_suffix(':') {
                if !name.starts_with(".L") {
                    functions.push(Function {
                        name,
                        offset: at,
                        size: 0,
                    });
                }
            }
            continue;
        }
        bytes.extend_from_slice(line.bytes);
        if let Some(fixup) = line.fixup {
            relocs.push(Reloc {
                offset: bytes.len() as u64 - 4,
                fixup,
            });
        }
        if !line.asm.starts_with(".p2align") {
            if let Some(f) = functions.last_mut() {
                f.size = bytes.len() as u64 - f.offset;
            }
        }
    }
    Assembled {
        bytes,
        functions,
        relocs,
    }
}

/// `.omp_offloading.descriptor_reg` / `_unreg` (`OffloadWrapper.cpp`,
/// `createRegisterFunction`): register the descriptor, then have `atexit` unregister it.
pub const OPENMP: &[Line] = &[
    label(".omp_offloading.descriptor_reg:"),
    op(&[0x50], "push rax"), // rsp 16-byte aligned for the calls
    pc32(
        &[0x48, 0x8d, 0x3d, 0, 0, 0, 0],
        "lea rdi, [rip + .omp_offloading.descriptor]",
        ".omp_offloading.descriptor",
    ),
    plt32(
        &[0xe8, 0, 0, 0, 0],
        "call __tgt_register_lib@PLT",
        "__tgt_register_lib",
    ),
    op(
        &[0x48, 0x8d, 0x3d, 0x0c, 0, 0, 0],
        "lea rdi, [rip + .omp_offloading.descriptor_unreg]",
    ),
    plt32(&[0xe8, 0, 0, 0, 0], "call atexit@PLT", "atexit"),
    op(&[0x58], "pop rax"),
    op(&[0xc3], "ret"),
    pad(&[0xcc; 5]),
    label(".omp_offloading.descriptor_unreg:"),
    op(&[0x50], "push rax"),
    pc32(
        &[0x48, 0x8d, 0x3d, 0, 0, 0, 0],
        "lea rdi, [rip + .omp_offloading.descriptor]",
        ".omp_offloading.descriptor",
    ),
    plt32(
        &[0xe8, 0, 0, 0, 0],
        "call __tgt_unregister_lib@PLT",
        "__tgt_unregister_lib",
    ),
    op(&[0x58], "pop rax"),
    op(&[0xc3], "ret"),
];

/// `.hip.fatbin_reg`, `.hip.fatbin_unreg` and `.hip.globals_reg` (`OffloadWrapper.cpp`,
/// `createRegisterFatbinFunction`, `createRegisterGlobalsFunction`):
///
/// ```c
/// void fatbin_reg(void) {
///   binary_handle = __hipRegisterFatBinary(&fatbin_wrapper);
///   globals_reg(binary_handle);
///   atexit(fatbin_unreg);
/// }
/// void fatbin_unreg(void) { __hipUnregisterFatBinary(binary_handle); }
/// void globals_reg(void **h) {
///   for (entry *e = __start_llvm_offload_entries; e + 1 <= __stop_llvm_offload_entries; ++e) {
///     if (e->Kind != 4 && e->Kind != 3) continue;           // HIP (LLVM 21+ / LLVM 20)
///     if (e->Size == 0)
///       __hipRegisterFunction(h, e->Address, e->SymbolName, e->SymbolName, -1, 0, 0, 0, 0, 0);
///     else switch (e->Flags & 7) {
///     case 0: __hipRegisterVar(h, e->Address, e->SymbolName, e->SymbolName,
///                              extern, e->Size, constant, 0); break;
///     case 1: __hipRegisterManagedVar(h, e->AuxAddr, e->Address, e->SymbolName,
///                                     e->Size, (int)e->Data); break;
///     case 2: __hipRegisterSurface(h, e->Address, e->SymbolName, e->SymbolName,
///                                  (int)e->Data, extern); break;
///     case 3: __hipRegisterTexture(h, e->Address, e->SymbolName, e->SymbolName,
///                                  (int)e->Data, normalized, extern); break;
///     }
///   }
/// }
/// ```
///
/// with `extern = Flags >> 3 & 1`, `constant = Flags >> 4 & 1`, `normalized = Flags >> 5 &
/// 1` and the current 56-byte entry layout (`Kind` at 10, `Flags` 12, `Address` 16,
/// `SymbolName` 24, `Size` 32, `Data` 40, `AuxAddr` 48). Two deliberate differences from
/// LLVM 22's loop: an entry is visited only if it lies wholly below the end symbol (LLVM
/// compares for equality and would run past a table whose size is not a multiple of 56),
/// and `Kind` 3 counts as HIP as well as 4, as the static reader
/// (`offload_image::registration`) decodes it (LLVM 20 numbered HIP 3; LLVM 21+ never
/// writes 3 into `llvm_offload_entries`).
pub const HIP: &[Line] = &[
    label(".hip.fatbin_reg:"),
    op(&[0x50], "push rax"), // rsp 16-byte aligned for the calls
    pc32(
        &[0x48, 0x8d, 0x3d, 0, 0, 0, 0],
        "lea rdi, [rip + .fatbin_wrapper]",
        ".fatbin_wrapper",
    ),
    plt32(
        &[0xe8, 0, 0, 0, 0],
        "call __hipRegisterFatBinary@PLT",
        "__hipRegisterFatBinary",
    ),
    pc32(
        &[0x48, 0x89, 0x05, 0, 0, 0, 0],
        "mov qword ptr [rip + .hip.binary_handle], rax",
        ".hip.binary_handle",
    ),
    op(&[0x48, 0x89, 0xc7], "mov rdi, rax"),
    op(&[0xe8, 0x24, 0, 0, 0], "call .hip.globals_reg"),
    op(
        &[0x48, 0x8d, 0x3d, 0x0d, 0, 0, 0],
        "lea rdi, [rip + .hip.fatbin_unreg]",
    ),
    plt32(&[0xe8, 0, 0, 0, 0], "call atexit@PLT", "atexit"),
    op(&[0x58], "pop rax"),
    op(&[0xc3], "ret"),
    pad(&[0xcc; 6]),
    label(".hip.fatbin_unreg:"),
    op(&[0x50], "push rax"),
    pc32(
        &[0x48, 0x8b, 0x3d, 0, 0, 0, 0],
        "mov rdi, qword ptr [rip + .hip.binary_handle]",
        ".hip.binary_handle",
    ),
    plt32(
        &[0xe8, 0, 0, 0, 0],
        "call __hipUnregisterFatBinary@PLT",
        "__hipUnregisterFatBinary",
    ),
    op(&[0x58], "pop rax"),
    op(&[0xc3], "ret"),
    pad(&[0xcc; 1]),
    label(".hip.globals_reg:"),
    op(&[0x41, 0x56], "push r14"),
    op(&[0x41, 0x54], "push r12"),
    op(&[0x53], "push rbx"),
    op(&[0x48, 0x83, 0xec, 0x20], "sub rsp, 32"), // 4 stack-argument slots, rsp stays aligned
    op(&[0x49, 0x89, 0xfe], "mov r14, rdi"),      // the handle
    pc32(
        &[0x48, 0x8d, 0x1d, 0, 0, 0, 0],
        "lea rbx, [rip + __start_llvm_offload_entries]",
        "__start_llvm_offload_entries",
    ),
    pc32(
        &[0x4c, 0x8d, 0x25, 0, 0, 0, 0],
        "lea r12, [rip + __stop_llvm_offload_entries]",
        "__stop_llvm_offload_entries",
    ),
    label(".Lloop:"),
    op(&[0x48, 0x8d, 0x43, 0x38], "lea rax, [rbx + 56]"),
    op(&[0x4c, 0x39, 0xe0], "cmp rax, r12"),
    op(&[0x0f, 0x87, 0xdb, 0, 0, 0], "ja .Ldone"), // no whole entry left
    op(&[0x0f, 0xb7, 0x43, 0x0a], "movzx eax, word ptr [rbx + 10]"), // Kind
    op(&[0x83, 0xf8, 0x04], "cmp eax, 4"),
    op(&[0x74, 0x09], "je .Lhip"),
    op(&[0x83, 0xf8, 0x03], "cmp eax, 3"),
    op(&[0x0f, 0x85, 0xc0, 0, 0, 0], "jne .Lnext"),
    label(".Lhip:"),
    op(&[0x4c, 0x89, 0xf7], "mov rdi, r14"),
    op(&[0x48, 0x8b, 0x73, 0x10], "mov rsi, qword ptr [rbx + 16]"), // Address
    op(&[0x48, 0x8b, 0x53, 0x18], "mov rdx, qword ptr [rbx + 24]"), // SymbolName
    op(&[0x48, 0x89, 0xd1], "mov rcx, rdx"),
    op(
        &[0x48, 0x83, 0x7b, 0x20, 0x00],
        "cmp qword ptr [rbx + 32], 0",
    ), // Size
    op(&[0x75, 0x28], "jne .Lglobal"),
    op(&[0x41, 0xb8, 0xff, 0xff, 0xff, 0xff], "mov r8d, -1"),
    op(&[0x45, 0x31, 0xc9], "xor r9d, r9d"),
    op(&[0x31, 0xc0], "xor eax, eax"),
    op(&[0x48, 0x89, 0x04, 0x24], "mov qword ptr [rsp], rax"),
    op(
        &[0x48, 0x89, 0x44, 0x24, 0x08],
        "mov qword ptr [rsp + 8], rax",
    ),
    op(
        &[0x48, 0x89, 0x44, 0x24, 0x10],
        "mov qword ptr [rsp + 16], rax",
    ),
    op(
        &[0x48, 0x89, 0x44, 0x24, 0x18],
        "mov qword ptr [rsp + 24], rax",
    ),
    plt32(
        &[0xe8, 0, 0, 0, 0],
        "call __hipRegisterFunction@PLT",
        "__hipRegisterFunction",
    ),
    op(&[0xe9, 0x83, 0, 0, 0], "jmp .Lnext"),
    label(".Lglobal:"),
    op(&[0x8b, 0x43, 0x0c], "mov eax, dword ptr [rbx + 12]"), // Flags
    op(&[0x41, 0x89, 0xc0], "mov r8d, eax"),
    op(&[0x41, 0xc1, 0xe8, 0x03], "shr r8d, 3"),
    op(&[0x41, 0x83, 0xe0, 0x01], "and r8d, 1"), // extern
    op(&[0x41, 0x89, 0xc2], "mov r10d, eax"),
    op(&[0x41, 0x83, 0xe2, 0x07], "and r10d, 7"), // type
    op(&[0x74, 0x2c], "je .Lvar"),
    op(&[0x41, 0x83, 0xfa, 0x01], "cmp r10d, 1"),
    op(&[0x74, 0x44], "je .Lmanaged"),
    op(&[0x41, 0x83, 0xfa, 0x02], "cmp r10d, 2"),
    op(&[0x74, 0x54], "je .Lsurface"),
    op(&[0x41, 0x83, 0xfa, 0x03], "cmp r10d, 3"),
    op(&[0x75, 0x5a], "jne .Lnext"),
    op(&[0x4c, 0x89, 0x04, 0x24], "mov qword ptr [rsp], r8"), // texture: extern
    op(&[0x44, 0x8b, 0x43, 0x28], "mov r8d, dword ptr [rbx + 40]"), // Data: type
    op(&[0x41, 0x89, 0xc1], "mov r9d, eax"),
    op(&[0x41, 0xc1, 0xe9, 0x05], "shr r9d, 5"),
    op(&[0x41, 0x83, 0xe1, 0x01], "and r9d, 1"), // normalized
    plt32(
        &[0xe8, 0, 0, 0, 0],
        "call __hipRegisterTexture@PLT",
        "__hipRegisterTexture",
    ),
    op(&[0xeb, 0x40], "jmp .Lnext"),
    label(".Lvar:"),
    op(&[0x4c, 0x8b, 0x4b, 0x20], "mov r9, qword ptr [rbx + 32]"), // Size
    op(&[0xc1, 0xe8, 0x04], "shr eax, 4"),
    op(&[0x83, 0xe0, 0x01], "and eax, 1"), // constant
    op(&[0x48, 0x89, 0x04, 0x24], "mov qword ptr [rsp], rax"),
    op(
        &[0x48, 0xc7, 0x44, 0x24, 0x08, 0, 0, 0, 0],
        "mov qword ptr [rsp + 8], 0",
    ),
    plt32(
        &[0xe8, 0, 0, 0, 0],
        "call __hipRegisterVar@PLT",
        "__hipRegisterVar",
    ),
    op(&[0xeb, 0x22], "jmp .Lnext"),
    label(".Lmanaged:"),
    op(&[0x48, 0x89, 0xf2], "mov rdx, rsi"), // init value: Address
    op(&[0x48, 0x8b, 0x73, 0x30], "mov rsi, qword ptr [rbx + 48]"), // pointer slot: AuxAddr
    op(&[0x4c, 0x8b, 0x43, 0x20], "mov r8, qword ptr [rbx + 32]"), // Size
    op(&[0x44, 0x8b, 0x4b, 0x28], "mov r9d, dword ptr [rbx + 40]"), // Data: alignment
    plt32(
        &[0xe8, 0, 0, 0, 0],
        "call __hipRegisterManagedVar@PLT",
        "__hipRegisterManagedVar",
    ),
    op(&[0xeb, 0x0c], "jmp .Lnext"),
    label(".Lsurface:"),
    op(&[0x45, 0x89, 0xc1], "mov r9d, r8d"), // extern
    op(&[0x44, 0x8b, 0x43, 0x28], "mov r8d, dword ptr [rbx + 40]"), // Data: type
    plt32(
        &[0xe8, 0, 0, 0, 0],
        "call __hipRegisterSurface@PLT",
        "__hipRegisterSurface",
    ),
    label(".Lnext:"),
    op(&[0x48, 0x83, 0xc3, 0x38], "add rbx, 56"),
    op(&[0xe9, 0x18, 0xff, 0xff, 0xff], "jmp .Lloop"),
    label(".Ldone:"),
    op(&[0x48, 0x83, 0xc4, 0x20], "add rsp, 32"),
    op(&[0x5b], "pop rbx"),
    op(&[0x41, 0x5c], "pop r12"),
    op(&[0x41, 0x5e], "pop r14"),
    op(&[0xc3], "ret"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use object::read::elf::ElfFile64;
    use object::{Endianness, Object, ObjectSection, ObjectSymbol, RelocationFlags};

    /// `llvm-mc-22` from `PATH` (installed with the `llvm-22` package by `.ci/run`).
    fn llvm_mc() -> std::path::PathBuf {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|d| d.join("llvm-mc-22"))
            .find(|p| p.is_file())
            .expect("llvm-mc-22 not found in PATH (Debian package llvm-22; .ci/run installs it)")
    }

    /// Code bytes and relocations as (offset, type, symbol, addend).
    type Code = (Vec<u8>, Vec<(u64, u32, String, i64)>);

    /// Assembles the listing's text with llvm-mc.
    fn reference(listing: &[Line], tag: &str) -> Code {
        let dir =
            std::env::temp_dir().join(format!("loader-sim-code-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("code.s");
        let obj = dir.join("code.o");
        let mut text = String::from(".intel_syntax noprefix\n.text\n");
        for line in listing {
            text.push_str(line.asm);
            text.push('\n');
        }
        std::fs::write(&src, text).unwrap();
        let out = std::process::Command::new(llvm_mc())
            .args(["-triple=x86_64-unknown-linux-gnu", "-filetype=obj", "-o"])
            .arg(&obj)
            .arg(&src)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "llvm-mc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let data = std::fs::read(&obj).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let file = ElfFile64::<Endianness>::parse(&*data).unwrap();
        let text = file.section_by_name(".text").unwrap();
        let mut relocs = Vec::new();
        for (offset, r) in text.relocations() {
            let RelocationFlags::Elf { r_type } = r.flags() else {
                panic!("not an ELF relocation");
            };
            let object::RelocationTarget::Symbol(s) = r.target() else {
                panic!("relocation without a symbol");
            };
            let name = file.symbol_by_index(s).unwrap().name().unwrap().to_string();
            relocs.push((offset, r_type.0, name, r.addend()));
        }
        relocs.sort();
        (text.data().unwrap().to_vec(), relocs)
    }

    fn ours(listing: &[Line]) -> Code {
        let a = assemble(listing);
        let relocs = a
            .relocs
            .iter()
            .map(|r| {
                let ty = match r.fixup {
                    Fixup::Pc32(_) => object::elf::R_X86_64_PC32.0,
                    Fixup::Plt32(_) => object::elf::R_X86_64_PLT32.0,
                };
                (r.offset, ty, r.fixup.symbol().to_string(), -4)
            })
            .collect();
        (a.bytes, relocs)
    }

    #[test]
    #[cfg_attr(
        not(external_tests),
        ignore = "needs llvm-mc-22; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
    )]
    fn listings_are_what_llvm_mc_assembles() {
        // Needs llvm-mc-22: runs only with OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh
        // sets it), like the integration tests that need a tool (tests/common/mod.rs).
        if !cfg!(external_tests) {
            panic!("needs llvm-mc-22: build and run the tests with OFFLOAD_IMAGE_EXTERNAL_TESTS=1");
        }
        for (tag, listing) in [("openmp", OPENMP), ("hip", HIP)] {
            assert_eq!(ours(listing), reference(listing, tag), "{tag} listing");
        }
    }

    #[test]
    fn functions_are_16_byte_aligned_and_sized_without_padding() {
        let omp = assemble(OPENMP);
        assert_eq!(
            omp.functions,
            vec![
                Function {
                    name: ".omp_offloading.descriptor_reg",
                    offset: 0,
                    size: 0x1b
                },
                Function {
                    name: ".omp_offloading.descriptor_unreg",
                    offset: 0x20,
                    size: 0xf
                },
            ]
        );
        let hip = assemble(HIP);
        let offsets: Vec<u64> = hip.functions.iter().map(|f| f.offset).collect();
        assert_eq!(offsets, vec![0, 0x30, 0x40]);
        assert_eq!(hip.bytes.len(), 0x14c);
    }
}
