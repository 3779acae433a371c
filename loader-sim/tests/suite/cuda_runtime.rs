//! doctor judges the CUDA runtime an install uses against the driver (docs/CLI.md,
//! "CUDA runtime"): NVIDIA's minor-version compatibility table (CUDA Compatibility guide:
//! 13.x >= 580, 12.x >= 525, 11.x >= 450.80.02) gives the floor, whatever the fat binaries
//! hold; the driver hints name the driver that makes the whole install run.

use std::path::Path;

use offload_image::driver::{CudaVersion, RELEASES};

use crate::common::{self, json_lines, loader_sim, TempDir};

/// The GA driver of CUDA `major.0` (the release notes' table): the floor of `major.x`.
fn ga_driver(major: u8) -> String {
    RELEASES
        .iter()
        .find(|r| r.cuda == CudaVersion::new(major, 0))
        .unwrap()
        .min_driver
        .unwrap()
        .to_string()
}

/// doctor `--json` over `dir` for sm_89 with `driver`: its records and exit status.
fn doctor(dir: &Path, driver: &str) -> (Vec<serde_json::Value>, Option<i32>) {
    let out = loader_sim(&[
        "doctor".as_ref(),
        dir.as_os_str(),
        "--target".as_ref(),
        "sm_89".as_ref(),
        "--nvidia-driver".as_ref(),
        driver.as_ref(),
        "--json".as_ref(),
    ]);
    (json_lines(&out.stdout), out.status.code())
}

fn findings(records: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    records
        .iter()
        .filter(|r| r["finding"] == "cuda-runtime-driver")
        .collect()
}

/// A CUDA 12.8 install (libcudart.so.12, nvidia-cuda-runtime-cu12 12.8.90, PyTorch built
/// for 12.8) around a library whose fat binary loads on sm_89 with any CUDA 12 driver: on
/// driver 470 (CUDA 11.4) the runtime does not start; 525.60.13 (CUDA 12.0's) runs it.
#[test]
fn cuda_12_runtime_needs_525() {
    let dir = TempDir::new("cuda-runtime-12");
    std::fs::create_dir_all(dir.path("nvidia/cuda_runtime/lib")).unwrap();
    std::fs::create_dir_all(dir.path("nvidia_cuda_runtime_cu12-12.8.90.dist-info")).unwrap();
    std::fs::create_dir_all(dir.path("torch")).unwrap();
    dir.write("nvidia/cuda_runtime/lib/libcudart.so.12", b"");
    dir.write(
        "nvidia_cuda_runtime_cu12-12.8.90.dist-info/METADATA",
        b"Metadata-Version: 2.1\nName: nvidia-cuda-runtime-cu12\nVersion: 12.8.90\n",
    );
    dir.write(
        "torch/version.py",
        b"__version__ = '2.7.0+cu128'\ncuda: Optional[str] = '12.8'\n",
    );
    std::fs::copy(
        common::repo().join("tests/data/nvfatbin/files/libk.so"),
        dir.path("libk.so"),
    )
    .unwrap();
    let (records, status) = doctor(&dir.0, "470.42.01");
    let found = findings(&records);
    assert_eq!(found.len(), 1, "{records:?}");
    assert_eq!(found[0]["cuda_runtime"], "12.8");
    assert_eq!(found[0]["needs_driver"], ga_driver(12));
    assert_eq!(found[0]["needs_driver"], "525.60.13");
    assert_eq!(found[0]["seen"].as_array().unwrap().len(), 3, "{found:?}");
    // The fat binaries alone load: the runtime is what fails, and the exit status says so.
    assert_eq!(records[0]["status"], "ok");
    assert_eq!(status, Some(1));
    let (records, status) = doctor(&dir.0, "525.60.13");
    assert!(findings(&records).is_empty(), "{records:?}");
    assert_eq!(status, Some(0));
    // A CUDA 11 runtime's floor is 450.80.02, not 11.0's own 450.36.06.
    std::fs::rename(
        dir.path("nvidia/cuda_runtime/lib/libcudart.so.12"),
        dir.path("nvidia/cuda_runtime/lib/libcudart.so.11.0"),
    )
    .unwrap();
    std::fs::remove_dir_all(dir.path("nvidia_cuda_runtime_cu12-12.8.90.dist-info")).unwrap();
    std::fs::remove_dir_all(dir.path("torch")).unwrap();
    let (records, _) = doctor(&dir.0, "450.36.06");
    let found = findings(&records);
    assert_eq!(found.len(), 1, "{records:?}");
    assert_eq!(found[0]["needs_driver"], "450.80.02");
    assert!(findings(&doctor(&dir.0, "450.80.02").0).is_empty());
    // Without a CUDA device judged, no finding: the runtime is not used.
    let out = loader_sim(&[
        "doctor".as_ref(),
        dir.0.as_os_str(),
        "--target".as_ref(),
        "gfx90a".as_ref(),
        "--nvidia-driver".as_ref(),
        "450.36.06".as_ref(),
        "--json".as_ref(),
    ]);
    assert!(findings(&json_lines(&out.stdout)).is_empty());
}

/// NVIDIA's CUDA 13.5 runtime (`nvidia-cuda-runtime` 13.5.37 and its `libcudart.so.13`, from
/// the toolkit venv of scripts/fetch-nvidia-toolkit.sh) with its zstd-compressed
/// `libcudadevrt.a`: on driver 535.183.01 the fat binary alone would need 550.54.14, the
/// runtime needs 580 (CUDA 13.0's driver): the finding and the library's hint both name
/// 580.65.06. On 580.159.04 no finding, and the library loads.
#[test]
#[cfg_attr(
    not(external_tests),
    ignore = "needs NVIDIA's CUDA 13 runtime wheel; set OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (scripts/test.sh)"
)]
fn cuda_13_runtime_needs_580() {
    if !common::external("NVIDIA's CUDA 13 runtime wheel") {
        return;
    }
    let tree = common::cuda_tree();
    let site = tree
        .ancestors()
        .find(|p| p.ends_with("site-packages"))
        .map(Path::to_path_buf)
        .unwrap_or_else(|| common::external_dir().join("nvidia-venv/lib/python3.11/site-packages"));
    let dist = std::fs::read_dir(&site)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("nvidia_cuda_runtime-13.") && n.ends_with(".dist-info"))
        .expect("nvidia-cuda-runtime 13 installed");
    let dir = TempDir::new("cuda-runtime-13");
    std::fs::create_dir_all(dir.path(&dist)).unwrap();
    std::fs::create_dir_all(dir.path("nvidia/cu13/lib")).unwrap();
    std::fs::copy(
        site.join(&dist).join("METADATA"),
        dir.path(&format!("{dist}/METADATA")),
    )
    .unwrap();
    for lib in ["libcudart.so.13", "libcudadevrt.a"] {
        std::fs::copy(
            site.join("nvidia/cu13/lib").join(lib),
            dir.path(&format!("nvidia/cu13/lib/{lib}")),
        )
        .unwrap();
    }
    let (records, status) = doctor(&dir.0, "535.183.01");
    let found = findings(&records);
    assert_eq!(found.len(), 1, "{records:?}");
    assert!(found[0]["cuda_runtime"]
        .as_str()
        .unwrap()
        .starts_with("13."));
    assert_eq!(found[0]["needs_driver"], ga_driver(13));
    assert!(found[0]["needs_driver"]
        .as_str()
        .unwrap()
        .starts_with("580."));
    let devrt = records
        .iter()
        .find(|r| {
            r["file"]
                .as_str()
                .is_some_and(|f| f.ends_with("libcudadevrt.a"))
        })
        .unwrap();
    // Without the runtime, the fat binary's own need (zstd: 550.54.14); with it, 580.
    assert!(
        devrt["reason"].as_str().unwrap().contains("550.54.14"),
        "{devrt}"
    );
    let hint = devrt["hints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["kind"] == "driver")
        .unwrap();
    assert_eq!(hint["value"], ga_driver(13));
    assert_eq!(status, Some(1));
    // The table says it first.
    let out = loader_sim(&[
        "doctor".as_ref(),
        dir.0.as_os_str(),
        "--target".as_ref(),
        "sm_89".as_ref(),
        "--nvidia-driver".as_ref(),
        "535.183.01".as_ref(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("CUDA runtime: the CUDA 13."), "{text}");
    assert!(text.contains("NVIDIA driver 580.65.06 or later"), "{text}");
    let (records, status) = doctor(&dir.0, "580.159.04");
    assert!(findings(&records).is_empty(), "{records:?}");
    assert_eq!(status, Some(0), "{records:?}");
}
