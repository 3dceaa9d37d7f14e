"""Grafana dashboards for spark-state-observer, generated with grafana-foundation-sdk (``python -m dashboards.generate``)."""
