"""The shared template store: one drain3 ``TemplateMiner`` for every node and every job.

Event ids must mean the same thing on every node of a job and across jobs (the cross-job
filter and the knowledge base compare them), so the miner's state is persisted in one file
and updated under a file lock.  drain3 would snapshot on every new cluster; we snapshot once
per job instead (parsing feeds only distinct masked shapes, so a job adds few clusters), in a
compact JSON form rather than drain3's jsonpickle snapshot.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from drain3 import TemplateMiner
from drain3.drain import Drain, LogCluster, Node
from drain3.template_miner_config import TemplateMinerConfig

logging.getLogger("drain3").setLevel(logging.WARNING)

SIM_TH = 0.7
DEPTH = 4
MAX_CHILDREN = 100
PARAM = "<*>"  # drain3's wildcard token


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


FORMAT = "l4-drain3-state"
VERSION = 1


def _dump_node(node: Node) -> list:
    return [list(node.cluster_ids), {k: _dump_node(v) for k, v in node.key_to_child_node.items()}]


def _load_node(data: list) -> Node:
    node = Node()
    node.cluster_ids = list(data[0])
    node.key_to_child_node = {k: _load_node(v) for k, v in data[1].items()}
    return node


def dump_state(drain: Drain) -> bytes:
    """drain3's clusters *and* prefix tree as compact gzipped JSON.

    drain3's own snapshot is jsonpickle, which takes seconds per save and load once a store
    holds thousands of templates; this keeps the exact same state (tree included, so
    matching after a reload behaves as before it) at JSON speed.
    """
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "counter": drain.clusters_counter,
        "clusters": [[c.cluster_id, c.size, list(c.log_template_tokens)]
                     for c in drain.id_to_cluster.values()],
        "tree": _dump_node(drain.root_node),
    }
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=3)


def load_state(drain: Drain, data: bytes, where: str) -> None:
    try:
        doc = json.loads(gzip.decompress(data))
        if doc.get("format") != FORMAT:
            raise ValueError("not an l4 template store")
        if doc.get("version", 0) > VERSION:
            raise ValueError(f"written by a newer l4 (version {doc['version']})")
        clusters = {}
        for cid, size, tokens in doc["clusters"]:
            cl = LogCluster(tokens, int(cid))
            cl.size = int(size)
            clusters[int(cid)] = cl
        root = _load_node(doc["tree"])
    except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"template store {where} is unreadable ({exc}); move it away to start afresh"
        ) from exc
    drain.id_to_cluster = clusters
    drain.clusters_counter = int(doc["counter"])
    drain.root_node = root


class TemplateStore:
    """drain3 templates persisted at ``path`` (in memory only when ``path`` is None)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.miner = TemplateMiner(config=miner_config())
        if self.path and self.path.exists() and self.path.stat().st_size:
            load_state(self.miner.drain, self.path.read_bytes(), str(self.path))
        self.dirty = False

    def _covering(self, masked: str) -> LogCluster | None:
        """The existing template that covers ``masked``, as drain3's ``match`` finds it,
        except that a template of wildcards only covers only lines of wildcards only.

        drain3 counts a ``<*>`` as matching any token and, between equal matches, prefers
        the template with more of them.  One line that masks to nothing but parameters (a
        bare log prefix: ``W0224 10:33:37.0 3672 run.py:793]`` with an empty message) then
        makes a template that covers every line of its length, and it takes over the lines
        that arrive after it: "[rank0]:done with setup ..." on one node and "[INFO]
        HCCL_CONNECT_TIMEOUT=1200 ..." on the others became one event, and what a job's
        events were depended on which jobs the store had seen before.
        """
        cluster = self.miner.match(masked, full_search_strategy="fallback")
        if cluster is None or any(t != PARAM for t in cluster.log_template_tokens):
            return cluster
        drain = self.miner.drain
        tokens = drain.get_content_as_tokens(masked)
        if all(t == PARAM for t in tokens):
            return cluster
        ids = [i for i in drain.get_clusters_ids_for_seq_len(len(tokens))
               if any(t != PARAM for t in drain.id_to_cluster[i].log_template_tokens)]
        return drain.fast_match(ids, tokens, 1.0, include_params=True)

    def add(self, masked: str) -> int:
        """Cluster id for a masked line, creating or generalising a template as drain does.

        An existing template that already covers the line is used as is: drain3's
        similarity ignores ``<*>`` tokens, so a wildcard-heavy shape ("step <*> loss <*>")
        would otherwise never match its own cluster and get a new id on every node and job.
        """
        cluster = self._covering(masked)
        if cluster is not None:
            cluster.size += 1
            return int(cluster.cluster_id)
        result = self.miner.add_log_message(masked)
        if result["change_type"] != "none":
            self.dirty = True
        return int(result["cluster_id"])

    def match(self, masked: str) -> int | None:
        """Cluster id of an existing template that covers ``masked`` (no learning)."""
        cluster = self._covering(masked)
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
        data = dump_state(self.miner.drain)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".templates-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
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
