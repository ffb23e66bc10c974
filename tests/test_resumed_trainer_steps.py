"""Steps of a resumed Hugging Face Trainer run whose lines print no step number.

A job of the third clean-room generator (``benchmarks/foreign3``, development seed 252:
LlamaFactory under SageMaker's mpirun, 24 nodes).  Rank 0 prints ``{'loss': 1.27,
'grad_norm': 0.58, 'learning_rate': ..., 'epoch': 0.86}`` every 50 steps and saves every
700 ("Saving model checkpoint to /opt/ml/checkpoints/checkpoint-25900"): the step is only
in the save's path, which the parser masks.  The run resumed from checkpoint-25200
("Loading model from .../checkpoint-25200.") and saved twice before one worker lost
power, its log a SageMaker start-up cut short.  Read from the paths, the two saves and
the checkpoint it resumed from are three anchors (a resumed run counts on from its
checkpoint), the loss lines count every 50 steps, and the job was training at step
27100, not in start-up (it was called data loading, with no iteration).
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


def test_a_resumed_runs_unnumbered_steps_count_from_its_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "foreign3" / "gen.py"), "--out",
                    str(tmp_path / "cases"), "--seeds", "252..252"], check=True, capture_output=True)
    case = tmp_path / "cases" / "case-252"
    truth = json.loads((case / "truth.json").read_text())
    assert (truth["stage"], truth["iteration"], truth["faulty_nodes"]) == ("training", 27100, ["algo-19"])
    args = ["diagnose", str(case / "failed"), "--no-prefect", "--no-kb", "-f", "json"]
    for b in truth["baselines"]:
        args += ["-b", str(case / b)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["nodes"][0]["node"] == "algo-19", rep["nodes"][:2]
    assert rep["stage"] == "training", (rep["stage"], rep["onset"])
    its = [i["iteration"] for i in rep["iterations"][:3]]
    assert truth["iteration"] in its, its
