"""Shared fixtures: every test runs with its own knowledge base and template store, so the
user's real ones are never touched, and hand-made jobs are built from plain text."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory, monkeypatch):
    state = tmp_path_factory.mktemp("l4state")
    monkeypatch.setenv("L4_KB", str(state / "kb.duckdb"))
    monkeypatch.setenv("L4_TEMPLATES", str(state / "templates.drain3"))
    monkeypatch.setenv("L4_SPOOL", str(state / "spool"))
    # no long-lived local Prefect server left behind by a test (tests/test_localserver.py
    # starts one in a tmp dir and stops it); without a server a test gets a temporary one
    monkeypatch.setenv("L4_SERVER_DIR", str(state / "prefect-server"))
    monkeypatch.setenv("L4_LOCAL_SERVER", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    yield


@pytest.fixture(scope="session")
def seeded_kb(tmp_path_factory) -> Path:
    """One seeded, embedded fault library for the session (embedding it is the slow
    part); tests work on copies of it (:func:`kb`).  A module may override it."""
    from l4 import rootcause

    kb = tmp_path_factory.mktemp("kbseed") / "kb.duckdb"
    assert rootcause.ensure_embeddings(kb) >= 40
    return kb


@pytest.fixture
def kb(seeded_kb: Path, tmp_path: Path) -> Path:
    """A private copy of the seeded library."""
    import shutil

    dst = tmp_path / "kb.duckdb"
    shutil.copy(seeded_kb, dst)
    return dst


@pytest.fixture
def shared_dir() -> Path:
    if not (SHARED / "data").is_dir():
        pytest.skip("../shared/data not present (only developers and CI have it)")
    return SHARED / "data"


def write_job(root: Path, nodes: dict[str, str | bytes], *, config_id: str = "cfg-a",
              status: str = "failed", job_id: str | None = None, gz: tuple[str, ...] = (),
              framework: str | None = None) -> Path:
    """A job directory from {node: text}; nodes named in ``gz`` are written gzipped."""
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    meta = {"job_id": job_id or root.name, "config_id": config_id, "status": status}
    if framework:
        meta["framework"] = framework
    (root / "job.json").write_text(json.dumps(meta))
    for node, text in nodes.items():
        data = text.encode() if isinstance(text, str) else text
        if node in gz:
            with gzip.open(logs / f"{node}.log.gz", "wb") as fh:
                fh.write(data)
        else:
            (logs / f"{node}.log").write_bytes(data)
    return root


def megatron_node(n_iters: int, *, rank: int, prints_iters: bool, fail_at: int | None = None,
                  fail_lines: tuple[str, ...] = (), victim_from: int | None = None,
                  seed: int = 0) -> str:
    """A plausible Megatron-style node log; deterministic."""
    import random

    rng = random.Random(seed * 1000 + rank)
    out = [
        "2024-05-01 12:00:00,000 using world size: 32, data-parallel size: 4",
        "2024-05-01 12:00:01,000 > building train, validation, and test datasets ...",
        "2024-05-01 12:00:02,000 building GPT model ...",
        f"2024-05-01 12:00:03,000 > number of parameters on (tensor, pipeline) model parallel rank ({rank}, 0): 1234567",
    ]
    for it in range(1, n_iters + 1):
        ts = f"2024-05-01 12:{(it // 60) + 1:02d}:{it % 60:02d},000"
        if fail_at is not None and it == fail_at:
            out.extend(f"{ts} {line}" for line in fail_lines)
            break
        if victim_from is not None and it >= victim_from:
            out.append(f"{ts} [rank{rank * 8}]:[E ProcessGroupNCCL.cpp:1234] Watchdog caught "
                       f"collective operation timeout: WorkNCCL(SeqNum={it}, OpType=ALLREDUCE) "
                       "ran for 600000 milliseconds before timing out.")
            out.append(f"{ts} [rank{rank * 8}]: RuntimeError: Connection reset by peer")
            if it >= victim_from + 3:
                break
            continue
        if prints_iters:
            out.append(f"{ts}  iteration {it * 10:8d}/  500000 | consumed samples: {it * 1024} | "
                       f"elapsed time per iteration (ms): {rng.uniform(900, 1100):.1f} | "
                       f"lm loss: {rng.random():.4E} |")
        out.append(f"{ts} [rank{rank * 8}] allreduce done in {rng.randint(1, 99)} ms")
        if rng.random() < 0.05:
            out.append(f"{ts} UserWarning: torch.cuda.amp.GradScaler is deprecated")
    return "\n".join(out) + "\n"


XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."


def xid_job(root: Path, *, n_nodes: int = 4, culprit: int = 2, fail_at: int = 41,
            healthy: bool = False, seed: int = 0, **kw) -> Path:
    nodes = {}
    for r in range(n_nodes):
        is_culprit = not healthy and r == culprit
        nodes[f"node-{r}"] = megatron_node(
            60, rank=r, prints_iters=(r == n_nodes - 1),
            fail_at=fail_at if is_culprit else None,
            fail_lines=(XID79,) if is_culprit else (),
            victim_from=None if healthy or is_culprit else fail_at, seed=seed,
        )
    return write_job(root, nodes, status="succeeded" if healthy else "failed", **kw)


@pytest.fixture
def xid_case(tmp_path) -> tuple[Path, list[Path]]:
    failed = xid_job(tmp_path / "failed")
    bases = [xid_job(tmp_path / f"base{i}", healthy=True, seed=i + 1, n_nodes=3 + i)
             for i in range(2)]
    return failed, bases


os.environ.setdefault("HF_HUB_OFFLINE", "1")
