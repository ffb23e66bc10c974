"""A speed on the progress line stands in for the step's duration (``l4.scan.duration_field``).

DeepSpeed's progress line states no time, only throughput ("CurrSamplesPerSec=150.972"),
and a progress bar states "4.21it/s" or, once slower than a step a second, "1.37s/it".
Three nodes print such lines every step, with no clock; from step 21 node 1 is slow (its
throughput falls from ~150 to ~10 samples a second), its peers wait for it one step
later, and the job is stopped at step 40.  The slow spell must be found where it began.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from l4.ingest import NodeFile
from l4.scan import RATE, duration_field, scan_node_file, to_duration
from tests.bar_jobs import diagnose_three_nodes, launcher_end

SLOW_FROM = 21
STOP = 40


def _line(n: int, sps: float) -> str:
    return (f"epoch=0/micro_step={n}/global_step={n}, RunningAvgSamplesPerSec={sps + 0.5:.3f}, "
            f"CurrSamplesPerSec={sps:.3f}, MemAllocated=0.0GB, MaxMemAllocated=0.0GB\n")


def write(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fh.write("[2024-05-02 10:00:00,000] [INFO] [launch.py:256:main] process 4410 spawned\n")
        for n in range(1, (STOP if failed else 60) + 1):
            slow = failed and (n >= SLOW_FROM + (0 if role == "crash" else 1))
            fh.write(_line(n, 10.0 + (n % 3) * 0.05 if slow else 150.0 + (n * 7 % 11)))
        fh.write(launcher_end(failed, "10:05:00", "10:03:00"))


def test_a_slow_spell_is_found_by_the_throughput_it_printed(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, write)
    its = [i["iteration"] for i in rep["iterations"]]
    assert any(abs(it - SLOW_FROM) <= 1 for it in its[:3]), its
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]


@pytest.mark.parametrize("text,field", [
    ("epoch=0/micro_step=5/global_step=5, RunningAvgSamplesPerSec=150.2, CurrSamplesPerSec=151.0, "
     "MemAllocated=0.0GB", (4, RATE)),  # the current speed, not the running average
    ("step 5 | 3120.5 tokens/s | loss 2.31", (1, RATE)),
    ("Epoch 0:  50%|#####     | 1780/3502 [1:40:47<1:37:30, 3.40s/it, loss=5.14]", (4, 1.0)),
    ("iter 5 | loss 2.31 | elapsed time per iteration (ms): 136.0", (2, 0.001)),
    ("iter 5 | loss 2.31", None),
])
def test_which_number_measures_the_step(text, field):
    counting = 1 if text.startswith("epoch=") else 0
    assert duration_field(text, counting) == field


def test_a_bar_says_per_line_whether_it_counts_seconds_or_steps():
    assert to_duration(4.0, 1.0, b"it/s, ") == 0.25
    assert to_duration(1.37, RATE, b"s/it, ") == 1.37
    # "4.21it/s" and "3.40s/it": the number is read up to its point, its fraction comes after
    assert to_duration(4.0, 1.0, b".21it/s, ") == pytest.approx(1 / 4.21)
    assert to_duration(3.0, 1.0, b".40s/it, l") == pytest.approx(3.40)
    assert to_duration(1565.0, 0.001, b".7ms |") == pytest.approx(1.5657)
    assert to_duration(150.0, RATE) == pytest.approx(1 / 150.0)
    assert math.isnan(to_duration(0.0, RATE))
    assert to_duration(136.0, 0.001) == pytest.approx(0.136)


def test_a_bar_in_seconds_per_step_keeps_the_fraction(tmp_path):
    # tqdm below one step a second prints "3.40s/it": 3.4 seconds, not 3
    rows = [f"Epoch 0:  {k // 10:2d}%|#   | {k}/1000 [{k * 3 // 60:02d}:{k * 3 % 60:02d}<59:00, "
            f"3.{40 + k % 7:02d}s/it, loss=1.2]" for k in range(10, 400, 10)]
    path = tmp_path / "n.log"
    path.write_text("\n".join(rows) + "\n")
    scan = scan_node_file(NodeFile("n", path, "n.log"))
    (track,) = [t for t in scan.markers.values() if t.numbers.size == len(rows)]
    want = [3.40 + (k % 7) / 100 for k in range(10, 400, 10)]
    assert track.durations.tolist() == pytest.approx(want)
