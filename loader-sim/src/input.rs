//! Reading input files: memory-mapped, so that only the pages a command touches are read.

use std::fs::File;
use std::path::Path;

use crate::Failure;

/// The bytes of an input file.
pub struct Input {
    map: Option<loader_sim_rt::mapping::Mmap>,
}

impl Input {
    /// Maps `path` read-only (an empty file is not mapped).
    pub fn open(path: &Path) -> Result<Self, Failure> {
        let file =
            File::open(path).map_err(|e| Failure::file(path, format!("cannot open: {e}")))?;
        let len = file
            .metadata()
            .map_err(|e| Failure::file(path, format!("cannot stat: {e}")))?
            .len();
        if len == 0 {
            return Ok(Input { map: None });
        }
        let map = loader_sim_rt::mapping::map_file(&file)
            .map_err(|e| Failure::file(path, format!("cannot map: {e}")))?;
        Ok(Input { map: Some(map) })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}
