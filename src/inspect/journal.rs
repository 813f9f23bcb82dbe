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
