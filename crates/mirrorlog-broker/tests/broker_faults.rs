//! SIGKILL of the source and of the destination broker at random moments while mirroring and
//! producing (librdkafka idempotent and transactional producers on the source): after each
//! restart the mirror resumes by itself, no acknowledged record is lost or duplicated, and the
//! destination stays byte-identical to the source. The scenario is
//! `testdata/interop/broker/faults.py`; it prints its seed and replays one from `MIRRORLOG_SEED`.

mod broker_support;

#[test]
fn sigkill_of_source_and_destination_loses_and_duplicates_nothing_acknowledged() {
    let out = broker_support::run_script("faults.py", &[], &[]);
    assert!(out.contains("ok faults"), "{out}");
}
