"""Which lines carry on the step counter's count (``l4.iterations.same_counter``): a
line that gains a field after a few steps is the same counter; a line printed among the
counter's lines that counts something else (micro-batches) is not."""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("cn-01", "cn-02", "cn-03")


def fabric_log(k: int, *, last_step: int, hang: bool = False) -> str:
    """Rank 0 (on the first node) prints every 10th step and, every 310 steps, a validation
    line that names the micro-batch count ("iter", 8 per step); the others print nothing
    of the loop.  ``hang``: this node's GPU hangs, it prints nothing more."""
    out = [f"2024-10-14 01:00:00,000 INFO node {HOSTS[k]} ready"]
    if k == 0:
        for step in range(10, last_step + 1, 10):
            out.append(f"Epoch 1 | iter {8 * step} step {step} | loss train: {3 + 10 / step:.3f} | "
                       f"iter time: 1007.34 ms (step)")
            if step % 310 == 0:
                out.append(f"iter {8 * step}: val loss {3 + 9 / step:.4f}, val time: 12340.5 ms")
    if not hang and last_step < 2000:
        out.append(f"[rank{2 * k}]:[E1014 03:43:17.234076160 ProcessGroupNCCL.cpp:607] [Rank {2 * k}] Watchdog "
                   "caught collective operation timeout: WorkNCCL(SeqNum=3506, OpType=ALLREDUCE, NumelIn=1, "
                   "NumelOut=1, Timeout(ms)=1800000) ran for 1800266 milliseconds before timing out.")
    return "\n".join(out) + "\n"


def test_a_validation_line_that_counts_micro_batches_is_not_the_step(tmp_path):
    failed = write_job(tmp_path / "failed", {h: fabric_log(k, last_step=1160, hang=k == 1)
                                             for k, h in enumerate(HOSTS)})
    healthy = write_job(tmp_path / "ok", {h: fabric_log(k, last_step=2000) for k, h in enumerate(HOSTS)},
                        status="succeeded")
    report = diagnose(failed, [healthy], store_path=False)
    assert report["stage"] == "training"
    assert report["iterations"][0]["iteration"] == 1170, report["iterations"][:3]


def megatron_log(last: int, *, fail: bool) -> str:
    """Megatron prints its first iterations without a throughput field."""
    out = []
    for it in range(1, last + 1):
        tp = f" throughput per GPU (TFLOP/s/GPU): {180 + it % 7:.1f} |" if it > 10 else ""
        out.append(f"[2024-05-01 12:{it // 60:02d}:{it % 60:02d}] iteration {it:>8}/ 5000 |{tp} "
                   f"lm loss: {2 + 1 / it:.6E} |")
    if fail:
        out.append("RuntimeError: CUDA error: an illegal memory access was encountered")
    return "\n".join(out) + "\n"


def test_a_line_that_gains_a_field_later_still_counts_the_same_steps(tmp_path):
    failed = write_job(tmp_path / "failed", {"gpu-0": megatron_log(40, fail=False),
                                             "gpu-1": megatron_log(40, fail=True),
                                             "gpu-2": megatron_log(40, fail=False)})
    report = diagnose(failed, store_path=False)
    assert report["iterations"][0]["iteration"] == 41, report["iterations"][:3]
