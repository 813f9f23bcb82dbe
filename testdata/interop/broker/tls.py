"""TLS between brokers and with a real client: a broker whose Kafka listener speaks TLS
(`ssl.keystore.location`, a certificate made by the Rust test), written to by librdkafka over
TLS, mirrored by another broker over TLS (`security_protocol` SSL, `ssl_ca_location`); the
mirror equals the source record for record. A mirror whose CA does not trust the source's
certificate, and one that speaks plaintext to it, are refused at start with the reason.

Usage: python tls.py mirror SERVER_PEM CA_PEM OTHER_CA_PEM   (crates/mirrorlog-broker/tests/mirror_tls.rs)
"""

import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness import Broker, consume

QUIET = {"log_level": 3}


def mirror(server_pem, ca_pem, other_ca_pem):
    # librdkafka checks the chain against the CA; the certificate names 127.0.0.1 by IP, which
    # its host-name check does not take, so that one check is off for the client alone.
    ssl = {"security.protocol": "SSL", "ssl.ca.location": ca_pem,
           "ssl.endpoint.identification.algorithm": "none", **QUIET}
    a = Broker("a", extra=["--set", f"ssl.keystore.location={server_pem}"]).start()
    b = Broker("b").start()
    admin = AdminClient({"bootstrap.servers": a.kafka, **ssl})
    for f in admin.create_topics([NewTopic("secure", 2, 1)], operation_timeout=30).values():
        f.result(timeout=30)
    p = Producer({"bootstrap.servers": a.kafka, "enable.idempotence": True, **ssl})
    for n in range(200):
        p.produce("secure", key=b"k%d" % n, value=b"over TLS %d" % n, partition=n % 2,
                  headers=[("n", str(n).encode())])
    assert p.flush(30) == 0
    b.admin("POST", "/mirrors", {"name": "a", "bootstrap": a.kafka, "topics": ["secure"],
                                 "security_protocol": "SSL", "ssl_ca_location": ca_pem})
    deadline = time.time() + 60
    while True:
        parts = b.admin("GET", "/mirrors")["mirrors"][0]["partitions"]
        if all(x["log_end"] == 100 for x in parts) and len(parts) == 2:
            break
        assert time.time() < deadline, parts
        time.sleep(0.1)
    here = consume(b.kafka, "secure", 2)
    there = consume(a.kafka, "secure", 2, conf=ssl)
    assert here == there and len(here) == 200, (len(here), len(there))
    print("ok tls mirror")
    # A CA that did not sign the source's certificate, and plaintext to a TLS listener: both
    # refused at start, with the reason.
    c = Broker("c").start()
    code, out = c.admin("POST", "/mirrors", {"name": "a", "bootstrap": a.kafka,
                                             "topics": ["secure"], "security_protocol": "SSL",
                                             "ssl_ca_location": other_ca_pem}, ok=False)
    assert code == 502 and "certificate" in out["error"], (code, out)
    print(f"ok untrusted certificate refused: {out['error']}")
    code, out = c.admin("POST", "/mirrors", {"name": "a", "bootstrap": a.kafka,
                                             "topics": ["secure"]}, ok=False)
    assert code == 502 and "security_protocol SSL" in out["error"], (code, out)
    print(f"ok plaintext to a TLS listener refused: {out['error']}")
    for x in (a, b, c):
        x.stop()


if __name__ == "__main__":
    {"mirror": mirror}[sys.argv[1]](*sys.argv[2:])
