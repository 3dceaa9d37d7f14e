"""Writing rows the database refused: the rows at fault are dropped and counted, every other row is written.

One application with a value the database cannot hold (a name a driver cannot encode, a number beyond
64 bits) must not cost other applications their rows, nor hold up the history: written again as they
are, the same rows fail forever. So a refused write is tried again with every text cleaned
(``PendingRows.cleaned``), then per application, per batch and per row (``PendingRows.split``, halves of
them at a time); only a row refused alone is given up. Used by the background writer and by the sink's synchronous SQLite flush.
"""

from __future__ import annotations

from typing import Callable

from spark_state_observer.history.backend import Backend, HistoryDataError, HistoryError
from spark_state_observer.history.rows import PendingRows

SPLITS = ("app", "batch", "row")  # after the whole write: one application's rows, one batch's, one row


class PartlyWritten(HistoryError):
    """The database itself failed (disk, network) while refused rows were being isolated; ``rest`` is what is
    left to write (the parts written so far stay written)."""

    def __init__(self, message: str, rest: PendingRows) -> None:
        super().__init__(message)
        self.rest = rest


def write_isolating(
    backend: Backend,
    refused: PendingRows,
    on_written: Callable[[PendingRows], None],
    on_refused: Callable[[PendingRows, str], None],
) -> None:
    """Write ``refused`` (rows whose one-transaction write raised ``HistoryDataError``) part by part, in order.

    At each level the parts are bisected: a half that is written costs one transaction, so a few bad rows
    among thousands cost tens of writes, not one per application or batch. Raises ``PartlyWritten`` when
    the database fails for another reason on the way."""
    # (parts, level): the parts written together if they can be; a stack, the next to try last
    stack: list[tuple[list[PendingRows], int]] = [([refused.cleaned()], 0)]
    while stack:
        parts, level = stack.pop()
        rows = _joined(parts)
        try:
            backend.write(rows)
        except HistoryDataError as exc:
            if len(parts) > 1:
                half = len(parts) // 2
                stack += [(parts[half:], level), (parts[:half], level)]
            elif level < len(SPLITS):
                stack.append((rows.split(SPLITS[level]), level + 1))
            else:
                on_refused(rows, str(exc))
            continue
        except Exception as exc:
            rest = _joined([rows, *(p for group, _ in reversed(stack) for p in group)])
            message = str(exc) if isinstance(exc, HistoryError) else f"history {backend.display}: unexpected {type(exc).__name__}: {exc}"
            raise PartlyWritten(message, rest) from None
        on_written(rows)


def _joined(parts: list[PendingRows]) -> PendingRows:
    if len(parts) == 1:
        return parts[0]
    rows = PendingRows()
    for part in parts:
        rows.absorb(part)
    return rows
