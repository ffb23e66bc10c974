"""Per-node parsing as a mapped task cached by file identity.  Each run picks what suits it:
the flow's threads for small or already-cached jobs; for larger ones the same tasks in the
flow's threads handing their scanning to a pool of plain scanner processes (``pool``); a
Prefect process pool or a Dask cluster when asked for (those two in a sub-flow, since a
Prefect flow has one task runner)."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

from prefect import flow
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner

from flows.settings import FlowSettings, SettingsError
from flows.tasks import (
    SCAN_POOL,
    cache_expiration,
    cached_locally,
    failed_scan,
    io_options,
    parse_node_file,
)
from l4.engine import PARALLEL_MIN_BYTES, default_workers
from l4.ingest import NodeFile
from l4.progress import reporter
from l4.scan import NodeScan

#: Uncached bytes from which ``auto`` scans in a pool of processes, as the engine does
#: (``l4.engine.PARALLEL_MIN_BYTES``).  Not Prefect's process pool: each of its workers
#: imports Prefect and l4, hydrates a flow context and talks to the API for every task run;
#: measured on the 1.8 GB, 96-file job that made parsing 3.5x slower than the engine (127 s
#: against 36.5 s) and cost ~450 MB more.  The scanner processes import only ``l4.scan``;
#: the task runs (cache, retries, states) stay in the flow's threads.
PROCESS_POOL_MIN_BYTES = PARALLEL_MIN_BYTES


class ParseOutcome:
    """Scans in the order of the files given, and how they were obtained.

    A plain class on purpose: Prefect walks dataclasses, lists and dicts returned by a flow
    looking for futures, and a scan of a 20 MB log holds lists of ~10^5 numbers."""

    __slots__ = ("scans", "cached", "parsed", "failed")

    def __init__(self, scans: list[NodeScan]):
        self.scans = scans
        self.cached = 0
        self.parsed = 0
        self.failed: list[str] = []


def _size(nf: NodeFile) -> int:
    try:
        return nf.path.stat().st_size
    except OSError:
        return 0


def runner_kind(settings: FlowSettings, files: list[NodeFile], workers: int | None = None) -> str:
    """``thread``, ``pool``, ``process`` or ``dask``: how to parse ``files`` (see
    ``flows.settings``)."""
    kind = settings.task_runner
    if kind != "auto":
        return kind
    n = max(1, workers or default_workers())
    if n <= 1 or len(files) <= 1:
        return "thread"
    todo = 0
    for nf in files:
        if not cached_locally(nf):
            todo += _size(nf)
            if todo >= PROCESS_POOL_MIN_BYTES:
                return "pool"
    return "thread"


def make_runner(kind: str, settings: FlowSettings, files: list[NodeFile],
                workers: int | None = None) -> TaskRunner:
    """The Prefect task runner for ``kind``."""
    n = max(1, workers or default_workers())
    if kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError as exc:  # pragma: no cover - prefect-dask is a dependency
            raise SettingsError("the Dask option needs prefect-dask: pip install prefect-dask") from exc
        if settings.dask_address:
            return DaskTaskRunner(address=settings.dask_address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": n, "threads_per_worker": 1})
    if kind == "process":
        return ProcessPoolTaskRunner(max_workers=min(n, max(1, len(files))))
    # threads: scanning holds the GIL, but reading and loading cached results overlap
    return ThreadPoolTaskRunner(max_workers=min(max(2, n), max(1, len(files))))


@contextlib.contextmanager
def scan_pool(n: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``n`` scanner processes that :func:`flows.tasks.parse_node_file` hands its
    scanning to while inside (forkserver, as ``l4.engine.scan_files``: the workers fork
    from a small server process, not from this one with Prefect loaded)."""
    pool = ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("forkserver"))
    SCAN_POOL[0] = pool
    try:
        yield pool
    finally:
        SCAN_POOL[0] = None
        pool.shutdown(wait=True, cancel_futures=True)


def _parse_mapped(files: list[NodeFile], settings: FlowSettings) -> ParseOutcome:
    """Submit one cached parse task per file to the current task runner and gather them; a
    file that fails for good becomes an ``error`` scan, the others carry on.  Largest files
    first (so that the last worker is not left with the biggest one), results in the order
    given."""
    out = ParseOutcome(scans=[])
    if not files:
        return out
    task = parse_node_file.with_options(
        **io_options(settings), cache_expiration=cache_expiration(settings)
    )
    progress = reporter()
    sizes = [_size(nf) for nf in files]
    progress.add_files(len(files), sum(sizes))
    order = sorted(range(len(files)), key=lambda i: -sizes[i])
    futures = dict(zip(order, task.map([files[i] for i in order]), strict=True))
    for i, nf in enumerate(files):
        fut = futures[i]
        fut.wait()
        progress.file_done(sizes[i])
        state = fut.state
        if state.is_completed():
            out.scans.append(fut.result())
            if state.name == "Cached":
                out.cached += 1
            else:
                out.parsed += 1
        else:
            out.scans.append(failed_scan(nf, fut.result(raise_on_failure=False)))
            out.failed.append(nf.rel)
    return out


@flow(name="parse-node-files", validate_parameters=False, persist_result=False)
def parse_node_files(files: list[NodeFile], settings: FlowSettings) -> ParseOutcome:
    """Parse node files on a task runner of their own (process pool or Dask cluster)."""
    return _parse_mapped(files, settings)


def parse_files(files: list[NodeFile], settings: FlowSettings,
                workers: int | None = None) -> ParseOutcome:
    """Parse ``files`` from inside a flow: in the flow's own thread pool when threads suit
    (no sub-flow to pay for), else in the :func:`parse_node_files` sub-flow on a process
    pool or Dask cluster."""
    kind = runner_kind(settings, files, workers)
    if kind == "thread":
        return _parse_mapped(files, settings)
    if kind == "pool":
        with scan_pool(min(max(1, workers or default_workers()), len(files))):
            return _parse_mapped(files, settings)
    runner = make_runner(kind, settings, files, workers)
    return parse_node_files.with_options(task_runner=runner)(files, settings)
