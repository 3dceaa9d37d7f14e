"""Exporters: turn the tracker's records into Prometheus (and later other) formats."""
