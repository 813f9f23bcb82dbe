//! The `.index`, `.txnindex`, `leader-epoch-checkpoint` and `mirror-checkpoint` decoders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mirrorlog::format::Offset;
use mirrorlog::internals::log::{EpochCache, ModeHistory};
use mirrorlog::internals::producer_state::decode_txn_index;
use mirrorlog::internals::segment::decode_offset_index;

fuzz_target!(|data: &[u8]| {
    let _ = decode_offset_index(data, Offset(0));
    let _ = decode_offset_index(data, Offset(i64::MAX - 10));
    let _ = decode_txn_index(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = EpochCache::decode(text);
        let _ = ModeHistory::decode(text);
    }
});
