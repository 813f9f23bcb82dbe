"""Kafka's cluster admin APIs through kafka-python's admin client (issue 36): DescribeCluster
(the cluster id, this broker as controller and as the one broker, at the address its listener
advertises) and DescribeLogDirs (the log directory, each partition's size in bytes: the
partition written to is larger than the empty one).

Usage: python admin_apis.py describe   (tools/tests/broker_admin.rs)
"""

import sys

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

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


if __name__ == "__main__":
    {"describe": describe}[sys.argv[1]]()
