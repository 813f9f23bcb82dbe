//! InitProducerId (idempotent and transactional producers), AddPartitionsToTxn,
//! AddOffsetsToTxn, EndTxn: the coordinator in `coordinator/transactions/` does the work; this file is the wire
//! shape.

use super::topic_name;
use crate::acl::{Operation, ResourceType};
use crate::broker::Shared;
use crate::kafka::errors::for_version;
use crate::kafka::session::Session;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, ApiKey, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProducerId, ResponseKind,
};
use mirrorlog::engine::{Mode, TopicPartition};

/// InitProducerId: a fresh producer id for an idempotent producer (Kafka gives one to every
/// such request, a KIP-360 bump included); the coordinator's answer for a transactional one.
///
/// ACLs (Kafka's): a transactional id needs WRITE on it (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`),
/// an idempotent producer IDEMPOTENT_WRITE on the cluster or WRITE on some topic
/// (`CLUSTER_AUTHORIZATION_FAILED`).
pub async fn init_producer_id(
    b: &Shared,
    who: &Session,
    r: InitProducerIdRequest,
    version: i16,
) -> ResponseKind {
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    let result = match &r.transactional_id {
        None if !who.may_cluster(b, Operation::IdempotentWrite)
            && !who.may_any(b, Operation::Write, ResourceType::Topic) =>
        {
            Err(ResponseError::ClusterAuthorizationFailed)
        }
        Some(id) if !may_txn(b, who, Operation::Write, id.0.as_str()) => {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        }
        None => b
            .producer_ids
            .lock()
            .await
            .allocate()
            .map(|pid| (pid, 0))
            .map_err(|_| ResponseError::KafkaStorageError),
        // Kafka's TransactionCoordinator: an empty transactional id is a bad request.
        Some(id) if id.0.is_empty() => Err(ResponseError::InvalidRequest),
        Some(id) => {
            let expected = (r.producer_id.0 >= 0).then_some((r.producer_id.0, r.producer_epoch));
            // Coordinator first, then the allocator: the one order both are taken in.
            let mut txns = b.txns.lock().await;
            let mut ids = b.producer_ids.lock().await;
            txns.init_producer_id(
                &b.engine,
                &mut ids,
                id.0.as_str(),
                r.transaction_timeout_ms,
                b.config.txn_timeout_ms_max,
                expected,
            )
            .await
        }
    };
    match result {
        Ok((pid, epoch)) => {
            resp.producer_id = ProducerId(pid);
            resp.producer_epoch = epoch;
        }
        Err(e) => resp.error_code = for_version(ApiKey::InitProducerId, version, e.code()),
    }
    ResponseKind::InitProducerId(resp)
}

fn may_txn(b: &Shared, who: &Session, op: Operation, id: &str) -> bool {
    who.may(b, op, ResourceType::TransactionalId, id)
}

/// AddPartitionsToTxn (v0–v3: one transaction per request, from the producer). ACLs: WRITE on
/// the transactional id (every partition `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`) and on each
/// topic (`TOPIC_AUTHORIZATION_FAILED`; the rest then `OPERATION_NOT_ATTEMPTED`).
pub async fn add_partitions_to_txn(
    b: &Shared,
    who: &Session,
    r: AddPartitionsToTxnRequest,
    version: i16,
) -> ResponseKind {
    let mut resp = AddPartitionsToTxnResponse::default();
    let id = r.v3_and_below_transactional_id.0.to_string();
    let txn_denied = !may_txn(b, who, Operation::Write, &id);
    // The request's partitions as a map (a partition named twice is one), each topic's name
    // kept once: no work or copy per entry beyond its answer.
    let topics = super::partition_map(
        r.v3_and_below_topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partitions.iter().map(|p| (*p, ())))),
    );
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Refused {
        Denied,
        Unknown,
        ReadOnly,
    }
    let mut refusals: Vec<Vec<Option<Refused>>> = Vec::with_capacity(topics.len());
    let mut asked = Vec::new();
    for (name, partitions) in &topics {
        let topic_denied = txn_denied || !who.may_topic(b, Operation::Write, name);
        let mut mine = Vec::with_capacity(partitions.len());
        for (p, ()) in partitions {
            let refused = if topic_denied {
                Some(Refused::Denied)
            } else if !b.has_partition(name, *p) {
                Some(Refused::Unknown)
            } else {
                // A mirroring (paused, failed) partition takes no local writes, the
                // transaction's markers included: refused here, as its Produce is, instead of
                // a transaction whose EndTxn can never write its markers (stuck in Prepare*).
                let local = b
                    .engine
                    .state(&TopicPartition::new(name, *p))
                    .await
                    .is_ok_and(|s| s.mode == Mode::Local);
                if local {
                    asked.push((name.clone(), *p));
                    None
                } else {
                    Some(Refused::ReadOnly)
                }
            };
            mine.push(refused);
        }
        refusals.push(mine);
    }
    // Kafka: if any partition is refused, none is added; the others get
    // OPERATION_NOT_ATTEMPTED.
    let any_refused = refusals.iter().flatten().any(Option::is_some);
    let outcome = if !any_refused {
        b.txns.lock().await.add_partitions(
            &id,
            r.v3_and_below_producer_id.0,
            r.v3_and_below_producer_epoch,
            &asked,
        )
    } else {
        Err(ResponseError::OperationNotAttempted)
    };
    for ((name, partitions), refused) in topics.iter().zip(refusals) {
        let mut out = AddPartitionsToTxnTopicResult::default();
        out.name = topic_name(name);
        for ((p, ()), refused) in partitions.iter().zip(refused) {
            let mut pr = AddPartitionsToTxnPartitionResult::default();
            pr.partition_index = *p;
            pr.partition_error_code = match refused {
                _ if txn_denied => ResponseError::TransactionalIdAuthorizationFailed.code(),
                Some(Refused::Denied) => ResponseError::TopicAuthorizationFailed.code(),
                Some(Refused::Unknown) => ResponseError::UnknownTopicOrPartition.code(),
                // The code a Produce to it gets (errors.rs: read-only partition).
                Some(Refused::ReadOnly) => ResponseError::PolicyViolation.code(),
                None => outcome.err().map_or(0, |e| {
                    for_version(ApiKey::AddPartitionsToTxn, version, e.code())
                }),
            };
            out.results_by_partition.push(pr);
        }
        resp.results_by_topic_v3_and_below.push(out);
    }
    ResponseKind::AddPartitionsToTxn(resp)
}

/// AddOffsetsToTxn: the group's partition of `__consumer_offsets` joins the transaction, so
/// that its EndTxn writes a marker there, which commits or drops the offsets its
/// TxnOffsetCommit wrote. ACLs: WRITE on the transactional id, READ on the group.
pub async fn add_offsets_to_txn(
    b: &Shared,
    who: &Session,
    r: AddOffsetsToTxnRequest,
    version: i16,
) -> ResponseKind {
    let mut resp = AddOffsetsToTxnResponse::default();
    let id = r.transactional_id.0.as_str();
    let group = r.group_id.0.as_str();
    let result = if !may_txn(b, who, Operation::Write, id) {
        Err(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !who.may(b, Operation::Read, ResourceType::Group, group) {
        Err(ResponseError::GroupAuthorizationFailed)
    } else {
        match b.offsets_partition(group).await {
            Err(_) => Err(ResponseError::CoordinatorNotAvailable),
            Ok(tp) => b.txns.lock().await.add_partitions(
                id,
                r.producer_id.0,
                r.producer_epoch,
                &[(tp.topic.to_string(), tp.partition)],
            ),
        }
    };
    if let Err(e) = result {
        resp.error_code = for_version(ApiKey::AddOffsetsToTxn, version, e.code());
    }
    ResponseKind::AddOffsetsToTxn(resp)
}

/// EndTxn. ACLs: WRITE on the transactional id (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`).
pub async fn end_txn(b: &Shared, who: &Session, r: EndTxnRequest, version: i16) -> ResponseKind {
    let mut resp = EndTxnResponse::default();
    resp.producer_id = r.producer_id;
    resp.producer_epoch = r.producer_epoch;
    if !may_txn(b, who, Operation::Write, r.transactional_id.0.as_str()) {
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return ResponseKind::EndTxn(resp);
    }
    let mut txns = b.txns.lock().await;
    let out = txns
        .end_txn(
            &b.engine,
            r.transactional_id.0.as_str(),
            r.producer_id.0,
            r.producer_epoch,
            r.committed,
        )
        .await;
    if let Err(e) = out {
        resp.error_code = for_version(ApiKey::EndTxn, version, e.code());
    }
    resp.producer_id = r.producer_id;
    resp.producer_epoch = r.producer_epoch;
    ResponseKind::EndTxn(resp)
}
