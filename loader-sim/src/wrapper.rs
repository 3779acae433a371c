//! The wrapper object: an x86-64 ELF relocatable file laid out as LLVM 22's
//! `llvm-offload-wrapper` + `llc -relocation-model=pic` lays out the module of
//! `OffloadWrapper.cpp` (`REGISTRATION.md` §1, §3, §4), written with `object::write`: what
//! `loader-sim wrap` writes (`crate::cmd::wrap` checks the images and builds the
//! OffloadBinaries or the bundle it embeds).
//!
//! OpenMP (`__tgt_register_lib`):
//!
//! | section | contents |
//! |---|---|
//! | `.text.startup` (`AX`, 16) | `.omp_offloading.descriptor_reg`, `.omp_offloading.descriptor_unreg` ([`code::OPENMP`]) |
//! | `llvm_offload_entries` (`AR`, 8) | `__dummy.llvm_offload_entries`: zero bytes, so that the section, and with it `__start_`/`__stop_llvm_offload_entries`, exists in every link (retained, also under `--gc-sections`) |
//! | `.llvm.offloading` (`SHT_LLVM_OFFLOADING`, `A`, 8) | `.omp_offloading.device_image[.N]`: one OffloadBinary per image, each 8-aligned |
//! | `.data.rel.ro` (`WA`, 8) | `.omp_offloading.device_images` (`__tgt_device_image[N]`), `.omp_offloading.descriptor` (`__tgt_bin_desc`) |
//! | `.offload_arch_list` (`AR`, 1) | `__offload_arch[.N]`: the `arch` of every image, NUL-terminated, in image order (AMD's list a tool reads without relocations, `REGISTRATION.md` §2.2; retained, since no code refers to it) |
//! | `.init_array.101` (`INIT_ARRAY`, `WA`, 8) | the constructor, priority 101 |
//!
//! `ImageStart .. ImageEnd` of every device image is the **inner image** of its
//! OffloadBinary (`ImageOffset .. ImageOffset + ImageSize`), as LLVM 19 and 22 emit it;
//! the whole OffloadBinary is stored so that tools (`loader-sim list`, `clang-offload-packager`)
//! still find the triple and arch strings. The runtime therefore sees a raw code object and
//! identifies it by its ELF header; a runtime that gets a whole OffloadBinary unwraps it
//! to the same bytes (`offload_image::registration::view::unwrap_image`).
//!
//! HIP (`__hipRegisterFatBinary`):
//!
//! | section | contents |
//! |---|---|
//! | `.text.startup` (`AX`, 16) | `.hip.fatbin_reg`, `.hip.fatbin_unreg`, `.hip.globals_reg` ([`code::HIP`]) |
//! | `llvm_offload_entries` (`AR`, 8) | `__dummy.llvm_offload_entries` |
//! | `.hip_fatbin` (`A`, 4096) | `.fatbin_image`: the offload bundle (4096-aligned like clang's `.hip_fatbin`, so the bundle's 4096-aligned code objects are page-aligned in memory) |
//! | `.hipFatBinSegment` (`WA`, 8) | `.fatbin_wrapper`: `{0x48495046, 1, &.fatbin_image, null}` |
//! | `.bss` (`WA`, 8) | `.hip.binary_handle` |
//! | `.init_array.101` (`INIT_ARRAY`, `WA`, 8) | the constructor, priority 101 |
//!
//! Both add an empty `.note.GNU-stack` (the stack is not executable). Pointers in data are
//! `R_X86_64_64` relocations (the linker turns them into `R_X86_64_RELATIVE` in PIE
//! programs and shared libraries); the code uses `R_X86_64_PC32` / `R_X86_64_PLT32`. The
//! entry-table bounds are hidden undefined symbols the linker defines for the output
//! module, so each executable or shared library registers its own table. No unwind
//! information is emitted (LLVM's `.eh_frame` for these leaf-like functions only serves
//! debuggers).

mod code;
pub mod contents;

use std::collections::HashMap;
use std::mem::offset_of;

use object::elf;
use object::write::{Object, Relocation, SectionId, Symbol, SymbolId, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, FileFlags, RelocationFlags, SectionFlags, SectionKind,
    SymbolFlags, SymbolKind, SymbolScope,
};
use offload_image::raw::{
    FatbinWrapper, FATBIN_WRAPPER_SIZE, HIP_FATBIN_SECTION, HIP_WRAPPER_MAGIC, HIP_WRAPPER_SECTION,
    OFFLOADING_SECTION,
};
use offload_image::registration::abi::{
    RawBinDesc, RawDeviceImage, BIN_DESC_SIZE, DEVICE_IMAGE_SIZE, HIP_FATBIN_VERSION,
};

use code::{Fixup, Line};

/// `SHT_LLVM_OFFLOADING`.
const SHT_LLVM_OFFLOADING: elf::SectionType =
    elf::SectionType(offload_image::container::SHT_LLVM_OFFLOADING);
/// Name of the offload-entry section (LLVM 21+, every language; `REGISTRATION.md` §1.5).
const ENTRIES: &str = "llvm_offload_entries";
/// Alignment of `.hip_fatbin`.
const FATBIN_ALIGN: u64 = 4096;

/// One OpenMP device image: its OffloadBinary and where the image is inside it.
#[derive(Clone, Copy, Debug)]
pub struct OpenMpImage<'a> {
    /// The version-1 OffloadBinary holding the image.
    pub binary: &'a [u8],
    /// `ImageOffset` of its entry.
    pub image_offset: u64,
    /// `ImageSize` of its entry.
    pub image_size: u64,
    /// The `arch` string (for `.offload_arch_list`).
    pub arch: &'a str,
}

/// An object under construction, with its symbols by name.
struct Builder<'a> {
    obj: Object<'a>,
    symbols: HashMap<String, SymbolId>,
}

impl<'a> Builder<'a> {
    fn new() -> Self {
        let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        // `ELFOSABI_GNU`, as GNU as marks objects using `SHF_GNU_RETAIN`: GNU ld honours the
        // flag only in such files.
        obj.flags = FileFlags::Elf {
            os_abi: elf::ELFOSABI_GNU,
            abi_version: 0,
            e_flags: elf::FileFlags(0),
        };
        obj.add_file_symbol(b"loader-sim.wrapper.module".to_vec());
        Builder {
            obj,
            symbols: HashMap::new(),
        }
    }

    /// A section with explicit ELF type and flags.
    fn section(
        &mut self,
        name: &[u8],
        kind: SectionKind,
        sh_type: elf::SectionType,
        sh_flags: elf::SectionFlags,
    ) -> SectionId {
        let id = self.obj.add_section(Vec::new(), name.to_vec(), kind);
        self.obj.section_mut(id).flags = SectionFlags::Elf { sh_type, sh_flags };
        id
    }

    /// A local (`STB_LOCAL`) symbol defined at `value` in `section`.
    fn local(&mut self, name: &str, kind: SymbolKind, section: SectionId, value: u64, size: u64) {
        let id = self.obj.add_symbol(Symbol {
            name: name.as_bytes().to_vec(),
            value,
            size,
            kind,
            scope: SymbolScope::Compilation,
            weak: false,
            section: SymbolSection::Section(section),
            flags: SymbolFlags::None,
        });
        self.symbols.insert(name.to_string(), id);
    }

    /// An undefined global symbol (hidden: defined by the linker in the same module).
    fn undefined(&mut self, name: &str, hidden: bool) {
        let id = self.obj.add_symbol(Symbol {
            name: name.as_bytes().to_vec(),
            value: 0,
            size: 0,
            kind: SymbolKind::Unknown,
            scope: if hidden {
                SymbolScope::Linkage
            } else {
                SymbolScope::Dynamic
            },
            weak: false,
            section: SymbolSection::Undefined,
            flags: SymbolFlags::None,
        });
        self.symbols.insert(name.to_string(), id);
    }

    fn symbol(&self, name: &str) -> Result<SymbolId, String> {
        self.symbols
            .get(name)
            .copied()
            .ok_or_else(|| format!("internal error: no symbol {name}"))
    }

    fn reloc(
        &mut self,
        section: SectionId,
        offset: u64,
        symbol: &str,
        r_type: elf::RelocationType,
        addend: i64,
    ) -> Result<(), String> {
        let symbol = self.symbol(symbol)?;
        self.obj
            .add_relocation(
                section,
                Relocation {
                    offset,
                    symbol,
                    addend,
                    flags: RelocationFlags::Elf { r_type },
                },
            )
            .map_err(|e| format!("internal error: {e}"))
    }

    /// A pointer slot at `offset` of `section`: `R_X86_64_64` to `symbol + addend`.
    fn pointer(
        &mut self,
        section: SectionId,
        offset: u64,
        symbol: &str,
        addend: u64,
    ) -> Result<(), String> {
        let addend =
            i64::try_from(addend).map_err(|_| "image too large for a relocation".to_string())?;
        self.reloc(section, offset, symbol, elf::R_X86_64_64, addend)
    }

    /// `llvm_offload_entries` with its zero-length `__dummy`, and the hidden bounds. The
    /// section is retained (`SHF_GNU_RETAIN`, as LLVM main marks it; LLVM 22's `llc` does
    /// not): under `--gc-sections`, lld collects sections that only `__start_`/`__stop_`
    /// refer to, and the bounds would be undefined.
    fn entry_table(&mut self) {
        let s = self.section(
            ENTRIES.as_bytes(),
            SectionKind::ReadOnlyData,
            elf::SHT_PROGBITS,
            elf::SHF_ALLOC | elf::SHF_GNU_RETAIN,
        );
        self.obj.set_section_data(s, Vec::<u8>::new(), 8);
        self.local(&format!("__dummy.{ENTRIES}"), SymbolKind::Data, s, 0, 0);
        self.undefined(&format!("__start_{ENTRIES}"), true);
        self.undefined(&format!("__stop_{ENTRIES}"), true);
    }

    /// `.text.startup` with `listing`; every symbol it refers to must exist already,
    /// except runtime functions, which are declared here.
    fn text(&mut self, listing: &[Line]) -> Result<(), String> {
        let code = code::assemble(listing);
        let s = self.section(
            b".text.startup",
            SectionKind::Text,
            elf::SHT_PROGBITS,
            elf::SHF_ALLOC | elf::SHF_EXECINSTR,
        );
        self.obj.set_section_data(s, code.bytes, 16);
        for f in &code.functions {
            self.local(f.name, SymbolKind::Text, s, f.offset, f.size);
        }
        for r in &code.relocs {
            let name = r.fixup.symbol();
            let r_type = match r.fixup {
                Fixup::Pc32(_) => elf::R_X86_64_PC32,
                Fixup::Plt32(_) => elf::R_X86_64_PLT32,
            };
            if !self.symbols.contains_key(name) {
                self.undefined(name, false);
            }
            self.reloc(s, r.offset, name, r_type, -4)?;
        }
        Ok(())
    }

    /// `.init_array.101`: one pointer to `ctor` (the linker sorts it before the
    /// constructors of default priority, as `llvm.global_ctors` priority 101 does).
    fn constructor(&mut self, ctor: &str) -> Result<(), String> {
        let s = self.section(
            b".init_array.101",
            SectionKind::Data,
            elf::SHT_INIT_ARRAY,
            elf::SHF_ALLOC | elf::SHF_WRITE,
        );
        self.obj.set_section_data(s, vec![0u8; 8], 8);
        self.pointer(s, 0, ctor, 0)
    }

    fn finish(mut self) -> Result<Vec<u8>, String> {
        let s = self.section(
            b".note.GNU-stack",
            SectionKind::Other,
            elf::SHT_PROGBITS,
            elf::SectionFlags(0),
        );
        self.obj.set_section_data(s, Vec::<u8>::new(), 1);
        self.obj
            .write()
            .map_err(|e| format!("cannot write the object: {e}"))
    }
}

/// `.omp_offloading.device_image`, `.omp_offloading.device_image.1`, ...: LLVM's names for
/// the i-th image (`__offload_arch`, `__offload_arch.1`, ... likewise).
fn nth(base: &str, i: usize) -> String {
    if i == 0 {
        base.to_string()
    } else {
        format!("{base}.{i}")
    }
}

/// The OpenMP wrapper object of `images` (see the module documentation).
pub fn openmp(images: &[OpenMpImage<'_>]) -> Result<Vec<u8>, String> {
    let count = i32::try_from(images.len()).map_err(|_| "too many images".to_string())?;
    let mut b = Builder::new();
    b.entry_table();
    let placed = b.offloading(images);
    b.descriptor(images, &placed, count)?;
    b.arch_list(images);
    b.text(code::OPENMP)?;
    b.constructor(".omp_offloading.descriptor_reg")?;
    b.finish()
}

impl Builder<'_> {
    /// `.llvm.offloading`: the OffloadBinary of every image, each 8-aligned, and the names
    /// of their symbols.
    fn offloading(&mut self, images: &[OpenMpImage<'_>]) -> Vec<String> {
        let offloading = self.section(
            OFFLOADING_SECTION,
            SectionKind::ReadOnlyData,
            SHT_LLVM_OFFLOADING,
            elf::SHF_ALLOC,
        );
        let mut placed = Vec::with_capacity(images.len());
        for (i, image) in images.iter().enumerate() {
            let at = self.obj.append_section_data(offloading, image.binary, 8);
            let name = nth(".omp_offloading.device_image", i);
            self.local(
                &name,
                SymbolKind::Data,
                offloading,
                at,
                image.binary.len() as u64,
            );
            placed.push(name);
        }
        placed
    }

    /// `.data.rel.ro`: `__tgt_device_image[N]` and `__tgt_bin_desc` (of `count` images),
    /// pointers by relocation (`placed`: the images' symbols).
    fn descriptor(
        &mut self,
        images: &[OpenMpImage<'_>],
        placed: &[String],
        count: i32,
    ) -> Result<(), String> {
        let data = self.section(
            b".data.rel.ro",
            SectionKind::ReadOnlyDataWithRel,
            elf::SHT_PROGBITS,
            elf::SHF_ALLOC | elf::SHF_WRITE,
        );
        let array_len = DEVICE_IMAGE_SIZE * images.len() as u64;
        let mut bytes = vec![0u8; (array_len + BIN_DESC_SIZE) as usize];
        let desc_at = array_len;
        let n_at = desc_at as usize + offset_of!(RawBinDesc, num_device_images);
        bytes[n_at..n_at + 4].copy_from_slice(&count.to_le_bytes());
        self.obj.set_section_data(data, bytes, 8);
        self.local(
            ".omp_offloading.device_images",
            SymbolKind::Data,
            data,
            0,
            array_len,
        );
        self.local(
            ".omp_offloading.descriptor",
            SymbolKind::Data,
            data,
            desc_at,
            BIN_DESC_SIZE,
        );
        let (start, stop) = (format!("__start_{ENTRIES}"), format!("__stop_{ENTRIES}"));
        for (i, (image, name)) in images.iter().zip(placed).enumerate() {
            let at = DEVICE_IMAGE_SIZE * i as u64;
            let field = |f: usize| at + f as u64;
            let end = image
                .image_offset
                .checked_add(image.image_size)
                .ok_or("image size overflows")?;
            let fields = [
                (
                    offset_of!(RawDeviceImage, image_start),
                    name.as_str(),
                    image.image_offset,
                ),
                (offset_of!(RawDeviceImage, image_end), name, end),
                (offset_of!(RawDeviceImage, entries_begin), &start, 0),
                (offset_of!(RawDeviceImage, entries_end), &stop, 0),
            ];
            for (f, symbol, addend) in fields {
                self.pointer(data, field(f), symbol, addend)?;
            }
        }
        let field = |f: usize| desc_at + f as u64;
        let fields = [
            (
                offset_of!(RawBinDesc, device_images),
                ".omp_offloading.device_images",
            ),
            (offset_of!(RawBinDesc, host_entries_begin), &start),
            (offset_of!(RawBinDesc, host_entries_end), &stop),
        ];
        for (f, symbol) in fields {
            self.pointer(data, field(f), symbol, 0)?;
        }
        Ok(())
    }

    /// AMD's `.offload_arch_list`: the `arch` of every image, NUL-terminated.
    fn arch_list(&mut self, images: &[OpenMpImage<'_>]) {
        let list = self.section(
            b".offload_arch_list",
            SectionKind::ReadOnlyData,
            elf::SHT_PROGBITS,
            elf::SHF_ALLOC | elf::SHF_GNU_RETAIN,
        );
        for (i, image) in images.iter().enumerate() {
            let mut s = image.arch.as_bytes().to_vec();
            s.push(0);
            let at = self.obj.append_section_data(list, &s, 1);
            self.local(
                &nth("__offload_arch", i),
                SymbolKind::Data,
                list,
                at,
                s.len() as u64,
            );
        }
    }
}

/// The HIP wrapper object of the offload bundle `bundle` (see the module documentation).
pub fn hip(bundle: &[u8]) -> Result<Vec<u8>, String> {
    let mut b = Builder::new();
    b.entry_table();

    let fatbin = b.section(
        HIP_FATBIN_SECTION,
        SectionKind::ReadOnlyData,
        elf::SHT_PROGBITS,
        elf::SHF_ALLOC,
    );
    b.obj
        .set_section_data(fatbin, bundle.to_vec(), FATBIN_ALIGN);
    b.local(
        ".fatbin_image",
        SymbolKind::Data,
        fatbin,
        0,
        bundle.len() as u64,
    );

    let segment = b.section(
        HIP_WRAPPER_SECTION,
        SectionKind::ReadOnlyDataWithRel,
        elf::SHT_PROGBITS,
        elf::SHF_ALLOC | elf::SHF_WRITE,
    );
    let mut wrapper = vec![0u8; FATBIN_WRAPPER_SIZE as usize];
    let magic = offset_of!(FatbinWrapper, magic);
    let version = offset_of!(FatbinWrapper, version);
    wrapper[magic..magic + 4].copy_from_slice(&HIP_WRAPPER_MAGIC.to_le_bytes());
    wrapper[version..version + 4].copy_from_slice(&HIP_FATBIN_VERSION.to_le_bytes());
    b.obj.set_section_data(segment, wrapper, 8);
    b.local(
        ".fatbin_wrapper",
        SymbolKind::Data,
        segment,
        0,
        FATBIN_WRAPPER_SIZE,
    );
    b.pointer(
        segment,
        offset_of!(FatbinWrapper, binary) as u64,
        ".fatbin_image",
        0,
    )?;

    let bss = b.section(
        b".bss",
        SectionKind::UninitializedData,
        elf::SHT_NOBITS,
        elf::SHF_ALLOC | elf::SHF_WRITE,
    );
    let at = b.obj.append_section_bss(bss, 8, 8);
    b.local(".hip.binary_handle", SymbolKind::Data, bss, at, 8);

    b.text(code::HIP)?;
    b.constructor(".hip.fatbin_reg")?;
    b.finish()
}
