//! Lag in time on `GET /mirrors`: each mirrored partition's `lag_ms` (how far behind the
//! source, in time, its durable end is) and `source_answer_age_ms` (how long since the source
//! last answered it), and each mirror's `worst` partition. Caught up, the lag is 0 and the
//! answer fresh; with the source gone, the lag stays what was known (nothing seen is missing)
//! while the answer's age grows, which is what bounds what the source may hold unseen; past
//! 10 s it is unknown (`mirror_state.rs`).
//! The computation itself (first sightings of the source's high watermark, bounded, never
//! younger than the truth) is tested in the engine's `mirror/destination/status.rs`.

mod broker_support;

use broker_support::requests::{http_get, mirrored, Mirrored};
use std::time::Duration;

fn mirror_status(dst: &broker_support::BrokerProc) -> serde_json::Value {
    let answer = http_get(dst, "/mirrors");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    v["mirrors"][0].clone()
}

#[test]
fn lag_in_time_is_zero_when_caught_up_and_the_answer_age_grows_without_a_source() {
    // The pair's directories live as long as `pair`.
    let mut pair: Mirrored = mirrored("lagged");
    let dst = &pair.dst;
    // The mirror caught up (the helper waited for it); the next answers say nothing is missing.
    std::thread::sleep(Duration::from_millis(300));
    let m = mirror_status(dst);
    let p = &m["partitions"][0];
    assert_eq!(p["lag_ms"], 0, "{p}");
    let age = p["source_answer_age_ms"].as_u64().unwrap();
    assert!(age < 5_000, "{p}");
    assert_eq!(m["worst"]["lag_ms"], 0, "{m}");
    assert_eq!(m["worst"]["topic"], "lagged", "{m}");

    pair.src.child.kill().expect("SIGKILL");
    pair.src.child.wait().expect("the source's exit");
    let dst = &pair.dst;
    std::thread::sleep(Duration::from_millis(1_500));
    let m = mirror_status(dst);
    let p = &m["partitions"][0];
    assert_eq!(p["lag_ms"], 0, "nothing the source showed is missing: {p}");
    assert!(
        p["source_answer_age_ms"].as_u64().unwrap() >= 1_400,
        "the last answer ages: {p}"
    );
    let Mirrored { dst, .. } = pair;
    assert!(dst.terminate().success());
}
