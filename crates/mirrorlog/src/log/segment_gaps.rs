//! Segment gaps: the segments that start past the end of the segment before them on purpose.
//!
//! Segments are contiguous (each starts where the previous one's batches end) except where the
//! log was made to skip offsets:
//! - a truncation to an offset past the batches that remain (into an offset gap, or inside a
//!   batch, which goes whole): the log end becomes that offset, as Kafka's `truncateTo` sets it,
//!   and an empty segment named by it makes the end durable;
//! - a batch whose offsets would not fit the 32-bit relative offsets of the `.index` and
//!   `.timeindex` of the segment it would go into (a copied append across a gap of more than
//!   `i32::MAX` offsets): a segment starts at that batch.
//!
//! Anywhere else, a segment starting past its predecessor's end is a missing segment or a
//! damaged base offset (no CRC covers it), and recovery fails it as corruption. So each
//! deliberate gap is recorded, durably and before its segment is created, in `segment-gaps`
//! (Kafka's checkpoint text: version `0`, a count, then one segment base offset per line).
//! Entries for segments that no longer exist, or that became the first, are harmless and are
//! dropped the next time the file is written; no file means no gaps.

use super::{remove_durably, LogError};
use crate::format::Offset;
use crate::io::{self, Io, IoError};
use std::path::Path;

/// The file in a partition directory.
pub const SEGMENT_GAPS: &str = "segment-gaps";

/// Encodes the base offsets of the segments that start past their predecessor's end.
#[must_use]
pub fn encode_gaps(bases: &[Offset]) -> String {
    let mut out = format!("0\n{}\n", bases.len());
    for b in bases {
        out.push_str(&format!("{}\n", b.0));
    }
    out
}

/// Decodes [`encode_gaps`]'s text.
///
/// # Errors
/// What is wrong, naming the line.
pub fn decode_gaps(text: &str) -> Result<Vec<Offset>, String> {
    let mut lines = text.lines();
    if lines.next() != Some("0") {
        return Err("line 1: version must be 0".into());
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("line 2: count is not a number")?;
    let mut bases = Vec::with_capacity(count.min(1024));
    for i in 0..count {
        let base = lines
            .next()
            .and_then(|l| l.trim().parse::<i64>().ok())
            .filter(|&o| o >= 0)
            .ok_or_else(|| format!("line {}: not an offset", i + 3))?;
        bases.push(Offset(base));
    }
    if lines.next().is_some() {
        return Err(format!("line {}: more entries than the count", count + 3));
    }
    bases.sort_unstable();
    bases.dedup();
    Ok(bases)
}

/// The gaps recorded in `dir` (none without the file).
///
/// # Errors
/// [`LogError::Corrupt`] for a file that does not decode (the gaps cannot be rebuilt from the
/// batches), or an I/O failure.
pub(crate) fn load_gaps(io: &mut dyn Io, dir: &Path) -> Result<Vec<Offset>, LogError> {
    let path = dir.join(SEGMENT_GAPS);
    match super::read_if_present(io, &path)? {
        Some(bytes) => decode_gaps(&String::from_utf8_lossy(&bytes))
            .map_err(|what| LogError::Corrupt { file: path, what }),
        None => Ok(Vec::new()),
    }
}

/// Writes `bases` as the gaps of `dir`, atomically and durably (no file when there are none).
///
/// # Errors
/// The I/O failure.
pub(super) fn write_gaps(io: &mut dyn Io, dir: &Path, bases: &[Offset]) -> Result<(), IoError> {
    if bases.is_empty() {
        return remove_durably(io, dir, SEGMENT_GAPS);
    }
    io::write_file_atomically(io, dir, SEGMENT_GAPS, encode_gaps(bases).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_round_trip_and_damage_is_refused() {
        let bases = vec![Offset(12), Offset(3_000_000_000)];
        assert_eq!(decode_gaps(&encode_gaps(&bases)), Ok(bases));
        assert_eq!(decode_gaps(&encode_gaps(&[])), Ok(Vec::new()));
        for bad in [
            "",
            "1\n0\n",
            "0\nx\n",
            "0\n2\n5\n",
            "0\n1\n-3\n",
            "0\n1\n5\n6\n",
        ] {
            assert!(decode_gaps(bad).is_err(), "{bad:?}");
        }
    }
}
