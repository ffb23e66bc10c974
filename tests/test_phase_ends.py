"""When was a save or an evaluation over?  Two jobs of the third clean-room generator
(``benchmarks/foreign3``, development seeds) that died training after a save, both
called checkpointing.

* Seed 221 (nanoGPT under SkyPilot, 12 nodes): rank 0 prints ``iter 250: loss 1.91, time
  2071.62ms`` without a clock, saves every 40 iterations, and one worker's GPU hung in
  the step after "iter 250", which followed the save.  A counter printed as lines of its
  own arrives in order, so one new count after a save ends it; only a progress bar
  (redrawn on stderr, its last update reaching a ``--tee`` log after the banner that
  followed it) needs two.
* Seed 262 (a Kubeflow PyTorchJob, 8 nodes, preempted): rank 0 prints "saving checkpoint
  /fsx/ckpt/run-8349/global_step5500", then "checkpoint global_step5500 committed", then
  steps every 7 minutes; the job was stopped 5 minutes after the commit.  In healthy runs
  that commit is what follows every save before the next step.  The line that ends a
  phase is looked for before the next counted step only: read up to the next save, the
  next evaluation's report was taken for the end of the save, and the save never ended.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_cases import diagnose, generate


@pytest.mark.parametrize("seed", [221, 262])
def test_a_job_that_died_training_after_a_save_was_training(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    case, truth = generate("foreign3", seed, tmp_path / "cases")
    assert truth["stage"] == "training"
    rep = diagnose(case, truth)
    assert rep["stage"] == "training", (rep["stage"], rep["onset"])
    assert truth["iteration"] in [i["iteration"] for i in rep["iterations"][:3]]
    assert rep["nodes"][0]["node"] in truth["faulty_nodes"]
