//! The stop intent: what makes `stop_mirroring` atomic across power cuts (design.md §Mirroring, "Atomic
//! stop").
//!
//! A stop writes `stop-intent` durably before it changes anything: the `last_mirrored_offset`
//! it will report and, once known, the first offset it writes (`first_local`) with the mode
//! history as it was before the stop. The ABORT markers and the barrier are then one append
//! and one commit round (durable all together or not at all), after the history records the
//! Local range. The next open finishes or undoes an interrupted stop:
//! - the log holds data past `first_local` (the markers and barrier are durable, nothing else
//!   can write there while the intent exists): the stop took effect — finish it;
//! - otherwise: undo it — the history as before, the partition mirroring as before — and keep
//!   the intent, so that a retried stop reports the same `last_mirrored_offset`.
//!
//! A Mirror append, a start or a resume of mirroring abandons a pending stop (removes the
//! intent): from then on the log end moves for other reasons.

use super::{remove_durably, LogError, ModeHistory, PartitionLog};
use crate::format::Offset;
use crate::io::{self, Io};
use std::path::Path;

/// The stop intent's file in the partition directory.
pub const STOP_INTENT: &str = "stop-intent";

/// A stop under way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StopIntent {
    /// What the stop reports (the log end when it started, before any truncation).
    pub(super) last_mirrored_offset: Offset,
    /// The first offset the stop writes, and the history before it, once known.
    pub(super) first_local: Option<(Offset, ModeHistory)>,
}

impl StopIntent {
    fn encode(&self) -> String {
        match &self.first_local {
            None => format!("0\n{}\n-1\n", self.last_mirrored_offset.0),
            Some((first, history)) => format!(
                "0\n{}\n{}\n{}",
                self.last_mirrored_offset.0,
                first.0,
                history.encode()
            ),
        }
    }

    fn decode(text: &str) -> Option<Self> {
        let (version, rest) = text.split_once('\n')?;
        let (last, rest) = rest.split_once('\n')?;
        let (first, history) = rest.split_once('\n')?;
        if version != "0" {
            return None;
        }
        let last_mirrored_offset = Offset(last.parse().ok()?);
        let first: i64 = first.parse().ok()?;
        let first_local = if first < 0 {
            None
        } else {
            Some((Offset(first), ModeHistory::decode(history).ok()?))
        };
        Some(StopIntent {
            last_mirrored_offset,
            first_local,
        })
    }

    /// Writes the intent durably.
    pub(super) fn write(&self, io: &mut dyn Io, dir: &Path) -> Result<(), LogError> {
        io::write_file_atomically(io, dir, STOP_INTENT, self.encode().as_bytes())
            .map_err(super::classify)
    }
}

impl PartitionLog {
    /// At open: finishes or undoes a stop a power cut interrupted (see the module docs).
    ///
    /// # Errors
    /// [`LogError::Corrupt`] for an unreadable intent, or an I/O failure.
    pub(super) fn finish_interrupted_stop(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let path = self.dir.join(STOP_INTENT);
        let Some(bytes) = super::read_if_present(io, &path)? else {
            return Ok(());
        };
        let Some(intent) = StopIntent::decode(&String::from_utf8_lossy(&bytes)) else {
            return Err(LogError::Corrupt {
                file: path,
                what: "unreadable stop intent".into(),
            });
        };
        match &intent.first_local {
            Some((first, _)) if self.log_end() > *first => {
                // The markers and the barrier are durable: the stop took effect.
                self.write_mode(io)?;
                remove_durably(io, &self.dir, STOP_INTENT).map_err(super::classify)?;
            }
            Some((_, before)) => {
                // Nothing of it is durable: as before the stop.
                self.history = before.clone();
                self.write_history(io)?;
                self.mode = super::mode_of(io, &self.dir, &self.history)?;
                self.pending_stop = Some(intent);
            }
            None => self.pending_stop = Some(intent),
        }
        Ok(())
    }

    /// Forgets a pending stop: mirroring goes on, the log end moves for other reasons.
    ///
    /// # Errors
    /// An I/O failure removing the intent.
    pub(super) fn abandon_pending_stop(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        if self.pending_stop.take().is_some() {
            remove_durably(io, &self.dir, STOP_INTENT)
                .map_err(|e| self.poison(super::classify(e)))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::RangeKind;

    #[test]
    fn the_intent_round_trips_and_refuses_garbage() {
        let mut history = ModeHistory::default();
        history.record(Offset(0), RangeKind::Local);
        history.record(Offset(7), RangeKind::Mirror("east/t-0".into()));
        for intent in [
            StopIntent {
                last_mirrored_offset: Offset(42),
                first_local: None,
            },
            StopIntent {
                last_mirrored_offset: Offset(42),
                first_local: Some((Offset(40), history.clone())),
            },
        ] {
            assert_eq!(StopIntent::decode(&intent.encode()), Some(intent));
        }
        assert_eq!(StopIntent::decode("1\n42\n-1\n"), None);
        assert_eq!(StopIntent::decode("0\nx\n-1\n"), None);
        assert_eq!(StopIntent::decode(""), None);
    }
}
