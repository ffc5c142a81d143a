"""Replay traffic recorded from flux-core (t/data/flux/*.jsonl) through the driver.

A record is one message of the sched-py module as ``flux module trace``
saw it: ``{"t", "dir": "rx"|"tx", "type": "request"|"response", "topic",
"errnum", "payload"?}``.  :func:`replay` feeds what sched-py *received*
(``rx``) to a :class:`~fluxsched_py.flux.driver.Driver` on a
:class:`~fluxsched_py.flux.driver.RecordingTransport`, with the clock set to
each message's time, and returns what the driver answered next to what
sched-py answered when it was recorded (``tx``).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fluxsched_py.flux.driver import Driver, bad_payload, kvs_key

from .recording_transport import RecordingTransport

DATA = Path(__file__).resolve().parent / "data" / "flux"

#: the order the scenarios were recorded in, in one instance (state carries over)
SESSION1 = [
    "startup",
    "alloc-free",
    "feasibility",
    "deny",
    "cancel",
    "urgency",
    "expiration",
    "status",
    "drain",
    "housekeeping",
]
#: after ``flux module reload sched-py`` (new module, running jobs)
SESSION2 = ["reload", "garbage"]
#: its own instance: a broker rank stopped (torpid, down) and continued (lively, up)
SESSION3 = ["down-up"]

REQUEST_TOPICS = ("sched.", "feasibility.", "sched-py.stats-get")


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines() if line.strip()]


@dataclass
class Msg:
    """Stands for a request message: the replies are matched to it."""

    seq: int
    topic: str
    payload: Any

    def __hash__(self) -> int:
        return self.seq


@dataclass
class Replay:
    driver: Driver
    transport: RecordingTransport
    #: (topic, msg, kind, payload) for each reply the driver made, in order
    ours: list[tuple[str, Msg | None, str, Any]] = field(default_factory=list)
    #: (topic, errnum, payload) for each reply recorded from the real module
    theirs: list[tuple[str, int, Any]] = field(default_factory=list)
    requests: list[Msg] = field(default_factory=list)

    def ours_for(self, topic: str) -> list[tuple[str, Any]]:
        return [(k, p) for t, _m, k, p in self.ours if t == topic]

    def theirs_for(self, topic: str) -> list[tuple[int, Any]]:
        return [(e, p) for t, e, p in self.theirs if t == topic]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def new_replay(options: tuple[str, ...] = ("queue-policy=easy",)) -> Replay:
    t = RecordingTransport()
    clock = _Clock()
    d = Driver(t, list(options), clock=clock, budget=None)
    t.driver = d
    r = Replay(d, t)
    r.clock = clock  # type: ignore[attr-defined]
    return r


def _kvs_values(recs: list[dict]) -> dict[str, Any]:
    """Values returned by the recorded ``kvs.lookup`` responses, by key."""
    keys = [r["payload"]["key"] for r in recs if r["topic"] == "kvs.lookup" and r["type"] == "request"]
    vals = [r for r in recs if r["topic"] == "kvs.lookup" and r["type"] == "response"]
    out = {}
    for key, resp in zip(keys, vals, strict=False):
        val = (resp.get("payload") or {}).get("val") or {}
        if resp["errnum"] == 0 and val.get("type") == "val":
            out[key] = base64.b64decode(val["data"]).decode()
    return out


def feed(r: Replay, recs: list[dict], kvs: dict[str, Any] | None = None) -> None:
    """Feed the received messages of ``recs`` to the driver; collect replies."""
    d, t = r.driver, r.transport
    kvs = dict(kvs or {})
    kvs.update(_kvs_values(recs))
    hello_done = False

    def collect(mark: int) -> None:
        for kind, m, p in t.sent[mark:]:
            if kind in ("respond", "error"):
                r.ours.append((m.topic if isinstance(m, Msg) else "?", m, kind, p))
            else:
                r.ours.append((kind, m, kind, p))

    for rec in recs:
        r.clock.now = rec["t"]  # type: ignore[attr-defined]
        topic, payload = rec["topic"], rec.get("payload")
        if rec["dir"] == "tx":
            if rec["type"] == "response":
                r.theirs.append((topic, rec["errnum"], payload))
            continue
        if rec["type"] == "response":
            if topic == "resource.acquire" and rec["errnum"] == 0:
                first = d.engine is None
                mark = len(t.sent)
                d.acquire(payload)
                if not first and hello_done:
                    t.run_passes()  # an update arms a pass, as any change does
                    collect(mark)
            elif topic == "job-manager.sched-hello":
                if rec["errnum"] == 0:
                    key = kvs_key(payload["id"], "R")
                    d.hello(payload, kvs.get(key, KeyError(key)))
                else:
                    d.hello_done()
                    hello_done = True
            elif topic == "job-manager.sched-ready" and rec["errnum"] == 0:
                if not hello_done:
                    d.hello_done()
                d.ready(payload)
                t.run_passes()
            continue
        if not topic.startswith(REQUEST_TOPICS):
            continue
        msg = Msg(len(r.requests), topic, payload)
        r.requests.append(msg)
        mark = len(t.sent)
        d.handle(topic, msg, payload)
        t.run_passes()
        collect(mark)


def replay(names: list[str], options: tuple[str, ...] = ("queue-policy=easy",)) -> Replay:
    r = new_replay(options)
    for name in names:
        feed(r, load(name))
    return r


def bad(payload_text: str) -> Any:
    return bad_payload(payload_text)
