"""Kafka's cluster admin APIs through kafka-python's admin client: DescribeCluster
(the cluster id, this broker as controller and as the one broker, at the address its listener
advertises) and DescribeLogDirs (the log directory, each partition's size in bytes: the
partition written to is larger than the empty one).

`broker`: the broker's configs through the same client: DescribeConfigs of broker 1 lists
them with Kafka's sources (log.dirs static and read-only, message.max.bytes a default), and an
AlterConfigs of log.retention.ms and message.max.bytes shows as DYNAMIC_BROKER_CONFIG and in the
topic defaults; a read-only config is refused with INVALID_REQUEST.

Usage: python admin_apis.py describe|broker   (crates/mirrorlog-broker/tests/broker_admin.rs)
"""

import sys

from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from harness import Broker


def describe():
    a = Broker("a", cluster_id="east").start()
    admin = KafkaAdminClient(bootstrap_servers=a.kafka)
    admin.create_topics([NewTopic("full", 2, 1), NewTopic("empty", 1, 1)])
    p = KafkaProducer(bootstrap_servers=a.kafka)
    for n in range(100):
        p.send("full", value=b"x" * 100, partition=0)
    p.flush(30)
    p.close()
    cluster = admin.describe_cluster()
    host, port = a.kafka.rsplit(":", 1)
    assert cluster["cluster_id"] == "east", cluster
    assert cluster["controller_id"] == 1, cluster
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == \
        [(1, host, int(port))], cluster
    print(f"ok describe_cluster: {cluster['cluster_id']} {cluster['brokers']}")
    dirs = admin.describe_log_dirs()
    assert len(dirs) == 1 and len(dirs[0]["log_dirs"]) == 1, dirs
    d = dirs[0]["log_dirs"][0]
    sizes = {(t["name"], p["partition_index"]): p["partition_size"]
             for t in d["topics"] for p in t["partitions"]}
    assert d["log_dir"].endswith("/log"), d
    assert sizes[("full", 0)] > 100 * 100, sizes
    assert sizes[("full", 1)] == 0 and sizes[("empty", 0)] == 0, sizes
    only = admin.describe_log_dirs({"full": [1]})[0]["log_dirs"][0]["topics"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in only] == \
        [("full", [1])], only
    print(f"ok describe_log_dirs: {sorted(sizes.items())}")
    admin.close()
    a.stop()


def described(admin, resource):
    """DescribeConfigs of every config of one resource: {name: (value, source, read_only)}."""
    out = admin.describe_configs([resource], config_filter="all")
    (configs,) = [c for by_name in out.values() for c in by_name.values()]
    return {k: (c["value"], c["config_source"], c["read_only"]) for k, c in configs.items()}


def broker():
    a = Broker("a").start()
    admin = KafkaAdminClient(bootstrap_servers=a.kafka)
    admin.create_topics([NewTopic("t", 1, 1)])
    me = ConfigResource(ConfigResourceType.BROKER, "1")
    before = described(admin, me)
    assert before["log.dirs"][1:] == ("STATIC_BROKER_CONFIG", True), before["log.dirs"]
    assert before["message.max.bytes"] == ("1048588", "DEFAULT_CONFIG", False), \
        before["message.max.bytes"]
    out = admin.alter_configs([ConfigResource(
        ConfigResourceType.BROKER, "1",
        configs={"log.retention.ms": "3600000", "message.max.bytes": "2000000"})])
    assert out == {"broker": {"1": "OK"}}, out
    after = described(admin, me)
    assert after["log.retention.ms"] == ("3600000", "DYNAMIC_BROKER_CONFIG", False), \
        after["log.retention.ms"]
    assert after["message.max.bytes"] == ("2000000", "DYNAMIC_BROKER_CONFIG", False), \
        after["message.max.bytes"]
    topic = described(admin, ConfigResource(ConfigResourceType.TOPIC, "t"))
    assert topic["retention.ms"][0] == "3600000", topic["retention.ms"]
    print("ok broker configs described and altered")
    # kafka-python checks names itself unless told not to; the broker refuses a static one.
    refused = admin.alter_configs([ConfigResource(
        ConfigResourceType.BROKER, "1", configs={"log.dirs": "/elsewhere"})],
        raise_on_unknown=False)
    assert "[Error 42]" in str(refused["broker"]["1"]), refused
    print("ok read-only broker config refused")
    admin.close()
    a.stop()


if __name__ == "__main__":
    {"describe": describe, "broker": broker}[sys.argv[1]]()
