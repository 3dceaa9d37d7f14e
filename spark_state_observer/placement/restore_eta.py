"""How long a running restore still needs, from its stages' task timings: Spark's scheduling played forward.

A restore's stateful stage runs one task per partition on a fixed number of task slots (the executors' cores).
Spark launches the tasks in partition order and gives a slot its next task as soon as the slot's task ends, so
with 16 partitions on 2 slots the tasks run in 8 waves. A stage's last task ends when the slowest slot is done,
and an operator's stage starts only once the stage below it in the plan is done (a shuffle between them).

So the ETA is that schedule played forward (``remaining_seconds``): the tasks in flight (one per busy slot,
launched when a slot was freed by a finish) need what their expected time minus their age leaves; the tasks not
launched yet go one by one to the slot that frees first; then the next stage, all its tasks queued. A task's
expected time is its work (the checkpoint's, at the inspector's rates; or one unit a partition where the
checkpoint is unknown) times a speed: wall seconds per unit of work, measured on the tasks that finished
(``speed``). A stage's first wave pays its start (JIT, the state store's native library, the first shuffle
fetches) and ran 1.5-2x slower a task on every recording, so the speed is read from the later waves once one
finished (``steady``), each weighed by its rank: those costs fade over several waves, not one. With a checkpoint the rates' own scale (1.0) weighs as one partition of mean work against
the work finished, and a stage that ran corrects the chain's speed by its own.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

TaskTimes = dict[int, tuple[float | None, float]]  # partition -> its finished task's (launch, finish)
OVERDUE = 0.1  # a task in flight past its expected time is taken to need this share of that time more


@dataclass(frozen=True)
class Stage:
    """One stateful stage of a restore: the work of each of its partitions and the tasks that finished."""

    work: dict[int, float]  # partition -> its expected work (seconds at the rates, or 1.0 each)
    done: TaskTimes


def steady(done: TaskTimes) -> tuple[float, set[int]]:
    """The partitions whose task was launched as the first of ``done`` finished or later (the stage's later waves; a
    slot's next task is launched a few milliseconds before the driver stamps the previous one's end, so: past
    half the first task's span), and the earliest of their launches; (0.0, empty) while only the first wave has
    finished."""
    launches = [s for s, _ in done.values() if s is not None]
    if not launches:
        return 0.0, set()
    first_launch, first_finish = min(launches), min(f for _, f in done.values())
    cut = first_launch + (first_finish - first_launch) / 2
    later = {p: s for p, (s, _) in done.items() if s is not None and s >= cut and s > first_launch}
    return (min(later.values()), set(later)) if later else (0.0, set())


def eta(
    total: int | None,
    done: int,
    first_launch: float | None,
    now: float,
    slots: int | None = None,
    later: tuple[float, int] | None = None,
) -> float | None:
    """Seconds left at the rate observed since the first partition's task was launched; None without a rate. The
    fallback where the slots are unknown (no executor told its cores), so no schedule can be played.

    With ``slots`` the tasks in flight on the other slots (half done on average at a finish) count as done work.
    With ``later`` (the earliest launch and the count of the tasks launched after the first finish, ``steady``)
    the rate is theirs: the first wave's start costs are not the pace of the rest."""
    if total is None or done <= 0 or first_launch is None:
        return None
    since, count = later if later is not None else (first_launch, done)
    if now <= since or count <= 0:
        return None
    left = max(0, total - done)
    in_flight = min(slots - 1, left) / 2 if slots is not None and slots > 1 else 0.0
    return round((now - since) * (left - in_flight) / (count + in_flight), 3)


def _timed(stage: Stage, slots: int) -> tuple[float, float]:
    """(task seconds, work) over the stage's later waves where one finished, else over every finished task.

    The seconds are the tasks' own times per unit of work, each wave weighed by its rank (the second wave 1, the
    third 2, ...), times the work: the one-time costs fade over several waves, not one (the second wave ran
    slower a task than the waves after it on 10 of the 14 recorded stages), so the latest waves tell the pace
    to come best."""
    _, later = steady(stage.done)
    rows = sorted(
        (launch, max(0.0, finish - launch), stage.work[p])
        for p, (launch, finish) in stage.done.items()
        if launch is not None and p in stage.work and (not later or p in later)
    )
    seconds = weighed = work = 0.0
    for rank, (_, took, units) in enumerate(rows):
        wave = 1 + rank // max(1, slots)
        seconds += wave * took
        weighed += wave * units
        work += units
    return (seconds / weighed * work, work) if weighed > 0 else (0.0, 0.0)


def speed(stages: list[Stage], prior: float | None, slots: int = 1) -> list[float | None]:
    """Per stage, wall seconds a task takes per unit of work: the tasks' own times over their work.

    The chain's speed is every stage's finished tasks' (their later waves); with a ``prior`` (the rates' 1.0), it
    weighs as one partition of mean work against all the work finished, the first wave's included: each finished
    partition tells the machine's pace. A stage whose tasks finished then corrects that speed by its own, its work
    weighed the same way: the rates' shape between operators is less sure than within one. None: no speed yet."""
    all_work = [w for s in stages for w in s.work.values()]
    mean = sum(all_work) / len(all_work) if all_work else 1.0
    timed = [_timed(s, slots) for s in stages]
    seconds, work = sum(t for t, _ in timed), sum(w for _, w in timed)
    done = sum(s.work.get(p, 0.0) for s in stages for p in s.done)
    chain: float | None = seconds / work if work > 0 else None
    if prior is not None:
        chain = prior if chain is None else (mean * prior + done * chain) / (mean + done)
    out: list[float | None] = []
    for own_seconds, own_work in timed:
        if chain is None or own_work <= 0:
            out.append(chain)
        else:
            out.append((mean * chain + own_work * (own_seconds / own_work)) / (mean + own_work))
    return out


def _in_flight(stage: Stage, slots: int, begin: float) -> list[float]:
    """The launch times of the stage's tasks still running: a stage's first ``slots`` tasks launch at its start,
    then one at each finish while partitions are left, and the running ones are the latest launched (a task that
    ended before one launched earlier makes that one look younger: a slightly later ETA)."""
    slots = min(slots, len(stage.work))
    launched = sorted([begin] * slots + [f for _, f in stage.done.values()])[: len(stage.work)]
    running = max(0, len(launched) - len(stage.done))
    return launched[len(launched) - running :] if running else []


def _play(durations: list[float], busy: list[float], slots: int) -> float:
    """When the last task ends: ``busy`` slots free after their seconds, the others now, ``durations`` queued in
    order, each to the slot that frees first."""
    free = sorted(busy)[:slots] + [0.0] * min(max(0, slots - len(busy)), len(durations))
    heapq.heapify(free)
    end = max(free, default=0.0)
    for d in durations:
        at = heapq.heappop(free) + d
        end = max(end, at)
        heapq.heappush(free, at)
    return end


def remaining_seconds(stages: list[Stage], slots: int, started: float, now: float, prior: float | None) -> float | None:
    """Seconds until the last stage's last task ends, the stages run one after the other (``stages`` bottom first);
    None without a speed (no prior and nothing finished)."""
    slots = max(1, slots)
    speeds = speed(stages, prior, slots)
    total: float | None = None  # seconds until the stages played so far end
    begin = started  # when the first stage not done began: the restore's start, or the stage below's last finish
    for stage, pace in zip(stages, speeds, strict=True):
        left = sorted(p for p in stage.work if p not in stage.done)
        if not left:
            begin = max((f for _, f in stage.done.values()), default=begin)
            continue
        if pace is None:
            return None
        if total is not None:  # a stage after one still running: it starts with every slot free
            total += _play([stage.work[p] * pace for p in left], [], slots)
            continue
        launched = [s for s, _ in stage.done.values() if s is not None]
        launches = _in_flight(stage, slots, min(launched) if launched else begin)[: len(left)]
        running, queued = left[: len(launches)], left[len(launches) :]
        busy = []
        for p, launch in zip(running, launches):  # as long as each other (launches cut to the partitions left)
            expected = stage.work[p] * pace
            busy.append(max(expected - max(0.0, now - launch), OVERDUE * expected))
        total = _play([stage.work[p] * pace for p in queued], busy, slots)
    return round(total or 0.0, 3)
