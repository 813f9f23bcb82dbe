//! `verify` of a data directory's shard journals (`journal-N.mlj`) against its segments: each
//! journal must have a valid superblock, and every entry written on top of a segment's newest
//! commit record (the same `segment_id` and record sequence: still to be replayed) must start
//! at or past that record's durable end. One that starts below it names bytes the record
//! already covers without having superseded them, which the write protocol never leaves.
//! Entries of partitions or segments that no longer exist, of sealed segments, and of older
//! records are superseded.

use super::partition::Problem;
use super::segment_data;
use crate::journal::{read_chain, shard_of};
use crate::segment::{log_path, ReplayEntry};
use std::path::Path;

/// The journal problems of the data directory `data_dir` (none when it holds no journal).
#[must_use]
pub fn verify_journals(data_dir: &Path) -> Vec<Problem> {
    let mut problems = Vec::new();
    let Ok(entries) = std::fs::read_dir(data_dir) else {
        return problems;
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| shard_of(n).is_some())
        .collect();
    names.sort();
    for name in names {
        let path = data_dir.join(&name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                problems.push(Problem {
                    file: path,
                    position: None,
                    what: format!("unreadable: {e}"),
                });
                continue;
            }
        };
        let chain = match read_chain(&bytes) {
            Ok(c) => c,
            Err(e) => {
                problems.push(Problem {
                    file: path,
                    position: None,
                    what: e.to_string(),
                });
                continue;
            }
        };
        for block in &chain.blocks {
            for e in &block.entries {
                let segment = log_path(&data_dir.join(e.key), e.segment_base);
                let Ok(file) = std::fs::read(&segment) else {
                    continue; // deleted since: superseded
                };
                let Some(record) = segment_data(&file, e.segment_base).record else {
                    continue; // sealed: superseded
                };
                let pending =
                    e.segment_id == record.segment_id && e.record_sequence == record.sequence;
                if pending && e.start < record.data_len {
                    problems.push(Problem {
                        file: path.clone(),
                        position: Some(block.position),
                        what: format!(
                            "entry of lsn {} for {} [{}, {}) starts below the durable end {} of \
                             {} whose commit record (sequence {}) it follows",
                            block.lsn,
                            e.key,
                            e.start,
                            e.end,
                            record.data_len,
                            segment.display(),
                            record.sequence
                        ),
                    });
                }
            }
        }
    }
    problems
}

/// The live blocks of a data directory's shard journals, read once for the segments of its
/// partitions.
#[derive(Debug, Default)]
pub struct Journals {
    loaded: Vec<crate::journal::Loaded>,
}

impl Journals {
    /// Reads the live part of every `journal-N.mlj` in `data_dir` (superblocks, then the chain;
    /// one that cannot be read contributes nothing: `verify` reports it).
    #[must_use]
    pub fn read(data_dir: &Path) -> Self {
        use std::os::unix::fs::FileExt as _;
        let mut loaded = Vec::new();
        let Ok(dir) = std::fs::read_dir(data_dir) else {
            return Journals { loaded };
        };
        for e in dir.filter_map(Result::ok) {
            if shard_of(&e.file_name().to_string_lossy()).is_none() {
                continue;
            }
            let Ok(file) = std::fs::File::open(e.path()) else {
                continue;
            };
            let size = file.metadata().map_or(0, |m| m.len());
            let mut read = |position: u64, len: usize| -> Result<Vec<u8>, String> {
                let mut buf = vec![0u8; len];
                let mut got = 0;
                while got < len {
                    match file.read_at(&mut buf[got..], position + got as u64) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) => return Err(e.to_string()),
                    }
                }
                buf.truncate(got);
                Ok(buf)
            };
            if let Ok(Some(l)) = crate::journal::load_with(size, &mut read) {
                loaded.push(l);
            }
        }
        Journals { loaded }
    }
}

/// Every live entry of `journals` for the partition directory named `key`.
#[must_use]
pub fn entries_for<'a>(journals: &'a Journals, key: &str) -> Vec<ReplayEntry<'a>> {
    let mut out = Vec::new();
    for l in &journals.loaded {
        for (position, bytes) in &l.blocks {
            let Ok(block) = crate::journal::BlockView::decode(bytes, *position) else {
                continue;
            };
            for entry in block.entries {
                if entry.key == key {
                    out.push(ReplayEntry {
                        lsn: block.lsn,
                        entry,
                    });
                }
            }
        }
    }
    out
}
