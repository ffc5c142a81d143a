"""``replay --report`` and the report's aggregates (fluxsched_py.report)."""

from __future__ import annotations

import csv
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fluxsched_py.report.data import RunData, run_from_jobs_csv, run_from_result, size_class
from fluxsched_py.report.progress import ProgressBar

np = pytest.importorskip("numpy", reason="the plot extra (matplotlib, numpy) is not installed")
series = pytest.importorskip("fluxsched_py.report.series")

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "synthetic_seed42_64nodes.json"


def _random_run(seed: int, n: int = 200, nodes: int = 16) -> RunData:
    rng = random.Random(seed)
    submit, start, finish, ranks = [], [], [], []
    for _ in range(n):
        s = rng.uniform(0, 1000)
        submit.append(s)
        if rng.random() < 0.1:  # never started
            start.append(math.nan), finish.append(math.nan), ranks.append([])
            continue
        b = s + rng.choice([0.0, rng.uniform(0, 300)])
        start.append(b)
        finish.append(b + rng.uniform(0.5, 400))
        lo = rng.randrange(nodes)
        ranks.append([(lo, min(nodes - 1, lo + rng.randrange(4)))])
    return RunData("r", nodes, submit, start, finish, ranks, ["u"] * n, "user")


def _sampled_mean(fn, a: float, b: float, k: int = 1000) -> float:
    """The oracle: the step function evaluated at many points of [a, b), averaged."""
    ts = a + (np.arange(k) + 0.5) * (b - a) / k
    return float(np.mean([fn(t) for t in ts]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_utilization_and_queue_match_pointwise_oracle(seed):
    run = _random_run(seed)
    edges = np.linspace(0, 1500, 16)
    util = series.utilization(run, edges)
    queue = series.queue_length(run, edges)

    def busy(t):
        jobs = zip(run.start, run.finish, run.ranks, strict=True)
        return sum(hi - lo + 1 for s, f, rr in jobs if s <= t < f for lo, hi in rr) / run.nb_nodes

    def pending(t):
        return sum(1 for sub, s in zip(run.submit, run.start, strict=True) if sub <= t and not (s <= t))

    for i in range(len(edges) - 1):
        a, b = edges[i], edges[i + 1]
        assert util[i] == pytest.approx(_sampled_mean(busy, a, b), abs=0.01)
        assert queue[i] == pytest.approx(_sampled_mean(pending, a, b), abs=0.15)


def test_gantt_raster_marks_every_job_and_nothing_else():
    run = _random_run(7, n=60, nodes=8)
    codes = list(range(len(run.submit)))
    t0, t1 = series.time_span(run)
    grid, per_row = series.gantt_raster(run, [c % 100 for c in codes], t0, t1, cols=200)
    assert per_row == 1 and grid.shape == (8, 200)
    busy = np.zeros_like(grid, dtype=bool)
    scale = 200 / (t1 - t0)
    for s, f, rr in zip(run.start, run.finish, run.ranks, strict=True):
        if rr:
            c0, c1 = int((s - t0) * scale), max(int((s - t0) * scale) + 1, math.ceil((f - t0) * scale))
            for lo, hi in rr:
                busy[lo : hi + 1, c0:c1] = True
    assert ((grid >= 0) == busy).all()


def test_gantt_raster_bins_nodes_beyond_max_rows():
    run = RunData("r", 1000, [0.0], [0.0], [10.0], [[(998, 999)]], ["u"])
    grid, per_row = series.gantt_raster(run, [0], 0.0, 10.0, cols=10, max_rows=100)
    assert per_row == 10 and grid.shape == (100, 10)
    assert (grid[99] == 0).all() and (grid[:99] == -1).all()


def test_size_classes():
    assert [size_class(n) for n in (1, 2, 3, 4, 7, 8, 100)] == [
        "1 node",
        "2-3 nodes",
        "2-3 nodes",
        "4-7 nodes",
        "4-7 nodes",
        "8-15 nodes",
        "64-127 nodes",
    ]


def test_run_from_result_and_from_jobs_csv_agree(tmp_path):
    from fluxsched_py.replay import load_workload, replay
    from fluxsched_py.replay.platform import nodes_graph
    from fluxsched_py.replay.report import write_jobs_csv

    result = replay(load_workload(EXAMPLE), nodes_graph(64), {"queue-policy": "easy"})
    a = run_from_result(result)
    b = run_from_jobs_csv(write_jobs_csv(result, tmp_path / "jobs.csv"), "easy", 64)
    assert a.submit == pytest.approx(b.submit)
    assert a.start == pytest.approx(b.start, nan_ok=True)
    assert a.finish == pytest.approx(b.finish, nan_ok=True)
    assert a.ranks == b.ranks and a.category == b.category and a.category_kind == "size"


def test_user_attribute_colours_the_gantt():
    from fluxsched_py.replay import load_workload, replay
    from fluxsched_py.replay.platform import nodes_graph

    w = load_workload(EXAMPLE)
    result = replay(w, nodes_graph(64), {"queue-policy": "fcfs"})
    for i, rec in enumerate(result.records):
        try:
            rec.job.user = f"user{i % 3}"
        except AttributeError:
            pytest.skip("WorkloadJob has no user field in this build")
    run = run_from_result(result)
    assert run.category_kind == "user" and set(run.category) == {"user0", "user1", "user2"}


def test_category_columns_in_jobs_csv(tmp_path):
    """A ``user`` column wins over ``best_effort``, which wins over ``queue``; without any, size classes."""
    head = "job_id,submission_time,starting_time,finish_time,allocated_resources,requested_number_of_resources"
    rows = ["1,0,0,10,0-1,2", "2,0,0,10,2,1", "3,5,10,20,0-3,4"]

    def load(extra_head: str, extra: list[str]) -> RunData:
        p = tmp_path / "jobs.csv"
        lines = [head + extra_head] + [r + e for r, e in zip(rows, extra, strict=True)]
        p.write_text("\n".join(lines) + "\n")
        return run_from_jobs_csv(p, "x")

    run = load(",best_effort,queue", [",1,batch", ",false,debug", ",,batch"])
    assert run.category_kind == "best-effort" and run.category == ["best-effort", "regular", "regular"]
    run = load(",user,best_effort", [",ann,1", ",bob,0", ",ann,0"])
    assert run.category_kind == "user" and run.category == ["ann", "bob", "ann"]
    run = load(",best_effort,queue", [",0,batch", ",0,debug", ",0,batch"])  # no job is best-effort
    assert run.category_kind == "queue" and run.category == ["batch", "debug", "batch"]
    run = load("", ["", "", ""])
    assert run.category_kind == "size" and run.category == ["2-3 nodes", "1 node", "4-7 nodes"]
    assert run.nb_nodes == 4


def test_progress_prints_plain_lines_when_not_a_terminal(tmp_path):
    log = (tmp_path / "log").open("w+")
    with ProgressBar("work", 3, stream=log, every=0.0) as bar:
        for _ in range(3):
            bar.advance()
    log.seek(0)
    lines = log.read().splitlines()
    assert lines and lines[-1].startswith("work: 3/3 (")
    assert all("\x1b" not in line for line in lines)


@pytest.fixture(scope="module")
def replay_report(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One report for the tests below (drawing is the slow part)."""
    pytest.importorskip("matplotlib")
    out = tmp_path_factory.mktemp("report") / "rep"
    p = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "replay", str(EXAMPLE), "--compare", "fcfs,easy", "--report", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    return out, p


def test_replay_report_writes_figures_and_index(replay_report):
    out, p = replay_report
    from fluxsched_py.report.write import OVERLAYS, PER_RUN

    # no power model (no energy platform): no power figures
    kinds = [k for k, _, _ in PER_RUN if not k.startswith("power")]
    assert len(kinds) == len(PER_RUN) - 2
    assert not list(out.glob("power*"))
    stems = [s for s, _, _ in OVERLAYS] + [f"{k}-{pol}" for pol in ("fcfs", "easy") for k in kinds]
    for stem in stems:
        png, svg = out / f"{stem}.png", out / f"{stem}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", stem
        assert b"<svg" in svg.read_bytes()[:2000], stem
    page = (out / "index.html").read_text()
    for stem in stems:
        assert f'src="{stem}.png"' in page and f'href="{stem}.svg"' in page
    assert '<table class="summary">' in page and "mean wait (s)" in page and "mean_wait" not in page
    assert '<td class="text">fcfs</td>' in page and '<td class="text">easy</td>' in page  # each run named
    assert f"wrote {out / 'index.html'}" in p.stderr
    # the page shows each policy's numbers as the terminal's table does
    for metric in ("mean wait", "utilization", "mean bounded slowdown"):
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith(f"│ {metric}"))
        cells = [c.strip().removesuffix(" s") for c in line.split("│")[2:-1]]
        assert len(cells) == 2 and all(f"<td>{c}</td>" in page for c in cells), (metric, cells)


def test_replay_report_without_matplotlib_is_one_line(tmp_path):
    # A sitecustomize-free way to hide matplotlib: a module that fails to import shadows it.
    shadow = tmp_path / "shadow"
    (shadow / "matplotlib").mkdir(parents=True)
    (shadow / "matplotlib" / "__init__.py").write_text("raise ImportError('hidden for the test')\n")
    env = {"PYTHONPATH": f"{shadow}:{REPO}", "PATH": "/usr/bin:/bin"}
    p = subprocess.run(
        [sys.executable, "-m", "fluxsched_py", "replay", str(EXAMPLE), "--report", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 1
    assert p.stderr.strip().count("\n") == 0, p.stderr
    assert "pip install 'fluxsched-py[plot]'" in p.stderr
    assert not (tmp_path / "r").exists()


def test_report_page_in_headless_chromium(replay_report):
    """The page loads in a real browser with no console error, and every image decodes."""
    from .browser import chromium_or_skip

    out, _ = replay_report
    with chromium_or_skip() as driver:
        driver.get((out / "index.html").as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]);"
        )
        errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    expected = sorted(p.name for p in out.glob("*.png"))
    assert sorted(src for src, _, _ in images) == expected
    assert all(done and width > 0 for _, done, width in images), images
    assert errors == []


def test_browser_check_can_fail(tmp_path):
    """The same check on a page with a missing image and a script error reports both."""
    from .browser import chromium_or_skip

    page = tmp_path / "index.html"
    page.write_text(
        '<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>'
        '<img src="missing.png"><script>undefined_function();</script><div style="width:2000px">wide</div>'
        "</body></html>"
    )
    with chromium_or_skip() as driver:
        driver.set_window_size(1400, 900)
        driver.get(page.as_uri())
        widths = driver.execute_script("return Array.from(document.images).map(i => i.naturalWidth);")
        errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        inner, scroll = driver.execute_script(
            "return [document.documentElement.clientWidth, document.documentElement.scrollWidth];"
        )
    assert scroll > inner  # the width check of the side-by-side test can fail
    assert widths == [0]
    assert any("undefined_function" in e["message"] for e in errors)


def _rejecting_workload():
    """Five jobs on 4 nodes; two ask for more nodes than there are and are rejected at submission."""
    from fluxsched_py.replay.workload import read_batsim

    jobs = [  # (id, submit, nodes, run time)
        (1, 0, 4, 100),
        (2, 10, 8, 5),  # too big: rejected at t=10
        (3, 20, 2, 50),
        (4, 30, 16, 5),  # too big: rejected at t=30
        (5, 40, 4, 10),
    ]
    return read_batsim(
        {
            "nb_res": 4,
            "jobs": [{"id": i, "subtime": s, "res": n, "walltime": r, "profile": f"p{i}"} for i, s, n, r in jobs],
            "profiles": {f"p{i}": {"type": "delay", "delay": r} for i, _, _, r in jobs},
        },
        name="rejects",
    )


def test_queue_length_with_rejected_jobs_matches_a_hand_count(tmp_path):
    """Rejected jobs leave the queue when they are rejected; they are never pending forever.

    By hand, under fcfs on 4 nodes: job 1 starts at 0 and ends at 100; job 2 is
    rejected at 10; job 3 (2 nodes) waits from 20 to 100 behind job 1; job 4
    is rejected at 30; job 5 (4 nodes) waits from 40 until job 3 ends at 150.
    Pending jobs: [0,20) 0, [20,40) 1 (job 3; job 4 left at 30), [40,100) 2
    (jobs 3 and 5), [100,150) 1 (job 5), [150,160) 0.
    """
    from fluxsched_py.replay import replay
    from fluxsched_py.replay.platform import nodes_graph
    from fluxsched_py.replay.report import write_jobs_csv

    result = replay(_rejecting_workload(), nodes_graph(4), {"queue-policy": "fcfs"})
    by_id = {r.job.id: r for r in result.records}
    assert {i: (r.state, r.start, r.rejected_at) for i, r in by_id.items()} == {
        1: ("COMPLETED_SUCCESSFULLY", 0, None),
        2: ("REJECTED", None, 10),
        3: ("COMPLETED_SUCCESSFULLY", 100, None),
        4: ("REJECTED", None, 30),
        5: ("COMPLETED_SUCCESSFULLY", 150, None),
    }
    edges = np.array([0, 10, 20, 30, 40, 100, 150, 160], float)
    hand = [0, 0, 1, 1, 2, 1, 0]
    for run in (run_from_result(result), run_from_jobs_csv(write_jobs_csv(result, tmp_path / "j.csv"), "csv", 4)):
        assert series.queue_length(run, edges) == pytest.approx(hand), run.label
        # free nodes: none while job 1 holds all 4, 2 beside job 3 (job 5 waits: stranded), none beside job 5
        free, stranded = series.free_nodes(run, edges)
        assert free == pytest.approx([0, 0, 0, 0, 0, 2, 0])
        assert stranded == pytest.approx([0, 0, 0, 0, 0, 2, 0])


def test_side_by_side_figures_share_their_scales_and_overlays_differ_by_line_style():
    pytest.importorskip("matplotlib")
    from fluxsched_py.report import figures

    a, b = _random_run(1, n=300, nodes=16), _random_run(2, n=60, nodes=8)
    b.label = "b"
    lim = figures.shared_limits([a, b])
    for draw in (figures.queue, figures.utilization, figures.free, figures.gantt):
        ya, yb = (draw(r, lim).axes[0] for r in (a, b))
        assert ya.get_ylim() == yb.get_ylim() and ya.get_xlim() == yb.get_xlim(), draw.__name__
    edges = np.linspace(0, lim["span"], figures.GRID + 1)
    peaks = [series.queue_length(r, edges + series.time_span(r)[0]).max() for r in (a, b)]
    assert figures.queue(b, lim).axes[0].get_ylim()[1] == pytest.approx(max(peaks) * 1.05)
    for what in ("wait", "bsld"):
        ha, hb = (figures.distribution(r, what, lim).axes[0] for r in (a, b))
        assert ha.get_ylim() == hb.get_ylim() and ha.get_xlim() == hb.get_xlim()
    ax = figures.overlay_steps([a, b, a], "queue").axes[0]
    styles = [p.get_linestyle() for p in ax.patches]
    assert len(styles) == 3 and len(set(styles)) == 3
    ax = figures.overlay_cdf([a, b], "wait").axes[0]
    assert len({ln.get_linestyle() for ln in ax.lines}) == 2


BATSIM_OUT = REPO / "t" / "data" / "batsim" / "out_jobs"
SEED1 = REPO / "t" / "data" / "batsim" / "example_workload_hpc_seed1_jobs250.json.gz"


def test_report_of_batsim_out_jobs_matches_batsims_own_summary():
    """Batsim's out_jobs.csv read as a run: the metrics Batsim itself wrote in out_*_schedule.csv."""
    from fluxsched_py.report.metrics import run_metrics

    for policy in ("easy", "fcfs"):
        run = run_from_jobs_csv(BATSIM_OUT / f"out-{policy}_jobs.csv", f"batsim {policy}", 128)
        with (BATSIM_OUT / f"out-{policy}_schedule.csv").open() as f:
            batsim = next(csv.DictReader(f))
        m = run_metrics(run)
        assert m.jobs == int(batsim["nb_jobs"]) == 250
        assert m.started == int(batsim["nb_jobs_finished"])
        assert m.rejected == int(batsim["nb_jobs_rejected"]) and m.killed == int(batsim["nb_jobs_killed"])
        assert m.makespan == pytest.approx(float(batsim["makespan"]), abs=1e-5)
        assert m.mean_wait == pytest.approx(float(batsim["mean_waiting_time"]), abs=1e-5)
        assert m.max_wait == pytest.approx(float(batsim["max_waiting_time"]), abs=1e-5)
        # node-seconds: Batsim's time_computing is the same sum over its hosts
        assert m.used == pytest.approx(float(batsim["time_computing"]), rel=1e-6)


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """``fluxsched-py report`` of a replay of the seed-1 workload and of the real Batsim run of it."""
    pytest.importorskip("matplotlib")
    tmp = tmp_path_factory.mktemp("side")
    exe = [sys.executable, "-m", "fluxsched_py"]
    cmd = [*exe, "replay", str(SEED1), "--nodes", "128", "--queue-policy", "easy", "--output-dir", str(tmp / "r")]
    p = subprocess.run([*cmd, "--no-progress"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    cmd = [*exe, "report", f"replay easy={tmp / 'r' / 'jobs.csv'}", str(BATSIM_OUT / "out-easy_jobs.csv")]
    p = subprocess.run(
        [*cmd, "--nodes", "128", "-o", str(tmp / "page"), "--no-progress"], capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr
    return tmp / "page", p


def test_report_command_draws_a_replay_and_batsim_side_by_side(side_by_side):
    out, p = side_by_side
    page = (out / "index.html").read_text()
    from fluxsched_py.report.write import OVERLAYS, PER_RUN

    kinds = [k for k, _, _ in PER_RUN if not k.startswith("power")]  # no energy platform: no power figures
    for stem in [s for s, _, _ in OVERLAYS] + [f"{k}-{r}" for r in ("replay_easy", "out-easy") for k in kinds]:
        assert (out / f"{stem}.png").is_file() and f'src="{stem}.png"' in page, stem
    # the terminal's table: the replay's numbers and Batsim's (its run starts each job up to 0.03 s later)
    rows = {ln.split("│")[1].strip(): ln for ln in p.stdout.splitlines() if ln.startswith("│")}
    assert set(rows) == {"replay easy", "out-easy"}
    assert "114.70" in rows["replay easy"] and "114.71" in rows["out-easy"]
    assert "By job size" in page and "By run time" in page and "By user" not in page  # no user column in either


def test_side_by_side_report_in_headless_chromium(side_by_side):
    """The replay and Batsim's run on one page: every image decodes, no console error, and the
    page fits a 1,400 px window (no horizontal scrolling)."""
    from .browser import chromium_or_skip

    out, _ = side_by_side
    with chromium_or_skip() as driver:
        driver.set_window_size(1400, 900)
        driver.get((out / "index.html").as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]);"
        )
        errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        inner, scroll = driver.execute_script(
            "return [document.documentElement.clientWidth, document.documentElement.scrollWidth];"
        )
        table = driver.execute_script(
            "const t = document.querySelector('table.summary'); return t.getBoundingClientRect().right;"
        )
        # the two runs' figures side by side, each row of them without a scroll bar
        rows = driver.execute_script(
            "return Array.from(document.querySelectorAll('.row')).map(r => [r.scrollWidth, r.clientWidth]);"
        )
    assert sorted(src for src, _, _ in images) == sorted(p.name for p in out.glob("*.png"))
    assert any("out-easy" in src for src, _, _ in images) and any("replay_easy" in src for src, _, _ in images)
    assert all(done and width > 0 for _, done, width in images), images
    assert errors == []
    assert scroll <= inner and table <= inner, (inner, scroll, table)
    assert len(rows) == 6 and all(sw <= cw for sw, cw in rows), rows


def test_each_workload_is_drawn_on_its_own_time_axis(tmp_path):
    """A sweep of two workloads of different lengths: one section each, each with its own span."""
    pytest.importorskip("matplotlib")
    from fluxsched_py.report import figures
    from fluxsched_py.report.write import groups, write_report

    short = RunData("short", 4, [0.0, 1.0], [0.0, 5.0], [10.0, 20.0], [[(0, 1)], [(2, 3)]], ["a", "a"], "user")
    long = RunData("long", 4, [0.0, 50.0], [0.0, 60.0], [900.0, 1000.0], [[(0, 3)], [(0, 0)]], ["b", "b"], "user")
    short.workload, long.workload = "w-short", "w-long"
    assert [(w, [r.label for r in rs]) for w, rs in groups([short, long])] == [
        ("w-short", ["short"]),
        ("w-long", ["long"]),
    ]
    assert figures.shared_limits([short])["span"] == 20.0 and figures.shared_limits([long])["span"] == 1000.0
    page = write_report([short, long], [{"label": "short"}, {"label": "long"}], tmp_path, progress=False)
    text = page.read_text()
    assert (
        text.index("<h2>Workload w-short</h2>")
        < text.index("gantt-short.png")
        < text.index("<h2>Workload w-long</h2>")
        < text.index("gantt-long.png")
    )


def test_breakdowns_by_size_runtime_and_user_by_hand():
    from fluxsched_py.report.metrics import breakdown

    # (submit, start, finish, nodes, user): waits 0, 10, 100, 5; run times 30, 100, 4000, 10; one never ran
    jobs = [(0, 0, 30, 1, "ann"), (0, 10, 110, 2, "bob"), (0, 100, 4100, 3, "ann"), (5, 10, 20, 1, "ann")]
    jobs.append((0, math.nan, math.nan, 8, "eve"))
    run = RunData(
        "r",
        8,
        [j[0] for j in jobs],
        [j[1] for j in jobs],
        [j[2] for j in jobs],
        [[(0, j[3] - 1)] if not math.isnan(j[1]) else [] for j in jobs],
        [j[4] for j in jobs],
        "user",
        size=[j[3] for j in jobs],
        user=[j[4] for j in jobs],
    )
    # bounded slowdowns (τ=10 s): 1; (10+100)/100 = 1.1; (100+4000)/4000 = 1.025; (5+10)/10 = 1.5
    assert breakdown(run, "size") == [
        ("1 node", 2, 2.5, pytest.approx(1.25)),
        ("2-3 nodes", 2, 55.0, pytest.approx(1.0625)),
    ]
    assert breakdown(run, "runtime") == [
        ("< 1 min", 2, 2.5, pytest.approx(1.25)),
        ("1-10 min", 1, 10.0, pytest.approx(1.1)),
        ("1-6 h", 1, 100.0, pytest.approx(1.025)),
    ]
    assert breakdown(run, "user") == [("ann", 3, 35.0, pytest.approx((1 + 1.025 + 1.5) / 3)), ("bob", 1, 10.0, 1.1)]
