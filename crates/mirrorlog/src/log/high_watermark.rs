//! The broker-managed high watermark kept across a reopen, as Kafka keeps it in
//! `replication-offset-checkpoint`: a broker doing its own replication sets it
//! ([`PartitionLog::set_high_watermark`]); the shard writes it on its timer when it changed
//! (Kafka's `replica.high.watermark.checkpoint.interval.ms`, 5 s; here every tick, at least
//! once a second) and a clean close writes it last. A reopen starts from the checkpointed value
//! (bounded by the log start and the durable end as every high watermark is), so a consumer
//! never sees records past what the broker had exposed before a restart. One entry in Kafka's
//! checkpoint format, in the partition's directory.
//!
//! Without the file the high watermark is the durable end, as for a log that never had one
//! managed; a file that cannot be read fails the open (`LogError::Unreadable`); a damaged one is
//! ignored with a warning (the durable end is the value a fresh leader starts from).

use super::recovery_point::write_partition_checkpoint;
use super::{classify, decode_recovery_point, read_if_present, LogError, PartitionLog};
use crate::format::Offset;
use crate::io::Io;
use std::path::Path;

/// The file, Kafka's name for it.
pub const HIGH_WATERMARK_CHECKPOINT: &str = "replication-offset-checkpoint";

/// The managed high watermark checkpointed in `dir`, if any.
///
/// # Errors
/// [`LogError::Unreadable`].
pub(super) fn load_high_watermark(io: &mut dyn Io, dir: &Path) -> Result<Option<Offset>, LogError> {
    let path = dir.join(HIGH_WATERMARK_CHECKPOINT);
    let Some(bytes) = read_if_present(io, &path)? else {
        return Ok(None);
    };
    let hw = decode_recovery_point(&String::from_utf8_lossy(&bytes));
    if hw.is_none() {
        tracing::warn!(file = %path.display(), "damaged high watermark checkpoint ignored");
    }
    Ok(hw)
}

impl PartitionLog {
    /// Writes the managed high watermark if it changed since the last write (nothing for a log
    /// whose high watermark is not managed). Returns whether it wrote.
    ///
    /// # Errors
    /// The write's failure (the previous checkpoint stays; the next call retries).
    pub fn checkpoint_high_watermark(&mut self, io: &mut dyn Io) -> Result<bool, LogError> {
        let Some(hw) = self.managed_high_watermark else {
            return Ok(false);
        };
        if self.high_watermark_checkpointed == Some(hw) {
            return Ok(false);
        }
        write_partition_checkpoint(io, &self.dir, HIGH_WATERMARK_CHECKPOINT, hw)
            .map_err(classify)?;
        self.high_watermark_checkpointed = Some(hw);
        Ok(true)
    }
}
