"""Group membership with real clients: sessions, static members, other clients.

- Session timeout: two librdkafka consumers share a 6-partition topic; one stops polling and
  heartbeating (its process is frozen with SIGSTOP) and is removed after `session.timeout.ms`;
  its partitions move to the other.
- Static membership (KIP-345): two consumers with `group.instance.id`; one restarts (a new
  process, same instance id) within the session timeout and gets the same partitions back,
  and the group's generation does not change (no rebalance).
- kafka-python's `KafkaConsumer(group_id=...)` subscribes, consumes every record, commits, and
  a second one resumes at the commit.
- kcat `-G` (a balanced consumer) consumes every record of a topic.
- DescribeGroups (kafka-python's admin) shows the Stable group, its protocol and members.

Usage: python membership.py   (crates/mirrorlog-broker/tests/broker_groups.rs)
"""

import os
import signal
import subprocess
import sys
import time

from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic

from harness import SCRATCH, Broker

QUIET = {"log_level": 3}
HERE = os.path.dirname(os.path.abspath(__file__))

# A consumer in its own process (so that it can be frozen or restarted): it prints its
# assignment at every rebalance (the eager protocol assigns anew each time), until killed.
CHILD = r"""
import sys
from confluent_kafka import Consumer
bootstrap, group, topic, instance = sys.argv[1:5]
conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "log_level": 3}
if instance != "-":
    conf["group.instance.id"] = instance
c = Consumer(conf)
def on_assign(cons, parts):
    print("assigned", ",".join(str(p.partition) for p in sorted(parts, key=lambda p: p.partition)), flush=True)
c.subscribe([topic], on_assign=on_assign)
while True:
    c.poll(0.2)
"""


class Child:
    def __init__(self, bootstrap, group, topic, instance="-"):
        self.p = subprocess.Popen([sys.executable, "-c", CHILD, bootstrap, group, topic, instance],
                                  stdout=subprocess.PIPE, text=True)
        self.assigned = None

    def wait_assigned(self, want, timeout=60):
        """Reads assignments until one of `want` partitions is printed; returns it."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.p.stdout.readline()
            assert line, "the consumer exited"
            if line.startswith("assigned"):
                parts = line.split()[1:]
                self.assigned = [int(x) for x in parts[0].split(",")] if parts else []
                if len(self.assigned) == want:
                    return self.assigned
        raise AssertionError(f"no assignment of {want} partitions in {timeout}s: {self.assigned}")

    def kill(self):
        self.p.kill()
        self.p.wait()


class Described:
    """A group as kafka-python's admin describes it (DescribeGroups)."""

    def __init__(self, d):
        self.raw = d
        self.state = d["group_state"]
        self.protocol_type = d["protocol_type"]
        self.protocol = d["protocol_data"]
        self.members = [Member(m) for m in d["members"]]

    def __repr__(self):
        return repr(self.raw)


class Member:
    def __init__(self, m):
        self.member_id = m["member_id"]
        self.group_instance_id = m["group_instance_id"]


def describe(admin, group):
    return Described(admin.describe_groups([group])[group])


def session_timeout(b, admin):
    admin.create_topics([NewTopic("sessions", 6, 1)])
    a = Child(b.kafka, "g-session", "sessions")
    a.wait_assigned(6)
    c = Child(b.kafka, "g-session", "sessions")
    got_a, got_c = a.wait_assigned(3), c.wait_assigned(3)
    assert sorted(got_a + got_c) == list(range(6)), (got_a, got_c)
    # Freeze c: no heartbeats. After session.timeout.ms (6 s) it is removed, and a gets all.
    os.kill(c.p.pid, signal.SIGSTOP)
    frozen = time.time()
    assert a.wait_assigned(6, timeout=30) == list(range(6))
    took = time.time() - frozen
    assert took >= 5, f"partitions moved after {took:.1f}s, before the session timeout"
    print(f"  session timeout: the frozen member's partitions moved after {took:.1f}s", flush=True)
    g = describe(admin, "g-session")
    assert g.state == "Stable" and len(g.members) == 1, g
    os.kill(c.p.pid, signal.SIGCONT)
    c.kill()
    a.kill()


def static_member(b, admin):
    admin.create_topics([NewTopic("statics", 6, 1)])
    a = Child(b.kafka, "g-static", "statics", "inst-a")
    a.wait_assigned(6)
    s = Child(b.kafka, "g-static", "statics", "inst-b")
    got_s = s.wait_assigned(3)
    a.wait_assigned(3)
    before = describe(admin, "g-static")
    assert before.state == "Stable", before
    ids = {m.group_instance_id for m in before.members}
    assert ids == {"inst-a", "inst-b"}, ids
    # inst-b's process dies without leaving (static members do not send LeaveGroup on
    # close) and a new one with the same instance id starts within the session timeout.
    s.kill()
    s2 = Child(b.kafka, "g-static", "statics", "inst-b")
    assert s2.wait_assigned(3) == got_s, "the restarted static member got other partitions"
    after = describe(admin, "g-static")
    assert after.state == "Stable", after
    old = {m.group_instance_id: m.member_id for m in before.members}
    new = {m.group_instance_id: m.member_id for m in after.members}
    assert new["inst-a"] == old["inst-a"] and new["inst-b"] != old["inst-b"], (old, new)
    # No rebalance: inst-a kept its assignment all along (it printed nothing new).
    a.p.send_signal(signal.SIGKILL)
    rest = a.p.stdout.read()
    assert "assigned" not in rest, f"inst-a was reassigned: {rest!r}"
    a.p.wait()
    s2.kill()
    print("  static member: restarted within the session timeout, same partitions, no rebalance",
          flush=True)


def kafka_python(b, admin):
    admin.create_topics([NewTopic("kp", 3, 1)])
    p = Producer({"bootstrap.servers": b.kafka, **QUIET})
    for n in range(90):
        p.produce("kp", value=b"%d" % n, partition=n % 3)
    assert p.flush(30) == 0

    def read(n):
        c = KafkaConsumer("kp", bootstrap_servers=b.kafka, group_id="g-kp",
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          consumer_timeout_ms=15000)
        got = []
        for m in c:
            got.append((m.partition, m.offset))
            if len(got) == n:
                break
        c.commit()
        c.close()
        return got

    first = read(60)
    assert len(first) == 60
    for n in range(90, 120):
        p.produce("kp", value=b"%d" % n, partition=n % 3)
    assert p.flush(30) == 0
    rest = read(60)
    assert len(rest) == 60 and not set(first) & set(rest), "kafka-python consumed a record twice"
    g = describe(admin, "g-kp")
    assert g.state == "Empty" and g.protocol_type == "consumer", g
    print("  kafka-python: a group consumer read 60, committed; the next resumed there", flush=True)


def kcat(b, admin):
    admin.create_topics([NewTopic("kc", 4, 1)])
    p = Producer({"bootstrap.servers": b.kafka, **QUIET})
    for n in range(200):
        p.produce("kc", value=b"v%d" % n, partition=n % 4)
    assert p.flush(30) == 0
    out = subprocess.run(
        ["kcat", "-b", b.kafka, "-G", "g-kcat", "-o", "beginning", "-e", "-q", "-f", "%p %o\n",
         "-X", "session.timeout.ms=6000", "kc"],
        capture_output=True, text=True, timeout=120)
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    assert len(set(lines)) == 200, (len(lines), out.stderr[-2000:])
    print("  kcat -G: a balanced consumer read all 200 records", flush=True)


def main():
    b = Broker("membership", extra=["--set", "offsets.topic.num.partitions=3",
                                    "--set", "group.initial.rebalance.delay.ms=0"]).start()
    admin = KafkaAdminClient(bootstrap_servers=b.kafka)
    session_timeout(b, admin)
    static_member(b, admin)
    kafka_python(b, admin)
    kcat(b, admin)
    admin.close()
    b.stop()
    print("membership: ok")


if __name__ == "__main__":
    main()
