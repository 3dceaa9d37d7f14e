"""Zero-code attach's bookkeeping: one observer per Spark application, one listener per session.

``spark_state_observer.zerocode.hook`` hands over every session PySpark's builders return. The first session of an
application gets ``observer.attach`` (the settings and ``OTEL_*`` variables as for a manual attach);
further sessions of the same application (``newSession``, a second Connect session to the same server)
get a listener on the same observer, so one endpoint serves them all and no port is bound twice; a
session seen again (``getOrCreate`` returns the active one) changes nothing. ``stop()`` detaches first:
classic ``stop`` ends the SparkContext, so the whole application's observer stops; Connect's ends one
session, so its listener goes and the observer stops with the last one. What is still attached when the
interpreter exits is stopped then, so the last push and OTLP export happen. Nothing here raises into
the job: a failure becomes one line on stderr and the job runs unobserved.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_state_observer.zerocode.hook import say_once

if TYPE_CHECKING:
    from spark_state_observer.embedded.attach import ObserverHandle

log = logging.getLogger("spark_state_observer")
OTEL_DEFAULT_ENDPOINTS = {"grpc": "http://localhost:4317", "http/protobuf": "http://localhost:4318"}
DRAIN_TIMEOUT_MS = 2000  # how long stop() lets the listener bus deliver its last events (the query's termination)


@dataclass
class _App:
    """An attached application: its observer and the sessions listening into it (with their listener)."""

    handle: ObserverHandle
    context: Any  # classic: the SparkContext its sessions share (stopping any of them stops it); Connect: None
    sessions: list[tuple[Any, Any]] = field(default_factory=list)


_lock = threading.RLock()
_apps: dict[str, _App] = {}
_failed: set[str] = set()  # applications an attach failed for: said once, not retried at every getOrCreate
_failed_sessions: weakref.WeakSet[Any] = weakref.WeakSet()  # their sessions, known without asking the JVM again


def _seen(session: Any) -> bool:
    """Attached already, or its application failed to attach; called with ``_lock`` held."""
    if any(s is session for app in _apps.values() for s, _ in app.sessions):
        return True
    try:
        return session in _failed_sessions
    except TypeError:  # a session class without weak references
        return False


def _remember_failure(session: Any) -> None:
    try:
        _failed_sessions.add(session)
    except TypeError:  # then the next getOrCreate asks for the application id again, and stays quiet
        pass


def attach_once(session: Any, otlp_default: bool = False) -> None:
    """Observe ``session``'s streaming queries unless they already are; a failure is one line on stderr.

    PySpark calls ``getOrCreate`` internally too, so a session seen before costs a lookup, not a JVM call.
    """
    from spark_state_observer.embedded.attach import is_connect

    with _lock:
        if _seen(session):
            return
    connect = is_connect(session)
    try:
        key = _app_id(session, connect)
    except Exception as exc:  # a session that cannot tell its application is not one to observe
        say_once(f"not attached: cannot read the session's application id ({type(exc).__name__}: {exc})")
        return
    with _lock:
        if _seen(session):
            return
        if key in _failed:  # said once already
            _remember_failure(session)
            return
        app = _apps.get(key)
        try:
            if app is None:
                _apps[key] = _attach_first(session, connect, otlp_default)
            else:
                _listen(app, session)
        except Exception as exc:
            _failed.add(key)
            _remember_failure(session)
            say_once(f"not attached to application {key}, which runs unobserved: {_reason(exc)}")


def attached_handle(session: Any) -> ObserverHandle | None:
    """The observer zero-code attach gave ``session``, if any (``observer.attach`` returns it instead of a second)."""
    with _lock:
        for app in _apps.values():
            if any(s is session for s, _ in app.sessions):
                return app.handle
    return None


def detach(session: Any) -> None:
    """Before ``session.stop()``: classic stops its application's observer, Connect removes the session's listener."""
    with _lock:
        for key, app in list(_apps.items()):
            ours = [pair for pair in app.sessions if pair[0] is session]
            if app.context is not None and getattr(session, "_sc", None) is app.context:
                ours = list(app.sessions)  # classic stop() ends the SparkContext under every session
            if not ours:
                continue
            if app.context is not None:
                _drain_listener_bus(app.context)
            for pair in ours:
                _remove_listener(*pair)
                app.sessions.remove(pair)
            if not app.sessions:
                del _apps[key]
                app.handle.stop()  # a no-op when the job stopped the handle itself


def stop_all() -> None:
    """At interpreter exit: stop every observer still attached (last push, last OTLP export, endpoint closed)."""
    with _lock:
        apps = list(_apps.values())
        _apps.clear()
    for app in apps:
        for pair in app.sessions:
            _remove_listener(*pair)
        try:
            app.handle.stop()
        except Exception as exc:  # exiting anyway; say why the last export may be missing
            say_once(f"stopping the observer at exit: {type(exc).__name__}: {exc}")


def otlp_overrides(otlp_default: bool, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Under ``opentelemetry-instrument``, export over OTLP as OpenTelemetry's SDK would.

    With no endpoint configured the SDK sends to localhost (4318 http/protobuf, 4317 grpc); so does the
    observer, unless ``OTEL_SDK_DISABLED=true`` or ``OTEL_METRICS_EXPORTER`` leaves ``otlp`` out.
    """
    from spark_state_observer.exporters.otel.config import otlp_enabled
    from spark_state_observer.settings import Settings

    env = os.environ if env is None else env
    if not otlp_default:
        return {}
    settings = Settings.from_env(env)
    exporters = [e.strip() for e in env.get("OTEL_METRICS_EXPORTER", "otlp").split(",")]
    if otlp_enabled(settings, env) or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or "otlp" not in exporters:
        return {}
    protocol = settings.otlp_protocol or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() or "http/protobuf"
    return {"otlp_endpoint": OTEL_DEFAULT_ENDPOINTS.get(protocol, OTEL_DEFAULT_ENDPOINTS["http/protobuf"])}


def _attach_first(session: Any, connect: bool, otlp_default: bool) -> _App:
    from spark_state_observer.embedded.attach import attach

    handle = attach(session, **otlp_overrides(otlp_default))
    app = _App(handle, None if connect else getattr(session, "_sc", None), [(session, handle.listener)])
    # registered again at every attach: atexit runs the newest first, so this stops the observers before
    # the OpenTelemetry providers they created shut themselves down
    atexit.unregister(stop_all)
    atexit.register(stop_all)
    return app


def _listen(app: _App, session: Any) -> None:
    from spark_state_observer.embedded.listener import StateObserverListener

    listener = StateObserverListener(app.handle.observer)
    session.streams.addListener(listener)
    app.sessions.append((session, listener))


def _drain_listener_bus(context: Any, timeout_ms: int = DRAIN_TIMEOUT_MS) -> None:
    """Let Spark's listener bus deliver what it holds before the listener goes: ``query.stop()`` posts the query's
    terminated event and returns, the bus hands it to the listener on its own thread, and a ``spark.stop()`` right
    after (a job's last lines) would otherwise remove the listener first and lose the event. Bounded: a bus that
    does not empty in time (a slow listener of the job's own) costs ``timeout_ms`` once, never the stop."""
    try:
        context._jsc.sc().listenerBus().waitUntilEmpty(timeout_ms)
    except Exception as exc:  # a timeout, a context already stopped: the listener goes as before
        log.debug("spark-state-observer: listener bus not drained before stop: %r", exc)


def _remove_listener(session: Any, listener: Any) -> None:
    try:
        session.streams.removeListener(listener)
    except Exception as exc:  # the session may already be gone
        log.debug("spark-state-observer: removeListener: %r", exc)


def _app_id(session: Any, connect: bool) -> str:
    """The application id: classic asks the SparkContext, Connect the server (one round trip, at session creation)."""
    if connect:
        return str(session.conf.get("spark.app.id"))
    return str(session.sparkContext.applicationId)


def _reason(exc: BaseException) -> str:
    """The exception as the reason of a one-line message (settings and exporter errors already read as one)."""
    from spark_state_observer.exporters.http import ExporterError
    from spark_state_observer.settings import SettingsError

    if isinstance(exc, (SettingsError, ExporterError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
