//! DescribeConfigs for topics: every topic config Kafka documents, its value (as set at
//! CreateTopics, or the default), and in the documentation field (v3+, when asked) whether the engine applies it ([`crate::topic_configs::describe`]). Broker resources answer
//! `INVALID_REQUEST`: broker configs are the exposure issue's.
//!
//! AlterConfigs and IncrementalAlterConfigs for topics: the new configs checked by the parser
//! and the engine's bounds before anything is written (`validate_only` answers with the checks
//! alone), then stored and applied live to every partition (`Broker::alter_topic_configs`).

use super::str_bytes;
use crate::acl::Operation;
use crate::broker::Shared;
use crate::session::Session;
use crate::topic_configs;
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
        RESOURCE_BROKER if !who.may_cluster(b, op) => Some((
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.".into(),
        )),
        _ => None,
    }
}
/// `DescribeConfigsResponse.ConfigSource.TOPIC_CONFIG`.
const SOURCE_TOPIC: i8 = 1;
/// `DescribeConfigsResponse.ConfigSource.DEFAULT_CONFIG`.
const SOURCE_DEFAULT: i8 = 5;

/// DescribeConfigs: topics, every config or the keys asked for.
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
        if let Some((code, message)) =
            refused(b, who, res.resource_type, &name, Operation::DescribeConfigs)
        {
            out.error_code = code.code();
            out.error_message = Some(str_bytes(&message));
            resp.results.push(out);
            continue;
        }
        if res.resource_type != RESOURCE_TOPIC {
            out.error_code = ResponseError::InvalidRequest.code();
            out.error_message = Some(str_bytes(
                "mirrorlog-broker describes topic configs only (resource type 2)",
            ));
            resp.results.push(out);
            continue;
        }
        let Some(topic) = b.registry().get(&name).cloned() else {
            out.error_code = ResponseError::UnknownTopicOrPartition.code();
            out.error_message = Some(str_bytes(&format!("topic {name} does not exist")));
            resp.results.push(out);
            continue;
        };
        let wanted = res.configuration_keys.as_ref();
        for d in topic_configs::describe(&topic.configs, &b.config.topic_defaults) {
            if wanted.is_some_and(|keys| !keys.iter().any(|k| k.as_str() == d.name)) {
                continue;
            }
            let mut c = DescribeConfigsResourceResult::default();
            c.name = str_bytes(d.name);
            c.value = Some(str_bytes(&d.value));
            c.read_only = false;
            c.config_source = if d.set { SOURCE_TOPIC } else { SOURCE_DEFAULT };
            c.is_sensitive = false;
            if version >= 3 {
                c.config_type = d.config_type;
                if r.include_documentation {
                    c.documentation = Some(str_bytes(&d.effect));
                }
            }
            out.configs.push(c);
        }
        resp.results.push(out);
    }
    ResponseKind::DescribeConfigs(resp)
}

/// One resource's change, from either AlterConfigs API: the topic's new configs or the error.
fn altered(
    b: &Shared,
    who: &Session,
    resource_type: i8,
    name: &str,
    change: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), String>,
) -> Result<BTreeMap<String, String>, (ResponseError, String)> {
    if let Some(e) = refused(b, who, resource_type, name, Operation::AlterConfigs) {
        return Err(e);
    }
    if resource_type != RESOURCE_TOPIC {
        return Err((
            ResponseError::InvalidRequest,
            "mirrorlog-broker alters topic configs only (resource type 2)".into(),
        ));
    }
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
    change(&mut configs).map_err(|m| (ResponseError::InvalidConfig, m))?;
    Ok(configs)
}

async fn apply(
    b: &Shared,
    name: &str,
    configs: Result<BTreeMap<String, String>, (ResponseError, String)>,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    let r = match configs {
        Ok(c) => b
            .alter_topic_configs(name, c, validate_only)
            .await
            .map_err(|e| (super::admin::topic_error(&e), e.to_string())),
        Err(e) => Err(e),
    };
    match r {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), Some(str_bytes(&message))),
    }
}

/// AlterConfigs: a topic's configs replaced by those given (Kafka's semantics: a config not
/// named goes back to its default). `validate_only` checks alone.
pub async fn alter_configs(b: &Shared, who: &Session, r: AlterConfigsRequest) -> ResponseKind {
    let mut resp = AlterConfigsResponse::default();
    for res in r.resources {
        let name = res.resource_name.to_string();
        let configs = altered(b, who, res.resource_type, &name, |c| {
            c.clear();
            for x in &res.configs {
                let value = x.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
                c.insert(x.name.to_string(), value);
            }
            Ok(())
        });
        let (error_code, error_message) = apply(b, &name, configs, r.validate_only).await;
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
/// on a topic's configs. `validate_only` checks alone.
pub async fn incremental_alter_configs(
    b: &Shared,
    who: &Session,
    r: IncrementalAlterConfigsRequest,
) -> ResponseKind {
    let mut resp = IncrementalAlterConfigsResponse::default();
    for res in r.resources {
        let name = res.resource_name.to_string();
        let configs = altered(b, who, res.resource_type, &name, |c| {
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
                        let current = c.get(&key).cloned().or_else(|| {
                            topic_configs::describe(&BTreeMap::new(), &b.config.topic_defaults)
                                .into_iter()
                                .find(|d| d.name == key)
                                .map(|d| d.value)
                        });
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
                    op => return Err(format!("unknown config operation {op} for {key}")),
                }
            }
            Ok(())
        });
        let (error_code, error_message) = apply(b, &name, configs, r.validate_only).await;
        let mut out = IncrementalAlterConfigsResourceResponse::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        out.error_code = error_code;
        out.error_message = error_message;
        resp.responses.push(out);
    }
    ResponseKind::IncrementalAlterConfigs(resp)
}
