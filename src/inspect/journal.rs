//! `verify` of a data directory's shard journals (`journal-N.mlj`) against its segments: each
//! journal must have a valid superblock, and every entry no commit record supersedes (its lsn
//! at or above the segment's newest record's `journal_lsn`) must start at or past that
//! record's durable end. An entry that starts below it names bytes the segment already
//! holds without superseding them, which the write protocol never leaves: replay would skip
//! it, but its presence means a checkpoint did not record what it covered. Entries of
//! partitions or segments that no longer exist, and of sealed segments, are superseded.

use super::partition::Problem;
use super::segment_data;
use crate::journal::{read_chain, shard_of};
use crate::segment::log_path;
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
                if block.lsn >= record.journal_lsn && e.start < record.data_len {
                    problems.push(Problem {
                        file: path.clone(),
                        position: Some(block.position),
                        what: format!(
                            "entry of lsn {} for {} [{}, {}) starts below the durable end {} of \
                             {} whose commit record does not supersede it (journal_lsn {})",
                            block.lsn,
                            e.key,
                            e.start,
                            e.end,
                            record.data_len,
                            segment.display(),
                            record.journal_lsn
                        ),
                    });
                }
            }
        }
    }
    problems
}
