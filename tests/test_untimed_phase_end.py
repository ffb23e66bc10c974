"""An evaluation that a job without timestamps announced, then trained on past: its stage.

The culprit prints no progress of its own, so its stage is the pack's.  Without a clock,
whether an evaluation was over when the job died is read from the
iteration its line names against the counter (``l4.stage.phase_ended``).  The line names
its iteration among its metrics ("validation loss at iteration 50 | lm loss value:
7.631700E+00 | lm loss PPL: 2.062553E+03"): the iteration is the largest number the counter
printed, not the largest number.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bar_jobs import diagnose_three_nodes

EVAL_EVERY, STOP = 50, 62


def _node(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    last = STOP - 1 if failed else 120
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("building model ...\nloading data ...\nstarting training\n")
        # one rank prints progress and evaluations (node 0); the others only their errors
        for it in range(1, last + 1 if path.name == "node-0.log" else 0):
            fh.write(f" iteration {it:6d}/ 120 | loss: {7.9 - it / 100:.4f} | "
                     f"elapsed time per iteration (ms): {4100 + (it * 37) % 90:.1f}\n")
            if it % EVAL_EVERY == 0:
                fh.write(f" validation loss at iteration {it} | lm loss value: "
                         f"{7.63 - it / 1000:.6E} | lm loss PPL: {2062.553 - it:.6E} |\n")
        if role == "crash":
            fh.write('Traceback (most recent call last):\n  File "pretrain.py", line 412, in '
                     "<module>\n    main()\nRuntimeError: CUDA out of memory. Tried to "
                     "allocate 1.89 GiB (GPU 0; 79.15 GiB total capacity)\n")
        elif role == "victim":
            fh.write("[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
                     "operation timeout: WorkNCCL(SeqNum=7301, OpType=ALLREDUCE, NumelIn=1, "
                     "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n")
        else:
            fh.write("training done\n")


def test_an_untimed_evaluation_the_counter_went_past_was_over(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _node)
    assert rep["nodes"][0]["node"] == "node-1"
    assert rep["stage"] == "training", rep["stage"]
    assert any(abs(it["iteration"] - STOP) <= 1 for it in rep["iterations"][:3]), rep["iterations"]


@pytest.mark.parametrize("named, expect", [(50, True), (61, False)])
def test_the_named_iteration_is_a_number_the_counter_printed(named, expect):
    """The rule itself: the eval line's loss and perplexity digits are no steps."""
    import numpy as np

    from l4.stage import phase_ended

    class Job:
        last_ts = np.full((1, 1), np.nan)
        last_examples = [{0: f" validation loss at iteration {named} | lm loss value: "
                              "7.631700E+00 | lm loss PPL: 2.062553E+03 |"}]

    class Counter:
        step = 1.0
        tracks = {0: (np.arange(61), np.arange(1, 62, dtype=float), np.full(61, np.nan))}

    assert phase_ended(Job(), Counter(), 0, 0, 62.0) is expect
