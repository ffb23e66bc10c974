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


def _write_node(path: Path, *, failed: bool, culprit: bool) -> None:
    """A node of a three-node job: rank 0 of each node logs its steps; in the failed job
    the culprit's NCCL bootstrap fails at start-up in torch's own wording (the wrapper,
    "Last error:", what NCCL saw) and its peers time out on the store."""
    lines = [f"2024-05-02 10:00:0{k} INFO starting rank {k}" for k in range(3)]
    if failed and culprit:
        lines += [
            "node-1:2622511:2622511 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth1",
            "node-1:2622511:2622511 [0] bootstrap.cc:48 NCCL WARN Bootstrap : no socket interface found",
            "[rank1]: Traceback (most recent call last):",
            '[rank1]:   File "/opt/train/pretrain.py", line 112, in <module>',
            "[rank1]:     dist.barrier()",
            *(f"[rank1]: {t}" for t in WRAPPER),
            f"[rank1]: {CAUSE}",
        ]
    elif failed:
        lines += ["2024-05-02 10:05:00 ERROR [c10d] The client socket has timed out after 300s "
                  "while trying to connect to (node-0, 29500)."]
    else:
        lines += [f"2024-05-02 10:01:{k:02d} INFO step {k} loss 2.{k}" for k in range(20)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def test_the_engine_reports_the_heading_and_the_stated_cause_wins(tmp_path: Path, kb: Path) -> None:
    """End to end: the engine's report (not a hand-made one) keeps "Last error:" as an
    event, because a heading that names an error introduces the cause; the matcher then
    reads the line after it, and the platform's misconfigured interface wins over the
    wrapper's "internal error" (a framework bug, read alone)."""
    from l4.engine import diagnose
    from l4.pipeline import attach_root_causes

    for n in range(3):
        _write_node(tmp_path / "failed" / "logs" / f"node-{n}.log", failed=True, culprit=n == 1)
        _write_node(tmp_path / "base" / "logs" / f"node-{n}.log", failed=False, culprit=False)
    report = diagnose(tmp_path / "failed", baselines=[tmp_path / "base"])
    assert report["nodes"][0]["node"] == "node-1"
    assert any(ev["template"].strip().endswith("Last error:") for ev in report["events"])
    attach_root_causes(report, kb=kb)
    assert report["root_causes"][0]["pattern_id"] == "nccl-socket-ifname-no-interface"
    assert report["categories"][0]["category"] == "platform"
