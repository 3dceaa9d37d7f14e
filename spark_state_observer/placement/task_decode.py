"""The fast path from an event log's task-level lines to what placement reads: typed msgspec decodes of a few fields.

``spark_state_observer.placement.tasks.TaskEventReader.feed`` is the reference: it takes the whole event as ``json.loads`` builds
it and reads it field by field, noting a problem for each odd value. Those lines are the big ones of a log: a
``SparkListenerTaskEnd`` carries every task metric and every accumulable (several kilobytes), a SQL execution's
plan its whole physical description, a job start the infos of all its stages and the job's properties. Placement
uses a dozen fields of them, so this module decodes exactly those into typed structs (msgspec, in C: the rest is
skipped without building a Python object) and hands the reader the same values the reference would read.

Like ``spark_state_observer.model.decode`` for progress, it *declines* (returns ``None``) whenever the reference could read
the line differently or would note a problem: a field of an unexpected type fails the typed decode (an id that is
a string, a host that is a number), and so do what ``json.loads`` reads but msgspec does not (``NaN``, numbers out
of range, lone surrogates). The caller then parses the line with ``json.loads`` and feeds the reference, so odd
input is handled exactly as before (``tests/unit/test_task_decode.py`` compares both on every recorded fixture and on
hostile lines).

The structs are not tracked by the garbage collector (``gc=False``, ~25 % of the decode): decoded JSON cannot form
a reference cycle, and the reader keeps none of them, only values read from them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from spark_state_observer.model.bounded import Decoder

_UNSET = msgspec.UNSET
OptInt = int | msgspec.UnsetType


class Accumulable(msgspec.Struct, gc=False):
    """One entry of a task's ``Accumulables``: its id, name and this task's update (anything: read only for state metrics)."""

    ID: OptInt = _UNSET
    Name: str | msgspec.UnsetType = _UNSET
    Update: Any = None


class _Reason(msgspec.Struct, gc=False):
    Reason: str | msgspec.UnsetType = _UNSET


class TaskInfo(msgspec.Struct, gc=False):
    """``Task Info`` of a task end: where and when the task ran."""

    executor: str = msgspec.field(name="Executor ID")
    host: str | None = msgspec.field(default=None, name="Host")
    partition: OptInt = msgspec.field(default=_UNSET, name="Partition ID")  # Spark 3.3+
    index: OptInt = msgspec.field(default=_UNSET, name="Index")
    attempt: OptInt = msgspec.field(default=_UNSET, name="Attempt")
    speculative: bool | msgspec.UnsetType = msgspec.field(default=_UNSET, name="Speculative")
    launch: OptInt = msgspec.field(default=_UNSET, name="Launch Time")
    finish: OptInt = msgspec.field(default=_UNSET, name="Finish Time")
    accumulables: list[Accumulable] = msgspec.field(default_factory=list, name="Accumulables")


class TaskEnd(msgspec.Struct, kw_only=True, gc=False):
    """A ``SparkListenerTaskEnd`` line, reduced to what placement reads."""

    event: str = msgspec.field(name="Event")
    stage: int = msgspec.field(name="Stage ID")
    stage_attempt: OptInt = msgspec.field(default=_UNSET, name="Stage Attempt ID")
    reason: _Reason | msgspec.UnsetType = msgspec.field(default=_UNSET, name="Task End Reason")
    info: TaskInfo = msgspec.field(name="Task Info")

    @property
    def reason_text(self) -> str:
        """The end reason as the reference reads it: ``"?"`` when absent."""
        reason = self.reason.Reason if self.reason is not _UNSET else _UNSET
        return reason if isinstance(reason, str) else "?"


class PlanMetric(msgspec.Struct, gc=False):
    name: str | None = None
    accumulatorId: int | None = None  # noqa: N815  # Spark's JSON field names


class PlanNode(msgspec.Struct, gc=False):
    """A node of ``sparkPlanInfo``: its name, metrics and children (``simpleString`` and the rest are skipped)."""

    nodeName: str = "?"  # noqa: N815
    metrics: list[PlanMetric] = msgspec.field(default_factory=list)
    children: list[PlanNode] = msgspec.field(default_factory=list)


class Plan(msgspec.Struct, gc=False):
    """A ``SparkListenerSQLExecutionStart`` / ``SQLAdaptiveExecutionUpdate`` line: the execution and its plan
    (``physicalPlanDescription``, the largest field, is skipped)."""

    Event: str
    executionId: int  # noqa: N815
    sparkPlanInfo: PlanNode  # noqa: N815


class _Properties(msgspec.Struct, gc=False):
    query_id: Any = msgspec.field(default=None, name="sql.streaming.queryId")
    batch_id: Any = msgspec.field(default=None, name="streaming.sql.batchId")
    job_group: Any = msgspec.field(default=None, name="spark.jobGroup.id")
    execution_id: Any = msgspec.field(default=None, name="spark.sql.execution.id")
    shuffle_partitions: Any = msgspec.field(default=None, name="spark.sql.shuffle.partitions")  # the checkpoint's: the state partitions


class JobStart(msgspec.Struct, gc=False):
    """A ``SparkListenerJobStart`` line: the job's stages and the properties naming its query, batch and execution
    (``Stage Infos``, the largest field, is skipped)."""

    Event: str
    properties: _Properties = msgspec.field(name="Properties")
    stage_ids: list[Any] = msgspec.field(default_factory=list, name="Stage IDs")
    submitted: Any = msgspec.field(default=None, name="Submission Time")


# bounded: a field typed ``Any`` (an accumulable's update, the properties) would build a 30 MB ``[{},{},...]`` whole
_TASK_END = Decoder(TaskEnd)
_PLAN = Decoder(Plan)
_JOB_START = Decoder(JobStart)


def task_end(line: bytes) -> TaskEnd | None:
    """A task end line's fields placement reads; ``None``: not that shape, the reference reads the line."""
    try:
        return _TASK_END.decode(line)
    except (msgspec.MsgspecError, RecursionError):
        return None


def plan(line: bytes) -> Plan | None:
    """A SQL execution's plan as placement reads it; ``None``: the reference reads the line."""
    try:
        return _PLAN.decode(line)
    except (msgspec.MsgspecError, RecursionError):
        return None


def job_start(line: bytes) -> JobStart | None:
    """A job start's stage ids and properties; ``None``: the reference reads the line."""
    try:
        return _JOB_START.decode(line)
    except (msgspec.MsgspecError, RecursionError):
        return None
