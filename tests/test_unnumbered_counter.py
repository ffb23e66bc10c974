"""Steps counted by a line that prints no step number (``l4.unnumbered``).

Why: Hugging Face's Trainer run without a progress bar (SageMaker's mpirun, any launcher
that is no terminal) reports ``{'loss': ..., 'epoch': 1.79}`` every ``logging_steps``
steps and numbers only its saves, 120 steps apart: l4 named the failure's step to the
nearest save.  The loss line still counts steps, at a stride the saves calibrate.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from conftest import write_job
from l4.engine import diagnose
from l4.iterations import Counter
from l4.unnumbered import _numbers, _stride, densify


def test_the_stride_is_what_the_anchors_say_per_line() -> None:
    anchors = [(0, 100.0), (11, 200.0), (22, 300.0)]
    pos = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24])
    assert _stride(pos, anchors) == 10
    nums = _numbers(pos, anchors, 10)
    assert nums[:10].tolist() == [110, 120, 130, 140, 150, 160, 170, 180, 190, 200]
    assert nums[-2:].tolist() == [310, 320]


def test_intervals_that_disagree_or_a_burst_give_no_stride() -> None:
    anchors = [(0, 100.0), (11, 200.0), (22, 300.0)]
    # 10 lines in the first interval, 4 in the second: no one stride
    pos = np.array([*range(1, 11), 12, 14, 16, 18])
    assert _stride(pos, anchors) is None
    # two copies right after each anchor (two ranks printing one line): no steps going by
    assert _stride(np.array([1, 2, 12, 13]), anchors) is None
    # an interval without the line
    assert _stride(np.array([1, 5, 9]), anchors) is None


@given(st.integers(1, 50), st.integers(2, 12), st.integers(2, 6), st.integers(0, 10_000),
       st.integers(0, 9))
def test_numbers_run_on_from_the_anchors(k: int, per: int, n_int: int, start: int, tail: int) -> None:
    """Whatever the stride, lines per interval, intervals and lines after the last
    anchor, a line printed every ``k`` steps is numbered as the steps it reports."""
    anchors, pos, truth, p = [(0, float(start))], [], [], 0
    for j in range(n_int):
        for q in range(1, per + 1):
            p += 1
            pos.append(p)
            truth.append(start + (j * per + q) * k)
        p += 1
        anchors.append((p, float(start + (j + 1) * per * k)))
    for q in range(1, tail + 1):
        pos.append(p + q)
        truth.append(start + (n_int * per + q) * k)
    pos_a = np.array(pos)
    assert _stride(pos_a, anchors) == k
    assert _numbers(pos_a, anchors, k).tolist() == truth


def test_a_counter_that_is_already_per_step_stays() -> None:
    job_counts = np.array([[30, 30]])

    class _Job:
        n_nodes = 1
        seqs = [np.array([0, 1] * 30)]
        counts = job_counts
        markers = [{}]
        templates = ["step <*> loss <*>", "time per step <*>"]

    counter = Counter(marker=0, cols=[0], tracks={0: (np.arange(0, 60, 2), np.arange(1.0, 31.0),
                                                       np.full(30, np.nan))}, step=1.0)
    assert densify(_Job(), counter, [None, None], np.zeros((1, 2), bool)) is None


#: a rank's crash in its training step, as Python prints it
_CRASH = ["Traceback (most recent call last):",
          '  File "/opt/ml/code/train.py", line 19, in main',
          "    tr_loss_step = self.training_step(model, inputs)",
          "RuntimeError: CUDA error: an illegal memory access was encountered"]


def _trainer_node(rank: int, *, fail_at: int | None, prints: bool) -> str:
    """Hugging Face's Trainer without a bar: a loss line every 10 steps, a save every 60
    steps (numbered by its directory), an evaluation every 30."""
    out = [f"[INFO|trainer.py:2134] 2025-06-03 16:38:16,075 >> ***** Running training ***** rank {rank}"]
    for step in range(1, 241):
        if fail_at is not None and step == fail_at:
            out += _CRASH
            break
        if not prints:
            continue
        if step % 10 == 0:
            out.append(f"{{'loss': {2.0 - step / 1000:.4f}, 'grad_norm': 0.8, 'learning_rate': 1e-05, "
                       f"'epoch': {step / 240:.2f}}}")
        if step % 30 == 0:
            out.append("[INFO|trainer.py:3819] 2025-06-03 16:42:22,777 >> ***** Running Evaluation *****")
            out.append("{'eval_loss': 1.3444, 'eval_runtime': 20.8, 'epoch': 1.64}")
        if step % 60 == 0:
            out.append(f"[INFO|trainer.py:3503] 2025-06-03 16:47:07,900 >> Saving model checkpoint to "
                       f"/opt/ml/checkpoints/checkpoint-{step}")
    return "\n".join(out) + "\n"


def test_the_step_of_a_failure_between_saves_is_read_from_the_loss_lines(tmp_path) -> None:
    base = write_job(tmp_path / "ok", {f"n{k}": _trainer_node(k, fail_at=None, prints=k == 0)
                                       for k in range(3)}, status="succeeded")
    failed = write_job(tmp_path / "failed", {f"n{k}": _trainer_node(k, fail_at=205 if k == 0 else None,
                                                                     prints=k == 0)
                                             for k in range(3)})
    report = diagnose(failed, baselines=[base], store_path=False)
    assert report["nodes"][0]["node"] == "n0"
    assert report["stage"] == "training"
    its = [it["iteration"] for it in report["iterations"][:3]]
    assert any(abs(it - 210) <= 1 or abs(it - 205) <= 1 for it in its), its
    assert "loss" in (report.get("iteration_marker") or "")


def _bar_node(rank: int, *, fail_at: int | None) -> str:
    """accelerate + a progress bar of every step on rank 0, and a loss line every 20 steps
    that names no step."""
    out = ["[INFO|trainer.py:2134] 2025-06-03 16:38:16,075 >> ***** Running training *****"]
    for step in range(1, 201):
        if fail_at is not None and step == fail_at:
            out += _CRASH
            break
        if rank:
            continue
        out.append(f" {step * 100 // 200:2d}%|#####     | {step}/200 [00:{step // 60:02d}:{step % 60:02d}<01:00,  "
                   "3.89s/it]")
        if step % 20 == 0:
            out.append(f"{{'loss': {2.0 - step / 1000:.4f}, 'grad_norm': 0.8, 'epoch': {step / 200:.2f}}}")
    return "\n".join(out) + "\n"


def test_a_loss_line_every_20_steps_names_the_failure_by_its_interval_too(tmp_path) -> None:
    """Under a bar that counts every step, the step in progress is 121; the loss line
    that reports every 20 steps would have reported it as 140: both are named."""
    base = write_job(tmp_path / "ok", {f"n{k}": _bar_node(k, fail_at=None) for k in range(2)},
                     status="succeeded")
    failed = write_job(tmp_path / "failed", {f"n{k}": _bar_node(k, fail_at=121 if k == 0 else None)
                                             for k in range(2)})
    report = diagnose(failed, baselines=[base], store_path=False)
    assert report["stage"] == "training"
    its = [it["iteration"] for it in report["iterations"]]
    assert its[0] == 121
    assert 140 in its[:3]


def _nanogpt_node(*, stop_after: int | None) -> str:
    """nanoGPT: "iter N" every 10 steps; the validation reported once it is over, every 50."""
    out = ["tokens per iteration will be: 491,520", "number of parameters: 123.59M"]
    for it in range(10, 301, 10):
        out.append(f"iter {it}: loss {3.0 - it / 1000:.4f}, time 6926.05ms, mfu 40.06%")
        if stop_after is not None and it == stop_after:
            out.append("OSError: [Errno 116] Stale file handle")
            break
        if it % 50 == 0:
            out.append(f"step {it}: train loss {3.0 - it / 1000:.4f}, val loss {3.1 - it / 1000:.4f}")
    return "\n".join(out) + "\n"


def test_a_failure_where_the_validation_was_due_is_in_evaluation(tmp_path) -> None:
    """nanoGPT words a validation only once it is over ("step 100: train loss 2.9, val
    loss 3.0"): its schedule says the job was validating after iteration 150."""
    base = write_job(tmp_path / "ok", {"n0": _nanogpt_node(stop_after=None)}, status="succeeded")
    failed = write_job(tmp_path / "failed", {"n0": _nanogpt_node(stop_after=150)})
    report = diagnose(failed, baselines=[base], store_path=False)
    assert report["stage"] == "evaluation"
    assert 150 in [it["iteration"] for it in report["iterations"][:3]]
