"""The ``learn-normal`` flow: a succeeded job's events enter the normal pool of its
configuration, so later failures of that configuration are compared against it.

Same steps as ``l4.pipeline.learn_normal`` (``l4 learn``), as tasks: discover -> parse each
node file (mapped, cached: the same cache the diagnosis uses) -> merge -> normal rows ->
store in the knowledge base.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.utilities.annotations import quote

from flows.diagnose import _opt, quiet_console, run_name
from flows.parsing import parse_files
from flows.settings import load_settings
from flows.tasks import discover_job, io_options, merge_one, rows_of, store_normal
from l4.pipeline import check_learnable


@flow(name="learn-normal", flow_run_name=run_name("learn"), persist_result=False)
def learn_normal(
    job: str,
    config_id: str | None = None,
    job_id: str | None = None,
    kb: str | None = None,
    templates: str | None = None,
    workers: int | None = None,
    dask_address: str | None = None,
) -> dict:
    """Add a successful job to the normal pool; returns {job_id, config_id, events}.

    Raises ``ValueError`` when job.json says the job did not succeed or no configuration id
    is known (pass ``config_id``): a pool must only ever learn healthy behaviour.
    """
    t0 = time.perf_counter()
    settings = load_settings()
    if _opt(dask_address):
        settings = replace(settings, dask_address=_opt(dask_address), task_runner="dask")
    io = io_options(settings)
    spec = discover_job.with_options(**io)(str(job), None, _opt(job_id))
    cfg = check_learnable(spec, _opt(config_id), hint="config_id")
    parsed = parse_files(list(spec.files), settings, workers)
    if parsed.failed:  # learned anyway, as l4.pipeline does; said so in the result
        get_run_logger().warning("unreadable node files: %s", ", ".join(parsed.failed))
    job_parsed = merge_one.with_options(**io)(quote(spec), quote(parsed.scans), _opt(templates))
    rows = rows_of(quote(job_parsed))
    n = store_normal.with_options(**io)(cfg, spec.job_id, quote(rows), _opt(kb))
    return {"job_id": spec.job_id, "config_id": cfg, "events": n,
            "unreadable": parsed.failed,
            "timing": {"total_s": round(time.perf_counter() - t0, 3),
                       "files_parsed": parsed.parsed, "files_cached": parsed.cached}}


def learn_normal_cli(job: Path, *, config_id: str | None = None, kb: Path | None = None,
                     templates: Path | None = None) -> dict:
    """``l4 learn`` through the flow (same result as ``l4.pipeline.learn_normal``)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}), quiet_console():
        return learn_normal(job=str(job), config_id=config_id,
                            kb=str(kb) if kb else None,
                            templates=str(templates) if templates else None)
