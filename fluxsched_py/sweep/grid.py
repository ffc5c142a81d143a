"""The sweep's grid: one :class:`RunSpec` per combination, in a stable order."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["RunSpec", "expand", "OPTION_AXES"]

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

    @property
    def label(self) -> str:
        opts = "".join(f",{k}={v}" for k, v in sorted(self.options.items()))
        return f"{Path(self.workload).name.split('.')[0]}/{self.queue_policy}/{self.policy}{opts}"

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
        return cls(d["workload"], d["queue_policy"], d["policy"], dict(d.get("options") or {}), d.get("platform"))


def expand(
    workloads: Sequence[str],
    queue_policies: Sequence[str],
    policies: Sequence[str],
    options: Mapping[str, Sequence[str]] | None = None,
    platform: str | None = None,
) -> list[RunSpec]:
    """Every combination, workloads outermost and options innermost."""
    axes = [(k, list(v)) for k, v in (options or {}).items() if v]
    names = [k for k, _ in axes]
    out = []
    for w, q, p in itertools.product(workloads, queue_policies, policies):
        for values in itertools.product(*(v for _, v in axes)):
            out.append(RunSpec(w, q, p, dict(zip(names, values, strict=True)), platform))
    return out
