"""engine/lent.py: the one record of what best-effort jobs lend, on hand-built jobs.

Resources are plain frozensets here (the class only unions and subtracts
them), bits small ints; the expected unions are counted by hand."""

from fluxsched_py.engine.jobs import Job
from fluxsched_py.engine.lent import Lent


def job(jobid: int, items: set[str]) -> Job:
    j = Job(jobid, 0, 0, 0.0, None)
    j.resources = frozenset(items)
    return j


def test_the_unions_follow_every_lend_and_unlend():
    lent = Lent()
    a, b = job(1, {"n0.c0", "n0.c1"}), job(2, {"n1.c0"})
    assert (lent.bits, lent.resources, len(lent)) == (0, None, 0)
    lent.lend(a, 0b0011)
    lent.lend(b, 0b0100)
    assert lent.bits == 0b0111
    assert lent.resources == {"n0.c0", "n0.c1", "n1.c0"}
    assert 1 in lent and 3 not in lent
    assert lent.bits_of(2) == 0b0100
    assert sorted(j.id for j, _ in lent.items()) == [1, 2]
    lent.unlend(1)
    assert lent.bits == 0b0100
    assert lent.resources == {"n1.c0"}
    lent.unlend(2)
    assert (lent.bits, lent.resources, len(lent)) == (0, None, 0)


def test_unlend_after_a_partial_free_removes_what_was_lent():
    lent = Lent()
    a, b = job(1, {"n0.c0", "n0.c1"}), job(2, {"n1.c0"})
    lent.lend(a, 0b0011)
    lent.lend(b, 0b0100)
    a.resources = frozenset({"n0.c0"})  # n0.c1 was freed since it was lent
    lent.unlend(1, held={"n0.c0", "n0.c1"})
    assert lent.resources == {"n1.c0"}


def test_reencode_lays_every_lent_job_out_anew_and_each_change_counts():
    lent = Lent()
    a, b = job(1, {"x", "y"}), job(2, {"z"})
    lent.lend(a, 0b01)
    lent.lend(b, 0b10)
    epoch = lent.epoch
    layout = {"x": 8, "y": 16, "z": 32}
    lent.reencode(lambda rs: sum(layout[i] for i in rs))
    assert lent.bits == 8 | 16 | 32
    assert lent.bits_of(1) == 24 and lent.bits_of(2) == 32
    assert lent.epoch > epoch
    before = lent.epoch
    lent.unlend(2)
    assert lent.epoch == before + 1 and lent.bits == 24
