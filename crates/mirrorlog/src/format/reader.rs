//! A bounds-checked cursor over a byte slice: the only way parsers read bytes.
//!
//! Every read returns `None` (or a [`VarintError`]) instead of panicking, so decoders built on
//! it cannot index out of bounds whatever the input.

/// Longest zig-zag varint (32-bit) in bytes.
pub const VARINT_SIZE_BYTES_MAX: usize = 5;
/// Longest zig-zag varlong (64-bit) in bytes.
pub const VARLONG_SIZE_BYTES_MAX: usize = 10;

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// More continuation bytes than the type allows.
    TooLong,
    /// The buffer ended inside the varint.
    Truncated,
}

/// A forward-only reader over `bytes`.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    index: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    #[must_use]
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, index: 0 }
    }

    /// Bytes consumed so far.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Bytes not yet consumed.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.index)
    }

    /// The next `n` bytes, or `None` (consuming nothing) when fewer remain.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.index.checked_add(n)?;
        let slice = self.bytes.get(self.index..end)?;
        self.index = end;
        Some(slice)
    }

    /// The bytes from `start` up to the current index (already consumed).
    pub fn clone_range(&self, start: usize) -> Option<&'a [u8]> {
        self.bytes.get(start..self.index)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let slice = self.take(N)?;
        slice.try_into().ok()
    }

    /// Big-endian `i8`.
    pub fn i8(&mut self) -> Option<i8> {
        self.array::<1>().map(i8::from_be_bytes)
    }

    /// Big-endian `i16`.
    pub fn i16(&mut self) -> Option<i16> {
        self.array::<2>().map(i16::from_be_bytes)
    }

    /// Big-endian `i32`.
    pub fn i32(&mut self) -> Option<i32> {
        self.array::<4>().map(i32::from_be_bytes)
    }

    /// Big-endian `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        self.array::<4>().map(u32::from_be_bytes)
    }

    /// Big-endian `i64`.
    pub fn i64(&mut self) -> Option<i64> {
        self.array::<8>().map(i64::from_be_bytes)
    }

    /// A zig-zag varint of at most 5 bytes. As in Kafka's `ByteUtils.readVarint`, bits above
    /// 32 in the fifth byte are dropped.
    pub fn varint(&mut self) -> Result<i32, VarintError> {
        let raw = self.unsigned_varint(VARINT_SIZE_BYTES_MAX)?;
        let raw = raw as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A zig-zag varlong of at most 10 bytes.
    pub fn varlong(&mut self) -> Result<i64, VarintError> {
        let raw = self.unsigned_varint(VARLONG_SIZE_BYTES_MAX)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    fn unsigned_varint(&mut self, size_bytes_max: usize) -> Result<u64, VarintError> {
        let mut value: u64 = 0;
        let start = self.index;
        for i in 0..size_bytes_max {
            let Some(&byte) = self.bytes.get(start + i) else {
                return Err(VarintError::Truncated);
            };
            // Shifts stop at 63 (i ≤ 9), so no shift overflows; high bits beyond 64 are dropped.
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.index = start + i + 1;
                return Ok(value);
            }
        }
        Err(VarintError::TooLong)
    }
}

/// Appends the zig-zag varint encoding of `value` to `out`.
pub fn put_varint(out: &mut Vec<u8>, value: i32) {
    put_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Appends the zig-zag varlong encoding of `value` to `out`.
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    put_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

/// Size in bytes of the zig-zag varint encoding of `value`.
#[must_use]
pub fn varint_size(value: i32) -> usize {
    unsigned_size(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

/// Size in bytes of the zig-zag varlong encoding of `value`.
#[must_use]
pub fn varlong_size(value: i64) -> usize {
    unsigned_size(((value << 1) ^ (value >> 63)) as u64)
}

fn put_unsigned(out: &mut Vec<u8>, mut raw: u64) {
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

fn unsigned_size(raw: u64) -> usize {
    let bits = 64 - raw.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trips_edges() {
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN, 300, -300] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_size(v), "size of {v}");
            let mut r = Reader::new(&out);
            assert_eq!(r.varint(), Ok(v));
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn varlong_round_trips_edges() {
        for v in [0, 1, -1, i64::MAX, i64::MIN, 1 << 40, -(1 << 40)] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_size(v), "size of {v}");
            assert_eq!(Reader::new(&out).varlong(), Ok(v));
        }
    }

    #[test]
    fn kafka_known_encodings() {
        // Zig-zag: 0→0x00, -1→0x01, 1→0x02, -64→0x7f, 64→0x80 0x01.
        let mut out = Vec::new();
        for v in [0, -1, 1, -64, 64] {
            put_varint(&mut out, v);
        }
        assert_eq!(out, [0x00, 0x01, 0x02, 0x7f, 0x80, 0x01]);
    }

    #[test]
    fn too_long_and_truncated_are_distinguished() {
        let six = [0x80u8, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert_eq!(Reader::new(&six).varint(), Err(VarintError::TooLong));
        assert_eq!(
            Reader::new(&[0x80u8, 0x80]).varint(),
            Err(VarintError::Truncated)
        );
        let eleven = [0x80u8; 11];
        assert_eq!(Reader::new(&eleven).varlong(), Err(VarintError::TooLong));
        // A failed read consumes nothing.
        let mut r = Reader::new(&[0x80u8]);
        assert!(r.varint().is_err());
        assert_eq!(r.index(), 0);
    }

    #[test]
    fn fixed_reads_stop_at_the_end() {
        let mut r = Reader::new(&[0, 0, 0, 7, 9]);
        assert_eq!(r.i32(), Some(7));
        assert_eq!(r.i16(), None);
        assert_eq!(r.i8(), Some(9));
        assert_eq!(r.i8(), None);
    }
}
