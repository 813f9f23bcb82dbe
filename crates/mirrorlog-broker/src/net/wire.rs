//! Kafka's framing and the request/response envelopes, through the `kafka-protocol` crate: a
//! frame is a 4-byte big-endian size and that many bytes; a request is its header (version by
//! API and API version) and body; a response is the correlation id's header and body.
//!
//! What this broker serves is [`SUPPORTED`]: each API with the versions we answer, cut to what
//! the crate can decode. Everything read from the socket is bounded and checked here: a frame
//! over `socket.request.max.bytes`, shorter than a header, with an unknown API key, a version
//! outside [`SUPPORTED`] or a body that does not decode is a [`WireError`]; the connection then
//! answers what Kafka answers (ApiVersions' `UNSUPPORTED_VERSION`) or is closed. Decoding runs
//! under `catch_unwind`, so a decoder bug on hostile bytes closes one connection, not the broker.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The APIs served and their version ranges (inclusive). Produce and Fetch stop below the
/// versions that name topics by id only (13); Metadata and DeleteTopics carry ids as well.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// The versions served of `key`, cut to what the crate decodes.
pub fn supported(key: ApiKey) -> Option<(i16, i16)> {
    let (_, min, max) = SUPPORTED.iter().find(|(k, _, _)| *k == key)?;
    let crate_range = key.valid_versions();
    let (lo, hi) = ((*min).max(crate_range.min), (*max).min(crate_range.max));
    (lo <= hi).then_some((lo, hi))
}

/// A frame or request that cannot be served.
#[derive(Debug)]
pub enum WireError {
    /// The peer closed the connection between frames.
    Closed,
    /// Reading or writing the socket failed.
    Io(std::io::Error),
    /// A frame's size prefix over the limit (or negative).
    TooLarge {
        /// The size the prefix claims.
        size: i64,
        /// `socket.request.max.bytes`.
        max: usize,
    },
    /// A frame shorter than a request header.
    TooShort(usize),
    /// An API key Kafka does not define, or this broker does not serve.
    UnknownApi {
        /// The key.
        key: i16,
    },
    /// A version outside [`SUPPORTED`].
    UnsupportedVersion {
        /// The API.
        key: ApiKey,
        /// The version asked.
        version: i16,
        /// The request's correlation id (the refusal answers it).
        correlation_id: i32,
    },
    /// A frame begun did not arrive whole in time (`request.timeout.ms`).
    TimedOut(std::time::Duration),
    /// The header or body does not decode.
    Malformed {
        /// The API key.
        key: i16,
        /// The version.
        version: i16,
        /// What did not decode.
        reason: String,
    },
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Closed => write!(f, "connection closed"),
            WireError::TimedOut(limit) => {
                write!(f, "a frame begun did not arrive whole within {limit:?}")
            }
            WireError::Io(e) => write!(f, "socket: {e}"),
            WireError::TooLarge { size, max } => {
                write!(
                    f,
                    "a {size}-byte frame exceeds socket.request.max.bytes = {max}"
                )
            }
            WireError::TooShort(n) => write!(f, "a {n}-byte frame is shorter than a header"),
            WireError::UnknownApi { key, .. } => write!(f, "unknown API key {key}"),
            WireError::UnsupportedVersion { key, version, .. } => {
                write!(f, "{key:?} version {version} is not supported")
            }
            WireError::Malformed {
                key,
                version,
                reason,
            } => write!(f, "API {key} v{version} does not decode: {reason}"),
        }
    }
}

/// Reads one frame (`None` at a clean end of stream).
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<Bytes, WireError> {
    read_frame_within(r, max, None).await
}

/// Reads one frame, which must arrive whole within `limit` of its first byte (waiting for the
/// first byte is not bounded here: an idle connection is the idle check's).
pub async fn read_frame_within<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
    limit: Option<std::time::Duration>,
) -> Result<Bytes, WireError> {
    let mut size = [0u8; 4];
    match r.read_exact(&mut size[..1]).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(WireError::Closed),
        Err(e) => return Err(WireError::Io(e)),
    }
    let rest = rest_of_frame(r, size, max);
    match limit {
        None => rest.await,
        Some(limit) => tokio::time::timeout(limit, rest)
            .await
            .map_err(|_| WireError::TimedOut(limit))?,
    }
}

async fn rest_of_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    mut size: [u8; 4],
    max: usize,
) -> Result<Bytes, WireError> {
    r.read_exact(&mut size[1..]).await.map_err(WireError::Io)?;
    let size = i32::from_be_bytes(size);
    let len = usize::try_from(size)
        .ok()
        .filter(|&n| n <= max)
        .ok_or(WireError::TooLarge {
            size: i64::from(size),
            max,
        })?;
    let mut buf = BytesMut::zeroed(len);
    r.read_exact(&mut buf).await.map_err(WireError::Io)?;
    Ok(buf.freeze())
}

/// A decoded request.
#[derive(Debug)]
pub struct Request {
    /// Its header (API, version, correlation id, client id).
    pub header: RequestHeader,
    /// Its API.
    pub key: ApiKey,
    /// Its body.
    pub body: RequestKind,
}

/// Decodes a request frame; see the module docs for what is refused.
pub fn decode_request(frame: Bytes) -> Result<Request, WireError> {
    if frame.len() < 8 {
        return Err(WireError::TooShort(frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let key = ApiKey::try_from(raw_key).map_err(|()| WireError::UnknownApi { key: raw_key })?;
    let Some((min, max)) = supported(key) else {
        return Err(WireError::UnknownApi { key: raw_key });
    };
    if version < min || version > max {
        return Err(WireError::UnsupportedVersion {
            key,
            version,
            correlation_id,
        });
    }
    let malformed = |reason: String| WireError::Malformed {
        key: raw_key,
        version,
        reason,
    };
    let decoded = std::panic::catch_unwind(move || {
        let mut buf = frame;
        let header = RequestHeader::decode(&mut buf, key.request_header_version(version))
            .map_err(|e| format!("header: {e}"))?;
        let mut body = RequestKind::decode(key, &mut buf, version).map_err(|e| e.to_string())?;
        // Kafka's parser refuses a string over 32,767 bytes, which the crate's compact strings
        // let through (`fields.rs`).
        crate::net::fields::check_strings(&mut body).map_err(|e| e.to_string())?;
        // Bytes after the body are ignored, as Kafka's request parser ignores them: librdkafka
        // 2.12 sends three after its Metadata v12 request.
        if buf.has_remaining() {
            tracing::debug!(
                ?key,
                version,
                extra = buf.remaining(),
                "bytes after the request body"
            );
        }
        Ok((header, body))
    });
    match decoded {
        Ok(Ok((header, body))) => Ok(Request { header, key, body }),
        Ok(Err(reason)) => Err(malformed(reason)),
        Err(_) => Err(malformed("the decoder panicked".into())),
    }
}

/// `StrBytes` from a `&str`.
pub fn str_bytes(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_string())
}

/// A `TopicName` from a `&str`.
pub fn topic_name(s: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(str_bytes(s))
}

/// A message that did not encode, or an answer that did not decode (the broker's own client).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// A request header naming an API key Kafka does not define.
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    /// The protocol crate refused to encode it (a field out of its version's range).
    #[error("encoding: {0}")]
    Encode(String),
    /// A frame over the protocol's 2 GiB size prefix.
    #[error("{0} over 2 GiB")]
    TooLarge(&'static str),
    /// An answer that does not decode.
    #[error("decoding the {part}: {reason}")]
    Decode {
        /// `response header` or `response`.
        part: &'static str,
        /// Why.
        reason: String,
    },
    /// An answer to another request.
    #[error("correlation id {got} answers {expected}")]
    Correlation {
        /// The id the answer carries.
        got: i32,
        /// The id asked.
        expected: i32,
    },
    /// The protocol crate's decoder panicked on the bytes.
    #[error("the decoder panicked")]
    Panicked,
}

fn encoding(e: impl std::fmt::Display) -> CodecError {
    CodecError::Encode(e.to_string())
}

/// Encodes a response frame (size prefix, header, body).
///
/// # Errors
/// The body does not encode at `version`, or is over 2 GiB.
pub fn encode_response(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, CodecError> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, key.response_header_version(version))
        .map_err(encoding)?;
    body.encode(&mut buf, version).map_err(encoding)?;
    let len = i32::try_from(buf.len() - 4).map_err(|_| CodecError::TooLarge("response"))?;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8]) -> Result<(), WireError> {
    w.write_all(frame).await.map_err(WireError::Io)
}

/// Encodes a request frame (for the broker's own client: the mirror fetcher).
///
/// # Errors
/// An unknown API key, a body that does not encode at the header's version, or over 2 GiB.
pub fn encode_request(header: &RequestHeader, body: &RequestKind) -> Result<Bytes, CodecError> {
    let key = ApiKey::try_from(header.request_api_key)
        .map_err(|()| CodecError::UnknownApi(header.request_api_key))?;
    let version = header.request_api_version;
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    header
        .encode(&mut buf, key.request_header_version(version))
        .map_err(encoding)?;
    body.encode(&mut buf, version).map_err(encoding)?;
    let len = i32::try_from(buf.len() - 4).map_err(|_| CodecError::TooLarge("request"))?;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

/// Decodes a response frame (for the broker's own client), checking the correlation id.
pub fn decode_response(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    frame: Bytes,
) -> Result<ResponseKind, CodecError> {
    std::panic::catch_unwind(move || {
        let mut buf = frame;
        let header = ResponseHeader::decode(&mut buf, key.response_header_version(version))
            .map_err(|e| CodecError::Decode {
                part: "response header",
                reason: e.to_string(),
            })?;
        if header.correlation_id != correlation_id {
            return Err(CodecError::Correlation {
                got: header.correlation_id,
                expected: correlation_id,
            });
        }
        ResponseKind::decode(key, &mut buf, version).map_err(|e| CodecError::Decode {
            part: "response",
            reason: e.to_string(),
        })
    })
    .unwrap_or(Err(CodecError::Panicked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::MetadataRequest;

    fn metadata_frame(version: i16) -> Bytes {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Metadata as i16)
            .with_request_api_version(version)
            .with_correlation_id(7);
        let f =
            encode_request(&header, &RequestKind::Metadata(MetadataRequest::default())).unwrap();
        f.slice(4..)
    }

    #[test]
    fn a_request_round_trips_and_a_truncated_one_is_malformed() {
        let frame = metadata_frame(9);
        let r = decode_request(frame.clone()).unwrap();
        assert_eq!(r.key, ApiKey::Metadata);
        assert_eq!(r.header.correlation_id, 7);
        for cut in 0..frame.len() {
            let e = decode_request(frame.slice(..cut)).unwrap_err();
            assert!(
                matches!(e, WireError::TooShort(_) | WireError::Malformed { .. }),
                "cut at {cut}: {e}"
            );
        }
    }

    #[test]
    fn versions_outside_the_table_and_unknown_keys_are_refused() {
        let mut f = metadata_frame(9).to_vec();
        f[2..4].copy_from_slice(&99i16.to_be_bytes());
        assert!(matches!(
            decode_request(Bytes::from(f.clone())),
            Err(WireError::UnsupportedVersion {
                version: 99,
                correlation_id: 7,
                ..
            })
        ));
        f[0..2].copy_from_slice(&999i16.to_be_bytes());
        assert!(matches!(
            decode_request(Bytes::from(f)),
            Err(WireError::UnknownApi { key: 999, .. })
        ));
    }

    #[test]
    fn a_count_claiming_more_than_memory_is_refused_not_aborted() {
        // Metadata v9 whose topics claim 2^31 - 1 entries: the crate reserves 154 GB before
        // reading them. Under the system allocator this test process aborts; under the
        // broker's `ReserveOnlyAlloc` (the global allocator of the binary and of these tests) it is
        // a decode error.
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Metadata as i16)
            .with_request_api_version(9)
            .with_correlation_id(1);
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, ApiKey::Metadata.request_header_version(9))
            .unwrap();
        buf.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08, 0, 0, 0]);
        assert!(matches!(
            decode_request(buf.freeze()),
            Err(WireError::Malformed {
                key: 3,
                version: 9,
                ..
            })
        ));
    }

    #[test]
    fn random_frames_decode_to_a_request_or_an_error() {
        // Replayable by MIRRORLOG_SEED; mutations of valid frames of every served API, and
        // random bytes.
        let seed = std::env::var("MIRRORLOG_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0x5eed_1234_abcd);
        eprintln!("random_frames: seed {seed} (replay with MIRRORLOG_SEED={seed})");
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut valid = Vec::new();
        for (key, _, _) in SUPPORTED {
            let (lo, hi) = supported(*key).unwrap();
            for v in [lo, hi] {
                let header = RequestHeader::default()
                    .with_request_api_key(*key as i16)
                    .with_request_api_version(v)
                    .with_correlation_id(9);
                let body = default_request(*key);
                if let Ok(f) = encode_request(&header, &body) {
                    valid.push(f.slice(4..));
                }
            }
        }
        assert!(valid.len() >= SUPPORTED.len(), "every API encodes");
        for _ in 0..20_000 {
            let mut f = valid[(next() as usize) % valid.len()].to_vec();
            if next() % 10 == 0 {
                f = (0..(next() % 64)).map(|_| next() as u8).collect();
            }
            for _ in 0..(1 + next() % 4) {
                if f.is_empty() {
                    break;
                }
                let at = (next() as usize) % f.len();
                f[at] = match next() % 3 {
                    0 => next() as u8,
                    1 => 0xff,
                    _ => 0x80,
                };
            }
            if next() % 4 == 0 {
                let cut = (next() as usize) % (f.len() + 1);
                f.truncate(cut);
            }
            let _ = decode_request(Bytes::from(f));
        }
    }

    fn default_request(key: ApiKey) -> RequestKind {
        use kafka_protocol::messages::*;
        match key {
            ApiKey::Produce => RequestKind::Produce(ProduceRequest::default()),
            ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default()),
            ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default()),
            ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default()),
            ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
            ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default()),
            ApiKey::DeleteTopics => RequestKind::DeleteTopics(DeleteTopicsRequest::default()),
            ApiKey::DeleteRecords => RequestKind::DeleteRecords(DeleteRecordsRequest::default()),
            ApiKey::InitProducerId => RequestKind::InitProducerId(InitProducerIdRequest::default()),
            ApiKey::OffsetForLeaderEpoch => {
                RequestKind::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
            }
            ApiKey::AddPartitionsToTxn => {
                RequestKind::AddPartitionsToTxn(AddPartitionsToTxnRequest::default())
            }
            ApiKey::EndTxn => RequestKind::EndTxn(EndTxnRequest::default()),
            ApiKey::DescribeConfigs => {
                RequestKind::DescribeConfigs(DescribeConfigsRequest::default())
            }
            ApiKey::CreatePartitions => {
                RequestKind::CreatePartitions(CreatePartitionsRequest::default())
            }
            ApiKey::AlterConfigs => RequestKind::AlterConfigs(AlterConfigsRequest::default()),
            ApiKey::IncrementalAlterConfigs => {
                RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
            }
            _ => RequestKind::FindCoordinator(FindCoordinatorRequest::default()),
        }
    }

    #[test]
    fn every_served_api_has_its_fields_listed() {
        for (key, _, _) in SUPPORTED {
            let mut body = crate::net::fields::default_body(*key).expect("a default body");
            assert!(
                crate::net::fields::body_fields(&mut body).is_some(),
                "{key:?}"
            );
        }
    }

    #[test]
    fn every_supported_range_is_within_the_crates() {
        for (key, _, _) in SUPPORTED {
            let (lo, hi) = supported(*key).unwrap();
            assert!(lo <= hi, "{key:?}");
        }
    }
}
