"""A counter line whose step duration cannot always be read is no slowdown.

Rank 0 prints "... loss train: 2.40, val: n/a | iter time: 10291.03 ms (step) ..." every
10 steps, with no clock; after the first evaluation "n/a" becomes a number, which moves
the duration to another place in the line, and from there on the scanner reads none.
Summing only the durations it could read would make the steps before that point look
instant and every step after it slow, "a slowdown that lasted to the end", and that
would outrank the step the job failed in.  Node 1 crashes during step 8353.
"""

from __future__ import annotations

from pathlib import Path

from tests.bar_jobs import diagnose_three_nodes

EVAL_AT = 5650
FAIL_STEP = 8353
STEPS = 12000


def _line(n: int) -> str:
    val = "n/a" if n < EVAL_AT else "2.556"
    left = (STEPS - n) * 10.3
    return (f" 0: Epoch 1 | iter {n} step {n} | loss train: 2.4{n % 7}, val: {val} | "
            f"iter time: {10200 + (n * 37) % 400}.{n % 100:02d} ms (step) remaining time: "
            f"{int(left // 3600)}:{int(left % 3600 // 60):02d}:{int(left % 60):02d}\n")


def write(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    last = FAIL_STEP - 1 if failed else STEPS
    with path.open("w") as fh:
        fh.write("2025-03-29 12:00:00 INFO launching 6 ranks on 3 nodes\n")
        if path.stem == "node-0":
            for n in range(10, last + 1, 10):
                fh.write(_line(n))
        if not failed:
            fh.write("2025-03-30 22:20:00 INFO training finished\n")
            return
        if role == "crash":
            fh.write("Traceback (most recent call last):\n"
                     '  File "train.py", line 212, in <module>\n'
                     "    loss.backward()\n"
                     "RuntimeError: CUDA error: an illegal memory access was encountered\n")
            fh.write("E0330 11:53:47.000000 77 torch/distributed/elastic/multiprocessing/api.py:869]"
                     " failed (exitcode: 1) local_rank: 0 (pid: 77) of binary: python\n")
            return
        fh.write("E0330 11:53:49.000000 91 torch/distributed/elastic/multiprocessing/api.py:869]"
                 " failed (exitcode: -15) local_rank: 0 (pid: 91) of binary: python\n")


def test_steps_whose_duration_was_unreadable_are_not_a_slowdown(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, write)
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert rep["stage"] == "training"
    its = [i["iteration"] for i in rep["iterations"]]
    assert its[0] == 8360, its  # the interval the job would have printed next
    assert not any(EVAL_AT - 10 <= it <= EVAL_AT + 50 for it in its[:3]), its
