"""The stage an error names through the path it prints, which masking hides.

Why: a job whose dataset shard is missing dies before its first step with
"NotFoundError: /mnt/datasets/c4/c4-train.tfrecord-00166-of-00512; No such file or
directory".  Its template reads "NotFoundError: <PATH>; No such file or directory" and its
frames ("in train_loop", "batch = next(it)") name no stage, so the healthy start-up order
alone placed it where the last start-up line was: initialization.  The path it names is
the dataset's: data loading.  The program's own input-pipeline frames say the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_job
from l4.engine import diagnose

START = ["Starting distributed service on [::]:6379",
         "System Information: Jax Version: 0.4.38",
         "Checkpoint manager created!",
         "number parameters: 8.030 billion"]


def node(n: int, *, steps: int = 0, crash: list[str] | None = None, day: int = 6) -> str:
    out = []
    t = 0
    for msg in START + (["Compiling train_step... first step will be slow"] if steps else []):
        out.append(f"I06{day:02d} 03:21:{t:02d}.000000 1398 train.py:741] {msg}")
        t += 1
    for k in range(steps):
        out.append(f"I06{day:02d} 03:22:{k:02d}.000000 1398 metric_logger.py:161] completed step: {k + 1}, "
                   f"seconds: 1.316, loss: {9.0 - 0.1 * k:.3f}")
    return "\n".join(out + (crash or [])) + "\n"


def crash(frames: list[str], error: str) -> list[str]:
    return ["Traceback (most recent call last):", *frames, error]


PATH_ONLY = crash(['  File "/deps/app/train.py", line 944, in train_loop', "    batch = next(it)"],
                  "tensorflow.python.framework.errors_impl.NotFoundError: "
                  "/mnt/datasets/c4/en/3.0.1/c4-train.tfrecord-00166-of-00512; No such file or directory")
PIPELINE = crash(['  File "/deps/app/train.py", line 944, in train_loop',
                  "    example_batch = load_next_batch(data_iterator, example_batch, config)",
                  '  File "/deps/app/input_pipeline/_tfds_data_processing.py", line 211, in __next__',
                  "    return next(self.iterator)"],
                 "OSError: [Errno 5] Input/output error")


@pytest.mark.parametrize("lines", [PATH_ONLY, PIPELINE], ids=["path", "pipeline-frames"])
def test_a_start_up_error_in_the_data_is_data_loading(tmp_path: Path, lines: list[str]) -> None:
    ok = write_job(tmp_path / "ok", {f"x{n}": node(n, steps=40, day=1) for n in range(4)},
                   status="succeeded", job_id="ok-1")
    failed = write_job(tmp_path / "failed", {f"x{n}": node(n, crash=lines) for n in range(4)})
    report = diagnose(failed, [ok], store_path=False)
    assert report["stage"] == "data_loading"
