"""The legacy text protocol (seeds/001): stamps, envelope rules, job sizes from --workload."""

from __future__ import annotations

import hashlib
import json

import pytest

from fluxsched_py.batsim.driver import Host
from fluxsched_py.batsim.entry import EntryFields
from fluxsched_py.batsim.errors import ProtocolError
from fluxsched_py.batsim.legacy import (
    JobTable,
    LegacyDriver,
    WorkloadJob,
    format_message,
    load_job_table,
    parse_message,
)


def table():
    sizes = {"!1": (3, 100.0), "!2": (4, 100.0), "!3": (1, 50.0), "!4": (1, 500.0), "!5": (9, 10.0)}
    return JobTable({k: WorkloadJob(res, wt, None, EntryFields()) for k, (res, wt) in sizes.items()}, 4)


def drv():
    return LegacyDriver(["queue-policy=easy", "policy=low"], table())


def test_seed_examples_parse():
    assert parse_message("3:0.000000|0.000000:A") == ("3", 0.0, [(0.0, "A", "")])
    assert parse_message("0:13|12:S:static!2|12.5:S:static!3|13:S:static!4")[2] == [
        (12.0, "S", "static!2"),
        (12.5, "S", "static!3"),
        (13.0, "S", "static!4"),
    ]
    v, now, evs = parse_message("3:46.556835|46.556835:C:workload_profiles/test_workload_profile.json!2|46.556835:Z")
    assert [s for _, s, _ in evs] == ["C", "Z"]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("hello", "VERSION:NOW"),
        ("3:1.0", "no event"),
        ("3:1.0|2.0:S:w!1", "after the message time"),
        ("3:5.0|3.0:S:w!1|2.0:S:w!2", "before the previous"),
        ("3:1.0|1.0:Q:x", "unknown stamp 'Q'"),
        ("3:x|1.0:N", "not a number"),
    ],
)
def test_envelope_violations(text, reason):
    with pytest.raises(ProtocolError, match=reason):
        parse_message(text)


def test_reply_format_and_nop():
    assert format_message("3", 2.0, []) == b"3:2.000000|2.000000:N"
    assert format_message("0", 15.0, [("J", "s!1=1-2,0;s!2=3")]) == b"0:15.000000|15.000000:J:s!1=1-2,0;s!2=3"


def test_a_short_simulation():
    d = drv()
    assert d.handle(b"3:0.000000|0.000000:A") == b"3:0.000000|0.000000:N"
    assert d.handle(b"3:1.000000|1.000000:S:w0!1") == b"3:1.000000|1.000000:J:w0!1=0-2"
    assert d.handle(b"3:2.000000|2.000000:S:w0!2") == b"3:2.000000|2.000000:N"  # waits for 4 nodes
    assert d.handle(b"3:3.000000|3.000000:S:w0!3") == b"3:3.000000|3.000000:J:w0!3=3"  # backfilled: ends by 101
    assert d.handle(b"3:4.000000|4.000000:S:w0!5") == b"3:4.000000|4.000000:R:w0!5"  # 9 nodes: never
    assert d.handle(b"3:53.000000|53.000000:C:w0!3") == b"3:53.000000|53.000000:N"
    assert d.handle(b"3:101.000000|101.000000:C:w0!1") == b"3:101.000000|101.000000:J:w0!2=0-3"
    assert d.handle(b"3:201.000000|201.000000:C:w0!2|201.000000:Z") == b"3:201.000000|201.000000:N"
    assert d.finished


def test_machine_failures_take_nodes_out():
    d = drv()
    d.handle(b"3:0|0:A")
    d.handle(b"3:1|1:F:0-1")
    assert d.handle(b"3:2|2:S:w0!1") == b"3:2.000000|2.000000:N"  # 3 nodes, only 2 up
    assert d.handle(b"3:3|3:f:1") == b"3:3.000000|3.000000:J:w0!1=1-3"


@pytest.mark.parametrize(
    "second, reason",
    [
        (b"3:1|1:C:w0!1", "never submitted"),
        (b"3:1|1:S:w0!404", "not in the --workload"),
        (b"3:1|1:S:w0!1|1:S:w0!1", "submitted twice"),
        (b"\xff", "not ASCII"),
        (b"3:1|1:F:2-99", "machine unavailable event names machine 99"),
        (b"3:1|1:f:400", "machine available event names machine 400"),
    ],
)
def test_contradictions(second, reason):
    d = drv()
    d.handle(b"3:0|0:A")
    with pytest.raises(ProtocolError, match=reason):
        d.handle(second)


def test_job_table_from_workload_files(tmp_path):
    p = tmp_path / "wl.json"
    p.write_text(json.dumps({"nb_res": 8, "jobs": [{"id": 1, "res": 2, "walltime": 30}, {"id": "2", "res": 1}]}))
    t = load_job_table([str(p)])
    assert t.nb_res == 8
    assert t.lookup("wl!1") == WorkloadJob(2, 30.0, None, EntryFields())
    assert t.lookup("anything!2") == WorkloadJob(1, None, None, EntryFields())
    d = LegacyDriver(None, t, [Host(i, f"h{i}") for i in range(3)])
    d.handle(b"3:0|0:A")
    assert len(d.scheduler.engine.graph.ranks) == 3


def test_job_table_knows_the_sha1_workload_names_of_real_batsim_2(tmp_path):
    # Batsim 2.0 (d1e34905) calls the workload of "-w PATH" sha1(PATH)[:6]: seen as "df1c41!0" for
    # /work/wt-bat5/t/data/batsim/seed1_first30.json.
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"jobs": [{"id": 1, "res": 2}]}))
    b.write_text(json.dumps({"jobs": [{"id": 1, "res": 5}]}))
    t = load_job_table([str(a), str(b)])
    with pytest.raises(ProtocolError, match="not in the --workload"):
        t.lookup("f00bar!1")  # ambiguous by number alone
    assert t.lookup(hashlib.sha1(str(a).encode()).hexdigest()[:6] + "!1").res == 2
    assert t.lookup(hashlib.sha1(str(b).encode()).hexdigest()[:6] + "!1").res == 5
    assert hashlib.sha1(b"/work/wt-bat5/t/data/batsim/seed1_first30.json").hexdigest()[:6] == "df1c41"


def test_job_table_needs_jobs(tmp_path):
    p = tmp_path / "empty.json"
    p.write_text(json.dumps({"jobs": []}))
    with pytest.raises(ValueError, match="--workload"):
        load_job_table([str(p)])


def test_best_effort_jobs_run_as_regular_jobs_the_protocol_has_no_kill(tmp_path, caplog):
    # Batsim 2.0 (d1e34905, the last text-protocol Batsim) has no kill stamp
    # (src/network.hpp: J R N S C P n E p Q e W): a best-effort job is never
    # preempted, and the run says so once.
    wl = tmp_path / "wl.json"
    jobs = [{"id": 1, "res": 2, "walltime": 100, "preemptible-after": 0}, {"id": 2, "res": 2, "walltime": 100}]
    wl.write_text(json.dumps({"nb_res": 2, "jobs": jobs}))
    table = load_job_table([str(wl)])
    assert table.best_effort == 1
    d = LegacyDriver(["queue-policy=easy"], table)
    with caplog.at_level("WARNING", logger="fluxsched_py.batsim"):
        r1 = d.handle(b"3:0.000000|0.000000:A|0.000000:S:wl!1")
        r2 = d.handle(b"3:1.000000|1.000000:S:wl!2")
    assert r1 == b"3:0.000000|0.000000:J:wl!1=0-1"
    assert r2 == b"3:1.000000|1.000000:N"  # waits for wl!1: no kill
    assert [r.getMessage() for r in caplog.records].count(
        "1 jobs have preemptible-after, but the legacy protocol cannot kill a job: they run as regular jobs "
        "(never preempted)"
    ) == 1
    assert d.scheduler.stats["killed"] == 0
