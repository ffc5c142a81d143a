"""The sweep's grid: one :class:`RunSpec` per combination, in a stable order."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["RunSpec", "expand", "OPTION_AXES", "workload_names", "grid_size", "MAX_RUNS"]

#: The most runs a sweep starts unless ``--max-runs`` says more (a typo in a list should not
#: start a week of work or fill a disk with run folders).
MAX_RUNS = 1000

#: Options that may take a list of values (``--nodes 64,128``), by their replay name.
OPTION_AXES = ("nodes", "cores-per-node", "reserve-depth", "queue-depth")


@dataclass(frozen=True)
class RunSpec:
    """One replay: a workload file, a queue policy, a placement policy and options."""

    workload: str
    queue_policy: str
    policy: str
    options: dict[str, str] = field(default_factory=dict)
    platform: str | None = None
    #: the workload's short name, unique in its sweep (:func:`workload_names`); default its file's stem
    name: str = ""

    @property
    def label(self) -> str:
        opts = "".join(f",{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.name or _stem(self.workload)}/{self.queue_policy}/{self.policy}{opts}"

    def params(self) -> dict[str, str]:
        """The columns that say which run a row is."""
        out = {"workload": self.workload, "queue_policy": self.queue_policy, "policy": self.policy}
        out.update({k: str(v) for k, v in sorted(self.options.items())})
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        d = json.loads(text)
        return cls(
            d["workload"],
            d["queue_policy"],
            d["policy"],
            dict(d.get("options") or {}),
            d.get("platform"),
            d.get("name", ""),
        )


def _stem(path: str) -> str:
    return Path(path).name.split(".")[0]


def workload_names(workloads: Sequence[str]) -> dict[str, str]:
    """A short name per workload path, unique: the file's stem, with as many parent folders
    as it takes to tell apart files of the same name (``a/w.swf`` and ``b/w.swf`` are
    ``a/w`` and ``b/w``); a numbered suffix if even the full paths' names collide."""
    names: dict[str, str] = {}
    for w in dict.fromkeys(workloads):
        p = Path(w)
        parts = [*p.parent.parts, _stem(w)]
        depth = 1
        while True:
            name = "/".join(parts[-depth:])
            clash = [
                o
                for o in dict.fromkeys(workloads)
                if o != w and "/".join([*Path(o).parent.parts, _stem(o)][-depth:]) == name
            ]
            if not clash or depth >= len(parts):
                break
            depth += 1
        base, n = name, 2
        while name in names.values():
            name, n = f"{base}-{n}", n + 1
        names[w] = name
    return names


def grid_size(
    workloads: Sequence[str],
    queue_policies: Sequence[str],
    policies: Sequence[str],
    options: Mapping[str, Sequence[str]] | None = None,
) -> int:
    """How many runs :func:`expand` would make, without making them."""
    n = len(workloads) * len(queue_policies) * len(policies)
    for v in (options or {}).values():
        n *= max(1, len(v))
    return n


def expand(
    workloads: Sequence[str],
    queue_policies: Sequence[str],
    policies: Sequence[str],
    options: Mapping[str, Sequence[str]] | None = None,
    platform: str | None = None,
) -> list[RunSpec]:
    """Every combination, workloads outermost and options innermost."""
    axes = [(k, list(v)) for k, v in (options or {}).items() if v]
    keys = [k for k, _ in axes]
    short = workload_names(workloads)
    out = []
    for w, q, p in itertools.product(workloads, queue_policies, policies):
        for values in itertools.product(*(v for _, v in axes)):
            out.append(RunSpec(w, q, p, dict(zip(keys, values, strict=True)), platform, short[w]))
    return out
