"""A phase banner merged with the start-up banner of the same wording still names its phase.

HF Trainer-style logs print "***** Running training *****" once at start-up and
"***** Running Evaluation *****" before every evaluation; the parser merges both into
"***** Running <*> *****", and healthy runs place that event in their start-up (where it
first appears).  The evaluation a node announced after its last step, and never reported
("eval_loss = ..."), is still the phase the job failed in.
"""

from __future__ import annotations

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

