//! Arbitrary bytes as the records region of a batch whose header and CRC are made valid, so the
//! fuzzer reaches the record, header and control-record parsers instead of stopping at the CRC.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mirrorlog::format;

fuzz_target!(|input: (u8, i32, &[u8])| {
    let (flags, count, records) = input;
    let mut batch = Vec::with_capacity(61 + records.len());
    batch.extend_from_slice(&0i64.to_be_bytes());
    batch.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    batch.extend_from_slice(&0i32.to_be_bytes());
    batch.push(2);
    batch.extend_from_slice(&[0; 4]);
    // Control and transactional bits from the input; never a codec, so records are walked.
    let attributes = i16::from(flags & 0x30);
    batch.extend_from_slice(&attributes.to_be_bytes());
    batch.extend_from_slice(&count.saturating_sub(1).max(0).to_be_bytes());
    batch.extend_from_slice(&[0; 16]);
    batch.extend_from_slice(&(i64::from(flags & 1) * 5 - 1).to_be_bytes());
    batch.extend_from_slice(&[0; 6]);
    batch.extend_from_slice(&count.to_be_bytes());
    batch.extend_from_slice(records);
    let crc = format::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    if let Ok(view) = format::inspect(&batch, 0) {
        let _ = view.validate_client();
        if let Ok(records) = view.records() {
            records.flatten().for_each(|r| r.headers().for_each(drop));
        }
    }
});
