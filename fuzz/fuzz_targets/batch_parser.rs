//! The batch parser: the per-batch fast path, the client checks, record walking and the
//! iterator over a buffer of batches, on arbitrary bytes. Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mirrorlog::format::{self, BatchIter};

fuzz_target!(|data: &[u8]| {
    if let Ok(view) = format::inspect(data, 0) {
        let _ = view.validate_client();
        if let Ok(records) = view.records() {
            for r in records.flatten() {
                let _ = r.headers().count();
            }
        }
    }
    let mut scan = BatchIter::new(data, 0);
    for b in scan.by_ref() {
        let _ = b.validate_records();
    }
    let _ = scan.end();
});
