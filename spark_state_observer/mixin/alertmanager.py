"""An Alertmanager configuration example from a ``MixinConfig`` (valid for ``amtool check-config``).

Critical alerts page, the rest goes to a chat receiver; alerts of one query of one application are
grouped together (by the identity labels, so two applications with a query of the same name are not),
and a failed, stopped or crash-looping query inhibits the alerts it explains.
"""

from __future__ import annotations

from typing import Any

from spark_state_observer.mixin.config import MixinConfig

SPARK = 'alertname=~"Spark(Streaming|State).*"'
# what a failed, stopped, lost or crash-looping query explains
EXPLAINED = (
    'alertname=~"SparkStreamingQueryStalled|SparkStreamingQueryFallingBehind|SparkStreamingKafkaLagGrowing|'
    'SparkStreamingWatermarkLagHigh|SparkStateRestoreTooLong|SparkStateRestoreSlow"'
)


def example(config: MixinConfig) -> dict[str, Any]:
    a = config.alertmanager
    identity = config.identity_labels
    receivers = [a.critical_receiver] + ([a.warning_receiver] if a.warning_receiver != a.critical_receiver else [])
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": a.warning_receiver,
            "group_by": ["alertname", *identity, "query"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {"receiver": a.critical_receiver, "matchers": ['severity="critical"', SPARK], "repeat_interval": "1h"},
                {"receiver": a.warning_receiver, "matchers": ['severity=~"warning|info"', SPARK]},
            ],
        },
        "inhibit_rules": [
            {
                "source_matchers": [
                    'alertname=~"SparkStreamingQueryFailed|SparkStreamingQueryDown|SparkStreamingQueryCrashLooping|SparkStreamingQueryLost"'
                ],
                "target_matchers": [EXPLAINED],
                "equal": [*identity, "query_id"],
            },
            {
                "source_matchers": ['alertname="SparkStateObserverDown"'],
                "target_matchers": ['alertname=~"SparkStateObserver(DroppingEvents|Failing)"'],
                "equal": ["instance"],
            },
        ],
        "receivers": [
            {"name": name, "webhook_configs": [{"url": f"http://127.0.0.1:9095/{name}", "send_resolved": True}]} for name in receivers
        ],
    }
