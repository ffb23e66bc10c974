"""A save that fails after the healthy runs' last step: final, or one more periodic save?

Why: healthy runs of a configuration are often shorter than the failed job (a smoke test,
a resumed run's last leg).  A job that went past where they ended was not thereby at its
own end: one that declared "total steps 400" at start-up and failed saving at step 300 was
checkpointing, one that declared 200 and failed saving at step 200 was finalizing.  Which
start-up line declares the length is learned from the healthy runs (its number is the last
step each of them counted), not from its wording.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_job
from l4.declared import agreed_totals
from l4.engine import diagnose

ENOSPC = ["[rank0]: Traceback (most recent call last):",
          '[rank0]:   File "/workspace/titan/train.py", line 556, in train',
          "[rank0]:     self.checkpointer.save(curr_step=self.step)",
          "[rank0]: OSError: [Errno 28] No space left on device: '/mnt/ckpt/step-{step}/__0_0.distcp'"]


def node(rank: int, *, total: int, upto: int, fail: bool | None = None, day: int = 20) -> str:
    out = []
    t = 0

    def line(msg: str) -> None:
        nonlocal t
        out.append(f"[rank{rank}]:[titan] 2025-05-{day} 04:{t // 3600:02d}:{t // 60 % 60:02d},{t % 60:03d} "
                   f"- root - INFO - {msg}")
        t += 7

    line("Starting job: llama3_8b training")
    line(f"Trainer is initialized with local batch size 4, global batch size 32, total steps {total} (warmup 20).")
    line("Training starts at step 1.")
    for s in range(10, upto + 1, 10):
        line(f"step: {s}  loss:  {2.9 - 0.001 * s:.4f}  grad_norm:  0.35  memory: 40.2GiB")
        if s % 100 == 0 or s == total:
            line("Saving the checkpoint (or staging if async is enabled).")
            if fail is not None and s == upto:
                if fail:
                    out.extend(x.format(step=s).replace("rank0", f"rank{rank}") for x in ENOSPC)
                else:  # a peer, waiting in the save's collective
                    out.append(f"[rank{rank}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
                               "Connection closed by peer [10.0.0.2]:41234")
                return "\n".join(out) + "\n"
            line("Finished saving the checkpoint (or staging if async is enabled)in 12.10 seconds.")
    line("Training completed")
    return "\n".join(out) + "\n"


def job(tmp_path: Path, total: int, fail_at: int) -> dict:
    ok = [write_job(tmp_path / f"ok{k}", {f"h{r}": node(r, total=190, upto=190, day=10 + k)
                                          for r in range(3)}, status="succeeded", job_id=f"ok-{k}")
          for k in range(2)]
    nodes = {f"h{r}": node(r, total=total, upto=fail_at, fail=r == 1) for r in range(3)}
    return diagnose(write_job(tmp_path / "failed", nodes), ok, store_path=False)


@pytest.mark.parametrize(("total", "fail_at", "stage"), [(400, 300, "checkpointing"), (300, 300, "finalization")])
def test_the_declared_length_says_whether_a_save_was_the_last(tmp_path: Path, total: int, fail_at: int,
                                                             stage: str) -> None:
    report = job(tmp_path, total, fail_at)
    assert report["nodes"][0]["node"] == "h1"
    assert report["stage"] == stage
    assert fail_at in [it["iteration"] for it in report["iterations"][:2]]


def test_a_line_counts_only_where_every_healthy_run_agrees() -> None:
    assert agreed_totals([{7: 3}, {7: 3, 9: 0}]) == {7: 3, 9: 0}
    assert agreed_totals([{7: 3}, {7: 1}]) == {}
