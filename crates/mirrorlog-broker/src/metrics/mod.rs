//! `GET /metrics`: the broker's metrics in Prometheus' text exposition (OpenMetrics), through
//! the Prometheus project's Rust client.
//!
//! Two kinds of metric, both named as Prometheus names them (units in the name, `_total` on
//! counters; docs/metrics.md lists them):
//! - counted where they happen ([`Metrics`]): requests per API and version with their latency,
//!   bytes in and out per topic, connections per listener. Each is an atomic add or one
//!   histogram bucket, behind a label lookup of small keys;
//! - read when scraped ([`snapshot::Snapshot`]): the engine's counters (journal flushes and
//!   their latency, fdatasyncs, the cleaner's bytes and backlog), groups and members by state,
//!   and each mirror's partitions (state, lag in records and in time, bytes fetched and
//!   written, errors by kind). The admin surface gathers them, then [`render`] encodes both.
//!
//! `metrics.enabled=false` turns the counted kind off (the scrape then shows only what is
//! read when scraped): the `broker` workload's bench measures what counting costs.

pub mod snapshot;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;
use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A request's labels: its API (by name) and version.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct RequestLabels {
    /// The API key.
    pub api_key: i16,
    /// The request's version.
    pub version: i16,
}

impl EncodeLabelSet for RequestLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        let name = ApiKey::try_from(self.api_key)
            .map_or_else(|()| format!("api_{}", self.api_key), |k| format!("{k:?}"));
        [("api", name), ("version", self.version.to_string())].encode(encoder)
    }
}

/// A topic's label. The name is the request's own bytes (shared, not copied), so counting a
/// topic's bytes allocates nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct TopicLabel(pub StrBytes);

impl EncodeLabelSet for TopicLabel {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        [("topic", self.0.as_str())].encode(encoder)
    }
}

/// A listener's label (its name, `PLAINTEXT`, `SASL_SSL`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct ListenerLabel(pub String);

impl EncodeLabelSet for ListenerLabel {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        [("listener", self.0.as_str())].encode(encoder)
    }
}

/// The metrics counted where they happen.
#[derive(Debug, Clone)]
pub struct Metrics {
    enabled: bool,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Family<RequestLabels, Histogram>,
    bytes_in: Family<TopicLabel, Counter>,
    bytes_out: Family<TopicLabel, Counter>,
    connections: Family<ListenerLabel, Gauge>,
    connections_accepted: Family<ListenerLabel, Counter>,
}

fn request_histogram() -> Histogram {
    // 50 µs .. about 26 s, doubling.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

impl Metrics {
    /// Counting on (`enabled`) or off.
    pub fn new(enabled: bool) -> Self {
        Metrics {
            enabled,
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(request_histogram),
            bytes_in: Family::default(),
            bytes_out: Family::default(),
            connections: Family::default(),
            connections_accepted: Family::default(),
        }
    }

    /// Whether counting is on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// A request of `api_key` at `version` arrived on the connection whose handles `last`
    /// holds: it is counted, and the histogram its latency goes to is answered (`None` with
    /// counting off). A connection sending one API and version after another (a producer's
    /// Produce, a consumer's Fetch) finds its handles in `last` and looks up no label.
    pub fn request(
        &self,
        last: &mut RequestHandles,
        api_key: i16,
        version: i16,
    ) -> Option<Histogram> {
        if !self.enabled {
            return None;
        }
        let hit = last
            .0
            .as_ref()
            .is_some_and(|(k, v, _, _)| *k == api_key && *v == version);
        if !hit {
            let labels = RequestLabels { api_key, version };
            last.0 = Some((
                api_key,
                version,
                self.requests.get_or_create(&labels).clone(),
                self.request_seconds.get_or_create(&labels).clone(),
            ));
        }
        let (_, _, counter, histogram) = last.0.as_ref()?;
        counter.inc();
        Some(histogram.clone())
    }

    /// `bytes` of records produced to `topic` were appended.
    pub fn bytes_in(&self, topic: &StrBytes, bytes: u64) {
        if self.enabled && bytes > 0 {
            self.bytes_in
                .get_or_create(&TopicLabel(topic.clone()))
                .inc_by(bytes);
        }
    }

    /// `bytes` of records of `topic` were sent to a consumer or follower.
    pub fn bytes_out(&self, topic: &StrBytes, bytes: u64) {
        if self.enabled && bytes > 0 {
            self.bytes_out
                .get_or_create(&TopicLabel(topic.clone()))
                .inc_by(bytes);
        }
    }

    /// A connection of `listener` opened; the guard counts it closed when dropped.
    pub fn connection(&self, listener: &str) -> ConnectionGuard {
        if !self.enabled {
            return ConnectionGuard(None);
        }
        let label = ListenerLabel(listener.to_string());
        self.connections_accepted.get_or_create(&label).inc();
        let gauge = self.connections.get_or_create(&label).clone();
        gauge.inc();
        ConnectionGuard(Some(gauge))
    }

    fn register(&self, r: &mut Registry) {
        r.register(
            "mirrorlog_requests",
            "Kafka requests received, per API and version",
            self.requests.clone(),
        );
        r.register(
            "mirrorlog_request_duration_seconds",
            "Kafka requests from their arrival to their answer, per API and version",
            self.request_seconds.clone(),
        );
        r.register(
            "mirrorlog_topic_bytes_in",
            "Record bytes produced to a topic and appended (a mirror's are under mirrorlog_mirror_bytes_written_total)",
            self.bytes_in.clone(),
        );
        r.register(
            "mirrorlog_topic_bytes_out",
            "Record bytes of a topic sent in Fetch answers",
            self.bytes_out.clone(),
        );
        r.register(
            "mirrorlog_connections",
            "Kafka connections open now, per listener",
            self.connections.clone(),
        );
        r.register(
            "mirrorlog_connections_accepted",
            "Kafka connections accepted, per listener",
            self.connections_accepted.clone(),
        );
    }
}

/// A connection's handles for the API and version of its last request (see
/// [`Metrics::request`]).
#[derive(Debug, Default)]
pub struct RequestHandles(Option<(i16, i16, Counter, Histogram)>);

/// Observes a request's latency: from `arrived` until now, into `histogram` (counting on).
pub fn observe_latency(histogram: Option<&Histogram>, arrived: std::time::Instant) {
    if let Some(h) = histogram {
        h.observe(arrived.elapsed().as_secs_f64());
    }
}

/// Counts a connection closed when dropped.
#[derive(Debug)]
pub struct ConnectionGuard(Option<Gauge>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        if let Some(g) = &self.0 {
            g.dec();
        }
    }
}

/// The exposition of `metrics` and of `snapshot`, in Prometheus' text format (OpenMetrics,
/// ending with `# EOF`).
///
/// # Errors
/// Only a formatting error of the client's encoder (it writes into a `String`).
pub fn render(metrics: &Metrics, snapshot: snapshot::Snapshot) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    registry.register_collector(Box::new(snapshot));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connections_handles_count_each_request_under_its_own_labels() {
        let m = Metrics::new(true);
        let mut last = RequestHandles::default();
        let t0 = std::time::Instant::now();
        for (key, version) in [(0, 9), (0, 9), (1, 12), (0, 9)] {
            let h = m.request(&mut last, key, version);
            observe_latency(h.as_ref(), t0);
        }
        let text = render(&m, snapshot::Snapshot::default()).unwrap();
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix} missing:\n{text}"))
                .to_string()
        };
        assert!(line(r#"mirrorlog_requests_total{api="Produce",version="9"}"#).ends_with(" 3"));
        assert!(line(r#"mirrorlog_requests_total{api="Fetch",version="12"}"#).ends_with(" 1"));
        assert!(
            line(r#"mirrorlog_request_duration_seconds_count{api="Produce",version="9"}"#)
                .ends_with(" 3")
        );
        // Off: nothing counted, no histogram handed out.
        let off = Metrics::new(false);
        assert!(off.request(&mut RequestHandles::default(), 0, 9).is_none());
        let text = render(&off, snapshot::Snapshot::default()).unwrap();
        assert!(!text.contains("mirrorlog_requests_total{"), "{text}");
    }
}
