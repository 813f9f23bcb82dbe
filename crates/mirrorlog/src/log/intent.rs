//! The segment intent: the one file that makes reopening a sealed segment (by a truncation or a
//! clean open) crash-safe. Written before the reopen, cleared after; a crash in between is
//! finished by the next open or recovery.

use super::{classify, remove_durably, LogError};
use crate::format::Offset;
use crate::io::{self, Io, IoError, Op, OpenOptions};
use crate::segment::{self};
use std::path::Path;

/// Written (synced, atomically) before a sealed segment is reopened — by a truncation or an
/// open — and removed once done: if a crash interrupts the reopen, the next open or recovery
/// finishes it first (cut the segment back to exactly its kept batches, delete every later
/// segment), instead of finding a half-extended file.
pub const SEGMENT_INTENT: &str = "segment-intent";

/// The pending reopen: the segment's base, how many bytes of it are kept.
fn encode_intent(base: Offset, data_len: u64) -> String {
    format!("0\n{} {}\n", base.0, data_len)
}

fn decode_intent(text: &str) -> Option<(Offset, u64)> {
    let mut lines = text.lines();
    if lines.next()? != "0" {
        return None;
    }
    let mut parts = lines.next()?.split_whitespace();
    let base = parts.next()?.parse().ok()?;
    let data_len = parts.next()?.parse().ok()?;
    Some((Offset(base), data_len))
}

/// Records that the sealed segment at `base` is about to be reopened keeping `data_len` bytes.
pub(crate) fn write_intent(
    io: &mut dyn Io,
    dir: &Path,
    base: Offset,
    data_len: u64,
) -> Result<(), LogError> {
    io::write_file_atomically(
        io,
        dir,
        SEGMENT_INTENT,
        encode_intent(base, data_len).as_bytes(),
    )
    .map_err(classify)
}

/// Removes the intent durably (a stale one must never cut data appended later).
pub(crate) fn clear_intent(io: &mut dyn Io, dir: &Path) -> Result<(), LogError> {
    remove_durably(io, dir, SEGMENT_INTENT).map_err(classify)
}

/// Finishes a reopen a crash interrupted (see [`SEGMENT_INTENT`]): deletes every segment after
/// the intent's, cuts its file back to the kept bytes (which were durable: they were sealed),
/// and clears the intent. Called first by `open` and by recovery.
///
/// # Errors
/// [`LogError::Corrupt`] if the kept bytes are not whole batches, or an I/O failure.
pub fn finish_interrupted_reopen(io: &mut dyn Io, dir: &Path) -> Result<(), LogError> {
    let Some(text) = super::read_if_present(io, &dir.join(SEGMENT_INTENT))? else {
        return Ok(());
    };
    let Some((base, data_len)) = decode_intent(&String::from_utf8_lossy(&text)) else {
        return Err(LogError::Corrupt {
            file: dir.join(SEGMENT_INTENT),
            what: "unreadable reopen intent".to_string(),
        });
    };
    let names = io.list_dir(dir).map_err(classify)?;
    let mut others = Vec::new();
    for later in segment::offsets_named(&names, "log")
        .into_iter()
        .filter(|&b| b > base)
    {
        for path in segment::file_paths(dir, later) {
            match io::run(io, Op::Unlink { path }, &mut others).and_then(|c| c.result) {
                Ok(_)
                | Err(IoError::Os {
                    errno: libc::ENOENT,
                    ..
                }) => {}
                Err(e) => return Err(classify(e)),
            }
        }
    }
    let path = segment::log_path(dir, base);
    let file = io::open(
        io,
        &path,
        OpenOptions {
            write: true,
            direct: true,
            ..OpenOptions::default()
        },
    )
    .map_err(classify)?;
    let kept = io::read_direct(io, file, 0, data_len as usize).map_err(classify)?;
    if kept.len() as u64 != data_len || segment::index_batches(&kept, base, 4096).is_err() {
        return Err(LogError::Corrupt {
            file: path,
            what: format!("the {data_len} bytes a reopen kept are not whole batches"),
        });
    }
    for op in [
        Op::Truncate {
            file,
            len: data_len,
        },
        Op::Fdatasync { file },
        Op::Close { file },
    ] {
        io::run(io, op, &mut others)
            .and_then(|c| c.result)
            .map_err(classify)?;
    }
    clear_intent(io, dir)
}
