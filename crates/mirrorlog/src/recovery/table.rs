//! Recovery's decisions as a table: the facts gathered about one segment file select exactly
//! one row, and the row names the action. A test enumerates every combination of facts and
//! checks that exactly one row matches it (no gaps, no overlaps).

/// What the scan found out about one segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The whole file scans as valid batches with increasing offsets.
    pub whole_batches: bool,
    /// A commit record for this segment in the trailing slots, whose data validates.
    pub record_validates: bool,
    /// Some commit record for this segment decodes (valid CRC) in the trailing slots.
    pub record_present: bool,
    /// It holds no durable data and starts past the previous segment's durable end.
    pub empty_past_end: bool,
    /// No kept segment follows it.
    pub is_last: bool,
    /// No segment precedes it, or the one before was never sealed (a roll was under way).
    pub predecessor_open: bool,
    /// The file is as its preallocation left it: zeros from its first byte and longer than
    /// the data region (the preallocation, or a creation record's slot write, reached past
    /// it; a torn record may be in the slots). Only a segment whose creation never finished
    /// looks like this; a sealed segment, trimmed to its batches, is never longer than the
    /// data region, whatever its damage.
    pub untouched: bool,
}

/// What recovery does with the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A sealed segment in the middle: keep it as is.
    KeepSealed,
    /// The newest segment was sealed (a clean close without its marker): reopen it as active.
    ReopenSealed,
    /// The newest segment was open: restore its tail from the commit record, reopen as active.
    ReopenOpen,
    /// The newest segment's creation never finished (untouched: no commit record, no byte
    /// written; every segment writes a record before use): nothing in it was acknowledged;
    /// start it empty.
    NeverCommitted,
    /// An open segment that is not the newest: a roll was cut short; restore and seal it.
    SealUnfinishedRoll,
    /// An empty segment created by a roll whose predecessor never became durable: delete it.
    DeleteUnfinishedRoll,
    /// Damage before the durable end: fail loudly, never truncate silently.
    Corrupt,
}

/// One row: `None` matches either value.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// `Facts::empty_past_end`.
    pub empty_past_end: Option<bool>,
    /// `Facts::whole_batches`.
    pub whole_batches: Option<bool>,
    /// `Facts::record_validates`.
    pub record_validates: Option<bool>,
    /// `Facts::record_present`.
    pub record_present: Option<bool>,
    /// `Facts::is_last`.
    pub is_last: Option<bool>,
    /// `Facts::predecessor_open`.
    pub predecessor_open: Option<bool>,
    /// `Facts::untouched`.
    pub untouched: Option<bool>,
    /// The action.
    pub action: Action,
}

// One argument per column of the table, in its order: the rows below read as the table.
#[allow(clippy::too_many_arguments)]
const fn row(
    empty_past_end: Option<bool>,
    whole_batches: Option<bool>,
    record_validates: Option<bool>,
    record_present: Option<bool>,
    is_last: Option<bool>,
    predecessor_open: Option<bool>,
    untouched: Option<bool>,
    action: Action,
) -> Row {
    Row {
        empty_past_end,
        whole_batches,
        record_validates,
        record_present,
        is_last,
        predecessor_open,
        untouched,
        action,
    }
}

const T: Option<bool> = Some(true);
const F: Option<bool> = Some(false);
const ANY: Option<bool> = None;

/// The table. Columns: empty past end, whole batches, record validates, record present, is
/// last, predecessor open, untouched.
///
/// Every row that drops bytes answers "could these have been acknowledged?" with no:
/// `DeleteUnfinishedRoll` needs a file with nothing in it (zeros from its start) past the
/// previous durable end; `NeverCommitted` needs an untouched file; `ReopenOpen` and
/// `SealUnfinishedRoll` keep exactly what a validating commit record covers, and only the bytes
/// of a round never acknowledged lie past it. Everything else that is not whole batches is
/// `Corrupt` (found by review: a single-segment log whose sealed segment was damaged in the
/// middle used to pass for a never-committed one and was cut to its valid prefix silently).
pub const TABLE: &[Row] = &[
    row(
        T,
        ANY,
        ANY,
        ANY,
        ANY,
        ANY,
        ANY,
        Action::DeleteUnfinishedRoll,
    ),
    row(F, T, ANY, ANY, F, ANY, ANY, Action::KeepSealed),
    row(F, T, ANY, ANY, T, ANY, ANY, Action::ReopenSealed),
    row(F, F, T, ANY, T, ANY, ANY, Action::ReopenOpen),
    row(F, F, T, ANY, F, ANY, ANY, Action::SealUnfinishedRoll),
    row(F, F, F, F, T, T, T, Action::NeverCommitted),
    row(F, F, F, F, T, T, F, Action::Corrupt),
    row(F, F, F, T, ANY, ANY, ANY, Action::Corrupt),
    row(F, F, F, F, F, ANY, ANY, Action::Corrupt),
    row(F, F, F, F, T, F, ANY, Action::Corrupt),
];

fn matches(pattern: Option<bool>, fact: bool) -> bool {
    pattern.is_none_or(|p| p == fact)
}

impl Row {
    /// Whether the row applies to `facts`.
    #[must_use]
    pub fn matches(&self, f: &Facts) -> bool {
        matches(self.empty_past_end, f.empty_past_end)
            && matches(self.whole_batches, f.whole_batches)
            && matches(self.record_validates, f.record_validates)
            && matches(self.record_present, f.record_present)
            && matches(self.is_last, f.is_last)
            && matches(self.predecessor_open, f.predecessor_open)
            && matches(self.untouched, f.untouched)
    }
}

/// The action for `facts`: the row that matches (the test proves there is exactly one).
#[must_use]
pub fn decide(facts: &Facts) -> Action {
    TABLE
        .iter()
        .find(|r| r.matches(facts))
        .map_or(Action::Corrupt, |r| r.action)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_combination_of_facts_matches_exactly_one_row() {
        for bits in 0u8..128 {
            let facts = Facts {
                whole_batches: bits & 1 != 0,
                record_validates: bits & 2 != 0,
                record_present: bits & 4 != 0,
                empty_past_end: bits & 8 != 0,
                is_last: bits & 16 != 0,
                predecessor_open: bits & 32 != 0,
                untouched: bits & 64 != 0,
            };
            let matching: Vec<_> = TABLE.iter().filter(|r| r.matches(&facts)).collect();
            assert_eq!(matching.len(), 1, "{facts:?} matches {matching:?}");
        }
    }

    #[test]
    fn the_cases_that_matter() {
        let open_last = Facts {
            whole_batches: false,
            record_validates: true,
            record_present: true,
            empty_past_end: false,
            is_last: true,
            predecessor_open: false,
            untouched: false,
        };
        assert_eq!(decide(&open_last), Action::ReopenOpen);
        assert_eq!(
            decide(&Facts {
                is_last: false,
                ..open_last
            }),
            Action::SealUnfinishedRoll
        );
        assert_eq!(
            decide(&Facts {
                record_validates: false,
                ..open_last
            }),
            Action::Corrupt,
            "damage before the end"
        );
        let fresh = Facts {
            record_validates: false,
            record_present: false,
            predecessor_open: true,
            untouched: true,
            ..open_last
        };
        assert_eq!(decide(&fresh), Action::NeverCommitted);
        assert_eq!(
            decide(&Facts {
                untouched: false,
                ..fresh
            }),
            Action::Corrupt,
            "a lone sealed segment damaged in the middle is not a segment never committed"
        );
        assert_eq!(
            decide(&Facts {
                predecessor_open: false,
                ..fresh
            }),
            Action::Corrupt,
            "a sealed predecessor means creation finished"
        );
        let sealed = Facts {
            whole_batches: true,
            record_validates: false,
            record_present: false,
            is_last: false,
            ..open_last
        };
        assert_eq!(decide(&sealed), Action::KeepSealed);
        assert_eq!(
            decide(&Facts {
                empty_past_end: true,
                ..sealed
            }),
            Action::DeleteUnfinishedRoll
        );
    }
}
