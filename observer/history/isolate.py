"""Writing rows the database refused: the rows at fault are dropped and counted, every other row is written.

One application with a value the database cannot hold (a name a driver cannot encode, a number beyond
64 bits) must not cost other applications their rows, nor hold up the history: written again as they
are, the same rows fail forever. So a refused write is tried again with every text cleaned
(``PendingRows.cleaned``), then per application, per batch and per row (``PendingRows.split``); only a row
refused alone is given up. Used by the background writer and by the sink's synchronous SQLite flush.
"""

from __future__ import annotations

from typing import Callable

from observer.history.backend import Backend, HistoryDataError, HistoryError
from observer.history.rows import PendingRows

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

    Raises ``PartlyWritten`` when the database fails for another reason on the way."""
    queue: list[tuple[PendingRows, int]] = [(refused.cleaned(), 0)]
    while queue:
        part, level = queue.pop(0)
        try:
            backend.write(part)
        except HistoryDataError as exc:
            if level < len(SPLITS):
                queue[0:0] = [(p, level + 1) for p in part.split(SPLITS[level])]
            else:
                on_refused(part, str(exc))
            continue
        except Exception as exc:
            rest = PendingRows()
            for left in [part, *(p for p, _ in queue)]:
                rest.absorb(left)
            message = str(exc) if isinstance(exc, HistoryError) else f"history {backend.display}: unexpected {type(exc).__name__}: {exc}"
            raise PartlyWritten(message, rest) from None
        on_written(part)
