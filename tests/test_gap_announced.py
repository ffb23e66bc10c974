"""A job that stopped after one phase's last line and before the next phase announced itself.

Lightning validates, then its checkpoint callback says "Epoch 0, global step 600: 'val_loss'
reached 2.40 (best 2.40), saving model to ..." as the save begins.  A job whose validation
bar reached 50/50 and which never printed that line had not begun the save: it failed in
the end of its evaluation (the metrics are reduced across ranks there).  A phase reported
only when it is over ("validate step: 600") is another matter: its line missing says
nothing about whether it ran.
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("gpu-a", "gpu-b", "gpu-c")
STEPS, EVERY, VAL = 1000, 50, 200


def _bar(it: int) -> str:
    fill = "█" * (it * 10 // STEPS)
    return (f"Epoch 0:  {100 * it // STEPS:2d}%|{fill:<10}| {it}/{STEPS} [{it // 60:02d}:{it % 60:02d}<"
            f"{(STEPS - it) // 60:02d}:{(STEPS - it) % 60:02d}, 1.00it/s, v_num=3, train_loss=2.31]")


def _node(k: int, *, fail_after: int | None) -> str:
    out = [f"LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1] on {HOSTS[k]}"]
    for it in range(EVERY, STEPS + 1, EVERY):
        if k == 0:
            out.append(_bar(it))
        if it % VAL == 0:
            if k == 0:
                out += ["Validation: |          | 0/? [00:00<?, ?it/s]",
                        "Validation DataLoader 0:   2%|▏         | 1/50 [00:00<00:27, 1.75it/s]",
                        "Validation DataLoader 0: 100%|██████████| 50/50 [00:28<00:00, 1.75it/s]"]
            if fail_after == it:
                if k == 1:
                    out.append("[rank2]: RuntimeError: Detected mismatch between collectives on ranks. "
                               "Rank 2 is running collective: CollectiveFingerPrint(SequenceNumber=4410, "
                               "OpType=BROADCAST), but Rank 0 is running collective: "
                               "CollectiveFingerPrint(SequenceNumber=4410, OpType=ALLREDUCE).")
                else:
                    out.append(f"[rank{2 * k}]:[E1203 10:{k:02d}:00.000000000 ProcessGroupNCCL.cpp:616] "
                               f"[Rank {2 * k}] Watchdog caught collective operation timeout: "
                               "WorkNCCL(SeqNum=4410, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                               "Timeout(ms)=600000) ran for 600031 milliseconds before timing out.")
                return "\n".join(out) + "\n"
            if k == 0:
                out.append(f"Epoch 0, global step {it}: 'val_loss' reached {2.6 - it / 5000:.5f} (best "
                           f"{2.6 - it / 5000:.5f}), saving model to '/ckpt/epoch=0-step={it}.ckpt' as top 3")
    out.append("`Trainer.fit` stopped: `max_steps=1000` reached.")
    return "\n".join(out) + "\n"


def _stage(tmp_path, node) -> str:
    """Stage of the job ``node(k, fail_after=600)`` writes, against its healthy run."""
    failed = write_job(tmp_path / "failed", {h: node(k, fail_after=600) for k, h in enumerate(HOSTS)})
    base = write_job(tmp_path / "base", {h: node(k, fail_after=None) for k, h in enumerate(HOSTS)},
                     status="succeeded")
    rep = diagnose(failed, baselines=[base], store_path=tmp_path / "t.drain3")
    return rep["stage"]


def test_a_job_that_never_announced_its_save_failed_in_the_evaluation_before_it(tmp_path):
    assert _stage(tmp_path, _node) == "evaluation"


def _titan(k: int, *, fail_after: int | None) -> str:
    """torchtitan's order: save, then validate, reported only at its end."""
    out = [f"[titan] 2024-12-03 10:00:0{k},000 - root - INFO - Starting job: llama3 training"]
    for it in range(EVERY, STEPS + 1, EVERY):
        t = f"2024-12-03 {10 + it // 3600:02d}:{it % 3600 // 60:02d}:{it % 60:02d},000"
        if k == 0:
            out.append(f"[titan] {t} - root - INFO - step: {it}  loss:  2.3100  memory: 31.2GiB")
        if it % VAL == 0:
            out += [f"[titan] {t} - root - INFO - Saving the checkpoint (or staging if async is enabled).",
                    f"[titan] {t} - root - INFO - Finished saving the checkpoint (or staging if async "
                    "is enabled)in 4.21 seconds."]
            if fail_after == it:
                out.append(f"[rank{2 * k}]:[E1203 11:{k:02d}:00.000000000 ProcessGroupNCCL.cpp:616] "
                           f"[Rank {2 * k}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4410, "
                           "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                           f"{600031 + k} milliseconds before timing out.")
                return "\n".join(out) + "\n"
            if k == 0:
                out.append(f"[titan] {t} - root - INFO - validate step: {it}  loss: 2.4100")
    out.append("[titan] 2024-12-03 11:00:00,000 - root - INFO - Training completed")
    return "\n".join(out) + "\n"


def test_a_phase_reported_only_when_over_may_have_been_running(tmp_path):
    assert _stage(tmp_path, _titan) == "evaluation"
