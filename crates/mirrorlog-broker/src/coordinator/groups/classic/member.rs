//! One member of a classic group: its settings, its assignment, and the answers it waits for.

use super::{JoinAnswer, Protocol, SyncAnswer};
use bytes::Bytes;
use std::collections::BTreeSet;
use tokio::sync::oneshot;

pub(super) struct Member {
    pub(super) id: String,
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) rebalance_timeout_ms: i32,
    pub(super) session_timeout_ms: i32,
    pub(super) protocols: Vec<Protocol>,
    pub(super) assignment: Bytes,
    pub(super) awaiting_join: Option<oneshot::Sender<JoinAnswer>>,
    pub(super) awaiting_sync: Option<oneshot::Sender<SyncAnswer>>,
    pub(super) is_new: bool,
    /// When the member's session ends unless it heartbeats (None: not timed).
    pub(super) heartbeat_deadline: Option<i64>,
}

impl Member {
    pub(super) fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    pub(super) fn vote(&self, candidates: &BTreeSet<String>) -> Option<&str> {
        self.protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|n| candidates.contains(*n))
    }

    /// Kafka's `hasSatisfiedHeartbeat`: members awaiting an answer are alive, new ones not.
    pub(super) fn satisfied(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }

    pub(super) fn answer_join(&mut self, a: JoinAnswer) -> bool {
        match self.awaiting_join.take() {
            Some(tx) => {
                // The requester may have gone; the answer is then dropped.
                let _ = tx.send(a);
                true
            }
            None => false,
        }
    }

    pub(super) fn answer_sync(&mut self, a: SyncAnswer) -> bool {
        match self.awaiting_sync.take() {
            Some(tx) => {
                let _ = tx.send(a);
                true
            }
            None => false,
        }
    }
}
