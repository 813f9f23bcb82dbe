//! The report: machine facts, the human table, `--json` (schema `mirrorlog-bench/1`, in
//! `docs/bench-json.md`) and the `--svg` latency CDF.

use crate::measure::{Outcome, Side};
use crate::Args;
use mirrorlog::internals::io::{self, FileCaching};
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
            "  {:<22} {:>12} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "side",
            o.unit,
            if o.unit == "MB/s" { "ops/s" } else { "MB/s" },
            "p50 us",
            "p90 us",
            "p99 us",
            "p99.9 us",
            "max us",
            "ratio"
        );
        let ours = &o.sides[0];
        for s in &o.sides {
            let figure = if o.unit == "MB/s" {
                s.mb_per_sec()
            } else {
                s.ops_per_sec()
            };
            let base = if o.unit == "MB/s" {
                ours.mb_per_sec()
            } else {
                ours.ops_per_sec()
            };
            let _ = writeln!(
                out,
                "  {:<22} {:>12.1} {:>10.1} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
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
                if std::ptr::eq(s, ours) || o.workload == "failover" {
                    String::from("-")
                } else {
                    format!("{:.2}", base / figure.max(1e-9))
                }
            );
        }
        for g in goals(o) {
            let _ = writeln!(
                out,
                "  goal: {} {} {:.2}: measured {:.2}, {}",
                g.what,
                g.comparison,
                g.target,
                g.measured,
                if g.met() { "met" } else { "NOT MET" }
            );
        }
    }
    out.push_str(
        "\nratio = mirrorlog's figure / the side's figure (same run, interleaved rounds)\n",
    );
    out
}

pub(crate) fn json(outcomes: &[Outcome], facts: &[(String, String)], a: &Args) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut out = String::from("{\n  \"schema\": \"mirrorlog-bench/1\",\n  \"machine\": {");
    out.push_str(
        &facts
            .iter()
            .map(|(k, v)| format!("\"{}\": \"{}\"", esc(k), esc(v)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let _ = write!(
        out,
        "}},\n  \"config\": {{\"seconds\": {}, \"partitions\": {}, \"callers\": {}, \"recovery_mib\": {}, \"producers\": {}, \"o_direct\": {}}},\n  \"workloads\": [",
        a.seconds,
        a.partitions,
        a.callers,
        a.recovery_mib,
        a.producers,
        a.caching == FileCaching::Direct
    );
    let ws: Vec<String> = outcomes
        .iter()
        .map(|o| {
            let sides: Vec<String> = o
                .sides
                .iter()
                .map(|s| {
                    format!(
                        "{{\"name\": \"{}\", \"ops\": {}, \"bytes\": {}, \"seconds\": {:.6}, \"ops_per_sec\": {:.3}, \"mb_per_sec\": {:.3}, \"latency_us\": {{\"p50\": {}, \"p90\": {}, \"p99\": {}, \"p999\": {}, \"max\": {}}}}}",
                        esc(&s.name), s.ops, s.bytes, s.secs, s.ops_per_sec(), s.mb_per_sec(),
                        s.q(0.5), s.q(0.9), s.q(0.99), s.q(0.999), s.latency_us.max()
                    )
                })
                .collect();
            let goals: Vec<String> = goals(o)
                .iter()
                .map(|g| {
                    format!(
                        "{{\"what\": \"{}\", \"comparison\": \"{}\", \"target\": {}, \"measured\": {:.4}, \"met\": {}}}",
                        esc(g.what), g.comparison, g.target, g.measured, g.met()
                    )
                })
                .collect();
            format!(
                "\n    {{\"workload\": \"{}\", \"unit\": \"{}\", \"notes\": [{}], \"goals\": [{}], \"sides\": [{}]}}",
                o.workload,
                o.unit,
                o.notes.iter().map(|n| format!("\"{}\"", esc(n))).collect::<Vec<_>>().join(", "),
                goals.join(", "),
                sides.join(", ")
            )
        })
        .collect();
    out.push_str(&ws.join(","));
    out.push_str("\n  ]\n}\n");
    out
}

/// A latency CDF (log-scaled x) of one workload's sides, as a standalone SVG.
pub(crate) fn svg(o: &Outcome) -> String {
    let (w, h, left, bottom) = (720.0, 420.0, 60.0, 40.0);
    let max_us = o
        .sides
        .iter()
        .map(|s| s.latency_us.max())
        .max()
        .unwrap_or(1)
        .max(10) as f64;
    let x = |us: f64| left + (us.max(1.0).log10() / max_us.log10()) * (w - left - 20.0);
    let y = |q: f64| (h - bottom) - q * (h - bottom - 20.0);
    let colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"];
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"14\">{} latency CDF (x: microseconds, log scale)</text>\n",
        o.workload
    );
    let _ = writeln!(
        out,
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>",
        h - bottom,
        w - 20.0,
        h - bottom
    );
    let _ = writeln!(
        out,
        "<line x1=\"{left}\" y1=\"20\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>",
        h - bottom
    );
    let mut tick = 1.0;
    while tick <= max_us {
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(tick),
            h - bottom + 16.0,
            tick as u64
        );
        tick *= 10.0;
    }
    for (i, s) in o.sides.iter().enumerate() {
        let points: Vec<String> = (0..=200)
            .map(|k| {
                let q = f64::from(k) / 200.0;
                format!(
                    "{:.1},{:.1}",
                    x(s.latency_us.value_at_quantile(q) as f64),
                    y(q)
                )
            })
            .collect();
        let c = colors[i % colors.len()];
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" fill=\"{c}\">{}</text>",
            left + 10.0,
            40.0 + 16.0 * i as f64,
            s.name
        );
    }
    out.push_str("</svg>\n");
    out
}

/// A goal the issue set for a workload, and what this run measured.
pub(crate) struct Goal {
    pub(crate) what: &'static str,
    pub(crate) comparison: &'static str,
    pub(crate) target: f64,
    pub(crate) measured: f64,
}

impl Goal {
    pub(crate) fn met(&self) -> bool {
        match self.comparison {
            ">=" => self.measured >= self.target,
            _ => self.measured <= self.target,
        }
    }
}

/// The goals of issue "mirrorlog-bench" (and, for producer-state, issue "PSM"), from the sides
/// of `o` by name; a goal whose sides did not run is left out.
pub(crate) fn goals(o: &Outcome) -> Vec<Goal> {
    let side = |name: &str| o.sides.iter().find(|s| s.name == name);
    let ours = &o.sides[0];
    let mut out = Vec::new();
    let mut ratio = |what, comparison, target, measured: Option<f64>| {
        if let Some(measured) = measured {
            out.push(Goal {
                what,
                comparison,
                target,
                measured,
            });
        }
    };
    let rate = |s: &Side| {
        if o.unit == "MB/s" {
            s.mb_per_sec()
        } else {
            s.ops_per_sec()
        }
    };
    let over = |name: &str| side(name).map(|s| rate(ours) / rate(s).max(1e-9));
    match o.workload {
        "mirror-ingest" => {
            ratio("MB/s ratio to raw-odirect", ">=", 0.90, over("raw-odirect"));
            ratio("MB/s ratio to buffered", ">=", 1.5, over("buffered"));
        }
        "produce" => {
            ratio(
                "appends/s ratio to raw-odirect",
                ">=",
                10.0,
                over("raw-odirect"),
            );
            ratio(
                "p99 ratio to raw-odirect's",
                "<=",
                2.0,
                side("raw-odirect").map(|s| ours.q(0.99) as f64 / (s.q(0.99) as f64).max(1.0)),
            );
        }
        "recovery" => ratio(
            "MB/s ratio to the raw reader",
            ">=",
            0.80,
            over("raw reader"),
        ),
        "producer-state" => ratio(
            "batches/s ratio to hashmap-psm",
            ">=",
            2.0,
            over("hashmap-psm"),
        ),
        _ => {}
    }
    out
}
