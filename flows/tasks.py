"""Prefect tasks over the l4 engine: each wraps one library function and adds what only an
orchestrator can give — caching by file identity, retries with backoff, per-step visibility.

The analysis is the engine's (``l4.engine``, ``l4.crossjob``, ``l4.spatial``, ...); nothing
here decides anything about a diagnosis.  ``l4 diagnose --no-prefect`` runs the same
functions inline (``l4.pipeline``) and must give the same report.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import os
import pickle
import zlib
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.serializers import Serializer
from prefect.utilities.annotations import quote
from pydantic import Field

from flows.settings import FlowSettings, retry_delays
from l4.chartdata import healthy_durations
from l4.crossjob import EventStat
from l4.engine import baseline_stats, baseline_timeline, parse_job
from l4.ingest import JobError, JobSpec, NodeFile, discover
from l4.merge import ParsedJob
from l4.phases import Timeline, pool_rows
from l4.scan import NodeScan, scan_node_file
from l4.steps import ANALYSIS, run_steps
from l4.templates import default_store_path, open_store

#: modules whose code decides what a scan contains; editing one invalidates cached scans
SCANNER_MODULES = ("l4.scan", "l4.mask", "l4.ingest", "l4.timeparse", "l4.gather")



class ScanSerializer(Serializer):
    """How cached scans are stored: pickle (a NodeScan holds numpy arrays) + zlib + base64.

    zlib level 1 keeps a scan several times smaller than raw pickle at a fraction of lzma's
    cost.  Not Prefect's ``CompressedSerializer``: task-run states record the serializer
    without its nested options, so listing those task runs from the API fails validation;
    this one has no options to lose (and unknown types are tolerated by other clients).
    """

    type: str = Field(default="l4-zpickle", frozen=True)

    def dumps(self, obj: Any) -> bytes:
        return base64.encodebytes(zlib.compress(pickle.dumps(obj, protocol=5), 1))

    def loads(self, blob: bytes) -> Any:
        return pickle.loads(zlib.decompress(base64.decodebytes(blob)))


SCAN_SERIALIZER = ScanSerializer()

#: the process pool that :func:`parse_node_file` hands its scanning to, when one is set
#: (``flows.parsing.scan_pool``); a one-element list so that the tasks' threads see it
SCAN_POOL: list = [None]

# ---------------------------------------------------------------------------------------
# errors and retry policy


class NodeReadError(Exception):
    """A node file could not be read at all; carries the engine's error scan so that a file
    that fails for good is reported exactly as the engine reports it."""

    def __init__(self, scan: NodeScan):
        super().__init__(scan.error or f"{scan.rel}: unreadable")
        self.scan = scan

    def __reduce__(self):  # picklable across process pools and Dask workers
        return (NodeReadError, (self.scan,))


class StoreError(Exception):
    """Writing to the knowledge base failed (retried; reported if it keeps failing)."""


def is_transient(exc: BaseException | None) -> bool:
    """Errors worth retrying: I/O (NFS hiccups, files still being copied), a locked KB."""
    if exc is None:
        return False
    if isinstance(exc, JobError):
        return False  # the directory itself is unusable: retrying cannot help
    if isinstance(exc, OSError | TimeoutError | NodeReadError | StoreError):
        return True
    return type(exc).__name__ == "KBError" and "locked" in str(exc)


def _state_exception(state: Any) -> BaseException | None:
    data = getattr(state, "data", None)
    if isinstance(data, BaseException):
        return data
    try:
        out = state.result(raise_on_failure=False)
    except Exception as exc:  # a result that cannot be loaded is itself the error
        return exc
    return out if isinstance(out, BaseException) else None


def retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry only errors that may go away by themselves."""
    return is_transient(_state_exception(state))


def io_options(settings: FlowSettings) -> dict:
    """Retry options of reading and storage tasks (exponential backoff with jitter)."""
    return {
        "retries": settings.retries,
        "retry_delay_seconds": retry_delays(settings) or 0,
        "retry_jitter_factor": 0.2,
    }


# ---------------------------------------------------------------------------------------
# the cache key of per-node parsing


@lru_cache(maxsize=1)
def scanner_fingerprint() -> str:
    """Hash of the scanner's source: a new l4 version that scans differently never reuses
    an old result, one that does not keeps the cache."""
    h = hashlib.sha256()
    for name in SCANNER_MODULES:
        mod = importlib.import_module(name)
        src = getattr(mod, "__file__", None)
        if src and os.path.exists(src):
            h.update(Path(src).read_bytes())
    return h.hexdigest()[:16]


def file_identity_key(nf: NodeFile) -> str | None:
    """Cache key of one node file: scanner version + real path + size + mtime (+ the node id
    and relative name, which end up in the scan).  None when the file cannot be stat'ed, so
    nothing is cached for it and the task reports the error."""
    try:
        st = os.stat(nf.path)
    except OSError:
        return None
    ident = "\0".join(
        [scanner_fingerprint(), os.path.realpath(nf.path), str(st.st_size),
         str(st.st_mtime_ns), nf.node, nf.rel, nf.origin, ",".join(nf.routed)]
    )
    return "l4-scan-" + hashlib.sha256(ident.encode("utf-8", "surrogateescape")).hexdigest()[:40]


def scan_cache_key(context: Any, parameters: dict[str, Any]) -> str | None:
    """Prefect ``cache_key_fn`` for :func:`parse_node_file`."""
    return file_identity_key(parameters["nf"])


def cached_locally(nf: NodeFile) -> bool:
    """Whether a reusable scan of ``nf`` is already in the local result store (used only to
    decide whether a process pool is worth starting; a wrong guess costs time, not results)."""
    key = file_identity_key(nf)
    if key is None:
        return False
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.results.default_storage_block:
        return False  # remote storage: cannot tell cheaply
    return (Path(settings.results.local_storage_path) / key).exists()


# ---------------------------------------------------------------------------------------
# reading


@task(name="discover node files", cache_policy=NO_CACHE, persist_result=False,
      retry_condition_fn=retry_if_transient)
def discover_job(job: str, config_id: str | None = None, job_id: str | None = None) -> JobSpec:
    """List a job's node files (``l4.ingest.discover``); ``config_id`` and ``job_id``
    override job.json (an emitter such as a Slurm epilog may know them better)."""
    spec = discover(job)
    if config_id:
        spec.config_id = config_id
    if job_id:
        spec.job_id = job_id
    return spec


@task(name="discover baseline", cache_policy=NO_CACHE, persist_result=False,
      retry_condition_fn=retry_if_transient)
def discover_baseline(job: str) -> tuple[JobSpec | None, str | None]:
    """A baseline that is not a usable job is skipped with a warning, as the engine does."""
    try:
        return discover(job), None
    except JobError as exc:
        return None, f"baseline skipped: {exc}"


def _parse_run_name() -> str:
    """``parse <job dir>/<file>``: node files of a job and of its baselines share names."""
    from prefect.runtime import task_run

    nf = task_run.parameters.get("nf")
    if nf is None:
        return "parse node file"
    root = Path(nf.path).parents[len(Path(nf.rel).parts) - 1]
    return f"parse {root.name}/{nf.rel}"


@task(name="parse node file", task_run_name=_parse_run_name, cache_key_fn=scan_cache_key,
      persist_result=True, result_serializer=SCAN_SERIALIZER,
      retry_condition_fn=retry_if_transient)
def parse_node_file(nf: NodeFile) -> NodeScan:
    """``l4.scan.scan_node_file``, cached by file identity.  A file that cannot be read at
    all raises (so it is retried, and never cached); bad *content* is a normal result.

    While a scan pool is set (``flows.parsing``: a large job), the scanning itself runs in
    one of its processes and this task run waits for it in a thread of the flow."""
    pool = SCAN_POOL[0]
    scan = pool.submit(scan_node_file, nf).result() if pool is not None else scan_node_file(nf)
    if scan.status == "error":
        raise NodeReadError(scan)
    return scan


def failed_scan(nf: NodeFile, exc: BaseException | None) -> NodeScan:
    """What the report shows for a node file that failed for good."""
    if isinstance(exc, NodeReadError):
        return exc.scan
    msg = f"{type(exc).__name__}: {exc}" if exc is not None else "parsing failed"
    scan = NodeScan(node=nf.node, rel=nf.rel, status="error", error=msg)
    scan.warnings.append(f"{nf.rel}: cannot read ({msg})")
    return scan


@task(name="load normal pool", cache_policy=NO_CACHE, persist_result=False,
      retry_condition_fn=retry_if_transient)
def load_pool(config_id: str | None, kb: str | None) -> list[dict] | None:
    """The stored normal pool of the configuration (same rows ``l4.pipeline`` loads)."""
    if not config_id:
        return None
    try:
        from l4.kbstore import load_normal_rows
    except ImportError:
        return None
    return load_normal_rows(config_id, kb=Path(kb) if kb else None) or None


# ---------------------------------------------------------------------------------------
# merging and analysis


@dataclass
class Merged:
    """The failed job over the shared template store, and what healthy jobs say about it."""

    failed: ParsedJob
    stats: dict[int, EventStat] | None
    baseline_jobs: list[str] = field(default_factory=list)
    pool_used: bool = False
    timeline: Timeline | None = None
    healthy: dict = field(default_factory=dict)  # healthy iteration durations (l4.chartdata)


def store_path(templates: str | None) -> Path:
    return Path(templates) if templates else default_store_path()


@task(name="merge", cache_policy=NO_CACHE, persist_result=False,
      retry_condition_fn=retry_if_transient)
def merge(spec: JobSpec, scans: list[NodeScan], base_specs: list[JobSpec],
          base_scans: list[list[NodeScan]], skipped: list[str], pool_rows: list[dict] | None,
          templates: str | None) -> Merged:
    """Merge scans through the locked template store; baseline statistics (as the engine)."""
    with open_store(store_path(templates)) as store:
        failed = parse_job(spec, scans, store)
        parsed_baselines = [parse_job(bs, sc, store)
                            for bs, sc in zip(base_specs, base_scans, strict=True)]
        stats, names, pool_used, warn = baseline_stats(failed, parsed_baselines, pool_rows, store)
        timeline = baseline_timeline(failed, parsed_baselines, pool_rows, store)
    failed.warnings.extend(skipped + warn)
    return Merged(failed=failed, stats=stats, baseline_jobs=names, pool_used=pool_used,
                  timeline=timeline,
                  healthy=healthy_durations(parsed_baselines))


@task(name="merge", cache_policy=NO_CACHE, persist_result=False,
      retry_condition_fn=retry_if_transient)
def merge_one(spec: JobSpec, scans: list[NodeScan], templates: str | None) -> ParsedJob:
    """A single job through the locked template store (learning what normal looks like)."""
    with open_store(store_path(templates)) as store:
        return parse_job(spec, scans, store)


#: one Prefect task per analysis step, from the one list both the engine and the flow run
#: (``l4.steps.ANALYSIS``); each task is a thin wrapper of the step's function
ANALYSIS_TASKS = {
    step.name: task(name=step.name, cache_policy=NO_CACHE, persist_result=False)(step.run)
    for step in ANALYSIS
}


def run_analysis(failed: ParsedJob, merged: Merged) -> dict:
    """The analysis steps as tasks of the running flow; returns the report."""
    def call(step, args):
        return ANALYSIS_TASKS[step.name](*[quote(a) for a in args])

    return run_steps({"failed": failed, "reference": merged}, call=call)["report"]


@task(name="normal rows", cache_policy=NO_CACHE, persist_result=False)
def rows_of(parsed: ParsedJob) -> list[dict]:
    return pool_rows(parsed)


# ---------------------------------------------------------------------------------------
# knowledge base


@task(name="root causes", cache_policy=NO_CACHE, persist_result=False)
def root_causes(rep: dict, kb: str | None) -> dict:
    """Fault-pattern matching (``l4.pipeline.attach_root_causes``; it degrades by itself)."""
    from l4.pipeline import attach_root_causes

    return attach_root_causes(rep, kb=Path(kb) if kb else None)


def _kb_installed() -> bool:
    try:
        importlib.import_module("l4.kbstore")
    except ImportError:
        return False
    return True


@task(name="store report", cache_policy=NO_CACHE, persist_result=False,
      retry_condition_fn=retry_if_transient)
def store_report(rep: dict, kb: str | None) -> dict:
    """Record the diagnosis in the KB (``l4.pipeline.record``) where ``l4 show`` finds it.

    ``record`` never raises; a failed write shows as a missing ``diagnosis_id``, which is
    turned into an error here so that Prefect retries it.  The flow keeps the report (with
    the warning) if the KB stays unwritable."""
    import copy

    from l4.pipeline import record

    attempt = copy.deepcopy(rep)
    out = record(attempt, kb=Path(kb) if kb else None)
    if "diagnosis_id" not in out and _kb_installed():
        new = out.get("warnings", [])[len(rep.get("warnings", [])):]
        raise StoreError("; ".join(new) or "diagnosis not recorded")
    return out


@task(name="store normal rows", cache_policy=NO_CACHE, persist_result=False,
      retry_condition_fn=retry_if_transient)
def store_normal(config_id: str, job_id: str, rows: list[dict], kb: str | None) -> int:
    from l4.kbstore import add_normal_job

    add_normal_job(config_id, job_id, rows, kb=Path(kb) if kb else None)
    return len(rows)


@task(name="publish artifacts", cache_policy=NO_CACHE, persist_result=False)
def publish(rep: dict) -> None:
    """Markdown summary and node-score table in the Prefect UI (never fails the run)."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from flows.artifacts import artifact_key, node_table, summary_markdown

    job = rep.get("job_id")
    create_markdown_artifact(
        summary_markdown(rep), key=artifact_key("l4-diagnosis", job),
        description=f"l4 diagnosis of {job}",
    )
    rows = node_table(rep)
    if rows:
        create_table_artifact(rows, key=artifact_key("l4-node-scores", job),
                              description=f"node scores of {job}, most suspicious first")


def cache_expiration(settings: FlowSettings) -> timedelta | None:
    return timedelta(days=settings.scan_cache_days) if settings.scan_cache_days else None
