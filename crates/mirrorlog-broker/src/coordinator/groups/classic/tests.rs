//! The classic protocol's state machine, driven request by request with explicit times, as
//! Kafka's `GroupMetadataManagerTest` drives it: joins, the join and sync phases, sessions,
//! static members, protocol selection and the checks of commits.

use super::*;
use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;

const LIMITS: Limits = Limits {
    initial_rebalance_delay_ms: 0,
    max_size: 10,
};

fn join(member_id: &str, instance: Option<&str>, protocols: &[&str]) -> Join {
    Join {
        member_id: member_id.into(),
        instance_id: instance.map(str::to_string),
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| Protocol {
                name: p.to_string(),
                metadata: Bytes::from(format!("meta-{p}")),
            })
            .collect(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        requires_member_id: true,
        skip_assignment_supported: true,
    }
}

fn now_answer<T>(r: Reply<T>) -> T {
    match r {
        Reply::Now(a) => a,
        Reply::Wait(_) => panic!("expected an answer now"),
    }
}

fn waiting<T>(r: Reply<T>) -> oneshot::Receiver<T> {
    match r {
        Reply::Wait(rx) => rx,
        Reply::Now(_) => panic!("expected to wait"),
    }
}

/// A dynamic member's two joins (KIP-394): its id, and the wait for the join phase.
fn join_dynamic(g: &mut ClassicGroup, now: i64) -> (String, oneshot::Receiver<JoinAnswer>) {
    let (r, p) = g.join(join("", None, &["range"]), LIMITS, now);
    assert!(p.is_none());
    let a = now_answer(r);
    assert_eq!(a.error, Some(ResponseError::MemberIdRequired));
    assert!(a.member_id.starts_with("client-"), "{}", a.member_id);
    let (r, _) = g.join(join(&a.member_id, None, &["range"]), LIMITS, now);
    (a.member_id, waiting(r))
}

/// Ends an initial rebalance with no delay: the members added during it extend it once, by
/// the delay (0), as Kafka's `tryCompleteInitialRebalanceElseSchedule` does.
fn end_initial_rebalance(g: &mut ClassicGroup, now: i64) {
    g.tick(LIMITS, now);
    g.tick(LIMITS, now);
}

/// The leader's sync of `assignment`, stored: every waiting member's answer.
fn sync_and_store(
    g: &mut ClassicGroup,
    leader: &str,
    assignment: &[(&str, &str)],
    now: i64,
) -> SyncAnswer {
    let generation = g.generation();
    let a: Vec<(String, Bytes)> = assignment
        .iter()
        .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
        .collect();
    let (r, p) = g.sync(leader, None, generation, (Some("consumer"), None), a);
    let mut rx = waiting(r);
    let p = p.expect("the leader's assignment is stored first");
    assert_eq!(p.value.generation, generation);
    assert!(
        matches!(rx.try_recv(), Err(TryRecvError::Empty)),
        "answered before stored"
    );
    assert!(g.persisted(p.then, Ok(()), LIMITS, now).is_none());
    assert_eq!(g.state(), State::Stable);
    rx.try_recv().unwrap()
}

#[test]
fn two_members_join_sync_and_a_third_rebalances_the_group() {
    let mut g = ClassicGroup::new("g", 0);
    let (a, mut a_rx) = join_dynamic(&mut g, 0);
    assert_eq!(g.state(), State::PreparingRebalance);
    // The initial rebalance ends at its delay (0 here), at the next tick.
    assert!(matches!(a_rx.try_recv(), Err(TryRecvError::Empty)));
    assert!(g.tick(LIMITS, 1).is_empty());
    let ja = a_rx.try_recv().unwrap();
    assert_eq!(
        (ja.error, ja.generation, ja.leader.as_str()),
        (None, 1, a.as_str())
    );
    assert_eq!(ja.protocol_name.as_deref(), Some("range"));
    assert_eq!(ja.members.len(), 1, "the leader gets the members");
    assert_eq!(g.state(), State::CompletingRebalance);
    let sa = sync_and_store(&mut g, &a, &[(&a, "all")], 2);
    assert_eq!((sa.error, &sa.assignment[..]), (None, &b"all"[..]));

    // A second member: the group rebalances; the first learns it from its heartbeat and
    // rejoins, which completes the join phase at once (not the initial rebalance).
    let (b, mut b_rx) = join_dynamic(&mut g, 10);
    assert_eq!(g.state(), State::PreparingRebalance);
    assert_eq!(
        g.heartbeat(&a, None, 1, 11),
        Some(ResponseError::RebalanceInProgress)
    );
    let (r, p) = g.join(join(&a, None, &["range"]), LIMITS, 12);
    assert!(p.is_none());
    let ja = waiting(r).try_recv().unwrap();
    let jb = b_rx.try_recv().unwrap();
    assert_eq!((ja.generation, jb.generation), (2, 2));
    assert_eq!(
        (ja.members.len(), jb.members.len()),
        (2, 0),
        "only the leader gets members"
    );
    assert_eq!(jb.leader, a);
    // The follower syncs first and waits for the leader's assignment.
    let (r, p) = g.sync(&b, None, 2, (None, None), Vec::new());
    assert!(p.is_none());
    let mut b_sync = waiting(r);
    // A stale generation and an unknown member are refused.
    let (r, _) = g.sync(&b, None, 1, (None, None), Vec::new());
    assert_eq!(now_answer(r).error, Some(ResponseError::IllegalGeneration));
    let (r, _) = g.sync("nobody", None, 2, (None, None), Vec::new());
    assert_eq!(now_answer(r).error, Some(ResponseError::UnknownMemberId));
    // Commits are refused while the assignment is awaited.
    assert_eq!(
        g.validate_commit(&a, None, 2, false),
        Err(ResponseError::RebalanceInProgress)
    );
    let sa = sync_and_store(&mut g, &a, &[(&a, "p0"), (&b, "p1")], 13);
    assert_eq!(&sa.assignment[..], b"p0");
    assert_eq!(&b_sync.try_recv().unwrap().assignment[..], b"p1");
    assert_eq!(g.heartbeat(&b, None, 2, 14), None);
    assert_eq!(g.validate_commit(&b, None, 2, false), Ok(()));
    assert_eq!(
        g.validate_commit(&b, None, 1, false),
        Err(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        g.validate_commit("", None, -1, false),
        Err(ResponseError::UnknownMemberId),
        "a simple commit to a group with members"
    );
}

#[test]
fn a_silent_member_is_removed_at_its_session_timeout_and_the_group_rebalances() {
    let mut g = ClassicGroup::new("g", 0);
    let (a, mut a_rx) = join_dynamic(&mut g, 0);
    let (b, mut b_rx) = join_dynamic(&mut g, 0);
    end_initial_rebalance(&mut g, 1);
    assert_eq!(a_rx.try_recv().unwrap().generation, 1);
    assert_eq!(b_rx.try_recv().unwrap().generation, 1);
    let leader = g.leader.clone().unwrap();
    let other = if leader == a { b.clone() } else { a.clone() };
    let (r, _) = g.sync(&other, None, 1, (None, None), Vec::new());
    let _follower = waiting(r);
    sync_and_store(&mut g, &leader, &[], 2);
    // The leader heartbeats; the other does not. Its session (10 s) ends at 2 + 10 000.
    for t in (1000..=10_000).step_by(1000) {
        assert_eq!(g.heartbeat(&leader, None, 1, t), None);
        g.tick(LIMITS, t);
    }
    assert_eq!(g.members.len(), 2);
    g.tick(LIMITS, 10_002);
    assert_eq!(g.members.len(), 1);
    assert_eq!(
        g.heartbeat(&leader, None, 1, 10_003),
        Some(ResponseError::RebalanceInProgress)
    );
    assert_eq!(g.state(), State::PreparingRebalance);
    // The leader rejoins; the join phase completes with it alone.
    let (r, _) = g.join(join(&leader, None, &["range"]), LIMITS, 12_001);
    let j = waiting(r).try_recv().unwrap();
    assert_eq!((j.generation, j.members.len()), (2, 1));
    // It leaves: the group is empty, and its empty generation is stored.
    let (errors, p) = g.leave(&[(leader.clone(), None)], LIMITS, 12_002);
    assert_eq!(errors, vec![None]);
    assert_eq!(g.state(), State::Empty);
    let p = p.expect("an empty group's metadata is stored");
    assert_eq!((p.value.generation, p.value.members.len()), (3, 0));
    assert_eq!(g.validate_commit("", None, -1, false), Ok(()));
}

#[test]
fn members_that_do_not_rejoin_or_sync_in_time_are_removed() {
    let mut g = ClassicGroup::new("g", 0);
    let (a, _a_rx) = join_dynamic(&mut g, 0);
    let (b, _b_rx) = join_dynamic(&mut g, 0);
    end_initial_rebalance(&mut g, 1);
    // Both heartbeat but nobody syncs: at the rebalance timeout (30 s from the join phase's
    // end) both go, and the group rebalances empty.
    for t in (1000..=30_000).step_by(1000) {
        assert_eq!(g.heartbeat(&a, None, 1, t), None);
        assert_eq!(g.heartbeat(&b, None, 1, t), None);
        assert!(g.tick(LIMITS, t).is_empty());
    }
    assert_eq!(g.members.len(), 2);
    let stored = g.tick(LIMITS, 30_002);
    assert!(
        g.members.is_empty(),
        "{:?}",
        g.members.keys().collect::<Vec<_>>()
    );
    assert_eq!(g.state(), State::Empty);
    assert_eq!(stored.len(), 1);
    assert_eq!(
        g.heartbeat(&a, None, 1, 30_003),
        Some(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        g.heartbeat(&b, None, 1, 30_003),
        Some(ResponseError::UnknownMemberId)
    );
}

#[test]
fn the_initial_rebalance_waits_its_delay_again_for_each_new_member() {
    let limits = Limits {
        initial_rebalance_delay_ms: 3000,
        max_size: 10,
    };
    let mut g = ClassicGroup::new("g", 0);
    let (r, _) = g.join(join("", None, &["range"]), limits, 0);
    let id = now_answer(r).member_id;
    let (r, _) = g.join(join(&id, None, &["range"]), limits, 0);
    let mut rx = waiting(r);
    g.tick(limits, 2999);
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    // A new member within the delay extends it by another delay.
    let (r, _) = g.join(join("", None, &["range"]), limits, 2000);
    let id2 = now_answer(r).member_id;
    let (r, _) = g.join(join(&id2, None, &["range"]), limits, 2000);
    let mut rx2 = waiting(r);
    g.tick(limits, 3000);
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    g.tick(limits, 6000);
    assert_eq!(rx.try_recv().unwrap().generation, 1);
    assert_eq!(rx2.try_recv().unwrap().generation, 1);
}

#[test]
fn the_protocol_is_chosen_by_vote_among_those_every_member_supports() {
    let mut g = ClassicGroup::new("g", 0);
    for protocols in [
        &["range", "roundrobin"][..],
        &["roundrobin", "range"][..],
        &["roundrobin"][..],
    ] {
        let (r, _) = g.join(join("", None, protocols), LIMITS, 0);
        let id = now_answer(r).member_id;
        let (r, _) = g.join(join(&id, None, protocols), LIMITS, 0);
        drop(r);
    }
    // A member with no protocol in common, or another protocol type, is refused.
    let (r, _) = g.join(join("", None, &["sticky"]), LIMITS, 0);
    assert_eq!(
        now_answer(r).error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    let mut other = join("", None, &["roundrobin"]);
    other.protocol_type = "connect".into();
    let (r, _) = g.join(other, LIMITS, 0);
    assert_eq!(
        now_answer(r).error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    end_initial_rebalance(&mut g, 1);
    assert_eq!(g.protocol_name.as_deref(), Some("roundrobin"));
}

#[test]
fn a_static_member_rejoining_keeps_its_assignment_without_a_rebalance_and_fences_the_old_id() {
    let mut g = ClassicGroup::new("g", 0);
    let (r, _) = g.join(join("", Some("i-1"), &["range"]), LIMITS, 0);
    let mut rx = waiting(r);
    g.tick(LIMITS, 1);
    let old = rx.try_recv().unwrap().member_id;
    assert!(old.starts_with("i-1-"), "{old}");
    sync_and_store(&mut g, &old, &[(&old, "mine")], 2);

    // The same instance with no member id (a restarted process): a new id, same generation.
    let (r, p) = g.join(join("", Some("i-1"), &["range"]), LIMITS, 100);
    let mut rx = waiting(r);
    let p = p.expect("the new member id is stored before it is answered");
    assert_eq!(p.value.members[0].assignment, b"mine");
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    assert!(g.persisted(p.then, Ok(()), LIMITS, 101).is_none());
    let j = rx.try_recv().unwrap();
    assert_eq!((j.error, j.generation), (None, 1));
    assert_ne!(j.member_id, old);
    assert!(
        j.skip_assignment,
        "the static leader does not assign again (KIP-814)"
    );
    assert_eq!(g.state(), State::Stable);
    // The old id is fenced; the new one syncs and gets the same assignment.
    assert_eq!(
        g.heartbeat(&old, Some("i-1"), 1, 102),
        Some(ResponseError::FencedInstanceId)
    );
    let (r, _) = g.sync(&j.member_id, Some("i-1"), 1, (None, None), Vec::new());
    assert_eq!(&now_answer(r).assignment[..], b"mine");

    // A failed store puts the old id back.
    let (r, p) = g.join(join("", Some("i-1"), &["range"]), LIMITS, 200);
    let mut rx = waiting(r);
    g.persisted(
        p.unwrap().then,
        Err(ResponseError::CoordinatorNotAvailable),
        LIMITS,
        201,
    );
    assert_eq!(
        rx.try_recv().unwrap().error,
        Some(ResponseError::CoordinatorNotAvailable)
    );
    assert_eq!(g.heartbeat(&j.member_id, Some("i-1"), 1, 202), None);
}

#[test]
fn a_failed_store_of_the_assignment_sends_the_members_back_to_join() {
    let mut g = ClassicGroup::new("g", 0);
    let (a, mut rx) = join_dynamic(&mut g, 0);
    g.tick(LIMITS, 1);
    rx.try_recv().unwrap();
    let (r, p) = g.sync(
        &a,
        None,
        1,
        (None, None),
        vec![(a.clone(), Bytes::from("x"))],
    );
    let mut sync = waiting(r);
    g.persisted(
        p.unwrap().then,
        Err(ResponseError::NotCoordinator),
        LIMITS,
        2,
    );
    assert_eq!(
        sync.try_recv().unwrap().error,
        Some(ResponseError::NotCoordinator)
    );
    assert_eq!(g.state(), State::PreparingRebalance);
}

#[test]
fn a_stored_group_is_loaded_stable_and_its_members_carry_on() {
    let mut g = ClassicGroup::new("g", 0);
    let (a, mut rx) = join_dynamic(&mut g, 0);
    g.tick(LIMITS, 1);
    rx.try_recv().unwrap();
    let (r, p) = g.sync(
        &a,
        None,
        1,
        (None, None),
        vec![(a.clone(), Bytes::from("x"))],
    );
    drop(r);
    let p = p.unwrap();
    let stored = GroupValue::decode(&p.value.encode().unwrap()).unwrap();
    let mut loaded = ClassicGroup::loaded("g", &stored, 1000);
    assert_eq!((loaded.state(), loaded.generation()), (State::Stable, 1));
    assert_eq!(loaded.heartbeat(&a, None, 1, 1001), None);
    let (r, _) = loaded.sync(&a, None, 1, (None, None), Vec::new());
    assert_eq!(&now_answer(r).assignment[..], b"x");
    // Without heartbeats the loaded member's session ends, counted from the load.
    loaded.tick(LIMITS, 1001 + 10_000);
    assert_eq!(loaded.state(), State::Empty);
}

#[test]
fn group_max_size_and_unknown_members_are_refused() {
    let limits = Limits {
        initial_rebalance_delay_ms: 0,
        max_size: 1,
    };
    let mut g = ClassicGroup::new("g", 0);
    let (r, _) = g.join(join("", None, &["range"]), limits, 0);
    let id = now_answer(r).member_id;
    let (r, _) = g.join(join(&id, None, &["range"]), limits, 0);
    drop(r);
    let (r, _) = g.join(join("", Some("x"), &["range"]), limits, 0);
    assert_eq!(
        now_answer(r).error,
        Some(ResponseError::GroupMaxSizeReached)
    );
    // An id the group never gave, in a group with room.
    let mut g = ClassicGroup::new("h", 0);
    let (r, _) = g.join(join("", None, &["range"]), LIMITS, 0);
    let id = now_answer(r).member_id;
    let (r, _) = g.join(join(&id, None, &["range"]), LIMITS, 0);
    drop(r);
    let (r, _) = g.join(join("made-up", None, &["range"]), LIMITS, 0);
    assert_eq!(now_answer(r).error, Some(ResponseError::UnknownMemberId));
    let (errors, _) = g.leave(
        &[
            ("made-up".into(), None),
            (String::new(), Some("nope".into())),
        ],
        limits,
        0,
    );
    assert_eq!(
        errors,
        vec![
            Some(ResponseError::UnknownMemberId),
            Some(ResponseError::UnknownMemberId)
        ]
    );
}

fn stored_member(id: &str, instance: Option<&str>) -> MemberValue {
    MemberValue {
        member_id: id.into(),
        group_instance_id: instance.map(str::to_string),
        session_timeout: 10_000,
        rebalance_timeout: 30_000,
        ..MemberValue::default()
    }
}

#[test]
fn a_stored_group_that_breaks_an_invariant_is_named_and_a_sound_one_is_not() {
    let sound = GroupValue {
        protocol_type: "consumer".into(),
        generation: 3,
        protocol: Some("range".into()),
        leader: Some("m1".into()),
        current_state_timestamp: -1,
        members: vec![stored_member("m1", Some("i1")), stored_member("m2", None)],
    };
    let g = ClassicGroup::loaded("g", &sound, 0);
    assert_eq!(g.invariant_violation(), None);
    g.check_invariants();
    // Two members claiming one instance id: the map can name only one of them.
    let shared = GroupValue {
        members: vec![
            stored_member("m1", Some("i1")),
            stored_member("m2", Some("i1")),
        ],
        ..sound.clone()
    };
    let why = ClassicGroup::loaded("g", &shared, 0)
        .invariant_violation()
        .expect("a violation");
    assert!(why.contains("\"i1\""), "{why}");
    let negative = GroupValue {
        generation: -2,
        ..sound
    };
    let why = ClassicGroup::loaded("g", &negative, 0)
        .invariant_violation()
        .expect("a violation");
    assert_eq!(why, "generation -2");
}

#[test]
fn an_empty_group_leads_nobody_whatever_its_record_says() {
    let v = GroupValue {
        protocol_type: "consumer".into(),
        leader: Some("gone".into()),
        current_state_timestamp: -1,
        ..GroupValue::default()
    };
    let g = ClassicGroup::loaded("g", &v, 0);
    assert_eq!(g.invariant_violation(), None);
}

#[test]
#[should_panic(expected = "its leader \"m9\" is not a member")]
fn a_change_that_breaks_an_invariant_is_caught() {
    let v = GroupValue {
        protocol_type: "consumer".into(),
        leader: Some("m1".into()),
        current_state_timestamp: -1,
        members: vec![stored_member("m1", None)],
        ..GroupValue::default()
    };
    let mut g = ClassicGroup::loaded("g", &v, 0);
    g.leader = Some("m9".into());
    g.check_invariants();
}
