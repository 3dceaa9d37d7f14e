"""The one typed decoder of configuration (``model.config_decode``): what the settings and the mixin share.

Unknown keys are refused at any depth, a value of the wrong type names its field, only given fields replace the
defaults, and text is read as numbers and booleans where the source is text (environment variables).
"""

from __future__ import annotations

import pytest

from spark_state_observer.mixin.config import MixinConfig, MixinConfigError, Thresholds, config_from_mapping
from spark_state_observer.model.config_decode import DecodeProblem, decode
from spark_state_observer.settings import ENV_PREFIX, Settings, SettingsError


def test_only_the_given_fields_replace_the_defaults_at_any_depth() -> None:
    config = decode(MixinConfig, {"thresholds": {"restore_seconds": 120}, "kubernetes": {"namespace": "obs"}})
    assert config.thresholds == Thresholds(restore_seconds=120.0)
    assert config.kubernetes.namespace == "obs" and config.kubernetes.labels == MixinConfig().kubernetes.labels
    assert config.fleet == MixinConfig().fleet and config.selector == MixinConfig().selector


@pytest.mark.parametrize(
    ("data", "path", "unknown"),
    [
        ({"tresholds": {}}, (), True),
        ({"fleet": {"grace": 1}}, ("fleet",), True),
        ({"thresholds": {"restore_seconds": "fast"}}, ("thresholds", "restore_seconds"), False),
        ({"thresholds": {"restore_seconds": True}}, ("thresholds", "restore_seconds"), False),
        ({"kubernetes": {"labels": {"a": ["b"]}}}, ("kubernetes", "labels"), False),
        ({"static_labels": ["a", 1]}, ("static_labels",), False),
    ],
)
def test_a_refusal_names_the_field(data: dict, path: tuple[str, ...], unknown: bool) -> None:
    with pytest.raises(DecodeProblem) as refused:
        decode(MixinConfig, data)
    assert refused.value.path == path and refused.value.unknown_key == unknown


def test_numbers_in_a_dictionary_of_text_become_text() -> None:
    """YAML reads ``version: 1`` as a number; a label value is text."""
    assert decode(MixinConfig, {"test_labels": {"version": 1, "ratio": 0.5}}).test_labels == {"version": "1", "ratio": "0.5"}


def test_text_is_read_as_the_fields_type_only_when_asked() -> None:
    assert decode(Settings, {"http_port": "9300", "stall_factor": "2.5", "fast_path": "false"}, strict=False).http_port == 9300
    with pytest.raises(DecodeProblem) as refused:
        decode(Settings, {"http_port": "9300"})
    assert refused.value.path == ("http_port",)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({ENV_PREFIX + "HTTP_PORT": "ninety"}, f"setting http_port from {ENV_PREFIX}HTTP_PORT: cannot read 'ninety' as int"),
        ({ENV_PREFIX + "FAST_PATH": " maybe "}, f"setting fast_path from {ENV_PREFIX}FAST_PATH: cannot read 'maybe' as bool"),
        ({ENV_PREFIX + "STALL_FACTOR": "2,5"}, f"setting stall_factor from {ENV_PREFIX}STALL_FACTOR: cannot read '2,5' as float"),
    ],
)
def test_a_bad_environment_value_is_one_line_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(env)
    assert str(refused.value) == message


def test_the_environments_yes_and_no_and_spaces() -> None:
    for text, expected in (("yes", True), ("ON", True), (" 1 ", True), ("no", False), ("off", False), ("", False)):
        assert Settings.from_env({ENV_PREFIX + "FAST_PATH": text}).fast_path is expected, text
    assert Settings.from_env({ENV_PREFIX + "HTTP_PORT": " 9300 ", ENV_PREFIX + "HTTP_HOST": " h "}).http_host == "h"
    assert Settings.from_env({}, http_port="9400", http_host=" kept ").http_host == " kept "


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"a": 1, "b": 2}, "unknown key(s) a, b; known keys: app_label,"),
        ({1: "x"}, "unknown key(s) 1;"),
        ({"kubernetes": {"labels": {"a": 10**5000}}}, "kubernetes.labels: a number too long to use"),
        ({"thresholds": {"restore_seconds": 10**400}}, "thresholds.restore_seconds: 1000"),
        ({"thresholds": None}, "thresholds: expected a mapping, got NoneType"),
        ({"selector": None}, "selector: expected a string, got None"),
        ({"test_labels": {"a": "x\ny"}}, "test_labels.a: 'x\\ny' contains a newline or control character"),
    ],
)
def test_the_mixins_refusals_stay_one_line_naming_the_key(data: dict, message: str) -> None:
    with pytest.raises(MixinConfigError) as refused:
        config_from_mapping(data)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
