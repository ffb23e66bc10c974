"""A phase announced in words that name no iteration, and one ended in words of its own.

Rank 0's node prints "Validating ..." after the step that ends every 120th; the step
lines carry no clock.  When one node hangs in that evaluation, the others' watchdogs
fire: the announcement names no step to match, but it came after node 0's own line of
the last completed step, and healthy runs print it too, so the job was evaluating.

A JSON logger's "eval start" / "eval done" pair: a loss that turned non-finite in the
step after "eval done" failed in training, not in the evaluation that was over.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bar_jobs import diagnose_three_nodes

EVERY = 10
EVAL_EVERY = 120
STEPS = 1200
HANG_AFTER = 840


def _announcing(words: str):
    def write(path: Path, failed: bool, role: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        node = int(path.stem.split("-")[1])
        out = ["INFO:train:world size 6, 2 ranks per node\n"]
        last = HANG_AFTER if failed else STEPS
        for n in range(EVERY, last + 1, EVERY):
            out.append(f"step {n}/{STEPS} | loss {2 + 1 / n:.4f} | step time 1.02 s\n")
            if n % EVAL_EVERY == 0 and node == 0:
                out.append(f"{words}\n")
        if not failed:
            out.append("INFO:train:training finished\n")
        elif role == "victim":
            out.append(f"[rank{2 * node}]:[E ProcessGroupNCCL.cpp:629] [Rank {2 * node}] Watchdog "
                       "caught collective operation timeout: WorkNCCL(SeqNum=2523, OpType=ALLREDUCE, "
                       "Timeout(ms)=1800000) ran for 1800394 milliseconds before timing out.\n")
        path.write_text("".join(out))
    return write


@pytest.mark.parametrize("words", ["Running validation ...", "Validating ..."])
def test_an_announcement_after_the_last_count_dates_the_phase(tmp_path, monkeypatch, words):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _announcing(words))
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert rep["stage"] == "evaluation"
    # the validation ran after the step it followed: that step comes right after the
    # interval in progress, as strongly, whatever slow or odd steps came before
    first, second = rep["iterations"][:2]
    assert second["iteration"] == HANG_AFTER and second["score"] >= 0.9 * first["score"], rep["iterations"]


def _json_log(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    node = int(path.stem.split("-")[1])
    out = []

    def rec(msg: str, **kw) -> None:
        out.append(json.dumps({"level": kw.pop("level", "INFO"), "rank": 2 * node,
                               "msg": msg, **kw}) + "\n")
    last = 1430 if failed else 2000
    for n in range(EVERY, last + 1, EVERY):
        rec("train", step=n, loss=round(2 + 1 / n, 4))
        if n % 130 == 0:
            rec("eval start", step=n)
            rec("eval done", step=n, val_loss=2.2254)
    if not failed:
        rec("training finished")
    elif role == "crash":
        rec("non-finite loss, aborting", level="ERROR", step=1431, loss=None)
        out.append("RuntimeError: loss is nan at step 1431\n")
    else:
        out.append(f"[rank{2 * node}]:[E ProcessGroupNCCL.cpp:629] [Rank {2 * node}] Watchdog "
                   "caught collective operation timeout: WorkNCCL(SeqNum=9911, OpType=ALLREDUCE, "
                   "Timeout(ms)=600000) ran for 600394 milliseconds before timing out.\n")
    path.write_text("".join(out))


def test_eval_done_ends_the_evaluation(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _json_log)
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert rep["stage"] == "training"
    assert [i["iteration"] for i in rep["iterations"]][:1] == [1431], rep["iterations"]


@pytest.mark.parametrize("line", ['{"msg": "eval done", "step": 130, "val_loss": 5.9454}',
                                  "evaluation finished in 145.7 s", "validation complete"])
def test_words_that_end_an_evaluation(line):
    from l4.profiles import choose_profile
    profile = choose_profile([], "generic")
    assert profile.phase_of(line) == "evaluation"
    assert any(rx.search(line) for st, rx in profile.resume_phase if st == "evaluation")


def _preempted(path: Path, failed: bool, role: str) -> None:
    """NeMo-like: untimed iteration lines (24, 49, ...), timed save lines; the whole job
    preempted three printed steps after its last save."""
    path.parent.mkdir(parents=True, exist_ok=True)
    node = int(path.stem.split("-")[1])
    out = []
    last = 1074 if failed else 1999
    for n in range(24, last + 1, 25):
        out.append(f"Training epoch 0, iteration {n}/2000 | lr: 1e-05 | global_step: {n} | "
                   f"reduced_train_loss: {2 + 1 / n:.3f} | train_step_timing in s: 11.2\n")
        if (n + 1) % 500 == 0:
            def clock(t: int) -> str:
                return f"2024-09-24 {t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
            t = n * 11
            out.extend(f"Validation: iteration {k}/50\n" for k in (10, 20, 35, 45))
            if node == 0:
                out.append(f"Epoch 0, global step {n}: 'val_loss' reached 2.61 (best 2.61), "
                           f"saving model to '/ckpt/step={n}.ckpt' as top 1\n")
            out.append(f"[NeMo I {clock(t)} dist_ckpt_io:301] Global Checkpoint Save : Rank: "
                       f"{2 * node} : Iteration: {n} : Start time: {1727140000 + t}.507s : "
                       "Save duration: 3.248s\n")
            out.append(f"[NeMo I {clock(t + 120)} dist_ckpt_io:312] Successfully saved "
                       f"checkpoint from iteration {n:7d} to /ckpt/step={n}.ckpt\n")
    if failed:
        out.append(f"slurmstepd: error: *** STEP 5442839.0 ON node-{node} CANCELLED AT "
                   "2024-09-24T03:30:36 DUE TO PREEMPTION ***\n")
    path.write_text("".join(out))


def test_a_save_seen_to_end_is_over_whatever_the_clock_says(tmp_path, monkeypatch):
    """The last timed line before the cancel is a save's; the untimed iteration lines the
    nodes printed after the line that ended it say the job was training again."""
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _preempted)
    assert rep["stage"] == "training", rep["stage"]
    its = [i["iteration"] for i in rep["iterations"]]
    assert its and 1074 <= its[0] <= 1099, its
