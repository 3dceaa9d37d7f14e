"""Grafana provisioning files from a ``MixinConfig``: a file dashboard provider putting the dashboards
into the configured folder, and the Prometheus datasource the dashboards' ``$datasource`` defaults to.
Copy ``provisioning/`` into Grafana's provisioning directory and the dashboards into ``dashboard_path``.
"""

from __future__ import annotations

from typing import Any

from spark_state_observer.mixin.config import MixinConfig


def dashboard_provider(config: MixinConfig) -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "spark-state-observer",
                "orgId": 1,
                "folder": config.dashboard_folder,
                "type": "file",
                "disableDeletion": False,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 60,
                "options": {"path": config.dashboard_path, "foldersFromFilesStructure": False},
            }
        ],
    }


def datasource(config: MixinConfig) -> dict[str, Any]:
    source = config.datasource
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": source.name,
                "uid": source.uid,
                "type": "prometheus",
                "access": "proxy",
                "url": source.url,
                "isDefault": False,
                "editable": False,
                "jsonData": {"timeInterval": config.kubernetes.scrape_interval},
            }
        ],
    }


def provisioning(config: MixinConfig) -> dict[str, dict[str, Any]]:
    """Path under ``provisioning/`` -> document."""
    return {"dashboards/spark-state-observer.yaml": dashboard_provider(config), "datasources/spark-state-observer.yaml": datasource(config)}
