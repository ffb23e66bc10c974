"""A job that numbers too few steps to count them: its step counted by a line healthy runs
paced.

Why: Hugging Face's Trainer without a progress bar (SageMaker's mpirun, any launcher that
is no terminal) numbers only its saves ("checkpoint-150"), and reports training as
``{'loss': ..., 'epoch': 1.64}`` every ``logging_steps``.  A job that died after one or two
saves numbered too few steps for any counter, so l4 named no iteration at all.  A healthy
run of the same configuration shows the pace: its saves 75 steps apart hold three loss
lines each, so a loss line is printed every 25 steps, the first at step 25.  The failed job's
loss lines, counted on from its last save, name the step it reached.  Nothing here reads
the lines' wording.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from conftest import write_job
from l4.engine import diagnose
from l4.kbstore import load_normal_rows
from l4.phases import Timeline, paced_steps
from l4.pipeline import diagnose_and_record, learn_normal
from l4.unnumbered import _stride

CRASH = ["Traceback (most recent call last):",
         '  File "/opt/ml/code/train.py", line 19, in main',
         "    tr_loss_step = self.training_step(model, inputs)",
         "RuntimeError: CUDA error: an illegal memory access was encountered"]


def trainer(rank: int, *, steps: int, fail_at: int | None = None, start: int = 0) -> str:
    """Rank 0 of a Trainer without a bar reports a loss line every 25 steps back to back,
    then evaluates and saves every 75 steps; the other ranks print only their start."""
    out = [f"[INFO|trainer.py:2134] 2025-06-03 16:38:16,075 >> ***** Running training ***** rank {rank}"]
    if start:
        out.append(f"[INFO|trainer.py:2095] 2025-06-03 16:38:17,075 >> Loading model from "
                   f"/opt/ml/checkpoints/checkpoint-{start}.")
    for step in range(start + 1, steps + 1):
        if fail_at is not None and step == fail_at:
            out += CRASH
            break
        if rank:
            continue
        if step % 25 == 0:
            out.append(f"{{'loss': {2.0 - step / 1000:.4f}, 'grad_norm': 0.8, "
                       f"'learning_rate': 1e-05, 'epoch': {step / 300:.2f}}}")
        if step % 75 == 0:
            out += ["[INFO|trainer.py:3819] 2025-06-03 16:42:22,777 >> ***** Running Evaluation *****",
                    "{'eval_loss': 1.3444, 'eval_runtime': 20.8, 'epoch': 1.64}",
                    "[INFO|trainer.py:3503] 2025-06-03 16:47:07,900 >> Saving model checkpoint to "
                    f"/opt/ml/checkpoints/checkpoint-{step}",
                    "[INFO|modeling_utils.py:2660] 2025-06-03 16:48:07,900 >> Model weights saved in "
                    f"/opt/ml/checkpoints/checkpoint-{step}/model.safetensors"]
    return "\n".join(out) + "\n"


def healthy(root: Path, **kw) -> Path:
    return write_job(root, {f"n{k}": trainer(k, steps=300, **kw) for k in range(3)},
                     status="succeeded")


def failed(root: Path, fail_at: int, **kw) -> Path:
    return write_job(root, {f"n{k}": trainer(k, steps=300, fail_at=fail_at if k == 0 else None,
                                             **kw) for k in range(3)})


def _its(report: dict) -> list[int]:
    return [it["iteration"] for it in report["iterations"][:3]]


def test_the_paced_line_counts_the_step_a_job_numbered_too_few_of(tmp_path: Path) -> None:
    # two saves (75, 150) and six loss lines: no counter of its own; the healthy run's four
    # saves are too few alone, but its loss lines confirm their pace
    report = diagnose(failed(tmp_path / "failed", 160), [healthy(tmp_path / "ok")],
                      store_path=False)
    assert report["nodes"][0]["node"] == "n0"
    assert report["stage"] == "training"
    assert _its(report)[0] == 175  # the report after the last one, 150: the step in progress
    # without a healthy run nothing paces the loss line
    alone = diagnose(failed(tmp_path / "failed2", 160), store_path=False)
    assert 175 not in _its(alone)


def test_a_resumed_job_counts_on_from_its_last_numbered_line(tmp_path: Path) -> None:
    """Healthy runs started at step 0; this one was resumed from checkpoint-75, so its
    n-th loss line is not the healthy runs' n-th: its save at 150 re-bases the count."""
    report = diagnose(failed(tmp_path / "failed", 185, start=75), [healthy(tmp_path / "ok")],
                      store_path=False)
    assert _its(report)[0] == 200


def test_a_stored_pool_keeps_the_pace(tmp_path: Path, kb: Path) -> None:
    learn_normal(healthy(tmp_path / "ok"), kb=kb)
    rows = load_normal_rows("cfg-a", kb=kb)
    paced = [r for r in rows if r["pace_step"]]
    assert [(r["pace_first"], r["pace_step"]) for r in paced] == [(25.0, 25.0)]
    assert "checkpoint" in paced[0]["pace_anchor"]  # the save's line paced it
    report = diagnose_and_record(failed(tmp_path / "failed", 160), [], kb=kb)
    assert report["baseline"]["pool"] is True
    assert _its(report)[0] == 175


def test_the_finest_pace_wins_and_an_absent_line_counts_nothing() -> None:
    from types import SimpleNamespace

    tl = Timeline(paces={7: (100.0, 100.0, 9), 8: (10.0, 10.0, 9)})
    job = SimpleNamespace(event_ids=[7, 8, 5], counts=np.array([[3, 12, 1], [0, 0, 1]]),
                          seqs=[np.array([2] + [0, 1, 1, 1, 1] * 3)], last_pos=None)
    assert paced_steps(tl, job) == (10.0 + 11 * 10.0, 10.0)
    none = SimpleNamespace(event_ids=[5], counts=np.array([[4]]), seqs=[np.zeros(4, int)],
                           last_pos=None)
    assert paced_steps(tl, none) is None
    # the anchor (event 9, column 2) printed once names step 500 on the grid; the
    # timestamp's and the source line's digits are off it.  Two paced lines follow it
    seq = np.array([1, 1, 1, 2, 1, 1])
    anchored = SimpleNamespace(event_ids=[7, 8, 9], counts=np.array([[0, 5, 1]]), seqs=[seq],
                               last_pos=np.array([[-1, 5, 3]]),
                               last_examples=[{2: "[INFO|x.py:2663] 16:48:07 saved step-500"}])
    assert paced_steps(tl, anchored) == (520.0, 10.0)


def test_lines_back_to_back_before_a_save_are_steps_and_copies_among_steps_are_not() -> None:
    """A Trainer without a bar prints its loss lines back to back, then one banner, one
    evaluation line and a save: the lines an interval holds once pass no steps.  Two
    copies of one line bunched among the steps' own lines are no steps going by."""
    # column 0: the loss line, 1..3: once per interval, 4: the anchor (a save)
    seq = np.array([4, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 1, 2, 3, 4])
    anchors = [(0, 75.0), (7, 150.0), (14, 225.0)]
    pos = np.flatnonzero(seq == 0)
    assert _stride(pos, anchors) is None  # read as a burst without the records
    assert _stride(pos, anchors, seq) == 25
    # column 5: a step line printed every step; column 0: two copies right after the save
    steps = np.array([4, 0, 0, *[5] * 10, 4, 0, 0, *[5] * 10, 4])
    anchors = [(0, 100.0), (13, 200.0), (26, 300.0)]
    assert _stride(np.flatnonzero(steps == 0), anchors, steps) is None
