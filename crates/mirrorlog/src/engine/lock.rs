//! The data directory's `.lock`: held exclusively (`flock`) while an engine is open, so that a
//! second engine, in this process or another, cannot open the same partitions.

use crate::api::EngineError;
use crate::io::{self};

/// The lock file in the data directory (Kafka names its own the same).
pub const LOCK_FILE: &str = ".lock";

/// Takes the data directory's lock, or says who cannot have it.
pub(super) fn lock_data_dir(dir: &std::path::Path) -> Result<std::fs::File, EngineError> {
    let os = |e: std::io::Error| {
        EngineError::Io(io::IoError::from_errno(
            io::OpKind::Directory,
            e.raw_os_error().unwrap_or(libc::EIO),
        ))
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(os)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(EngineError::DataDirLocked(dir.to_path_buf()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(os(e)),
    }
}
