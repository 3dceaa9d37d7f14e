"""The watcher's runtime: one observer for every streaming application of event-log folders.

``eventlog_watch`` (listing, tailing, identity, lifecycle and positions of event logs, with ``codec_tail``,
``line_filter`` and ``watch_state``), ``store_mirror`` (object stores mirrored to local files) and ``runtime``
(the per-application observers, their shared exporters and history, as ``spark-state-observer watch`` runs them).
"""
