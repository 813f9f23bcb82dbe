//! ACLs mirrored (`mirror/acl_sync.rs`), with real clients (`testdata/interop/broker/acl_mirror.py`).
//!
//! - Through a failover and a failback, librdkafka over SASL SCRAM: the source's ACLs of the
//!   mirrored topic and group reach the destination and no others; the destination's own ACL
//!   is kept; an ACL revoked at the source is revoked there; after a failover the application
//!   (consumer in its group, producer) is served at the destination with no ACL made there by
//!   hand, and a user without ACLs is refused; a failback syncs an ACL made after the failover
//!   back.
//! - The settings and the edges: `acl_filters` replace the scope, `acl_prune` removes what the
//!   source lacks, a filter naming no Kafka value is refused, and a source or a destination
//!   without an authorizer changes nothing and says why.

mod broker_support;

fn run(mode: &str, lines: &[&str]) {
    let out = broker_support::run_script("acl_mirror.py", &[mode], &[]);
    for line in lines {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
}

#[test]
fn acls_follow_the_mirror_through_a_failover_and_a_failback() {
    run(
        "failover",
        &[
            "ok app served at the source over SCRAM",
            "ok ACLs of the mirrored topic and group synced, the others not",
            "ok an ACL revoked at the source is revoked here; the destination's own is kept",
            "ok after the failover app is served at b by the mirrored ACLs; nobody is refused",
            "ok a failback syncs the ACLs back; the old source's own are kept",
        ],
    );
}

#[test]
fn filters_prune_and_brokers_without_an_authorizer() {
    run(
        "edges",
        &[
            "ok a filter naming no Kafka value refused",
            "ok acl_filters replace the scope and acl_prune removes what the source lacks",
            "ok a source without an authorizer: ",
        ],
    );
}
