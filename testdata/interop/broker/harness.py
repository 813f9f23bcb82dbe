"""Broker processes for the cross-process tests: start, stop (SIGTERM), kill (SIGKILL), restart,
the admin surface, and the stored batches of a partition as `mirrorlog dump --json` sees them.

Used by the scripts beside it, which crates/mirrorlog-broker/tests/broker_*.rs run with:
  MIRRORLOG_BROKER_BIN  the mirrorlog-broker binary
  MIRRORLOG_TOOL_BIN    the mirrorlog binary (dump, verify)
  MIRRORLOG_TEST_DIR    a scratch directory for data directories and logs
Every broker listens on loopback with ports the kernel picks (`:0`), read back from its ready
line. Every wait is bounded; a failed check raises, and the script exits non-zero.
"""

import json
import os
import signal
import subprocess
import time
import urllib.request

BROKER = os.environ["MIRRORLOG_BROKER_BIN"]
TOOL = os.environ["MIRRORLOG_TOOL_BIN"]
SCRATCH = os.environ["MIRRORLOG_TEST_DIR"]

READY_TIMEOUT_S = 60


def create_topic(bootstrap, name, partitions):
    """CreateTopics through librdkafka's admin client."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30).values():
        f.result(timeout=30)


def consume(bootstrap, topic, partitions, isolation="read_committed", want=None, timeout_s=60,
            conf=None):
    """Every record of `topic` from its log start to the end (partition EOF on each; with
    `want`, not before that many records): (partition, offset, key, value, headers) tuples.
    `conf`: more client settings (TLS)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                  "auto.offset.reset": "earliest", **(conf or {})})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, eof = [], set()
    # librdkafka reports a partition's EOF once, when it reaches the end; a record after it
    # means the partition is not at its end any more. Done when every partition is at its end
    # and (with `want`) that many records arrived, whichever partition finished first.
    deadline = time.time() + timeout_s
    while (len(eof) < partitions or len(out) < (want or 0)) and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
                continue
            raise AssertionError(f"consume {topic}: {m.error()}")
        eof.discard(m.partition())
        out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers()))
    c.close()
    assert len(eof) == partitions and len(out) >= (want or 0), \
        f"consume {topic}: only {sorted(eof)} reached the end ({len(out)} records)"
    return out


class Broker:
    """One broker process over one data directory (kept across restarts)."""

    def __init__(self, name, cluster_id=None, extra=()):
        self.name = name
        self.cluster_id = cluster_id or name
        self.data_dir = os.path.join(SCRATCH, name)
        self.extra = list(extra)
        self.proc = None
        self.kafka = None
        self.admin_addr = None
        self.starts = 0

    def start(self):
        """Starts the process (on the ports it had, after the first start) and waits until ready."""
        listen = self.kafka or "127.0.0.1:0"
        admin = self.admin_addr or "127.0.0.1:0"
        log = open(os.path.join(SCRATCH, f"{self.name}.{self.starts}.log"), "wb")
        self.starts += 1
        self.proc = subprocess.Popen(
            [BROKER, "--data-dir", self.data_dir, "--cluster-id", self.cluster_id,
             "--listen", listen, "--admin-listen", admin] + self.extra,
            # MIRRORLOG_BROKER_LOG sets the broker's RUST_LOG (e.g. `debug,mirrorlog_broker::server=trace`).
            stdout=subprocess.PIPE, stderr=log,
            env=dict(os.environ, RUST_LOG=os.environ.get("MIRRORLOG_BROKER_LOG", "info")))
        deadline = time.time() + READY_TIMEOUT_S
        line = b""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(b"mirrorlog-broker ready"):
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before ready")
        else:
            raise RuntimeError(f"{self.name} not ready in {READY_TIMEOUT_S}s")
        fields = dict(kv.split("=", 1) for kv in line.decode().split()[2:])
        self.kafka, self.admin_addr = fields["kafka"], fields["admin"]
        return self

    def stop(self):
        """SIGTERM, and the clean shutdown it must do (exit 0)."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        assert rc == 0, f"{self.name} exited {rc} on SIGTERM"
        self.proc = None

    def kill(self):
        """SIGKILL: no shutdown at all."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def token(self):
        """The admin surface's bearer token, as the broker made it in its data directory."""
        with open(os.path.join(self.data_dir, "broker", "admin.token")) as f:
            return f.read().strip()

    def admin(self, method, path, body=None, ok=True):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://{self.admin_addr}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token()}"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                out = json.loads(r.read())
        except urllib.error.HTTPError as e:
            out = json.loads(e.read())
            if ok:
                raise AssertionError(f"{method} {path}: {e.code} {out}")
            return e.code, out
        return (200, out) if not ok else out

    def mirror(self, source_name, source, topics):
        return self.admin("POST", "/mirrors",
                          {"name": source_name, "bootstrap": source.kafka, "topics": topics})

    def failover(self, source_name):
        return self.admin("POST", f"/mirrors/{source_name}/stop")

    def partitions(self, topic):
        for t in self.admin("GET", "/topics")["topics"]:
            if t["name"] == topic:
                return t["partitions"]
        raise AssertionError(f"{self.name} has no topic {topic}")

    def wait_caught_up(self, source_name, source, topic, timeout_s=60):
        """Until every partition of `topic` here ends where the source's does."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            want = {p["partition"]: p["log_end"] for p in source.partitions(topic)}
            have = {p["partition"]: p["log_end"] for p in self.partitions(topic)}
            if want == have:
                return have
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not caught up with {source.name} on {topic}: "
                             f"{have} vs {want}; {self.admin('GET', '/mirrors')}")

    def batches(self, topic, partition):
        """Every stored batch of the partition, as dump reports it, without file positions."""
        d = os.path.join(self.data_dir, "log", f"{topic}-{partition}")
        out = subprocess.run([TOOL, "dump", "--json", d], capture_output=True, check=True)
        batches = []
        for line in out.stdout.decode().splitlines():
            b = json.loads(line)
            if "base_offset" in b and "crc" in b:
                b.pop("position", None)
                batches.append(b)
        batches.sort(key=lambda b: b["base_offset"])
        return batches

    def verify(self):
        out = subprocess.run([TOOL, "verify", os.path.join(self.data_dir, "log")],
                             capture_output=True)
        assert out.returncode == 0, f"verify {self.name}: {out.stdout.decode()} {out.stderr.decode()}"


def same_batches(dst, src, topic, partitions, upto=None):
    """`dst` stores exactly `src`'s batches of `topic` (those below `upto[p]` when given), bytes
    and all: every header field and the CRC of the rest."""
    for p in range(partitions):
        a = src.batches(topic, p)
        b = dst.batches(topic, p)
        if upto is not None:
            a = [x for x in a if x["base_offset"] < upto[p]]
            b = [x for x in b if x["base_offset"] < upto[p]]
        assert a == b, (f"{dst.name} differs from {src.name} on {topic}-{p}: "
                        f"{len(b)} vs {len(a)} batches; first difference "
                        f"{next((x, y) for x, y in zip(b + [None] * len(a), a + [None] * len(b)) if x != y)}")
        assert all(x["crc_valid"] for x in b)


def barrier_at(broker, topic, partition, offset):
    """The batch at `offset` is a control batch without a producer: the barrier."""
    for b in broker.batches(topic, partition):
        if b["base_offset"] == offset:
            assert b["control"] and b["producer_id"] == -1, b
            return b
    raise AssertionError(f"no batch at {offset} in {broker.name} {topic}-{partition}")
