"""One typed decoder for configuration: the observer's settings and the mixin's configuration alike.

A configuration is a frozen dataclass (its fields carry the documentation). ``msgspec.convert`` reads a plain
mapping into a msgspec Struct built from that dataclass, every field optional and unknown fields forbidden,
so a typo is refused rather than ignored. Only the fields given replace the defaults; a nested dataclass is
merged the same way. A refusal is a ``DecodeProblem`` naming the field, for the caller's own message.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")
# "... - at `$.thresholds.restore_seconds`", "... - at `key` in `$.kubernetes.labels`", or no place (the root)
_PLACE = re.compile(r" - at `(?:key` in `)?(\$[^`]*)`$")
_STEP = re.compile(r"\.([A-Za-z_]\w*)")


class DecodeProblem(ValueError):
    """A value of the wrong type, or a key no field has: ``path`` names the field from the root."""

    def __init__(self, path: tuple[str, ...], reason: str, unknown_key: bool = False, out_of_range: bool = False) -> None:
        super().__init__(f"{'.'.join(path) or '$'}: {reason}")
        self.path = path
        self.reason = reason
        self.unknown_key = unknown_key
        self.out_of_range = out_of_range


def decode(cls: type[T], data: Any, default: T | None = None, strict: bool = True) -> T:
    """``default`` (else ``cls()``) with the fields ``data`` gives; ``strict=False`` reads numbers and
    booleans from text (environment variables). A dictionary's string values may be given as numbers (YAML
    reads ``1`` as one): they become their text."""
    try:
        given = msgspec.convert(data, _schema(typing.cast(type, cls)), strict=strict)
    except msgspec.ValidationError as exc:
        raise _problem(cls, str(exc)) from None
    return _merge(cls, given, cls() if default is None else default, ())


def field_hint(cls: type, path: tuple[str, ...]) -> Any:
    """The declared type of the field at ``path`` (``cls`` itself for the root)."""
    hint: Any = cls
    for name in path:
        hint = typing.get_type_hints(hint)[name]
    return hint


def value_at(data: Any, path: tuple[str, ...]) -> Any:
    """What ``data`` holds at ``path`` (``None`` where it holds nothing)."""
    for name in path:
        data = data.get(name) if isinstance(data, Mapping) else None
    return data


@functools.cache
def _schema(cls: type) -> type[msgspec.Struct]:
    fields = [(name, _loose(hint), msgspec.UNSET) for name, hint in _hints(cls).items()]
    return msgspec.defstruct(f"{cls.__name__}Fields", fields, forbid_unknown_fields=True, frozen=True)


def _hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _loose(hint: Any) -> Any:
    """The type the decoder checks a field against: a nested dataclass by its own schema, a dictionary's
    string values as text or numbers."""
    if dataclasses.is_dataclass(hint):
        return _schema(typing.cast(type, hint))
    if typing.get_origin(hint) is dict and typing.get_args(hint) == (str, str):
        return dict[str, str | int | float]
    return hint


def _merge(cls: type[T], given: msgspec.Struct, default: T, path: tuple[str, ...]) -> T:
    values: dict[str, Any] = {}
    for name, hint in _hints(cls).items():
        value = getattr(given, name)
        if value is msgspec.UNSET:
            continue
        if dataclasses.is_dataclass(hint):
            value = _merge(typing.cast(type, hint), value, getattr(default, name), (*path, name))
        elif isinstance(value, dict):
            value = {k: v if isinstance(v, str) else _number_text(v, (*path, name)) for k, v in value.items()}
        values[name] = value
    return dataclasses.replace(default, **values)  # type: ignore[type-var]


def _number_text(value: float, path: tuple[str, ...]) -> str:
    try:
        return str(value)
    except ValueError:  # an integer beyond Python's digit limit for str()
        raise DecodeProblem(path, "a number too long to use") from None


def _problem(cls: type, message: str) -> DecodeProblem:
    """The field a msgspec refusal points at: the dataclass fields its place names, up to the first that is not one."""
    place = _PLACE.search(message)
    path: list[str] = []
    hint: Any = cls
    for step in _STEP.findall(place.group(1) if place else ""):
        if not dataclasses.is_dataclass(hint):
            break
        hints = _hints(typing.cast(type, hint))
        if step not in hints:
            break
        path.append(step)
        hint = hints[step]
    reason = _PLACE.sub("", message)
    return DecodeProblem(tuple(path), reason, reason.startswith("Object contains unknown field"), "out of range" in reason)
