"""What the engine tells users about jobs: annotations and their texts.

After each complete pass :func:`end_pass` posts, for the pending jobs at the
head of each queue (``annotate-depth``), ``reason_pending``, ``jobs_ahead``,
``t_estimate`` and ``queue`` (RFC 27 ``sched.*`` annotations), only what
changed since the job's last annotation, and clears what no longer applies
(each job's :class:`~.reply.Reply` keeps what was sent; the job table, which
jobs hold annotations).  The texts of pending regular jobs and
``resource_summary`` are built here; a started job's SUCCESS annotations are
put together by :meth:`Engine.succeed <fluxsched_py.engine.core.Engine.succeed>`,
and best-effort jobs' texts by :mod:`.besteffort`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..resource.rlist import rlist_ids, rlist_summary
from .jobs import Job

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..resource import ResourceSet
    from .core import Engine
    from .passctx import Pass

__all__ = ["describe_constraint", "describe_need", "end_pass", "reason_pending", "resource_summary"]


def fmt_clock(t: float) -> str:
    """The default way ``reason_pending`` shows an absolute time: ``HH:MM``."""
    return time.strftime("%H:%M", time.localtime(t))


def describe_constraint(c: Any) -> str:
    """``properties=^login``, ``(ranks=0-3 and hostlist=n[1-2])``..."""
    return c.describe()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def resource_summary(R: Mapping[str, Any] | None, rs: ResourceSet) -> str:
    """The ``resource_summary`` annotation of a started job: its R as rlist
    prints it, or its ranks when R was not built."""
    if R is not None:
        text = rlist_summary((R.get("execution") or {}).get("R_lite") or [])
        if text:
            return text
    ranks = getattr(rs, "ranks", None)
    return f"rank{rlist_ids(ranks)}" if ranks is not None else str(rs)


def end_pass(e: Engine, p: Pass) -> None:
    """Annotations: post what changed, delete what no longer applies."""
    want: dict[int, dict[str, Any]] = {}
    depth = e.options.annotate_depth
    table = e.table
    live = table.live
    for queue in table.queues.values() if depth != 0 else ():
        # jobs_ahead and the job a job waits behind are of its own queue.
        head: Job | None = None
        pos = 0
        q = queue.jobs
        for i in range(queue.head, len(q)):
            job = q[i]
            if not live(job):
                continue
            if depth is not None and pos >= depth:
                break
            if head is None and job.id not in p.held_ok:
                head = job
            want[job.id] = annotations(e, p, job, pos, head)
            pos += 1
    jobs = table.jobs
    for span in e.planner.reserved():
        if span.jobid not in want:
            want[span.jobid] = {"t_estimate": span.start}
    for jobid in list(table.annotated):
        if jobid not in want:
            want[jobid] = {}
    out = p.out
    for jobid, ann in want.items():
        job = jobs[jobid]
        if job.reply.sent == ann:
            continue  # the common case, without a call
        r = table.annotate(job, ann)
        if r is not None:
            out.append(r)


def annotations(e: Engine, p: Pass, job: Job, pos: int, head: Job | None) -> dict[str, Any]:
    ann: dict[str, Any] = {}
    req = job.request
    if job.estimate is not None:
        ann["t_estimate"] = job.estimate
    ann["reason_pending"] = reason_pending(e, p, job, head)
    ann["jobs_ahead"] = pos
    if getattr(req, "queue", None):
        ann["queue"] = req.queue
    if (eta := e.hooks.campaign_eta(job, p.now)) is not None:
        ann["campaign_eta"] = eta  # the campaign predictor (engine/runtimes.py)
    return ann


def reason_pending(e: Engine, p: Pass, job: Job, head: Job | None) -> str:
    req = job.request
    if e.reservations and (held := e.reservations.reason(job, p.now, e.time_format)) is not None:
        # an advance reservation holds it back (engine/reservations.py)
        if job.estimate is not None:
            return f"{held} — reserved to start at {e.time_format(job.estimate)}"
        return held
    if e.power is not None and job.estimate is not None and (span := e.planner.span(job.id)) is not None:
        booting = e.power.not_on(span.resources.ranks)
        if booting:
            # it waits for nodes power-save switched off (engine/power.py)
            return (
                f"waiting for {booting} node{'s' if booting > 1 else ''} to power on "
                f"— reserved to start at {e.time_format(job.estimate)}"
            )
    if (capped := p.cap_text.get(job.id)) is not None:
        # the power cap holds it back (engine/powercap.py)
        if job.estimate is not None:
            return f"{capped} — reserved to start at {e.time_format(job.estimate)}"
        return capped
    why = p.held.get(job.id)
    if why == "limit":
        return p.limit_text[job.id]
    if why is None and (over := e.over_limit(job)) is not None:
        return over  # the pass stopped before it: a limit holds it all the same
    need, enough = describe_need(e, p, req)
    if why == "down":
        # No start time exists on what is up: either resources it needs are
        # down, or the jobs holding them have no time limit to plan around.
        if e.graph.down_ranks() or e.graph.drained_ranks():
            return f"cannot start on the resources that are up now: waiting for {need}"
        return f"waiting for {need} — no start time can be estimated: the jobs holding them have no time limit"
    c = getattr(req, "constraints", None)
    if c is not None and p.constraint_blocks(job):
        text = f"blocked by constraint: {describe_constraint(c)}"
    elif why == "order" and head is not None and head is not job:
        text = f"waiting for {need}, behind higher-priority job {e.job_name(head.id)}"
    elif enough and job.estimate is not None:
        text = f"waiting for {need}, held for jobs reserved ahead of it"
    else:
        text = f"waiting for {need}"
    if job.estimate is not None:
        return f"{text} — reserved to start at {e.time_format(job.estimate)}"
    if why == "depth":
        return f"{text} — no reservation (beyond reserve-depth={job.queue.policy.reserve_depth})"
    if why == "backfill":
        return f"{text} — cannot start without delaying a reservation"
    if head is not None and head is not job:
        return f"{text} — behind higher-priority job {e.job_name(head.id)}"
    return text


def describe_need(e: Engine, p: Pass, req: Any) -> tuple[str, bool]:
    """``3 nodes (2 free)``: what the job needs and what is free, per pass,
    and whether that much is free now (then reservations are what hold it)."""
    text = p.need_text.get(id(req))
    if text is not None and text[0] is req:
        return text[1], text[2]
    codec = e.planner.codec
    free = p.free()
    nnodes = req.nnodes
    if nnodes and req.exclusive:
        if p.whole_free is None:
            nb = codec.node_bits
            whole = sum(1 for full in nb.values() if free & full == full) if nb else codec.count(free, "node")
            p.whole_free = whole
        have = p.whole_free
        out = f"{_plural(nnodes, 'node')} ({have} free)"
        enough = have >= nnodes
    else:
        cores = req.nslots * req.slot_size
        gpus = req.nslots * req.slot_gpus
        parts = []
        free_gpus = codec.count(free, "gpu") if gpus else 0
        free_cores = codec.count(free, "core")
        enough = free_cores >= cores and free_gpus >= gpus and not nnodes
        if gpus:
            parts.append(f"{_plural(gpus, 'GPU')} ({free_gpus} free)")
        if cores or not parts:
            parts.insert(0, f"{_plural(cores, 'core')} ({free_cores} free)")
        if nnodes:
            parts.append(f"on {_plural(nnodes, 'node')}")
        out = ", ".join(parts)
    p.need_text[id(req)] = (req, out, enough)
    return out, enough
