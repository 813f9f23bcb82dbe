//! The partition-log tests' shared pieces (`partition_log*.rs`): the log config, client
//! batches, a filler of two producers' appends, and producer state as a snapshot keeps it.

use mirrorlog::format::{BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};
use mirrorlog::internals::io::Io;
use mirrorlog::internals::log::{LogConfig, PartitionLog};
use mirrorlog::internals::producer_state::Origin;

/// 32 KiB segments, 4 KiB index interval, 16 KiB append buffer.
pub const CONFIG: LogConfig = super::log_config(32 << 10, 4096, 16 << 10);

pub fn client_batch(producer_id: i64, seq: i32, records: i32, transactional: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id,
            producer_epoch: 0,
            base_sequence: seq,
        },
        transactional,
        ..BatchOptions::default()
    });
    let value = [7u8; 200];
    for i in 0..records {
        b.push(RecordSpec {
            timestamp: 1_764_403_200_000 + i64::from(seq + i),
            key: Some(b"k"),
            value: Some(&value),
            headers: &[],
        });
    }
    b.build()
}

/// Appends `n` client batches of two producers, committing now and then; returns (base, last)
/// offsets and the base sequence of each batch.
pub fn fill(io: &mut dyn Io, log: &mut PartitionLog, n: usize) -> Vec<(Offset, Offset, i32)> {
    let mut seqs = [0i32; 2];
    let mut out = Vec::new();
    for i in 0..n {
        let p = i % 2;
        let records = 1 + (i % 7) as i32;
        let outcome = log
            .append(
                io,
                &client_batch(p as i64, seqs[p], records, false),
                Origin::Client,
            )
            .unwrap();
        assert!(!outcome.duplicate);
        let expected = out
            .last()
            .map_or(Offset(0), |&(_, l, _): &(Offset, Offset, i32)| {
                Offset(l.0 + 1)
            });
        assert_eq!(outcome.first_offset, expected);
        out.push((outcome.first_offset, outcome.last_offset, seqs[p]));
        seqs[p] += records;
        if i % 5 == 4 {
            log.commit(io).unwrap();
        }
    }
    log.commit(io).unwrap();
    out
}

/// Producer state as a snapshot keeps it: id, epoch, last sequence, last offset, open txn.
pub type PsmSummary = Vec<(i64, i16, i32, Offset, Option<Offset>)>;

/// Producer state that survives a truncation: what a snapshot keeps of each entry.
pub fn psm_summary(log: &PartitionLog) -> PsmSummary {
    let mut v: Vec<_> = log
        .producer_state()
        .producers()
        .map(|e| {
            (
                e.producer_id,
                e.epoch,
                e.last_seq(),
                e.last_data_offset(),
                e.current_txn_first_offset,
            )
        })
        .collect();
    v.sort();
    v
}
