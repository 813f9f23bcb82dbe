//! KIP-1279's topologies across processes: each broker its own `mirrorlog-broker` on loopback,
//! mirroring over the Fetch protocol, driven through the admin surface, with librdkafka
//! producers and consumers; every destination checked byte for byte against its source with
//! `mirrorlog dump`, and every data directory with `mirrorlog verify`. The scenarios are in
//! `testdata/interop/broker/topologies.py`:
//! - active-passive A→B with an idempotent and a transactional producer on A during the mirror,
//!   failover with a transaction open, fresh producers on B, a consumer on B reading A's records
//!   then B's, each once, in order; then failback B→A and back, three times;
//! - fan-out A→B, A→C and fan-in A→C, B→C (different topics);
//! - a chain A→B→C with failover in the middle;
//! - a source whose DeleteRecords moved its log start inside a batch, realigned into an empty
//!   destination; pause and resume.

mod broker_support;

#[test]
fn active_passive_failover_then_failback_three_times() {
    let out = broker_support::run_script("topologies.py", &["active-passive"], &[]);
    assert!(
        out.contains("ok active-passive") && out.contains("ok failback three times"),
        "{out}"
    );
}

#[test]
fn fan_out_and_fan_in() {
    let out = broker_support::run_script("topologies.py", &["fan"], &[]);
    assert!(
        out.contains("ok fan-out") && out.contains("ok fan-in"),
        "{out}"
    );
}

#[test]
fn chain_with_failover_in_the_middle() {
    let out = broker_support::run_script("topologies.py", &["chain"], &[]);
    assert!(out.contains("ok chain"), "{out}");
}

#[test]
fn a_source_past_retention_is_realigned_and_pause_resume_work() {
    let out = broker_support::run_script("topologies.py", &["retention"], &[]);
    assert!(
        out.contains("ok retention") && out.contains("ok pause and resume"),
        "{out}"
    );
}
