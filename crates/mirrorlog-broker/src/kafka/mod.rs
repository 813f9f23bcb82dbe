//! The Kafka protocol served: the listener (`listener.rs`: connections, their reader and
//! writer, limits) and its login phase (`login.rs`), each connection's session (`session.rs`:
//! who asks, what the ACLs allow), the handlers (one file per family of APIs, each from a
//! decoded request to its response), and the engine's errors as Kafka's codes (`errors.rs`).
//!
//! [`dispatch`] runs on the connection's reader, in request order, and starts whatever must
//! start in that order (a Produce's appends are queued to the engine before the next request is
//! read, so one producer's pipelined batches reach a partition in sequence); the rest of the work
//! is the returned future, which the connection's writer awaits in order, so responses leave in
//! request order as Kafka requires.

mod acls;
mod cluster;
mod configs;
mod consumer_groups;
pub mod errors;
mod fetch;
mod groups;
pub mod listener;
pub mod login;
mod membership;
mod metadata;
mod offsets;
mod produce;
mod sasl;
pub mod session;
mod topics;
mod transactions;

pub use crate::broker::leader_epoch;
pub use crate::net::wire::{str_bytes, topic_name};

pub use metadata::{api_versions_body, api_versions_refusal};

use crate::broker::Shared;
use crate::kafka::session::Session;
use crate::net::request_queue::Queued;
use crate::net::wire::Request;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{RequestKind, ResponseKind};
use mirrorlog::engine::TopicPartition;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A response to come.
pub type Pending = Pin<Box<dyn Future<Output = ResponseKind> + Send>>;

/// No response to come; the future says, in request order, whether the connection is to be
/// closed (Kafka closes it when an `acks=0` produce fails, the client's only way to learn of it).
pub type Silent = Pin<Box<dyn Future<Output = bool> + Send>>;

/// What a request gets.
pub enum Reply {
    /// A response, once the future resolves.
    Later(Pending),
    /// No response (Produce with `acks=0`).
    None(Silent),
}

fn later<F: Future<Output = ResponseKind> + Send + 'static>(f: F) -> Reply {
    Reply::Later(Box::pin(f))
}

/// A reply whose work runs to its end even when the request's connection goes first: a change
/// of durable state (a topic half created, a commit appended but not applied, transaction
/// markers half written) must not stop at an `.await` because the client left, as the
/// connection drops the requests it can no longer answer. The work is its own task; only the
/// wait for its answer is dropped.
fn to_the_end<F: Future<Output = ResponseKind> + Send + 'static>(f: F) -> Reply {
    let task = tokio::spawn(f);
    later(async move {
        match task.await {
            Ok(answer) => answer,
            // The task is never aborted, so this is its panic: the connection's, not the
            // broker's (tokio confines it to the connection task).
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    })
}

/// Starts serving `request`, which came from `session` (its listener, principal and address:
/// every handler asks the session what the ACLs allow, and answers Kafka's
/// `*_AUTHORIZATION_FAILED` codes where they refuse).
///
/// `queued` is the request's place in `queued.max.requests`: held until its answer is ready
/// (a long-poll Fetch gives it back when it parks).
pub fn dispatch(
    broker: &Shared,
    request: Request,
    session: &Arc<Session>,
    queued: Queued,
) -> Reply {
    let version = request.header.request_api_version;
    let client_id = request
        .header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    let b = broker.clone();
    let who = session.clone();
    let mut queued = Some(queued);
    let reply = match request.body {
        RequestKind::ApiVersions(r) => later(async move { metadata::api_versions(&r, version) }),
        RequestKind::Metadata(r) => {
            to_the_end(async move { metadata::metadata(&b, &who, r, version).await })
        }
        RequestKind::DescribeCluster(r) => {
            later(async move { cluster::describe_cluster(&b, &who, &r) })
        }
        RequestKind::DescribeLogDirs(r) => {
            later(async move { cluster::describe_log_dirs(&b, &who, r, version).await })
        }
        RequestKind::FindCoordinator(r) => {
            to_the_end(async move { metadata::find_coordinator(&b, &who, &r, version).await })
        }
        // Started here, in request order; finished as its own task.
        RequestKind::OffsetCommit(r) => to_the_end(groups::offset_commit(&b, &who, r, version)),
        RequestKind::OffsetFetch(r) => {
            later(async move { groups::offset_fetch(&b, &who, &r, version) })
        }
        RequestKind::JoinGroup(r) => {
            // A join waits for the group's rebalance: it holds no place in
            // queued.max.requests while it does, as a parked Fetch holds none.
            drop(queued.take());
            to_the_end(async move { membership::join_group(&b, &who, r, version, client_id).await })
        }
        RequestKind::SyncGroup(r) => {
            drop(queued.take());
            to_the_end(async move { membership::sync_group(&b, &who, r, version).await })
        }
        RequestKind::Heartbeat(r) => later(async move { membership::heartbeat(&b, &who, &r) }),
        RequestKind::LeaveGroup(r) => {
            to_the_end(async move { membership::leave_group(&b, &who, r, version).await })
        }
        // Run here, in request order; its write's wait is its own task.
        RequestKind::ConsumerGroupHeartbeat(r) => {
            to_the_end(consumer_groups::heartbeat(&b, &who, r, client_id))
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            later(async move { consumer_groups::describe(&b, &who, &r) })
        }
        RequestKind::ListGroups(r) => later(async move { groups::list_groups(&b, &who, &r) }),
        RequestKind::DescribeGroups(r) => {
            later(async move { groups::describe_groups(&b, &who, &r) })
        }
        RequestKind::DeleteGroups(r) => {
            to_the_end(async move { groups::delete_groups(&b, &who, r).await })
        }
        RequestKind::OffsetDelete(r) => {
            to_the_end(async move { groups::offset_delete(&b, &who, r).await })
        }
        RequestKind::CreateTopics(r) => {
            to_the_end(async move { topics::create_topics(&b, &who, r, version).await })
        }
        RequestKind::CreatePartitions(r) => {
            to_the_end(async move { topics::create_partitions(&b, &who, r).await })
        }
        RequestKind::DeleteTopics(r) => {
            to_the_end(async move { topics::delete_topics(&b, &who, r, version).await })
        }
        RequestKind::DeleteRecords(r) => {
            to_the_end(async move { topics::delete_records(&b, &who, r).await })
        }
        RequestKind::DescribeConfigs(r) => {
            later(async move { configs::describe_configs(&b, &who, &r, version) })
        }
        RequestKind::AlterConfigs(r) => {
            to_the_end(async move { configs::alter_configs(&b, &who, r).await })
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            to_the_end(async move { configs::incremental_alter_configs(&b, &who, r).await })
        }
        RequestKind::DescribeAcls(r) => later(async move { acls::describe_acls(&b, &who, &r) }),
        RequestKind::CreateAcls(r) => later(async move { acls::create_acls(&b, &who, r) }),
        RequestKind::DeleteAcls(r) => later(async move { acls::delete_acls(&b, &who, &r) }),
        RequestKind::Produce(r) => produce::produce(broker, session, r, version),
        RequestKind::Fetch(r) => {
            let place = queued.take();
            later(async move { fetch::fetch(&b, &who, r, version, place).await })
        }
        RequestKind::ListOffsets(r) => {
            later(async move { offsets::list_offsets(&b, &who, r, version).await })
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            later(async move { offsets::offset_for_leader_epoch(&b, &who, r).await })
        }
        RequestKind::InitProducerId(r) => {
            to_the_end(async move { transactions::init_producer_id(&b, &who, r, version).await })
        }
        RequestKind::AddPartitionsToTxn(r) => {
            to_the_end(
                async move { transactions::add_partitions_to_txn(&b, &who, r, version).await },
            )
        }
        RequestKind::AddOffsetsToTxn(r) => {
            to_the_end(async move { transactions::add_offsets_to_txn(&b, &who, r, version).await })
        }
        RequestKind::TxnOffsetCommit(r) => {
            to_the_end(async move { groups::txn_offset_commit(&b, &who, r).await })
        }
        RequestKind::EndTxn(r) => {
            to_the_end(async move { transactions::end_txn(&b, &who, r, version).await })
        }
        // The login is the connection's (`login.rs`); these reach here after it, or on a
        // listener without SASL, and get Kafka's ILLEGAL_SASL_STATE.
        RequestKind::SaslHandshake(_) => later(async { sasl::handshake_refused() }),
        RequestKind::SaslAuthenticate(_) => later(async { sasl::authenticate_refused() }),
        // `wire::decode_request` refuses every API outside `wire::SUPPORTED`, so nothing else
        // reaches here; were it to, the connection is closed after what came before is answered,
        // as for any request that cannot be served.
        other => {
            tracing::warn!(api = ?std::mem::discriminant(&other), "no handler");
            Reply::None(Box::pin(async { true }))
        }
    };
    match queued {
        Some(place) => reply.holding(place),
        None => reply,
    }
}

impl Reply {
    /// The same reply, holding `place` until it resolves.
    fn holding(self, place: Queued) -> Reply {
        match self {
            Reply::Later(f) => Reply::Later(Box::pin(async move {
                let out = f.await;
                drop(place);
                out
            })),
            Reply::None(f) => Reply::None(Box::pin(async move {
                let out = f.await;
                drop(place);
                out
            })),
        }
    }
}

/// Kafka's check of a request's `current_leader_epoch` (-1, or a version without the field: no
/// check): a client behind the partition's epoch gets `FENCED_LEADER_EPOCH`, one ahead of it
/// `UNKNOWN_LEADER_EPOCH`; both make it refresh its metadata and retry.
/// The partition's state is asked for at once (so that many checks run together); the future
/// resolves the answer.
pub fn epoch_refusal(
    b: &Shared,
    tp: &TopicPartition,
    requested: i32,
) -> impl Future<Output = Option<i16>> + Send + 'static {
    let state = (requested >= 0).then(|| b.engine.state(tp));
    async move {
        match state?.await {
            Ok(s) => {
                let current = leader_epoch(&s);
                match requested.cmp(&current) {
                    std::cmp::Ordering::Less => Some(ResponseError::FencedLeaderEpoch.code()),
                    std::cmp::Ordering::Greater => Some(ResponseError::UnknownLeaderEpoch.code()),
                    std::cmp::Ordering::Equal => None,
                }
            }
            Err(e) => Some(crate::kafka::errors::code(&e)),
        }
    }
}

/// `items` without repeats, each where it first came: the set or map Kafka's request classes
/// make of a list, so that an entry asked many times costs one answer and one piece of work.
pub fn distinct<T: std::hash::Hash + Eq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|item| seen.insert(item.clone()))
        .collect()
}

/// A request's partitions as the map Kafka's request classes make of them: each topic once,
/// where it first came, and each of its partitions once, with its last entry's data. A topic's
/// name is kept once, however many partitions name it (a name may be 32 KiB).
pub fn partition_map<P, I: IntoIterator<Item = (i32, P)>>(
    topics: impl IntoIterator<Item = (String, I)>,
) -> Vec<(String, Vec<(i32, P)>)> {
    let mut out: Vec<(String, Vec<(i32, P)>)> = Vec::new();
    let mut topic_at = std::collections::HashMap::<String, usize>::new();
    let mut partition_at = std::collections::HashMap::<(usize, i32), usize>::new();
    for (name, partitions) in topics {
        let t = match topic_at.get(&name) {
            Some(&t) => t,
            None => {
                topic_at.insert(name.clone(), out.len());
                out.push((name, Vec::new()));
                out.len() - 1
            }
        };
        for (partition, data) in partitions {
            let parts = &mut out[t].1;
            match partition_at.entry((t, partition)) {
                std::collections::hash_map::Entry::Occupied(at) => parts[*at.get()].1 = data,
                std::collections::hash_map::Entry::Vacant(at) => {
                    at.insert(parts.len());
                    parts.push((partition, data));
                }
            }
        }
    }
    out
}
