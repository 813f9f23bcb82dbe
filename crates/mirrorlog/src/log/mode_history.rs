//! A partition's mode and its persisted **mode history** (design.md §Mirroring): the ordered
//! `(start_offset, local | mirror <source>)` transitions, kept in `mirror-checkpoint` in
//! Kafka's checkpoint text (line 1 version `0`, line 2 count, then one entry per line),
//! written atomically. The history decides the **barrier rule**: a barrier at offset `o`
//! clears the producer state iff `o` lies in a Local range. A log with no history never
//! mirrored: every offset is Local.

use crate::format::Offset;

/// The checkpoint file in a partition directory.
pub const MIRROR_CHECKPOINT: &str = "mirror-checkpoint";

/// What a range of offsets was written as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeKind {
    /// Written locally (clients, the coordinator, this cluster's replication).
    Local,
    /// Copied from `source` by mirroring.
    Mirror(String),
}

/// A partition's mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Writable by clients.
    Local,
    /// Read-only to clients; Mirror appends from `source` are accepted.
    Mirroring {
        /// The source cluster / partition.
        source: String,
    },
    /// Read-only; mirroring is suspended (no Mirror appends).
    Paused {
        /// The source.
        source: String,
    },
    /// Read-only; mirroring hit something it cannot apply (a corrupt or non-contiguous batch).
    Failed {
        /// What happened.
        reason: String,
    },
}

/// Why a checkpoint does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mirror-checkpoint line {line}: {what}")]
pub struct ModeHistoryError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

/// The transitions, by increasing start offset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModeHistory {
    entries: Vec<(Offset, RangeKind)>,
}

impl ModeHistory {
    /// The entries.
    #[must_use]
    pub fn entries(&self) -> &[(Offset, RangeKind)] {
        &self.entries
    }

    /// Whether offset `o` lies in a Local range (the barrier rule).
    #[must_use]
    pub fn is_local(&self, o: Offset) -> bool {
        self.entries
            .iter()
            .rev()
            .find(|(start, _)| *start <= o)
            .is_none_or(|(_, kind)| *kind == RangeKind::Local)
    }

    /// The kind of the newest range (Local for a log that never mirrored).
    #[must_use]
    pub fn last_kind(&self) -> RangeKind {
        self.entries
            .last()
            .map_or(RangeKind::Local, |(_, k)| k.clone())
    }

    /// Records that offsets from `start` on are `kind`; entries at or after `start` are
    /// replaced. Returns whether anything changed.
    pub fn record(&mut self, start: Offset, kind: RangeKind) -> bool {
        let before = self.entries.clone();
        self.entries.retain(|(s, _)| *s < start);
        if self.last_kind() != kind {
            self.entries.push((start, kind));
        }
        self.entries != before
    }

    /// Drops what lies at or past `end` (a truncation), then makes sure offsets from `end` on
    /// are `current` (the partition's mode does not change with a truncation). Returns whether
    /// anything changed.
    pub fn truncate(&mut self, end: Offset, current: RangeKind) -> bool {
        let before = self.entries.clone();
        self.entries.retain(|(s, _)| *s < end);
        if self.last_kind() != current {
            self.entries.push((end, current));
        }
        self.entries != before
    }

    /// Drops entries starting after `end` (what a crash left of a cut-short truncation; an
    /// entry at `end` itself describes the next append and stays).
    pub fn drop_after(&mut self, end: Offset) {
        self.entries.retain(|(s, _)| *s <= end);
    }

    /// The checkpoint text.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut out = format!("0\n{}\n", self.entries.len());
        for (start, kind) in &self.entries {
            match kind {
                RangeKind::Local => out.push_str(&format!("{} local\n", start.0)),
                RangeKind::Mirror(source) => {
                    out.push_str(&format!("{} mirror {source}\n", start.0));
                }
            }
        }
        out
    }

    /// Parses the checkpoint text.
    ///
    /// # Errors
    /// [`ModeHistoryError`] naming the line.
    pub fn decode(text: &str) -> Result<Self, ModeHistoryError> {
        let err = |line: usize, what: &str| ModeHistoryError {
            line,
            what: what.to_string(),
        };
        let mut lines = text.lines();
        if lines.next() != Some("0") {
            return Err(err(1, "version is not 0"));
        }
        let count: usize = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| err(2, "bad count"))?;
        let mut entries: Vec<(Offset, RangeKind)> = Vec::with_capacity(count.min(1 << 16));
        for i in 0..count {
            let line_no = i + 3;
            let line = lines.next().ok_or_else(|| err(line_no, "missing entry"))?;
            let mut parts = line.splitn(3, ' ');
            let start: i64 = parts
                .next()
                .and_then(|p| p.parse().ok())
                .filter(|&s: &i64| s >= 0)
                .ok_or_else(|| err(line_no, "bad start offset"))?;
            let kind = match (parts.next(), parts.next()) {
                (Some("local"), None) => RangeKind::Local,
                (Some("mirror"), Some(source)) if !source.is_empty() => {
                    RangeKind::Mirror(source.to_string())
                }
                _ => return Err(err(line_no, "expected `local` or `mirror <source>`")),
            };
            if entries.last().is_some_and(|(s, _)| *s >= Offset(start)) {
                return Err(err(line_no, "start offsets must increase"));
            }
            entries.push((Offset(start), kind));
        }
        Ok(ModeHistory { entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_barrier_rule_follows_the_ranges() {
        let mut h = ModeHistory::default();
        assert!(h.is_local(Offset(0)), "a log that never mirrored is Local");
        assert!(h.record(Offset(0), RangeKind::Mirror("east".into())));
        assert!(h.record(Offset(100), RangeKind::Local));
        assert!(h.record(Offset(150), RangeKind::Mirror("west".into())));
        assert!(!h.is_local(Offset(0)));
        assert!(!h.is_local(Offset(99)));
        assert!(h.is_local(Offset(100)));
        assert!(h.is_local(Offset(149)));
        assert!(!h.is_local(Offset(150)));
        // Recording the kind already in force changes nothing.
        assert!(!h.record(Offset(200), RangeKind::Mirror("west".into())));
        let text = h.encode();
        assert_eq!(text, "0\n3\n0 mirror east\n100 local\n150 mirror west\n");
        assert_eq!(ModeHistory::decode(&text).unwrap(), h);
    }

    #[test]
    fn truncation_trims_and_keeps_the_current_mode() {
        let mut h = ModeHistory::default();
        h.record(Offset(0), RangeKind::Mirror("east".into()));
        h.record(Offset(100), RangeKind::Local);
        // Truncating into the mirrored range while Local: offsets from 80 on are Local.
        assert!(h.truncate(Offset(80), RangeKind::Local));
        assert_eq!(
            h.entries(),
            &[
                (Offset(0), RangeKind::Mirror("east".into())),
                (Offset(80), RangeKind::Local)
            ]
        );
        assert!(!h.truncate(Offset(90), RangeKind::Local));
    }

    #[test]
    fn bad_checkpoints_name_the_line() {
        for (text, line) in [
            ("1\n0\n", 1),
            ("0\nx\n", 2),
            ("0\n2\n5 local\n", 4),
            ("0\n1\n5 remote\n", 3),
            ("0\n2\n5 local\n3 mirror a\n", 4),
            ("0\n1\n-1 local\n", 3),
        ] {
            assert_eq!(
                ModeHistory::decode(text).unwrap_err().line,
                line,
                "{text:?}"
            );
        }
    }
}
