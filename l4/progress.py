"""Progress of a long diagnosis on an interactive terminal: files and bytes parsed, then the
analysis steps, as a rich progress bar on stderr.

The library reports into :func:`reporter`, which does nothing unless the CLI turned it on
with :func:`showing` (stderr is a terminal and the output is text).  The bar appears only
once a diagnosis has run for ``L4_PROGRESS_DELAY`` seconds (default 2), so quick runs look
as before, and it is transient: it leaves nothing behind on the terminal.  ``L4_PROGRESS=1``
shows it even when stderr is not a terminal, ``L4_PROGRESS=0`` never.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import TextIO


class Reporter:
    """Does nothing: what the library reports into when nobody watches."""

    def add_files(self, n: int, nbytes: int) -> None:
        """``n`` more files of ``nbytes`` bytes are to be parsed."""

    def file_done(self, nbytes: int) -> None:
        """One file (of ``nbytes`` bytes) is parsed."""

    def step(self, name: str) -> None:
        """The diagnosis moved on to analysis step ``name``."""


class RichReporter(Reporter):
    """A rich bar on ``stream``, started after ``delay`` seconds (and only then)."""

    def __init__(self, stream: TextIO, delay: float, force_terminal: bool | None = None):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        console = Console(file=stream, force_terminal=force_terminal, stderr=True)
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                             DownloadColumn(), TextColumn("{task.fields[files]}"),
                             TimeElapsedColumn(), console=console, transient=True)
        self._task = self._bar.add_task("parsing", total=0, files="")
        self._lock = threading.Lock()
        self._files = self._done = self._bytes = 0
        self._started = False
        self._timer = threading.Timer(delay, self._start)
        self._timer.daemon = True
        self._timer.start()

    def _start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                self._bar.start()

    def add_files(self, n: int, nbytes: int) -> None:
        with self._lock:
            self._files += n
            self._bytes += nbytes
            self._bar.update(self._task, total=self._bytes, files=self._label())

    def _label(self) -> str:
        return f"{self._done}/{self._files} files"

    def file_done(self, nbytes: int) -> None:
        with self._lock:
            self._done += 1
            self._bar.update(self._task, advance=nbytes, files=self._label())

    def step(self, name: str) -> None:
        with self._lock:
            self._bar.update(self._task, description=name, completed=self._bytes,
                             files=self._label())

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            if self._started:
                self._bar.stop()
            self._started = True  # a late timer must not start it again


_NULL = Reporter()
_current: Reporter = _NULL


def reporter() -> Reporter:
    """Where the library reports progress (a no-op unless :func:`showing` is active)."""
    return _current


def wanted(stream: TextIO | None = None) -> bool:
    """Whether a bar belongs on ``stream`` (default stderr): a terminal, or ``L4_PROGRESS``."""
    flag = os.environ.get("L4_PROGRESS", "").strip().lower()
    if flag in ("0", "false", "no"):
        return False
    if flag in ("1", "true", "yes"):
        return True
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def showing(enabled: bool, stream: TextIO | None = None) -> Iterator[Reporter]:
    """Report progress on ``stream`` (default stderr) while inside, when ``enabled``."""
    global _current
    if not enabled:
        yield _current
        return
    try:
        delay = float(os.environ.get("L4_PROGRESS_DELAY", "2"))
    except ValueError:
        delay = 2.0
    stream = stream or sys.stderr
    forced = os.environ.get("L4_PROGRESS", "").strip().lower() in ("1", "true", "yes")
    rich = RichReporter(stream, max(0.0, delay), force_terminal=True if forced else None)
    previous, _current = _current, rich
    try:
        yield rich
    finally:
        _current = previous
        rich.close()
