"""One assembly: every observer (a listener's, each watched application's, a replay's, a backtest's) is built
by ``assemble``, its sinks chosen by name from one table (``sinks.SINKS``).

This package sits between the composition roots (``embedded``, ``fleet``, ``offline``) and the pipeline: it may
import the exporters and the history, which the pipeline may not (``pyproject.toml``'s import contract).
"""

from spark_state_observer.assembly.assemble import assemble
from spark_state_observer.assembly.sinks import SINKS, SinkOptions, register_sink, sink_factory

__all__ = ["SINKS", "SinkOptions", "assemble", "register_sink", "sink_factory"]
