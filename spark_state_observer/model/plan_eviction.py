"""Which stateful operators the watermark evicts by their state's key, read from the plans an event log records.

A state whose key holds the watermarked event time (an aggregation per event-time window, a deduplication on
the event-time column, a session window) is evicted by Spark once the watermark passes that time: it is
bounded for as long as the watermark keeps pace with the input, however long its windows are. Its rows may
still rise for a whole window first (a count per user and hour piles up keys for an hour), which the progress
alone cannot tell from a state that grows for ever: the window's length is in no progress event. A state whose
key holds no event time (a count per key with a watermark) is never evicted by it, whatever the watermark does.

The plan of every micro-batch says so: a writer's node (its ``simpleString``) lists its key (``StateStoreSave
[window#8-T10000ms, key#2L], state info [ ... runId = <run id>, opId = 0 ...], Update, ...``) and Spark marks an
attribute carrying a watermark with ``-T<delay>ms``; a session window is closed and evicted by the watermark
(Spark accepts it in append mode only with one); an aggregation in complete mode keeps every key whatever its
key holds; a stream-stream join evicts each side's rows once the watermark passes what its condition lets it
match (``state cleanup [ left value predicate: ..., right value predicate: ... ]``; ``null`` for a side it
cannot clean), so with both sides cleaned it is bounded while the watermark keeps pace, a time range of an hour
or not. Operators whose state is evicted otherwise (``GroupState`` and ``transformWithState``, by timeouts and
TTLs) are not read here: unknown, as everything is without a plan.

``PlanEviction`` keeps, per run id and operator id, whether the watermark evicts that operator's state. It reads
an event log's ``SparkListenerSQLExecutionStart`` lines (the tree, ``sparkPlanInfo``: the plan's description,
``physicalPlanDescription``, names a run id of its own on Spark 3.5 and 4.0, not the query's), or a live run's
executed plan as its tree string (the listener, ``spark_state_observer.embedded.attach``). A run's plan repeats every batch,
so once a run is known its lines are not searched again.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterator

from spark_state_observer.model.plan_checkpoint import tree_state_info
from spark_state_observer.model.spark_events import WRITER_OPERATOR_NAMES

_RUN = re.compile(rb"state info \[ checkpoint = [^,\\\"]{0,4096}, runId = ([0-9a-f-]{36})")
_STATE_INFO = rb"state info \[ checkpoint = [^,\\\"\n]{0,4096}, runId = ([0-9a-f-]{36}), opId = (\d{1,9})[^\]\\\"\n]{0,512}\]"
# a writer node (its ``simpleString``: in a log, one JSON string of the plan's tree; live, a line of its tree
# string): its key list, what follows it (a session window's window), its run and operator id, and the rest of
# it (the output mode among it)
_WRITER_NODE = (
    rb"(StateStoreSave|StreamingDeduplicate|SessionWindowStateStoreSave) \[([^\]\\\"\n]{0,8192})\]([^\[\\\"\n]{0,512}?), "
    + _STATE_INFO
    + rb"([^\\\"\n]{0,512})"
)
_WRITER = re.compile(rb'"simpleString":"' + _WRITER_NODE + rb'"')
_WRITER_LINE = re.compile(_WRITER_NODE + rb"$", re.MULTILINE)
# where a writer or a join node may start: the regexes above are tried only there (see ``_operators``)
_WRITER_NAMES = rb"(?:StateStoreSave|StreamingDeduplicate|SessionWindowStateStoreSave) \["
_WRITER_AT = re.compile(rb'"simpleString":"' + _WRITER_NAMES)
_WRITER_LINE_AT = re.compile(_WRITER_NAMES)
# a stream-stream join's node: its run and operator id (its state info) and its state cleanup, one predicate (or null)
# per side (``_joins``)
_JOIN_AT = b'"simpleString":"StreamingSymmetricHashJoin '
_JOIN_LINE_AT = b"StreamingSymmetricHashJoin "
_JOIN_WINDOW = 65_536  # characters from a join's name to its state info
_STATE = re.compile(_STATE_INFO)
_MARKER = b"state info [ checkpoint = "
_CHECKPOINT_MAX = 4096  # characters of a checkpoint path in a state info
_KEYS_MAX = 8192  # characters of a writer's key list
_STOP = re.compile(rb'[\\"\n]')  # what ends a node's text: the end of its JSON string, or of its line
_KEYS_END = re.compile(rb'[\]\\"\n]')
_PATH_END = re.compile(rb'[,\\"\n]')
_CLEANUP = b"state cleanup [ "
_CLEANUP_BODY = re.compile(rb"([^\]\\\"\n]{0,16384}) \]")
_CLEANUP_WINDOW = 512  # characters from a join's state info to its state cleanup
_WATERMARKED = re.compile(rb"#\d+-T\d+ms")  # an attribute carrying a watermark (its delay in ms)
_COMPLETE = re.compile(rb"(?:^|, )Complete(?:,|$)")
# what progress events call these writers on 3.5 too (its session window's writer has no short name of its own)
_PROGRESS_NAMES = {
    node: frozenset({name, "defaultName"} if node == "SessionWindowStateStoreSave" else {name})
    for node, name in WRITER_OPERATOR_NAMES.items()
}
MAX_RUNS = 1024  # runs remembered, the oldest forgotten first
MAX_OPERATORS = 256  # state operators kept per run (a real plan has a few; a hostile line is not kept whole)

# (query id, run id, operator index, the operator's name in progress) -> whether the watermark evicts its state by
# key; None: not known
EvictionLocator = Callable[[str, str | None, int, str], bool | None]


def watermark_evicts(node: str, keys: bytes, rest: bytes) -> bool:
    """Whether Spark evicts the state of writer ``node`` by the watermark, from its node's key list and the rest of
    its arguments (the output mode)."""
    if node == "StreamingDeduplicate":  # no output mode: it evicts the keys the watermark passes
        return _WATERMARKED.search(keys) is not None
    if _COMPLETE.search(rest.strip()):
        return False  # complete mode outputs every group every batch: nothing is ever evicted
    if node == "SessionWindowStateStoreSave":
        # its window is listed apart from its key, without the marker; Spark accepts append mode only with a watermark
        # on it, and closes and evicts a session once the watermark passes its end (the query's watermark is checked
        # by the growth rule)
        return True
    return _WATERMARKED.search(keys) is not None


def join_evicts(cleanup: bytes) -> bool:
    """Whether a stream-stream join's state cleanup (``left value predicate: (...), right key predicate: (...)``, or
    ``null`` for a side) evicts both sides by the watermark: a side without one keeps every row for ever."""
    left, _, right = cleanup.partition(b", right ")
    return b"predicate:" in left and b"predicate:" in right


class PlanEviction:
    """run id -> {operator id: (plan node, evicted by the watermark)} from the stateful plans of SQL executions;
    bounded to ``MAX_RUNS`` runs."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, dict[int, tuple[str, bool]]] = OrderedDict()

    def feed_line(self, line: bytes) -> None:
        """One raw event-log line; anything but a SQL execution start with a stateful plan is ignored."""
        tree, at = tree_state_info(line)
        if at < 0:
            return
        run = _RUN.match(line, at)
        if run is None or run[1].decode("ascii") in self._runs:
            return
        joins = _JOIN_AT if _JOIN_AT in line else None
        self._keep(run[1].decode("ascii"), _operators(line, tree, run[1], _WRITER, joins))

    def feed_tree(self, run_id: str, tree: str) -> None:
        """A live run's executed plan as its tree string (``executedPlan.treeString``): what the log's plans say."""
        text = tree.encode("utf-8", "replace")
        self._keep(run_id, _operators(text, 0, run_id.encode("ascii", "replace"), _WRITER_LINE, _JOIN_LINE_AT))

    def knows(self, run_id: str) -> bool:
        """Whether a plan of this run was read (whatever it held)."""
        return run_id in self._runs

    def _keep(self, run_id: str, operators: dict[int, tuple[str, bool]]) -> None:
        self._runs[run_id] = operators
        while len(self._runs) > MAX_RUNS:
            self._runs.popitem(last=False)

    def __call__(self, query_id: str, run_id: str | None, operator_index: int, operator_name: str) -> bool | None:
        """Whether the watermark evicts this operator's state by key; None when its run's plan was not seen or the
        plan's operator of that id is not the one progress names so."""
        known = self._runs.get(run_id) if run_id else None
        found = known.get(operator_index) if known else None
        if found is None or operator_name not in _PROGRESS_NAMES.get(found[0], ()):
            return None
        return found[1]


def _operators(text: bytes, start: int, run: bytes, writers: re.Pattern[bytes], joins: bytes | None) -> dict[int, tuple[str, bool]]:
    """operator id -> (plan node, evicted by the watermark) of run ``run``'s writer and join nodes in ``text`` from ``start``.

    In time linear in ``text``, whatever it holds (a SQL string literal reaches the plan's text): a node is
    tried only where its name is, and a try that fails tells where the next one can succeed, so no stretch of
    text is read by more than a few tries. A lazy search of up to 64 KiB for a join's state info, with a 4 KiB
    search for the checkpoint path at each of its positions, took 3.5 s of CPU per MB of hostile plan text."""
    operators: dict[int, tuple[str, bool]] = {}
    for m in _writers(text, start, writers):
        if len(operators) >= MAX_OPERATORS:
            return operators
        if m[4] == run:
            node = m[1].decode("ascii")
            operators[int(m[5])] = (node, watermark_evicts(node, m[2], m[6]))
    for op, cleanup in _joins(text, start, run, joins) if joins is not None else ():
        if len(operators) >= MAX_OPERATORS:
            break
        operators[op] = ("StreamingSymmetricHashJoin", join_evicts(cleanup))
    return operators


def _writers(text: bytes, pos: int, writers: re.Pattern[bytes]) -> Iterator[re.Match[bytes]]:
    """The writer nodes of ``text`` from ``pos``, as ``writers.finditer`` would find them, in linear time.

    A try is made only where a writer's name starts. One that fails was decided at or after the end of its key
    list (the first ``]``, quote, backslash or newline), which every name before that end shares: the next try
    starts there (or where a key list of ``_KEYS_MAX`` could still end there)."""
    at = _WRITER_AT if writers is _WRITER else _WRITER_LINE_AT
    while (found := at.search(text, pos)) is not None:
        m = writers.match(text, found.start())
        if m is not None:
            yield m
            pos = m.end()
            continue
        end = _KEYS_END.search(text, found.end())
        stop = end.start() if end is not None else len(text)
        pos = stop if stop - found.start() <= _KEYS_MAX + 64 else max(found.start() + 1, stop - _KEYS_MAX - 64)


def _joins(text: bytes, pos: int, run: bytes, name: bytes) -> Iterator[tuple[int, bytes]]:
    """(operator id, state cleanup) of run ``run``'s stream-stream join nodes in ``text`` from ``pos``, in linear time.

    A join's state info is the first state info within ``_JOIN_WINDOW`` of its name (before the end of its node's
    text) that is followed, within ``_CLEANUP_WINDOW``, by a state cleanup. Whether a state info qualifies does
    not depend on the join, so each is tried once (``tried``); one that fails was decided at or after the end of
    its checkpoint path, which every state info before that end shares."""
    tried = pos
    stop = -1  # where the current node's text ends: searched again only past it
    while (j := text.find(name, pos)) >= 0:
        body = j + len(name)
        if stop < body:
            end = _STOP.search(text, body)
            stop = end.start() if end is not None else len(text)
        limit = min(body + _JOIN_WINDOW + len(_MARKER), stop)
        found = None
        m = text.find(_MARKER, max(body, tried), limit)
        while m >= 0:
            found = _join_tail(text, m)
            if found is not None:
                break
            path_end = _PATH_END.search(text, m + len(_MARKER))
            path_stop = path_end.start() if path_end is not None else len(text)
            fits = path_stop - m <= _CHECKPOINT_MAX + len(_MARKER)
            tried = path_stop if fits else max(m + 1, path_stop - _CHECKPOINT_MAX - len(_MARKER))
            m = text.find(_MARKER, tried, limit)
        if found is None:
            tried, pos = max(tried, limit - len(_MARKER) + 1), body
            continue
        op_run, op, cleanup, pos = found
        tried = pos
        if op_run == run:
            yield op, cleanup


def _join_tail(text: bytes, at: int) -> tuple[bytes, int, bytes, int] | None:
    """The state info at ``at`` and the state cleanup after it: (run id, operator id, cleanup, end), or None."""
    info = _STATE.match(text, at)
    if info is None:
        return None
    window_end = info.end() + _CLEANUP_WINDOW + len(_CLEANUP)
    cut = text.find(_CLEANUP, info.end(), window_end)
    if cut < 0 or _STOP.search(text, info.end(), cut) is not None:
        return None
    body = _CLEANUP_BODY.match(text, cut + len(_CLEANUP))
    if body is None:
        return None
    return info[1], int(info[2]), body[1], body.end()
