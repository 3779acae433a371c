//! Issue 47: `select` on zstd fatbinary entries (`tests/data/nvfatbin/zstd_large/`, an sm_90
//! cubin of 339,696 bytes in six zstd blocks, made by nvcc and fatbinary 13.5) chooses as
//! cuobjdump lists them and checks the chosen entry as far as the driver's choice needs: a
//! damaged first block is a `damaged` record located as the library's decoder locates it;
//! damage inside a later block is seen only where the image is decoded whole (`--sha256`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{json_lines, loader_sim as run};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nvfatbin/zstd_large")
}

fn select(f: &Path, more: &[&str]) -> (Option<i32>, Vec<Value>) {
    let mut args = vec!["select", f.to_str().unwrap(), "--target", "sm_90", "--json"];
    args.extend_from_slice(more);
    let out = run(&args);
    (out.status.code(), json_lines(&out.stdout))
}

/// The first block of the sm_90 entry's frame: (where its body starts, where it ends), in
/// the file, read from the frame header as RFC 8878 lays it out (single segment, 4-byte
/// content size: 9 bytes, then a 3-byte block header).
fn first_block(data: &[u8], stream_at: usize) -> (usize, usize) {
    assert_eq!(
        &data[stream_at..stream_at + 5],
        &[0x28, 0xB5, 0x2F, 0xFD, 0xA0]
    );
    let at = stream_at + 9;
    let h = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], 0]);
    assert_eq!(h & 7, 4, "a compressed block, not the last");
    (at + 3, at + 3 + (h >> 3) as usize)
}

#[test]
fn zstd_entries_are_chosen_and_their_damage_reported_as_far_as_checked() {
    use offload_image::{units, ReadOptions};
    let file = fixture().join("zstd_large.fatbin");
    let data = std::fs::read(&file).unwrap();
    let manifest = std::fs::read_to_string(fixture().join("MANIFEST")).unwrap();
    let want_sha = manifest
        .lines()
        .find_map(|l| l.strip_prefix("zstd_large.2.sm_90.cubin "))
        .unwrap();
    let (code, records) = select(&file, &["--sha256"]);
    assert_eq!(code, Some(0));
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["selected"], "nvptx64-nvidia-cuda--sm_90");
    assert_eq!(records[0]["arch"], "sm_90");
    assert_eq!(records[0]["size"], 339_696);
    assert_eq!(records[0]["sha256"], want_sha);
    let (code, plain) = select(&file, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(plain[0]["selected"], records[0]["selected"]);
    assert_eq!(plain[0]["size"], records[0]["size"]);

    let read = ReadOptions::default();
    let unit = units(&data, &read).next().unwrap().unwrap();
    let open = unit.open(&read).unwrap();
    let image = open
        .images()
        .find(|i| i.target_id == Some("sm_90"))
        .unwrap();
    let e = image.encoded.unwrap();
    let (at, len) = (e.stream_at as usize, e.stream.len());
    let (body, end) = first_block(&data, at);
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));

    // A byte of the first block changed so that decoding fails inside it (the first such
    // byte, every 97th tried): reported where the library's decoder says.
    let (copy, want) = (body..end)
        .step_by(97)
        .find_map(|b| {
            let mut copy = data.clone();
            copy[b] ^= 0xFF;
            let err = offload_image::Encoded {
                stream: &copy[at..at + len],
                ..e
            }
            .decode(&read)
            .err()?;
            (err.offset() <= end as u64).then_some((copy, err))
        })
        .expect("a byte whose damage the decoder finds in the first block");
    let first = tmp.join("zstd-first-block-damaged.fatbin");
    std::fs::write(&first, &copy).unwrap();
    let (code, records) = select(&first, &[]);
    assert_eq!(code, Some(2));
    assert_eq!(records[0]["note"], "damaged");
    assert_eq!(records[0]["error"], want.kind().name());
    assert_eq!(records[0]["offset"], want.offset());

    // The last block's data zeroed: the header and first block are sound, so the default
    // check chooses the entry, as the driver would until it decodes it; --sha256 decodes
    // it whole and reports it.
    let mut late = data.clone();
    late[at + len - 200..at + len].fill(0);
    let late_file = tmp.join("zstd-last-block-damaged.fatbin");
    std::fs::write(&late_file, &late).unwrap();
    let (code, records) = select(&late_file, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(records[0]["selected"], "nvptx64-nvidia-cuda--sm_90");
    let (code, records) = select(&late_file, &["--sha256"]);
    assert_eq!(code, Some(2));
    assert_eq!(records[0]["note"], "damaged");
}
