//! The operator's surface: HTTP/1.1 with JSON on `--admin-listen`, one request per connection.
//!
//! | request | does |
//! |---|---|
//! | `GET /metrics` | Prometheus' text exposition (OpenMetrics; `metrics/`): requests per API and version with latency, bytes in and out per topic, connections per listener, the journal's flushes with their latency and bytes, fdatasyncs, the cleaner's bytes and backlog, groups and members by state, and per mirror and partition its state, lag in records and in time, bytes fetched and written and errors by kind. Readable without the token unless `metrics.require.token=true` |
//! | `GET /health` | `{"ok": true}`; `{"ok": false, "status": "degraded", "damaged": ..., "mirrors_unreachable": ...}` naming what did not load at start (`damage.rs`; the rest is served) and the mirrors whose source answered none of their partitions for 10 s (each with a partition's stall reason); or 503 naming the shards that stopped (their partitions are not served; the process then exits non-zero) |
//! | `GET /topics` | every topic with each partition's log start, end, HW, LSO, mode, producers |
//! | `GET /mirrors` | every mirror with its `state` (running, paused, unreachable, not running) and each partition's mode, last mirrored offset, source HW, lag (null unless the source answered within 10 s), why it is stalled; and under `stopped` the mirrors a failover stopped, with its outcome |
//! | `GET /shards` | per shard: queue depth, reads parked now (`parked_reads`) and in all, parked reads let go because their connection closed (`reads_cancelled`), appends, device reads, tail-cache hits |
//! | `GET /requests` | `queued.max.requests` and its use: requests served now (`queued`), the most at once (`queued_peak`), how many waited for a place (`waited`) |
//! | `GET /fetch-sessions` | incremental fetch sessions (KIP-227, `coordinator/fetch_sessions.rs`): `slots`, `sessions` and `partitions` held now; since start `created`, `evicted`, `refused_for_room`, `incremental_fetches`, `session_errors` |
//! | `GET /cleaner` | the log cleaner per shard: passes, bytes read, written and replaced, the ratio written/replaced, busy time, backlog, highest dirty ratio, dedupe memory, uncleanable partitions |
//! | `POST /mirrors` `{"name", "bootstrap", "topics": [..], "config_exclude"?: [..]}` | starts mirroring (or failback); `bootstrap` is a list `HOST:PORT[,HOST:PORT..]`; `config_sync_ms` (default 30000); `group_sync_ms` (default 60000: the source's committed group offsets, `mirror/group_sync.rs`); `acl_sync_ms` (default 60000, 0: off: the source's ACLs of the mirrored topics and groups, or those `acl_filters` (Kafka's binding filters by name) match; `acl_prune`: also remove ACLs here that the source lacks; `mirror/acl_sync.rs`); `security_protocol` `SSL` / `SASL_SSL` / `SASL_PLAINTEXT` with `ssl_ca_location` (PEM) and `sasl_mechanism`, `sasl_username`, `sasl_password_file` or `sasl_password_env` (`mirror/security.rs`); `dry_run`: what each partition would lose, nothing changed; `force`: truncate partitions whose lineage is not the source's (refused with 409 otherwise; `mirror/start.rs`) |
//! | `POST /mirrors/NAME/stop` | failover: the atomic stop on every partition; the mirror stays listed under `stopped` in `GET /mirrors`, with the stop's outcome |
//! | `DELETE /mirrors/NAME` | forgets a stopped mirror's record (409 while it runs: stop it first) |
//! | `POST /mirrors/NAME/pause`, `.../resume` | pauses or resumes fetching |
//! | `POST /topics/NAME/finish`, `DELETE /topics/NAME` | a damaged topic (`damage.rs`): its creation or deletion tried again, or what is left of it dropped |
//! | `POST /transactions/ID/finish` | a stuck transaction: its outcome written where a partition still takes a marker, the others named |
//! | `DELETE /groups/NAME` | a damaged group: every record of it tombstoned (DeleteGroups does the same) |
//!
//! Requests are bounded (head 16 KiB, body 1 MiB, 10 s to arrive); anything else is a 4xx with
//! `{"error": ...}`. The reader is our own, not hyper's: the surface is one request per
//! connection with a `content-length` body (chunked bodies are refused with 400), loopback by
//! default and token-gated, and its whole parser is the ~60 lines of [`read_request`], each
//! bound tested; a server crate would add a dependency tree to the broker for none of
//! HTTP's harder parts (keep-alive, pipelining, chunked transfer, upgrades), which it does not
//! serve. Every change needs the bearer token and every request an allowed Host
//! (`admin/access.rs`).

use crate::admin::access::Access;
use crate::broker::Shared;
use crate::mirror::{mode_name, AdminError, Mirrors};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const HEAD_BYTES_MAX: usize = 16 << 10;
const BODY_BYTES_MAX: usize = 1 << 20;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an answer may take to be written whole (a client that does not read is closed).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Admin connections open at once, at most.
pub const ADMIN_CONNECTIONS_MAX: usize = 64;

/// Serves the admin listener until the task is dropped.
pub async fn serve(
    b: Shared,
    mirrors: Arc<tokio::sync::Mutex<Mirrors>>,
    listener: TcpListener,
    access: Access,
) {
    let access = Arc::new(access);
    let limits = crate::net::connection_limits::ConnectionLimits::new(
        ADMIN_CONNECTIONS_MAX,
        ADMIN_CONNECTIONS_MAX,
    );
    let mut backoff = crate::net::accept_backoff::AcceptBackoff::new("admin");
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => {
                backoff.succeeded();
                accepted
            }
            Err(e) => {
                tokio::time::sleep(backoff.failed(&e)).await;
                continue;
            }
        };
        // Counted as the Kafka listener's are: past the bound the connection is closed at
        // once, so a flood of idle connections holds neither memory nor descriptors.
        let Some(place) = limits.place() else {
            tracing::info!(%peer, max = ADMIN_CONNECTIONS_MAX, "closing an admin connection past the limit");
            drop(stream);
            continue;
        };
        let (b, m, access) = (b.clone(), mirrors.clone(), access.clone());
        tokio::spawn(async move {
            let _place = place;
            if let Err(e) = connection(&b, &m, &access, stream).await {
                tracing::debug!(error = %e, "admin connection");
            }
        });
    }
}

async fn connection(
    b: &Shared,
    mirrors: &tokio::sync::Mutex<Mirrors>,
    access: &Access,
    mut stream: TcpStream,
) -> std::io::Result<()> {
    let request = tokio::time::timeout(REQUEST_TIMEOUT, read_request(&mut stream)).await;
    let (status, body) = match request {
        Err(_) => (408, json!({"error": "request timed out"})),
        Ok(Err(e)) => (400, json!({"error": e.to_string()})),
        Ok(Ok(r)) => {
            let metrics = r.method == "GET" && r.path.trim_end_matches('/') == "/metrics";
            // Every change needs the token; so does the metrics read when configured to.
            let needs_token = r.method != "GET" || (metrics && b.config.metrics_require_token);
            let allowed = access.check_with(
                needs_token,
                r.host.as_deref(),
                r.origin.as_deref(),
                r.authorization.as_deref(),
            );
            match allowed {
                Err(refusal) => (refusal.status, json!({"error": refusal.message})),
                Ok(()) if metrics => match exposition(b, mirrors).await {
                    Ok(text) => {
                        return respond(
                            &mut stream,
                            200,
                            crate::metrics::CONTENT_TYPE,
                            text.as_bytes(),
                        )
                        .await;
                    }
                    Err(e) => (e.status, json!({"error": e.message})),
                },
                Ok(()) => match route(b, mirrors, &r.method, &r.path, &r.body).await {
                    Ok(v) => (200, v),
                    Err(e) => (e.status, json!({"error": e.message})),
                },
            }
        }
    };
    let mut text = serde_json::to_vec_pretty(&body).unwrap_or_default();
    text.push(b'\n');
    respond(&mut stream, status, "application/json", &text).await
}

/// `GET /metrics`: what is counted, and what is read now (the engine's counters, groups,
/// mirrors), in Prometheus' text format.
async fn exposition(
    b: &Shared,
    mirrors: &tokio::sync::Mutex<Mirrors>,
) -> Result<String, AdminError> {
    let shards = shard_stats(b).await?;
    let (mirror_states, partitions, acl_syncs) = mirrors.lock().await.metrics_view(b).await;
    let snapshot = crate::metrics::snapshot::Snapshot {
        shards,
        groups: b.membership.census(),
        mirrors: mirror_states,
        partitions,
        acl_syncs,
    };
    // Encoded off the runtime's threads, which serve the Kafka listener meanwhile.
    let counted = b.metrics.clone();
    off_runtime(move || crate::metrics::render(&counted, snapshot))
        .await?
        .map_err(|e| AdminError {
            status: 500,
            message: format!("encoding the metrics: {e}"),
        })
}

/// Writes one answer and closes the connection's write side, within [`RESPONSE_TIMEOUT`].
async fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    text: &[u8],
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        502 => "Bad Gateway",
        _ => "Error",
    };
    let challenge = if status == 401 {
        "www-authenticate: Bearer\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{challenge}connection: close\r\n\r\n",
        text.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(text).await?;
        stream.shutdown().await
    };
    tokio::time::timeout(RESPONSE_TIMEOUT, write)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "answer not read in time"))?
}

/// One request: what routing and the access check read of it.
struct HttpRequest {
    method: String,
    path: String,
    body: Vec<u8>,
    host: Option<String>,
    origin: Option<String>,
    authorization: Option<String>,
}

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
enum BadRequest {
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection before the request was whole.
    #[error("connection closed mid-{0}")]
    Closed(&'static str),
    /// Over the head or body bound.
    #[error("request {0} too large")]
    TooLarge(&'static str),
    /// Not HTTP as this surface reads it.
    #[error("{0}")]
    Malformed(&'static str),
}

/// Reads one request.
async fn read_request(stream: &mut TcpStream) -> Result<HttpRequest, BadRequest> {
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > HEAD_BYTES_MAX {
            return Err(BadRequest::TooLarge("head"));
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(BadRequest::Closed("request"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| BadRequest::Malformed("request head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let mut length = 0usize;
    let (mut host, mut origin, mut authorization) = (None, None, None);
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("content-length") {
                length = v
                    .parse()
                    .map_err(|_| BadRequest::Malformed("bad content-length"))?;
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                return Err(BadRequest::Malformed(
                    "transfer-encoding is not served: send content-length",
                ));
            } else if k.eq_ignore_ascii_case("host") {
                host = Some(v.to_string());
            } else if k.eq_ignore_ascii_case("origin") {
                origin = Some(v.to_string());
            } else if k.eq_ignore_ascii_case("authorization") {
                authorization = Some(v.to_string());
            }
        }
    }
    if length > BODY_BYTES_MAX {
        return Err(BadRequest::TooLarge("body"));
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = vec![0u8; (length - body.len()).min(64 << 10)];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(BadRequest::Closed("body"));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(HttpRequest {
        method,
        path,
        body,
        host,
        origin,
        authorization,
    })
}

async fn route(
    b: &Shared,
    mirrors: &tokio::sync::Mutex<Mirrors>,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<Value, AdminError> {
    let not_found = || AdminError {
        status: 404,
        message: format!("no route {method} {path}"),
    };
    let conflict = |message: String| AdminError {
        status: 409,
        message,
    };
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        ("GET", ["health"]) => {
            let dead = b.engine.dead_shards();
            if !dead.is_empty() {
                return Err(AdminError {
                    status: 503,
                    message: format!("shards {dead:?} stopped: their partitions are not served"),
                });
            }
            // Pieces that did not load are not served; everything else is (`damage.rs`).
            let damage = b.damage().clone();
            // Mirrors whose source has answered none of their partitions for 10 s.
            let unreachable = mirrors.lock().await.unreachable(b).await;
            if damage.is_empty() && unreachable.is_empty() {
                Ok(json!({"ok": true}))
            } else {
                Ok(json!({
                    "ok": false,
                    "status": "degraded",
                    "damaged": damage,
                    "mirrors_unreachable": unreachable,
                }))
            }
        }
        ("POST", ["topics", name, "finish"]) => b
            .finish_damaged_topic(name)
            .await
            .map(|()| json!({"finished": name}))
            .map_err(|e| conflict(e.to_string())),
        ("DELETE", ["topics", name]) => b
            .drop_damaged_topic(name)
            .await
            .map(|()| json!({"dropped": name}))
            .map_err(|e| conflict(e.to_string())),
        ("POST", ["transactions", id, "finish"]) => {
            let finished = b.txns.lock().await.finish_stuck(&b.engine, id).await;
            match finished {
                Ok(f) => {
                    b.damage()
                        .clear(crate::storage::damage::Kind::Transaction, id);
                    Ok(json!({"transactional_id": id, "finished": f}))
                }
                Err(e) => Err(conflict(e.to_string())),
            }
        }
        ("DELETE", ["groups", group]) => {
            if b.damage()
                .get(crate::storage::damage::Kind::Group, group)
                .is_none()
            {
                return Err(conflict(format!(
                    "group {group} is not damaged: delete it with DeleteGroups"
                )));
            }
            b.delete_damaged_group(group)
                .await
                .map(|()| json!({"deleted": group}))
                .map_err(|e| AdminError {
                    status: 502,
                    message: format!("deleting group {group}: {e}"),
                })
        }
        // Test hook for the supervision test, served only when the process was started with
        // MIRRORLOG_BROKER_TEST_HOOKS=1: stops a shard as a fatal ring failure would.
        ("POST", ["test-hooks", "halt-shard", index]) if crate::test_hooks::enabled() => {
            let index: usize = index.parse().map_err(|_| not_found())?;
            b.engine.halt_shard_for_tests(index);
            Ok(json!({"halted": index}))
        }
        ("GET", ["topics"]) => Ok(topics(b).await),
        ("GET", ["cleaner"]) => cleaner(b).await,
        ("GET", ["shards"]) => shards(b).await,
        ("GET", ["requests"]) => Ok(serde_json::json!(b.queue.stats())),
        ("GET", ["fetch-sessions"]) => Ok(serde_json::json!(b
            .fetch_sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .stats())),
        ("GET", ["mirrors"]) => Ok(mirrors.lock().await.status(b).await),
        ("POST", ["mirrors"]) => {
            let v: Value = serde_json::from_slice(body).map_err(|e| AdminError {
                status: 400,
                message: format!("body is not JSON: {e}"),
            })?;
            let field = |k: &str| {
                v.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| AdminError {
                        status: 400,
                        message: format!("missing string field {k:?}"),
                    })
            };
            let name = field("name")?;
            let bootstrap = field("bootstrap")?;
            let topics: Vec<String> = v
                .get("topics")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let config_exclude: Option<Vec<String>> =
                v.get("config_exclude").and_then(Value::as_array).map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(str::to_string))
                        .collect()
                });
            let security = if crate::mirror::security::KEYS
                .iter()
                .any(|k| v.get(k).is_some())
            {
                Some(
                    serde_json::from_value::<crate::mirror::SourceSecurity>(v.clone()).map_err(
                        |e| AdminError {
                            status: 400,
                            message: format!("bad security settings: {e}"),
                        },
                    )?,
                )
            } else {
                None
            };
            let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
            let acl_filters = match v.get("acl_filters") {
                None => None,
                Some(Value::Null) => Some(None),
                Some(f) => Some(Some(
                    serde_json::from_value::<Vec<crate::mirror::acl_sync::AclFilterSpec>>(
                        f.clone(),
                    )
                    .map_err(|e| AdminError {
                        status: 400,
                        message: format!("bad acl_filters: {e}"),
                    })?,
                )),
            };
            let sync = crate::mirror::StartOptions {
                dry_run: flag("dry_run"),
                force: flag("force"),
                exclude: config_exclude,
                interval_ms: v.get("config_sync_ms").and_then(Value::as_u64),
                group_interval_ms: v.get("group_sync_ms").and_then(Value::as_u64),
                acl_interval_ms: v.get("acl_sync_ms").and_then(Value::as_u64),
                acl_filters,
                acl_prune: v.get("acl_prune").and_then(Value::as_bool),
                security,
            };
            mirrors
                .lock()
                .await
                .start(b, &name, &bootstrap, &topics, sync)
                .await
        }
        ("POST", ["mirrors", name, "stop"]) => mirrors.lock().await.stop(b, name).await,
        ("DELETE", ["mirrors", name]) => mirrors.lock().await.delete(name),
        ("POST", ["mirrors", name, "pause"]) => mirrors.lock().await.pause(b, name, true).await,
        ("POST", ["mirrors", name, "resume"]) => mirrors.lock().await.pause(b, name, false).await,
        (
            _,
            ["health" | "topics" | "mirrors" | "cleaner" | "shards" | "transactions" | "groups"
            | "fetch-sessions", ..],
        ) => Err(AdminError {
            status: 405,
            message: format!("{method} not allowed on {path}"),
        }),
        _ => Err(not_found()),
    }
}

/// Runs `f` on a thread of its own, off the runtime's (a panic in it is a 500).
async fn off_runtime<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, AdminError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| AdminError {
            status: 500,
            message: e.to_string(),
        })
}

/// Every shard's counters (`ShardStats`), asked off the runtime's threads.
async fn shard_stats(b: &Shared) -> Result<Vec<mirrorlog::engine::ShardStats>, AdminError> {
    let engine = b.engine.clone();
    off_runtime(move || engine.stats())
        .await?
        .map_err(|e| AdminError {
            status: 503,
            message: e.to_string(),
        })
}

/// The shards' request and read counters: queue depth, reads parked now and in all, parked
/// reads let go because their connection went, appends.
async fn shards(b: &Shared) -> Result<Value, AdminError> {
    let shards: Vec<Value> = shard_stats(b)
        .await?
        .iter()
        .map(|s| {
            json!({
                "shard": s.shard,
                "queue_depth": s.queue_depth,
                "parked_reads": s.parked_reads,
                "reads_parked": s.reads_parked,
                "reads_cancelled": s.reads_cancelled,
                "appends": s.appends,
                "append_bytes": s.append_bytes,
                "device_reads": s.device_reads,
                "tail_cache_hits": s.tail_cache_hits,
            })
        })
        .collect();
    Ok(json!({"shards": shards}))
}

/// The shards' log-cleaner counters (`ShardStats::cleaner`).
async fn cleaner(b: &Shared) -> Result<Value, AdminError> {
    let stats = shard_stats(b).await?;
    let shards: Vec<Value> = stats
        .iter()
        .map(|s| {
            let c = &s.cleaner;
            json!({
                "shard": s.shard,
                "passes": c.passes,
                "passes_abandoned": c.passes_abandoned,
                "passes_failed": c.passes_failed,
                "bytes_read": c.bytes_read,
                "bytes_written": c.bytes_written,
                "bytes_replaced": c.bytes_replaced,
                "ratio": if c.bytes_replaced == 0 { Value::Null } else { json!(c.bytes_written as f64 / c.bytes_replaced as f64) },
                "busy_ms": c.busy_us / 1000,
                "backlog_bytes": c.backlog_bytes,
                "max_dirty_ratio": c.max_dirty_ratio,
                "dedupe_buffer_bytes": c.dedupe_buffer_bytes,
                "uncleanable_partitions": c.uncleanable_partitions,
            })
        })
        .collect();
    Ok(json!({"shards": shards}))
}

async fn topics(b: &Shared) -> Value {
    let all: Vec<(String, crate::storage::topics::Topic)> = b
        .registry()
        .ready()
        .map(|(n, t)| (n.clone(), t.clone()))
        .collect();
    let mut out = Vec::new();
    for (name, t) in all {
        let mut parts = Vec::new();
        for p in 0..t.partitions {
            let tp = mirrorlog::engine::TopicPartition::new(&name, p);
            parts.push(match b.engine.state(&tp).await {
                Ok(s) => json!({
                    "partition": p,
                    "log_start": s.log_start.0,
                    "log_end": s.log_end.0,
                    "high_watermark": s.high_watermark.0,
                    "last_stable_offset": s.last_stable_offset.0,
                    "mode": mode_name(&s.mode),
                    "producers": s.producer_count,
                    "leader_epoch": s.leader_epoch,
                }),
                Err(e) => json!({"partition": p, "error": e.to_string()}),
            });
        }
        out.push(json!({"name": name, "partitions": parts}));
    }
    // Topics that did not load or could not be finished at start: not served, each with why
    // and the way out.
    let damaged: Vec<Value> = b
        .damage()
        .topics
        .iter()
        .map(|(name, reason)| {
            json!({
                "name": name,
                "damaged": reason,
                "way_out": crate::storage::damage::way_out(crate::storage::damage::Kind::Topic),
            })
        })
        .collect();
    json!({"topics": out, "damaged": damaged})
}
