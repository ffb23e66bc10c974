"""The innermost frame of the program's own traceback says what it was doing.

Outer frames say how it got there: Megatron's "train_ds, valid_ds, test_ds =
build_train_valid_test_datasets(" names validation data while it builds every dataset,
and read first it placed a missing ``.idx`` file in evaluation.
"""

from __future__ import annotations

from l4.profiles import EARLY, choose_profile
from l4.stage import _error_hint, _own_frames

FRAMES = [
    '[rank82]:  File "/home/u/Megatron-LM/pretrain_gpt.py", line 231, in <module>',
    "[rank82]:    pretrain(",
    '[rank82]:  File "/home/u/Megatron-LM/megatron/training/training.py", line 1640, in '
    "build_train_valid_test_data_loaders",
    "[rank82]:    train_ds, valid_ds, test_ds = build_train_valid_test_datasets(",
    '[rank82]:  File "/home/u/Megatron-LM/megatron/core/datasets/indexed_dataset.py", '
    "line 253, in __init__",
    '[rank82]:    with open(idx_path, "rb") as stream:',
]


class _Job:
    templates = ["FileNotFoundError: [Errno <*>] No such file or directory: '<PATH>'"]
    examples = [{0: (1, "FileNotFoundError: ...", FRAMES)}]


def test_the_innermost_own_frame_names_the_stage():
    profile = choose_profile(_Job.templates, "generic")
    assert _error_hint(_Job(), profile, 0, [0]) == "data_loading"


def test_an_evaluation_frame_still_names_evaluation():
    class Job(_Job):
        examples = [{0: (1, "x", ['  File "/home/u/train.py", line 80, in main',
                                  "    evaluate(model, val_loader)",
                                  '  File "/home/u/train.py", line 40, in evaluate',
                                  "    out = model(x)"])}]
    profile = choose_profile(Job.templates, "generic")
    assert _error_hint(Job(), profile, 0, [0]) == "evaluation"


def test_a_training_loop_handed_its_evaluation_loader_is_no_evaluation():
    class Job(_Job):
        examples = [{0: (1, "x", [
            '0:   File "/home/u/run_pretrain.py", line 377, in main',
            "0:     train(args, model_engine, train_loader, eval_loader)",
            '0:   File "/home/u/run_pretrain.py", line 261, in train',
            "0:     model_engine.backward(loss)",
            '0:   File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py", '
            "line 1976, in backward"])}]
    profile = choose_profile(Job.templates, "deepspeed")
    # not evaluation: the innermost own frame is the backward pass of a training step
    assert _error_hint(Job(), profile, 0, [0]) == "training"


def test_a_faulthandler_dump_after_the_error_names_the_stage():
    """faulthandler prints "Fatal Python error: Segmentation fault", a blank line, then the
    crashing thread's frames under a header of their own, most recent call first."""
    import numpy as np

    from l4.stage import _dump_hint

    dump = ['51:   File "/usr/local/lib/python3.11/dist-packages/torch/serialization.py", '
            "line 628 in save",
            '51:   File "/workspace/Megatron-LM/megatron/training/checkpointing.py", line 397 '
            "in save_checkpoint",
            '51:   File "/workspace/Megatron-LM/megatron/training/training.py", line 1298 in train']
    idle = ['51:   File "/usr/lib/python3.11/threading.py", line 324 in wait']

    class Job:
        templates = ["Fatal Python error: Segmentation fault", "<EMPTY>",
                     "Thread <HEX> (most recent call first):",
                     "Current thread <HEX> (most recent call first):"]
        first_pos = np.array([[40, 41, 42, 44]])
        examples = [{0: (41, "Fatal Python error: Segmentation fault", []),
                     1: (42, "", []), 2: (43, "Thread 0x1 (most recent call first):", idle),
                     3: (46, "Current thread 0x2 (most recent call first):", dump)}]

    profile = choose_profile(Job.templates, "megatron")
    assert _dump_hint(Job(), profile, 0, np.arange(4), 40) == "checkpointing"
    # a dump printed long after the error is about something else
    assert _dump_hint(Job(), profile, 0, np.array([3]), 40 - 100) is None


def test_a_library_frames_source_line_is_the_librarys_not_the_programs():
    """Lightning's evaluation loop calls "self._evaluation_step(batch, batch_idx,
    dataloader_idx, dataloader_iter)": that line names a data loader, but it is the
    library's code under the library's frame; the frame itself (evaluation_loop.py) says
    where the out-of-memory error struck."""
    class Job(_Job):
        examples = [{0: (1, "x", [
            '[rank9]:   File "/home/u/lm/train.py", line 77, in main',
            "[rank9]:     trainer.fit(model, datamodule=dm)",
            '[rank9]:   File "/opt/conda/lib/python3.12/site-packages/lightning/pytorch/loops/'
            'evaluation_loop.py", line 135, in run',
            "[rank9]:     self._evaluation_step(batch, batch_idx, dataloader_idx, dataloader_iter)",
            "[rank9]:                          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            '[rank9]:   File "/home/u/lm/module.py", line 96, in validation_step',
            "[rank9]:     self.log_dict(metrics, on_epoch=True, sync_dist=True)",
            '[rank9]:   File "/opt/conda/lib/python3.12/site-packages/transformers/models/llama/'
            'modeling_llama.py", line 1216, in forward',
            "[rank9]:     logits = logits.float()"])}]
    profile = choose_profile(Job.templates, "generic")
    assert _error_hint(Job(), profile, 0, [0]) == "evaluation"


LIGHTNING_VALIDATION = [
    '18: [rank18]:   File "/gpfs/u/pretrain/train.py", line 45, in main',
    "18: [rank18]:     trainer.fit(model, datamodule=dm)",
    '18: [rank18]:   File "/env/lib/python3.10/site-packages/lightning/pytorch/loops/'
    'evaluation_loop.py", line 135, in run',
    "18: [rank18]:     self._evaluation_step(batch, batch_idx, dataloader_idx, dataloader_iter)",
    '18: [rank18]:   File "/env/lib/python3.10/site-packages/lightning/pytorch/strategies/'
    'strategy.py", line 411, in validation_step',
    "18: [rank18]:     return self.lightning_module.validation_step(*args, **kwargs)",
    '18: [rank18]:   File "/gpfs/u/pretrain/lm/module.py", line 96, in validation_step',
    "18: [rank18]:     self.log_dict(metrics, on_epoch=True, sync_dist=True)",
    '18: [rank18]:   File "/env/lib/python3.10/site-packages/torch/distributed/'
    'distributed_c10d.py", line 2288, in all_reduce',
]


def test_a_validation_step_hook_names_evaluation():
    class Job(_Job):
        examples = [{0: (1, "x", LIGHTNING_VALIDATION)}]
    profile = choose_profile(Job.templates, "generic")
    assert _error_hint(Job(), profile, 0, [0]) == "evaluation"


def test_a_library_frame_behind_two_prefixes_keeps_its_source_line():
    """Slurm's label before torchrun's ("18: [rank18]:"): Lightning's
    "self._evaluation_step(batch, batch_idx, dataloader_idx, dataloader_iter)" is the
    library's line, not the program's, and its data loader words name no stage."""
    own = _own_frames(LIGHTNING_VALIDATION)
    assert not any("_evaluation_step(batch" in line for line in own), own
    assert any("trainer.fit(" in line for line in own), own


def test_a_start_up_stage_ruled_out_does_not_hide_an_inner_one():
    """Once training had begun, a start-up stage an outer frame names ("run(model,
    dataloader)") cannot come back; the library frame below it (Lightning's evaluation
    loop) names the stage."""
    frames = ['  File "/home/u/train.py", line 45, in main',
              "    run(model, dataloader)",
              '  File "/env/lib/python3.10/site-packages/lightning/pytorch/loops/'
              'evaluation_loop.py", line 396, in _evaluation_step',
              "    output = call._call_strategy_hook(trainer, hook_name, *step_args)"]

    class Job(_Job):
        examples = [{0: (1, "x", frames)}]
    profile = choose_profile(Job.templates, "generic")
    assert _error_hint(Job(), profile, 0, [0]) == "data_loading"  # start-up: as before
    assert _error_hint(Job(), profile, 0, [0], frozenset(EARLY)) == "evaluation"


def test_a_library_frame_that_sets_up_the_process_group_names_initialization():
    """Behind two prefixes the source lines under library frames are the library's
    ("torch.distributed.init_process_group(...)" under Lightning's helper); the frame's
    own function name says it was setting up the process group."""
    frames = [
        ' 48: [rank48]:   File "/opt/train/pretrain_gpt.py", line 112, in <module>',
        " 48: [rank48]:     llm.train(",
        ' 48: [rank48]:   File "/usr/local/lib/python3.12/dist-packages/lightning/pytorch/'
        'strategies/ddp.py", line 203, in setup_distributed',
        " 48: [rank48]:     _init_dist_connection(self.cluster_environment, self._process_group_backend)",
        ' 48: [rank48]:   File "/usr/local/lib/python3.12/dist-packages/lightning/fabric/utilities/'
        'distributed.py", line 297, in _init_dist_connection',
        " 48: [rank48]:     torch.distributed.init_process_group(backend, rank=global_rank)",
        ' 48: [rank48]:   File "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py", '
        "line 399, in set_device",
        " 48: [rank48]:     torch._C._cuda_setDevice(device)",
    ]

    class Job(_Job):
        templates = ["RuntimeError: Unexpected error from cudaGetDeviceCount()"]
        examples = [{0: (1, "x", frames)}]
    profile = choose_profile(Job.templates, "generic")
    assert "torch.distributed.init_process_group" not in " ".join(_own_frames(frames))
    assert _error_hint(Job(), profile, 0, [0]) == "initialization"
