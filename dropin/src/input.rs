//! How the tools get the bytes of their input files.
//!
//! The library has no `unsafe` code, so it cannot memory-map files itself. A program that
//! can (`loader-sim` maps through its FFI crate) passes a [`MapFile`] to
//! [`crate::bundler::run_with`]; by default inputs are read into memory with
//! [`read_file`].

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The bytes of an open input file, as the embedding program supplies them.
pub trait MappedInput {
    /// The file's bytes.
    fn bytes(&self) -> &[u8];

    /// Says that `part` (a slice of [`MappedInput::bytes`]) has been written out and will
    /// not be read again, so a memory map may drop its pages. Does nothing by default.
    fn release(&self, part: &[u8]) {
        let _ = part;
    }
}

impl MappedInput for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// Opens an input file: a memory map, or its bytes read into memory ([`read_file`]).
pub type MapFile = fn(&File) -> std::io::Result<Box<dyn MappedInput>>;

/// A [`MapFile`] that reads the whole file into memory ([`read_open`]: a regular file,
/// its size reserved fallibly).
pub fn read_file(file: &File) -> std::io::Result<Box<dyn MappedInput>> {
    read_open(file).map(|v| Box::new(v) as Box<dyn MappedInput>)
}

/// What a file of type `t` is, in words (`"a FIFO"`, `"a character device"`, ...).
pub fn file_type_name(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading as an input file: only a regular file (symbolic links
/// followed); the main commands of `loader-sim` open theirs with it too. The open does not
/// block (`O_NONBLOCK`: a FIFO without a writer would
/// otherwise hang it), and anything but a regular file (a FIFO, a device, a socket, a
/// directory) is an error of kind `InvalidInput` saying what it is, before anything is
/// read.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // No effect on a regular file's reads; keeps the open of a FIFO from blocking.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", file_type_name(&kind)),
        ));
    }
    Ok(file)
}

/// Reads the input file `path` whole, as the main commands open theirs ([`open_regular`]):
/// a FIFO, a device, a socket or a directory is refused at once, before anything is read
/// (issue 43: `-input=FIFO` hung the bundler and `--image=file=/dev/zero` read until memory
/// ran out); the file's size is reserved fallibly, so a file larger than the memory the
/// process may take is an error (`OutOfMemory`, "cannot hold N bytes in memory"), never an
/// abort.
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    read_open(&open_regular(path)?)
}

/// [`read_regular`] of an open file (refused unless it is a regular file).
pub fn read_open(file: &File) -> std::io::Result<Vec<u8>> {
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", file_type_name(&kind)),
        ));
    }
    let len = meta.len();
    let too_big = || {
        std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!("cannot hold {len} bytes in memory"),
        )
    };
    let n = usize::try_from(len).map_err(|_| too_big())?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| too_big())?;
    // Read what the size says: a file that grows meanwhile is read up to it.
    file.take(len).read_to_end(&mut v)?;
    if v.len() != n {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "the file became shorter while it was read ({len} bytes when opened, {} read)",
                v.len()
            ),
        ));
    }
    Ok(v)
}

/// Standard input read whole (`-` as an input), growing its buffer fallibly: an input
/// larger than the memory the process may take is an error, never an abort.
pub fn read_stdin() -> std::io::Result<Vec<u8>> {
    let mut v: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut stdin = std::io::stdin().lock();
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => return Ok(v),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        v.try_reserve(n).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!(
                    "cannot hold more than {} bytes of standard input in memory",
                    v.len()
                ),
            )
        })?;
        v.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
}

/// True when `part` lies inside `whole` (compared by address).
pub(crate) fn contains(whole: &[u8], part: &[u8]) -> bool {
    let (w, p) = (whole.as_ptr() as usize, part.as_ptr() as usize);
    p >= w && p.saturating_add(part.len()) <= w.saturating_add(whole.len())
}
