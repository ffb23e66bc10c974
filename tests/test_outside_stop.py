"""A job stopped from outside failed where it was, not in what it did about the stop.

Slurm cancels a job at its time limit: every node prints the same cancel line at once, and
the framework's signal handler reacts ("Preemption detected, saving checkpoint and
exiting").  The save is the job's reaction; the job was training.  A job whose nodes each
fail in their own words (one raised, the others followed) is not such a stop.
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

NODES = ("nid003943", "nid003944", "nid003945")


def _node(k: int, steps: int, *, cancelled: bool) -> str:
    out = [f"[NeMo I 2025-04-28 08:00:0{k} exp_manager:655] Experiments will be logged at /runs/x"]
    for it in range(1, steps + 1):
        if k == 0:
            out.append(f"[NeMo I 2025-04-28 08:{10 + it // 60:02d}:{it % 60:02d} train:88] "
                       f"Training epoch 0, iteration {it}/400 | reduced_train_loss: 2.1 | "
                       "train_step_timing in s: 1.0")
        if it % 100 == 0:
            out.append(f"[NeMo I 2025-04-28 08:{10 + it // 60:02d}:{it % 60:02d} dist_ckpt_io:312] "
                       f"Successfully saved checkpoint from iteration {it} to /ckpt/step={it}.ckpt")
    if cancelled:
        out.append(f"slurmstepd: error: *** STEP 311034.0 ON {NODES[k]} CANCELLED AT "
                   "2025-04-28T08:15:42 DUE TO TIME LIMIT ***")
        out += [f"[rank: {8 * k + r}] Received SIGTERM: 15" for r in range(2)]
        if k == 0:
            out.append("[NeMo I 2025-04-28 08:15:42 preemption:67] Preemption detected, "
                       "saving checkpoint and exiting")
    else:
        out.append(f"[NeMo I 2025-04-28 08:18:0{k} train:120] Training finished")
    return "\n".join(out) + "\n"


def test_a_job_cancelled_at_its_time_limit_was_training_not_saving(tmp_path):
    failed = write_job(tmp_path / "failed", {h: _node(k, 342, cancelled=True) for k, h in enumerate(NODES)})
    base = write_job(tmp_path / "base", {h: _node(k, 400, cancelled=False) for k, h in enumerate(NODES)},
                     status="succeeded")
    rep = diagnose(failed, baselines=[base], store_path=tmp_path / "t.drain3")
    assert rep["stage"] == "training", (rep["stage"], rep.get("onset"))
    assert rep["iterations"][0]["iteration"] in (342, 343), rep["iterations"]
