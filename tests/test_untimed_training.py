"""A job whose training lines carry no clock while an earlier stage line does.

Hugging Face's example scripts log "01/07/2024 03:03:31 - INFO - __main__ -
Training/evaluation parameters TrainingArguments(" with a time, and the training progress
as a tqdm bar and bare dicts ("{'loss': 2.31, 'learning_rate': 1e-05, 'epoch': 0.5}")
without one.  The last timed stage line before the failure is then long over; the untimed
training lines printed after it say where the job was.  The simulator's job of seed 7 is
such a job (a GPU that fell off the bus in training, at iteration 2535).
"""

from __future__ import annotations

import glob

from l4.engine import diagnose
from l4.sim.simulate import simulate_suite


def test_untimed_training_lines_after_a_timed_stage_line_say_the_job_was_training(tmp_path):
    (truth,) = simulate_suite(tmp_path, [7], workers=1)
    case = tmp_path / "case-7"
    assert truth["framework"] == "hf" and truth["stage"] == "training"
    rep = diagnose(case / "failed", baselines=sorted(glob.glob(str(case / "baseline-*"))),
                   store_path=tmp_path / "t.drain3")
    assert rep["nodes"][0]["node"] == truth["faulty_nodes"][0], rep["nodes"][:2]
    assert rep["stage"] == "training", (rep["stage"], rep.get("onset"))
