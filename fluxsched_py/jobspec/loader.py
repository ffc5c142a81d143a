"""Turn untrusted jobspec bytes into plain JSON-like Python data, safely.

Jobspecs arrive from users.  The loader defends the scheduler against input
that would exhaust memory or the stack before any validation runs:

* a size limit on the raw bytes (``MAX_JOBSPEC_BYTES``);
* strict UTF-8 decoding, with the offset of the first bad byte;
* YAML through ``yaml.SafeLoader`` only, with aliases allowed but the
  *expanded* document size capped (``MAX_EXPANDED_NODES``), which defeats alias bombs
  ("billion laughs");
* a nesting limit (``MAX_DEPTH``) checked before the parser recurses;
* only JSON types survive: YAML timestamps, sets and non-string keys are
  reported instead of passed through.
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

import yaml

from ..limits import MAX_DEPTH, MAX_EXPANDED_NODES, MAX_JOBSPEC_BYTES, MAX_YAML_BYTES
from .errors import JobspecError, pointer

__all__ = ["load_document"]
#: Flow-style bracket depth refused before parsing, so the recursive parsers
#: never approach Python's recursion limit.  (Brackets inside strings count
#: too, hence a bound well above MAX_DEPTH, which is enforced after parsing.)
_PARSER_DEPTH_GUARD = 400
#: libyaml when PyYAML has it: the pure-Python parser takes seconds per MB.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _bracket_depth(text: str) -> int:
    """Upper bound on flow-style nesting, computed without recursion."""
    depth = best = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > best:
                best = depth
        elif ch in "]}":
            depth = max(0, depth - 1)
    return best


def _expanded_size(root: yaml.Node) -> int:
    """Number of nodes the document has once every alias is expanded.

    Raises :class:`JobspecError` for a node that contains itself (``&a [*a]``):
    such a document never expands, and JSON cannot hold it.
    """
    memo: dict[int, int] = {}
    open_nodes: set[int] = set()  # entered, children not yet summed: an ancestor of what is on top
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in memo:
            continue
        if isinstance(node, yaml.ScalarNode):
            memo[id(node)] = 1
            continue
        if isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        else:
            kids = [k for pair in node.value for k in pair]
        if children_done:
            open_nodes.discard(id(node))
            total = 1 + sum(memo[id(k)] for k in kids)
            memo[id(node)] = min(total, MAX_EXPANDED_NODES + 1)
        elif id(node) not in open_nodes:
            if any(id(k) in open_nodes or k is node for k in kids):
                mark = node.start_mark
                raise JobspecError("/", f"a YAML alias refers to a node that contains it (line {mark.line + 1})")
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in memo)
    return memo[id(root)]


def _check_json_types(obj: Any) -> None:
    """Reject values JSON cannot represent, and nesting past MAX_DEPTH."""
    stack: list[tuple[Any, tuple]] = [(obj, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise JobspecError(pointer(path[:MAX_DEPTH]), f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise JobspecError(pointer(path), f"mapping key {k!r} is not a string")
                stack.append((v, path + (k,)))
        elif isinstance(value, list):
            stack.extend((v, path + (i,)) for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise JobspecError(pointer(path), f"{value} is not a finite number")
        elif isinstance(value, (datetime.date, datetime.datetime, bytes, set)):
            raise JobspecError(pointer(path), f"value of type {type(value).__name__} is not allowed in a jobspec")


def load_document(data: bytes | str) -> Any:
    """Decode one YAML or JSON document; raise :class:`JobspecError` if unsafe."""
    if isinstance(data, bytes):
        if len(data) > MAX_JOBSPEC_BYTES:
            raise JobspecError("/", f"document is {len(data)} bytes, more than the limit of {MAX_JOBSPEC_BYTES}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise JobspecError("/", f"not valid UTF-8: byte 0x{data[e.start]:02x} at offset {e.start}") from None
    else:
        text = data
        if len(text) > MAX_JOBSPEC_BYTES:
            raise JobspecError("/", f"document is {len(text)} characters, more than the limit of {MAX_JOBSPEC_BYTES}")
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise JobspecError("/", "empty document")
    if _bracket_depth(text) > _PARSER_DEPTH_GUARD:
        raise JobspecError("/", f"document is nested deeper than {MAX_DEPTH} levels")

    stripped = text.lstrip()
    if stripped[0] in "{[":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = _load_yaml(text)  # flow-style YAML also starts with a bracket
        except RecursionError:
            raise JobspecError("/", f"document is nested deeper than {MAX_DEPTH} levels") from None
    else:
        obj = _load_yaml(text)
    _check_json_types(obj)
    return obj


def _load_yaml(text: str) -> Any:
    if len(text) > MAX_YAML_BYTES:
        raise JobspecError(
            "/", f"YAML of {len(text)} characters is over the limit of {MAX_YAML_BYTES} (JSON may be larger)"
        )
    loader = None
    try:
        loader = _SAFE_LOADER(text)
        node = loader.get_single_node()
        if node is None:
            raise JobspecError("/", "empty document")
        # with no alias ("*"), a document is no larger than its text: only aliases need counting
        size = _expanded_size(node) if "*" in text else 0
        if size > MAX_EXPANDED_NODES:
            raise JobspecError("/", f"document expands to more than {MAX_EXPANDED_NODES} nodes (YAML alias bomb?)")
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        if "nesting depth" in str(e.problem):  # libyaml's own guard
            raise JobspecError("/", f"document is nested deeper than {MAX_DEPTH} levels") from None
        mark = e.problem_mark or e.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise JobspecError("/", f"YAML syntax error: {e.problem or e.context}{where}") from None
    except yaml.YAMLError as e:
        first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise JobspecError("/", f"YAML error: {first_line}") from None
    except RecursionError:
        raise JobspecError("/", f"document is nested deeper than {MAX_DEPTH} levels") from None
    finally:
        if loader is not None:
            loader.dispose()
