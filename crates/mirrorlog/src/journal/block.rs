//! A journal block: one commit round's entries, page-aligned, under one CRC-32C.
//!
//! Block layout (big-endian):
//!
//! ```text
//!  0 magic u32 "MLJB"   4 version u16 (1)   6 crc u32: CRC-32C of [10, 32 + payload_len)
//! 10 lsn u64            18 block_bytes u32 (a multiple of 4096, padding included)
//! 22 payload_len u32    26 entry_count u32  30 reserved u16 (0)
//! 32 payload: entry_count entries, then zeroes to block_bytes
//! ```
//!
//! Entry layout (within the payload):
//!
//! ```text
//! 0 key_len u16   2 key (UTF-8, the partition directory's name)
//! then: segment_base i64, segment_id u64, record_sequence u64, start u64, inline_from u64,
//! end u64, next_offset i64 (56 bytes), then the inline bytes: segment positions
//! [inline_from, end)
//! ```
//!
//! `start ≤ inline_from ≤ end`; `next_offset` is the offset after the entry's last batch. An
//! entry applies only to the segment writer that wrote it (`segment_id`, in its commit
//! records) on top of the record it followed (`record_sequence`): a checkpoint, a truncation or
//! a replay writes a newer record, after which the entry never applies again.

use super::{page_ceil, JournalError, BLOCK_BYTES_MAX, KEY_BYTES_MAX};
use crate::format::reader::Reader;
use crate::format::{crc32c, Offset};

/// Bytes before a block's payload.
pub const BLOCK_HEADER_SIZE_BYTES: usize = 32;
/// An entry's bytes besides its key and inline bytes.
pub const ENTRY_FIXED_SIZE_BYTES: usize = 2 + 56;
const MAGIC: u32 = u32::from_be_bytes(*b"MLJB");
const VERSION: u16 = 1;
const CRC_START: usize = 10;

/// One partition's part of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The partition directory's name.
    pub key: &'a str,
    /// The segment the bytes belong to.
    pub segment_base: Offset,
    /// The segment writer's identity, as its commit records carry it.
    pub segment_id: u64,
    /// The sequence of the segment's newest commit record when the entry was written.
    pub record_sequence: u64,
    /// The segment's durable end before the round: where the entry's bytes start.
    pub start: u64,
    /// Where the inline bytes start; `[start, inline_from)` were written to the segment file
    /// and synced by the same round.
    pub inline_from: u64,
    /// The segment's end after the round.
    pub end: u64,
    /// The offset after the entry's last batch.
    pub next_offset: Offset,
    /// The bytes of `[inline_from, end)`.
    pub inline: &'a [u8],
}

impl Entry<'_> {
    /// Its encoded size.
    #[must_use]
    pub fn encoded_bytes(&self) -> usize {
        ENTRY_FIXED_SIZE_BYTES + self.key.len() + self.inline.len()
    }

    fn check(&self) -> Result<(), String> {
        if self.key.is_empty() || self.key.len() > KEY_BYTES_MAX {
            return Err(format!("key of {} bytes", self.key.len()));
        }
        if !(self.start <= self.inline_from && self.inline_from <= self.end) {
            return Err(format!(
                "positions start {} inline_from {} end {} out of order",
                self.start, self.inline_from, self.end
            ));
        }
        if self.end - self.inline_from != self.inline.len() as u64 {
            return Err(format!(
                "{} inline bytes for [{}, {})",
                self.inline.len(),
                self.inline_from,
                self.end
            ));
        }
        Ok(())
    }
}

/// Builds one block in a caller's buffer (an aligned buffer the block is written from).
#[derive(Debug, Default)]
pub struct BlockBuilder {
    payload_len: usize,
    entries: u32,
}

impl BlockBuilder {
    /// An empty block.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries pushed so far.
    #[must_use]
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// The block's size once finished with one more entry of `entry_bytes`.
    #[must_use]
    pub fn bytes_with(&self, entry_bytes: usize) -> usize {
        page_ceil(BLOCK_HEADER_SIZE_BYTES + self.payload_len + entry_bytes)
    }

    /// Appends `entry` into `buf` (the block's buffer, header space included).
    ///
    /// # Errors
    /// [`JournalError::EntryRefused`] when the entry is malformed or the block would exceed
    /// `buf` or [`BLOCK_BYTES_MAX`]; nothing is written then.
    pub fn push(&mut self, buf: &mut [u8], entry: &Entry<'_>) -> Result<(), JournalError> {
        entry.check().map_err(JournalError::EntryRefused)?;
        let at = BLOCK_HEADER_SIZE_BYTES + self.payload_len;
        let len = entry.encoded_bytes();
        let block_bytes = self.bytes_with(len);
        if block_bytes > buf.len().min(BLOCK_BYTES_MAX) {
            return Err(JournalError::EntryRefused(format!(
                "a {len}-byte entry makes a {block_bytes}-byte block, over the buffer's {} or \
                 the limit {BLOCK_BYTES_MAX}",
                buf.len()
            )));
        }
        let out = &mut buf[at..at + len];
        let key = entry.key.as_bytes();
        out[0..2].copy_from_slice(&(key.len() as u16).to_be_bytes());
        let mut p = 2 + key.len();
        out[2..p].copy_from_slice(key);
        for field in [
            entry.segment_base.0.to_be_bytes(),
            entry.segment_id.to_be_bytes(),
            entry.record_sequence.to_be_bytes(),
            entry.start.to_be_bytes(),
            entry.inline_from.to_be_bytes(),
            entry.end.to_be_bytes(),
            entry.next_offset.0.to_be_bytes(),
        ] {
            out[p..p + 8].copy_from_slice(&field);
            p += 8;
        }
        out[p..].copy_from_slice(entry.inline);
        self.payload_len += len;
        self.entries += 1;
        Ok(())
    }

    /// Writes the header (lsn, CRC) and the padding; returns the block's size. The builder is
    /// empty again afterwards.
    ///
    /// # Panics
    /// If `buf` is shorter than the block (the entries were pushed into a longer one).
    pub fn finish(&mut self, buf: &mut [u8], lsn: u64) -> usize {
        let end = BLOCK_HEADER_SIZE_BYTES + self.payload_len;
        let block_bytes = page_ceil(end);
        buf[end..block_bytes].fill(0);
        buf[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        buf[4..6].copy_from_slice(&VERSION.to_be_bytes());
        buf[10..18].copy_from_slice(&lsn.to_be_bytes());
        buf[18..22].copy_from_slice(&(block_bytes as u32).to_be_bytes());
        buf[22..26].copy_from_slice(&(self.payload_len as u32).to_be_bytes());
        buf[26..30].copy_from_slice(&self.entries.to_be_bytes());
        buf[30..32].fill(0);
        let crc = crc32c(&buf[CRC_START..end]);
        buf[6..10].copy_from_slice(&crc.to_be_bytes());
        *self = Self::default();
        block_bytes
    }
}

/// A decoded block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockView<'a> {
    /// Its position in the file.
    pub position: u64,
    /// Its lsn.
    pub lsn: u64,
    /// Its size, padding included.
    pub block_bytes: u64,
    /// Its entries, in the order written.
    pub entries: Vec<Entry<'a>>,
}

impl<'a> BlockView<'a> {
    /// Decodes the block at the start of `bytes` (the file from `position` on).
    ///
    /// # Errors
    /// [`JournalError::BadBlock`] / [`JournalError::BadEntry`]: not a whole valid block.
    pub fn decode(bytes: &'a [u8], position: u64) -> Result<Self, JournalError> {
        let bad = |what: String| JournalError::BadBlock { position, what };
        let header = bytes
            .get(..BLOCK_HEADER_SIZE_BYTES)
            .ok_or_else(|| bad("truncated header".into()))?;
        let mut r = Reader::new(header);
        let magic = r.u32().unwrap_or_default();
        if magic != MAGIC {
            return Err(bad(if magic == 0 {
                "no block".into()
            } else {
                format!("magic {magic:#010x}")
            }));
        }
        let version = r.array::<2>().map(u16::from_be_bytes).unwrap_or_default();
        if version != VERSION {
            return Err(bad(format!("version {version}")));
        }
        let stored = r.u32().unwrap_or_default();
        let lsn = r.i64().unwrap_or_default() as u64;
        let block_bytes = r.u32().unwrap_or_default() as usize;
        let payload_len = r.u32().unwrap_or_default() as usize;
        let entry_count = r.u32().unwrap_or_default();
        let end = BLOCK_HEADER_SIZE_BYTES.saturating_add(payload_len);
        if block_bytes > BLOCK_BYTES_MAX || block_bytes != page_ceil(end) {
            return Err(bad(format!(
                "{block_bytes} block bytes for a {payload_len}-byte payload"
            )));
        }
        if bytes.len() < block_bytes {
            return Err(bad(format!("{block_bytes}-byte block past the file's end")));
        }
        let covered = &bytes[CRC_START..end];
        let computed = crc32c(covered);
        if computed != stored {
            return Err(bad(format!(
                "crc stored {stored:#010x}, computed {computed:#010x}"
            )));
        }
        let mut r = Reader::new(&bytes[BLOCK_HEADER_SIZE_BYTES..end]);
        let mut entries = Vec::new();
        for index in 0..entry_count as usize {
            let entry = decode_entry(&mut r).map_err(|what| JournalError::BadEntry {
                position,
                index,
                what,
            })?;
            entries.push(entry);
        }
        if r.remaining() != 0 {
            return Err(bad(format!(
                "{} payload bytes after {entry_count} entries",
                r.remaining()
            )));
        }
        Ok(BlockView {
            position,
            lsn,
            block_bytes: block_bytes as u64,
            entries,
        })
    }
}

fn decode_entry<'a>(r: &mut Reader<'a>) -> Result<Entry<'a>, String> {
    let short = || "truncated".to_string();
    let key_len = r.array::<2>().map(u16::from_be_bytes).ok_or_else(short)?;
    let key = r.take(usize::from(key_len)).ok_or_else(short)?;
    let key = std::str::from_utf8(key).map_err(|_| "key is not UTF-8".to_string())?;
    let mut field = || r.i64().ok_or_else(short);
    let segment_base = Offset(field()?);
    let segment_id = field()? as u64;
    let record_sequence = field()? as u64;
    let start = field()? as u64;
    let inline_from = field()? as u64;
    let end = field()? as u64;
    let next_offset = Offset(field()?);
    let inline_len = end
        .checked_sub(inline_from)
        .filter(|_| start <= inline_from)
        .ok_or_else(|| format!("positions start {start} inline_from {inline_from} end {end}"))?;
    let inline = usize::try_from(inline_len)
        .ok()
        .and_then(|n| r.take(n))
        .ok_or_else(|| format!("{inline_len} inline bytes past the payload"))?;
    let entry = Entry {
        key,
        segment_base,
        segment_id,
        record_sequence,
        start,
        inline_from,
        end,
        next_offset,
        inline,
    };
    entry.check()?;
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(key: &'a str, start: u64, inline: &'a [u8]) -> Entry<'a> {
        Entry {
            key,
            segment_base: Offset(10),
            segment_id: 77,
            record_sequence: 3,
            start,
            inline_from: start,
            end: start + inline.len() as u64,
            next_offset: Offset(20),
            inline,
        }
    }

    #[test]
    fn a_block_round_trips_and_pads_to_pages() {
        let mut buf = vec![0xAAu8; BLOCK_BYTES_MAX];
        let mut b = BlockBuilder::new();
        let data = vec![7u8; 5000];
        b.push(&mut buf, &entry("t-0", 100, &data)).unwrap();
        let referenced = Entry {
            inline_from: 300_000,
            end: 300_010,
            inline: &data[..10],
            ..entry("topic-12", 0, &[])
        };
        b.push(&mut buf, &referenced).unwrap();
        assert_eq!(b.entries(), 2);
        let len = b.finish(&mut buf, 42);
        assert_eq!(len, 8192);
        assert_eq!(b.entries(), 0);
        let v = BlockView::decode(&buf[..len], 4096).unwrap();
        assert_eq!((v.lsn, v.block_bytes, v.position), (42, 8192, 4096));
        assert_eq!(v.entries, vec![entry("t-0", 100, &data), referenced]);
    }

    #[test]
    fn any_flipped_byte_of_the_covered_range_is_refused() {
        let mut buf = vec![0u8; 8192];
        let mut b = BlockBuilder::new();
        b.push(&mut buf, &entry("p-1", 0, b"hello")).unwrap();
        let len = b.finish(&mut buf, 1);
        let covered = BLOCK_HEADER_SIZE_BYTES + ENTRY_FIXED_SIZE_BYTES + 3 + 5;
        for i in (0..covered).filter(|&i| !(6..10).contains(&i)) {
            let mut torn = buf.clone();
            torn[i] ^= 0x40;
            assert!(BlockView::decode(&torn[..len], 0).is_err(), "byte {i}");
        }
        assert!(BlockView::decode(&buf[..100], 0).is_err());
        assert!(BlockView::decode(&[0u8; 4096], 0).is_err());
    }

    #[test]
    fn malformed_entries_are_refused_before_anything_is_written() {
        let mut buf = vec![0u8; 8192];
        let mut b = BlockBuilder::new();
        let long = "k".repeat(KEY_BYTES_MAX + 1);
        let backwards = Entry {
            inline_from: 5,
            ..entry("k", 9, &[])
        };
        let too_big = vec![0u8; 8192];
        for e in [
            entry("", 0, b"x"),
            entry(&long, 0, b"x"),
            backwards,
            Entry {
                end: 100,
                ..entry("k", 0, b"x")
            },
            entry("k", 0, &too_big),
        ] {
            assert!(matches!(
                b.push(&mut buf, &e),
                Err(JournalError::EntryRefused(_))
            ));
        }
        assert_eq!(b.entries(), 0);
    }

    #[test]
    fn random_bytes_never_panic_the_decoder() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut buf = vec![0u8; 8192];
        let mut b = BlockBuilder::new();
        b.push(&mut buf, &entry("p-1", 0, &[3u8; 300])).unwrap();
        let len = b.finish(&mut buf, 9);
        for _ in 0..2000 {
            let mut bytes = buf[..len].to_vec();
            for _ in 0..(next() % 8 + 1) {
                let i = (next() % len as u64) as usize;
                bytes[i] = next() as u8;
            }
            let cut = (next() % (len as u64 + 1)) as usize;
            // Re-seal the CRC so that the entry decoder, not the CRC, meets the damage.
            let payload = u32::from_be_bytes([bytes[22], bytes[23], bytes[24], bytes[25]]);
            let end = BLOCK_HEADER_SIZE_BYTES + payload as usize;
            if end <= cut {
                let crc = crc32c(&bytes[CRC_START..end]);
                bytes[6..10].copy_from_slice(&crc.to_be_bytes());
            }
            let _ = BlockView::decode(&bytes[..cut], 0);
        }
    }
}
