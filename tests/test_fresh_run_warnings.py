"""A warning a fresh run prints at its first steps is no trouble when the counter goes on.

Why: healthy runs of a configuration are often resumed from a checkpoint (their counter
starts at 1001), while the failed job started fresh and printed what fresh runs print at
step 1 (loss-scale overflows, an autograd warning).  Those lines are new to the cross-job
comparison, so each counting node's "trouble" seemed to begin before its first count:
the job was judged never to have trained, the stage of a silent culprit fell back to
initialization and the step in progress to 1.  Every rank takes part in each step's
collectives, so a counter that advanced shows the whole job was in its loop.
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("worker-0", "worker-1", "worker-2")


def _node(k: int, *, failed: bool, evicted_after: int = 12) -> str:
    first = 1 if failed else 1001
    out = [f"[2023-07-04 04:54:2{k},884] [INFO] [config.py:997:print] DeepSpeedEngine configuration:",
           "***** Running training loop *****"]
    last = first + evicted_after - 1 if failed else first + 39
    for step in range(first, last + 1):
        sec = 30 + 3 * (step - first)
        ts = f"2023-07-04 04:{54 + sec // 60:02d}:{sec % 60:02d},504"
        if failed and step - first < 8:
            out.append("/usr/local/lib/python3.11/dist-packages/torch/utils/checkpoint.py:464: UserWarning: "
                       "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.")
            if k == 0:
                out.append(f"[{ts}] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                           f"Skipping step. Attempted loss scale: {65536 >> (step - first)}, reducing")
        if k == 0:
            out.append(f"[{ts}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped=0, "
                       "lr=[3e-06], mom=[(0.9, 0.95)]")
    if failed and k == 2:
        out.append("The node was low on resource: ephemeral-storage. Container pytorch was using 26498512Ki, "
                   "which exceeds its request of 0.")
    elif failed:
        out.append(f"[E ProcessGroupNCCL.cpp:455] [Rank {k}] Watchdog caught collective operation timeout: "
                   "WorkNCCL(SeqNum=65, OpType=_ALLGATHER_BASE, Timeout(ms)=1800000) ran for 1800111 milliseconds "
                   "before timing out.")
    return "\n".join(out) + "\n"


def test_a_silent_culprit_of_a_fresh_run_failed_in_training_at_the_counters_step(tmp_path) -> None:
    healthy = [write_job(tmp_path / f"ok{b}", {h: _node(k, failed=False) for k, h in enumerate(HOSTS)},
                         status="succeeded") for b in range(2)]
    failed = write_job(tmp_path / "failed", {h: _node(k, failed=True) for k, h in enumerate(HOSTS)})
    report = diagnose(failed, baselines=healthy, store_path=False)
    assert report["nodes"][0]["node"] == "worker-2"
    assert report["stage"] == "training", report["stage"]
    its = [it["iteration"] for it in report["iterations"][:3]]
    assert any(abs(it - 12) <= 1 for it in its), its

