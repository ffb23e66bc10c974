"""An alarming line the healthy runs print as often is their weather: NCCL prints "Got
async event : GID table change" at its only error level, WARN, now and then on every
node of every run.  Coming back on the culprit before it fails, it is no onset."""

from __future__ import annotations

import random

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("node-1", "node-2", "node-3", "node-4")
GID = ("{h}:4711:4790 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : "
       "GID table change")


def node_log(h: str, *, iters: int, seed: int, crash_at: int | None = None) -> str:
    rng = random.Random(f"{h}-{seed}")
    out = []
    for it in range(1, iters + 1):
        out.append(f"2025-06-01 08:{it // 60:02d}:{it % 60:02d},500 iteration {it} | loss "
                   f"{2 + 1 / it:.4f}")
        if it > 10 and rng.random() < 0.2:
            out.append(GID.format(h=h))
        if crash_at == it:
            out.append("2025-06-01 08:59:00,000 RuntimeError: CUDA error: an illegal memory "
                       "access was encountered")
            break
    return "\n".join(out) + "\n"


def test_a_benign_warning_that_keeps_coming_is_no_onset(tmp_path):
    healthy = [write_job(tmp_path / f"ok{s}", {h: node_log(h, iters=80, seed=s) for h in HOSTS},
                         status="succeeded") for s in (1, 2)]
    nodes = {h: node_log(h, iters=80 if h != "node-3" else 60, seed=0,
                         crash_at=60 if h == "node-3" else None) for h in HOSTS}
    report = diagnose(write_job(tmp_path / "failed", nodes), healthy, store_path=False)
    assert report["nodes"][0]["node"] == "node-3"
    # it printed "iteration 60" and failed in the next one
    assert report["iterations"][0]["iteration"] == 61, report["iterations"][:3]
