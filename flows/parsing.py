"""Per-node parsing as a mapped task cached by file identity.  Each run picks the task runner
that suits it: the flow's threads for small or already-cached jobs, a process pool for very
large ones, or a Dask cluster when one is configured (those two in a sub-flow, since a
Prefect flow has one task runner)."""

from __future__ import annotations

from prefect import flow
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner

from flows.settings import FlowSettings, SettingsError
from flows.tasks import (
    cache_expiration,
    cached_locally,
    failed_scan,
    io_options,
    parse_node_file,
)
from l4.engine import default_workers
from l4.ingest import NodeFile
from l4.progress import reporter
from l4.scan import NodeScan

#: Uncached bytes from which ``auto`` parses in a process pool.  Each Prefect process
#: worker imports Prefect and l4 and talks to the API on its own: measured on 2 cores,
#: 8 x 18 MB took 3.3 s in threads and 11 s in a process pool, so the pool only pays off
#: when parsing takes much longer than that start-up.
PROCESS_POOL_MIN_BYTES = 1 << 30


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
    """``thread``, ``process`` or ``dask``: how to parse ``files`` (see ``flows.settings``)."""
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
                return "process"
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


def _parse_mapped(files: list[NodeFile], settings: FlowSettings) -> ParseOutcome:
    """Submit one cached parse task per file to the current task runner and gather them; a
    file that fails for good becomes an ``error`` scan, the others carry on."""
    out = ParseOutcome(scans=[])
    if not files:
        return out
    task = parse_node_file.with_options(
        **io_options(settings), cache_expiration=cache_expiration(settings)
    )
    progress = reporter()
    progress.add_files(len(files), sum(_size(nf) for nf in files))
    futures = task.map(files)
    for nf, fut in zip(files, futures, strict=True):
        fut.wait()
        progress.file_done(_size(nf))
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
    runner = make_runner(kind, settings, files, workers)
    return parse_node_files.with_options(task_runner=runner)(files, settings)
