//! Opening a partition directory made of arbitrary bytes, on the simulated disk: the input is
//! cut into files (`[name index u8][length u16 BE][bytes]...`), then both the clean open and
//! recovery run over them. Either may refuse (typed errors); neither may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mirrorlog::internals::io::{self, Io, SimConfig, SimIo};
use mirrorlog::internals::log::{LogConfig, PartitionLog};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment::SegmentConfig;
use std::path::Path;

const NAMES: [&str; 12] = [
    "00000000000000000000.log",
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
    "00000000000000000000.txnindex",
    "00000000000000000000.snapshot",
    "00000000000000000007.log",
    "00000000000000000007.snapshot",
    "leader-epoch-checkpoint",
    "mirror-checkpoint",
    "mirror-mode",
    "log-start-offset",
    "clean-shutdown",
];

fuzz_target!(|data: &[u8]| {
    let dir = Path::new("/fuzz/p-0");
    // A bounded disk: preallocations past it are ENOSPC, not an out-of-memory of the fuzzer.
    let mut io = SimIo::new(SimConfig {
        disk_capacity_bytes: Some(64 << 20),
        ..SimConfig::default()
    });
    if io.create_dir(dir).is_err() {
        return;
    }
    let mut rest = data;
    while let [name, hi, lo, tail @ ..] = rest {
        let len = (usize::from(*hi) << 8 | usize::from(*lo)).min(tail.len());
        let (bytes, next) = tail.split_at(len);
        let path = dir.join(NAMES[usize::from(*name) % NAMES.len()]);
        let _ = io::write_file(&mut io, &path, bytes);
        rest = next;
    }
    let config = LogConfig {
        segment: SegmentConfig {
            segment_bytes: 1 << 20,
            index_interval_bytes: 4096,
            commit_buffer_bytes: 1 << 16,
            preallocate_step_bytes: mirrorlog::internals::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
        },
        ..LogConfig::default()
    };
    let _ = PartitionLog::open(&mut io, dir, config);
    let _ = recovery::recover(&mut io, dir, config);
});
