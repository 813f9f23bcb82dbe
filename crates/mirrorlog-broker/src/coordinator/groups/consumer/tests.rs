//! KIP-848's reconciliation, heartbeat by heartbeat, as Kafka's `GroupMetadataManagerTest`
//! and `CurrentAssignmentBuilderTest` drive it.

use super::*;
use uuid::Uuid;

const SETTINGS: Settings = Settings {
    session_timeout_ms: 45_000,
    heartbeat_interval_ms: 5000,
    max_size: 10,
};

fn topics() -> BTreeMap<String, i32> {
    [
        ("t".to_string(), 6),
        ("other".to_string(), 2),
        ("__consumer_offsets".to_string(), 50),
    ]
    .into_iter()
    .collect()
}

fn join(id: &str, subscribed: &[&str]) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topics: Some(subscribed.iter().map(|t| t.to_string()).collect()),
        owned: Some(Partitions::new()),
        ..Heartbeat::default()
    }
}

fn beat(id: &str, epoch: i32, owned: &Partitions) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        ..Heartbeat::default()
    }
}

fn of(t: &str, ps: &[i32]) -> Partitions {
    [(t.to_string(), ps.iter().copied().collect())]
        .into_iter()
        .collect()
}

fn count(p: &Partitions) -> usize {
    p.values().map(BTreeSet::len).sum()
}

#[test]
fn a_second_member_gets_partitions_only_after_the_first_revokes_them() {
    let mut g = ConsumerGroup::new("g", 0);
    let a = g
        .heartbeat(join("a", &["t"]), &topics(), SETTINGS, 0)
        .unwrap();
    assert_eq!(a.member_epoch, 1);
    let a_has = a.assignment.unwrap();
    assert_eq!(a_has, of("t", &[0, 1, 2, 3, 4, 5]));
    assert_eq!(g.state(), "Stable");

    // b joins: epoch 2; the target splits t, but a still owns everything.
    let b = g
        .heartbeat(join("b", &["t"]), &topics(), SETTINGS, 10)
        .unwrap();
    assert_eq!(b.member_epoch, 2);
    assert_eq!(
        b.assignment,
        Some(Partitions::new()),
        "b waits for a's partitions"
    );
    assert_eq!(g.state(), "Reconciling");
    // a is told to revoke three, keeping its epoch until it has.
    let a2 = g
        .heartbeat(beat("a", 1, &a_has), &topics(), SETTINGS, 20)
        .unwrap();
    assert_eq!(a2.member_epoch, 1);
    let kept = a2.assignment.unwrap();
    assert_eq!(count(&kept), 3);
    // Until a reports them gone, b still gets nothing.
    let b2 = g
        .heartbeat(beat("b", 2, &Partitions::new()), &topics(), SETTINGS, 30)
        .unwrap();
    assert_eq!(b2.assignment, None);
    // a revoked: it moves to epoch 2.
    let a3 = g
        .heartbeat(beat("a", 1, &kept), &topics(), SETTINGS, 40)
        .unwrap();
    assert_eq!((a3.member_epoch, a3.assignment), (2, None));
    let b3 = g
        .heartbeat(beat("b", 2, &Partitions::new()), &topics(), SETTINGS, 50)
        .unwrap();
    let b_has = b3.assignment.unwrap();
    assert_eq!(count(&b_has), 3);
    assert!(b_has["t"].is_disjoint(&kept["t"]));
    assert_eq!(g.state(), "Stable");
    // Commits carry the member epoch.
    assert_eq!(g.validate_commit("a", 2), Ok(()));
    assert_eq!(
        g.validate_commit("a", 1),
        Err(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        g.validate_commit("x", 2),
        Err(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        g.validate_commit("", -1),
        Err(ResponseError::UnknownMemberId)
    );
}

#[test]
fn epochs_are_fenced_and_a_lost_answer_is_forgiven() {
    let mut g = ConsumerGroup::new("g", 0);
    let a = g
        .heartbeat(join("a", &["t"]), &topics(), SETTINGS, 0)
        .unwrap();
    let owned = a.assignment.unwrap();
    let err = g
        .heartbeat(beat("a", 5, &owned), &topics(), SETTINGS, 1)
        .unwrap_err();
    assert_eq!(err.0, ResponseError::FencedMemberEpoch);
    let err = g
        .heartbeat(beat("nobody", 1, &owned), &topics(), SETTINGS, 1)
        .unwrap_err();
    assert_eq!(err.0, ResponseError::UnknownMemberId);
    // A subscription change bumps the epoch; the member moves to it at once (nothing to
    // revoke). Its previous epoch with a subset of its partitions is accepted.
    let mut hb = beat("a", 1, &owned);
    hb.subscribed_topics = Some(vec!["t".into(), "other".into()]);
    let a2 = g.heartbeat(hb, &topics(), SETTINGS, 2).unwrap();
    assert_eq!(a2.member_epoch, 2);
    assert_eq!(count(a2.assignment.as_ref().unwrap()), 8);
    assert!(g
        .heartbeat(beat("a", 1, &owned), &topics(), SETTINGS, 3)
        .is_ok());
    let err = g
        .heartbeat(beat("a", 1, &of("other", &[7])), &topics(), SETTINGS, 4)
        .unwrap_err();
    assert_eq!(err.0, ResponseError::FencedMemberEpoch);
    // Leaving: the group is empty, at a new epoch.
    let left = g
        .heartbeat(beat("a", LEAVE_EPOCH, &owned), &topics(), SETTINGS, 5)
        .unwrap();
    assert_eq!(left.member_epoch, LEAVE_EPOCH);
    assert_eq!(g.state(), "Empty");
    assert_eq!(g.validate_commit("", -1), Ok(()));
}

#[test]
fn a_silent_member_is_removed_and_a_slow_revoker_too() {
    let mut g = ConsumerGroup::new("g", 0);
    let a = g
        .heartbeat(join("a", &["t"]), &topics(), SETTINGS, 0)
        .unwrap();
    let a_has = a.assignment.unwrap();
    g.heartbeat(join("b", &["t"]), &topics(), SETTINGS, 0)
        .unwrap();
    // a is asked to revoke; it never does. Its rebalance timeout (30 s) removes it, though it
    // heartbeats.
    g.heartbeat(beat("a", 1, &a_has), &topics(), SETTINGS, 1)
        .unwrap();
    for t in (1000..=29_000).step_by(1000) {
        g.heartbeat(beat("a", 1, &a_has), &topics(), SETTINGS, t)
            .unwrap();
        g.heartbeat(beat("b", 2, &Partitions::new()), &topics(), SETTINGS, t)
            .unwrap();
        g.tick(&topics(), t);
    }
    g.tick(&topics(), 30_001);
    let err = g
        .heartbeat(beat("a", 1, &a_has), &topics(), SETTINGS, 30_002)
        .unwrap_err();
    assert_eq!(err.0, ResponseError::UnknownMemberId);
    let b = g
        .heartbeat(
            beat("b", 2, &Partitions::new()),
            &topics(),
            SETTINGS,
            30_003,
        )
        .unwrap();
    assert_eq!(count(&b.assignment.unwrap()), 6);
    // b goes silent: its session ends.
    g.tick(&topics(), 30_003 + 45_000);
    assert_eq!(g.state(), "Empty");
}

#[test]
fn a_static_member_returns_to_its_partitions() {
    let mut g = ConsumerGroup::new("g", 0);
    let mut j = join("a1", &["t"]);
    j.instance_id = Some("inst".into());
    let a = g.heartbeat(j, &topics(), SETTINGS, 0).unwrap();
    let has = a.assignment.unwrap();
    let mut other = join("b", &["t"]);
    other.instance_id = Some("inst".into());
    assert_eq!(
        g.heartbeat(other, &topics(), SETTINGS, 1).unwrap_err().0,
        ResponseError::UnreleasedInstanceId
    );
    // a1 leaves for a while (-2); a2, the same instance, comes back to the same partitions.
    let mut bye = beat("a1", LEAVE_STATIC_EPOCH, &has);
    bye.instance_id = Some("inst".into());
    g.heartbeat(bye, &topics(), SETTINGS, 2).unwrap();
    let (epoch, ..) = g.epochs();
    let mut back = join("a2", &["t"]);
    back.instance_id = Some("inst".into());
    let a2 = g.heartbeat(back, &topics(), SETTINGS, 3).unwrap();
    assert_eq!(a2.assignment.unwrap(), has);
    assert_eq!(g.epochs().0, epoch, "no new epoch");
    let mut old = beat("a1", 1, &has);
    old.instance_id = Some("inst".into());
    assert_eq!(
        g.heartbeat(old, &topics(), SETTINGS, 4).unwrap_err().0,
        ResponseError::FencedInstanceId
    );
}

#[test]
fn a_regex_subscribes_to_matching_topics_never_internal_ones() {
    let mut g = ConsumerGroup::new("g", 0);
    let mut j = join("a", &[]);
    j.subscribed_topics = Some(Vec::new());
    j.subscribed_regex = Some("t|oth.*|__.*".into());
    let a = g.heartbeat(j, &topics(), SETTINGS, 0).unwrap();
    let has = a.assignment.unwrap();
    assert_eq!(has.keys().collect::<Vec<_>>(), vec!["other", "t"]);
    // A new matching topic: a new epoch, its partitions assigned.
    let mut more = topics();
    more.insert("others".into(), 1);
    let a2 = g.heartbeat(beat("a", 1, &has), &more, SETTINGS, 1).unwrap();
    assert_eq!(a2.member_epoch, 2);
    assert!(a2.assignment.unwrap().contains_key("others"));
    let mut bad = join("b", &["t"]);
    bad.subscribed_regex = Some("(".into());
    assert_eq!(
        g.heartbeat(bad, &topics(), SETTINGS, 2).unwrap_err().0,
        ResponseError::InvalidRegularExpression
    );
}

#[test]
fn the_records_of_every_change_rebuild_the_group() {
    let ids: BTreeMap<String, Uuid> = [
        ("t".to_string(), Uuid::from_bytes([1; 16])),
        ("other".to_string(), Uuid::from_bytes([2; 16])),
    ]
    .into_iter()
    .collect();
    let names: BTreeMap<Uuid, String> = ids.iter().map(|(n, i)| (*i, n.clone())).collect();
    let mut g = ConsumerGroup::new("g", 0);
    let mut log = Vec::new();
    let mut step = |g: &mut ConsumerGroup, hb: Heartbeat, now: i64| {
        let before = g.durable();
        let a = g.heartbeat(hb, &topics(), SETTINGS, now).unwrap();
        log.extend(changes("g", &before, &g.durable(), &ids));
        a
    };
    let a = step(&mut g, join("a", &["t"]), 0);
    let a_has = a.assignment.unwrap();
    step(&mut g, join("b", &["t", "other"]), 1);
    step(&mut g, beat("a", 1, &a_has), 2);
    // Replayed through their bytes, as a load reads them.
    let mut replayed = Durable::default();
    for r in &log {
        let (k, v) = r.encode().unwrap();
        match records::Record::decode(&k, v.as_deref()).unwrap().unwrap() {
            records::Record::GroupEpoch { epoch, .. } => replayed.epoch = epoch.unwrap(),
            records::Record::TargetEpoch { epoch, .. } => {
                replayed.assignment_epoch = epoch.unwrap()
            }
            records::Record::Member { member, value, .. } => {
                replayed.members.entry(member).or_default().meta = value.unwrap()
            }
            records::Record::Target {
                member, partitions, ..
            } => {
                replayed.members.entry(member).or_default().target =
                    by_name(&partitions.unwrap(), &names)
            }
            records::Record::Current { member, value, .. } => {
                let c = value.unwrap();
                replayed.members.entry(member).or_default().current = (
                    c.epoch,
                    c.previous_epoch,
                    c.state,
                    by_name(&c.assigned, &names),
                    by_name(&c.revoking, &names),
                );
            }
        }
    }
    assert_eq!(replayed, g.durable());
    // The rebuilt group answers the members as the original would.
    let mut back = ConsumerGroup::restore("g", replayed, &topics(), SETTINGS, 10);
    assert_eq!(back.state(), g.state());
    let kept = g.durable().members["a"].current.3.clone();
    let a2 = back
        .heartbeat(beat("a", 1, &kept), &topics(), SETTINGS, 11)
        .unwrap();
    assert_eq!(a2.member_epoch, 2);
    // A member leaving is three tombstones and a new epoch.
    let before = back.durable();
    back.heartbeat(
        beat("b", LEAVE_EPOCH, &Partitions::new()),
        &topics(),
        SETTINGS,
        12,
    )
    .unwrap();
    let left = changes("g", &before, &back.durable(), &ids);
    assert!(left.contains(&records::Record::Member {
        group: "g".into(),
        member: "b".into(),
        value: None
    }));
    assert!(left
        .iter()
        .any(|r| matches!(r, records::Record::GroupEpoch { .. })));
}

#[test]
fn a_subscription_pattern_is_compiled_once_and_the_cache_stays_bounded() {
    let first = compile("orders-.*").unwrap();
    let again = compile("orders-.*").unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &again), "compiled once");
    // A client sending a new pattern each time costs one compilation each, never memory.
    for i in 0..(REGEX_CACHE_ENTRIES_MAX + 10) {
        compile(&format!("p{i}")).unwrap();
    }
    let cached = REGEX_CACHE
        .lock()
        .unwrap()
        .as_ref()
        .map_or(0, std::collections::HashMap::len);
    assert!(cached <= REGEX_CACHE_ENTRIES_MAX, "{cached} cached");
}

fn stored(epoch: i32, assigned: Partitions) -> DurableMember {
    DurableMember {
        meta: records::MemberMeta {
            topics: vec!["t".into()],
            rebalance_timeout_ms: 30_000,
            ..records::MemberMeta::default()
        },
        current: (epoch, epoch - 1, 0, assigned.clone(), Partitions::new()),
        target: assigned,
    }
}

#[test]
fn stored_records_that_break_an_invariant_are_named_and_sound_ones_are_not() {
    let sound = Durable {
        epoch: 2,
        assignment_epoch: 2,
        members: [
            ("a".to_string(), stored(2, of("t", &[0, 1, 2]))),
            ("b".to_string(), stored(2, of("t", &[3, 4, 5]))),
        ]
        .into_iter()
        .collect(),
    };
    let g = ConsumerGroup::restore("g", sound.clone(), &topics(), SETTINGS, 0);
    assert_eq!(g.invariant_violation(), None);
    // One partition owned by two members.
    let mut shared = sound.clone();
    shared.members.get_mut("b").unwrap().current.3 = of("t", &[2, 3]);
    let why = ConsumerGroup::restore("g", shared, &topics(), SETTINGS, 0)
        .invariant_violation()
        .expect("a violation");
    assert!(why.contains("t-2 is owned by both"), "{why}");
    // A member ahead of its group.
    let mut ahead = sound;
    ahead.members.get_mut("a").unwrap().current.0 = 9;
    let why = ConsumerGroup::restore("g", ahead, &topics(), SETTINGS, 0)
        .invariant_violation()
        .expect("a violation");
    assert!(why.contains("at epoch 9 past group epoch 2"), "{why}");
}

#[test]
#[should_panic(expected = "assignment epoch 5 past group epoch 1")]
fn a_change_that_breaks_an_invariant_is_caught() {
    let mut g = ConsumerGroup::new("g", 0);
    g.heartbeat(join("a", &["t"]), &topics(), SETTINGS, 0)
        .unwrap();
    g.assignment_epoch = 5;
    g.check_invariants();
}
