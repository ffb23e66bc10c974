"""A phase banner merged with the start-up banner of the same wording still names its phase.

HF Trainer-style logs print "***** Running training *****" once at start-up and
"***** Running Evaluation *****" before every evaluation; the parser merges both into
"***** Running <*> *****", and healthy runs place that event in their start-up (where it
first appears).  The evaluation a node announced after its last step, and never reported
("eval_loss = ..."), is still the phase the job failed in.
"""

from __future__ import annotations

import pytest

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("gpu-0", "gpu-1", "gpu-2", "gpu-3")


def _log(k: int, *, steps: int, failed: bool, banner: bool, xid: bool,
         evals: tuple[int, ...] = (20, 40, 60, 80, 100)) -> str:
    out = [f"[rank{8 * k}]: ***** Running training *****"]
    for it in range(1, steps + 1):
        out.append(f"[rank{8 * k}]: Epoch: 0 | Step: {it} | loss: {3 + 1 / it:.4f} | 7.86 s/it")
        if it in evals or (failed and it == steps):
            if k == 0:
                out.append(f"[rank0]: Saving model checkpoint to /ckpt/step{it}")
                out.append(f"[rank0]: Checkpoint step{it} is ready now!")
            if k == 0 and (not failed or it < steps):
                out.append("[rank0]: ***** Running Evaluation *****")
                out.append(f"[rank0]: eval_loss = {2 + 1 / it:.4f}, perplexity = {7 + 1 / it:.3f}")
    if not failed:
        out.append(f"[rank{8 * k}]: training finished")
    else:
        if banner:
            out.append(f"[rank{8 * k}]: ***** Running Evaluation *****")
        if xid:
            out.append(f"[rank{8 * k}]: kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=2828, name=python, "
                       "GPU has fallen off the bus.")
        else:
            out.append(f"[rank{8 * k}]: [E ProcessGroupNCCL.cpp:616] [Rank {8 * k}] Watchdog caught "
                       "collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for "
                       "600031 milliseconds before timing out.")
    return "\n".join(out) + "\n"


def _diagnose(tmp_path, *, culprit: int, banner_on: int, evals: tuple[int, ...] = (20, 40, 60, 80, 100),
              steps: int = 60) -> dict:
    healthy = [write_job(tmp_path / f"ok{b}", {h: _log(k, steps=100, failed=False, banner=False, xid=False,
                                                       evals=evals)
                                               for k, h in enumerate(HOSTS)}, status="succeeded")
               for b in range(2)]
    failed = write_job(tmp_path / "failed", {
        h: _log(k, steps=steps, failed=True, banner=k == banner_on, xid=k == culprit, evals=evals)
        for k, h in enumerate(HOSTS)})
    return diagnose(failed, baselines=healthy, store_path=False)


def test_the_culprit_announced_the_evaluation_it_died_in(tmp_path):
    """(Held before the banner's own text was read too: the job evaluates every 20 steps
    and died at step 60, so the schedule alone says evaluation.)"""
    report = _diagnose(tmp_path, culprit=0, banner_on=0)
    assert report["nodes"][0]["node"] == "gpu-0"
    assert report["stage"] == "evaluation", report["stage"]


def test_another_node_announced_the_evaluation_the_culprit_died_in(tmp_path):
    """Only rank 0 prints the banner; the culprit's GPU fell off the bus without a word of
    the phase."""
    report = _diagnose(tmp_path, culprit=2, banner_on=0)
    assert report["nodes"][0]["node"] == "gpu-2"
    assert report["stage"] == "evaluation", report["stage"]



def _unnumbered_node(rank: int, *, hang_after: int | None, culprit: bool, merged: bool) -> str:
    """Hugging Face's Trainer without a bar (SageMaker's mpirun): rank 0 prints a loss
    line that names no step every 10 steps, evaluates every 50 and saves every 60 (the
    save's directory numbers the steps); every rank announces the training, in the same
    words as the evaluation's banner (``merged``) or with its rank after them."""
    tail = "" if merged else f" rank {rank}"
    out = [f"[INFO|trainer.py:2134] 2025-06-03 16:38:16,075 >> ***** Running training *****{tail}"]
    for step in range(1, 301):
        if rank == 0 and step % 10 == 0:
            out.append(f"{{'loss': {2.0 - step / 1000:.4f}, 'grad_norm': 0.8, 'learning_rate': 1e-05, "
                       f"'epoch': {step / 300:.2f}}}")
        if rank == 0 and step % 50 == 0:
            out.append("[INFO|trainer.py:3819] 2025-06-03 16:42:22,777 >> ***** Running Evaluation *****")
            out.append("[INFO|trainer.py:3821] 2025-06-03 16:42:22,777 >>   Num examples = 1000")
            if step == hang_after:
                break
            out.append(f"{{'eval_loss': {1.5 - step / 1000:.4f}, 'eval_runtime': 20.8, 'epoch': {step / 300:.2f}}}")
        if rank == 0 and step % 60 == 0:
            out.append(f"[INFO|trainer.py:3503] 2025-06-03 16:47:07,900 >> Saving model checkpoint to "
                       f"/opt/ml/checkpoints/checkpoint-{step}")
        if hang_after is not None and step == hang_after:
            break
    if hang_after is not None and not culprit:
        out.append(f"[rank{rank}]:[E605 16:58:22.777 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
                   "collective operation timeout: WorkNCCL(SeqNum=70844, OpType=ALLGATHER, NumelIn=1, "
                   "NumelOut=1, Timeout(ms)=600000) ran for 600014 milliseconds before timing out.")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("merged", [True, False])
def test_an_evaluation_announced_after_an_unnumbered_counters_last_line(tmp_path, merged):
    """The counter is the loss line that names no step (``l4.unnumbered``), so it has
    record positions, not line numbers, and the healthy runs leave no timeline of
    phases; the banner rank 0 printed after its last count, a line healthy runs print
    too, still names the phase: a rank hung in evaluation."""
    healthy = [write_job(tmp_path / f"ok{b}", {f"algo-{k + 1}": _unnumbered_node(k, hang_after=None, culprit=False,
                                                                                 merged=merged)
                                               for k in range(3)}, status="succeeded")
               for b in range(2)]
    failed = write_job(tmp_path / "failed", {
        f"algo-{k + 1}": _unnumbered_node(k, hang_after=250, culprit=k == 1, merged=merged)
        for k in range(3)})
    report = diagnose(failed, baselines=healthy, store_path=False)
    assert report["stage"] == "evaluation", report["stage"]
    assert 250 in [it["iteration"] for it in report["iterations"][:3]], report["iterations"][:3]
