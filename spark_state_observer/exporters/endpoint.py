"""The /metrics endpoint and the Pushgateway pusher of one process, set up from the settings in one place.

The listener (``spark_state_observer.exporters.prometheus.PrometheusSink``) and the watcher (``spark_state_observer.fleet.runtime``)
expose different texts (one application's, every followed application's) through the same endpoint, TLS,
basic auth and push settings; both open them here, so a setting means the same in either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from spark_state_observer.exporters.http import MetricsServer
from spark_state_observer.exporters.push import Pusher
from spark_state_observer.settings import Settings


@dataclass
class Endpoint:
    """What ``open_endpoint`` started: the server (when serving) and the pusher (with a Pushgateway URL)."""

    server: MetricsServer | None = None
    pusher: Pusher | None = None

    def stop(self) -> None:
        """A last push, then the endpoint closes."""
        if self.pusher is not None:
            self.pusher.stop()
        if self.server is not None:
            self.server.stop()


def open_endpoint(
    settings: Settings,
    render: Callable[[], bytes],
    registry: CollectorRegistry,
    *,
    serve: bool,
    grouping: dict[str, str],
    render_parts: Callable[[], Iterable[bytes]] | None,
    on_push_failure: Callable[[], None],
    on_refused: Callable[[str], None] | None,
    openmetrics: Callable[[], Collector] | None = None,
) -> Endpoint:
    """Open the endpoint (``serve``) over ``render`` and start pushing it when a Pushgateway is set.

    ``registry`` answers what the text renderer does not (``name[]`` filters, other formats); ``grouping`` is the
    Pushgateway grouping key (the identity labels, so concurrent pushers do not replace each other's metrics);
    ``openmetrics`` collects the samples in OpenMetrics, for a scrape that asks for it (``?format=openmetrics``).
    Raises ``ExporterError`` when the port is taken.
    """
    s = settings
    auth = (s.basic_auth_user, s.basic_auth_password) if s.basic_auth_user else None
    endpoint = Endpoint()
    if serve:
        endpoint.server = MetricsServer(
            render,
            registry,
            s.http_host,
            s.http_port,
            certfile=s.tls_certfile,
            keyfile=s.tls_keyfile,
            client_cafile=s.tls_client_cafile,
            basic_auth=auth,
            render_parts=render_parts,
            on_refused=on_refused,
            openmetrics=openmetrics,
        )
    if s.pushgateway_url:
        endpoint.pusher = Pusher(
            render,
            s.pushgateway_url,
            s.pushgateway_job,
            s.push_interval_seconds,
            s.push_timeout_seconds,
            auth,
            grouping,
            on_push_failure,
            stop_seconds=s.stop_flush_seconds,
        )
    return endpoint
