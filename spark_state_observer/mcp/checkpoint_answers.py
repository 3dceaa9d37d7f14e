"""What the MCP tools answer about checkpoints and sizing: the checkpoints under the configured roots, the
inspector's report of one, and ``size``'s what-if.

A checkpoint is read only under the roots the server was started with (symlinks and ``..`` resolved first), and
only read. The plain-words and data conventions are those of ``spark_state_observer.mcp.answers``.
"""

from __future__ import annotations

import json
import os
from typing import Mapping

from spark_state_observer.browser.paths import PathRefused, list_checkpoints, resolve_under_roots
from spark_state_observer.history.store import HistoryError
from spark_state_observer.mcp.answers import (
    DEFAULT_LIMIT,
    MAX_ANSWER_CHARS,
    MAX_ITEMS,
    Answer,
    AnswerError,
    argument,
    bounded,
    find_query,
    page,
    plain,
    quoted,
    read_history,
    safe_text,
)

# --- checkpoints ---------------------------------------------------------------------------------------


def checkpoint_path(path: str, roots: tuple[str, ...]) -> str:
    """The real path of ``path`` if it lies under a configured root (symlinks and ``..`` resolved first)."""
    text = argument(path, "path")
    if not roots:
        raise AnswerError("no checkpoint root is configured: start the server with --checkpoint-root DIR to inspect checkpoints")
    if not text:
        raise AnswerError("path is empty: give a checkpoint folder under a configured root (list_checkpoints gives them)")
    if "://" in text and not text.startswith("file:"):
        raise AnswerError(f"{quoted(text)} is a URL; only local checkpoints under the configured roots are read")
    try:
        real = resolve_under_roots(text, roots)
    except PathRefused as exc:
        raise AnswerError(safe_text(str(exc))) from None
    except (ValueError, OSError) as exc:
        raise AnswerError(f"path {quoted(text)} cannot be resolved: {safe_text(str(exc))}") from None
    if not os.path.isdir(real):
        raise AnswerError(f"{quoted(text)} is not a folder under the configured roots")
    return real


def checkpoints(roots: tuple[str, ...], offset: int = 0, limit: int = DEFAULT_LIMIT) -> Answer:
    if not roots:
        raise AnswerError("no checkpoint root is configured: start the server with --checkpoint-root DIR")
    offset, limit = page(offset, limit)
    found = list_checkpoints(roots)
    shown = found[offset : offset + limit]
    lines = [f"{len(found)} checkpoint(s) under {len(roots)} root(s); showing {len(shown)} from {offset}."]
    lines += [f"- {quoted(p, 500)}" for p in shown]
    return Answer(bounded("\n".join(lines)), {"total": len(found), "offset": offset, "checkpoints": [safe_text(p) for p in shown]})


def inspect(path: str, roots: tuple[str, ...], history: str | None) -> Answer:
    """The inspector's report of a checkpoint under the roots, its restore estimated with the history's rates."""
    from spark_state_observer.offline.checkpoint import inspect_checkpoint
    from spark_state_observer.offline.checkpoint.render import render_text
    from spark_state_observer.offline.checkpoint.report import CheckpointError
    from spark_state_observer.offline.checkpoint.restore import rates_from_history

    real = checkpoint_path(path, roots)
    try:
        report = inspect_checkpoint(real)
        if history and report.query_id:
            try:
                rates = rates_from_history(history, report.query_id)
            except HistoryError:
                rates = None
            if rates:
                report = inspect_checkpoint(real, rates)
    except CheckpointError as exc:
        raise AnswerError(f"{quoted(path)} cannot be inspected: {safe_text(str(exc))}") from None
    return Answer(bounded(safe_text(render_text(report), MAX_ANSWER_CHARS)), plain(json.loads(report.to_json())))


# --- sizing --------------------------------------------------------------------------------------------


def size(
    history: str | None,
    partitions: int | None = None,
    operators: int | None = None,
    stores_per_operator: int | None = None,
    executors: int | None = None,
    rows: int | None = None,
    bytes_per_row: float | None = None,
    conf: Mapping[str, str] | None = None,
    from_query: str | None = None,
) -> Answer:
    """``spark-state-observer size``'s what-if: RocksDB instances, memory and disk per executor, and restore time."""
    from spark_state_observer.model.capacity import PROVIDER_CONF, ROCKSDB_PROVIDER, estimate, read_conf
    from spark_state_observer.offline import sizing

    seen = None
    if from_query is not None:
        if not history:
            raise AnswerError("from_query needs a history")
        q = find_query(history, from_query)
        seen = read_history(sizing.from_history, history, q.query_id)
    given = {argument(str(k), "conf key"): argument(str(v), "conf value") for k, v in list((conf or {}).items())[:MAX_ITEMS]}
    merged = {PROVIDER_CONF: ROCKSDB_PROVIDER} if seen is None else {}
    merged.update(seen.conf if seen is not None else {})
    merged.update(given)
    state = read_conf(merged)
    origin = seen if seen is not None else sizing.Observed()
    load = sizing.workload(partitions, operators, stores_per_operator, executors, rows, bytes_per_row, origin, state)
    est = estimate(state, load)
    restore = sizing.restore_time(est, merged, origin.rates)
    return Answer(
        bounded(safe_text(sizing.render_text(est, restore, origin), MAX_ANSWER_CHARS)), plain(sizing.to_json(est, restore, origin))
    )
