//! DescribeConfigs for topics: every topic config Kafka documents, its value (as set at
//! CreateTopics, or the default), and in the documentation field (v3+, when asked) whether the engine applies it ([`crate::topic_configs::describe`]). Broker resources answer
//! `INVALID_REQUEST`: broker configs are the exposure issue's (AlterConfigs with them).

use super::str_bytes;
use crate::broker::Shared;
use crate::topic_configs;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind};

/// Kafka's `ConfigResource.Type.TOPIC`.
const RESOURCE_TOPIC: i8 = 2;
/// `DescribeConfigsResponse.ConfigSource.TOPIC_CONFIG`.
const SOURCE_TOPIC: i8 = 1;
/// `DescribeConfigsResponse.ConfigSource.DEFAULT_CONFIG`.
const SOURCE_DEFAULT: i8 = 5;

/// DescribeConfigs: topics, every config or the keys asked for.
pub fn describe_configs(b: &Shared, r: &DescribeConfigsRequest, version: i16) -> ResponseKind {
    let mut resp = DescribeConfigsResponse::default();
    for res in &r.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let name = res.resource_name.to_string();
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
