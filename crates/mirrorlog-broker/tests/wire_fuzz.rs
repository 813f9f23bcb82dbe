//! The structured wire fuzzer: valid requests of every API and version the broker serves, built
//! with the `kafka-protocol` crate, with their fields set to the edges (strings of 32,767 and
//! 32,768 bytes of one- and two-byte characters, counts of 0, 1, many and duplicates, negative
//! and extreme integers, names that exist and ids that do not, record batches whose headers lie).
//! Each field of each message is reached through the broker's own list of them
//! (`mirrorlog_broker::net::fields`, which a unit test holds to the crate's).
//!
//! It checks what must hold whatever a client sends: the broker stays up, its memory stays
//! under a bound, and after the run a restart brings back every record and committed offset it
//! acknowledged (canaries produced and committed between the fuzzed requests, on names the
//! fuzzer does not use).
//!
//! Replayable: `MIRRORLOG_SEED=N` replays a run; `MIRRORLOG_FUZZ_CASES=N` sets its length
//! (CI runs [`CASES_DEFAULT`]; the longer run is `scripts/wire-fuzz.sh`). A defect it finds is
//! fixed and kept as a named test (`tests/hostile_requests.rs`).

mod broker_support;

use broker_support::requests::{batch, commit, create_topic, fetch_offsets, produce};
use broker_support::{BrokerProc, Conn};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::{Encodable, StrBytes};
use mirrorlog::format::{BatchBuilder, BatchOptions, Compression, ProducerFields, RecordSpec};
use mirrorlog_broker::net::fields::{self, Slot};
use std::io::Read;
use std::time::Duration;

/// Cases a CI run sends.
const CASES_DEFAULT: u64 = 1500;
/// The most memory the broker may hold at any check (resident set), in MiB.
const RSS_MIB_MAX: u64 = 512;
/// The largest request the fuzzer sends (below the broker's `socket.request.max.bytes`).
const FRAME_BYTES_MAX: usize = 16 << 20;
/// The most elements a fuzzed list gets (10^5, as the structured edges ask).
const LIST_LEN_MAX: usize = 100_000;
/// Cases between two canaries (a produced record and a committed offset).
const CANARY_EVERY: u64 = 50;

/// xorshift64*: small, replayable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// The edge strings: lengths at Kafka's limit and one past it, in one- and two-byte
/// characters, names that exist and names that do not.
fn edge_string(rng: &mut Rng) -> String {
    match rng.below(12) {
        0 => String::new(),
        1 => "a".repeat(32_767),
        2 => "a".repeat(32_768),
        3 => format!("{}a", "é".repeat(16_383)),
        4 => "é".repeat(16_384),
        5 => "fuzz".into(),
        6 => "fuzzg".into(),
        7 => "__consumer_offsets".into(),
        8 => "é".repeat(1 + rng.below(40) as usize),
        9 => format!("t{}", rng.below(1000)),
        10 => "x".repeat(250),
        _ => "fuzz-member".into(),
    }
}

fn edge_int(rng: &mut Rng, bits: u32) -> i64 {
    let max = if bits >= 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    match rng.below(9) {
        0 => 0,
        1 => -1,
        2 => 1,
        3 => max,
        4 => -max - 1,
        5 => max - 1,
        6 => rng.below(10) as i64,
        7 => -(rng.below(10) as i64) - 2,
        _ => rng.next() as i64,
    }
}

/// Record batches whose headers tell the truth or lie: a valid one, an empty gzip payload
/// claiming `i32::MAX` records, a count that disagrees, a transactional one, garbage.
fn edge_records(rng: &mut Rng) -> Bytes {
    let values: Vec<Vec<u8>> = (0..1 + rng.below(3))
        .map(|i| vec![b'v'; i as usize])
        .collect();
    let valid = |compression: Compression, transactional: bool| {
        let mut b = BatchBuilder::new(BatchOptions {
            transactional,
            producer: if transactional {
                ProducerFields {
                    producer_id: 7,
                    producer_epoch: 0,
                    base_sequence: 0,
                }
            } else {
                ProducerFields::NONE
            },
            ..BatchOptions::default()
        });
        for v in &values {
            b.push(RecordSpec {
                timestamp: 1,
                key: Some(b"k"),
                value: Some(v),
                headers: &[],
            });
        }
        b.build_compressed(compression).expect("compressible")
    };
    let mut out = match rng.below(6) {
        0 => valid(Compression::None, false),
        1 => valid(Compression::Gzip, false),
        2 => valid(Compression::None, true),
        3 => {
            // A compressed batch claiming i32::MAX records over an empty payload.
            let mut b = valid(Compression::Gzip, false);
            b.truncate(61);
            lie(&mut b, 23, i32::MAX - 1);
            lie(&mut b, 57, i32::MAX);
            b
        }
        4 => {
            let mut b = valid(Compression::None, false);
            lie(&mut b, 57, 1 + rng.below(100) as i32);
            b
        }
        _ => (0..rng.below(200)).map(|_| rng.next() as u8).collect(),
    };
    if rng.chance(4) {
        out.extend_from_slice(&out.clone());
    }
    Bytes::from(out)
}

/// Writes `value` at `at` of a batch and fixes its length and CRC, as a liar would.
fn lie(batch: &mut [u8], at: usize, value: i32) {
    batch[at..at + 4].copy_from_slice(&value.to_be_bytes());
    let len = i32::try_from(batch.len() - 12).unwrap();
    batch[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Sets one field to an edge value (and a list's elements, recursively, down to `depth`).
fn mutate(name: &str, slot: Slot<'_>, rng: &mut Rng, depth: u32, budget: &mut usize) {
    match slot {
        Slot::Str(s) => *s = StrBytes::from_string(edge_string(rng)),
        Slot::Int(i) => {
            let bits = i.bits();
            i.set(edge_int(rng, bits));
        }
        Slot::Bool(b) => *b = rng.chance(2),
        Slot::Uuid(u) => {
            *u = match rng.below(3) {
                0 => uuid::Uuid::nil(),
                1 => uuid::Uuid::from_u128(u128::from(rng.next())),
                _ => uuid::Uuid::max(),
            }
        }
        Slot::Bytes(b) => {
            *b = if name == "records" {
                edge_records(rng)
            } else {
                (0..rng.below(64)).map(|_| rng.next() as u8).collect()
            };
        }
        Slot::Nullable(n) => {
            if rng.chance(3) {
                n.set_null();
            } else {
                mutate(name, n.present(), rng, depth, budget);
            }
        }
        Slot::List(l) => {
            let n = match rng.below(6) {
                0 => 0,
                1 => 1,
                2 => 2 + rng.below(5) as usize,
                3 | 4 => 1 + rng.below(3) as usize,
                // Many: 10^5.
                _ => LIST_LEN_MAX,
            };
            let small = n.min(4);
            l.resize(small);
            if depth > 0 {
                for i in 0..l.len() {
                    if let Some(slot) = l.element(i) {
                        mutate(name, slot, rng, depth - 1, budget);
                    }
                }
            }
            // Duplicates: the first element repeated, up to `n` (the 10^5 case). One list of a
            // request goes large at most (its elements hold no large list then), so the
            // request's size stays within the budget.
            if n > small {
                let many = if *budget == FRAME_BYTES_MAX {
                    n
                } else {
                    small.max(n.min(8))
                };
                *budget = 0;
                l.repeat_first(many);
            }
        }
        Slot::Struct(s) => {
            for (name, slot) in s.slots() {
                if rng.chance(2) {
                    mutate(name, slot, rng, depth, budget);
                }
            }
        }
        Slot::Tagged(_) => {}
    }
}

/// A request of `key` at `version` with fields at the edges, encoded (without its size
/// prefix); `None` when nothing of it encodes at that version.
fn fuzzed_frame(key: ApiKey, version: i16, rng: &mut Rng, correlation_id: i32) -> Option<Vec<u8>> {
    let mut body = fields::default_body(key)?;
    let count = fields::body_fields(&mut body)?.slots().len();
    let mut budget = FRAME_BYTES_MAX;
    // Field by field: a change that does not encode at this version (a field the version does
    // not have) is taken back.
    for k in 0..count {
        if !rng.chance(2) {
            continue;
        }
        let mut candidate = body.clone();
        if let Some((name, slot)) = fields::body_fields(&mut candidate)?
            .slots()
            .into_iter()
            .nth(k)
        {
            mutate(name, slot, rng, 2, &mut budget);
        }
        if encode(&candidate, version).is_some_and(|b| b.len() <= FRAME_BYTES_MAX) {
            body = candidate;
        }
    }
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("wire-fuzz")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .ok()?;
    buf.extend_from_slice(&encode(&body, version)?);
    let mut frame = i32::try_from(buf.len()).ok()?.to_be_bytes().to_vec();
    frame.extend_from_slice(&buf);
    Some(frame)
}

fn encode(body: &RequestKind, version: i16) -> Option<BytesMut> {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version).ok()?;
    Some(buf)
}

/// The broker's peak resident set so far, in MiB (`VmHWM`: a spike freed since still counts).
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// How long an answer is waited for; a request that parks (a long-poll Fetch, a JoinGroup
/// waiting for its rebalance) has its connection closed after it, which lets it go.
const ANSWER_WAIT: Duration = Duration::from_millis(500);

/// Sends `frame` and reads the answer, if one comes (a refused request closes the connection).
fn send(c: &mut Option<Conn>, addr: &str, frame: &[u8]) {
    let conn = c.get_or_insert_with(|| Conn::new(addr));
    conn.stream.set_read_timeout(Some(ANSWER_WAIT)).unwrap();
    if conn.send_raw(frame).is_err() {
        *c = None;
        return;
    }
    let mut size = [0u8; 4];
    if conn.stream.read_exact(&mut size).is_err() {
        *c = None;
        return;
    }
    let n = usize::try_from(i32::from_be_bytes(size)).unwrap_or(0);
    let mut rest = vec![0u8; n];
    if conn.stream.read_exact(&mut rest).is_err() {
        *c = None;
    }
}

#[test]
fn every_api_with_fields_at_the_edges_leaves_the_broker_up_bounded_and_durable() {
    let seed = std::env::var("MIRRORLOG_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0x00f0_22ed_5eed);
    let cases = std::env::var("MIRRORLOG_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(CASES_DEFAULT);
    eprintln!("wire_fuzz: seed {seed}, {cases} cases (replay with MIRRORLOG_SEED={seed})");
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().unwrap();
    // Quick idle closes and a short request timeout keep a stuck case from stalling the run;
    // the fuzzer sends ApiVersions-less requests (no SASL, no ACLs): every API is served.
    let flags = [
        "--set",
        "group.initial.rebalance.delay.ms=0",
        "--shards",
        "1",
    ];
    let mut broker = BrokerProc::start(dir.path(), &flags);
    let mut c = broker.connect();
    create_topic(&mut c, "canary", 1, &[]);
    create_topic(&mut c, "fuzz", 2, &[]);
    let apis: Vec<(ApiKey, i16, i16)> = mirrorlog_broker::net::wire::SUPPORTED
        .iter()
        .filter_map(|(k, _, _)| {
            mirrorlog_broker::net::wire::supported(*k).map(|(lo, hi)| (*k, lo, hi))
        })
        .collect();
    let mut acked_records = 0usize;
    let mut committed = 0i64;
    let mut conn: Option<Conn> = None;
    let mut sent = std::collections::BTreeMap::<(i16, i16), u64>::new();
    let mut rss_peak = 0;
    for case in 0..cases {
        let (key, lo, hi) = apis[rng.below(apis.len() as u64) as usize];
        let version = lo + i16::try_from(rng.below(u64::from((hi - lo) as u16) + 1)).unwrap();
        // SASL's own APIs outside a login are answered ILLEGAL_SASL_STATE; fuzzed anyway.
        let t0 = std::time::Instant::now();
        if let Some(frame) = fuzzed_frame(key, version, &mut rng, case as i32) {
            let t1 = t0.elapsed();
            if let Some(dir) = std::env::var_os("MIRRORLOG_FUZZ_DUMP") {
                let _ = std::fs::write(
                    std::path::Path::new(&dir).join(format!("case-{case}.bin")),
                    &frame,
                );
            }
            send(&mut conn, &broker.kafka, &frame);
            if std::env::var_os("MIRRORLOG_FUZZ_TRACE").is_some() {
                eprintln!(
                    "case {case}: {key:?} v{version} {} bytes, built in {t1:?}, answered in {:?}, broker {} MiB",
                    frame.len(),
                    t0.elapsed() - t1,
                    rss_mib(broker.child.id())
                );
            }
            *sent.entry((key as i16, version)).or_default() += 1;
        }
        if case % CANARY_EVERY == 0 {
            assert!(
                broker.running(),
                "the broker stopped at case {case} (seed {seed})"
            );
            let rss = rss_mib(broker.child.id());
            rss_peak = rss_peak.max(rss);
            assert!(
                rss <= RSS_MIB_MAX,
                "the broker's peak resident set reached {rss} MiB by case {case} (seed {seed})"
            );
            let mut canary = Conn::new(&broker.kafka);
            let value = format!("canary-{case}");
            let (code, _) = produce(
                &mut canary,
                "canary",
                batch(ProducerFields::NONE, &[value.as_bytes()]),
                -1,
            );
            assert_eq!(code, 0, "canary produce at case {case} (seed {seed})");
            acked_records += 1;
            committed = case as i64;
            let codes = commit(
                &mut canary,
                8,
                "canary-group",
                -1,
                &[("canary", 0, committed, "")],
            );
            assert_eq!(codes, vec![0], "canary commit at case {case} (seed {seed})");
        }
    }
    assert!(broker.running(), "the broker stopped (seed {seed})");
    // Every served API was sent, at versions across its range.
    let apis_sent: std::collections::BTreeSet<i16> = sent.keys().map(|(k, _)| *k).collect();
    eprintln!(
        "wire_fuzz: {} (API, version) pairs over {} APIs; resident set peak {rss_peak} MiB",
        sent.len(),
        apis_sent.len()
    );
    if cases >= CASES_DEFAULT {
        assert_eq!(apis_sent.len(), apis.len(), "an API was never sent");
    }
    // A restart after everything the fuzzer sent comes back with every acknowledged record and
    // committed offset.
    let (kafka, admin) = (broker.kafka.clone(), broker.admin.clone());
    let status = broker.terminate();
    assert!(
        status.success(),
        "the broker did not stop cleanly: {status}"
    );
    broker = BrokerProc::start_on(dir.path(), &kafka, &admin, &flags);
    let mut c = broker.connect();
    let mut seen = 0usize;
    let mut next = 0i64;
    loop {
        let (code, _, records) = broker_support::requests::fetch(&mut c, "canary", next, 0);
        assert_eq!(code, 0);
        let batches: Vec<_> = mirrorlog::format::frames(&records).collect();
        if batches.is_empty() {
            break;
        }
        for f in &batches {
            seen += f.header.records_count as usize;
            next = f.header.last_offset().0 + 1;
        }
    }
    assert_eq!(
        seen, acked_records,
        "acknowledged canaries after the restart"
    );
    let offsets = fetch_offsets(&mut c, "canary-group", "canary", 1);
    assert_eq!(
        offsets[0].0, committed,
        "the committed canary offset after the restart"
    );
}
