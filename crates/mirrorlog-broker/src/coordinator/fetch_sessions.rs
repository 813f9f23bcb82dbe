//! Incremental fetch sessions (KIP-227), as Kafka's `FetchSession.scala` keeps them: a fetcher
//! of many partitions names them all once, then sends only what changed, and hears only about
//! partitions with something to say.
//!
//! - **Request metadata** (`session_id`, `session_epoch`, Fetch v7+). Epoch 0 or -1 is a *full*
//!   fetch: it closes the session it names, and epoch 0 opens a new one (if the cache has room)
//!   while -1 asks for none. Any other epoch is *incremental*: the session must exist
//!   (`FETCH_SESSION_ID_NOT_FOUND`) and expect that epoch (`INVALID_FETCH_SESSION_EPOCH`); its
//!   partitions are updated by the request's (added or changed) and its forgotten topics, and
//!   its epoch moves on (1 after `i32::MAX`). An incremental fetch that leaves no partition
//!   closes the session and is answered sessionless.
//! - **Answers.** A full fetch answers every partition. An incremental one answers a partition
//!   only when it has records, an error, or a high watermark or log start that changed since
//!   the session last told the fetcher; an error resets the remembered high watermark, so the
//!   partition is answered again once it clears. Answered partitions move to the end of the
//!   session's order, so the partitions read first change from one fetch to the next.
//! - **The cache** holds at most `max.incremental.fetch.session.cache.slots` sessions (Kafka's
//!   default 1,000). A new session takes a full cache's place only by evicting one: a session
//!   idle longer than [`EVICTION_MS`] first; else the least valuable session that is not new
//!   (created more than [`EVICTION_MS`] ago), if the new one is worth more — a replica's over a
//!   consumer's, then more partitions. Otherwise the fetch is answered sessionless (id 0).
//! - **Memory is bounded** (our addition: Kafka bounds only the count): every session's
//!   partitions cost their topic name and [`PARTITION_BYTES`] each, and all sessions together
//!   at most [`SESSIONS_BYTES_MAX`]. A new session that would pass it evicts as above or is
//!   refused (sessionless); an incremental fetch that would pass it closes its session and is
//!   answered `FETCH_SESSION_ID_NOT_FOUND`, so its fetcher starts over and is served
//!   sessionless. Without it, a thousand sessions of long topic names would hold gigabytes.

use indexmap::IndexMap;
use std::collections::HashMap;
use std::sync::Arc;

/// `max.incremental.fetch.session.cache.slots`' default (Kafka's).
pub const CACHE_SLOTS_DEFAULT: usize = 1_000;
/// Kafka's `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`: a session idle this long may be evicted
/// by any new one, and a session younger than this is never evicted for a larger one.
pub const EVICTION_MS: u64 = 120_000;

/// What one cached partition costs besides its topic name (key, wants, what was told).
pub const PARTITION_BYTES: usize = 96;
/// The most all sessions together may cost (see the module docs).
pub const SESSIONS_BYTES_MAX: usize = 256 << 20;

/// The epoch of a full fetch that opens a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full fetch that wants no session.
pub const FINAL_EPOCH: i32 = -1;
/// No session.
pub const INVALID_SESSION_ID: i32 = 0;

/// A partition of a session: topic name (shared per topic) and index.
pub type Key = (Arc<str>, i32);

/// What a fetch asks of one partition (from the request, or remembered by its session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wants {
    /// Where to read from.
    pub fetch_offset: i64,
    /// `partition_max_bytes`.
    pub max_bytes: i32,
    /// `current_leader_epoch` (-1: none).
    pub current_leader_epoch: i32,
}

/// What the session last told the fetcher of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Told {
    high_watermark: i64,
    log_start_offset: i64,
}

#[derive(Debug, Clone)]
struct Cached {
    wants: Wants,
    told: Told,
}

/// A partition's answer, as far as the session cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// Bytes of records in the answer.
    pub records_bytes: usize,
    /// The error code (0: none).
    pub error_code: i16,
    /// The answer's high watermark.
    pub high_watermark: i64,
    /// The answer's log start offset.
    pub log_start_offset: i64,
}

#[derive(Debug)]
struct Session {
    epoch: i32,
    /// A replica's (a follower's) session, worth more than a consumer's.
    privileged: bool,
    partitions: IndexMap<Key, Cached>,
    created_ms: u64,
    last_used_ms: u64,
    /// What its partitions cost ([`PARTITION_BYTES`] and the topic name each).
    bytes: usize,
}

fn cost<'a>(keys: impl Iterator<Item = &'a Key>) -> usize {
    keys.map(|(name, _)| PARTITION_BYTES + name.len()).sum()
}

/// What the cache made of a fetch's metadata (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Context {
    /// Read the request's partitions, answer them all, no session (id 0 in the answer).
    Sessionless,
    /// Read the request's partitions, answer them all, then [`FetchSessions::open`] a session.
    Full,
    /// Read the session's partitions (in this order, as they now stand), answer those
    /// [`FetchSessions::answered`] keeps, under this session id.
    Incremental {
        /// The session.
        id: i32,
        /// Every partition of the session with what it wants, in the session's order.
        partitions: Vec<(Key, Wants)>,
    },
    /// Answer this error code alone (`FETCH_SESSION_ID_NOT_FOUND`, `INVALID_FETCH_SESSION_EPOCH`).
    Error(i16),
}

/// Kafka's `FETCH_SESSION_ID_NOT_FOUND`.
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// Kafka's `INVALID_FETCH_SESSION_EPOCH`.
pub const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

/// The broker's sessions (see the module docs).
#[derive(Debug)]
pub struct FetchSessions {
    slots: usize,
    /// [`SESSIONS_BYTES_MAX`], smaller in tests.
    bytes_max: usize,
    sessions: HashMap<i32, Session>,
    /// Draws session ids (xorshift; never 0, never one in use).
    rng: u64,
    counters: Counters,
}

/// What the cache did since start (`GET /fetch-sessions`; Kafka's
/// `NumIncrementalFetchSessions`, `NumIncrementalFetchPartitionsCached` and
/// `IncrementalFetchSessionEvictionsPerSec`, as counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Sessions opened.
    pub created: u64,
    /// Sessions evicted to make room for new ones.
    pub evicted: u64,
    /// Full fetches answered sessionless because the cache had no room.
    pub refused_for_room: u64,
    /// Incremental fetches served.
    pub incremental_fetches: u64,
    /// Fetches answered `FETCH_SESSION_ID_NOT_FOUND` or `INVALID_FETCH_SESSION_EPOCH`.
    pub session_errors: u64,
}

/// The cache now, with its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// `max.incremental.fetch.session.cache.slots`.
    pub slots: usize,
    /// Sessions held.
    pub sessions: usize,
    /// Partitions held over all sessions.
    pub partitions: usize,
    /// Since start.
    #[serde(flatten)]
    pub counters: Counters,
}

/// The epoch after `epoch` (1 after `i32::MAX`; a full fetch's epochs never follow).
#[must_use]
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        // Only the full epochs are negative; they are never continued.
        INITIAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessions {
    /// A cache of at most `slots` sessions (0: no sessions at all).
    #[must_use]
    pub fn new(slots: usize) -> Self {
        Self::with_bytes_max(slots, SESSIONS_BYTES_MAX)
    }

    /// [`FetchSessions::new`] with another memory bound.
    #[must_use]
    pub fn with_bytes_max(slots: usize, bytes_max: usize) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9E37_79B9, |d| d.as_nanos() as u64);
        FetchSessions {
            slots,
            bytes_max,
            sessions: HashMap::new(),
            rng: seed | 1,
            counters: Counters::default(),
        }
    }

    /// The cache now (see [`Stats`]).
    #[must_use]
    pub fn stats(&self) -> Stats {
        Stats {
            slots: self.slots,
            sessions: self.sessions.len(),
            partitions: self.sessions.values().map(|s| s.partitions.len()).sum(),
            counters: self.counters,
        }
    }

    /// Sessions held.
    #[cfg(test)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether none is held.
    #[cfg(test)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Decides what a fetch with this metadata is (see [`Context`]). For an incremental fetch
    /// the session is updated now: `updates` are the request's partitions (added, or changed
    /// in place), `forgotten` the partitions it removes, and the epoch moves on.
    pub fn context(
        &mut self,
        session_id: i32,
        epoch: i32,
        updates: &[(Key, Wants)],
        forgotten: &[Key],
        now_ms: u64,
    ) -> Context {
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != INVALID_SESSION_ID {
                self.sessions.remove(&session_id);
            }
            return if epoch == FINAL_EPOCH {
                Context::Sessionless
            } else {
                Context::Full
            };
        }
        let Some(session) = self.sessions.get_mut(&session_id) else {
            self.counters.session_errors += 1;
            return Context::Error(FETCH_SESSION_ID_NOT_FOUND);
        };
        if session.epoch != epoch {
            self.counters.session_errors += 1;
            return Context::Error(INVALID_FETCH_SESSION_EPOCH);
        }
        for (key, wants) in updates {
            match session.partitions.get_mut(key) {
                Some(cached) => cached.wants = *wants,
                None => {
                    session.partitions.insert(
                        key.clone(),
                        Cached {
                            wants: *wants,
                            // Never told: the first answer includes it.
                            told: Told {
                                high_watermark: -1,
                                log_start_offset: -1,
                            },
                        },
                    );
                }
            }
        }
        for key in forgotten {
            session.partitions.shift_remove(key);
        }
        session.bytes = cost(session.partitions.keys());
        if session.partitions.is_empty() {
            self.sessions.remove(&session_id);
            return Context::Sessionless;
        }
        if self.bytes() > self.bytes_max {
            // Past the memory bound (see the module docs): the fetcher starts over.
            self.sessions.remove(&session_id);
            self.counters.session_errors += 1;
            return Context::Error(FETCH_SESSION_ID_NOT_FOUND);
        }
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return Context::Error(FETCH_SESSION_ID_NOT_FOUND);
        };
        session.epoch = next_epoch(session.epoch);
        session.last_used_ms = now_ms;
        self.counters.incremental_fetches += 1;
        Context::Incremental {
            id: session_id,
            partitions: session
                .partitions
                .iter()
                .map(|(k, c)| (k.clone(), c.wants))
                .collect(),
        }
    }

    /// After a full fetch was answered: opens a session of its partitions with what it told
    /// of each, if the cache has room or can evict one (see the module docs). Returns the new
    /// session's id, or [`INVALID_SESSION_ID`] (the answer is then sessionless).
    pub fn open(
        &mut self,
        partitions: Vec<(Key, Wants, Answer)>,
        privileged: bool,
        now_ms: u64,
    ) -> i32 {
        if self.slots == 0 || partitions.is_empty() {
            return INVALID_SESSION_ID;
        }
        let bytes = cost(partitions.iter().map(|(k, _, _)| k));
        while self.sessions.len() >= self.slots || self.bytes() + bytes > self.bytes_max {
            if bytes > self.bytes_max || !self.evict_for(privileged, partitions.len(), now_ms) {
                self.counters.refused_for_room += 1;
                return INVALID_SESSION_ID;
            }
        }
        self.counters.created += 1;
        let id = self.new_id();
        let partitions = partitions
            .into_iter()
            .map(|(key, wants, answer)| {
                let told = told_after(&answer);
                (key, Cached { wants, told })
            })
            .collect();
        self.sessions.insert(
            id,
            Session {
                epoch: next_epoch(INITIAL_EPOCH),
                privileged,
                partitions,
                created_ms: now_ms,
                last_used_ms: now_ms,
                bytes,
            },
        );
        id
    }

    /// After an incremental fetch of session `id` was read: which partitions the answer
    /// includes (`answers` in the order [`Context::Incremental`] gave), remembering what it
    /// tells; the answered ones move to the end of the session's order. A session evicted
    /// meanwhile still gets its answer, with every partition that has something to say.
    pub fn answered(&mut self, id: i32, answers: &[(Key, Answer)]) -> Vec<bool> {
        let Some(session) = self.sessions.get_mut(&id) else {
            return answers.iter().map(|(_, a)| must_answer(None, a)).collect();
        };
        let keep: Vec<bool> = answers
            .iter()
            .map(|(key, answer)| {
                let cached = session.partitions.get_mut(key);
                let told = cached.as_ref().map(|c| c.told);
                let keep = must_answer(told, answer);
                if let Some(c) = cached {
                    c.told = told_after(answer);
                }
                keep
            })
            .collect();
        if keep.iter().any(|&k| k) {
            let answered: std::collections::HashSet<&Key> = answers
                .iter()
                .zip(&keep)
                .filter(|(_, &k)| k)
                .map(|((key, _), _)| key)
                .collect();
            let old = std::mem::take(&mut session.partitions);
            let (moved, stay): (Vec<_>, Vec<_>) =
                old.into_iter().partition(|(k, _)| answered.contains(k));
            session.partitions = stay.into_iter().chain(moved).collect();
        }
        keep
    }

    /// What all sessions cost together.
    fn bytes(&self) -> usize {
        self.sessions.values().map(|s| s.bytes).sum()
    }

    /// Frees room for a new session of `size` partitions (see the module docs).
    fn evict_for(&mut self, privileged: bool, size: usize, now_ms: u64) -> bool {
        // A stale session first: the one used longest ago, if idle past the eviction time.
        let stale = self
            .sessions
            .iter()
            .min_by_key(|(id, s)| (s.last_used_ms, **id))
            .filter(|(_, s)| now_ms.saturating_sub(s.last_used_ms) > EVICTION_MS)
            .map(|(id, _)| *id);
        if let Some(id) = stale {
            self.sessions.remove(&id);
            self.counters.evicted += 1;
            return true;
        }
        // Else the least valuable session that is not new, if the new one is worth more (a
        // privileged fetcher may only evict unprivileged sessions, as Kafka's
        // `evictableByPrivileged`).
        let least = self
            .sessions
            .iter()
            .filter(|(_, s)| s.last_used_ms.saturating_sub(s.created_ms) > EVICTION_MS)
            .filter(|(_, s)| !privileged || !s.privileged)
            .min_by_key(|(id, s)| (s.privileged, s.partitions.len(), **id))
            .map(|(id, s)| (*id, s.privileged, s.partitions.len()));
        match least {
            Some((id, p, n)) if (privileged, size) >= (p, n) => {
                self.sessions.remove(&id);
                self.counters.evicted += 1;
                true
            }
            _ => false,
        }
    }

    fn new_id(&mut self) -> i32 {
        loop {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let id = (self.rng >> 33) as i32;
            if id > 0 && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

/// Kafka's `CachedPartition.maybeUpdateResponseData`: records, a changed high watermark or
/// log start, or an error are answered.
fn must_answer(told: Option<Told>, answer: &Answer) -> bool {
    let told = told.unwrap_or(Told {
        high_watermark: -1,
        log_start_offset: -1,
    });
    answer.records_bytes > 0
        || answer.error_code != 0
        || answer.high_watermark != told.high_watermark
        || answer.log_start_offset != told.log_start_offset
}

/// What the session remembers after an answer: an error forgets the high watermark, so the
/// partition is answered again once the error clears.
fn told_after(answer: &Answer) -> Told {
    Told {
        high_watermark: if answer.error_code != 0 {
            -1
        } else {
            answer.high_watermark
        },
        log_start_offset: answer.log_start_offset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> Key {
        (Arc::from("t"), p)
    }

    fn wants(offset: i64) -> Wants {
        Wants {
            fetch_offset: offset,
            max_bytes: 1 << 20,
            current_leader_epoch: -1,
        }
    }

    fn answer(records: usize, hw: i64) -> Answer {
        Answer {
            records_bytes: records,
            error_code: 0,
            high_watermark: hw,
            log_start_offset: 0,
        }
    }

    fn opened(cache: &mut FetchSessions, n: i32, privileged: bool, now: u64) -> i32 {
        assert_eq!(
            cache.context(0, INITIAL_EPOCH, &[], &[], now),
            Context::Full
        );
        let parts = (0..n).map(|p| (key(p), wants(0), answer(0, 10))).collect();
        cache.open(parts, privileged, now)
    }

    #[test]
    fn incremental_fetches_update_add_and_forget_and_the_epoch_moves_on() {
        let mut cache = FetchSessions::new(10);
        let id = opened(&mut cache, 3, false, 0);
        assert_ne!(id, INVALID_SESSION_ID);
        // Epoch 1: partition 0 moved on, partition 3 added, partition 2 forgotten.
        let ctx = cache.context(
            id,
            1,
            &[(key(0), wants(5)), (key(3), wants(7))],
            &[key(2)],
            1,
        );
        let Context::Incremental { partitions, .. } = ctx else {
            panic!("{ctx:?}")
        };
        assert_eq!(
            partitions,
            vec![(key(0), wants(5)), (key(1), wants(0)), (key(3), wants(7))]
        );
        // The same epoch again is refused; a session nobody opened is not found.
        assert_eq!(
            cache.context(id, 1, &[], &[], 2),
            Context::Error(INVALID_FETCH_SESSION_EPOCH)
        );
        assert_eq!(
            cache.context(id.wrapping_add(1).max(1), 2, &[], &[], 2),
            Context::Error(FETCH_SESSION_ID_NOT_FOUND)
        );
        assert!(matches!(
            cache.context(id, 2, &[], &[], 3),
            Context::Incremental { .. }
        ));
        // Forgetting every partition closes the session.
        assert_eq!(
            cache.context(id, 3, &[], &[key(0), key(1), key(3)], 4),
            Context::Sessionless
        );
        assert!(cache.is_empty());
    }

    #[test]
    fn a_full_fetch_closes_the_session_it_names() {
        let mut cache = FetchSessions::new(10);
        let id = opened(&mut cache, 2, false, 0);
        assert_eq!(
            cache.context(id, FINAL_EPOCH, &[], &[], 1),
            Context::Sessionless
        );
        assert!(cache.is_empty());
        let id = opened(&mut cache, 2, false, 0);
        assert_eq!(cache.context(id, INITIAL_EPOCH, &[], &[], 1), Context::Full);
        assert_eq!(
            cache.context(id, 1, &[], &[], 1),
            Context::Error(FETCH_SESSION_ID_NOT_FOUND)
        );
    }

    #[test]
    fn only_partitions_with_something_to_say_are_answered_and_they_move_to_the_end() {
        let mut cache = FetchSessions::new(10);
        let id = opened(&mut cache, 3, false, 0);
        let Context::Incremental { partitions, .. } = cache.context(id, 1, &[], &[], 1) else {
            panic!()
        };
        // Partition 1 has records; 0 and 2 are as they were told (hw 10).
        let answers: Vec<(Key, Answer)> = partitions
            .iter()
            .map(|(k, _)| (k.clone(), answer(if k.1 == 1 { 100 } else { 0 }, 10)))
            .collect();
        assert_eq!(cache.answered(id, &answers), vec![false, true, false]);
        let Context::Incremental { partitions, .. } = cache.context(id, 2, &[], &[], 2) else {
            panic!()
        };
        let order: Vec<i32> = partitions.iter().map(|(k, _)| k.1).collect();
        assert_eq!(order, vec![0, 2, 1], "the answered partition goes last");
        // A high watermark that moved is answered once; an error every time, and the
        // partition again once the error clears.
        let mut err = answer(0, -1);
        err.error_code = 6;
        let answers = vec![
            (key(0), answer(0, 11)),
            (key(2), err),
            (key(1), answer(0, 10)),
        ];
        assert_eq!(cache.answered(id, &answers), vec![true, true, false]);
        let answers = vec![
            (key(1), answer(0, 10)),
            (key(0), answer(0, 11)),
            (key(2), answer(0, 10)),
        ];
        assert_eq!(cache.answered(id, &answers), vec![false, false, true]);
    }

    #[test]
    fn a_full_cache_evicts_a_stale_session_then_a_smaller_older_one_but_never_a_new_one() {
        let mut cache = FetchSessions::new(2);
        let a = opened(&mut cache, 5, false, 0);
        let b = opened(&mut cache, 3, false, 0);
        // Both new (created under EVICTION_MS ago), neither stale: no room.
        assert_eq!(opened(&mut cache, 50, false, 1_000), INVALID_SESSION_ID);
        // `a` is used later on; `b` goes stale.
        let later = EVICTION_MS + 10;
        assert!(matches!(
            cache.context(a, 1, &[], &[], later),
            Context::Incremental { .. }
        ));
        let c = opened(&mut cache, 1, false, later + 1);
        assert_ne!(c, INVALID_SESSION_ID, "the stale session made room");
        assert_eq!(
            cache.context(b, 1, &[], &[], later + 1),
            Context::Error(FETCH_SESSION_ID_NOT_FOUND)
        );
        // Now `a` (5 partitions, not new, in use) and `c` (new). A smaller fetcher is refused,
        // a larger one evicts `a`; a replica's session then outranks consumers' sessions.
        assert_eq!(opened(&mut cache, 4, false, later + 2), INVALID_SESSION_ID);
        let d = opened(&mut cache, 6, false, later + 2);
        assert_ne!(d, INVALID_SESSION_ID);
        assert_eq!(
            cache.context(a, 2, &[], &[], later + 2),
            Context::Error(FETCH_SESSION_ID_NOT_FOUND)
        );
        assert_eq!(cache.len(), 2);
        let stats = cache.stats();
        assert_eq!((stats.sessions, stats.partitions), (2, 7));
        assert_eq!(
            (
                stats.counters.created,
                stats.counters.evicted,
                stats.counters.refused_for_room
            ),
            (4, 2, 2)
        );
    }

    #[test]
    fn sessions_hold_at_most_their_memory_bound() {
        // Room for 10 partitions of topic "t".
        let mut cache = FetchSessions::with_bytes_max(100, 10 * (PARTITION_BYTES + 1));
        assert_eq!(
            opened(&mut cache, 11, false, 0),
            INVALID_SESSION_ID,
            "too large alone"
        );
        let a = opened(&mut cache, 6, false, 0);
        assert_ne!(a, INVALID_SESSION_ID);
        // Another 6 would pass the bound, and `a` is new: refused.
        assert_eq!(opened(&mut cache, 6, false, 1), INVALID_SESSION_ID);
        let b = opened(&mut cache, 4, false, 1);
        assert_ne!(b, INVALID_SESSION_ID);
        // `b` growing past the bound closes it; `a` is untouched.
        let more: Vec<(Key, Wants)> = (4..6).map(|p| (key(p), wants(0))).collect();
        assert_eq!(
            cache.context(b, 1, &more, &[], 2),
            Context::Error(FETCH_SESSION_ID_NOT_FOUND)
        );
        assert!(matches!(
            cache.context(a, 1, &[], &[], 2),
            Context::Incremental { .. }
        ));
        assert_eq!(cache.stats().partitions, 6);
    }

    #[test]
    fn no_slots_means_no_sessions_and_epochs_wrap_to_one() {
        let mut cache = FetchSessions::new(0);
        assert_eq!(opened(&mut cache, 3, true, 0), INVALID_SESSION_ID);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(0), 1);
    }
}
