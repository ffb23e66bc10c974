"""The numpy MiniLM (l4.minilm) gives sentence-transformers' vectors without torch.

The comparison loads the same packaged weights through sentence-transformers (torch), so
it is the one place in the suite that still imports torch on purpose.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from l4 import embed
from l4.minilm import MiniLM

REPO = Path(__file__).resolve().parents[1]


def _texts() -> list[str]:
    doc = yaml.safe_load((REPO / "kb" / "seed_patterns.yaml").read_text())
    texts = [embed.mask_text(i) for p in doc["patterns"][::20] for i in p["indicators"][:2]]
    return texts + [
        "",  # empty: [CLS] [SEP] only
        "x",
        "NCCL WARN " * 200,  # longer than max_seq_length: truncated like sentence-transformers
        "EI0002: Notify 等待超时 — ünïcödé ✓",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]


@pytest.fixture(scope="module")
def both() -> tuple[np.ndarray, np.ndarray, list[str]]:
    texts = _texts()
    ours = MiniLM(embed.model_dir()).encode(texts)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(embed.model_dir()), device="cpu")
    ref = st.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True,
                    show_progress_bar=False)
    return ours, ref, texts


def test_same_vectors_as_sentence_transformers(both) -> None:
    ours, ref, texts = both
    assert ours.shape == ref.shape == (len(texts), 384)
    cos = (ours * ref).sum(axis=1)
    assert cos.min() > 0.99999, texts[int(cos.argmin())]
    assert np.abs(ours - ref).max() < 1e-4


def test_vectors_are_unit_length_and_batch_independent(both) -> None:
    ours, _, texts = both
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    model = MiniLM(embed.model_dir())
    alone = np.vstack([model.encode([t]) for t in texts[:5] + texts[-5:]])
    assert np.allclose(alone, np.vstack([ours[:5], ours[-5:]]), atol=1e-5)  # padding is masked


def test_the_default_backend_never_imports_torch(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from l4 import embed\n"
        "v = embed.embed(['quasar-ctl: numpy backend probe'])\n"
        "print(v.shape, embed.backend(), 'torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("L4_EMBED_BACKEND", None)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       timeout=300, check=True)
    assert p.stdout.split() == ["(1,", "384)", "numpy", "False", "False"]


def test_backend_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("L4_EMBED_BACKEND", raising=False)
    assert embed.backend(50) == "numpy"  # kb match, a diagnosis' events: no torch start-up
    assert embed.backend(embed.BULK + 1) == "sentence-transformers"  # the whole library
    monkeypatch.setenv("L4_EMBED_BACKEND", "numpy")
    assert embed.backend(embed.BULK + 1) == "numpy"
    monkeypatch.setenv("L4_EMBED_BACKEND", "sentence-transformers")
    assert embed.backend(1) == "sentence-transformers"
