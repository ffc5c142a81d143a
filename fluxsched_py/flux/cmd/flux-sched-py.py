"""``flux sched-py``: flux runs this file (found in FLUX_EXEC_PATH) with its own Python."""

import sys
from pathlib import Path

try:
    from fluxsched_py.flux.ctl import main
except ImportError:  # not installed for flux's Python: the package this file is in
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from fluxsched_py.flux.ctl import main

sys.exit(main(sys.argv[1:], prog="flux sched-py"))
