//! The ACL sync (KIP-1279's prototype and Redpanda Shadowing copy the source's ACLs with the
//! configs and the group offsets): every `acl_sync_ms` (60 s by default, [`ACL_SYNC_INTERVAL`])
//! the source's ACLs in the mirror's scope are read with DescribeAcls and made the
//! destination's, so that after a failover the clients the source served are served here.
//!
//! - **Scope.** By default the ACLs of the mirrored topics and groups: every TOPIC ACL that
//!   applies to a mirrored topic (its literal name, `*`, or a prefix of it) and every GROUP ACL
//!   that applies to a group whose offsets the mirror syncs (`group_sync.rs`). A mirror's
//!   `acl_filters` (Kafka's ACL binding filters, by name) replace that scope: the ACLs any of
//!   them matches, of any resource type.
//! - **Adding.** An ACL in scope at the source and not here is created here.
//! - **Removing.** ACLs that exist only here are kept: an ACL is removed only when this
//!   mirror's sync created it and the source no longer has it (a revocation at the source is
//!   one here). With `acl_prune` every ACL here in scope that the source does not have is
//!   removed. Which ACLs the sync created is kept durably (`broker/mirror-acls.json`), written
//!   before the ACLs themselves, so a crash between the two never leaves a synced ACL that the
//!   sync would not revoke.
//! - **Failover** leaves the mirrored ACLs in force: they become the destination's own (the
//!   record of which the sync created is dropped). A **failback** is a mirror the other way,
//!   whose sync brings the ACLs of the cluster that took over back.
//! - A destination without an authorizer (`authorizer.class.name` unset) has no ACLs: the
//!   sync does not run and its status says why. A source that answers an error (its authorizer
//!   off: `SECURITY_DISABLED`; the mirror's user not allowed DESCRIBE on the cluster:
//!   `CLUSTER_AUTHORIZATION_FAILED`) changes nothing here; the status shows the error.

use super::sync_error::SyncError;
use crate::acl::{
    Acl, AclFilter, Authorizer, Operation, PatternFilter, PatternType, Permission, ResourceType,
    ANY, MATCH,
};
use crate::net::client::{Client, ClientError, Security};
use crate::storage::store::{Document, StoreError};
use kafka_protocol::messages::{ApiKey, DescribeAclsRequest, RequestKind, ResponseKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// How often the source's ACLs are read (the group offset sync's default).
pub const ACL_SYNC_INTERVAL: Duration = Duration::from_secs(60);
/// The most filters a mirror's `acl_filters` may hold: each is a DescribeAcls request to the
/// source every round.
pub const ACL_FILTERS_MAX: usize = 64;

/// One of a mirror's `acl_filters`: Kafka's ACL binding filter with its values by name, as
/// `kafka-acls.sh` and the admin clients name them (`TOPIC`, `PREFIXED`, `READ`, `ALLOW`…).
/// A field left out matches anything; `pattern_type` may also be `MATCH` (every pattern that
/// applies to `name`) or `ANY`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclFilterSpec {
    /// `TOPIC`, `GROUP`, `CLUSTER`, `TRANSACTIONAL_ID`, `DELEGATION_TOKEN`, `USER` or `ANY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    /// The resource's name (or prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `LITERAL`, `PREFIXED`, `MATCH` or `ANY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern_type: Option<String>,
    /// `User:name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The client's address, or `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `READ`, `WRITE`, `DESCRIBE`… or `ANY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// `ALLOW`, `DENY` or `ANY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
}

/// A mirror's `acl_filters` entry that names no Kafka value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadFilter {
    /// A value Kafka has no name for.
    #[error("acl_filters: {field} {value:?} is not one of Kafka's")]
    Name {
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
    },
    /// A code Kafka's filters refuse (an UNKNOWN element).
    #[error("acl_filters: an UNKNOWN {0}")]
    Unknown(&'static str),
}

/// Every ACL of `resource_type`.
fn every(resource_type: ResourceType) -> AclFilter {
    AclFilter {
        resource_type: Some(resource_type),
        name: None,
        pattern: PatternFilter::Any,
        principal: None,
        host: None,
        operation: None,
        permission: None,
    }
}

/// `f` as a DescribeAcls request (Kafka's codes; ANY where `f` takes anything).
fn request(f: &AclFilter) -> DescribeAclsRequest {
    let text = |s: &Option<String>| s.as_deref().map(crate::net::wire::str_bytes);
    let mut r = DescribeAclsRequest::default();
    r.resource_type_filter = f.resource_type.map_or(ANY, ResourceType::code);
    r.resource_name_filter = text(&f.name);
    r.pattern_type_filter = match f.pattern {
        PatternFilter::Any => ANY,
        PatternFilter::Match => MATCH,
        PatternFilter::Exactly(p) => p.code(),
    };
    r.principal_filter = text(&f.principal);
    r.host_filter = text(&f.host);
    r.operation = f.operation.map_or(ANY, Operation::code);
    r.permission_type = f.permission.map_or(ANY, Permission::code);
    r
}

impl AclFilterSpec {
    /// The filter, or which value names nothing.
    ///
    /// # Errors
    /// The field and its value, when Kafka has no such name.
    pub fn filter(&self) -> Result<AclFilter, BadFilter> {
        fn code<T>(
            field: &'static str,
            value: &Option<String>,
            parse: fn(&str) -> Option<T>,
            code: fn(T) -> i8,
        ) -> Result<i8, BadFilter> {
            match value.as_deref() {
                None => Ok(ANY),
                Some(v) if v.eq_ignore_ascii_case("ANY") => Ok(ANY),
                Some(v) => parse(v).map(code).ok_or_else(|| BadFilter::Name {
                    field,
                    value: v.to_string(),
                }),
            }
        }
        let pattern = match self.pattern_type.as_deref() {
            Some(v) if v.eq_ignore_ascii_case("MATCH") => MATCH,
            _ => code(
                "pattern_type",
                &self.pattern_type,
                PatternType::from_name,
                PatternType::code,
            )?,
        };
        let resource_type = code(
            "resource_type",
            &self.resource_type,
            ResourceType::from_name,
            ResourceType::code,
        )?;
        let operation = code(
            "operation",
            &self.operation,
            Operation::from_name,
            Operation::code,
        )?;
        let permission = code(
            "permission",
            &self.permission,
            Permission::from_name,
            Permission::code,
        )?;
        AclFilter::from_codes(
            resource_type,
            self.name.clone(),
            pattern,
            self.principal.clone(),
            self.host.clone(),
            operation,
            permission,
        )
        .map_err(|e| BadFilter::Unknown(e.0))
    }
}

/// Which ACLs a round syncs.
#[derive(Debug, Clone)]
pub enum Scope {
    /// Those that apply to a mirrored topic or to a group whose offsets are synced.
    Mirrored {
        /// The mirrored topics.
        topics: Vec<String>,
        /// The groups the group sync has read from the source.
        groups: BTreeSet<String>,
    },
    /// Those any of the mirror's `acl_filters` matches.
    Filters(Vec<AclFilter>),
}

impl Scope {
    /// The DescribeAcls filters that read the scope's ACLs at the source (a superset of it).
    fn asks(&self) -> Vec<AclFilter> {
        match self {
            Scope::Mirrored { groups, .. } => {
                let mut asks = vec![every(ResourceType::Topic)];
                if !groups.is_empty() {
                    asks.push(every(ResourceType::Group));
                }
                asks
            }
            Scope::Filters(f) => f.clone(),
        }
    }

    /// A matcher for whether an ACL is in the scope.
    pub fn matcher(&self) -> impl Fn(&Acl) -> bool + '_ {
        move |acl: &Acl| match self {
            Scope::Mirrored { topics, groups } => match acl.resource_type {
                ResourceType::Topic => topics.iter().any(|t| acl.covers(ResourceType::Topic, t)),
                ResourceType::Group => groups.iter().any(|g| acl.covers(ResourceType::Group, g)),
                _ => false,
            },
            Scope::Filters(f) => f.iter().any(|f| f.matches(acl)),
        }
    }
}

/// What the source answered: its ACLs in scope, and how many it described that are not
/// valid ACLs (left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceAcls {
    /// The ACLs in scope.
    pub acls: BTreeSet<Acl>,
    /// ACLs described with codes or fields Kafka would not store.
    pub unreadable: usize,
}

/// The source's ACLs in `scope`, from the first of `addrs` that answers.
pub async fn source_acls(
    addrs: &[String],
    scope: &Scope,
    security: &Security,
) -> Result<SourceAcls, SyncError> {
    let asks = scope.asks();
    let answered = super::source::from_any(addrs, "DescribeAcls", |addr| {
        let asks = asks.clone();
        async move { describe(&addr, &asks, security).await }
    })
    .await
    .map_err(SyncError::Unanswered)?;
    let mut out = answered?;
    let in_scope = scope.matcher();
    out.acls.retain(|a| in_scope(a));
    Ok(out)
}

async fn describe(
    addr: &str,
    asks: &[AclFilter],
    security: &Security,
) -> Result<Result<SourceAcls, SyncError>, ClientError> {
    let mut client = Client::connect_with(addr, security).await?;
    let version = client.version(ApiKey::DescribeAcls, 1, 3)?;
    let mut out = SourceAcls::default();
    for ask in asks {
        let ResponseKind::DescribeAcls(answer) = client
            .call(
                ApiKey::DescribeAcls,
                version,
                RequestKind::DescribeAcls(request(ask)),
            )
            .await?
        else {
            return Err(ClientError("DescribeAcls answered with another API".into()));
        };
        if answer.error_code != 0 {
            return Ok(Err(SyncError::Refused {
                api: "DescribeAcls",
                resource: "its ACLs".into(),
                code: answer.error_code,
                message: format!(
                    "{}{}",
                    crate::net::client::error_name(answer.error_code),
                    answer
                        .error_message
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
            }));
        }
        for res in answer.resources {
            for d in res.acls {
                let acl = (|| {
                    Some(Acl {
                        resource_type: ResourceType::from_code(res.resource_type)?,
                        name: res.resource_name.to_string(),
                        pattern: PatternType::from_code(res.pattern_type)?,
                        principal: d.principal.to_string(),
                        host: d.host.to_string(),
                        operation: Operation::from_code(d.operation)?,
                        permission: Permission::from_code(d.permission_type)?,
                    })
                })()
                .filter(|a| a.validate().is_ok());
                match acl {
                    Some(a) => {
                        out.acls.insert(a);
                    }
                    None => out.unreadable += 1,
                }
            }
        }
    }
    Ok(Ok(out))
}

/// What one round changes here, and the record of what the sync created after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// ACLs to create.
    pub add: Vec<Acl>,
    /// ACLs to remove.
    pub remove: Vec<Acl>,
    /// The ACLs the sync will have created, once both are done.
    pub synced: BTreeSet<Acl>,
}

/// One round's changes: `source` is the source's ACLs in scope, `here` the destination's in
/// scope, `synced` those the sync created (in scope or not), `in_scope` the scope.
pub fn plan(
    source: &BTreeSet<Acl>,
    here: &BTreeSet<Acl>,
    synced: &BTreeSet<Acl>,
    in_scope: &dyn Fn(&Acl) -> bool,
    prune: bool,
) -> Plan {
    let add: Vec<Acl> = source.difference(here).cloned().collect();
    let remove: Vec<Acl> = here
        .iter()
        .filter(|a| !source.contains(*a) && (prune || synced.contains(*a)))
        .cloned()
        .collect();
    // Out of scope: kept as they are (a scope that shrank for a round, a group the group sync
    // did not read this time, revokes nothing). In scope: still synced if here and at the
    // source; the added ones join.
    let mut after: BTreeSet<Acl> = synced
        .iter()
        .filter(|a| !in_scope(a) || (here.contains(*a) && source.contains(*a)))
        .cloned()
        .collect();
    after.extend(add.iter().cloned());
    Plan {
        add,
        remove,
        synced: after,
    }
}

/// A mirror's ACL sync as `GET /mirrors` shows it.
#[derive(Debug, Clone, Default)]
pub struct AclSyncStatus {
    /// When the last round that changed what it had to ended.
    pub synced_at: Option<SystemTime>,
    /// The source's ACLs in scope at that round.
    pub at_source: usize,
    /// ACLs the source described that are not valid (left out) at that round.
    pub unreadable: usize,
    /// ACLs created here by the sync, in all (since the broker started).
    pub added: u64,
    /// ACLs removed here by the sync, in all.
    pub removed: u64,
    /// Why the last round failed, if it did.
    pub last_error: Option<String>,
}

/// Which ACLs each mirror's sync created (durable), and each one's status.
pub struct AclLedger {
    doc: Document,
    synced: Mutex<BTreeMap<String, BTreeSet<Acl>>>,
    status: Mutex<BTreeMap<String, AclSyncStatus>>,
    /// Why the record did not read back at start, if it did not (it was set aside).
    damaged: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AclLedger {
    /// Loads `mirror-acls.json` from `dir` (empty when absent). A record that does not read
    /// back does not stop the broker: it is set aside (`mirror-acls.json.damaged`), logged,
    /// and shown in every mirror's status, and the syncs start a new one (the ACLs they made
    /// before stay, as the destination's own: a revocation at the source no longer reaches
    /// them).
    ///
    /// # Errors
    /// `dir` cannot be made.
    pub fn open(dir: &std::path::Path) -> Result<Self, StoreError> {
        let doc = Document::new(dir, "mirror-acls.json")?;
        let (stored, damaged) = match doc.load::<BTreeMap<String, BTreeSet<Acl>>>() {
            Ok(stored) => (stored.unwrap_or_default(), None),
            Err(e) => {
                let aside = dir.join("mirror-acls.json.damaged");
                let moved = std::fs::rename(dir.join("mirror-acls.json"), &aside);
                let why = format!(
                    "the record of the ACLs the syncs made did not read back ({e}){}; ACLs made \
                     before are kept as this broker's own, and a revocation at the source no \
                     longer removes them",
                    match moved {
                        Ok(()) => format!(", set aside as {}", aside.display()),
                        Err(m) => format!(" and could not be set aside: {m}"),
                    }
                );
                tracing::error!(reason = %why, "mirror ACL record");
                (BTreeMap::new(), Some(why))
            }
        };
        Ok(AclLedger {
            doc,
            synced: Mutex::new(stored),
            status: Mutex::new(BTreeMap::new()),
            damaged,
        })
    }

    /// Why the record did not read back at start, if it did not.
    pub fn damaged(&self) -> Option<&str> {
        self.damaged.as_deref()
    }

    /// Drops `mirror`'s record (its failover: the ACLs it synced become the destination's
    /// own) and its status.
    ///
    /// # Errors
    /// The record could not be stored.
    pub fn forget(&self, mirror: &str) -> Result<(), StoreError> {
        lock(&self.status).remove(mirror);
        let mut synced = lock(&self.synced);
        if synced.remove(mirror).is_some() {
            self.doc.store(&*synced)?;
        }
        Ok(())
    }

    /// One round for `mirror`: the source's ACLs in `scope` made the destination's (see the
    /// module docs); (created, removed).
    ///
    /// # Errors
    /// Storing the record or the ACLs failed; what was stored before stays consistent.
    pub fn apply(
        &self,
        mirror: &str,
        authorizer: &Authorizer,
        scope: &Scope,
        source: &BTreeSet<Acl>,
        prune: bool,
    ) -> Result<(usize, usize), SyncError> {
        let in_scope = scope.matcher();
        let mut all = lock(&self.synced);
        let here: BTreeSet<Acl> = authorizer.select(&in_scope).into_iter().collect();
        let before = all.get(mirror).cloned().unwrap_or_default();
        let p = plan(source, &here, &before, &in_scope, prune);
        let store = |all: &BTreeMap<String, BTreeSet<Acl>>| {
            self.doc
                .store(all)
                .map_err(|e| SyncError::here("recording the synced ACLs")(&e))
        };
        if !p.add.is_empty() {
            // Recorded first: a created ACL is always one the sync knows it created.
            let mut with_added = before.clone();
            with_added.extend(p.add.iter().cloned());
            all.insert(mirror.to_string(), with_added);
            store(&all)?;
            authorizer
                .create(&p.add)
                .map_err(|e| SyncError::here("creating the source's ACLs")(&e))?;
        }
        if !p.remove.is_empty() {
            authorizer
                .remove(&p.remove)
                .map_err(|e| SyncError::here("removing ACLs the source revoked")(&e))?;
        }
        if all.get(mirror) != Some(&p.synced) {
            all.insert(mirror.to_string(), p.synced);
            store(&all)?;
        }
        for acl in &p.add {
            tracing::info!(mirror, ?acl, "ACL synced from the source");
        }
        for acl in &p.remove {
            tracing::info!(mirror, ?acl, "ACL removed: the source no longer has it");
        }
        Ok((p.add.len(), p.remove.len()))
    }

    /// Records a round of `mirror` that synced: what the source had, what it changed.
    pub fn synced(&self, mirror: &str, source: &SourceAcls, added: usize, removed: usize) {
        let mut st = lock(&self.status);
        let s = st.entry(mirror.to_string()).or_default();
        s.synced_at = Some(SystemTime::now());
        s.at_source = source.acls.len();
        s.unreadable = source.unreadable;
        s.added += added as u64;
        s.removed += removed as u64;
        s.last_error = None;
    }

    /// Records why a round of `mirror` did not sync.
    pub fn failed(&self, mirror: &str, why: &dyn std::fmt::Display) {
        lock(&self.status)
            .entry(mirror.to_string())
            .or_default()
            .last_error = Some(why.to_string());
    }

    /// `mirror`'s status, and how many ACLs here its sync created.
    pub fn view(&self, mirror: &str) -> (AclSyncStatus, usize) {
        let status = lock(&self.status).get(mirror).cloned().unwrap_or_default();
        let held = lock(&self.synced).get(mirror).map_or(0, BTreeSet::len);
        (status, held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::AuthorizerConfig;

    fn acl(rt: ResourceType, name: &str, pattern: PatternType, who: &str, op: Operation) -> Acl {
        Acl {
            resource_type: rt,
            name: name.into(),
            pattern,
            principal: who.into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    fn topic(name: &str, who: &str) -> Acl {
        acl(
            ResourceType::Topic,
            name,
            PatternType::Literal,
            who,
            Operation::Read,
        )
    }

    fn set(acls: &[&Acl]) -> BTreeSet<Acl> {
        acls.iter().map(|a| (*a).clone()).collect()
    }

    fn mirrored(topics: &[&str], groups: &[&str]) -> Scope {
        Scope::Mirrored {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn the_default_scope_is_what_applies_to_the_mirrored_topics_and_groups() {
        let scope = mirrored(&["orders"], &["billing"]);
        let m = scope.matcher();
        assert!(m(&topic("orders", "User:a")));
        assert!(m(&topic("*", "User:a")));
        assert!(m(&acl(
            ResourceType::Topic,
            "ord",
            PatternType::Prefixed,
            "User:a",
            Operation::Write
        )));
        assert!(!m(&topic("payments", "User:a")));
        assert!(!m(&topic("orders-2", "User:a")));
        let group = |name: &str, pattern| {
            acl(
                ResourceType::Group,
                name,
                pattern,
                "User:a",
                Operation::Read,
            )
        };
        assert!(m(&group("billing", PatternType::Literal)));
        assert!(m(&group("bill", PatternType::Prefixed)));
        assert!(!m(&group("other", PatternType::Literal)));
        // A group ACL named like a mirrored topic is not the topic's.
        assert!(!m(&group("orders", PatternType::Literal)));
        let cluster = acl(
            ResourceType::Cluster,
            "kafka-cluster",
            PatternType::Literal,
            "User:a",
            Operation::Describe,
        );
        assert!(!m(&cluster));
        // Without groups read yet, no GROUP ACLs are asked for.
        assert_eq!(mirrored(&["orders"], &[]).asks().len(), 1);
    }

    #[test]
    fn filters_are_kafkas_names_and_a_name_that_is_not_one_is_refused() {
        let spec: AclFilterSpec = serde_json::from_value(serde_json::json!({
            "resource_type": "transactional_id",
            "name": "app-",
            "pattern_type": "PREFIXED",
            "principal": "User:app",
            "operation": "WRITE"
        }))
        .unwrap();
        let scope = Scope::Filters(vec![spec.filter().unwrap()]);
        let m = scope.matcher();
        let mut txn = acl(
            ResourceType::TransactionalId,
            "app-",
            PatternType::Prefixed,
            "User:app",
            Operation::Write,
        );
        assert!(m(&txn));
        txn.principal = "User:other".into();
        assert!(!m(&txn));
        let matching = AclFilterSpec {
            resource_type: Some("TOPIC".into()),
            name: Some("orders".into()),
            pattern_type: Some("match".into()),
            ..AclFilterSpec::default()
        };
        let scope = Scope::Filters(vec![matching.filter().unwrap()]);
        let m = scope.matcher();
        assert!(m(&topic("*", "User:x")) && m(&topic("orders", "User:x")));
        assert!(!m(&topic("payments", "User:x")));
        let bad = AclFilterSpec {
            operation: Some("READ_ALL".into()),
            ..AclFilterSpec::default()
        };
        assert_eq!(
            bad.filter().unwrap_err().to_string(),
            "acl_filters: operation \"READ_ALL\" is not one of Kafka's"
        );
        assert!(
            serde_json::from_value::<AclFilterSpec>(serde_json::json!({"topic": "x"})).is_err()
        );
    }

    #[test]
    fn a_round_adds_the_sources_keeps_the_destinations_own_and_revokes_what_it_synced() {
        let (a, b, own, gone) = (
            topic("orders", "User:a"),
            topic("orders", "User:b"),
            topic("orders", "User:local"),
            topic("orders", "User:revoked"),
        );
        let out_of_scope = topic("payments", "User:a");
        let scope = mirrored(&["orders"], &[]);
        let m = scope.matcher();
        // The source has a and b; here: a (made here by an operator), own, and gone and
        // out_of_scope, which the sync made earlier.
        let p = plan(
            &set(&[&a, &b]),
            &set(&[&a, &own, &gone]),
            &set(&[&gone, &out_of_scope]),
            &m,
            false,
        );
        assert_eq!(p.add, vec![b.clone()]);
        assert_eq!(p.remove, vec![gone.clone()], "own is kept; gone is revoked");
        assert_eq!(p.synced, set(&[&b, &out_of_scope]));
        // With prune, everything here in scope that the source lacks goes.
        let p = plan(
            &set(&[&a, &b]),
            &set(&[&a, &own, &gone]),
            &set(&[&gone]),
            &m,
            true,
        );
        assert_eq!(p.remove, vec![own.clone(), gone.clone()]);
        // A synced ACL an operator removed here comes back while the source has it.
        let p = plan(&set(&[&a]), &set(&[]), &set(&[&a]), &m, false);
        assert_eq!((p.add, p.synced), (vec![a.clone()], set(&[&a])));
    }

    #[test]
    fn the_ledger_applies_rounds_durably_and_forgets_a_mirror_at_its_failover() {
        let dir = tempfile::tempdir().unwrap();
        let authorizer = Authorizer::open(dir.path(), AuthorizerConfig::default()).unwrap();
        let own = topic("orders", "User:local");
        authorizer.create(std::slice::from_ref(&own)).unwrap();
        let (a, b) = (topic("orders", "User:a"), topic("*", "User:b"));
        let scope = mirrored(&["orders"], &[]);
        let ledger = AclLedger::open(dir.path()).unwrap();
        assert_eq!(
            ledger
                .apply("src", &authorizer, &scope, &set(&[&a, &b]), false)
                .unwrap(),
            (2, 0)
        );
        assert_eq!(
            authorizer.select(|_| true),
            vec![b.clone(), a.clone(), own.clone()]
        );
        // The record survives a reopen; b revoked at the source goes here too, own stays.
        drop(ledger);
        let ledger = AclLedger::open(dir.path()).unwrap();
        assert_eq!(ledger.view("src").1, 2);
        assert_eq!(
            ledger
                .apply("src", &authorizer, &scope, &set(&[&a]), false)
                .unwrap(),
            (0, 1)
        );
        assert_eq!(authorizer.select(|_| true), vec![a.clone(), own.clone()]);
        // Failover: the record goes, the ACLs stay; a later round of another mirror that
        // lacks a does not revoke it.
        ledger.forget("src").unwrap();
        let ledger = AclLedger::open(dir.path()).unwrap();
        assert_eq!(ledger.view("src").1, 0);
        assert_eq!(
            ledger
                .apply("back", &authorizer, &scope, &set(&[]), false)
                .unwrap(),
            (0, 0)
        );
        assert_eq!(authorizer.select(|_| true), vec![a, own]);
    }

    #[test]
    fn a_record_that_does_not_read_back_is_set_aside_and_the_broker_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mirror-acls.json"), b"{\"src\": [tru").unwrap();
        let ledger = AclLedger::open(dir.path()).unwrap();
        let why = ledger.damaged().unwrap();
        assert!(
            why.contains("did not read back") && why.contains("set aside"),
            "{why}"
        );
        assert!(dir.path().join("mirror-acls.json.damaged").exists());
        // A new record starts, and reads back.
        let authorizer = Authorizer::open(dir.path(), AuthorizerConfig::default()).unwrap();
        let a = topic("orders", "User:a");
        let scope = mirrored(&["orders"], &[]);
        ledger
            .apply("src", &authorizer, &scope, &set(&[&a]), false)
            .unwrap();
        let reopened = AclLedger::open(dir.path()).unwrap();
        assert!(reopened.damaged().is_none());
        assert_eq!(reopened.view("src").1, 1);
    }
}
