//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of topics and of this broker.
//!
//! Topics: every topic config Kafka documents, its value (as set, or the default in effect),
//! and in the documentation field (v3+, when asked) whether the engine applies it
//! ([`crate::config::topic::describe`]). A change is checked by the parser and the engine's
//! bounds before anything is written (`validate_only` answers with the checks alone), then
//! stored and applied live to every partition (`Broker::alter_topic_configs`).
//!
//! The broker (resource type 4, named by its node id, or `""` for the cluster-wide default):
//! every broker config with its source, read-only flag and whether it is in effect
//! ([`crate::settings::dynamic`]); a change is checked, stored and applied as
//! `Broker::alter_broker_configs` says.
//!
//! The broker's loggers (BROKER_LOGGER, 8, named by the node id; `logging.rs`): every logger
//! set and its level (`root` first); IncrementalAlterConfigs SETs a logger's level or DELETEs
//! it (back to root's), all of a request's changes checked before any is made; AlterConfigs
//! of loggers is `INVALID_REQUEST`, as in Kafka. Other resource types are `INVALID_REQUEST`.

use super::str_bytes;
use crate::acl::Operation;
use crate::broker::Shared;
use crate::config::topic as topic_configs;
use crate::kafka::session::Session;
use crate::settings::dynamic as broker_configs;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalAlterConfigsResourceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

/// Kafka's `ConfigResource.Type.TOPIC`.
const RESOURCE_TOPIC: i8 = 2;
/// Kafka's `ConfigResource.Type.BROKER`.
const RESOURCE_BROKER: i8 = 4;
/// Kafka's `ConfigResource.Type.BROKER_LOGGER`.
const RESOURCE_BROKER_LOGGER: i8 = 8;
/// Kafka's `ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG`.
const SOURCE_BROKER_LOGGER: i8 = 6;

/// Kafka's ACL check of one config resource: `op` (DESCRIBE_CONFIGS, ALTER_CONFIGS) on the
/// topic, or on the cluster for a broker; the error a refused one gets.
fn refused(
    b: &Shared,
    who: &Session,
    resource_type: i8,
    name: &str,
    op: Operation,
) -> Option<(ResponseError, String)> {
    match resource_type {
        RESOURCE_TOPIC if !who.may_topic(b, op, name) => Some((
            ResponseError::TopicAuthorizationFailed,
            format!("Topic authorization failed for {name}"),
        )),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER if !who.may_cluster(b, op) => Some((
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.".into(),
        )),
        _ => None,
    }
}

/// DescribeConfigs: topics and the broker, every config or the keys asked for.
pub fn describe_configs(
    b: &Shared,
    who: &Session,
    r: &DescribeConfigsRequest,
    version: i16,
) -> ResponseKind {
    let mut resp = DescribeConfigsResponse::default();
    for res in &r.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let name = res.resource_name.to_string();
        let wanted = res.configuration_keys.as_ref();
        let wanted = |n: &str| wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == n));
        let described = refused(b, who, res.resource_type, &name, Operation::DescribeConfigs)
            .map_or_else(|| described(b, res.resource_type, &name), Err);
        match described {
            Err((code, message)) => {
                out.error_code = code.code();
                out.error_message = Some(str_bytes(&message));
            }
            Ok(configs) => {
                out.error_message = None;
                for d in configs.into_iter().filter(|d| wanted(&d.name)) {
                    let mut c = DescribeConfigsResourceResult::default();
                    c.name = str_bytes(&d.name);
                    c.value = d.value.as_deref().map(str_bytes);
                    c.read_only = d.read_only;
                    c.config_source = d.source;
                    c.is_sensitive = d.sensitive;
                    if version >= 3 {
                        c.config_type = d.config_type;
                        if r.include_documentation {
                            c.documentation = Some(str_bytes(&d.effect));
                        }
                    }
                    out.configs.push(c);
                }
            }
        }
        resp.results.push(out);
    }
    ResponseKind::DescribeConfigs(resp)
}

/// One resource's configs as DescribeConfigs answers them, or its error.
fn described(
    b: &Shared,
    resource_type: i8,
    name: &str,
) -> Result<Vec<broker_configs::Described>, (ResponseError, String)> {
    match resource_type {
        RESOURCE_TOPIC => {
            let topic = b.registry().get(name).cloned().ok_or_else(|| {
                (
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic {name} does not exist"),
                )
            })?;
            Ok(topic_configs::describe(&topic.configs, &b.topic_defaults())
                .into_iter()
                .map(|d| broker_configs::Described {
                    name: d.name.into(),
                    value: Some(d.value),
                    source: if d.set {
                        broker_configs::source::TOPIC
                    } else {
                        broker_configs::source::DEFAULT
                    },
                    read_only: false,
                    sensitive: false,
                    config_type: d.config_type,
                    effect: d.effect,
                })
                .collect())
        }
        RESOURCE_BROKER => {
            let level = broker_configs::level(name, b.config.node_id).map_err(refusal)?;
            Ok(broker_configs::describe(
                &b.config,
                &b.broker_config_levels(),
                level,
            ))
        }
        RESOURCE_BROKER_LOGGER => {
            this_broker(b, name)?;
            let levels = crate::logging::levels()
                .ok_or_else(|| logger_error(&crate::logging::LoggingError::NotInstalled))?;
            let logger = |name: String, value: String| broker_configs::Described {
                name: name.into(),
                value: Some(value),
                source: SOURCE_BROKER_LOGGER,
                read_only: false,
                sensitive: false,
                config_type: 2,
                effect: "in effect".into(),
            };
            let mut out = vec![logger(
                crate::logging::ROOT.to_string(),
                levels.root.to_ascii_uppercase(),
            )];
            out.extend(
                levels
                    .loggers
                    .into_iter()
                    .map(|(target, level)| logger(target, level.to_ascii_uppercase())),
            );
            Ok(out)
        }
        other => Err(unsupported(other)),
    }
}

/// The BROKER_LOGGER resource must name this broker (Kafka: its id, not `""`).
fn this_broker(b: &Shared, name: &str) -> Result<(), (ResponseError, String)> {
    if name.parse::<i32>() == Ok(b.config.node_id) {
        Ok(())
    } else {
        Err((
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {} but received {name}",
                b.config.node_id
            ),
        ))
    }
}

fn logger_error(e: &crate::logging::LoggingError) -> (ResponseError, String) {
    let code = match e {
        crate::logging::LoggingError::NotInstalled | crate::logging::LoggingError::Install(_) => {
            ResponseError::InvalidRequest
        }
        _ => ResponseError::InvalidConfig,
    };
    (code, e.to_string())
}

/// IncrementalAlterConfigs of the broker's loggers: SET (0) a level, DELETE (1) a logger;
/// APPEND and SUBTRACT are not for loggers (Kafka: `INVALID_REQUEST`).
fn alter_loggers(
    b: &Shared,
    who: &Session,
    name: &str,
    configs: &[(String, i8, Option<String>)],
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    if let Some(e) = refused(
        b,
        who,
        RESOURCE_BROKER_LOGGER,
        name,
        Operation::AlterConfigs,
    ) {
        return Err(e);
    }
    this_broker(b, name)?;
    let mut changes = BTreeMap::new();
    for (logger, op, value) in configs {
        let change = match op {
            0 => Some(value.clone().unwrap_or_default()),
            1 => None,
            op => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("operation {op} on logger {logger}: loggers are SET or DELETEd"),
                ))
            }
        };
        changes.insert(logger.clone(), change);
    }
    crate::logging::change(&changes, validate_only).map_err(|e| logger_error(&e))
}

fn unsupported(resource_type: i8) -> (ResponseError, String) {
    (
        ResponseError::InvalidRequest,
        format!("resource type {resource_type}: mirrorlog-broker has configs of topics (2), the broker (4) and its loggers (8)"),
    )
}

fn refusal(r: broker_configs::Refusal) -> (ResponseError, String) {
    match r {
        broker_configs::Refusal::Request(m) => (ResponseError::InvalidRequest, m),
        broker_configs::Refusal::Config(m) => (ResponseError::InvalidConfig, m),
    }
}

/// Kafka's code and message of a change's outcome.
fn answer(r: Result<(), (ResponseError, String)>) -> (i16, Option<StrBytes>) {
    match r {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), Some(str_bytes(&message))),
    }
}

/// An IncrementalAlterConfigs operation Kafka does not define (its `OpType`: 0 SET, 1 DELETE,
/// 2 APPEND, 3 SUBTRACT); Kafka answers `INVALID_REQUEST`.
#[derive(Debug, thiserror::Error)]
#[error("Unknown alter config operation type {op} for {key}")]
struct UnknownOperation {
    op: i8,
    key: String,
}

/// Changes one resource's configs, from either AlterConfigs API: `change` turns its current
/// stored configs (a topic's, or the broker level's) into the new ones, which are then checked
/// and, unless `validate_only`, stored and applied.
async fn alter_resource(
    b: &Shared,
    who: &Session,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    change: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), UnknownOperation>,
) -> Result<(), (ResponseError, String)> {
    if let Some(e) = refused(b, who, resource_type, name, Operation::AlterConfigs) {
        return Err(e);
    }
    match resource_type {
        RESOURCE_BROKER_LOGGER => Err((
            ResponseError::InvalidRequest,
            "AlterConfigs does not change broker loggers: use IncrementalAlterConfigs".into(),
        )),
        RESOURCE_TOPIC => {
            let mut configs = b
                .registry()
                .get(name)
                .map(|t| t.configs.clone())
                .ok_or_else(|| {
                    (
                        ResponseError::UnknownTopicOrPartition,
                        format!("topic {name} does not exist"),
                    )
                })?;
            change(&mut configs).map_err(|e| (ResponseError::InvalidRequest, e.to_string()))?;
            b.alter_topic_configs(name, configs, validate_only)
                .await
                .map_err(|e| (super::topics::topic_error(&e), e.to_string()))
        }
        RESOURCE_BROKER => {
            let level = broker_configs::level(name, b.config.node_id).map_err(refusal)?;
            let levels = b.broker_config_levels();
            let mut configs = match level {
                broker_configs::Level::Default => levels.default,
                broker_configs::Level::Broker => levels.broker,
            };
            change(&mut configs).map_err(|e| (ResponseError::InvalidRequest, e.to_string()))?;
            b.alter_broker_configs(level, configs, validate_only)
                .await
                .map_err(refusal)
        }
        other => Err(unsupported(other)),
    }
}

/// AlterConfigs: a resource's configs replaced by those given (Kafka's semantics: a config
/// not named goes back to its default). `validate_only` checks alone.
pub async fn alter_configs(b: &Shared, who: &Session, r: AlterConfigsRequest) -> ResponseKind {
    let mut resp = AlterConfigsResponse::default();
    for res in r.resources {
        let name = res.resource_name.to_string();
        let (error_code, error_message) = answer(
            alter_resource(b, who, res.resource_type, &name, r.validate_only, |c| {
                c.clear();
                for x in &res.configs {
                    let value = x.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
                    c.insert(x.name.to_string(), value);
                }
                Ok(())
            })
            .await,
        );
        let mut out = AlterConfigsResourceResponse::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        out.error_code = error_code;
        out.error_message = error_message;
        resp.responses.push(out);
    }
    ResponseKind::AlterConfigs(resp)
}

/// IncrementalAlterConfigs: SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) of list values,
/// on a topic's or the broker's configs. `validate_only` checks alone.
pub async fn incremental_alter_configs(
    b: &Shared,
    who: &Session,
    r: IncrementalAlterConfigsRequest,
) -> ResponseKind {
    let mut resp = IncrementalAlterConfigsResponse::default();
    for res in r.resources {
        let (error_code, error_message) = answer(if res.resource_type == RESOURCE_BROKER_LOGGER {
            let configs: Vec<(String, i8, Option<String>)> = res
                .configs
                .iter()
                .map(|x| {
                    (
                        x.name.to_string(),
                        x.config_operation,
                        x.value.as_ref().map(ToString::to_string),
                    )
                })
                .collect();
            let name = res.resource_name.to_string();
            alter_loggers(b, who, &name, &configs, r.validate_only)
        } else {
            incremental_change(b, who, &res, r.validate_only).await
        });
        let mut out = IncrementalAlterConfigsResourceResponse::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        out.error_code = error_code;
        out.error_message = error_message;
        resp.responses.push(out);
    }
    ResponseKind::IncrementalAlterConfigs(resp)
}

/// One resource's IncrementalAlterConfigs of topic or broker configs: SET, DELETE, APPEND and
/// SUBTRACT applied to its stored configs, then checked, stored and applied.
async fn incremental_change(
    b: &Shared,
    who: &Session,
    res: &kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let name = res.resource_name.to_string();
    // The value in effect of a config not set at this resource, for APPEND and SUBTRACT.
    let in_effect = |key: &str| -> Option<String> {
        described(b, res.resource_type, &name)
            .ok()?
            .into_iter()
            .find(|d| d.name == key)
            .and_then(|d| d.value)
    };
    alter_resource(b, who, res.resource_type, &name, validate_only, |c| {
        for x in &res.configs {
            let key = x.name.to_string();
            let value = x.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
            let list = |s: &str| -> Vec<String> {
                s.split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(str::to_string)
                    .collect()
            };
            match x.config_operation {
                0 => {
                    c.insert(key, value);
                }
                1 => {
                    c.remove(&key);
                }
                2 | 3 => {
                    let current = c.get(&key).cloned().or_else(|| in_effect(&key));
                    let mut items = list(current.as_deref().unwrap_or(""));
                    for v in list(&value) {
                        if x.config_operation == 2 && !items.contains(&v) {
                            items.push(v);
                        } else if x.config_operation == 3 {
                            items.retain(|i| *i != v);
                        }
                    }
                    c.insert(key, items.join(","));
                }
                op => return Err(UnknownOperation { op, key }),
            }
        }
        Ok(())
    })
    .await
}
