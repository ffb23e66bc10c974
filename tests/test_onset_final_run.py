"""Where the failure began when its first line had come once before, long before.

Mixed-precision training skips a step now and then ("OVERFLOW! Skipping step. Attempted
loss scale: 65536, reducing to 32768") and goes on training; a diverging run does it
every step until the loss scale bottoms out and the job exits.  The failure point is where
that last run began, not the first overflow of the job 600 steps earlier: read from there,
the job seemed to fail at step 130 and every iteration answer was 700 steps early.
"""

from __future__ import annotations

from pathlib import Path

from tests.bar_jobs import diagnose_three_nodes

EVERY = 10
STEPS = 1000
EARLY = 130  # the one overflow the job worked past
LAST = 800  # the last printed step before the overflow run


def _line(t: int, text: str) -> str:
    h, m, s = 4 + t // 3600, (t // 60) % 60, t % 60
    return f"[2024-04-06 {h:02d}:{m:02d}:{s:02d},000] [INFO] {text}\n"


def _write(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    last = LAST if failed else STEPS
    with path.open("w") as fh:
        fh.write(_line(0, "[launch.py:12:main] world size 6, 2 ranks per node"))
        for n in range(EVERY, last + 1, EVERY):
            fh.write(_line(n * 4, f"[logging.py:96:log_dist] step={n}, skipped=0, lr=[0.0001], loss=2.31"))
            if failed and n == EARLY:
                fh.write(_line(n * 4 + 1, "[loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                                          "Skipping step. Attempted loss scale: 65536, reducing to 32768"))
        if not failed:
            fh.write(_line(STEPS * 4 + 5, "[engine.py:90:finish] training finished"))
            return
        scale = 65536
        for k in range(12):
            fh.write(_line(LAST * 4 + 2 + k, "[loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                                             f"Skipping step. Attempted loss scale: {scale}, reducing to {scale // 2}"))
            scale //= 2
        fh.write(_line(LAST * 4 + 15, "[engine.py:301:step] Exception: Current loss scale already at minimum "
                                      "- cannot decrease scale anymore. Exiting run."))


def test_the_failure_began_where_the_overflows_came_back_for_good(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _write)
    first_streak_line = 1 + LAST // EVERY + 1 + 1  # banner, counter lines, the early overflow
    assert rep["onset"]["line"] == first_streak_line, rep["onset"]
    its = [i["iteration"] for i in rep["iterations"]]
    assert rep["stage"] == "training"
    assert its[0] == LAST + EVERY, its
    assert LAST + 1 in its[:3] or LAST + 2 in its[:3], its
