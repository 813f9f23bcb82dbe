"""Parses a broker's GET /metrics with the Prometheus project's own parsers.

Usage: parse_metrics.py FILE

The exposition must parse with both of the `prometheus_client` package's parsers: the
OpenMetrics one (the format the broker declares) and the Prometheus text one
(`prometheus_client.parser.text_string_to_metric_families`). Prints one JSON object per sample
from the Prometheus text parser: {"family", "type", "name", "labels", "value"}.
"""

import json
import sys

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    # Strict: raises on anything OpenMetrics does not allow (and needs the closing "# EOF").
    openmetrics = list(openmetrics_families(text))
    families = list(text_string_to_metric_families(text))
    assert openmetrics, "no metric families"
    for family in families:
        for sample in family.samples:
            print(json.dumps({
                "family": family.name,
                "type": family.type,
                "name": sample.name,
                "labels": sample.labels,
                "value": sample.value,
            }))


if __name__ == "__main__":
    main()
