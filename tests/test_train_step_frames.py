"""The program's own frames that name the training step place the error in training.

Megatron announces "[eval] running 10 validation iterations at iteration 5000"; the eval
ran, the loop went on, and three steps later a kernel failed inside ``train_step``.  The
evaluation announced last never printed its end, but the traceback says where the program
was: its own frames, innermost first, name the training step.  An error inside
``evaluate`` (which also calls the forward-backward function) stays evaluation.
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("worker-95", "worker-96", "worker-97")
TB_TRAIN = """Traceback (most recent call last):
  File "/home/user/src/Megatron-LM/pretrain_llama.py", line 231, in <module>
    pretrain(
  File "/home/user/src/Megatron-LM/megatron/training/training.py", line 352, in pretrain
    iteration, num_floating_point_operations_so_far = train(
  File "/home/user/src/Megatron-LM/megatron/training/training.py", line 1227, in train
    train_step(forward_step_func,
  File "/home/user/src/Megatron-LM/megatron/training/training.py", line 644, in train_step
    losses_reduced = forward_backward_func(
RuntimeError: CUDA error: an illegal memory access was encountered"""
TB_EVAL = """Traceback (most recent call last):
  File "/home/user/src/Megatron-LM/pretrain_llama.py", line 231, in <module>
    pretrain(
  File "/home/user/src/Megatron-LM/megatron/training/training.py", line 1270, in train
    evaluate_and_print_results(prefix, forward_step_func,
  File "/home/user/src/Megatron-LM/megatron/training/training.py", line 1421, in evaluate
    loss_dicts = forward_backward_func(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB."""


def _node(k: int, *, traceback: str | None) -> str:
    out = [f"[2024-04-27 10:00:0{k}] using world size: 6, data-parallel size: 6"]
    for it in range(20, 5001 if traceback else 6001, 20):
        if k == 0:
            out.append(f" [2024-04-27 {10 + it // 3600:02d}:{it % 3600 // 60:02d}:{it % 60:02d}] iteration "
                       f"{it:8d}/    6000 | consumed samples: {it * 512} | elapsed time per iteration (ms): "
                       "1000.0 | lm loss: 2.310000E+00 |")
        if it % 1000 == 0:
            out.append(f"[eval] running 10 validation iterations at iteration {it}")
            if traceback is None or it < 5000:
                out.append(f" validation loss at iteration {it} | lm loss value: 2.41E+00 |")
    if traceback is None:
        out.append("[after training is done] datetime: 2024-04-27 11:40:00")
    elif k == 1:
        out += traceback.splitlines()
    else:
        out.append(f"[rank{2 * k}]:[E427 11:40:0{k}.000000000 ProcessGroupNCCL.cpp:616] [Rank {2 * k}] "
                   "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=90210, OpType=ALLREDUCE, "
                   "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.")
    return "\n".join(out) + "\n"


def _stage(tmp_path, traceback: str) -> str:
    failed = write_job(tmp_path / "failed", {h: _node(k, traceback=traceback) for k, h in enumerate(HOSTS)},
                       framework="megatron")
    base = write_job(tmp_path / "base", {h: _node(k, traceback=None) for k, h in enumerate(HOSTS)},
                     status="succeeded", framework="megatron")
    rep = diagnose(failed, baselines=[base], store_path=tmp_path / "t.drain3")
    assert rep["nodes"][0]["node"] == "worker-96", rep["nodes"][:2]
    return rep["stage"]


def test_an_error_raised_inside_train_step_is_training(tmp_path):
    assert _stage(tmp_path, TB_TRAIN) == "training"


def test_an_error_raised_inside_evaluate_stays_evaluation(tmp_path):
    assert _stage(tmp_path, TB_EVAL) == "evaluation"
