//! The recovery point (design.md §Recovery, Kafka's `recovery-point-offset-checkpoint`): the base offset of
//! the first segment an unclean open must scan. Every segment below it was sealed and synced,
//! its indexes and `.txnindex` written, and the producer state snapshotted at the recovery point
//! itself; recovery trusts those segments as a clean open does and scans only from here.
//!
//! Written (atomically, durably) after a roll whose sealed segment and derived files are all in
//! place, and after recovery; lowered *before* a truncation reopens a segment below it. A stale
//! (lower) point only makes recovery scan more, so a failure to advance it is not an error; a
//! point that names no segment, or whose snapshot does not load, is ignored (everything is
//! scanned).
//!
//! The file has Kafka's checkpoint format with one entry for the partition: version `0`, count
//! `1`, then `<topic> <partition> <offset>` (the names from the directory's).

use crate::format::Offset;
use crate::io::{self, Io, IoError};
use std::path::Path;

/// The recovery point's file in the partition directory.
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";

/// The recovery point of `dir`, if its file holds one. The point is derivable (the first
/// segment's base is always a correct, if slow, point): a file that cannot be read is logged
/// and taken as no point, so the next recovery scans everything rather than failing.
pub(crate) fn load_recovery_point(io: &mut dyn Io, dir: &Path) -> Option<Offset> {
    let path = dir.join(RECOVERY_POINT_CHECKPOINT);
    let bytes = match io::read_file_if_present(io, &path) {
        Ok(bytes) => bytes?,
        Err(error) => {
            tracing::warn!(file = %path.display(), %error,
                "recovery point unreadable: the next recovery scans every segment");
            return None;
        }
    };
    decode_recovery_point(&String::from_utf8_lossy(&bytes))
}

/// The offset of a recovery-point file's one entry.
#[must_use]
pub fn decode_recovery_point(text: &str) -> Option<Offset> {
    let mut lines = text.lines();
    if lines.next()? != "0" || lines.next()? != "1" {
        return None;
    }
    let offset = lines.next()?.rsplit(' ').next()?.parse::<i64>().ok()?;
    (offset >= 0 && lines.next().is_none_or(str::is_empty)).then_some(Offset(offset))
}

/// Writes `offset` as the recovery point of `dir`, atomically and durably.
pub(super) fn write_recovery_point(
    io: &mut dyn Io,
    dir: &Path,
    offset: Offset,
) -> Result<(), IoError> {
    write_partition_checkpoint(io, dir, RECOVERY_POINT_CHECKPOINT, offset)
}

/// Writes `dir/file` atomically and durably as a Kafka offset checkpoint holding one entry,
/// the partition's `offset` (the format [`decode_recovery_point`] reads).
pub(super) fn write_partition_checkpoint(
    io: &mut dyn Io,
    dir: &Path,
    file: &str,
    offset: Offset,
) -> Result<(), IoError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (topic, partition) = name
        .rsplit_once('-')
        .filter(|(t, p)| !t.is_empty() && p.parse::<u32>().is_ok())
        .unwrap_or((name.as_str(), "0"));
    let topic = if topic.is_empty() { "-" } else { topic };
    let text = format!("0\n1\n{topic} {partition} {}\n", offset.0);
    io::write_file_atomically(io, dir, file, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_has_kafkas_format_with_one_entry() {
        assert_eq!(
            decode_recovery_point("0\n1\norders 3 12345\n"),
            Some(Offset(12345))
        );
        assert_eq!(decode_recovery_point("0\n1\na-b-c 0 7"), Some(Offset(7)));
        for bad in [
            "",
            "1\n1\nt 0 5\n",
            "0\n2\nt 0 5\n",
            "0\n1\nt 0 x\n",
            "0\n1\nt 0 -4\n",
        ] {
            assert_eq!(decode_recovery_point(bad), None, "{bad:?}");
        }
    }
}
