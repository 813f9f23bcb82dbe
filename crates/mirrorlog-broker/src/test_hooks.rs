//! The failures a test may inject, served only when the process was started with
//! `MIRRORLOG_BROKER_TEST_HOOKS=1`: the admin surface's shard halt, and a mirror start failing
//! at one partition (`MIRRORLOG_BROKER_FAIL_START_AT=TOPIC-PARTITION`). Never set in
//! production.

/// Whether the test hooks are served.
pub fn enabled() -> bool {
    std::env::var_os("MIRRORLOG_BROKER_TEST_HOOKS").is_some_and(|v| v == "1")
}
