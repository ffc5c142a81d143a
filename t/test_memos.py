"""Every answer is the same with the memos on and off (:mod:`fluxsched_py.memo`).

Each replay below runs twice in this process, once as users get it and once
with ``FLUXSCHED_PY_MEMOS=off``, and the two ``jobs.csv`` (every job's
start, end, state and allocated resources) must be equal byte for byte.
The inputs reach every memo: the bundled default under the three policies;
an SWF trace with best-effort jobs (what is lent), run limits
(``limits``), two cores per node (the match cache's non-whole-node
matches) and counted reservations.  One test checks that the switch is
read, so the comparison cannot pass by comparing a run with itself.
"""

from __future__ import annotations

import random

import pytest

from fluxsched_py import memo
from fluxsched_py.replay import cli as replay_cli


def _swf(path, njobs=400, nodes=24, seed=7):
    """A seeded SWF trace: users 1-5, queue 2 best-effort, 1-2 procs per node of two."""
    rng = random.Random(seed)
    lines = [f"; MaxNodes: {nodes}", f"; MaxProcs: {2 * nodes}"]
    t = 0
    for i in range(1, njobs + 1):
        t += rng.randint(0, 90)
        run = rng.randint(10, 1800)
        procs = rng.choice([1, 1, 2, 3, 4, 8, 12, 16])
        user = rng.randint(1, 5)
        queue = 2 if rng.random() < 0.25 else 1
        req = run * rng.choice([1, 1, 2, 3])
        lines.append(f"{i} {t} -1 {run} {procs} -1 -1 {procs} {req} -1 1 {user} 1 1 {queue} -1 -1 -1")
    path.write_text("\n".join(lines) + "\n")
    return path


def _jobs_csv(tmp_path, monkeypatch, name, argv, memos):
    if memos:
        monkeypatch.delenv(memo.ENV, raising=False)
    else:
        monkeypatch.setenv(memo.ENV, "off")
    out = tmp_path / f"{name}-{'on' if memos else 'off'}"
    assert replay_cli.main([*argv, "--no-progress", "--output-dir", str(out)]) == 0
    return sorted((p.relative_to(out).as_posix(), p.read_bytes()) for p in out.rglob("jobs.csv"))


def _same_on_and_off(tmp_path, monkeypatch, name, argv):
    on = _jobs_csv(tmp_path, monkeypatch, name, argv, True)
    off = _jobs_csv(tmp_path, monkeypatch, name, argv, False)
    assert on, "the replay wrote no jobs.csv"
    assert [p for p, _ in on] == [p for p, _ in off]
    for (path, a), (_, b) in zip(on, off, strict=True):
        assert a == b, f"{name}: {path} differs with the memos off"


def test_the_bundled_default_under_every_policy(tmp_path, monkeypatch):
    _same_on_and_off(tmp_path, monkeypatch, "default", [])


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_best_effort_jobs_limits_and_shared_nodes(tmp_path, monkeypatch, policy):
    swf = _swf(tmp_path / "w.swf")
    conf = tmp_path / "flux.toml"
    conf.write_text("[policy.scheduler.limits]\nuser = { nodes = 12 }\nusers.3 = { jobs = 2 }\n")
    argv = [str(swf), "--procs-per-node", "2", "--besteffort-queue", "2", "--config", str(conf)]
    _same_on_and_off(tmp_path, monkeypatch, policy, [*argv, "--queue-policy", policy])


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_held_stretches_a_deep_backlog_behind_user_limits(tmp_path, monkeypatch, policy):
    # Hundreds of jobs wait beyond annotate-depth, most held by a user
    # limit: the stretches passed over whole (memo "held") against each
    # job checked at every pass.
    swf = _swf(tmp_path / "w.swf", njobs=900, nodes=16, seed=5)
    conf = tmp_path / "flux.toml"
    conf.write_text("[policy.scheduler.limits]\nuser = { jobs = 2, nodes = 6 }\nusers.2 = { jobs = 1 }\n")
    argv = [str(swf), "--procs-per-node", "1", "--config", str(conf), "--queue-policy", policy, "--no-progress"]
    out = {}
    for env in ("", "-held"):
        monkeypatch.setenv(memo.ENV, env)
        assert memo.on("held") == (not env)
        path = tmp_path / f"{policy}{env}"
        assert replay_cli.main([*argv, "--output-dir", str(path)]) == 0
        out[env] = (path / "jobs.csv").read_bytes()
    assert out[""] == out["-held"]


def test_counted_reservations(tmp_path, monkeypatch):
    swf = _swf(tmp_path / "w.swf", seed=11)
    argv = [str(swf), "--procs-per-node", "1", "--queue-policy", "conservative", "--reservation-nodes", "counted"]
    _same_on_and_off(tmp_path, monkeypatch, "counted", argv)


def test_the_switch_is_read(monkeypatch):
    monkeypatch.setenv(memo.ENV, "off")
    assert not any(memo.on(name) for name in memo.MEMOS)
    forgot = memo.store("match")
    forgot[1] = 2
    assert isinstance(forgot, memo.Forgetful) and forgot == {}
    monkeypatch.setenv(memo.ENV, "-match,pool")
    assert not memo.on("match") and not memo.on("pool") and memo.on("jobspec")
    monkeypatch.setenv(memo.ENV, "matchh")
    with pytest.raises(ValueError, match="unknown memo matchh"):
        memo.on("match")
    monkeypatch.delenv(memo.ENV)
    assert all(memo.on(name) for name in memo.MEMOS)
    kept = memo.store("whole")
    kept[1] = 2
    assert kept == {1: 2}
