"""Placement: where state partitions run, what their moves cost, and what the tasks say about restores.

``tasks`` (Spark's task-level events read into batches' task runs, with ``task_decode``, the msgspec fast
path), the two sources of them: ``task_poll`` (live, the driver's REST API) and ``task_log`` (an event log's task
events, for replay and watch); ``tracker`` (partition runs per batch, migrations, skew, advice), ``restores``
(restores measured from task times), ``capacity`` (RocksDB memory per executor) and ``feed`` (runs them at each
progress event for the runtime).
"""
