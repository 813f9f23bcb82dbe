//! The commit-record decoder, alone and as the choice among two slots.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mirrorlog::internals::segment::{CommitRecord, COMMIT_SLOT_SIZE_BYTES};

fuzz_target!(|data: &[u8]| {
    let _ = CommitRecord::decode(data);
    let _ = CommitRecord::newest(data.chunks(COMMIT_SLOT_SIZE_BYTES));
    let _ = mirrorlog::inspect::segment_data(data, mirrorlog::format::Offset(0));
});
