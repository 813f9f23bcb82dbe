//! The producer-state snapshot decoder, and loading the bytes into a PSM.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mirrorlog::internals::producer_state::{decode_snapshot, ProducerStateConfig, ProducerStateManager};

fuzz_target!(|data: &[u8]| {
    let _ = decode_snapshot(data);
    let mut psm = ProducerStateManager::new(ProducerStateConfig::default());
    let _ = psm.load_snapshot(data, 0);
});
