//! The transaction coordinator's stored entries: expiry, entries that do not read back or break
//! an invariant, and the operator's finish.

use super::*;

fn meta(producer_id: i64, state: TxnState, updated_ms: i64) -> TxnMeta {
    TxnMeta {
        producer_id,
        producer_epoch: 0,
        timeout_ms: 60_000,
        state,
        partitions: BTreeSet::new(),
        started_ms: 0,
        updated_ms,
    }
}

#[test]
fn idle_ids_expire_and_open_ones_do_not_and_the_file_forgets_them() {
    let dir = tempfile::tempdir().unwrap();
    let (mut c, damaged) = Coordinator::open(dir.path()).unwrap();
    assert!(damaged.is_empty());
    c.stored
        .txns
        .insert("old".into(), meta(1, TxnState::CompleteCommit, 0));
    c.stored
        .txns
        .insert("open".into(), meta(2, TxnState::Ongoing, 0));
    c.stored
        .txns
        .insert("new".into(), meta(3, TxnState::Empty, 900));
    assert_eq!(c.expire_ids(1_000, 500), vec!["old".to_string()]);
    let (c, _) = Coordinator::open(dir.path()).unwrap();
    let ids: Vec<&String> = c.stored.txns.keys().collect();
    assert_eq!(ids, ["new", "open"]);
}

#[test]
fn an_entry_that_does_not_read_back_is_kept_as_it_was_and_refused_until_finished() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("transactions.json"),
        r#"{"coordinator_epoch": 3, "txns": {"bad": {"producer_id": "x"}, "ok": {"producer_id": 5, "producer_epoch": 1, "timeout_ms": 1000, "state": "empty", "partitions": [], "started_ms": 0}}}"#,
    )
    .unwrap();
    let (c, damaged) = Coordinator::open(dir.path()).unwrap();
    assert_eq!(damaged.len(), 1);
    assert_eq!(damaged[0].0, "bad");
    assert_eq!(c.stored.coordinator_epoch, 4);
    assert!(matches!(
        c.check("bad", 1, 0),
        Err(ResponseError::CoordinatorNotAvailable)
    ));
    assert!(c.check("ok", 5, 1).is_ok());
    // Written back as it was, with the coordinator's new epoch.
    let text = std::fs::read_to_string(dir.path().join("transactions.json")).unwrap();
    assert!(text.contains(r#""producer_id": "x""#), "{text}");
}

#[test]
fn entries_that_break_an_invariant_are_set_aside_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let entry = |pid: i64, timeout: i32, state: &str, partitions: &str| {
        format!(
            r#"{{"producer_id": {pid}, "producer_epoch": 0, "timeout_ms": {timeout}, "state": "{state}", "partitions": {partitions}, "started_ms": 0}}"#
        )
    };
    let doc = format!(
        r#"{{"coordinator_epoch": 1, "txns": {{"a-ok": {}, "b-negative": {}, "c-timeout": {}, "d-closed": {}, "e-shared": {}, "f-open": {}}}}}"#,
        entry(5, 1000, "empty", "[]"),
        entry(-4, 1000, "empty", "[]"),
        entry(6, 0, "empty", "[]"),
        entry(7, 1000, "complete_commit", r#"[["t", 0]]"#),
        entry(5, 1000, "empty", "[]"),
        entry(8, 1000, "ongoing", r#"[["t", 0]]"#),
    );
    std::fs::write(dir.path().join("transactions.json"), &doc).unwrap();
    let (c, mut damaged) = Coordinator::open(dir.path()).unwrap();
    damaged.sort();
    let names: Vec<&str> = damaged.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["b-negative", "c-timeout", "d-closed", "e-shared"]);
    assert!(damaged[3].1.contains(r#"also "a-ok"'s"#), "{damaged:?}");
    let served: Vec<&String> = c.stored.txns.keys().collect();
    assert_eq!(served, ["a-ok", "f-open"]);
    c.check_invariants();
    for id in names {
        assert!(matches!(
            c.check(id, 0, 0),
            Err(ResponseError::CoordinatorNotAvailable)
        ));
    }
}

#[test]
#[should_panic(expected = "share producer id 1")]
fn two_ids_with_one_producer_id_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (mut c, _) = Coordinator::open(dir.path()).unwrap();
    c.stored
        .txns
        .insert("x".into(), meta(1, TxnState::Empty, 0));
    c.stored
        .txns
        .insert("y".into(), meta(1, TxnState::Empty, 0));
    c.check_invariants();
}
