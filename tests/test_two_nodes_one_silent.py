"""A two-node job whose worker loses power while only the head prints anything.

The head (rank 0) prints every step ("iter 244: loss ..."), an evaluation's result every 4
steps ("step 244: train loss ..., val loss ...") and a save every 8; the worker prints its
start-up and nothing more, and its log stops mid-line.  The head then waits 20 minutes in
an all-reduce, its watchdog aborts it, and its launcher prints its failure summary.

* **Who:** with one other node to wait for, a node whose trouble began with a collective
  timeout waited for that node; the silent one is the culprit, though the head printed
  every error line of the job (its abort, its launcher's summary, its scheduler's return
  codes: how it went down, not why).
* **Stage:** the head's last line before the timeout is an evaluation's *result*: the
  evaluation was over, and the step after it was training (not "evaluation", though the
  healthy runs evaluate every 4 steps and 244 is one of them).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from l4 import spatial
from l4.cli import app
from l4.stage import reports_result

STEPS = 250
DIES_AFTER = 244
START = 224


def _head(failed: bool, seed: int) -> list[str]:
    p = "(head, rank=0, pid=44128) "
    out = [p + "number of parameters: 123.69M",
           p + "using fused AdamW: True",
           p + "compiling the model... (takes a ~minute)"]
    rng = np.random.default_rng(seed)
    for n in range(START + 1, (DIES_AFTER if failed else STEPS) + 1):
        loss = 1.5 - 0.003 * (n - START) + rng.normal(0, 0.02)
        out.append(p + f"iter {n}: loss {loss:.4f}, time {6500 + rng.normal(0, 200):.2f}ms, "
                   f"mfu {39 + rng.normal(0, 1):.2f}%")
        if n % 4 == 0:
            out.append(p + f"step {n}: train loss {loss:.4f}, val loss {loss + 0.05:.4f}")
        if n % 8 == 0:
            out.append(p + "saving checkpoint to /checkpoints/run-1344")
    if not failed:
        return out + ["I 07-20 19:25:05 log_lib.py:466] Job finished (status: SUCCEEDED)."]
    ts = "[rank0]:[E822 19:42:12.548480987 ProcessGroupNCCL.cpp:632]"
    return out + [
        p + f"{ts} [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=85157, "
        "OpType=ALLREDUCE, NumelIn=25427968, NumelOut=25427968, Timeout(ms)=1200000) ran for "
        "1200027 milliseconds before timing out.",
        p + "[rank0]:[E822 19:42:12.548480987 ProcessGroupNCCL.cpp:684] [Rank 0] Some NCCL operations "
        "have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
        "operations might run on corrupted/incomplete data.",
        p + "terminate called after throwing an instance of 'c10::DistBackendError'",
        p + "E0822 19:42:17.102000 44128 torch/distributed/elastic/multiprocessing/api.py:869] "
        "failed (exitcode: -6) local_rank: 0 (pid: 44141) of binary: /usr/bin/python3",
        p + "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        p + "============================================================",
        p + "main.py FAILED",
        p + "------------------------------------------------------------",
        p + "Root Cause (first observed failure):",
        p + "  exitcode  : -6 (pid: 44141)",
        p + "  error_file: <N/A>",
        p + "  traceback : Signal 6 (SIGABRT) received by PID 44141",
        "ERROR: Job 22 failed with return code list: [134, 137]",
        "I 08-22 19:42:17 log_lib.py:466] Job finished (status: FAILED).",
    ]


def _worker(failed: bool) -> list[str]:
    p = "(worker1, rank=1, pid=245671, ip=10.188.133.41) "
    out = [p + "sky-ce30-alice-worker1:245684:245684 [0] NCCL INFO cudaDriverVersion 12040",
           p + "sky-ce30-alice-worker1:245684:245684 [0] NCCL INFO NET/Socket : Using [0]eth0:10.188.133.41<0>",
           p + "sky-ce30-alice-worker1:245684:245775 [0] NCCL INFO comm 0x7f46eb4cc2b1 rank 1 nranks 2 "
           "cudaDev 0 nvmlDev 0 busId 1b000 commId 0x7ff4d7d4c62317aa - Init COMPLETE"]
    return out + [p + "sky-ce30-alice-worker1:245684:245684 [0] NCCL"] if failed else out


def _write(job: Path, failed: bool, seed: int = 7) -> None:
    (job / "logs").mkdir(parents=True)
    (job / "logs" / "sky-ce30-alice-head.log").write_text("\n".join(_head(failed, seed)) + "\n")
    (job / "logs" / "sky-ce30-alice-worker1.log").write_text("\n".join(_worker(failed)) + "\n")


def _diagnose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The failed job and two healthy runs of it, diagnosed through the CLI."""
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    _write(tmp_path / "failed", True)
    _write(tmp_path / "base-0", False, 3)
    _write(tmp_path / "base-1", False, 5)
    res = CliRunner().invoke(app, ["diagnose", str(tmp_path / "failed"), "-b", str(tmp_path / "base-0"),
                                   "-b", str(tmp_path / "base-1"), "--no-prefect", "--no-kb", "-f", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture()
def report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    return _diagnose(tmp_path, monkeypatch)


def test_the_silent_node_is_who_the_waiting_one_waited_for(report: dict) -> None:
    assert report["nodes"][0]["node"] == "sky-ce30-alice-worker1", report["nodes"]
    assert report["nodes"][0]["evidence"]["missing_symptom"] == 1.0


def test_after_an_evaluation_printed_its_result_the_job_was_training(report: dict) -> None:
    assert report["stage"] == "training", (report["stage"], report["onset"])
    its = [i["iteration"] for i in report["iterations"][:3]]
    assert DIES_AFTER + 1 in its, its


def test_the_waiting_node_alone_still_counts_what_it_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without reading who waited first the head's abort and launcher summary outweigh
    the worker's silence: the rule is what decides this job.  The stage does not hang on
    the culprit: the head's log says training too."""
    monkeypatch.setattr(spatial, "ECHO_FIRST", False)
    monkeypatch.setattr(spatial, "_missing_beside_one", lambda job, cross: np.zeros(2))
    rep = _diagnose(tmp_path, monkeypatch)
    assert rep["nodes"][0]["node"] == "sky-ce30-alice-head"
    # read from the head's own log, its last evaluation is over all the same
    assert rep["stage"] == "training", (rep["stage"], rep["onset"])


@pytest.mark.parametrize(("template", "result"), [
    ("step <*>: train loss <*>, val loss <*>", True),
    ("{'eval_loss': <*>, 'eval_runtime': <*>, 'epoch': <*>}", True),
    ("validation loss at iteration <*> | lm loss value: <*> | lm loss PPL: <*> |", True),
    ("eval: iteration <*> val_loss=<*>", True),
    ("***** Running Evaluation *****", False),
    ("running evaluation at iteration <*>", False),
    ("Num examples = <*>", False),
    ("Evaluating: <*>%|##| <*>/<*> [<*><<*>, <*>it/s, loss=<*>]", False),
])
def test_an_evaluation_result_is_told_from_its_announcement(template: str, result: bool) -> None:
    assert reports_result(template) is result
