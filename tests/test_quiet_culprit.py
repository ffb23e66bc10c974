"""A culprit that prints nothing in the training loop and dies without a word.

Only the last node prints steps; the culprit's last line is its start-up.  The job
completed steps long after that line, so the culprit took part in their collectives: its
last line does not date the failure, and the job was training (not initializing).
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import pytest
from bar_jobs import diagnose_three_nodes

STOP = 40


def _ts(sec: int) -> str:
    return f"[2026-12-01 10:{sec // 60:02d}:{sec % 60:02d},000]"


def _start(path: Path, failed: bool) -> tuple[TextIO, int, int]:
    """(open log, node number, last step) of one node, its process group lines written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = int(path.stem.split("-")[1])
    fh = open(path, "w", encoding="utf-8")  # the caller closes it (with fh:)
    fh.write(f"{_ts(0)} [INFO] initializing process group rank {n}\n")
    fh.write(f"{_ts(1)} [INFO] process group ready world_size=3 rank={n}\n")
    return fh, n, STOP - 1 if failed else 80


def _node(path: Path, failed: bool, role: str) -> None:
    fh, n, last = _start(path, failed)
    with fh:
        if n == 2:  # the printing rank
            fh.write(f"{_ts(2)} [INFO] dataset ready: 4096 samples\n")
            fh.write(f"{_ts(3)} [INFO] model loaded\n")
            for it in range(1, last + 1):
                fh.write(f"{_ts(4 + 3 * it)} [INFO] step {it} | loss {7.9 - it / 100:.4f}\n")
        if not failed:
            fh.write(f"{_ts(300)} [INFO] training done\n")
        elif role == "victim":
            t = 4 + 3 * STOP + 600
            fh.write(f"{_ts(t % 3600)} [ERROR] [Rank {n}] Watchdog caught collective operation "
                     "timeout: WorkGloo(SeqNum=41, OpType=ALLREDUCE) ran for 600000 ms\n")
        # the crashed node (node 1): its log just ends


def test_a_quiet_culprit_s_start_up_line_does_not_date_the_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _node)
    assert rep["nodes"][0]["node"] == "node-1", [n["node"] for n in rep["nodes"]]
    assert rep["stage"] == "training", rep["stage"]


TOTAL = 400


def _bar_node(path: Path, failed: bool, role: str) -> None:
    """As ``_node``, but the printing rank draws a progress bar, whose lines carry no clock:
    only the order of lines says that the job trained after the culprit's last words."""
    fh, n, last = _start(path, failed)
    with fh:
        fh.write(f"{_ts(2)} [INFO] loading checkpoint shards: 3/3 done\n")
        if n == 2:
            fh.write(f"{_ts(3)} [INFO] ***** Running training *****\n")
            fh.write(f"{_ts(3)} [INFO]   Total optimization steps = {TOTAL}\n")
            for it in range(1, last + 1):
                sec = 3 * it
                pct = 100 * it // TOTAL
                fh.write(f"{pct:3d}%|{'#' * (pct // 10):<10}| {it}/{TOTAL} "
                         f"[{sec // 60:02d}:{sec % 60:02d}<21:00,  3.00s/it]\n")
                if it % 10 == 0:
                    fh.write(f"{{'loss': {7.9 - it / 100:.4f}, 'epoch': {it / TOTAL:.3f}}}\n")
        if not failed:
            fh.write(f"{_ts(300)} [INFO] training done\n")
        elif role == "victim":
            fh.write(f"{_ts(1500)} [ERROR] [Rank {n}] Watchdog caught collective operation "
                     "timeout: WorkGloo(SeqNum=41, OpType=ALLREDUCE) ran for 600000 ms\n")


@pytest.mark.parametrize("write", [_bar_node], ids=["untimed-bar"])
def test_steps_without_a_clock_still_outlive_the_quiet_culprit(tmp_path, monkeypatch, write):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, write)
    assert rep["nodes"][0]["node"] == "node-1", [n["node"] for n in rep["nodes"]]
    assert rep["stage"] == "training", rep["stage"]
    assert rep["iterations"] and rep["iterations"][0]["iteration"] == STOP, rep["iterations"]
