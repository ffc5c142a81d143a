"""``python -m fluxsched_py.replay``: the same as ``fluxsched-py replay``."""

from .cli import main

raise SystemExit(main())
