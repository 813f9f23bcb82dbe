//! Access control: ACLs by principal, resource and operation (`model.rs`), kept and decided by
//! the authorizer (`authorizer.rs`). The handlers ask through the connection's session
//! (`session.rs`); with no `authorizer.class.name` configured every request is allowed and the
//! ACL APIs answer `SECURITY_DISABLED`, as Kafka's do.

mod authorizer;
mod model;

pub use authorizer::{Authorizer, AuthorizerConfig};
pub use model::{
    Acl, AclFilter, InvalidAcl, Operation, PatternFilter, PatternType, Permission, ResourceType,
    UnknownElement, ANY, CLUSTER_NAME, MATCH, WILDCARD, WILDCARD_PRINCIPAL,
};
