//! `list` and `select` on an AOTriton archive (`tests/data/aks2/`, one of hipengine 0.8.3's
//! 12; issue 45): `list` gives every code object with the sha256, size and name that
//! `unpack.py` (Python's own lzma, by AOTriton's writer's layout) recorded in
//! `UNPACKED.txt`, and the target its ELF header names; `select` chooses, per kernel family
//! (the name without `--Arch_<processor>`), the code object built for the device, the
//! ones doctor counts as "for this device", and none for a gfx942.

use crate::common;

use std::process::Command;

use serde_json::Value;

fn run(args: &[&str]) -> (i32, Vec<Value>) {
    let file = common::repo().join("tests/data/aks2/attn_fwd_F_F_3_0_gfx11xx.aks2");
    let out = Command::new(common::ours())
        .args(args)
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.code().unwrap(), lines)
}

/// `UNPACKED.txt`: (sha256, size, name) per kernel, in stored order.
fn unpacked() -> Vec<(String, u64, String)> {
    std::fs::read_to_string(common::repo().join("tests/data/aks2/UNPACKED.txt"))
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(5, ' ').collect();
            (f[0].to_string(), f[1].parse().unwrap(), f[4].to_string())
        })
        .collect()
}

#[test]
fn list_gives_the_code_objects_aotriton_packed() {
    let want = unpacked();
    let (code, lines) = run(&["list"]);
    assert_eq!(code, 0);
    assert_eq!(lines.len(), want.len());
    assert_eq!(lines.len(), 72);
    for (i, (line, (sha, size, name))) in lines.iter().zip(&want).enumerate() {
        assert_eq!(line["format"], "aks2");
        assert_eq!(line["compression"], "xz");
        assert_eq!(line["bundle_index"], i);
        assert_eq!(line["sha256"], sha.as_str(), "{name}");
        assert_eq!(line["size"], *size);
        assert_eq!(line["kernel"], name.as_str());
        assert_eq!(line["image_kind"], "elf");
        // The ELF header's processor is the one the name ends with.
        let arch = name.rsplit("--Arch_").next().unwrap();
        assert_eq!(line["target_id"], arch, "{name}");
    }
}

#[test]
fn select_chooses_per_family_the_code_object_for_the_device() {
    let want = unpacked();
    for device in ["gfx1100", "gfx1151", "gfx942"] {
        let (code, lines) = run(&["select", "--target", device, "--sha256"]);
        let families: Vec<&str> = {
            let mut f: Vec<&str> = Vec::new();
            for (_, _, name) in &want {
                let family = name.rsplit_once("--Arch_").unwrap().0;
                if !f.contains(&family) {
                    f.push(family);
                }
            }
            f
        };
        assert_eq!(families.len(), 9);
        assert_eq!(lines.len(), families.len(), "{device}");
        for (i, (line, family)) in lines.iter().zip(&families).enumerate() {
            assert_eq!(line["bundle_index"], i);
            assert_eq!(line["target"], device);
            let expected = want
                .iter()
                .find(|(_, _, n)| *n == format!("{family}--Arch_{device}"));
            match expected {
                Some((sha, size, _)) => {
                    assert_eq!(line["sha256"], sha.as_str(), "{device} {family}");
                    assert_eq!(line["size"], *size);
                    assert_eq!(line["arch"], device);
                }
                None => assert!(line["selected"].is_null(), "{device}: {line}"),
            }
        }
        let chosen = lines.iter().filter(|l| !l["selected"].is_null()).count();
        let for_device = want
            .iter()
            .filter(|(_, _, n)| n.ends_with(&format!("--Arch_{device}")))
            .count();
        assert_eq!(chosen, for_device, "{device}: doctor's count");
        assert_eq!(code, if for_device == 0 { 1 } else { 0 }, "{device}");
    }
}
