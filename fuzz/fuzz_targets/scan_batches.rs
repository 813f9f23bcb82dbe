//! Arbitrary bytes through the batch scanner and every record walker: must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mirrorlog::format::BatchIter;

fuzz_target!(|data: &[u8]| {
    let mut scan = BatchIter::new(data, 0);
    for batch in scan.by_ref() {
        let _ = batch.validate_client();
        if let Ok(records) = batch.records() {
            for record in records.flatten() {
                for header in record.headers() {
                    std::hint::black_box(header);
                }
            }
        }
    }
    assert!(scan.end().is_some());
});
