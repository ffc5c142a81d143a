"""The container's config dir (``container/conf.d``, the image's FLUX_CONF_DIR) makes
sched-py the scheduler ``flux start`` loads, as ``docker run IMAGE flux start flux
module list`` would show.  The image itself is not built here (no Docker engine)."""

from __future__ import annotations

from .instance import MODPROBE_DIR, REPO, Instance


def test_container_conf_dir_loads_sched_py():
    conf = REPO / "container" / "conf.d"
    inst = Instance(1, env={"FLUX_CONF_DIR": str(conf), "FLUX_MODPROBE_PATH_APPEND": str(MODPROBE_DIR)})
    try:
        assert inst.sched_module() == "sched-py"
        assert "sched-simple" not in inst.modules()
    finally:
        inst.stop()
