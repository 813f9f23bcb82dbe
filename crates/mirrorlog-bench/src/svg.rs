//! The `--svg` report: one row per workload — throughput bars per side with the goal's
//! thresholds as dashed lines, latency at p50…p99.99 per side (log scale), and for
//! hot-partitions the open-loop p50 and p99 against offered load — every axis labelled with
//! its unit.

use crate::measure::{Outcome, Step};
use crate::report::{goals, headline, Axis};
use std::fmt::Write as _;

const COLORS: [&str; 4] = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"];
const ROW: f64 = 300.0;
const PANEL_W: f64 = 340.0;
const QUANTILES: [(f64, &str); 5] = [
    (0.5, "p50"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (0.9999, "p99.99"),
];

/// A panel's plotting area: `x0..x1` by `y0..y1` (y grows down).
struct Area {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

/// `v` with an SI suffix (12.3k, 4.5M), for ticks and bar labels.
fn si(v: f64) -> String {
    match v.abs() {
        x if x >= 1e9 => format!("{:.1}G", v / 1e9),
        x if x >= 1e6 => format!("{:.1}M", v / 1e6),
        x if x >= 1e4 => format!("{:.1}k", v / 1e3),
        _ => format!("{v:.0}"),
    }
}

fn text(out: &mut String, x: f64, y: f64, anchor: &str, s: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\">{}</text>",
        s.replace('&', "&amp;").replace('<', "&lt;")
    );
}

/// One side's line, from `points` ("x,y"), in colour `c` (`dash`: extra attributes).
fn series(out: &mut String, c: &str, dash: &str, points: &[String]) {
    let _ = writeln!(
        out,
        "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
        points.join(" ")
    );
}

/// The `k`-th legend entry of a panel.
fn legend(out: &mut String, a: &Area, k: usize, c: &str, name: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{c}\">{name}</text>",
        a.x0 + 8.0,
        a.y0 + 12.0 + 14.0 * k as f64
    );
}

fn axes(out: &mut String, a: &Area, x_label: &str, y_label: &str) {
    let _ = writeln!(
        out,
        "<path d=\"M{:.1},{:.1} V{:.1} H{:.1}\" fill=\"none\" stroke=\"black\"/>",
        a.x0, a.y0, a.y1, a.x1
    );
    text(out, (a.x0 + a.x1) / 2.0, a.y1 + 32.0, "middle", x_label);
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 {:.1} {:.1})\">{y_label}</text>",
        a.x0 - 48.0,
        (a.y0 + a.y1) / 2.0,
        a.x0 - 48.0,
        (a.y0 + a.y1) / 2.0
    );
}

/// A log10 y scale over `[lo, hi]` µs with decade ticks.
fn log_y(out: &mut String, a: &Area, lo: f64, hi: f64) -> impl Fn(f64) -> f64 {
    let (l0, l1) = (lo.max(1.0).log10().floor(), hi.max(10.0).log10().ceil());
    let (y0, y1) = (a.y0, a.y1);
    let y = move |v: f64| y1 - (v.max(1.0).log10() - l0) / (l1 - l0).max(1.0) * (y1 - y0);
    let mut d = l0;
    while d <= l1 {
        let v = 10f64.powf(d);
        text(out, a.x0 - 4.0, y(v) + 4.0, "end", &si(v));
        d += 1.0;
    }
    y
}

fn throughput(out: &mut String, o: &Outcome, a: &Area) {
    let figures: Vec<f64> = o.sides.iter().map(|s| headline(o, s)).collect();
    let ours = figures.first().copied().unwrap_or(0.0);
    // Goal thresholds on mirrorlog's bar: target × the baseline's figure.
    let mut lines: Vec<(f64, String)> = Vec::new();
    for g in goals(o) {
        // Only ratios of the headline figure share this axis's unit.
        for p in &g.parts {
            if p.axis != Axis::Headline || p.measured <= 0.0 {
                continue;
            }
            let base = ours / p.measured;
            lines.push((
                p.target * base,
                format!("goal {} {:.2}", p.comparison, p.target),
            ));
        }
    }
    let max = figures
        .iter()
        .copied()
        .chain(lines.iter().map(|l| l.0))
        .fold(1e-9, f64::max)
        * 1.1;
    axes(out, a, "side", o.unit);
    let n = figures.len().max(1) as f64;
    let slot = (a.x1 - a.x0) / n;
    let y = |v: f64| a.y1 - v / max * (a.y1 - a.y0);
    for k in 0..=4 {
        let v = max * f64::from(k) / 4.0;
        text(out, a.x0 - 4.0, y(v) + 4.0, "end", &si(v));
    }
    for (i, (s, f)) in o.sides.iter().zip(&figures).enumerate() {
        let x = a.x0 + slot * i as f64 + slot * 0.15;
        let _ = writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
            y(*f),
            slot * 0.7,
            a.y1 - y(*f),
            COLORS[i % COLORS.len()]
        );
        text(out, x + slot * 0.35, y(*f) - 4.0, "middle", &si(*f));
        text(out, x + slot * 0.35, a.y1 + 14.0, "middle", &s.name);
    }
    for (v, label) in lines {
        let _ = writeln!(
            out,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\" stroke-dasharray=\"4 3\"/>",
            a.x0,
            y(v),
            a.x1,
            y(v)
        );
        text(out, a.x1 + 4.0, y(v) + 4.0, "start", &label);
    }
}

fn latency(out: &mut String, o: &Outcome, a: &Area) {
    let values: Vec<Vec<f64>> = o
        .sides
        .iter()
        .map(|s| QUANTILES.iter().map(|(q, _)| s.q(*q) as f64).collect())
        .collect();
    let hi = values.iter().flatten().copied().fold(10.0, f64::max);
    let lo = values.iter().flatten().copied().fold(hi, f64::min);
    axes(out, a, "percentile", "latency (µs, log scale)");
    let y = log_y(out, a, lo, hi);
    let x = |i: usize| a.x0 + 20.0 + i as f64 * (a.x1 - a.x0 - 40.0) / (QUANTILES.len() - 1) as f64;
    for (i, (_, name)) in QUANTILES.iter().enumerate() {
        text(out, x(i), a.y1 + 14.0, "middle", name);
    }
    for (k, (s, v)) in o.sides.iter().zip(&values).enumerate() {
        let c = COLORS[k % COLORS.len()];
        let points: Vec<String> = v
            .iter()
            .enumerate()
            .map(|(i, &us)| format!("{:.1},{:.1}", x(i), y(us)))
            .collect();
        series(out, c, "", &points);
        legend(out, a, k, c, &s.name);
    }
    // p99 goals at the p99 column: target × the baseline's p99 (mirrorlog's over the ratio).
    let p99_column = QUANTILES.iter().position(|(q, _)| *q == 0.99);
    let ours = values.first().and_then(|v| p99_column.map(|i| v[i]));
    if let Some((column, ours)) = p99_column.zip(ours) {
        for p in goals(o).iter().flat_map(|g| &g.parts) {
            if p.axis != Axis::P99 || p.measured <= 0.0 {
                continue;
            }
            let v = (p.target * ours / p.measured).clamp(lo, hi);
            let _ = writeln!(
                out,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\" stroke-dasharray=\"4 3\"/>",
                x(column) - 16.0,
                y(v),
                x(column) + 16.0,
                y(v)
            );
            let label = format!("goal {} {:.2}", p.comparison, p.target);
            text(out, x(column) + 18.0, y(v) + 4.0, "start", &label);
        }
    }
}

fn open_loop(out: &mut String, steps: &[Step], a: &Area) {
    let q = |s: &Step, q: f64| s.latency_us.value_at_quantile(q) as f64;
    let hi = steps.iter().map(|s| q(s, 0.99)).fold(10.0, f64::max);
    let lo = steps.iter().map(|s| q(s, 0.5)).fold(hi, f64::min);
    let max_rate = steps.iter().map(|s| s.offered_per_sec).fold(1.0, f64::max) * 1.05;
    axes(
        out,
        a,
        "offered load (appends/s)",
        "latency (µs, log scale): p99 solid, p50 dashed",
    );
    let y = log_y(out, a, lo, hi);
    let x = |r: f64| a.x0 + r / max_rate * (a.x1 - a.x0);
    for k in 0..=4 {
        let r = max_rate * f64::from(k) / 4.0;
        text(out, x(r), a.y1 + 14.0, "middle", &si(r));
    }
    let mut names: Vec<&str> = Vec::new();
    for s in steps {
        if !names.contains(&s.side.as_str()) {
            names.push(&s.side);
        }
    }
    for (k, name) in names.iter().enumerate() {
        let c = COLORS[k % COLORS.len()];
        for (quantile, dash) in [(0.99, ""), (0.5, " stroke-dasharray=\"5 3\"")] {
            let points: Vec<String> = steps
                .iter()
                .filter(|s| s.side == *name)
                .map(|s| format!("{:.1},{:.1}", x(s.offered_per_sec), y(q(s, quantile))))
                .collect();
            series(out, c, dash, &points);
        }
        legend(out, a, k, c, name);
    }
}

/// The whole report as a standalone SVG.
pub(crate) fn svg(outcomes: &[Outcome]) -> String {
    let width = 80.0 + 3.0 * (PANEL_W + 110.0);
    let height = 30.0 + ROW * outcomes.len() as f64;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for (r, o) in outcomes.iter().enumerate() {
        let top = 30.0 + ROW * r as f64;
        let _ = writeln!(
            out,
            "<text x=\"20\" y=\"{:.1}\" font-size=\"14\" font-weight=\"bold\">{}</text>",
            top, o.workload
        );
        let area = |col: usize| Area {
            x0: 80.0 + col as f64 * (PANEL_W + 110.0),
            x1: 80.0 + col as f64 * (PANEL_W + 110.0) + PANEL_W,
            y0: top + 20.0,
            y1: top + ROW - 60.0,
        };
        throughput(&mut out, o, &area(0));
        if o.sides.iter().any(|s| s.latency_us.max() > 0) {
            latency(&mut out, o, &area(1));
        } else {
            let a = area(1);
            text(
                &mut out,
                a.x0,
                (a.y0 + a.y1) / 2.0,
                "start",
                "no per-operation latency",
            );
        }
        if !o.steps.is_empty() {
            open_loop(&mut out, &o.steps, &area(2));
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Figure, Side};

    fn side(name: &str, ops: u64, p99_us: u64) -> Side {
        let mut s = Side::new(name);
        s.ops = ops;
        s.secs = 1.0;
        for _ in 0..100 {
            s.latency_us.record(p99_us).unwrap();
        }
        s
    }

    /// The partitions report: its disk goal (32768 KiB) and memory goal are in units of their
    /// own and stay off both charts; the appends/s goal is on the throughput chart, the p99
    /// goal on the latency chart.
    #[test]
    fn each_goal_is_drawn_only_on_an_axis_of_its_unit() {
        let o = Outcome {
            workload: "partitions",
            unit: "appends/s",
            sides: vec![
                side("10000 partitions", 9_000, 900),
                side("16 partitions", 10_000, 500),
            ],
            notes: Vec::new(),
            steps: Vec::new(),
            figures: vec![
                Figure::new("disk allocated per partition, empty", 1024.0, "KiB"),
                Figure::new(
                    "resident memory per partition, idle after load",
                    20.0,
                    "KiB",
                ),
            ],
        };
        assert!(goals(&o)
            .iter()
            .flat_map(|g| &g.parts)
            .any(|p| p.target == 32768.0));
        let mut throughput_chart = String::new();
        let area = Area {
            x0: 60.0,
            y0: 20.0,
            x1: 400.0,
            y1: 220.0,
        };
        throughput(&mut throughput_chart, &o, &area);
        assert!(
            throughput_chart.contains("goal &gt;= 0.80")
                || throughput_chart.contains("goal >= 0.80")
        );
        assert!(!throughput_chart.contains("32768"), "{throughput_chart}");
        assert!(!throughput_chart.contains("64.00"), "{throughput_chart}");
        // The axis tops near the bars (10,000 × 1.1), not at a goal in KiB.
        assert!(
            throughput_chart.contains(&si(11_000.0)),
            "{throughput_chart}"
        );
        let mut latency_chart = String::new();
        latency(&mut latency_chart, &o, &area);
        assert!(latency_chart.contains("2.00"), "{latency_chart}");
        assert!(!latency_chart.contains("32768"), "{latency_chart}");
    }
}
