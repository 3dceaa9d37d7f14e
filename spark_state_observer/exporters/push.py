"""The Pushgateway pusher: the metrics text PUT every interval and once more at the end, failures counted.

A value the Pushgateway's path cleaning would change goes base64url in the grouping key, and the last push
at ``stop()`` is bounded (``spark_state_observer.exporters.last_export``).
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
from collections.abc import Callable
from urllib.parse import unquote, urlsplit, urlunsplit

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.exposition import basic_auth_handler, default_handler

from spark_state_observer.exporters.last_export import within
from spark_state_observer.settings import redact_url

log = logging.getLogger(__name__)
_PLAIN_PATH_VALUE = re.compile(r"[A-Za-z0-9_.:-]+")


def push_url(gateway: str, job: str, grouping_key: dict[str, str]) -> str:
    """The Pushgateway URL of a job and grouping key, escaped as the Pushgateway's API wants."""
    if not gateway.startswith(("http://", "https://")):
        gateway = "http://" + gateway
    parts = [_path_pair("job", job)] + [_path_pair(k, v) for k, v in sorted(grouping_key.items())]
    return f"{gateway.rstrip('/')}/metrics/{'/'.join(parts)}"


def _path_pair(name: str, value: str) -> str:
    """One ``name/value`` path segment pair. Only plain values go as they are: any other (empty, a slash, a
    space, ``%``, ``.`` or ``..``, which a server's path cleaning would change, non-ASCII) goes base64url
    (``name@base64/...``), which the Pushgateway decodes to the value exactly."""
    if not value:
        return f"{name}@base64/="
    if value in (".", "..") or not _PLAIN_PATH_VALUE.fullmatch(value):
        return f"{name}@base64/{base64.urlsafe_b64encode(value.encode('utf-8', 'replace')).decode()}"
    return f"{name}/{value}"


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """``https://user:pass@host/`` -> (``https://host/``, (user, pass)); urllib would not send them itself."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc)), (unquote(parts.username), unquote(parts.password or ""))


class Pusher:
    """PUTs ``render()`` to a Pushgateway every ``interval`` seconds, and once more on ``stop()``.

    Failures are counted through ``on_failure`` and logged once per streak; the next push simply tries
    again, so a gateway that comes back is used again without anyone intervening. ``stop()`` waits
    ``stop_seconds`` at most for a push under way and the last one (``spark_state_observer.exporters.last_export``):
    a last push not done by then is given up and counted once.
    """

    def __init__(
        self,
        render: Callable[[], bytes],
        url: str,
        job: str,
        interval: float,
        timeout: float,
        basic_auth: tuple[str, str] | None,
        grouping_key: dict[str, str],
        on_failure: Callable[[], None],
        stop_seconds: float = 1.0,
    ) -> None:
        url, url_auth = split_credentials(url)
        self._render, self._url = render, url
        self._target = push_url(url, job, grouping_key)
        self._interval, self._timeout, self._stop_seconds = interval, timeout, stop_seconds
        self._on_failure = on_failure
        self._given_up = threading.Event()  # the last push was counted as failed when given up: it is not counted again
        self._auth = basic_auth or url_auth
        self._stop = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="spark-state-observer-push", daemon=True)
        self._thread.start()

    def _send(self, body: bytes) -> None:
        headers = [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)]
        if self._auth:
            send = basic_auth_handler(self._target, "PUT", self._timeout, headers, body, self._auth[0], self._auth[1])
        else:
            send = default_handler(self._target, "PUT", self._timeout, headers, body)
        send()

    def push_once(self) -> bool:
        try:
            self._send(self._render())
        except Exception as exc:  # any network or HTTP error: count it, keep the job running
            if not self._given_up.is_set():
                self._on_failure()
            if not self._failing:
                log.warning(
                    "spark-state-observer: push to %s failed: %s (will retry every %.0fs)", self._url, redact_url(str(exc)), self._interval
                )
            self._failing = True
            return False
        if self._failing:
            log.info("spark-state-observer: push to %s works again", self._url)
        self._failing = False
        return True

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.push_once()

    def stop(self) -> None:
        """The last push, within ``stop_seconds`` (a push under way included); given up and counted after that."""
        began = time.monotonic()
        self._stop.set()
        self._thread.join(timeout=self._stop_seconds)
        left = self._stop_seconds - (time.monotonic() - began)
        if not within(left, self.push_once, "push"):
            self._given_up.set()
            self._on_failure()
            log.warning(
                "spark-state-observer: last push to %s not done within %.1fs (stop_flush_seconds): given up", self._url, self._stop_seconds
            )
