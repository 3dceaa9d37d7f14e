"""The watcher's runtime: one observer for every streaming application of event-log folders.

``eventlog_watch`` (the ``EventLogWatcher``: one poll over event-log folders, written by job in ``log_listing``,
``log_tailing``, ``event_lines``, ``identification``, ``clock_skew``, ``app_lifecycle`` and ``watch_positions`` on
``watcher_core``; what it hands over in ``app_events``; with ``log_names``, ``file_tail``, ``followed_app``,
``codec_tail``, ``line_filter`` and ``watch_state``), ``store_mirror`` (object stores mirrored to local files) and ``runtime``
(the per-application observers, their shared exporters and history, as ``spark-state-observer watch`` runs them).
"""
