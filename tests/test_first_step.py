"""A job that died in training before it printed a step: the step healthy runs printed first.

Why: a job resumed from a checkpoint (or started afresh) that crashes in its first
compiled step prints no step number at all, so l4 named no iteration.  Healthy runs of
the same configuration printed their first count right where the failed job stopped
("iter 920" after "compiling the model..."): that count is the step it died in.  A job
that ran for a while and counts in a wording the healthy runs never used is not "before
its first step", so it gets no such answer.
"""

from __future__ import annotations

from pathlib import Path

from conftest import write_job
from l4.engine import diagnose
from l4.kbstore import load_normal_rows
from l4.pipeline import diagnose_and_record, learn_normal

START = ["tokens per iteration will be: 3,145,728",
         "Resuming training from /mnt/ckpt/run-2957",
         "number of parameters: 123.59M",
         "using fused AdamW: True",
         "compiling the model... (takes a ~minute)"]
CRASH = ["Traceback (most recent call last):",
         '  File "/home/sky/train.py", line 301, in train',
         "    loss = train_step(model, batch)",
         "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
         "AssertionError: cannot compute free_symbols of True"]


def node(rank: int, *, first: int = 920, iters: int = 0, crash: bool = False,
         wording: str = "iter {i}: loss {loss:.4f}, time 4035.84ms, mfu 40.05%") -> str:
    out = [f"rank={rank} " + line if rank else line for line in START]
    for k in range(iters):
        out.append(wording.format(i=first + 10 * k, loss=2.0 - 0.001 * k))
    if crash:
        out += CRASH
    return "\n".join(out) + "\n"


def healthy(root: Path, job_id: str = "ok-1") -> Path:
    return write_job(root, {f"n{r}": node(r, iters=40) for r in range(3)}, status="succeeded",
                     job_id=job_id)


def crashed(root: Path) -> Path:
    nodes = {f"n{r}": node(r) for r in range(3)}
    nodes["n1"] = node(1, crash=True)
    return write_job(root, nodes)


def test_the_first_step_healthy_runs_printed_is_the_iteration(tmp_path: Path) -> None:
    report = diagnose(crashed(tmp_path / "failed"), [healthy(tmp_path / "ok")], store_path=False)
    assert report["nodes"][0]["node"] == "n1"
    assert report["stage"] == "training"
    assert [it["iteration"] for it in report["iterations"]][:1] == [920]
    # without a healthy run nothing says which step it was
    alone = diagnose(crashed(tmp_path / "failed2"), store_path=False)
    assert alone["iterations"] == []


def test_a_stored_pool_keeps_the_first_step(tmp_path: Path, kb: Path) -> None:
    learn_normal(healthy(tmp_path / "ok"), kb=kb)
    rows = load_normal_rows("cfg-a", kb=kb)
    assert [r["first_count"] for r in rows if r["counter"]] == [920.0]
    report = diagnose_and_record(crashed(tmp_path / "failed"), [], kb=kb)
    assert report["baseline"]["pool"] is True
    assert [it["iteration"] for it in report["iterations"]][:1] == [920]


def test_a_job_that_printed_the_loop_was_past_its_first_step() -> None:
    """A job that printed what healthy runs print only inside their loop, three times or
    more, had been training: its count is in a wording the healthy runs never used, not
    missing, so the healthy runs' first step is no answer for it."""
    from types import SimpleNamespace

    import numpy as np

    from l4.phases import LOOP_PHASE, STARTUP, Timeline, first_step

    def job(counts, first_ts=np.nan, last_ts=np.nan):
        shape = np.asarray(counts).shape
        return SimpleNamespace(event_ids=[7, 8], counts=np.array(counts),
                               first_ts=np.full(shape, first_ts), last_ts=np.full(shape, last_ts))

    tl = Timeline(phase={7: STARTUP, 8: LOOP_PHASE}, first_counts={9: 920.0, 10: 1.0})
    started = job([[1, 2], [1, 0]])
    assert first_step(tl, started) == [1.0, 920.0]
    looped = job([[1, 3], [1, 0]])
    assert first_step(tl, looped) == []
    assert first_step(tl, job([[1, 3], [1, 0]], 100.0, 160.0)) == []
    # four ranks sharing a node's log each print the loop's opening line at one moment:
    # one moment of the job, not four steps
    assert first_step(tl, job([[1, 4], [1, 0]], 100.0, 100.0)) == [1.0, 920.0]
    assert first_step(Timeline(phase={7: STARTUP}), started) == []
