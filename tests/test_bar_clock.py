"""A progress bar's elapsed field is a clock (``l4.scan.bar_elapsed``, ``l4.iterations.bar_clock``).

Hugging Face, accelerate and many training loops show progress as a tqdm bar and print no
time of day: "Train:  33%|###3      | 351/1060 [53:45<1:48:36,  9.19s/it]".  The speed
at its end is an average over many updates, so a step that turned slow moves it only a
little at a time; the elapsed time before "<" moves by the very seconds the step took.

Three nodes show such a bar, with the speed as the running average (tqdm's
``smoothing=0``).  From step 31 every step takes 14 s instead of 4 s; the job is stopped
at step 60.  The slow spell must be dated where it began, not where the average speed
finally crossed a threshold.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from l4.iterations import bar_clock
from l4.scan import bar_elapsed
from tests.bar_jobs import diagnose_three_nodes

SLOW_FROM = 31
STOP = 60
TOTAL = 200


def _clock(sec: float) -> str:
    sec = int(sec)
    h, m, s = sec // 3600, sec // 60 % 60, sec % 60
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def write(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    elapsed = 0.0
    with path.open("w") as fh:
        fh.write("[2024-05-02 10:00:00,000] [INFO] [launch.py:256:main] process 4410 spawned\n")
        for n in range(1, (STOP if failed else 100) + 1):
            elapsed += 14.0 if failed and n >= SLOW_FROM else 4.0 + (n % 3) * 0.1
            rate = elapsed / n
            fh.write(f"Train: {100 * n // TOTAL:3d}%|#         | {n}/{TOTAL} "
                     f"[{_clock(elapsed)}<{_clock(rate * (TOTAL - n))}, {rate:5.2f}s/it]\n")
        if failed:
            fh.write("[2024-05-02 10:30:00,000] [INFO] [launch.py:319:sigkill_handler] Killing "
                     "subprocess 4410\n")
        else:
            fh.write("[2024-05-02 10:08:00,000] [INFO] [launch.py:351:main] Process 4410 exits "
                     "successfully.\n")


def test_a_slow_spell_under_a_progress_bar_is_dated_by_the_bars_clock(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, write)
    its = [i["iteration"] for i in rep["iterations"]]
    assert its and abs(its[0] - SLOW_FROM) <= 1, its


@pytest.mark.parametrize("raw,seconds", [
    (b"Train:  33%|###3      | 351/1060 [53:45<1:48:36,  9.19s/it]", 53 * 60 + 45),
    (b" 35%|###5      | 379/1060 [1:00:11<1:48:09,  9.53s/it]", 3600 + 11),
    (b"100%|##########| 250/250 [00:18<00:00, 13.89it/s]", 18),
    (b"  0%|          | 0/4 [00:00<?, ?it/s]", 0),
    (b"global_step=30 loss=2.91 elapsed 00:53", math.nan),  # no bar: no "<" after it
])
def test_the_elapsed_field_of_a_bar_line(raw, seconds):
    got = bar_elapsed(raw)
    assert (math.isnan(got) and math.isnan(seconds)) or got == seconds


def test_a_bar_that_starts_over_goes_on_from_where_the_last_one_stopped():
    # an epoch's bar ends at 100 s, the next one starts from zero; one line lacks the field
    clock = bar_clock(np.array([10.0, 50.0, 100.0, 4.0, np.nan, 20.0]))
    assert clock is not None
    assert clock.tolist() == [10.0, 50.0, 100.0, 104.0, 104.0, 120.0]
    # too few readings: no clock
    assert bar_clock(np.array([10.0, np.nan, np.nan, np.nan])) is None
    # a bar that moves on every few tenths of a second: whole seconds are no clock
    assert bar_clock(np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0])) is None
    # a time that goes back without starting over is no clock
    assert bar_clock(np.array([600.0, 700.0, 660.0, 720.0])) is None
