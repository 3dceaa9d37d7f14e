"""Capture: taking events from Spark as cheaply as it allows, and handing them to the worker.

``listener`` (the py4j JSON bridge and ``StateObserverListener``), ``attach`` (the one line a job adds),
``queue`` (the bounded drop-oldest hand-off). ``eventlog_watch`` (with ``codec_tail``, ``line_filter``,
``watch_state``) follows every application's event log from outside the jobs; such sources produce
``CapturedEvent``s for the same ``Observer.submit``. Placement sources give ``Observer.set_placement`` the
partition runs of completed batches: ``task_poll`` (live, the driver's REST API) and ``task_log`` (the task
events of event logs, for replay and watch).
"""
