"""``index.html``: the summary table, then the figures side by side.

A static page with no script and no outside resource (not even a favicon
request), so it opens from ``file://`` or any web server and a browser has
nothing to complain about.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["write_index", "format_cell"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
.tablewrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85em; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; } td.text { text-align: left; }
.row { display: grid; grid-auto-flow: column; grid-auto-columns: minmax(420px, 1fr); gap: 1em; overflow-x: auto; }
.shared { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 1em; }
figure { margin: 0; } figure img { width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.8em; color: #555; }
"""


def format_cell(v: Any) -> tuple[str, bool]:
    """``(text, is_text)`` for one table cell."""
    if v is None:
        return "—", False
    if isinstance(v, bool):
        return ("yes" if v else "no"), True
    if isinstance(v, int):
        return f"{v:,}", False
    if isinstance(v, float):
        if math.isnan(v):
            return "—", False
        return (f"{v:,.2f}" if abs(v) >= 0.01 or v == 0 else f"{v:.3g}"), False
    return str(v), True


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    out = ['<div class="tablewrap"><table>', "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"]
    for r in rows:
        cells = []
        for c in cols:
            text, is_text = format_cell(r.get(c))
            cls = ' class="text"' if is_text else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
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
    shared: Sequence[tuple[str, str, str]],
    per_run: Sequence[tuple[str, Sequence[tuple[str, str, str]]]],
    drawn_in: float | None = None,
) -> Path:
    """``shared``: (caption, png, svg); ``per_run``: (heading, [(run label, png, svg)])."""
    t = html.escape(title)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<link rel="icon" href="data:,">',
        f"<title>{t}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{t}</h1>",
        "<h2>Summary</h2>",
        _table(rows),
    ]
    if shared:
        parts.append("<h2>All runs</h2>")
        parts.append('<div class="shared">' + "".join(_figure(c, p, s) for c, p, s in shared) + "</div>")
    for heading, figs in per_run:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts.append('<div class="row">' + "".join(_figure(label, p, s) for label, p, s in figs) + "</div>")
    if drawn_in is not None:
        parts.append(f"<p><small>Figures drawn in {drawn_in:.1f} s by fluxsched-py.</small></p>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts) + "\n")
    return path
