//! `GET /metrics`, scraped while producing, consuming and mirroring, parsed with the Prometheus
//! project's own parsers (`prometheus_client`'s OpenMetrics and text parsers, through
//! `testdata/interop/broker/parse_metrics.py`):
//! - the counters move as the work done says: requests per API, record bytes in per topic
//!   (exactly the bytes produced), bytes out, the journal's flushes and fdatasyncs, the
//!   mirror's bytes fetched and written (exactly the source's bytes in), connections open;
//! - groups and members by protocol and state (a classic group and a KIP-848 one);
//! - a paused mirror's lag in time rises, and falls once it resumes;
//! - a source killed: within 30 s the mirror is `unreachable`, its lag in records absent, the
//!   partition stalled, network errors counted, and the lag in seconds rising;
//! - `metrics.require.token=true` gates the read behind the admin token.

mod broker_support;

use broker_support::members::join;
use broker_support::requests::{
    admin_token, batch, fetch, http_get, http_post, mirrored, produce, Mirrored,
};
use broker_support::BrokerProc;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use mirrorlog::format::ProducerFields;
use serde_json::Value;
use std::time::{Duration, Instant};

/// One sample of a scrape.
struct Sample {
    name: String,
    labels: serde_json::Map<String, Value>,
    value: f64,
}

struct Scrape(Vec<Sample>);

impl Scrape {
    /// The sum of the samples named `name` whose labels include `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    /// Whether any sample is named `name` with `labels`.
    fn has(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.matching(name, labels).next().is_some()
    }

    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.0.iter().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).and_then(Value::as_str) == Some(*v))
        })
    }
}

fn scrape(b: &BrokerProc) -> Scrape {
    let answer = http_get(b, "/metrics");
    let (head, text) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics.txt");
    std::fs::write(&file, text).unwrap();
    let out = broker_support::run_script("parse_metrics.py", &[file.to_str().unwrap()], &[]);
    Scrape(
        out.lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                Sample {
                    name: v["name"].as_str().unwrap().to_string(),
                    labels: v["labels"].as_object().unwrap().clone(),
                    value: v["value"].as_f64().unwrap(),
                }
            })
            .collect(),
    )
}

fn str_bytes(v: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(v.to_string())
}

const PART: [(&str, &str); 3] = [("mirror", "src"), ("topic", "m"), ("partition", "0")];

fn lag_seconds(dst: &BrokerProc) -> f64 {
    let s = scrape(dst);
    assert!(
        s.has("mirrorlog_mirror_lag_seconds", &PART),
        "no lag series"
    );
    s.sum("mirrorlog_mirror_lag_seconds", &PART)
}

#[test]
fn counters_move_with_produce_consume_and_mirroring_and_a_paused_mirror_lag_rises() {
    // Source and destination, `m` mirrored and caught up (1 record).
    let pair: Mirrored = mirrored("m");
    let (src, dst) = (&pair.src, &pair.dst);
    let before = scrape(src);
    let mut s = src.connect();
    let mut produced = 0u64;
    for i in 0..20u32 {
        let value = vec![b'v'; 100 + i as usize];
        let b = batch(ProducerFields::NONE, &[&value]);
        produced += b.len() as u64;
        assert_eq!(produce(&mut s, "m", b, -1).0, 0);
    }
    // A consumer at the destination reads all 21 records once mirrored.
    let mut d = dst.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fetch(&mut d, "m", 20, 100).1 != 21 {
        assert!(Instant::now() < deadline, "the mirror did not catch up");
    }
    let (_, _, read) = fetch(&mut d, "m", 0, 100);
    assert!(!read.is_empty());
    // A consumer group at the destination, one member waiting for its assignment.
    let mut g = dst.connect();
    let first = join(&mut g, "metrics-group", "", None, 30_000, "range");
    let joined = join(
        &mut g,
        "metrics-group",
        &first.member_id,
        None,
        30_000,
        "range",
    );
    assert_eq!(joined.error, 0);
    // And a group of the consumer protocol (KIP-848), one member. FindCoordinator first: it
    // makes __consumer_offsets, where the group's records go.
    let mut f = kafka_protocol::messages::FindCoordinatorRequest::default();
    f.key_type = 0;
    f.coordinator_keys = vec![str_bytes("metrics-kip848")];
    g.call(ApiKey::FindCoordinator, 4, RequestKind::FindCoordinator(f));
    let mut r = kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default();
    r.group_id = kafka_protocol::messages::GroupId(str_bytes("metrics-kip848"));
    r.member_id = str_bytes("member-1");
    r.member_epoch = 0;
    r.rebalance_timeout_ms = 30_000;
    r.subscribed_topic_names = Some(vec![kafka_protocol::messages::TopicName(str_bytes("m"))]);
    r.topic_partitions = Some(Vec::new());
    let ResponseKind::ConsumerGroupHeartbeat(hb) = g.call(
        ApiKey::ConsumerGroupHeartbeat,
        1,
        RequestKind::ConsumerGroupHeartbeat(r),
    ) else {
        panic!("not a ConsumerGroupHeartbeat answer")
    };
    assert_eq!(hb.error_code, 0);

    let after = scrape(src);
    let produce_api = [("api", "Produce"), ("version", "9")];
    assert!(
        after.sum("mirrorlog_requests_total", &produce_api)
            - before.sum("mirrorlog_requests_total", &produce_api)
            >= 20.0
    );
    assert!(after.sum("mirrorlog_request_duration_seconds_count", &produce_api) >= 20.0);
    let topic = [("topic", "m")];
    assert_eq!(
        after.sum("mirrorlog_topic_bytes_in_total", &topic)
            - before.sum("mirrorlog_topic_bytes_in_total", &topic),
        produced as f64,
        "bytes in are the record bytes produced"
    );
    // The mirror's fetches took them out of the source.
    assert!(after.sum("mirrorlog_topic_bytes_out_total", &topic) >= produced as f64);
    for counter in [
        "mirrorlog_journal_flushes_total",
        "mirrorlog_fdatasyncs_total",
    ] {
        assert!(
            after.sum(counter, &[]) > before.sum(counter, &[]),
            "{counter} moved"
        );
    }
    assert!(after.sum("mirrorlog_journal_flush_duration_seconds_count", &[]) > 0.0);
    assert!(after.has("mirrorlog_cleaner_backlog_bytes", &[("shard", "0")]));
    // The mirror's connection and ours, on the PLAINTEXT listener.
    assert!(after.sum("mirrorlog_connections", &[("listener", "PLAINTEXT")]) >= 2.0);

    let d1 = scrape(dst);
    // Everything the source took in for `m` was fetched and written here: the first record
    // (before `before`) and the 20.
    let src_in = after.sum("mirrorlog_topic_bytes_in_total", &topic);
    assert_eq!(
        d1.sum("mirrorlog_mirror_bytes_written_total", &PART),
        src_in
    );
    assert_eq!(
        d1.sum("mirrorlog_mirror_bytes_fetched_total", &PART),
        src_in
    );
    assert_eq!(
        d1.sum(
            "mirrorlog_mirror_state",
            &[("mirror", "src"), ("state", "running")]
        ),
        1.0
    );
    assert_eq!(d1.sum("mirrorlog_mirror_partition_mirroring", &PART), 1.0);
    assert!(d1.has("mirrorlog_mirror_lag_records", &PART));
    assert_eq!(d1.sum("mirrorlog_mirror_lag_records", &PART), 0.0);
    assert!(d1.has("mirrorlog_mirror_lag_bytes", &PART));
    assert_eq!(d1.sum("mirrorlog_mirror_lag_bytes", &PART), 0.0);
    let waiting = [("type", "classic"), ("state", "CompletingRebalance")];
    assert_eq!(d1.sum("mirrorlog_groups", &waiting), 1.0);
    assert_eq!(d1.sum("mirrorlog_group_members", &waiting), 1.0);
    // The consumer-protocol group, whatever state its first heartbeat left it in.
    assert_eq!(d1.sum("mirrorlog_groups", &[("type", "consumer")]), 1.0);
    assert_eq!(
        d1.sum("mirrorlog_group_members", &[("type", "consumer")]),
        1.0
    );
    // The consumer's reads of `m` here, the last from its first offset.
    assert!(d1.sum("mirrorlog_topic_bytes_out_total", &topic) >= read.len() as f64);

    // Paused: the lag in time rises while the source takes more.
    assert!(http_post(dst, "/mirrors/src/pause", "").starts_with("HTTP/1.1 200"));
    assert_eq!(
        produce(&mut s, "m", batch(ProducerFields::NONE, &[b"x"]), -1).0,
        0
    );
    let paused = scrape(dst);
    assert_eq!(
        paused.sum(
            "mirrorlog_mirror_state",
            &[("mirror", "src"), ("state", "paused")]
        ),
        1.0
    );
    // A pause restarts the fetcher; its counters carry over (a Prometheus counter never
    // goes back), and the lag in records is unknown while nothing is fetched.
    for counter in [
        "mirrorlog_mirror_bytes_written_total",
        "mirrorlog_mirror_bytes_fetched_total",
    ] {
        assert_eq!(
            paused.sum(counter, &PART),
            d1.sum(counter, &PART),
            "{counter}"
        );
    }
    let early = lag_seconds(dst);
    std::thread::sleep(Duration::from_millis(1_500));
    let later = lag_seconds(dst);
    assert!(
        later >= early + 1.0,
        "the lag rises while paused: {early} then {later}"
    );

    // Resumed: it falls back (the new record mirrored, the answers fresh again).
    assert!(http_post(dst, "/mirrors/src/resume", "").starts_with("HTTP/1.1 200"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Its bound from the last answer before the pause until the restarted fetcher's
        // first answer.
        let s = scrape(dst);
        let now = s.sum("mirrorlog_mirror_lag_seconds", &PART);
        if s.has("mirrorlog_mirror_lag_seconds", &PART) && now < 1.0 && now < later {
            assert_eq!(s.sum("mirrorlog_mirror_lag_records", &PART), 0.0);
            break;
        }
        assert!(Instant::now() < deadline, "the lag did not fall: {now}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let Mirrored { src, dst, .. } = pair;
    assert!(src.terminate().success());
    assert!(dst.terminate().success());
}

#[test]
fn metrics_can_be_made_to_need_the_admin_token() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "metrics.require.token=true"]);
    let get = |token: Option<&str>| {
        let mut s = std::net::TcpStream::connect(&b.admin).unwrap();
        let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nhost: {}\r\n{auth}content-length: 0\r\n\r\n",
            b.admin
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    assert!(get(None).starts_with("HTTP/1.1 401"), "{}", get(None));
    assert!(get(Some("wrong")).starts_with("HTTP/1.1 401"));
    let token = admin_token(&b);
    assert!(get(Some(&token)).starts_with("HTTP/1.1 200"));
    // Other reads stay open.
    assert!(http_get(&b, "/health").starts_with("HTTP/1.1 200"));
    assert!(b.terminate().success());
}

#[test]
fn a_source_killed_shows_unreachable_and_a_rising_lag_in_seconds_within_30_s() {
    let mut pair: Mirrored = mirrored("m");
    pair.src.child.kill().expect("SIGKILL");
    pair.src.child.wait().expect("the source's exit");
    let dst = &pair.dst;
    let unreachable = [("mirror", "src"), ("state", "unreachable")];
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        let s = scrape(dst);
        if s.sum("mirrorlog_mirror_state", &unreachable) == 1.0 {
            break s;
        }
        assert!(Instant::now() < deadline, "not unreachable within 30 s");
        std::thread::sleep(Duration::from_millis(500));
    };
    // Past 10 s without an answer: the lag in records is unknown (absent), the partition
    // stalled, the fetch errors counted as network errors, and the lag in time rises.
    assert!(!first.has("mirrorlog_mirror_lag_records", &PART));
    assert!(!first.has("mirrorlog_mirror_lag_bytes", &PART));
    assert_eq!(first.sum("mirrorlog_mirror_partition_stalled", &PART), 1.0);
    let network = [("mirror", "src"), ("kind", "network")];
    assert!(first.sum("mirrorlog_mirror_errors_total", &network) > 0.0);
    let before = first.sum("mirrorlog_mirror_lag_seconds", &PART);
    assert!(before >= 10.0, "{before}");
    std::thread::sleep(Duration::from_millis(1_200));
    let after = lag_seconds(dst);
    assert!(after >= before + 1.0, "rising: {before} then {after}");
}
