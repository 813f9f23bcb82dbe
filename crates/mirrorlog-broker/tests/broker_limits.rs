//! The broker's connection limits on the wire, by Kafka's names:
//! - `max.connections.per.ip`: a connection past it is closed at once; the address's next one
//!   is served once one of its others closed;
//! - `max.connections`: a connection past it is closed at once, cleanly (the end of the stream,
//!   nothing written), until one closes;
//! - `connections.max.idle.ms`: an idle connection is closed; one with a long-poll Fetch parked
//!   longer than the idle time is in flight, not idle, and gets its answer;
//! - a long-poll Fetch whose connection closes leaves no read parked in the engine;
//! - `request.timeout.ms`: a frame begun that does not arrive whole in time, and a client that
//!   does not read its answers, are closed; a frame sent in pieces within the time is served;
//! - an open-file limit too low for the partitions is refused at start, with the figures;
//! - 10,000 idle connections are held and answered, a producer is still served, and the next
//!   connection past `max.connections` is closed cleanly;
//! - `queued.max.requests`: no more requests are served at once over all connections, pipelining
//!   producers wait for places and are all answered, and parked long-polls hold none.

mod broker_support;

use broker_support::requests::{batch, create_topic, fetch, fetch_request, http_get, produce};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestKind, ResponseKind};
use mirrorlog::format::ProducerFields;
use std::io::Read;
use std::time::{Duration, Instant};

fn api_versions(c: &mut Conn) -> i16 {
    let ResponseKind::ApiVersions(r) = c.call(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    ) else {
        panic!("not an ApiVersions answer")
    };
    r.error_code
}

/// Sends an ApiVersions and says whether its answer came within `wait` (not if the broker
/// closed the connection instead).
fn answered_within(c: &mut Conn, wait: Duration) -> bool {
    let frame = c.frame(
        ApiKey::ApiVersions,
        3,
        &RequestKind::ApiVersions(ApiVersionsRequest::default()),
    );
    c.send_raw(&frame).unwrap();
    c.stream.set_read_timeout(Some(wait)).unwrap();
    // An error is no answer in time (WouldBlock / TimedOut), or a close.
    let got = c.read_frame().is_ok();
    c.stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    got
}

#[test]
fn a_connection_past_max_connections_per_ip_is_closed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "max.connections.per.ip=2"]);
    let mut one = b.connect();
    let mut two = b.connect();
    assert_eq!(api_versions(&mut one), 0);
    assert_eq!(api_versions(&mut two), 0);
    let mut three = b.connect();
    assert!(
        three.closed(),
        "the third connection from 127.0.0.1 is closed"
    );
    drop(one);
    // The slot comes back once the broker has seen the close.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = b.connect();
        if !answered_within(&mut again, Duration::from_millis(200)) {
            assert!(Instant::now() < deadline, "no slot came back");
            continue;
        }
        break;
    }
    assert_eq!(api_versions(&mut two), 0, "the others are untouched");
}

#[test]
fn past_max_connections_a_new_connection_is_closed_cleanly_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "max.connections=2"]);
    let mut one = b.connect();
    let mut two = b.connect();
    assert_eq!(api_versions(&mut one), 0);
    assert_eq!(api_versions(&mut two), 0);
    // The third is closed at once with nothing written: the client reads the end of the
    // stream, no reset and no answer.
    let mut three = b.connect();
    let mut buf = [0u8; 1];
    assert_eq!(
        three.stream.read(&mut buf).unwrap(),
        0,
        "a clean close (FIN)"
    );
    drop(one);
    // The place comes back once the broker has seen the close.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = b.connect();
        if answered_within(&mut again, Duration::from_millis(200)) {
            break;
        }
        assert!(Instant::now() < deadline, "no place came back");
    }
    assert_eq!(api_versions(&mut two), 0, "the others are untouched");
}

#[test]
fn an_idle_connection_is_closed_but_a_parked_fetch_is_not_idle() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "connections.max.idle.ms=300"]);
    let mut idle = b.connect();
    assert_eq!(api_versions(&mut idle), 0);
    let t0 = Instant::now();
    assert!(idle.closed(), "an idle connection is closed");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    // A long-poll Fetch parked for 1.5 s (five idle periods) is answered, on the same connection.
    let mut c = b.connect();
    create_topic(&mut c, "quiet", 1, &[]);
    let t0 = Instant::now();
    let (code, high_watermark, records) = fetch(&mut c, "quiet", 0, 1500);
    assert_eq!((code, high_watermark, records.len()), (0, 0, 0));
    assert!(t0.elapsed() >= Duration::from_millis(1400), "it was parked");
    assert_eq!(api_versions(&mut c), 0, "still open after the fetch");
}

/// Reads parked in the engine now, and those let go, over every shard (`GET /shards`).
fn parked(b: &BrokerProc) -> (u64, u64) {
    let answer = http_get(b, "/shards");
    let v: serde_json::Value =
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let shards = v["shards"].as_array().unwrap();
    let sum = |k: &str| shards.iter().map(|s| s[k].as_u64().unwrap()).sum::<u64>();
    (sum("parked_reads"), sum("reads_cancelled"))
}

/// `n` connections, each with a 30-second long-poll of `topic`-0 parked in the engine.
fn park_long_polls(b: &BrokerProc, topic: &str, n: u64) -> Vec<Conn> {
    let conns: Vec<Conn> = (0..n)
        .map(|_| {
            let mut c = b.connect();
            let f = c.frame(ApiKey::Fetch, 11, &fetch_request(topic, 0, 30_000, -1));
            c.send_raw(&f).unwrap();
            c
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while parked(b).0 < n {
        assert!(Instant::now() < deadline, "parked: {:?}", parked(b));
        std::thread::sleep(Duration::from_millis(20));
    }
    conns
}

#[test]
fn long_polls_whose_connections_close_leave_no_parked_reads() {
    // A thousand clients park a 30-second long-poll each and go away: within the engine's
    // next tick (at most a second) nothing is parked for them, not 30 seconds later.
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "quiet", 1, &[]);
    let mut conns = park_long_polls(&b, "quiet", 1000);
    let deadline = Instant::now() + Duration::from_secs(20);
    let closed = Instant::now();
    conns.clear();
    while parked(&b) != (0, 1000) {
        assert!(
            Instant::now() < deadline,
            "parked, let go: {:?}",
            parked(&b)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        closed.elapsed() < Duration::from_secs(5),
        "{:?}",
        closed.elapsed()
    );
}

#[test]
fn a_frame_begun_must_arrive_whole_in_time_and_answers_must_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "request.timeout.ms=700"]);
    let frame = {
        let mut c = b.connect();
        c.frame(
            ApiKey::ApiVersions,
            3,
            &RequestKind::ApiVersions(ApiVersionsRequest::default()),
        )
    };
    // In three pieces within the time: answered.
    let mut c = b.connect();
    for piece in frame.chunks(frame.len() / 3 + 1) {
        c.send_raw(piece).unwrap();
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(
        c.read_frame().is_ok(),
        "a frame sent in pieces within the time is served"
    );
    // Half a frame, then nothing: closed once the time is up, not at the idle timeout.
    let mut slow = b.connect();
    let sent = Instant::now();
    slow.send_raw(&frame[..frame.len() / 2]).unwrap();
    assert!(
        slow.closed(),
        "a frame begun and never finished holds the connection"
    );
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(600) && waited < Duration::from_secs(10),
        "{waited:?}"
    );

    // A client that asks and never reads: once the socket's buffers are full, the answer being
    // written cannot finish in time and the connection is closed.
    let mut p = b.connect();
    create_topic(&mut p, "big", 1, &[]);
    let value = vec![7u8; 900 << 10];
    for _ in 0..10 {
        assert_eq!(
            produce(&mut p, "big", batch(ProducerFields::NONE, &[&value]), -1).0,
            0
        );
    }
    let mut greedy = b.connect();
    for _ in 0..40 {
        let f = greedy.frame(ApiKey::Fetch, 11, &fetch_request("big", 0, 0, -1));
        greedy.send_raw(&f).unwrap();
    }
    std::thread::sleep(Duration::from_secs(3));
    // What was written before the close is still readable; then the end of the stream comes,
    // well before the 40 answers (each about 1 MiB) that a patient server would send.
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    let ended = loop {
        match greedy.stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got += n,
            Err(_) => break false,
        }
    };
    assert!(ended && got < 40 << 20, "ended {ended}, read {got} bytes");
}

#[test]
fn an_open_file_limit_too_low_for_the_partitions_is_refused_at_start() {
    // 300 partitions need a descriptor each and one more for their next roll: under a limit
    // of 200 the broker refuses to start with the figures, instead of failing rolls later;
    // under 700 it starts (and warns that max.connections cannot all be served).
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "many", 300, &[]);
    drop(c);
    assert!(b.terminate().success());
    let run = |limit: &str| {
        std::process::Command::new("prlimit")
            .arg(format!("--nofile={limit}:{limit}"))
            .arg(env!("CARGO_BIN_EXE_mirrorlog-broker"))
            .args(["--data-dir", dir.path().to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("prlimit (util-linux) runs the broker")
    };
    let refused = run("200").wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("open-file limit is 200"),
        "{err}"
    );
    let mut started = run("700");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(started.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    started.kill().unwrap();
    let out = started.wait_with_output().unwrap();
    assert!(
        line.starts_with("mirrorlog-broker ready"),
        "{line}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("connections past"));
}

#[test]
fn ten_thousand_idle_connections_are_held_and_a_producer_is_still_served() {
    // Descriptors for 10,000 sockets on each side: this process takes its soft open-file limit
    // up to the hard one (any process may), and the broker inherits it.
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let hard: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4))
        .and_then(|h| h.parse().ok())
        .unwrap_or(u64::MAX);
    assert!(
        hard >= 11_000,
        "the hard open-file limit {hard} cannot hold 10,000 connections"
    );
    let raised = std::process::Command::new("prlimit")
        .args(["--pid", &std::process::id().to_string()])
        .arg(format!(
            "--nofile={}:{}",
            hard.min(1 << 20),
            hard.min(1 << 20)
        ))
        .status()
        .expect("prlimit (util-linux)");
    assert!(raised.success());
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "max.connections=10001"]);
    // The producer's connection and 10,000 idle ones: max.connections exactly.
    let mut p = b.connect();
    create_topic(&mut p, "busy", 1, &[]);
    let started = Instant::now();
    let mut idle: Vec<Conn> = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        let mut conn = b.connect();
        assert_eq!(api_versions(&mut conn), 0);
        idle.push(conn);
    }
    eprintln!(
        "10000 connections opened and answered in {:?}",
        started.elapsed()
    );
    // All held (none closed by the broker), and the producer's connection still produces and
    // fetches.
    assert_eq!(
        produce(
            &mut p,
            "busy",
            batch(ProducerFields::NONE, &[b"still served"]),
            -1
        ),
        (0, 0)
    );
    assert_eq!(fetch(&mut p, "busy", 0, 0).1, 1);
    for conn in idle.iter_mut().step_by(500) {
        assert_eq!(api_versions(conn), 0, "an idle connection was dropped");
    }
    // max.connections refuses the next one with a clean close.
    let mut next = b.connect();
    let mut buf = [0u8; 1];
    assert_eq!(
        next.stream.read(&mut buf).unwrap(),
        0,
        "a clean close (FIN)"
    );
    assert_eq!(api_versions(&mut p), 0);
}

fn requests(b: &BrokerProc) -> serde_json::Value {
    let answer = http_get(b, "/requests");
    serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap()
}

#[test]
fn queued_max_requests_bounds_requests_in_service_and_parked_fetches_hold_none() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "queued.max.requests=2"]);
    let mut c = b.connect();
    create_topic(&mut c, "q", 1, &[]);
    // Fifty long-polls park: were each to hold its place, the third would never be read.
    let polls = park_long_polls(&b, "q", 50);
    // Eight producers pipeline a hundred acks=all produces each: all are answered in order,
    // with never more than two served at once.
    let producers: Vec<_> = (0..8)
        .map(|_| {
            let mut c = b.connect();
            std::thread::spawn(move || {
                let mut frames = Vec::new();
                for _ in 0..100 {
                    let r = broker_support::requests::produce_request(
                        "q",
                        batch(ProducerFields::NONE, &[b"v"]),
                        -1,
                    );
                    frames.extend(c.frame(ApiKey::Produce, 9, &r));
                }
                c.send_raw(&frames).unwrap();
                for _ in 0..100 {
                    assert!(!c.read_frame().unwrap().is_empty());
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let (code, hw, _) = fetch(&mut c, "q", 0, 0);
    assert_eq!((code, hw), (0, 800));
    let stats = requests(&b);
    assert_eq!(stats["queued_max"], 2, "{stats}");
    assert!(stats["queued_peak"].as_u64().unwrap() <= 2, "{stats}");
    assert!(stats["waited"].as_u64().unwrap() > 0, "{stats}");
    drop(polls);
}
