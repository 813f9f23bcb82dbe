//! The one scanner of a segment's bytes: recovery's pass over a whole file, the clean open's
//! pass over the active segment's tail, and every rebuild of indexes from data in memory run
//! this code, so they agree on what a valid batch is, where the batches stop and why.
//!
//! A [`BatchStream`] takes the file's bytes in chunks cut anywhere (a batch cut by a chunk
//! boundary is carried to the next), checks that every batch is whole, valid (size, CRC) and
//! at or past the offset after the one before, and hands the batches that take effect to a
//! [`BatchSink`]: the indexes, or recovery's indexes, epochs and producer-state replay.
//! [`scan_file`] feeds it a range of a file through large O_DIRECT reads, several in flight.

use super::SegmentIndexes;
use crate::format::{inspect, BatchIter, BatchView, FormatError, Offset, ScanEnd};
use crate::io::{FileId, Io, IoError, SequentialReader};

/// Size of each read of [`scan_file`].
pub const SCAN_READ_BYTES: usize = 8 << 20;
/// Reads in flight per file in [`scan_file`].
pub const SCAN_READS_IN_FLIGHT: usize = 4;

/// Where the batches a [`BatchStream`] accepts go.
pub trait BatchSink {
    /// Why taking a batch failed (it stops the scan).
    type Error;
    /// Takes a valid batch, in file order.
    ///
    /// # Errors
    /// The sink's own failure.
    fn take(&mut self, batch: &BatchView<'_>) -> Result<(), Self::Error>;
    /// How many batches ahead the sink wants to hear of producer ids ([`BatchSink::ahead`]).
    fn lookahead(&self) -> usize {
        0
    }
    /// The producer id of a batch arriving soon, so its state can be fetched ahead.
    fn ahead(&mut self, _producer_id: i64) {}
}

/// A sink that indexes the batches, as appending them did.
#[derive(Debug)]
pub struct IndexSink<'a>(pub &'a mut SegmentIndexes);

impl BatchSink for IndexSink<'_> {
    type Error = std::convert::Infallible;
    fn take(&mut self, b: &BatchView<'_>) -> Result<(), Self::Error> {
        let h = b.header();
        self.0.on_append(
            b.position() as u32,
            b.bytes().len() as u32,
            h.last_offset(),
            h.max_timestamp,
        );
        Ok(())
    }
}

/// A sink that takes nothing: validation only.
#[derive(Debug)]
pub struct CheckOnly;

impl BatchSink for CheckOnly {
    type Error = std::convert::Infallible;
    fn take(&mut self, _: &BatchView<'_>) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The streaming validation of one file's bytes.
#[derive(Debug)]
pub struct BatchStream {
    /// Offset after the last valid batch.
    next: Offset,
    /// Where the scan started (a batch boundary).
    start: u64,
    /// Position after the last valid batch.
    valid_end: u64,
    /// Batches ending at or below this take effect as they arrive.
    certain_until: u64,
    /// First valid batch that did not take effect (ends past `certain_until`).
    pending_at: Option<u64>,
    /// The start of a batch cut by a chunk boundary, at `valid_end`.
    carry: Vec<u8>,
    /// Largest batch an append can write: a longer declared length is damage.
    batch_bytes_max: u64,
    /// Why the batches stopped before the end of the bytes.
    stop: Option<String>,
    /// They stopped at an all-zero header at position 0: nothing was ever written there.
    zeros_from_start: bool,
}

impl BatchStream {
    /// A stream of the bytes from `position` (a batch boundary) on, whose first batch is at
    /// or past offset `next`. Batches ending at or below `certain_until` take effect as they
    /// arrive; from the first that ends past it, none does (the caller decides later what
    /// the rest is). A batch declaring more than `batch_bytes_max` bytes is damage.
    #[must_use]
    pub fn new(position: u64, next: Offset, certain_until: u64, batch_bytes_max: u64) -> Self {
        BatchStream {
            next,
            start: position,
            valid_end: position,
            certain_until,
            pending_at: None,
            carry: Vec::new(),
            batch_bytes_max,
            stop: None,
            zeros_from_start: false,
        }
    }

    /// Offset after the last valid batch.
    #[must_use]
    pub fn next_offset(&self) -> Offset {
        self.next
    }

    /// Position after the last valid batch.
    #[must_use]
    pub fn valid_end(&self) -> u64 {
        self.valid_end
    }

    /// The first valid batch that did not take effect, if any.
    #[must_use]
    pub fn pending_at(&self) -> Option<u64> {
        self.pending_at
    }

    /// Why the batches stopped before the end of the bytes fed, or `None` when every byte fed
    /// so far is whole valid batches (after [`BatchStream::finish`]: every byte).
    #[must_use]
    pub fn stop(&self) -> Option<&str> {
        self.stop.as_deref()
    }

    /// The batches stopped at an all-zero header at position 0.
    #[must_use]
    pub fn zeros_from_start(&self) -> bool {
        self.zeros_from_start
    }

    /// Ends the stream: a batch still cut (the bytes ended inside it) is a stop.
    pub fn finish(&mut self) {
        if self.stop.is_none() && !self.carry.is_empty() {
            self.stop = Some(format!(
                "the bytes end inside a batch at position {}",
                self.valid_end
            ));
        }
    }

    /// Every byte fed is whole valid batches, and they end at `end`.
    #[must_use]
    pub fn whole_to(&self, end: u64) -> bool {
        self.stop.is_none() && self.carry.is_empty() && self.valid_end == end
    }

    fn batch<S: BatchSink>(&mut self, b: &BatchView<'_>, sink: &mut S) -> Result<bool, S::Error> {
        let h = b.header();
        if h.base_offset < self.next {
            self.stop = Some(format!(
                "batch at position {} has offset {} below {}",
                b.position(),
                h.base_offset,
                self.next
            ));
            return Ok(false);
        }
        let end = b.position() + b.bytes().len() as u64;
        if self.pending_at.is_none() && end <= self.certain_until {
            sink.take(b)?;
        } else {
            self.pending_at.get_or_insert(b.position());
        }
        self.next = Offset(h.last_offset().0 + 1);
        self.valid_end = end;
        Ok(true)
    }

    fn stopped(&mut self, end: Option<&ScanEnd>, position: u64) {
        self.stop = Some(match end {
            Some(ScanEnd::Corrupt(e)) => e.to_string(),
            Some(ScanEnd::ZeroFilled { position }) => {
                self.zeros_from_start = *position == 0;
                format!("zeroes from position {position} on")
            }
            other => format!("{other:?} at position {position}"),
        });
    }

    /// Feeds the bytes at `position`, which continue those fed before (bytes before the
    /// stream's start are skipped). Returns `false` once the batches stopped.
    ///
    /// # Errors
    /// The sink's failure.
    pub fn feed<S: BatchSink>(
        &mut self,
        mut position: u64,
        mut data: &[u8],
        sink: &mut S,
    ) -> Result<bool, S::Error> {
        if self.stop.is_some() {
            return Ok(false);
        }
        if position < self.start {
            let skip = ((self.start - position) as usize).min(data.len());
            data = data.get(skip..).unwrap_or_default();
            position += skip as u64;
        }
        // First finish a batch cut by the previous chunk boundary.
        while !self.carry.is_empty() {
            let carried = std::mem::take(&mut self.carry);
            match inspect(&carried, self.valid_end) {
                Ok(b) => {
                    if !self.batch(&b, sink)? {
                        return Ok(false);
                    }
                }
                Err(FormatError::Incomplete { needed_bytes, .. }) => {
                    if needed_bytes > self.batch_bytes_max {
                        self.stop = Some(format!(
                            "batch at position {} declares {needed_bytes} bytes, more than an \
                             append can write",
                            self.valid_end
                        ));
                        return Ok(false);
                    }
                    self.carry = carried;
                    let want = (needed_bytes as usize).saturating_sub(self.carry.len());
                    let take = want.min(data.len());
                    self.carry
                        .extend_from_slice(data.get(..take).unwrap_or_default());
                    data = data.get(take..).unwrap_or_default();
                    position += take as u64;
                    if take < want {
                        return Ok(true);
                    }
                }
                Err(e) => {
                    self.stop = Some(e.to_string());
                    return Ok(false);
                }
            }
        }
        let mut scan = BatchIter::new(data, position);
        // The lookahead: the sink hears of the next batches' producers while this
        // one is validated and taken, so fetching their state overlaps.
        let lookahead = sink.lookahead();
        let mut ahead = (lookahead > 0).then(|| crate::format::producer_id_hints(data));
        if let Some(ahead) = ahead.as_mut() {
            for id in ahead.by_ref().take(lookahead) {
                sink.ahead(id);
            }
        }
        for b in scan.by_ref() {
            if let Some(id) = ahead.as_mut().and_then(Iterator::next) {
                sink.ahead(id);
            }
            if !self.batch(&b, sink)? {
                return Ok(false);
            }
        }
        match scan.end() {
            Some(ScanEnd::Clean) => Ok(true),
            Some(ScanEnd::Incomplete { .. }) => {
                let rest = (scan.valid_end_position() - position) as usize;
                self.carry = data.get(rest..).unwrap_or_default().to_vec();
                Ok(true)
            }
            end => {
                let end = end.cloned();
                self.stopped(end.as_ref(), scan.valid_end_position());
                Ok(false)
            }
        }
    }

    /// Feeds all of `data` (at `position`) and ends the stream; `Ok(true)` when it is whole
    /// valid batches to its last byte.
    ///
    /// # Errors
    /// The sink's failure.
    pub fn feed_all<S: BatchSink>(
        &mut self,
        position: u64,
        data: &[u8],
        sink: &mut S,
    ) -> Result<bool, S::Error> {
        self.feed(position, data, sink)?;
        self.finish();
        Ok(self.whole_to(position + data.len() as u64))
    }
}

/// Why [`scan_file`] stopped early.
#[derive(Debug)]
pub enum ScanError<E> {
    /// A read failed.
    Io(IoError),
    /// The sink failed.
    Sink(E),
}

/// Streams `[from, len)` of `file` into `stream` (whose start is `from`) with large O_DIRECT
/// reads in flight, until the end or the batches stop, then ends the stream.
///
/// # Errors
/// A read's or the sink's failure.
pub fn scan_file<S: BatchSink>(
    io: &mut dyn Io,
    file: FileId,
    from: u64,
    len: u64,
    stream: &mut BatchStream,
    sink: &mut S,
) -> Result<(), ScanError<S::Error>> {
    let mut reader = SequentialReader::new(file, from, len, SCAN_READ_BYTES, SCAN_READS_IN_FLIGHT);
    let streamed = loop {
        let chunk = match reader.next(io) {
            Ok(Some(c)) => c,
            Ok(None) => break Ok(()),
            Err(e) => break Err(ScanError::Io(e)),
        };
        let more = stream.feed(chunk.position, chunk.data(), sink);
        io.recycle(chunk.buf);
        match more {
            Ok(true) => {}
            Ok(false) => break Ok(()),
            Err(e) => break Err(ScanError::Sink(e)),
        }
    };
    reader.stop(io).map_err(ScanError::Io)?;
    streamed?;
    stream.finish();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BatchBuilder, BatchOptions, ProducerFields, RecordSpec};

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    fn batches(rng: &mut Rng, count: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut offset = 0i64;
        for _ in 0..count {
            let records = 1 + rng.below(5) as i32;
            let mut b = BatchBuilder::new(BatchOptions {
                base_offset: Offset(offset),
                producer: ProducerFields {
                    producer_id: 7,
                    producer_epoch: 0,
                    base_sequence: offset as i32,
                },
                ..BatchOptions::default()
            });
            let value = vec![0x33; rng.below(3000) as usize];
            for _ in 0..records {
                b.push(RecordSpec {
                    timestamp: 1,
                    key: None,
                    value: Some(&value),
                    headers: &[],
                });
            }
            out.extend_from_slice(&b.build());
            offset += i64::from(records);
        }
        out
    }

    /// Records what it is given.
    #[derive(Default)]
    struct Taken {
        positions: Vec<u64>,
        ahead: usize,
    }
    impl BatchSink for Taken {
        type Error = ();
        fn take(&mut self, b: &BatchView<'_>) -> Result<(), ()> {
            self.positions.push(b.position());
            Ok(())
        }
        fn lookahead(&self) -> usize {
            4
        }
        fn ahead(&mut self, _: i64) {
            self.ahead += 1;
        }
    }

    /// Feeding a buffer in chunks cut anywhere, from any batch boundary, finds the same
    /// batches, and the same place where they stop, as one pass over the whole buffer; every
    /// batch takes effect once.
    #[test]
    fn chunked_feeding_matches_a_whole_pass() {
        let seed = std::env::var("MIRRORLOG_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5ca7_7e55_u64);
        for case in 0..300u64 {
            let mut rng = Rng((seed.wrapping_add(case)) | 1);
            let count = 1 + rng.below(12) as usize;
            let mut data = batches(&mut rng, count);
            // Then: nothing, zeroes, garbage, or a cut batch.
            match rng.below(4) {
                1 => data.extend(std::iter::repeat_n(0u8, 1 + rng.below(5000) as usize)),
                2 => data.extend((0..rng.below(200)).map(|i| i as u8 ^ 0xa5)),
                3 => {
                    let more = batches(&mut rng, 1);
                    let cut = rng.below(more.len() as u64) as usize;
                    data.extend_from_slice(&more[..cut]);
                }
                _ => {}
            }
            let mut whole = BatchIter::new(&data, 0);
            let all: Vec<u64> = whole.by_ref().map(|b| b.position()).collect();
            let expected_end = whole.valid_end_position();
            // Start at a batch boundary; the first chunk may begin before it (an aligned read).
            let first = rng.below(all.len() as u64) as usize;
            let start = all[first];
            let mut stream = BatchStream::new(start, Offset(0), u64::MAX, 1 << 20);
            let mut taken = Taken::default();
            let mut at = rng.below(start + 1) as usize;
            while at < data.len() {
                let n = (1 + rng.below(9000) as usize).min(data.len() - at);
                if !stream
                    .feed(at as u64, &data[at..at + n], &mut taken)
                    .unwrap()
                {
                    break;
                }
                at += n;
            }
            stream.finish();
            assert_eq!(stream.valid_end(), expected_end, "case {case}");
            assert_eq!(taken.positions, all[first..], "case {case}");
            let ends_clean = expected_end == data.len() as u64;
            assert_eq!(
                stream.whole_to(data.len() as u64),
                ends_clean,
                "case {case}"
            );
            assert!(taken.positions.is_empty() || taken.ahead > 0, "case {case}");
            // The generated batches are all found; garbage or zeroes after them never pass.
            assert_eq!(all.len(), count, "case {case}");
        }
    }

    /// Batches past `certain_until` wait; a batch whose offset goes back stops the stream.
    #[test]
    fn uncertain_batches_wait_and_offsets_must_increase() {
        let mut rng = Rng(99);
        let data = batches(&mut rng, 6);
        let positions: Vec<u64> = BatchIter::new(&data, 0).map(|b| b.position()).collect();
        let mut stream = BatchStream::new(0, Offset(0), positions[3], 1 << 20);
        let mut taken = Taken::default();
        assert!(stream.feed_all(0, &data, &mut taken).unwrap());
        assert_eq!(taken.positions, positions[..3]);
        assert_eq!(stream.pending_at(), Some(positions[3]));

        let mut twice = data.clone();
        twice.extend_from_slice(&data);
        let mut stream = BatchStream::new(0, Offset(0), u64::MAX, 1 << 20);
        let mut taken = Taken::default();
        assert!(!stream.feed_all(0, &twice, &mut taken).unwrap());
        assert_eq!(stream.valid_end(), data.len() as u64);
        assert!(
            stream.stop().unwrap().contains("below"),
            "{:?}",
            stream.stop()
        );
    }
}
