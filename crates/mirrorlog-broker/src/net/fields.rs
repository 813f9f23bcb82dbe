//! The fields of every request the broker serves, named once: what the door checks
//! ([`check_strings`]) and what the structured wire fuzzer sets to the edges
//! (`tests/wire_fuzz.rs`, through [`Fields::slots`]).
//!
//! Kafka's schemas bound every `string` field to 32,767 bytes (its classic encoding has an
//! `int16` length; the compact encoding of flexible versions could say more, and Kafka's parser
//! refuses it: "string field X had invalid length"). The `kafka-protocol` crate decodes a longer
//! compact string without complaint, and such a string would reach group and transaction records
//! whose encoding cannot hold it. So every string of a decoded request is measured here, before
//! any handler sees it, and a request with one over [`STRING_BYTES_MAX`] is refused as a request
//! that does not parse (the connection closes, as Kafka closes it).
//!
//! Each served message type lists all of its fields (`fields!` below); a unit test compares the
//! lists with the crate's own field names (its `Debug` output), so a field the crate adds cannot
//! go unchecked.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

/// The longest string Kafka's schemas allow, in bytes (`Short.MAX_VALUE`).
pub const STRING_BYTES_MAX: usize = i16::MAX as usize;

/// A string field over [`STRING_BYTES_MAX`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StringTooLong {
    /// The field's name.
    pub field: &'static str,
    /// Its length in bytes.
    pub bytes: usize,
}

impl std::fmt::Display for StringTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "string field {} had invalid length {} (at most {STRING_BYTES_MAX})",
            self.field, self.bytes
        )
    }
}

/// A field's place, for a writer that sets it (the fuzzer).
pub enum Slot<'a> {
    /// A string (a topic name, a group id, ...).
    Str(&'a mut StrBytes),
    /// An integer of any width, set through `i64` (truncated to the width).
    Int(&'a mut dyn IntSlot),
    /// A boolean.
    Bool(&'a mut bool),
    /// A UUID (topic ids).
    Uuid(&'a mut uuid::Uuid),
    /// Bytes (records, group metadata, SASL tokens).
    Bytes(&'a mut Bytes),
    /// An array.
    List(&'a mut dyn ListSlot),
    /// A nested structure.
    Struct(&'a mut dyn Fields),
    /// A nullable value.
    Nullable(&'a mut dyn NullableSlot),
    /// Tagged fields the crate does not know.
    Tagged(&'a mut BTreeMap<i32, Bytes>),
}

/// An integer field.
pub trait IntSlot {
    /// Its value.
    fn get(&self) -> i64;
    /// Sets it to `v`, truncated to the field's width.
    fn set(&mut self, v: i64);
    /// Its width in bits.
    fn bits(&self) -> u32;
}

/// An array field.
pub trait ListSlot {
    /// Its length.
    fn len(&self) -> usize;
    /// Whether it is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Resizes it to `n` elements, new ones at their defaults.
    fn resize(&mut self, n: usize);
    /// Resizes it to `n` elements, new ones copies of the first (duplicates), if any.
    fn repeat_first(&mut self, n: usize);
    /// The element `i`.
    fn element(&mut self, i: usize) -> Option<Slot<'_>>;
}

/// A nullable field.
pub trait NullableSlot {
    /// Whether it is null.
    fn is_null(&self) -> bool;
    /// Makes it null.
    fn set_null(&mut self);
    /// Makes it present (at its default when it was null) and returns the value's slot.
    fn present(&mut self) -> Slot<'_>;
}

/// A message or nested structure of a request: its fields by name.
pub trait Fields {
    /// Every field, with its name, as a slot to set.
    fn slots(&mut self) -> Vec<(&'static str, Slot<'_>)>;
    /// Calls `f` with every string of the structure, nested ones included, and its field's
    /// name; stops at the first `Err`.
    fn strings(
        &self,
        f: &mut dyn FnMut(&'static str, &str) -> Result<(), StringTooLong>,
    ) -> Result<(), StringTooLong>;
}

/// One field of a message, of any type the crate uses.
pub trait Field {
    /// The field as a slot.
    fn slot(&mut self) -> Slot<'_>;
    /// Its strings (see [`Fields::strings`]).
    fn strings(
        &self,
        name: &'static str,
        f: &mut dyn FnMut(&'static str, &str) -> Result<(), StringTooLong>,
    ) -> Result<(), StringTooLong>;
}

macro_rules! int_fields {
    ($($t:ty => |$v:ident| $get:expr, |$x:ident, $n:ident| $set:expr, $bits:expr;)*) => {$(
        impl IntSlot for $t {
            fn get(&self) -> i64 {
                let $v = self;
                $get
            }
            fn set(&mut self, $n: i64) {
                let $x = self;
                $set
            }
            fn bits(&self) -> u32 {
                $bits
            }
        }
        impl Field for $t {
            fn slot(&mut self) -> Slot<'_> {
                Slot::Int(self)
            }
            fn strings(
                &self,
                _: &'static str,
                _: &mut dyn FnMut(&'static str, &str) -> Result<(), StringTooLong>,
            ) -> Result<(), StringTooLong> {
                Ok(())
            }
        }
    )*};
}

// Truncation to the field's width is the point: the fuzzer sets edge values of every width.
#[allow(clippy::cast_possible_truncation)]
mod ints {
    use super::*;
    int_fields! {
        i8 => |v| i64::from(*v), |x, n| *x = n as i8, 8;
        i16 => |v| i64::from(*v), |x, n| *x = n as i16, 16;
        i32 => |v| i64::from(*v), |x, n| *x = n as i32, 32;
        i64 => |v| *v, |x, n| *x = n, 64;
        BrokerId => |v| i64::from(v.0), |x, n| x.0 = n as i32, 32;
        ProducerId => |v| v.0, |x, n| x.0 = n, 64;
    }
}

macro_rules! leaf_fields {
    ($($t:ty => |$x:ident| $slot:expr;)*) => {$(
        impl Field for $t {
            fn slot(&mut self) -> Slot<'_> {
                let $x = self;
                $slot
            }
            fn strings(
                &self,
                _: &'static str,
                _: &mut dyn FnMut(&'static str, &str) -> Result<(), StringTooLong>,
            ) -> Result<(), StringTooLong> {
                Ok(())
            }
        }
    )*};
}

leaf_fields! {
    bool => |x| Slot::Bool(x);
    uuid::Uuid => |x| Slot::Uuid(x);
    Bytes => |x| Slot::Bytes(x);
    BTreeMap<i32, Bytes> => |x| Slot::Tagged(x);
}

macro_rules! string_fields {
    ($($t:ty => |$x:ident| $inner:expr;)*) => {$(
        impl Field for $t {
            fn slot(&mut self) -> Slot<'_> {
                let $x = self;
                Slot::Str($inner)
            }
            fn strings(
                &self,
                name: &'static str,
                f: &mut dyn FnMut(&'static str, &str) -> Result<(), StringTooLong>,
            ) -> Result<(), StringTooLong> {
                f(name, self)
            }
        }
    )*};
}

string_fields! {
    StrBytes => |x| x;
    GroupId => |x| &mut x.0;
    TopicName => |x| &mut x.0;
    TransactionalId => |x| &mut x.0;
}

impl<T: Field + Default> NullableSlot for Option<T> {
    fn is_null(&self) -> bool {
        self.is_none()
    }
    fn set_null(&mut self) {
        *self = None;
    }
    fn present(&mut self) -> Slot<'_> {
        self.get_or_insert_with(T::default).slot()
    }
}

impl<T: Field + Default> Field for Option<T> {
    fn slot(&mut self) -> Slot<'_> {
        Slot::Nullable(self)
    }
    fn strings(
        &self,
        name: &'static str,
        f: &mut dyn FnMut(&'static str, &str) -> Result<(), StringTooLong>,
    ) -> Result<(), StringTooLong> {
        match self {
            Some(v) => v.strings(name, f),
            None => Ok(()),
        }
    }
}

impl<T: Field + Default + Clone> ListSlot for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn resize(&mut self, n: usize) {
        Vec::resize_with(self, n, T::default);
    }
    fn repeat_first(&mut self, n: usize) {
        match self.first().cloned() {
            Some(first) => Vec::resize(self, n, first),
            None => ListSlot::resize(self, n),
        }
    }
    fn element(&mut self, i: usize) -> Option<Slot<'_>> {
        self.get_mut(i).map(Field::slot)
    }
}

impl<T: Field + Default + Clone> Field for Vec<T> {
    fn slot(&mut self) -> Slot<'_> {
        Slot::List(self)
    }
    fn strings(
        &self,
        name: &'static str,
        f: &mut dyn FnMut(&'static str, &str) -> Result<(), StringTooLong>,
    ) -> Result<(), StringTooLong> {
        self.iter().try_for_each(|v| v.strings(name, f))
    }
}

/// The field names of a message type, as listed below.
pub trait Named {
    /// The type's name.
    const NAME: &'static str;
    /// Its fields, in the crate's order.
    const FIELDS: &'static [&'static str];
}

macro_rules! fields {
    ($($module:ident :: $t:ident { $($f:ident),* $(,)? })*) => {
        $(
            impl Named for $module::$t {
                const NAME: &'static str = stringify!($t);
                const FIELDS: &'static [&'static str] = &[$(stringify!($f)),*];
            }
            impl Fields for $module::$t {
                fn slots(&mut self) -> Vec<(&'static str, Slot<'_>)> {
                    vec![$((stringify!($f), Field::slot(&mut self.$f))),*]
                }
                fn strings(
                    &self,
                    f: &mut dyn FnMut(&'static str, &str) -> Result<(), StringTooLong>,
                ) -> Result<(), StringTooLong> {
                    $(Field::strings(&self.$f, stringify!($f), f)?;)*
                    Ok(())
                }
            }
            impl Field for $module::$t {
                fn slot(&mut self) -> Slot<'_> {
                    Slot::Struct(self)
                }
                fn strings(
                    &self,
                    _: &'static str,
                    f: &mut dyn FnMut(&'static str, &str) -> Result<(), StringTooLong>,
                ) -> Result<(), StringTooLong> {
                    Fields::strings(self, f)
                }
            }
        )*
        /// Every listed type's name and `{:#?}` of its default value (the completeness test).
        #[cfg(test)]
        fn listed() -> Vec<(&'static str, &'static [&'static str], String)> {
            vec![$((
                <$module::$t as Named>::NAME,
                <$module::$t as Named>::FIELDS,
                format!("{:#?}", $module::$t::default()),
            )),*]
        }
    };
}

fields! {
    add_offsets_to_txn_request::AddOffsetsToTxnRequest { transactional_id, producer_id, producer_epoch, group_id, unknown_tagged_fields }
    add_partitions_to_txn_request::AddPartitionsToTxnRequest { transactions, v3_and_below_transactional_id, v3_and_below_producer_id, v3_and_below_producer_epoch, v3_and_below_topics, unknown_tagged_fields }
    add_partitions_to_txn_request::AddPartitionsToTxnTopic { name, partitions, unknown_tagged_fields }
    add_partitions_to_txn_request::AddPartitionsToTxnTransaction { transactional_id, producer_id, producer_epoch, verify_only, topics, unknown_tagged_fields }
    alter_configs_request::AlterConfigsRequest { resources, validate_only, unknown_tagged_fields }
    alter_configs_request::AlterConfigsResource { resource_type, resource_name, configs, unknown_tagged_fields }
    alter_configs_request::AlterableConfig { name, value, unknown_tagged_fields }
    api_versions_request::ApiVersionsRequest { client_software_name, client_software_version, unknown_tagged_fields }
    consumer_group_describe_request::ConsumerGroupDescribeRequest { group_ids, include_authorized_operations, unknown_tagged_fields }
    consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest { group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex, server_assignor, topic_partitions, unknown_tagged_fields }
    consumer_group_heartbeat_request::TopicPartitions { topic_id, partitions, unknown_tagged_fields }
    create_acls_request::AclCreation { resource_type, resource_name, resource_pattern_type, principal, host, operation, permission_type, unknown_tagged_fields }
    create_acls_request::CreateAclsRequest { creations, unknown_tagged_fields }
    create_partitions_request::CreatePartitionsAssignment { broker_ids, unknown_tagged_fields }
    create_partitions_request::CreatePartitionsRequest { topics, timeout_ms, validate_only, unknown_tagged_fields }
    create_partitions_request::CreatePartitionsTopic { name, count, assignments, unknown_tagged_fields }
    create_topics_request::CreatableReplicaAssignment { partition_index, broker_ids, unknown_tagged_fields }
    create_topics_request::CreatableTopic { name, num_partitions, replication_factor, assignments, configs, unknown_tagged_fields }
    create_topics_request::CreatableTopicConfig { name, value, unknown_tagged_fields }
    create_topics_request::CreateTopicsRequest { topics, timeout_ms, validate_only, unknown_tagged_fields }
    delete_acls_request::DeleteAclsFilter { resource_type_filter, resource_name_filter, pattern_type_filter, principal_filter, host_filter, operation, permission_type, unknown_tagged_fields }
    delete_acls_request::DeleteAclsRequest { filters, unknown_tagged_fields }
    delete_groups_request::DeleteGroupsRequest { groups_names, unknown_tagged_fields }
    delete_records_request::DeleteRecordsPartition { partition_index, offset, unknown_tagged_fields }
    delete_records_request::DeleteRecordsRequest { topics, timeout_ms, unknown_tagged_fields }
    delete_records_request::DeleteRecordsTopic { name, partitions, unknown_tagged_fields }
    delete_topics_request::DeleteTopicState { name, topic_id, unknown_tagged_fields }
    delete_topics_request::DeleteTopicsRequest { topics, topic_names, timeout_ms, unknown_tagged_fields }
    describe_acls_request::DescribeAclsRequest { resource_type_filter, resource_name_filter, pattern_type_filter, principal_filter, host_filter, operation, permission_type, unknown_tagged_fields }
    describe_cluster_request::DescribeClusterRequest { include_cluster_authorized_operations, endpoint_type, include_fenced_brokers, unknown_tagged_fields }
    describe_configs_request::DescribeConfigsRequest { resources, include_synonyms, include_documentation, unknown_tagged_fields }
    describe_configs_request::DescribeConfigsResource { resource_type, resource_name, configuration_keys, unknown_tagged_fields }
    describe_groups_request::DescribeGroupsRequest { groups, include_authorized_operations, unknown_tagged_fields }
    describe_log_dirs_request::DescribableLogDirTopic { topic, partitions, unknown_tagged_fields }
    describe_log_dirs_request::DescribeLogDirsRequest { topics, unknown_tagged_fields }
    end_txn_request::EndTxnRequest { transactional_id, producer_id, producer_epoch, committed, unknown_tagged_fields }
    fetch_request::FetchPartition { partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset, partition_max_bytes, replica_directory_id, high_watermark, unknown_tagged_fields }
    fetch_request::FetchRequest { cluster_id, replica_id, replica_state, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch, topics, forgotten_topics_data, rack_id, unknown_tagged_fields }
    fetch_request::FetchTopic { topic, topic_id, partitions, unknown_tagged_fields }
    fetch_request::ForgottenTopic { topic, topic_id, partitions, unknown_tagged_fields }
    fetch_request::ReplicaState { replica_id, replica_epoch, unknown_tagged_fields }
    find_coordinator_request::FindCoordinatorRequest { key, key_type, coordinator_keys, unknown_tagged_fields }
    heartbeat_request::HeartbeatRequest { group_id, generation_id, member_id, group_instance_id, unknown_tagged_fields }
    incremental_alter_configs_request::AlterConfigsResource { resource_type, resource_name, configs, unknown_tagged_fields }
    incremental_alter_configs_request::AlterableConfig { name, config_operation, value, unknown_tagged_fields }
    incremental_alter_configs_request::IncrementalAlterConfigsRequest { resources, validate_only, unknown_tagged_fields }
    init_producer_id_request::InitProducerIdRequest { transactional_id, transaction_timeout_ms, producer_id, producer_epoch, enable_2_pc, keep_prepared_txn, unknown_tagged_fields }
    join_group_request::JoinGroupRequest { group_id, session_timeout_ms, rebalance_timeout_ms, member_id, group_instance_id, protocol_type, protocols, reason, unknown_tagged_fields }
    join_group_request::JoinGroupRequestProtocol { name, metadata, unknown_tagged_fields }
    leave_group_request::LeaveGroupRequest { group_id, member_id, members, unknown_tagged_fields }
    leave_group_request::MemberIdentity { member_id, group_instance_id, reason, unknown_tagged_fields }
    list_groups_request::ListGroupsRequest { states_filter, types_filter, unknown_tagged_fields }
    list_offsets_request::ListOffsetsPartition { partition_index, current_leader_epoch, timestamp, unknown_tagged_fields }
    list_offsets_request::ListOffsetsRequest { replica_id, isolation_level, topics, timeout_ms, unknown_tagged_fields }
    list_offsets_request::ListOffsetsTopic { name, partitions, unknown_tagged_fields }
    metadata_request::MetadataRequest { topics, allow_auto_topic_creation, include_cluster_authorized_operations, include_topic_authorized_operations, unknown_tagged_fields }
    metadata_request::MetadataRequestTopic { topic_id, name, unknown_tagged_fields }
    offset_commit_request::OffsetCommitRequest { group_id, generation_id_or_member_epoch, member_id, group_instance_id, retention_time_ms, topics, unknown_tagged_fields }
    offset_commit_request::OffsetCommitRequestPartition { partition_index, committed_offset, committed_leader_epoch, committed_metadata, unknown_tagged_fields }
    offset_commit_request::OffsetCommitRequestTopic { name, topic_id, partitions, unknown_tagged_fields }
    offset_delete_request::OffsetDeleteRequest { group_id, topics }
    offset_delete_request::OffsetDeleteRequestPartition { partition_index }
    offset_delete_request::OffsetDeleteRequestTopic { name, partitions }
    offset_fetch_request::OffsetFetchRequest { group_id, topics, groups, require_stable, unknown_tagged_fields }
    offset_fetch_request::OffsetFetchRequestGroup { group_id, member_id, member_epoch, topics, unknown_tagged_fields }
    offset_fetch_request::OffsetFetchRequestTopic { name, partition_indexes, unknown_tagged_fields }
    offset_fetch_request::OffsetFetchRequestTopics { name, topic_id, partition_indexes, unknown_tagged_fields }
    offset_for_leader_epoch_request::OffsetForLeaderEpochRequest { replica_id, topics, unknown_tagged_fields }
    offset_for_leader_epoch_request::OffsetForLeaderPartition { partition, current_leader_epoch, leader_epoch, unknown_tagged_fields }
    offset_for_leader_epoch_request::OffsetForLeaderTopic { topic, partitions, unknown_tagged_fields }
    produce_request::PartitionProduceData { index, records, unknown_tagged_fields }
    produce_request::ProduceRequest { transactional_id, acks, timeout_ms, topic_data, unknown_tagged_fields }
    produce_request::TopicProduceData { name, topic_id, partition_data, unknown_tagged_fields }
    sasl_authenticate_request::SaslAuthenticateRequest { auth_bytes, unknown_tagged_fields }
    sasl_handshake_request::SaslHandshakeRequest { mechanism }
    sync_group_request::SyncGroupRequest { group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name, assignments, unknown_tagged_fields }
    sync_group_request::SyncGroupRequestAssignment { member_id, assignment, unknown_tagged_fields }
    txn_offset_commit_request::TxnOffsetCommitRequest { transactional_id, group_id, producer_id, producer_epoch, generation_id, member_id, group_instance_id, topics, unknown_tagged_fields }
    txn_offset_commit_request::TxnOffsetCommitRequestPartition { partition_index, committed_offset, committed_leader_epoch, committed_metadata, unknown_tagged_fields }
    txn_offset_commit_request::TxnOffsetCommitRequestTopic { name, partitions, unknown_tagged_fields }
}

/// The body of a served request as its fields; `None` for an API the broker does not serve.
pub fn body_fields(body: &mut RequestKind) -> Option<&mut dyn Fields> {
    Some(match body {
        RequestKind::Produce(r) => r,
        RequestKind::Fetch(r) => r,
        RequestKind::ListOffsets(r) => r,
        RequestKind::Metadata(r) => r,
        RequestKind::ApiVersions(r) => r,
        RequestKind::CreateTopics(r) => r,
        RequestKind::DeleteTopics(r) => r,
        RequestKind::DeleteRecords(r) => r,
        RequestKind::InitProducerId(r) => r,
        RequestKind::OffsetForLeaderEpoch(r) => r,
        RequestKind::AddPartitionsToTxn(r) => r,
        RequestKind::AddOffsetsToTxn(r) => r,
        RequestKind::TxnOffsetCommit(r) => r,
        RequestKind::EndTxn(r) => r,
        RequestKind::FindCoordinator(r) => r,
        RequestKind::DescribeConfigs(r) => r,
        RequestKind::CreatePartitions(r) => r,
        RequestKind::AlterConfigs(r) => r,
        RequestKind::IncrementalAlterConfigs(r) => r,
        RequestKind::DescribeCluster(r) => r,
        RequestKind::DescribeLogDirs(r) => r,
        RequestKind::JoinGroup(r) => r,
        RequestKind::SyncGroup(r) => r,
        RequestKind::Heartbeat(r) => r,
        RequestKind::LeaveGroup(r) => r,
        RequestKind::ConsumerGroupHeartbeat(r) => r,
        RequestKind::ConsumerGroupDescribe(r) => r,
        RequestKind::OffsetCommit(r) => r,
        RequestKind::OffsetFetch(r) => r,
        RequestKind::ListGroups(r) => r,
        RequestKind::DescribeGroups(r) => r,
        RequestKind::DeleteGroups(r) => r,
        RequestKind::OffsetDelete(r) => r,
        RequestKind::DescribeAcls(r) => r,
        RequestKind::CreateAcls(r) => r,
        RequestKind::DeleteAcls(r) => r,
        RequestKind::SaslHandshake(r) => r,
        RequestKind::SaslAuthenticate(r) => r,
        _ => return None,
    })
}

/// The default body of a served API (`None` for one the broker does not serve).
pub fn default_body(key: ApiKey) -> Option<RequestKind> {
    Some(match key {
        ApiKey::Produce => RequestKind::Produce(Default::default()),
        ApiKey::Fetch => RequestKind::Fetch(Default::default()),
        ApiKey::ListOffsets => RequestKind::ListOffsets(Default::default()),
        ApiKey::Metadata => RequestKind::Metadata(Default::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(Default::default()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(Default::default()),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(Default::default()),
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(Default::default()),
        ApiKey::InitProducerId => RequestKind::InitProducerId(Default::default()),
        ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(Default::default()),
        ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(Default::default()),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(Default::default()),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(Default::default()),
        ApiKey::EndTxn => RequestKind::EndTxn(Default::default()),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(Default::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(Default::default()),
        ApiKey::CreatePartitions => RequestKind::CreatePartitions(Default::default()),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(Default::default()),
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(Default::default()),
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(Default::default()),
        ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(Default::default()),
        ApiKey::JoinGroup => RequestKind::JoinGroup(Default::default()),
        ApiKey::SyncGroup => RequestKind::SyncGroup(Default::default()),
        ApiKey::Heartbeat => RequestKind::Heartbeat(Default::default()),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(Default::default()),
        ApiKey::ConsumerGroupHeartbeat => RequestKind::ConsumerGroupHeartbeat(Default::default()),
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(Default::default()),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(Default::default()),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(Default::default()),
        ApiKey::ListGroups => RequestKind::ListGroups(Default::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(Default::default()),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(Default::default()),
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(Default::default()),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(Default::default()),
        ApiKey::CreateAcls => RequestKind::CreateAcls(Default::default()),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(Default::default()),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(Default::default()),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(Default::default()),
        _ => return None,
    })
}

/// Refuses a request with a string over [`STRING_BYTES_MAX`] bytes, as Kafka's parser does.
///
/// # Errors
/// The first such string's field and length.
pub fn check_strings(body: &mut RequestKind) -> Result<(), StringTooLong> {
    match body_fields(body) {
        Some(fields) => fields.strings(&mut |field, s| {
            if s.len() > STRING_BYTES_MAX {
                Err(StringTooLong {
                    field,
                    bytes: s.len(),
                })
            } else {
                Ok(())
            }
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top-level field names in `{:#?}` of a struct: the lines indented by four spaces.
    fn debug_fields(debug: &str) -> Vec<String> {
        debug
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix("    ")?;
                if rest.starts_with(' ') {
                    return None;
                }
                let (name, _) = rest.split_once(':')?;
                Some(name.to_string())
            })
            .collect()
    }

    #[test]
    fn every_field_of_every_served_message_is_listed() {
        let listed = listed();
        assert!(listed.len() >= 80, "{} message types listed", listed.len());
        for (name, fields, debug) in listed {
            let crate_fields = debug_fields(&debug);
            assert_eq!(
                crate_fields, fields,
                "{name}: the crate's fields differ from the list"
            );
        }
    }

    #[test]
    fn a_nested_string_over_the_limit_is_found_and_named() {
        let mut r = OffsetCommitRequest::default();
        let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
        let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
        p.committed_metadata = Some(StrBytes::from_string("m".repeat(STRING_BYTES_MAX)));
        t.partitions.push(p.clone());
        r.topics.push(t.clone());
        let mut body = RequestKind::OffsetCommit(r.clone());
        assert_eq!(check_strings(&mut body), Ok(()));
        p.committed_metadata = Some(StrBytes::from_string("é".repeat(16_384)));
        t.partitions.push(p);
        r.topics.push(t);
        let mut body = RequestKind::OffsetCommit(r);
        assert_eq!(
            check_strings(&mut body),
            Err(StringTooLong {
                field: "committed_metadata",
                bytes: 32_768
            })
        );
    }
}
