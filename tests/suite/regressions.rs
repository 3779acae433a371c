//! Regression tests for inputs found by the mutation suite (`tests/suite/mutation.rs`) and the
//! fuzz targets (`fuzz/`): each reproduces the input that failed and checks the fixed
//! behaviour.

use crate::common;

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

/// Fuzz target `roundtrip`, crash-21af1471: the OffloadBinary writer wrote a string key
/// that is not UTF-8 (`[0x2D, 0xB8]`), which the reader refuses ("string key is not valid
/// UTF-8"): the writer produced a file its own reader cannot read. The writer now refuses
/// such keys; a UTF-8 key with the same bytes around it still round-trips.
#[cfg(feature = "std")]
#[test]
fn offload_binary_writer_refuses_keys_the_reader_refuses() {
    use offload_image::offload_binary::OffloadBinary;
    use offload_image::write::offload_binary::{v1_to_vec, v2_to_vec, OffloadImage};
    use offload_image::{ErrorKind, Limits};

    let bad: [(&[u8], &[u8]); 1] = [(&[0x2D, 0xB8], b"")];
    let image = OffloadImage {
        image_kind: 0xFF54,
        offload_kind: 0xF7FF,
        flags: 3_103_731_149,
        strings: &bad,
        image: b"",
    };
    for r in [v2_to_vec(&[image]), v1_to_vec(&image)] {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed);
        assert_eq!(e.what(), "OffloadBinary string key is not valid UTF-8");
    }
    let good: [(&[u8], &[u8]); 1] = [("-\u{b8}".as_bytes(), b"")];
    let image = OffloadImage {
        strings: &good,
        ..image
    };
    let v2 = v2_to_vec(&[image]).unwrap();
    let b = OffloadBinary::parse(&v2, &Limits::DEFAULT).unwrap();
    let e = b.entries().next().unwrap();
    assert_eq!(
        e.strings.iter().collect::<Vec<_>>(),
        vec![("-\u{b8}", &b""[..])]
    );
    assert_eq!(
        (e.image_kind, e.offload_kind, e.flags),
        (0xFF54, 0xF7FF, 3_103_731_149)
    );
}
