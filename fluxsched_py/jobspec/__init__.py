"""RFC 14 / RFC 25 jobspecs with RFC 31 constraints.

``load_jobspec`` / ``parse_jobspec`` read YAML or JSON, validate it against the
project's JSON schemas and semantic rules, and return a normalized, immutable
:class:`~fluxsched_py.jobspec.request.Request`.
"""

from .constraints import Constraint, ConstraintError, parse_constraint
from .request import Count, Request, ResourceRequest, TaskRequest

__all__ = [
    "Constraint",
    "ConstraintError",
    "Count",
    "Request",
    "ResourceRequest",
    "TaskRequest",
    "parse_constraint",
]
