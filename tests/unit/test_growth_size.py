"""A state whose rows stay flat while its values grow (spark_state_observer.signals.growth, ``basis=size``), on real runs.

``scripts/record_growth.py`` recorded Scala queries over 100 fixed keys whose state keeps every row a key saw
(``flatMapGroupsWithState`` with a list in its ``GroupState``, on RocksDB and on the HDFS-backed provider;
``transformWithState`` appending to a ``ListState``): 100 rows from the first seconds on, values growing for
ever. Every other recording (fixed keys with counts, windows, dedup, joins, TTLs, restores, the clean hour)
must get no verdict on its size, at any growth window.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import pytest

from conftest import FIXTURES
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.metrics.tracker import QueryRecord
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.parse import parse_progress
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.growth import SIZE, Growth

GROWING_VALUES = (
    "growth_fmgws_collect_fixed_keys",
    "growth_fmgws_collect_fixed_keys_hdfs",
    "growth_tws_scala_list_fixed_keys",
    # recorded with PySpark 3.5.8 (--suffix _35: no transformWithState before 4.0) and 4.0.5 (--suffix _40)
    "growth_fmgws_collect_fixed_keys_35",
    "growth_fmgws_collect_fixed_keys_hdfs_35",
    "growth_fmgws_collect_fixed_keys_40",
    "growth_fmgws_collect_fixed_keys_hdfs_40",
    "growth_tws_scala_list_fixed_keys_40",
)


def progress_of(path: str) -> list[QueryProgress]:
    with open_decompressed(path) as stream:
        return [parse_progress(json.loads(line)) for line in stream.read().splitlines() if line.strip()]


def judged(progress: list[QueryProgress], settings: Settings) -> list[SignalEvent]:
    """The growth rule's signals over a run, batch by batch, operator by operator."""
    growth, records, out = Growth(settings), {}, []
    for p in progress:
        if p.timestamp is None:
            continue
        record = records.setdefault(p.query_id, QueryRecord(p.query_id))
        for op in p.operators:
            facts = SignalFacts()
            growth.operator(record, p, op, p.timestamp, facts)
            out.extend(facts.signals)
    return out


def recorded_progress_files() -> list[str]:
    paths = sorted(glob.glob(os.path.join(FIXTURES, "**", "progress.jsonl*"), recursive=True))
    assert len(paths) > 150
    return paths


@pytest.mark.parametrize("name", GROWING_VALUES)
def test_values_growing_over_fixed_keys_are_unbounded_on_their_size(name: str) -> None:
    progress = progress_of(os.path.join(FIXTURES, "incidents", name, "run1", "progress.jsonl.zstd"))
    rows = {op.rows_total for p in progress[len(progress) // 4 :] for op in p.operators}
    assert rows == {100}  # the recording: 100 keys, seen within the first seconds
    signals = judged(progress, Settings(http_enabled=False))
    unbounded = [s for s in signals if s.kind == kinds.STATE_UNBOUNDED]
    assert len(unbounded) == 1, [(s.kind, s.attributes.get("evidence")) for s in signals]
    (verdict,) = unbounded
    a = verdict.attributes
    assert a["basis"] == SIZE and a["rows_at_start"] == a["rows_at_end"] == 100
    assert a["size_at_end"] > a["size_at_start"] > 0 and a["size_per_second"] > 0
    assert a["evidence"].startswith("state size ") and "while rows stayed at 100" in a["evidence"]
    # a size trend needs half a window, then a whole window of rise: within the recording's six minutes, not before
    started = progress[0].timestamp
    assert started is not None and 1.5 * 120 <= verdict.timestamp - started <= 360


def test_no_other_recording_is_judged_on_its_size_at_any_window() -> None:
    """Fixed keys with counts (RocksDB SST bytes rise between compactions with the rows flat), windows and dedup
    whose SST bytes swing with what they evict, TTLs, timeouts, restores, the clean hour: no size verdict."""
    growing = {os.path.join(FIXTURES, "incidents", name) for name in GROWING_VALUES}
    runs = [progress_of(path) for path in recorded_progress_files() if not path.startswith(tuple(growing))]
    for window in (15.0, 30.0, 60.0, 120.0, 240.0):
        settings = Settings(http_enabled=False, growth_window_seconds=window, growth_min_batches=3)
        on_size = [(run[0].name, s.kind) for run in runs for s in judged(run, settings) if s.attributes.get("basis") == SIZE]
        assert on_size == [], window


def test_a_size_verdict_holds_until_the_size_is_flat() -> None:
    """The growing run, then (as the same operator, times following on, as if its values had been cut back to a
    count) a run over 100 fixed keys whose values do not grow, both on the HDFS-backed provider: unbounded on its
    size, then bounded once the size is flat again, and nothing in between from the rows, flat all along."""
    growing = progress_of(os.path.join(FIXTURES, "incidents", "growth_fmgws_collect_fixed_keys_hdfs", "run1", "progress.jsonl.zstd"))
    flat = progress_of(os.path.join(FIXTURES, "incidents", "growth_count_fixed_keys_hdfs", "run1", "progress.jsonl.zstd"))
    last = growing[-1]
    op = last.operators[0]
    assert last.timestamp is not None and flat[0].timestamp is not None
    shift = last.timestamp - flat[0].timestamp + 1.0
    after = [
        dataclasses.replace(
            p,
            query_id=last.query_id,
            run_id=last.run_id,
            timestamp=p.timestamp + shift,
            operators=tuple(dataclasses.replace(o, index=op.index, name=op.name) for o in p.operators[:1]),
        )
        for p in flat
        if p.timestamp is not None
    ]
    verdicts = [(s.kind, s.attributes["basis"]) for s in judged(growing + after, Settings(http_enabled=False))]
    assert verdicts[-2:] == [(kinds.STATE_UNBOUNDED, SIZE), (kinds.STATE_BOUNDED, "rows")]
