//! The partition directory's small files besides segments: the log-start checkpoint, the
//! `mirror-mode` file, the mode history's load, and the clean-shutdown marker. Each is written
//! atomically (temporary file, fsync, rename); a missing file has a defined meaning.

use super::{classify, LogError, Mode, ModeHistory, RangeKind, MIRROR_CHECKPOINT};
use crate::format::Offset;
use crate::io::{self, Io, IoError, Op};
use std::path::{Path, PathBuf};

/// The log start offset a `delete_records` moved past its segment's base, made durable before
/// the call returns (Kafka keeps it in `log-start-offset-checkpoint`).
pub const LOG_START_CHECKPOINT: &str = "log-start-offset";

/// Reads the small file `path` whole if it exists. `ENOENT` alone means absent (`Ok(None)`);
/// any other failure is [`LogError::Unreadable`] naming the file, so that state is never
/// silently reset to what a missing file would mean (Kafka fails the log dir).
///
/// # Errors
/// [`LogError::Unreadable`].
pub(crate) fn read_if_present(io: &mut dyn Io, path: &Path) -> Result<Option<Vec<u8>>, LogError> {
    io::read_file_if_present(io, path).map_err(|source| LogError::Unreadable {
        file: path.to_path_buf(),
        source,
    })
}

/// The log start of a log whose first segment starts at `first_base` and which ends at `end`:
/// the checkpointed one, clamped to lie in between; without the file, the first segment's
/// base (as before any `delete_records`).
///
/// # Errors
/// [`LogError::Unreadable`] for a file that cannot be read and [`LogError::Corrupt`] for one
/// that does not hold an offset: falling back to the first base would make deleted records
/// readable again.
pub(super) fn checkpointed_log_start(
    io: &mut dyn Io,
    dir: &Path,
    first_base: Offset,
    end: Offset,
) -> Result<Offset, LogError> {
    let path = dir.join(LOG_START_CHECKPOINT);
    let Some(bytes) = read_if_present(io, &path)? else {
        return Ok(first_base);
    };
    let offset = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|t| t.trim().parse::<i64>().ok())
        .ok_or_else(|| LogError::Corrupt {
            file: path,
            what: "the log start checkpoint does not hold an offset".into(),
        })?;
    Ok(Offset(offset).clamp(first_base, end.max(first_base)))
}

/// Paused or Failed, persisted beside the history (absent: the newest range's mode).
pub const MIRROR_MODE_FILE: &str = "mirror-mode";

/// The mode a partition opens in: its newest range's, unless `mirror-mode` says Paused or
/// Failed (a damaged file is ignored: the range's mode is the safe reading).
///
/// # Errors
/// [`LogError::Unreadable`]: a Paused or Failed partition must not come back Mirroring
/// because its file could not be read.
pub(super) fn mode_of(
    io: &mut dyn Io,
    dir: &Path,
    history: &ModeHistory,
) -> Result<Mode, LogError> {
    let text = read_if_present(io, &dir.join(MIRROR_MODE_FILE))?
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    Ok(mode_from_files(history, text.as_deref()))
}

/// The mode of a partition whose history is `history` and whose `mirror-mode` file holds
/// `mirror_mode` (`None`: no file): the newest range's mode, unless the file says Paused or
/// Failed while mirroring.
#[must_use]
pub fn mode_from_files(history: &ModeHistory, mirror_mode: Option<&str>) -> Mode {
    let base = match history.last_kind() {
        RangeKind::Local => Mode::Local,
        RangeKind::Mirror(source) => Mode::Mirroring { source },
    };
    let Some(text) = mirror_mode else {
        return base;
    };
    match (text.split_once('\n'), &base) {
        (Some(("paused", _)), Mode::Mirroring { source }) => Mode::Paused {
            source: source.clone(),
        },
        (Some(("failed", reason)), Mode::Mirroring { .. }) => Mode::Failed {
            reason: reason.to_string(),
        },
        _ => base,
    }
}

/// The mode history of the log in `dir` ending at `end`: entries starting past the end (left by
/// a truncation a crash cut short) are dropped. A missing file means a log that never mirrored;
/// a damaged one fails the open (the history cannot be rebuilt from the batches).
pub(crate) fn load_history(
    io: &mut dyn Io,
    dir: &Path,
    end: Offset,
) -> Result<ModeHistory, LogError> {
    let path = dir.join(MIRROR_CHECKPOINT);
    let Some(bytes) = read_if_present(io, &path)? else {
        return Ok(ModeHistory::default());
    };
    let mut history =
        ModeHistory::decode(&String::from_utf8_lossy(&bytes)).map_err(|e| LogError::Corrupt {
            file: path.clone(),
            what: e.to_string(),
        })?;
    let before = history.entries().len();
    history.drop_after(end);
    if history.entries().len() != before {
        // Persist the trimmed history now: appends will reach those offsets again.
        io::write_file_atomically(io, dir, MIRROR_CHECKPOINT, history.encode().as_bytes())
            .map_err(classify)?;
    }
    Ok(history)
}

/// Removes `dir/name` durably (unlink, then an fsync of the directory: an unlink the
/// directory never recorded comes back after a power cut); a file already gone is fine.
pub(super) fn remove_durably(io: &mut dyn Io, dir: &Path, name: &str) -> Result<(), IoError> {
    unlink_if_present(io, dir.join(name))?;
    io::fsync_dir(io, dir)
}

/// Removes the snapshots named by `offsets` (best effort: one that cannot be removed is
/// skipped, as a missing one is), then makes the removals durable if there were any: a stale
/// snapshot back after a power cut would be loaded over records appended at its offset later.
pub(crate) fn remove_snapshots(
    io: &mut dyn Io,
    dir: &Path,
    offsets: impl IntoIterator<Item = Offset>,
) -> Result<(), IoError> {
    let mut others = Vec::new();
    let mut removed = false;
    for b in offsets {
        let path = dir.join(crate::producer_state::snapshot_file_name(b));
        removed |= io::run(io, Op::Unlink { path }, &mut others).is_ok_and(|c| c.result.is_ok());
    }
    if removed {
        io::fsync_dir(io, dir)?;
    }
    Ok(())
}

/// The snapshots Kafka's `removeStraySnapshots` deletes at load: every one not named by a
/// segment base, except the newest such if it lies past the last segment's base (the
/// snapshot a clean close writes at the log end).
#[must_use]
pub(super) fn stray_snapshots(bases: &[Offset], snapshots: &[Offset]) -> Vec<Offset> {
    let mut strays: Vec<Offset> = snapshots
        .iter()
        .copied()
        .filter(|s| !bases.contains(s))
        .collect();
    strays.sort_unstable();
    if let (Some(&newest), Some(&last_base)) = (strays.last(), bases.iter().max()) {
        if newest > last_base {
            strays.pop();
        }
    }
    strays
}

/// At load, as Kafka's `LogLoader`: deletes index files whose `.log` is gone and stray
/// snapshots ([`stray_snapshots`]), durably. Returns the directory's names after.
///
/// # Errors
/// An I/O failure listing the directory or making the removals durable.
pub(crate) fn tidy_partition_dir(io: &mut dyn Io, dir: &Path) -> Result<Vec<String>, IoError> {
    let names = io.list_dir(dir)?;
    let bases = crate::segment::offsets_named(&names, "log");
    let snapshots = crate::segment::offsets_named(&names, "snapshot");
    let mut others = Vec::new();
    let mut removed = false;
    for ext in ["index", "timeindex", "txnindex"] {
        for orphan in crate::segment::offsets_named(&names, ext)
            .into_iter()
            .filter(|o| !bases.contains(o))
        {
            let path = dir.join(format!("{:020}.{ext}", orphan.0));
            removed |=
                io::run(io, Op::Unlink { path }, &mut others).is_ok_and(|c| c.result.is_ok());
        }
    }
    if removed {
        io::fsync_dir(io, dir)?;
    }
    let strays = stray_snapshots(&bases, &snapshots);
    if strays.is_empty() && !removed {
        return Ok(names);
    }
    remove_snapshots(io, dir, strays)?;
    io.list_dir(dir)
}

/// Unlinks `path`; a file that is already gone is fine.
pub(super) fn unlink_if_present(io: &mut dyn Io, path: PathBuf) -> Result<(), IoError> {
    let mut others = Vec::new();
    match io::run(io, Op::Unlink { path }, &mut others).and_then(|c| c.result) {
        Ok(_)
        | Err(IoError::Os {
            errno: libc::ENOENT,
            ..
        }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The clean-shutdown marker in a partition directory (written by `close`, removed by `open`).
pub const CLEAN_SHUTDOWN_MARKER: &str = "clean-shutdown";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stray_snapshots_follow_kafkas_rule() {
        let o = |v: &[i64]| v.iter().map(|&x| Offset(x)).collect::<Vec<_>>();
        // Bases 0, 10, 20; snapshots at bases, between them, and past the last base.
        assert_eq!(
            stray_snapshots(&o(&[0, 10, 20]), &o(&[10, 15, 20, 25, 30])),
            o(&[15, 25]),
            "the newest stray past the last base stays"
        );
        assert_eq!(stray_snapshots(&o(&[0, 10]), &o(&[5, 10])), o(&[5]));
        assert!(stray_snapshots(&o(&[0, 10]), &o(&[10])).is_empty());
    }
}
