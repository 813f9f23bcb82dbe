//! KIP-848's server-side assignors, as Kafka names them: `uniform` (the default) and `range`.
//!
//! - `range` is Kafka's `RangeAssignor`: per topic, the members subscribed to it, sorted (static
//!   members by instance id first, then by member id), each get a contiguous range of its
//!   partitions, the first ones one more when they do not divide evenly.
//! - `uniform` balances every member's count of partitions (at most one apart among members
//!   that could take each other's partitions) and keeps each partition with its previous owner
//!   where the balance allows it (sticky), as Kafka's `UniformAssignor` does; when members
//!   subscribe to different topics, each partition goes to the least loaded member subscribed
//!   to its topic.

use std::collections::{BTreeMap, BTreeSet};

/// A member's partitions, by topic.
pub type Partitions = BTreeMap<String, BTreeSet<i32>>;

/// What the assignor knows of one member.
pub struct MemberSpec<'a> {
    /// Its member id.
    pub id: &'a str,
    /// Its instance id (static membership).
    pub instance_id: Option<&'a str>,
    /// The topics it subscribes to (that exist).
    pub topics: BTreeSet<String>,
    /// Its partitions in the previous target assignment.
    pub previous: Option<&'a Partitions>,
}

/// The assignors served.
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// The target assignment of `members` over `topics` (name → partition count) by `assignor`.
pub fn assign(
    assignor: &str,
    members: &[MemberSpec<'_>],
    topics: &BTreeMap<String, i32>,
) -> BTreeMap<String, Partitions> {
    match assignor {
        "range" => range(members, topics),
        _ => uniform(members, topics),
    }
}

fn range(
    members: &[MemberSpec<'_>],
    topics: &BTreeMap<String, i32>,
) -> BTreeMap<String, Partitions> {
    let mut sorted: Vec<&MemberSpec<'_>> = members.iter().collect();
    sorted.sort_by(|a, b| match (a.instance_id, b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.id.cmp(b.id),
    });
    let mut out: BTreeMap<String, Partitions> = members
        .iter()
        .map(|m| (m.id.to_string(), Partitions::new()))
        .collect();
    for (topic, &n) in topics {
        let subscribed: Vec<&&MemberSpec<'_>> =
            sorted.iter().filter(|m| m.topics.contains(topic)).collect();
        if subscribed.is_empty() {
            continue;
        }
        let count = i32::try_from(subscribed.len()).unwrap_or(i32::MAX);
        let (quota, extra) = (n / count, n % count);
        let mut next = 0;
        for (i, m) in subscribed.iter().enumerate() {
            let take = quota + i32::from(i32::try_from(i).unwrap_or(i32::MAX) < extra);
            if take > 0 {
                out.entry(m.id.to_string())
                    .or_default()
                    .entry(topic.clone())
                    .or_default()
                    .extend(next..next + take);
            }
            next += take;
        }
    }
    out
}

fn uniform(
    members: &[MemberSpec<'_>],
    topics: &BTreeMap<String, i32>,
) -> BTreeMap<String, Partitions> {
    // Every partition of a subscribed topic, its owner (index into `members`) if any.
    let mut owner: BTreeMap<(String, i32), Option<usize>> = BTreeMap::new();
    for (topic, &n) in topics {
        if members.iter().any(|m| m.topics.contains(topic)) {
            for p in 0..n {
                owner.insert((topic.clone(), p), None);
            }
        }
    }
    let mut count = vec![0usize; members.len()];
    // Sticky: each partition stays with its previous owner if it still subscribes.
    for (i, m) in members.iter().enumerate() {
        for (topic, parts) in m.previous.into_iter().flatten() {
            if !m.topics.contains(topic) {
                continue;
            }
            for p in parts {
                if let Some(slot @ None) = owner.get_mut(&(topic.clone(), *p)) {
                    *slot = Some(i);
                    count[i] += 1;
                }
            }
        }
    }
    let least_loaded = |topic: &str, count: &[usize]| -> Option<usize> {
        (0..members.len())
            .filter(|&i| members[i].topics.contains(topic))
            .min_by_key(|&i| (count[i], members[i].id))
    };
    // The others to the least loaded member that can take them.
    let unowned: Vec<(String, i32)> = owner
        .iter()
        .filter(|(_, o)| o.is_none())
        .map(|(k, _)| k.clone())
        .collect();
    for key in unowned {
        if let Some(i) = least_loaded(&key.0, &count) {
            owner.insert(key, Some(i));
            count[i] += 1;
        }
    }
    // Balance: the most loaded member gives one partition to the least loaded member that
    // could take it and has at least two fewer, until no member can give (each move lowers
    // the sum of squares of the counts, so this ends). Taking from the most loaded first
    // keeps every other member's partitions where they are.
    loop {
        let mut donors: Vec<usize> = (0..members.len()).collect();
        donors.sort_by_key(|&i| (std::cmp::Reverse(count[i]), members[i].id));
        let mut moved = false;
        'donors: for from in donors {
            let mine: Vec<(String, i32)> = owner
                .iter()
                .filter(|(_, o)| **o == Some(from))
                .map(|(k, _)| k.clone())
                .collect();
            for key in mine {
                if let Some(to) = least_loaded(&key.0, &count) {
                    if count[to] + 1 < count[from] {
                        owner.insert(key, Some(to));
                        count[from] -= 1;
                        count[to] += 1;
                        moved = true;
                        break 'donors;
                    }
                }
            }
        }
        if !moved {
            break;
        }
    }
    let mut out: BTreeMap<String, Partitions> = members
        .iter()
        .map(|m| (m.id.to_string(), Partitions::new()))
        .collect();
    for ((topic, p), o) in owner {
        if let Some(i) = o {
            out.entry(members[i].id.to_string())
                .or_default()
                .entry(topic)
                .or_default()
                .insert(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(id: &'a str, topics: &[&str], previous: Option<&'a Partitions>) -> MemberSpec<'a> {
        MemberSpec {
            id,
            instance_id: None,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            previous,
        }
    }

    fn sizes(a: &BTreeMap<String, Partitions>) -> Vec<usize> {
        a.values()
            .map(|p| p.values().map(BTreeSet::len).sum())
            .collect()
    }

    #[test]
    fn range_gives_contiguous_ranges_per_topic() {
        let topics: BTreeMap<String, i32> = [("t".to_string(), 7)].into_iter().collect();
        let a = assign(
            "range",
            &[
                spec("b", &["t"], None),
                spec("a", &["t"], None),
                spec("c", &["t"], None),
            ],
            &topics,
        );
        assert_eq!(a["a"]["t"], (0..3).collect());
        assert_eq!(a["b"]["t"], (3..5).collect());
        assert_eq!(a["c"]["t"], (5..7).collect());
    }

    #[test]
    fn uniform_balances_keeps_owners_and_honours_subscriptions() {
        let topics: BTreeMap<String, i32> = [("t".to_string(), 12), ("u".to_string(), 2)]
            .into_iter()
            .collect();
        let one = assign("uniform", &[spec("a", &["t"], None)], &topics);
        assert_eq!(sizes(&one), vec![12]);
        // A second and third member: balanced, and a keeps what it keeps.
        let two = assign(
            "uniform",
            &[spec("a", &["t"], Some(&one["a"])), spec("b", &["t"], None)],
            &topics,
        );
        assert_eq!(sizes(&two), vec![6, 6]);
        assert!(two["a"]["t"].is_subset(&one["a"]["t"]));
        let three = assign(
            "uniform",
            &[
                spec("a", &["t"], Some(&two["a"])),
                spec("b", &["t"], Some(&two["b"])),
                spec("c", &["t"], None),
            ],
            &topics,
        );
        assert_eq!(sizes(&three), vec![4, 4, 4]);
        assert!(three["a"]["t"].is_subset(&two["a"]["t"]));
        assert!(three["b"]["t"].is_subset(&two["b"]["t"]));
        // Heterogeneous: u only to the member subscribed to it.
        let het = assign(
            "uniform",
            &[spec("a", &["t"], None), spec("b", &["t", "u"], None)],
            &topics,
        );
        assert!(!het["a"].contains_key("u"));
        assert_eq!(het["b"]["u"].len(), 2);
        assert_eq!(sizes(&het), vec![7, 7]);
    }
}
