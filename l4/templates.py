"""The shared template store: one drain3 ``TemplateMiner`` for every node and every job.

Event ids must mean the same thing on every node of a job and across jobs (the cross-job
filter and the knowledge base compare them), so the miner's state is persisted in one file
and updated under a file lock.  drain3 would snapshot on every new cluster; we snapshot once
per job instead (parsing feeds only distinct masked shapes, so a job adds few clusters).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import logging
import os
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from drain3 import TemplateMiner
from drain3.persistence_handler import PersistenceHandler
from drain3.template_miner_config import TemplateMinerConfig

logging.getLogger("drain3").setLevel(logging.WARNING)

SIM_TH = 0.7
DEPTH = 4
MAX_CHILDREN = 100


def miner_config() -> TemplateMinerConfig:
    """drain3 settings for pre-masked training-log lines (masking happens in ``l4.mask``)."""
    cfg = TemplateMinerConfig()
    cfg.drain_sim_th = SIM_TH
    cfg.drain_depth = DEPTH
    cfg.drain_max_children = MAX_CHILDREN
    cfg.masking_instructions = []
    cfg.snapshot_compress_state = True
    cfg.parametrize_numeric_tokens = True
    return cfg


class _Snapshot(PersistenceHandler):
    """Holds the state drain3 loads from / saves to; we decide when it reaches disk."""

    def __init__(self, state: bytes | None):
        self.state = state
        self.armed = False

    def save_state(self, state: bytes) -> None:
        if self.armed:
            self.state = state

    def load_state(self) -> bytes | None:
        return self.state


class TemplateStore:
    """drain3 templates persisted at ``path`` (in memory only when ``path`` is None)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        state = None
        if self.path and self.path.exists() and self.path.stat().st_size:
            state = self.path.read_bytes()
            try:
                zlib.decompress(base64.b64decode(state))
            except (zlib.error, ValueError) as exc:
                raise ValueError(
                    f"template store {self.path} is corrupt ({exc}); move it away to start afresh"
                ) from exc
        self._snap = _Snapshot(state)
        self.miner = TemplateMiner(persistence_handler=self._snap, config=miner_config())
        # Loaded; from now on drain3 must not serialise its whole state on every new
        # cluster (it would, with a handler attached): we snapshot once, in save().
        self.miner.persistence_handler = None
        self.dirty = False

    def add(self, masked: str) -> int:
        """Cluster id for a masked line, creating or generalising a template as drain does."""
        result = self.miner.add_log_message(masked)
        if result["change_type"] != "none":
            self.dirty = True
        return int(result["cluster_id"])

    def match(self, masked: str) -> int | None:
        """Cluster id of an existing template that covers ``masked`` (no learning)."""
        cluster = self.miner.match(masked, full_search_strategy="fallback")
        return int(cluster.cluster_id) if cluster is not None else None

    def template(self, cluster_id: int) -> str:
        cluster = self.miner.drain.id_to_cluster.get(cluster_id)
        return cluster.get_template() if cluster is not None else ""

    def __len__(self) -> int:
        return len(self.miner.drain.clusters)

    def save(self) -> None:
        """Write the state atomically (temp file + rename): a crash never leaves half a file."""
        if not self.path or not self.dirty:
            return
        self._snap.armed = True
        self.miner.persistence_handler = self._snap
        try:
            self.miner.save_state("l4")
        finally:
            self.miner.persistence_handler = None
            self._snap.armed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".templates-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(self._snap.state or b"")
        os.replace(tmp, self.path)
        self.dirty = False


@contextlib.contextmanager
def open_store(path: str | Path | None) -> Iterator[TemplateStore]:
    """Load, use and save the store while holding an exclusive lock on ``path``.lock, so
    two diagnoses running at once never lose each other's templates."""
    if path is None:
        yield TemplateStore(None)
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            store = TemplateStore(path)
            yield store
            store.save()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def default_store_path() -> Path:
    """Where templates live unless told otherwise: beside the knowledge base."""
    env = os.environ.get("L4_TEMPLATES")
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("l4")) / "templates.drain3"
