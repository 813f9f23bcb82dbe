"""A remote client reaches the broker through `advertised.listeners`.

A network namespace joined to this one by a veth pair is the remote host. The broker has two
listeners: INTERNAL on loopback, and EXTERNAL on every address (0.0.0.0) advertising the veth's
address. kafka-python inside the namespace bootstraps from that address, is told it again by
Metadata, and produces and consumes there; librdkafka on the host reads the same records
through INTERNAL, which advertises loopback. A broker that advertises loopback to everyone
(`advertised.host 127.0.0.1`) is reached for Metadata from the namespace but then sends the
client to its own loopback, where no broker is: the produce fails, which is why the setting
exists.

Needs root (it creates a namespace and a veth pair, and removes them). Usage:
  python netns.py remote                          (crates/mirrorlog-broker/tests/broker_listeners.rs)
  python netns.py client BOOTSTRAP TOPIC COUNT    (run inside the namespace by `remote`)
"""

import os
import socket
import subprocess
import sys
import time

from harness import Broker, consume

N = 50


def ip(*args, ns=None):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
    subprocess.run(cmd, check=True, capture_output=True)


def free_port(host):
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def client(bootstrap, topic, count):
    """Produces COUNT records to TOPIC and reads them back; prints what it saw."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    count = int(count)
    try:
        p = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=3000,
                          max_block_ms=6000, retries=0)
        for n in range(count):
            p.send(topic, value=b"from the namespace %d" % n, partition=0).get(timeout=6)
        p.close()
    except Exception as e:  # the point of the negative case: report it, do not trace back
        print(f"produce failed: {type(e).__name__}")
        return
    c = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5000,
                      auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([TopicPartition(topic, 0)])
    got = [m.value for m in c]
    c.close()
    print(f"consumed {len(got)}")


def remote():
    assert os.geteuid() == 0, "this test creates a network namespace: run it as root"
    tag = os.getpid() % 200 + 20
    ns, host_if, ns_if = f"mlns{tag}", f"mlh{tag}", f"mln{tag}"
    here, there = f"10.213.{tag}.1", f"10.213.{tag}.2"
    ip("netns", "add", ns)
    try:
        ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        ip("link", "set", ns_if, "netns", ns)
        ip("addr", "add", f"{here}/24", "dev", host_if)
        ip("link", "set", host_if, "up")
        ip("addr", "add", f"{there}/24", "dev", ns_if, ns=ns)
        ip("link", "set", ns_if, "up", ns=ns)
        ip("link", "set", "lo", "up", ns=ns)
        run(ns, here)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)


def in_namespace(ns, bootstrap, topic):
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, __file__, "client",
                          bootstrap, topic, str(N)], capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    return out.stdout.decode().strip()


def run(ns, here):
    port = free_port(here)
    a = Broker("a", extra=[
        "--set", f"listeners=INTERNAL://127.0.0.1:0,EXTERNAL://0.0.0.0:{port}",
        "--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "--set", f"advertised.listeners=EXTERNAL://{here}:{port}",
        "--set", "num.partitions=1"]).start()
    said = in_namespace(ns, f"{here}:{port}", "remote")
    assert said == f"consumed {N}", said
    local = consume(a.kafka, "remote", 1)
    assert [v for (_, _, _, v, _) in local] == [b"from the namespace %d" % n for n in range(N)]
    print(f"ok remote client through advertised.listeners: {said}; the host reads the same")

    port = free_port(here)
    b = Broker("b", extra=["--listen", f"0.0.0.0:{port}", "--advertised-host", "127.0.0.1",
                           "--set", "num.partitions=1"]).start()
    said = in_namespace(ns, f"{here}:{port}", "stranded")
    assert said.startswith("produce failed"), said
    print(f"ok advertising loopback strands the remote client: {said}")
    for x in (a, b):
        x.stop()


if __name__ == "__main__":
    {"remote": remote, "client": client}[sys.argv[1]](*sys.argv[2:])
