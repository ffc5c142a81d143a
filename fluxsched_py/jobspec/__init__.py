"""RFC 14 / RFC 25 jobspecs with RFC 31 constraints.

:func:`parse_jobspec` and :func:`load_jobspec` read YAML or JSON safely
(:mod:`.loader`), validate its structure against the project's JSON schemas
(:mod:`.schema`), check the rules a schema cannot express and normalize the
result (:mod:`.semantics`) into an immutable
:class:`~fluxsched_py.jobspec.request.Request`.  Every failure is a
:class:`JobspecError` whose message names the JSON path and the reason.
"""

from __future__ import annotations

import os
from typing import Any

from cachetools import LRUCache

from ..inputs import read_bytes
from ..limits import MAX_JOBSPEC_BYTES
from .constraints import Constraint, ConstraintError, parse_constraint
from .errors import JobspecError
from .loader import load_document
from .request import Count, Request, ResourceRequest, TaskRequest
from .schema import check_schema
from .semantics import check_task_labels, to_request

__all__ = [
    "Constraint",
    "ConstraintError",
    "Count",
    "JobspecError",
    "Request",
    "ResourceRequest",
    "TaskRequest",
    "load_jobspec",
    "parse_constraint",
    "parse_jobspec",
    "validate_document",
]

# Identical jobspec texts (a burst of one job shape) are parsed once.
_parsed: LRUCache = LRUCache(maxsize=4096)


def validate_document(doc: Any, v1: bool = False) -> Request:
    """Validate an already-decoded jobspec (e.g. from an RFC 27 message)."""
    check_schema(doc, "canonical")
    request = to_request(doc)
    if v1:
        check_schema(doc, "v1")
        check_task_labels(doc)
    return request


def parse_jobspec(data: bytes | str | dict, v1: bool = False) -> Request:
    """Parse and validate a jobspec given as YAML/JSON text or a decoded mapping.

    >>> r = parse_jobspec('{"version": 1, "resources": [{"type": "slot", "count": 2, '
    ...     '"label": "task", "with": [{"type": "core", "count": 4}]}], '
    ...     '"tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}], '
    ...     '"attributes": {"system": {"duration": 60}}}')
    >>> r.nslots, r.slot_size, r.duration
    (2, 4, 60.0)
    """
    if not isinstance(data, str | bytes | bytearray):
        # A decoded document (an RFC 27 payload): the schema rejects what is not an object.
        return validate_document(data, v1=v1)
    key = (data, v1)
    try:
        return _parsed[key]
    except (KeyError, TypeError):
        pass
    request = validate_document(load_document(data), v1=v1)
    if len(data) < 65536:
        _parsed[key] = request
    return request


def load_jobspec(path: str | os.PathLike, v1: bool = False) -> Request:
    """Read and validate a jobspec file (``-`` is not accepted here)."""
    try:
        data = read_bytes(path, MAX_JOBSPEC_BYTES)  # a cap on reading: stat() says 0 for a device or a pipe
    except OSError as e:
        raise JobspecError("/", f"cannot read {path}: {e.strerror or e}") from None
    return parse_jobspec(data, v1=v1)
