//! Open-time replay of the journals: before any partition of the data directory
//! opens, every journal entry that continues a segment's durable end is written into that
//! segment with a new commit record, synced (`segment::replay_journal`: validated as whole
//! batches through the one scanner; an entry that does not continue the end, or whose bytes do
//! not validate, was never acknowledged and is left). Afterwards the segments alone describe
//! everything acknowledged, and the ordinary open or recovery runs on them; the shard's
//! journal then starts afresh above every lsn the old file may hold.
//!
//! A shard replays its own journal, and the journals of shards the engine no longer runs
//! (`orphans`: the engine hands each to one shard), which it then deletes. A partition's live
//! entries are in one journal only: each open replays every journal before any partition
//! writes again, and a partition is served by one shard while the engine runs.

use super::Shard;
use crate::api::{EngineError, PartitionConfig, TopicPartition, PARTITION_CONFIG_FILE};
use crate::format::Offset;
use crate::io::{self, Op};
use crate::journal::{self, JournalWriter};
use crate::segment::{replay_journal, ReplayEntry, ReplaySync};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a shard's journal replay did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalReplay {
    /// Journal files read.
    pub journals: usize,
    /// Live blocks found in them.
    pub blocks: usize,
    /// Entries written into segments.
    pub entries_applied: usize,
    /// Segments that got entries.
    pub segments: usize,
}

impl Shard {
    /// Replays `orphans` and this shard's own journal, then starts the journal afresh (none
    /// when `journal_bytes` is 0). Runs once, before any partition opens or is created; later
    /// calls do nothing.
    ///
    /// # Errors
    /// An I/O failure reading a journal, replaying into a segment or creating the new journal:
    /// the shard must not serve partitions whose acknowledged bytes it could not restore.
    pub(super) fn start_journal(
        &mut self,
        orphans: &[PathBuf],
    ) -> Result<JournalReplay, EngineError> {
        let mut report = JournalReplay::default();
        if self.journal.started {
            return Ok(report);
        }
        let span = tracing::info_span!("journal_replay", shard = self.config.index);
        let _enter = span.enter();
        let own = self
            .config
            .data_dir
            .join(journal::file_name(self.config.index));
        let mut first_lsn = 1;
        for path in orphans.iter().chain(std::iter::once(&own)) {
            let Some(loaded) = journal::load(&mut self.io, path)? else {
                continue;
            };
            report.journals += 1;
            report.blocks += loaded.blocks.len();
            if path == &own {
                first_lsn = loaded.lsn_floor_for_next();
            }
            // The blocks were checked whole when read: decoding them again cannot fail.
            let views = loaded.views().unwrap_or_default();
            // Per partition and segment, every entry with its block's lsn.
            let mut by_segment: BTreeMap<(&str, Offset), Vec<ReplayEntry<'_>>> = BTreeMap::new();
            for block in &views {
                for entry in &block.entries {
                    by_segment
                        .entry((entry.key, entry.segment_base))
                        .or_default()
                        .push(ReplayEntry {
                            lsn: block.lsn,
                            entry: *entry,
                        });
                }
            }
            for ((key, base), entries) in &by_segment {
                // A key is a partition directory's name; anything else is skipped (a journal
                // never names another path).
                if TopicPartition::from_dir_name(key).is_none_or(|tp| tp.dir_name() != *key) {
                    tracing::warn!(journal = %path.display(), key, "journal entry for no partition directory: skipped");
                    continue;
                }
                let dir = self.config.data_dir.join(key);
                let segment_bytes = self.segment_bytes_of(&dir);
                let replayed = replay_journal(
                    &mut self.io,
                    &dir,
                    *base,
                    segment_bytes,
                    entries,
                    ReplaySync::Caller,
                )
                .map_err(|e| EngineError::Log {
                    partition: TopicPartition::from_dir_name(key)
                        .unwrap_or_else(|| TopicPartition::new(key, 0)),
                    source: crate::log::LogError::from(e),
                })?;
                if replayed.applied > 0 {
                    report.entries_applied += replayed.applied;
                    report.segments += 1;
                }
                if let Some(why) = replayed.stopped {
                    tracing::info!(
                        partition = key,
                        segment = base.0,
                        why,
                        "journal replay stopped at an entry never acknowledged"
                    );
                }
            }
        }
        if report.segments > 0 {
            // What the replays wrote, durable at once: one sync, not one per segment (an
            // unclean open of 10,000 partitions), before any journal is discarded.
            crate::io::Io::syncfs(&mut self.io, &self.config.data_dir)?;
        }
        for orphan in orphans {
            self.io_unlink(orphan)?;
        }
        if self.config.journal_bytes > 0 {
            let writer = JournalWriter::create(
                &mut self.io,
                &own,
                self.config.index as u32,
                self.config.journal_bytes,
                first_lsn,
            )
            .map_err(|e| match e {
                journal::JournalWriteError::Io(e) => EngineError::Io(e),
                journal::JournalWriteError::Refused(r) => EngineError::Config {
                    name: "journal.bytes",
                    reason: r.to_string(),
                },
            })?;
            self.journal.writer = Some(writer);
        } else {
            // No journal any more: what the old one held is in the segments now.
            self.io_unlink(&own)?;
        }
        self.journal.started = true;
        tracing::info!(
            journals = report.journals,
            blocks = report.blocks,
            entries = report.entries_applied,
            segments = report.segments,
            "journal replayed"
        );
        Ok(report)
    }

    /// The partition's `segment.bytes` (where its segments' commit slots lie), from its
    /// `partition.config`, or the default (a partition created before the file existed; one
    /// whose file cannot be read fails at its open anyway).
    fn segment_bytes_of(&mut self, dir: &Path) -> u64 {
        crate::log::read_if_present(&mut self.io, &dir.join(PARTITION_CONFIG_FILE))
            .ok()
            .flatten()
            .and_then(|bytes| PartitionConfig::decode(&String::from_utf8_lossy(&bytes)).ok())
            .unwrap_or_default()
            .log_config()
            .segment
            .segment_bytes
    }

    /// Removes `path` if it is there, durably.
    fn io_unlink(&mut self, path: &Path) -> Result<(), EngineError> {
        let Some(dir) = path.parent() else {
            return Ok(());
        };
        let done = io::run(
            &mut self.io,
            Op::Unlink {
                path: path.to_path_buf(),
            },
            &mut Vec::new(),
        )?;
        match done.result {
            Ok(_) => io::fsync_dir(&mut self.io, dir)?,
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }
}
