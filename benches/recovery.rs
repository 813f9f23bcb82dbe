//! Recovery speed: a partition of `MIRRORLOG_BENCH_BYTES` (default 1 GiB) of 16 KiB batches is
//! written through the log and left without a clean close; then, in the same run, a raw io_uring
//! O_DIRECT sequential reader reads the same segment files (the same read size and reads in
//! flight as recovery), and `recovery::recover` recovers the partition. Figures: MB/s of each and their ratio (issue "Recovery" goal: ≥ 0.80), plus the
//! time from the start of recovery to the first append accepted.

use mirrorlog::format::{self, BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};
use mirrorlog::io::{self, Io, OpenOptions, UringIo};
use mirrorlog::log::{LogConfig, PartitionLog};
use mirrorlog::producer_state::Origin;
use mirrorlog::recovery;
use mirrorlog::segment::{self, SegmentConfig};
use std::time::Instant;

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let total: u64 = std::env::var("MIRRORLOG_BENCH_BYTES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 8 << 20 } else { 1 << 30 });
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let config = LogConfig {
        segment: SegmentConfig {
            segment_bytes: 256 << 20,
            index_interval_bytes: 4096,
            commit_buffer_bytes: 2 << 20,
        },
        ..LogConfig::default()
    };
    let mut io = UringIo::new(64).unwrap();
    let mut template = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: 1,
            producer_epoch: 0,
            base_sequence: 0,
        },
        ..BatchOptions::default()
    });
    while template.size_bytes() + 1020 <= 16 << 10 {
        template.push(RecordSpec {
            timestamp: 1_764_403_200_000,
            key: None,
            value: Some(&[0x61; 1000]),
            headers: &[],
        });
    }
    let template = template.build();
    let records = i64::from(
        format::inspect(&template, 0)
            .unwrap()
            .header()
            .last_offset_delta,
    ) + 1;
    let per_chunk = (1 << 20) / template.len();
    let mut chunk = Vec::new();
    for _ in 0..per_chunk {
        chunk.extend_from_slice(&template);
    }
    let mut log = PartitionLog::create(&mut io, dir.path(), config).unwrap();
    let mut next = 0i64;
    let mut written = 0u64;
    while written < total {
        for at in (0..chunk.len()).step_by(template.len()) {
            format::stamp_base_offset(&mut chunk[at..], Offset(next)).unwrap();
            next += records;
        }
        log.append(&mut io, &chunk, Origin::Mirror).unwrap();
        log.commit(&mut io).unwrap();
        written += chunk.len() as u64;
        if written % (256 << 20) < chunk.len() as u64 {
            eprintln!("recovery bench: wrote {} MiB", written >> 20);
        }
    }
    drop(log); // no clean close: the next start recovers
    drop(io);

    let b = {
        let mut b = BatchBuilder::new(BatchOptions::default());
        b.push(RecordSpec {
            timestamp: 0,
            key: None,
            value: Some(b"x"),
            headers: &[],
        });
        b.build()
    };
    let mut io = UringIo::new(64).unwrap();
    let segments = segment::offsets_named(&io.list_dir(dir.path()).unwrap(), "log").len();
    // Alternating rounds (the host's caches warm whichever runs second); each side's best.
    let rounds = 3;
    let (mut raw_best, mut recovery_best, mut first_append_best) = (f64::MAX, f64::MAX, f64::MAX);
    let mut raw_bytes = 0;
    for round in 0..rounds {
        let t = Instant::now();
        raw_bytes = raw_read(&mut io, dir.path());
        raw_best = raw_best.min(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let mut recovered = recovery::recover(&mut io, dir.path(), config).unwrap();
        recovery_best = recovery_best.min(t.elapsed().as_secs_f64());
        if round + 1 == rounds {
            recovered.append(&mut io, &b, Origin::Client).unwrap();
            recovered.commit(&mut io).unwrap();
            first_append_best = first_append_best.min(t.elapsed().as_secs_f64());
            assert_eq!(recovered.log_end(), Offset(next + 1));
        } else {
            assert_eq!(recovered.log_end(), Offset(next));
        }
        drop(recovered); // unclean again: the next round recovers too
    }
    let mbps = |bytes: u64, secs: f64| bytes as f64 / secs / 1e6;
    let raw = mbps(raw_bytes, raw_best);
    let recovered = mbps(written, recovery_best);
    println!(
        "recovery of {} MiB in {segments} segments after an unclean stop (best of {rounds} alternating rounds):",
        written >> 20,
    );
    println!(
        "  raw O_DIRECT reader:  {raw:8.1} MB/s ({raw_bytes} bytes: each file up to its preallocated space)"
    );
    println!(
        "  recovery::recover:    {recovered:8.1} MB/s of log data ({:.1} s)",
        recovery_best
    );
    println!(
        "  ratio recovery/raw:   {:.3} (goal >= 0.80)",
        recovered / raw
    );
    println!(
        "  time to first durable append after start: {:.3} s",
        first_append_best
    );
}

/// Reads every segment file up to its preallocated space with the same reads recovery makes
/// (size and depth), page cache bypassed; returns the data bytes read.
fn raw_read(io: &mut UringIo, dir: &std::path::Path) -> u64 {
    let names = io.list_dir(dir).unwrap();
    let mut bytes = 0u64;
    for b in segment::offsets_named(&names, "log") {
        let file = io::open(
            io,
            &segment::log_path(dir, b),
            OpenOptions {
                direct: true,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        let len = io.file_len(file).unwrap();
        let mut reader = io::SequentialReader::new(
            file,
            0,
            len,
            recovery::READ_BYTES,
            recovery::READS_IN_FLIGHT,
        );
        while let Some(chunk) = reader.next(io).unwrap() {
            // Like recovery, stop at the preallocated (zero) space past the data: reading
            // unwritten extents costs no device I/O and would flatter the reader.
            let zeroes = chunk.data().iter().all(|&b| b == 0);
            if !zeroes {
                bytes += chunk.bytes as u64;
            }
            io.recycle(chunk.buf);
            if zeroes {
                break;
            }
        }
        reader.stop(io).unwrap();
        let mut others = Vec::new();
        io::run(io, io::Op::Close { file }, &mut others)
            .unwrap()
            .result
            .unwrap();
    }
    bytes
}
