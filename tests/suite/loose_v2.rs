//! AMDGPU code objects of version 2 outside any container (issue 45): `LooseCode::find`
//! counts them apart, with the target ROCr's loader gives their `NT_AMD_HSA_ISA_VERSION`
//! note (`judge::v2_target`, ROCr `amd_hsa_code.cpp` `ConvertOldTargetNameToNew`). The host
//! object (`tests/data/loose_v2/make.sh`) holds, in `.rodata.kernels` at 0, 512 and 1024,
//! LLVM 14's v2 objects with notes `AMD:AMDGPU:8:0:3` and `AMD:AMDGPU:9:0:1`
//! (`llvm-readelf -n`) and a v4 gfx90a object.

use offload_image::host::HostFile;
use offload_image::judge::{v2_processor, v2_target, LooseCode};

#[test]
fn v2_objects_are_found_with_the_target_rocr_gives_them() {
    let data = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/loose_v2/host_v2.o"),
    )
    .unwrap();
    let host = HostFile::parse(&data).unwrap();
    let loose = LooseCode::find(&host);
    let section = host
        .sections()
        .iter()
        .find(|s| s.name == b".rodata.kernels")
        .unwrap();
    let v2: Vec<(&str, u64, Option<&str>)> = loose
        .v2
        .iter()
        .map(|(s, o, t)| (*s, *o, t.as_deref()))
        .collect();
    assert_eq!(
        v2,
        [
            (".rodata.kernels", section.offset, Some("gfx803")),
            (
                ".rodata.kernels",
                section.offset + 512,
                Some("gfx900:xnack+")
            ),
        ]
    );
    // The v4 object is an ordinary loose code object.
    assert_eq!(loose.objects.len(), 1);
    assert_eq!(loose.objects[0].1, section.offset + 1024);
    // Each v2 object read alone gives the same target.
    assert_eq!(
        v2_processor(&section.data[..512]).as_deref(),
        Some("gfx803")
    );
    assert_eq!(
        v2_processor(&section.data[1024..]),
        None,
        "v4 has no ISA note"
    );
}

/// ROCr's table: the ISAs up to gfx906 and gfx90c, the xnack steppings, nothing newer.
#[test]
fn v2_targets_follow_rocr() {
    assert_eq!(v2_target(8, 0, 4), Some("gfx803"));
    assert_eq!(v2_target(8, 0, 0), Some("gfx802"));
    assert_eq!(v2_target(9, 0, 7), Some("gfx906:sramecc-:xnack+"));
    assert_eq!(v2_target(9, 0, 12), Some("gfx90c:xnack-"));
    assert_eq!(v2_target(9, 0, 8), None);
    assert_eq!(v2_target(10, 1, 0), None);
}

/// A minimal ELF64 AMDGPU object of `EI_ABIVERSION` 0 whose one section is `note`, of type
/// `SHT_NOTE`.
fn elf_with_note(note: &[u8]) -> Vec<u8> {
    let mut e = vec![0u8; 64];
    e[..4].copy_from_slice(b"\x7fELF");
    e[4] = 2; // ELFCLASS64
    e[5] = 1; // little-endian
    e[6] = 1;
    e[7] = 64; // ELFOSABI_AMDGPU_HSA
    e[18] = 0xe0; // EM_AMDGPU
    let note_at = e.len() as u64;
    e.extend_from_slice(note);
    let shoff = e.len() as u64;
    e[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    e[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    e[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
    e.extend_from_slice(&[0; 64]); // the null section
    let mut sh = [0u8; 64];
    sh[4..8].copy_from_slice(&7u32.to_le_bytes()); // SHT_NOTE
    sh[0x18..0x20].copy_from_slice(&note_at.to_le_bytes());
    sh[0x20..0x28].copy_from_slice(&(note.len() as u64).to_le_bytes());
    e.extend_from_slice(&sh);
    e
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The `.note` of ROCr's own blit kernels, as Debian's libhsa-runtime64-1 5.2.3-3 carries
/// three of them in `.data` (code object version 1, from HSAIL's finalizer): its
/// `NT_AMD_HSA_ISA_VERSION` descriptor is 26 bytes and declares `AMDGPU` as 7, the seventh
/// being the note's padding. ROCr's `GetNoteString` reads the names from the mapped note
/// as declared, so it names `AMD:AMDGPU:7:0:0`, `8:0:0` and `9:0:0`: gfx700, gfx802 and
/// gfx900:xnack- by its table. The five notes are copied from the library's first object
/// (offset 0x14c0a0), the ISA's major version patched for the other two as theirs read.
#[test]
fn rocr_blit_kernel_notes_name_their_isa_as_rocr_reads_them() {
    let notes = |major: u8| {
        let mut n = Vec::new();
        n.extend(hex("040000000800000001000000414d44000100000000000000"));
        n.extend(hex(
            "040000000c00000002000000414d4400010000000000000001010200",
        ));
        let isa = format!(
            "040000001a00000003000000414d4400 04000700 0{major}000000 00000000 00000000 414d4400 414d44475055 0000"
        )
        .replace(' ', "");
        n.extend(hex(&isa));
        n.extend(hex(
            "040000002900000004000000414d4400190000000100000000000000414d44204853412052756e74696d652046696e616c697a657200000000000000",
        ));
        n.extend(hex(
            "040000001a00000005000000414d440016002d6873615f63616c6c5f636f6e76656e74696f6e3d3000250000",
        ));
        n
    };
    for (major, want) in [(7, "gfx700"), (8, "gfx802"), (9, "gfx900:xnack-")] {
        let elf = elf_with_note(&notes(major));
        assert_eq!(v2_processor(&elf).as_deref(), Some(want), "{major}");
    }
    // HSAIL's finalizer wrote them (their NT_AMD_HSA_HSAIL note): ROCr takes the xnack state
    // from e_flags (EF_AMDGPU_FEATURE_XNACK_V2, bit 0), on any processor.
    for (major, want) in [(7, "gfx700:xnack+"), (9, "gfx900:xnack+")] {
        let mut elf = elf_with_note(&notes(major));
        elf[0x30] = 1;
        assert_eq!(v2_processor(&elf).as_deref(), Some(want), "{major}");
    }
    // Without the HSAIL note (a compiler's object), e_flags do not count: the ISA's stepping
    // does (9:0:0 is xnack-).
    let mut compiler = notes(9);
    compiler.drain(24..24 + 28);
    let mut elf = elf_with_note(&compiler);
    elf[0x30] = 1;
    assert_eq!(v2_processor(&elf).as_deref(), Some("gfx900:xnack-"));
    // The section cut at the descriptor's end (no padding to read the seventh byte of
    // `AMDGPU` from): not read.
    let mut n = notes(9);
    n.truncate(24 + 28 + 12 + 4 + 26);
    assert_eq!(v2_processor(&elf_with_note(&n)), None);
}
