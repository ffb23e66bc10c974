"""Shared fixtures: every test runs with its own knowledge base and template store, so the
user's real ones are never touched, and hand-made jobs are built from plain text."""

from __future__ import annotations

import gzip
import importlib.util
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
def seeded_kb(tmp_path_factory, worker_id) -> Path:
    """One seeded, embedded fault library for the session (embedding it is the slow
    part); tests work on copies of it (:func:`kb`).  A module may override it.  With
    pytest-xdist the workers share one: the first to need it embeds it, under a file lock;
    the others check it holds every pattern's vectors and load them from its embedding
    store, as a process that embedded the library itself has them in memory."""
    from l4 import kbstore, rootcause

    if worker_id == "master":
        kb = tmp_path_factory.mktemp("kbseed") / "kb.duckdb"
        assert rootcause.ensure_embeddings(kb) >= 40
        return kb
    import shutil

    from filelock import FileLock

    from l4 import embed

    root = tmp_path_factory.getbasetemp().parent  # shared by this run's workers
    shared = root / "kbseed" / "kb.duckdb"
    kb = tmp_path_factory.mktemp("kbseed") / "kb.duckdb"  # this worker's own, read by its tests
    with FileLock(str(root / "kbseed.lock")):
        if not (root / "kbseed" / "done").exists():
            shared.parent.mkdir(exist_ok=True)
            assert rootcause.ensure_embeddings(shared) >= 40
            (root / "kbseed" / "done").write_text("ok")
        shutil.copy(shared, kb)
    assert not kbstore.stale_embeddings(kb=kb)
    texts = []
    for p in kbstore.list_patterns(kb=kb):
        whole, ind = kbstore.pattern_texts(p)
        texts += [whole, *ind]
    embed.embed(texts, kb=kb)  # all found in the knowledge base's embed_cache
    return kb


@pytest.fixture(scope="session")
def worker_id(request) -> str:
    """pytest-xdist's worker name (``gw0``...), ``master`` without it."""
    return getattr(request.config, "workerinput", {}).get("workerid", "master")


@pytest.fixture(scope="session")
def prefect_api_server(tmp_path_factory):
    """One real Prefect server (127.0.0.1, SQLite in a temp dir) for the modules that only
    need *a* server to run flows against (test_flows_prefect.py, test_html_flow.py): started
    by the first, stopped at the end of the session.  Yields (API URL, its home)."""
    import time

    from prefect_fixtures import prefect_server

    home = tmp_path_factory.mktemp("prefect")
    t0 = time.perf_counter()
    with prefect_server(home) as url:
        print(f"\n[prefect server up in {time.perf_counter() - t0:.1f} s at {url}]")
        yield url, home


#: modules whose tests start Prefect servers of their own (or l4's local one): under
#: pytest-xdist each of their tests is a unit of work of its own
PREFECT_ALONE = ("test_delivery_prefect.py", "test_serve_restart.py", "test_localserver.py",
                 "test_warm.py")
#: modules that run flows against the one server of :func:`prefect_api_server`: one unit
PREFECT_SHARED = ("test_flows_prefect.py", "test_html_flow.py")


def _unit(nodeid: str) -> str:
    """The unit of work a test belongs to under pytest-xdist (see
    :func:`_make_scheduler`)."""
    module = nodeid.split("::", 1)[0]
    name = module.rsplit("/", 1)[-1]
    if name in PREFECT_ALONE:
        return nodeid
    if name in PREFECT_SHARED:
        return "prefect-shared-server"
    return module


def _make_scheduler(config, log):
    """``make test`` runs ``pytest -n 2``: units of work go to whichever worker is free, in
    collection order (see :func:`pytest_collection_modifyitems`).  A unit is a module, so
    its module-scoped fixtures are built once; the modules that share one Prefect server
    are one unit, so it starts once; each test that starts servers of its own is a unit.
    (``--dist loadgroup`` would do this with marks, but under pytest 9 its marks do not
    reach the node ids.)  Another ``--dist`` given on the command line is honoured."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class _Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # keep the order the workers collected
    return _Units(config, log)


if importlib.util.find_spec("xdist") is not None:  # a hook pytest only knows with xdist
    pytest_xdist_make_scheduler = _make_scheduler


#: the longest units (on 2 cores), started first; the rest follow in collection order
_FIRST = ("test_a_storm_of_50_failures", "prefect-shared-server", "test_events_sent_while",
          "test_a_server_restart_mid_run", "test_a_killed_run", "test_kb_match.py",
          "test_server_commands_and_diagnose", "test_later_commands_run_the_flow",
          "test_kb_embed_numpy.py", "test_a_warm_process_of_other_code",
          "test_diagnose_starts_the_server", "test_hostile_inputs.py", "test_kb_category.py")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, put the longest units first so that neither worker is left with
    a long one at the end; the order inside a module is kept.  Without xdist nothing
    changes."""
    if not hasattr(config, "workerinput"):
        return

    def rank(item) -> int:
        unit = _unit(item.nodeid)
        return next((i for i, key in enumerate(_FIRST) if key in unit), len(_FIRST))

    items.sort(key=rank)  # stable


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
