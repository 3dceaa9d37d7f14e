"""Settings: keyword arguments, environment variables, and clear errors."""

from __future__ import annotations

import pytest

from spark_state_observer.settings import ENV_PREFIX, Settings, SettingsError


def test_environment_then_keywords() -> None:
    env = {
        ENV_PREFIX + "HTTP_PORT": "9300",
        ENV_PREFIX + "FAST_PATH": "false",
        ENV_PREFIX + "STALL_FACTOR": "2.5",
        ENV_PREFIX + "HTTP_HOST": "0.0.0.0",
    }
    s = Settings.from_env(env)
    assert (s.http_port, s.fast_path, s.stall_factor, s.http_host) == (9300, False, 2.5, "0.0.0.0")
    assert Settings.from_env(env, http_port=9400).http_port == 9400


def test_defaults_are_safe() -> None:
    s = Settings.from_env({})
    assert s.http_host == "127.0.0.1" and s.partition_top_k > 0 and s.queue_size > 0


@pytest.mark.parametrize(
    "env, message",
    [
        ({ENV_PREFIX + "HTTP_PORT": "ninety"}, "http_port"),
        ({ENV_PREFIX + "HTTP_PORT": "70000"}, "http_port"),
        ({ENV_PREFIX + "FAST_PATH": "maybe"}, "fast_path"),
        ({ENV_PREFIX + "TLS_CERTFILE": "/c.pem"}, "tls_keyfile"),
        ({ENV_PREFIX + "QUEUE_SIZE": "0"}, "queue_size"),
    ],
)
def test_bad_values_name_the_setting(env: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_unknown_keyword_is_rejected() -> None:
    with pytest.raises(SettingsError, match="http_prot"):
        Settings.from_env({}, http_prot=1)
