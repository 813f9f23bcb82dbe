//! Recovery speed: a partition of `MIRRORLOG_BENCH_BYTES` (default 1 GiB) of 16 KiB batches is
//! written through the log and left without a clean close; then, in the same run, a raw io_uring
//! O_DIRECT sequential reader reads the same segment files, and `recovery::recover` recovers the
//! partition. Figures: MB/s of each and their ratio (issue "Recovery" goal: ≥ 0.80), plus the
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

    // Raw reader over the same files (page cache bypassed, as recovery's reads are).
    let mut io = UringIo::new(64).unwrap();
    let names = io.list_dir(dir.path()).unwrap();
    let bases = segment::offsets_named(&names, "log");
    let t = Instant::now();
    let mut raw_bytes = 0u64;
    for &b in &bases {
        let file = io::open(
            &mut io,
            &segment::log_path(dir.path(), b),
            OpenOptions {
                direct: true,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        raw_bytes += io::read_direct_all(&mut io, file).unwrap().len() as u64;
    }
    let raw_secs = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let mut recovered = recovery::recover(&mut io, dir.path(), config).unwrap();
    let recovery_secs = t.elapsed().as_secs_f64();
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
    recovered.append(&mut io, &b, Origin::Client).unwrap();
    recovered.commit(&mut io).unwrap();
    let first_append_secs = t.elapsed().as_secs_f64();
    assert_eq!(recovered.log_end(), Offset(next + 1));
    let mbps = |bytes: u64, secs: f64| bytes as f64 / secs / 1e6;
    println!(
        "recovery of {} MiB in {} segments after an unclean stop:",
        written >> 20,
        bases.len()
    );
    println!(
        "  raw O_DIRECT reader:  {:8.1} MB/s ({raw_bytes} bytes, files include preallocated slots)",
        mbps(raw_bytes, raw_secs)
    );
    println!(
        "  recovery::recover:    {:8.1} MB/s over the same files ({:.1} MB/s of log data)",
        mbps(raw_bytes, recovery_secs),
        mbps(written, recovery_secs)
    );
    println!(
        "  ratio recovery/raw:   {:.3} (goal >= 0.80)",
        raw_secs / recovery_secs
    );
    println!(
        "  time to first durable append after start: {:.3} s",
        first_append_secs
    );
}
