"""Site helpers imported by ``train.py`` at start-up.

Why a separate module: a node whose code copy lacks it fails at start-up with a real
``ModuleNotFoundError`` -- the "missing module on one node" fault of the benchmark."""

from __future__ import annotations

import os
import platform


def describe_env() -> str:
    """One line about the runtime, printed once the process group is up."""
    import torch

    return (f"torch={torch.__version__} python={platform.python_version()} "
            f"threads={torch.get_num_threads()} omp={os.environ.get('OMP_NUM_THREADS', '-')}")
