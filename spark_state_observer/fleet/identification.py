"""Identity: who an application is, from its application-start event (or its log's name when there is none);
events are held until it is known, and two running applications with one name are reported.

Identity: ``SparkListenerApplicationStart`` gives the application name (the stable identity the
series are labelled by) and the volatile id and attempt; selected Spark properties can be taken from
``SparkListenerEnvironmentUpdate`` (``identity_properties``), parsed only when asked for. Every identity
string (and the log's file name, on its way to a label) goes through ``bounded.clean_identity`` where
it is taken: cut to 200 characters, lone surrogates and control characters replaced.
"""

from __future__ import annotations

from typing import Any

from spark_state_observer.fleet.app_events import LoggedApp, RawEvent
from spark_state_observer.fleet.followed_app import FollowedApp, FollowedApps
from spark_state_observer.fleet.watch_problems import Problems
from spark_state_observer.model.bounded import clean_identity

_MAX_HELD_EVENTS = 10_000  # events held while the application start is not yet known


class IdentityResolver:
    """Names the followed applications and holds their events until they are named."""

    def __init__(self, book: FollowedApps, problems: Problems) -> None:
        self.book, self.problems, self.counts = book, problems, problems.counts

    def identify(self, app: FollowedApp, obj: dict[str, Any]) -> None:
        # every identity string is cut and cleaned here, where it is taken (``clean_identity``): it ends on labels
        fallback = clean_identity(app.name)
        ts = obj.get("Timestamp")
        app.identity = LoggedApp(
            app.name,
            clean_identity(obj.get("App Name")) or fallback,
            clean_identity(obj.get("App ID")) or fallback,
            clean_identity(obj.get("App Attempt ID")) or None,
            app.spark_version,
            ts if type(ts) is int and 0 <= ts < 1 << 53 else None,
            tuple(sorted(app.properties.items())),
            tuple(sorted(app.spark_conf.items())),
        )
        self._check_duplicate_name(app)
        self._release_held(app)

    def _check_duplicate_name(self, app: FollowedApp) -> None:
        assert app.identity is not None
        for other in self.book.apps.values():
            if other is app or other.identity is None or other.status != "running" or other.identity.name != app.identity.name:
                continue
            message = (
                f"two running applications are named {app.identity.name!r} ({other.identity.app_id} in {other.listing.path}, "
                f"{app.identity.app_id} in {app.listing.path}); their series are told apart only by app id and query id"
            )
            self.problems.report(app, "duplicate_name", message, once=True)
            self.problems.report(other, "duplicate_name", message, once=True)

    def deliver(self, app: FollowedApp, event: RawEvent) -> None:
        if app.identity is None:
            app.held.append(event)
            if len(app.held) >= _MAX_HELD_EVENTS:
                self.fallback(app, f"no application-start event in the first {_MAX_HELD_EVENTS} wanted events")
            return
        app.report().events.append(event)
        self.counts.events_delivered += 1

    def fallback(self, app: FollowedApp, why: str) -> None:
        self.problems.report(app, "no_app_start", f"{app.name}: {why}; named after its log")
        name = clean_identity(app.name)
        app.identity = LoggedApp(app.name, name, name, None, app.spark_version, None, tuple(sorted(app.properties.items())))
        self._release_held(app)

    def _release_held(self, app: FollowedApp) -> None:
        held, app.held = app.held, []
        report = app.report()
        report.identity = app.identity
        report.events.extend(held)
        self.counts.events_delivered += len(held)
