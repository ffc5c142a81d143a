"""The figures, one function each; every one returns a matplotlib Figure.

Time axes are in seconds, hours or days, whichever keeps the numbers short.
Runs compared side by side share their scales (:func:`shared_limits`): the
same time span and node count, the same queue and histogram heights, so
panels that look alike are alike.  Overlaid runs differ by line style as
well as colour, so identical curves stay visible.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from . import series
from .data import RunData
from .deps import require_matplotlib

__all__ = [
    "FIGSIZE",
    "time_unit",
    "shared_limits",
    "gantt",
    "utilization",
    "queue",
    "free",
    "distribution",
    "overlay_steps",
    "overlay_cdf",
]

FIGSIZE = (7.2, 4.0)
GRID = 1200  # time bins of every per-run time series and of the Gantt
OVERLAY_GRID = 300  # coarser when several runs share one axis, so the lines stay apart
MAX_CATEGORIES = 12  # the rest share "other"
#: Overlaid runs: line style and width by position (colours come from matplotlib's cycle).
LINESTYLES = ("-", "--", ":", "-.")
HIST_BINS = 50


def time_unit(span: float) -> tuple[float, str]:
    if span > 3 * 86400:
        return 86400.0, "days"
    if span > 3 * 3600:
        return 3600.0, "hours"
    return 1.0, "s"


def _figure(title: str) -> tuple[Any, Any]:
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=FIGSIZE, layout="constrained")
    ax.set_title(title, fontsize=10)
    return fig, ax


def category_codes(run: RunData) -> tuple[list[int], list[str]]:
    """Each job's colour code; the largest categories (by node-seconds) first, then "other"."""
    weight: Counter[str] = Counter()
    for cat, s, f, runs in zip(run.category, run.start, run.finish, run.ranks, strict=True):
        if runs and not math.isnan(s):
            weight[cat] += (f - s) * sum(hi - lo + 1 for lo, hi in runs) + 1e-9
    names = [c for c, _ in weight.most_common()]
    if run.category_kind == "size":  # sizes read best in size order
        names.sort(key=lambda c: int(c.split()[0].split("-")[0]))
    if len(names) > MAX_CATEGORIES:
        keep = set([c for c, _ in weight.most_common(MAX_CATEGORIES - 1)])
        names = [c for c in names if c in keep] + ["other"]
    index = {c: i for i, c in enumerate(names)}
    other = index.get("other", 0)
    return [index.get(c, other) for c in run.category], names


def _span_edges(run: RunData, span: float, bins: int = GRID) -> tuple[Any, float]:
    """``bins`` equal bins from the run's first submission over ``span`` seconds."""
    import numpy as np

    t0, _ = series.time_span(run)
    return np.linspace(t0, t0 + span, bins + 1), t0


def _log_top(values: Any, lo: float) -> float:
    return max(float(values.max()) if len(values) else lo * 10, lo * 10) * 1.05


def shared_limits(runs: Sequence[RunData]) -> dict[str, float]:
    """Scales the per-run figures of ``runs`` share: time span, nodes, queue height,
    histogram ranges and heights (a plain dict: it is sent to worker processes)."""
    import numpy as np

    span = max((series.time_span(r)[1] - series.time_span(r)[0] for r in runs), default=1.0)
    lim: dict[str, float] = {"span": span, "nodes": float(max((r.nb_nodes for r in runs), default=1))}
    queue_top = 0.0
    waits, bslds = [], []
    for r in runs:
        edges, _ = _span_edges(r, span)
        q = series.queue_length(r, edges)
        queue_top = max(queue_top, float(q.max()) if len(q) else 0.0)
        waits.append(series.waits(r))
        bslds.append(series.bounded_slowdown(r))
    lim["queue"] = max(queue_top, 1.0)
    for name, values, lo in (("wait", waits, 1.0), ("bsld", bslds, 1.0)):
        top = max((_log_top(v[v >= lo], lo) for v in values), default=lo * 10)
        bins = np.geomspace(lo, top, HIST_BINS)
        lim[f"{name}_top"] = top
        counts = [np.histogram(np.maximum(v, lo) if name == "bsld" else v[v >= lo], bins)[0] for v in values]
        lim[f"{name}_count"] = float(max((c.max() for c in counts if len(c)), default=1)) or 1.0
    return lim


def gantt(run: RunData, lim: dict[str, float] | None = None) -> Any:
    plt = require_matplotlib()
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    lim = lim or shared_limits([run])
    codes, names = category_codes(run)
    t0, _ = series.time_span(run)
    t1 = t0 + lim["span"]
    grid, per_row = series.gantt_raster(run, codes, t0, t1, cols=GRID)
    scale, unit = time_unit(t1 - t0)
    base = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
    colours = [base(i % base.N) for i in range(len(names))]
    if names and names[-1] == "other":
        colours[-1] = (0.55, 0.55, 0.55, 1.0)
    cmap = ListedColormap(colours or [(0.3, 0.3, 0.3, 1.0)]).with_extremes(bad=(1, 1, 1, 1))
    fig, ax = _figure(f"{run.label}: jobs over nodes and time, by {run.category_kind}")
    ax.imshow(
        np.ma.masked_less(grid, 0),
        aspect="auto",
        interpolation="nearest",
        origin="lower",
        cmap=cmap,
        vmin=-0.5,
        vmax=max(len(names), 1) - 0.5,
        extent=(0, (t1 - t0) / scale, 0, run.nb_nodes),
        rasterized=True,
    )
    ax.set_ylim(0, lim["nodes"])
    ax.set_xlabel(f"time since first submission ({unit})")
    ax.set_ylabel("node" if per_row == 1 else f"node ({per_row} per row)")
    handles = [Patch(color=c, label=n) for c, n in zip(colours, names, strict=True)]
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def _step_plot(ax: Any, edges: Any, values: Any, t0: float, scale: float, **kw: Any) -> None:
    ax.stairs(values, (edges - t0) / scale, **kw)


def _time_axis(ax: Any, span: float, unit: str, scale: float) -> None:
    ax.set_xlim(0, span / scale)
    ax.set_xlabel(f"time since first submission ({unit})")


def utilization(run: RunData, lim: dict[str, float] | None = None) -> Any:
    lim = lim or shared_limits([run])
    edges, t0 = _span_edges(run, lim["span"])
    scale, unit = time_unit(lim["span"])
    u = series.utilization(run, edges)
    mean = series.utilization(run, [t0, series.time_span(run)[1]])
    fig, ax = _figure(f"{run.label}: utilization (mean {100 * _mean(mean):.1f} % over its span)")
    _step_plot(ax, edges, 100 * u, t0, scale, fill=True, alpha=0.6)
    ax.set_ylim(0, 105)
    ax.set_ylabel("busy nodes (%)")
    _time_axis(ax, lim["span"], unit, scale)
    return fig


def queue(run: RunData, lim: dict[str, float] | None = None) -> Any:
    lim = lim or shared_limits([run])
    edges, t0 = _span_edges(run, lim["span"])
    scale, unit = time_unit(lim["span"])
    q = series.queue_length(run, edges)
    fig, ax = _figure(f"{run.label}: queue length (peak {max(q, default=0):.0f})")
    _step_plot(ax, edges, q, t0, scale, fill=True, alpha=0.6, color="tab:orange")
    ax.set_ylim(0, lim["queue"] * 1.05)
    ax.set_ylabel("pending jobs (mean per bin)")
    _time_axis(ax, lim["span"], unit, scale)
    return fig


def free(run: RunData, lim: dict[str, float] | None = None) -> Any:
    """Free nodes over time, and the part of them left free while jobs wait (fragmentation)."""
    lim = lim or shared_limits([run])
    edges, t0 = _span_edges(run, lim["span"])
    scale, unit = time_unit(lim["span"])
    idle, stranded = series.free_nodes(run, edges)
    whole = series.free_nodes(run, [t0, series.time_span(run)[1]])[1]
    fig, ax = _figure(f"{run.label}: free nodes (mean {_mean(whole):.1f} free while jobs wait)")
    _step_plot(ax, edges, idle, t0, scale, fill=True, alpha=0.35, color="tab:gray", label="free")
    _step_plot(ax, edges, stranded, t0, scale, fill=True, alpha=0.7, color="tab:red", label="free while jobs wait")
    ax.set_ylim(0, lim["nodes"] * 1.05)
    ax.set_ylabel("nodes (mean per bin)")
    _time_axis(ax, lim["span"], unit, scale)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def power(run: RunData, lim: dict[str, float] | None = None) -> Any:
    """The machine's watts over time (None without a power model)."""
    if run.power is None:
        return None
    import numpy as np  # with matplotlib, when a figure is drawn

    lim = lim or shared_limits([run])
    t0 = series.time_span(run)[0]
    scale, unit = time_unit(lim["span"])
    times, watts = run.power
    edges = np.append(np.asarray(times, dtype=float), max(times[-1], t0 + lim["span"]))
    fig, ax = _figure(f"{run.label}: power (peak {max(watts) / 1e3:,.1f} kW)")
    _step_plot(ax, edges, np.asarray(watts) / 1e3, t0, scale, fill=True, alpha=0.6, color="tab:olive")
    ax.set_ylim(0, max(watts) / 1e3 * 1.05)
    ax.set_ylabel("power (kW)")
    _time_axis(ax, lim["span"], unit, scale)
    return fig


#: The power states of ``RunData.node_states``, in its column order, with their colours.
_STATES = (("asleep", "tab:blue"), ("switching on", "tab:orange"), ("switching off", "tab:purple"),
           ("idle", "tab:gray"), ("computing", "tab:green"))  # fmt: skip


def power_states(run: RunData, lim: dict[str, float] | None = None) -> Any:
    """Nodes per power state over time, stacked (None without a power model)."""
    if run.node_states is None:
        return None
    import numpy as np  # with matplotlib, when a figure is drawn

    lim = lim or shared_limits([run])
    t0 = series.time_span(run)[0]
    scale, unit = time_unit(lim["span"])
    rows = np.asarray(run.node_states, dtype=float)
    edges = np.append(rows[:, 0], max(rows[-1, 0], t0 + lim["span"]))
    fig, ax = _figure(f"{run.label}: nodes by power state")
    base = np.zeros(len(rows))
    for k, (name, colour) in enumerate(_STATES):
        top = base + rows[:, k + 1]
        ax.stairs(top, (edges - t0) / scale, baseline=base, fill=True, color=colour, label=name, alpha=0.8)
        base = top
    ax.set_ylim(0, lim["nodes"] * 1.05)
    ax.set_ylabel("nodes")
    _time_axis(ax, lim["span"], unit, scale)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def _mean(a: Any) -> float:
    return float(a.mean()) if len(a) else 0.0


def distribution(run: RunData, what: str, lim: dict[str, float] | None = None) -> Any:
    """Histogram of ``wait`` (s, log axis, zero waits counted apart) or ``bsld``, on shared bins."""
    import numpy as np

    lim = lim or shared_limits([run])
    bins = np.geomspace(1.0, lim[f"{what}_top"], HIST_BINS)
    if what == "wait":
        values = series.waits(run)
        zero = int((values < 1.0).sum())
        fig, ax = _figure(f"{run.label}: wait time ({zero} of {len(values)} jobs waited < 1 s)")
        ax.hist(values[values >= 1.0], bins=bins, color="tab:blue")
        ax.set_xlabel("wait (s), jobs that waited at least 1 s")
    else:
        values = series.bounded_slowdown(run)
        one = int((values <= 1.0 + 1e-9).sum())
        fig, ax = _figure(f"{run.label}: bounded slowdown, τ=10 s ({one} of {len(values)} jobs at 1)")
        ax.hist(np.maximum(values, 1.0), bins=bins, color="tab:green")
        ax.set_xlabel("bounded slowdown")
    ax.set_xscale("log")
    ax.set_xlim(1.0, lim[f"{what}_top"])
    ax.set_ylim(0, lim[f"{what}_count"] * 1.05)
    ax.set_ylabel("jobs")
    return fig


def _style(k: int, n: int) -> dict[str, Any]:
    """Run ``k`` of ``n`` overlaid: its own dash pattern, the first drawn widest."""
    return {"linestyle": LINESTYLES[k % len(LINESTYLES)], "linewidth": 2.4 - 1.4 * k / max(n - 1, 1)}


def overlay_steps(runs: Sequence[RunData], what: str) -> Any:
    """Utilization or queue length of every run on one axis (each on its own time span)."""
    fig, ax = _figure("utilization, all runs" if what == "utilization" else "queue length, all runs")
    span = max((series.time_span(r)[1] - series.time_span(r)[0] for r in runs), default=1.0)
    scale, unit = time_unit(span)
    for k, r in enumerate(runs):
        edges, t0 = _span_edges(r, span, OVERLAY_GRID)
        v = 100 * series.utilization(r, edges) if what == "utilization" else series.queue_length(r, edges)
        _step_plot(ax, edges, v, t0, scale, label=r.label, **_style(k, len(runs)))
    ax.set_ylabel("busy nodes (%)" if what == "utilization" else "pending jobs")
    _time_axis(ax, span, unit, scale)
    _legend(ax, len(runs))
    return fig


def overlay_cdf(runs: Sequence[RunData], what: str) -> Any:
    """Empirical CDFs of wait or bounded slowdown, one line per run, at most 2,000 points each."""
    import numpy as np

    fig, ax = _figure("wait time, all runs" if what == "wait" else "bounded slowdown, all runs")
    for k, r in enumerate(runs):
        v = np.sort(series.waits(r) if what == "wait" else series.bounded_slowdown(r))
        if not len(v):
            continue
        idx = np.unique(np.linspace(0, len(v) - 1, min(len(v), 2000)).astype(int))
        floor = 1.0 if what == "bsld" else 0.1
        ax.step(np.maximum(v[idx], floor), (idx + 1) / len(v), where="post", label=r.label, **_style(k, len(runs)))
    ax.set_xscale("log")
    ax.set_ylim(0, 1.01)
    ax.set_ylabel("fraction of jobs ≤ x")
    ax.set_xlabel("wait (s; below 0.1 s drawn at 0.1)" if what == "wait" else "bounded slowdown (τ=10 s)")
    _legend(ax, len(runs))
    return fig


def _legend(ax: Any, n: int) -> None:
    if n:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, ncols=1 + n // 16)
