//! Each answer's handling. A partition's answer counts only if the partition is still fetched
//! and still led by the route that answered: data from a route that no longer leads it (the
//! source's metadata moved it while the request was out) is dropped, and its new leader is
//! asked from `next`.
//!
//! | answer | handling |
//! |---|---|
//! | fetched | noted (high watermark, log start, the lag's sightings); its whole batches past `next` land with the rest of the answer as one engine call |
//! | epoch end | truncate where the logs diverge (the destination side's `truncate_where_diverged`) |
//! | log range | below the source's log start: realign there; past its end: truncate (by the epochs, else to its end); inside: retry with backoff |
//! | [`ErrorAction::OutOfRange`] | ask the log range (a check's or a range's own out-of-range: retry) |
//! | [`ErrorAction::Reroute`], [`ErrorAction::Retry`] | back off (the source refreshes its routes itself) |
//! | [`ErrorAction::Stall`] | stop fetching the partition, with the reason |
//! | a request error | noted on each partition asked; asked again at the next turn |
//!
//! A fetch answer counts only at the offset the partition is still at: one reset while the
//! fetch was out (a refused append) is fetched again from its durable end.

use super::{local, Done, Pipeline};
use crate::format::Offset;
use crate::mirror::destination::{lock, note_error, set_stalled, AnswerHead, Answered};
use crate::mirror::source::{ErrorAction, PartError};
use std::time::Instant;

impl Pipeline {
    /// Whether partition `i`'s answer from `route` counts.
    fn counts(&self, i: usize, route: i32) -> bool {
        self.parts
            .get(i)
            .is_some_and(|p| p.active && p.leader.is_some_and(|l| l.broker == route))
    }

    pub(super) async fn handle(
        &mut self,
        route: i32,
        parts: &[usize],
        asked: &[Offset],
        done: Done,
        now: Instant,
    ) {
        let answers = match done {
            Done::Fetch(Ok(a)) => return self.on_fetched(route, parts, asked, a, now),
            Done::Check(Ok(a)) => return self.on_checked(route, parts, a, now).await,
            Done::Range(Ok(a)) => return self.on_ranges(route, parts, a, now).await,
            Done::Fetch(Err(e)) | Done::Check(Err(e)) | Done::Range(Err(e)) => e,
        };
        for &i in parts {
            note_error(&self.status, Some(i), &answers.kind, &answers.reason);
        }
    }

    fn on_fetched(
        &mut self,
        route: i32,
        parts: &[usize],
        asked: &[Offset],
        answers: Vec<Result<crate::mirror::source::Fetched, PartError>>,
        now: Instant,
    ) {
        let local = local!(self);
        let mut errors = Vec::new();
        let mut answered = Vec::new();
        for ((&i, &at), a) in parts.iter().zip(asked).zip(answers) {
            // A partition reset while the fetch was out (a refused append voided what followed
            // it, and it was read again from its durable end) takes nothing from an answer at
            // another offset: appended, its batches would leave a hole.
            if !self.counts(i, route) || self.parts[i].next != at {
                continue;
            }
            match a {
                Ok(f) => {
                    let head = AnswerHead {
                        high_watermark: f.high_watermark,
                        log_start: f.log_start,
                        ok: true,
                    };
                    local.note_answered(i, &head, now);
                    answered.push((
                        i,
                        Answered {
                            log_start: f.log_start,
                            records: f.records,
                        },
                    ));
                }
                Err(e) => {
                    let head = AnswerHead {
                        high_watermark: -1,
                        log_start: -1,
                        ok: false,
                    };
                    local.note_answered(i, &head, now);
                    errors.push((i, e));
                }
            }
        }
        local.land(&mut self.parts, answered, now);
        for (i, e) in errors {
            self.on_error(i, &e, now);
        }
    }

    async fn on_checked(
        &mut self,
        route: i32,
        parts: &[usize],
        answers: Vec<Result<crate::mirror::source::EpochEnd, PartError>>,
        now: Instant,
    ) {
        let mut errors = Vec::new();
        for (&i, a) in parts.iter().zip(answers) {
            if !self.counts(i, route) {
                continue;
            }
            match a {
                Ok(end) => {
                    let local = local!(self);
                    local
                        .truncate_where_diverged(i, &mut self.parts[i], end.epoch, end.end)
                        .await;
                }
                Err(e) => errors.push((i, e)),
            }
        }
        for (i, e) in errors {
            self.on_error(i, &not_a_fetch(e), now);
        }
    }

    async fn on_ranges(
        &mut self,
        route: i32,
        parts: &[usize],
        answers: Vec<Result<crate::mirror::source::LogRange, PartError>>,
        now: Instant,
    ) {
        let mut errors = Vec::new();
        for (&i, a) in parts.iter().zip(answers) {
            if !self.counts(i, route) {
                continue;
            }
            let range = match a {
                Ok(r) => r,
                Err(e) => {
                    errors.push((i, e));
                    continue;
                }
            };
            let part = &mut self.parts[i];
            part.out_of_range = false;
            if let Some(s) = lock(&self.status).get_mut(i) {
                s.source_log_start = range.earliest;
                s.source_high_watermark = range.latest;
            }
            match out_of_range_fix(part.next, range.earliest, range.latest) {
                Fix::Realign(log_start) => {
                    let local = local!(self);
                    local
                        .realign(i, &mut self.parts[i], log_start, range.probe)
                        .await;
                }
                Fix::Truncate(end) => {
                    part.check = true;
                    part.truncate_floor = Some(end);
                }
                Fix::Retry => {
                    part.backoff.fail(now);
                }
            }
        }
        for (i, e) in errors {
            self.on_error(i, &not_a_fetch(e), now);
        }
    }

    /// Acts on a partition's error (the table in the module docs).
    fn on_error(&mut self, i: usize, e: &PartError, now: Instant) {
        let Some(part) = self.parts.get_mut(i) else {
            return;
        };
        let reason = format!("source partition error {}", e.kind);
        match e.action {
            ErrorAction::OutOfRange => part.out_of_range = true,
            ErrorAction::Reroute | ErrorAction::Retry => {
                part.backoff.fail(now);
            }
            ErrorAction::Stall => {
                part.active = false;
                set_stalled(&self.status, i, Some(&e.kind), &reason);
                return;
            }
        }
        note_error(&self.status, Some(i), &e.kind, &reason);
        if let Some(s) = lock(&self.status).get_mut(i) {
            s.retries = part.backoff.failures();
            s.backoff_until = part.backoff.waiting_until(now);
        }
    }
}

/// A check's or a range's own out-of-range answer is no fetch's: it is retried.
fn not_a_fetch(e: PartError) -> PartError {
    match e.action {
        ErrorAction::OutOfRange => PartError {
            action: ErrorAction::Retry,
            ..e
        },
        _ => e,
    }
}

/// What an out-of-range fetch at `next` calls for, given the source's log start and end
/// (Kafka's `AbstractFetcherThread.fetchOffsetAndTruncate`).
#[derive(Debug, PartialEq, Eq)]
enum Fix {
    /// Below the source's log start: start there.
    Realign(Offset),
    /// Past the source's end: truncate where the epochs diverge, at most to this end.
    Truncate(Offset),
    /// Inside the source's range (its leader moved, its end not yet caught up): retry.
    Retry,
}

fn out_of_range_fix(next: Offset, earliest: i64, latest: i64) -> Fix {
    if latest >= 0 && next.0 > latest {
        Fix::Truncate(Offset(latest))
    } else if earliest > next.0 {
        Fix::Realign(Offset(earliest))
    } else {
        Fix::Retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_is_realigned_below_truncated_past_and_retried_inside() {
        assert_eq!(
            out_of_range_fix(Offset(0), 500, 900),
            Fix::Realign(Offset(500))
        );
        assert_eq!(
            out_of_range_fix(Offset(1000), 500, 900),
            Fix::Truncate(Offset(900))
        );
        assert_eq!(out_of_range_fix(Offset(700), 500, 900), Fix::Retry);
        assert_eq!(out_of_range_fix(Offset(900), 500, 900), Fix::Retry);
        assert_eq!(out_of_range_fix(Offset(500), 500, 900), Fix::Retry);
    }
}
