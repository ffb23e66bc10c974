"""A diagnosis must not depend on which jobs the template store saw before.

The store is shared by every job an installation diagnoses.  A job of the first clean-room
generator (``benchmarks/foreign``, development seed 400: DeepSpeed, 256 nodes) prints
torchrun's warning prefix with an empty message (``W0224 10:33:37.0 3672803
torch/distributed/run.py:793]``), which masks to wildcards only.  Its template then took
every later line of four tokens: in seed 434 (MindSpeed on Ascend, an HCCL notify timeout
whose culprit hangs silently) rank 0's "[rank0]:done with setup ..." and the other nodes'
"[INFO] HCCL_CONNECT_TIMEOUT=1200 ..." became one event, the node that printed the former
looked set up apart from the rest, and it was named before the culprit, though the same job
diagnosed on a new store named the culprit first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from generated_cases import diagnose, generate


def _nodes(case: Path, truth: dict) -> list[str]:
    return [n["node"] for n in diagnose(case, truth)["nodes"][:3]]


def test_a_job_is_diagnosed_the_same_after_another_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before, _ = generate("foreign", 400, tmp_path)
    case, truth = generate("foreign", 434, tmp_path)
    assert truth["faulty_nodes"] == ["npu-node-272"]
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "fresh.drain3"))
    fresh = _nodes(case, truth)
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "shared.drain3"))
    _nodes(before, json.loads((before / "truth.json").read_text()))
    after = _nodes(case, truth)
    assert fresh[0] == "npu-node-272", fresh
    assert after == fresh
