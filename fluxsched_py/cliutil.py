"""The command lines' one error boundary.

Every subcommand reports an error as ONE plain line on stderr::

    fluxsched-py SUBCOMMAND: FILE: reason

and exits with one of two statuses, the same in every subcommand:

* ``2`` (:data:`USAGE`): a bad option or option value, found before any work;
* ``1`` (:data:`FAILED`): bad input (a file's content), or a failure while running.

Output into a closed pipe (``fluxsched-py replay | head -1``) ends quietly
with status 0, as the reader chose to stop.  SIGINT ends a command with
status 130 and SIGTERM with 143, each after one line (``interrupted``,
``terminated``): the signal becomes an exception, so ``finally`` blocks and
context managers run, worker processes are stopped, and output files written
through :class:`AtomicOutput` are left complete or not at all.

Nothing from user input is ever interpreted (no rich markup), the line is
never wrapped, and control characters in it are escaped, so a path holding
``[/x]`` or a newline prints as it is.  A traceback is never printed; set
``FLUXSCHED_PY_TRACEBACK=1`` to see one when debugging a bug.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NoReturn

from .errors import FluxschedError

__all__ = [
    "USAGE",
    "FAILED",
    "CLIError",
    "UsageError",
    "Terminated",
    "AtomicOutput",
    "handle_signals",
    "interrupted",
    "quiet_stdout",
    "ArgumentParser",
    "error_line",
    "plain_line",
    "report",
    "boundary",
    "check_output_dir",
    "check_readable",
    "open_output",
    "positive_int",
    "nonnegative_float",
    "bounded_int",
    "bounded_seconds",
]

USAGE = 2
FAILED = 1


class CLIError(Exception):
    """An error to report as one line; ``str(e)`` should start with the file it concerns."""

    status = FAILED


class UsageError(CLIError):
    """A bad option value (exit status 2)."""

    status = USAGE


def plain_line(text: str) -> str:
    """One line: control characters (newlines included) escaped, nothing else touched."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def error_line(prog: str, message: object) -> str:
    return f"{prog}: {plain_line(str(message))}"


def report(prog: str, message: object, stream: IO[str] | None = None) -> None:
    """Write ``prog: message`` as one plain line to stderr (never raises)."""
    stream = stream or sys.stderr
    try:
        stream.write(error_line(prog, message) + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread runs, like SIGINT's KeyboardInterrupt."""


_received: list[int] = []  # the first SIGTERM or SIGINT taken, re-raised by SIGALRM


def _raise(signum: int, frame: object) -> None:
    # Raised again every second (SIGALRM) until a boundary takes it: an
    # exception raised while a finalizer runs (``__del__``, a weakref or gc
    # callback) is reported and dropped by the interpreter, and the command
    # would run on to its end (seen under load, for SIGTERM and for SIGINT:
    # a replay ran past 120 s).
    if signum != signal.SIGALRM and not _received:
        _received.append(signum)
    signal.setitimer(signal.ITIMER_REAL, 1.0, 1.0)
    raise Terminated if _received and _received[0] == signal.SIGTERM else KeyboardInterrupt


def handle_signals() -> None:
    """Make SIGTERM raise :class:`Terminated` and SIGINT KeyboardInterrupt,
    again every second until :func:`interrupted` takes it."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):
        signal.signal(signum, _raise)
    sys.unraisablehook = _quiet_on_interruption


def _quiet_on_interruption(unraisable: Any) -> None:
    """An interruption dropped inside a finalizer (a generator closed by the
    garbage collector, say) is raised again a second later: it is not also
    reported as ``Exception ignored in ...`` on stderr."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)


def interrupted(e: KeyboardInterrupt) -> tuple[str, int]:
    """The line and exit status of an interruption: 143 for SIGTERM, 130 for SIGINT."""
    signal.setitimer(signal.ITIMER_REAL, 0)  # taken: the signal is not raised again
    _received.clear()
    return ("terminated", 143) if isinstance(e, Terminated) else ("interrupted", 130)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, but a line never breaks inside a hyphenated word (``--queue-policy``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with its errors as one line and status :data:`USAGE`, and
    help lines broken between words only (:class:`HelpFormatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        report(self.prog, f"error: {message} (see --help)")
        raise SystemExit(USAGE)


def boundary(prog: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Decorate a subcommand's ``main``: whatever escapes it becomes one line and a status."""

    def wrap(fn: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(fn)
        def main(*args, **kwargs) -> int:  # type: ignore[no-untyped-def]
            try:
                return fn(*args, **kwargs)
            except CLIError as e:
                report(prog, e)
                return e.status
            except KeyboardInterrupt as e:
                line, status = interrupted(e)
                report(prog, line)
                return status
            except BrokenPipeError:
                quiet_stdout()
                return 0
            except MemoryError:
                report(prog, "out of memory (is the input far larger than it should be?)")
                return FAILED
            except RecursionError:
                report(prog, "input nested too deeply")
                return FAILED
            except OSError as e:
                where = f"{e.filename}: " if e.filename else ""
                report(prog, f"{where}{e.strerror or e}")
                return FAILED
            except Exception as e:  # the last resort: a bug, still reported as one line
                if os.environ.get("FLUXSCHED_PY_TRACEBACK"):
                    traceback.print_exc()
                report(prog, f"internal error: {type(e).__name__}: {e} (please report it)")
                return FAILED

        return main

    return wrap


def quiet_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush stays silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def check_readable(path: str | os.PathLike[str]) -> None:
    """Prove ``path`` can be opened for reading, before a long run that reads it later (``-`` is stdin)."""
    if str(path) == "-":
        return
    if os.path.isdir(path):
        raise CLIError(f"{path}: cannot read: is a directory")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise CLIError(f"{path}: cannot read: {exc.strerror or exc}") from None


def check_output_dir(path: str | os.PathLike[str], option: str) -> Path:
    """Create ``path`` if needed and prove a file can be written in it, before a long run."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p, prefix=".fluxsched-py-check-"):
            pass
    except OSError as e:
        raise UsageError(f"{p}: {option}: cannot write there: {e.strerror or e}") from None
    return p


class AtomicOutput:
    """A text file written under a temporary name beside ``path`` and renamed
    to ``path`` on :meth:`commit`, so ``path`` is complete or absent, never
    half-written.  As a context manager it commits on a normal exit or an
    error of the command (a record of a failed run is complete), and discards
    on an interruption (SIGINT, SIGTERM) or a crash."""

    def __init__(self, path: str | os.PathLike[str], newline: str | None = None) -> None:
        self.path = Path(path)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".part")
        self.tmp = Path(tmp)
        self.file = os.fdopen(fd, "w", newline=newline)
        self.write = self.file.write
        self.flush = self.file.flush

    def commit(self) -> None:
        if not self.file.closed:
            self.file.close()
            os.replace(self.tmp, self.path)

    def discard(self) -> None:
        if not self.file.closed:
            self.file.close()
            self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> AtomicOutput:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if kind is None or issubclass(kind, (CLIError, FluxschedError)):
            self.commit()
        else:
            self.discard()


def open_output(path: str | os.PathLike[str], option: str) -> AtomicOutput:
    """Create ``path``'s temporary file now (so a bad path fails before the run), or :class:`UsageError`."""
    try:
        return AtomicOutput(path)
    except OSError as e:
        raise UsageError(f"{path}: {option}: cannot write: {e.strerror or e}") from None


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def nonnegative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (v >= 0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return v


def bounded_seconds(limit: float) -> Callable[[str], float]:
    """argparse type: a finite number of seconds in 0..limit."""

    def parse(text: str) -> float:
        v = nonnegative_float(text)
        if v > limit:
            raise argparse.ArgumentTypeError(f"at most {limit:g} s, got {text}")
        return v

    parse.__name__ = "seconds"
    return parse


def bounded_int(limit: int) -> Callable[[str], int]:
    """argparse type: an integer in 1..limit (checked before anything is allocated)."""

    def parse(text: str) -> int:
        v = positive_int(text)
        if v > limit:
            raise argparse.ArgumentTypeError(f"at most {limit}, got {v}")
        return v

    parse.__name__ = "integer"
    return parse
