"""The end of an evaluation the healthy runs ran only once.

Healthy runs of the configuration evaluate once, in the middle of their loop ("running
evaluation at iteration 35", then "eval: iteration 35 val_loss=..."), and save every 15
steps.  A node that printed the evaluation's report had finished evaluating: what failed
next failed in training, not in the evaluation it had already reported.
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("trn-0", "trn-1", "trn-2")


def _log(k: int, *, steps: int, crash: bool, failed: bool) -> str:
    out = []
    for it in range(1, steps + 1):
        out.append(f"[2026-12-04 23:18:{it:02d},100] [INFO] step: {it} | loss {1 + 1 / it:.5f} | 99.8 ms/step")
        if it % 15 == 0:
            out.append(f"[2026-12-04 23:18:{it:02d},200] [INFO] saving checkpoint at iteration {it} to /ckpt/step_{it:06d}.pt")
            out.append(f"[2026-12-04 23:18:{it:02d},300] [INFO] checkpoint saved: /ckpt/step_{it:06d}.pt")
        if it == 35:
            out.append("[2026-12-04 23:18:35,400] [INFO] running evaluation at iteration 35")
            out.append(f"[2026-12-04 23:18:35,500] [INFO] eval: iteration 35 val_loss={0.9 + k / 100:.4f}")
    if not failed:
        out.append("[2026-12-04 23:19:00,000] [INFO] training finished")
    elif crash:
        out.append("[2026-12-04 23:18:36,000] [ERROR] RuntimeError: CUDA error: an illegal memory access "
                   "was encountered")
    else:
        out.append("[2026-12-04 23:28:36,000] [ERROR] RuntimeError: [Rank 1] Watchdog caught collective "
                   "operation timeout: WorkNCCL(SeqNum=90, OpType=ALLREDUCE) ran for 600000 milliseconds")
    return "\n".join(out) + "\n"


def test_a_node_that_reported_the_evaluation_had_left_it(tmp_path):
    healthy = [write_job(tmp_path / f"ok{b}", {h: _log(k, steps=60, crash=False, failed=False)
                                               for k, h in enumerate(HOSTS)}, status="succeeded")
               for b in range(2)]
    failed = write_job(tmp_path / "failed", {h: _log(k, steps=35, crash=k == 1, failed=True)
                                             for k, h in enumerate(HOSTS)})
    report = diagnose(failed, baselines=healthy, store_path=False)
    assert report["nodes"][0]["node"] == "trn-1"
    assert report["stage"] == "training", report["stage"]
