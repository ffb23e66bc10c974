"""A job that ran more steps than its healthy runs, and failed in its training loop.

Why: healthy runs "of the same configuration" are not always as long as the failed one
(a shorter run, a smoke test; a resumed job goes on past where they stopped).  Having
passed their last step, a job whose error named training (a NaN loss raised from the
training step) was called "finalization", as if the final save had failed.  The error's
own words stand: it failed in training, at the step it printed.
"""

from __future__ import annotations

from l4.engine import diagnose


def _job(root, steps: int, *, nan_at: int | None = None) -> None:
    logs = root / "logs"
    logs.mkdir(parents=True)
    for node in range(3):
        out: list[str] = []

        def say(text: str, out: list[str] = out, node: int = node) -> None:
            t = 2 * len(out)
            out.append(f"2025-03-01 10:{t // 60:02d}:{t % 60:02d},000 [rank{node}] {text}")

        say("INFO initializing process group backend=nccl")
        say("INFO loading dataset shards: 64")
        say("INFO building model: 1.3B parameters")
        for step in range(1, steps + 1):
            if nan_at is not None and step == nan_at:
                say(f"INFO step {step} loss=nan grad_norm=nan")
                out.append("Traceback (most recent call last):")
                out.append('  File "/app/train.py", line 211, in train_step')
                out.append("    loss.backward()")
                out.append(f"FloatingPointError: Loss is nan at step {step}, stopping training")
                break
            say(f"INFO step {step} loss={3.0 - step / 100:.3f} grad_norm=0.4")
        else:
            say("INFO training finished, saving final model to /ckpt/final")
            say("INFO saved final model")
        (logs / f"node-{node}.log").write_text("\n".join(out) + "\n")


def test_a_nan_loss_past_the_healthy_runs_last_step_is_training(tmp_path):
    for k in range(2):
        _job(tmp_path / f"ok{k}", steps=30)
    _job(tmp_path / "failed", steps=60, nan_at=47)
    report = diagnose(tmp_path / "failed", baselines=[tmp_path / "ok0", tmp_path / "ok1"],
                      store_path=False)
    assert report["stage"] == "training"
    assert 47 in [i["iteration"] for i in report["iterations"][:3]]


def test_a_failed_final_save_names_the_last_iteration_it_saved(tmp_path):
    """A final save runs after the loop: the report names the iteration it failed after
    (step 30's weights), where it used to name none, or an early spike."""
    for k in range(2):
        _job(tmp_path / f"ok{k}", steps=30)
    _job(tmp_path / "failed", steps=30)
    for log in (tmp_path / "failed" / "logs").iterdir():
        lines = log.read_text().splitlines()[:-1]  # no "saved final model"
        lines += ["Traceback (most recent call last):",
                  '  File "/app/train.py", line 305, in save_final',
                  "    torch.save(state, path)",
                  "OSError: [Errno 122] Disk quota exceeded: '/ckpt/final/model.pt'"]
        log.write_text("\n".join(lines) + "\n")
    report = diagnose(tmp_path / "failed", baselines=[tmp_path / "ok0", tmp_path / "ok1"],
                      store_path=False)
    assert report["stage"] == "finalization"
    assert report["iterations"][0]["iteration"] == 30
