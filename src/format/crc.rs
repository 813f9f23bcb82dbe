//! CRC-32C (Castagnoli), the checksum of Kafka record batches and snapshots.
//!
//! One function so the implementation can be swapped after measuring: the criterion bench
//! `format_fast_path` compares the candidate crates on the same bytes.

/// CRC-32C of `bytes`.
#[inline]
#[must_use]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_answer() {
        // The check value of CRC-32C (RFC 3720 appendix B.4): crc of "123456789".
        assert_eq!(super::crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(super::crc32c(&[]), 0);
    }
}
