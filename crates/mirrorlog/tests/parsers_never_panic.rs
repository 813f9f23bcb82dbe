//! The proptest equivalents of the cargo-fuzz targets in `fuzz/` that CI runs on every build
//! (batch bytes have theirs in `tests/format_properties.rs`, `dump` and `verify` in
//! `tests/mirrorlog_tool.rs`): the snapshot, index, checkpoint and commit-record decoders on
//! arbitrary bytes, opening and recovering a partition directory made of arbitrary files on
//! the simulated disk, and the batch codecs' decompression. Every one may refuse; none may
//! panic. Cases per property: 512 (1024 for the decoders).

use mirrorlog::format::Offset;
use mirrorlog::internals::io::{self, Io, SimConfig, SimIo};
use mirrorlog::internals::log::{EpochCache, LogConfig, ModeHistory, PartitionLog};
use mirrorlog::internals::producer_state::{
    decode_snapshot, decode_txn_index, ProducerStateConfig, ProducerStateManager,
};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment::{
    decode_offset_index, CommitRecord, SegmentConfig, COMMIT_SLOT_SIZE_BYTES,
};
use proptest::prelude::*;
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = decode_snapshot(&bytes);
        let mut psm = ProducerStateManager::new(ProducerStateConfig::default());
        let _ = psm.load_snapshot(&bytes, 0);
        let _ = decode_offset_index(&bytes, Offset(0));
        let _ = decode_offset_index(&bytes, Offset(i64::MAX - 10));
        let _ = decode_txn_index(&bytes);
        let _ = CommitRecord::decode(&bytes);
        let _ = CommitRecord::newest(bytes.chunks(COMMIT_SLOT_SIZE_BYTES));
        let text = String::from_utf8_lossy(&bytes);
        let _ = EpochCache::decode(&text);
        let _ = ModeHistory::decode(&text);
    }

    /// The four codecs on arbitrary payloads and on valid ones with bytes flipped: an error or
    /// at most the limit, never a panic or more.
    #[test]
    fn decompression_never_panics_nor_passes_its_limit(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        flips in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..8),
        limit in 0usize..70_000,
    ) {
        use mirrorlog::format::{compression, Compression};
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
            if let Ok(out) = compression::decompress(codec, &bytes, limit) {
                prop_assert!(out.len() <= limit);
            }
            let records: Vec<u8> = bytes.iter().cycle().take(bytes.len() * 30).copied().collect();
            let mut good = compression::compress(codec, &records).unwrap();
            for (at, x) in &flips {
                if !good.is_empty() {
                    let i = usize::from(*at) % good.len();
                    good[i] ^= x;
                }
            }
            if let Ok(out) = compression::decompress(codec, &good, limit) {
                prop_assert!(out.len() <= limit);
            }
        }
    }

    /// Text that looks like a checkpoint, damaged.
    #[test]
    fn checkpoint_like_text_never_panics(lines in proptest::collection::vec("[0-9a-z -]{0,24}", 0..8)) {
        let text = lines.join("\n");
        let _ = EpochCache::decode(&text);
        let _ = ModeHistory::decode(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A partition directory made of arbitrary files: the clean open and recovery refuse or
    /// open it; neither panics.
    #[test]
    fn a_partition_directory_of_arbitrary_bytes_never_panics(
        files in proptest::collection::vec((0..NAMES.len(), proptest::collection::vec(any::<u8>(), 0..3000)), 0..6)
    ) {
        let dir = Path::new("/prop/p-0");
        let mut io = SimIo::new(SimConfig {
            disk_capacity_bytes: Some(64 << 20),
            ..SimConfig::default()
        });
        io.create_dir(dir).unwrap();
        for (name, bytes) in &files {
            io::write_file(&mut io, &dir.join(NAMES[*name]), bytes).unwrap();
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
    }
}
