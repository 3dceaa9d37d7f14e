"""The watcher's runtime: one observer for every streaming application of event-log folders.

``eventlog_watch`` (the ``EventLogWatcher``: a coordinator of small parts, each built with what it needs: the
listing ``log_listing`` and ``discovery``, the ``Tailer`` of ``log_tailing``, the ``EventReader`` of ``event_lines``,
the ``IdentityResolver`` of ``identification``, the ``SkewEstimator`` of ``clock_skew``, the ``LifecycleJudge`` of
``app_lifecycle``, the ``PositionStore`` of ``watch_positions`` and the ``Problems`` of ``watch_problems``, over
the per-application state of ``followed_app``; what it hands over in ``app_events``; with ``log_names``,
``file_tail``, ``codec_tail``, ``line_filter`` and ``watch_state``), ``store_mirror`` (object stores mirrored to local
files) and ``runtime`` (the per-application observers, their shared exporters and history, as
``spark-state-observer watch`` runs them).
"""
