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

from pathlib import Path

import pytest
from generated_cases import diagnose, generate


def test_a_resumed_runs_unnumbered_steps_count_from_its_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    case, truth = generate("foreign3", 252, tmp_path / "cases")
    assert (truth["stage"], truth["iteration"], truth["faulty_nodes"]) == ("training", 27100, ["algo-19"])
    rep = diagnose(case, truth)
    assert rep["nodes"][0]["node"] == "algo-19", rep["nodes"][:2]
    assert rep["stage"] == "training", (rep["stage"], rep["onset"])
    its = [i["iteration"] for i in rep["iterations"][:3]]
    assert truth["iteration"] in its, its
