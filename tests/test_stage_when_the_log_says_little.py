"""Stage and iteration when the culprit's last line does not date its failure.

* A worker that prints nothing while training (only rank 0 reports steps) and loses
  power: its log ends with start-up warnings, cut mid-line.  Its last line is from
  start-up, but its peers went on counting steps after it, and collectives hold every
  rank in step, so it was alive and training then: the job's last count dates its end.
* A rank whose training data fetch fails right after an evaluation printed its result:
  the traceback's own frame ("batch = next(train_iter)") says the training loop was
  running, whatever the log printed last.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bar_jobs import diagnose_three_nodes

STEPS = 40
DIES_AFTER = 25


def _ts(t: int) -> str:
    return f"2025-04-20T16:{30 + t // 60:02d}:{t % 60:02d}.000000Z"


def _silent_worker(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    counting = path.stem == "node-0"  # rank 0 reports steps; the other nodes only start up
    lines = [f"[{_ts(0)}] INFO: launching rank group of {path.stem}",
             f"[{_ts(1)}] /opt/conda/lib/python3.10/site-packages/transformers/tokenization_utils_base.py:1617: "
             "FutureWarning: `clean_up_tokenization_spaces` was not set.",
             f"[{_ts(1)}]   warnings.warn("]
    if role == "crash":  # power lost: the log stops mid-line, long after its last words
        path.write_text("\n".join([*lines, f"[{_ts(1)}] /opt/conda/lib/python3.10/site-pa"]))
        return
    if counting:  # rank 0 loads the model after the others' last start-up words
        lines += [f"[{_ts(1)}] INFO: Loading llama3_70b from /mnt/models/llama3_70b",
                  f"[{_ts(6)}] INFO: Model loaded: 70,553,706,496 parameters, FSDP over 24 ranks"]
    lines.append(f"[{_ts(7)}] INFO: Starting training from step 1")
    last = DIES_AFTER if failed else STEPS
    if counting:
        lines += [f"[{_ts(10 + 8 * n)}] INFO: step {n}: loss={7 - n * 0.1:.3f} lr=1.4e-04" for n in range(1, last + 1)]
    if failed:
        lines.append(f"[{_ts(10 + 8 * last + 30)}] ERROR: [Rank 0] Watchdog caught collective operation timeout: "
                     "WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.")
    else:
        lines.append(f"[{_ts(10 + 8 * STEPS + 5)}] INFO: training finished")
    path.write_text("\n".join(lines) + "\n")


def test_a_worker_silent_while_training_died_where_its_peers_stopped_counting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _silent_worker)
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert rep["stage"] == "training", (rep["stage"], rep["onset"])
    its = [i["iteration"] for i in rep["iterations"][:3]]
    assert any(abs(i - (DIES_AFTER + 1)) <= 1 for i in its), its


PARQUET = ("pyarrow.lib.ArrowInvalid: Parquet magic bytes not found in footer. Either the file is "
           "corrupted or this is not a parquet file.")


def _train_data_fetch(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"[{_ts(0)}] INFO train.py:213 - Starting training at step 1 / {STEPS}"]
    last = DIES_AFTER if failed else STEPS
    for n in range(1, last + 1):
        lines.append(f"[{_ts(4 * n)}] INFO train.py:255 - step {n}/{STEPS} loss={7 - n * 0.1:.4f}")
        if n % 5 == 0:
            lines.append(f"[{_ts(4 * n + 2)}] INFO train.py:220 - eval step {n}: val_loss=3.36 ppl=28.9")
    if failed and role == "crash":
        lines += ["Traceback (most recent call last):",
                  '  File "/workspace/train.py", line 412, in <module>',
                  "    main()",
                  '  File "/workspace/train.py", line 365, in main',
                  "    batch = next(train_iter)",
                  '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 701, '
                  "in __next__",
                  "    data = self._next_data()",
                  PARQUET]
    elif failed:
        lines.append(f"[{_ts(4 * last + 40)}] ERROR train.py:300 - Horovod allreduce timed out waiting for rank 2")
    else:
        lines.append(f"[{_ts(4 * STEPS + 5)}] INFO train.py:400 - training finished")
    path.write_text("\n".join(lines) + "\n")


def test_a_training_data_fetch_after_an_evaluation_is_training(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _train_data_fetch)
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert rep["stage"] == "training", (rep["stage"], rep["onset"])
