"""A step printed off the job's reporting grid, and the interval it falls in.

Why: a job that reports every 10 steps and stops at "step 337: loss=nan" failed at step
337, in the interval the job would have reported as 340.  Which one is "the iteration of
the failure" is a convention (benchmarks differ); the engine listed 337 and one interval
either side (327, 347), so a reader of the other convention found nothing.  Both are
listed now, the printed step first.
"""

from __future__ import annotations

import numpy as np

from l4.engine import diagnose
from l4.iterations import Counter, grid_end


def _counter(nums: list[float], step: float) -> Counter:
    a = np.array(nums, dtype=np.float64)
    return Counter(marker=0, cols=[0], tracks={0: (np.arange(a.size), a, a)}, step=step)


def test_grid_end_of_an_off_grid_step():
    c = _counter([300, 310, 320, 330, 337], 10)
    assert grid_end(c, 337) == 340
    assert grid_end(c, 330) is None  # on the grid
    # a grid of its own offset (resumed at 8001: 8005, 8010, ...)
    assert grid_end(_counter([8005, 8010, 8015, 8020], 5), 8023) == 8025
    # no grid: the counts do not keep one
    assert grid_end(_counter([1, 3, 4, 7, 8, 11, 15], 2), 12) is None
    assert grid_end(_counter([100, 200, 300], 1), 250) is None


def _job(root, *, nan_at: int | None = None) -> None:
    logs = root / "logs"
    logs.mkdir(parents=True)
    for node in range(3):
        out = [f"2025-03-01 10:00:00,000 [rank{node}] INFO starting"]
        for step in range(10, 1001, 10):
            if nan_at is not None and step > nan_at:
                t = 2 * nan_at
                out.append(f"2025-03-01 10:{t // 60 % 60:02d}:{t % 60:02d},500 [rank{node}] INFO "
                           f"step {nan_at}: loss=nan lr=1e-4")
                out.append(f"2025-03-01 10:{t // 60 % 60:02d}:{t % 60:02d},600 [rank{node}] "
                           f"FloatingPointError: Loss is nan at step {nan_at}, stopping training")
                break
            t = 2 * step
            out.append(f"2025-03-01 10:{t // 60 % 60:02d}:{t % 60:02d},000 [rank{node}] INFO "
                       f"step {step}: loss={3 - step / 1000:.3f} lr=1e-4")
        (logs / f"n{node}.log").write_text("\n".join(out) + "\n")


def test_the_printed_step_and_its_interval_are_both_listed(tmp_path):
    _job(tmp_path / "ok")
    _job(tmp_path / "failed", nan_at=337)
    report = diagnose(tmp_path / "failed", baselines=[tmp_path / "ok"], store_path=False)
    its = [i["iteration"] for i in report["iterations"][:3]]
    assert its[0] == 337 and 340 in its
