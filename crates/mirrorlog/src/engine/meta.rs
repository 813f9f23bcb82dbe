//! The data directory's `meta.properties`: the cluster it belongs to, written when an engine
//! with a cluster id first opens it, and checked by every later open (Kafka refuses to start a
//! broker on another cluster's log directory the same way, `InconsistentClusterIdException`).
//! An engine configured without a cluster id adopts the stored one.

use crate::api::EngineError;
use crate::io;
use std::io::Write;
use std::path::Path;

/// The file in the data directory (Kafka's name).
pub const META_PROPERTIES: &str = "meta.properties";

fn os(e: &std::io::Error) -> EngineError {
    EngineError::Io(io::IoError::from_errno(
        io::OpKind::Directory,
        e.raw_os_error().unwrap_or(libc::EIO),
    ))
}

/// The cluster id stored in `dir`, if any.
fn stored(dir: &Path) -> Result<Option<String>, EngineError> {
    let bytes = match std::fs::read(dir.join(META_PROPERTIES)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(os(&e)),
    };
    let unreadable = || EngineError::Config {
        name: "cluster.id",
        reason: format!(
            "{} is not a properties file with a cluster.id",
            dir.join(META_PROPERTIES).display()
        ),
    };
    let text = String::from_utf8(bytes).map_err(|_| unreadable())?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("cluster.id="))
        .map(|id| Some(id.to_string()))
        .ok_or_else(unreadable)
}

/// Checks `configured` against the id stored in `dir` and returns the id the engine runs with:
/// the stored one, else `configured` (then written, durably, if not empty).
///
/// # Errors
/// [`EngineError::ClusterIdMismatch`] when both exist and differ; [`EngineError::Config`] for
/// a damaged file; an I/O failure writing it.
pub(super) fn check_cluster_id(dir: &Path, configured: &str) -> Result<String, EngineError> {
    match stored(dir)? {
        Some(stored) if !configured.is_empty() && stored != configured => {
            Err(EngineError::ClusterIdMismatch {
                data_dir: dir.to_path_buf(),
                stored,
                configured: configured.to_string(),
            })
        }
        Some(stored) => Ok(stored),
        None if configured.is_empty() => Ok(String::new()),
        None => {
            let temp = dir.join(format!("{META_PROPERTIES}.tmp"));
            let write = || -> std::io::Result<()> {
                let mut f = std::fs::File::create(&temp)?;
                f.write_all(format!("version=0\ncluster.id={configured}\n").as_bytes())?;
                f.sync_all()?;
                std::fs::rename(&temp, dir.join(META_PROPERTIES))?;
                std::fs::File::open(dir)?.sync_all()
            };
            write().map_err(|e| os(&e))?;
            Ok(configured.to_string())
        }
    }
}
