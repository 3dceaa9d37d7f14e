"""The fast path from a progress event's JSON to the model: a typed msgspec decode, then plain construction.

``spark_state_observer.model.parse`` is the reference: lenient, field by field, with a problem noted for each odd
value. That care costs ~5x a bare ``json.loads`` per event, and one watcher carries every application of
a cluster. Most events are unremarkable, so this module decodes them straight into typed structs (msgspec,
in C: no intermediate dicts of dicts, no per-field ``isinstance``) and builds the same ``QueryProgress``
the reference would. It *declines* (returns ``None``) whenever the reference would have noted a problem,
truncated something, or could read the input differently: a value of the wrong type fails the typed
decode, and the checks below catch non-finite numbers, bounds and sentinels. The caller then runs the
reference parser, so odd input is handled exactly as before and the fast path never decides anything
the reference does not (``tests/unit/test_decode.py`` compares both on every recorded event).

The reference also guards against hostile input (``spark_state_observer.model.bounded``): it cleans every string that
becomes a label or text of lone surrogates and control characters, bounds lengths, batch ids (longs) and
the JSON's size. The fast path never cleans or cuts: where the reference would change a value, it declines.

msgspec rather than orjson: measured on recorded RocksDB progress (bench/replay_rate.py's log, same run)
``json.loads`` 104 µs, orjson 80 µs, msgspec into these structs 40 µs per event, and the structs also
spare the conversion the dict would need.
"""

from __future__ import annotations

import functools
import math
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec

from spark_state_observer.model import kinds, spark_events
from spark_state_observer.model.bounded import MAX_JSON_ITEMS, Decoder, clean_label, finite, json_items, loads
from spark_state_observer.model.events import InstanceMetric, OperatorProgress, QueryProgress, SinkProgress, SourceProgress, assemble
from spark_state_observer.model.phases import TRIGGER_EXECUTION

Number = int | float
Finite = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
"""A JSON number as a float, checked finite in C (``1e999`` decodes as inf; the reference notes a problem)."""
MaybeFinite = Finite | msgspec.UnsetType | None  # absent (UNSET) told apart from null where the reference does
_UNSET = msgspec.UNSET
_new = object.__new__
_set = object.__setattr__


class _Operator(msgspec.Struct, gc=False):
    """Spark's ``StateOperatorProgress`` as JSON names it (attributes follow ``spark_state_observer.model.fields.OPERATOR_FIELDS``)."""

    operatorName: Any = None  # noqa: N815  # Spark's JSON field names
    numRowsTotal: Finite | None = None  # noqa: N815
    numRowsUpdated: Finite | None = None  # noqa: N815
    numRowsRemoved: Finite | None = None  # noqa: N815
    numRowsDroppedByWatermark: Finite | None = None  # noqa: N815
    allUpdatesTimeMs: Finite | None = None  # noqa: N815
    allRemovalsTimeMs: Finite | None = None  # noqa: N815
    commitTimeMs: Finite | None = None  # noqa: N815
    memoryUsedBytes: Finite | None = None  # noqa: N815
    numShufflePartitions: Finite | None = None  # noqa: N815
    numStateStoreInstances: Finite | None = None  # noqa: N815
    customMetrics: dict[str, Finite] | None = None  # noqa: N815


class _Source(msgspec.Struct, gc=False):
    description: str | None = None
    numInputRows: MaybeFinite = _UNSET  # noqa: N815
    inputRowsPerSecond: MaybeFinite = _UNSET  # noqa: N815
    processedRowsPerSecond: MaybeFinite = _UNSET  # noqa: N815
    metrics: dict[str, str | Number] | None = None


class _Sink(msgspec.Struct, gc=False):
    description: str | None = None
    numOutputRows: Finite | None = None  # noqa: N815
    metrics: dict[str, str | Number] | None = None


class _Progress(msgspec.Struct, gc=False):
    """Spark's ``StreamingQueryProgress``."""

    id: str
    runId: str  # noqa: N815
    batchId: int  # noqa: N815
    name: str | None = None
    timestamp: str | None = None
    batchDuration: MaybeFinite = _UNSET  # noqa: N815
    numInputRows: MaybeFinite = _UNSET  # noqa: N815
    inputRowsPerSecond: MaybeFinite = _UNSET  # noqa: N815
    processedRowsPerSecond: MaybeFinite = _UNSET  # noqa: N815
    durationMs: dict[str, Finite] | None = None  # noqa: N815
    eventTime: dict[str, Any] | None = None  # noqa: N815
    stateOperators: list[_Operator] | None = None  # noqa: N815
    sources: list[_Source] | None = None
    sink: _Sink | None = None


class _Line(msgspec.Struct, kw_only=True, gc=False):
    """An event log's progress line: its ``Event`` (any JSON value) and its ``progress`` object, kept as raw JSON."""

    Event: Any = _UNSET  # Spark's JSON field name
    progress: msgspec.Raw


class _OperatorName(msgspec.Struct, gc=False):
    operatorName: Any = None  # noqa: N815


class _Ids(msgspec.Struct, gc=False):
    """What placement reads of a progress event: which query and batch it closes, and the operators' names."""

    id: Any = None
    batchId: Any = None  # noqa: N815
    name: Any = None
    stateOperators: list[_OperatorName] | None = None  # noqa: N815


class _Stamp(msgspec.Struct, gc=False):
    timestamp: Any = None
    batchDuration: Any = None  # noqa: N815


ProgressIds = _Progress | _Ids
"""What ``event_progress_ids`` gives: ``id``, ``batchId``, ``name`` and each ``stateOperators`` entry's ``operatorName``."""

_PROGRESS = Decoder(_Progress)
_LINE = Decoder(_Line)
_STAMP = Decoder(_Stamp)
_IDS = Decoder(_Ids)


class _Shared:
    """The progress line this thread read last and what was decoded of it, for the next reader of the same line.

    A replay hands one line to three readers in turn (placement's tap for the ids, the record reader for the
    ``progress`` object's bytes, the replay's clock for the time) before the decoder builds the model: one
    envelope pass and one typed pass of the object now serve them all, where each made its own msgspec pass
    (~15 µs of passes an event down to ~10). The line is known by identity (the same ``bytes`` object, held
    here so its id is not reused); the object's bytes by identity or, for the watcher, which cuts its own copy
    of them from the same line, by equal content (a ~0.1 µs compare). The typed struct is
    built once, on first need, and handed to the decoder once (``_build`` takes its dicts into the model).

    One per thread (``_THREAD.shared``): a plain object read once per call, since every attribute read of a
    ``threading.local`` costs ~0.1 µs more, and the readers of one line made ~25 of them."""

    __slots__ = ("doc", "event", "line", "raw", "tried")

    def __init__(self) -> None:
        self.line: bytes | None = None
        self.event: Any = _UNSET  # the line's ``Event``
        self.raw: bytes | None = None  # the ``progress`` object's JSON; None when the line is not that shape
        self.tried = False  # whether ``raw`` was decoded typed (into ``doc``, None when it does not fit)
        self.doc: _Progress | None = None


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.shared = _Shared()


_THREAD = _PerThread()


_HEAD = spark_events.line_prefix(spark_events.QUERY_PROGRESS) + b',"progress":{'
_HEAD_CUT = len(_HEAD) - 1  # where the ``progress`` object starts


def _cut(line: bytes) -> bytes | None:
    """The ``progress`` object's bytes of a line as Spark writes it (the ``Event`` first, then ``progress``, the
    closing brace, the newline), or None for any other line: a candidate only, until it decodes typed."""
    if line.startswith(_HEAD):
        if line.endswith(b"}}\n"):
            return line[_HEAD_CUT:-2]
        if line.endswith(b"}}"):
            return line[_HEAD_CUT:-1]
    return None


def _split(line: bytes) -> _Shared:
    """The shared reading of ``line``, whichever reader comes first: the typed decode of its ``progress`` object
    when the line is as Spark writes it, else its envelope decoded.

    A line that begins ``{"Event":"…QueryProgressEvent","progress":{`` and ends ``}}`` (and a newline) is that
    object exactly when what lies between the two braces decodes as one typed ``_Progress`` (msgspec refuses
    trailing bytes): the line is then ``{"Event": …, "progress": X}``, so the envelope would give this ``Event``
    and X's very bytes. That spares the envelope pass (~2 µs of a 4.6 kB line); the model needs the typed
    decode anyway. Any other line, or a candidate that does not decode typed, takes the envelope pass as before."""
    shared = _THREAD.shared
    if shared.line is not line:
        cut = _cut(line)
        if cut is not None:
            try:
                doc = _PROGRESS.decode(cut)
            except Exception:  # not the typed shape (or not one object): the envelope decides, below
                pass
            else:
                shared.line, shared.event, shared.raw, shared.tried, shared.doc = line, spark_events.QUERY_PROGRESS, cut, True, doc
                return shared
        try:
            found = _LINE.decode(line)
            shared.event, shared.raw = found.Event, bytes(found.progress)
        except msgspec.MsgspecError:
            shared.event, shared.raw = _UNSET, None
        # the very bytes the cut decoded already (and refused): no second typed try
        shared.line, shared.tried, shared.doc = line, cut is not None and shared.raw == cut, None
    return shared


def _typed(shared: _Shared) -> _Progress | None:
    """The shared line's progress object as the typed struct (decoded on first need), or None when it does not fit."""
    if not shared.tried:
        shared.tried = True
        try:
            shared.doc = _PROGRESS.decode(shared.raw)  # type: ignore[arg-type]  # only called with raw set
        except Exception:  # not the typed shape, or anything msgspec did not foresee: the readers go their own way
            shared.doc = None
    return shared.doc


def _take_typed(payload: bytes) -> tuple[bool, _Progress | None]:
    """Whether ``payload`` is the shared line's progress object, and its typed struct, taken: the next reader
    decodes anew (the model takes the struct's dicts, so no two models may share them)."""
    shared = _THREAD.shared
    if shared.raw is None or (payload is not shared.raw and payload != shared.raw):  # equal bytes: the watcher cuts its own copy
        return False, None
    doc = _typed(shared)
    shared.tried, shared.doc = False, None
    return True, doc


class Decline(Exception):
    """The input needs the reference parser's care (internal to this module)."""


@dataclass(frozen=True)
class Rules:
    """What the reference parser bounds and how it reads times and rates: it passes its own, so both agree."""

    max_operators: int
    max_sources: int
    max_map_entries: int
    max_instance_metrics: int
    instance_metric: re.Pattern[str]  # "<prefix>.partition_<n>_<store>"
    timestamp: Callable[[Any], float | None]
    rate: Callable[[float | None], float | None]
    max_batch_id: int  # Spark's batch ids are longs
    cached_timestamp: Callable[[str], float | None] = field(init=False, repr=False, compare=False)
    cached_instance: Callable[[str, float], InstanceMetric | None] = field(init=False, repr=False, compare=False)
    custom_shape: Callable[[tuple[str, ...]], tuple[str, ...] | None] = field(init=False, repr=False, compare=False)
    clean_keys: Callable[[tuple[str, ...], int | None], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Memos, bounded: a watermark repeats for many batches, a per-instance metric (the version a
        # partition's last snapshot was) changes only when that partition uploads one, and the names of an
        # operator's custom metrics (or of the phases) are the same every batch, so what they decide is too.
        object.__setattr__(self, "cached_timestamp", functools.lru_cache(maxsize=1024)(self.timestamp))
        object.__setattr__(self, "cached_instance", functools.lru_cache(maxsize=16_384)(self._instance))
        object.__setattr__(self, "custom_shape", functools.lru_cache(maxsize=1024)(self._custom_shape))
        object.__setattr__(self, "clean_keys", functools.lru_cache(maxsize=1024)(_keys_clean))

    def _custom_shape(self, keys: tuple[str, ...]) -> tuple[str, ...] | None:
        """Of an operator's custom metrics named ``keys``: the per-instance ones (in order), or ``None`` when
        the reference would note, clean or cut any name (then the fast path declines)."""
        if len(keys) > self.max_map_entries + self.max_instance_metrics or not _keys_clean(keys, None):
            return None
        try:
            instances = tuple(key for key in keys if ".partition_" in key and self._instance(key, 0.0) is not None)
        except Decline:
            return None
        rest = [key for key in keys if key not in instances]
        if len(rest) > self.max_map_entries or len(instances) > self.max_instance_metrics or max(map(len, rest), default=0) > 200:
            return None  # the reference cuts these down, and notes it
        return instances

    def _instance(self, key: str, value: float) -> InstanceMetric | None:
        """The per-instance metric a custom metric's key names, or None when it names none (the key's
        characters are checked clean by the caller)."""
        match = self.instance_metric.match(key)
        if match is None:
            return None
        if len(match["partition"]) > 18 or len(match["store"]) > 100:
            raise Decline  # the reference cuts these down
        return InstanceMetric(match["prefix"], int(match["partition"]), match["store"], None if value < 0 else value)


class LazyJson(Mapping[str, Any]):
    """``QueryProgress.raw`` for an event that came as text: the object, decoded only if someone reads it."""

    __slots__ = ("_obj", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._obj: dict[str, Any] | None = None

    def _loaded(self) -> dict[str, Any]:
        if self._obj is None:
            obj = loads(self._text)
            self._obj = obj if isinstance(obj, dict) else {}
        return self._obj

    def __getitem__(self, key: str) -> Any:
        return self._loaded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


def sources_as_sent(p: QueryProgress) -> bool:
    """Whether ``p.sources`` are the event's sources exactly as sent (every one, descriptions unchanged): true of
    what this module built from text (it declines otherwise), so a rule may read them instead of ``p.raw``,
    which would be decoded whole for it."""
    return isinstance(p.raw, LazyJson)


def progress(payload: object, rules: Rules) -> QueryProgress | None:
    """The model of one progress event, or ``None`` when the reference parser must read it instead.

    Anything that goes wrong here declines: the reference reads the event and says what is wrong.
    """
    try:
        if type(payload) is bytes:  # an event log's progress object, its typed decode usually shared with the line's readers
            if len(payload) > MAX_JSON_ITEMS and json_items(payload) > MAX_JSON_ITEMS:
                return None
            shared, taken = _take_typed(payload)
            if shared and taken is None:
                return None  # the typed decode failed on these very bytes
            text = payload.decode()
            return _build(taken if taken is not None else _PROGRESS.decode(payload), rules, LazyJson(text), text)
        if isinstance(payload, Mapping):
            doc = msgspec.convert(payload, _Progress)
            return _build(doc, rules, payload, None)
        if not isinstance(payload, (str, bytes, bytearray)):
            return None
        # the reference refuses JSON of more items than it parses (``bounded.loads``); msgspec would skip
        # them in fields it does not read. Every item takes a byte, so only long text needs counting.
        if len(payload) > MAX_JSON_ITEMS and json_items(payload) > MAX_JSON_ITEMS:
            return None
        text = payload if isinstance(payload, str) else bytes(payload).decode()
        return _build(_PROGRESS.decode(payload), rules, LazyJson(text), text)
    except Exception:  # declining is always safe: the reference parser decides
        return None


def event_progress(line: bytes) -> bytes | None:
    """The raw JSON of the ``progress`` object of an event log's ``QueryProgressEvent`` line, or ``None``."""
    return _split(line).raw


def event_progress_ids(line: bytes) -> _Progress | _Ids | None:
    """What placement reads of an event log's progress line (of ``progress`` its ``id``, ``batchId``, ``name`` and each
    operator's ``operatorName``, as whatever JSON they are), without building the metrics; ``None`` when the line is
    not that shape or its ``Event`` is not a progress event's (then the whole line is for ``json.loads``)."""
    shared = _split(line)
    if shared.raw is None or shared.event != spark_events.QUERY_PROGRESS:
        return None
    p: _Progress | _Ids | None = _typed(shared)
    if p is None:  # not the typed shape: the few fields placement reads, as whatever JSON they are
        try:
            p = _IDS.decode(shared.raw)
        except msgspec.MsgspecError:
            return None
    return p


def stamp_fields(payload: bytes) -> tuple[str | None, Any]:
    """A progress object's ``timestamp`` (as sent; ``parse_timestamp`` reads it) and ``batchDuration``
    (as decoded, possibly not a number), without building the rest; ``(None, None)`` for bad JSON."""
    shared = _THREAD.shared
    if shared.raw is not None and (payload is shared.raw or payload == shared.raw):
        doc = _typed(shared)
        if doc is not None:  # the same values (a number as a float: the same time), from the decode the model takes
            return doc.timestamp, (None if doc.batchDuration is _UNSET else doc.batchDuration)
    try:
        found = _STAMP.decode(payload)
    except msgspec.MsgspecError:
        return None, None
    return (found.timestamp if isinstance(found.timestamp, str) else None), found.batchDuration


def _timestamp(value: Any, rules: Rules) -> float | None:
    return rules.cached_timestamp(value) if type(value) is str else rules.timestamp(value)


def _opt(value: float | msgspec.UnsetType | None) -> float | None:
    return None if value is _UNSET else value


def _clean(text: str, limit: int) -> str:
    """``text`` when the reference would keep it as it is (``bounded.clean_label`` changes nothing), else Decline."""
    if len(text) > limit or (not (text.isascii() and text.isprintable()) and clean_label(text, limit) != text):
        raise Decline
    return text


def _clean_keys(keys: Mapping[str, Any], limit: int | None, rules: Rules) -> None:
    """Decline unless every key is a label the reference keeps as it is (``limit`` characters at most, unless None)."""
    if not rules.clean_keys(tuple(keys), limit):
        raise Decline


def _keys_clean(keys: tuple[str, ...], limit: int | None) -> bool:
    """Whether the reference keeps every one of ``keys`` as it is: one C-speed check for the common case."""
    if limit is not None and max(map(len, keys), default=0) > limit:
        return False
    joined = "".join(keys)
    if not (joined.isascii() and joined.isprintable()):
        try:
            for key in keys:
                _clean(key, sys.maxsize if limit is None else limit)
        except Decline:
            return False
    return True


def _build(doc: _Progress, rules: Rules, raw: Mapping[str, Any], text: str | None) -> QueryProgress:
    query_id, run_id, name = doc.id, doc.runId, doc.name
    # the strings that repeat every batch of a query are checked together, once per query (memoized)
    if (
        not 0 <= doc.batchId <= rules.max_batch_id
        or not query_id
        or not run_id
        or not rules.clean_keys((query_id, run_id, name or ""), 200)
    ):
        raise Decline
    ops = doc.stateOperators or ()
    srcs = doc.sources or ()
    if len(ops) > rules.max_operators or len(srcs) > rules.max_sources:
        raise Decline
    duration_ms = doc.durationMs or {}
    if duration_ms and (len(duration_ms) > rules.max_map_entries or not rules.clean_keys(tuple(duration_ms), 100)):
        raise Decline
    if doc.batchDuration is _UNSET:  # Spark 3.5: the trigger execution time is the same span
        batch_duration = duration_ms.get(TRIGGER_EXECUTION)
    else:
        batch_duration = doc.batchDuration
    event_time: dict[str, float] = {}
    if doc.eventTime:
        given = doc.eventTime
        for key in _EVENT_TIME_KEYS:
            if key in given:
                ts = _timestamp(given[key], rules)
                if ts is None:
                    raise Decline
                event_time[key] = ts
    rate = rules.rate
    sources = tuple(
        [
            assemble(
                SourceProgress,
                {
                    "index": i,
                    "description": _clean(s.description or "", 200),
                    "input_rows": None if s.numInputRows is _UNSET else s.numInputRows,
                    "input_rows_per_second": None if s.inputRowsPerSecond is _UNSET else rate(s.inputRowsPerSecond),
                    "processed_rows_per_second": None if s.processedRowsPerSecond is _UNSET else rate(s.processedRowsPerSecond),
                    "metrics": _num_map(s.metrics, rules) if s.metrics else {},
                },
            )
            for i, s in enumerate(srcs)
        ]
    )
    sink = None
    if doc.sink is not None:
        output = doc.sink.numOutputRows
        sink = assemble(
            SinkProgress,
            {
                "description": _clean(doc.sink.description or "", 200),
                "output_rows": None if output is None or output < 0 else output,
                "metrics": _num_map(doc.sink.metrics, rules) if doc.sink.metrics else {},
            },
        )
    # assembled as ``events.assemble`` does, inline (~0.2 µs a call): a frozen __init__ costs ~4x; every field is named
    progress = _new(QueryProgress)
    _set(
        progress,
        "__dict__",
        {
            "query_id": query_id,
            "run_id": run_id,
            "name": name or None,
            "timestamp": _timestamp(doc.timestamp, rules),
            "batch_id": doc.batchId,
            "batch_duration_ms": batch_duration,
            "input_rows": doc.numInputRows if doc.numInputRows is not _UNSET else _sum(srcs, "numInputRows"),
            "input_rows_per_second": _query_rate(doc.inputRowsPerSecond, srcs, sources, "inputRowsPerSecond", rules),
            "processed_rows_per_second": _query_rate(doc.processedRowsPerSecond, srcs, sources, "processedRowsPerSecond", rules),
            "duration_ms": duration_ms,
            "event_time": event_time,
            "operators": tuple([_operator(i, op, rules) for i, op in enumerate(ops)]),
            "sources": sources,
            "sink": sink,
            "problems": (),
            "raw": raw,
            "raw_text": text,
            "kind": kinds.PROGRESS,
        },
    )
    return progress


_EVENT_TIME_KEYS = ("avg", "max", "min", "watermark")


def _query_rate(
    value: float | msgspec.UnsetType | None, srcs: Sequence[_Source], sources: tuple[SourceProgress, ...], key: str, rules: Rules
) -> float | None:
    """A query-level rate, rounded: its own, else its sources' sum (event logs omit the query's). With one
    source that sum is ``0 + v``, the very double ``v`` unless ``v`` is a zero (``-0.0`` becomes ``0.0``), so
    its rounding is the one the source's own rate already got: taken from the source, not rounded again."""
    if value is not _UNSET:
        return rules.rate(value)
    if len(srcs) == 1:
        own = getattr(srcs[0], key)
        if own is not None and own is not _UNSET and own != 0:
            source = sources[0]
            return source.input_rows_per_second if key == "inputRowsPerSecond" else source.processed_rows_per_second
    return rules.rate(_sum(srcs, key))


def _sum(sources: Sequence[_Source], key: str) -> float | None:
    """Spark's query-level figure from its sources, for event logs (Jackson omits the query's own)."""
    if len(sources) == 1:  # the usual query: its one source's figure, as ``sum`` gives it (a finite float plus 0)
        value = getattr(sources[0], key)
        return None if value is None or value is _UNSET else 0 + value
    values = [v for v in (_opt(getattr(s, key)) for s in sources) if v is not None]
    if not values:
        return None
    total = sum(values)
    if not math.isfinite(total):
        raise Decline  # two doubles near the maximum: the reference gives None
    return total


def _num_map(raw: Mapping[str, str | Number] | None, rules: Rules) -> dict[str, float]:
    """Numeric entries of a string map (a source's or sink's metrics), as the reference reads them: numeric
    strings count (Kafka's offsets-behind come as text), anything else is skipped."""
    if not raw:
        return {}
    if len(raw) > rules.max_map_entries:
        raise Decline
    _clean_keys(raw, 100, rules)
    out: dict[str, float] = {}
    for key, value in raw.items():
        number = finite(value)  # the reference's reading: ints beyond a double, NaN and infinities are skipped
        if number is not None:
            out[key] = number
    return out


def _operator(index: int, op: _Operator, rules: Rules) -> OperatorProgress:
    """One operator; its custom metrics are the decoded dict itself, less the per-instance ones (4.1+)."""
    custom = op.customMetrics
    instances: tuple[InstanceMetric | None, ...] = ()
    if custom:
        instance_keys = rules.custom_shape(tuple(custom))  # what the names decide: checked once per set of names
        if instance_keys is None:
            raise Decline
        if instance_keys:  # they leave the custom ones; a ``.partition_`` key that names no instance stays, in its place
            instance, pop = rules.cached_instance, custom.pop
            instances = tuple([instance(key, pop(key)) for key in instance_keys])
    else:
        custom = {}
    name = op.operatorName
    operator = _new(OperatorProgress)  # as ``events.assemble`` does, inline
    _set(
        operator,
        "__dict__",
        {
            "index": index,
            "name": _clean(name, 100) if isinstance(name, str) and name else "unknown",
            "rows_total": op.numRowsTotal,
            "rows_updated": op.numRowsUpdated,
            "rows_removed": op.numRowsRemoved,
            "updates_ms": op.allUpdatesTimeMs,
            "removals_ms": op.allRemovalsTimeMs,
            "commit_ms": op.commitTimeMs,
            "memory_bytes": op.memoryUsedBytes,
            "rows_dropped_by_watermark": op.numRowsDroppedByWatermark,
            "shuffle_partitions": op.numShufflePartitions,
            "store_instances": op.numStateStoreInstances,
            "custom": custom,
            "instances": instances,  # never None: the shape kept only keys that name an instance
        },
    )
    return operator
