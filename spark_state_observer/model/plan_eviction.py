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
from collections.abc import Callable

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
# a stream-stream join's node: its run and operator id and its state cleanup, one predicate (or null) per side
_JOIN_NODE = (
    rb"StreamingSymmetricHashJoin [^\\\"\n]{0,65536}?" + _STATE_INFO + rb"[^\\\"\n]{0,512}?state cleanup \[ ([^\]\\\"\n]{0,16384}) \]"
)
_WRITER = re.compile(rb'"simpleString":"' + _WRITER_NODE + rb'"')
_JOIN = re.compile(rb'"simpleString":"' + _JOIN_NODE)
_WRITER_LINE = re.compile(_WRITER_NODE + rb"$", re.MULTILINE)
_JOIN_LINE = re.compile(_JOIN_NODE)
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
        joins = _JOIN if b'"simpleString":"StreamingSymmetricHashJoin ' in line else None
        self._keep(run[1].decode("ascii"), _operators(line, tree, run[1], _WRITER, joins))

    def feed_tree(self, run_id: str, tree: str) -> None:
        """A live run's executed plan as its tree string (``executedPlan.treeString``): what the log's plans say."""
        text = tree.encode("utf-8", "replace")
        self._keep(run_id, _operators(text, 0, run_id.encode("ascii", "replace"), _WRITER_LINE, _JOIN_LINE))

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


def _operators(
    text: bytes, start: int, run: bytes, writers: re.Pattern[bytes], joins: re.Pattern[bytes] | None
) -> dict[int, tuple[str, bool]]:
    """operator id -> (plan node, evicted by the watermark) of run ``run``'s writer nodes in ``text`` from ``start``."""
    operators: dict[int, tuple[str, bool]] = {}
    for m in writers.finditer(text, start):
        if len(operators) >= MAX_OPERATORS:
            return operators
        if m[4] == run:
            node = m[1].decode("ascii")
            operators[int(m[5])] = (node, watermark_evicts(node, m[2], m[6]))
    for m in joins.finditer(text, start) if joins is not None else ():
        if len(operators) >= MAX_OPERATORS:
            break
        if m[1] == run:
            operators[int(m[2])] = ("StreamingSymmetricHashJoin", join_evicts(m[3]))
    return operators
