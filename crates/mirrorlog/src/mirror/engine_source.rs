//! A [`Source`] over another engine in this process: the source cluster of a
//! [`super::MirrorLink`], of the tests' topologies and of the bench. One route (0), whose
//! leader epoch is not told (-1: a pipeline checks where the logs diverge when it starts, not
//! at the source's failovers); its fetches are the engine's long-poll reads, its epoch ends
//! `Engine::epoch_end_offset`, its log ranges the partition's state.
//!
//! A source partition the engine answers out of range is [`ErrorAction::OutOfRange`]; any
//! other error of the source engine is retried with backoff, counted under `source`.

use super::destination::Leader;
use super::source::{
    Answers, Ask, EpochEnd, ErrorAction, Fetched, LogRange, PartError, RequestError, Source,
};
use crate::engine::{Engine, EngineError, Isolation, ReadRequest, TopicPartition};
use crate::log::LogError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The one route of an engine source.
const ROUTE: i32 = 0;

/// How an engine source's fetches read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineFetch {
    /// Bytes asked per partition (`max_bytes`; at least one batch comes back).
    pub max_bytes: usize,
    /// A fetch at the source's end waits this long for data (zero: answers at once).
    pub max_wait: Duration,
    /// Bytes a waiting fetch wants before it resolves.
    pub min_bytes: usize,
}

/// Another engine as a mirror's source (see the module docs).
#[derive(Debug, Clone)]
pub struct EngineSource {
    engine: Arc<Engine>,
    /// Destination partition → source partition.
    names: HashMap<TopicPartition, TopicPartition>,
    fetch: EngineFetch,
}

impl EngineSource {
    /// `engine`'s partitions as a source, each mirrored into the destination partition named
    /// beside it (`(source, destination)`), fetched as `fetch` says.
    #[must_use]
    pub fn new(
        engine: Arc<Engine>,
        partitions: impl IntoIterator<Item = (TopicPartition, TopicPartition)>,
        fetch: EngineFetch,
    ) -> Self {
        EngineSource {
            engine,
            names: partitions.into_iter().map(|(s, d)| (d, s)).collect(),
            fetch,
        }
    }

    /// How its fetches read.
    pub fn set_fetch(&mut self, fetch: EngineFetch) {
        self.fetch = fetch;
    }

    /// The source partition of each ask, in order (`None`: not one of this source's).
    fn named(&self, asks: &[Ask]) -> Vec<Option<TopicPartition>> {
        asks.iter()
            .map(|a| self.names.get(&a.tp).cloned())
            .collect()
    }
}

/// An error of the source engine as the pipeline reads it.
fn part_error(e: &EngineError) -> PartError {
    let action = match e {
        EngineError::Log {
            source: LogError::OffsetOutOfRange { .. },
            ..
        } => ErrorAction::OutOfRange,
        _ => ErrorAction::Retry,
    };
    PartError {
        action,
        kind: match action {
            ErrorAction::OutOfRange => "OFFSET_OUT_OF_RANGE".to_string(),
            _ => format!("source: {e}"),
        },
    }
}

fn unknown(tp: &TopicPartition) -> PartError {
    PartError {
        action: ErrorAction::Stall,
        kind: format!("source: {tp} is not one of this source's partitions"),
    }
}

impl Source for EngineSource {
    fn leader(&self, tp: &TopicPartition) -> Option<Leader> {
        self.names.contains_key(tp).then_some(Leader {
            broker: ROUTE,
            epoch: -1,
        })
    }

    fn fetch(&mut self, _route: i32, asks: Vec<Ask>) -> Answers<Fetched> {
        let f = self.fetch;
        // One read per partition, each as a consumer's (a source with one partition, a link's,
        // pays nothing for the others).
        let calls: Vec<_> = self
            .named(&asks)
            .into_iter()
            .zip(&asks)
            .map(|(s, a)| {
                s.map(|s| {
                    let request =
                        ReadRequest::new(a.offset, f.max_bytes, Isolation::ReadUncommitted)
                            .wait_for(f.min_bytes, f.max_wait);
                    self.engine.read(&s, request)
                })
                .ok_or_else(|| unknown(&a.tp))
            })
            .collect();
        Box::pin(async move {
            let mut out = Vec::with_capacity(calls.len());
            for call in calls {
                out.push(match call {
                    Err(e) => Err(e),
                    Ok(call) => match call.await {
                        Ok(r) => Ok(Fetched {
                            high_watermark: r.high_watermark.0,
                            log_start: r.log_start_offset.0,
                            records: r.records,
                        }),
                        Err(e) => Err(part_error(&e)),
                    },
                });
            }
            Ok(out)
        })
    }

    fn epoch_ends(&mut self, _route: i32, asks: Vec<Ask>) -> Answers<EpochEnd> {
        let named = self.named(&asks);
        let calls: Vec<_> = named
            .iter()
            .zip(&asks)
            .map(|(s, a)| {
                let epoch = i32::try_from(a.offset.0).unwrap_or(-1);
                s.as_ref()
                    .map(|s| (s.clone(), self.engine.epoch_end_offset(s, epoch)))
            })
            .collect();
        Box::pin(async move {
            let mut out = Vec::with_capacity(calls.len());
            for c in calls {
                out.push(match c {
                    None => Err(unknown(&TopicPartition::new("?", -1))),
                    Some((_, call)) => match call.await {
                        Ok(e) => Ok(EpochEnd {
                            epoch: e.leader_epoch,
                            end: e.end_offset.0,
                        }),
                        Err(e) => Err(part_error(&e)),
                    },
                });
            }
            Ok(out)
        })
    }

    fn log_ranges(&mut self, _route: i32, asks: Vec<Ask>) -> Answers<LogRange> {
        let named = self.named(&asks);
        let engine = self.engine.clone();
        Box::pin(async move {
            let mut out = Vec::with_capacity(asks.len());
            for (s, a) in named.into_iter().zip(asks) {
                let Some(s) = s else {
                    out.push(Err(unknown(&a.tp)));
                    continue;
                };
                let state = match engine.state(&s).await {
                    Ok(state) => state,
                    Err(e) => {
                        out.push(Err(part_error(&e)));
                        continue;
                    }
                };
                let (earliest, latest) = (state.log_start, state.high_watermark);
                // Past the asked offset (and not past the end): the batch holding the log
                // start, whose base is where a realignment starts.
                let probe = if earliest > a.offset && a.offset <= latest {
                    let request = ReadRequest::new(earliest, 1, Isolation::ReadUncommitted);
                    match engine.read(&s, request).await {
                        Ok(r) => r.records,
                        Err(e) => {
                            out.push(Err(part_error(&e)));
                            continue;
                        }
                    }
                } else {
                    bytes::Bytes::new()
                };
                out.push(Ok(LogRange {
                    earliest: earliest.0,
                    latest: latest.0,
                    probe,
                }));
            }
            Ok::<_, RequestError>(out)
        })
    }
}
