"""A Flux test instance in the background, for the t/flux tests and the bench.

:class:`Instance` runs ``flux start --test-size=N`` with a tiny initial
program that waits until it is told to exit, and runs ``flux`` commands
against it through ``FLUX_URI``.  The broker gets the environment sched-py
needs: ``FLUX_PYTHONPATH_PREPEND`` (this checkout and the site-packages of
the running interpreter, which hold the dependencies) and
``FLUX_MODULE_PATH_PREPEND`` (the folder of ``sched-py.py``) and
``FLUX_MODPROBE_PATH_APPEND`` (sched-py's ``flux modprobe`` declaration).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODULE_DIR = REPO / "fluxsched_py" / "flux" / "modules"
MODPROBE_DIR = REPO / "fluxsched_py" / "flux"


def flux_exe() -> str | None:
    return shutil.which("flux")


def python_path_for_broker() -> str:
    """This checkout first, then every site-packages of this interpreter."""
    dirs = [str(REPO)]
    for p in sys.path:
        if p.endswith(("site-packages", "dist-packages")) and p not in dirs and os.path.isdir(p):
            dirs.append(p)
    return ":".join(dirs)


def broker_python_version() -> str | None:
    """``X.Y`` of the interpreter flux-core's Python modules run under."""
    exe = flux_exe()
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


class FluxError(RuntimeError):
    pass


class Instance:
    """``flux start --test-size=size`` in the background."""

    def __init__(
        self,
        size: int = 1,
        *,
        conf: list[str] | None = None,
        env: dict[str, str] | None = None,
        broker_opts: list[str] | None = None,
    ) -> None:
        self.size = size
        self.dir = Path(tempfile.mkdtemp(prefix="fluxsched-t-"))
        self.uri_file = self.dir / "uri"
        self.stop_file = self.dir / "stop"
        self.log = self.dir / "broker.log"
        self.env = dict(os.environ)
        self.env["FLUX_PYTHONPATH_PREPEND"] = python_path_for_broker()
        self.env["FLUX_MODULE_PATH_PREPEND"] = str(MODULE_DIR)
        self.env["FLUX_MODPROBE_PATH_APPEND"] = str(MODPROBE_DIR)
        self.env.update(env or {})
        self.env.pop("FLUX_URI", None)
        waiter = f"echo $FLUX_URI > {self.uri_file}; while test ! -e {self.stop_file}; do sleep 0.1; done"
        cmd = [flux_exe() or "flux", "start", f"--test-size={size}"]
        for c in conf or []:
            cmd.append(f"--conf={c}")
        cmd += list(broker_opts or [])
        cmd += ["sh", "-c", waiter]
        self._logf = open(self.log, "w")
        # its own session, so a hung instance can be killed with all its brokers
        self.proc = subprocess.Popen(
            cmd, env=self.env, stdout=self._logf, stderr=subprocess.STDOUT, start_new_session=True
        )
        t0 = time.time()
        while not (self.uri_file.exists() and self.uri_file.read_text().strip()):
            if self.proc.poll() is not None or time.time() - t0 > 60:
                self._kill()
                raise FluxError(f"flux start failed: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        self.uri = self.uri_file.read_text().strip()
        self.env["FLUX_URI"] = self.uri

    # -- commands -----------------------------------------------------------

    def run(self, *args: str, check: bool = True, input: str | None = None, timeout: float = 60) -> str:
        """Run ``flux ARGS...`` (or a shell command line given as one string) in the instance."""
        if len(args) == 1 and " " in args[0]:
            cmd = ["sh", "-c", args[0]]
        else:
            cmd = [flux_exe() or "flux", *args]
        p = subprocess.run(cmd, env=self.env, capture_output=True, text=True, input=input, timeout=timeout)
        if check and p.returncode != 0:
            raise FluxError(f"{shlex.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
        return p.stdout

    def try_run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = [flux_exe() or "flux", *args]
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)

    def json(self, *args: str) -> object:
        return json.loads(self.run(*args))

    def modules(self) -> list[str]:
        return [line.split()[0] for line in self.run("module", "list").splitlines()[1:] if line.strip()]

    def sched_module(self) -> str | None:
        """The loaded module that is the scheduler (Fluxion's is its qmanager)."""
        mods = self.modules()
        if "sched-fluxion-qmanager" in mods:
            return "sched-fluxion-qmanager"
        return next((m for m in mods if m.startswith("sched-") and not m.startswith("sched-fluxion-")), None)

    def services(self) -> dict[str, str]:
        """Each service a loaded module provides besides its own name, and that module (``flux module list``)."""
        found = {}
        for line in self.run("module", "list").splitlines()[1:]:
            cols = line.split()
            if len(cols) >= 6:
                for service in cols[5].split(","):
                    found[service] = cols[0]
        return found

    def use_scheduler(self, name: str | None, *args: str) -> None:
        """Make ``name``, loaded with ``args``, the instance's scheduler; with ``None``, leave none loaded.

        The loaded ``sched`` and ``feasibility`` services, then any ``sched-*`` module left (Fluxion's
        resource module), go through ``flux modprobe remove``, which orders the removals by their
        dependencies.  Removing ``sched-*`` modules one by one by name fails where Fluxion is installed in
        flux-core's prefix, as its feasibility module goes when its qmanager does.  A scheduler with
        arguments is loaded by ``flux module load``; without, by ``flux modprobe load``, which brings what
        it needs (Fluxion's resource module).
        """
        loaded = sorted({"sched", "feasibility"} & set(self.services()))
        if loaded:
            self.run("modprobe", "remove", *loaded)
        # flux-core 0.88's modprobe leaves Fluxion's resource module loaded
        # (nothing it removed "requires" it by its solver), holding resource.acquire.
        rest = [m for m in self.modules() if m.startswith("sched-")]
        if rest:
            self.run("modprobe", "remove", *rest)
        if name is None:
            return
        if args:
            self.run("module", "load", name, *args)
        else:
            self.run("modprobe", "load", name)

    def set_resources(self, nodes: int, cores: int, gpus: int = 0, properties: dict[str, str] | None = None) -> None:
        """Replace the instance's resources with a fake R (schedulers must be unloaded)."""
        cmd = ["R", "encode", f"-r0-{nodes - 1}", f"-c0-{cores - 1}", f"-H{_hostlist(nodes)}"]
        if gpus:
            cmd.append(f"-g0-{gpus - 1}")
        R = self.run(*cmd)
        for prop, ranks in (properties or {}).items():
            R = self.run("R", "set-property", f"{prop}:{ranks}", input=R)
        path = self.dir / "R.json"
        path.write_text(R)
        self.run("resource", "reload", "-f", str(path))

    def submit(self, *args: str) -> str:
        return self.run("submit", *args).strip()

    def wait_event(self, jobid: str, event: str, timeout: float = 20) -> None:
        self.run("job", "wait-event", "-t", str(timeout), jobid, event, timeout=timeout + 10)

    def eventlog(self, jobid: str) -> list[dict]:
        out = self.run("job", "eventlog", "-f", "json", jobid)
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def dmesg(self) -> str:
        return self.run("dmesg")

    def stop(self) -> None:
        self.stop_file.write_text("")
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._kill()
        self._logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def __enter__(self) -> Instance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _hostlist(n: int) -> str:
    return "node0" if n == 1 else f"node[0-{n - 1}]"


@contextmanager
def sched_py_instance(
    size: int, nodes: int, cores: int, *args: str, properties: dict[str, str] | None = None, **kwargs
) -> Iterator[Instance]:
    """An instance of ``size`` brokers with ``nodes`` x ``cores`` fake resources, sched-py loaded with ``args``."""
    i = Instance(size, **kwargs)
    try:
        i.use_scheduler(None)
        i.set_resources(nodes, cores, properties=properties)
        i.use_scheduler("sched-py", *args)
        yield i
    finally:
        i.stop()
