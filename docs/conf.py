"""Sphinx configuration of the fluxsched-py manual and man pages.

``sphinx-build -W docs build/html`` builds the manual, ``sphinx-build -W -b
man docs build/man`` the man pages; ``pip install '.[docs]'`` brings what
both need.  The pages are MyST Markdown.  The man pages' NAME lines are the
commands' own one-line summaries (``fluxsched-py --help``), and their option
lists come from the parsers (``_ext/fluxsched_docs.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

from fluxsched_py import __version__  # noqa: E402
from fluxsched_py.cli import DELEGATED, VALIDATE_HELP  # noqa: E402
from fluxsched_py.flux.ctl import build_parser as ctl_parser  # noqa: E402

project = "fluxsched-py"
author = "the fluxsched-py authors"
release = version = __version__
# A fixed date: the committed man pages must be what a build makes today and later.
today = f"fluxsched-py {__version__}"

extensions = ["myst_parser", "fluxsched_docs"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4
html_theme = "alabaster"
html_title = f"fluxsched-py {__version__}"

#: flux sched-py's NAME line: its parser's description, as a man page's NAME line is written.
_ctl_line = ctl_parser().description.rstrip(".")
_ctl_line = _ctl_line[0].lower() + _ctl_line[1:]

#: (document, name, NAME line, authors, section); one page per subcommand.
man_pages = [
    ("man/fluxsched-py", "fluxsched-py", "a Python resource-allocation scheduler for Flux, Batsim and replays", [], 1),
    ("man/fluxsched-py-validate", "fluxsched-py-validate", VALIDATE_HELP, [], 1),
    *[(f"man/fluxsched-py-{name}", f"fluxsched-py-{name}", what, [], 1) for name, (_, what) in DELEGATED.items()],
    ("man/flux-sched-py", "flux-sched-py", _ctl_line, [], 1),
    ("man/sched-py", "sched-py", "the sched-py Flux module's arguments and [sched-py] configuration table", [], 5),
]
man_show_urls = False
