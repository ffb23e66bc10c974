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
from tests.bar_jobs import diagnose_three_nodes, launcher_end

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
        fh.write(launcher_end(failed, "10:30:00", "10:08:00"))


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


# --- a step after other work neither breaks a slow run nor makes one ---------------------


def test_a_step_after_an_evaluation_does_not_break_a_straggler_run():
    """Behind a straggler, every step waits for it, except the one after an evaluation:
    the evaluation's own collective took the wait (a real torchrun run's printed step
    times: 144 ms, 1609 ms, evaluation, 142 ms, 1622 ms, 1607 ms ...)."""
    from l4.iterations import _first_run, after_other_work

    # records: counter lines (column 0) every step; an evaluation (column 5) after step 25
    steps = list(range(20, 34))
    seq, pos = [], []
    for n in steps:
        pos.append(len(seq))
        seq.append(0)
        if n == 25:
            seq.extend([5, 6])
    seq_a, pos_a, nums = np.array(seq), np.array(pos), np.array(steps, dtype=float)
    neutral = after_other_work(seq_a, pos_a, [5, 6])
    assert neutral.tolist() == [n == 26 for n in steps]
    slow = [(n, 9.0) for n in (25, 27, 28, 29, 30, 31)]  # 26: fast, after the evaluation
    assert _first_run(slow, 1.0) == 27  # without the rule: the run starts after the gap
    assert _first_run(slow, 1.0, nums, neutral) == 25
    # lines of no evaluation or save (another rank's progress, a bar's start) are no work
    busy = np.array([c for n in steps for c in (0, 7)])
    assert not after_other_work(busy, np.arange(0, len(busy), 2), [5, 6]).any()


def test_a_bar_redrawn_after_an_evaluation_still_marks_the_next_step():
    """tqdm redraws its count after an evaluation printed over it: "450/690" before the
    evaluation and again after it.  The counter keeps the count's last line; the step
    after it still came after the evaluation (``firsts``: where each count was first)."""
    from l4.iterations import after_other_work

    # counts 449, 450 (first line), evaluation (5, 6), 450 again, 451, 452
    seq = np.array([0, 0, 5, 6, 0, 0, 0])
    last = np.array([0, 4, 5, 6])  # the kept line of 449, 450, 451, 452
    first = np.array([0, 1, 5, 6])
    # without where 450 was first printed, 451 reads as a clean step
    assert after_other_work(seq, last, [5, 6]).tolist() == [False, True, False, False]
    # the bar's time does not move on a redraw: step 451 took the evaluation's time too
    assert after_other_work(seq, last, [5, 6], first).tolist() == [False, True, True, False]


def test_every_bar_line_carries_its_elapsed_time(tmp_path):
    """tqdm's remaining time ("<10:17:07") reads like a time of day, and so does its elapsed
    time past an hour: the bar's lines are no clock of the day, but every one keeps the
    bar's elapsed time."""
    from l4.ingest import NodeFile
    from l4.scan import scan_node_file

    rows = [f"\rEpoch 0:  {k // 54:2d}%|#   | {k}/5439 [{_clock(k * 6.8)}<{_clock((5439 - k) * 6.8)}, "
            f"6.8{k % 7}s/it, loss=3.1, global_step={k}]" for k in range(25, 5439, 25)]
    path = tmp_path / "n.log"
    path.write_text("".join(rows) + "\n")
    scan = scan_node_file(NodeFile("n", path, "n.log"))
    tracks = [t for t in scan.markers.values() if t.numbers.size]
    els = np.concatenate([t.elapsed for t in tracks])
    assert len(els) == len(rows) and not np.isnan(els).any()
