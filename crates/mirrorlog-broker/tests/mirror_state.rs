//! What `GET /mirrors` and `/health` say of a mirror is true:
//! - a source that goes away (SIGKILL): within 30 s its partitions are stalled with the
//!   reason, their lag is unknown (null) beside the answer's age, the mirror is
//!   `unreachable` and `/health` degraded, naming it; the source back on its port, all of it
//!   clears;
//! - a paused mirror says `paused` (and not running), a resumed one `running`;
//! - a mirror stopped by a failover stays listed under `stopped` with the stop's outcome,
//!   across a restart, until `DELETE /mirrors/NAME`; a running mirror is not deleted (409).

mod broker_support;

use broker_support::requests::{http, http_get, http_post, mirrored, Mirrored};
use broker_support::BrokerProc;
use serde_json::Value;
use std::time::{Duration, Instant};

fn body(answer: &str) -> Value {
    let text = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn mirrors(dst: &BrokerProc) -> Value {
    body(&http_get(dst, "/mirrors"))
}

/// Polls `GET /mirrors` until `done` holds of it (at most `within`); the last answer.
fn wait_until(dst: &BrokerProc, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let m = mirrors(dst);
        if done(&m) {
            return m;
        }
        assert!(Instant::now() < deadline, "not reached: {m}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_source_that_goes_away_shows_unreachable_and_recovers_when_it_is_back() {
    let mut pair: Mirrored = mirrored("gone");
    let m = mirrors(&pair.dst);
    assert_eq!(m["mirrors"][0]["state"], "running", "{m}");
    assert_eq!(body(&http_get(&pair.dst, "/health"))["ok"], true);

    let (src_dir, src_kafka, src_admin) = (
        pair.src.data_dir.clone(),
        pair.src.kafka.clone(),
        pair.src.admin.clone(),
    );
    pair.src.child.kill().expect("SIGKILL");
    pair.src.child.wait().expect("the source's exit");
    let killed = Instant::now();
    let m = wait_until(&pair.dst, Duration::from_secs(30), |m| {
        m["mirrors"][0]["state"] == "unreachable"
    });
    let p = &m["mirrors"][0]["partitions"][0];
    let stalled = p["stalled"].as_str().unwrap_or_default();
    assert!(
        stalled.starts_with("the source has not served it for"),
        "{p}"
    );
    assert!(
        p["lag"].is_null() && p["lag_ms"].is_null(),
        "lag unknown: {p}"
    );
    assert!(p["source_answer_age_ms"].as_u64().unwrap() >= 10_000, "{p}");
    assert!(m["mirrors"][0]["worst"].is_null(), "{m}");
    assert!(killed.elapsed() < Duration::from_secs(30));
    let health = body(&http_get(&pair.dst, "/health"));
    assert_eq!(health["ok"], false, "{health}");
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["mirrors_unreachable"][0]["name"], "src", "{health}");
    assert!(
        health["mirrors_unreachable"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("the source has not served it"),
        "{health}"
    );

    // The source back on its port: the mirror answers again, and nothing is stalled.
    pair.src = BrokerProc::start_on(&src_dir, &src_kafka, &src_admin, &[]);
    let m = wait_until(&pair.dst, Duration::from_secs(30), |m| {
        m["mirrors"][0]["state"] == "running" && m["mirrors"][0]["partitions"][0]["lag_ms"] == 0
    });
    let p = &m["mirrors"][0]["partitions"][0];
    assert!(p["stalled"].is_null(), "{p}");
    assert_eq!(p["lag"], 0, "{p}");
    assert_eq!(body(&http_get(&pair.dst, "/health"))["ok"], true);
}

#[test]
fn a_paused_mirror_says_so_and_a_stopped_one_stays_listed_until_deleted() {
    let pair: Mirrored = mirrored("kept");
    let dst = &pair.dst;
    assert!(http_post(dst, "/mirrors/src/pause", "").starts_with("HTTP/1.1 200"));
    let m = mirrors(dst);
    assert_eq!(m["mirrors"][0]["state"], "paused", "{m}");
    assert_eq!(m["mirrors"][0]["running"], false, "{m}");
    assert_eq!(m["mirrors"][0]["partitions"][0]["stalled"], "paused", "{m}");
    // Paused is not unreachable.
    assert_eq!(body(&http_get(dst, "/health"))["ok"], true);
    assert!(http_post(dst, "/mirrors/src/resume", "").starts_with("HTTP/1.1 200"));
    let m = mirrors(dst);
    assert_eq!(m["mirrors"][0]["state"], "running", "{m}");
    assert_eq!(m["mirrors"][0]["running"], true, "{m}");

    // A running mirror is not deleted; an unknown one is not found.
    assert!(http(dst, "DELETE", "/mirrors/src", "").starts_with("HTTP/1.1 409"));
    assert!(http(dst, "DELETE", "/mirrors/nobody", "").starts_with("HTTP/1.1 404"));

    // Failover: the mirror is listed as stopped, with what the stop did.
    let stop = body(&http_post(dst, "/mirrors/src/stop", ""));
    let m = mirrors(dst);
    assert!(m["mirrors"].as_array().unwrap().is_empty(), "{m}");
    let s = &m["stopped"][0];
    assert_eq!(
        (s["name"].as_str(), s["state"].as_str()),
        (Some("src"), Some("stopped"))
    );
    assert_eq!(s["topics"][0], "kept");
    assert_eq!(s["outcome"], stop["stopped"], "{m} vs {stop}");
    assert_eq!(s["outcome"][0]["last_mirrored_offset"], 1, "{s}");
    assert!(s["stopped_at_ms"].as_u64().unwrap() > 0);

    // Kept across a restart, until deleted.
    let Mirrored { src, dst, _dirs } = pair;
    let (dir, kafka, admin) = (dst.data_dir.clone(), dst.kafka.clone(), dst.admin.clone());
    assert!(dst.terminate().success());
    let dst = BrokerProc::start_on(&dir, &kafka, &admin, &[]);
    let m = mirrors(&dst);
    assert_eq!(m["stopped"][0]["name"], "src", "{m}");
    assert!(http(&dst, "DELETE", "/mirrors/src", "").starts_with("HTTP/1.1 200"));
    let m = mirrors(&dst);
    assert!(m["stopped"].as_array().unwrap().is_empty(), "{m}");
    assert!(http(&dst, "DELETE", "/mirrors/src", "").starts_with("HTTP/1.1 404"));
    drop(src);
}
