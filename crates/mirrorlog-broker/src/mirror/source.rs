//! What the mirror knows of its source cluster: the bootstrap list (Kafka's
//! `bootstrap.servers`, any of which may be down), and the metadata — brokers, each partition's
//! leader and leader epoch, each topic's id and partition count — asked of whichever broker
//! answers first.

use crate::net::client::{Client, ClientError, Security};
use crate::net::wire::topic_name;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, RequestKind, ResponseKind};
use std::collections::{BTreeMap, HashMap};

pub use mirrorlog::mirror::destination::Leader;

/// One topic at the source.
#[derive(Debug, Clone, Default)]
pub struct SourceTopic {
    /// Its error code in the Metadata answer (0: none).
    pub error_code: i16,
    /// Its id (Metadata v10+; nil before).
    pub topic_id: uuid::Uuid,
    /// Its partitions' leaders, by partition index (`None`: no leader now).
    pub leaders: BTreeMap<i32, Option<Leader>>,
}

/// The source's metadata for the mirrored topics.
#[derive(Debug, Clone, Default)]
pub struct SourceView {
    /// Broker id → `HOST:PORT`.
    pub brokers: BTreeMap<i32, String>,
    /// Topic name → what the source says of it (absent: not in the answer).
    pub topics: HashMap<String, SourceTopic>,
    /// The source's cluster id (Metadata v2+).
    pub cluster_id: Option<String>,
}

impl SourceView {
    /// The leader of `topic`'s `partition`, if the source names one.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<Leader> {
        self.topics
            .get(topic)
            .and_then(|t| t.leaders.get(&partition).copied().flatten())
    }
}

/// The addresses of a bootstrap list, `HOST:PORT[,HOST:PORT...]`.
pub fn bootstrap_list(bootstrap: &str) -> Vec<String> {
    bootstrap
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `ask`'s answer from the first of `addrs` that gives one; every address's failure
/// otherwise (`what` names the request in the error).
pub async fn from_any<T, F, Fut>(addrs: &[String], what: &str, ask: F) -> Result<T, ClientError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut failures = Vec::new();
    for addr in addrs {
        match ask(addr.clone()).await {
            Ok(v) => return Ok(v),
            Err(e) => failures.push(e.0),
        }
    }
    Err(ClientError(if failures.is_empty() {
        "no source broker address".into()
    } else {
        format!("no source broker answered {what}: {}", failures.join("; "))
    }))
}

/// Metadata for `topics` from the first of `addrs` that answers.
pub async fn metadata(
    addrs: &[String],
    topics: &[String],
    security: &Security,
) -> Result<SourceView, ClientError> {
    from_any(addrs, "Metadata", |addr| async move {
        metadata_from(&addr, topics, security).await
    })
    .await
}

async fn metadata_from(
    addr: &str,
    topics: &[String],
    security: &Security,
) -> Result<SourceView, ClientError> {
    let mut client = Client::connect_with(addr, security).await?;
    let version = client.version(ApiKey::Metadata, 1, 12)?;
    let mut req = MetadataRequest::default();
    req.topics = Some(
        topics
            .iter()
            .map(|t| {
                let mut x = MetadataRequestTopic::default();
                x.name = Some(topic_name(t));
                x
            })
            .collect(),
    );
    req.allow_auto_topic_creation = false;
    let ResponseKind::Metadata(m) = client
        .call(ApiKey::Metadata, version, RequestKind::Metadata(req))
        .await?
    else {
        return Err(ClientError("Metadata answered with another API".into()));
    };
    let mut view = SourceView {
        cluster_id: m.cluster_id.as_ref().map(|c| c.to_string()),
        ..SourceView::default()
    };
    for b in m.brokers {
        view.brokers
            .insert(b.node_id.0, format!("{}:{}", b.host.as_str(), b.port));
    }
    for t in m.topics {
        let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
            continue;
        };
        let mut topic = SourceTopic {
            error_code: t.error_code,
            topic_id: t.topic_id,
            leaders: BTreeMap::new(),
        };
        for p in t.partitions {
            let leader = (p.leader_id.0 >= 0).then_some(Leader {
                broker: p.leader_id.0,
                epoch: if version >= 7 { p.leader_epoch } else { -1 },
            });
            topic.leaders.insert(p.partition_index, leader);
        }
        view.topics.insert(name, topic);
    }
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bootstrap_list_is_split_on_commas() {
        assert_eq!(
            bootstrap_list("a:1, b:2,,c:3 "),
            vec!["a:1".to_string(), "b:2".into(), "c:3".into()]
        );
        assert_eq!(bootstrap_list("h:9092"), vec!["h:9092".to_string()]);
        assert!(bootstrap_list(" ").is_empty());
    }
}
