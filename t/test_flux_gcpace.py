"""The module's callback timer (flux/cbtime.py) and garbage-collection pacing (flux/gcpace.py)."""

from __future__ import annotations

import gc

import pytest

from fluxsched_py.flux import gcpace
from fluxsched_py.flux.cbtime import SLOW_CPU_MS, SLOW_KEEP, CallbackClock
from fluxsched_py.flux.gcpace import GcPacer


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FakeGc:
    """The part of the ``gc`` module GcPacer uses, recording what it is asked."""

    def __init__(self, cpu: Clock, cost_ms_per_object: float = 0.01) -> None:
        self.threshold = (700, 10, 10)
        self.count = [0, 0, 0]
        self.frozen = False
        self.calls: list[str] = []
        self.objects = 0
        self._cpu = cpu
        self._cost = cost_ms_per_object
        self.garbage = 7

    def get_threshold(self) -> tuple[int, int, int]:
        return self.threshold

    def set_threshold(self, *t: int) -> None:
        self.threshold = tuple(t)

    def get_count(self) -> tuple[int, int, int]:
        return tuple(self.count)

    def freeze(self) -> None:
        self.frozen = True
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.frozen = False
        self.calls.append("unfreeze")

    def collect(self, generation: int = 2) -> int:
        self.calls.append(f"collect({generation})")
        self.count = [0, 0, 0]
        self._cpu.t += self._cost * self.objects / 1e3
        return self.garbage


def pacer(jobs: list[int], **kw):
    cpu = Clock()
    fake = FakeGc(cpu, kw.pop("cost", 0.01))
    stats: dict = {}
    p = GcPacer(lambda: jobs[0], stats, gc=fake, cpu=cpu, **kw)
    return p, fake, stats


def test_start_collects_freezes_and_takes_generation_2_off_the_automatic_schedule():
    p, fake, _ = pacer([0])
    p.start()
    assert fake.calls == ["collect(2)", "freeze"]
    assert fake.threshold[:2] == (700, 10)
    assert fake.threshold[2] >= 2**31 - 1
    p.stop()
    assert fake.threshold == (700, 10, 10) and not fake.frozen


def test_tick_does_nothing_before_start_or_until_due():
    p, fake, stats = pacer([10])
    fake.count = [0, 0, 99]
    assert not p.tick()  # not started
    p.start()
    fake.calls.clear()
    fake.count = [0, 0, gcpace.DUE - 1]
    assert not p.tick()
    fake.count = [0, 0, gcpace.DUE]
    assert p.tick()
    assert fake.calls == ["collect(2)"]
    assert stats["gc_full"] == 1 and stats["gc_full_collected"] == 7


def test_no_full_collection_while_the_job_count_is_over_the_limit():
    jobs = [50_000]
    p, fake, stats = pacer(jobs, limit=5_000)
    p.start()
    fake.calls.clear()
    fake.count = [0, 0, 1_000]
    assert not p.due() and not p.tick()
    assert fake.calls == []
    jobs[0] = 5_000
    assert p.tick()
    assert stats["gc_full"] == 1


def test_a_collection_over_budget_halves_the_limit_and_cheap_ones_grow_it_back():
    jobs = [4_000]
    # 0.01 ms per object: 10,000 objects cost 100 ms, over a 30 ms budget
    p, fake, stats = pacer(jobs, limit=5_000, budget_ms=30.0)
    p.start()
    fake.objects = 10_000
    fake.count = [0, 0, gcpace.DUE]
    assert p.tick()
    assert stats["gc_full_max_cpu_ms"] == pytest.approx(100.0)
    assert p.limit == 2_000 and stats["gc_full_limit"] == 2_000
    assert not p.due()  # 4,000 jobs: over the new limit
    jobs[0] = 1_000
    fake.objects = 100  # 1 ms: well under budget
    fake.count = [0, 0, gcpace.DUE]
    assert p.tick()
    assert p.limit == 4_000
    fake.count = [0, 0, gcpace.DUE]
    assert p.tick()
    assert p.limit == 5_000  # never above where it started


def test_real_gc_full_collections_only_run_when_the_pacer_runs_them():
    generations: list[int] = []

    def seen(phase, info):
        if phase == "start":
            generations.append(info["generation"])

    jobs = [10**9]
    p = GcPacer(lambda: jobs[0], {})
    before = gc.get_threshold()
    gc.callbacks.append(seen)
    try:
        p.start()
        generations.clear()
        keep = []
        for i in range(200_000):  # enough allocation for automatic full collections
            a: list = [i]
            a.append(a)  # a cycle
            if i % 10 == 0:
                keep.append(a)
        assert generations and 0 in generations
        assert 2 not in generations
        jobs[0] = 0
        while not p.due():
            gc.collect(1)
        assert p.tick()
        assert generations[-1] == 2
    finally:
        gc.callbacks.remove(seen)
        p.stop()
    assert gc.get_threshold() == before


def test_callback_clock_records_the_slowest_callbacks_with_what_they_did():
    wall, cpu = Clock(), Clock()
    stats: dict = {}
    work = ["pass / 3 responses"]
    clock = CallbackClock(stats, lambda: work[0], wall=wall, cpu=cpu)

    def spend(ms_cpu: float, ms_wall: float):
        def fn():
            cpu.t += ms_cpu / 1e3
            wall.t += ms_wall / 1e3
            return "ok"

        return fn

    assert clock.wrap("fast", spend(1.0, 2.0))() == "ok"
    assert stats["slow_callbacks"] == []
    clock.wrap("pass-timer", spend(SLOW_CPU_MS + 10, 300.0))()
    work[0] = "commit / 9 jobs"
    clock.wrap("kvs-commit", spend(150.0, 160.0))()
    assert stats["callbacks_over_100ms_cpu"] == 1
    assert stats["callback_max_cpu_ms"] == pytest.approx(150.0)
    assert stats["callback_max_ms"] == pytest.approx(300.0)
    slow = stats["slow_callbacks"]
    assert [e["callback"] for e in slow] == ["kvs-commit", "pass-timer"]  # by CPU, slowest first
    assert slow[0]["work"] == "commit / 9 jobs" and slow[1]["work"] == "pass / 3 responses"
    for i in range(2 * SLOW_KEEP):
        clock.wrap(f"cb{i}", spend(SLOW_CPU_MS + 1 + i, 1.0))()
    assert len(slow) == SLOW_KEEP
    assert slow[0]["callback"] == "kvs-commit"


def test_callback_clock_counts_collector_time_inside_a_callback():
    wall, cpu = Clock(), Clock()
    stats: dict = {}
    clock = CallbackClock(stats, wall=wall, cpu=cpu)

    def collecting():
        clock._on_gc("start", {"generation": 2})
        cpu.t += 0.08
        wall.t += 0.2
        clock._on_gc("stop", {"generation": 2, "collected": 0})

    clock.wrap("sched.alloc", collecting)()
    assert stats["gc_max_cpu_ms"] == pytest.approx(80.0)
    assert stats["gc_max_ms"] == pytest.approx(200.0)
    assert stats["gc_over_50ms_cpu"] == 1
    (entry,) = stats["slow_callbacks"]
    assert entry["callback"] == "sched.alloc" and entry["gc_ms"] == pytest.approx(200.0)


def test_callback_clock_gc_probe_installs_once_and_removes():
    clock = CallbackClock({})
    clock.install_gc_probe()
    clock.install_gc_probe()
    try:
        assert sum(1 for cb in gc.callbacks if cb == clock._on_gc) == 1
        gc.collect()
        assert clock.stats["gc_max_ms"] > 0.0
    finally:
        clock.remove_gc_probe()
    assert clock._on_gc not in gc.callbacks
