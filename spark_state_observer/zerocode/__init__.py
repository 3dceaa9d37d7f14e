"""Zero-code attach: observe a PySpark job without changing it.

``spark-state-observer run -- CMD`` (``spark_state_observer.cli.run``) puts ``boot/`` first on ``PYTHONPATH``; its
``sitecustomize`` installs ``hook`` in every Python process, which attaches the observer to each
SparkSession the driver creates (``sessions``). ``instrumentor`` does the same under OpenTelemetry's
``opentelemetry-instrument``. ``python -m spark_state_observer.zerocode path`` prints the folder, for clusters that
are configured rather than started by hand (README "Attach without code changes").
"""

from __future__ import annotations

import os

BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")


def boot_path() -> str:
    """The folder to put first on the driver's ``PYTHONPATH``: it holds only ``sitecustomize.py``."""
    return BOOT_DIR
