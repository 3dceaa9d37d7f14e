"""The pipeline: the runtime ``Observer`` (the worker that turns captured events into metric state and
signals and hands both to its sinks) and ``sink`` (the ``Sink`` protocol every exporter and the history
implement). Sinks are built by the composition roots and passed in.
"""
