//! The broker's own durable files (topics, producer-id blocks, transactions, mirrors) under
//! `DATA_DIR/broker/`: each a JSON document, replaced whole by write to a temporary file,
//! `fsync`, `rename`, `fsync` of the directory, so a crash leaves the old document or the new
//! one, never a mix. A document that does not parse is an error naming the file (the broker
//! refuses to start rather than guess).

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// A failure of the broker's own files.
#[derive(Debug)]
pub struct StoreError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for StoreError {}

/// One JSON document on disk.
#[derive(Debug, Clone)]
pub struct Document {
    path: PathBuf,
}

impl Document {
    /// The document `name` in `dir` (created if missing).
    pub fn new(dir: &Path, name: &str) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|e| StoreError {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(Document {
            path: dir.join(name),
        })
    }

    /// The stored value, or `None` when the file does not exist.
    pub fn load<T: DeserializeOwned>(&self) -> Result<Option<T>, StoreError> {
        match fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| StoreError {
                    path: self.path.clone(),
                    reason: format!("does not parse: {e}"),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Replaces the document with `value`, durably, before returning.
    pub fn store<T: Serialize>(&self, value: &T) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(value).map_err(|e| StoreError {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        let tmp = self.path.with_extension("tmp");
        let mut f = File::create(&tmp).map_err(|e| self.error(e))?;
        f.write_all(&bytes).map_err(|e| self.error(e))?;
        f.sync_all().map_err(|e| self.error(e))?;
        drop(f);
        fs::rename(&tmp, &self.path).map_err(|e| self.error(e))?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| self.error(e))?;
        }
        Ok(())
    }

    /// Whether the document exists.
    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    /// As [`Document::store`], the file readable by its owner alone (0600): for documents that
    /// hold secrets, even sealed.
    pub fn store_private<T: Serialize>(&self, value: &T) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(value).map_err(|e| StoreError {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        crate::storage::secrets::write_private(&self.path, &bytes).map_err(|e| self.error(e))
    }

    /// Removes the document, durably (its directory synced), before returning; a document
    /// already gone is no error.
    pub fn remove(&self) -> Result<(), StoreError> {
        match fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.error(e)),
        }
        if let Some(dir) = self.path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| self.error(e))?;
        }
        Ok(())
    }

    fn error(&self, e: std::io::Error) -> StoreError {
        StoreError {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_round_trips_and_a_torn_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let doc = Document::new(dir.path(), "x.json").unwrap();
        assert_eq!(doc.load::<Vec<u32>>().unwrap(), None);
        doc.store(&vec![1u32, 2, 3]).unwrap();
        assert_eq!(doc.load::<Vec<u32>>().unwrap(), Some(vec![1, 2, 3]));
        std::fs::write(dir.path().join("x.json"), b"[1, 2").unwrap();
        let e = doc.load::<Vec<u32>>().unwrap_err();
        assert!(e.reason.contains("does not parse"), "{e}");
    }
}
