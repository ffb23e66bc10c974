"""The install must give the real drain3 0.9.11 (pip silently falls back to 0.9.1 when the
release's stale pins conflict; that version lacks match() and extract_parameters())."""

import importlib.metadata as md

from drain3 import TemplateMiner


def test_drain3_is_0_9_11_with_modern_api():
    assert md.version("drain3") == "0.9.11"
    miner = TemplateMiner()
    assert callable(getattr(miner, "match", None))
    assert callable(getattr(miner, "extract_parameters", None))


def test_torch_is_a_cpu_build():
    import torch

    assert "+cu" not in torch.__version__
