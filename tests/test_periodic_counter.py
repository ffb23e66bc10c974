"""A counter that starts over every epoch counts on: the steps are the epochs' counts added.

A progress bar per epoch (PyTorch Lightning's "Epoch 2:  65%|...| 130/200") counts batches
within the epoch.  Read as it is, the job that failed in epoch 2 at batch 131 seemed to fail
at step 201 (the highest count before the counter started over).  A job restarted from
scratch starts its counter over too, but not at a fixed point: that is not composed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from l4.iterations import unwrap_periodic
from tests.bar_jobs import diagnose_three_nodes

tqdm = pytest.importorskip("tqdm").tqdm


def test_periods_that_end_at_the_same_count_are_added_up():
    epochs = [np.arange(1, 201)] * 2 + [np.arange(1, 131)]
    got = unwrap_periodic(np.concatenate(epochs).astype(float))
    assert got[-1] == 530 and np.all(np.diff(got) == 1)


def test_a_counter_from_zero_keeps_its_period():
    got = unwrap_periodic(np.concatenate([np.arange(0, 50)] * 3 + [np.arange(0, 7)]).astype(float))
    assert got[-1] == 156 and np.all(np.diff(got) == 1)


def test_a_restart_from_scratch_is_not_a_period():
    # died at 340, restarted from step 1, died again at 120: the new run's steps count
    num = np.concatenate([np.arange(1, 341), np.arange(1, 121)]).astype(float)
    assert np.array_equal(unwrap_periodic(num), num)
    # two restarts at different points: still no period
    num = np.concatenate([np.arange(1, 341), np.arange(1, 200), np.arange(1, 50)]).astype(float)
    assert np.array_equal(unwrap_periodic(num), num)


def test_small_steps_back_are_not_resets():
    # ranks of one node print the same step in any order
    num = np.array([1, 2, 3, 5, 4, 6, 7, 8, 9, 10, 12, 11, 13], float)
    assert np.array_equal(unwrap_periodic(num), num)


def _node(path: Path, stop_epoch: int, stop_batch: int, role: str, per: int = 200,
          epochs: int = 4) -> None:
    """One node of a Lightning-style job: a tqdm bar per epoch, then how the node ended."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fh.write("GPU available: True (cuda), used: True\n")
        fh.write("LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1,2,3]\n")
        for ep in range(epochs):
            bar = tqdm(total=per, file=fh, desc=f"Epoch {ep}", mininterval=0, miniters=1,
                       ncols=120)
            last = stop_batch if ep == stop_epoch and role != "ok" else per
            for i in range(last):
                bar.update(1)
                bar.set_postfix(v_num=0, train_loss=f"{2.5 - ep * 0.1 - i / 1000:.3f}",
                                refresh=True)
            if ep == stop_epoch and role != "ok":
                break
            bar.close()
        if role == "crash":
            fh.write('\nTraceback (most recent call last):\n  File "train.py", line 88, in '
                     "<module>\n    trainer.fit(model)\nRuntimeError: CUDA error: an illegal "
                     "memory access was encountered\n")
        elif role == "victim":
            fh.write("\n[rank3]:[E1201 10:10:00.000000 123 ProcessGroupNCCL.cpp:616] [Rank 3] "
                     "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7301, "
                     "OpType=ALLREDUCE, NumelIn=1, Timeout(ms)=600000) ran for 600012 "
                     "milliseconds before timing out.\n")
        else:
            fh.write("`Trainer.fit` stopped: `max_epochs=4` reached.\n")


def test_a_job_with_a_progress_bar_per_epoch_gets_its_global_step(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, lambda p, failed, role: _node(p, 2 if failed else 99,
                                                                       130 if failed else 0, role))
    assert rep["nodes"][0]["node"] == "node-1"
    assert rep["stage"] == "training"
    # epochs 0 and 1 (200 steps each) and 130 steps of epoch 2 done: step 531 in progress
    assert any(abs(it["iteration"] - 531) <= 1 for it in rep["iterations"][:3]), rep["iterations"]


def test_the_scanner_reads_a_fraction_that_starts_over_as_one_counter():
    from l4.scan import step_field

    # "Epoch e: p%| n/16": epoch, percent, batch, total; two epochs and a half
    rows = [[e, round(100 * n / 16), n, 16] for e in range(3) for n in range(1, 17)][:40]
    j, step = step_field(rows)
    assert (j, step) == (2, 1)


def test_a_bar_s_percentage_that_steps_evenly_is_not_its_count():
    from l4.scan import step_field

    # "Epoch 0: p%| n/50" in the first epoch: the percentage moves by 2 at every step,
    # as evenly as the count, and as many times; the count is the finer counter
    rows = [[0, 2 * n, n, 50] for n in range(1, 12)]
    assert step_field(rows) == (2, 1)
    # and past the epoch's end, the fraction's periods still win
    rows = [[n // 50, 2 * (n % 50), n % 50, 50] for n in range(40, 75)]
    assert step_field(rows)[0] == 2


def test_a_rank_number_every_rank_prints_in_turn_is_no_fraction():
    from l4.scan import step_field

    # "[Rank r] iteration i": ranks 0..7 in turn, then the next iteration
    rows = [[r, it] for it in range(1, 6) for r in range(8)]
    assert step_field(rows) == (1, 1)


def test_two_shapes_of_one_template_that_count_different_numbers_are_not_mixed():
    from l4.merge import _merge_tracks
    from l4.scan import MarkerTrack

    def track(lines, nums, field, period=0.0):
        t = MarkerTrack(field_step=(field, 1.0), width=4, period=period)
        t.extend(lines, lines, nums, [np.nan] * len(lines))
        return t.freeze()

    batches = track(list(range(0, 80, 2)), [n for _ in range(3) for n in range(1, 17)][:40], 2, 16.0)
    epochs = track(list(range(1, 80, 2)), [n // 16 for n in range(40)], 0)
    got = _merge_tracks(batches, epochs)
    assert got is batches
    # the same counter in two shapes ("iteration 5" and "[rank 0] iteration 6") merges
    a = track([0, 2, 4, 6], [1, 3, 5, 7], 0)
    b = track([1, 3, 5, 7], [2, 4, 6, 8], 1)
    assert _merge_tracks(a, b).numbers.tolist() == [1, 2, 3, 4, 5, 6, 7, 8]


def test_ranks_drawing_their_own_bars_across_an_epoch_end_keep_their_steps():
    from l4.iterations import _counted
    from l4.scan import MarkerTrack, step_field

    # two ranks of one node, one a step behind the other, bars of 8 per epoch
    seq = []
    for g in range(1, 21):
        seq += [(g, (g - 1) % 8 + 1), (g - 1, (g - 2) % 8 + 1)] if g > 1 else [(1, 1)]
    counts = [n for _, n in seq]
    rows = [[n, 8] for n in counts]
    assert step_field(rows[:40]) == (0, 1)
    t = MarkerTrack(field_step=(0, 1.0), width=2, period=8.0)
    t.extend(list(range(len(counts))), list(range(len(counts))), counts, [np.nan] * len(counts))
    got = _counted(t.freeze())
    assert got.tolist() == [float(g) for g, _ in seq]


def test_one_epoch_ended_is_enough_when_the_bar_states_its_total(tmp_path, monkeypatch):
    """The scanner promotes a counter after a few lines, long before a bar of 50 steps
    starts over; one epoch that ended at its stated total is then enough (no second,
    equal period needed): 50 steps of epoch 0 and 33 of epoch 1 done, step 84 next."""
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, lambda p, failed, role: _node(
        p, 1 if failed else 99, 33 if failed else 0, role, per=50, epochs=3))
    assert rep["nodes"][0]["node"] == "node-1"
    assert any(abs(it["iteration"] - 84) <= 1 for it in rep["iterations"][:3]), rep["iterations"]


def test_a_restart_from_scratch_under_a_stated_total_is_no_epoch():
    from l4.iterations import _counted
    from l4.scan import MarkerTrack

    def counted(counts):
        t = MarkerTrack(total=50.0)
        t.positions = np.arange(len(counts))
        t.numbers = np.array(counts, float)
        return _counted(t)

    epoch_end = list(range(1, 51)) + list(range(1, 34))
    assert counted(epoch_end)[-1] == 83
    # stopped at 30 of 50 and started again from 1: the new run's own counts
    restart = list(range(1, 31)) + list(range(1, 20))
    assert np.array_equal(counted(restart), np.array(restart, float))
    # a count past the stated total: the total was no period
    assert counted(list(range(1, 61)) + [1, 2])[-1] == 2
