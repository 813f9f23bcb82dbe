"""SASL between brokers and with real clients (the SASL half).

A broker whose Kafka listener is SASL_SSL (`ssl.keystore.location`, a certificate made by the
Rust test; `sasl.enabled.mechanisms` SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; users from
`sasl.users.file`) is written to by librdkafka (SCRAM-SHA-256) and by kafka-python (its own
SCRAM-SHA-512), and read by librdkafka with PLAIN; a wrong password is refused with
librdkafka's authentication error. A second broker mirrors it over SASL_SSL with SCRAM-SHA-512,
its password read from a file, record for record equal. The source then changes the mirror
user's password: the mirror shows the refusal in its status, and resumes by itself once the
new password is written to its file. A mirror whose password (from the environment) is wrong
is refused at start with the reason, and one naming an unset variable too.

Usage: python sasl.py mirror SERVER_PEM CA_PEM   (crates/mirrorlog-broker/tests/mirror_sasl.rs)
"""

import os
import ssl
import sys
import time

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness import SCRATCH, Broker, consume

QUIET = {"log_level": 3}
MECHANISMS = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def mirror(server_pem, ca_pem):
    users = os.path.join(SCRATCH, "users")
    write(users, "# the source's users\nalice:alice-secret\nmirror:first-pw\n")
    a = Broker("a", extra=["--set", f"ssl.keystore.location={server_pem}",
                           "--set", f"sasl.enabled.mechanisms={MECHANISMS}",
                           "--set", f"sasl.users.file={users}"]).start()
    # librdkafka checks the chain against the CA; the certificate names 127.0.0.1 by IP, which
    # its host-name check does not take, so that one check is off for the client alone.
    tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": ca_pem,
           "ssl.endpoint.identification.algorithm": "none", **QUIET}

    def as_user(mechanism, user, password):
        return {**tls, "sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": password}

    alice = as_user("SCRAM-SHA-512", "alice", "alice-secret")
    admin = AdminClient({"bootstrap.servers": a.kafka, **alice})
    for f in admin.create_topics([NewTopic("secure", 2, 1)], operation_timeout=30).values():
        f.result(timeout=30)
    p = Producer({"bootstrap.servers": a.kafka, "enable.idempotence": True,
                  **as_user("SCRAM-SHA-256", "alice", "alice-secret")})
    for n in range(200):
        p.produce("secure", key=b"k%d" % n, value=b"over SASL %d" % n, partition=n % 2,
                  headers=[("n", str(n).encode())])
    assert p.flush(30) == 0
    # kafka-python: a second SCRAM implementation, in Python.
    from kafka import KafkaProducer
    context = ssl.create_default_context(cafile=ca_pem)
    context.check_hostname = False
    kp = KafkaProducer(bootstrap_servers=a.kafka, security_protocol="SASL_SSL",
                       ssl_context=context, sasl_mechanism="SCRAM-SHA-512",
                       sasl_plain_username="alice", sasl_plain_password="alice-secret")
    for n in range(200, 250):
        kp.send("secure", key=b"k%d" % n, value=b"over SASL %d" % n, partition=n % 2)
    kp.flush(30)
    kp.close()
    there = consume(a.kafka, "secure", 2, conf=as_user("PLAIN", "alice", "alice-secret"))
    assert len(there) == 250, len(there)
    print("ok clients: librdkafka SCRAM-SHA-256 and PLAIN, kafka-python SCRAM-SHA-512")

    errors = []
    bad = Producer({"bootstrap.servers": a.kafka, "error_cb": errors.append,
                    **as_user("SCRAM-SHA-256", "alice", "not-her-password")})
    deadline = time.time() + 30
    while not errors and time.time() < deadline:
        bad.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str(), errors[0].str()
    print(f"ok wrong password refused: {errors[0].str()}")

    password_file = os.path.join(SCRATCH, "mirror.password")
    write(password_file, "first-pw\n")
    b = Broker("b").start()
    security = {"security_protocol": "SASL_SSL", "ssl_ca_location": ca_pem,
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "mirror",
                "sasl_password_file": password_file}
    b.admin("POST", "/mirrors", {"name": "a", "bootstrap": a.kafka, "topics": ["secure"],
                                 **security})
    b.wait_caught_up("a", a, "secure")
    here = consume(b.kafka, "secure", 2)
    assert here == there, (len(here), len(there))
    stored = b.admin("GET", "/mirrors")["mirrors"][0]
    assert "first-pw" not in str(stored), stored
    print("ok sasl mirror")

    # The source changes the mirror user's password and restarts: the mirror's next login is
    # refused, and its status says so.
    write(users, "alice:alice-secret\nmirror:second-pw\n")
    a.stop()
    a.start()
    deadline = time.time() + 30
    while True:
        parts = b.admin("GET", "/mirrors")["mirrors"][0]["partitions"]
        reasons = [x["last_error"] or "" for x in parts]
        if all("SASL_AUTHENTICATION_FAILED" in r for r in reasons):
            break
        assert time.time() < deadline, parts
        time.sleep(0.1)
    print(f"ok refused login shown: {reasons[0]}")
    # The operator writes the new password to the file: the next connection uses it.
    write(password_file, "second-pw\n")
    p = Producer({"bootstrap.servers": a.kafka, **alice})
    for n in range(250, 270):
        p.produce("secure", key=b"k%d" % n, value=b"after rotation %d" % n, partition=n % 2)
    assert p.flush(30) == 0
    b.wait_caught_up("a", a, "secure")
    assert consume(b.kafka, "secure", 2) == consume(a.kafka, "secure", 2, conf=alice)
    print("ok rotated password used")

    os.environ["MIRRORLOG_TEST_MIRROR_PASSWORD"] = "wrong"
    c = Broker("c").start()
    from_env = {**security, "sasl_password_env": "MIRRORLOG_TEST_MIRROR_PASSWORD"}
    del from_env["sasl_password_file"]
    code, out = c.admin("POST", "/mirrors", {"name": "a", "bootstrap": a.kafka,
                                             "topics": ["secure"], **from_env}, ok=False)
    assert code == 502 and "SASL_AUTHENTICATION_FAILED" in out["error"], (code, out)
    print(f"ok wrong password from the environment refused: {out['error']}")
    unset = {**from_env, "sasl_password_env": "MIRRORLOG_TEST_UNSET_PASSWORD"}
    code, out = c.admin("POST", "/mirrors", {"name": "a", "bootstrap": a.kafka,
                                             "topics": ["secure"], **unset}, ok=False)
    assert code == 400 and "not set" in out["error"], (code, out)
    for x in (a, b, c):
        x.stop()


if __name__ == "__main__":
    {"mirror": mirror}[sys.argv[1]](*sys.argv[2:])
