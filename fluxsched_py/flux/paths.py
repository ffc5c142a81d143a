"""``fluxsched-py module-path``, ``modprobe-path`` and ``xdg-path``.

``module-path`` prints the folder holding ``sched-py.py``, for
``FLUX_MODULE_PATH_PREPEND``; ``modprobe-path`` prints the folder holding
``modprobe.d/sched-py.toml``, for ``FLUX_MODPROBE_PATH_APPEND``::

    FLUX_MODULE_PATH_PREPEND=$(fluxsched-py module-path) \\
    FLUX_MODPROBE_PATH_APPEND=$(fluxsched-py modprobe-path) \\
        flux start --conf=modules.alternatives.sched=\\"sched-py\\"

``cmd-path`` prints the folder holding the ``flux-sched-py`` console
script (the ``flux sched-py`` command), for ``FLUX_EXEC_PATH_PREPEND``.

``xdg-path`` prints the folder holding ``flux/flux-jobs.toml`` (the named
format ``flux jobs --format=sched-py``), for ``XDG_CONFIG_DIRS``.
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

__all__ = ["module_dir", "modprobe_dir", "cmd_dir", "xdg_dir", "main", "purpose"]

_HERE = Path(__file__).resolve().parent


def module_dir() -> Path:
    """The folder with the broker module entry file ``sched-py.py``."""
    return _HERE / "modules"


def modprobe_dir() -> Path:
    """The folder with ``modprobe.d/sched-py.toml``."""
    return _HERE


def cmd_dir() -> Path:
    """The folder with the ``flux-sched-py`` console script, the ``flux
    sched-py`` command: where pip put this installation's scripts (the
    interpreter's scheme, else the user scheme of ``pip install --user``)."""
    candidates = [Path(sysconfig.get_path("scripts")), Path(sys.executable).parent]
    user = sysconfig.get_preferred_scheme("user")
    candidates.append(Path(sysconfig.get_path("scripts", user)))
    for folder in candidates:
        if (folder / "flux-sched-py").exists():
            return folder
    return candidates[0]


def xdg_dir() -> Path:
    """The folder with ``flux/flux-jobs.toml``."""
    return _HERE / "xdg"


_COMMANDS = {
    "module-path": (module_dir, "FLUX_MODULE_PATH_PREPEND"),
    "modprobe-path": (modprobe_dir, "FLUX_MODPROBE_PATH_APPEND"),
    "cmd-path": (cmd_dir, "FLUX_EXEC_PATH_PREPEND"),
    "xdg-path": (xdg_dir, "XDG_CONFIG_DIRS"),
}


def purpose(name: str) -> str:
    """What the path command ``name`` prints: its ``--help`` and its man page say it in these words."""
    return f"Print the folder to add to {_COMMANDS[name][1]}."


def main(argv: Sequence[str] | None = None) -> int:
    """``argv[0]`` is the subcommand (``module-path``, ``modprobe-path``, ``cmd-path`` or ``xdg-path``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv[0] if argv else "module-path"
    if name not in _COMMANDS:
        known = ", ".join(_COMMANDS)
        print(f"fluxsched-py: unknown command {name!r} ({known})", file=sys.stderr)
        return 2
    fn, _ = _COMMANDS[name]
    if any(a in ("-h", "--help") for a in argv[1:]):
        print(f"usage: fluxsched-py {name}\n\n{purpose(name)}")
        return 0
    if len(argv) > 1:
        print(f"fluxsched-py {name}: takes no arguments", file=sys.stderr)
        return 2
    print(fn())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
