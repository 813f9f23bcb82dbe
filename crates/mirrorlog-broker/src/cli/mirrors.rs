//! `mirrorlog-broker mirrors ...`: the mirror command line over the admin surface, with the
//! token read from its file: `list`, `describe`, `create` (`--dry-run`: what each partition
//! would lose), `failover`, `failback` (the truncation plan first), `pause`, `resume`,
//! `delete`; `--json` on each prints the surface's answers instead of tables. `create` and
//! `failback` take the source's TLS and SASL settings (`--security-protocol`,
//! `--ssl-ca-location`, `--sasl-mechanism`, `--sasl-username`, `--sasl-password-file` or
//! `--sasl-password-env`), passed to the surface as its fields of the same names.
//!
//! Exit codes a script can use: 0 done; 1 the broker refused or failed the request (its reason
//! on stderr), or there is no such mirror; 2 a command line clap refuses; 3 no answer (the
//! token unreadable, the surface unreachable).

use super::admin_client::{AdminClient, ClientError};
use super::{cell, table};
use clap::{Arg, ArgAction, ArgMatches};
use serde_json::{json, Value};
use std::path::PathBuf;

/// Done.
pub const EXIT_OK: u8 = 0;
/// The broker refused or failed the request, or the mirror does not exist.
pub const EXIT_REFUSED: u8 = 1;
/// No answer: the token unreadable, the surface unreachable.
pub const EXIT_NO_ANSWER: u8 = 3;

fn name_arg() -> Arg {
    Arg::new("name")
        .value_name("NAME")
        .required(true)
        .help("The mirror's name (the source cluster's, as this broker calls it)")
}

/// The source's security settings: each flag is the admin surface's field of the same name
/// (`mirror/security.rs`), dashes for underscores.
const SECURITY_FLAGS: [(&str, &str, &str); 6] = [
    (
        "security-protocol",
        "PROTOCOL",
        "SSL, SASL_SSL or SASL_PLAINTEXT [default: PLAINTEXT]",
    ),
    (
        "ssl-ca-location",
        "FILE",
        "PEM certificates the source's TLS certificate must chain to",
    ),
    (
        "sasl-mechanism",
        "MECHANISM",
        "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
    ),
    ("sasl-username", "USER", "The SASL user"),
    (
        "sasl-password-file",
        "FILE",
        "A file holding the SASL password (read by the broker)",
    ),
    (
        "sasl-password-env",
        "VAR",
        "An environment variable of the broker holding the SASL password",
    ),
];

/// The security flags given, as the admin surface's fields.
fn source_security(m: &ArgMatches) -> serde_json::Map<String, Value> {
    SECURITY_FLAGS
        .iter()
        .filter_map(|(flag, _, _)| {
            let v = m.try_get_one::<String>(flag).ok().flatten()?;
            Some((flag.replace('-', "_"), json!(v)))
        })
        .collect()
}

fn source_args() -> Vec<Arg> {
    let security = SECURITY_FLAGS
        .iter()
        .map(|(flag, value, help)| Arg::new(*flag).long(*flag).value_name(*value).help(*help));
    let mut args = vec![
        Arg::new("bootstrap")
            .long("bootstrap")
            .value_name("HOST:PORT[,HOST:PORT..]")
            .required(true)
            .help("The source cluster's brokers"),
        Arg::new("topics")
            .long("topics")
            .value_name("TOPIC[,TOPIC..]")
            .required(true)
            .value_delimiter(',')
            .help("The topics mirrored"),
        Arg::new("dry-run")
            .long("dry-run")
            .action(ArgAction::SetTrue)
            .help("Show what each partition would lose, and change nothing"),
        Arg::new("force")
            .long("force")
            .action(ArgAction::SetTrue)
            .help("Truncate local topics whose history is not the source's (refused otherwise)"),
    ];
    args.extend(security);
    args
}

/// The ACL sync's settings (`mirror/acl_sync.rs`).
fn acl_args() -> Vec<Arg> {
    vec![
        Arg::new("acl-sync-ms")
            .long("acl-sync-ms")
            .value_name("MS")
            .value_parser(clap::value_parser!(u64))
            .help("How often the source's ACLs are synced; 0: not synced [default: 60000]"),
        Arg::new("acl-filter")
            .long("acl-filter")
            .value_name("JSON")
            .action(ArgAction::Append)
            .value_parser(|s: &str| {
                serde_json::from_str::<crate::mirror::acl_sync::AclFilterSpec>(s)
                    .map_err(|e| e.to_string())
                    .and_then(|f| f.filter().map(|_| f).map_err(|e| e.to_string()))
            })
            .help(
                "Sync the ACLs this filter matches instead of those of the mirrored topics and \
                 groups, e.g. '{\"resource_type\":\"TRANSACTIONAL_ID\",\"principal\":\"User:app\"}' \
                 (repeatable)",
            ),
        Arg::new("acl-prune")
            .long("acl-prune")
            .action(ArgAction::SetTrue)
            .help("Also remove ACLs here, in scope, that the source does not have"),
    ]
}

/// The `mirrors` subcommand.
#[must_use]
pub fn command() -> clap::Command {
    let global = [
        Arg::new("admin")
            .long("admin")
            .value_name("HOST:PORT")
            .default_value("127.0.0.1:9644")
            .global(true)
            .help("The broker's admin surface"),
        Arg::new("data-dir")
            .long("data-dir")
            .value_name("DIR")
            .default_value(crate::settings::DATA_DIR_DEFAULT)
            .global(true)
            .help("The broker's data directory, where its admin token is (DIR/broker/admin.token)"),
        Arg::new("token-file")
            .long("token-file")
            .value_name("FILE")
            .global(true)
            .help("The admin token's file, if not in the data directory (admin.token.file)"),
        Arg::new("json")
            .long("json")
            .action(ArgAction::SetTrue)
            .global(true)
            .help("Print the admin surface's answers as JSON"),
    ];
    clap::Command::new("mirrors")
        .about("Start, inspect, fail over, fail back, pause and resume mirrors (over the admin surface)")
        .subcommand_required(true)
        .args(global)
        .subcommand(clap::Command::new("list").about("Every mirror: its state, source, topics and worst lag"))
        .subcommand(
            clap::Command::new("describe")
                .about("One mirror, a line per partition: mode, ends, lag in records and time, why it stalls")
                .arg(name_arg()),
        )
        .subcommand(
            clap::Command::new("create")
                .about("Start mirroring topics from a source cluster")
                .arg(name_arg())
                .args(source_args())
                .args(acl_args())
                .arg(
                    Arg::new("config-sync-ms")
                        .long("config-sync-ms")
                        .value_name("MS")
                        .value_parser(clap::value_parser!(u64))
                        .help("How often the source's topic configs are read [default: 30000]"),
                )
                .arg(
                    Arg::new("group-sync-ms")
                        .long("group-sync-ms")
                        .value_name("MS")
                        .value_parser(clap::value_parser!(u64))
                        .help("How often the source's group offsets are synced [default: 60000]"),
                ),
        )
        .subcommand(
            clap::Command::new("failover")
                .about("Stop mirroring and take writes here (the atomic stop: new epoch, aborts, barrier)")
                .arg(name_arg()),
        )
        .subcommand(
            clap::Command::new("failback")
                .about("Mirror the cluster that took over: the truncation plan first, then the start")
                .arg(name_arg())
                .args(source_args())
                .args(acl_args()),
        )
        .subcommand(clap::Command::new("pause").about("Stop fetching, keep mirroring").arg(name_arg()))
        .subcommand(clap::Command::new("resume").about("Fetch again").arg(name_arg()))
        .subcommand(
            clap::Command::new("delete")
                .about("Forget a stopped mirror's record")
                .arg(name_arg()),
        )
}

/// What one command did: the text (or JSON) to print, or why it failed and its exit code.
type Outcome = Result<String, (u8, String)>;

/// Runs the `mirrors` command `m`; its exit code (the output printed).
#[must_use]
pub fn run(m: &ArgMatches) -> u8 {
    let s = |k: &str| m.get_one::<String>(k).cloned().unwrap_or_default();
    let token_file = m.get_one::<String>("token-file").map_or_else(
        || crate::state_dir(&PathBuf::from(s("data-dir"))).join("admin.token"),
        PathBuf::from,
    );
    let client = match AdminClient::new(&s("admin"), &token_file) {
        Ok(c) => c,
        Err(e) => return fail(EXIT_NO_ANSWER, &e.to_string()),
    };
    let as_json = m.get_flag("json");
    let outcome = match m.subcommand() {
        Some(("list", _)) => list(&client, as_json),
        Some(("describe", sub)) => describe(&client, &name(sub), as_json),
        Some(("create", sub)) => start(&client, sub, as_json, false),
        Some(("failback", sub)) => start(&client, sub, as_json, true),
        Some(("failover", sub)) => failover(&client, &name(sub), as_json),
        Some((verb @ ("pause" | "resume"), sub)) => {
            let n = name(sub);
            ask(
                &client,
                "POST",
                &format!("/mirrors/{n}/{verb}"),
                &Value::Null,
            )
            .map(|v| {
                if as_json {
                    v.to_string()
                } else {
                    let done = v[if verb == "pause" { "paused" } else { "resumed" }].as_u64();
                    format!("{n}: {verb}d {} partitions", done.unwrap_or(0))
                }
            })
        }
        Some(("delete", sub)) => {
            let n = name(sub);
            ask(&client, "DELETE", &format!("/mirrors/{n}"), &Value::Null).map(|v| {
                if as_json {
                    v.to_string()
                } else {
                    format!("{n}: deleted")
                }
            })
        }
        _ => Err((2, "a mirrors command is needed (try --help)".into())),
    };
    match outcome {
        Ok(text) => {
            println!("{}", text.trim_end());
            EXIT_OK
        }
        Err((code, why)) => fail(code, &why),
    }
}

fn fail(code: u8, why: &str) -> u8 {
    eprintln!("mirrorlog-broker mirrors: {why}");
    code
}

fn name(m: &ArgMatches) -> String {
    m.get_one::<String>("name").cloned().unwrap_or_default()
}

/// One request; an answer that is not 2xx is the broker's refusal, with its message.
fn ask(
    client: &AdminClient,
    method: &str,
    path: &str,
    body: &Value,
) -> Result<Value, (u8, String)> {
    match client.call(method, path, body) {
        Ok((status, v)) if (200..300).contains(&status) => Ok(v),
        Ok((status, v)) => {
            let why = v["error"]
                .as_str()
                .map_or_else(|| v.to_string(), str::to_string);
            Err((EXIT_REFUSED, format!("{status}: {why}")))
        }
        Err(
            e @ (ClientError::Token { .. }
            | ClientError::Unreachable { .. }
            | ClientError::NotHttp { .. }),
        ) => Err((EXIT_NO_ANSWER, e.to_string())),
    }
}

fn list(client: &AdminClient, as_json: bool) -> Outcome {
    let v = ask(client, "GET", "/mirrors", &Value::Null)?;
    if as_json {
        return Ok(v.to_string());
    }
    let mut rows = Vec::new();
    for m in v["mirrors"].as_array().into_iter().flatten() {
        rows.push(vec![
            cell(&m["name"]),
            cell(&m["state"]),
            cell(&m["bootstrap"]),
            topics(&m["topics"]),
            m["partitions"].as_array().map_or(0, Vec::len).to_string(),
            cell(&m["worst"]["lag_ms"]),
        ]);
    }
    for m in v["stopped"].as_array().into_iter().flatten() {
        rows.push(vec![
            cell(&m["name"]),
            cell(&m["state"]),
            cell(&m["bootstrap"]),
            topics(&m["topics"]),
            m["outcome"].as_array().map_or(0, Vec::len).to_string(),
            "-".into(),
        ]);
    }
    Ok(table(
        &[
            "NAME",
            "STATE",
            "SOURCE",
            "TOPICS",
            "PARTITIONS",
            "WORST-LAG-MS",
        ],
        &rows,
    ))
}

fn topics(v: &Value) -> String {
    v.as_array()
        .map(|a| a.iter().map(cell).collect::<Vec<_>>().join(","))
        .unwrap_or_default()
}

fn describe(client: &AdminClient, name: &str, as_json: bool) -> Outcome {
    let v = ask(client, "GET", "/mirrors", &Value::Null)?;
    let found = |key: &str| {
        v[key]
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["name"] == name))
            .cloned()
    };
    if let Some(m) = found("mirrors") {
        if as_json {
            return Ok(m.to_string());
        }
        let rows: Vec<Vec<String>> = m["partitions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let why = if p["stalled"].is_null() {
                    cell(&p["last_error"])
                } else {
                    cell(&p["stalled"])
                };
                vec![
                    cell(&p["topic"]),
                    cell(&p["partition"]),
                    cell(&p["mode"]),
                    cell(&p["source_high_watermark"]),
                    cell(&p["log_end"]),
                    cell(&p["lag"]),
                    cell(&p["lag_ms"]),
                    cell(&p["source_answer_age_ms"]),
                    why,
                ]
            })
            .collect();
        let acls = &m["acl_sync"];
        let acl_line = if acls["enabled"] == json!(false) {
            "ACLs: not synced".to_string()
        } else {
            format!(
                "ACLs ({}{}): {} here from the sync, {} at the source, {} added, {} removed; \
                 last synced at {} ms; last error {}",
                cell(&acls["scope"]),
                if acls["prune"] == json!(true) {
                    ", prune"
                } else {
                    ""
                },
                cell(&acls["held"]),
                cell(&acls["at_source"]),
                cell(&acls["added"]),
                cell(&acls["removed"]),
                cell(&acls["synced_at_ms"]),
                cell(&acls["last_error"]),
            )
        };
        return Ok(format!(
            "mirror {name} ({}) from {}\n{acl_line}\n{}",
            cell(&m["state"]),
            cell(&m["bootstrap"]),
            table(
                &[
                    "TOPIC",
                    "PARTITION",
                    "MODE",
                    "SOURCE-END",
                    "LOCAL-END",
                    "LAG",
                    "LAG-MS",
                    "ANSWER-AGE-MS",
                    "STALLED-OR-LAST-ERROR",
                ],
                &rows
            )
        ));
    }
    if let Some(m) = found("stopped") {
        if as_json {
            return Ok(m.to_string());
        }
        return Ok(format!(
            "mirror {name} (stopped) from {}\n{}",
            cell(&m["bootstrap"]),
            stop_table(&m["outcome"])
        ));
    }
    Err((EXIT_REFUSED, format!("no mirror {name}")))
}

/// A table of `items` (a JSON array of objects), one column per (header, key).
fn keyed_table(items: &Value, columns: &[(&str, &str)]) -> String {
    let rows: Vec<Vec<String>> = items
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| columns.iter().map(|(_, key)| cell(&item[*key])).collect())
        .collect();
    let headers: Vec<&str> = columns.iter().map(|(h, _)| *h).collect();
    table(&headers, &rows)
}

/// A failover's outcome per partition.
fn stop_table(outcome: &Value) -> String {
    keyed_table(
        outcome,
        &[
            ("TOPIC", "topic"),
            ("PARTITION", "partition"),
            ("LEADER-EPOCH", "leader_epoch"),
            ("LAST-MIRRORED", "last_mirrored_offset"),
            ("BARRIER", "barrier_offset"),
            ("ABORTED-PRODUCERS", "aborted_producers"),
        ],
    )
}

fn failover(client: &AdminClient, name: &str, as_json: bool) -> Outcome {
    let v = ask(
        client,
        "POST",
        &format!("/mirrors/{name}/stop"),
        &Value::Null,
    )?;
    if as_json {
        return Ok(v.to_string());
    }
    Ok(format!(
        "mirror {name} stopped: this cluster takes writes\n{}",
        stop_table(&v["stopped"])
    ))
}

/// A start's plan per partition: where it ends, where it would be truncated, what it loses.
fn plan_table(plan: &Value) -> String {
    let mut out = keyed_table(
        &plan["partitions"],
        &[
            ("TOPIC", "topic"),
            ("PARTITION", "partition"),
            ("LOCAL-END", "log_end"),
            ("TRUNCATE-TO", "truncate_to"),
            ("LOSES", "loses"),
            ("RECORDS-DROPPED", "records_dropped"),
            ("UNRELATED", "unrelated"),
        ],
    );
    for t in plan["topics"].as_array().into_iter().flatten() {
        if let Some(n) = t["create"].as_i64() {
            out.push_str(&format!(
                "\ntopic {}: created with {n} partitions",
                cell(&t["topic"])
            ));
        } else if let Some(n) = t["grow_to"].as_i64() {
            out.push_str(&format!(
                "\ntopic {}: grown to {n} partitions",
                cell(&t["topic"])
            ));
        }
    }
    for r in plan["refused_without_force"]
        .as_array()
        .into_iter()
        .flatten()
    {
        out.push_str(&format!("\nrefused without --force: {}", cell(r)));
    }
    out
}

/// `create` (`failback` false) or `failback`: the plan (a dry run) first when asked, or always
/// for a failback; then the start, unless `--dry-run`.
fn start(client: &AdminClient, m: &ArgMatches, as_json: bool, failback: bool) -> Outcome {
    let n = name(m);
    let mut body = json!({
        "name": n,
        "bootstrap": m.get_one::<String>("bootstrap").cloned().unwrap_or_default(),
        "topics": m.get_many::<String>("topics").map(|t| t.cloned().collect::<Vec<_>>()).unwrap_or_default(),
        "force": m.get_flag("force"),
    });
    for (key, value) in source_security(m) {
        body[key] = value;
    }
    for key in ["config-sync-ms", "group-sync-ms", "acl-sync-ms"] {
        if let Some(ms) = m.try_get_one::<u64>(key).ok().flatten() {
            body[key.replace('-', "_")] = json!(ms);
        }
    }
    if let Some(filters) = m.get_many::<crate::mirror::acl_sync::AclFilterSpec>("acl-filter") {
        body["acl_filters"] = json!(filters.collect::<Vec<_>>());
    }
    if m.get_flag("acl-prune") {
        body["acl_prune"] = json!(true);
    }
    let dry_run = m.get_flag("dry-run");
    let mut printed = Vec::new();
    let mut answers = json!({});
    if dry_run || failback {
        let mut ask_plan = body.clone();
        ask_plan["dry_run"] = json!(true);
        let plan = ask(client, "POST", "/mirrors", &ask_plan)?;
        printed.push(format!("the plan of {n}:\n{}", plan_table(&plan)));
        answers["plan"] = plan;
    }
    if !dry_run {
        let started = ask(client, "POST", "/mirrors", &body)?;
        printed.push(format!(
            "mirror {n} started{}",
            if failback { " (failback)" } else { "" }
        ));
        answers["started"] = started;
    }
    if as_json {
        Ok(answers.to_string())
    } else {
        Ok(printed.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_columns_and_cells_read_null_as_a_dash() {
        let t = table(
            &["A", "LONGER"],
            &[
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), cell(&Value::Null)],
            ],
        );
        assert_eq!(t, "A    LONGER\nxyz  1\nq    -");
        assert_eq!(cell(&json!("s")), "s");
        assert_eq!(cell(&json!(3)), "3");
    }

    #[test]
    fn every_subcommand_parses_and_a_missing_source_is_a_usage_error() {
        let parse = |args: &[&str]| {
            command().try_get_matches_from(std::iter::once("mirrors").chain(args.iter().copied()))
        };
        for ok in [
            &["list"][..],
            &["describe", "east", "--json"],
            &[
                "create",
                "east",
                "--bootstrap",
                "h:1",
                "--topics",
                "a,b",
                "--dry-run",
            ],
            &[
                "failback",
                "west",
                "--bootstrap",
                "h:1",
                "--topics",
                "a",
                "--admin",
                "127.0.0.1:1",
            ],
            &["failover", "east"],
            &["pause", "east"],
            &["resume", "east"],
            &["delete", "east"],
        ] {
            assert!(parse(ok).is_ok(), "{ok:?}");
        }
        let m = parse(&[
            "create",
            "east",
            "--bootstrap",
            "h:1",
            "--topics",
            "a",
            "--security-protocol",
            "SASL_SSL",
            "--sasl-mechanism",
            "SCRAM-SHA-256",
            "--sasl-username",
            "mirror",
            "--sasl-password-file",
            "/etc/pw",
            "--ssl-ca-location",
            "/etc/ca.pem",
        ])
        .unwrap();
        let (_, sub) = m.subcommand().unwrap();
        let security = source_security(sub);
        assert_eq!(security["security_protocol"], "SASL_SSL");
        assert_eq!(security["sasl_mechanism"], "SCRAM-SHA-256");
        assert_eq!(security["sasl_username"], "mirror");
        assert_eq!(security["sasl_password_file"], "/etc/pw");
        assert_eq!(security["ssl_ca_location"], "/etc/ca.pem");
        assert!(!security.contains_key("sasl_password_env"));
        // Every flag is a field the admin surface reads.
        for (flag, _, _) in SECURITY_FLAGS {
            assert!(crate::mirror::security::KEYS.contains(&flag.replace('-', "_").as_str()));
        }
        let m = parse(&["create", "east", "--bootstrap", "h:1", "--topics", "a,b"]).unwrap();
        let (_, sub) = m.subcommand().unwrap();
        let topics: Vec<&String> = sub.get_many::<String>("topics").unwrap().collect();
        assert_eq!(topics, ["a", "b"]);
        // `create east` of topic `a` from h:1, with `extra` flags.
        let create = |extra: &[&str]| {
            let head = ["create", "east", "--bootstrap", "h:1", "--topics", "a"];
            let args: Vec<&str> = head.iter().chain(extra).copied().collect();
            parse(&args)
        };
        let m = create(&[
            "--acl-filter",
            r#"{"resource_type":"GROUP","name":"app-","pattern_type":"PREFIXED"}"#,
            "--acl-filter",
            r#"{"resource_type":"TRANSACTIONAL_ID"}"#,
            "--acl-prune",
            "--acl-sync-ms",
            "0",
        ])
        .unwrap();
        let (_, sub) = m.subcommand().unwrap();
        let filters: Vec<_> = sub
            .get_many::<crate::mirror::acl_sync::AclFilterSpec>("acl-filter")
            .unwrap()
            .collect();
        assert_eq!(filters.len(), 2);
        assert_eq!(filters[0].name.as_deref(), Some("app-"));
        assert!(sub.get_flag("acl-prune"));
        for bad in [
            &[][..],
            &["create", "east", "--topics", "a"],
            &["describe"],
            &["frobnicate"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        // A filter naming no Kafka value, or a field no filter has.
        for filter in [r#"{"operation":"READ_ALL"}"#, r#"{"topic":"a"}"#] {
            assert!(create(&["--acl-filter", filter]).is_err(), "{filter}");
        }
    }
}
