//! The report: machine facts, the human table, `--json` (schema `mirrorlog-bench/2`, in
//! `docs/bench-json.md`) and the goals; the `--svg` report is `svg.rs`.

use crate::args::Args;
use crate::measure::{Outcome, Side};
use mirrorlog::internals::io::{self, FileCaching};
use serde_json::{json as j, Value};
use std::fmt::Write as _;
use std::path::Path;

pub(crate) fn machine_facts(dir: &Path, caching: FileCaching) -> Vec<(String, String)> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    // The type of the longest mount point above the data directory (`stat -f` cannot tell
    // ext4 from ext2).
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let fs = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, at, kind) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(at).then(|| (at.len(), kind.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown".to_string(), |(_, kind)| kind);
    vec![
        ("cores".into(), io::available_cores().to_string()),
        ("shards".into(), io::available_cores().to_string()),
        ("kernel".into(), kernel.trim().to_string()),
        ("filesystem".into(), fs),
        (
            "o_direct".into(),
            match caching {
                FileCaching::Direct => "on".into(),
                FileCaching::PageCache => {
                    "off (--page-cache: not comparable with O_DIRECT runs)".into()
                }
            },
        ),
    ]
}

pub(crate) fn table(outcomes: &[Outcome], facts: &[(String, String)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "machine: {}",
        facts
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for o in outcomes {
        let _ = writeln!(out, "\n{} ({})", o.workload, o.notes.join("; "));
        let _ = writeln!(
            out,
            "  {:<22} {:>12} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6}",
            "side",
            o.unit,
            if o.unit == "MB/s" { "ops/s" } else { "MB/s" },
            "p50 us",
            "p90 us",
            "p99 us",
            "p99.9 us",
            "max us",
            "ratio",
            "errors"
        );
        let ours = &o.sides[0];
        for s in &o.sides {
            let figure = headline(o, s);
            let _ = writeln!(
                out,
                "  {:<22} {:>12.1} {:>10.1} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6}",
                s.name,
                figure,
                if o.unit == "MB/s" {
                    s.ops_per_sec()
                } else {
                    s.mb_per_sec()
                },
                s.q(0.5),
                s.q(0.9),
                s.q(0.99),
                s.q(0.999),
                s.latency_us.max(),
                if std::ptr::eq(s, ours) || o.workload == "failover" || figure <= 0.0 {
                    String::from("-")
                } else {
                    format!("{:.2}", headline(o, ours) / figure.max(1e-9))
                },
                s.errors
            );
            if let Some(e) = &s.first_error {
                let _ = writeln!(out, "    first error: {e}");
            }
        }
        let mut steps: Vec<_> = o.steps.iter().collect();
        steps.sort_by(|a, b| {
            (a.side.as_str(), a.offered_per_sec)
                .partial_cmp(&(b.side.as_str(), b.offered_per_sec))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for st in steps {
            let _ = writeln!(
                out,
                "  open loop {:<16} offered {:>9.0}/s achieved {:>9.0}/s p50 {:>8} p99 {:>8} p99.9 {:>8} us errors {}",
                st.side,
                st.offered_per_sec,
                st.achieved_per_sec,
                st.latency_us.value_at_quantile(0.5),
                st.latency_us.value_at_quantile(0.99),
                st.latency_us.value_at_quantile(0.999),
                st.errors
            );
        }
        for f in &o.figures {
            let _ = writeln!(out, "  {}: {:.2} {}", f.name, f.value, f.unit);
        }
        for g in goals(o) {
            let parts: Vec<String> = g
                .parts
                .iter()
                .map(|p| {
                    format!(
                        "{} {} {:.2}: measured {:.2} ({})",
                        p.what,
                        p.comparison,
                        p.target,
                        p.measured,
                        if p.met() { "ok" } else { "no" }
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "  goal: {} — {}{}",
                parts.join(" AND "),
                if g.met() { "met" } else { "NOT MET" },
                if g.errors > 0 {
                    format!(" ({} errors: the figures are not trusted)", g.errors)
                } else {
                    String::new()
                }
            );
        }
    }
    out.push_str(
        "\nratio = mirrorlog's figure / the side's figure (same run, sides alternating order in rounds)\n",
    );
    out
}

/// The workload's headline figure of `s`, in its unit.
pub(crate) fn headline(o: &Outcome, s: &Side) -> f64 {
    if o.unit == "MB/s" {
        s.mb_per_sec()
    } else {
        s.ops_per_sec()
    }
}

fn histogram_json(h: &hdrhistogram::Histogram<u64>) -> Value {
    j!({
        "p50": h.value_at_quantile(0.5), "p90": h.value_at_quantile(0.9),
        "p99": h.value_at_quantile(0.99), "p999": h.value_at_quantile(0.999), "max": h.max()
    })
}

pub(crate) fn json(outcomes: &[Outcome], facts: &[(String, String)], a: &Args) -> String {
    let machine: serde_json::Map<String, Value> = facts
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let workloads: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            j!({
                "workload": o.workload,
                "unit": o.unit,
                "notes": o.notes,
                "goals": goals(o).iter().map(|g| j!({
                    "met": g.met(),
                    "errors": g.errors,
                    "parts": g.parts.iter().map(|p| j!({
                        "what": p.what, "comparison": p.comparison, "target": p.target,
                        "measured": p.measured, "met": p.met()
                    })).collect::<Vec<_>>()
                })).collect::<Vec<_>>(),
                "sides": o.sides.iter().map(|s| j!({
                    "name": s.name, "ops": s.ops, "bytes": s.bytes, "seconds": s.secs,
                    "ops_per_sec": s.ops_per_sec(), "mb_per_sec": s.mb_per_sec(),
                    "errors": s.errors, "first_error": s.first_error,
                    "fdatasyncs": s.fdatasyncs,
                    "latency_us": histogram_json(&s.latency_us)
                })).collect::<Vec<_>>(),
                "figures": o.figures.iter().map(|f| j!({
                    "name": f.name, "value": f.value, "unit": f.unit
                })).collect::<Vec<_>>(),
                "open_loop": o.steps.iter().map(|st| j!({
                    "side": st.side, "offered_per_sec": st.offered_per_sec,
                    "achieved_per_sec": st.achieved_per_sec, "errors": st.errors,
                    "latency_us": histogram_json(&st.latency_us)
                })).collect::<Vec<_>>()
            })
        })
        .collect();
    let doc = j!({
        "schema": "mirrorlog-bench/2",
        "machine": machine,
        "config": {
            "seconds": a.seconds, "partitions": a.partitions, "callers": a.callers,
            "recovery_mib": a.recovery_mib, "producers": a.producers,
            "segment_mib": a.segment_mib, "o_direct": a.caching == FileCaching::Direct,
            "keep_going": a.keep_going, "wide_partitions": a.wide_partitions,
            "restart_gib": a.restart_gib,
            "compaction_mib": a.compaction_mib
        },
        "errors": outcomes.iter().flat_map(|o| &o.sides).map(|s| s.errors).sum::<u64>(),
        "workloads": workloads
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

/// What a goal part's figure is measured in, so a chart draws it only on an axis of that
/// unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Axis {
    /// A ratio of mirrorlog's headline figure to a side's: on the throughput chart, at
    /// `target` × that side's figure.
    Headline,
    /// A ratio of mirrorlog's p99 to a side's: on the latency chart, at `target` × that
    /// side's p99.
    P99,
    /// A figure in a unit of its own (KiB, a ratio of open times): printed, not drawn.
    Own,
}

/// One part of a goal.
pub(crate) struct Part {
    pub(crate) what: &'static str,
    pub(crate) comparison: &'static str,
    pub(crate) target: f64,
    pub(crate) measured: f64,
    pub(crate) axis: Axis,
}

impl Part {
    pub(crate) fn met(&self) -> bool {
        match self.comparison {
            ">=" => self.measured >= self.target,
            _ => self.measured <= self.target,
        }
    }
}

/// The figure every appending workload reports: the engine's bytes written ÷ bytes appended.
pub(crate) const WRITE_AMPLIFICATION: &str = "write amplification (bytes written / appended)";

/// broker-mirror's figures that its goal reads.
/// broker-mirror: added when `mirror-wide` ran in the same run.
pub(crate) const TO_WIDE: &str = "wide MB/s ratio to mirror-wide's engine MB/s";
/// The ratio of the wide side to the narrow one.
pub(crate) const TO_NARROW: &str = "wide MB/s ratio to narrow MB/s";
/// The RPO p99 of the wide side, the goal's figure.
pub(crate) const RPO_P99: &str = "wide: RPO p99";
/// The partitions not byte-identical, both counts together.
pub(crate) const MISMATCHED: &str = "partitions not byte-identical";

/// A goal the issues set for a workload: met only when every part is, and no side of the
/// workload had an error (a run with failed calls proves nothing).
pub(crate) struct Goal {
    pub(crate) parts: Vec<Part>,
    pub(crate) errors: u64,
}

impl Goal {
    pub(crate) fn met(&self) -> bool {
        self.errors == 0 && !self.parts.is_empty() && self.parts.iter().all(Part::met)
    }
}

/// The goals of the workload `o`, from its sides by name; a part whose side did not run is
/// left out (and a goal with no part is not reported).
pub(crate) fn goals(o: &Outcome) -> Vec<Goal> {
    let side = |name: &str| o.sides.iter().find(|s| s.name == name);
    let ours = &o.sides[0];
    let over = |name: &str| {
        side(name).map(|s| (headline(o, ours) / headline(o, s).max(1e-9), Axis::Headline))
    };
    let p99_over = |name: &str| {
        side(name).map(|s| (ours.q(0.99) as f64 / (s.q(0.99) as f64).max(1.0), Axis::P99))
    };
    let figure = |name: &str| {
        o.figures
            .iter()
            .find(|f| f.name == name)
            .map(|f| (f.value, Axis::Own))
    };
    let part = |what, comparison, target, measured: Option<(f64, Axis)>| {
        measured.map(|(measured, axis)| Part {
            what,
            comparison,
            target,
            measured,
            axis,
        })
    };
    let compound = |parts: Vec<Option<Part>>| Goal {
        parts: parts.into_iter().flatten().collect(),
        errors: o.sides.iter().map(|s| s.errors).sum(),
    };
    // The ratio of side `a`'s headline to side `b`'s.
    let between = |a: &str, b: &str| {
        side(a)
            .zip(side(b))
            .map(|(a, b)| (headline(o, a) / headline(o, b).max(1e-9), Axis::Headline))
    };
    let goals = match o.workload {
        "mirror-ingest" => vec![
            compound(vec![
                part("MB/s ratio to raw-odirect", ">=", 0.90, over("raw-odirect")),
                part("MB/s ratio to buffered", ">=", 1.5, over("buffered")),
            ]),
            compound(vec![part(
                "write amplification of 1 MiB appends",
                "<=",
                1.1,
                figure(WRITE_AMPLIFICATION),
            )]),
            compound(vec![part(
                "mirrorlog-link MB/s ratio to raw-odirect",
                ">=",
                0.90,
                between("mirrorlog-link", "raw-odirect"),
            )]),
        ],
        "mirror-wide" => vec![compound(vec![part(
            "MB/s ratio to raw-sequential",
            ">=",
            0.90,
            over("raw-sequential"),
        )])],
        "tail-read" => vec![compound(vec![
            part(
                "consumer p99 ratio to the page cache's",
                "<=",
                2.0,
                p99_over("page-cache"),
            ),
            part(
                "device reads at the tail",
                "<=",
                0.0,
                figure("device reads at the tail"),
            ),
        ])],
        "broker" => vec![compound(vec![part(
            "MB/s ratio to the engine API",
            ">=",
            0.80,
            over("engine API"),
        )])],
        "broker-mirror" => {
            vec![compound(vec![
                part(
                    "wide MB/s ratio to narrow (16 partitions)",
                    ">=",
                    0.8,
                    figure(TO_NARROW),
                ),
                part(
                    "wide MB/s ratio to mirror-wide's engine",
                    ">=",
                    0.8,
                    figure(TO_WIDE),
                ),
                part("wide RPO p99 ms at half speed", "<=", 50.0, figure(RPO_P99)),
                part(
                    "partitions not byte-identical",
                    "<=",
                    0.0,
                    figure(MISMATCHED),
                ),
            ])]
        }
        "groups" => vec![compound(vec![part(
            "OffsetCommit p99 ratio to a Produce of the same size",
            "<=",
            2.0,
            p99_over("Produce (same size)"),
        )])],
        "catch-up" => vec![
            compound(vec![
                part(
                    "MB/s ratio to the raw reader",
                    ">=",
                    0.90,
                    over("raw reader"),
                ),
                part(
                    "producer p99 with / without the reader",
                    "<=",
                    1.5,
                    figure("producer p99 with / without the reader"),
                ),
            ]),
            compound(vec![part(
                "mirrorlog-link MB/s ratio to the raw reader",
                ">=",
                0.90,
                between("mirrorlog-link", "raw reader"),
            )]),
        ],
        "produce" => vec![compound(vec![
            part(
                "appends/s ratio to raw-odirect",
                ">=",
                1.0,
                over("raw-odirect"),
            ),
            part(
                "p99 ratio to raw-odirect's",
                "<=",
                1.2,
                p99_over("raw-odirect"),
            ),
        ])],
        "hot-partitions" => vec![compound(vec![
            part(
                "appends/s ratio to kafka-style",
                ">=",
                10.0,
                over("kafka-style"),
            ),
            part(
                "appends/s ratio to batcher-style",
                ">=",
                1.0,
                over("batcher-style"),
            ),
            part(
                "p99 ratio to kafka-style's",
                "<=",
                1.0,
                p99_over("kafka-style"),
            ),
        ])],
        "partitions" => {
            let narrow = o.sides.get(1).map(|s| s.name.as_str()).unwrap_or("");
            vec![compound(vec![
                part(
                    "appends/s ratio to the 16-partition run",
                    ">=",
                    0.8,
                    over(narrow),
                ),
                part(
                    "p99 ratio to the 16-partition run's",
                    "<=",
                    2.0,
                    p99_over(narrow),
                ),
                part(
                    "resident KiB per idle partition",
                    "<=",
                    64.0,
                    figure("resident memory per partition, idle after load"),
                ),
                part(
                    "allocated KiB per empty partition (one step: 32768)",
                    "<=",
                    32768.0,
                    figure("disk allocated per partition, empty"),
                ),
                part(
                    "unclean open / clean open",
                    "<=",
                    2.0,
                    figure("unclean open / clean open"),
                ),
            ])]
        }
        "restart" => vec![compound(vec![part(
            "larger / smaller clean open time",
            "<=",
            1.5,
            figure("larger / smaller open time"),
        )])],
        "compaction" => vec![
            compound(vec![part(
                "MB/s ratio to the raw two-pass cleaner",
                ">=",
                0.8,
                over("raw two-pass"),
            )]),
            compound(vec![part(
                "producer p99 beside the cleaner / alone",
                "<=",
                1.5,
                figure("producer p99 beside the cleaner / alone"),
            )]),
            compound(vec![part(
                "dedupe bytes per key",
                "<=",
                24.0,
                figure("dedupe bytes per key"),
            )]),
        ],
        "recovery" => vec![compound(vec![part(
            "MB/s ratio to the raw reader",
            ">=",
            0.90,
            over("raw reader"),
        )])],
        "producer-state" => vec![compound(vec![part(
            "batches/s ratio to hashmap-psm (foldhash)",
            ">=",
            2.0,
            over("hashmap-psm"),
        )])],
        _ => Vec::new(),
    };
    goals.into_iter().filter(|g| !g.parts.is_empty()).collect()
}
