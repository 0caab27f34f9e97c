//! The kernel log read for amdgpu reset lines: those logged while a test ran are evidence of
//! how it ended.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::testrun::classify;

pub(super) struct KernelLog {
    path: PathBuf,
    seen: usize,
    pub error: Option<String>,
}

impl KernelLog {
    pub fn open(path: &Path) -> KernelLog {
        let mut k = KernelLog {
            path: path.to_path_buf(),
            seen: 0,
            error: None,
        };
        match read_kernel_log(path) {
            Ok(lines) => k.seen = lines.len(),
            Err(e) => k.error = Some(e),
        }
        k
    }

    /// amdgpu reset lines logged since the last call.
    pub fn new_resets(&mut self) -> Vec<String> {
        if self.error.is_some() {
            return Vec::new();
        }
        let Ok(lines) = read_kernel_log(&self.path) else {
            return Vec::new();
        };
        let new: Vec<String> = lines
            .iter()
            .skip(self.seen)
            .filter(|l| classify::is_reset_line(l))
            .cloned()
            .collect();
        self.seen = lines.len();
        new
    }
}

/// Reads a kernel log without blocking: `/dev/kmsg` (one record per read) or a file.
pub fn read_kernel_log(path: &Path) -> Result<Vec<String>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 16384];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // /dev/kmsg: a record overwritten while reading (EPIPE); go on with the next.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::to_string)
        .collect())
}
