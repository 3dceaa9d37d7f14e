"""The ``spark-state-observer`` command (``main``) and the demo job it runs."""

from spark_state_observer.cli.main import main

__all__ = ["main"]
