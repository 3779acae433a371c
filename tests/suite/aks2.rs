//! AOTriton `.aks2` archives (`FORMATS.md` §12) on a real one: `tests/data/aks2/
//! attn_fwd_F_F_3_0_gfx11xx.aks2`, one of the 12 of hipengine 0.8.3 (its README says where
//! it was taken from). Every kernel's name, sizes and code object (by sha256) are those
//! `unpack.py` gives, which unpacks by AOTriton's writer's layout with Python's own lzma
//! (`UNPACKED.txt`); each code object's ELF header names the processor its name ends with.

use crate::common::sha256;
use offload_image::aks2::Aks2;
use offload_image::image::Image;
use offload_image::{identify, ErrorKind, Limits, Target};

fn file(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/aks2")
            .join(name),
    )
    .unwrap()
}

#[test]
fn kernels_are_those_aotriton_packed() {
    let data = file("attn_fwd_F_F_3_0_gfx11xx.aks2");
    let archive = Aks2::parse(&data, &Limits::default()).unwrap();
    let want = String::from_utf8(file("UNPACKED.txt")).unwrap();
    let want: Vec<Vec<&str>> = want.lines().map(|l| l.splitn(5, ' ').collect()).collect();
    assert_eq!(archive.kernels.len(), want.len());
    assert_eq!(want.len(), 72);
    for (k, w) in archive.kernels.iter().zip(&want) {
        let code = archive.code_object(k);
        assert_eq!(sha256(code), w[0], "{}", k.name);
        assert_eq!(code.len().to_string(), w[1]);
        assert_eq!(k.shared_memory_size.to_string(), w[2]);
        assert_eq!(k.block_threads.to_string(), w[3]);
        assert_eq!(k.name, w[4]);
        // The ELF header names the processor the name ends with.
        let id = identify(&Image::from_elf(0, code));
        let arch = k.name.rsplit("--Arch_").next().unwrap();
        match id.target {
            Target::Amdgpu(t) => assert_eq!(t.processor.name, arch, "{}", k.name),
            other => panic!("{}: {other:?}", k.name),
        }
    }
}

#[test]
fn damaged_archives_are_refused_where_they_are_wrong() {
    let data = file("attn_fwd_F_F_3_0_gfx11xx.aks2");
    let err = |d: &[u8]| {
        let e = Aks2::parse(d, &Limits::default()).unwrap_err();
        (e.kind(), e.offset())
    };
    // A claimed size one byte short: the stream decodes past it.
    let mut short = data.clone();
    let total = u32::from_le_bytes(short[4..8].try_into().unwrap());
    short[4..8].copy_from_slice(&(total - 1).to_le_bytes());
    assert_eq!(err(&short), (ErrorKind::Decompress, 16));
    // One byte long: the body ends before it.
    let mut long = data.clone();
    long[4..8].copy_from_slice(&(total + 1).to_le_bytes());
    assert_eq!(err(&long), (ErrorKind::SizeMismatch, 4));
    // A directory size past the body.
    let mut dir = data.clone();
    dir[12..16].copy_from_slice(&(total + 1).to_le_bytes());
    assert_eq!(err(&dir), (ErrorKind::SizeMismatch, 12));
    // A directory one byte shorter than its entries.
    let mut dir = data.clone();
    let d = u32::from_le_bytes(dir[12..16].try_into().unwrap());
    dir[12..16].copy_from_slice(&(d - 1).to_le_bytes());
    assert_eq!(err(&dir).0, ErrorKind::Malformed);
    // A truncated stream.
    assert_eq!(err(&data[..data.len() / 2]), (ErrorKind::Decompress, 16));
    // The kernel count over the limit.
    let limits = Limits {
        max_entries: 10,
        ..Limits::default()
    };
    let e = Aks2::parse(&data, &limits).unwrap_err();
    assert_eq!((e.kind(), e.offset()), (ErrorKind::LimitExceeded, 8));
}

/// `Aks2::families` groups the kernels by name without `--Arch_<processor>` (9 families of
/// 8 processors in the test archive, per `UNPACKED.txt`), and choosing in a family for a
/// device gives the code object whose name ends with that device's processor.
#[test]
fn families_give_the_code_object_for_each_device() {
    use offload_image::aks2::kernel_family;
    use offload_image::{choose, Device, SelectOptions};
    let data = file("attn_fwd_F_F_3_0_gfx11xx.aks2");
    let archive = Aks2::parse(&data, &Limits::default()).unwrap();
    let want = String::from_utf8(file("UNPACKED.txt")).unwrap();
    let want: Vec<(&str, &str)> = want
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(5, ' ').collect();
            (f[0], f[4])
        })
        .collect();
    let families = archive.families();
    assert_eq!(families.len(), 9);
    let devices = [
        Device::parse("gfx1100").unwrap(),
        Device::parse("gfx1153").unwrap(),
        Device::parse("gfx942").unwrap(),
    ];
    for (family, members) in &families {
        assert_eq!(members.len(), 8, "{family}");
        for &i in members {
            assert_eq!(kernel_family(&archive.kernels[i].name), *family);
        }
        let images: Vec<_> = members
            .iter()
            .map(|&i| offload_image::judge::aks2_image(&archive, i).unwrap())
            .collect();
        let choices = choose(images.iter().copied(), &devices, &SelectOptions::default());
        for (device, choice) in ["gfx1100", "gfx1153", "gfx942"].iter().zip(&choices) {
            let name = format!("{family}--Arch_{device}");
            let expected = want.iter().find(|(_, n)| *n == name).map(|(sha, _)| *sha);
            let got = choice
                .chosen()
                .map(|i| sha256(archive.code_object(&archive.kernels[i])));
            assert_eq!(got.as_deref(), expected, "{name}");
        }
    }
    assert!(offload_image::judge::aks2_image(&archive, archive.kernels.len()).is_none());
}
