"""Prometheus alert and recording rules for spark-state-observer, generated from ``alerts.config``."""
