"""A resumed job that died in its first step: the step it announced starting at.

Why: healthy runs of a configuration that began at step 1 first report step 5; a failed
run resumed from the step-4750 checkpoint announces "Training starts at step 4751" and
dies in that step's compilation before reporting anything.  "Step 5" (the healthy runs'
first report) is thousands of steps off.  The line in which the job names where it starts
dates its first step, and the healthy runs' reporting grid (every 5 steps) says where it
would have been reported.  Its ranks share a node's log, so each start-up line appears
once per rank at one moment, which is no sign of a job already in its loop.
"""

from __future__ import annotations

from pathlib import Path

from conftest import write_job
from l4.engine import diagnose

CRASH = ["Traceback (most recent call last):",
         '  File "/workspace/titan/train.py", line 461, in train_step',
         "    loss = self.forward_backward_step(input_dict, labels)",
         "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
         "RuntimeError: Triton Error [CUDA]: device kernel image is invalid"]


def node(host: int, *, start: int = 1, steps: int = 0, crash: bool = False, day: int = 10) -> str:
    ranks = (2 * host, 2 * host + 1)
    out = []
    t = 0

    def at(sec: int) -> str:
        return f"2025-06-{day:02d} 04:{sec // 60:02d}:{sec % 60:02d},059"

    for msg in ("Starting job: llama3_8b training", "Building llama3_8b with 32 layers",
                "Model llama3_8b size: 8,030,261,248 total parameters",
                *([f"Loading the checkpoint from /ckpt/run-7/step-{start - 1}."] if start > 1 else []),
                f"Training starts at step {start}."):
        for r in ranks:
            out.append(f"[rank{r}]:[titan] {at(t)} - root - INFO - {msg}")
        t += 2
    for k in range(steps):
        i = start - 1 + 5 * (k + 1)
        for r in ranks:
            out.append(f"[rank{r}]:[titan] {at(t)} - root - INFO - step: {i}  loss: {2.5 - 0.001 * k:.4f}"
                       f"  memory: 40.2GiB  tps: 1,029")
        t += 3
    if crash:
        out += [f"[rank{ranks[0]}]: " + line for line in CRASH]
    return "\n".join(out) + "\n"


def test_a_resumed_run_dies_in_the_step_it_announced(tmp_path: Path) -> None:
    ok = write_job(tmp_path / "ok", {f"h{n}": node(n, steps=30, day=3) for n in range(3)},
                   status="succeeded", job_id="ok-1")
    nodes = {f"h{n}": node(n, start=4751) for n in range(3)}
    nodes["h1"] = node(1, start=4751, crash=True)
    report = diagnose(write_job(tmp_path / "failed", nodes), [ok], store_path=False)
    assert report["nodes"][0]["node"] == "h1"
    assert report["stage"] == "training"
    listed = [it["iteration"] for it in report["iterations"]]
    assert listed[:2] == [4751, 4755], listed


def test_a_fresh_run_lists_the_first_report_and_the_step_itself(tmp_path: Path) -> None:
    ok = write_job(tmp_path / "ok", {f"h{n}": node(n, steps=30, day=3) for n in range(3)},
                   status="succeeded", job_id="ok-1")
    nodes = {f"h{n}": node(n) for n in range(3)}
    nodes["h2"] = node(2, crash=True)
    report = diagnose(write_job(tmp_path / "failed", nodes), [ok], store_path=False)
    assert report["stage"] == "training"
    assert [it["iteration"] for it in report["iterations"]][:2] == [5, 1]
