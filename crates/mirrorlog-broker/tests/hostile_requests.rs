//! Requests a hostile client sends, each answered as Kafka answers it, and a restart after each
//! that brings the broker back with what it acknowledged (one test per case, raw frames):
//!
//! - strings over Kafka's 32,767 bytes (group ids, protocol names, instance ids, member ids;
//!   one- and two-byte characters) are refused as requests that do not parse, before anything
//!   is stored: the connection closes, and the broker restarts;
//! - a gzip batch claiming `i32::MAX` records over an empty payload is decompressed and refused,
//!   the log end does not move, no segment is made for it;
//! - a transactional batch without a transactional id is `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`
//!   for every partition, and the last stable offset does not move;
//! - a name or partition asked 200,000 times is one entry and one read (Metadata, Fetch);
//! - Metadata auto-creating `__consumer_offsets` makes it as the broker does, 50 compacted
//!   partitions;
//! - out of file descriptors with an admin connection pending, the admin listener does not spin;
//! - each fuzzer-found case is kept here by name.

mod broker_support;

use broker_support::members::{s, subscription};
use broker_support::requests::{
    batch, create_topic, fetch_request, group, http_get, name, produce, produce_request,
};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, JoinGroupRequest, MetadataRequest, RequestKind,
    ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::format::{BatchBuilder, BatchOptions, Compression, ProducerFields, RecordSpec};
use std::time::{Duration, Instant};

/// Stops the broker (SIGTERM), starts it again on its directory and ports, and checks it
/// serves: the restart every case ends with.
fn restart(b: BrokerProc) -> BrokerProc {
    let (dir, kafka, admin) = (b.data_dir.clone(), b.kafka.clone(), b.admin.clone());
    let status = b.terminate();
    assert!(status.success(), "stopped cleanly: {status}");
    let b = BrokerProc::start_on(&dir, &kafka, &admin, &[]);
    let health = http_get(&b, "/health");
    assert!(health.contains("\"ok\": true"), "{health}");
    b
}

/// Sends `body` and says whether the broker refused it the way Kafka refuses a request that
/// does not parse: it closes the connection without an answer.
fn refused_as_unparsable(b: &BrokerProc, key: ApiKey, version: i16, body: RequestKind) -> bool {
    let mut c = b.connect();
    let frame = c.frame(key, version, &body);
    c.send_raw(&frame).unwrap();
    c.read_frame().is_err()
}

fn long(unit: &str, bytes: usize) -> StrBytes {
    let n = bytes / unit.len() + 1;
    StrBytes::from_string(unit.repeat(n))
}

#[test]
fn an_offset_commit_with_a_group_id_over_32767_bytes_is_refused_and_the_broker_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "t", 1, &[]);
    // A commit the broker acknowledged, which the restart must keep.
    let kept = broker_support::requests::commit(&mut c, 8, "kept", -1, &[("t", 0, 3, "")]);
    assert_eq!(kept, vec![0]);
    for (unit, bytes) in [("é", 33_000), ("a", 40_000)] {
        let mut r = broker_support::requests::commit_request("x", -1, &[("t", 0, 5, "")]);
        if let RequestKind::OffsetCommit(r) = &mut r {
            r.group_id = kafka_protocol::messages::GroupId(long(unit, bytes));
        }
        assert!(
            refused_as_unparsable(&b, ApiKey::OffsetCommit, 8, r),
            "a {bytes}-byte group id of {unit:?} was answered"
        );
    }
    // One at the limit is served (Kafka's parser takes 32,767 bytes).
    let at_limit = "a".repeat(32_767);
    let codes = broker_support::requests::commit(&mut c, 8, &at_limit, -1, &[("t", 0, 7, "")]);
    assert_eq!(codes, vec![0]);
    let b = restart(b);
    let mut c = b.connect();
    let got = broker_support::requests::fetch_offsets(&mut c, "kept", "t", 1);
    assert_eq!(got[0].0, 3);
    let got = broker_support::requests::fetch_offsets(&mut c, &at_limit, "t", 1);
    assert_eq!(got[0].0, 7, "the commit at the limit survived the restart");
}

#[test]
fn a_join_with_a_protocol_name_or_instance_id_over_32767_bytes_is_refused_and_the_broker_restarts()
{
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "group.initial.rebalance.delay.ms=0"]);
    let join = |protocol: StrBytes, instance: Option<StrBytes>| {
        let mut r = JoinGroupRequest::default();
        r.group_id = group("g");
        r.session_timeout_ms = 10_000;
        r.rebalance_timeout_ms = 10_000;
        r.member_id = s("");
        r.group_instance_id = instance;
        r.protocol_type = s("consumer");
        let mut p = JoinGroupRequestProtocol::default();
        p.name = protocol;
        p.metadata = subscription(&["t"]);
        r.protocols.push(p);
        RequestKind::JoinGroup(r)
    };
    assert!(refused_as_unparsable(
        &b,
        ApiKey::JoinGroup,
        6,
        join(long("é", 40_000), None)
    ));
    assert!(refused_as_unparsable(
        &b,
        ApiKey::JoinGroup,
        6,
        join(s("range"), Some(long("a", 40_000)))
    ));
    let _ = restart(b);
}

#[test]
fn a_consumer_heartbeat_with_a_member_id_over_32767_bytes_is_refused_and_the_broker_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = group("cg");
    r.member_id = long("é", 33_000);
    r.member_epoch = 0;
    r.rebalance_timeout_ms = 10_000;
    r.subscribed_topic_names = Some(vec![name("t")]);
    assert!(refused_as_unparsable(
        &b,
        ApiKey::ConsumerGroupHeartbeat,
        0,
        RequestKind::ConsumerGroupHeartbeat(r)
    ));
    let _ = restart(b);
}

/// A gzip batch whose header claims `i32::MAX` records (and the matching last offset delta)
/// over an empty payload.
fn lying_gzip_batch() -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions::default());
    b.push(RecordSpec {
        timestamp: 1,
        key: None,
        value: Some(b"v"),
        headers: &[],
    });
    let mut batch = b.build_compressed(Compression::Gzip).unwrap();
    batch.truncate(61);
    batch[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    batch[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    batch[8..12].copy_from_slice(&(61i32 - 12).to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

fn log_end(c: &mut Conn, topic: &str) -> i64 {
    let (code, high_watermark, _) = broker_support::requests::fetch(c, topic, 0, 0);
    assert_eq!(code, 0);
    high_watermark
}

#[test]
fn a_compressed_batch_lying_about_its_record_count_is_refused_and_the_log_end_stays() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "z", 1, &[]);
    let (code, _) = produce(&mut c, "z", batch(ProducerFields::NONE, &[b"a"]), -1);
    assert_eq!(code, 0);
    let segments = || {
        std::fs::read_dir(dir.path().join("log/z-0"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "log"))
            })
            .count()
    };
    let before = segments();
    for _ in 0..20 {
        let (code, _) = produce(&mut c, "z", lying_gzip_batch(), -1);
        // CORRUPT_MESSAGE (2) or INVALID_RECORD (87), as Kafka's LogValidator answers.
        assert!(matches!(code, 2 | 87), "answered {code}");
    }
    assert_eq!(log_end(&mut c, "z"), 1, "the log end did not move");
    assert_eq!(segments(), before, "no segment was made");
    let b = restart(b);
    let mut c = b.connect();
    assert_eq!(log_end(&mut c, "z"), 1);
}

#[test]
fn a_transactional_batch_without_a_transactional_id_is_refused_for_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "tx", 2, &[]);
    let txn_batch = {
        let mut bb = BatchBuilder::new(BatchOptions {
            producer: ProducerFields {
                producer_id: 42,
                producer_epoch: 0,
                base_sequence: 0,
            },
            transactional: true,
            ..BatchOptions::default()
        });
        bb.push(RecordSpec {
            timestamp: 1,
            key: None,
            value: Some(b"x"),
            headers: &[],
        });
        bytes::Bytes::from(bb.build())
    };
    let mut r = produce_request("tx", txn_batch.to_vec(), -1);
    if let RequestKind::Produce(r) = &mut r {
        assert!(r.transactional_id.is_none());
        let mut second = r.topic_data[0].partition_data[0].clone();
        second.index = 1;
        // The second partition's batch is not transactional: refused all the same.
        second.records = Some(bytes::Bytes::from(batch(ProducerFields::NONE, &[b"y"])));
        r.topic_data[0].partition_data.push(second);
    }
    let ResponseKind::Produce(resp) = c.call(ApiKey::Produce, 9, r) else {
        panic!()
    };
    let codes: Vec<i16> = resp.responses[0]
        .partition_responses
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![53, 53]);
    // Nothing pinned: a read_committed consumer reads a later record.
    let (code, _) = produce(&mut c, "tx", batch(ProducerFields::NONE, &[b"z"]), -1);
    assert_eq!(code, 0);
    let b = restart(b);
    let mut c = b.connect();
    let mut r = fetch_request("tx", 0, 0, -1);
    if let RequestKind::Fetch(r) = &mut r {
        r.isolation_level = 1;
    }
    let ResponseKind::Fetch(resp) = c.call(ApiKey::Fetch, 11, r) else {
        panic!()
    };
    let p = &resp.responses[0].partitions[0];
    assert_eq!((p.error_code, p.last_stable_offset), (0, 1));
}

#[test]
fn a_metadata_naming_one_topic_200000_times_answers_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "m", 1, &[]);
    let mut r = MetadataRequest::default();
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name("m"));
    r.topics = Some(vec![t; 200_000]);
    let started = Instant::now();
    let ResponseKind::Metadata(resp) = c.call(ApiKey::Metadata, 12, RequestKind::Metadata(r))
    else {
        panic!()
    };
    assert_eq!(resp.topics.len(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let _ = restart(b);
}

#[test]
fn a_fetch_naming_one_idle_partition_200000_times_parks_one_read() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "f", 1, &[]);
    let mut r = fetch_request("f", 0, 2_000, -1);
    if let RequestKind::Fetch(r) = &mut r {
        let p = r.topics[0].partitions[0].clone();
        r.topics[0].partitions = vec![p; 200_000];
    }
    let frame = c.frame(ApiKey::Fetch, 11, &r);
    c.send_raw(&frame).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let shards = http_get(&b, "/shards");
    let v: serde_json::Value =
        serde_json::from_str(shards.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let parked: u64 = v["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["parked_reads"].as_u64().unwrap())
        .sum();
    assert!(parked <= 1, "{parked} reads parked");
    let answer = c.read_frame().unwrap();
    assert!(answer.len() < 4096, "a {}-byte answer", answer.len());
    let _ = restart(b);
}

#[test]
fn metadata_auto_creating_consumer_offsets_makes_the_brokers_internal_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    let mut r = MetadataRequest::default();
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name("__consumer_offsets"));
    r.topics = Some(vec![t]);
    r.allow_auto_topic_creation = true;
    let ResponseKind::Metadata(resp) = c.call(ApiKey::Metadata, 9, RequestKind::Metadata(r)) else {
        panic!()
    };
    let t = &resp.topics[0];
    assert_eq!(t.error_code, 0);
    assert!(t.is_internal);
    assert_eq!(t.partitions.len(), 50);
    let config =
        std::fs::read_to_string(dir.path().join("log/__consumer_offsets-0/partition.config"))
            .unwrap();
    assert!(config.contains("cleanup.policy=compact"), "{config}");
    // A client may not create it itself.
    let (code, message) = broker_support::requests::create_topic_answer(
        &mut c,
        "__consumer_offsets",
        1,
        1,
        &[],
        false,
    );
    assert_eq!(code, 42, "{message:?}");
    let _ = restart(b);
}

/// The broker's CPU time so far, in clock ticks (`/proc/PID/stat` utime + stime).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A broker process whose open-file limit is `limit` (set by the shell that execs it): the
/// process, its Kafka address and its admin address.
fn start_with_fd_limit(dir: &std::path::Path, limit: u32) -> (std::process::Child, String, String) {
    let script = format!(
        "ulimit -n {limit} && exec {} \"$@\"",
        env!("CARGO_BIN_EXE_mirrorlog-broker")
    );
    let mut child = std::process::Command::new("sh")
        .args(["-c", &script, "sh"])
        .arg("--data-dir")
        .arg(dir)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--shards",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(k))
            .unwrap_or_else(|| panic!("no {k} in {line:?}"))
            .to_string()
    };
    let (kafka, admin) = (field("kafka="), field("admin="));
    (child, kafka, admin)
}

#[test]
fn partitions_past_the_open_file_limit_are_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, kafka, _) = start_with_fd_limit(dir.path(), 256);
    let mut c = Conn::new(&kafka);
    let (code, message) =
        broker_support::requests::create_topic_answer(&mut c, "wide", 500, 1, &[], false);
    assert_eq!(code, 44, "POLICY_VIOLATION: {message:?}");
    assert!(message.unwrap_or_default().contains("open-file limit"));
    // Nothing was made: no entry, no partition directory.
    assert!(!dir.path().join("broker/topics/wide.json").exists());
    assert!(!dir.path().join("log/wide-0").exists());
    create_topic(&mut c, "narrow", 4, &[]);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn out_of_file_descriptors_with_an_admin_connection_pending_the_listener_does_not_spin() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, kafka, admin) = start_with_fd_limit(dir.path(), 192);
    // Connections until the broker's descriptors run out (its accepts fail with EMFILE).
    // Past the broker's descriptors and its backlog a connect waits: each one is bounded.
    let kafka_addr: std::net::SocketAddr = kafka.parse().unwrap();
    let mut held = Vec::new();
    for _ in 0..400 {
        match std::net::TcpStream::connect_timeout(&kafka_addr, Duration::from_millis(200)) {
            Ok(s) => held.push(s),
            Err(_) => break,
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let admin_addr: std::net::SocketAddr = admin.parse().unwrap();
    let pending =
        std::net::TcpStream::connect_timeout(&admin_addr, Duration::from_secs(2)).unwrap();
    let pid = child.id();
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - before;
    // Clock ticks are 1/100 s: a spinning loop burns ~200 of them in 2 s.
    assert!(used < 40, "the broker burned {used} ticks in 2 s");
    drop(pending);
    drop(held);
    let _ = child.kill();
    let _ = child.wait();
}

/// The broker's peak resident set, in MiB (`VmHWM`: a spike freed since still counts).
fn peak_rss_mib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// Found by the wire fuzzer (seed 1031378132717, case 1357): an AddPartitionsToTxn naming
/// 100,000 partitions of one topic with a 32 KiB name made the broker copy the name for each
/// entry and hold 3 GB for a 432 KB request. A topic's name is now kept once per request, in
/// every API that lists partitions under topics.
#[test]
fn partitions_listed_under_a_32_kib_topic_name_cost_no_copy_of_it_each() {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TransactionalId};
    let dir = tempfile::tempdir().unwrap();
    let mut b = BrokerProc::start(dir.path(), &[]);
    let long_name = broker_support::requests::name(&"t".repeat(32_767));
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = long_name.clone();
    t.partitions = (0..100_000).collect();
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = TransactionalId(s("txn"));
    r.v3_and_below_producer_id = ProducerId(1);
    r.v3_and_below_topics = vec![t];
    let mut c = b.connect();
    let ResponseKind::AddPartitionsToTxn(_) = c.call(
        ApiKey::AddPartitionsToTxn,
        0,
        RequestKind::AddPartitionsToTxn(r),
    ) else {
        panic!()
    };
    // Fetch and ListOffsets the same way.
    let mut f = fetch_request("x", 0, 0, -1);
    if let RequestKind::Fetch(f) = &mut f {
        f.topics[0].topic = long_name;
        let p = f.topics[0].partitions[0].clone();
        f.topics[0].partitions = (0..100_000)
            .map(|i| {
                let mut p = p.clone();
                p.partition = i;
                p
            })
            .collect();
    }
    let ResponseKind::Fetch(_) = c.call(ApiKey::Fetch, 11, f) else {
        panic!()
    };
    let peak = peak_rss_mib(b.child.id());
    assert!(peak < 400, "the broker held {peak} MiB at its peak");
    assert!(b.running());
    let _ = restart(b);
}

/// Found by the wire fuzzer's long run: an acks=0 Produce failing on every partition it names
/// logged one line per partition, each with the topic's name: 10^5 partitions under a
/// 32,767-byte name wrote 3 GB of log from one 400 KB request. Now one line per request, the
/// name cut to a valid name's length; the connection is closed as before.
#[test]
fn an_acks_0_produce_failing_on_many_partitions_logs_one_short_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("broker.log");
    let b = BrokerProc::start_logging_to(&dir.path().join("data"), &[], &log);
    let mut c = b.connect();
    let RequestKind::Produce(mut r) = produce_request("x", Vec::new(), 0) else {
        panic!()
    };
    let topic = &mut r.topic_data[0];
    topic.name = name(&"x".repeat(32_767));
    let one = topic.partition_data[0].clone();
    topic.partition_data = (0..2_000)
        .map(|i| {
            let mut p = one.clone();
            p.index = i;
            p.records = None;
            p
        })
        .collect();
    let frame = c.frame(ApiKey::Produce, 9, &RequestKind::Produce(r));
    c.send_raw(&frame).unwrap();
    assert!(c.closed(), "a failed acks=0 produce closes the connection");
    // The broker is up and answers; its log holds the one line.
    let mut c = b.connect();
    create_topic(&mut c, "after", 1, &[]);
    assert!(b.terminate().success());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("acks=0 produce failed"))
        .collect();
    assert_eq!(lines.len(), 1, "{} lines", lines.len());
    assert!(lines[0].contains("failures=2000"), "{}", lines[0]);
    assert!(lines[0].len() < 1_000, "{} characters", lines[0].len());
    assert!(text.len() < 1 << 20, "{} bytes of log", text.len());
}
