//! The four codecs of Kafka's record batches, for the paths that must see inside a compressed
//! batch (ListOffsets by timestamp, compaction) and the builder that writes them. Never on the
//! append path: appends store compressed batches opaque (their CRC covers the compressed bytes).
//!
//! The payload is the batch's records region; what it decompresses to is the records, back to
//! back, exactly as in an uncompressed batch. Each codec as Kafka writes and reads it:
//! - **gzip**: RFC 1952, members concatenated allowed (Java's `GZIPInputStream`).
//! - **snappy**: Kafka's Java client writes xerial's framing (`SnappyOutputStream`: the 16-byte
//!   header `0x82 "SNAPPY" 0x00`, version, compatible version, then blocks of a 4-byte
//!   big-endian length and raw snappy); librdkafka writes raw snappy. Both are read; xerial
//!   framing is written, as Kafka's Java producer does.
//! - **lz4**: the LZ4 frame format (`KafkaLZ4BlockOutputStream`, with the v2 format's correct
//!   header checksum); written with independent 64 KiB blocks and no checksums.
//! - **zstd**: a zstd frame (`ZstdInputStream`), written at level 3.
//!
//! Bounds: every decompression takes `limit_bytes` and fails with [`CodecError::TooLarge`]
//! before producing more, so a small hostile payload (a zip bomb) allocates at most the limit.
//! Corrupt payloads are [`CodecError::Corrupt`], never a panic.

use super::Compression;
use std::io::Read;

/// xerial's snappy framing header: magic, then version 1 and compatible version 1.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// The framing header's length (magic and the two versions).
const XERIAL_HEADER_SIZE_BYTES: usize = 16;
/// Uncompressed bytes per xerial block when writing (xerial's default block size).
const XERIAL_BLOCK_SIZE_BYTES: usize = 32 << 10;
/// zstd's level when writing (Kafka's default `compression.zstd.level`).
const ZSTD_LEVEL: i32 = 3;
/// gzip's level when writing (Kafka's default `compression.gzip.level`: zlib's default 6).
const GZIP_LEVEL: u32 = 6;

/// Why a payload could not be compressed or decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The payload is not valid for its codec (or ends early).
    #[error("{codec:?} payload is corrupt: {what}")]
    Corrupt {
        /// The codec.
        codec: Compression,
        /// What the decoder reported.
        what: String,
    },
    /// The payload decompresses to more than the limit.
    #[error("{codec:?} payload decompresses to more than {limit_bytes} bytes")]
    TooLarge {
        /// The codec.
        codec: Compression,
        /// The limit given.
        limit_bytes: usize,
    },
}

/// Decompresses `payload` (a batch's records region) of codec `codec`, to at most
/// `limit_bytes`. `Compression::None` returns the payload as it is (within the limit).
///
/// # Errors
/// [`CodecError::Corrupt`] for a payload its codec cannot decode, [`CodecError::TooLarge`]
/// when it would exceed `limit_bytes`.
pub fn decompress(
    codec: Compression,
    payload: &[u8],
    limit_bytes: usize,
) -> Result<Vec<u8>, CodecError> {
    let corrupt = |what: String| CodecError::Corrupt { codec, what };
    match codec {
        Compression::None => {
            if payload.len() > limit_bytes {
                return Err(CodecError::TooLarge { codec, limit_bytes });
            }
            Ok(payload.to_vec())
        }
        Compression::Gzip => read_bounded(
            codec,
            flate2::read::MultiGzDecoder::new(payload),
            limit_bytes,
        ),
        Compression::Snappy => match payload.strip_prefix(&XERIAL_MAGIC[..]) {
            Some(_) => decompress_xerial(payload, limit_bytes),
            None => decompress_snappy_block(payload, limit_bytes, 0),
        },
        Compression::Lz4 => {
            // The streaming decoder takes a frame cut short for a finished one: the frames'
            // structure is checked first, whole, without decompressing.
            check_lz4_frames(payload).map_err(corrupt)?;
            let decoder = lz4::Decoder::new(payload).map_err(|e| corrupt(e.to_string()))?;
            read_bounded(codec, decoder, limit_bytes)
        }
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::with_buffer(payload)
                .map_err(|e| corrupt(e.to_string()))?;
            read_bounded(codec, decoder, limit_bytes)
        }
    }
}

/// Compresses `records` (records back to back) with `codec`, as Kafka's Java producer writes
/// it (see the module docs).
///
/// # Errors
/// [`CodecError::Corrupt`] if the encoder fails (it does not on in-memory buffers; the error
/// is kept rather than a panic).
pub fn compress(codec: Compression, records: &[u8]) -> Result<Vec<u8>, CodecError> {
    use std::io::Write;
    let failed = |e: std::io::Error| CodecError::Corrupt {
        codec,
        what: e.to_string(),
    };
    match codec {
        Compression::None => Ok(records.to_vec()),
        Compression::Gzip => {
            let mut e =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(GZIP_LEVEL));
            e.write_all(records).map_err(failed)?;
            e.finish().map_err(failed)
        }
        Compression::Snappy => {
            let mut out = Vec::with_capacity(XERIAL_HEADER_SIZE_BYTES + records.len() / 2);
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for block in records.chunks(XERIAL_BLOCK_SIZE_BYTES) {
                let compressed = encoder
                    .compress_vec(block)
                    .map_err(|e| failed(std::io::Error::other(e)))?;
                let len = i32::try_from(compressed.len())
                    .map_err(|e| failed(std::io::Error::other(e)))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let mut e = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .build(Vec::new())
                .map_err(failed)?;
            e.write_all(records).map_err(failed)?;
            let (out, finished) = e.finish();
            finished.map_err(failed)?;
            Ok(out)
        }
        Compression::Zstd => zstd::bulk::compress(records, ZSTD_LEVEL).map_err(failed),
    }
}

/// Everything `reader` yields, failing once it passes `limit_bytes`.
fn read_bounded(
    codec: Compression,
    reader: impl Read,
    limit_bytes: usize,
) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| CodecError::Corrupt {
            codec,
            what: e.to_string(),
        })?;
    if out.len() > limit_bytes {
        return Err(CodecError::TooLarge { codec, limit_bytes });
    }
    Ok(out)
}

/// The LZ4 frame magic number (little-endian on the wire).
const LZ4_FRAME_MAGIC: u32 = 0x184D_2204;

/// Checks that `payload` is one or more whole LZ4 frames: magic, a version-1 descriptor, every
/// block's length inside its frame's block maximum and inside the payload, the end mark and
/// the optional checksums present. Checksums are not recomputed: the batch's CRC-32C already
/// covers every byte of the payload.
fn check_lz4_frames(payload: &[u8]) -> Result<(), String> {
    let mut rest = payload;
    loop {
        let take = |rest: &mut &[u8], n: usize, what: &str| -> Result<(), String> {
            *rest = rest
                .get(n..)
                .ok_or_else(|| format!("frame cut short in {what}"))?;
            Ok(())
        };
        let magic = rest
            .first_chunk::<4>()
            .map(|m| u32::from_le_bytes(*m))
            .ok_or("frame cut short in its magic")?;
        if magic != LZ4_FRAME_MAGIC {
            return Err(format!("bad frame magic {magic:#x}"));
        }
        take(&mut rest, 4, "the magic")?;
        let (&flg, after) = rest.split_first().ok_or("frame cut short in its FLG")?;
        let (&bd, _) = after.split_first().ok_or("frame cut short in its BD")?;
        if flg >> 6 != 1 {
            return Err(format!("frame version {} (FLG {flg:#04x})", flg >> 6));
        }
        let block_max_bytes: u32 = match (bd >> 4) & 0x7 {
            4 => 64 << 10,
            5 => 256 << 10,
            6 => 1 << 20,
            7 => 4 << 20,
            other => return Err(format!("block maximum size code {other}")),
        };
        let block_checksums = flg & 0x10 != 0;
        let content_size = flg & 0x08 != 0;
        let content_checksum = flg & 0x04 != 0;
        let dict_id = flg & 0x01 != 0;
        let descriptor_bytes = 2 + 8 * usize::from(content_size) + 4 * usize::from(dict_id) + 1;
        take(&mut rest, descriptor_bytes, "its descriptor")?;
        loop {
            let word = rest
                .first_chunk::<4>()
                .map(|w| u32::from_le_bytes(*w))
                .ok_or("frame cut short before its end mark")?;
            take(&mut rest, 4, "a block length")?;
            if word == 0 {
                break;
            }
            let len = word & 0x7FFF_FFFF;
            if len > block_max_bytes {
                return Err(format!(
                    "a {len}-byte block past the frame's {block_max_bytes}"
                ));
            }
            take(
                &mut rest,
                len as usize + 4 * usize::from(block_checksums),
                "a block",
            )?;
        }
        take(
            &mut rest,
            4 * usize::from(content_checksum),
            "its content checksum",
        )?;
        if rest.is_empty() {
            return Ok(());
        }
    }
}

/// One raw snappy block, appended after `already` bytes of output (the limit covers both);
/// its declared length is checked before anything is allocated.
fn decompress_snappy_block(
    block: &[u8],
    limit_bytes: usize,
    already: usize,
) -> Result<Vec<u8>, CodecError> {
    let codec = Compression::Snappy;
    let len = snap::raw::decompress_len(block).map_err(|e| CodecError::Corrupt {
        codec,
        what: e.to_string(),
    })?;
    if already.saturating_add(len) > limit_bytes {
        return Err(CodecError::TooLarge { codec, limit_bytes });
    }
    snap::raw::Decoder::new()
        .decompress_vec(block)
        .map_err(|e| CodecError::Corrupt {
            codec,
            what: e.to_string(),
        })
}

/// xerial's framing: the header, then blocks of a big-endian `i32` length and raw snappy.
fn decompress_xerial(payload: &[u8], limit_bytes: usize) -> Result<Vec<u8>, CodecError> {
    let corrupt = |what: String| CodecError::Corrupt {
        codec: Compression::Snappy,
        what,
    };
    let mut rest = payload
        .get(XERIAL_HEADER_SIZE_BYTES..)
        .ok_or_else(|| corrupt("xerial header cut short".into()))?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (len, after) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt("xerial block length cut short".into()))?;
        let len = usize::try_from(i32::from_be_bytes(*len))
            .map_err(|_| corrupt("negative xerial block length".into()))?;
        let block = after
            .get(..len)
            .ok_or_else(|| corrupt(format!("xerial block of {len} bytes cut short")))?;
        out.extend_from_slice(&decompress_snappy_block(block, limit_bytes, out.len())?);
        rest = after.get(len..).unwrap_or_default();
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn every_codec_round_trips() {
        let records: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for codec in CODECS {
            let c = compress(codec, &records).unwrap();
            assert_eq!(
                decompress(codec, &c, records.len()).unwrap(),
                records,
                "{codec:?}"
            );
            assert_eq!(
                decompress(codec, &c, records.len() - 1),
                Err(CodecError::TooLarge {
                    codec,
                    limit_bytes: records.len() - 1
                }),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn raw_snappy_as_librdkafka_writes_it() {
        let records = b"raw snappy, no framing".repeat(50);
        let raw = snap::raw::Encoder::new().compress_vec(&records).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw, 1 << 20).unwrap(),
            records
        );
    }

    #[test]
    fn a_bomb_allocates_at_most_the_limit() {
        // 64 MiB of zeros compress to a few KiB in every codec; a 1 MiB limit refuses them.
        let zeros = vec![0u8; 64 << 20];
        for codec in &CODECS[1..] {
            let bomb = compress(*codec, &zeros).unwrap();
            assert!(bomb.len() < 4 << 20, "{codec:?}: {}", bomb.len());
            assert!(matches!(
                decompress(*codec, &bomb, 1 << 20),
                Err(CodecError::TooLarge { .. })
            ));
        }
    }

    #[test]
    fn corrupt_payloads_are_typed_errors() {
        let records = b"some records ".repeat(100);
        for codec in &CODECS[1..] {
            let good = compress(*codec, &records).unwrap();
            for cut in [0, 1, good.len() / 2, good.len() - 1] {
                let r = decompress(*codec, &good[..cut], 1 << 20);
                assert!(
                    matches!(r, Err(CodecError::Corrupt { .. })),
                    "{codec:?} cut at {cut}: {r:?}"
                );
            }
            let mut flipped = good.clone();
            for i in (0..flipped.len()).step_by(7) {
                flipped[i] ^= 0x5a;
            }
            // Garbage decodes to an error or to other bytes, never to a panic.
            let _ = decompress(*codec, &flipped, 1 << 20);
        }
    }
}
