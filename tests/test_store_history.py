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
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from l4.cli import app

ROOT = Path(__file__).resolve().parents[1]


def _case(out: Path, seed: int) -> tuple[Path, dict]:
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "foreign" / "gen.py"), "--out", str(out),
                    "--seeds", f"{seed}..{seed}"], check=True, capture_output=True)
    case = out / f"case-{seed}"
    return case, json.loads((case / "truth.json").read_text())


def _nodes(case: Path, truth: dict) -> list[str]:
    args = ["diagnose", str(case / "failed"), "--no-prefect", "--no-kb", "-f", "json"]
    for b in truth["baselines"]:
        args += ["-b", str(case / b)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return [n["node"] for n in json.loads(res.stdout)["nodes"][:3]]


def test_a_job_is_diagnosed_the_same_after_another_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before, _ = _case(tmp_path, 400)
    case, truth = _case(tmp_path, 434)
    assert truth["faulty_nodes"] == ["npu-node-272"]
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "fresh.drain3"))
    fresh = _nodes(case, truth)
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "shared.drain3"))
    _nodes(before, json.loads((before / "truth.json").read_text()))
    after = _nodes(case, truth)
    assert fresh[0] == "npu-node-272", fresh
    assert after == fresh
