//! A connection's session: who is asking (Kafka's principal and client address) and through
//! which listener, and what the authorizer lets them do.
//!
//! The principal is Kafka's: `User:<name>` after a SASL login, `User:ANONYMOUS` otherwise (a
//! PLAINTEXT or SSL listener; client certificates are not asked for). With no authorizer
//! configured every question answers yes.

use crate::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::broker::Broker;
use crate::config::listeners::Endpoint;
use std::sync::Arc;

/// Kafka's principal for a connection without a login.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// One connection's identity.
#[derive(Debug, Clone)]
pub struct Session {
    /// `User:<name>`.
    pub principal: String,
    /// The client's address, as ACL hosts name it.
    pub host: String,
    /// The listener it came through (Metadata advertises its address).
    pub endpoint: Arc<Endpoint>,
}

impl Session {
    /// The session of a connection from `peer`, logged in as `user` when SASL said so.
    pub fn new(user: Option<&str>, peer: std::net::IpAddr, endpoint: Arc<Endpoint>) -> Self {
        Session {
            principal: user.map_or_else(|| ANONYMOUS.to_string(), |u| format!("User:{u}")),
            host: peer.to_string(),
            endpoint,
        }
    }

    /// Whether this session may do `op` on the resource.
    pub fn may(&self, b: &Broker, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        b.authorizer.as_ref().is_none_or(|a| {
            let ok = a.authorize(&self.principal, &self.host, op, resource_type, name);
            if !ok {
                tracing::debug!(principal = %self.principal, host = %self.host, ?op,
                    ?resource_type, name, "denied");
            }
            ok
        })
    }

    /// Whether this session may do `op` on the topic `name`.
    pub fn may_topic(&self, b: &Broker, op: Operation, name: &str) -> bool {
        self.may(b, op, ResourceType::Topic, name)
    }

    /// Whether this session may do `op` on the cluster.
    pub fn may_cluster(&self, b: &Broker, op: Operation) -> bool {
        self.may(b, op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether this session may do `op` on some resource of `resource_type`.
    pub fn may_any(&self, b: &Broker, op: Operation, resource_type: ResourceType) -> bool {
        b.authorizer
            .as_ref()
            .is_none_or(|a| a.authorize_any(&self.principal, &self.host, op, resource_type))
    }

    /// Of `ops`, those this session may do on the resource, as Kafka's 32-bit
    /// `*_authorized_operations` fields carry them (bit `code` set).
    pub fn authorized_operations(
        &self,
        b: &Broker,
        resource_type: ResourceType,
        name: &str,
        ops: &[Operation],
    ) -> i32 {
        ops.iter()
            .filter(|op| self.may(b, **op, resource_type, name))
            .fold(0, |bits, op| bits | 1 << op.code())
    }
}
