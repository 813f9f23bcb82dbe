//! What start-up could not load or finish, each piece failing only itself: a group whose records
//! do not read back, a transaction whose markers cannot be written, a topic whose creation or
//! deletion cannot be finished (or whose entry does not parse). The broker serves everything
//! else; each damaged piece is logged at ERROR when found, named in `/health` and `GET /topics`,
//! and refused to clients (a damaged group's requests get `COORDINATOR_NOT_AVAILABLE`, a
//! damaged topic is not served) until the operator takes the way out it names:
//!
//! | damaged | way out |
//! |---|---|
//! | group | DeleteGroups (or `DELETE /groups/NAME`): its records are tombstoned and it starts empty |
//! | transaction | `POST /transactions/ID/finish`: its outcome is written where a partition still takes a marker, the rest are named |
//! | topic | `POST /topics/NAME/finish` (the step is tried again) or `DELETE /topics/NAME` (whatever is left of it goes) |
//! | record | not attributable to a group (a key that does not read): skipped, named with its partition and offset |

use serde::Serialize;
use std::collections::BTreeMap;

/// The damaged pieces, by kind, each with why.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Damage {
    /// Groups, by id.
    pub groups: BTreeMap<String, String>,
    /// Transactions, by transactional id.
    pub transactions: BTreeMap<String, String>,
    /// Topics, by name.
    pub topics: BTreeMap<String, String>,
    /// Records of `__consumer_offsets` that name no group that could be read: where, and why.
    pub records: Vec<String>,
}

/// Which kind of piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A consumer group.
    Group,
    /// A transactional id.
    Transaction,
    /// A topic.
    Topic,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Group => "group",
            Kind::Transaction => "transaction",
            Kind::Topic => "topic",
        }
    }
}

impl Damage {
    fn map(&mut self, kind: Kind) -> &mut BTreeMap<String, String> {
        match kind {
            Kind::Group => &mut self.groups,
            Kind::Transaction => &mut self.transactions,
            Kind::Topic => &mut self.topics,
        }
    }

    /// Records `name` of `kind` as damaged, and says so at ERROR with the way out.
    pub fn mark(&mut self, kind: Kind, name: &str, reason: impl Into<String>) {
        let reason = reason.into();
        tracing::error!(
            kind = kind.name(),
            name,
            %reason,
            way_out = way_out(kind),
            "could not be loaded or finished: not served until the operator acts"
        );
        self.map(kind).insert(name.to_string(), reason);
    }

    /// Records a record that names no readable group.
    pub fn mark_record(&mut self, at: String) {
        tracing::error!(record = %at, "a __consumer_offsets record does not read back: skipped");
        if self.records.len() < Self::RECORDS_KEPT_MAX {
            self.records.push(at);
        }
    }

    /// Why `name` of `kind` is damaged, if it is.
    pub fn get(&self, kind: Kind, name: &str) -> Option<&str> {
        match kind {
            Kind::Group => self.groups.get(name),
            Kind::Transaction => self.transactions.get(name),
            Kind::Topic => self.topics.get(name),
        }
        .map(String::as_str)
    }

    /// `name` of `kind` was repaired or removed by the operator.
    pub fn clear(&mut self, kind: Kind, name: &str) -> bool {
        let cleared = self.map(kind).remove(name).is_some();
        if cleared {
            tracing::info!(kind = kind.name(), name, "no longer damaged");
        }
        cleared
    }

    /// Whether nothing is damaged.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
            && self.transactions.is_empty()
            && self.topics.is_empty()
            && self.records.is_empty()
    }

    /// Records at most this many unattributable records (each is also logged).
    pub const RECORDS_KEPT_MAX: usize = 1000;
}

/// What the operator can do about a damaged piece of `kind`.
pub fn way_out(kind: Kind) -> &'static str {
    match kind {
        Kind::Group => "delete the group (DeleteGroups, or DELETE /groups/NAME)",
        Kind::Transaction => "POST /transactions/ID/finish",
        Kind::Topic => "POST /topics/NAME/finish, or DELETE /topics/NAME",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_is_damaged_until_cleared() {
        let mut d = Damage::default();
        assert!(d.is_empty());
        d.mark(Kind::Group, "g", "a value that does not read");
        d.mark(Kind::Topic, "t", "creating: EMFILE");
        assert_eq!(d.get(Kind::Group, "g"), Some("a value that does not read"));
        assert_eq!(d.get(Kind::Group, "t"), None);
        assert!(!d.is_empty());
        assert!(d.clear(Kind::Group, "g"));
        assert!(!d.clear(Kind::Group, "g"));
        assert!(d.clear(Kind::Topic, "t"));
        assert!(d.is_empty());
    }
}
