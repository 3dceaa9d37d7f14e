"""The one redactor (``spark_state_observer.model.redaction``): no secret in any form a location can carry
survives it, what is no secret stays readable, and its patterns stay linear on the worst inputs."""

from __future__ import annotations

import pytest

from spark_state_observer.model.redaction import redact

FORMS = [
    "s3://SECRET@bkt/logs",
    "s3a://AKIA:SECRET@bkt/logs",
    "hdfs://user:SECRET@nn:8020/x",
    "gs://bkt/logs?token=SECRET",
    "s3://bkt/logs#SECRET",
    "s3://bkt/logs?versionId=1&x-amz-security-token=SECRET",
    "abfss://container@acct.dfs.core.windows.net/logs?sv=2024&sig=SECRET",
    "wasbs://container@acct.blob.core.windows.net/x?se=2030&sp=r&sig=SECRET",
    'Could not connect to the endpoint URL: "http://127.0.0.1:9/?X-Amz-Security-Token=SECRET"',
    'Could not connect to the endpoint URL: "http://127.0.0.1:9/bkt/ck%3Ftoken%3DSECRET"',
    "http://127.0.0.1:9/bkt/ck%23SECRET",
    "X-Amz-Security-Token=SECRET&X-Amz-Signature=SECRET",
    "presigned: X-Amz-Credential=SECRET",
    "AWS_SESSION_TOKEN session_token=SECRET",
    "client_secret=SECRET and password=SECRET",
    "https://user:SECRET@proxy:3128",
    "s3://bkt/a b?access_token=SECRET",
]


@pytest.mark.parametrize("text", FORMS)
def test_no_secret_survives(text: str) -> None:
    shown = redact(text)
    assert "SECRET" not in shown and redact(shown) == shown  # and redacting twice changes nothing


def test_what_is_no_secret_stays_readable() -> None:
    assert redact("s3://AKIA:pw@bucket/key and hdfs://u:p@nn:8020/x") == "s3://bucket/key and hdfs://nn:8020/x"
    assert redact("abfs://container@account.dfs.core.windows.net/logs") == "abfs://container@account.dfs.core.windows.net/logs"
    assert redact("s3://bkt/logs/eventlog_v2_app-1 not found") == "s3://bkt/logs/eventlog_v2_app-1 not found"
    assert redact("/tmp/a b/c and http://h/a%20b/c") == "/tmp/a b/c and http://h/a%20b/c"


@pytest.mark.parametrize(
    "worst",
    [
        "http://a/" + "%" * 200_000,
        "a" * 200_000 + "://",
        "token=" * 40_000,
        "http://x" * 25_000,
        "s3://" + "@" * 200_000,
        "http://a?" * 22_000,
    ],
)
def test_the_worst_inputs_end(worst: str) -> None:
    assert len(redact(worst)) <= 2 * len(worst)  # linear patterns end at once here; a quadratic one would run for hours
