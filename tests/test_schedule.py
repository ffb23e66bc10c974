"""Periodic phases read from the lines that report them (``l4.schedule``).

Why: a job that dies in its first evaluation printed no report of it, so only the healthy
runs of its configuration tell that an evaluation was due after that iteration; and every
rank of a node may print each report, so their number must not refine the grid (reports
at 25, 50, 75 printed twice each once read as "every 5").
"""

from __future__ import annotations

from pathlib import Path

from conftest import write_job
from l4 import engine
from l4.ingest import discover
from l4.profiles import choose_profile
from l4.schedule import Schedule, scheduled_phase, schedules
from l4.templates import open_store


def test_due_on_the_grid_from_the_first_report_on():
    s = Schedule("evaluation", every=25, first=25, last=75)
    assert [d for d in range(1, 101) if s.due(d)] == [25, 50, 75, 100]


def test_no_grid_of_one_iteration():
    assert not Schedule("evaluation", every=1, first=1, last=9).due(5)


def _node(reports: list[int], every_rank: int = 2, steps: int = 80) -> str:
    lines = []
    for it in range(1, steps + 1):
        lines.append(f"iter {it}/{steps} loss={1.0 / it:.4f}")
        if it in reports:
            lines += [f"[rank{r}] validation loss at iteration {it} | lm loss value: 0.5{it} |"
                      for r in range(every_rank)]
    return "\n".join(lines) + "\n"


def _parsed(path: Path):
    spec = discover(path)
    scans = engine.scan_files(list(spec.files), 1)
    with open_store(None) as store:
        job = engine.parse_job(spec, scans, store)
    return job, choose_profile(job.templates, job.framework)


def test_reports_that_every_rank_prints_give_their_real_grid(tmp_path):
    job, profile = _parsed(write_job(tmp_path / "j", {f"n{i}": _node([25, 50, 75]) for i in range(3)},
                                     status="succeeded"))
    got = {(s.stage, s.every, s.first, s.last) for s in schedules(job, profile)}
    assert got == {("evaluation", 25, 25, 75)}


def test_the_healthy_schedule_counts_for_a_job_that_kept_it(tmp_path):
    healthy, profile = _parsed(write_job(tmp_path / "h", {f"n{i}": _node([25, 50, 75]) for i in range(3)},
                                         status="succeeded"))
    grid = schedules(healthy, profile)
    first, _ = _parsed(write_job(tmp_path / "f", {f"n{i}": _node([], steps=25) for i in range(3)}))
    assert scheduled_phase(first, profile, 25.0) is None  # its own lines know no schedule
    assert scheduled_phase(first, profile, 25.0, grid) == "evaluation"
    assert scheduled_phase(first, profile, 24.0, grid) is None
    # reported at 25, then stopped reporting: 50 went by unreported, so a stop after 75
    # is no evaluation by the schedule (a slow node's time limit is dated by its clock)
    skipped, _ = _parsed(write_job(tmp_path / "s", {f"n{i}": _node([25], steps=75) for i in range(3)}))
    assert scheduled_phase(skipped, profile, 75.0, grid) is None
    # reported every one due up to 25 and stopped right after 50: it kept the schedule,
    # and the report of 50 is the one it never printed
    kept, _ = _parsed(write_job(tmp_path / "l", {f"n{i}": _node([25], steps=50) for i in range(3)}))
    assert scheduled_phase(kept, profile, 50.0, grid) == "evaluation"
