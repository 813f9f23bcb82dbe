//! `mirrorlog-broker topics ...`: Kafka's `kafka-topics.sh` and `kafka-configs.sh --entity-type
//! topics` for this broker, over its Kafka listener (CreateTopics, Metadata, ListOffsets,
//! DescribeConfigs, IncrementalAlterConfigs, DeleteTopics), so an operator needs no client
//! library: `list`, `create`, `describe` (partitions with their ends, and the configs set on
//! the topic), `alter` (`--set KEY=VALUE`, `--delete KEY`), `delete`. `--json` on each. Exit
//! codes as `mirrors`: 0 done, 1 refused (Kafka's error name on stderr), 2 usage, 3 no answer.

use super::kafka::{check, finish, refused, s, topic, Failure, Kafka, EXIT_REFUSED};
use super::table;
use clap::{Arg, ArgAction, ArgMatches};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    describe_configs_request, ApiKey, BrokerId, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, ListOffsetsRequest, MetadataRequest,
    RequestKind, ResponseKind,
};
use serde_json::{json, Value};

/// Kafka's resource type of a topic in the config APIs.
const TOPIC_RESOURCE: i8 = 2;
/// DescribeConfigs' source of a value nobody set (Kafka's `DEFAULT_CONFIG`).
const DEFAULT_CONFIG: i8 = 5;

fn name_arg() -> Arg {
    Arg::new("name")
        .value_name("TOPIC")
        .required(true)
        .help("The topic")
}

/// The `topics` subcommand.
#[must_use]
pub fn command() -> clap::Command {
    clap::Command::new("topics")
        .about("Create, describe, alter the configs of and delete topics (over the Kafka listener)")
        .subcommand_required(true)
        .args(super::kafka::global_args())
        .subcommand(clap::Command::new("list").about("Every topic and its partition count"))
        .subcommand(
            clap::Command::new("create")
                .about("Create a topic")
                .arg(name_arg())
                .arg(
                    Arg::new("partitions")
                        .long("partitions")
                        .value_name("N")
                        .value_parser(clap::value_parser!(i32))
                        .help("Partitions [default: the broker's num.partitions]"),
                )
                .arg(
                    Arg::new("config")
                        .long("config")
                        .value_name("KEY=VALUE")
                        .action(ArgAction::Append)
                        .help("A topic config (repeat for more)"),
                ),
        )
        .subcommand(
            clap::Command::new("describe")
                .about("A topic's partitions (leader, epoch, log start, end) and the configs set on it")
                .arg(name_arg()),
        )
        .subcommand(
            clap::Command::new("alter")
                .about("Set or remove topic configs (IncrementalAlterConfigs)")
                .arg(name_arg())
                .arg(
                    Arg::new("set")
                        .long("set")
                        .value_name("KEY=VALUE")
                        .action(ArgAction::Append)
                        .help("A config to set (repeat for more)"),
                )
                .arg(
                    Arg::new("delete")
                        .long("delete")
                        .value_name("KEY")
                        .action(ArgAction::Append)
                        .help("A config to put back to its default (repeat for more)"),
                ),
        )
        .subcommand(
            clap::Command::new("delete")
                .about("Delete a topic")
                .arg(name_arg()),
        )
}

/// Runs the `topics` subcommand; its exit code.
pub fn run(m: &ArgMatches) -> u8 {
    let as_json = m.get_flag("json");
    let outcome = Kafka::connect(m).and_then(|mut k| match m.subcommand() {
        Some(("list", _)) => list(&mut k, as_json),
        Some(("create", sub)) => create(&mut k, sub, as_json),
        Some(("describe", sub)) => describe(&mut k, &name(sub), as_json),
        Some(("alter", sub)) => alter(&mut k, sub, as_json),
        Some(("delete", sub)) => delete(&mut k, &name(sub), as_json),
        _ => Err((2, "a topics command is needed (try --help)".into())),
    });
    finish("topics", outcome)
}

fn name(m: &ArgMatches) -> String {
    m.get_one::<String>("name").cloned().unwrap_or_default()
}

/// `KEY=VALUE` pairs of the repeated argument `id`.
fn pairs(m: &ArgMatches, id: &str) -> Result<Vec<(String, String)>, Failure> {
    m.get_many::<String>(id)
        .into_iter()
        .flatten()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| (2, format!("--{id} {kv:?}: expected KEY=VALUE")))
        })
        .collect()
}

/// Metadata of `names` (all topics when `None`).
fn metadata(
    k: &mut Kafka,
    names: Option<&[&str]>,
) -> Result<kafka_protocol::messages::MetadataResponse, Failure> {
    let mut r = MetadataRequest::default();
    r.topics = names.map(|ns| {
        ns.iter()
            .map(|n| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(topic(n));
                t
            })
            .collect()
    });
    r.allow_auto_topic_creation = false;
    match k.call(ApiKey::Metadata, 4, 12, RequestKind::Metadata(r))? {
        ResponseKind::Metadata(m) => Ok(m),
        _ => Err((EXIT_REFUSED, "Metadata answered with another API".into())),
    }
}

fn list(k: &mut Kafka, as_json: bool) -> Result<String, Failure> {
    let m = metadata(k, None)?;
    let mut topics: Vec<(String, usize, bool)> = m
        .topics
        .iter()
        .filter_map(|t| {
            let n = t.name.as_ref()?.0.to_string();
            Some((n, t.partitions.len(), t.is_internal))
        })
        .collect();
    topics.sort();
    if as_json {
        let v: Vec<Value> = topics
            .iter()
            .map(|(n, p, i)| json!({"topic": n, "partitions": p, "internal": i}))
            .collect();
        return Ok(Value::Array(v).to_string());
    }
    let rows: Vec<Vec<String>> = topics
        .iter()
        .map(|(n, p, i)| vec![n.clone(), p.to_string(), if *i { "yes" } else { "" }.into()])
        .collect();
    Ok(table(&["TOPIC", "PARTITIONS", "INTERNAL"], &rows))
}

fn create(k: &mut Kafka, m: &ArgMatches, as_json: bool) -> Result<String, Failure> {
    let n = name(m);
    let mut t = CreatableTopic::default();
    t.name = topic(&n);
    t.num_partitions = m.get_one::<i32>("partitions").copied().unwrap_or(-1);
    // The broker's default, as kafka-topics.sh sends it (KIP-464).
    t.replication_factor = -1;
    for (key, value) in pairs(m, "config")? {
        let mut c = CreatableTopicConfig::default();
        c.name = s(&key);
        c.value = Some(s(&value));
        t.configs.push(c);
    }
    let mut r = CreateTopicsRequest::default();
    r.topics.push(t);
    r.timeout_ms = 30_000;
    let ResponseKind::CreateTopics(resp) =
        k.call(ApiKey::CreateTopics, 2, 7, RequestKind::CreateTopics(r))?
    else {
        return Err((
            EXIT_REFUSED,
            "CreateTopics answered with another API".into(),
        ));
    };
    check(
        resp.topics
            .iter()
            .map(|t| (t.error_code, t.error_message.as_ref())),
        &n,
    )?;
    let partitions = resp.topics.first().map_or(-1, |t| t.num_partitions);
    Ok(if as_json {
        json!({"created": n, "partitions": partitions}).to_string()
    } else {
        format!("{n}: created with {partitions} partitions")
    })
}

/// Each partition's offset at `timestamp` (-2 earliest, -1 latest), by partition.
pub fn offsets(
    k: &mut Kafka,
    name: &str,
    partitions: &[i32],
    timestamp: i64,
) -> Result<Vec<(i32, i64)>, Failure> {
    let mut t = ListOffsetsTopic::default();
    t.name = topic(name);
    for &p in partitions {
        let mut lp = ListOffsetsPartition::default();
        lp.partition_index = p;
        lp.timestamp = timestamp;
        t.partitions.push(lp);
    }
    let mut r = ListOffsetsRequest::default();
    r.replica_id = BrokerId(-1);
    r.topics.push(t);
    let ResponseKind::ListOffsets(resp) =
        k.call(ApiKey::ListOffsets, 1, 7, RequestKind::ListOffsets(r))?
    else {
        return Err((EXIT_REFUSED, "ListOffsets answered with another API".into()));
    };
    let mut out = Vec::new();
    for p in resp.topics.iter().flat_map(|t| &t.partitions) {
        let what = format!("{name}-{}", p.partition_index);
        if let Some(f) = refused(p.error_code, &what, None) {
            return Err(f);
        }
        out.push((p.partition_index, p.offset));
    }
    Ok(out)
}

fn describe(k: &mut Kafka, n: &str, as_json: bool) -> Result<String, Failure> {
    let m = metadata(k, Some(&[n]))?;
    let Some(t) = m.topics.first() else {
        return Err((EXIT_REFUSED, format!("{n}: no answer for it")));
    };
    if let Some(f) = refused(t.error_code, n, None) {
        return Err(f);
    }
    let mut parts: Vec<(i32, i32, i32)> = t
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0, p.leader_epoch))
        .collect();
    parts.sort_unstable();
    let indexes: Vec<i32> = parts.iter().map(|p| p.0).collect();
    let starts = offsets(k, n, &indexes, -2)?;
    let ends = offsets(k, n, &indexes, -1)?;
    let at = |v: &[(i32, i64)], p: i32| v.iter().find(|x| x.0 == p).map_or(-1, |x| x.1);

    let mut res = describe_configs_request::DescribeConfigsResource::default();
    res.resource_type = TOPIC_RESOURCE;
    res.resource_name = s(n);
    res.configuration_keys = None;
    let mut r = DescribeConfigsRequest::default();
    r.resources.push(res);
    let ResponseKind::DescribeConfigs(c) = k.call(
        ApiKey::DescribeConfigs,
        1,
        4,
        RequestKind::DescribeConfigs(r),
    )?
    else {
        return Err((
            EXIT_REFUSED,
            "DescribeConfigs answered with another API".into(),
        ));
    };
    let mut set: Vec<(String, Option<String>)> = Vec::new();
    check(
        c.results
            .iter()
            .map(|r| (r.error_code, r.error_message.as_ref())),
        n,
    )?;
    for result in &c.results {
        for e in &result.configs {
            if e.config_source != DEFAULT_CONFIG {
                let value = (!e.is_sensitive)
                    .then(|| e.value.as_ref().map(|v| v.to_string()))
                    .flatten();
                set.push((e.name.to_string(), value));
            }
        }
    }
    if as_json {
        let partitions: Vec<Value> = parts
            .iter()
            .map(|&(p, leader, epoch)| {
                json!({"partition": p, "leader": leader, "leader_epoch": epoch,
                       "log_start": at(&starts, p), "log_end": at(&ends, p)})
            })
            .collect();
        let configs: serde_json::Map<String, Value> =
            set.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        return Ok(json!({"topic": n, "partitions": partitions, "configs": configs}).to_string());
    }
    let rows: Vec<Vec<String>> = parts
        .iter()
        .map(|&(p, leader, epoch)| {
            vec![
                p.to_string(),
                leader.to_string(),
                epoch.to_string(),
                at(&starts, p).to_string(),
                at(&ends, p).to_string(),
            ]
        })
        .collect();
    let mut out = table(
        &["PARTITION", "LEADER", "EPOCH", "LOG_START", "LOG_END"],
        &rows,
    );
    out.push_str("\n\nconfigs set on the topic:");
    if set.is_empty() {
        out.push_str(" none");
    }
    for (key, value) in &set {
        out.push_str(&format!(
            "\n  {key}={}",
            value.as_deref().unwrap_or("(sensitive)")
        ));
    }
    Ok(out)
}

fn alter(k: &mut Kafka, m: &ArgMatches, as_json: bool) -> Result<String, Failure> {
    let n = name(m);
    let sets = pairs(m, "set")?;
    let deletes: Vec<String> = m
        .get_many::<String>("delete")
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    if sets.is_empty() && deletes.is_empty() {
        return Err((2, "alter needs --set KEY=VALUE or --delete KEY".into()));
    }
    let mut res = AlterConfigsResource::default();
    res.resource_type = TOPIC_RESOURCE;
    res.resource_name = s(&n);
    for (key, value) in &sets {
        let mut c = AlterableConfig::default();
        c.name = s(key);
        c.config_operation = 0; // SET
        c.value = Some(s(value));
        res.configs.push(c);
    }
    for key in &deletes {
        let mut c = AlterableConfig::default();
        c.name = s(key);
        c.config_operation = 1; // DELETE
        res.configs.push(c);
    }
    let mut r = IncrementalAlterConfigsRequest::default();
    r.resources.push(res);
    let ResponseKind::IncrementalAlterConfigs(resp) = k.call(
        ApiKey::IncrementalAlterConfigs,
        0,
        1,
        RequestKind::IncrementalAlterConfigs(r),
    )?
    else {
        return Err((
            EXIT_REFUSED,
            "IncrementalAlterConfigs answered with another API".into(),
        ));
    };
    check(
        resp.responses
            .iter()
            .map(|x| (x.error_code, x.error_message.as_ref())),
        &n,
    )?;
    Ok(if as_json {
        json!({"altered": n, "set": sets.len(), "deleted": deletes.len()}).to_string()
    } else {
        format!(
            "{n}: {} set, {} put back to default",
            sets.len(),
            deletes.len()
        )
    })
}

fn delete(k: &mut Kafka, n: &str, as_json: bool) -> Result<String, Failure> {
    let mut r = DeleteTopicsRequest::default();
    r.topic_names = vec![topic(n)];
    r.timeout_ms = 30_000;
    let ResponseKind::DeleteTopics(resp) =
        k.call(ApiKey::DeleteTopics, 1, 5, RequestKind::DeleteTopics(r))?
    else {
        return Err((
            EXIT_REFUSED,
            "DeleteTopics answered with another API".into(),
        ));
    };
    check(
        resp.responses
            .iter()
            .map(|x| (x.error_code, x.error_message.as_ref())),
        n,
    )?;
    Ok(if as_json {
        json!({"deleted": n}).to_string()
    } else {
        format!("{n}: deleted")
    })
}
