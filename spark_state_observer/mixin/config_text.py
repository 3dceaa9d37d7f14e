"""The mixin configuration's text: its file read bounded, its PromQL matchers parsed, its values shown bounded.

A configuration file is small and read with bounds (size, aliases, depth, values once aliases are expanded);
a matcher list is read as Prometheus reads it. Errors name the key and show values bounded: one line each.
"""

from __future__ import annotations

import dataclasses
import json
import re
import reprlib
import warnings
from collections.abc import Mapping
from typing import Any

from spark_state_observer.mixin.prometheus_text import DurationError, parse_duration
from spark_state_observer.model.bounded import loads

# a PromQL double-quoted string's body: no raw control character, only the escapes PromQL's lexer knows
_ESCAPE = r'\\(?:[abfnrtv\\"]|[0-7]{3}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})'
MATCHER = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*(=~|!~|!=|=)[ \t]*"((?:[^"\\\x00-\x1f\x7f]|' + _ESCAPE + r')*)"[ \t]*')
_ESCAPES = re.compile(_ESCAPE)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}
# Bounds of a configuration file: a small file must not expand into a large value (YAML aliases)
MAX_CONFIG_BYTES = 256 * 1024
MAX_ALIASES = 100
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_STRING = 4096
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class MixinConfigError(ValueError):
    """A configuration file or value that cannot be used; the message names the key."""


_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxdict, _SHOW.maxlist, _SHOW.maxtuple, _SHOW.maxset = 2, 4, 4, 4, 4
_SHOW.maxstring, _SHOW.maxother, _SHOW.maxlong = 60, 60, 40


def show(value: Any) -> str:
    """``value`` for an error message, bounded: a value is never formatted whole (an alias bomb would
    expand to gigabytes, a long string would flood the terminal)."""
    try:
        text = _SHOW.repr(value)
    except ValueError:  # an integer beyond Python's digit limit for str()
        text = f"<{type(value).__name__} too long to show>"
    return text if len(text) <= 80 else text[:77] + "..."


def show_key(key: Any) -> str:
    """A key for an error message: as written when it is a plain name, else bounded like a value."""
    return key if isinstance(key, str) and re.fullmatch(r"[\w.-]{1,60}", key) else show(key)


def quote(value: str) -> str:
    """A PromQL double-quoted string for ``value`` (JSON's escapes are all PromQL escapes)."""
    return json.dumps(value, ensure_ascii=False)


def _unescape(body: str) -> str:
    """The value of a PromQL string body whose escapes ``MATCHER`` accepted."""

    def one(m: re.Match[str]) -> str:
        code = m.group(0)[1:]
        if code in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[code]
        number = int(code, 8) if code[0].isdigit() else int(code[1:], 16)
        if number > 0x10FFFF or 0xD800 <= number <= 0xDFFF or (code[0] in "x01234567" and number > 0x7F):
            raise ValueError(code)
        return chr(number)

    return _ESCAPES.sub(one, body)


def parse_matchers(text: str, key: str) -> list[tuple[str, str, str]]:
    """``label op "value"`` triples of a comma-separated matcher list; a clear error naming ``key`` otherwise
    (a raw newline or an escape PromQL does not know, a regular expression that does not compile)."""
    out: list[tuple[str, str, str]] = []
    if not text.strip():
        return out
    for part in _split_matchers(text):
        m = MATCHER.fullmatch(part)
        if m is None:
            raise MixinConfigError(
                f'{key}: cannot read matcher {show(part.strip())} (expected label="value", label=~"regex", != or !~; '
                'no raw control characters; escapes as in PromQL: \\\\ \\" \\n \\t \\uXXXX)'
            )
        try:
            value = _unescape(m.group(3))
        except ValueError:
            raise MixinConfigError(f"{key}: matcher {show(part.strip())} escapes a byte that is not a character; use \\uXXXX") from None
        if m.group(1).startswith("__"):
            raise MixinConfigError(
                f"{key}: matcher {show(part.strip())}: labels starting with __ are Prometheus' own (the rules set the metric name)"
            )
        if m.group(2) in ("=~", "!~"):
            _check_regex(value, f"{key}: matcher {show(part.strip())}")
        out.append((m.group(1), m.group(2), value))
    return out


def labels_satisfying(matchers: list[tuple[str, str, str]], given: Mapping[str, str], key: str) -> dict[str, str]:
    """Labels a series needs to be selected by ``matchers``: equality matchers as they are, the rest from
    ``given`` (``test_labels``); a ``MixinConfigError`` naming ``key`` when ``given`` has no fitting value.
    The generated promtool tests and the backtest's scrapes label their series with them."""
    labels = {name: value for name, op, value in matchers if op == "="}
    for name, value in given.items():
        labels.setdefault(name, value)
    for name, op, value in matchers:
        actual = labels.get(name, "")
        ok = {
            "=": actual == value,
            "!=": actual != value,
            "=~": re.fullmatch(value, actual) is not None,
            "!~": re.fullmatch(value, actual) is None,
        }[op]
        if not ok:
            raise MixinConfigError(
                f"{key}: the generated tests need a value for label {name} matching {name}{op}{show(value)}; set test_labels.{name}"
            )
    return labels


def _check_regex(value: str, where: str) -> None:
    """Refuse a regular expression that neither Python nor RE2 (Prometheus') would compile the same way."""
    if re.search(r"\(\?[=!<]|\\[1-9]|[*+?}]\+", value):
        raise MixinConfigError(f"{where}: Prometheus' regular expressions (RE2) have no lookaround, backreference or possessive form")
    try:
        with warnings.catch_warnings():  # Python's hints about its own future syntax ([[ ...) are not the user's business
            warnings.simplefilter("ignore")
            re.compile(value)
    except (re.error, RecursionError, OverflowError) as exc:
        raise MixinConfigError(f"{where}: not a regular expression ({str(exc)[:80]})") from None


def _split_matchers(text: str) -> list[str]:
    parts, current, quoted, escaped = [], "", False, False
    for ch in text:
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
            continue
        current += ch
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
    parts.append(current)
    return parts


def read_mapping(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise MixinConfigError(f"cannot read the configuration file {path}: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise MixinConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes; a mixin configuration is a few kilobytes")
    kind = "JSON" if path.endswith(".json") else "YAML"
    try:
        text = raw.decode("utf-8")
        data = loads(text) if kind == "JSON" else bounded_yaml(text)
    except UnicodeDecodeError as exc:
        raise MixinConfigError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:300]
        raise MixinConfigError(f"{path} is not valid {kind}: {reason}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise MixinConfigError(f"{path}: the configuration must be a mapping of keys to values")
    return data


def bounded_yaml(text: str, max_bytes: int = MAX_CONFIG_BYTES, max_nodes: int = MAX_NODES) -> Any:
    """``yaml.safe_load`` bounded: at most ``max_bytes``, ``MAX_ALIASES`` aliases, ``MAX_DEPTH`` levels and
    ``max_nodes`` values once aliases are expanded (a 485-byte alias bomb stands for billions of values),
    no recursion; ``ValueError`` saying which bound, else."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        aliases = 0
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise ValueError(f"more than {MAX_ALIASES} aliases")
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    if len(text) > max_bytes:
        raise ValueError(f"larger than {max_bytes} characters")
    try:
        loader = BoundedLoader(text)
    except yaml.YAMLError as exc:  # the reader refuses control characters before any parsing
        raise ValueError(str(exc)[:300]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _count_nodes(node, {}, set(), max_nodes)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)[:300]) from None
    finally:
        loader.dispose()


def _count_nodes(node: Any, sizes: dict[int, int], open_nodes: set[int], limit: int) -> int:
    """Values ``node`` stands for with its aliases expanded; ``ValueError`` beyond ``limit`` or on a cycle."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise ValueError("an alias refers to a value containing it (recursive)")
    open_nodes.add(key)
    children: list[Any] = []
    if isinstance(node.value, list):
        for item in node.value:
            children.extend(item if isinstance(item, tuple) else (item,))
    size = 1 + sum(_count_nodes(child, sizes, open_nodes, limit) for child in children)
    open_nodes.discard(key)
    if size > limit:
        raise ValueError(f"more than {limit} values once aliases are expanded")
    sizes[key] = size
    return size


def duration_seconds(text: str, key: str = "duration") -> float:
    """Seconds of a Prometheus duration such as ``1h30m``; a ``MixinConfigError`` naming ``key`` for text
    Prometheus would refuse (units out of order or repeated, or longer than its ~292 years)."""
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise MixinConfigError(f"{key}: {show(text)} is {exc}") from None


# --- the documented defaults ----------------------------------------------------------------------------
def document(obj: Any, indent: int, lines: list[str]) -> None:
    pad = "  " * indent
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        lines.append(f"{pad}# {f.metadata.get('doc', '')}")
        if dataclasses.is_dataclass(value):
            lines.append(f"{pad}{f.name}:")
            document(value, indent + 1, lines)
        elif isinstance(value, dict):
            if not value:
                lines.append(f"{pad}{f.name}: {{}}")
            else:
                lines.append(f"{pad}{f.name}:")
                lines.extend(f"{pad}  {_scalar(k)}: {_scalar(v)}" for k, v in value.items())
        else:
            lines.append(f"{pad}{f.name}: {_scalar(value)}")


def _scalar(value: Any) -> str:
    """A YAML scalar (or flow list) that reads back as the same value; JSON strings are valid YAML."""
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, float):
        return str(int(value)) if value == int(value) else repr(value)
    if isinstance(value, str) and '"' in value and "'" not in value and "\\" not in value:
        return f"'{value}'"  # PromQL matchers read better single-quoted
    return json.dumps(value)


def check_texts(obj: Any, prefix: str) -> None:
    """Every string of the configuration bounded and printable (no newline or control character), as UTF-8."""
    for f in dataclasses.fields(obj):
        value, key = getattr(obj, f.name), prefix + f.name
        if dataclasses.is_dataclass(value):
            check_texts(value, key + ".")
        elif isinstance(value, str):
            _bounded_text(value, key)
        elif isinstance(value, list):
            for item in value:
                _bounded_text(item, key)
        elif isinstance(value, dict):
            for name, item in value.items():
                _bounded_text(name, key)
                _bounded_text(item, f"{key}.{name}")


def _bounded_text(raw: str, key: str) -> None:
    if len(raw) > MAX_STRING:
        raise MixinConfigError(f"{key}: longer than {MAX_STRING} characters")
    if CONTROL.search(raw):
        raise MixinConfigError(f"{key}: {show(raw)} contains a newline or control character")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise MixinConfigError(f"{key}: {show(raw)} is not valid Unicode (a lone surrogate)") from None
