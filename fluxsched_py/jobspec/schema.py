"""JSON-schema validation of jobspec structure (schemas in ``schema/``).

The schemas are the project's own: ``canonical.json`` for RFC 14 and
``v1.json`` for the stricter RFC 25 subset.  A V1 jobspec must pass both.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..limits import MAX_REQUEST_VALUES
from .errors import JobspecError, pointer

if TYPE_CHECKING:
    import jsonschema

__all__ = ["check_schema", "schema_text"]


def schema_text(name: str) -> str:
    """The text of a bundled schema, ``canonical`` or ``v1``."""
    return resources.files(__package__).joinpath("schema", f"{name}.json").read_text()


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    import jsonschema  # when first validating: a replay of a trace never does

    schema = json.loads(schema_text(name))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _most_specific(errors: list[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    """The error deepest in the document; it names the element to fix."""

    def leaves(e: jsonschema.ValidationError):
        if e.context:
            for sub in e.context:
                yield from leaves(sub)
        else:
            yield e

    flat = [leaf for e in errors for leaf in leaves(e)]
    return max(flat, key=lambda e: len(e.absolute_path))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _short(value: Any) -> str:
    if value is None:
        return ""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _reason(err: jsonschema.ValidationError) -> str:
    """A one-line reason in JSON terms (null, array, object), not Python's."""
    v, inst, arg = err.validator, err.instance, err.validator_value
    if v == "type":
        want = " or ".join(arg) if isinstance(arg, list) else arg
        return f"expected {want}, got {_json_type(inst)} {_short(inst)}".rstrip()
    if v == "enum":
        return f"{_short(inst)} is not one of {', '.join(_short(a) for a in arg)}"
    if v == "const":
        return f"expected {_short(arg)}, got {_short(inst)}"
    if v == "minimum":
        return f"{_short(inst)} is less than the minimum {arg}"
    if v == "minItems":
        return "must not be empty" if arg == 1 else f"needs at least {arg} items"
    if v == "maxItems":
        return f"has {len(inst)} items, at most {arg} allowed"
    if v in ("minProperties", "maxProperties"):
        return f"must have exactly one of its keys, has {len(inst)}" if arg == 1 else err.message
    if v == "minLength":
        return "must not be an empty string"
    if v == "pattern":
        return f"{_short(inst)} is not a valid count string"
    if v == "propertyNames":
        return f"key {_short(inst)} is not allowed here"
    if v == "false":
        return "not allowed here"
    message = err.message.replace("None", "null").replace("True", "true").replace("False", "false")
    return message if len(message) <= 200 else message[:197] + "..."


# MAX_REQUEST_VALUES: schema validation costs about half a millisecond per
# value, so a 1 MB document of tasks took seconds; real jobspecs hold a few dozen.


def _count_values(value: Any, limit: int) -> int:
    """Values in ``value`` (containers and scalars), counting stops past ``limit``."""
    n = 0
    stack = [value]
    while stack and n <= limit:
        v = stack.pop()
        n += 1
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return n


def check_schema(doc: Any, name: str = "canonical") -> None:
    """Raise :class:`JobspecError` if ``doc`` breaks schema ``name``."""
    if not isinstance(doc, dict):
        raise JobspecError("/", f"a jobspec must be a mapping, not {_json_type(doc)}")
    n = _count_values([doc.get("resources"), doc.get("tasks")], MAX_REQUEST_VALUES)
    if n > MAX_REQUEST_VALUES:
        raise JobspecError("/", f"resources and tasks hold more than {MAX_REQUEST_VALUES} values")
    errors = list(_validator(name).iter_errors(doc))
    if errors:
        err = _most_specific(errors)
        path = list(err.absolute_path)
        if err.validator == "propertyNames":
            path.append(err.instance)
        prefix = "V1 (RFC 25): " if name == "v1" else ""
        raise JobspecError(pointer(path), prefix + _reason(err))
