"""The line that ends an evaluation in healthy runs says the evaluation is over.

A script announces "running evaluation at iteration 25" and reports "eval: iteration 25
val_loss=2.15" when it is done; both name the phase and the iteration.  A rank that hangs
in the next training step leaves the report as the last line that names a stage, and read
as an announcement it placed the hang in evaluation.  Healthy runs of the same
configuration print the report after every announcement, as often: it is the phase's end
(``Timeline.closers``), and the job was training again.
"""

from __future__ import annotations

from pathlib import Path

from bar_jobs import diagnose_three_nodes

EVAL_EVERY, DONE = 5, 25


def _node(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    last = DONE if failed else 40
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("INFO:train:world size 6\nINFO:train:building dataset\nINFO:train:starting "
                 "training\n")
        for it in range(1, last + 1):
            fh.write(f"INFO:train:[Epoch {it // 10}][Batch {it}] loss: {7.9 - it / 10:.4f}, "
                     "lr: 0.010000\n")
            if it % EVAL_EVERY == 0:
                fh.write(f"INFO:train:running evaluation at iteration {it}\n")
                fh.write(f"INFO:train:eval: iteration {it} val_loss={2.5 - it / 100:.4f}\n")
        if role == "victim":
            fh.write("[rank2]: Traceback (most recent call last):\n"
                     '[rank2]:   File "train.py", line 336, in main\n'
                     "[rank2]:     loss.backward()\n"
                     "[rank2]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
                     "unbound_buffer.cc:78] Timed out waiting 30000ms for recv operation to "
                     "complete\n")
        elif role == "ok":
            fh.write("INFO:train:training finished\n")
        # role "crash": the rank hung in the next step and printed nothing more


def test_a_hang_after_an_evaluation_report_is_in_training(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _node)
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert rep["stage"] == "training", rep["stage"]
    assert rep["iterations"][0]["iteration"] == DONE + 1, rep["iterations"]
