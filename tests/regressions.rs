//! Regression tests for inputs found by the mutation suite (`tests/mutation.rs`) and the
//! fuzz targets (`fuzz/`): each reproduces the input that failed and checks the fixed
//! behaviour.

mod common;

use common::read_corpus;
use offload_image::{for_each_unit, ReadOptions};

fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

/// Mutation suite, `driver/hip_rdc.o` mutant 492: a bundle section whose `sh_size` is 0.
/// `object` returns a detached empty slice for it, so the image lay "outside the input"
/// and had no offset. The empty image must sit at the section's offset (ELF `sh_offset`).
#[test]
fn empty_bundle_section_stays_inside_the_file() {
    let mut elf = read_corpus("driver/hip_rdc.o");
    let shoff = u64_at(&elf, 40) as usize;
    let shnum = u16::from_le_bytes([elf[60], elf[61]]) as usize;
    let shstrndx = u16::from_le_bytes([elf[62], elf[63]]) as usize;
    let strtab = u64_at(&elf, shoff + 64 * shstrndx + 24) as usize;
    let name_of = |elf: &[u8], i: usize| {
        let n = u32::from_le_bytes(elf[shoff + 64 * i..shoff + 64 * i + 4].try_into().unwrap());
        let s = &elf[strtab + n as usize..];
        String::from_utf8(s[..s.iter().position(|&b| b == 0).unwrap()].to_vec()).unwrap()
    };
    let target = (0..shnum)
        .find(|&i| name_of(&elf, i) == "__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx906")
        .expect("the gfx906 bundle section");
    let sh = shoff + 64 * target;
    let sh_offset = u64_at(&elf, sh + 24);
    assert_eq!(
        sh,
        10192 - 32,
        "the field the mutant zeroed is this section's sh_size"
    );
    elf[sh + 32..sh + 40].copy_from_slice(&0u64.to_le_bytes());
    let options = ReadOptions::default();
    let mut seen = Vec::new();
    for_each_unit(&elf, &options, |unit| {
        let open = unit.open(&options)?;
        for image in open.images() {
            seen.push((
                image.entry_id.unwrap().to_string(),
                open.offset_of(&image),
                image.size(),
            ));
        }
        Ok(())
    })
    .unwrap();
    let empty = seen
        .iter()
        .find(|(id, _, _)| id == "hip-amdgcn-amd-amdhsa--gfx906")
        .unwrap();
    assert_eq!(empty.1, Some(sh_offset));
    assert_eq!(empty.2, 0);
    assert!(seen.iter().all(|(_, off, _)| off.is_some()), "{seen:?}");
}
