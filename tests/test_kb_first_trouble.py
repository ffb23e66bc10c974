"""The category follows where the culprit's trouble began, and Slurm's stated reason.

After one node fails, its own reaction (launcher teardown, ChildFailedError) and its peers'
timeouts fill the top of the report; the line that says what went wrong is the culprit's
*earliest* trouble line, which may rank below the events that are matched.  These tests
build such a report with the real library and the real MiniLM model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from l4 import rootcause

PORT_ERROR = ("w3:3582432:3582827 [2] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_2:1 "
              "Got async event : port error")

# what the culprit and its peers print after the fault, loudest first (all of it generic)
REACTIONS = [
    "[PG 0 (default_pg) Rank 10] Process group watchdog thread terminated with exception: NCCL error: "
    "remote process exited or there was a network error, NCCL version 2.20.5",
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
    "remote process exited or there was a network error, NCCL version 2.20.5",
    "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
    "subsequent GPU operations might run on corrupted/incomplete data.",
    "To avoid data inconsistency, we are taking the entire process down.",
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    "torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 4002 closing signal SIGTERM",
    "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -6) local_rank: 0 (pid: 41) "
    "of binary: /usr/bin/python",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "Root Cause (first observed failure):",
    "exitcode  : -6 (pid: 41)",
    "traceback : Signal 6 (SIGABRT) received by PID 41",
]


def _report_events(first_rank: int) -> list[dict]:
    """The culprit w3 printed the port error at line 100 and every reaction after it; the
    victims w0..w2 printed the same reactions.  The port error is ranked ``first_rank``."""
    nodes = ["w3", "w0", "w1", "w2"]
    events = [{"event_id": f"r{i}", "template": text, "score": 3.0 - 0.1 * i, "count": 4,
               "nodes": nodes, "symptom": False,
               "examples": [{"file": f"logs/{n}.log", "line": 110 + i, "node": n, "text": text}
                            for n in nodes[:2]]}
              for i, text in enumerate(REACTIONS)]
    own = {"event_id": "port", "template": PORT_ERROR, "score": 1.0, "count": 1, "nodes": ["w3"],
           "symptom": False, "examples": [{"file": "logs/w3.log", "line": 100, "node": "w3",
                                            "text": PORT_ERROR}]}
    events.insert(first_rank, own)
    return events


def test_the_culprits_first_line_is_matched_even_below_the_cut() -> None:
    events = _report_events(first_rank=len(REACTIONS))  # ranked last, 13th
    units = rootcause.units_from_events(events)
    first = [u for u in units if u.first]
    assert [u.text for u in first] == [PORT_ERROR]
    # without the first trouble, only the report's first 12 events are matched
    assert all(u.event_id != "port" for u in rootcause.units_from_events(events, max_events=12)
               if not u.first)


def test_first_trouble_is_the_earliest_trouble_line_of_the_top_node() -> None:
    events = _report_events(first_rank=5)
    assert rootcause._first_trouble(events, "w3") == {5}
    # a victim's earliest line is not the culprit's
    assert rootcause._first_trouble(events, "w0") == {0}
    assert rootcause._first_trouble(events, None) == set()


def test_the_culprits_first_line_decides_the_category(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _report_events(first_rank=len(REACTIONS))
    cats = rootcause.match_events(events, kb=kb).categories
    assert cats[0]["category"] == "hardware"
    assert cats[0]["confidence"] - cats[1]["confidence"] > 0.2
    # the reactions alone single out no team: no category is even odds-on, and hardware
    # is far less sure than with the culprit's first line
    monkeypatch.setattr(rootcause, "FIRST_TROUBLE", False)
    alone = rootcause.match_events(events, kb=kb).categories
    hw = next(c["confidence"] for c in alone if c["category"] == "hardware")
    assert alone[0]["confidence"] < 0.5, alone
    assert hw < cats[0]["confidence"] - 0.15
    # ... and with the culprit's own teardown lines read as its statement (as before
    # ``TEARDOWN_AS_ECHO``), hardware is at best a coin toss with the runner-up
    monkeypatch.setattr(rootcause, "TEARDOWN_AS_ECHO", False)
    as_own = rootcause.match_events(events, kb=kb).categories
    assert as_own[0]["confidence"] - as_own[1]["confidence"] < 0.1, as_own


CANCELLED = "slurmstepd: error: *** STEP 4732372.0 ON cn-d214 CANCELLED AT 2025-03-17T18:18:56 ***"


@pytest.mark.parametrize(("line", "codes"), [
    (CANCELLED, {"SLURM_CANCELLED"}),
    ("slurmstepd: error: *** STEP 4077932.0 ON nid001429 CANCELLED AT 2025-08-25T00:22:19 DUE TO TASK "
     "FAILURE ***", {"SLURM_TASK_FAILURE"}),
    ("slurmstepd: error: *** JOB 32391783 ON cn119 CANCELLED AT 2021-06-18T13:05:36 DUE TO PREEMPTION ***",
     {"SLURM_PREEMPTED"}),
])
def test_slurm_says_why_it_cancelled(line: str, codes: set[str]) -> None:
    assert (rootcause.extract_codes(line) | rootcause.stated_reasons(line)) == codes
    # a cancel for no fault of its own carries no code: it only contradicts other reasons
    assert not rootcause.extract_codes(line) & {"SLURM_CANCELLED", "SLURM_TASK_FAILURE"}


def test_a_teardown_cancel_is_no_preemption(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm's reasonless cancel (the teardown after a task failed) reads almost like a
    preemption; the reason Slurm states (none) contradicts the preemption pattern."""
    def scores(line: str) -> dict[str, float]:
        return {r["pattern_id"]: r["similarity"] for r in rootcause.match_lines([line], kb=kb)}

    got = scores(CANCELLED)
    assert next(iter(got)) == "slurm-step-teardown"
    assert got.get("slurm-preemption", 0.0) < 0.7
    preempted = CANCELLED.replace(" ***", " DUE TO PREEMPTION ***")
    assert next(iter(scores(preempted))) == "slurm-preemption"
    monkeypatch.setattr(rootcause, "CONFLICT_FAMILIES", ("SIG", "XID"))  # without the reason
    assert scores(CANCELLED)["slurm-preemption"] > 0.8


SYSTEM_ERROR = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), "
                "NCCL version 2.21.5")


def test_nccls_result_tells_wrappers_apart(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every NCCL failure is wrapped in the same DistBackendError line; only NCCL's result
    ("unhandled system error", "invalid argument") tells them apart, and the embedding
    hardly sees it.  A pattern about another result is contradicted."""
    assert rootcause.extract_codes(SYSTEM_ERROR) == {"ncclSystemError"}
    got = rootcause.match_lines([SYSTEM_ERROR], kb=kb)
    assert got[0]["pattern_id"] == "nccl-shm-exhausted"  # NCCL's system error: /dev/shm
    assert "nccl-library-older-than-torch-build" not in [r["pattern_id"] for r in got[:1]]
    monkeypatch.setattr(rootcause, "CONFLICT_FAMILIES", ("SIG", "XID", "SLURM_"))
    monkeypatch.setattr(rootcause, "FRAME_FACTOR", 1.0)
    # without it (and without the frame check, which also sees "unhandled system error"
    # and "invalid argument" fill one frame), an "invalid argument" pattern comes first
    assert rootcause.match_lines([SYSTEM_ERROR], kb=kb)[0]["pattern_id"] == "nccl-library-older-than-torch-build"


def test_invalid_usage_and_invalid_argument_do_not_contradict() -> None:
    assert not rootcause._conflicts({"ncclInvalidArgument"}, {"ncclInvalidUsage"})
    assert rootcause._conflicts({"ncclInvalidArgument"}, {"ncclSystemError"})
    assert not rootcause._conflicts({"ncclInvalidArgument"}, {"ncclSystemError", "ncclInvalidUsage"})


def test_a_wrapped_launch_failure_is_the_launch_failure(kb: Path) -> None:
    """CUDA's error name is exact evidence however the line wraps it: the watchdog's
    wrapper reads like every NCCL failure to the embedding."""
    line = ("[E0218 05:48:02.164272439 ProcessGroupNCCL.cpp:1515] [PG 0 Rank 345] Process group watchdog "
            "thread terminated with exception: CUDA error: unspecified launch failure")
    assert rootcause.extract_codes(line) == {"CUDA_LAUNCH_FAILURE"}
    assert rootcause.match_lines([line], kb=kb)[0]["pattern_id"] == "cuda-unspecified-launch-failure"
