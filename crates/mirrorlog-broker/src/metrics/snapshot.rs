//! What a scrape reads at the time it is made: the engine's counters per shard, groups and
//! members by state, each mirror's state and its partitions. The admin surface fills a
//! [`Snapshot`]; encoding it is a Prometheus `Collector` that writes constant metrics.

use mirrorlog::engine::ShardStats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::collections::BTreeMap;

/// One mirrored partition as `GET /mirrors` shows it.
#[derive(Debug, Clone, Default)]
pub struct MirrorPartition {
    /// The mirror's name.
    pub mirror: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Its mode here as `GET /mirrors` names it (`mirroring:SOURCE`, `paused:SOURCE`, `local`, ...).
    pub mode: String,
    /// Records behind the source's high watermark; `None` when unknown (no fresh answer).
    pub lag_records: Option<i64>,
    /// The lag in bytes, estimated from the bytes per offset fetched; `None` when unknown.
    pub lag_bytes: Option<u64>,
    /// At most how far behind the source in time its durable end is (`GET /mirrors`'
    /// `lag_ms_at_most`: the lag while answers are fresh, else a bound from the last answer's
    /// age, rising while the source is silent or the partition paused); `None` before the
    /// source's first answer.
    pub lag_ms: Option<u64>,
    /// Record bytes fetched from the source.
    pub bytes_fetched: u64,
    /// Record bytes appended here and made durable.
    pub bytes_written: u64,
    /// Errors met, by kind (a Kafka error name from the source, or `network`, `local`, ...).
    pub errors: BTreeMap<String, u64>,
    /// Whether it is stalled (not advancing, with a reason `GET /mirrors` gives).
    pub stalled: bool,
}

/// A mirror's ACL sync (`mirror/acl_sync.rs`), as a scrape reads it.
#[derive(Debug, Clone, Default)]
pub struct MirrorAcls {
    /// The mirror's name.
    pub mirror: String,
    /// Whether it syncs ACLs at all.
    pub enabled: bool,
    /// ACLs here the sync made.
    pub held: u64,
    /// When its last round synced (Unix seconds); `None` before the first.
    pub synced_at: Option<f64>,
    /// Whether its last round failed.
    pub failing: bool,
}

/// Everything a scrape reads when it is made.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Each shard's counters.
    pub shards: Vec<ShardStats>,
    /// `(group type, state) -> (groups, members)`.
    pub groups: BTreeMap<(&'static str, &'static str), (u64, u64)>,
    /// Each mirror's name and state (`running`, `paused`, `unreachable`, `not running`).
    pub mirrors: Vec<(String, String)>,
    /// Each mirrored partition.
    pub partitions: Vec<MirrorPartition>,
    /// Each mirror's ACL sync.
    pub acl_syncs: Vec<MirrorAcls>,
}

/// The states a mirror can be in; each is a series of `mirrorlog_mirror_state` (1 for the
/// one it is in).
const MIRROR_STATES: [&str; 4] = ["running", "paused", "unreachable", "not running"];

/// Bucket bounds (seconds) of the histograms made from the engine's hdrhistograms: 10 µs to
/// about 10 s, doubling.
fn bounds() -> Vec<f64> {
    let mut b = Vec::with_capacity(21);
    let mut v = 0.000_01;
    for _ in 0..21 {
        b.push(v);
        v *= 2.0;
    }
    b.push(f64::MAX);
    b
}

/// An hdrhistogram of microseconds as a Prometheus histogram: per-bucket counts at
/// [`bounds`], the sum (mean × count, to the histogram's three significant digits) and count.
fn buckets(h: &hdrhistogram::Histogram<u64>) -> (f64, u64, Vec<(f64, u64)>) {
    let bounds = bounds();
    let mut counts = vec![0u64; bounds.len()];
    for v in h.iter_recorded() {
        let secs = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e6;
        let i = bounds
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(bounds.len() - 1);
        counts[i] += v.count_at_value();
    }
    let count = h.len();
    let sum = h.mean() * count as f64 / 1e6;
    (sum, count, bounds.into_iter().zip(counts).collect())
}

type Enc<'a> = DescriptorEncoder<'a>;

fn counter<L: prometheus_client::encoding::EncodeLabelSet>(
    e: &mut Enc<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauge<L: prometheus_client::encoding::EncodeLabelSet>(
    e: &mut Enc<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn histogram(
    e: &mut Enc<'_>,
    name: &str,
    help: &str,
    series: &[(Labels, &hdrhistogram::Histogram<u64>)],
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in series {
        let (sum, count, b) = buckets(h);
        m.encode_family(labels)?
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(sum, count, &b, None)?;
    }
    Ok(())
}

type Labels = Vec<(&'static str, String)>;

fn shard(s: &ShardStats) -> Labels {
    vec![("shard", s.shard.to_string())]
}

fn part(p: &MirrorPartition) -> Labels {
    vec![
        ("mirror", p.mirror.clone()),
        ("topic", p.topic.clone()),
        ("partition", p.partition.to_string()),
    ]
}

impl Snapshot {
    fn encode_engine(&self, e: &mut Enc<'_>) -> Result<(), std::fmt::Error> {
        let per_shard =
            |f: fn(&ShardStats) -> u64| self.shards.iter().map(move |s| (shard(s), f(s)));
        counter(
            e,
            "mirrorlog_appends",
            "Appends acknowledged, per shard",
            per_shard(|s| s.appends),
        )?;
        counter(
            e,
            "mirrorlog_append_bytes",
            "Bytes of acknowledged appends, per shard",
            per_shard(|s| s.append_bytes),
        )?;
        counter(
            e,
            "mirrorlog_fdatasyncs",
            "fdatasyncs issued, per shard (journal flushes and partitions' own rounds)",
            per_shard(|s| s.fdatasyncs),
        )?;
        counter(
            e,
            "mirrorlog_journal_flushes",
            "Journal flushes (one fdatasync each), per shard",
            per_shard(|s| s.journal_flushes),
        )?;
        counter(
            e,
            "mirrorlog_journal_bytes",
            "Bytes written into the journal, per shard",
            per_shard(|s| s.journal_bytes_written),
        )?;
        counter(
            e,
            "mirrorlog_journal_checkpoint_waves",
            "Times the journal passed half full and partitions checkpointed, per shard",
            per_shard(|s| s.journal_checkpoint_waves),
        )?;
        counter(
            e,
            "mirrorlog_device_bytes_written",
            "Bytes the shard wrote to its files, per shard",
            per_shard(|s| s.device_bytes_written),
        )?;
        let flushes: Vec<_> = self
            .shards
            .iter()
            .map(|s| (shard(s), &s.journal_flush_latency_us))
            .collect();
        histogram(
            e,
            "mirrorlog_journal_flush_duration_seconds",
            "Journal flushes from their start to their fdatasync's completion, per shard",
            &flushes,
        )?;
        let appends: Vec<_> = self
            .shards
            .iter()
            .map(|s| (shard(s), &s.append_latency_us))
            .collect();
        histogram(
            e,
            "mirrorlog_append_duration_seconds",
            "Appends from their request to their acknowledgement (durable), per shard",
            &appends,
        )?;
        counter(
            e,
            "mirrorlog_cleaner_bytes_read",
            "Bytes the log cleaner read, per shard",
            per_shard(|s| s.cleaner.bytes_read),
        )?;
        counter(
            e,
            "mirrorlog_cleaner_bytes_written",
            "Bytes the log cleaner wrote, per shard",
            per_shard(|s| s.cleaner.bytes_written),
        )?;
        counter(
            e,
            "mirrorlog_cleaner_passes",
            "Cleaner passes completed, per shard",
            per_shard(|s| s.cleaner.passes),
        )?;
        gauge(
            e,
            "mirrorlog_cleaner_backlog_bytes",
            "Dirty bytes waiting for the cleaner, per shard",
            self.shards
                .iter()
                .map(|s| (shard(s), s.cleaner.backlog_bytes as f64)),
        )?;
        gauge(
            e,
            "mirrorlog_shard_queue_depth",
            "Requests waiting in a shard's queue",
            self.shards.iter().map(|s| (shard(s), s.queue_depth as f64)),
        )?;
        Ok(())
    }

    fn encode_groups(&self, e: &mut Enc<'_>) -> Result<(), std::fmt::Error> {
        let labels = |(kind, state): (&'static str, &'static str)| {
            vec![("type", kind.to_string()), ("state", state.to_string())]
        };
        gauge(
            e,
            "mirrorlog_groups",
            "Consumer groups, per group type and state",
            self.groups.iter().map(|(k, v)| (labels(*k), v.0 as f64)),
        )?;
        gauge(
            e,
            "mirrorlog_group_members",
            "Members of consumer groups, per group type and state",
            self.groups.iter().map(|(k, v)| (labels(*k), v.1 as f64)),
        )
    }

    fn encode_mirrors(&self, e: &mut Enc<'_>) -> Result<(), std::fmt::Error> {
        let states = self.mirrors.iter().flat_map(|(name, state)| {
            MIRROR_STATES.iter().map(move |s| {
                let labels: Labels = vec![("mirror", name.clone()), ("state", (*s).to_string())];
                (labels, if s == state { 1.0 } else { 0.0 })
            })
        });
        gauge(
            e,
            "mirrorlog_mirror_state",
            "A mirror's state: 1 on the series of the state it is in",
            states,
        )?;
        let ps = &self.partitions;
        // A lag in records unknown (no fresh answer from the source) is left out, so that no
        // stale number is taken for a current one; `stalled` says why. The lag in time is a
        // bound that holds then too, and rises.
        gauge(e, "mirrorlog_mirror_lag_records", "Records a mirrored partition is behind its source's high watermark (absent while unknown)", ps.iter().filter_map(|p| p.lag_records.map(|l| (part(p), l as f64))))?;
        gauge(e, "mirrorlog_mirror_lag_bytes", "Bytes a mirrored partition is behind its source's high watermark, estimated as the lag in records times the bytes per offset it fetched (absent while unknown)", ps.iter().filter_map(|p| p.lag_bytes.map(|l| (part(p), l as f64))))?;
        gauge(e, "mirrorlog_mirror_lag_seconds", "At most how far behind its source in time a mirrored partition's durable end is: the lag while the source answers, else the age of its last answer, rising (absent before the first)", ps.iter().filter_map(|p| p.lag_ms.map(|l| (part(p), l as f64 / 1000.0))))?;
        gauge(
            e,
            "mirrorlog_mirror_partition_stalled",
            "1 when a mirrored partition is not advancing (GET /mirrors says why)",
            ps.iter()
                .map(|p| (part(p), if p.stalled { 1.0 } else { 0.0 })),
        )?;
        gauge(
            e,
            "mirrorlog_mirror_partition_mirroring",
            "1 when a partition is in mirror mode here (0: paused, stopped or local)",
            ps.iter().map(|p| {
                (
                    part(p),
                    if p.mode.starts_with("mirroring:") {
                        1.0
                    } else {
                        0.0
                    },
                )
            }),
        )?;
        counter(
            e,
            "mirrorlog_mirror_bytes_fetched",
            "Record bytes fetched from the source, per mirrored partition",
            ps.iter().map(|p| (part(p), p.bytes_fetched)),
        )?;
        counter(
            e,
            "mirrorlog_mirror_bytes_written",
            "Record bytes appended here and durable, per mirrored partition",
            ps.iter().map(|p| (part(p), p.bytes_written)),
        )?;
        let errors = ps.iter().flat_map(|p| {
            p.errors.iter().map(move |(kind, n)| {
                let mut l = part(p);
                l.push(("kind", kind.clone()));
                (l, *n)
            })
        });
        counter(e, "mirrorlog_mirror_errors", "Errors a mirrored partition met, by kind: the source's Kafka error name, or network, metadata, local", errors)?;
        let syncing = || self.acl_syncs.iter().filter(|a| a.enabled);
        let mirror = |a: &MirrorAcls| -> Labels { vec![("mirror", a.mirror.clone())] };
        gauge(
            e,
            "mirrorlog_mirror_acls_synced",
            "ACLs here that a mirror's ACL sync made (those it revokes when the source does)",
            syncing().map(|a| (mirror(a), a.held as f64)),
        )?;
        gauge(
            e,
            "mirrorlog_mirror_acl_sync_timestamp_seconds",
            "When a mirror's ACL sync last synced, in Unix seconds (absent before its first)",
            syncing().filter_map(|a| Some((mirror(a), a.synced_at?))),
        )?;
        gauge(
            e,
            "mirrorlog_mirror_acl_sync_failing",
            "1 when a mirror's last ACL sync round failed (GET /mirrors says why)",
            syncing().map(|a| (mirror(a), if a.failing { 1.0 } else { 0.0 })),
        )
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.encode_engine(&mut e)?;
        self.encode_groups(&mut e)?;
        self.encode_mirrors(&mut e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hdrhistogram_becomes_cumulative_prometheus_buckets() {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 100_000_000, 3).unwrap();
        h.record(5).unwrap(); // 5 µs: the first bucket (10 µs)
        h.record(15).unwrap(); // 15 µs: the 20 µs bucket
        h.record(15).unwrap();
        h.record(3_000_000).unwrap(); // 3 s
        let (sum, count, b) = buckets(&h);
        assert_eq!(count, 4);
        assert!((sum - 3.000_035).abs() < 0.01, "{sum}");
        assert_eq!(b[0], (0.000_01, 1));
        assert_eq!(b[1].1, 2);
        let at = b.iter().position(|(le, _)| *le >= 3.0).unwrap();
        assert_eq!(b[at].1, 1);
        assert_eq!(b.iter().map(|(_, c)| c).sum::<u64>(), 4);
        assert_eq!(b.last().unwrap().0, f64::MAX);
    }
}
