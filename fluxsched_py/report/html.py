"""``index.html``: the summary table, then each group's figures side by side and its breakdowns.

A static page with no script and no outside resource (not even a favicon
request), so it opens from ``file://`` or any web server and a browser has
nothing to complain about.  The summary table's columns are
:data:`COLUMNS`: readable headings with units, and the numbers formatted as
the terminal's table formats them (:mod:`.formats`); headings wrap, so the
table fits a 1,400 px window.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import formats

__all__ = ["write_index", "format_cell", "COLUMNS", "Section"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
.tablewrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.8em; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.45em; text-align: right; }
td { white-space: nowrap; }
th { background: #f0f0f0; font-weight: 600; vertical-align: bottom; max-width: 8em; }
td.text, th.text { text-align: left; white-space: normal; max-width: 18em; overflow-wrap: anywhere; }
.row { display: grid; grid-auto-flow: column; grid-auto-columns: minmax(420px, 1fr); gap: 1em; overflow-x: auto; }
.shared { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 1em; }
figure { margin: 0; min-width: 0; }
figure img { width: 100%; height: auto; border: 1px solid #eee; box-sizing: border-box; }
figcaption { font-size: 0.8em; color: #555; }
"""

#: The summary table: (row key, heading, format); a column is shown when some row has its key.
COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("label", "run", str),
    ("status", "status", str),
    ("jobs", "jobs", formats.count),
    ("started", "started", formats.count),
    ("killed", "killed at walltime", formats.count),
    ("rejected", "rejected", formats.count),
    ("makespan", "makespan (s)", formats.seconds),
    ("mean_wait", "mean wait (s)", formats.seconds),
    ("median_wait", "median wait (s)", formats.seconds),
    ("max_wait", "max wait (s)", formats.seconds),
    ("mean_bsld", "mean bsld (τ=10 s)", formats.ratio),
    ("utilization", "utilization", formats.percent),
    ("estimated", "jobs given a t_estimate", formats.count),
    ("estimate_mae", "t_estimate mean abs. error (s)", formats.seconds),
    ("estimate_kept", "started by first t_estimate", formats.percent),
    ("besteffort_completed_nh", "best-effort work completed (node-h)", formats.ratio),
    ("besteffort_lost_nh", "best-effort work lost (node-h)", formats.ratio),
    ("preemptions", "preemptions", formats.count),
    ("utilization_with_besteffort", "utilization with best-effort work", formats.percent),
    ("elapsed", "replay time (s)", formats.seconds),
    ("wall_s", "run time (s)", formats.seconds),
)
_TEXT = {"label", "status"}


@dataclass
class Section:
    """One group of runs (a workload): its overlays, its per-run figures, its breakdown tables."""

    heading: str
    shared: list[tuple[str, str, str]]  # (caption, png, svg)
    per_run: list[tuple[str, list[tuple[str, str, str]]]]  # (heading, [(run label, png, svg)])
    breakdowns: list[tuple[str, list[str], list[list[Any]]]] = field(default_factory=list)


def format_cell(v: Any) -> tuple[str, bool]:
    """``(text, is_text)`` for a cell of no known column."""
    if v is None:
        return formats.MISSING, False
    if isinstance(v, bool):
        return ("yes" if v else "no"), True
    if isinstance(v, int):
        return formats.count(v), False
    if isinstance(v, float):
        return formats.seconds(v) if abs(v) >= 0.01 or v == 0 else f"{v:.3g}", False
    return str(v), True


def _summary(rows: Sequence[Mapping[str, Any]]) -> str:
    cols = [(k, h, f) for k, h, f in COLUMNS if any(r.get(k) is not None for r in rows)]
    if all(r.get("status") in (None, "ok") for r in rows):
        cols = [c for c in cols if c[0] != "status"]
    head = "".join(f"<th{' class=text' if k in _TEXT else ''}>{html.escape(h)}</th>" for k, h, _ in cols)
    out = ['<div class="tablewrap"><table class="summary">', f"<tr>{head}</tr>"]
    for r in rows:
        cells = []
        for k, _, fmt in cols:
            v = r.get(k)
            text = formats.MISSING if v is None else fmt(v)
            cls = ' class="text"' if k in _TEXT else ""
            title = f' title="{html.escape(str(r["error"]))}"' if k == "status" and r.get("error") else ""
            cells.append(f"<td{cls}{title}>{html.escape(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table></div>")
    return "\n".join(out)


def _table(cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ['<div class="tablewrap"><table>', "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"]
    for r in rows:
        cells = []
        for v in r:
            text, is_text = format_cell(v)
            cells.append(f"<td{' class=text' if is_text else ''}>{html.escape(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table></div>")
    return "\n".join(out)


def _figure(caption: str, png: str, svg: str) -> str:
    c = html.escape(caption)
    return (
        f'<figure><a href="{html.escape(svg)}"><img src="{html.escape(png)}" alt="{c}"></a>'
        f'<figcaption>{c} (<a href="{html.escape(svg)}">SVG</a>)</figcaption></figure>'
    )


def write_index(
    path: Path,
    title: str,
    rows: Sequence[Mapping[str, Any]],
    sections: Sequence[Section],
    drawn_in: float | None = None,
) -> Path:
    """Write the page (complete or not at all) and return its path."""
    t = html.escape(title)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<link rel="icon" href="data:,">',
        f"<title>{t}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{t}</h1>",
        "<h2>Summary</h2>",
        _summary(rows),
    ]
    h2, h3 = ("h3", "h4") if any(s.heading for s in sections) else ("h2", "h3")
    for sec in sections:
        if sec.heading:
            parts.append(f"<h2>{html.escape(sec.heading)}</h2>")
        if sec.shared:
            parts.append(f"<{h2}>All runs</{h2}>")
            parts.append('<div class="shared">' + "".join(_figure(c, p, s) for c, p, s in sec.shared) + "</div>")
        for heading, figs in sec.per_run:
            parts.append(f"<{h2}>{html.escape(heading)}</{h2}>")
            parts.append('<div class="row">' + "".join(_figure(label, p, s) for label, p, s in figs) + "</div>")
        if sec.breakdowns:
            parts.append(f"<{h2}>Wait and bounded slowdown by job size, run time and user</{h2}>")
            for heading, cols, brows in sec.breakdowns:
                parts.append(f"<{h3}>{html.escape(heading)}</{h3}>")
                parts.append(_table(cols, brows))
    if drawn_in is not None:
        parts.append(f"<p><small>Figures drawn in {drawn_in:.1f} s by fluxsched-py.</small></p>")
    parts.append("</body></html>")
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_text("\n".join(parts) + "\n")
    tmp.replace(path)
    return path
