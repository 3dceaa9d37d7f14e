"""The monitoring mixin: Grafana dashboards, Prometheus alert and recording rules, their promtool tests,
Prometheus Operator objects, Grafana provisioning and an Alertmanager route, all generated from one
configuration (``spark_state_observer.mixin.config``) so that dashboards and alerts select and aggregate the same
series by the same identity labels. ``spark-state-observer mixin export`` writes them.
"""
