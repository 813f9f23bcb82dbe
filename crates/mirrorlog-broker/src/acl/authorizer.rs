//! The broker's authorizer (Kafka's `authorizer.class.name`, its `StandardAuthorizer` rules):
//! the ACLs, kept durably in `broker/acls.json`, and the decision for one principal, host,
//! operation and resource.
//!
//! The decision, as Kafka's:
//! - a principal in `super.users` may do anything;
//! - a resource no ACL covers (no literal of its name, no `*`, no prefix of it, for any
//!   principal) is allowed to everyone only with `allow.everyone.if.no.acl.found=true`, denied
//!   otherwise (Kafka's default);
//! - otherwise a DENY naming the principal (or `User:*`) and host (or `*`) for the operation (or
//!   ALL) denies; else an ALLOW for it allows, where allowing READ, WRITE, DELETE or ALTER also
//!   allows DESCRIBE, and ALTER_CONFIGS allows DESCRIBE_CONFIGS; else it is denied.

use super::model::{Acl, AclFilter, Operation, PatternType, Permission, ResourceType, WILDCARD};
use crate::storage::store::{Document, StoreError};
use std::collections::BTreeSet;
use std::sync::{Mutex, RwLock};

/// What the configuration says of authorization.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `super.users`: principals (`User:name`) that may do anything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`: a resource no ACL covers is open to everyone.
    pub allow_if_no_acl: bool,
}

/// The ACLs and the decisions.
pub struct Authorizer {
    config: AuthorizerConfig,
    acls: RwLock<BTreeSet<Acl>>,
    doc: Document,
    /// Serializes changes (each stores the whole set before it is seen).
    changes: Mutex<()>,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Authorizer {
    /// Opens the ACLs stored in `dir` (none when the file does not exist).
    pub fn open(dir: &std::path::Path, config: AuthorizerConfig) -> Result<Self, StoreError> {
        let doc = Document::new(dir, "acls.json")?;
        let stored: Vec<Acl> = doc.load()?.unwrap_or_default();
        for acl in &stored {
            acl.validate().map_err(|e| StoreError {
                path: dir.join("acls.json"),
                reason: format!("an ACL that is not valid ({acl:?}): {e}"),
            })?;
        }
        Ok(Authorizer {
            config,
            acls: RwLock::new(stored.into_iter().collect()),
            doc,
            changes: Mutex::new(()),
        })
    }

    /// Whether `principal` connecting from `host` may do `op` on the resource.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.config.super_users.iter().any(|s| s == principal) {
            return true;
        }
        let acls = read(&self.acls);
        let mut covering = acls
            .iter()
            .filter(|a| a.covers(resource_type, name))
            .peekable();
        if covering.peek().is_none() {
            return self.config.allow_if_no_acl;
        }
        let mine: Vec<&Acl> = covering.filter(|a| a.names(principal, host)).collect();
        let denied = mine.iter().any(|a| {
            a.permission == Permission::Deny && (a.operation == op || a.operation == Operation::All)
        });
        !denied
            && mine
                .iter()
                .any(|a| a.permission == Permission::Allow && grants(a.operation, op))
    }

    /// Whether `principal` from `host` may do `op` on some resource of `resource_type` (Kafka's
    /// `authorizeByResourceType`, which InitProducerId asks for WRITE on any topic): an ALLOW
    /// for it on a pattern no DENY of the principal's wholly covers.
    pub fn authorize_any(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.config.super_users.iter().any(|s| s == principal) {
            return true;
        }
        let acls = read(&self.acls);
        let of_type: Vec<&Acl> = acls
            .iter()
            .filter(|a| a.resource_type == resource_type)
            .collect();
        if of_type.is_empty() {
            return self.config.allow_if_no_acl;
        }
        let applies = |a: &&&Acl| {
            a.names(principal, host) && (a.operation == op || a.operation == Operation::All)
        };
        let denies: Vec<&Acl> = of_type
            .iter()
            .filter(applies)
            .filter(|a| a.permission == Permission::Deny)
            .copied()
            .collect();
        let denied = |allow: &Acl| {
            denies.iter().any(|d| match (d.pattern, allow.pattern) {
                (PatternType::Literal, _) if d.name == WILDCARD => true,
                (PatternType::Literal, PatternType::Literal) => d.name == allow.name,
                (PatternType::Prefixed, _) => allow.name.starts_with(&d.name),
                (PatternType::Literal, PatternType::Prefixed) => false,
            })
        };
        of_type
            .iter()
            .filter(applies)
            .any(|a| a.permission == Permission::Allow && !denied(a))
    }

    /// Every ACL `filter` matches.
    pub fn describe(&self, filter: &AclFilter) -> Vec<Acl> {
        read(&self.acls)
            .iter()
            .filter(|a| filter.matches(a))
            .cloned()
            .collect()
    }

    /// Adds `new` (one already there is kept once), durably before returning.
    pub fn create(&self, new: &[Acl]) -> Result<(), StoreError> {
        self.change(|set| set.extend(new.iter().cloned()))
    }

    /// Removes what each filter matches, durably before returning; per filter, what it
    /// removed (an ACL two filters match is reported under both, as Kafka reports it).
    pub fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<Acl>>, StoreError> {
        self.change(|set| {
            let per: Vec<Vec<Acl>> = filters
                .iter()
                .map(|f| set.iter().filter(|a| f.matches(a)).cloned().collect())
                .collect();
            for acl in per.iter().flatten() {
                set.remove(acl);
            }
            per
        })
    }

    /// Removes exactly these ACLs (those not here are passed over), durably before returning;
    /// how many were here.
    pub fn remove(&self, gone: &[Acl]) -> Result<usize, StoreError> {
        self.change(|set| gone.iter().filter(|a| set.remove(*a)).count())
    }

    /// Every ACL for which `keep` says yes.
    pub fn select(&self, keep: impl Fn(&Acl) -> bool) -> Vec<Acl> {
        read(&self.acls)
            .iter()
            .filter(|a| keep(a))
            .cloned()
            .collect()
    }

    fn change<R>(&self, f: impl FnOnce(&mut BTreeSet<Acl>) -> R) -> Result<R, StoreError> {
        let _serial = self
            .changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = read(&self.acls).clone();
        let out = f(&mut next);
        self.doc.store(&next.iter().collect::<Vec<_>>())?;
        *self
            .acls
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = next;
        Ok(out)
    }
}

/// Whether an ACL for `granted` allows `asked`.
fn grants(granted: Operation, asked: Operation) -> bool {
    use Operation::*;
    granted == All
        || granted == asked
        || (asked == Describe && matches!(granted, Read | Write | Delete | Alter))
        || (asked == DescribeConfigs && granted == AlterConfigs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: Operation,
        permission: Permission,
    ) -> Acl {
        Acl {
            resource_type: ResourceType::Topic,
            name: name.into(),
            pattern,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission,
        }
    }

    fn open(dir: &std::path::Path, allow_if_no_acl: bool) -> Authorizer {
        Authorizer::open(
            dir,
            AuthorizerConfig {
                super_users: vec!["User:admin".into()],
                allow_if_no_acl,
            },
        )
        .unwrap()
    }

    const T: ResourceType = ResourceType::Topic;

    #[test]
    fn decisions_follow_kafkas_rules() {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path(), false);
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        // Nothing covers "orders": denied by default, but not to a super user.
        assert!(!a.authorize("User:alice", "10.0.0.1", Read, T, "orders"));
        assert!(a.authorize("User:admin", "10.0.0.1", Read, T, "orders"));
        a.create(&[
            acl("ord", Prefixed, "User:alice", Read, Allow),
            acl("orders-secret", Literal, "User:alice", All, Deny),
            acl("*", Literal, "User:*", Write, Allow),
        ])
        .unwrap();
        assert!(a.authorize("User:alice", "10.0.0.1", Read, T, "orders"));
        // READ implies DESCRIBE; it implies nothing else.
        assert!(a.authorize("User:alice", "10.0.0.1", Describe, T, "orders"));
        assert!(!a.authorize("User:alice", "10.0.0.1", Delete, T, "orders"));
        // A DENY for ALL wins over the prefixed allow and the wildcard one.
        assert!(!a.authorize("User:alice", "10.0.0.1", Read, T, "orders-secret"));
        assert!(!a.authorize("User:alice", "10.0.0.1", Write, T, "orders-secret"));
        // The wildcard principal and resource.
        assert!(a.authorize("User:bob", "10.0.0.2", Write, T, "anything"));
        assert!(!a.authorize("User:bob", "10.0.0.2", Read, T, "orders"));
        // Another resource type is not covered by topic ACLs.
        assert!(!a.authorize("User:bob", "h", Describe, ResourceType::Group, "g"));
        // By resource type (InitProducerId's WRITE on any topic).
        assert!(a.authorize_any("User:bob", "h", Write, T));
        assert!(!a.authorize_any("User:bob", "h", Delete, T));
    }

    #[test]
    fn a_host_acl_names_that_address_only() {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path(), false);
        let mut x = acl(
            "t",
            PatternType::Literal,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        );
        x.host = "10.0.0.1".into();
        a.create(&[x]).unwrap();
        assert!(a.authorize("User:alice", "10.0.0.1", Operation::Read, T, "t"));
        assert!(!a.authorize("User:alice", "10.0.0.9", Operation::Read, T, "t"));
    }

    #[test]
    fn allow_everyone_opens_only_what_no_acl_covers() {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path(), true);
        assert!(a.authorize("User:x", "h", Operation::Read, T, "free"));
        a.create(&[acl(
            "kept",
            PatternType::Literal,
            "User:y",
            Operation::Read,
            Permission::Allow,
        )])
        .unwrap();
        assert!(a.authorize("User:x", "h", Operation::Read, T, "free"));
        assert!(!a.authorize("User:x", "h", Operation::Read, T, "kept"));
    }

    #[test]
    fn acls_survive_a_reopen_and_deletes_report_what_they_removed() {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path(), false);
        let r = acl(
            "t",
            PatternType::Literal,
            "User:a",
            Operation::Read,
            Permission::Allow,
        );
        let w = acl(
            "t",
            PatternType::Literal,
            "User:a",
            Operation::Write,
            Permission::Allow,
        );
        a.create(&[r.clone(), w.clone(), r.clone()]).unwrap();
        drop(a);
        let a = open(dir.path(), false);
        let all = AclFilter::from_codes(1, None, 1, None, None, 1, 1).unwrap();
        assert_eq!(a.describe(&all), vec![r.clone(), w.clone()]);
        let reads = AclFilter::from_codes(2, Some("t".into()), 3, None, None, 3, 1).unwrap();
        assert_eq!(
            a.delete(&[reads.clone(), reads]).unwrap(),
            vec![vec![r.clone()], vec![r]]
        );
        drop(a);
        assert_eq!(open(dir.path(), false).describe(&all), vec![w]);
    }
}
