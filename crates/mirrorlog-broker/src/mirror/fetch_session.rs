//! The fetcher's side of an incremental fetch session (KIP-227), as Kafka's
//! `FetchSessionHandler` keeps it, one per source broker connection: the first fetch names
//! every partition (epoch 0) and the broker opens a session; each later fetch sends only the
//! partitions whose offset or leader epoch changed and forgets those no longer asked, and the
//! answer names only partitions with something to say. [`FetchSession::receive`] puts back the
//! partitions the answer left out (no records, nothing changed), so the rest of the fetcher
//! reads every answer as a full one.
//!
//! A session error (`FETCH_SESSION_ID_NOT_FOUND`, `INVALID_FETCH_SESSION_EPOCH`: the broker
//! restarted or evicted the session) is answered as "no records" for every partition and the
//! next fetch is a full one that opens a new session, as Kafka's fetcher does; a broker that
//! opens no session (id 0) gets full fetches.

use super::requests::Ask;
use kafka_protocol::messages::fetch_request::ForgottenTopic;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use std::collections::HashMap;

/// Kafka's `FETCH_SESSION_ID_NOT_FOUND`.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// Kafka's `INVALID_FETCH_SESSION_EPOCH`.
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

type Key = (String, i32);

/// What the broker's session holds of a partition: its fetch offset and leader epoch.
type Sent = (i64, i32);

/// One connection's session (see the module docs). A new one starts with a full fetch.
#[derive(Debug, Default)]
pub struct FetchSession {
    id: i32,
    /// The next request's epoch (0: a full fetch).
    epoch: i32,
    /// What the broker's session holds after the last answered request.
    sent: HashMap<Key, Sent>,
    /// What the request in flight leaves it holding, once answered.
    pending: HashMap<Key, Sent>,
    /// The last high watermark and log start the broker told of each partition.
    told: HashMap<Key, (i64, i64)>,
    /// Whether the request in flight is a full fetch.
    full: bool,
}

impl FetchSession {
    /// Makes `r`, a full fetch of `asks` (Fetch v7+), this session's next request: the full
    /// fetch at epoch 0, or the incremental one (only what changed, and what is forgotten).
    pub fn prepare(&mut self, r: &mut FetchRequest, asks: &[Ask]) {
        self.pending = asks
            .iter()
            .map(|a| {
                (
                    (a.tp.topic.clone(), a.tp.partition),
                    (a.offset.0, a.current_leader_epoch),
                )
            })
            .collect();
        self.full = self.id == 0 || self.epoch == 0;
        r.session_id = self.id;
        r.session_epoch = if self.full { 0 } else { self.epoch };
        if self.full {
            return;
        }
        for t in &mut r.topics {
            let topic = t.topic.0.to_string();
            t.partitions.retain(|p| {
                let key = (topic.clone(), p.partition);
                self.sent.get(&key) != self.pending.get(&key)
            });
        }
        r.topics.retain(|t| !t.partitions.is_empty());
        let mut forgotten: Vec<(String, Vec<i32>)> = Vec::new();
        let mut gone: Vec<&Key> = self
            .sent
            .keys()
            .filter(|k| !self.pending.contains_key(*k))
            .collect();
        gone.sort();
        for (topic, partition) in gone {
            match forgotten.last_mut() {
                Some((t, ps)) if t == topic => ps.push(*partition),
                _ => forgotten.push((topic.clone(), vec![*partition])),
            }
        }
        r.forgotten_topics_data = forgotten
            .into_iter()
            .map(|(t, ps)| {
                let mut f = ForgottenTopic::default();
                f.topic = crate::net::wire::topic_name(&t);
                f.partitions = ps;
                f
            })
            .collect();
    }

    /// Reads the answer to the request [`FetchSession::prepare`] made for `asks`, and returns
    /// it as a full answer (see the module docs).
    pub fn receive(&mut self, asks: &[Ask], mut answer: FetchResponse) -> FetchResponse {
        let pending = std::mem::take(&mut self.pending);
        match answer.error_code {
            0 => {}
            FETCH_SESSION_ID_NOT_FOUND | INVALID_FETCH_SESSION_EPOCH => {
                // The next fetch opens a new session (closing this one if the broker still
                // has it); this one's partitions simply got nothing.
                self.restart();
                return nothing_for(asks);
            }
            _ => {
                self.restart();
                return answer;
            }
        }
        for t in &answer.responses {
            let topic = t.topic.0.to_string();
            for p in &t.partitions {
                self.told.insert(
                    (topic.clone(), p.partition_index),
                    (p.high_watermark, p.log_start_offset),
                );
            }
        }
        if self.full {
            self.id = answer.session_id;
            self.epoch = if self.id == 0 { 0 } else { 1 };
            self.sent = pending;
            return answer;
        }
        if answer.session_id == self.id {
            self.epoch = if self.epoch == i32::MAX {
                1
            } else {
                self.epoch + 1
            };
            self.sent = pending;
        } else {
            // The broker closed the session and answered sessionless what the request named:
            // start over. The partitions it did not name were not read; they got nothing.
            self.restart();
        }
        // The partitions left out: nothing new, as last told.
        let mut present: std::collections::HashSet<Key> = std::collections::HashSet::new();
        for t in &answer.responses {
            let topic = t.topic.0.to_string();
            for p in &t.partitions {
                present.insert((topic.clone(), p.partition_index));
            }
        }
        for a in asks {
            let key = (a.tp.topic.clone(), a.tp.partition);
            if present.contains(&key) {
                continue;
            }
            let (hw, log_start) = self.told.get(&key).copied().unwrap_or((-1, -1));
            push(
                &mut answer,
                &a.tp.topic,
                quiet(a.tp.partition, hw, log_start),
            );
        }
        answer
    }

    /// Forgets the session: the next fetch is a full one.
    fn restart(&mut self) {
        // The id stays: the full fetch names it, which closes it at the broker if it is there.
        self.epoch = 0;
        self.sent.clear();
        self.told.clear();
    }
}

/// A partition with no records and no error: high watermark and log start as given (-1: not
/// given).
fn quiet(partition: i32, high_watermark: i64, log_start_offset: i64) -> PartitionData {
    let mut p = PartitionData::default();
    p.partition_index = partition;
    p.high_watermark = high_watermark;
    p.last_stable_offset = -1;
    p.log_start_offset = log_start_offset;
    p.records = Some(bytes::Bytes::new());
    p
}

fn push(answer: &mut FetchResponse, topic: &str, p: PartitionData) {
    match answer
        .responses
        .iter_mut()
        .find(|t| t.topic.0.as_str() == topic)
    {
        Some(t) => t.partitions.push(p),
        None => {
            let mut t = FetchableTopicResponse::default();
            t.topic = crate::net::wire::topic_name(topic);
            t.partitions.push(p);
            answer.responses.push(t);
        }
    }
}

/// An answer with nothing for any partition of `asks`.
fn nothing_for(asks: &[Ask]) -> FetchResponse {
    let mut answer = FetchResponse::default();
    for a in asks {
        push(&mut answer, &a.tp.topic, quiet(a.tp.partition, -1, -1));
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::requests;
    use mirrorlog::engine::TopicPartition;
    use mirrorlog::format::Offset;

    fn ask(p: i32, offset: i64) -> Ask {
        Ask {
            tp: TopicPartition::new("t", p),
            offset: Offset(offset),
            current_leader_epoch: 3,
        }
    }

    fn request(session: &mut FetchSession, asks: &[Ask]) -> FetchRequest {
        let kafka_protocol::messages::RequestKind::Fetch(mut r) = requests::fetch(asks, 0) else {
            panic!()
        };
        session.prepare(&mut r, asks);
        r
    }

    fn named(r: &FetchRequest) -> Vec<i32> {
        r.topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.partition))
            .collect()
    }

    fn answer(session_id: i32, parts: &[(i32, i64, usize)]) -> FetchResponse {
        let mut a = FetchResponse::default();
        a.session_id = session_id;
        for &(p, hw, records) in parts {
            let mut d = quiet(p, hw, 0);
            d.records = Some(bytes::Bytes::from(vec![0u8; records]));
            push(&mut a, "t", d);
        }
        a
    }

    #[test]
    fn after_the_full_fetch_only_changes_are_sent_and_left_out_partitions_come_back_quiet() {
        let mut s = FetchSession::default();
        let asks = [ask(0, 0), ask(1, 0), ask(2, 0)];
        let r = request(&mut s, &asks);
        assert_eq!((r.session_id, r.session_epoch), (0, 0));
        assert_eq!(named(&r), [0, 1, 2]);
        s.receive(&asks, answer(42, &[(0, 5, 10), (1, 0, 0), (2, 0, 0)]));

        // Partition 0 moved on; partition 2 is no longer asked; partition 3 is new.
        let asks = [ask(0, 5), ask(1, 0), ask(3, 0)];
        let r = request(&mut s, &asks);
        assert_eq!((r.session_id, r.session_epoch), (42, 1));
        assert_eq!(named(&r), [0, 3]);
        assert_eq!(r.forgotten_topics_data.len(), 1);
        assert_eq!(r.forgotten_topics_data[0].partitions, [2]);
        let full = s.receive(&asks, answer(42, &[(3, 7, 20)]));
        let mut got: Vec<(i32, i64, usize)> = full
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| {
                (
                    p.partition_index,
                    p.high_watermark,
                    p.records.as_ref().unwrap().len(),
                )
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, [(0, 5, 0), (1, 0, 0), (3, 7, 20)]);

        // Nothing changed: an empty incremental request at the next epoch.
        let r = request(&mut s, &asks);
        assert_eq!((r.session_id, r.session_epoch), (42, 2));
        assert!(named(&r).is_empty() && r.forgotten_topics_data.is_empty());
    }

    #[test]
    fn a_session_the_broker_closed_leaves_no_partition_unanswered() {
        let mut s = FetchSession::default();
        let asks = [ask(0, 0), ask(1, 0)];
        request(&mut s, &asks);
        s.receive(&asks, answer(42, &[(0, 3, 0), (1, 0, 0)]));
        let asks = [ask(0, 3), ask(1, 0)];
        let r = request(&mut s, &asks);
        assert_eq!(named(&r), [0]);
        // Answered sessionless (id 0), naming only what the request named.
        let got = s.receive(&asks, answer(0, &[(0, 4, 9)]));
        let mut parts: Vec<(i32, i16)> = got
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        parts.sort_unstable();
        assert_eq!(
            parts,
            [(0, 0), (1, 0)],
            "partition 1 got nothing, not an error"
        );
        let r = request(&mut s, &asks);
        assert_eq!(r.session_epoch, 0, "a full fetch next");
        assert_eq!(named(&r), [0, 1]);
    }

    #[test]
    fn a_session_error_gets_nothing_and_the_next_fetch_is_full() {
        let mut s = FetchSession::default();
        let asks = [ask(0, 0), ask(1, 0)];
        request(&mut s, &asks);
        s.receive(&asks, answer(42, &[(0, 0, 0), (1, 0, 0)]));
        request(&mut s, &asks);
        let mut refused = FetchResponse::default();
        refused.error_code = FETCH_SESSION_ID_NOT_FOUND;
        let got = s.receive(&asks, refused);
        assert_eq!(got.error_code, 0);
        assert_eq!(got.responses[0].partitions.len(), 2);
        let r = request(&mut s, &asks);
        assert_eq!(r.session_epoch, 0, "a full fetch");
        assert_eq!(named(&r), [0, 1]);
        // A broker that opens no session: full fetches from then on.
        s.receive(&asks, answer(0, &[(0, 0, 0), (1, 0, 0)]));
        let r = request(&mut s, &asks);
        assert_eq!((r.session_id, r.session_epoch), (0, 0));
        assert_eq!(named(&r), [0, 1]);
    }
}
