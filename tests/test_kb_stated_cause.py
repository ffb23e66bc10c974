"""NCCL names its own cause: the line after "Last error:" is what the report is matched on.

torch raises NCCL's failures as one message over several lines: a generic wrapper
("DistBackendError: NCCL error in: ..., internal error - please report this issue to the
NCCL developers", "ncclInternalError: Internal check failed."), then "Last error:", then
what NCCL itself saw.  The wrapper reads the same for every cause, so matched on its own it
points at whichever library pattern quotes the same wrapper.  These tests build such a
report with the real library and the real MiniLM model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from l4 import rootcause

WRAPPER = [
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "internal error - please report this issue to the NCCL developers, NCCL version 2.19.3",
    "ncclInternalError: Internal check failed.",
    "Last error:",
]
CAUSE = "Bootstrap : no socket interface found"
ECHOES = [
    "srun: error: gpu-r6n10: tasks 0-7: Terminated",
    "srun: Force Terminated StepId=9734213.0",
    "[rank: 2] Received SIGTERM: 15",
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
    "srun: error: gpu-r6n15: tasks 40-47: Exited with exit code 1",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "Root Cause (first observed failure):",
    "exitcode  : 1 (pid: 41)",
    "To avoid data inconsistency, we are taking the entire process down.",
]


def _event(i: int, text: str, node: str, line: int, *, nodes: list[str] | None = None) -> dict:
    return {"event_id": f"e{i}", "template": text, "score": 3.0 - 0.1 * i, "count": 1,
            "nodes": nodes or [node], "symptom": False,
            "examples": [{"file": f"logs/{node}.log", "line": line, "node": node, "text": f"40: [rank40]: {text}"}]}


def _report(cause_node: str = "w3", cause_line: int = 203) -> list[dict]:
    """The culprit w3 printed the wrapper at lines 200-202; the stated cause, ranked below
    the report's first 12 events, at ``cause_line`` of ``cause_node``."""
    events = [_event(i, t, "w3", 200 + i) for i, t in enumerate(WRAPPER)]
    events += [_event(3 + i, t, "w0", 500 + i, nodes=["w0", "w1", "w2"]) for i, t in enumerate(ECHOES)]
    events.append(_event(99, CAUSE, cause_node, cause_line))
    return events


def test_the_line_after_last_error_is_matched_with_it() -> None:
    units = rootcause.units_from_events(_report())
    stated = [u for u in units if u.text.startswith("Last error:")]
    assert stated and all(CAUSE in u.text for u in stated)
    assert stated[0].event_index == 2  # where "Last error:" ranks, not where the cause does
    # the generic lines of the same message are its wrapper, not the culprit's own words
    assert {u.role for u in units if u.event_id in ("e0", "e1")} == {"wrapper"}


@pytest.mark.parametrize(("node", "line"), [("w0", 203), ("w3", 205)])
def test_only_the_next_line_of_the_same_file_is_the_stated_cause(node: str, line: int) -> None:
    units = rootcause.units_from_events(_report(cause_node=node, cause_line=line))
    assert not any(CAUSE in u.text for u in units)
    assert all(u.role != "wrapper" for u in units)


def test_the_stated_cause_decides_pattern_and_category(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = rootcause.match_events(_report(), kb=kb)
    assert m.root_causes[0]["pattern_id"] == "nccl-socket-ifname-no-interface"
    assert m.categories[0]["category"] == "platform"
    monkeypatch.setattr(rootcause, "STATED_CAUSE", False)  # the wrapper alone: a framework bug
    m = rootcause.match_events(_report(), kb=kb)
    assert m.root_causes[0]["pattern_id"] != "nccl-socket-ifname-no-interface"
