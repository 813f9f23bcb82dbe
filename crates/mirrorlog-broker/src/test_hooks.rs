//! The failures a test may inject, served only when the process was started with
//! `MIRRORLOG_BROKER_TEST_HOOKS=1`: the admin surface's shard halt, and a mirror start failing
//! at one partition (`MIRRORLOG_BROKER_FAIL_START_AT=TOPIC-PARTITION`), and a pause after the
//! ready line (`MIRRORLOG_BROKER_READY_DELAY_MS`). Never set in production.

/// Whether the test hooks are served.
pub fn enabled() -> bool {
    std::env::var_os("MIRRORLOG_BROKER_TEST_HOOKS").is_some_and(|v| v == "1")
}

/// How long the process waits after printing its ready line before it waits for signals
/// (`MIRRORLOG_BROKER_READY_DELAY_MS`), so a test can send SIGTERM in that window and show
/// the handler was installed before the line was printed.
pub fn ready_delay() -> Option<std::time::Duration> {
    if !enabled() {
        return None;
    }
    let ms = std::env::var("MIRRORLOG_BROKER_READY_DELAY_MS").ok()?;
    ms.parse().ok().map(std::time::Duration::from_millis)
}
