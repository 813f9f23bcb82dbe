//! `mirrorlog-broker groups ...`: Kafka's `kafka-consumer-groups.sh --list` and `--describe`
//! for this broker, over its Kafka listener: `list` (ListGroups: every group, its state, type
//! and protocol type), `describe GROUP` (DescribeGroups: its state and members; OffsetFetch and
//! ListOffsets: per partition the committed offset, the log end and the lag between them).
//! `--json` on each; exit codes as `mirrors`.

use super::kafka::{finish, refused, Failure, Kafka, EXIT_REFUSED};
use super::table;
use clap::{Arg, ArgMatches};
use kafka_protocol::messages::{
    ApiKey, DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetFetchRequest, RequestKind,
    ResponseKind,
};
use serde_json::{json, Value};

/// The `groups` subcommand.
#[must_use]
pub fn command() -> clap::Command {
    clap::Command::new("groups")
        .about("List consumer groups, and describe one with its lag per partition (over the Kafka listener)")
        .subcommand_required(true)
        .args(super::kafka::global_args())
        .subcommand(clap::Command::new("list").about("Every group: its state, type and protocol type"))
        .subcommand(
            clap::Command::new("describe")
                .about("A group's state and members, and per partition its committed offset, the log end and the lag")
                .arg(Arg::new("group").value_name("GROUP").required(true).help("The group")),
        )
}

/// Runs the `groups` subcommand; its exit code.
pub fn run(m: &ArgMatches) -> u8 {
    let as_json = m.get_flag("json");
    let outcome = Kafka::connect(m).and_then(|mut k| match m.subcommand() {
        Some(("list", _)) => list(&mut k, as_json),
        Some(("describe", sub)) => {
            let g = sub.get_one::<String>("group").cloned().unwrap_or_default();
            describe(&mut k, &g, as_json)
        }
        _ => Err((2, "a groups command is needed (try --help)".into())),
    });
    finish("groups", outcome)
}

fn list(k: &mut Kafka, as_json: bool) -> Result<String, Failure> {
    let ResponseKind::ListGroups(resp) = k.call(
        ApiKey::ListGroups,
        0,
        5,
        RequestKind::ListGroups(ListGroupsRequest::default()),
    )?
    else {
        return Err((EXIT_REFUSED, "ListGroups answered with another API".into()));
    };
    if let Some(f) = refused(resp.error_code, "ListGroups", None) {
        return Err(f);
    }
    let mut groups: Vec<[String; 4]> = resp
        .groups
        .iter()
        .map(|g| {
            [
                g.group_id.0.to_string(),
                g.group_state.to_string(),
                g.group_type.to_string(),
                g.protocol_type.to_string(),
            ]
        })
        .collect();
    groups.sort();
    if as_json {
        let v: Vec<Value> = groups
            .iter()
            .map(|[id, state, kind, protocol]| {
                json!({"group": id, "state": state, "type": kind, "protocol_type": protocol})
            })
            .collect();
        return Ok(Value::Array(v).to_string());
    }
    let rows: Vec<Vec<String>> = groups.iter().map(|g| g.to_vec()).collect();
    Ok(table(&["GROUP", "STATE", "TYPE", "PROTOCOL_TYPE"], &rows))
}

/// A partition's committed offset, the log end, and the lag (`None` with nothing committed).
struct Position {
    topic: String,
    partition: i32,
    committed: i64,
    end: i64,
}

impl Position {
    fn lag(&self) -> Option<i64> {
        (self.committed >= 0).then(|| (self.end - self.committed).max(0))
    }
}

fn describe(k: &mut Kafka, g: &str, as_json: bool) -> Result<String, Failure> {
    let mut r = DescribeGroupsRequest::default();
    r.groups = vec![GroupId(super::kafka::s(g))];
    let ResponseKind::DescribeGroups(d) =
        k.call(ApiKey::DescribeGroups, 0, 5, RequestKind::DescribeGroups(r))?
    else {
        return Err((
            EXIT_REFUSED,
            "DescribeGroups answered with another API".into(),
        ));
    };
    let Some(group) = d.groups.first() else {
        return Err((EXIT_REFUSED, format!("{g}: no answer for it")));
    };
    if let Some(f) = refused(group.error_code, g, None) {
        return Err(f);
    }
    let state = group.group_state.to_string();
    let members: Vec<[String; 3]> = group
        .members
        .iter()
        .map(|m| {
            [
                m.member_id.to_string(),
                m.client_id.to_string(),
                m.client_host.to_string(),
            ]
        })
        .collect();

    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(super::kafka::s(g));
    r.topics = None;
    let ResponseKind::OffsetFetch(o) =
        k.call(ApiKey::OffsetFetch, 2, 7, RequestKind::OffsetFetch(r))?
    else {
        return Err((EXIT_REFUSED, "OffsetFetch answered with another API".into()));
    };
    if let Some(f) = refused(o.error_code, g, None) {
        return Err(f);
    }
    let mut positions = Vec::new();
    for t in &o.topics {
        let name = t.name.0.to_string();
        let committed: Vec<(i32, i64)> = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.committed_offset))
            .collect();
        let indexes: Vec<i32> = committed.iter().map(|c| c.0).collect();
        let ends = super::topics::offsets(k, &name, &indexes, -1)?;
        for (partition, committed) in committed {
            let end = ends.iter().find(|e| e.0 == partition).map_or(-1, |e| e.1);
            positions.push(Position {
                topic: name.clone(),
                partition,
                committed,
                end,
            });
        }
    }
    positions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    if as_json {
        let parts: Vec<Value> = positions
            .iter()
            .map(|p| {
                json!({"topic": p.topic, "partition": p.partition, "committed": p.committed,
                       "log_end": p.end, "lag": p.lag()})
            })
            .collect();
        let members: Vec<Value> = members
            .iter()
            .map(|[id, client, host]| json!({"member_id": id, "client_id": client, "client_host": host}))
            .collect();
        return Ok(
            json!({"group": g, "state": state, "members": members, "partitions": parts})
                .to_string(),
        );
    }
    let rows: Vec<Vec<String>> = positions
        .iter()
        .map(|p| {
            vec![
                p.topic.clone(),
                p.partition.to_string(),
                p.committed.to_string(),
                p.end.to_string(),
                p.lag().map_or("-".into(), |l| l.to_string()),
            ]
        })
        .collect();
    let mut out = format!("group {g}: {state}, {} members\n\n", members.len());
    out.push_str(&table(
        &["TOPIC", "PARTITION", "COMMITTED", "LOG_END", "LAG"],
        &rows,
    ));
    if !members.is_empty() {
        out.push_str("\n\n");
        let rows: Vec<Vec<String>> = members.iter().map(|m| m.to_vec()).collect();
        out.push_str(&table(&["MEMBER", "CLIENT_ID", "HOST"], &rows));
    }
    Ok(out)
}
