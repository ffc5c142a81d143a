"""One progress bar for long work: rich on a terminal, a plain line every few seconds otherwise."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """``with ProgressBar("report", total) as bar: bar.advance()``.

    On a terminal it is a transient rich bar; when the stream is not a
    terminal it prints ``label: done/total (N s)`` at most every ``every``
    seconds and once at the end, so a log shows that work goes on.
    ``enabled=False`` prints nothing.
    """

    def __init__(
        self, label: str, total: int, *, stream: TextIO | None = None, every: float = 5.0, enabled: bool = True
    ) -> None:
        self.label, self.total, self.every, self.enabled = label, total, every, enabled
        self.stream = stream or sys.stderr
        self.done = 0
        self._t0 = self._last = time.monotonic()
        self._printed = -1
        self._rich = None
        self._task = None

    def __enter__(self) -> ProgressBar:
        if self.enabled and self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._rich = Progress(
                TextColumn(f"{self.label:>12}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._rich.__enter__()
            self._task = self._rich.add_task(self.label, total=self.total)
        return self

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done += n
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done)
            return
        now = time.monotonic()
        if self.enabled and now - self._last >= self.every:
            self._last = now
            self._line(note)

    def _line(self, note: str = "") -> None:
        self._printed = self.done
        tail = f" {note}" if note else ""
        print(f"{self.label}: {self.done}/{self.total} ({time.monotonic() - self._t0:.0f} s){tail}", file=self.stream)
        self.stream.flush()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._rich is not None:
            self._rich.__exit__(et, ev, tb)
        elif self.enabled and et is None and self._printed not in (-1, self.done):
            self._line()
