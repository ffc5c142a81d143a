"""Reading untrusted input files with a size cap (the caps are in :mod:`fluxsched_py.limits`).

A cap that looks at ``stat()`` is no cap for ``/dev/zero``, a pipe or stdin:
these report a size of 0 and never end.  :func:`read_bytes` reads at most
``limit + 1`` bytes and refuses the input when the extra byte arrives, so the
memory spent on a hostile input is bounded by the limit whatever the file is.

Errors are :class:`OSError` with ``errno.EFBIG`` and a readable ``strerror``,
so every reader's existing ``except OSError as e: ... e.strerror`` handler
reports them as "cannot read: larger than ... bytes" with no change.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import os
import sys
from collections.abc import Callable, Iterator
from typing import IO

from .limits import MAX_INPUT_BYTES, MAX_STREAM_BYTES

__all__ = [
    "read_bytes",
    "read_text",
    "open_stream",
    "CappedReader",
    "bounded_lines",
]

_CHUNK = 1 << 20


def _too_large(limit: int) -> OSError:
    return OSError(errno.EFBIG, f"larger than {limit} bytes (the limit for an input)")


def _read_capped(f: IO[bytes], limit: int) -> bytes:
    buf = bytearray()
    while len(buf) <= limit:
        chunk = f.read(min(_CHUNK, limit + 1 - len(buf)))
        if not chunk:
            return bytes(buf)
        buf += chunk
    raise _too_large(limit)


def read_bytes(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of ``path`` (``-`` is stdin), or :class:`OSError` if unreadable or over ``limit``."""
    if os.fspath(path) == "-":
        return _read_capped(sys.stdin.buffer, limit)
    with open(path, "rb") as f:
        return _read_capped(f, limit)


def read_text(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> str:
    """UTF-8 text of ``path``; :class:`OSError` or :class:`UnicodeDecodeError` otherwise."""
    return read_bytes(path, limit).decode("utf-8")


class CappedReader(io.RawIOBase):
    """A binary stream that fails with EFBIG once more than ``limit`` bytes came through it."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self.raw, self.limit, self.count = raw, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        data = self.raw.read(len(b))
        self.count += len(data)
        if self.count > self.limit:
            raise _too_large(self.limit)
        b[: len(data)] = data
        return len(data)


_MAGIC: tuple[tuple[bytes, Callable[[IO[bytes]], IO[bytes]]], ...] = (
    (b"\x1f\x8b", lambda f: gzip.GzipFile(fileobj=f)),  # type: ignore[arg-type]
    (b"BZh", bz2.BZ2File),  # type: ignore[arg-type]
    (b"\xfd7zXZ\x00", lzma.LZMAFile),  # type: ignore[arg-type]
)


def open_stream(path: str | os.PathLike[str], limit: int = MAX_STREAM_BYTES) -> IO[bytes]:
    """A binary stream of ``path`` (``-`` is stdin), decompressed when it is gzip, bzip2 or xz.

    The format is told by the first bytes, not the name.  At most ``limit``
    bytes (after decompression) can be read from it: a decompression bomb
    or an endless device fails with :class:`OSError` (EFBIG).
    """
    raw: IO[bytes] = sys.stdin.buffer if os.fspath(path) == "-" else open(path, "rb")  # noqa: SIM115
    if not hasattr(raw, "peek"):  # a stream with no read-ahead (a test's BytesIO)
        raw = io.BufferedReader(raw)  # type: ignore[arg-type]
    head = raw.peek(8)[:8]  # type: ignore[attr-defined]
    for magic, cls in _MAGIC:
        if head.startswith(magic):
            raw = cls(raw)
            break
    return io.BufferedReader(CappedReader(raw, limit), _CHUNK)


def bounded_lines(stream: IO[str], limit: int) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a text stream; :class:`ValueError` on a line longer than ``limit``.

    ``readline(limit)`` never holds more than ``limit`` characters, so a
    stream with no newline (``/dev/zero``) cannot grow memory.
    """
    lineno = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        lineno += 1
        if len(line) > limit:
            raise ValueError(f"line {lineno} is longer than {limit} characters")
        yield lineno, line
